"""One measuring loop (issue 17): time_fn, compare and ladder call a function the same
way (first call alone, warm-up, repeats of `number` calls, every call waited for), and
ladder adds only the keeping of failures."""

from __future__ import annotations

import time

import pytest
from conftest import Lazy

from sidebyside.lab import timing


def _counting():
    log = []

    def fn():
        log.append(Lazy())
        return log[-1]

    return fn, log


@pytest.mark.parametrize("how", ["time_fn", "compare", "ladder"])
def test_every_view_of_the_loop_calls_and_waits_alike(how):
    fn, log = _counting()
    kwargs = dict(repeats=3, warmup=2, min_repeat_s=0.0, max_number=1)
    if how == "time_fn":
        t = timing.time_fn(fn, **kwargs)
    elif how == "compare":
        t = timing.compare({"torch/f": fn}, **kwargs)["torch/f"]
    else:
        entries, timings = timing.ladder({"torch/f": fn}, **kwargs)
        t = timings["torch/f"]
        assert entries["torch/f"]["median_s"] == t.median_s and entries["torch/f"]["first_s"] == t.first_s
    # first call, 2 warm-ups, 3 repeats of 1 call (max_number=1: no call is spent choosing `number`)
    assert len(log) == 1 + 2 + 3 and t.number == 1 and t.repeats == 3
    assert all(lazy.blocked == 1 for lazy in log)  # every call waited for, once


def test_a_rung_that_fails_during_the_repeats_keeps_its_row_and_the_others_finish():
    calls = {"n": 0}

    def flaky():
        calls["n"] += 1
        if calls["n"] > 3:  # the first call, the warm-up and the first repeat pass
            raise RuntimeError("recompilation storm")
        return calls["n"]

    entries, timings = timing.ladder({"torch/flaky": flaky, "jax/steady": lambda: 1}, repeats=3, min_repeat_s=0.0,
                                     max_number=1)
    assert list(entries) == ["torch/flaky", "jax/steady"]
    assert entries["torch/flaky"]["error"] == "RuntimeError: recompilation storm" and "torch/flaky" not in timings
    assert timings["jax/steady"].repeats == 3
    with pytest.raises(RuntimeError, match="storm"):  # compare and time_fn do not swallow errors
        calls["n"] = 0
        timing.compare({"flaky": flaky}, repeats=3, min_repeat_s=0.0, max_number=1)


def test_unsynchronised_compare_drains_before_the_other_function_and_time_fn_only_at_the_end():
    a, b = Lazy(), Lazy()
    timing.compare({"a": lambda: a, "b": lambda: b}, repeats=3, warmup=0, min_repeat_s=0.0, max_number=1,
                   synchronize=False)
    # no call inside a repeat waits; each of the 3 repeats is drained after its clock stopped
    assert (a.blocked, b.blocked) == (3, 3)
    alone = Lazy()
    timing.time_fn(lambda: alone, repeats=3, number=2, warmup=0, synchronize=False)
    assert alone.blocked == 1  # nothing waited inside the repeats; one drain at the end


def test_cores_busy_counts_cpu_time_over_wall_time():
    """A sleeping call keeps no core busy; a pure-Python spin keeps at most one (the GIL), however
    loaded the machine: CPU time of one thread never exceeds the wall time it spans."""
    asleep = timing.cores_busy(lambda: time.sleep(0.02), min_s=0.1)
    spin = timing.cores_busy(lambda: sum(range(200_000)), min_s=0.1)
    assert asleep < 0.2
    assert asleep < spin <= 1.1
