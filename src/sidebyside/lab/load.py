"""The machine's load, read from Linux's ``/proc`` (and ``nvidia-smi`` on a GPU) without a framework:
:func:`snapshot` reads the CPU time of the machine (steal included), of every process and the run
queue at one instant, :func:`cpu_between` what happened between two snapshots (this process's own work,
its descendants' included, apart from the others'), :func:`gpu_processes` the processes on the GPUs.
The quiet-machine check (:mod:`sidebyside.lab.quiet`) judges these readings."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

__all__ = ["snapshot", "cpu_between", "gpu_processes", "descendants"]


def _ticks() -> float:
    try:
        return float(os.sysconf("SC_CLK_TCK"))
    except (ValueError, OSError, AttributeError):
        return 100.0


def _read(path: Path) -> str | None:
    try:
        return path.read_text()
    except OSError:
        return None


def _pid_stat(text: str) -> tuple[str, int, int] | None:
    """(name, parent pid, CPU ticks) from a /proc/<pid>/stat line: utime+stime, and cutime+cstime,
    the time of its children that ended and were waited for (a worker that ran and ended inside
    a timed section is its parent's work, not another process's)."""
    head, _, rest = text.rpartition(")")
    fields = rest.split()
    if not head or len(fields) < 15:
        return None
    return head.partition("(")[2], int(fields[1]), sum(int(v) for v in fields[11:15])


def snapshot(proc: Path = Path("/proc"), clock: Callable[[], float] = time.monotonic) -> dict[str, Any]:
    """The machine's load now: ``{"t", "cpus", "busy_ticks", "steal_ticks", "run_queue", "load1",
    "processes": {pid: (name, ppid, ticks)}}`` (``busy_ticks``: CPU time of all cores not idle,
    steal included; ``steal_ticks``: the time the hypervisor gave to other guests; ``run_queue``:
    the tasks runnable now, this one included, ``procs_running`` of ``/proc/stat``, else of
    ``/proc/loadavg``). Empty readings where ``/proc`` is absent."""
    out: dict[str, Any] = {"t": clock(), "cpus": 0, "busy_ticks": None, "steal_ticks": None, "run_queue": None,
                           "load1": None, "processes": {}}
    stat = _read(proc / "stat")
    if stat:
        for line in stat.splitlines():
            parts = line.split()
            if parts and parts[0] == "cpu":
                values = [int(v) for v in parts[1:]] + [0] * 8
                # user nice system idle iowait irq softirq steal (guest is inside user)
                out["busy_ticks"] = sum(values[:8]) - values[3] - values[4]
                out["steal_ticks"] = values[7]
            elif parts and parts[0].startswith("cpu"):
                out["cpus"] += 1
            elif len(parts) == 2 and parts[0] == "procs_running" and parts[1].isdigit():
                out["run_queue"] = int(parts[1])
    load = _read(proc / "loadavg")
    if load:
        fields = load.split()
        out["load1"] = float(fields[0])
        if out["run_queue"] is None and len(fields) > 3 and fields[3].partition("/")[0].isdigit():
            out["run_queue"] = int(fields[3].partition("/")[0])
    try:
        pids = [p for p in os.listdir(proc) if p.isdigit()]
    except OSError:
        pids = []
    for pid in pids:
        text = _read(proc / pid / "stat")
        parsed = _pid_stat(text) if text else None
        if parsed:
            out["processes"][int(pid)] = parsed
    return out


def descendants(own: int, processes: Mapping[int, tuple[str, int, int]]) -> set[int]:
    """``own`` and every process below it, in a snapshot's ``processes`` ({pid: (name, parent, ticks)})."""
    children: dict[int, list[int]] = {}
    for pid, (_, ppid, _) in processes.items():
        children.setdefault(ppid, []).append(pid)
    found, todo = {own}, [own]
    while todo:
        for child in children.get(todo.pop(), []):
            if child not in found:
                found.add(child)
                todo.append(child)
    return found


def cpu_between(start: Mapping[str, Any], end: Mapping[str, Any], *, own: int | None = None,
                ticks_per_s: float | None = None, top: int = 10) -> dict[str, Any]:
    """What other processes took of the machine's CPU between two :func:`snapshot`\\ s:
    ``{"wall_s", "cpus", "other_cpu_s", "other_cpu_share", "steal_s", "steal_share", "others":
    [{"pid", "name", "cpu_s"}], "run_queue", "load_average"}`` (``run_queue`` and
    ``load_average``: the two readings, at the start and the end). "Other" is every core's busy
    time less this process's and its children's (a child started between the two readings, and
    one that ended and was waited for, included), steal included; ``others`` names the ``top``
    visible processes that used the most (time of processes that ended unwaited for, of other
    containers and of other guests is in the total but has no name)."""
    own = os.getpid() if own is None else own
    hz = ticks_per_s or _ticks()
    wall = max(end["t"] - start["t"], 0.0)
    cpus = end.get("cpus") or start.get("cpus") or 0
    mine = descendants(own, end["processes"]) | descendants(own, start["processes"])
    before = start["processes"]
    used: dict[int, tuple[str, float]] = {}
    for pid, (name, _, ticks) in end["processes"].items():
        if pid in before and before[pid][0] == name:
            used[pid] = (name, (ticks - before[pid][2]) / hz)
        elif pid not in before:  # started between the two: all its time is inside (a timing worker, say)
            used[pid] = (name, ticks / hz)
    own_s = sum(seconds for pid, (_, seconds) in used.items() if pid in mine)
    if start.get("busy_ticks") is None or end.get("busy_ticks") is None:
        other_s = sum(seconds for pid, (_, seconds) in used.items() if pid not in mine)
    else:
        other_s = max((end["busy_ticks"] - start["busy_ticks"]) / hz - own_s, 0.0)
    steal_s = 0.0
    if start.get("steal_ticks") is not None and end.get("steal_ticks") is not None:
        steal_s = max((end["steal_ticks"] - start["steal_ticks"]) / hz, 0.0)
    others = sorted(((seconds, pid, name) for pid, (name, seconds) in used.items()
                     if pid not in mine and seconds > 0), reverse=True)[:top]
    capacity = wall * cpus
    return {"wall_s": wall, "cpus": cpus, "other_cpu_s": other_s,
            "other_cpu_share": other_s / capacity if capacity else 0.0,
            "steal_s": steal_s, "steal_share": steal_s / capacity if capacity else 0.0,
            "others": [{"pid": pid, "name": name, "cpu_s": seconds} for seconds, pid, name in others],
            "run_queue": [start.get("run_queue"), end.get("run_queue")],
            "load_average": [start.get("load1"), end.get("load1")]}


def gpu_processes(run: Callable[..., Any] = subprocess.run) -> list[dict[str, Any]] | None:
    """The processes computing on the GPU (``pid``, ``name``, ``memory_mib``) as ``nvidia-smi``
    lists them; None where there is no ``nvidia-smi`` or it does not answer."""
    if run is subprocess.run and shutil.which("nvidia-smi") is None:
        return None
    try:
        listing = run(["nvidia-smi", "--query-compute-apps=pid,process_name,used_memory",
                       "--format=csv,noheader,nounits"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return None
    if listing.returncode != 0:
        return None
    out = []
    for line in listing.stdout.splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) >= 3 and parts[0].isdigit():
            memory = parts[2]
            out.append({"pid": int(parts[0]), "name": parts[1],
                        "memory_mib": float(memory) if memory.replace(".", "", 1).isdigit() else None})
    return out
