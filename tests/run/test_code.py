"""What a run timed and what it showed (sidebyside.run.code), and the publisher's two checks on
paired cells (sidebyside.publish.pairs.code_problems and timed_problems)."""

from __future__ import annotations

import functools
import linecache

import pytest

from sidebyside.publish import pairs
from sidebyside.run import code


@pytest.fixture(autouse=True)
def fresh():
    code.clear()
    yield
    code.clear()


def _cell(source: str, filename: str = "<ipykernel cell 7>", namespace: dict | None = None) -> dict:
    """Run ``source`` as a kernel runs a cell: compiled under a made-up name that linecache knows."""
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    namespace = {} if namespace is None else namespace
    exec(compile(source, filename, "exec"), namespace)
    return namespace


STEP = "def step(x):\n    return x * 2\n"


def test_origin_follows_wrappers_to_the_cell_that_defines_the_function():
    import jax
    import torch

    step = _cell(STEP)["step"]
    expected = {"function": "step", "where": code.cell_id(STEP), "line": 1}
    for wrapped in (step, functools.partial(step, 1), jax.jit(step), torch.compile(step)):
        assert code.origin(wrapped) == expected
    module = torch.nn.Linear(2, 2)
    assert code.origin(torch.compile(module))["function"] == "Linear.forward"
    assert code.origin(module)["where"].endswith("torch/nn/modules/linear.py")


def test_library_functions_are_named_by_their_path_in_the_checkout():
    from sidebyside.lab import training

    assert code.origin(training.torch_rung)["where"] == "src/sidebyside/lab/training/rungs.py"


def test_the_harness_notes_every_contestant_and_the_record_carries_them():
    from sidebyside.lab import timing

    step = _cell(STEP)["step"]
    timing.measure_here({"jax/jit": functools.partial(step, 3), "numpy/eager": lambda: 6}, repeats=2, number=1)
    timed = code.record()["timed"]
    assert [e["contestant"] for e in timed] == ["jax/jit", "numpy/eager"]
    assert timed[0]["where"] == code.cell_id(STEP) and timed[1]["where"] == "tests/run/test_code.py"
    timing.time_fn(lambda: 7, repeats=2, number=1, probe=True)  # a measurement of the machine: no contestant
    assert code.record()["timed"] == timed


NOTEBOOK = [
    {"cell_type": "code", "metadata": {}, "source": "from sidebyside.lab import training, timing\nfrom sidebyside.run import code"},
    {"cell_type": "code", "metadata": {"tags": ["pair:step:torch"]}, "source": STEP},
    {"cell_type": "code", "metadata": {"tags": ["pair:step:jax"]}, "source": "step_jax = training.flax_rung"},
    {"cell_type": "code", "metadata": {"tags": ["pair:shown:torch"]}, "source": "code.source(timing.ladder)"},
    {"cell_type": "code", "metadata": {"tags": ["pair:shown:jax"]}, "source": "code.source(timing.compare)"},
]


def test_a_paired_cell_that_names_the_library_is_refused_unless_it_only_shows_a_source():
    problems = pairs.code_problems(NOTEBOOK, name="nb.py")
    assert len(problems) == 1 and "'step' (jax) uses 'training'" in problems[0] and "code.source(fn)" in problems[0]
    assert pairs.code_problems(NOTEBOOK, under_test=["training"], name="nb.py") == []


def test_every_timed_contestant_must_be_defined_or_shown_by_a_paired_cell():
    from sidebyside.lab import timing

    shown_cell = NOTEBOOK[3]["source"]
    hidden = f"from sidebyside.lab import timing\nfrom sidebyside.run import code\nshown = {shown_cell}"
    assert "def ladder" in _cell(hidden, "<a hidden cell>")["shown"]
    assert code.record()["shown"][0]["from"] == code.cell_id(hidden)
    code.clear()
    _cell(shown_cell, "<the pair cell>", {"code": code, "timing": timing})  # the paired cell shows timing.ladder
    step = _cell(STEP)["step"]
    record = {"timed": [{"contestant": "torch/eager", **code.origin(step)},
                        {"contestant": "torch/ladder", **code.origin(timing.ladder)},
                        {"contestant": "jax/rung", **code.origin(timing.compare)}],
              "shown": code.record()["shown"]}
    problems = pairs.timed_problems(NOTEBOOK, record, name="nb.py")
    assert len(problems) == 1 and "'jax/rung' timed 'compare' from src/sidebyside/lab/timing.py" in problems[0]
    assert pairs.timed_problems(NOTEBOOK, {"timed": [], "shown": []}, name="nb.py") == []  # a post that times nothing
    assert pairs.timed_problems(NOTEBOOK, None, name="nb.py")[0].startswith("nb.py: the run's record keeps no code")
