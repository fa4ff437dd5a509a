"""The timed parts of jit-and-autograd-timing: values that a run in parts saves and reads back.

The notebook wraps each call below in its :class:`sidebyside.run.checkpoints.Checkpoints`
(``parts(name, fn, ...)``), one part per size or device, named by :func:`part_name`:

- :func:`sweep`: one size of the element-wise sweep, its ladder timed per call and back to back;
- :func:`checked`: a ladder timed first, then each value that ran checked against the exact one
  (the gradient sweep's sizes, the Hessian-vector product);
- :func:`pitfall`: each function timed right (synchronised) and wrong (not waited for).

A :class:`Ladder` is what :func:`sweep` and :func:`checked` return, and :meth:`Ladder.saved`
turns its saved form (JSON) back into one, :class:`sidebyside.lab.entry.Timing` objects included,
so that a part read back gives what measuring it gives. A part that draws its data from the
notebook's generator goes through :meth:`sidebyside.run.checkpoints.Checkpoints.drawn`, which saves the generator's state with it and puts
it back on reading, so that a run in parts draws what an uninterrupted run draws. This module
imports neither PyTorch nor JAX.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from sidebyside.lab import timing
from sidebyside.lab.entry import Timing

__all__ = ["Ladder", "part_name", "sweep", "checked", "pitfall", "as_numpy"]


@dataclasses.dataclass
class Ladder:
    """One timed ladder: ``entries`` (``"<framework>/<tool>"`` -> ladder entry, as
    :func:`sidebyside.lab.timing.ladder` returns them), ``timings`` (the :class:`Timing` of each
    rung that ran), ``back_to_back`` (the entries of the same ladder timed back to back; {} where
    not timed) and ``errors`` (per rung that ran, its largest absolute error against the exact
    value; {} where not checked)."""

    entries: dict[str, dict[str, Any]]
    timings: dict[str, Timing]
    back_to_back: dict[str, dict[str, Any]] = dataclasses.field(default_factory=dict)
    errors: dict[str, float] = dataclasses.field(default_factory=dict)

    @classmethod
    def saved(cls, value: Mapping[str, Any]) -> Ladder:
        """The ladder a part saved (its fields, as JSON): the ``decode`` of a part returning one."""
        timings = {name: Timing(**fields) for name, fields in value["timings"].items()}
        return cls(entries=dict(value["entries"]), timings=timings,
                   back_to_back=dict(value.get("back_to_back") or {}),
                   errors=dict(value.get("errors") or {}))


def part_name(kind: str, *what: Any) -> str:
    """A part's name, ``kind/what/...``, in which a size that is a power of ten reads ``1e<k>``:
    ``part_name("jit", "gpu", 10**6) == "jit/gpu/1e6"``."""
    def word(value: Any) -> str:
        if isinstance(value, int) and not isinstance(value, bool) and value >= 10:
            power = round(math.log10(value))
            if 10**power == value:
                return f"1e{power}"
        return str(value)

    if not kind or "/" in kind:
        raise ValueError(f"a part's kind is one word with no '/', got {kind!r}")
    return "/".join([kind, *(word(w) for w in what)])


def as_numpy(value: Any) -> np.ndarray:
    """A PyTorch tensor (on any device) or a JAX or NumPy array, as a NumPy array."""
    return value.detach().cpu().numpy() if hasattr(value, "detach") else np.asarray(value)


def sweep(candidates: Callable[[], Mapping[str, Any]], *, needs: Mapping[str, str] | None = None,
          repeats: int, min_repeat_s: float, processes: int | None = None) -> Ladder:
    """One size of the sweep: the ladder that ``candidates()`` builds, each call synchronised, then
    the ladder of a second ``candidates()`` (its own copy of the data) timed back to back
    (``pipelined``: throughput). ``needs``, ``repeats``, ``min_repeat_s`` and ``processes`` go to
    :func:`sidebyside.lab.timing.ladder` for both."""
    options = {"needs": needs, "repeats": repeats, "min_repeat_s": min_repeat_s,
               "processes": processes}
    entries, timings = timing.ladder(candidates(), **options)
    back_to_back, _ = timing.ladder(candidates(), pipelined=True, **options)
    return Ladder(entries, timings, back_to_back)


def checked(fns: Mapping[str, Any], exact: np.ndarray, *, repeats: int, min_repeat_s: float,
            processes: int | None = None) -> Ladder:
    """The ladder of ``fns`` timed first (so that each first call, compilation included, is the
    ladder's), then the value of each rung that ran against ``exact``: its largest absolute error,
    in :attr:`Ladder.errors`."""
    entries, timings = timing.ladder(fns, repeats=repeats, min_repeat_s=min_repeat_s,
                                     processes=processes)
    errors = {name: float(np.max(np.abs(as_numpy(fns[name]()) - exact))) for name in timings}
    return Ladder(entries, timings, errors=errors)


def pitfall(fns: Mapping[str, Callable[[], Any]], *, repeats: int,
            min_repeat_s: float) -> dict[str, dict[str, float]]:
    """Each function timed in this process twice: right (every call waited for) and wrong
    (``synchronize=False``, with as many calls a repeat as the right timing chose, so that a timer
    that sees near-zero times does not queue thousands of calls), the queue drained after. Returns
    ``{name: {"synced_s", "unsynced_s"}}``, the medians per call."""
    out = {}
    for name, fn in fns.items():
        synced = timing.time_fn(fn, name=name, repeats=repeats, min_repeat_s=min_repeat_s)
        unsynced = timing.time_fn(fn, name=name, repeats=repeats, number=synced.number,
                                  synchronize=False)
        timing.block(fn())  # drain the queue before the next measurement
        out[name] = {"synced_s": synced.median_s, "unsynced_s": unsynced.median_s}
    return out
