"""Verdicts: the one place where measured numbers become claims.

Every sentence a post prints with a number in it comes from here, so that a
claim changes when the numbers do and every notebook decides "faster",
"slower" or "within noise" the same way.

Two kinds of claim, each a pure function of the numbers it is given
(nothing global is read; the formulas are in :mod:`sidebyside.lab.stats`):

- :func:`speed`: one framework's timing against the other's, each a timing
  entry of the one schema (:func:`sidebyside.lab.entry.read`) measured in the
  same independent processes. The test: the geometric mean of the per-process
  time ratios with its 95% t-interval over the processes. "practically tied"
  when the interval holds 1 and lies wholly inside the machine kind's noise
  floor (carried by the entries); "within noise" when it holds 1 otherwise;
  "too few processes" with fewer than 2; when it excludes 1 the faster side
  wins by that ratio, as "a small, real difference" (label "small
  difference") when the ratio lies inside the floor. The times a sentence
  prints are each side's geometric mean of its per-process medians
  (:func:`typical_s`), whose ratio is the verdict's ratio, so a sentence's
  figures agree with each other. What the quiet-machine check found during
  the measurement (carried by the entries) is said in the caveat. A race
  whose ratio moved between runs on machines of this fingerprint more than
  its runs' intervals said (the entries carry the machine kind's spreads
  between runs, by verdict id: :func:`sidebyside.lab.floors.between_runs`)
  has that spread added to its interval, and the sentence says so.
- :func:`seeds`: a quantity measured over several seeds on each side (test
  accuracy, say). Welch's t-test: the difference of the means against its
  95% interval, with the smallest difference the seeds could have detected.

The ladder of tools (the compile matrix: best against best, then what the rest
of the ladder shows) builds on :func:`speed` in :mod:`sidebyside.lab.ladders`.

Who races, and at what size. Every verdict carries ``contestants`` (per side:
framework, tool, implementation, and ``origin``: ``"framework"`` when the
implementation ships with the framework, ``"project"`` when this project wrote
it; see :func:`~sidebyside.lab.framing.contestant`) and ``scale`` (model parameters, input, batch,
precision, device; see :func:`~sidebyside.lab.framing.scale_of`). :func:`~sidebyside.lab.framing.frame` attaches them and
enforces the rules: a verdict of ``kind="framework"`` races only what the
frameworks ship (a hand-written kernel gets a verdict of ``kind="custom"``),
and a verdict set against a claim made at another scale (:func:`~sidebyside.lab.framing.claim`) says
it does not answer that claim yet. A precision row that did not take effect on
both sides (:func:`~sidebyside.lab.framing.precision_applied`) gets :func:`not_applied`, no race.

Direction: ``ratio`` and ``interval`` are always the subject's time over the
other's (below 1: the subject is faster); ``factor`` (>= 1) is how many times
faster the winner is, and a sentence with a winner states its speed-up and
interval in the winner's terms ("PyTorch is 1.71× faster (1.43–2.12×, ...)").

A :class:`Verdict` is returned, never printed: ``verdict.sentence`` for the
post, ``verdict.to_dict()`` for the results JSON (the site's verdict box and
scoreboard read it).

Inputs: timing entries (seconds) and plain numbers; a bare number is refused.
Outputs: :class:`Verdict`. Who races and at what size is :mod:`sidebyside.lab.framing`; how numbers
read, :mod:`sidebyside.lab.words`; the ladder of tools, :mod:`sidebyside.lab.ladders`.
"""

from __future__ import annotations

import dataclasses
import math
import statistics
from collections.abc import Mapping, Sequence
from typing import Any

from sidebyside.lab import stats
from sidebyside.lab.entry import read
from sidebyside.lab.framing import frame, verdict_id
from sidebyside.lab.words import FRAMEWORKS, fmt_number, fmt_ratio, fmt_seconds, fmt_signed, plural

__all__ = ["Verdict", "not_applied", "speed", "seeds", "typical_s", "FASTER", "SLOWER", "WITHIN", "TIED", "SMALL",
           "TOO_FEW"]

FASTER, SLOWER, WITHIN, TIED, TOO_FEW = "faster", "slower", "within noise", "practically tied", "too few processes"
#: A winner by a ratio inside the noise floor, with an interval that excludes 1.
SMALL = "small difference"
NOT_APPLIED = "not applied"


@dataclasses.dataclass
class Verdict:
    """A claim and the evidence behind it.

    ``label`` is from the point of view of ``subject`` (the first side):
    "faster"/"slower"/"within noise"/"practically tied", or "small difference" (a winner by
    a ratio inside the noise floor) for speed, "higher"/"lower"/"within seed
    noise" for seeds, "not applied" for a precision row that did not take
    effect. ``winner`` is the framework key that wins, or None. ``ratio`` and
    ``interval``: the subject's time over the other's; ``factor``: the
    winner's speed-up (>= 1). ``contestants``: side key -> :func:`~sidebyside.lab.framing.contestant`;
    ``scale``: :func:`~sidebyside.lab.framing.scale_of`; ``claim``: :func:`~sidebyside.lab.framing.claim` plus ``answers``
    (bool) and ``differs`` (the scale fields that differ); ``kind``:
    "framework" (what each framework ships) or "custom" (a hand-written
    implementation's own verdict); ``cause``: what the run measured that
    explains a surprising result (the site then does not flag it suspect);
    ``race``: the race's name, as its post gives it; ``between``: the spread between runs its
    interval was widened by (``{"sd", "runs"}``), or None; ``to_dict()`` writes the verdict's stable ``id``
    from it and the scale (:func:`~sidebyside.lab.framing.verdict_id`).
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
    factor: float | None = None
    contestants: dict[str, dict[str, Any]] = dataclasses.field(default_factory=dict)
    scale: dict[str, Any] = dataclasses.field(default_factory=dict)
    claim: dict[str, Any] | None = None
    kind: str = "framework"
    processes: int | None = None
    floor: float | None = None
    busy: list[str] = dataclasses.field(default_factory=list)
    detectable: float | None = None
    cause: str = ""
    race: str = ""
    between: dict[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        out = dataclasses.asdict(self)
        out["id"] = verdict_id(self.race or self.question, self.scale)
        if self.interval is not None:
            out["interval"] = list(self.interval)
        return out


# ----------------------------------------------------------------------------- speed


def typical_s(entry: Any, n: int | None = None) -> float:
    """The time every sentence prints for a timing entry, in seconds: the geometric mean of its
    per-process medians (the first ``n``; all by default; :func:`sidebyside.lab.stats.geomean`),
    so that two entries' times divide to their verdict's ratio. An entry without per-process
    medians (or ``n=0``) prints its ``median_s``."""
    e = read(entry)
    own = e["processes_s"][:n] if n is not None else e["processes_s"]
    return stats.geomean(own) if own else e["median_s"]


def _name(framework: str) -> str:
    return FRAMEWORKS.get(framework, framework)


def _interval_text(lo: float, hi: float, winner_is_subject: bool | None) -> str:
    """An interval of the subject's time over the other's, in the winner's terms (a speed-up)
    when there is a winner, else as the time ratio."""
    if winner_is_subject is None:
        return f"{fmt_number(lo)}–{fmt_number(hi)}"
    low, high = (1 / hi, 1 / lo) if winner_is_subject else (lo, hi)
    return f"{fmt_number(low)}–{fmt_ratio(high)}"


def speed(subject: Any, other: Any, *, question: str, subject_name: str = "torch", other_name: str = "jax",
          subject_tool: str = "", other_tool: str = "", caveat: str = "",
          contestants: Mapping[str, Mapping[str, Any]] | None = None, scale: Mapping[str, Any] | None = None,
          against: Mapping[str, Any] | None = None, kind: str = "framework", race: str = "") -> Verdict:
    """Is ``subject`` faster than ``other``?

    Both are timings of the same work, measured in the same processes (:class:`sidebyside.lab.entry.Timing`
    or a timing entry; a bare number raises TypeError). The test (:mod:`sidebyside.lab.stats`):
    the geometric mean of the per-process time ratios with its 95% t-interval over the
    processes. With the noise floor the entries carry: "practically tied" when the interval holds
    1 and lies wholly inside the floor, "within noise" when it holds 1 otherwise; when it excludes
    1 the faster side wins by that ratio, labelled "small difference" (a small, real difference)
    when the ratio lies inside the floor and "faster"/"slower" otherwise; "too few processes"
    with fewer than 2. The two times the sentence prints are each side's :func:`typical_s` over
    the same processes (their ratio is ``ratio``; kept as each side's ``geomean_s``). What the
    quiet-machine check found during the measurement (the entries' ``busy``) is added to the
    caveat, with its figures. The race's spread between runs on this machine kind (the entries'
    ``between``, by this verdict's id) widens the interval (:func:`sidebyside.lab.stats.ratio_interval`).
    ``ratio`` and ``interval`` are the subject's time over the other's;
    ``factor`` (>= 1) the winner's speed-up. ``contestants``, ``scale``, ``against``, ``kind`` and
    ``race`` (the race's name, for its id) go to :func:`~sidebyside.lab.framing.frame`.
    """
    a, b = read(subject), read(other)
    if min(a["median_s"], b["median_s"]) <= 0:
        raise ValueError("timings must be positive")
    n = min(len(a["processes_s"]), len(b["processes_s"]))
    floor = a["floor"] if a["floor"] is not None else b["floor"]
    between = (a["between"] or b["between"]).get(verdict_id(race or question, scale))
    busy = list(dict.fromkeys(a["busy"] + b["busy"]))
    if busy:
        more = f"; and {plural(len(busy) - 2, 'other finding')}" if len(busy) > 2 else ""
        caveat = (f"{caveat} The machine was busy while this was measured ({'; '.join(busy[:2])}{more}); the "
                  "interval includes that.").strip()
    who_a = _name(subject_name) + (f" ({subject_tool})" if subject_tool else "")
    who_b = _name(other_name) + (f" ({other_tool})" if other_tool else "")
    interval = None
    floor_text = (f"this machine kind's noise floor of ±{fmt_number(100 * floor)}%" if floor is not None
                  else "no noise floor measured for this machine kind")
    if n < 2:
        am, bm = typical_s(a, n), typical_s(b, n)
        ratio = am / bm
        label, winner, factor = TOO_FEW, None, max(ratio, 1 / ratio)
        sentence = (f"{who_a} {fmt_seconds(am)} against {who_b} {fmt_seconds(bm)}, measured in "
                    f"{plural(n, 'process', 'processes')}: one process is one observation, so no verdict is drawn "
                    "(a verdict pools at least 2 independent processes).")
        test = "none: fewer than 2 independent processes"
    else:
        found = stats.ratio_interval(a["processes_s"][:n], b["processes_s"][:n],
                                     between_sd=between["sd"] if between else 0.0)
        ratio, interval, am, bm = found["ratio"], found["interval"], found["subject_s"], found["other_s"]
        lo, hi = interval
        over = f"{n} processes" + (f" and this race's spread between {between['runs']} runs on machines of this "
                                   "fingerprint" if between else "")
        times = f"{fmt_seconds(am)} against {fmt_seconds(bm)}"
        over_text = f"{_name(subject_name)}'s time over {_name(other_name)}'s {fmt_number(ratio)}"
        holds_one = lo <= 1.0 <= hi
        if holds_one and stats.inside_floor(lo, floor) and stats.inside_floor(hi, floor):
            label, winner, factor = TIED, None, max(ratio, 1 / ratio)
            sentence = (f"{who_a} and {who_b} are practically tied: {times} ({over_text}, 95% confidence interval "
                        f"{_interval_text(lo, hi, None)} over {over}, which lies inside {floor_text}).")
        elif holds_one:
            label, winner, factor = WITHIN, None, max(ratio, 1 / ratio)
            sentence = (f"{who_a} and {who_b} are within noise of each other: {times} ({over_text}, 95% confidence "
                        f"interval {_interval_text(lo, hi, None)} over {over}, which holds 1).")
        else:
            subject_wins = ratio < 1
            small = stats.inside_floor(ratio, floor)
            label = SMALL if small else FASTER if subject_wins else SLOWER
            winner = subject_name if subject_wins else other_name
            factor = 1 / ratio if subject_wins else ratio
            fast, slow = (who_a, who_b) if subject_wins else (who_b, who_a)
            fast_s, slow_s = (am, bm) if subject_wins else (bm, am)
            how = f"{_interval_text(lo, hi, subject_wins)}, 95% confidence interval over {over}"
            what = ", a small, real difference" if small else ""
            if small:
                how = f"{how}, which excludes 1; the ratio lies inside {floor_text}"
            sentence = (f"{fast} is {fmt_ratio(factor)} faster than {slow}{what} ({how}): {fmt_seconds(fast_s)} "
                        f"against {fmt_seconds(slow_s)}.")
        test = (found["method"] + "; the times printed are each side's geometric mean of its per-process medians, "
                "whose ratio is the time ratio; practically tied when the interval holds 1 and lies inside the "
                "noise floor, within noise when it holds 1 otherwise, a small, real difference when it excludes 1 "
                f"and the ratio lies inside the floor ({floor_text})")
    if caveat:
        sentence += " " + caveat
    sides = {name: {"tool": tool, "geomean_s": t, **{k: e[k] for k in ("median_s", "q1_s", "q3_s", "iqr_s",
                                                                       "processes_s", "first_per_process_s")}}
             for name, tool, t, e in ((subject_name, subject_tool, am, a), (other_name, other_tool, bm, b))}
    v = Verdict(question=question, label=label, sentence=sentence, test=test, subject=subject_name, other=other_name,
                winner=winner, ratio=ratio, interval=interval, sides=sides, caveat=caveat, factor=factor,
                processes=n, floor=floor, busy=busy, between=dict(between) if between and interval else None)
    return frame(v, contestants=contestants, scale=scale, against=against, kind=kind, race=race)


def not_applied(question: str, reasons: Mapping[str, str | None], *, subject_name: str = "torch",
                other_name: str = "jax", scale: Mapping[str, Any] | None = None,
                contestants: Mapping[str, Mapping[str, Any]] | None = None, race: str = "") -> Verdict:
    """The verdict of a precision row that did not take effect on every side
    (``reasons``: side key -> why not, or None where it did): no race, the
    label "not applied" and a sentence "not applied: <reason>"."""
    why = "; ".join(f"{_name(k)}: {r}" for k, r in reasons.items() if r)
    if not why:
        raise ValueError("not_applied() needs a reason on at least one side")
    v = Verdict(question=question, label=NOT_APPLIED, sentence=f"not applied: {why}. No verdict is drawn.",
                test="none: the setting did not take effect on both sides", subject=subject_name,
                other=other_name, winner=None, caveat=f"not applied: {why}")
    return frame(v, contestants=contestants, scale=scale, race=race)


# ----------------------------------------------------------------------------- seeds


def seeds(subject: Sequence[float], other: Sequence[float], *, question: str, quantity: str = "test accuracy",
          unit: str = " points", subject_name: str = "torch", other_name: str = "jax",
          higher_is_better: bool = True, caveat: str = "", min_seeds: int = 1,
          contestants: Mapping[str, Mapping[str, Any]] | None = None, scale: Mapping[str, Any] | None = None,
          against: Mapping[str, Any] | None = None, race: str = "") -> Verdict:
    """Do two seed-sets differ by more than seed noise?

    Welch's test (:func:`sidebyside.lab.stats.welch`): the difference of the means, its 95%
    interval from Welch's standard error and the t quantile for the Welch–Satterthwaite degrees
    of freedom; "within seed noise" when the interval holds 0. The sentence states the smallest
    difference the seeds could have detected (80% power). With one seed on a side its spread is
    unknown: the verdict is then "within seed noise" only for an exact tie, and says so. With
    fewer than ``min_seeds`` seeds on a side no verdict is drawn (label "too few seeds").
    ``contestants``, ``scale``, ``against`` and ``race`` (the race's name, for its id) go to :func:`~sidebyside.lab.framing.frame`.
    """
    a, b = [float(x) for x in subject], [float(x) for x in other]
    if not a or not b:
        raise ValueError("seeds() needs at least one value on each side")
    test = stats.welch(a, b)
    ma, mb = statistics.fmean(a), statistics.fmean(b)
    va = statistics.variance(a) if len(a) > 1 else 0.0
    vb = statistics.variance(b) if len(b) > 1 else 0.0
    diff = test["difference"]
    interval = test["interval"]
    threshold = (interval[1] - interval[0]) / 2 if interval else 0.0
    n = min(len(a), len(b))
    seeds_text = plural(n, "seed") if len(a) == len(b) else f"{len(a)} and {len(b)} seeds"
    detectable = (f"; these seeds could detect a difference of {fmt_number(test['detectable'])}{unit} or more"
                  if test["detectable"] else "")
    how = (f"Welch's 95% interval {fmt_signed(interval[0])} to {fmt_signed(interval[1])}{unit}, "
           f"{fmt_number(test['df'])} degrees of freedom{detectable}" if interval else "")
    if n < min_seeds:
        label, winner = "too few seeds", None
        sentence = (f"{_name(subject_name)} {fmt_number(ma)} against {_name(other_name)} {fmt_number(mb)}{unit} "
                    f"({quantity}) over {seeds_text}: fewer than the {min_seeds} seeds a verdict needs, "
                    "so none is drawn.")
    elif not test["significant"]:
        label, winner = "within seed noise", None
        sentence = (f"{_name(subject_name)} and {_name(other_name)} reach the same {quantity} within seed noise: "
                    f"{fmt_number(ma)} against {fmt_number(mb)}{unit} over {seeds_text}, a difference of "
                    f"{fmt_signed(diff)}{unit}" + (f" ({how}, which holds 0)." if how else "."))
    else:
        better_subject = (diff > 0) == higher_is_better
        label = "higher" if diff > 0 else "lower"
        winner = subject_name if better_subject else other_name
        loser = other_name if better_subject else subject_name
        win_mean, lose_mean = (ma, mb) if better_subject else (mb, ma)
        sentence = (f"{_name(winner)} reaches a {'higher' if higher_is_better else 'lower'} {quantity}: "
                    f"{fmt_number(win_mean)}{unit} against {fmt_number(lose_mean)}{unit} for {_name(loser)} over "
                    f"{seeds_text}, a difference of {fmt_signed(win_mean - lose_mean)}{unit}"
                    + (f" ({how}, which excludes 0)." if how else "."))
    if n < 2 and n >= min_seeds:
        sentence += " With one seed the spread is unknown; treat this as a single observation."
    if caveat:
        sentence += " " + caveat
    sides = {
        subject_name: {"mean": ma, "std": math.sqrt(va), "n": len(a)},
        other_name: {"mean": mb, "std": math.sqrt(vb), "n": len(b)},
    }
    v = Verdict(question=question, label=label, sentence=sentence,
                test="Welch's t-test: the difference of means against its 95% interval (Welch's standard error, "
                     "t quantile for the Welch–Satterthwaite degrees of freedom)",
                subject=subject_name, other=other_name, winner=winner, difference=diff,
                threshold=threshold, sides=sides, caveat=caveat,
                interval=tuple(interval) if interval else None)
    v.detectable = test["detectable"]  # the smallest difference these seeds could detect (80% power)
    return frame(v, contestants=contestants, scale=scale, against=against, race=race)

