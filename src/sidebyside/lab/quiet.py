"""The quiet-machine check: a figure measured while something else used the
machine is not published as if it were not.

The timing harness (:mod:`sidebyside.lab.timing`) brackets every timed
section with :func:`section`. Around the section it runs a short, fixed
calibration workload (:func:`calibrate`: on the CPU a one-thread compute loop
and a memory copy; on a GPU the process computes on, a device matmul and a
device copy too) and reads the machine's load (:func:`sidebyside.lab.load.snapshot`: the load
average, the CPU time of every core and of every process, from ``/proc``;
the other processes on the GPU, from ``nvidia-smi`` where there is one).

What is flagged is load that was measured, never a calibration alone (the
rule, :data:`RULES`, judged over windows of timed sections of at least half a
second, so that a clock tick is not a finding): other processes (not this
one, not its children) used more than 10% of the machine's CPU time, time the
hypervisor gave to other guests (steal) counting as theirs; or another
process of this machine computes on the GPU. The finding says what was
measured: the other processes' share and the busiest of them, the steal
share, the run queue (``procs_running`` of ``/proc/stat``) and the load
average, and how much slower the calibration ran than this run's quiet level
of it (the lower quartile of its calibrations so far) and than the quiet
baseline of this machine's fingerprint.

A calibration slower than usual with no load measured is not a finding: a
shared host's speed swings for seconds at a time with nothing else running
here, and a baseline measured on another host says nothing of this one's
load. The calibration is compared only with the committed baseline of this
machine's fingerprint (:func:`baselines_file`, keyed by
:func:`machine_kind`); where there is none the record says "no baseline for
this fingerprint". Each section's slowdowns are recorded beside its load.

The check records; it never refuses. Load shows up as a wider interval,
which is what a reader needs to know, and each section's findings are handed
to the measurement it bracketed (:func:`section` yields a list that holds
them after the block), so that the timing entries carry them to their
verdicts (``busy``), each finding with its figure. The record of the whole
run (:func:`record`) is the ``machine`` entry of the run's provenance
(:func:`sidebyside.run.provenance.collect`).

Inputs: the names of the section being timed. Outputs: the findings and the record.
"""

from __future__ import annotations

import contextlib
import json
import os
import statistics
import sys
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

from sidebyside.lab import load
from sidebyside.run import context, provenance

__all__ = ["RULES", "NO_BASELINE", "baselines_file", "Monitor", "monitor", "section", "calibrate", "slowdowns",
           "cpu_findings", "gpu_findings", "record", "machine_kind", "load_baseline", "save_baseline"]

#: The rule of the check: the share of the machine's CPU time other processes may take (steal
#: included), judged over windows of timed sections of at least ``cpu_window_s`` seconds.
RULES = {"other_cpu_share": 0.10, "cpu_window_s": 0.5}

#: What the record says where no quiet baseline was measured on this machine's fingerprint.
NO_BASELINE = "no baseline for this fingerprint"


def baselines_file() -> Path:
    """The committed quiet baselines, ``{machine kind: {workload: seconds, "fingerprint": {...}}}``
    (:func:`machine_kind`): ``params/quiet-baselines.json`` of the run's checkout, beside the
    profiles (``python -m sidebyside.lab.quiet --save`` on a quiet machine of a fingerprint writes
    its entry)."""
    return context.current().project_root() / "params" / "quiet-baselines.json"


#: What each calibration workload is, in prose.
WORKLOADS = {"compute_s": "the one-thread compute loop", "copy_s": "the memory copy",
             "gpu_matmul_s": "the GPU matmul", "gpu_copy_s": "the GPU copy"}

_PUBLISHING = ("cpu", "gpu")
_COPY_BYTES = 32 * 2**20


# ----------------------------------------------------------------------------- calibration

_buffers: dict[str, Any] = {}


def _compute_loop() -> int:
    x = 0
    for i in range(60_000):
        x = (x * 31 + i) & 0xFFFF
    return x


def _copy() -> None:
    import numpy as np

    if "src" not in _buffers:
        _buffers["src"] = np.ones(_COPY_BYTES // 8)
        _buffers["dst"] = np.empty_like(_buffers["src"])
        np.copyto(_buffers["dst"], _buffers["src"])  # pages touched before any clock
    np.copyto(_buffers["dst"], _buffers["src"])


def _gpu_framework() -> str | None:
    """The framework this process computes with on a GPU, if any (never starts one)."""
    torch = sys.modules.get("torch")
    if torch is not None and getattr(torch, "cuda", None) is not None:
        try:
            if torch.cuda.is_initialized():
                return "torch"
        except Exception:  # noqa: BLE001  (a broken CUDA build: no GPU calibration)
            pass
    bridge = sys.modules.get("jax._src.xla_bridge")
    if bridge is not None and any(name in (getattr(bridge, "_backends", None) or {}) for name in ("cuda", "gpu")):
        return "jax"
    return None


def _gpu_workloads(framework: str) -> dict[str, Callable[[], None]]:
    if framework == "torch":
        import torch

        a = torch.ones(1024, 1024, device="cuda")
        src = torch.ones(_COPY_BYTES // 4, device="cuda")
        dst = torch.empty_like(src)

        def matmul():
            torch.mm(a, a)
            torch.cuda.synchronize()

        def copy():
            dst.copy_(src)
            torch.cuda.synchronize()

        return {"gpu_matmul_s": matmul, "gpu_copy_s": copy}
    import jax
    import jax.numpy as jnp

    device = next(d for d in jax.devices() if d.platform == "gpu")
    a = jax.device_put(jnp.ones((1024, 1024), jnp.float32), device)
    src = jax.device_put(jnp.ones(_COPY_BYTES // 4, jnp.float32), device)
    mm, cp = jax.jit(lambda m: m @ m), jax.jit(lambda v: v + 0)
    return {"gpu_matmul_s": lambda: mm(a).block_until_ready(), "gpu_copy_s": lambda: cp(src).block_until_ready()}


def calibrate(runs: int = 5, *, gpu: str | None = None,
              clock: Callable[[], float] = time.perf_counter) -> dict[str, float]:
    """Seconds of each calibration workload, the median of ``runs`` runs:
    ``compute_s`` and ``copy_s`` always, ``gpu_matmul_s`` and ``gpu_copy_s``
    when ``gpu`` names the framework the process computes on a GPU with."""
    workloads: dict[str, Callable[[], Any]] = {"compute_s": _compute_loop, "copy_s": _copy}
    if gpu:
        workloads.update(_gpu_workloads(gpu))
    out = {}
    for name, work in workloads.items():
        work()  # warm: caches, first-call costs
        times = []
        for _ in range(max(1, runs)):
            start = clock()
            work()
            times.append(clock() - start)
        out[name] = statistics.median(times)
    return out


# ----------------------------------------------------------------------------- rules


def _pct(fraction: float) -> str:
    return f"{fraction * 100:.0f}%"


def slowdowns(calibration: Mapping[str, float], quiet_level: Mapping[str, float],
              baseline: Mapping[str, float] | None = None) -> dict[str, dict[str, float | None]]:
    """Per calibration workload, how much slower it ran than ``quiet_level`` (this run's) and than
    ``baseline`` (the committed quiet baseline of this machine's fingerprint; None for none), as
    fractions: ``{"compute_s": {"run": 0.3, "baseline": None}}`` (0.3: 30% slower; below 0: faster).
    Figures to record and to say beside measured load; never a finding on their own."""
    out = {}
    for name, seconds in calibration.items():
        level, quiet = quiet_level.get(name), (baseline or {}).get(name)
        out[name] = {"run": seconds / level - 1 if level else None,
                     "baseline": seconds / quiet - 1 if quiet else None}
    return out


def _worst(slow: Mapping[str, Mapping[str, float | None]], against: str) -> tuple[str, float] | None:
    found = [(figures[against], name) for name, figures in slow.items() if figures.get(against) is not None]
    if not found:
        return None
    value, name = max(found)
    return name, value


#: The least slowdown of a calibration that a finding says (a fraction).
_SAID_SLOWDOWN = 0.10


def _calibration_words(slow: Mapping[str, Mapping[str, float | None]] | None) -> str:
    """What the calibration showed beside the load, in words: each comparison's slowest workload,
    where it ran at least 10% slower (else empty)."""
    out = []
    for against, said in (("run", "its quiet level in this run"), ("baseline", "the quiet baseline of this "
                                                                               "machine's fingerprint")):
        worst = _worst(slow or {}, against)
        if worst and worst[1] >= _SAID_SLOWDOWN:
            out.append(f"{WORKLOADS.get(worst[0], worst[0])} ran {_pct(worst[1])} slower than {said}")
    return "; ".join(out)


def _pair(values: list[Any] | None, fmt: str, joiner: str) -> str | None:
    known = [v for v in values or [] if v is not None]
    if not known:
        return None
    return joiner.join(format(v, fmt) for v in known) if len(set(known)) > 1 else format(known[0], fmt)


def cpu_findings(reading: Mapping[str, Any], *, rules: Mapping[str, float] = RULES,
                 slow: Mapping[str, Mapping[str, float | None]] | None = None) -> list[str]:
    """A sentence when other processes took more than ``rules["other_cpu_share"]`` of the
    machine's CPU during ``reading`` (:func:`sidebyside.lab.load.cpu_between`, steal included), saying what was
    measured: that share, the processes that used at least 5% of a core (else the busiest one),
    the steal share, the run queue (the least and most runnable) and the load average (first and
    last), and the calibration's ``slow``\\ downs of 10% or more (:func:`slowdowns`); else empty,
    however slow the calibration ran."""
    share = reading.get("other_cpu_share") or 0.0
    if share <= rules["other_cpu_share"]:
        return []
    cpus = reading.get("cpus") or 0
    wall = reading.get("wall_s") or 0.0
    busiest = [p for p in reading.get("others", []) if p["cpu_s"] >= 0.05 * wall] or reading.get("others", [])[:1]
    named = "; ".join(f"{p['name']} (pid {p['pid']}) {p['cpu_s']:.2f} s" for p in busiest)
    measured = [f"hypervisor steal {_pct(reading.get('steal_share') or 0.0)} of the CPU time"]
    queue, load = _pair(reading.get("run_queue"), "d", "–"), _pair(reading.get("load_average"), ".2f", " then ")
    if queue:
        measured.append(f"run queue {queue} runnable")
    if load:
        measured.append(f"load average {load}")
    calibration = _calibration_words(slow)
    return [f"other processes used {_pct(share)} of the machine's {cpus} CPU{'s' if cpus != 1 else ''} "
            f"({reading.get('other_cpu_s', 0.0):.2f} CPU-s in {wall:.2f} s; limit "
            f"{_pct(rules['other_cpu_share'])})" + (f": {named}" if named else "") + "; " + ", ".join(measured)
            + (f"; {calibration}" if calibration else "")]


def gpu_findings(listed: list[dict[str, Any]] | None, mine: set[int], visible: set[int]) -> list[str]:
    """A sentence naming the other processes on the GPU: those ``nvidia-smi`` lists that are
    not in ``mine`` and that this machine's ``/proc`` shows (``visible``: a pid from another
    container's namespace cannot be told from this process's own)."""
    others = [p for p in listed or [] if p["pid"] not in mine and p["pid"] in visible]
    if not others:
        return []
    return ["other processes computed on the GPU: " + "; ".join(
        f"{p['name']} (pid {p['pid']}, {p['memory_mib']:.0f} MiB)" if p.get("memory_mib") is not None
        else f"{p['name']} (pid {p['pid']})" for p in others)]


# ----------------------------------------------------------------------------- the baseline of a machine kind


def machine_kind(gpu: str | None = None) -> str:
    """The key of a committed quiet baseline and noise floor: this machine's fingerprint in words
    (:func:`sidebyside.run.provenance.machine_kind`), the GPU's where the process computes on one
    (``gpu``: its model name, the key itself where ``nvidia-smi`` does not answer), else the CPU's.
    The same on every host of that fingerprint, whatever threads or cores the run uses."""
    found = provenance.fingerprint(gpu=bool(gpu))
    if gpu and not found.get("gpu"):
        return gpu
    return provenance.machine_kind(found, gpu=bool(gpu))


def load_baseline(kind: str, path: Path | None = None) -> dict[str, float] | None:
    """The committed quiet baseline of ``kind`` (in ``path``, default :func:`baselines_file`), or
    None: its calibration workloads' seconds (the entry's ``fingerprint`` left out)."""
    path = path or baselines_file()
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    entry = data.get(kind) if isinstance(data, dict) else None
    if not isinstance(entry, dict):
        return None
    return {k: float(v) for k, v in entry.items() if isinstance(v, (int, float)) and not isinstance(v, bool)} or None


def save_baseline(kind: str, calibration: Mapping[str, float], path: Path | None = None, *,
                  fingerprint: Mapping[str, Any] | None = None) -> None:
    """Write ``calibration`` as the quiet baseline of ``kind`` (the others kept) into ``path``
    (default :func:`baselines_file`), with the ``fingerprint`` it was measured on where given."""
    path = path or baselines_file()
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        data = {}
    data[kind] = {**{k: float(v) for k, v in calibration.items()},
                  **({"fingerprint": dict(fingerprint)} if fingerprint else {})}
    path.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")


# ----------------------------------------------------------------------------- the monitor of a run


class Monitor:
    """The check of one run: brackets sections (:meth:`section`), keeps the readings and
    judges them by :data:`RULES`. ``judged``: whether the run publishes (cpu, gpu), so that its
    calibrations are repeated enough to be read.

    ``calibrate``, ``snapshot``, ``cpu_between`` and ``gpu`` are injectable (tests give
    synthetic machines); ``baseline`` is the committed quiet baseline of this machine's
    fingerprint (``kind``), None for none.
    """

    def __init__(self, *, judged: bool, baseline: Mapping[str, float] | None = None,
                 kind: str = "this machine kind", runs: int = 5, rules: Mapping[str, float] = RULES,
                 calibrate: Callable[..., dict[str, float]] | None = None,
                 snapshot: Callable[[], dict[str, Any]] = load.snapshot,
                 cpu_between: Callable[..., dict[str, Any]] = load.cpu_between,
                 gpu: Callable[[], str | None] = _gpu_framework,
                 gpu_processes: Callable[[], list[dict[str, Any]] | None] = load.gpu_processes):
        self.judged, self.baseline, self.kind, self.runs, self.rules = (
            judged, dict(baseline) if baseline else None, kind, runs, dict(rules))
        self._calibrate = calibrate or (lambda gpu=None: globals()["calibrate"](self.runs, gpu=gpu))
        self._snapshot, self._cpu_between, self._gpu, self._gpu_processes = (snapshot, cpu_between, gpu,
                                                                            gpu_processes)
        self.level: dict[str, float] = {}  # per workload: the lower quartile of its calibrations so far
        self.calibrations: list[dict[str, float]] = []
        self.sections: list[dict[str, Any]] = []
        self.findings: list[str] = []
        self.worst: dict[str, float | None] = {"calibration_slowdown": 0.0, "baseline_slowdown": None,
                                               "other_cpu_share": 0.0, "steal_share": 0.0}
        self._window = self._empty_window()

    @staticmethod
    def _empty_window() -> dict[str, Any]:
        return {"wall_s": 0.0, "other_cpu_s": 0.0, "steal_s": 0.0, "cpus": 0, "others": {}, "run_queue": [],
                "load_average": [], "slow": {}}

    def _calibrate_now(self, gpu: str | None) -> tuple[dict[str, float], dict[str, dict[str, float | None]]]:
        calibration = self._calibrate(gpu=gpu)
        self.calibrations.append(dict(calibration))
        for name in calibration:
            seen = sorted(c[name] for c in self.calibrations if name in c)
            self.level[name] = seen[(len(seen) - 1) // 4]  # the lower quartile (the minimum of up to 4)
        slow = slowdowns(calibration, self.level, self.baseline)
        for against, key in (("run", "calibration_slowdown"), ("baseline", "baseline_slowdown")):
            worst = _worst(slow, against)
            if worst is not None:
                self.worst[key] = max(self.worst[key] if self.worst[key] is not None else -1.0, worst[1])
        return calibration, slow

    def _judge_cpu(self, reading: Mapping[str, Any], slow: Mapping[str, Mapping[str, float | None]]) -> list[str]:
        window = self._window
        window["wall_s"] += reading["wall_s"]
        window["other_cpu_s"] += reading["other_cpu_s"]
        window["steal_s"] += reading.get("steal_s") or 0.0
        window["cpus"] = reading["cpus"] or window["cpus"]
        window["run_queue"] += [q for q in reading.get("run_queue") or [] if q is not None]
        window["load_average"] += [v for v in reading.get("load_average") or [] if v is not None]
        for name, figures in slow.items():
            kept = window["slow"].setdefault(name, {})
            for against, value in figures.items():
                if value is not None:
                    kept[against] = max(kept.get(against, value), value)
        for p in reading["others"]:
            seen = window["others"].setdefault(p["pid"], {**p, "cpu_s": 0.0})
            seen["cpu_s"] += p["cpu_s"]
        if window["wall_s"] < self.rules["cpu_window_s"]:
            return []
        capacity = window["wall_s"] * window["cpus"]
        share = window["other_cpu_s"] / capacity if capacity else 0.0
        steal = window["steal_s"] / capacity if capacity else 0.0
        self.worst["other_cpu_share"] = max(self.worst["other_cpu_share"], share)
        self.worst["steal_share"] = max(self.worst["steal_share"], steal)
        queue, load = window["run_queue"], window["load_average"]
        merged = {"wall_s": window["wall_s"], "cpus": window["cpus"], "other_cpu_s": window["other_cpu_s"],
                  "other_cpu_share": share, "steal_share": steal,
                  "run_queue": [min(queue), max(queue)] if queue else None,
                  "load_average": [load[0], load[-1]] if load else None,
                  "others": sorted(window["others"].values(), key=lambda p: -p["cpu_s"])[:10]}
        slow_seen = window["slow"]
        self._window = self._empty_window()
        return cpu_findings(merged, rules=self.rules, slow=slow_seen)

    @contextlib.contextmanager
    def section(self, name: str) -> Iterator[list[str]]:
        """Bracket one timed section: calibration and load reading before and after, then
        the judgement. Yields a list that holds, after the block, what was found busy (one
        sentence per finding, saying what was measured; empty when no load was measured)."""
        gpu = self._gpu()
        before, slow_before = self._calibrate_now(gpu)
        gpus_before = self._gpu_processes() if gpu else None
        start = self._snapshot()
        findings: list[str] = []
        yield findings
        end = self._snapshot()
        after, slow_after = self._calibrate_now(gpu)
        slow = {name: {against: max((v for v in (slow_before.get(name, {}).get(against),
                                                 slow_after.get(name, {}).get(against)) if v is not None),
                                    default=None)
                       for against in ("run", "baseline")}
                for name in {**slow_before, **slow_after}}
        reading = self._cpu_between(start, end)
        found = self._judge_cpu(reading, slow)
        if gpu:
            mine = load.descendants(os.getpid(), end["processes"])
            found += gpu_findings((gpus_before or []) + (self._gpu_processes() or []), mine, set(end["processes"]))
        found = list(dict.fromkeys(found))
        self.sections.append({
            "section": name[:120], "wall_s": reading["wall_s"],
            "calibration": {"before": before, "after": after}, "slowdown": slow,
            "other_cpu_share": reading["other_cpu_share"], "steal_share": reading.get("steal_share"),
            "run_queue": reading.get("run_queue"), "load_average": reading["load_average"],
            **({"others": reading["others"]} if reading["others"] else {}),
            **({"busy": found} if found else {}),
        })
        self.findings.extend(f for f in found if f not in self.findings)
        provenance.note_machine(self.record())
        findings.extend(found)

    def busy(self) -> bool:
        return bool(self.findings)

    def record(self) -> dict[str, Any]:
        """The ``machine`` entry of the provenance: status, rules, the machine kind and its
        baseline (``baseline``: "the quiet baseline of this fingerprint", or "no baseline for this
        fingerprint"; ``quiet_level_vs_baseline``: per workload, how much slower this run's quiet
        level ran than it, a host's speed and not load), the worst figures, every finding, and
        each section's reading."""
        versus = ({name: self.level[name] / quiet - 1 for name, quiet in self.baseline.items() if name in self.level}
                  if self.baseline else None)
        status = "quiet" if not self.findings else "busy: shown beside the verdicts it touched"
        return {"status": status, "judged": self.judged, "rules": self.rules, "kind": self.kind,
                "baseline": "the quiet baseline of this fingerprint" if self.baseline else NO_BASELINE,
                "committed_baseline": self.baseline, "quiet_level": self.level, "quiet_level_vs_baseline": versus,
                "worst": self.worst, "findings": list(self.findings), "sections": self.sections}


_MONITOR: Monitor | None = None


def monitor() -> Monitor:
    """This process's monitor, made on first use from the run context (runs under the cpu and
    gpu profiles calibrate five times a reading, smoke and runs by hand once)."""
    global _MONITOR
    if _MONITOR is None:
        run = context.current()
        judged = run.profile in _PUBLISHING
        kind = machine_kind()
        _MONITOR = Monitor(judged=judged, baseline=load_baseline(kind), kind=kind, runs=5 if judged else 1)
    return _MONITOR


def section(name: str) -> contextlib.AbstractContextManager[list[str]]:
    """Bracket a timed section with this process's :func:`monitor`; yields its findings' list."""
    return monitor().section(name)


def record() -> dict[str, Any] | None:
    """The ``machine`` record of this run so far; None before any timed section."""
    return _MONITOR.record() if _MONITOR is not None else None


def main(argv: list[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(prog="python -m sidebyside.lab.quiet",
                                     description="Measure this machine's calibration workloads (CPU).")
    parser.add_argument("--save", action="store_true",
                        help=f"record them as the quiet baseline of this machine's fingerprint in {baselines_file()} "
                             "(only on a quiet machine: nothing else running)")
    args = parser.parse_args(argv)
    start = load.snapshot()
    # The machine's quiet speed: the lower quartile of calibrations spread over about 20 s, since a shared
    # host's speed swings for seconds at a time even with nothing else running here.
    seen: list[dict[str, float]] = []
    for _ in range(24):
        seen.append(calibrate(9))
        time.sleep(0.5)
    calibration = {name: sorted(c[name] for c in seen)[(len(seen) - 1) // 4] for name in seen[0]}
    spread = {name: max(c[name] for c in seen) / calibration[name] for name in calibration}
    reading = load.cpu_between(start, load.snapshot())
    kind = machine_kind()
    print(json.dumps({"kind": kind, "calibration": calibration, "slowest_over_quiet": spread,
                      "other_cpu_share": reading["other_cpu_share"]}))
    if args.save:
        found = cpu_findings(reading)
        if found:
            print(f"not saved: {found[0]}", file=sys.stderr)
            return 1
        save_baseline(kind, calibration, fingerprint=provenance.fingerprint(gpu=False)["cpu"])
        print(f"saved as the quiet baseline of {kind} in {baselines_file()}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
