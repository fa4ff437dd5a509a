"""The one timing-entry schema: every timing, in a notebook and in a results record.

:class:`Timing` is what the harness (:mod:`sidebyside.lab.timing`) measures;
:meth:`Timing.entry` writes it as an entry whose keys are :data:`ENTRY_KEYS`
(seconds), and :func:`read` reads a Timing or an entry back, refusing a bare
number: a time without its spread and its processes cannot make a verdict.
:mod:`sidebyside.lab.timing` re-exports these names.
"""

from __future__ import annotations

import dataclasses
import statistics
from collections.abc import Mapping
from typing import Any

__all__ = ["ENTRY_KEYS", "Timing", "read"]

#: The keys of a timing entry (seconds), written by :meth:`Timing.entry`, read by :func:`read`.
ENTRY_KEYS = ("median_s", "q1_s", "q3_s", "iqr_s", "min_s", "first_s", "compile_s", "repeats", "number",
              "synchronized", "processes_s", "first_per_process_s", "floor", "busy",
              "between", "first_cache")


@dataclasses.dataclass
class Timing:
    """Per-call times of one function, in seconds.

    ``times_s`` holds one mean per repeat (each repeat ran ``number`` calls), from
    every process; ``first_s`` the very first call of the first process
    (compilation included, cold); ``processes_s`` the median of each process, in
    process order (one observation each); ``first_per_process_s`` each process's
    first call; ``floor`` the machine kind's noise floor; ``busy`` what the
    quiet-machine check found during the measurement; ``between`` the machine kind's
    spreads between runs, by verdict id (:func:`sidebyside.lab.floors.between_runs`);
    ``first_cache`` whether ``first_s``'s compilation found the shared cache "cold" or
    "warm" (None: nothing compiled through it, :mod:`sidebyside.lab.cachestate`).
    """

    name: str
    times_s: list[float]
    number: int
    first_s: float
    synchronized: bool = True
    processes_s: list[float] = dataclasses.field(default_factory=list)
    first_per_process_s: list[float] = dataclasses.field(default_factory=list)
    floor: float | None = None
    busy: list[str] = dataclasses.field(default_factory=list)
    between: dict[str, dict[str, Any]] = dataclasses.field(default_factory=dict)
    first_cache: str | None = None

    @property
    def median_s(self) -> float:
        return statistics.median(self.times_s)

    @property
    def q1_s(self) -> float:
        return _quantile(self.times_s, 0.25)

    @property
    def q3_s(self) -> float:
        return _quantile(self.times_s, 0.75)

    @property
    def iqr_s(self) -> float:
        return self.q3_s - self.q1_s

    @property
    def min_s(self) -> float:
        return min(self.times_s)

    @property
    def compile_s(self) -> float:
        """Time the first call took beyond a steady-state call (>= 0)."""
        return max(self.first_s - self.median_s, 0.0)

    @property
    def repeats(self) -> int:
        return len(self.times_s)

    def entry(self) -> dict[str, Any]:
        """This timing as an entry of the one schema (:data:`ENTRY_KEYS`)."""
        return {key: getattr(self, key) for key in ENTRY_KEYS}

    def __str__(self) -> str:
        return (f"{self.name}: {_fmt(self.median_s)} ± {_fmt(self.iqr_s / 2)} (median ± IQR/2, "
                f"{self.repeats}×{self.number} over {len(self.processes_s) or 1} process(es))")


def read(entry: Any) -> dict[str, Any]:
    """The timing entry of a :class:`Timing` or of a mapping with the keys of :data:`ENTRY_KEYS`
    (``median_s`` required; ``q1_s``/``q3_s`` default to the median). Raises TypeError for a bare
    number or anything else: a time without its spread and processes cannot make a verdict."""
    if isinstance(entry, Timing):
        return entry.entry()
    if isinstance(entry, Mapping):
        if entry.get("median_s") is None:
            raise ValueError(f"a timing entry needs 'median_s' (seconds); got keys {sorted(entry)}")
        out = {key: entry.get(key) for key in ENTRY_KEYS}
        out["q1_s"] = out["median_s"] if out["q1_s"] is None else out["q1_s"]
        out["q3_s"] = out["median_s"] if out["q3_s"] is None else out["q3_s"]
        out["processes_s"] = [float(x) for x in out["processes_s"] or []]
        out["busy"] = list(out["busy"] or [])
        out["between"] = dict(out["between"] or {})
        return out
    raise TypeError(f"a timing is a Timing or an entry with 'median_s' (seconds), not {type(entry).__name__} "
                    f"{entry!r}: time it with sidebyside.lab.timing.compare or ladder, which keep the spread and "
                    "every process's figure")


def _quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    if len(ordered) == 1:
        return ordered[0]
    position = q * (len(ordered) - 1)
    low = int(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def _fmt(seconds: float) -> str:
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("µs", 1e-6)):
        if seconds >= scale:
            return f"{seconds / scale:.3g} {unit}"
    return f"{seconds / 1e-9:.3g} ns"
