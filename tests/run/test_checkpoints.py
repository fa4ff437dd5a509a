"""A run in parts (sidebyside.run.checkpoints.Checkpoints): parts saved as they finish, read back only while their
inputs are the same (also across commits), a budget that stops a run before a part that would not
fit, and the sentence that tells the reader which commit measured what."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import types

import pytest

from sidebyside.lab import training
from sidebyside.run import checkpoints, context, runkey
from sidebyside.run.checkpoints import Checkpoints

History = training.History  # imported before any Checkpoints is made: the modules a part's key counts stay the same


class _Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


def test_checkpoints_save_each_part_and_read_it_back(tmp_path):
    path = tmp_path / "parts.json"
    calls = []

    def part(n, *, scale=1):
        calls.append(n)
        return {"value": n * scale}

    first = Checkpoints(path, stamp={"device": "H100"}, commit="aaa")
    assert first("speed/a", part, 2) == {"value": 2} and first.log["speed/a"]["measured"] == "this run"
    again = Checkpoints(path, stamp={"device": "H100"}, commit="aaa")
    assert again("speed/a", part, 2) == {"value": 2} and calls == [2]
    assert again.log["speed/a"] == {"measured": "earlier run", "seconds": first.log["speed/a"]["seconds"],
                                    "commit": "aaa"}
    assert again("speed/a", part, 2, scale=3) == {"value": 6} and calls == [2, 2]  # other arguments: measured
    other = Checkpoints(path, stamp={"device": "H200"}, commit="aaa")
    other("speed/a", part, 2, scale=3)
    assert calls == [2, 2, 2]  # another machine: measured again
    history = Checkpoints(path)("accuracy/torch/0", lambda: History("torch", "eager", test_accuracy=[0.5]))
    back = Checkpoints(path)("accuracy/torch/0", lambda: None, decode=lambda h: History(**h))
    assert back == history
    off = Checkpoints("")
    off("speed/a", part, 2)
    off("speed/a", part, 2)
    assert calls == [2, 2, 2, 2, 2]  # off: always measured


def test_checkpoints_stop_before_a_part_that_would_not_fit(tmp_path):
    clock = _Clock()
    parts = Checkpoints(tmp_path / "parts.json", budget_s=100, clock=clock)

    def slow(seconds):
        clock.now += seconds
        return seconds

    parts("speed/train/float32/32", slow, 40)  # nothing alike known: it starts
    assert parts.predicted_s("speed/train/float32/64") == 40  # its kind
    assert parts.predicted_s("speed/train/bfloat16/32") == 40  # its kind's kind
    assert parts.predicted_s("speed/eval/float32/32") == 0  # nothing alike
    parts("speed/eval/float32/32", slow, 30)  # 70 s have passed
    with pytest.raises(checkpoints.BudgetSpent, match="2 parts were measured in this run.*Run the same command again"):
        parts("speed/train/float32/64", slow, 40)  # 70 + 40 > 100
    resumed = Checkpoints(tmp_path / "parts.json", budget_s=100, clock=clock)
    assert resumed("speed/train/float32/32", slow, 40) == 40 and resumed("speed/train/float32/64", slow, 40) == 40
    assert resumed.log["speed/train/float32/32"]["measured"] == "earlier run"


DEMO = """# ---
# jupyter:
#   sidebyside:
#     slug: demo
#     gpu: {budget_s: 100, measured: "an estimate"}
# ---

# %% [markdown]
# # A demo
#
# Prose that a reader sees.

# %% tags=["parameters"]
steps = 1

# %% tags=["appendix"]
x = steps * 2
"""
PROVENANCE = {"device": "NVIDIA H100 80GB HBM3", "device_kind": "gpu", "torch": "2.11.0", "jax": "0.11.2",
              "cpu": "Intel(R) Xeon(R) Platinum 8480+ (16 cores)", "git_sha": "aaa", "machine": None}


@pytest.fixture
def project(tmp_path, monkeypatch):
    """A checkout with one notebook (slug "demo"), gpu parameters for it and another, and pins; the
    run context of a publisher's gpu run of "demo"; one library module and one data file of its own."""
    root = tmp_path / "site"
    (root / "notebooks").mkdir(parents=True)
    (root / "params").mkdir()
    (root / "notebooks" / "07_demo.py").write_text(DEMO)
    (root / "notebooks" / "08_other.py").write_text("# ---\n# jupyter:\n#   sidebyside:\n#     slug: other\n# ---\n")
    (root / "params" / "demo.yaml").write_text("gpu: {steps: 5, run_budget_s: 400}\n")
    (root / "params" / "other.yaml").write_text("gpu: {steps: 7}\n")
    (root / "requirements.txt").write_text("numpy==2.0.0\n")
    module_file = root / "probe_module.py"
    module_file.write_text("A = 1\n")
    probe = types.ModuleType("sidebyside._probe_for_checkpoints")
    probe.__file__ = str(module_file)
    monkeypatch.setitem(sys.modules, probe.__name__, probe)
    data_file = root / "data.bin"
    data_file.write_bytes(b"\x00" * 16)
    monkeypatch.setattr(runkey, "_noted", [data_file.resolve()])
    for field, value in (("slug", "demo"), ("profile", "gpu"), ("root", str(root))):
        monkeypatch.setenv(context.ENV[field], value)
    return root


def _declare(monkeypatch, root):
    """What the publisher hands a run of ``demo`` under the gpu profile: its declared inputs."""
    import yaml

    params = yaml.safe_load((root / "params" / "demo.yaml").read_text())["gpu"]
    declared = runkey.declared_inputs(root / "notebooks" / "07_demo.py", "gpu", params, root)
    monkeypatch.setenv(context.ENV["inputs"], json.dumps(declared))


def _measured_again(path, commit="bbb", monkeypatch=None, root=None, provenance=None):
    """Whether a new run (at ``commit``, its record ``provenance``) measures the part again instead of
    reading it back."""
    if monkeypatch is not None:
        _declare(monkeypatch, root)
    calls = []
    stamp = {"provenance": PROVENANCE if provenance is None else provenance}
    Checkpoints(path, stamp=stamp, commit=commit)("parity", lambda: calls.append(1) or 1.0)
    return bool(calls)


def _edit(path, old, new):
    text = path.read_text()
    assert old in text, old
    path.write_text(text.replace(old, new))


def test_a_part_is_read_back_across_commits_exactly_while_its_inputs_are_unchanged(project, tmp_path, monkeypatch):
    import importlib.metadata

    import numpy  # noqa: F401  (an imported package that the pins name: part of the stack)

    path = tmp_path / "parts.json"
    notebook, params, other = (project / "notebooks" / "07_demo.py", project / "params" / "demo.yaml",
                               project / "params" / "other.yaml")
    _declare(monkeypatch, project)
    assert _measured_again(path, commit="aaa")  # the first run
    assert not _measured_again(path, commit="bbb")  # a later commit that changed none of its inputs
    log = Checkpoints(path, stamp={"provenance": PROVENANCE}, commit="ccc")
    log("parity", lambda: 0.0)
    assert log.log["parity"]["commit"] == "aaa"
    assert "commit `aaa`" in checkpoints.describe_parts(log.log)
    # What does not change the measurement keeps the part: another notebook's parameters, the notebook's
    # prose, its layout tags and its header's gpu budget, a parameter that only steers the run, a pin of a
    # package the run did not import, and the host's CPU model, commit and quiet-machine check.
    for keep in (lambda: other.write_text("gpu: {steps: 70}\n"),
                 lambda: _edit(notebook, "Prose that a reader sees.", "Prose, reworded."),
                 lambda: _edit(notebook, 'tags=["appendix"]', 'tags=["appendix", "collapsed"] summary="x"'),
                 lambda: _edit(notebook, "budget_s: 100", "budget_s: 380"),
                 lambda: params.write_text("gpu: {steps: 5, run_budget_s: 200}\n"),
                 lambda: (project / "requirements.txt").write_text("numpy==2.0.0\nnever-imported-here==0.3.8\n")):
        keep()
        assert not _measured_again(path, monkeypatch=monkeypatch, root=project), keep
    elsewhere = {**PROVENANCE, "cpu": "AMD EPYC 9654 96-Core Processor (16 cores)", "git_sha": "fff",
                 "machine": {"findings": ["busy"]}}
    assert not _measured_again(path, provenance=elsewhere)  # another H100 host resumes the parts
    # What changes the measurement measures again: the code, a measured parameter, an imported library
    # module, a data file read, the stack, the GPU model.
    real_version = importlib.metadata.version
    for change in (lambda: _edit(notebook, "x = steps * 2", "x = steps * 3"),
                   lambda: params.write_text("gpu: {steps: 6, run_budget_s: 200}\n"),
                   lambda: (project / "probe_module.py").write_text("A = 100\n"),  # an imported library module
                   lambda: (project / "data.bin").write_bytes(b"\x01" * 17),  # a data file the run read
                   lambda: monkeypatch.setattr(importlib.metadata, "version",
                                               lambda d: "2.0.1" if d == "numpy" else real_version(d))):
        change()
        assert _measured_again(path, monkeypatch=monkeypatch, root=project), change
        assert not _measured_again(path, monkeypatch=monkeypatch, root=project)
    h200 = {**PROVENANCE, "device": "NVIDIA H200"}
    assert _measured_again(path, provenance=h200)  # an H100's parts are not an H200's
    assert _measured_again(path, provenance=PROVENANCE)  # nor the other way round


def test_one_clock_the_budget_counts_from_the_calls_start(tmp_path, monkeypatch):
    """A device call passes its start (seconds since the epoch) and its deadline: a run made 100 s into the
    call has 100 s of its budget spent, and no part starts that would end past the call's deadline."""
    import time

    for name in (checkpoints.CALL_START_ENV, checkpoints.CALL_DEADLINE_ENV, checkpoints.ESTIMATES_ENV):
        monkeypatch.delenv(name, raising=False)
    clock = _Clock()
    fresh = Checkpoints(tmp_path / "a.json", budget_s=120, clock=clock, estimates={"bench/*": 30})
    assert fresh.budget_s == 120 and clock() - fresh.start == 0  # no call: its own clock
    monkeypatch.setenv(checkpoints.CALL_START_ENV, str(time.time() - 100))
    late = Checkpoints(tmp_path / "b.json", budget_s=120, clock=clock, estimates={"bench/*": 30})
    assert 99 <= clock() - late.start <= 102
    with pytest.raises(checkpoints.BudgetSpent, match=r"120 s from its start.*'bench/x'.*30 s"):
        late("bench/x", lambda: 1)
    monkeypatch.setenv(checkpoints.CALL_DEADLINE_ENV, "110")  # the call's deadline comes before the run's budget
    assert Checkpoints(tmp_path / "c.json", budget_s=400, clock=clock).budget_s == 110
    assert Checkpoints(tmp_path / "c.json", clock=clock).budget_s == 110  # a run with no budget of its own
    monkeypatch.setenv(checkpoints.CALL_START_ENV, str(time.time()))
    assert Checkpoints(tmp_path / "d.json", budget_s=120, clock=clock, estimates={"bench/*": 30})(
        "bench/x", lambda: 7) == 7


def test_a_part_nothing_alike_was_measured_is_predicted_by_the_headers_estimate(tmp_path, monkeypatch):
    monkeypatch.setenv(checkpoints.ESTIMATES_ENV, json.dumps({"parity": 70, "ladder/*": 200,
                                                              "ladder/gpt2/*": 320, "unknown/*": None}))
    parts = Checkpoints(tmp_path / "p.json")
    assert parts.predicted_s("parity") == 70
    assert parts.predicted_s("ladder/resnet50/train/32") == 200
    assert parts.predicted_s("ladder/gpt2/generate/8") == 320  # the longest kind that names it
    assert parts.predicted_s("unknown/a") == 0 and parts.predicted_s("other") == 0  # nothing estimated
    parts.saved["ladder/gpt2/generate/1"] = {"key": "k", "seconds": 250.0}
    assert parts.predicted_s("ladder/gpt2/generate/8") == 250  # a measured sibling comes first


def test_a_run_without_a_run_context_resumes_only_at_its_own_commit(tmp_path, monkeypatch):
    monkeypatch.delenv(context.ENV["inputs"], raising=False)
    path = tmp_path / "parts.json"
    assert _measured_again(path, commit="aaa")
    assert not _measured_again(path, commit="aaa")
    assert _measured_again(path, commit="bbb")


def test_describe_says_which_run_measured_what():
    assert checkpoints.describe_parts({}) == ""
    assert checkpoints.describe_parts({"a": {"measured": "this run", "seconds": 1.0, "commit": "x"}}) == \
        "This run measured all of its parts itself."
    text = checkpoints.describe_parts({"a": {"measured": "earlier run", "seconds": 1.0, "commit": "x"},
                                 "b": {"measured": "this run", "seconds": 1.0, "commit": "y"}})
    assert "1 of its 2 parts were read back" in text and "1 at commit `x`; 1 at commit `y`" in text


def test_a_damaged_checkpoint_file_says_what_to_do(tmp_path):
    path = tmp_path / "parts.json"
    path.write_text('{"parity": {"key"')  # cut short
    with pytest.raises(ValueError, match="move it away to measure every part again"):
        Checkpoints(path)


def test_a_part_given_a_function_is_read_back_in_another_process(tmp_path):
    """A function among a part's arguments (swin's rungs) keys by its name, not by its address, which
    differs in every process: the part is read back by the next run."""
    script = (
        "import sys\n"
        "from sidebyside.run.checkpoints import Checkpoints\n"
        "def rung(x):\n    return x + 1\n"
        "parts = Checkpoints(sys.argv[1], stamp={'s': 1}, commit='c')\n"
        "calls = []\n"
        "parts('speed/a', lambda f: calls.append(1) or f(1), f=rung)\n"
        "print(len(calls))\n")
    runs = [subprocess.run([sys.executable, "-c", script, str(tmp_path / "c.json")], capture_output=True, text=True,
                           check=True, env={**os.environ, "SIDEBYSIDE_INPUTS": "{}"}).stdout.split()[-1]
            for _ in range(2)]
    assert runs == ["1", "0"]  # measured once, then read back
