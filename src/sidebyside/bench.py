"""Benchmarks, one subcommand each: ``python -m sidebyside.bench <name> [options]``.

``grid_sample``: JAX (:func:`sidebyside.grid_sample`) against
``torch.nn.functional.grid_sample``, forward and forward+backward, float32, each pair
measured in one interleaved run (:func:`sidebyside.timing.compare`), printed as a
table of medians, IQRs and JAX/PyTorch ratios with the goals met or not.

Equal thread count (``--threads N``) is enforced before either library starts: the
process is pinned to N cores (``os.sched_setaffinity``), PyTorch gets
``torch.set_num_threads(N)``, and XLA's CPU client is told the same through
``XLA_FLAGS`` (``--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1``
when N = 1; otherwise XLA's pool is limited by the affinity mask). Without
``--threads`` both use every core this process may use.

Library use: :func:`grid_sample_configs` and :func:`bench_grid_sample` return plain
data (the notebook calls them); nothing is printed outside :func:`main`.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

__all__ = ["GRID_SAMPLE_SIZES", "GOALS", "grid_sample_configs", "bench_grid_sample", "set_threads", "main"]

# (N, C, H, W) for 2-D, (N, C, D, H, W) for 3-D; the output has the input's size.
GRID_SAMPLE_SIZES = {
    "2d_small": (32, 3, 128, 128),
    "2d_large": (8, 3, 256, 256),
    "3d": (4, 8, 32, 64, 64),
}

# JAX time / PyTorch time must stay at or below these (issue 5).
GOALS = {
    "cpu": {"bilinear/forward": 1.5, "bicubic/forward": 2.0, "forward+backward": 2.0},  # nearest: no goal set
    "gpu": {"forward": 1.0, "forward+backward": 1.5},  # at N=32, C=3, 256x256
}


def set_threads(threads: int | None) -> int:
    """Restrict this process to ``threads`` cores for both libraries. Call before
    importing jax (XLA reads its flags once). Returns the thread count in effect."""
    available = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else list(range(os.cpu_count() or 1))
    if threads is None:
        threads = len(available)
    if threads < 1 or threads > len(available):
        raise ValueError(f"--threads must be between 1 and {len(available)}, got {threads}")
    if "jax" in sys.modules:
        raise RuntimeError("set_threads() must run before jax is imported")
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, available[:threads])
    flags = os.environ.get("XLA_FLAGS", "")
    if threads == 1 and "intra_op_parallelism_threads" not in flags:
        os.environ["XLA_FLAGS"] = (flags + " --xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1").strip()
    import torch

    torch.set_num_threads(threads)
    return threads


def grid_sample_configs(modes=("nearest", "bilinear", "bicubic"), sizes=None) -> list[dict]:
    """The benchmark's configurations: each size with each mode it supports."""
    sizes = sizes or GRID_SAMPLE_SIZES
    out = []
    for size_name, shape in sizes.items():
        for mode in modes:
            if len(shape) == 5 and mode == "bicubic":
                continue
            out.append({"name": f"{mode}/{size_name}", "mode": mode, "shape": tuple(shape)})
    return out


def _inputs(shape, seed=0):
    import numpy as np

    rng = np.random.default_rng(seed)
    x = rng.standard_normal(shape).astype(np.float32)
    n, spatial = shape[0], shape[2:]
    # A random affine warp (rotation, scale, shift) plus a little noise: a realistic
    # access pattern, partly outside the image.
    dims = len(spatial)
    axes = [np.linspace(-1, 1, s) for s in spatial[::-1]]  # x, y[, z]
    mesh = np.stack(np.meshgrid(*axes[::-1], indexing="ij")[::-1], axis=-1)  # (*spatial, dims) in x,y,z order
    grids = []
    for _ in range(n):
        a = np.eye(dims) * rng.uniform(0.8, 1.2)
        a[:2, :2] = a[:2, :2] @ np.array([[np.cos(t := rng.uniform(-0.5, 0.5)), -np.sin(t)], [np.sin(t), np.cos(t)]])
        shift = rng.uniform(-0.1, 0.1, dims)
        grids.append(mesh @ a.T + shift + rng.normal(0, 0.01, mesh.shape))
    return x, np.stack(grids).astype(np.float32)


def bench_grid_sample(configs=None, *, repeats: int = 7, min_repeat_s: float = 0.05, backward: bool = True, naive: bool = False, padding_mode: str = "zeros", align_corners: bool = False) -> dict[str, dict[str, Any]]:
    """Time JAX and PyTorch on each configuration.

    Returns ``{"<mode>/<size>/<forward|forward+backward>": {"jax_ms", "torch_ms",
    "ratio", "jax_iqr_ms", "torch_iqr_ms", "jax_compile_ms", "shape"}}``, plus
    ``"naive_ms"``/``"naive_ratio"`` for bilinear 2-D forward when ``naive``.
    Forward+backward returns the output and the gradient of ``sum(output *
    cotangent)`` with respect to input and grid (jitted in JAX; autograd in PyTorch).

    On a GPU the calls are timed pipelined (:func:`sidebyside.timing.compare`). Where
    ``grid_sample`` takes a kernel (Pallas on a GPU, native on the CPU) the XLA path is
    timed beside it (``"xla_ms"``, ``"xla_ratio"``); ``"implementation"`` says which one
    ``jax_ms`` is.
    """
    import jax
    import jax.numpy as jnp
    import numpy as np
    import torch
    import torch.nn.functional as F

    from . import timing
    from .sampling import choose_implementation, grid_sample, grid_sample_naive

    device = "cuda" if torch.cuda.is_available() else "cpu"
    gpu = jax.default_backend() == "gpu"
    results: dict[str, dict[str, Any]] = {}
    for cfg in configs or grid_sample_configs():
        mode, shape = cfg["mode"], cfg["shape"]
        x, grid = _inputs(shape)
        cot = np.random.default_rng(1).standard_normal((shape[0], shape[1], *grid.shape[1:-1])).astype(np.float32)
        xt, gt, ct = (torch.from_numpy(a).to(device) for a in (x, grid, cot))
        xj, gj, cj = (jnp.asarray(a) for a in (x, grid, cot))
        kw = dict(mode=mode, padding_mode=padding_mode, align_corners=align_corners)

        path = choose_implementation(x.shape, grid.shape, x.dtype)  # what "jax" runs
        jax_fwd = jax.jit(lambda a, b: grid_sample(a, b, **kw))
        fns = {
            "jax": lambda: jax_fwd(xj, gj),
            "torch": lambda: F.grid_sample(xt, gt, **kw),
        }
        if path != "xla":
            xla_fwd = jax.jit(lambda a, b: grid_sample(a, b, **kw, implementation="xla"))
            fns["xla"] = lambda: xla_fwd(xj, gj)
        if naive and mode == "bilinear" and len(shape) == 4 and padding_mode == "zeros":
            naive_fwd = jax.jit(lambda a, b: grid_sample_naive(a, b, align_corners=align_corners))
            fns["naive"] = lambda: naive_fwd(xj, gj)
        runs = {"forward": fns}
        if backward:
            def jax_value_and_vjp(a, b, c, implementation="auto"):
                # Return the output too, as PyTorch's autograd computes it: otherwise XLA
                # drops the forward wherever the gradients do not need it (nearest).
                out, vjp = jax.vjp(lambda p, q: grid_sample(p, q, **kw, implementation=implementation), a, b)
                return out, vjp(c)

            jax_vjp = jax.jit(jax_value_and_vjp)
            xla_vjp = jax.jit(lambda a, b, c: jax_value_and_vjp(a, b, c, "xla"))
            xr = xt.clone().requires_grad_(True)
            gr = gt.clone().requires_grad_(True)

            def torch_vjp():
                out = F.grid_sample(xr, gr, **kw)
                return out, torch.autograd.grad(out, (xr, gr), ct)

            runs["forward+backward"] = {"jax": lambda: jax_vjp(xj, gj, cj), "torch": torch_vjp}
            if path != "xla":
                runs["forward+backward"]["xla"] = lambda: xla_vjp(xj, gj, cj)
        for kind, run in runs.items():
            t = timing.compare(run, repeats=repeats, min_repeat_s=min_repeat_s, pipelined=gpu)
            row = {
                "jax_ms": t["jax"].median_s * 1e3,
                "torch_ms": t["torch"].median_s * 1e3,
                "ratio": timing.ratio(t["jax"], t["torch"]),
                "jax_iqr_ms": t["jax"].iqr_s * 1e3,
                "torch_iqr_ms": t["torch"].iqr_s * 1e3,
                "jax_compile_ms": t["jax"].compile_s * 1e3,
                "shape": list(shape),
                "implementation": path,
            }
            if "xla" in t:
                row["xla_ms"] = t["xla"].median_s * 1e3
                row["xla_ratio"] = timing.ratio(t["xla"], t["torch"])
            if "naive" in t:
                row["naive_ms"] = t["naive"].median_s * 1e3
                row["naive_ratio"] = timing.ratio(t["naive"], t["torch"])
            results[f"{cfg['name']}/{kind}"] = row
    return results


def goal_for(key: str, device_kind: str) -> float | None:
    """The JAX/PyTorch ratio a result row must stay within, or None if no goal."""
    mode, size, kind = key.split("/")
    if device_kind == "gpu":
        if size != "2d_large_gpu":
            return None
        return GOALS["gpu"][kind]
    if kind == "forward+backward":
        return GOALS["cpu"]["forward+backward"]
    return GOALS["cpu"].get(f"{mode}/forward")


def goals_table(results: dict[str, dict[str, Any]], device_kind: str):
    """A DataFrame of results with each goal and whether it is met."""
    import pandas as pd

    rows = []
    for key, row in results.items():
        goal = goal_for(key, device_kind)
        rows.append({
            "config": key,
            "JAX (ms)": row["jax_ms"],
            "PyTorch (ms)": row["torch_ms"],
            "JAX / PyTorch": row["ratio"],
            "naive JAX / PyTorch": row.get("naive_ratio"),
            "XLA path / PyTorch": row.get("xla_ratio"),
            "goal": goal,
            "met": None if goal is None else bool(row["ratio"] <= goal),
        })
    return pd.DataFrame(rows).set_index("config")


def _grid_sample_main(args) -> int:
    # On a GPU, JAX would take 75% of its memory up front, and this process shares the
    # device with PyTorch (and, from a notebook, with the notebook's own JAX).
    os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
    threads = set_threads(args.threads)
    import pandas as pd

    sizes = dict(GRID_SAMPLE_SIZES)
    if args.sizes:
        sizes = {name: GRID_SAMPLE_SIZES[name] for name in args.sizes}
    if args.shape:
        sizes = {} if not args.sizes else sizes
        for spec in args.shape:
            name, _, dims = spec.partition("=")
            shape = tuple(int(d) for d in dims.split(","))
            if len(shape) not in (4, 5) or not name:
                raise SystemExit(f"--shape wants NAME=N,C,H,W or NAME=N,C,D,H,W, got {spec!r}")
            sizes[name] = shape
    import torch

    gpu = torch.cuda.is_available()
    if gpu:
        # The GPU goal is stated at N = 32, C = 3, 256 x 256.
        sizes["2d_large_gpu"] = (32, 3, 256, 256)
    configs = grid_sample_configs(tuple(args.modes), sizes)
    results = bench_grid_sample(configs, repeats=args.repeats, min_repeat_s=args.min_repeat_s, naive=args.naive)
    table = goals_table(results, "gpu" if gpu else "cpu")
    if args.json:
        import json

        with open(args.json, "w") as f:
            json.dump({"threads": threads, "device_kind": "gpu" if gpu else "cpu", "results": results}, f, indent=1)
    with pd.option_context("display.width", 160, "display.max_rows", 200, "display.float_format", "{:.3g}".format):
        print(f"grid_sample, float32, {'GPU, calls pipelined' if gpu else f'CPU, {threads} thread(s) for both'}; "
              f"medians of {args.repeats} interleaved repeats")
        print(table.to_string())
    if not gpu:
        print("GPU goals (forward <= 1.0x, forward+backward <= 1.5x PyTorch's CUDA kernel at "
              "N=32, C=3, 256x256): not yet measured (no GPU here).")
    met = table["met"].dropna()
    print(f"goals met: {int(met.sum())} of {len(met)}")
    return 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m sidebyside.bench", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="benchmark", required=True)
    gs = sub.add_parser("grid_sample", help="JAX grid_sample against PyTorch's")
    gs.add_argument("--threads", type=int, default=None, help="cores for both libraries (default: all available)")
    gs.add_argument("--repeats", type=int, default=7, help="interleaved repeats per configuration")
    gs.add_argument("--sizes", nargs="+", choices=sorted(GRID_SAMPLE_SIZES), help="subset of the standard sizes")
    gs.add_argument("--shape", action="append", metavar="NAME=N,C,H,W", help="a custom input shape (repeatable; 5 numbers for 3-D)")
    gs.add_argument("--modes", nargs="+", default=["nearest", "bilinear", "bicubic"], choices=["nearest", "bilinear", "bicubic"])
    gs.add_argument("--naive", action="store_true", help="also time the naive gather-all-corners JAX baseline")
    gs.add_argument("--min-repeat-s", type=float, default=0.05, help="shortest duration of one repeat (s)")
    gs.add_argument("--json", metavar="PATH", help="also write the results as JSON")
    gs.set_defaults(run=_grid_sample_main)
    args = parser.parse_args(argv)
    return args.run(args)


if __name__ == "__main__":
    sys.exit(main())
