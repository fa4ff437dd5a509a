"""One estimator per sentence (issue 59, item 6): the two times a speed sentence prints divide to
the factor (or time ratio) it prints beside them, to the printed precision, whatever its label; and
a ladder's clauses about the two best rungs print the head verdict's factor.

Each side's time is the geometric mean of its per-process medians (``verdict.typical_s``), whose
ratio is the geometric mean of the per-process ratios; the medians pooled over processes (the
figures once printed beside that factor, "1.59× faster … 644 ms against 983 ms") are not."""

from __future__ import annotations

import math
import re

import pytest
from conftest import per_process

from sidebyside.lab import ladders, verdict, words

#: Seconds per printed unit.
UNITS = {"ns": 1e-9, "µs": 1e-6, "ms": 1e-3, "s": 1.0}
NUMBER = r"(\d[\d,]*(?:\.\d+)?)"
TIMES = re.compile(NUMBER + r" (ns|µs|ms|s) against (?:[^:;]*? )?" + NUMBER + r" (ns|µs|ms|s)")
FACTOR = re.compile(r" is " + NUMBER + r"× faster than ")
RATIO = re.compile(r"'s time over [^']+'s " + NUMBER + ",")


def _half_unit(text: str) -> float:
    """Half the last printed digit of a figure from :func:`words.fmt_number` (3 significant figures,
    trailing zeros dropped; 100 and over printed whole)."""
    value = float(text.replace(",", ""))
    return 0.5 * 10.0 ** min(0, math.floor(math.log10(value)) - 2)


def _agree(numerator: str, denominator: str, ratio: str) -> bool:
    """Whether two printed times (``"644 ms"``) can divide to the printed ``ratio`` (``"1.59"``): some
    true values, each within half a printed digit of its figure, make the ratio true."""
    (n, n_unit), (d, d_unit) = numerator.split(), denominator.split()
    n_value, d_value, r = float(n.replace(",", "")), float(d.replace(",", "")), float(ratio.replace(",", ""))
    lowest = (n_value - _half_unit(n)) * UNITS[n_unit] / ((d_value + _half_unit(d)) * UNITS[d_unit])
    highest = (n_value + _half_unit(n)) * UNITS[n_unit] / ((d_value - _half_unit(d)) * UNITS[d_unit])
    return lowest <= r + _half_unit(ratio) and r - _half_unit(ratio) <= highest


def check_arithmetic(v: verdict.Verdict) -> None:
    """The times the sentence prints divide to its factor (a winner) or its time ratio (no winner)."""
    found = TIMES.search(v.sentence)
    assert found, v.sentence
    first, second = f"{found.group(1)} {found.group(2)}", f"{found.group(3)} {found.group(4)}"
    if v.winner is not None:  # "<fast> is F× faster than <slow> (...): <fast time> against <slow time>."
        (factor,) = FACTOR.findall(v.sentence)
        assert factor == words.fmt_number(v.factor)
        assert _agree(second, first, factor), f"{second} / {first} is not {factor}×: {v.sentence}"
    elif v.label == verdict.TOO_FEW:  # "<subject> <time> against <other> <time>, measured in 1 process"
        assert _agree(first, second, words.fmt_number(v.ratio)), v.sentence
    else:  # "... : <subject time> against <other time> (<subject>'s time over <other>'s R, ...)"
        (ratio,) = RATIO.findall(v.sentence)
        assert ratio == words.fmt_number(v.ratio)
        assert _agree(first, second, ratio), f"{first} / {second} is not {ratio}: {v.sentence}"


def _entry(median: float, spread: float, processes: int, floor: float | None = None, first: float = 1.0) -> dict:
    """A timing entry over ``processes`` per-process medians around ``median`` (conftest's
    ``per_process``), the first process's ``first`` times slower (the notebook's own kernel)."""
    times = per_process(median, spread, processes) if processes else []
    times = [t * (first if i == 0 else 1.0) for i, t in enumerate(times)]
    # the median pooled over processes: what the sentences printed before, and what they no longer print
    return {"median_s": sorted(times)[len(times) // 2] if times else median, "processes_s": times, "floor": floor}


#: (PyTorch's time, JAX's time, spread of the per-process medians, processes, noise floor, how much slower
#: PyTorch's first process is): the published examples of the issue, ties, small and large differences,
#: every unit and process count, and a first process unlike the others (where a median pooled over
#: processes and the geometric mean of per-process ratios part).
CASES = [
    (0.644, 0.983, 0.10, 5, None, 1.0),
    (0.644, 0.983, 0.10, 5, None, 1.6),
    (62.2e-3, 146e-3, 0.08, 5, 0.04, 1.3),
    (19.5e-3, 7.43e-3, 0.15, 5, 0.04, 1.0),
    (7.43e-3, 19.5e-3, 0.15, 5, 0.04, 2.0),
    (1.00e-3, 1.004e-3, 0.02, 5, None, 1.0),
    (1.00e-3, 1.001e-3, 0.002, 5, 0.05, 1.0),
    (1.00e-3, 1.03e-3, 0.002, 5, 0.05, 1.0),
    (1.03e-3, 1.00e-3, 0.002, 9, 0.05, 1.0),
    (4.9e-6, 5.0e-6, 0.01, 3, 0.01, 1.0),
    (812e-9, 97.1e-9, 0.2, 2, None, 1.0),
    (1.0, 1.21, 0.3, 2, 0.04, 1.0),
    (12.4, 45.1, 0.05, 9, None, 1.0),
    (12.4, 45.1, 0.05, 9, None, 3.0),
    (2.2e-3, 3.1e-3, 0.05, 1, 0.04, 1.0),
    (2.2e-3, 3.1e-3, 0.05, 0, None, 1.0),
]


def _verdict(torch_s: float, jax_s: float, spread: float, processes: int, floor: float | None,
             first: float) -> verdict.Verdict:
    return verdict.speed(_entry(torch_s, spread, processes, floor, first), _entry(jax_s, spread, processes, floor),
                         question="q", subject_tool="compile", other_tool="jit")


@pytest.mark.parametrize("case", CASES, ids=[f"{c[0]:g}-{c[1]:g}-{c[3]}p" for c in CASES])
def test_every_speed_sentence_prints_times_that_divide_to_its_factor(case):
    v = _verdict(*case)
    check_arithmetic(v)
    if v.processes >= 2:  # the times are each side's geometric mean over the processes, their ratio the verdict's
        torch, jax = v.sides["torch"]["geomean_s"], v.sides["jax"]["geomean_s"]
        assert torch / jax == pytest.approx(v.ratio, rel=1e-12)
        assert jax == pytest.approx(math.exp(sum(map(math.log, per_process(case[1], case[2], case[3]))) / case[3]))


def test_the_cases_reach_every_label():
    assert {_verdict(*case).label for case in CASES} == {verdict.FASTER, verdict.SLOWER, verdict.WITHIN, verdict.TIED,
                                                         verdict.SMALL, verdict.TOO_FEW}


def test_the_check_refuses_the_sentence_the_issue_quotes():
    """"PyTorch … is 1.59× faster … 644 ms against 983 ms" (983/644 = 1.53): a factor and times from
    two estimators."""
    assert not _agree("983 ms", "644 ms", "1.59")
    assert _agree("983 ms", "644 ms", "1.53") and _agree("146 ms", "62.2 ms", "2.35")
    assert _agree("1 s", "999 ms", "1") and not _agree("1.1 s", "999 ms", "1")


LADDER_CLAUSE = re.compile(r"'s ladder runs from [^(]+\([^)]*\) to ([^ ]+) \(" + NUMBER
                           + r"× (faster than|the time of) (\w+)'s best\)")


@pytest.mark.parametrize("case", [c for c in CASES if c[3] >= 2], ids=[f"{c[0]:g}-{c[1]:g}-{c[3]}p"
                                                                        for c in CASES if c[3] >= 2])
def test_a_ladders_clauses_print_the_head_verdicts_factor(case):
    torch_s, jax_s, spread, processes, floor, first = case
    entries = {"torch/eager": _entry(3.1 * torch_s, spread, processes, floor),
               "torch/compile": _entry(torch_s, spread, processes, floor, first),
               "jax/eager": _entry(2.3 * jax_s, spread, processes, floor),
               "jax/jit": _entry(jax_s, spread, processes, floor)}
    v = ladders.ladder(entries, question="q")
    check_arithmetic(v)
    clauses = LADDER_CLAUSE.findall(v.sentence)
    assert [tool for tool, *_ in clauses] == ["compile", "jit"], v.sentence
    faster = "compile" if v.ratio < 1 else "jit"
    for tool, factor, how, rival in clauses:  # each best rung against the other's best: the head's factor
        assert factor == words.fmt_number(v.factor), v.sentence
        assert rival == {"compile": "JAX", "jit": "PyTorch"}[tool]
        assert (how == "faster than") == (tool == faster), v.sentence
    chosen = ladders.best(entries)
    assert chosen["ratio"] == pytest.approx(v.ratio, rel=1e-12)
