"""The between-run spread: what ``make reproduce`` measured again of a published run.

Each run that ``make reproduce`` compares is logged when it can speak for the published run: the
same profile, the same version (the same run key, ``source_hash``) and a machine of the same
fingerprint (:func:`differences` finds none). The log,
``_data/reruns/<slug>.json`` (committed with the site), keeps each such run's speed verdicts by
their stable ids: the time ratio (the verdict's subject over its other), its 95% interval and the
winner. A post republished under another run key starts a new log: the old runs measured another
version.

:func:`spread` sums the log up for the pages, per verdict of the published run: how many runs (the
published one included), the lowest and highest ends of their intervals, and in how many the
published answer held; :func:`save_between` writes from it each race's spread between runs beyond
what the runs' own intervals say, which the next run on that fingerprint adds to the race's interval
(:mod:`sidebyside.lab.floors`). The verdict box gives it with how each verdict was decided, and marks a
verdict whose answer changed between runs on machines alike "unsettled between runs" beside its
answer (:func:`sidebyside.publish.frontpage.verdict_view`).

It owns what both it and ``make reproduce`` (:mod:`sidebyside.publish.reproduce`) read of two
records: their speed verdicts (:func:`speed_verdicts`) and where their machines differ
(:func:`differences`). :func:`coverage` measures the published intervals against the logs: the share
of re-run estimates that lie inside the interval published before them (``publish coverage``).
"""

from __future__ import annotations

import datetime as dt
import json
import math
import re
import subprocess
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from sidebyside.lab import floors, stats
from sidebyside.lab.words import FRAMEWORKS, fmt_number, plural
from sidebyside.publish.common import PublishError, write_atomic
from sidebyside.run import provenance

__all__ = ["speed_verdicts", "differences", "path", "read", "log", "save_between", "spread",
           "unsettled", "sentence", "COVERAGE_GOAL", "published_before", "coverage",
           "coverage_text"]


def _verdicts(record: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    found = (record.get("metrics") or {}).get("verdicts") or []
    return list(found.values()) if isinstance(found, Mapping) else list(found)


def speed_verdicts(record: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The speed verdicts of a results record, each as ``{"id", "question", "winner", "label", "ratio",
    "interval", "processes", "between_sd", "subject", "other", "tools"}`` (``id``: the verdict's stable
    id, None in a record written before verdicts had one; ``ratio`` and ``interval``: the subject's
    time over the other's; ``interval`` None where the verdict pooled fewer than 2 processes;
    ``between_sd``: the spread between runs its interval was widened by, 0 for none)."""
    out = []
    for v in _verdicts(record):
        sides, interval = v.get("sides") or {}, v.get("interval")
        subject, other = v.get("subject"), v.get("other")
        if not all(isinstance(sides.get(k), Mapping) and "median_s" in sides[k] for k in (subject, other)):
            continue  # not a speed verdict (seeds, parity), or no comparison
        ratio = v.get("ratio")
        if not ratio or ratio <= 0:
            continue
        out.append({"id": v.get("id"), "question": v.get("question", ""), "winner": v.get("winner"), "label": v.get("label"),
                    "ratio": float(ratio), "subject": subject, "other": other,
                    "interval": (float(interval[0]), float(interval[1])) if interval and len(interval) == 2 else None,
                    "processes": v.get("processes"), "between_sd": float((v.get("between") or {}).get("sd") or 0.0),
                    "tools": {k: (sides.get(k) or {}).get("tool", "") for k in (subject, other)}})
    return out


#: The fields of a fingerprint, as :func:`differences` names them.
_CPU_FIELDS = {"vendor": "CPU vendor", "family": "CPU family", "model": "CPU model", "stepping": "CPU stepping",
               "model_name": "CPU model name", "vector": "vector extensions", "l2_kib": "L2 cache (KiB)",
               "l3_kib": "L3 cache (KiB)", "clock_mhz": "nominal clock (MHz)"}
_GPU_FIELDS = {"model": "GPU", "memory_mib": "GPU memory (MiB)", "sm_clock_mhz": "GPU clock (MHz)",
               "memory_clock_mhz": "GPU memory clock (MHz)", "driver": "NVIDIA driver"}


def _said(value: Any) -> str:
    if value is None:
        return "unknown"
    if isinstance(value, list):
        return ", ".join(map(str, value)) or "none"
    return str(value)


def differences(published: Mapping[str, Any], reader: Mapping[str, Any]) -> list[str] | None:
    """Where the reader's machine differs from the published one, one phrase a field
    (``"L3 cache (KiB): published 32768, yours 16384"``), from the records'
    ``provenance.fingerprint``: the CPU's fields, and the GPU's where either record is a gpu run
    (``device_kind``). Empty: the same fingerprint. None: a record has no fingerprint (written
    before them), so whether the machines are alike cannot be told."""
    prints = [(r.get("provenance") or {}).get("fingerprint") for r in (published, reader)]
    if not all(isinstance(f, Mapping) and isinstance(f.get("cpu"), Mapping) for f in prints):
        return None
    parts = [("cpu", _CPU_FIELDS)]
    if "gpu" in {(r.get("provenance") or {}).get("device_kind") for r in (published, reader)}:
        parts.append(("gpu", _GPU_FIELDS))
    out = []
    for part, fields in parts:
        mine, theirs = prints[0].get(part) or {}, prints[1].get(part) or {}
        if part == "gpu" and (not mine or not theirs):
            if mine != theirs:
                out.append(f"GPU: published {_said(mine.get('model'))}, yours {_said(theirs.get('model'))}")
            continue
        for key, name in fields.items():
            if mine.get(key) != theirs.get(key):
                out.append(f"{name}: published {_said(mine.get(key))}, yours {_said(theirs.get(key))}")
    return out


def path(site: Path, slug: str) -> Path:
    """Where the log of ``slug`` lives in ``site``."""
    return Path(site) / "_data" / "reruns" / f"{slug}.json"


def read(site: Path, slug: str) -> dict[str, Any] | None:
    """The log of ``slug`` (None where there is none). One that cannot be read raises
    :class:`PublishError` saying how to restore it."""
    where = path(site, slug)
    if not where.is_file():
        return None
    fix = f"restore it (git checkout -- _data/reruns/{slug}.json) or delete it"
    try:
        found = json.loads(where.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise PublishError(f"{where} cannot be read as a log of re-runs ({exc}): {fix}") from None
    if not (isinstance(found, dict) and found.get("slug") == slug and isinstance(found.get("source_hash"), str)
            and isinstance(found.get("runs"), list) and all(isinstance(r, dict) for r in found["runs"])):
        raise PublishError(f"{where} is not a log of re-runs of {slug} (slug, source_hash, runs): {fix}")
    return found


def _entry(record: Mapping[str, Any]) -> dict[str, Any]:
    return {"executed_at": str(record.get("executed_at") or ""),
            "commit": str((record.get("provenance") or {}).get("git_sha") or ""),
            "verdicts": {v["id"]: {"ratio": v["ratio"], "interval": list(v["interval"]) if v["interval"] else None,
                                   "winner": v["winner"], "processes": v["processes"], "between_sd": v["between_sd"]}
                         for v in speed_verdicts(record) if v["id"]}}


def log(site: Path, slug: str, published: Mapping[str, Any], reader: Mapping[str, Any]) -> str:
    """Add the reader's run of ``slug`` to its log where it speaks for the ``published`` run (see the
    module docstring); one sentence saying what was done, or why not."""
    if reader.get("profile") != published.get("profile"):
        return f"not logged as a re-run: the {reader.get('profile')} profile's sizes, not the published run's"
    if reader.get("source_hash") != published.get("source_hash"):
        return "not logged as a re-run: this tree runs another version of the post than the published one"
    differs = differences(published, reader)
    if differs is None or differs:
        return "not logged as a re-run: the machine's fingerprint is not the published run's"
    found = read(site, slug)
    if found is None or found["source_hash"] != published["source_hash"]:
        found = {"slug": slug, "source_hash": published["source_hash"],
                 "fingerprint": (published.get("provenance") or {}).get("fingerprint"), "runs": []}
    found["runs"].append(_entry(reader))
    where = path(site, slug)
    where.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(where, json.dumps(found, indent=1, sort_keys=True) + "\n")
    measured = save_between(site, published, found)
    return (f"logged as re-run {len(found['runs'])} of the published run in {where}"
            + (f"; the spread between runs of {plural(len(measured), 'race')} written to "
               f"{floors.between_file(Path(site))}" if measured else ""))


def _within_se(entry: Mapping[str, Any], processes: Any) -> float | None:
    """The standard error of one run's mean log-ratio over its own processes, read back from its 95%
    interval (t on processes - 1 degrees of freedom) less the spread between runs it was widened by;
    None without an interval or a count of processes."""
    from scipy import stats as scipy_stats

    n = entry.get("processes") or processes
    if not _measured(entry) or entry.get("interval") is None or not isinstance(n, int) or n < 2:
        return None
    lo, hi = entry["interval"]
    total = (math.log(hi) - math.log(lo)) / (2 * float(scipy_stats.t.ppf(0.975, n - 1)))
    return math.sqrt(max(total * total - float(entry.get("between_sd") or 0.0) ** 2, 0.0))


def save_between(site: Path, published: Mapping[str, Any], found: Mapping[str, Any]) -> list[str]:
    """Write the spread between runs (:func:`sidebyside.lab.stats.between_run_sd`) of every speed
    verdict of ``published`` that its log ``found`` holds a re-run of, each run with its interval,
    into ``<site>/params/between-runs.json`` under the published run's machine kind
    (:func:`sidebyside.lab.floors.save_between`), the part of this version replaced; the next run of
    any post on that kind widens that race's interval by it. Returns the verdict ids written."""
    kind = provenance.machine_kind((published.get("provenance") or {}).get("fingerprint"))
    written = []
    for v in speed_verdicts(published):
        pairs = [(e["ratio"], _within_se(e, v["processes"])) for e in (v, *_again(found, v["id"]))]
        if kind == "unknown" or len(pairs) < 2 or any(se is None for _, se in pairs):
            continue
        part = {"slug": found["slug"], "source_hash": found["source_hash"], "runs": len(pairs),
                "sd": round(stats.between_run_sd(pairs), 4), "measured_at": str(found["runs"][-1].get("executed_at", ""))}
        floors.save_between(kind, v["id"], part, floors.between_file(Path(site)))
        written.append(v["id"])
    return written


def _again(found: Mapping[str, Any], vid: str | None) -> list[Any]:
    """What each re-run in the log ``found`` logged for the verdict ``vid``, in order (nothing for a
    verdict without an id)."""
    return [r["verdicts"][vid] for r in found["runs"]
            if vid and isinstance(r.get("verdicts"), dict) and vid in r["verdicts"]]


def _measured(entry: Any) -> bool:
    """A logged verdict whose figures can be summed up: a positive ratio, and an interval of two numbers or none."""
    def number(x: Any) -> bool:
        return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x) and x > 0

    interval = entry.get("interval") if isinstance(entry, dict) else None
    return (isinstance(entry, dict) and number(entry.get("ratio")) and
            (interval is None or (isinstance(interval, (list, tuple)) and len(interval) == 2 and all(map(number, interval)))))


def spread(site: Path, slug: str, run: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """Per speed verdict id of ``run`` (a published run's record) that the log holds re-runs of:
    ``{"runs", "low", "high", "held", "subject", "other"}``: runs counted with the published one, the
    lowest and highest ends of their 95% intervals of the time ratio (a run without an interval: its
    ratio), in how many the published answer (its winner, or none) held. Empty without a log of this
    run's version."""
    found = read(site, slug)
    if found is None or found["source_hash"] != run.get("source_hash"):
        return {}
    out = {}
    for v in speed_verdicts(run):
        again = [e for e in _again(found, v["id"]) if _measured(e)]
        if not again:
            continue
        every = [{"ratio": v["ratio"], "interval": v["interval"], "winner": v["winner"]}, *again]
        ends = [e for r in every for e in (r.get("interval") or [r["ratio"], r["ratio"]])]
        out[v["id"]] = {"runs": len(every), "low": min(ends), "high": max(ends),
                        "held": sum(r.get("winner") == v["winner"] for r in every),
                        "subject": v["subject"], "other": v["other"]}
    return out


def unsettled(s: Mapping[str, Any]) -> bool:
    """Whether the published answer of one entry of :func:`spread` failed to hold in some run."""
    return s["held"] < s["runs"]


def sentence(s: Mapping[str, Any]) -> str:
    """One entry of :func:`spread` as the verdict box says it."""
    who = [FRAMEWORKS.get(s[k], s[k]) for k in ("subject", "other")]
    held = (f"the answer held in {s['held']} of them: read it as unsettled between runs" if unsettled(s) else
            "the answer held in every one")
    return (f"Between runs: {s['runs']} runs on machines of this fingerprint (this one and make reproduce's), "
            f"{who[0]}'s time over {who[1]}'s from {fmt_number(s['low'])} to {fmt_number(s['high'])} across "
            f"their 95% intervals; {held}.")


#: The share of re-run estimates that should lie inside the interval published before them.
COVERAGE_GOAL = 0.90


def _instant(text: Any) -> dt.datetime | None:
    try:
        value = dt.datetime.fromisoformat(str(text).replace("Z", "+00:00"))
    except ValueError:
        return None
    return value if value.tzinfo else value.replace(tzinfo=dt.timezone.utc)


def _record_at(site: Path, slug: str, commit: Any) -> Any:
    """The results record of ``slug`` as the commit ``commit`` of the site's git repository held
    it; None where there is no such commit, file or repository."""
    if not isinstance(commit, str) or not re.fullmatch(r"[0-9a-f]{4,40}", commit):
        return None
    try:
        where = f"{commit}:./_data/results/{slug}.json"
        done = subprocess.run(["git", "-C", str(site), "show", where], capture_output=True,
                              text=True, timeout=60)
        return json.loads(done.stdout) if done.returncode == 0 else None
    except (OSError, subprocess.SubprocessError, ValueError):
        return None


def published_before(site: Path, slug: str, run: Mapping[str, Any], source_hash: str,
                     current: Any) -> dict[str, Any] | None:
    """The published record that the logged re-run ``run`` was compared with: the one its commit
    held (read with git), else ``current`` (the site's record now); either only where it is of the
    log's version (``source_hash``) and ran before the re-run. None where neither is."""
    ran = _instant(run.get("executed_at"))
    for record in (_record_at(site, slug, run.get("commit")), current):
        if not isinstance(record, dict) or record.get("source_hash") != source_hash or ran is None:
            continue
        then = _instant(record.get("executed_at"))
        if then is not None and then <= ran:
            return record
    return None


def _covered(site: Path, slug: str) -> dict[str, Any]:
    """:func:`coverage` of one post's log."""
    from sidebyside.publish.cache import published_record

    found = read(site, slug)
    try:
        current = published_record(site, slug)
    except PublishError:
        current = None
    out = {"inside": 0, "counted": 0, "runs": 0, "uncounted_runs": 0}
    for run in found["runs"] if found else []:
        before = published_before(site, slug, run, found["source_hash"], current)
        if before is None:
            out["uncounted_runs"] += 1
            continue
        out["runs"] += 1
        intervals = {v["id"]: v["interval"] for v in speed_verdicts(before)
                     if v["id"] and v["interval"]}
        for vid, entry in (run.get("verdicts") or {}).items():
            if vid in intervals and _measured(entry):
                low, high = intervals[vid]
                out["counted"] += 1
                out["inside"] += low <= entry["ratio"] <= high
    return out


def coverage(site: Path) -> dict[str, dict[str, Any]]:
    """Per post with a log of re-runs (``<site>/_data/reruns/<slug>.json``): ``{"inside", "counted",
    "runs", "uncounted_runs"}``: of the re-runs' estimates (time ratios) of verdicts that the
    published run before them (:func:`published_before`) gave an interval, how many were counted and
    how many lie inside that interval; over how many re-runs; and how many re-runs had no published
    run of their version before them (not counted). A damaged log raises :class:`PublishError`."""
    folder = Path(site) / "_data" / "reruns"
    names = sorted(folder.glob("*.json")) if folder.is_dir() else []
    slugs = [p.stem for p in names if not p.name.startswith(".")]
    return {slug: _covered(Path(site), slug) for slug in slugs}


def _share(inside: int, counted: int) -> str:
    return f"{inside} of {counted} ({100 * inside / counted:.1f}%)" if counted else "none counted"


def coverage_text(found: Mapping[str, Mapping[str, Any]]) -> str:
    """:func:`coverage` as the command prints it: a line per post, then the whole against
    :data:`COVERAGE_GOAL`."""
    lines = ["Coverage: the share of re-run estimates (make reproduce on the published run's "
             "fingerprint) that lie inside the 95% interval published before them"]
    for slug, c in found.items():
        apart = (f"; {plural(c['uncounted_runs'], 're-run')} not counted" if c["uncounted_runs"]
                 else "")
        over = plural(c["runs"], "re-run")
        lines.append(f"  {slug}: {_share(c['inside'], c['counted'])} over {over}{apart}")
    inside, counted = (sum(c[k] for c in found.values()) for k in ("inside", "counted"))
    goal = f"{COVERAGE_GOAL:.0%}"
    verdict = ("no re-run logged yet" if not counted else
               f"at or above the goal of {goal}" if inside / counted >= COVERAGE_GOAL else
               f"below the goal of {goal}")
    lines.append(f"overall: {_share(inside, counted)}: {verdict}")
    return "\n".join(lines)
