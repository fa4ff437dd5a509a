"""The goals of the grid_sample benchmark and its tables (:mod:`sidebyside.grid_sample.bench`).

The goals (:func:`goals`): per call, at the sizes where they are set (:data:`GOALS`); on
a GPU also the kernel time against PyTorch's CUDA kernel at the sizes of
:data:`KERNEL_GOAL_SHAPES` (:data:`KERNEL_GOAL`), and the forward's share of the floor's
speed at :data:`FLOOR_GOAL_SHAPE` (:data:`FLOOR_GOAL`).
"""

from __future__ import annotations

from typing import Any

__all__ = ["GOALS", "KERNEL_GOAL", "KERNEL_GOAL_SHAPES", "FLOOR_GOAL", "FLOOR_GOAL_SHAPE", "goal_for", "goals",
           "speed_table", "goals_table", "goals_summary"]

# JAX time / PyTorch time must stay at or below these (issue 5; per call).
GOALS = {
    "cpu": {"nearest/forward": 1.5, "bilinear/forward": 1.5, "bicubic/forward": 2.0, "forward+backward": 2.0},
    "gpu": {"forward": 1.0, "forward+backward": 1.5},  # at N=32, C=3, 256x256
}
# On a GPU (issue 13): JAX's kernel time at most KERNEL_GOAL of PyTorch's CUDA kernel at these input shapes
# (every mode, forward and forward+backward), and the forward at FLOOR_GOAL_SHAPE at least FLOOR_GOAL of the
# memory floor's speed (floor_ms / kernel time).
KERNEL_GOAL = 0.8
KERNEL_GOAL_SHAPES = ((32, 3, 256, 256), (8, 64, 128, 128), (4, 8, 32, 64, 64))
FLOOR_GOAL = 0.7
FLOOR_GOAL_SHAPE = (32, 3, 256, 256)


def goal_for(key: str, device_kind: str) -> float | None:
    """The per-call JAX/PyTorch ratio a result row must stay within, or None."""
    mode, size, kind = key.split("/")
    if device_kind == "gpu":
        if size != "2d_large_gpu":
            return None
        return GOALS["gpu"][kind]
    if kind == "forward+backward":
        return GOALS["cpu"]["forward+backward"]
    return GOALS["cpu"].get(f"{mode}/forward")


def goals(key: str, row: dict[str, Any], device_kind: str) -> list[dict[str, Any]]:
    """Every goal the result row ``key`` (``mode/size/kind``) is held to, each
    ``{"goal", "measure", "limit", "value", "met"}``: the per-call ratio (:func:`goal_for`);
    on a GPU the kernel ratio at :data:`KERNEL_GOAL_SHAPES` and, for the forward at
    :data:`FLOOR_GOAL_SHAPE`, JAX's share of the memory floor's speed (at least the limit).
    ``value`` and ``met`` are None where the run did not measure it (no kernel times)."""
    found = []

    def add(goal, measure, limit, value, at_most=True):
        met = None if value is None else bool(value <= limit if at_most else value >= limit)
        found.append({"goal": goal, "measure": measure, "limit": limit, "value": value, "met": met})

    per_call = goal_for(key, device_kind)
    if per_call is not None:
        add("per call", "JAX / PyTorch per call, at most", per_call, row["ratio"])
    if device_kind == "gpu":
        shape = tuple(row["shape"])
        if shape in KERNEL_GOAL_SHAPES:
            add("kernel", "JAX / PyTorch kernel, at most", KERNEL_GOAL, row.get("kernel_ratio"))
        if shape == FLOOR_GOAL_SHAPE and key.endswith("/forward"):
            add("memory floor", "JAX kernel's share of the floor's speed, at least", FLOOR_GOAL,
                row.get("jax_floor_speed"), at_most=False)
    return found


def speed_table(results: dict[str, dict[str, Any]]):
    """A DataFrame of the results: per-call and kernel times, the memory floor and the
    other paths, one row per configuration."""
    import pandas as pd

    rows = []
    for key, row in results.items():
        rows.append({
            "config": key,
            "JAX per call (ms)": row["jax_ms"],
            "PyTorch per call (ms)": row["torch_ms"],
            "JAX / PyTorch per call": row["ratio"],
            "JAX kernel (ms)": row.get("jax_kernel_ms"),
            "PyTorch kernel (ms)": row.get("torch_kernel_ms"),
            "JAX / PyTorch kernel": row.get("kernel_ratio"),
            "memory floor (ms)": row.get("floor_ms"),
            "JAX kernel, share of floor speed": row.get("jax_floor_speed"),
            "PyTorch kernel, share of floor speed": row.get("torch_floor_speed"),
            "naive JAX / PyTorch": row.get("naive_ratio"),
            "XLA path / PyTorch": row.get("xla_ratio"),
            "torch.compile / PyTorch eager": _ladder_ratio(row, "torch/compile", "torch/eager"),
            "Pallas channels layout / PyTorch per call": row.get("pallas_channels_ratio"),
            "Pallas channels layout / PyTorch kernel": row.get("channels_kernel_ratio"),
        })
    return pd.DataFrame(rows).set_index("config").dropna(axis=1, how="all")


def _ladder_ratio(row: dict[str, Any], name: str, reference: str) -> float | None:
    """``name``'s median over ``reference``'s in the row's ladder (None where either did not run)."""
    ladder = row.get("ladder") or {}
    a, b = (ladder.get(n, {}).get("median_s") for n in (name, reference))
    return a / b if a and b else None


def goals_table(results: dict[str, dict[str, Any]], device_kind: str):
    """A DataFrame of every goal (:func:`goals`) of every result row: configuration, goal,
    what is measured, the limit, the value and whether it is met."""
    import pandas as pd

    rows = [{"config": key, **goal} for key, row in results.items() for goal in goals(key, row, device_kind)]
    return pd.DataFrame(rows, columns=["config", "goal", "measure", "limit", "value", "met"])


def goals_summary(table) -> str:
    """One line: per kind of goal, how many of those measured are met (:func:`goals_table`)."""
    if not len(table):
        return "goals met: none set"
    parts = []
    for goal, group in table.groupby("goal", sort=False):
        measured = group["met"].dropna()
        parts.append(f"{goal} {int(measured.sum())} of {len(measured)}"
                     + (f" ({len(group) - len(measured)} not measured)" if len(measured) < len(group) else ""))
    return "goals met: " + ", ".join(parts)
