"""Who races and at what size: the frame every verdict carries.

Every verdict carries ``contestants`` (per side: framework, tool,
implementation, and ``origin``: ``"framework"`` when the implementation ships
with the framework, ``"project"`` when this project wrote it; see
:func:`contestant`) and ``scale`` (model parameters, input, batch, precision,
device; see :func:`scale_of`). :func:`frame` attaches them and enforces the
rules: a verdict of ``kind="framework"`` races only what the frameworks ship
(a hand-written kernel gets a verdict of ``kind="custom"``), and a verdict set
against a claim made at another scale (:func:`claim`) says it does not answer
that claim yet. :func:`precision_applied` checks that a precision setting
(TF32, bfloat16) took effect before it is raced.

Inputs: names, sizes, result arrays. Outputs: plain dicts; :func:`frame`
returns the verdict it was given. :mod:`sidebyside.lab.verdict` re-exports
every public name.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

from sidebyside.lab.words import fmt_number
from sidebyside.lab.words import name as _name

__all__ = ["ORIGINS", "SCALE_FIELDS", "contestant", "scale_of", "scales_text", "claim", "frame", "check_headline",
           "precision_applied", "verdict_id"]

#: Where an implementation comes from: shipped with its framework, or written here.
#: "built_with": written here in the framework's own tools only (jnp, Pallas), where the framework
#: has no built-in; it races as the framework's. "project": code outside the framework (a C++
#: kernel through XLA's FFI), which never heads a framework verdict.
ORIGINS = {"framework": "ships with {framework}", "built_with": "written in {framework}, only what it ships",
           "project": "written by this project"}

#: The scale fields a verdict box shows, in order, and how each reads.
SCALE_FIELDS = ("parameters", "input", "batch", "precision", "device")


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


def verdict_id(race: str, scale: Mapping[str, Any] | None) -> str:
    """A verdict's stable id, ``<race>@<size>``, by which a reader's run is matched with the published
    one (:mod:`sidebyside.publish.reproduce`): ``race`` names the race (its post gives it, e.g.
    ``resnet50/train/4/float32/best``; a verdict whose post gives none is named by its question's
    words, lower-cased), ``size`` is a digest of the scale's parameters, input, batch and precision.
    Not the device: the same race on another machine has the same id; at other sizes (another
    profile) it has another, so it is never compared with this one."""
    size = {f: (scale or {}).get(f) for f in SCALE_FIELDS if f != "device"}
    digest = hashlib.sha1(json.dumps(size, sort_keys=True, default=str).encode()).hexdigest()[:10]
    return f"{re.sub(r'[^a-z0-9/._+-]+', '-', race.lower()).strip('-')}@{digest}"


def frame(v: Any, *, contestants: Mapping[str, Mapping[str, Any]] | None = None,
          scale: Mapping[str, Any] | None = None, against: Mapping[str, Any] | None = None,
          kind: str = "framework", race: str = "") -> Any:
    """Attach who raced (``contestants``: side key -> :func:`contestant`), at
    what size (``scale``: :func:`scale_of`), the claim it is read against
    (``against``: :func:`claim`) and the race's name ``race`` (its id's first part,
    :func:`verdict_id`; an empty name keeps the one ``v`` has), and return ``v``.

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
    if race:
        v.race = race
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


def check_headline(verdicts: Sequence[Any]) -> None:
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
