"""A dry run of tools/device-run.sh on the CPU: the planner's call, a stub
publisher in place of the notebooks, one archive that records the commit and
the stack, and that archive merged by `publish merge`."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import textwrap
from pathlib import Path

import pytest

from sidebyside.publish import merge as merging
from sidebyside.publish import schedule
from sidebyside.publish.common import ROOT, PublishError
from sidebyside.publish.discovery import discover

COMMIT = "89abcdef0123456789abcdef0123456789abcdef"
#: The posts of the tree and the device seconds their headers declare (smaller than the real ones).
BUDGETS = {"04_jit_autograd.py": 250, "01_fashion_mnist.py": 200, "05_xla_and_scipy.py": 150}
GPU_ENTRY = re.compile(r"^#     gpu:.*\n(?:#       .*\n)*", re.M)  # the header's gpu entry, one line or a block


def _declare(tree: Path, name: str, seconds: int) -> None:
    """Give the tree's copy of notebook ``name`` a gpu budget of ``seconds``."""
    path = tree / "notebooks" / name
    text, found = GPU_ENTRY.subn(f'#     gpu: {{budget_s: {seconds}, measured: "test"}}\n', path.read_text(), count=1)
    assert found == 1, f"{name}: its header has no gpu entry to replace"
    path.write_text(text)


STUB = textwrap.dedent("""\
    import datetime as dt, json, os, sys
    from pathlib import Path
    from sidebyside.publish.discovery import discover
    slug = sys.argv[1]
    info = next(i for i in discover(Path("notebooks")) if i.slug == slug)
    Path(f"_posts/{info.date}-{slug}.md").write_text(f"---\\ntitle: {slug}\\n---\\nstub post\\n")
    Path(f"images/{slug}").mkdir(exist_ok=True)
    Path(f"images/{slug}/figure.png").write_bytes(b"stub png")
    now = dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")
    Path(f"_data/results/{slug}.json").write_text(json.dumps({
        "slug": slug, "profile": "gpu", "executed_at": now, "source_hash": "stub", "metrics": {},
        "provenance": {"git_sha": os.environ["SIDEBYSIDE_GIT_SHA"][:12], "torch_device": "stub",
                       "jax_device": "stub"}}))
    print(f"stub published {slug}")
    """)


@pytest.fixture
def tree(tmp_path):
    """A tree like the repository's for the script: its tools and library, three notebooks with small gpu
    budgets, no gpu parameters, and an empty site."""
    tree = tmp_path / "tree"
    (tree / "tools").mkdir(parents=True)
    shutil.copy(ROOT / "tools" / "device-run.sh", tree / "tools" / "device-run.sh")
    (tree / "src").symlink_to(ROOT / "src")
    (tree / "notebooks").mkdir()
    for name, seconds in BUDGETS.items():
        shutil.copy(ROOT / "notebooks" / name, tree / "notebooks" / name)
        _declare(tree, name, seconds)
    (tree / "params").mkdir()
    (tree / "params" / "gpu.yaml").write_text("# no parameters: the stub publisher runs no notebook\n")
    (tree / "params" / "gpu-calls.yaml").write_text("call_overhead_s: 30\nrun_overhead_s: 0\n")
    for folder in ("_posts", "images", "_data/results"):
        (tree / folder).mkdir(parents=True)
    (tmp_path / "stub.py").write_text(STUB)
    return tree


def _run(tree, out, **env):
    path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"  # python3: this interpreter's
    full = {**os.environ, "PATH": path, "OUT": str(out), "SIDEBYSIDE_GIT_SHA": COMMIT,
            "STUB_PUBLISHER": f"{sys.executable} {tree.parent / 'stub.py'}", **env}
    full.pop("PYTHONPATH", None)
    return subprocess.run(["bash", str(tree / "tools" / "device-run.sh")], cwd=tree, env=full, capture_output=True,
                          text=True, timeout=240)


def test_a_dry_run_runs_the_planned_call_and_packs_one_archive_that_merges(tree, tmp_path):
    budgets = schedule.read_budgets(tree / "notebooks", tree / "params")
    order = [i.slug for i in discover(tree / "notebooks")]
    expected = schedule.plan_calls(budgets, {}, order).calls[0].slugs
    out = tmp_path / "out"
    done = _run(tree, out, CALL="1")
    assert done.returncode == 0, done.stdout + done.stderr
    archive = out / "gpu-run-call1.tgz"
    with tarfile.open(archive, "r:gz") as tar:
        names = tar.getnames()
        manifest = json.loads(tar.extractfile(merging.MANIFEST).read())
    assert manifest["commit"] == COMMIT and manifest["stub"] is True and manifest["call"] == "call1"
    assert set(manifest["stack"]) == set(merging.STACK_KEYS)
    assert manifest["planned"] == expected and manifest["published"] == expected
    for slug in expected:
        assert f"_data/results/{slug}.json" in names and f"images/{slug}/figure.png" in names
    assert sorted(line.split(":")[0] for line in (out / "timings.log").read_text().splitlines()) == sorted(expected)

    site = tmp_path / "site"
    site.mkdir()
    with pytest.raises(PublishError, match="stub publisher"):
        merging.merge([archive], site=site, notebooks=ROOT / "notebooks")
    assert not (site / "_posts").exists()
    merged = merging.merge([archive], site=site, notebooks=ROOT / "notebooks", allow_stub=True)
    assert sorted(merged.published) == sorted(expected) and merged.missing == {}


def test_a_call_the_plan_does_not_have_packs_nothing(tree, tmp_path):
    out = tmp_path / "out"
    done = _run(tree, out, CALL="3")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "call 3: nothing planned" in done.stdout
    assert not list(out.glob("*.tgz"))


def test_a_plan_that_cannot_fit_runs_nothing(tree, tmp_path):
    _declare(tree, "04_jit_autograd.py", 900)
    out = tmp_path / "out"
    done = _run(tree, out, CALL="1")
    assert done.returncode == 5
    assert "jit-and-autograd-timing: one run takes 900 s" in done.stderr
    assert not list(out.glob("*.tgz")) and not list((tree / "_data" / "results").iterdir())
