"""The contracts between the parts: the run context (publisher -> notebook),
the results record, and the shape of the publisher package."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

from sidebyside import publish
from sidebyside.publish import running
from sidebyside.publish.discovery import read_header
from sidebyside.run import context, provenance

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src" / "sidebyside"
PACKAGE = SRC / "publish"


# --------------------------------------------------------------------------- the run context


def test_run_context_round_trips_through_the_environment(tmp_path):
    sent = context.RunContext(slug="grid-sample-parity", profile="gpu", results_dir=tmp_path / "results",
                              root=tmp_path, commit="0123456789ab", headless=True,
                              inputs={"notebook": "ab" * 32, "profile": "gpu", "params": {"n": [1, 2]}, "pins": {}})
    env = sent.env()
    assert set(env) == set(context.ENV.values())
    got = context.current(env)
    assert got == context.RunContext(slug="grid-sample-parity", profile="gpu",
                                     results_dir=(tmp_path / "results").resolve(), root=tmp_path.resolve(),
                                     commit="0123456789ab", headless=True, inputs=sent.inputs)
    assert got.results_path_dir() == (tmp_path / "results").resolve()


def test_no_context_is_a_notebook_run_by_hand():
    alone = context.current({})
    assert alone == context.RunContext()
    assert not alone.headless and alone.slug is None and alone.profile is None
    assert alone.project_root() == ROOT and alone.results_path_dir() == ROOT / "build" / "results"
    assert "SIDEBYSIDE_SLUG" not in context.RunContext(profile="cpu").env()  # None is not passed on


def test_environment_names_are_spelled_only_in_the_context_module():
    names = set(context.ENV.values())
    found = []
    for path in SRC.rglob("*.py"):
        if path.name == "context.py":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Constant) and node.value in names:
                found.append(f"{path.relative_to(SRC)}:{node.lineno}: {node.value}")
    assert not found, found


# --------------------------------------------------------------------------- save_results and the record


def _under(monkeypatch, run_context: context.RunContext) -> None:
    for name in context.ENV.values():
        monkeypatch.delenv(name, raising=False)
    for name, value in run_context.env().items():
        monkeypatch.setenv(name, value)


def test_save_results_takes_the_slug_from_the_publisher(tmp_path, monkeypatch):
    _under(monkeypatch, context.RunContext(slug="xla-and-scipy", profile="smoke", results_dir=tmp_path))
    record = provenance.save_results({"speed": 2.0}, provenance={"device": "x"})
    stored = json.loads((tmp_path / "xla-and-scipy.json").read_text())
    assert stored["slug"] == record["slug"] == "xla-and-scipy"
    assert stored["metrics"] == {"speed": 2.0} and list(tmp_path.iterdir()) == [tmp_path / "xla-and-scipy.json"]
    # The literal slug the notebooks pass today still works when it agrees ...
    assert provenance.save_results("xla-and-scipy", {"speed": 3.0}, provenance={"device": "x"})["metrics"] == {"speed": 3.0}
    # ... and is an error when it does not.
    with pytest.raises(ValueError, match="'other-slug'.*'xla-and-scipy'.*drop the slug argument"):
        provenance.save_results("other-slug", {"speed": 1.0}, provenance={"device": "x"})


def test_save_results_by_hand_writes_only_with_its_slug(tmp_path, monkeypatch):
    _under(monkeypatch, context.RunContext(results_dir=tmp_path))
    # Colab: no publisher, no slug: the record comes back (the last cell shows it), nothing is written.
    with pytest.warns(UserWarning, match="not run by the publisher"):
        record = provenance.save_results({"speed": 1.0}, provenance={"device": "x"})
    assert record["metrics"] == {"speed": 1.0} and record["slug"] is None and not list(tmp_path.iterdir())
    provenance.save_results("by-hand", {"speed": 1.0}, provenance={"device": "x"})
    assert json.loads((tmp_path / "by-hand.json").read_text())["slug"] == "by-hand"
    with pytest.raises(TypeError, match="needs the metrics"):
        provenance.save_results("by-hand")


def test_one_function_builds_the_results_record(tmp_path):
    saved = context.results_record(slug="s", provenance={"device": "x"}, metrics={"m": 1}, inputs={"modules": {}},
                                   code={"timed": [], "shown": []})
    assert list(saved) == ["slug", "inputs", "provenance", "code", "metrics"]  # no run facts the publisher did not give
    info = publish.NotebookInfo(tmp_path / "01_s.py", "s", "S", "2026-11-22", "d")
    full = running.complete_record(saved, info, "cpu", {"n": 1}, "k" * 64, tmp_path)
    assert tuple(full) == context.RECORD_FIELDS
    assert full["notebook"] == "01_s.py" and full["profile"] == "cpu" and full["source_hash"] == "k" * 64
    assert full["parameters"] == {"n": 1} and full["metrics"] == {"m": 1} and full["executed_at"].endswith("+00:00")


# --------------------------------------------------------------------------- the publisher package


def _modules() -> list[str]:
    return sorted(f"sidebyside.publish.{p.stem}" for p in PACKAGE.glob("*.py")
                  if p.stem not in ("__init__", "__main__"))


def test_publisher_modules_import_neither_torch_nor_jax_nor_the_notebook_tools():
    code = ("import importlib, sys\n"
            f"for name in {_modules()!r}: importlib.import_module(name)\n"
            "import sidebyside.publish, sidebyside.run.runkey, sidebyside.run.context\n"
            "from pathlib import Path\n"
            f"sidebyside.publish.discover(Path({str(ROOT / 'notebooks')!r}))\n"
            "heavy = ('torch', 'jax', 'jaxlib', 'flax', 'jupytext', 'nbconvert', 'papermill')\n"
            "print(sorted({m.split('.')[0] for m in sys.modules} & set(heavy)))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120)
    assert out.stdout.strip() == "[]", out.stdout + out.stderr


def test_publisher_package_has_no_import_cycle():
    graph: dict[str, set[str]] = {}
    for path in PACKAGE.glob("*.py"):
        here = f"sidebyside.publish.{path.stem}" if path.stem != "__init__" else "sidebyside.publish"
        edges = set()
        for node in ast.parse(path.read_text()).body:  # top level: what runs at import time
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("sidebyside.publish"):
                targets = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
                edges |= {t for t in targets if t != "sidebyside.publish" or here == "sidebyside.publish.__main__"}
        graph[here] = {e for e in edges if e in {f"sidebyside.publish.{p.stem}" for p in PACKAGE.glob("*.py")}}

    def visit(node, stack):
        assert node not in stack, f"import cycle: {' -> '.join([*stack, node])}"
        for nxt in graph.get(node, ()):
            visit(nxt, [*stack, node])

    for module in graph:
        visit(module, [])


def test_header_reader_agrees_with_jupytext():
    jupytext = pytest.importorskip("jupytext")
    paths = sorted((ROOT / "notebooks").glob("*.py")) + sorted((ROOT / "tests" / "fixtures").rglob("*.py"))
    paths += sorted((ROOT / "notebooks").glob("*.ipynb"))
    assert paths
    for path in paths:
        metadata, cells = read_header(path)
        nb = jupytext.read(path)
        for key in ("sidebyside", "kernelspec"):
            assert metadata.get(key) == nb.metadata.get(key), (path, key)
        ours = [(c["cell_type"], c["metadata"].get("tags"), c["source"]) for c in cells if c["cell_type"] == "code"]
        theirs = [(c.cell_type, c.metadata.get("tags"), c.source) for c in nb.cells if c.cell_type == "code"]
        assert ours == theirs, path


def test_the_face_keeps_the_names_the_makefile_and_tests_use():
    for name in ("run", "rerender", "main", "discover", "read_notebook_info", "load_params", "cache_key", "plan",
                 "freshness", "render", "publish", "recover", "PublishError", "PROFILES", "detect_profile"):
        assert name in publish.__all__ and getattr(publish, name)
    out = subprocess.run([sys.executable, "-m", "sidebyside.publish", "--help"], capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 0 and "check-pairs" in out.stdout


@pytest.mark.slow  # executes a notebook through papermill
def test_a_real_run_saves_under_the_slug_of_its_header(tmp_path):
    """A notebook that calls ``save_results(metrics)`` with no slug, run by the
    publisher: the record carries the slug of the notebook's header."""
    path = tmp_path / "01_no_slug.py"
    path.write_text("\n".join([
        "# ---", "# jupyter:", "#   kernelspec:", "#     display_name: Python 3", "#     language: python",
        "#     name: python3", "#   sidebyside:", "#     slug: header-slug", "#     title: No slug", "#     date: '2026-11-22'",
        "#     description: Its save_results names no slug.", "#     compared: Nothing.", "#     metrics: [n]", "# ---", "",
        '# %% tags=["parameters"]', "n = 3", "",
        "# %%", "from sidebyside.run import provenance", "provenance.save_results({'n': n})", ""]))
    info, nb = publish.read_notebook_info(path)
    executed, saved = publish.execute(info, nb, "smoke", {"n": 5}, tmp_path / "build", root=ROOT, progress=False)
    assert saved["slug"] == "header-slug" and saved["metrics"] == {"n": 5}
    assert (tmp_path / "build" / "results" / "header-slug.json").is_file() and executed.is_file()
