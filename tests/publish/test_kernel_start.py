"""A kernel that exits before it answers (a port taken between its manager's pick and its own bind, papermill
issue 511) is started again, since no cell ran; one that never starts fails the run with its cause named."""

from __future__ import annotations

import json
import sys
import textwrap
from pathlib import Path

import pytest
from conftest import ROOT

from sidebyside import publish
from sidebyside.publish import running
from sidebyside.publish.common import PublishError

NOTEBOOK = "\n".join([
    "# ---", "# jupyter:", "#   kernelspec:", "#     display_name: Dies at start", "#     language: python",
    "#     name: dies-at-start", "#   sidebyside:", "#     slug: kernel-start", "#     title: Kernel start",
    "#     date: '2026-11-30'", "#     description: Its kernel dies at its first starts.", "#     compared: Nothing.",
    "#     metrics: [n]", "# ---", "",
    '# %% tags=["parameters"]', "n = 3", "",
    "# %%", "from sidebyside.run import provenance", "provenance.save_results({'n': n})", ""])


def _kernel_that_dies(tmp_path: Path, deaths: int) -> Path:
    """A kernelspec whose first ``deaths`` starts exit as a kernel that lost its port does, and whose later
    starts are ipykernel's; each start is counted in ``starts``."""
    launcher = tmp_path / "launcher.py"
    launcher.write_text(textwrap.dedent(f"""
        import os, sys
        starts = {str(tmp_path / "starts")!r}
        with open(starts, "a") as f:
            f.write("start\\n")
        if len(open(starts).read().splitlines()) <= {deaths}:
            sys.exit("zmq.error.ZMQError: Address already in use (a stand-in)")
        os.execv(sys.executable, [sys.executable, "-m", "ipykernel_launcher", *sys.argv[1:]])
    """))
    spec = tmp_path / "jupyter" / "kernels" / "dies-at-start"
    spec.mkdir(parents=True)
    (spec / "kernel.json").write_text(json.dumps({
        "argv": [sys.executable, str(launcher), "-f", "{connection_file}"],
        "display_name": "Dies at start", "language": "python"}))
    return tmp_path / "jupyter"


def _run(tmp_path: Path):
    path = tmp_path / "01_kernel_start.py"
    path.write_text(NOTEBOOK)
    info, nb = publish.read_notebook_info(path)
    return running.execute(info, nb, "smoke", {"n": 5}, tmp_path / "build", root=ROOT, progress=False)


@pytest.mark.slow  # starts kernels
def test_a_kernel_that_dies_at_start_is_started_again(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("JUPYTER_PATH", str(_kernel_that_dies(tmp_path, deaths=running.KERNEL_STARTS - 1)))
    monkeypatch.setenv("SIDEBYSIDE_SANDBOX_ALLOW", json.dumps({"write": [str(tmp_path)]}))  # its starts
    _, saved = _run(tmp_path)
    assert saved["metrics"] == {"n": 5}  # the run itself, whole, on the last start
    assert len((tmp_path / "starts").read_text().splitlines()) == running.KERNEL_STARTS
    said = capsys.readouterr().err
    assert f"starting a fresh kernel, {running.KERNEL_STARTS} of {running.KERNEL_STARTS}" in said, said


@pytest.mark.slow  # starts kernels
def test_a_kernel_that_never_starts_fails_the_run_saying_why(tmp_path, monkeypatch):
    monkeypatch.setenv("JUPYTER_PATH", str(_kernel_that_dies(tmp_path, deaths=running.KERNEL_STARTS)))
    monkeypatch.setenv("SIDEBYSIDE_SANDBOX_ALLOW", json.dumps({"write": [str(tmp_path)]}))  # its starts
    with pytest.raises(PublishError, match=f"died before it ran a cell, {running.KERNEL_STARTS} times") as failed:
        _run(tmp_path)
    assert "nothing published was changed" in str(failed.value)
    assert len((tmp_path / "starts").read_text().splitlines()) == running.KERNEL_STARTS  # and no more
    assert not (tmp_path / "build" / "results" / "kernel-start.json").exists()
