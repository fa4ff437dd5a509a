"""Verdicts: the one place where measured numbers become claims.

Every sentence a post prints with a number in it comes from here, so that a
claim changes when the numbers do and every notebook decides "faster",
"slower" or "within noise" the same way.

Two kinds of claim:

- :func:`speed`: one framework's timing against the other's. The test: the
  ratio of medians, with an interval built from the quartiles of both sides
  (``q1_a / q3_b`` to ``q3_a / q1_b``). When that interval holds 1 the two are
  "within noise"; otherwise the faster side wins by the ratio of medians. The
  interval is conservative: it is as wide as both spreads together.
- :func:`seeds`: a quantity measured over several seeds on each side (test
  accuracy, say). The test: the difference of the means against two standard
  errors of that difference (Welch's standard error). Inside them: "within
  seed noise".

And the ladder of tools (the compile matrix): a mapping
``"<framework>/<tool>" -> entry`` where an entry is a :class:`timing.Timing`
or a dict with ``median_s`` and ``iqr_s`` (optionally ``q1_s``/``q3_s``,
``compile_s``) or ``error`` for a tool that failed. :func:`best` picks each
framework's fastest working tool; :func:`ladder` compares best with best and
says what the rest of the ladder shows.

A :class:`Verdict` is returned, never printed: ``verdict.sentence`` for the
post, ``verdict.to_dict()`` for the results JSON (the site's verdict box and
scoreboard read it).

Inputs: seconds (or any unit, the same on both sides) and plain numbers.
Outputs: :class:`Verdict`; formatting helpers :func:`fmt_ratio`,
:func:`fmt_seconds`, :func:`fmt_number`, :func:`plural`.
"""

from __future__ import annotations

import dataclasses
import math
import statistics
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = [
    "FRAMEWORKS",
    "Verdict",
    "speed",
    "seeds",
    "best",
    "ladder",
    "ladder_entry",
    "scaled",
    "relative",
    "fmt_ratio",
    "fmt_signed",
    "fmt_seconds",
    "fmt_number",
    "plural",
]

#: Framework keys as they appear in ladder names, and how prose names them.
FRAMEWORKS = {"torch": "PyTorch", "jax": "JAX"}

FASTER, SLOWER, WITHIN = "faster", "slower", "within noise"


@dataclasses.dataclass
class Verdict:
    """A claim and the evidence behind it.

    ``label`` is from the point of view of ``subject`` (the first side):
    "faster"/"slower"/"within noise" for speed, "higher"/"lower"/"within seed
    noise" for seeds. ``winner`` is the framework key that wins, or None.
    """

    question: str
    label: str
    sentence: str
    test: str
    subject: str
    other: str
    winner: str | None
    ratio: float | None = None
    interval: tuple[float, float] | None = None
    difference: float | None = None
    threshold: float | None = None
    sides: dict[str, dict[str, Any]] = dataclasses.field(default_factory=dict)
    caveat: str = ""

    def to_dict(self) -> dict[str, Any]:
        out = dataclasses.asdict(self)
        if self.interval is not None:
            out["interval"] = list(self.interval)
        return out


# ----------------------------------------------------------------------------- formatting


def fmt_number(value: float, digits: int = 3) -> str:
    """``value`` to ``digits`` significant figures; integers stay integers;
    never "-0"."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "n/a"
    if abs(value) >= 10 ** (digits - 1):  # a large figure reads best whole: 45,803, not 4.58e+04
        return f"{int(round(value)):,}"
    text = f"{value:#.{digits}g}"
    if "e" not in text:
        text = text.rstrip("0").rstrip(".") if "." in text else text
    if text.lstrip("-") in {"0", "0.0"} or float(text) == 0:
        return "0"
    return text


def fmt_signed(value: float, digits: int = 3) -> str:
    """``value`` with its sign always shown (``+1.6``, ``-0.05``); zero as
    "0", never "+0" or "-0.0"."""
    text = fmt_number(value, digits)
    return text if text.startswith("-") or text == "0" else "+" + text


def fmt_ratio(ratio: float) -> str:
    """A ratio as a speed factor: ``3.21×``, ``1.05×``, ``12.3×``."""
    return f"{fmt_number(ratio, 3)}×"


def fmt_seconds(seconds: float) -> str:
    """Seconds in the unit that reads best: ``412 µs``, ``3.27 ms``, ``1.5 s``."""
    if seconds is None or math.isnan(seconds):
        return "n/a"
    a = abs(seconds)
    if a >= 1:
        return f"{fmt_number(seconds)} s"
    if a >= 1e-3:
        return f"{fmt_number(seconds * 1e3)} ms"
    if a >= 1e-6:
        return f"{fmt_number(seconds * 1e6)} µs"
    return f"{fmt_number(seconds * 1e9)} ns"


def plural(n: int, word: str, plural_word: str | None = None) -> str:
    """``plural(1, "seed")`` -> "1 seed"; ``plural(5, "seed")`` -> "5 seeds"."""
    return f"{n} {word if n == 1 else (plural_word or word + 's')}"


# ----------------------------------------------------------------------------- speed


def _quartiles(entry: Any) -> tuple[float, float, float]:
    """(q1, median, q3) in seconds from a Timing or a ladder/to_dict entry."""
    if hasattr(entry, "median_s") and hasattr(entry, "q1_s"):
        return entry.q1_s, entry.median_s, entry.q3_s
    if isinstance(entry, Mapping):
        median = entry.get("median_s", entry.get("median"))
        if median is None:
            raise ValueError(f"a timing entry needs 'median_s', got keys {sorted(entry)}")
        q1 = entry.get("q1_s", entry.get("q1"))
        q3 = entry.get("q3_s", entry.get("q3"))
        if q1 is None or q3 is None:
            half = (entry.get("iqr_s", entry.get("iqr")) or 0.0) / 2
            q1, q3 = median - half, median + half
        return float(q1), float(median), float(q3)
    if isinstance(entry, (int, float)):
        return float(entry), float(entry), float(entry)
    raise TypeError(f"cannot read a timing from {type(entry).__name__}")


def _name(framework: str) -> str:
    return FRAMEWORKS.get(framework, framework)


def speed(subject: Any, other: Any, *, question: str, subject_name: str = "torch", other_name: str = "jax",
          subject_tool: str = "", other_tool: str = "", caveat: str = "") -> Verdict:
    """Is ``subject`` faster than ``other``?

    Both are timings of the same work (Timing, ladder entry dict, or seconds).
    The ratio is ``other / subject`` when ``subject`` is faster, so it always
    reads as "the winner is R× faster" (R >= 1).
    """
    a1, am, a3 = _quartiles(subject)
    b1, bm, b3 = _quartiles(other)
    if min(a1, am, b1, bm) <= 0:
        raise ValueError("timings must be positive")
    lo, hi = a1 / b3, a3 / b1  # interval of subject/other
    ratio = am / bm
    who_a = _name(subject_name) + (f" ({subject_tool})" if subject_tool else "")
    who_b = _name(other_name) + (f" ({other_tool})" if other_tool else "")
    if lo <= 1.0 <= hi:
        label, winner = WITHIN, None
        sentence = (f"{who_a} and {who_b} are within noise of each other: {fmt_seconds(am)} against "
                    f"{fmt_seconds(bm)}, a ratio of {fmt_number(ratio)} whose quartile interval "
                    f"({fmt_number(lo)} to {fmt_number(hi)}) holds 1.")
        factor = max(ratio, 1 / ratio)
    elif ratio < 1:
        label, winner, factor = FASTER, subject_name, 1 / ratio
        sentence = (f"{who_a} is {fmt_ratio(factor)} faster than {who_b}: {fmt_seconds(am)} against "
                    f"{fmt_seconds(bm)} (quartile interval of the ratio {fmt_number(1 / hi)}–{fmt_number(1 / lo)}×).")
    else:
        label, winner, factor = SLOWER, other_name, ratio
        sentence = (f"{who_b} is {fmt_ratio(factor)} faster than {who_a}: {fmt_seconds(bm)} against "
                    f"{fmt_seconds(am)} (quartile interval of the ratio {fmt_number(lo)}–{fmt_number(hi)}×).")
    if caveat:
        sentence += " " + caveat
    sides = {
        subject_name: {"tool": subject_tool, "median_s": am, "q1_s": a1, "q3_s": a3, "iqr_s": a3 - a1},
        other_name: {"tool": other_tool, "median_s": bm, "q1_s": b1, "q3_s": b3, "iqr_s": b3 - b1},
    }
    return Verdict(question=question, label=label, sentence=sentence,
                   test="ratio of medians; within noise when q1/q3 .. q3/q1 holds 1",
                   subject=subject_name, other=other_name, winner=winner, ratio=factor,
                   interval=(lo, hi), sides=sides, caveat=caveat)


# ----------------------------------------------------------------------------- seeds


def seeds(subject: Sequence[float], other: Sequence[float], *, question: str, quantity: str = "test accuracy",
          unit: str = " points", subject_name: str = "torch", other_name: str = "jax",
          higher_is_better: bool = True, caveat: str = "") -> Verdict:
    """Do two seed-sets differ by more than seed noise?

    The difference of means against two standard errors of the difference
    (Welch). With one seed on a side its spread is unknown: the verdict is
    then "within seed noise" only for an exact tie, and says so.
    """
    a, b = [float(x) for x in subject], [float(x) for x in other]
    if not a or not b:
        raise ValueError("seeds() needs at least one value on each side")
    ma, mb = statistics.fmean(a), statistics.fmean(b)
    va = statistics.variance(a) if len(a) > 1 else 0.0
    vb = statistics.variance(b) if len(b) > 1 else 0.0
    se = math.sqrt(va / len(a) + vb / len(b))
    diff = ma - mb
    threshold = 2 * se
    n = min(len(a), len(b))
    seeds_text = plural(n, "seed") if len(a) == len(b) else f"{len(a)} and {len(b)} seeds"
    sign_diff = fmt_signed(diff)
    if abs(diff) <= threshold:
        label, winner = "within seed noise", None
        sentence = (f"{_name(subject_name)} and {_name(other_name)} reach the same {quantity} within seed noise: "
                    f"{fmt_number(ma)} against {fmt_number(mb)}{unit} over {seeds_text}, a difference of "
                    f"{sign_diff}{unit} inside two standard errors ({fmt_number(threshold)}{unit}).")
    else:
        better_subject = (diff > 0) == higher_is_better
        label = "higher" if diff > 0 else "lower"
        winner = subject_name if better_subject else other_name
        loser = other_name if better_subject else subject_name
        win_mean, lose_mean = (ma, mb) if better_subject else (mb, ma)
        sentence = (f"{_name(winner)} reaches a {'higher' if higher_is_better else 'lower'} {quantity}: "
                    f"{fmt_number(win_mean)}{unit} against {fmt_number(lose_mean)}{unit} for {_name(loser)} over "
                    f"{seeds_text}, a difference of {fmt_signed(win_mean - lose_mean)}{unit}, beyond two standard "
                    f"errors ({fmt_number(threshold)}{unit}).")
    if n < 2:
        sentence += " With one seed the spread is unknown; treat this as a single observation."
    if caveat:
        sentence += " " + caveat
    sides = {
        subject_name: {"mean": ma, "std": math.sqrt(va), "n": len(a)},
        other_name: {"mean": mb, "std": math.sqrt(vb), "n": len(b)},
    }
    return Verdict(question=question, label=label, sentence=sentence,
                   test="difference of means against two Welch standard errors",
                   subject=subject_name, other=other_name, winner=winner, difference=diff,
                   threshold=threshold, sides=sides, caveat=caveat)


# ----------------------------------------------------------------------------- the ladder


def ladder_entry(timing: Any = None, *, error: BaseException | str | None = None,
                 not_applicable: str | None = None) -> dict[str, Any]:
    """One ladder row for the results JSON: ``median_s``, ``iqr_s``,
    ``q1_s``, ``q3_s``, ``compile_s``, ``first_s``, ``error`` (one line,
    or None) and ``not_applicable`` (why the tool cannot run on this machine,
    e.g. a CUDA-graph rung on a CPU, or None). A failed tool passes
    ``error=`` and no timing; a tool that does not apply, ``not_applicable=``."""
    empty = {"median_s": None, "iqr_s": None, "q1_s": None, "q3_s": None, "compile_s": None, "first_s": None}
    if error is not None:
        text = error if isinstance(error, str) else f"{type(error).__name__}: {error}"
        text = " ".join(str(text).split())[:300]
        return {**empty, "error": text, "not_applicable": None}
    if not_applicable is not None:
        return {**empty, "error": None, "not_applicable": " ".join(str(not_applicable).split())}
    q1, median, q3 = _quartiles(timing)
    compile_s = getattr(timing, "compile_s", None)
    first_s = getattr(timing, "first_s", None)
    if isinstance(timing, Mapping):
        compile_s = timing.get("compile_s", timing.get("compile"))
        first_s = timing.get("first_s", timing.get("first"))
    return {"median_s": median, "iqr_s": q3 - q1, "q1_s": q1, "q3_s": q3, "compile_s": compile_s,
            "first_s": first_s, "error": None, "not_applicable": None}


def scaled(entries: Mapping[str, Mapping[str, Any]], factor: float) -> dict[str, dict[str, Any]]:
    """Ladder entries with their times multiplied by ``factor`` (e.g. steps
    per epoch over steps per timed call); compile times, errors and reasons
    are kept as they are."""
    out = {}
    for name, entry in entries.items():
        e = dict(entry)
        for key in ("median_s", "iqr_s", "q1_s", "q3_s"):
            if e.get(key) is not None:
                e[key] = e[key] * factor
        out[name] = e
    return out


def _split(name: str) -> tuple[str, str]:
    framework, sep, tool = name.partition("/")
    if not sep or not tool:
        raise ValueError(f"ladder names are '<framework>/<tool>', got {name!r}")
    return framework, tool


def _usable(entry: Any) -> bool:
    if isinstance(entry, Mapping):
        return not entry.get("error") and entry.get("median_s", entry.get("median")) is not None
    return entry is not None


def best(entries: Mapping[str, Any], frameworks: Sequence[str] = ("torch", "jax")) -> dict[str, Any]:
    """Each framework's fastest working tool: ``{"torch": tool, "jax": tool,
    "ratio": torch_median / jax_median}`` (ratio > 1: JAX's best is faster).
    A framework whose every tool failed gets None (and the ratio is None)."""
    out: dict[str, Any] = {}
    medians: dict[str, float] = {}
    for framework in frameworks:
        candidates = [(_quartiles(e)[1], _split(n)[1]) for n, e in entries.items()
                      if _split(n)[0] == framework and _usable(e)]
        if candidates:
            medians[framework], out[framework] = min(candidates)
        else:
            out[framework] = None
    a, b = frameworks[0], frameworks[1]
    out["ratio"] = medians[a] / medians[b] if a in medians and b in medians else None
    return out


def relative(seconds: float, reference_s: float, reference: str, subject: str = "") -> str:
    """``seconds`` against ``reference_s`` as a factor >= 1: "2.7× the time of
    <reference>" or "1.5× faster than <reference>"; with a ``subject``, a clause
    with the verb that fits: "<subject> takes 2.7× the time of <reference>" or
    "<subject> is 1.5× faster than <reference>"."""
    if seconds >= reference_s:
        text, verb = f"{fmt_ratio(seconds / reference_s)} the time of {reference}", "takes"
    else:
        text, verb = f"{fmt_ratio(reference_s / seconds)} faster than {reference}", "is"
    return f"{subject} {verb} {text}" if subject else text


def _against(seconds: float, rival_s: float, rival: str) -> str:
    """How a rung compares with the rival's best, as a factor >= 1."""
    return relative(seconds, rival_s, f"{_name(rival)}'s best")


def ladder(entries: Mapping[str, Any], *, question: str, caveat: str = "",
           frameworks: Sequence[str] = ("torch", "jax")) -> Verdict:
    """Best against best, then what the ladder shows.

    The sentence first compares each framework's fastest working tool (with
    the quartile test of :func:`speed`), then names the slowest working rung
    of each side against the other's best, and lists every tool that failed.
    """
    a, b = frameworks
    chosen = best(entries, frameworks)
    failed = [f"{_name(_split(n)[0])} {_split(n)[1]} ({e.get('error')})" for n, e in entries.items()
              if isinstance(e, Mapping) and e.get("error")]
    absent = [f"{_name(_split(n)[0])} {_split(n)[1]} ({e.get('not_applicable')})" for n, e in entries.items()
              if isinstance(e, Mapping) and e.get("not_applicable") and not e.get("error")]
    if chosen[a] is None or chosen[b] is None:
        missing = a if chosen[a] is None else b
        sentence = (f"No {_name(missing)} tool ran, so there is no comparison: " + "; ".join(failed + absent) + ".")
        return Verdict(question=question, label="no comparison", sentence=sentence, test="none",
                       subject=a, other=b, winner=None, caveat=caveat)
    head = speed(entries[f"{a}/{chosen[a]}"], entries[f"{b}/{chosen[b]}"], question=question,
                 subject_name=a, other_name=b, subject_tool=chosen[a], other_tool=chosen[b])
    parts = [f"Best against best: {head.sentence}"]
    for side, rival in ((a, b), (b, a)):
        working = [(_quartiles(e)[1], _split(n)[1]) for n, e in entries.items()
                   if _split(n)[0] == side and _usable(e)]
        if len(working) < 2:
            continue
        slowest_s, slowest = max(working)
        fastest_s, fastest = min(working)
        rival_s = _quartiles(entries[f"{rival}/{chosen[rival]}"])[1]
        parts.append(f"{_name(side)}'s ladder runs from {slowest} ({_against(slowest_s, rival_s, rival)}) to "
                     f"{fastest} ({_against(fastest_s, rival_s, rival)}).")
    if failed:
        parts.append("Failed, kept as findings: " + "; ".join(failed) + ".")
    if absent:
        parts.append("Not applicable on this machine: " + "; ".join(absent) + ".")
    if caveat:
        parts.append(caveat)
    head.sentence = " ".join(parts)
    head.caveat = caveat
    return head
