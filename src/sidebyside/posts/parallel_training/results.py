"""parallel-training: the post's tables of results, from the results record
(:func:`.report.summarise`).

- :func:`reference_table`: the one-device ladders, rung by rung, each device labelled with its
  CPU threads.
- :func:`results_table`: per strategy and framework, code, correctness, memory per device between
  steps and its peak within a step, bytes on the wire per device, the step time and its threads.
- :func:`collectives_table`: per strategy, framework and collective kind, the count, the group
  sizes, the buffer bytes and the bytes on the wire per device (:func:`.comms.wire_factor`).
- :func:`peak_claim`: the peak within a step, where it was measured, with its source.
- :func:`projection_table`: the cost model's projection per strategy, framework and GPU count.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sidebyside.lab import words
from sidebyside.posts.parallel_training import comms
from sidebyside.posts.parallel_training.names import STRATEGY_NAMES, TOOLS, spoken_list
from sidebyside.posts.parallel_training.report import (
    RUNGS,
    TORCH_CPU_PEAK,
    bytes_text,
    device_label,
)

__all__ = [
    "reference_table",
    "results_table",
    "collectives_table",
    "peak_claim",
    "projection_table",
]


def reference_table(metrics: Mapping[str, Any]):
    """One row per device and one-device rung: step time (median, IQR), compile time, graph
    breaks, the largest loss deviation from the CPU's PyTorch eager run, and its status."""
    import pandas as pd

    rows = []
    for where, record in metrics["reference"].items():
        for name, r in record["rungs"].items():
            rows.append(
                {
                    "device": device_label(where, record),
                    "framework, tool": RUNGS.get(name, name),
                    "step time (ms, median)": None
                    if r.get("median_s") is None
                    else 1e3 * r["median_s"],
                    "IQR (ms)": None if r.get("iqr_s") is None else 1e3 * r["iqr_s"],
                    "compile (s)": r.get("compile_s"),
                    "graph breaks": r.get("graph_breaks"),
                    "largest loss deviation": r["max_loss_deviation"],
                    "status": "ran"
                    if r.get("median_s") is not None
                    else f"failed: {r.get('error')}",
                }
            )
    return pd.DataFrame(rows).set_index(["device", "framework, tool"])


def _threads(metrics: Mapping[str, Any], fw: str) -> str:
    """The CPU threads behind a worker's step time, as its row states them."""
    n = metrics.get("threads")
    if n is None:
        return "not recorded"
    if fw == "torch":
        return f"{words.plural(n, 'thread')} per torchrun worker"
    return f"one process for every device, OMP_NUM_THREADS={n} (XLA's CPU pool is its own)"


def _peak(r: Mapping[str, Any]) -> float | None:
    return None if r.get("peak") is None else r["peak"]["bytes"] / 1024


def results_table(metrics: Mapping[str, Any], devices: int | None = None):
    """One row per strategy and framework at ``devices`` (the largest run by default): code lines,
    losses, memory per device between steps and its peak within a step (None where not measured:
    PyTorch on the CPU), bytes on the wire per device, the step time and its threads."""
    import pandas as pd

    n = str(devices or metrics["largest"])
    rows = []
    for s in STRATEGY_NAMES:
        for fw in ("torch", "jax"):
            r = metrics["runs"][n][fw].get(s)
            if r is None:
                continue
            rows.append(
                {
                    "strategy": STRATEGY_NAMES[s],
                    "framework, tool": f"{words.FRAMEWORKS[fw]}, {TOOLS[fw][s]}",
                    "code lines": metrics["code_lines"][fw].get(
                        s
                    ),  # none counted for FSDP2's second way
                    "largest loss deviation": r["max_loss_deviation"],
                    "largest parameter difference": r["max_param_difference"],
                    "memory per device between steps (KiB)": r["memory"]["total"] / 1024,
                    "of replicated (%)": 100 * r["memory"]["total"] / r["replicated_total"],
                    "peak within a step (KiB)": _peak(r),
                    "collectives per step": r["comms"]["total"]["count"],
                    "bytes on the wire per device per step (KiB)": r["comms"]["total"]["wire_bytes"]
                    / 1024,
                    "step time (ms, median)": 1e3 * r["time"]["median_s"],
                    "step time IQR (ms)": 1e3 * r["time"]["iqr_s"],
                    "CPU threads of the step time": _threads(metrics, fw),
                }
            )
    return pd.DataFrame(rows).set_index(["strategy", "framework, tool"])


def collectives_table(metrics: Mapping[str, Any], devices: int | None = None):
    """Per strategy, framework and collective kind at ``devices``: the count, the group sizes, the
    bytes of the buffers (see :mod:`.comms`) and the bytes each device sends on the wire by the
    ring algorithm (:func:`.comms.wire_factor`), and a total row."""
    import pandas as pd

    n = str(devices or metrics["largest"])
    rows = []
    for s in STRATEGY_NAMES:
        for fw in ("torch", "jax"):
            r = metrics["runs"][n][fw].get(s)
            if r is None or s == "one_device":
                continue
            for kind in (*comms.KINDS, "total"):
                entry = r["comms"].get(kind)
                if entry is None:
                    continue
                groups = entry.get("groups")
                rows.append(
                    {
                        "strategy": STRATEGY_NAMES[s],
                        "framework, tool": f"{words.FRAMEWORKS[fw]}, {TOOLS[fw][s]}",
                        "kind": kind,
                        "count": entry["count"],
                        "group (devices)": ", ".join(map(str, groups)) if groups else "",
                        "buffer bytes": int(entry["bytes"]),
                        "wire bytes per device": int(round(entry["wire_bytes"])),
                    }
                )
    return pd.DataFrame(rows).set_index(["strategy", "framework, tool", "kind"])


def peak_claim(metrics: Mapping[str, Any], devices: int | None = None) -> str:
    """The peak memory within a step per device, per framework, where it was measured, with its
    source (simulated devices labelled so); where not, why not."""
    n = str(devices or metrics["largest"])
    lines = []
    for fw in ("torch", "jax"):
        per = metrics["runs"][n][fw]
        found = [(s, per[s]["peak"]) for s in STRATEGY_NAMES  # the post's order of strategies
                 if s in per and per[s].get("peak") is not None]
        if not found:
            lines.append(
                f"- **{words.FRAMEWORKS[fw]}**: "
                + (
                    TORCH_CPU_PEAK
                    if fw == "torch"
                    else "not measured (the backend gives no memory analysis)"
                )
                + "."
            )
            continue
        figures = spoken_list([f"{STRATEGY_NAMES[s]} {bytes_text(p['bytes'])}" for s, p in found])
        lines.append(f"- **{words.FRAMEWORKS[fw]}** ({found[0][1]['source']}): {figures}.")
    return f"Peak memory per device within a training step, on {n} devices:\n\n" + "\n".join(lines)


def projection_table(metrics: Mapping[str, Any]):
    """The cost model's projected step time and scaling efficiency per strategy, framework and
    GPU count."""
    import pandas as pd

    rows = []
    for fw, per in metrics["projection"].items():
        for s, counts in per.items():
            for n, p in counts.items():
                rows.append(
                    {
                        "strategy": STRATEGY_NAMES[s],
                        "framework, tool": f"{words.FRAMEWORKS[fw]}, {TOOLS[fw][s]}",
                        "H100s": int(n),
                        "compute (µs)": 1e6 * p["compute_s"],
                        "communication (µs)": 1e6 * p["comm_s"],
                        "efficiency, no overlap (%)": 100 * p["efficiency_no_overlap"],
                        "efficiency, full overlap (%)": 100 * p["efficiency_overlap"],
                    }
                )
    return pd.DataFrame(rows).set_index(["strategy", "framework, tool", "H100s"])
