"""The committed noise floor of each machine kind, read as every timing reads it.

The floors are committed beside the quiet baselines (``params/noise-floor.json``,
:func:`floors_file`), keyed by machine kind (:func:`sidebyside.lab.quiet.machine_kind`), and
written by :func:`save` from :func:`sidebyside.lab.noise.measure` (``python -m
sidebyside.lab.noise --save``). The floor of a machine kind is a stated upper quantile of the A/A
differences (:func:`floor_of`); it applies only to verdicts pooled over the process count it was
measured at (:func:`floor`). A machine kind without one, or with one measured at another process
count, has no floor: its verdicts rest on their intervals alone, and say so.

A record: ``floor`` (the fraction), ``quantile`` (of ``|ln r|``), ``trials`` (how many A/A races),
``processes`` (per race), ``ratios`` (every race's), ``largest`` (the ratio furthest from 1),
``measured_at`` and ``method``. A record written before the quantile (the floor was the largest
ratio) is read with its floor computed again from its ratios at the quantile.

The spread between runs of each race (``params/between-runs.json``, :func:`between_file`) is
committed beside them, keyed by machine kind, then by verdict id
(:func:`sidebyside.lab.framing.verdict_id`): what a race's ratio moved between runs on machines of
that fingerprint beyond what each run's own interval says (:func:`sidebyside.lab.stats.between_run_sd`).
A floor cannot measure it: two copies of one function answer the host's state alike. ``make
reproduce`` writes it from the log of re-runs (:func:`save_between`); :func:`between_runs` reads it
for the harness, and a verdict widens its interval by it (:mod:`sidebyside.lab.verdict`). A record
per race: ``sd`` (of the log-ratio, pooled over the versions measured), ``parts`` (per version of the
post: ``source_hash``, ``slug``, ``runs``, ``sd``, ``measured_at``) and ``method``.

Inputs: the machine kind. Outputs: the floor (a fraction) and its record; the spreads between runs.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from sidebyside.lab import pool, quiet, stats
from sidebyside.run import context

__all__ = ["floors_file", "floor", "record", "floor_of", "save", "between_file", "between_runs", "save_between"]

#: How a race's spread between runs is estimated and pooled (written into each record).
BETWEEN_METHOD = ("per version of the post, the sample variance of the time ratio's logarithm over the published run "
                  "and its re-runs on machines of this fingerprint less the mean of their squared within-run "
                  "standard errors (floored at 0); pooled over versions weighted by runs - 1")


def floors_file() -> Path:
    """``params/noise-floor.json`` of the run's checkout: ``{machine kind: record}``."""
    return context.current().project_root() / "params" / "noise-floor.json"


def record(kind: str | None = None, path: Path | None = None) -> dict[str, Any] | None:
    """The committed floor record of ``kind`` (default: this machine's), or None. A record without
    a ``quantile`` (written when the floor was the largest A/A ratio) comes back with its floor
    computed from its ratios at :data:`sidebyside.lab.stats.FLOOR_QUANTILE`."""
    path = path or floors_file()
    if not path.exists():
        return None
    found = json.loads(path.read_text(encoding="utf-8")).get(kind or quiet.machine_kind())
    if found is not None and "quantile" not in found:
        found = {**found, **floor_of(found["ratios"])}
    return found


def floor(kind: str | None = None, path: Path | None = None, *, processes: int | None = None) -> float | None:
    """The noise floor of ``kind`` (default: this machine's) as a fraction, for verdicts pooled over
    ``processes`` (default: the run's, :func:`sidebyside.lab.pool.processes`); None without a record,
    or when its races were pooled over another count of processes."""
    found = record(kind, path)
    if found is None or int(found["processes"]) != pool.processes(processes):
        return None
    return float(found["floor"])


def floor_of(ratios: list[float]) -> dict[str, Any]:
    """``floor``, ``quantile`` and ``method`` of A/A ``ratios`` (as :func:`sidebyside.lab.noise.measure` writes them) (:func:`sidebyside.lab.stats.noise_floor`)."""
    q = stats.FLOOR_QUANTILE
    return {"floor": round(stats.noise_floor(ratios, q), 4), "quantile": q,
            "method": f"the {100 * q:g}th percentile of |ln r| over the time ratios r of functions raced against "
                      "themselves (A/A) through the harness, as exp(q) - 1 (NumPy's linear interpolation)"}


def save(kind: str, found: dict[str, Any], path: Path | None = None) -> None:
    """Write ``found`` (from :func:`sidebyside.lab.noise.measure`) as the floor record of ``kind``, keeping the others."""
    path = path or floors_file()
    floors = json.loads(path.read_text(encoding="utf-8")) if path.exists() else {}
    floors[kind] = found
    path.write_text(json.dumps(floors, indent=2, sort_keys=True) + "\n", encoding="utf-8")


def between_file(root: Path | None = None) -> Path:
    """``params/between-runs.json`` of ``root`` (default: the run's checkout): ``{machine kind: {verdict id: record}}``."""
    return (root or context.current().project_root()) / "params" / "between-runs.json"


def between_runs(kind: str | None = None, path: Path | None = None) -> dict[str, dict[str, Any]]:
    """The spreads between runs of ``kind``'s races (default: this machine's), by verdict id:
    ``{"sd", "runs"}`` (the log-ratio's standard deviation between runs, and how many runs it rests
    on), only where ``sd`` is above 0; empty without a file or a record."""
    path = path or between_file()
    if not path.exists():
        return {}
    found = json.loads(path.read_text(encoding="utf-8")).get(kind or quiet.machine_kind()) or {}
    return {vid: {"sd": float(r["sd"]), "runs": sum(int(p["runs"]) for p in r["parts"])}
            for vid, r in sorted(found.items()) if float(r["sd"]) > 0}


def save_between(kind: str, vid: str, part: dict[str, Any], path: Path) -> dict[str, Any]:
    """Add ``part`` (one version's estimate: ``source_hash``, ``slug``, ``runs``, ``sd``, ``measured_at``) to
    the record of race ``vid`` on ``kind`` in ``path``, replacing the part of the same version, and pool
    the parts again; the others kept. Returns the record."""
    spreads = json.loads(path.read_text(encoding="utf-8")) if path.exists() else {}
    races = spreads.setdefault(kind, {})
    parts = [p for p in (races.get(vid) or {}).get("parts", []) if p["source_hash"] != part["source_hash"]]
    parts.append(dict(part))
    weight = sum(int(p["runs"]) - 1 for p in parts)
    pooled = (sum((int(p["runs"]) - 1) * float(p["sd"]) ** 2 for p in parts) / weight) ** 0.5
    races[vid] = {"sd": round(pooled, 4), "parts": parts, "method": BETWEEN_METHOD}
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(spreads, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    tmp.replace(path)
    return races[vid]
