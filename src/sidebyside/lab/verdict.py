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
other's (below 1: the subject is faster), and so are the figures in the
sentence; ``factor`` (>= 1) is how many times faster the winner is.

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

FASTER, SLOWER, WITHIN = "faster", "slower", "within noise"
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
    repetitions: list[float] | None = None

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


def _repetitions(entry: Any) -> list[float]:
    """Each independent repetition's median (seconds) of a Timing or an entry; [] when not kept."""
    found = getattr(entry, "repetitions_s", None)
    if isinstance(entry, Mapping):
        found = entry.get("repetitions_s", entry.get("repetitions"))
    return [float(x) for x in found or []]


def _between_repetitions(subject: Any, other: Any) -> list[float]:
    """The subject's time over the other's in each repetition, paired in order (both sides measured in
    the same interleaved repetitions); [] unless both kept at least two."""
    a, b = _repetitions(subject), _repetitions(other)
    if min(len(a), len(b)) < 2 or min(a + b) <= 0:
        return []
    return [x / y for x, y in zip(a, b)]


def _machine_caveat(caveat: str) -> str:
    """``caveat`` with the busy-machine sentence of this run (:func:`sidebyside.lab.quiet.caveat`) added once."""
    from sidebyside.lab import quiet

    busy = quiet.caveat()
    return caveat if not busy or busy in caveat else f"{caveat} {busy}".strip()


def _name(framework: str) -> str:
    return FRAMEWORKS.get(framework, framework)


def speed(subject: Any, other: Any, *, question: str, subject_name: str = "torch", other_name: str = "jax",
          subject_tool: str = "", other_tool: str = "", caveat: str = "",
          contestants: Mapping[str, Mapping[str, Any]] | None = None, scale: Mapping[str, Any] | None = None,
          against: Mapping[str, Any] | None = None, kind: str = "framework") -> Verdict:
    """Is ``subject`` faster than ``other``?

    Both are timings of the same work (Timing, ladder entry dict, or seconds).
    ``ratio`` and ``interval`` are the subject's time over the other's, and
    the sentence quotes them that way; ``factor`` (>= 1) is the winner's
    speed-up. ``contestants``, ``scale``, ``against`` and ``kind`` go to
    :func:`frame`.
    """
    a1, am, a3 = _quartiles(subject)
    b1, bm, b3 = _quartiles(other)
    if min(a1, am, b1, bm) <= 0:
        raise ValueError("timings must be positive")
    lo, hi = a1 / b3, a3 / b1  # interval of subject/other
    spread = _between_repetitions(subject, other)
    if spread:  # the interval covers the spread between independent repetitions too
        lo, hi = min(lo, *spread), max(hi, *spread)
    caveat = _machine_caveat(caveat)
    ratio = am / bm
    who_a = _name(subject_name) + (f" ({subject_tool})" if subject_tool else "")
    who_b = _name(other_name) + (f" ({other_tool})" if other_tool else "")
    which = f"interval over quartiles and {len(spread)} repetitions" if spread else "quartile interval"
    figures = (f"{_name(subject_name)}'s time over {_name(other_name)}'s {fmt_number(ratio)}, {which} "
               f"{fmt_number(lo)}–{fmt_number(hi)}")
    if lo <= 1.0 <= hi:
        label, winner = WITHIN, None
        sentence = (f"{who_a} and {who_b} are within noise of each other: {fmt_seconds(am)} against "
                    f"{fmt_seconds(bm)} ({figures}, which holds 1).")
        factor = max(ratio, 1 / ratio)
    elif ratio < 1:
        label, winner, factor = FASTER, subject_name, 1 / ratio
        sentence = (f"{who_a} is {fmt_ratio(factor)} faster than {who_b}: {fmt_seconds(am)} against "
                    f"{fmt_seconds(bm)} ({figures}).")
    else:
        label, winner, factor = SLOWER, other_name, ratio
        sentence = (f"{who_b} is {fmt_ratio(factor)} faster than {who_a}: {fmt_seconds(bm)} against "
                    f"{fmt_seconds(am)} ({figures}).")
    if caveat:
        sentence += " " + caveat
    sides = {
        subject_name: {"tool": subject_tool, "median_s": am, "q1_s": a1, "q3_s": a3, "iqr_s": a3 - a1},
        other_name: {"tool": other_tool, "median_s": bm, "q1_s": b1, "q3_s": b3, "iqr_s": b3 - b1},
    }
    if spread:
        sides[subject_name]["repetitions_s"] = _repetitions(subject)
        sides[other_name]["repetitions_s"] = _repetitions(other)
    v = Verdict(question=question, label=label, sentence=sentence,
                test="ratio of medians (subject's time over the other's); within noise when the quartile "
                     "interval q1/q3 .. q3/q1 holds 1" + (", widened to cover the ratio of every independent "
                                                          "repetition" if spread else
                                                          "; no independent repetitions were kept, so the "
                                                          "interval is the spread inside one run"),
                subject=subject_name, other=other_name, winner=winner, ratio=ratio,
                interval=(lo, hi), sides=sides, caveat=caveat, factor=factor, repetitions=spread or None)
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

    The difference of means against two standard errors of the difference
    (Welch). With one seed on a side its spread is unknown: the verdict is
    then "within seed noise" only for an exact tie, and says so. With fewer
    than ``min_seeds`` seeds on a side no verdict is drawn (label "too few
    seeds"). ``contestants``, ``scale`` and ``against`` go to :func:`frame`.
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
    if n < min_seeds:
        label, winner = "too few seeds", None
        sentence = (f"{_name(subject_name)} {fmt_number(ma)} against {_name(other_name)} {fmt_number(mb)}{unit} "
                    f"({quantity}) over {seeds_text}: fewer than the {min_seeds} seeds a verdict needs, "
                    "so none is drawn.")
    elif abs(diff) <= threshold:
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
    if n < 2 and n >= min_seeds:
        sentence += " With one seed the spread is unknown; treat this as a single observation."
    if caveat:
        sentence += " " + caveat
    sides = {
        subject_name: {"mean": ma, "std": math.sqrt(va), "n": len(a)},
        other_name: {"mean": mb, "std": math.sqrt(vb), "n": len(b)},
    }
    v = Verdict(question=question, label=label, sentence=sentence,
                test="difference of means against two Welch standard errors",
                subject=subject_name, other=other_name, winner=winner, difference=diff,
                threshold=threshold, sides=sides, caveat=caveat)
    return frame(v, contestants=contestants, scale=scale, against=against)


# ----------------------------------------------------------------------------- the ladder


def ladder_entry(timing: Any = None, *, error: BaseException | str | None = None,
                 not_applicable: str | None = None) -> dict[str, Any]:
    """One ladder row for the results JSON: ``median_s``, ``iqr_s``,
    ``q1_s``, ``q3_s``, ``compile_s``, ``first_s``, ``repetitions_s`` (each
    independent repetition's median, for a timed row), ``error`` (one line,
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
            "first_s": first_s, "repetitions_s": _repetitions(timing) or None, "error": None,
            "not_applicable": None}


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
        if e.get("repetitions_s"):
            e["repetitions_s"] = [x * factor for x in e["repetitions_s"]]
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
    framework, tool = _split(name)
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
    eager = next((e for n, e in entries.items() if _split(n) in ((framework, "eager"), (framework, "device"))
                  and _usable(e)), None)
    if eager is None:
        return []
    eager_s = _quartiles(eager)[1]
    out = []
    for name, entry in entries.items():
        fw, tool = _split(name)
        if fw != framework or "compile" not in tool or not _usable(entry):
            continue
        seconds = _quartiles(entry)[1]
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
    failed = [f"{_name(_split(n)[0])} {_split(n)[1]} ({e.get('error')})" for n, e in entries.items()
              if isinstance(e, Mapping) and e.get("error")]
    absent = [f"{_name(_split(n)[0])} {_split(n)[1]} ({e.get('not_applicable')})" for n, e in entries.items()
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
        working = [(_quartiles(e)[1], _split(n)[1]) for n, e in entries.items()
                   if _split(n)[0] == side and _usable(e)]
        if len(working) < 2:
            continue
        slowest_s, slowest = max(working)
        fastest_s, fastest = min(working)
        rival_s = _quartiles(entries[f"{rival}/{chosen[rival]}"])[1]
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
    head.caveat = _machine_caveat(caveat)
    return frame(head, against=against, kind=kind)
