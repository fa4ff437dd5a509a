"""Verdicts: the one place where measured numbers become claims.

Every sentence a post prints with a number in it comes from here, so that a
claim changes when the numbers do and every notebook decides "faster",
"slower" or "within noise" the same way.

Two kinds of claim, each a pure function of the numbers it is given
(nothing global is read; the formulas are in :mod:`sidebyside.lab.stats`):

- :func:`speed`: one framework's timing against the other's, each a timing
  entry of the one schema (:func:`sidebyside.lab.timing.read`) measured in the
  same independent processes. The test: the geometric mean of the per-process
  time ratios with its 95% t-interval over the processes. "within noise" when
  the interval holds 1; "practically tied" when the ratio lies inside the
  machine kind's noise floor (carried by the entries); "too few processes"
  with fewer than 2; otherwise the faster side wins by that ratio. What the
  quiet-machine check found during the measurement (carried by the entries)
  is said in the caveat.
- :func:`seeds`: a quantity measured over several seeds on each side (test
  accuracy, say). Welch's t-test: the difference of the means against its
  95% interval, with the smallest difference the seeds could have detected.

And the ladder of tools (the compile matrix): a mapping
``"<framework>/<tool>" -> entry`` where an entry is a timing entry or
``error`` / ``not_applicable`` for a tool that failed or cannot run here.
:func:`best` picks each framework's fastest working tool; :func:`ladder`
compares best with best and says what the rest of the ladder shows.

Who races, and at what size. Every verdict carries ``contestants`` (per side:
framework, tool, implementation, and ``origin``: ``"framework"`` when the
implementation ships with the framework, ``"project"`` when this project wrote
it; see :func:`contestant`) and ``scale`` (model parameters, input, batch,
precision, device; see :func:`scale_of`). :func:`frame` attaches them and
enforces the rules: a verdict of ``kind="framework"`` races only what the
frameworks ship (a hand-written kernel gets a verdict of ``kind="custom"``),
and a verdict set against a claim made at another scale (:func:`claim`) says
it does not answer that claim yet. A precision row that did not take effect on
both sides (:func:`precision_applied`) gets :func:`not_applied`, no race.

Direction: ``ratio`` and ``interval`` are always the subject's time over the
other's (below 1: the subject is faster); ``factor`` (>= 1) is how many times
faster the winner is, and a sentence with a winner states its speed-up and
interval in the winner's terms ("PyTorch is 1.71× faster (1.43–2.12×, ...)").

A :class:`Verdict` is returned, never printed: ``verdict.sentence`` for the
post, ``verdict.to_dict()`` for the results JSON (the site's verdict box and
scoreboard read it).

Inputs: timing entries (seconds) and plain numbers; a bare number is refused.
Outputs: :class:`Verdict`; formatting helpers :func:`fmt_ratio`,
:func:`fmt_seconds`, :func:`fmt_number`, :func:`plural`.
"""

from __future__ import annotations

import dataclasses
import math
import statistics
from collections.abc import Mapping, Sequence
from typing import Any

from sidebyside.lab import stats

__all__ = [
    "FRAMEWORKS",
    "Verdict",
    "contestant",
    "scale_of",
    "scales_text",
    "claim",
    "frame",
    "check_headline",
    "precision_applied",
    "not_applied",
    "speed",
    "seeds",
    "best",
    "ladder",
    "ladder_entry",
    "slower_than_eager",
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

FASTER, SLOWER, WITHIN, TIED, TOO_FEW = "faster", "slower", "within noise", "practically tied", "too few processes"
NOT_APPLIED = "not applied"

#: Where an implementation comes from: shipped with its framework, or written here.
#: "built_with": written here in the framework's own tools only (jnp, Pallas), where the framework
#: has no built-in; it races as the framework's. "project": code outside the framework (a C++
#: kernel through XLA's FFI), which never heads a framework verdict.
ORIGINS = {"framework": "ships with {framework}", "built_with": "written in {framework}, only what it ships",
           "project": "written by this project"}

#: The scale fields a verdict box shows, in order, and how each reads.
SCALE_FIELDS = ("parameters", "input", "batch", "precision", "device")


@dataclasses.dataclass
class Verdict:
    """A claim and the evidence behind it.

    ``label`` is from the point of view of ``subject`` (the first side):
    "faster"/"slower"/"within noise" for speed, "higher"/"lower"/"within seed
    noise" for seeds, "not applied" for a precision row that did not take
    effect. ``winner`` is the framework key that wins, or None. ``ratio`` and
    ``interval``: the subject's time over the other's; ``factor``: the
    winner's speed-up (>= 1). ``contestants``: side key -> :func:`contestant`;
    ``scale``: :func:`scale_of`; ``claim``: :func:`claim` plus ``answers``
    (bool) and ``differs`` (the scale fields that differ); ``kind``:
    "framework" (what each framework ships) or "custom" (a hand-written
    implementation's own verdict).
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


def _read(entry: Any) -> dict[str, Any]:
    """A timing entry of the one schema (:func:`sidebyside.lab.timing.read`, imported when first needed:
    the publisher reads verdicts without the harness)."""
    from sidebyside.lab import timing

    return timing.read(entry)


def _median(entry: Any) -> float:
    return _read(entry)["median_s"]


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
          against: Mapping[str, Any] | None = None, kind: str = "framework") -> Verdict:
    """Is ``subject`` faster than ``other``?

    Both are timings of the same work, measured in the same processes (:class:`timing.Timing`
    or a timing entry; a bare number raises TypeError). The test (:mod:`sidebyside.lab.stats`):
    the geometric mean of the per-process time ratios with its 95% t-interval over the
    processes; "within noise" when the interval holds 1, "practically tied" when the ratio lies
    inside the noise floor the entries carry, "too few processes" with fewer than 2; otherwise
    the faster side wins by that ratio. What the quiet-machine check found during the
    measurement (the entries' ``busy``) is added to the caveat, with its figures. ``ratio`` and
    ``interval`` are the subject's time over the other's; ``factor`` (>= 1) the winner's
    speed-up. ``contestants``, ``scale``, ``against`` and ``kind`` go to :func:`frame`.
    """
    a, b = _read(subject), _read(other)
    am, bm = a["median_s"], b["median_s"]
    if min(am, bm) <= 0:
        raise ValueError("timings must be positive")
    n = min(len(a["processes_s"]), len(b["processes_s"]))
    floor = a["floor"] if a["floor"] is not None else b["floor"]
    busy = list(dict.fromkeys(a["busy"] + b["busy"]))
    if busy:
        more = f"; and {plural(len(busy) - 2, 'other finding')}" if len(busy) > 2 else ""
        caveat = (f"{caveat} The machine was busy while this was measured ({'; '.join(busy[:2])}{more}); the "
                  "interval includes that.").strip()
    who_a = _name(subject_name) + (f" ({subject_tool})" if subject_tool else "")
    who_b = _name(other_name) + (f" ({other_tool})" if other_tool else "")
    interval, ratio = None, am / bm
    floor_text = (f"this machine kind's noise floor of ±{fmt_number(100 * floor)}%" if floor is not None
                  else "no noise floor measured for this machine kind")
    if n < 2:
        label, winner, factor = TOO_FEW, None, max(ratio, 1 / ratio)
        sentence = (f"{who_a} {fmt_seconds(am)} against {who_b} {fmt_seconds(bm)}, measured in "
                    f"{plural(n, 'process', 'processes')}: one process is one observation, so no verdict is drawn "
                    "(a verdict pools at least 2 independent processes).")
        test = "none: fewer than 2 independent processes"
    else:
        found = stats.ratio_interval(a["processes_s"][:n], b["processes_s"][:n])
        ratio, interval = found["ratio"], found["interval"]
        lo, hi = interval
        over = f"{n} processes"
        if lo <= 1.0 <= hi:
            label, winner, factor = WITHIN, None, max(ratio, 1 / ratio)
            sentence = (f"{who_a} and {who_b} are within noise of each other: {fmt_seconds(am)} against "
                        f"{fmt_seconds(bm)} ({_name(subject_name)}'s time over {_name(other_name)}'s "
                        f"{fmt_number(ratio)}, 95% confidence interval {_interval_text(lo, hi, None)} over {over}, "
                        "which holds 1).")
        elif stats.inside_floor(ratio, floor):
            label, winner, factor = TIED, None, max(ratio, 1 / ratio)
            sentence = (f"{who_a} and {who_b} are practically tied: {fmt_seconds(am)} against {fmt_seconds(bm)} "
                        f"({_name(subject_name)}'s time over {_name(other_name)}'s {fmt_number(ratio)}, 95% "
                        f"confidence interval {_interval_text(lo, hi, None)} over {over}, inside {floor_text}).")
        else:
            subject_wins = ratio < 1
            label = FASTER if subject_wins else SLOWER
            winner = subject_name if subject_wins else other_name
            factor = 1 / ratio if subject_wins else ratio
            fast, slow = (who_a, who_b) if subject_wins else (who_b, who_a)
            fast_s, slow_s = (am, bm) if subject_wins else (bm, am)
            sentence = (f"{fast} is {fmt_ratio(factor)} faster than {slow} "
                        f"({_interval_text(lo, hi, subject_wins)}, 95% confidence interval over {over}): "
                        f"{fmt_seconds(fast_s)} against {fmt_seconds(slow_s)}.")
        test = (found["method"] + "; within noise when the interval holds 1, practically tied inside the noise "
                f"floor ({floor_text})")
    if caveat:
        sentence += " " + caveat
    sides = {name: {"tool": tool, **{k: e[k] for k in ("median_s", "q1_s", "q3_s", "iqr_s", "processes_s",
                                                        "first_per_process_s")}}
             for name, tool, e in ((subject_name, subject_tool, a), (other_name, other_tool, b))}
    v = Verdict(question=question, label=label, sentence=sentence, test=test, subject=subject_name, other=other_name,
                winner=winner, ratio=ratio, interval=interval, sides=sides, caveat=caveat, factor=factor,
                processes=n, floor=floor, busy=busy)
    return frame(v, contestants=contestants, scale=scale, against=against, kind=kind)


# ----------------------------------------------------------------------------- contestants and scale


def contestant(framework: str, tool: str, implementation: str, *, origin: str = "framework") -> dict[str, Any]:
    """One side of a race: ``framework`` (a :data:`FRAMEWORKS` key), ``tool``
    (eager, ``torch.compile``, ``jax.jit``, ...), ``implementation`` (what
    does the work: "ATen's grid_sampler_2d", "jnp ops compiled by XLA", "C++
    kernel through XLA's FFI") and ``origin``: "framework" (it ships with the
    framework), "built_with" (written here with the framework's own tools
    only, e.g. jnp or Pallas, where the framework has no built-in) or
    "project" (this project's code outside the framework)."""
    if origin not in ORIGINS:
        raise ValueError(f"origin is one of {sorted(ORIGINS)}, got {origin!r}")
    return {"framework": framework, "tool": tool, "implementation": implementation, "origin": origin,
            "origin_text": ORIGINS[origin].format(framework=_name(framework))}


def scale_of(*, parameters: int | None = None, input: str | None = None, batch: int | str | None = None,  # noqa: A002
             precision: str | None = None, device: str | None = None) -> dict[str, Any]:
    """The size a verdict was measured at: model ``parameters`` (a count, or
    None for an op), ``input`` (e.g. "32×32 RGB", "8×64×128×128"),
    ``batch``, ``precision`` ("float32", "TF32", ...) and ``device``.
    ``text`` is the one line the verdict box shows."""
    out = {"parameters": parameters, "input": input, "batch": batch, "precision": precision, "device": device}
    words = []
    if parameters is not None:
        words.append(f"{_count(parameters)} parameters")
    if input is not None:
        words.append(f"input {input}")
    if batch is not None:
        words.append(f"batch {batch}")
    if precision is not None:
        words.append(str(precision))
    if device is not None:
        words.append(f"on {device}")
    out["text"] = ", ".join(words)
    return out


def scales_text(scales: Sequence[Mapping[str, Any]], *, device: bool = True) -> str:
    """The scales of several verdicts (:func:`scale_of` mappings) as one line,
    field by field in :data:`SCALE_FIELDS` order, each field's distinct values
    in their first-seen order joined by "and" ("148k parameters, input
    32×32×3, batch 16 and 64, float32"); without ``device``, the device is
    left out. Empty when no scale names anything."""
    seen: dict[str, list[Any]] = {name: [] for name in SCALE_FIELDS if device or name != "device"}
    for scale in scales:
        for name, values in seen.items():
            value = (scale or {}).get(name)
            if value is not None and value not in values:
                values.append(value)
    words = []
    for name, values in seen.items():
        if not values:
            continue
        shown = " and ".join(_count(v) if name == "parameters" and isinstance(v, (int, float)) else str(v)
                             for v in values)
        words.append({"parameters": f"{shown} parameters", "input": f"input {shown}", "batch": f"batch {shown}",
                      "device": f"on {shown}"}.get(name, shown))
    return ", ".join(words)


def _count(n: int) -> str:
    """A parameter count as people say it: 148k, 28.3M, 1.2B."""
    n = float(n)
    for size, suffix in ((1e9, "B"), (1e6, "M"), (1e3, "k")):
        if abs(n) >= size:
            return f"{fmt_number(n / size)}{suffix}"
    return fmt_number(n)


def claim(source: str, text: str, scale: Mapping[str, Any]) -> dict[str, Any]:
    """A claim made elsewhere (a seed's write-up, a paper) and the scale it
    was made at (:func:`scale_of`), for :func:`frame`'s ``against``."""
    return {"source": source, "text": text, "scale": dict(scale)}


def frame(v: Verdict, *, contestants: Mapping[str, Mapping[str, Any]] | None = None,
          scale: Mapping[str, Any] | None = None, against: Mapping[str, Any] | None = None,
          kind: str = "framework") -> Verdict:
    """Attach who raced (``contestants``: side key -> :func:`contestant`), at
    what size (``scale``: :func:`scale_of`), and the claim it is read against
    (``against``: :func:`claim`), and return ``v``.

    Rules: a ``kind="framework"`` verdict whose contestant was written by this
    project raises ValueError (a hand-written implementation gets its own
    ``kind="custom"`` verdict); when ``against``'s scale differs from
    ``scale`` in any field both state, the verdict records
    ``claim["answers"] = False`` and its sentence and caveat say that it
    does not answer the claim yet.
    """
    if kind not in ("framework", "custom"):
        raise ValueError(f"kind is 'framework' or 'custom', got {kind!r}")
    v.kind = kind
    if contestants:
        v.contestants = {k: dict(c) for k, c in contestants.items()}
    if kind == "framework":
        written = [f"{_name(k)}'s {c.get('implementation')}" for k, c in v.contestants.items()
                   if c.get("origin") == "project"]
        if written:
            raise ValueError("a framework verdict races what the frameworks ship; "
                             f"{', '.join(written)} is this project's code: give it a kind='custom' verdict")
    if scale:
        v.scale = dict(scale)
    if against is not None:
        theirs = against.get("scale", {})
        differs = [f for f in SCALE_FIELDS
                   if theirs.get(f) is not None and v.scale.get(f) is not None and theirs.get(f) != v.scale.get(f)]
        answers = not differs and bool(v.scale)
        v.claim = {**dict(against), "answers": answers, "differs": differs}
        if not answers:
            theirs_text = scale_of(**{f: theirs.get(f) for f in SCALE_FIELDS})["text"]
            why = (f"it was made at {theirs_text}, this run is at {v.scale.get('text', 'an unstated scale')}"
                   if differs else "this run states no scale to compare with")
            note = (f"This does not answer {against.get('source', 'the claim')}'s claim ({against.get('text', '')}) "
                    f"yet: {why}.")
            v.sentence = f"{v.sentence} {note}"
            v.caveat = f"{v.caveat} {note}".strip()
    return v


def check_headline(verdicts: Sequence[Verdict | Mapping[str, Any]]) -> None:
    """Raise ValueError unless the first verdict (the box's headline) is a
    framework verdict: a hand-written kernel never heads a post."""
    if not verdicts:
        return
    first = verdicts[0]
    kind = first.get("kind", "framework") if isinstance(first, Mapping) else first.kind
    if kind != "framework":
        raise ValueError("the headline verdict races what the frameworks ship; a custom verdict cannot head it")


# ----------------------------------------------------------------------------- precision that took effect


def precision_applied(result: Any, float32_result: Any, float64_result: Any, *, precision: str,
                      min_change: float = 0.0, beyond_float32: float = 10.0) -> dict[str, Any]:
    """Did a reduced-precision setting (TF32, bfloat16) take effect on one side?

    The three results of the same computation: under ``precision``, under
    float32, and under float64 (the reference). The setting took effect when
    the result differs from float32's by more than ``min_change`` and by more
    than ``beyond_float32`` times float32's own error (relative: max-abs over
    max-abs of the reference), so that a float32 computation whose order of
    additions changed between calls is not taken for TF32. Returns ``applied`` (bool),
    ``error`` and ``float32_error`` (relative max-abs error against float64)
    and ``reason`` (None when applied, else one line why not).
    """
    import numpy as np

    r, f32, f64 = (np.asarray(x, dtype=np.float64) for x in (result, float32_result, float64_result))
    scale_ = float(np.max(np.abs(f64))) or 1.0
    change = float(np.max(np.abs(r - f32))) / scale_
    out = {"precision": precision, "error": float(np.max(np.abs(r - f64))) / scale_,
           "float32_error": float(np.max(np.abs(f32 - f64))) / scale_, "change": change}
    out["applied"] = change > max(min_change, beyond_float32 * out["float32_error"])
    out["reason"] = None if out["applied"] else (
        f"the {precision} result equals the float32 result (relative change {fmt_number(change)}), "
        "so the setting did not reach the computation")
    return out


def not_applied(question: str, reasons: Mapping[str, str | None], *, subject_name: str = "torch",
                other_name: str = "jax", scale: Mapping[str, Any] | None = None,
                contestants: Mapping[str, Mapping[str, Any]] | None = None) -> Verdict:
    """The verdict of a precision row that did not take effect on every side
    (``reasons``: side key -> why not, or None where it did): no race, the
    label "not applied" and a sentence "not applied: <reason>"."""
    why = "; ".join(f"{_name(k)}: {r}" for k, r in reasons.items() if r)
    if not why:
        raise ValueError("not_applied() needs a reason on at least one side")
    v = Verdict(question=question, label=NOT_APPLIED, sentence=f"not applied: {why}. No verdict is drawn.",
                test="none: the setting did not take effect on both sides", subject=subject_name,
                other=other_name, winner=None, caveat=f"not applied: {why}")
    return frame(v, contestants=contestants, scale=scale)


# ----------------------------------------------------------------------------- seeds


def seeds(subject: Sequence[float], other: Sequence[float], *, question: str, quantity: str = "test accuracy",
          unit: str = " points", subject_name: str = "torch", other_name: str = "jax",
          higher_is_better: bool = True, caveat: str = "", min_seeds: int = 1,
          contestants: Mapping[str, Mapping[str, Any]] | None = None, scale: Mapping[str, Any] | None = None,
          against: Mapping[str, Any] | None = None) -> Verdict:
    """Do two seed-sets differ by more than seed noise?

    Welch's test (:func:`sidebyside.lab.stats.welch`): the difference of the means, its 95%
    interval from Welch's standard error and the t quantile for the Welch–Satterthwaite degrees
    of freedom; "within seed noise" when the interval holds 0. The sentence states the smallest
    difference the seeds could have detected (80% power). With one seed on a side its spread is
    unknown: the verdict is then "within seed noise" only for an exact tie, and says so. With
    fewer than ``min_seeds`` seeds on a side no verdict is drawn (label "too few seeds").
    ``contestants``, ``scale`` and ``against`` go to :func:`frame`.
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
    return frame(v, contestants=contestants, scale=scale, against=against)


# ----------------------------------------------------------------------------- the ladder


def ladder_entry(timing: Any = None, *, error: BaseException | str | None = None,
                 not_applicable: str | None = None) -> dict[str, Any]:
    """One ladder row for the results JSON: a timing entry of the one schema
    (:data:`sidebyside.lab.timing.ENTRY_KEYS`: ``median_s``, quartiles, ``compile_s``, ``first_s``,
    every process's median ``processes_s``, ``floor``, ``busy``), plus ``error`` (one line, or None)
    and ``not_applicable`` (why the tool cannot run on this machine, or None). A failed tool passes
    ``error=`` and no timing; a tool that does not apply, ``not_applicable=``."""
    from sidebyside.lab.timing import ENTRY_KEYS

    empty = dict.fromkeys(ENTRY_KEYS)
    if error is not None:
        text = error if isinstance(error, str) else f"{type(error).__name__}: {error}"
        text = " ".join(str(text).split())[:300]
        return {**empty, "error": text, "not_applicable": None}
    if not_applicable is not None:
        return {**empty, "error": None, "not_applicable": " ".join(str(not_applicable).split())}
    return {**_read(timing), "error": None, "not_applicable": None}


#: The fields of a timing entry that are per-call times (scaled by :func:`scaled`).
_TIMES = ("median_s", "iqr_s", "q1_s", "q3_s", "min_s")


def scaled(entries: Mapping[str, Mapping[str, Any]], factor: float) -> dict[str, dict[str, Any]]:
    """Ladder entries with their per-call times (each process's too) multiplied by ``factor``
    (e.g. steps per epoch over steps per timed call); compile times, errors and reasons are kept."""
    out = {}
    for name, entry in entries.items():
        e = dict(entry)
        for key in _TIMES:
            if e.get(key) is not None:
                e[key] = e[key] * factor
        if e.get("processes_s"):
            e["processes_s"] = [x * factor for x in e["processes_s"]]
        out[name] = e
    return out


def split(name: str) -> tuple[str, str]:
    """``"<framework>/<tool>"`` as ``(framework, tool)``; ValueError for any other name."""
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
        candidates = [(_median(e), split(n)[1]) for n, e in entries.items()
                      if split(n)[0] == framework and _usable(e)]
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


#: What does the work in a ladder rung, by tool, unless its entry names it (``implementation``).
IMPLEMENTATIONS = {
    ("torch", "eager"): "ATen's kernels, one launch per op from Python",
    ("torch", "device"): "ATen's kernels, one launch per op from Python",
    ("torch", "dataloader"): "ATen's kernels, batches from a DataLoader",
    ("torch", "compile"): "kernels Inductor generates",
    ("torch", "autograd"): "ATen's kernels, backward by autograd",
    ("torch", "func"): "torch.func transforms over ATen's kernels",
    ("torch", "cuda-graph"): "ATen's kernels replayed from a CUDA graph",
    ("torch", "cuda_graph"): "ATen's kernels replayed from a CUDA graph",
    ("jax", "jit"): "one program compiled by XLA",
    ("jax", "jit+scan"): "one XLA program looping over the steps",
    ("jax", "jit_scan"): "one XLA program looping over the steps",
    ("torch", "cuda-graph-steps"): "ATen's kernels for K steps replayed from one CUDA graph",
    ("torch", "compile+cuda-graphs"): "kernels Inductor generates, replayed from CUDA graphs",
    ("jax", "scan"): "one XLA program looping over the steps",
    ("jax", "eager"): "jnp ops dispatched one by one",
    ("numpy", "eager"): "NumPy's LAPACK/BLAS",
    ("scipy", "eager"): "SciPy's compiled routines",
}


def _contestant_of(name: str, entry: Any) -> dict[str, Any]:
    framework, tool = split(name)
    given = entry if isinstance(entry, Mapping) else {}
    implementation = given.get("implementation") or IMPLEMENTATIONS.get((framework, tool)) or next(
        (text for (fw, t), text in IMPLEMENTATIONS.items() if fw == framework and tool.startswith(t)),
        f"{_name(framework)}'s own ops")
    return contestant(framework, tool, implementation, origin=given.get("origin") or "framework")


def slower_than_eager(entries: Mapping[str, Any], framework: str = "torch") -> list[str]:
    """One sentence for each compiled rung of ``framework`` (a tool whose
    name holds "compile") that is slower than its eager rung, with the reason
    its entry measured: ``why`` (one line), or ``graph_breaks`` (the count
    ``torch._dynamo.explain`` reported). Without either the sentence says
    that no measurement in the run explains it."""
    eager = next((e for n, e in entries.items() if split(n) in ((framework, "eager"), (framework, "device"))
                  and _usable(e)), None)
    if eager is None:
        return []
    eager_s = _median(eager)
    out = []
    for name, entry in entries.items():
        fw, tool = split(name)
        if fw != framework or "compile" not in tool or not _usable(entry):
            continue
        seconds = _median(entry)
        if seconds <= eager_s:
            continue
        given = entry if isinstance(entry, Mapping) else {}
        if given.get("why"):
            why = given["why"]
        elif given.get("graph_breaks") is not None:
            breaks = int(given["graph_breaks"])
            why = (f"Dynamo split the step into {plural(breaks + 1, 'graph')} ({plural(breaks, 'graph break')}, "
                   "counted by torch._dynamo.explain), so Python runs between the compiled pieces and the "
                   "pieces cannot fuse across the breaks")
        else:
            why = "no measurement in this run explains it yet"
        out.append(f"{_name(framework)}'s {tool} is slower than its eager rung ({fmt_seconds(seconds)} against "
                   f"{fmt_seconds(eager_s)}): {why}.")
    return out


def ladder(entries: Mapping[str, Any], *, question: str, caveat: str = "",
           frameworks: Sequence[str] = ("torch", "jax"), scale: Mapping[str, Any] | None = None,
           against: Mapping[str, Any] | None = None, applied: Mapping[str, str | None] | None = None,
           kind: str = "framework") -> Verdict:
    """Best against best, then what the ladder shows.

    The sentence first compares each framework's fastest working tool (with
    the quartile test of :func:`speed`), then names the slowest working rung
    of each side against the other's best, explains each compiled rung slower
    than eager (:func:`slower_than_eager`), and lists every tool that failed.
    The contestants are the two best rungs (an entry may name its
    ``implementation`` and ``origin``; see :func:`contestant`). ``applied``:
    side key -> None where a precision setting took effect, or the reason it
    did not; any reason gives :func:`not_applied` instead of a race.
    ``scale``, ``against`` and ``kind`` go to :func:`frame`.
    """
    a, b = frameworks
    if applied and any(applied.values()):
        return not_applied(question, applied, subject_name=a, other_name=b, scale=scale)
    chosen = best(entries, frameworks)
    failed = [f"{_name(split(n)[0])} {split(n)[1]} ({e.get('error')})" for n, e in entries.items()
              if isinstance(e, Mapping) and e.get("error")]
    absent = [f"{_name(split(n)[0])} {split(n)[1]} ({e.get('not_applicable')})" for n, e in entries.items()
              if isinstance(e, Mapping) and e.get("not_applicable") and not e.get("error")]
    if chosen[a] is None or chosen[b] is None:
        missing = a if chosen[a] is None else b
        sentence = (f"No {_name(missing)} tool ran, so there is no comparison: " + "; ".join(failed + absent) + ".")
        v = Verdict(question=question, label="no comparison", sentence=sentence, test="none",
                    subject=a, other=b, winner=None, caveat=caveat)
        return frame(v, scale=scale, against=against, kind=kind)
    names = {side: f"{side}/{chosen[side]}" for side in (a, b)}
    head = speed(entries[names[a]], entries[names[b]], question=question,
                 subject_name=a, other_name=b, subject_tool=chosen[a], other_tool=chosen[b],
                 contestants={side: _contestant_of(names[side], entries[names[side]]) for side in (a, b)},
                 scale=scale, kind=kind)
    parts = [f"Best against best: {head.sentence}"]
    for side, rival in ((a, b), (b, a)):
        working = [(_median(e), split(n)[1]) for n, e in entries.items()
                   if split(n)[0] == side and _usable(e)]
        if len(working) < 2:
            continue
        slowest_s, slowest = max(working)
        fastest_s, fastest = min(working)
        rival_s = _median(entries[f"{rival}/{chosen[rival]}"])
        parts.append(f"{_name(side)}'s ladder runs from {slowest} ({_against(slowest_s, rival_s, rival)}) to "
                     f"{fastest} ({_against(fastest_s, rival_s, rival)}).")
    for side in (a, b):
        parts.extend(slower_than_eager(entries, side))
    if failed:
        parts.append("Failed, kept as findings: " + "; ".join(failed) + ".")
    if absent:
        parts.append("Not applicable on this machine: " + "; ".join(absent) + ".")
    if caveat:
        parts.append(caveat)
    head.sentence = " ".join(parts)
    head.caveat = f"{caveat} {head.caveat}".strip()
    return frame(head, against=against, kind=kind)
