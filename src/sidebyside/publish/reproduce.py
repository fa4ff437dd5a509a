"""How a reader checks us: ``make reproduce ONLY=<slug>``.

:func:`reproduce` runs the notebook on this machine, with the profile of the
published run, into a scratch site (``build/reproduce/<slug>/``: the
published posts, images and results are never touched), then compares every
speed verdict of the two records (:func:`compare`, matched by the verdicts' stable ids, never by
their text: :func:`sidebyside.lab.framing.verdict_id`, the race and its size) and
prints, per verdict, the published figure and hardware, the reader's figure
and hardware, and whether it reproduces (:func:`table`), then a line on the
two machines (:func:`machines`) and a one-line summary (:func:`summary`); a run
of the published version on a machine of its fingerprint joins the log of
re-runs that the verdict box shows (:mod:`sidebyside.publish.reruns`).

A speed verdict reproduces when the winner is the same (no winner on both sides
counts as the same: within noise, practically tied) and the two 95% confidence
intervals of the time ratio (each over its run's independent processes, widened
by the race's spread between runs) overlap. A verdict that only one of the two
runs decided (the other's interval holds 1) while the intervals overlap is
*consistent*: neither run contradicts the other, which is all a hard 95%
decision on a race near the edge of its interval can promise (such a race is
decided in some runs and not in others however honest its interval), so it is
counted apart and never fails. Opposite winners, and intervals that do not
overlap, contradict the published verdict. Machines are compared by their
fingerprints (the records' ``provenance.fingerprint``,
:func:`sidebyside.run.provenance.fingerprint`: the CPU's vendor, family, model,
stepping, model name, vector extensions, caches and nominal clock; for a gpu
post the GPU's model, memory, clocks and driver too), never by name: hosts that
share a name differ. :func:`differences` says, field by field, where the
reader's machine differs from the published one. On the same fingerprint a
contradiction makes the command exit 1; on another fingerprint it is reported,
not failed. Where a record has none (one written before fingerprints) the
fingerprint is "unknown" and the machines are compared by name
(``provenance.device``), as before, and the table says so. A busy machine never
stops it: load widens the reader's intervals, and the verdicts say so.

:func:`aa` is the same run in A/A mode (``make aa ONLY=<slug>``): every timed
contestant races the first one's function through the verdict's own path,
and :func:`aa_table` counts the speed verdicts that still find a winner.

:func:`in_notebook` is the same table in a notebook's last cell, for a reader who ran it by hand
(Colab): the published record is read through :mod:`sidebyside.run.colab`.

Inputs: the published record (``<site>/_data/results/<slug>.json``) and the
reader's. Outputs: text on stdout, an exit code, ``<site>/_data/reruns/<slug>.json``, and on any
machine the comparison as a file to send (:mod:`sidebyside.publish.reproductions`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from sidebyside.lab.words import FRAMEWORKS, fmt_number, fmt_ratio
from sidebyside.publish import footprint, reproductions, reruns
from sidebyside.publish.cache import published_record
from sidebyside.publish.common import ROOT, PublishError, say
from sidebyside.publish.discovery import discover, select
from sidebyside.publish.reruns import differences, speed_verdicts

__all__ = ["Row", "compare", "table", "machines", "summary", "in_notebook",
           "reproduce", "aa", "aa_table", "SCRATCH", "AA_SCRATCH"]

#: Where the reader's runs go: one scratch site per slug, under the (ignored) build folder.
SCRATCH = ROOT / "build" / "reproduce"
#: Where the A/A runs go.
AA_SCRATCH = ROOT / "build" / "aa"

REPRODUCES, CONSISTENT, OTHER_WINNER, OUTSIDE, MISSING = (
    "reproduces", "decided in one run only, intervals overlap", "different winner",
    "same winner, intervals do not overlap", "not measured in your run")
#: How a reproduction file names each outcome (:data:`sidebyside.publish.reproductions.OUTCOMES`).
KINDS = {REPRODUCES: "reproduces", CONSISTENT: "consistent", OTHER_WINNER: "contradicts",
         OUTSIDE: "contradicts", MISSING: "not measured"}


@dataclasses.dataclass
class Row:
    """One speed verdict, published against the reader's. ``ratio``/``interval``: the
    subject's time over the other's; ``combined``: where the two 95% intervals overlap (None
    when they do not, or one has none); ``outcome``: one of "reproduces", "decided in one run
    only, intervals overlap" (consistent), "different winner" (opposite winners, or decided in
    one run only with intervals apart), "same winner, intervals do not overlap", "not measured in
    your run"; ``differs``: where the reader's machine differs from the published one
    (:func:`differences`; None where a record has no fingerprint); ``same_hardware``: the same
    fingerprint (without one: the same device name), so that a contradiction fails."""

    question: str
    published: dict[str, Any]
    reader: dict[str, Any] | None
    published_device: str
    reader_device: str
    combined: tuple[float, float] | None
    outcome: str
    differs: list[str] | None = None

    @property
    def same_hardware(self) -> bool:
        return self.published_device == self.reader_device if self.differs is None else not self.differs

    @property
    def kind(self) -> str:
        """The outcome as a reproduction file names it: one of :data:`KINDS`' values."""
        return KINDS[self.outcome]

    @property
    def reproduces(self) -> bool:
        return self.outcome == REPRODUCES

    @property
    def consistent(self) -> bool:
        """Decided in one run only, with the two intervals overlapping: not the same answer, no contradiction."""
        return self.outcome == CONSISTENT

    @property
    def fails(self) -> bool:
        """A verdict measured on the same hardware kind that the reader's run contradicts."""
        return self.same_hardware and self.outcome in (OTHER_WINNER, OUTSIDE)


def _device(record: Mapping[str, Any]) -> str:
    return str((record.get("provenance") or {}).get("device") or "unknown hardware")


def _combined(published: Mapping[str, Any], reader: Mapping[str, Any]) -> tuple[float, float] | None:
    """Where the published and the reader's 95% intervals overlap; None when they do not or one
    has no interval."""
    if published["interval"] is None or reader["interval"] is None:
        return None
    lo, hi = max(published["interval"][0], reader["interval"][0]), min(published["interval"][1], reader["interval"][1])
    return (lo, hi) if lo <= hi else None


def compare(published: Mapping[str, Any], reader: Mapping[str, Any]) -> list[Row]:
    """One :class:`Row` per speed verdict of ``published``, matched with the reader's
    verdict of the same id (in order, where an id repeats; a verdict without one matches
    nothing), each with the :func:`differences` of the two machines."""
    differs = differences(published, reader)
    theirs: dict[str, list[dict[str, Any]]] = {}
    for v in speed_verdicts(reader):
        if v["id"]:
            theirs.setdefault(v["id"], []).append(v)
    rows = []
    for p in speed_verdicts(published):
        candidates = (theirs.get(p["id"]) or []) if p["id"] else []
        r = candidates.pop(0) if candidates else None
        combined, outcome = None, MISSING
        if r is not None:
            combined = _combined(p, r)
            if p["winner"] != r["winner"]:
                one_run = p["winner"] is None or r["winner"] is None
                outcome = CONSISTENT if one_run and combined is not None else OTHER_WINNER
            elif combined is not None:
                outcome = REPRODUCES
            else:
                outcome = OUTSIDE
        rows.append(Row(p["question"], p, r, _device(published), _device(reader), combined, outcome, differs))
    return rows


def _figure(v: Mapping[str, Any]) -> str:
    if v["interval"] is None:
        return f"{v.get('label') or 'no verdict'} (time ratio {fmt_number(v['ratio'])}, no interval)"
    lo, hi = v["interval"]
    if v["winner"] is None:
        return (f"{v.get('label') or 'within noise'} (time ratio {fmt_number(v['ratio'])}, 95% interval "
                f"{fmt_number(lo)}–{fmt_number(hi)})")
    subject_wins = v["winner"] == v["subject"]
    factor = 1 / v["ratio"] if subject_wins else v["ratio"]
    low, high = (1 / hi, 1 / lo) if subject_wins else (lo, hi)
    tool = v["tools"].get(v["winner"])
    who = FRAMEWORKS.get(v["winner"], v["winner"]) + (f" ({tool})" if tool else "")
    return f"{who} {fmt_ratio(factor)} faster ({fmt_number(low)}–{fmt_ratio(high)}, 95% interval)"


def _undecided(row: Row) -> str:
    """Which of the two runs found no winner, where only one did."""
    return "the published run" if not row.published["winner"] else "your run"


def _how_different(row: Row) -> str:
    """Which kind of different winner: opposite winners, or an answer only one run decided (the other's
    interval holds 1) whose interval lies apart from the other's (overlapping, it is consistent)."""
    if row.published["winner"] and row.reader["winner"]:
        return " (opposite winners)"
    return f" (decided in one run only: {_undecided(row)} finds no winner; the two 95% intervals do not overlap)"


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
        elif row.outcome == CONSISTENT:
            said = (f"consistent, not the same answer: decided in one run only ({_undecided(row)} finds no winner) "
                    "and the two 95% intervals overlap, so neither run contradicts the other")
        elif row.outcome == MISSING:
            said = ("not measured in your run (no verdict of yours has its id: another profile's sizes or another "
                    "version)" if row.published.get("id") else
                    "not compared: the published record predates verdict ids (it is matched once republished)")
        elif row.outcome == OTHER_WINNER:
            said = "does NOT reproduce: a different winner" + _how_different(row)
        else:
            said = "does NOT reproduce: the same winner, but the two 95% intervals do not overlap"
        if row.outcome not in (REPRODUCES, CONSISTENT) and not row.same_hardware:
            said += " (other hardware: reported, not failed)"
        lines.append(f"  -> {said}")
    return "\n".join(lines)


def machines(rows: list[Row]) -> str:
    """One line: whether the reader's machine has the published one's fingerprint, and if not
    which fields differ (or that a record has no fingerprint: "unknown")."""
    if not rows:
        return ""
    if rows[0].differs is None:
        return ("machines: the published run or yours recorded no fingerprint (unknown), so the machines are "
                "compared by name only, and hosts that share a name can differ")
    if not rows[0].differs:
        return "machines: the same fingerprint as the published run"
    return "machines: yours differs from the published one: " + "; ".join(rows[0].differs)


def summary(slug: str, rows: list[Row]) -> str:
    """One line: how many speed verdicts reproduce, how many only one run decided (consistent), on
    which hardware, and whether a contradiction fails it."""
    if not rows:
        return f"{slug}: no speed verdict to reproduce"
    held = sum(row.reproduces for row in rows)
    failed = sum(row.fails for row in rows)
    if rows[0].same_hardware:
        how = "the same fingerprint" if rows[0].differs is not None else "the same name; fingerprint unknown"
        where = f"on the same hardware ({rows[0].reader_device}, {how})"
    elif rows[0].differs is None:
        where = (f"on other hardware (yours: {rows[0].reader_device}; published: {rows[0].published_device}; "
                 "fingerprint unknown), reported, not failed")
    else:
        where = (f"on other hardware (yours: {rows[0].reader_device}; published: {rows[0].published_device}; "
                 f"{len(rows[0].differs)} field{'s' if len(rows[0].differs) != 1 else ''} of the fingerprint "
                 "differ), reported, not failed")
    consistent = sum(row.consistent for row in rows)
    apart = (f"; {consistent} decided in one run only, with overlapping intervals (consistent, not failed)"
             if consistent else "")
    verdict = f"; {failed} contradicted by your run: FAILED" if failed else ""
    return f"{slug}: {held} of {len(rows)} speed verdicts reproduce {where}{apart}{verdict}"


def in_notebook(slug: str, record: Mapping[str, Any], repository: str) -> str:
    """Print and return the reader's speed verdicts (their run's ``record``, as
    :func:`sidebyside.run.provenance.save_results` returns it) beside the published ones: the
    :func:`table`, :func:`machines` and :func:`summary` of ``make reproduce``, for the repository's
    published record.
    A run at another profile's sizes than the post's (the run context's profile, which the profile
    cell names) is compared with nothing, and says so."""
    from sidebyside.run import colab, context

    theirs = colab.published(slug, repository)
    mine = context.current().profile
    if theirs is None:
        text = f"{slug}: not published yet, nothing to compare with"
    elif mine and theirs.get("profile") and mine != theirs["profile"]:
        text = (f"{slug}: this run used the {mine} profile's sizes and the post's verdicts come from its "
                f"{theirs['profile']} profile, so nothing is compared: set PROFILE = \"{theirs['profile']}\" in the "
                "profile cell to reproduce them")
    else:
        rows = compare(theirs, record)
        text = "\n".join([table(rows), machines(rows), summary(slug, rows)])
    print(text)
    return text


def _run_here(info, chosen: str, target: Path, *, notebooks: Path, params_dir: Path, root: Path, progress: bool,
              aa: bool = False) -> dict[str, Any]:
    """Run one notebook here into the scratch site ``target`` and return its record."""
    from sidebyside.publish.discovery import read_notebook_info
    from sidebyside.publish.pipeline import run

    say(f"{info.slug}: running it here with the {chosen} profile{' in A/A mode' if aa else ''} into {target} (the "
        "published files are not touched) ...")
    # The cells done and left, with the memory of every process of the run (papermill's own bar, in
    # the run's child, would reach the terminal only at its end); +1: the parameters papermill adds.
    cells = len(read_notebook_info(info.path)[1].cells) + 1
    with footprint.Watch(cells=footprint.cell_file(target / "build", info.slug), total_cells=cells,
                         bar=progress, desc=f"{info.slug}: cells") as watch:
        run(profile=chosen, only=info.slug, force=True, site=target, build=target / "build",
            notebooks=notebooks, params_dir=params_dir, root=root, progress=False, aa=aa)
    say(f"{info.slug}: ran in {watch.wall_s:,.0f} s here, with a peak of {watch.peak_bytes / 1e9:.1f} GB "
        "of memory over all its processes")
    mine = published_record(target, info.slug)
    if mine is None:
        raise PublishError(f"{info.slug}: the run left no results in {target}")
    return mine


def reproduce(*, only: str, profile: str | None = None, site: Path = ROOT, scratch: Path = SCRATCH,
              notebooks: Path = ROOT / "notebooks", params_dir: Path = ROOT / "params", root: Path = ROOT,
              progress: bool = True) -> int:
    """Run each notebook of ``only`` on this machine into ``scratch/<slug>/`` with the
    published profile (or ``profile``), having said first its expected time and peak memory here
    (:func:`sidebyside.publish.footprint.estimate`) and with a bar of its cells done and left; print
    :func:`table`, :func:`machines` and
    :func:`summary` against the record published in ``site``, write the comparison as a
    reproduction file (:func:`sidebyside.publish.reproductions.write`, its path printed); return 1
    when the run, on a machine of the published fingerprint, contradicts a verdict (opposite
    winners, or intervals apart), else 0."""
    if not only:
        raise PublishError("reproduce needs the post to check: make reproduce ONLY=<slug> (make list shows the slugs)")
    exit_code = 0
    for info in select(discover(notebooks), only):
        published = published_record(site, info.slug)
        if published is None:
            raise PublishError(f"{info.slug} is not published in {site}: there is nothing to reproduce")
        chosen = profile or published["profile"]
        say(footprint.describe(footprint.estimate(info.slug, published, chosen, root=root)))
        mine = _run_here(info, chosen, Path(scratch) / info.slug, notebooks=notebooks,
                         params_dir=params_dir, root=root, progress=progress)
        rows = compare(published, mine)
        print(table(rows))
        print(machines(rows))
        written = reproductions.write(site, reproductions.build(info.slug, published, mine, rows))
        print(f"{info.slug}: this comparison is written to {written}: send it as a pull request "
              "to add it to the post's reproductions")
        print(summary(info.slug, rows))
        print(f"{info.slug}: {reruns.log(site, info.slug, published, mine)}")
        if any(row.fails for row in rows):
            exit_code = 1
    return exit_code


def aa_table(record: Mapping[str, Any]) -> tuple[str, int, int]:
    """The speed verdicts of an A/A run's record, one line each (label, ratio, interval), and
    ``(text, winners, verdicts)``: how many of them found a winner."""
    found = speed_verdicts(record)
    lines = [f"{_figure(v)}: {v['question']}" for v in found]
    winners = sum(v["winner"] is not None for v in found)
    return "\n".join(lines), winners, len(found)


def aa(*, only: str, profile: str | None = None, site: Path = ROOT, scratch: Path = AA_SCRATCH,
       notebooks: Path = ROOT / "notebooks", params_dir: Path = ROOT / "params", root: Path = ROOT,
       progress: bool = True) -> int:
    """Run each notebook of ``only`` here in A/A mode into ``scratch/<slug>/`` (the published
    profile, or ``profile``, else cpu), print each speed verdict and how many found a winner;
    return 0 (the count is the finding)."""
    if not only:
        raise PublishError("aa needs the post to check: make aa ONLY=<slug> (make list shows the slugs)")
    total = winners = 0
    for info in select(discover(notebooks), only):
        published = published_record(site, info.slug)
        chosen = profile or (published or {}).get("profile") or "cpu"
        record = _run_here(info, chosen, Path(scratch) / info.slug, notebooks=notebooks, params_dir=params_dir,
                           root=root, progress=progress, aa=True)
        text, won, count = aa_table(record)
        print(text)
        print(f"{info.slug}: {won} of {count} speed verdicts found a winner racing each contestant against itself "
              f"({_device(record)}, {chosen} profile)")
        total, winners = total + count, winners + won
    print(f"A/A: {winners} of {total} speed verdicts found a winner")
    return 0
