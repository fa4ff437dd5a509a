"""The box only executes (issue 58): the path tools/device-run.sh takes on a GPU box (plan, execute, manifest,
archive) imports nothing of the rendering and sanitising side, which the box does not have. Every process of it,
the notebook's kernel included, runs with those modules blocked (a sys.meta_path finder in a sitecustomize that
raises ImportError and notes each attempt with the file that made it); the archive it packs is then rendered and
published elsewhere, by `publish merge`, on a machine that has them. A library's optional import that it does
without (jupytext's MyST reader tries markdown_it) is allowed; none of this project's code may try one."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tarfile
import textwrap
from pathlib import Path

import pytest
from conftest import ROOT, make_site

from sidebyside.publish import merge as merging

#: What the box lacks: the renderer (nbconvert), the sanitiser (nh3), Markdown (markdown-it and its plugins), CSS.
BLOCKED = ("nh3", "markdown_it", "mdit_py_plugins", "tinycss2", "nbconvert")
FIXTURES = ROOT / "tests" / "fixtures"
SLUG = "publisher-fixture"
COMMIT = "0123456789ab"

SITECUSTOMIZE = textwrap.dedent(f"""\
    import os, sys

    BLOCKED = {BLOCKED!r}


    class _NotOnTheBox:
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] in BLOCKED:
                frame = sys._getframe(1)
                while frame and (frame.f_code.co_filename.startswith("<") or frame.f_code.co_filename == __file__):
                    frame = frame.f_back
                with open(os.environ["BOX_BLOCKED_LOG"], "a") as log:
                    log.write(f"{{name}} {{frame.f_code.co_filename if frame else '?'}}\\n")
                raise ImportError(f"{{name}} is not on the GPU box")
            return None


    sys.meta_path.insert(0, _NotOnTheBox())
    """)


def _box_env(tmp_path: Path) -> dict[str, str]:
    """An environment whose every Python process (the kernel and its workers too) has BLOCKED blocked."""
    blocker = tmp_path / "blocker"
    blocker.mkdir()
    (blocker / "sitecustomize.py").write_text(SITECUSTOMIZE)
    log = tmp_path / "blocked.log"
    log.write_text("")
    env = {k: v for k, v in os.environ.items() if not k.startswith("SIDEBYSIDE_")}
    env.update(PYTHONPATH=os.pathsep.join([str(blocker), str(ROOT / "src")]), BOX_BLOCKED_LOG=str(log),
               SIDEBYSIDE_GIT_SHA=COMMIT)
    return env


def _attempted(tmp_path: Path, *, ours: bool = False) -> list[str]:
    """The blocked modules some process tried to import (``ours``: those this project's own code tried)."""
    lines = [line.split(" ", 1) for line in (tmp_path / "blocked.log").read_text().splitlines() if line.strip()]
    return sorted({name for name, where in lines if not ours or f"{os.sep}sidebyside{os.sep}" in where})


def test_the_blocker_blocks(tmp_path):
    proc = subprocess.run([sys.executable, "-c", "import nh3"], env=_box_env(tmp_path), capture_output=True, text=True)
    assert proc.returncode != 0 and "nh3 is not on the GPU box" in proc.stderr
    assert _attempted(tmp_path) == ["nh3"]


def test_the_boxs_planning_and_packing_import_nothing_of_the_renderer(tmp_path):
    """What device-run.sh runs besides the notebooks: the publisher's package, the planner (its call's slugs),
    the manifest, and the executor's module, with the rendering side blocked."""
    program = textwrap.dedent(f"""\
        import sys
        from pathlib import Path
        from sidebyside.publish import merge, schedule
        from sidebyside.publish.cli import main
        import sidebyside.publish.running, sidebyside.publish.guard, sidebyside.publish.site
        code = main(["plan", "--all", "--call", "1", "--site", {str(ROOT)!r}, "--notebooks", {str(ROOT / "notebooks")!r},
                     "--params", {str(ROOT / "params")!r}])
        assert code in (0, 2), code  # a plan, or a refusal that names what to cut
        merge.write_manifest(Path(sys.argv[1]) / "gpu-run.json", site=Path(sys.argv[1]), commit="{COMMIT}",
                             planned=["{SLUG}"], started="2026-11-24T21:00:00+00:00", devices={{}})
        print("loaded:", sorted(m for m in sys.modules if m.split(".")[0] in {BLOCKED!r}))
        """)
    proc = subprocess.run([sys.executable, "-c", program, str(tmp_path)], env=_box_env(tmp_path),
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "loaded: []" in proc.stdout
    assert _attempted(tmp_path, ours=True) == []


BOX = textwrap.dedent(f"""\
    import json, sys, tarfile
    from pathlib import Path

    from sidebyside.publish import merge
    from sidebyside.run import provenance

    # The CPU stands in for the GPU: the run's own record says cpu, and the gpu judge is told to let it pass.
    provenance.check_gpu_profile = lambda found, pins=None, driver_gpu=None: "a stand-in for the GPU"
    fixtures, box, out = (Path(a) for a in sys.argv[1:4])
    build = box / "build"
    merge.execute("{SLUG}", profile="gpu", site=box, build=build, notebooks=fixtures / "notebooks",
                  params_dir=fixtures / "params")
    manifest = merge.write_manifest(out / "gpu-run.json", site=box, build=build, commit="{COMMIT}",
                                    planned=["{SLUG}"], started=sys.argv[4], devices=provenance.devices(),
                                    call="call1")
    with tarfile.open(out / "gpu-run-call1.tgz", "w:gz") as tar:  # what device-run.sh packs
        tar.add(build / "executed", arcname="build/executed")
        tar.add(out / "gpu-run.json", arcname="gpu-run.json")
    print("executed:", manifest["executed"])
    print("loaded:", sorted(m for m in sys.modules if m.split(".")[0] in {BLOCKED!r}))
    """)


@pytest.mark.slow
def test_a_post_executed_with_the_renderer_blocked_is_published_elsewhere(tmp_path):
    """One post's gpu-profile run structure on the CPU (the publisher's fixture notebook, its gpu parameters):
    executed with the renderer blocked in every process, packed, then merged into another site, where it is
    rendered."""
    box, out = tmp_path / "box", tmp_path / "out"
    box.mkdir()
    out.mkdir()
    proc = subprocess.run([sys.executable, "-c", BOX, str(FIXTURES), str(box), str(out), "2026-01-01T00:00:00+00:00"],
                          env=_box_env(tmp_path), cwd=box, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert f"executed: ['{SLUG}']" in proc.stdout and "loaded: []" in proc.stdout
    assert _attempted(tmp_path, ours=True) == []
    assert set(_attempted(tmp_path)) <= {"markdown_it"}  # jupytext's optional MyST reader, which it does without
    assert not [p for p in box.rglob("*") if p.suffix == ".md"]  # nothing rendered on the box

    site = make_site(tmp_path / "site")
    merged = merging.merge([out / "gpu-run-call1.tgz"], site=site, notebooks=FIXTURES / "notebooks",
                           params_dir=FIXTURES / "params", build=tmp_path / "build")
    assert list(merged.published) == [SLUG] and merged.missing == {}
    posts = list((site / "_posts").glob(f"*-{SLUG}.md"))
    assert len(posts) == 1 and "Publisher fixture" in posts[0].read_text()
    record = json.loads((site / "_data" / "results" / f"{SLUG}.json").read_text())
    assert record["profile"] == "gpu" and record["provenance"]["git_sha"] == COMMIT
    assert record["parameters"]["num_points"] == 80  # the gpu parameters of the fixture
    assert any(p.suffix == ".png" for p in (site / "images" / SLUG).iterdir())
    with tarfile.open(out / "gpu-run-call1.tgz") as tar:
        assert not [n for n in tar.getnames() if n.split("/")[0] in ("_posts", "images", "_data")]
