"""The statistics every verdict rests on, stated once.

Speed: one process is one observation. Each process times both contestants,
interleaved, and keeps each one's median per-call time; the observation is
the subject's median over the other's in that process, ``r_i``. Over ``n``
processes (:func:`ratio_interval`):

- ``L_i = ln r_i``; ``m = mean(L)``, ``s = sd(L)`` (sample, ``n - 1``);
- the time ratio is the geometric mean ``exp(m)``;
- the 95% confidence interval is the t-interval on the log-ratios,
  ``exp(m ± t(0.975, n - 1) · s / √n)``, with Student's t quantile from
  SciPy. It narrows as processes are added (``1/√n`` and a smaller quantile).
- a race whose ratio moves between runs on machines of one fingerprint by more
  than its runs' intervals say (the host's state on the day, which every
  process of one run shares) has a spread between runs ``τ``, estimated from
  its logged re-runs (:func:`between_run_sd`: the variance of the runs'
  log-ratios less their mean squared standard error); its interval is
  ``exp(m ± t(0.975, n - 1) · √(s²/n + τ²))``, which no count of processes
  narrows below ``τ``.

One estimator per sentence: the time a sentence prints for each side is the
geometric mean of that side's per-process medians (:func:`geomean`), so that
the two times printed beside a ratio divide to it exactly:
``geomean(a) / geomean(b) = exp(m)``.

The noise floor ``f`` of a machine kind (:func:`noise_floor`) is the
:data:`FLOOR_QUANTILE` quantile (the 95th percentile) of ``|ln r|`` over the
ratios that racing a function against itself (A/A) produced there, written as
the fraction ``exp(q) - 1``: about one A/A race in twenty lands outside it.
A ratio lies inside it when ``1/(1+f) < ratio < 1+f`` (:func:`inside_floor`).
A verdict is "practically tied" only when its whole interval lies inside the
floor (:mod:`sidebyside.lab.verdict` decides).

Seeds (:func:`welch`): a quantity measured over seeds on each side. The
difference of the means ``d = mean(a) - mean(b)``, Welch's standard error
``se = √(var(a)/n_a + var(b)/n_b)``, the Welch–Satterthwaite degrees of
freedom ``ν``, the two-sided 95% interval ``d ± t(0.975, ν) · se`` (SciPy's
``ttest_ind(equal_var=False)``), and the smallest difference the test could
have detected with 80% power at that level, ``(t(0.975, ν) + t(0.80, ν)) · se``.

Inputs: positive per-process times, or seed values. Outputs: plain dicts.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from typing import Any

__all__ = ["CONFIDENCE", "POWER", "FLOOR_QUANTILE", "geomean", "ratio_interval", "between_run_sd", "noise_floor", "inside_floor",
           "welch"]

#: The confidence of every interval the site publishes.
CONFIDENCE = 0.95
#: The power at which :func:`welch` states the smallest detectable difference.
POWER = 0.80
#: The quantile of the A/A ratios' distance from 1 that is a machine kind's noise floor (:func:`noise_floor`).
FLOOR_QUANTILE = 0.95
#: Spread below this fraction of the values' size is rounding, not spread (:func:`welch`).
ROUNDING = 1e-9


def geomean(seconds: Sequence[float]) -> float:
    """The geometric mean of positive times: the time a sentence prints for a side, from its
    per-process medians (the ratio of two sides' geometric means over the same processes is the
    :func:`ratio_interval` ratio). Raises ValueError on an empty list or a time that is not positive."""
    if len(seconds) == 0 or min(seconds) <= 0:
        raise ValueError(f"a geometric mean needs positive times, got {list(seconds)}")
    return math.exp(sum(math.log(x) for x in seconds) / len(seconds))


def ratio_interval(subject: Sequence[float], other: Sequence[float], *, confidence: float = CONFIDENCE,
                   between_sd: float = 0.0) -> dict[str, Any]:
    """The time ratio ``subject/other`` over processes, paired by position.

    ``subject[i]`` and ``other[i]`` are the median per-call seconds of the two
    contestants in process ``i``. Returns ``ratio`` (geometric mean of the
    per-process ratios), ``subject_s`` and ``other_s`` (each side's :func:`geomean`, whose ratio
    is ``ratio``: the times to print beside it), ``interval`` (the t-interval on log-ratios, or None
    with fewer than 2 processes), ``processes`` (n), ``ratios`` (each process's
    ratio) and ``method`` (one line). Raises ValueError on lengths that differ
    or a time that is not positive."""
    from scipy import stats

    if len(subject) != len(other):
        raise ValueError(f"one time per process on each side: got {len(subject)} and {len(other)}")
    if len(subject) == 0:
        raise ValueError("ratio_interval needs at least one process")
    if min(*subject, *other) <= 0:
        raise ValueError("per-process times must be positive seconds")
    if not between_sd >= 0:
        raise ValueError(f"a spread between runs is a standard deviation (>= 0), got {between_sd}")
    logs = [math.log(a / b) for a, b in zip(subject, other)]
    n = len(logs)
    mean = sum(logs) / n
    out = {"ratio": math.exp(mean), "subject_s": geomean(subject), "other_s": geomean(other), "processes": n, "ratios": [math.exp(x) for x in logs], "interval": None,
           "method": f"geometric mean of per-process time ratios; {confidence:.0%} t-interval on their logarithms "
                     f"over {n} process{'es' if n != 1 else ''}"
                     + (f", its variance widened by the spread between runs ({between_sd:.3g} in the log-ratio)"
                        if between_sd else "")}
    if n >= 2:
        sd = math.sqrt(sum((x - mean) ** 2 for x in logs) / (n - 1))
        half = float(stats.t.ppf(0.5 + confidence / 2, n - 1)) * math.sqrt(sd * sd / n + between_sd * between_sd)
        out["interval"] = (math.exp(mean - half), math.exp(mean + half))
    return out


def between_run_sd(runs: Sequence[tuple[float, float]]) -> float:
    """The spread between runs of one race that the runs' own intervals do not explain.

    ``runs``: per run of the race on machines of one fingerprint, ``(ratio, within_se)``: its time
    ratio and the standard error of its mean log-ratio over its own processes. The method-of-moments
    estimate of a random effect per run: the sample variance of the runs' log-ratios less the mean of
    their squared standard errors, floored at 0; returned as a standard deviation of the log-ratio.
    Raises ValueError with fewer than 2 runs, a ratio that is not positive or a negative error."""
    if len(runs) < 2:
        raise ValueError(f"a spread between runs needs at least 2 runs, got {len(runs)}")
    if min(r for r, _ in runs) <= 0 or min(se for _, se in runs) < 0:
        raise ValueError(f"runs are (positive ratio, standard error >= 0), got {list(runs)}")
    between = statistics.variance([math.log(r) for r, _ in runs])
    within = statistics.fmean([se * se for _, se in runs])
    return math.sqrt(max(between - within, 0.0))


def noise_floor(ratios: Sequence[float], quantile: float = FLOOR_QUANTILE) -> float:
    """The noise floor of A/A time ratios as a fraction: ``exp(q) - 1`` where ``q`` is the
    ``quantile`` of ``|ln r|`` over ``ratios`` (NumPy's linear interpolation between order
    statistics). Raises ValueError without ratios or with a quantile outside (0, 1]."""
    import numpy as np

    if len(ratios) == 0 or min(ratios) <= 0:
        raise ValueError(f"a noise floor needs positive A/A ratios, got {list(ratios)}")
    if not 0 < quantile <= 1:
        raise ValueError(f"the floor's quantile lies in (0, 1], got {quantile}")
    return math.expm1(float(np.quantile(np.abs(np.log(np.asarray(ratios, dtype=float))), quantile)))


def inside_floor(ratio: float, floor: float | None) -> bool:
    """Whether a time ratio lies strictly inside the noise floor ``floor`` (a fraction: 0.05 means
    ratios between 1/1.05 and 1.05); False without a floor."""
    if not floor:
        return False
    return 1 / (1 + floor) < ratio < 1 + floor


def welch(subject: Sequence[float], other: Sequence[float], *, confidence: float = CONFIDENCE,
          power: float = POWER) -> dict[str, Any]:
    """Welch's test of ``mean(subject) - mean(other)``.

    Returns ``difference``, ``se``, ``df`` (Welch–Satterthwaite; None with
    fewer than 2 values on a side or no spread), ``interval`` (the two-sided
    ``confidence`` interval of the difference, or None), ``pvalue``,
    ``significant`` (the interval excludes 0) and ``detectable`` (the
    smallest difference detectable with ``power``, or None)."""
    from scipy import stats

    a, b = [float(x) for x in subject], [float(x) for x in other]
    if not a or not b:
        raise ValueError("welch() needs at least one value on each side")
    diff = sum(a) / len(a) - sum(b) / len(b)
    out: dict[str, Any] = {"difference": diff, "se": None, "df": None, "interval": None, "pvalue": None,
                           "significant": False, "detectable": None}
    if len(a) < 2 or len(b) < 2:
        return out
    mean_a, mean_b = statistics.fmean(a), statistics.fmean(b)
    rounding = ROUNDING * max(abs(x) for x in a + b)
    # A side whose spread is rounding (seeds that agree) is a constant: scipy would warn of precision loss and
    # return noise. Welch's test against a constant is the one-sample t-test of the other side.
    sa, sb = [statistics.stdev(v) > rounding for v in (a, b)]
    va, vb = (statistics.variance(a) if sa else 0.0), (statistics.variance(b) if sb else 0.0)
    se = math.sqrt(va / len(a) + vb / len(b))
    out["se"] = se
    if not (sa or sb):
        out["significant"] = abs(diff) > rounding
        return out
    if sa and sb:
        test = stats.ttest_ind(a, b, equal_var=False)
        low, high = test.confidence_interval(confidence)
    elif sa:
        test = stats.ttest_1samp(a, mean_b)
        low, high = (x - mean_b for x in test.confidence_interval(confidence))
    else:
        test = stats.ttest_1samp(b, mean_a)
        low, high = (mean_a - x for x in reversed(test.confidence_interval(confidence)))
    df = float(test.df)
    quantile = float(stats.t.ppf(0.5 + confidence / 2, df))
    out.update(df=df, interval=(float(low), float(high)), pvalue=float(test.pvalue),
               significant=not (low <= 0 <= high),
               detectable=(quantile + float(stats.t.ppf(power, df))) * se)
    return out
