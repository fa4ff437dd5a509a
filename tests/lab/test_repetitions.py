"""Spread between runs, not only within one (issue 37): the harness measures every section in
independent repetitions (interleaved blocks, each starting with another function), keeps each
repetition's figure, and a speed verdict's interval covers the spread between them; "within
noise" means within that interval. Timings here come from a synthetic clock."""

from __future__ import annotations

import types

import pytest

from sidebyside.lab import timing, verdict


class _Clock:
    """A clock that only the timed functions move: each call advances it by its duration."""

    def __init__(self):
        self.now = 0.0

    def perf_counter(self):
        return self.now

    def function(self, durations, log, name):
        feed = iter(durations)

        def fn():
            log.append(name)
            self.now += next(feed)
            return 1

        return fn


def test_repeats_split_into_three_repetitions_as_even_as_can_be():
    assert timing._block_sizes(7, 3) == [3, 2, 2]
    assert timing._block_sizes(6, 3) == [2, 2, 2]
    assert timing._block_sizes(2, 3) == [1, 1]  # fewer repeats: fewer repetitions
    assert timing.REPETITIONS >= 3


def test_each_repetition_starts_with_another_function_and_keeps_its_median(monkeypatch):
    clock, log = _Clock(), []
    monkeypatch.setattr(timing, "time", types.SimpleNamespace(perf_counter=clock.perf_counter))
    # first call, then 6 repeats: the second repetition of "torch/a" is twice as slow
    a = clock.function([1.0, 1.0, 1.0, 2.0, 2.0, 1.0, 1.0], log, "a")
    b = clock.function([1.0] * 7, log, "b")
    t = timing.compare({"torch/a": a, "jax/b": b}, repeats=6, warmup=0, max_number=1)
    assert log[2:] == ["a", "b", "a", "b", "b", "a", "b", "a", "a", "b", "a", "b"]
    assert t["torch/a"].repetitions_s == [1.0, 2.0, 1.0] and t["jax/b"].repetitions_s == [1.0, 1.0, 1.0]
    assert t["torch/a"].to_dict()["repetitions"] == [1.0, 2.0, 1.0]
    entry = verdict.ladder_entry(t["torch/a"])
    assert entry["repetitions_s"] == [1.0, 2.0, 1.0]
    assert verdict.scaled({"torch/a": entry}, 10.0)["torch/a"]["repetitions_s"] == [10.0, 20.0, 10.0]
    v = verdict.speed(t["torch/a"], t["jax/b"], question="q")
    assert v.repetitions == [1.0, 2.0, 1.0] and v.interval[1] == pytest.approx(2.0)
    assert v.sides["torch"]["repetitions_s"] == [1.0, 2.0, 1.0]


def _entry(median, q1, q3, repetitions=None):
    e = {"median_s": median, "q1_s": q1, "q3_s": q3}
    if repetitions is not None:
        e["repetitions_s"] = repetitions
    return e


def test_the_interval_covers_the_spread_between_repetitions_and_within_noise_follows_it():
    # Inside one repetition the spread is small: PyTorch looks 1.2x faster ...
    torch_small = _entry(1.0, 0.98, 1.02)
    jax_small = _entry(1.2, 1.18, 1.22)
    assert verdict.speed(torch_small, jax_small, question="q").winner == "torch"
    # ... but one repetition of three landed the other way: within noise, and the interval says why.
    torch_runs = _entry(1.0, 0.98, 1.02, [1.0, 0.99, 1.3])
    jax_runs = _entry(1.2, 1.18, 1.22, [1.2, 1.21, 1.19])
    v = verdict.speed(torch_runs, jax_runs, question="q")
    ratios = [1.0 / 1.2, 0.99 / 1.21, 1.3 / 1.19]
    assert v.label == "within noise" and v.winner is None
    assert v.interval[0] <= min(ratios) and v.interval[1] >= max(ratios) > 1
    assert v.repetitions == pytest.approx(ratios)
    assert "3 repetitions" in v.sentence and "every independent repetition" in v.test
    # Repetitions that agree leave the quartile interval as it was.
    steady = verdict.speed(_entry(1.0, 0.98, 1.02, [1.0, 1.0, 1.0]), _entry(1.2, 1.18, 1.22, [1.2, 1.2, 1.2]),
                           question="q")
    assert steady.winner == "torch" and steady.interval == pytest.approx((0.98 / 1.22, 1.02 / 1.18))
    alone = verdict.speed(torch_small, jax_small, question="q")  # a record that kept no repetitions says so
    assert alone.repetitions is None and "no independent repetitions were kept" in alone.test


def test_a_ladder_verdict_reads_the_repetitions_of_its_best_rungs():
    entries = {"torch/eager": _entry(1.0, 0.98, 1.02, [1.0, 0.99, 1.3]),
               "jax/jit": _entry(1.2, 1.18, 1.22, [1.2, 1.21, 1.19])}
    v = verdict.ladder(entries, question="q")
    assert v.label == "within noise" and v.to_dict()["repetitions"] == pytest.approx([1 / 1.2, 0.99 / 1.21,
                                                                                      1.3 / 1.19])
