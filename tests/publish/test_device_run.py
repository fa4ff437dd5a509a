"""A dry run of tools/device-run.sh on the CPU, in a copy of the tree without git (as a GPU box has it): the
fixed plan's call, a stub executor in place of the notebooks, one clock for the call and its runs, one archive
of executed notebooks that records the commit and the stack, that archive rendered and published by
`publish merge`, and the parts of a call stopped between them kept."""

from __future__ import annotations

import datetime as dt
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tarfile
import textwrap
import time
from pathlib import Path

import pytest
import yaml

from sidebyside.publish import fixedplan, schedule
from sidebyside.publish import merge as merging
from sidebyside.publish.common import ROOT, PublishError
from sidebyside.publish.discovery import discover

COMMIT = "89abcdef0123456789abcdef0123456789abcdef"
#: The posts of the tree and the device seconds their budgets declare (smaller than the real ones).
BUDGETS = {"04_jit_autograd.py": 250, "01_fashion_mnist.py": 200, "05_xla_and_scipy.py": 150}


def _declare(tree: Path, name: str, seconds: int) -> None:
    """Give the tree's copy of notebook ``name`` a GPU budget of ``seconds`` in its settings file."""
    slug = re.search(r"^#     slug: (\S+)$", (tree / "notebooks" / name).read_text(), re.M).group(1)
    entry = {"budget_s": seconds, "measured": "test"}
    (tree / "params" / f"{slug}.yaml").write_text(yaml.safe_dump({"gpu_budget": entry}))


def _plan(tree: Path) -> Path:
    """The fixed plan of every GPU post of ``tree``, written there as the development machine writes it."""
    budgets = schedule.read_budgets(tree / "notebooks", tree / "params")
    order = [i.slug for i in discover(tree / "notebooks")]
    planned = schedule.plan_calls(budgets, {}, order, root=tree)
    document = fixedplan.plan_document(planned, root=tree, commit=COMMIT, made=dt.date(2026, 12, 2),
                                       calls_per_window=2)
    return fixedplan.write_plan(document, tree)


STUB = textwrap.dedent("""\
    import datetime as dt, hashlib, json, os, sys
    from pathlib import Path
    slug = sys.argv[1]
    executed = Path(f"build/executed/{slug}.ipynb")
    executed.parent.mkdir(parents=True, exist_ok=True)
    executed.write_text(json.dumps({"cells": [], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}))
    now = dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")
    record = {"slug": slug, "profile": "gpu", "executed_at": now, "source_hash": "stub", "metrics": {},
              "provenance": {"git_sha": os.environ["SIDEBYSIDE_GIT_SHA"][:12], "torch_device": "stub",
                             "jax_device": "stub"}}
    Path(f"build/executed/{slug}.run.json").write_text(json.dumps(
        {"record": record, "executed_sha256": hashlib.sha256(executed.read_bytes()).hexdigest()}))
    clock = {k: os.environ.get(k) for k in ("SIDEBYSIDE_CALL_START", "SIDEBYSIDE_CALL_DEADLINE_S")}
    Path(f"build/executed/{slug}.clock.json").write_text(json.dumps(clock))
    print(f"stub executed {slug}")
    """)


def _stub_render(notebook, record, info, config, root):
    """What merge renders from a stub's executed notebook: a GPU section and its figure."""
    from sidebyside.publish.gpu_section import END, START

    return f"{START}\nstub section\n{END}", {"gpu.figure.png": b"stub png"}


@pytest.fixture
def tree(tmp_path):
    """A tree like the repository's for the script, without .git: its tools and library, three notebooks with
    small GPU budgets, no gpu parameters, an empty site, and the fixed plan made from it."""
    tree = tmp_path / "tree"
    (tree / "tools").mkdir(parents=True)
    shutil.copy(ROOT / "tools" / "device-run.sh", tree / "tools" / "device-run.sh")
    shutil.copytree(ROOT / "src", tree / "src", ignore=shutil.ignore_patterns("__pycache__"))
    (tree / "notebooks").mkdir()
    (tree / "params").mkdir()
    for name, seconds in BUDGETS.items():
        shutil.copy(ROOT / "notebooks" / name, tree / "notebooks" / name)
        _declare(tree, name, seconds)
    (tree / "params" / "gpu-calls.yaml").write_text("call_overhead_s: 30\nrun_overhead_s: 0\n")
    for folder in ("_posts", "images", "_data/results"):
        (tree / folder).mkdir(parents=True)
    (tmp_path / "stub.py").write_text(STUB)
    _plan(tree)
    return tree


def _run(tree, out, **env):
    path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"  # python3: this interpreter's
    mine = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "SIDEBYSIDE_CALL_START", "DEADLINE_S")}
    full = {**mine, "PATH": path, "OUT": str(out), "SIDEBYSIDE_GIT_SHA": COMMIT,
            "STUB_EXECUTOR": f"{sys.executable} {tree.parent / 'stub.py'}", **env}
    return subprocess.run(["bash", str(tree / "tools" / "device-run.sh")], cwd=tree, env=full, capture_output=True,
                          text=True, timeout=240)


@pytest.mark.slow  # runs tools/device-run.sh and merges its archive (1.5 s)
def test_a_dry_run_runs_the_planned_call_and_packs_one_archive_that_merges(tree, tmp_path, monkeypatch):
    assert not (tree / ".git").exists()
    plan = json.loads(next((tree / "gpu-runs").glob("plan-*.json")).read_text())
    expected = [r["slug"] for r in plan["calls"][0]["runs"]]
    out = tmp_path / "out"
    started = int(time.time()) - 100  # the lent machine's command began 100 s before this script
    done = _run(tree, out, CALL="1", SIDEBYSIDE_CALL_START=str(started))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "(commit " in done.stdout and re.search(r"; 1\d\d s of DEADLINE_S=480 spent on set-up\)", done.stdout)
    archive = out / "gpu-run-call1.tgz"
    with tarfile.open(archive, "r:gz") as tar:
        names = tar.getnames()
        manifest = json.loads(tar.extractfile(merging.MANIFEST).read())
    assert manifest["commit"] == COMMIT and manifest["stub"] is True and manifest["call"] == "call1"
    assert set(manifest["stack"]) == set(merging.STACK_KEYS)
    assert manifest["planned"] == expected and manifest["executed"] == expected
    assert not [n for n in names if n.split("/")[0] in ("_posts", "images", "_data")]  # the box publishes nothing
    for slug in expected:
        assert f"build/executed/{slug}.ipynb" in names and f"build/executed/{slug}.run.json" in names
        # one clock: every run is told the call's start and deadline
        clock = json.loads((tree / "build" / "executed" / f"{slug}.clock.json").read_text())
        assert clock == {"SIDEBYSIDE_CALL_START": str(started), "SIDEBYSIDE_CALL_DEADLINE_S": "480"}
    assert sorted(line.split(":")[0] for line in (out / "timings.log").read_text().splitlines()) == sorted(expected)
    assert all(int(re.search(r"at (\d+) s of the call", line).group(1)) >= 100
               for line in (out / "timings.log").read_text().splitlines())

    site = tmp_path / "site"
    site.mkdir()
    monkeypatch.setattr(merging, "_render", _stub_render)
    with pytest.raises(PublishError, match="stub executor"):
        merging.merge([archive], site=site, notebooks=ROOT / "notebooks", build=tmp_path / "build")
    assert not (site / "_posts").exists()
    merged = merging.merge([archive], site=site, notebooks=ROOT / "notebooks", build=tmp_path / "build",
                           allow_stub=True)
    assert sorted(merged.published) == sorted(expected) and merged.missing == {}
    for slug in expected:
        assert (site / "images" / slug / "gpu.figure.png").read_bytes() == b"stub png"
        assert (tmp_path / "build" / "executed" / f"{slug}.gpu.run.json").is_file()


def test_a_call_past_its_deadline_starts_nothing(tree, tmp_path):
    out = tmp_path / "out"
    done = _run(tree, out, CALL="1", SIDEBYSIDE_CALL_START=str(int(time.time()) - 470))
    assert done.returncode == 4, done.stdout + done.stderr
    assert "not started" in (out / "timings.log").read_text()
    assert not (tree / "build" / "executed").exists()


def test_a_call_the_plan_does_not_have_packs_nothing(tree, tmp_path):
    out = tmp_path / "out"
    done = _run(tree, out, CALL="3")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "call 3: the plan holds no such call" in done.stdout
    assert not list(out.glob("*.tgz"))


def test_the_box_never_plans_and_refuses_a_plan_from_another_tree(tree, tmp_path):
    """A budget changed after the plan was made (the box's tree is not the plan's): nothing runs, and the box
    does not plan again; the plan's calls are what ran, not what a planner on the box would choose."""
    _declare(tree, "04_jit_autograd.py", 900)
    out = tmp_path / "out"
    done = _run(tree, out, CALL="1")
    assert done.returncode == 5
    assert "was made from another tree" in done.stderr and "plan --all --write" in done.stderr
    assert not list(out.glob("*.tgz")) and not (tree / "build" / "executed").exists()


PARTS_STUB = textwrap.dedent("""\
    import sys, time
    from sidebyside.run.checkpoints import BudgetSpent, Checkpoints
    parts = Checkpoints("checkpoints/" + sys.argv[1] + ".json", stamp={"s": 1}, commit="c")
    try:
        for name in ("part/a", "part/b", "part/c"):
            parts(name, lambda n=name: n.upper())
            if name == "part/a":
                print("saved part/a", flush=True)
                time.sleep(60)  # the call is stopped here, between its parts
    except BudgetSpent as stop:
        print(stop)
    """)


@pytest.mark.slow  # starts tools/device-run.sh twice and stops one (about 5 s)
def test_a_call_stopped_between_parts_returns_the_parts_it_finished_and_they_merge(tree, tmp_path):
    (tmp_path / "parts.py").write_text(PARTS_STUB)
    stub = f"{sys.executable} {tmp_path / 'parts.py'}"
    out = tmp_path / "out"
    full = {**{k: v for k, v in os.environ.items() if k not in ("SIDEBYSIDE_CALL_START", "DEADLINE_S")},
            "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}", "OUT": str(out),
            "SIDEBYSIDE_GIT_SHA": COMMIT, "STUB_EXECUTOR": stub, "PYTHONPATH": str(tree / "src")}
    call = subprocess.Popen(["bash", str(tree / "tools" / "device-run.sh"), "jit-and-autograd-timing"], cwd=tree,
                            env=full, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True)
    copied = out / "parts" / "jit-and-autograd-timing.json"
    for _ in range(300):
        if copied.is_file():
            break
        time.sleep(0.1)
    os.killpg(call.pid, signal.SIGKILL)  # the device's limit: the whole call ends at once
    call.wait(timeout=30)
    assert set(json.loads(copied.read_text())) == {"part/a"}
    site = tmp_path / "site"
    assert merging.merge_parts([out / "parts"], site=site) == ["jit-and-autograd-timing.json"]
    assert set(json.loads((site / "checkpoints" / "jit-and-autograd-timing.json").read_text())) == {"part/a"}
    # the next call reads part/a back and, told that part/c belongs to a later call, stops before it
    shutil.copy(site / "checkpoints" / "jit-and-autograd-timing.json", tree / "checkpoints")
    again = subprocess.run(["bash", "-c", f"cd {tree} && SIDEBYSIDE_PARTS_LATER='[\"part/c\"]' {stub} "
                            "jit-and-autograd-timing"], env={**full, "SIDEBYSIDE_PARTS_OUT": str(out / "parts")},
                           capture_output=True, text=True, timeout=120)
    assert "planned for a later call" in again.stdout, again.stdout + again.stderr
    assert set(json.loads(copied.read_text())) == {"part/a", "part/b"}


def test_a_parts_folder_that_holds_something_else_is_refused(tmp_path):
    (tmp_path / "parts").mkdir()
    (tmp_path / "parts" / "x.json").write_text(json.dumps({"p": {"seconds": 1}}))
    with pytest.raises(PublishError, match="not a checkpoint file a run wrote"):
        merging.merge_parts([tmp_path / "parts"], site=tmp_path / "site")
    assert not (tmp_path / "site").exists()
