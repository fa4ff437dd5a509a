"""The measuring loop removes the position effect at its cause (issue 59): every contestant takes every place
in a round equally often, and one function raced under two names (an A/A run) gets the same number of calls
per repeat under both."""

from __future__ import annotations

from sidebyside.lab import timing


def _recording(calls: list[str], name: str):
    def fn():
        calls.append(name)
    return fn


def test_each_round_starts_one_place_later():
    calls: list[str] = []
    fns = {n: _recording(calls, n) for n in "ABC"}
    timing.measure_here(fns, repeats=6, warmup=0, number=1, probe=True)
    rounds = calls[3:]  # after each function's first call, timed alone
    assert rounds == list("ABC" "BCA" "CAB" "ABC" "BCA" "CAB")
    for name in "ABC":  # first, second and third in a round equally often
        assert [rounds[i:i + 3].index(name) for i in range(0, 18, 3)].count(0) == 2


def test_two_contestants_swap_places_every_round():
    calls: list[str] = []
    timing.measure_here({"A": _recording(calls, "A"), "B": _recording(calls, "B")}, repeats=4, warmup=0,
                        number=1, shift=1, probe=True)
    assert calls[2:] == list("BAABBAAB")


def test_one_function_under_two_names_gets_one_number_of_calls(monkeypatch):
    chosen = iter([120, 135])
    monkeypatch.setattr(timing, "_choose_number", lambda fn, min_repeat_s, max_number: next(chosen))
    same = _recording([], "A")
    timings, _ = timing.measure_here({"A": same, "A again": same}, repeats=2, warmup=0, probe=True)
    assert timings["A"].number == timings["A again"].number == 120
