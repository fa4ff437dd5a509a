"""Results the site publishes as "suspect" until their post states a cause.

Three anomalies, read from a results record alone (never from the post's text):

- a ratio above :data:`MAX_RATIO` in a speed verdict;
- a framework below :data:`MIN_PEAK_SHARE` of its device's peak where the record knows the peak
  (``metrics.peak_flops["<device>/<precision>"].flops`` and a matmul ladder
  ``metrics.matmul["<device>/<precision>/<n>"].ladder``, a matmul of ``2 n³`` FLOPs);
- a compiled rung slower than its eager rung: a ladder (any mapping in ``metrics`` with
  ``"<framework>/eager"`` and ``"<framework>/compile..."`` entries holding ``median_s`` or
  ``median``) where the compiled entry carries neither ``why`` nor ``graph_breaks``, or a verdict
  sentence that says no measurement explains it.

Each is published with what the record measured about it: the CPU threads and the BLAS in use
(``provenance.threads``) for a CPU figure, the graph breaks where they were counted. A post
states a cause by recording it (a ladder entry's ``why`` or ``graph_breaks``, a verdict's
``cause``), which takes its anomaly off the list.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

__all__ = ["MAX_RATIO", "MIN_PEAK_SHARE", "threads_text", "find"]

MAX_RATIO = 10.0
MIN_PEAK_SHARE = 0.20
NAMES = {"torch": "PyTorch", "jax": "JAX", "numpy": "NumPy"}
_UNEXPLAINED = "no measurement in this run explains it"


def threads_text(provenance: dict[str, Any]) -> str:
    """The CPU threads and BLAS of a run's notebook process, as its provenance recorded them ("" when it did
    not). A post that times in a process of its own (grid_sample's benchmark) sets that process's threads
    apart, and says so on its page."""
    threads = provenance.get("threads") or {}
    if not threads:
        return ""
    blas = sorted({f"{b.get('library')} ({b.get('num_threads')} threads)" for b in threads.get("blas") or []})
    parts = [f"PyTorch {threads.get('torch_num_threads')} threads" if threads.get("torch_num_threads") else "",
             f"BLAS {', '.join(blas)}" if blas else "",
             f"OMP_NUM_THREADS={threads.get('OMP_NUM_THREADS')}" if threads.get("OMP_NUM_THREADS") else "",
             f"XLA_FLAGS={threads.get('XLA_FLAGS')}" if threads.get("XLA_FLAGS") else "XLA_FLAGS unset",
             f"{threads.get('cpu_affinity')} cores in the process's affinity" if threads.get("cpu_affinity") else ""]
    return "; ".join(p for p in parts if p)


def _median(entry: Any) -> float | None:
    if not isinstance(entry, dict) or entry.get("error"):
        return None
    value = entry.get("median_s", entry.get("median"))
    return float(value) if isinstance(value, (int, float)) and value > 0 else None


def _quartile(entry: dict[str, Any], upper: bool) -> float:
    """The entry's third (``upper``) or first quartile; from its median and IQR when it kept no quartiles."""
    kept = entry.get("q3_s" if upper else "q1_s")
    if isinstance(kept, (int, float)):
        return float(kept)
    iqr = entry.get("iqr_s", entry.get("iqr"))
    iqr = float(iqr) if isinstance(iqr, (int, float)) else 0.0  # a ladder's entries are free-form: read numbers only
    return float(_median(entry) or 0.0) + (iqr / 2 if upper else -iqr / 2)


def _ladders(node: Any, path: str = "") -> Iterator[tuple[str, dict[str, Any]]]:
    if isinstance(node, dict):
        if any(isinstance(k, str) and k.endswith("/eager") for k in node):
            yield path, node
        for key, value in node.items():
            if key != "verdicts":
                yield from _ladders(value, f"{path}.{key}" if path else str(key))


def _compile_slower(metrics: dict[str, Any]) -> list[str]:
    """One note per compiled rung that is slower than eager beyond both spreads (its first quartile
    above eager's third) in some ladder and carries no cause: where, how often, the worst case."""
    found: dict[tuple[str, str], list[tuple[float, str, float, float]]] = {}
    for path, ladder in _ladders(metrics):
        eager_entry = None
        for name, entry in ladder.items():
            framework, _, tool = str(name).partition("/")
            eager_entry = ladder.get(f"{framework}/eager")
            eager, seconds = _median(eager_entry), _median(entry)
            if "compile" not in tool or eager is None or seconds is None:
                continue
            if _quartile(entry, upper=False) <= _quartile(eager_entry, upper=True):
                continue
            if entry.get("why") or entry.get("graph_breaks") is not None:
                continue
            found.setdefault((framework, tool), []).append((seconds / eager, path, seconds, eager))
    notes = []
    for (framework, tool), cases in found.items():
        worst = max(cases)
        notes.append(f"{NAMES.get(framework, framework)}'s {tool} rung is slower than its eager rung in "
                     f"{len(cases)} ladder{'s' if len(cases) != 1 else ''} of this run (at worst {worst[0]:.2f}× "
                     f"eager's time, {worst[2]:.3g} s against {worst[3]:.3g} s, in {worst[1]}); the run counted "
                     "no graph breaks, so nothing it measured explains it")
    return notes


def _peak_shares(metrics: dict[str, Any]) -> dict[tuple[str, str, int], dict[str, float]]:
    """``{(device, precision, n): {framework: share of peak}}`` of every matmul whose peak is known."""
    peaks, matmul = metrics.get("peak_flops") or {}, metrics.get("matmul") or {}
    shares: dict[tuple[str, str, int], dict[str, float]] = {}
    if not isinstance(peaks, dict) or not isinstance(matmul, dict):
        return shares
    for key, row in matmul.items():
        parts = str(key).split("/")
        if len(parts) != 3 or not parts[2].isdigit() or not isinstance(row, dict):
            continue
        device, precision, n = parts[0], parts[1], int(parts[2])
        peak = (peaks.get(f"{device}/{precision}") or {}).get("flops")
        if not peak:
            continue
        for name, entry in (row.get("ladder") or {}).items():
            seconds = _median(entry)
            if seconds:
                framework = str(name).split("/")[0]
                share = 2 * n ** 3 / seconds / float(peak)
                best = shares.setdefault((device, precision, n), {})
                best[framework] = max(best.get(framework, 0.0), share)
    return shares


def find(record: dict[str, Any]) -> tuple[dict[int, str], list[str]]:
    """``({verdict index: why it is suspect}, [the record's anomalies no verdict carries])``."""
    metrics = record.get("metrics") or {}
    provenance = record.get("provenance") or {}
    verdicts = [v for v in metrics.get("verdicts") or [] if isinstance(v, dict)]
    threads = threads_text(provenance)
    suspects: dict[int, list[str]] = {}
    shares = _peak_shares(metrics)
    for i, v in enumerate(verdicts):
        question = str(v.get("question") or "")
        on_cpu = bool(re.search(r"\bon (the|a) CPU\b", question)) or provenance.get("device_kind") != "gpu"
        where = f" (the notebook's process ran with {threads})" if on_cpu and threads else ""
        factor = v.get("factor") if v.get("factor") is not None else v.get("ratio")
        if v.get("winner") and v.get("interval") and factor and float(factor) > MAX_RATIO and not v.get("cause"):
            suspects.setdefault(i, []).append(f"a ratio above {MAX_RATIO:g}× ({float(factor):.3g}×) that the post "
                                              f"does not explain{where}")
        if _UNEXPLAINED in str(v.get("sentence") or ""):
            suspects.setdefault(i, []).append(f"a compiled rung slower than eager that no measurement explains{where}")
        for (device, precision, n), by_framework in shares.items():
            if f"{n}×{n} matmul in {precision}" not in question or f"on the {device.upper()}" not in question:
                continue
            low = {fw: s for fw, s in by_framework.items() if s < MIN_PEAK_SHARE}
            if low:
                listed = ", ".join(f"{NAMES.get(fw, fw)} {100 * s:.1f}%" for fw, s in sorted(low.items()))
                suspects.setdefault(i, []).append(f"below {MIN_PEAK_SHARE:.0%} of the device's peak ({listed}){where}")
    return {i: "; ".join(reasons) for i, reasons in suspects.items()}, _compile_slower(metrics)
