"""jit-and-autograd-timing made in parts (sidebyside.posts.jit_autograd.sweeps through a
sidebyside.run.checkpoints.Checkpoints, as notebooks/04_jit_autograd.py calls them): at tiny sizes,
a second run against the same checkpoint file measures nothing again and gets equal values back,
Timing objects included; a budget that a part cannot fit stops the run before that part, and the
next run measures only what is left, on the data an uninterrupted run draws."""

from __future__ import annotations

from functools import partial

import numpy as np
import pytest

from sidebyside.lab import functions, timing
from sidebyside.posts.jit_autograd import sweeps
from sidebyside.run import checkpoints
from sidebyside.run.checkpoints import Checkpoints

SIZES = [10, 100]
FAST = {"repeats": 3, "min_repeat_s": 0.001, "processes": 1}


class Notebook:
    """The notebook's part functions at tiny sizes, in NumPy: each ladder's data drawn from the
    notebook's generator, each call and each build of a ladder counted."""

    def __init__(self):
        self.rng = np.random.default_rng(0)
        self.calls: dict[str, int] = {}
        self.builds = 0

    def fn(self, name, f, *args):
        def call():
            self.calls[name] = self.calls.get(name, 0) + 1
            return f(*args)

        return call

    def candidates(self, n):
        """A ladder at length n, as the notebook's candidates(device, n) builds one."""
        self.builds += 1
        x = self.rng.uniform(0, 4 * np.pi, n).astype(np.float32)
        return {
            "numpy/numpy": self.fn("numpy/numpy", functions.df, x),
            "numpy/sin": self.fn("numpy/sin", np.sin, x),
            "torch/compile-cudagraphs": timing.NotApplicable.cuda_graphs("cpu"),
        }

    def gradients_at(self, n):
        """A gradient ladder at length n checked against f', as the notebook's gradients_at."""
        x = self.rng.uniform(0, 4 * np.pi, n)
        fns = {
            "numpy/df": self.fn("numpy/df", functions.df, x),
            "numpy/df32": self.fn("numpy/df32", lambda v: functions.df(v.astype(np.float32)), x),
        }
        return sweeps.checked(fns, functions.df(x), **FAST)

    def timed_both_ways(self, n, methods):
        """As the notebook's: the candidates built inside the part, timed right and wrong."""
        built = self.candidates(n).items()
        return sweeps.pitfall({m: fn for m, fn in built if callable(fn) and m in methods},
                              repeats=3, min_repeat_s=0.001)


def _run(path, nb, **options):
    """The notebook's part-wrapped calls at SIZES, in its order and under its names; and the
    generator's next draw after them."""
    parts = Checkpoints(path, stamp={"device": "test"}, commit="abc", **options)
    swept = {n: parts.drawn(nb.rng, sweeps.part_name("jit", "cpu", n),
                             partial(sweeps.sweep, partial(nb.candidates, n)), needs={},
                             decode=sweeps.Ladder.saved, **FAST) for n in SIZES}
    grads = {n: parts.drawn(nb.rng, sweeps.part_name("grad", n), nb.gradients_at, n,
                             decode=sweeps.Ladder.saved) for n in SIZES}
    pitfall = parts.drawn(nb.rng, sweeps.part_name("pitfall", "cpu", SIZES[-1]),
                           nb.timed_both_ways, SIZES[-1], list(swept[SIZES[-1]].timings))
    return parts, {"swept": swept, "grads": grads, "pitfall": pitfall, "next": nb.rng.uniform()}


def test_a_second_run_reads_every_part_back_and_measures_nothing(tmp_path):
    _, straight = _run("", Notebook())  # off: also imports every module a part's key counts
    path = tmp_path / "checkpoints" / "jit.json"
    first = Notebook()
    parts, values = _run(path, first)
    assert list(parts.log) == ["jit/cpu/1e1", "jit/cpu/1e2", "grad/1e1", "grad/1e2",
                               "pitfall/cpu/1e2"]
    assert all(p["measured"] == "this run" for p in parts.log.values())
    assert first.builds == 2 * len(SIZES) + 1
    assert set(first.calls) == {"numpy/numpy", "numpy/sin", "numpy/df", "numpy/df32"}
    ladder = values["swept"][100]
    assert list(ladder.entries) == ["numpy/numpy", "numpy/sin", "torch/compile-cudagraphs"]
    assert ladder.entries["torch/compile-cudagraphs"]["not_applicable"]
    assert "numpy/numpy" in ladder.back_to_back and ladder.timings["numpy/numpy"].median_s > 0
    assert isinstance(ladder.timings["numpy/numpy"], timing.Timing)
    errors = values["grads"][100].errors
    assert errors["numpy/df"] == 0.0 and 0 < errors["numpy/df32"] < 1e-5
    assert set(values["pitfall"]) == {"numpy/numpy", "numpy/sin"}
    assert values["pitfall"]["numpy/numpy"]["synced_s"] > 0
    assert values["next"] == straight["next"]  # a run in parts draws as a run without parts

    again = Notebook()
    parts2, values2 = _run(path, again)
    assert again.calls == {} and again.builds == 0  # nothing built, nothing called
    assert all(p["measured"] == "earlier run" and p["commit"] == "abc" for p in parts2.log.values())
    assert values2 == values  # Ladders with their Timings, the pitfall, and the generator's state
    assert values2["swept"][100].timings["numpy/numpy"].q3_s == ladder.timings["numpy/numpy"].q3_s
    assert "5 of its 5 parts were read back" in checkpoints.describe_parts(parts2.log)


class _Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


def test_a_budget_stops_before_the_part_that_would_not_fit_and_the_next_run_resumes(tmp_path):
    _run("", Notebook())
    path, clock, nb = tmp_path / "jit.json", _Clock(), Notebook()
    straight, after_straight = Notebook(), []  # no parts: where each size's draws leave rng
    for n in SIZES:
        straight.candidates(n), straight.candidates(n)  # its ladder, then back to back
        after_straight.append(straight.rng.bit_generator.state["state"])

    def slow(n):  # each size's part takes 60 s of the run's clock: 30 s for each build
        clock.now += 30
        return nb.candidates(n)

    def sweep_at(n):
        return parts.drawn(nb.rng, sweeps.part_name("jit", "cpu", n),
                            partial(sweeps.sweep, partial(slow, n)), decode=sweeps.Ladder.saved,
                            **FAST)

    def state():
        return nb.rng.bit_generator.state["state"]

    parts = Checkpoints(path, budget_s=100, clock=clock, started_at=0.0, deadline_s=0.0,
                        estimates={})
    first = sweep_at(SIZES[0])
    builds = nb.builds
    with pytest.raises(checkpoints.BudgetSpent, match="'jit/cpu/1e2', is expected to take 60 s"):
        sweep_at(SIZES[1])  # 60 s have passed, and 60 more would end past 100
    assert nb.builds == builds  # stopped before the part: nothing of it was built or timed

    nb.rng = np.random.default_rng(0)  # the next run starts its generator afresh
    parts = Checkpoints(path, budget_s=100, clock=clock, started_at=0.0, deadline_s=0.0)
    assert sweep_at(SIZES[0]) == first and nb.builds == builds  # read back
    assert state() == after_straight[0]  # ... with the generator where measuring it left it
    sweep_at(SIZES[1])
    assert state() == after_straight[1]  # so the part measured now drew an uninterrupted run's data
    assert nb.builds == builds + 2 and [p["measured"] for p in parts.log.values()] == [
        "earlier run", "this run"]


@pytest.mark.parametrize(("kind", "what", "name"), [
    ("jit", ("gpu", 10**6), "jit/gpu/1e6"), ("grad", (1000,), "grad/1e3"),
    ("hvp", (10_000_000,), "hvp/1e7"), ("linalg", ("inverse", 1024), "linalg/inverse/1024"),
    ("cores", ("cpu", 1), "cores/cpu/1")])
def test_part_names_read_powers_of_ten_as_exponents(kind, what, name):
    assert sweeps.part_name(kind, *what) == name


def test_a_part_name_refuses_a_kind_with_a_slash():
    with pytest.raises(ValueError, match="one word with no '/'"):
        sweeps.part_name("jit/gpu", 10)
