"""How a reader checks us: ``make reproduce ONLY=<slug>``.

:func:`reproduce` runs the notebook on this machine, with the profile of the
published run, into a scratch site (``build/reproduce/<slug>/``: the
published posts, images and results are never touched), then compares every
speed verdict of the two records (:func:`compare`, matched by question) and
prints, per verdict, the published figure and hardware, the reader's figure
and hardware, and whether it reproduces (:func:`table`), then a one-line
summary (:func:`summary`).

A speed verdict reproduces when the winner is the same (both "within noise"
counts as the same) and the reader's ratio (the subject's time over the
other's) lies inside the combined interval: the published interval widened
by the reader's own relative spread on each side. On the same hardware kind
(the records' ``provenance.device``) a verdict that does not reproduce makes
the command exit 1; on other hardware it is reported, not failed.

Inputs: the published record (``<site>/_data/results/<slug>.json``) and the
reader's. Outputs: text on stdout, an exit code.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from sidebyside.lab.verdict import FRAMEWORKS, fmt_number, fmt_ratio
from sidebyside.publish.cache import published_record
from sidebyside.publish.common import ROOT, PublishError, say
from sidebyside.publish.discovery import discover, select

__all__ = ["Row", "speed_verdicts", "compare", "table", "summary", "reproduce", "SCRATCH"]

#: Where the reader's runs go: one scratch site per slug, under the (ignored) build folder.
SCRATCH = ROOT / "build" / "reproduce"

REPRODUCES, OTHER_WINNER, OUTSIDE, MISSING = ("reproduces", "different winner", "same winner, outside the interval",
                                              "not measured in your run")


@dataclasses.dataclass
class Row:
    """One speed verdict, published against the reader's. ``ratio``/``interval``: the
    subject's time over the other's; ``combined``: the interval the reader's ratio must
    fall in; ``outcome``: one of "reproduces", "different winner", "same winner, outside
    the interval", "not measured in your run"; ``same_hardware``: whether a miss fails."""

    question: str
    published: dict[str, Any]
    reader: dict[str, Any] | None
    published_device: str
    reader_device: str
    combined: tuple[float, float] | None
    outcome: str

    @property
    def same_hardware(self) -> bool:
        return self.published_device == self.reader_device

    @property
    def reproduces(self) -> bool:
        return self.outcome == REPRODUCES

    @property
    def fails(self) -> bool:
        """A verdict measured on the same hardware kind that does not reproduce."""
        return self.same_hardware and self.outcome in (OTHER_WINNER, OUTSIDE)


def _verdicts(record: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    found = (record.get("metrics") or {}).get("verdicts") or []
    return list(found.values()) if isinstance(found, Mapping) else list(found)


def speed_verdicts(record: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The speed verdicts of a results record, each as ``{"question", "winner", "ratio",
    "interval", "subject", "other", "tools"}`` (``ratio`` and ``interval``: the subject's
    median time over the other's, from the verdict's sides)."""
    out = []
    for v in _verdicts(record):
        sides, interval = v.get("sides") or {}, v.get("interval")
        subject, other = v.get("subject"), v.get("other")
        try:
            ratio = sides[subject]["median_s"] / sides[other]["median_s"]
        except (KeyError, TypeError, ZeroDivisionError):
            continue  # not a speed verdict (seeds, parity), or no comparison
        if not interval or len(interval) != 2 or not ratio > 0:
            continue
        out.append({"question": v.get("question", ""), "winner": v.get("winner"), "ratio": ratio,
                    "interval": (float(interval[0]), float(interval[1])), "subject": subject, "other": other,
                    "tools": {k: (sides.get(k) or {}).get("tool", "") for k in (subject, other)}})
    return out


def _device(record: Mapping[str, Any]) -> str:
    return str((record.get("provenance") or {}).get("device") or "unknown hardware")


def _combined(published: Mapping[str, Any], reader: Mapping[str, Any]) -> tuple[float, float]:
    """The published interval widened by the reader's own relative spread on each side."""
    lo_p, hi_p = published["interval"]
    lo_r, hi_r = reader["interval"]
    r = reader["ratio"]
    return lo_p * min(lo_r / r, 1.0), hi_p * max(hi_r / r, 1.0)


def compare(published: Mapping[str, Any], reader: Mapping[str, Any]) -> list[Row]:
    """One :class:`Row` per speed verdict of ``published``, matched with the reader's
    verdict of the same question (in order, where a question repeats)."""
    theirs: dict[str, list[dict[str, Any]]] = {}
    for v in speed_verdicts(reader):
        theirs.setdefault(v["question"], []).append(v)
    rows = []
    for p in speed_verdicts(published):
        candidates = theirs.get(p["question"]) or []
        r = candidates.pop(0) if candidates else None
        combined, outcome = None, MISSING
        if r is not None:
            combined = _combined(p, r)
            if p["winner"] != r["winner"]:
                outcome = OTHER_WINNER
            elif combined[0] <= r["ratio"] <= combined[1]:
                outcome = REPRODUCES
            else:
                outcome = OUTSIDE
        rows.append(Row(p["question"], p, r, _device(published), _device(reader), combined, outcome))
    return rows


def _figure(v: Mapping[str, Any]) -> str:
    lo, hi = v["interval"]
    spread = f"time ratio {fmt_number(v['ratio'])}, interval {fmt_number(lo)}–{fmt_number(hi)}"
    if v["winner"] is None:
        return f"within noise ({spread})"
    factor = 1 / v["ratio"] if v["winner"] == v["subject"] else v["ratio"]
    tool = v["tools"].get(v["winner"])
    who = FRAMEWORKS.get(v["winner"], v["winner"]) + (f" ({tool})" if tool else "")
    return f"{who} {fmt_ratio(factor)} faster ({spread})"


def table(rows: Iterable[Row]) -> str:
    """The rows as text: per verdict its question, the published figure and hardware, the
    reader's, and the outcome."""
    lines = []
    for row in rows:
        lines.append(row.question)
        lines.append(f"  published: {_figure(row.published)} on {row.published_device}")
        lines.append(f"  yours:     {_figure(row.reader) if row.reader else 'not measured'} on {row.reader_device}")
        if row.outcome == REPRODUCES:
            said = "reproduces"
        elif row.outcome == MISSING:
            said = "not measured in your run (its question differs: another profile or another version)"
        elif row.outcome == OTHER_WINNER:
            said = "does NOT reproduce: a different winner"
        else:
            lo, hi = row.combined
            said = (f"does NOT reproduce: the same winner, but the time ratio {fmt_number(row.reader['ratio'])} is "
                    f"outside the combined interval {fmt_number(lo)}–{fmt_number(hi)}")
        if row.outcome != REPRODUCES and not row.same_hardware:
            said += " (other hardware: reported, not failed)"
        lines.append(f"  -> {said}")
    return "\n".join(lines)


def summary(slug: str, rows: list[Row]) -> str:
    """One line: how many speed verdicts reproduce, on which hardware, and whether that fails."""
    if not rows:
        return f"{slug}: no speed verdict to reproduce"
    held = sum(row.reproduces for row in rows)
    failed = sum(row.fails for row in rows)
    where = (f"on the same hardware ({rows[0].reader_device})" if rows[0].same_hardware else
             f"on other hardware (yours: {rows[0].reader_device}; published: {rows[0].published_device}), "
             "reported, not failed")
    verdict = f"; {failed} do{'es' if failed == 1 else ''} not: FAILED" if failed else ""
    return f"{slug}: {held} of {len(rows)} speed verdicts reproduce {where}{verdict}"


def reproduce(*, only: str, profile: str | None = None, site: Path = ROOT, scratch: Path = SCRATCH,
              notebooks: Path = ROOT / "notebooks", params_dir: Path = ROOT / "params", root: Path = ROOT,
              allow_busy: bool = False, progress: bool = True) -> int:
    """Run each notebook of ``only`` on this machine into ``scratch/<slug>/`` with the
    published profile (or ``profile``), print :func:`table` and :func:`summary` against
    the record published in ``site``; return 1 when a verdict measured on the same
    hardware kind does not reproduce, else 0."""
    from sidebyside.publish.cli import run

    if not only:
        raise PublishError("reproduce needs the post to check: make reproduce ONLY=<slug> (make list shows the slugs)")
    exit_code = 0
    for info in select(discover(notebooks), only):
        published = published_record(site, info.slug)
        if published is None:
            raise PublishError(f"{info.slug} is not published in {site}: there is nothing to reproduce")
        chosen = profile or published["profile"]
        target = Path(scratch) / info.slug
        say(f"{info.slug}: running it here with the {chosen} profile into {target} (the published files are not "
            "touched) ...")
        run(profile=chosen, only=info.slug, force=True, site=target, build=target / "build", notebooks=notebooks,
            params_dir=params_dir, root=root, progress=progress, allow_busy=allow_busy)
        mine = published_record(target, info.slug)
        if mine is None:
            raise PublishError(f"{info.slug}: the run left no results in {target}")
        rows = compare(published, mine)
        print(table(rows))
        print(summary(info.slug, rows))
        if any(row.fails for row in rows):
            exit_code = 1
    return exit_code
