"""What a run costs on this machine: its time, its memory and the disk its caches take.

- :func:`estimate` and :func:`describe`: before ``make reproduce`` runs a post, its expected time
  and peak memory here, from the published run's own figures (``provenance.run_s`` and
  ``provenance.peak_rss_bytes``, which the publisher writes for every run: :func:`note_run`), the
  time scaled by this machine's speed on the calibration workloads of :mod:`sidebyside.lab.quiet`
  against the recorded machine's (the run's quiet level, else the committed baseline of its
  fingerprint). A record without those figures is said to have none; nothing is guessed.
- :class:`Watch`: samples the summed resident memory (RSS) of a process tree (a process and every
  descendant: the kernel, the timing workers, compiler children; a page shared by two processes
  counts in each) while a run goes on, its peak overall and per notebook cell (the cell that
  papermill started last, from the run's cell file, :func:`cell_file`), and shows a progress bar of
  the cells done and left.
- :func:`memory` (``python -m sidebyside.publish.footprint memory --only <slug>``,
  or ``-- <command>``): runs a post (or any command) under a :class:`Watch` and prints the peak,
  and per part (the notebook's ``## `` sections, :func:`parts`) its time and peak.
- Caches: :func:`cache_folders` (the persistent ones), :func:`prune` (a size cap per folder, least
  recently used first), :func:`prune_caches` (the publisher, at the start of every run) and
  :func:`empty_caches` (``make clean-caches``).
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from sidebyside.publish.common import ROOT, PublishError, say

__all__ = ["Estimate", "estimate", "describe", "calibrate_here", "tree_rss", "Watch", "cell_file",
           "parts", "by_part", "note_run", "memory", "cache_folders", "prune", "prune_caches",
           "empty_caches", "CAP_ENV", "DEFAULT_CAP_GB", "KEEP_RECENT_S", "main"]

GB = 1e9
#: The calibration workloads an estimate scales by (:func:`sidebyside.lab.quiet.calibrate`).
WORKLOADS = ("compute_s", "copy_s")


# ------------------------------------------------------------------ the estimate


@dataclasses.dataclass
class Estimate:
    """A post's expected cost here. ``run_s``/``peak_bytes``: the recorded run's (None: not
    recorded); ``factor``: how many times as long the calibration takes here as on the recorded
    machine (None: not scaled, ``why`` says why); ``expected_s``: ``run_s`` times ``factor`` (or
    ``run_s`` unscaled)."""

    slug: str
    profile: str
    device: str
    run_s: float | None
    peak_bytes: int | None
    factor: float | None
    why: str
    available_bytes: int | None = None

    @property
    def expected_s(self) -> float | None:
        if self.run_s is None:
            return None
        return self.run_s * (self.factor if self.factor is not None else 1.0)


def _run_of(record: Mapping[str, Any], profile: str) -> Mapping[str, Any] | None:
    """The run of ``profile`` in a published record: the record itself, or its GPU run."""
    if record.get("profile") == profile:
        return record
    gpu = record.get("gpu_run")
    return gpu if isinstance(gpu, Mapping) and gpu.get("profile") == profile else None


def _recorded_speed(provenance: Mapping[str, Any],
                    baselines: Path) -> tuple[dict[str, float] | None, str]:
    """The recorded machine's calibration: the run's quiet level, else the committed baseline of its
    fingerprint; and where it comes from, in words."""
    level = (provenance.get("machine") or {}).get("quiet_level") or {}
    found = {k: float(v) for k, v in level.items()
             if k in WORKLOADS and isinstance(v, (int, float)) and v > 0}
    if found:
        return found, "its run's quiet level"
    from sidebyside.lab import quiet

    kind = provenance.get("machine_kind")
    committed = quiet.load_baseline(str(kind), baselines) if kind else None
    found = {k: v for k, v in (committed or {}).items() if k in WORKLOADS and v > 0}
    return (found, "the committed baseline of its fingerprint") if found else (None, "")


def calibrate_here(rounds: int = 5, runs: int = 5) -> dict[str, float]:
    """This machine's calibration (:func:`sidebyside.lab.quiet.calibrate`, CPU workloads): the lower
    quartile of ``rounds`` calibrations of ``runs`` runs each, as the quiet check reads a quiet
    level     (about a fifth of a second)."""
    from sidebyside.lab import quiet

    seen = [quiet.calibrate(runs) for _ in range(max(1, rounds))]
    return {name: sorted(c[name] for c in seen)[(len(seen) - 1) // 4] for name in WORKLOADS}


def estimate(slug: str, record: Mapping[str, Any], profile: str, *,
             here: Callable[[], Mapping[str, float]] | None = None, root: Path = ROOT,
             available: Callable[[], int | None] | None = None) -> Estimate:
    """The expected time and peak memory here of the ``profile`` run of ``record`` (a published
    record). The time is scaled by the geometric mean, over the calibration workloads, of this
    machine's seconds (``here()``, default :func:`calibrate_here`) over the recorded machine's; a
    gpu run is not scaled (no GPU is calibrated before a run). ``available``: this machine's
    available memory in bytes."""
    run = _run_of(record, profile)
    available_bytes = (available or _available)()
    if run is None:
        return Estimate(slug, profile, "unknown hardware", None, None, None,
                        f"the published record holds no {profile} run", available_bytes)
    provenance = run.get("provenance") or {}
    device = str(provenance.get("device") or "unknown hardware")
    run_s, peak = provenance.get("run_s"), provenance.get("peak_rss_bytes")
    run_s = float(run_s) if isinstance(run_s, (int, float)) and run_s > 0 else None
    peak = int(peak) if isinstance(peak, (int, float)) and peak > 0 else None
    if profile == "gpu":
        return Estimate(slug, profile, device, run_s, peak, None,
                        "a GPU run's time is not scaled (no GPU is calibrated before the run)",
                        available_bytes)
    recorded, source = _recorded_speed(provenance, root / "params" / "quiet-baselines.json")
    if run_s is None or recorded is None:
        why = "" if run_s is None else "the recorded machine has no calibration to scale by"
        return Estimate(slug, profile, device, run_s, peak, None, why, available_bytes)
    mine = (here or calibrate_here)()
    ratios = [mine[k] / recorded[k] for k in recorded if mine.get(k)]
    factor = math.exp(statistics.fmean(math.log(r) for r in ratios)) if ratios else None
    why = (f"scaled by this machine's calibration against {source}" if factor is not None
           else "this machine's calibration has no workload in common with the recorded one")
    return Estimate(slug, profile, device, run_s, peak, factor, why, available_bytes)


def _available() -> int | None:
    try:
        import psutil

        return int(psutil.virtual_memory().available)
    except Exception:  # noqa: BLE001  (no reading: the line says nothing of fit)
        return None


def _duration(seconds: float) -> str:
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def describe(e: Estimate) -> str:
    """The estimate in words, one line: the expected time (and the recorded one, and how it was
    scaled), the peak memory of all the run's processes together and whether it fits in this
    machine's available memory; or that the record holds neither figure."""
    if e.run_s is None and e.peak_bytes is None:
        return (f"{e.slug}: no estimate of time or memory: "
                f"{e.why or 'its published record predates them'} "
                "(the publisher records each run's time and peak memory, provenance.run_s and "
                "peak_rss_bytes, from now on)")
    said = ["time not recorded" if e.run_s is None else
            f"about {_duration(e.run_s)} (as recorded on {e.device}; {e.why or 'not scaled'})"
            if e.factor is None else
            f"about {_duration(e.expected_s)} here ({e.run_s:,.0f} s recorded on {e.device}; "
            f"{e.why}: {e.factor:.2f}x its time)"]
    if e.peak_bytes is None:
        said.append("peak memory not recorded")
    else:
        fit = f"; {e.available_bytes / GB:.1f} GB available here" if e.available_bytes else ""
        if e.available_bytes and e.peak_bytes > e.available_bytes:
            fit += ": it may not fit, close other programs first"
        said.append(f"a peak of about {e.peak_bytes / GB:.1f} GB of memory, all its processes "
                    f"together{fit}")
    return f"{e.slug} ({e.profile} profile): expect " + "; ".join(said)


# ------------------------------------------------------------------ sampling a process tree


def tree_rss(pid: int) -> int:
    """The summed RSS, in bytes, of process ``pid`` and every descendant (0 once it has ended); a
    process that ends while it is read is left out."""
    import psutil

    try:
        top = psutil.Process(pid)
        procs = [top, *top.children(recursive=True)]
    except psutil.Error:
        return 0
    total = 0
    for proc in procs:
        try:
            total += proc.memory_info().rss
        except psutil.Error:
            pass
    return total


def cell_file(build: Path, slug: str) -> Path:
    """Where a publisher run into ``build`` has papermill write the index and source of the cell it
    starts (:mod:`sidebyside.publish.running`'s job, ``build/sandbox/<slug>/run/cell.json``)."""
    return Path(build).resolve() / "sandbox" / slug / "run" / "cell.json"


def _current_cell(path: Path | None) -> int | None:
    if path is None:
        return None
    try:
        index = json.loads(path.read_text()).get("index")
    except (OSError, ValueError, AttributeError):
        return None
    return index if isinstance(index, int) else None


class Watch:
    """Samples :func:`tree_rss` of ``pid`` (default: this process) every ``interval`` seconds in a
    thread, from entering to leaving the ``with`` block. After it: ``peak_bytes``, ``wall_s``, and
    per cell index (read from ``cells``, a :func:`cell_file`) its peak (``cell_peak``) and
    seconds (``cell_s``). With ``bar`` it shows a tqdm bar on stderr of the cells started out of
    ``total_cells``, with the memory now and at its peak."""

    def __init__(self, pid: int | None = None, *, interval: float = 0.5, cells: Path | None = None,
                 total_cells: int | None = None, bar: bool = False, desc: str = "cells") -> None:
        self.pid, self.interval, self.cells = pid or os.getpid(), interval, cells
        self.total_cells, self.desc, self.show = total_cells, desc, bar
        self.peak_bytes, self.wall_s, self.samples = 0, 0.0, 0
        self.cell_peak: dict[int, int] = {}
        self.cell_s: dict[int, float] = {}
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._bar: Any = None
        self._cell: int | None = None
        self._since = 0.0

    def __enter__(self) -> Watch:
        self._start = self._since = time.monotonic()
        if self.show:
            from tqdm import tqdm

            self._bar = tqdm(total=self.total_cells, desc=self.desc, unit="cell", file=sys.stderr,
                             dynamic_ncols=True, mininterval=1.0)
        self.sample()
        self._thread = threading.Thread(target=self._loop, name="footprint-watch", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        self.sample()
        self.wall_s = time.monotonic() - self._start
        self._close_cell(time.monotonic())
        if self._bar is not None:
            if exc[0] is None and self._bar.total:
                self._bar.n = self._bar.total
            self._bar.refresh()
            self._bar.close()

    def _loop(self) -> None:
        while not self._stop.wait(self.interval):
            self.sample()

    def _close_cell(self, now: float) -> None:
        if self._cell is not None:
            self.cell_s[self._cell] = self.cell_s.get(self._cell, 0.0) + now - self._since
        self._since = now

    def sample(self) -> int:
        """One reading: the tree's RSS now, kept in the peaks (and shown on the bar)."""
        rss, now = tree_rss(self.pid), time.monotonic()
        cell = _current_cell(self.cells)
        if cell is not None and cell != self._cell:
            self._close_cell(now)
            self._cell = cell
        self.samples += 1
        self.peak_bytes = max(self.peak_bytes, rss)
        if self._cell is not None:
            self.cell_peak[self._cell] = max(self.cell_peak.get(self._cell, 0), rss)
        if self._bar is not None:
            if self._cell is not None and self._cell != self._bar.n:
                self._bar.n = self._cell  # the cells before the one that runs are done
            self._bar.set_postfix_str(
                f"memory {rss / GB:.1f} GB, peak {self.peak_bytes / GB:.1f} GB", refresh=True
            )
        return rss


def note_run(saved: dict[str, Any], watch: Watch) -> None:
    """Write a finished run's wall time and peak memory into its record's provenance: ``run_s``
    (seconds, one decimal) and ``peak_rss_bytes`` (the peak of :func:`tree_rss` over the run)."""
    provenance = saved.setdefault("provenance", {})
    provenance["run_s"] = round(watch.wall_s, 1)
    provenance["peak_rss_bytes"] = int(watch.peak_bytes)


# ------------------------------------------------------------------ parts and the memory command

#: The part of the cells before a notebook's first ``## `` section.
OPENING = "(opening, before the first section)"


def parts(cells: Sequence[Mapping[str, Any]]) -> list[str]:
    """Each cell's part, by index: the title of the ``## `` heading of the last markdown cell that
    has one at or before it (:data:`OPENING` before the first)."""
    current, found = OPENING, []
    for cell in cells:
        if cell.get("cell_type") == "markdown":
            source = cell.get("source") or ""
            text = "".join(source) if isinstance(source, list) else str(source)
            headings = [line[3:].strip() for line in text.splitlines() if line.startswith("## ")]
            current = headings[0] if headings else current
        found.append(current)
    return found


def by_part(watch: Watch, cells: Sequence[Mapping[str, Any]]) -> dict[str, dict[str, float]]:
    """``{part: {"seconds", "peak_bytes"}}`` in the notebook's order, of the cells ``watch`` saw."""
    out: dict[str, dict[str, float]] = {}
    for index, title in enumerate(parts(cells)):
        if index in watch.cell_peak or index in watch.cell_s:
            entry = out.setdefault(title, {"seconds": 0.0, "peak_bytes": 0})
            entry["seconds"] += watch.cell_s.get(index, 0.0)
            entry["peak_bytes"] = max(entry["peak_bytes"], watch.cell_peak.get(index, 0))
    return out


def _report(label: str, watch: Watch, cells: Sequence[Mapping[str, Any]] | None) -> str:
    lines = [f"{label}: peak {watch.peak_bytes / GB:.2f} GB of memory (RSS summed over every "
             f"process of the run), {watch.wall_s:,.1f} s, {watch.samples} readings"]
    lines += [f"  {title}: peak {entry['peak_bytes'] / GB:.2f} GB, {entry['seconds']:,.1f} s"
              for title, entry in by_part(watch, cells or []).items()]
    return "\n".join(lines)


def _run_post(slug: str, profile: str | None, build: Path, notebooks: Path, params_dir: Path,
              root: Path, interval: float) -> tuple[Watch, list[dict[str, Any]]]:
    """Run one post's notebook (:func:`sidebyside.publish.running.execute`, nothing published) under
    a :class:`Watch`; the watch and the executed notebook's cells."""
    from sidebyside.publish.discovery import discover, read_notebook_info, select
    from sidebyside.publish.params import detect_profile, load_all_params
    from sidebyside.publish.running import execute

    profile = detect_profile() if profile in (None, "auto") else profile
    everything = discover(notebooks)
    infos = select(everything, slug)
    if len(infos) != 1:
        raise PublishError(f"memory measures one post at a time: --only {slug!r} names "
                           f"{len(infos)}")
    info = infos[0]
    params = load_all_params(params_dir, everything)[profile][info.slug]
    _, nb = read_notebook_info(info.path)
    total = len(nb.cells) + (1 if params else 0)  # papermill adds a cell with the parameters
    say(f"{info.slug}: running it with the {profile} profile into {build}, sampling its memory ...")
    with Watch(interval=interval, cells=cell_file(build, info.slug), total_cells=total, bar=True,
               desc=f"{info.slug}: cells") as watch:
        executed, _ = execute(info, nb, profile, params, build, root=root, progress=False)
    return watch, json.loads(executed.read_text())["cells"]


def memory(*, only: str | None = None, command: Sequence[str] = (), profile: str | None = None,
           build: Path = ROOT / "build" / "footprint", notebooks: Path = ROOT / "notebooks",
           params_dir: Path = ROOT / "params", root: Path = ROOT, interval: float = 0.5) -> int:
    """Run the post ``only`` (into ``build``; nothing is published) or ``command``, sampling the
    summed RSS of every process of it, and print its peak, and per part of a post its seconds and
    peak. Returns the command's exit status (0 for a post that ran)."""
    if bool(only) == bool(command):
        raise PublishError(
            "memory measures a post or a command: --only <slug>, or -- <command ...>"
        )
    if only:
        watch, cells = _run_post(only, profile, Path(build), notebooks, params_dir, root, interval)
        print(_report(only, watch, cells))
        return 0
    try:
        proc = subprocess.Popen(list(command))
    except OSError as exc:
        raise PublishError(f"memory could not start {command[0]!r}: {exc}") from None
    with Watch(proc.pid, interval=interval) as watch:
        code = proc.wait()
    print(_report(" ".join(command)[:100], watch, None))
    return code


# ------------------------------------------------------------------ caches

#: The cap on each cache folder, in GB (decimal), where the environment sets one.
CAP_ENV = "SIDEBYSIDE_CACHE_CAP_GB"
DEFAULT_CAP_GB = 4.0
#: Entries used this recently (seconds) are never pruned: a run may be using them.
KEEP_RECENT_S = 600
#: The name a run's temporary compilation cache starts with (:mod:`sidebyside.lab.conditions`,
#: :mod:`sidebyside.publish.running`), left behind when its run was killed.
TEMPORARY_PREFIX = "sidebyside-compile-"
#: A file's companions, pruned with it: JAX's access-time file, a hash record, a lock.
_COMPANIONS = ("-cache", "-atime", ".sha256", ".lock", ".tmp")


def cache_folders(root: Path = ROOT, env: Mapping[str, str] | None = None) -> list[Path]:
    """The persistent caches of this project: grid_sample's native kernels
    (``$SIDEBYSIDE_NATIVE_CACHE``, default ``~/.cache/sidebyside``), the compilation cache a caller
    keeps across runs (``$SIDEBYSIDE_COMPILE_CACHE``, where set) and the tests' JAX cache
    (``build/test-cache``)."""
    from sidebyside.lab.conditions import CACHE_ENV

    env = os.environ if env is None else env
    found = [Path(env.get("SIDEBYSIDE_NATIVE_CACHE") or Path.home() / ".cache" / "sidebyside")]
    if env.get(CACHE_ENV):
        found.append(Path(env[CACHE_ENV]))
    found.append(Path(root) / "build" / "test-cache")
    return list(dict.fromkeys(found))


def _cap_bytes(cap_gb: float | None) -> int:
    if cap_gb is None:
        raw = os.environ.get(CAP_ENV, "")
        try:
            cap_gb = float(raw) if raw else DEFAULT_CAP_GB
        except ValueError:
            raise PublishError(
                f"{CAP_ENV}={raw!r} is not a size in GB: give a number, e.g. {CAP_ENV}=4"
            ) from None
    if cap_gb < 0:
        raise PublishError(f"a cache cap must be at least 0 GB, got {cap_gb}")
    return int(cap_gb * GB)


def _entries(folder: Path) -> list[tuple[float, int, list[Path]]]:
    """``(last use, bytes, files)`` of each entry of ``folder``: a file with its companions
    (:data:`_COMPANIONS`); last use as the file system records it (the later of access and
    change)."""
    groups: dict[Path, list[Path]] = {}
    for path in folder.rglob("*"):
        if path.is_symlink() or not path.is_file():
            continue
        name = path.name
        for suffix in _COMPANIONS:
            if name.endswith(suffix):
                name = name[: -len(suffix)]
                break
        groups.setdefault(path.with_name(name), []).append(path)
    found = []
    for files in groups.values():
        stats = [f.stat() for f in files]
        found.append(
            (max(max(s.st_atime, s.st_mtime) for s in stats), sum(s.st_size for s in stats), files)
        )
    return found


def _drop_empty_folders(folder: Path) -> None:
    for path in sorted((p for p in folder.rglob("*") if p.is_dir() and not p.is_symlink()),
                       key=lambda p: -len(p.parts)):
        try:
            path.rmdir()
        except OSError:
            pass


def prune(folder: Path, cap_bytes: int, *, keep_recent_s: float = KEEP_RECENT_S,
          now: float | None = None) -> tuple[int, int, int]:
    """Remove the least recently used entries of ``folder`` (:func:`_entries`) until it holds at
    most ``cap_bytes``; entries used in the last ``keep_recent_s`` seconds stay, whatever the cap.
    Returns ``(entries removed, bytes freed, bytes left)``."""
    folder = Path(folder)
    if not folder.is_dir():
        return 0, 0, 0
    now = time.time() if now is None else now
    entries = sorted(_entries(folder), key=lambda e: e[0])
    total = sum(size for _, size, _ in entries)
    removed = freed = 0
    for used, size, files in entries:
        if total <= cap_bytes or now - used < keep_recent_s:
            break
        for path in files:
            path.unlink(missing_ok=True)
        removed, freed, total = removed + 1, freed + size, total - size
    if removed:
        _drop_empty_folders(folder)
    return removed, freed, total


def _temporaries(older_than_s: float, now: float) -> tuple[list[Path], list[Path]]:
    """The runs' temporary compilation caches in the temporary folder: ``(stale, recent)``, stale
    when nothing in it changed for ``older_than_s`` seconds (no run lasts that long)."""
    stale, recent = [], []
    for path in Path(tempfile.gettempdir()).glob(TEMPORARY_PREFIX + "*"):
        if path.is_symlink() or not path.is_dir():
            continue
        try:
            latest = max([path.stat().st_mtime] + [p.lstat().st_mtime for p in path.rglob("*")])
        except OSError:  # removed meanwhile by its run
            continue
        (stale if now - latest > older_than_s else recent).append(path)
    return stale, recent


def _stale_after() -> float:
    from sidebyside.publish.running import RUN_LIMIT_S

    return float(RUN_LIMIT_S)


def prune_caches(root: Path = ROOT, cap_gb: float | None = None) -> list[str]:
    """At the start of a run: cap each of :func:`cache_folders` at ``cap_gb`` (default
    ``$SIDEBYSIDE_CACHE_CAP_GB``, else :data:`DEFAULT_CAP_GB`), least recently used first, and
    remove the temporary compilation caches of runs killed long ago. Returns what it did, a line
    per folder that lost something."""
    cap, now, said = _cap_bytes(cap_gb), time.time(), []
    for folder in cache_folders(root):
        removed, freed, left = prune(folder, cap, now=now)
        if removed:
            said.append(f"cache {folder}: removed its {removed} least recently used entries "
                        f"({freed / GB:.2f} GB) to keep it within {cap / GB:.1f} GB "
                        f"({left / GB:.2f} GB left)")
    stale, _ = _temporaries(_stale_after(), now)
    for path in stale:
        shutil.rmtree(path, ignore_errors=True)
        said.append(f"cache {path}: removed (a killed run's temporary compilation cache)")
    return said


def empty_caches(root: Path = ROOT) -> list[str]:
    """``make clean-caches``: empty every one of :func:`cache_folders` and remove the temporary
    compilation caches no run has touched for a run's longest time (a younger one may belong to a
    run going on: it is named, not removed). Returns a line per folder."""
    said = []
    for folder in cache_folders(root):
        if not folder.is_dir():
            continue
        size = sum(size for _, size, _ in _entries(folder))
        for child in folder.iterdir():
            if child.is_dir() and not child.is_symlink():
                shutil.rmtree(child, ignore_errors=True)
            else:
                child.unlink(missing_ok=True)
        said.append(f"emptied {folder} ({size / GB:.2f} GB)")
    stale, recent = _temporaries(_stale_after(), time.time())
    for path in stale:
        shutil.rmtree(path, ignore_errors=True)
        said.append(f"removed {path} (a killed run's temporary compilation cache)")
    for path in recent:
        said.append(f"kept {path}: a run may be using it (removed with its run, or here once "
                    f"untouched for {_stale_after() / 3600:.0f} h)")
    return said


def main(argv: list[str] | None = None) -> int:
    """``python -m sidebyside.publish.footprint memory|prune|clean``."""
    import argparse

    parser = argparse.ArgumentParser(prog="python -m sidebyside.publish.footprint",
                                     description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    mem = sub.add_parser("memory", help="run a post (--only) or a command (after --) and print "
                                        "its peak memory")
    mem.add_argument("--only", help="the post's slug (make list shows them)")
    mem.add_argument("--profile", default=None, help="smoke, cpu or gpu (default: this machine's)")
    mem.add_argument("--interval", type=float, default=0.5,
                     help="seconds between readings (default 0.5)")
    mem.add_argument("rest", nargs=argparse.REMAINDER, help="-- command and its arguments")
    pr = sub.add_parser("prune", help="cap each cache folder, least recently used first")
    pr.add_argument("--cap-gb", type=float, default=None,
                    help=f"GB per folder (default ${CAP_ENV} or {DEFAULT_CAP_GB})")
    sub.add_parser("clean", help="empty the caches (make clean-caches)")
    args = parser.parse_args(argv)
    try:
        if args.command == "memory":
            rest = args.rest[1:] if args.rest[:1] == ["--"] else args.rest
            return memory(only=args.only, command=rest, profile=args.profile,
                          interval=args.interval)
        lines = prune_caches(cap_gb=args.cap_gb) if args.command == "prune" else empty_caches()
        print("\n".join(lines) or "the caches are within their cap")
        return 0
    except PublishError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    raise SystemExit(main())
