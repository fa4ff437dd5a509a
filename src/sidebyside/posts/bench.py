"""Benchmarks, one subcommand each: ``python -m sidebyside.posts.bench <name> [options]``.

- ``grid_sample``: :func:`sidebyside.grid_sample` against
  ``torch.nn.functional.grid_sample`` (:mod:`sidebyside.grid_sample.bench`): per
  configuration the kernel time and the per-call time, forward and forward+backward. What it
  times are the steps and chains of the post's notebook (its paired cells ``step`` and ``chain``,
  read from ``notebooks/03_grid_sample.py`` by :func:`grid_sample_steps`, so the command runs
  from a clone of the repository), or those a notebook sends with ``--steps``.

Equal thread count (``--threads N``) is enforced before either library starts, by
:func:`sidebyside.lab.conditions.same_conditions` (the notebooks' own set-up). Without
``--threads`` both use every core this process may use.

This module imports neither PyTorch nor JAX before the thread count is set.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from pathlib import Path

__all__ = ["NOTEBOOK", "grid_sample_steps", "main"]

#: The grid_sample post's notebook, whose paired cells ``step`` and ``chain`` the benchmark times.
NOTEBOOK = Path(__file__).resolve().parents[3] / "notebooks" / "03_grid_sample.py"
_TIMED_PAIR = re.compile(r"^pair:(step|chain):(torch|jax)$")


def grid_sample_steps(notebook: Path = NOTEBOOK) -> dict:
    """The steps the grid_sample benchmark times (:data:`sidebyside.grid_sample.bench.STEPS`): the paired
    cells ``step`` and ``chain`` of ``notebook``, run in order in a namespace holding what the notebook's
    set-up cell gives them (``functools``, ``jax``, ``jnp``, ``torch``, ``F``, ``grid_sample``). Raises
    ``SystemExit`` where the notebook is not there (an installed wheel has no notebooks)."""
    if not notebook.is_file():
        raise SystemExit(f"the grid_sample benchmark times the steps of its post's notebook, {notebook}, which is "
                         "not here: run it from a clone of the repository, or pass --steps (a notebook's own: "
                         "sidebyside.grid_sample.bench.run)")
    import functools

    import jax
    import jax.numpy as jnp
    import jupytext
    import torch
    import torch.nn.functional as F

    from sidebyside import grid_sample
    from sidebyside.grid_sample import bench

    namespace = {"functools": functools, "jax": jax, "jnp": jnp, "torch": torch, "F": F, "grid_sample": grid_sample}
    for cell in jupytext.read(notebook).cells:
        tags = [m for m in map(_TIMED_PAIR.match, cell.metadata.get("tags", [])) if m]
        if cell.cell_type == "code" and tags:
            exec(compile(cell.source, f"<{notebook.name} pair {tags[0].group(1)}:{tags[0].group(2)}>", "exec"),
                 namespace)
    return bench.steps_from(namespace)


# ============================================================================= the command line


def _grid_sample_main(args) -> int:
    # On a GPU, JAX would take 75% of its memory up front, and this process shares the
    # device with PyTorch (and, from a notebook, with the notebook's own JAX).
    os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
    from sidebyside.lab import conditions

    threads = conditions.same_conditions(threads=args.threads)["threads"]  # before the package imports jax
    from sidebyside.grid_sample import bench as grid_sample_bench

    if args.steps:
        import cloudpickle

        with open(args.steps, "rb") as f:
            steps = cloudpickle.load(f)
    else:
        steps = grid_sample_steps()
    return grid_sample_bench.cli(args, threads, steps)


def main(argv=None) -> int:
    """The command line (``argv``, default ``sys.argv[1:]``); returns the exit code."""
    parser = argparse.ArgumentParser(prog="python -m sidebyside.posts.bench", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="benchmark", required=True)
    gs = sub.add_parser("grid_sample", help="JAX grid_sample against PyTorch's: kernel time and per-call time")
    gs.add_argument("--threads", type=int, default=None, help="cores for both libraries (default: all available)")
    gs.add_argument("--repeats", type=int, default=7, help="interleaved repeats per configuration")
    gs.add_argument("--sizes", nargs="+", help="subset of the standard sizes (2d_small, 2d_large, 3d); without "
                    "--sizes or --shape: all of them, and on a GPU also 2d_large_gpu (32x3x256x256, where the GPU "
                    "goals are set)")
    gs.add_argument("--shape", action="append", metavar="NAME=N,C,H,W",
                    help="a custom input shape (repeatable; 5 numbers for 3-D)")
    gs.add_argument("--modes", nargs="+", default=["nearest", "bilinear", "bicubic"],
                    choices=["nearest", "bilinear", "bicubic"])
    gs.add_argument("--naive", action="store_true", help="also time the naive gather-all-corners JAX baseline")
    gs.add_argument("--no-kernel", action="store_true", help="skip the kernel times (chained calls in one program)")
    gs.add_argument("--copies", type=int, default=None,
                    help="copies of the inputs that the kernel time's chain goes round (default: enough to fill twice "
                    "the last-level cache; on a GPU the chain makes at least 32 calls)")
    gs.add_argument("--pallas-layouts", nargs="+", default=["points", "channels"], choices=["points", "channels"],
                    help="layouts of the Pallas kernels to time where they run (a CUDA GPU)")
    gs.add_argument("--min-repeat-s", type=float, default=0.05, help="shortest duration of one repeat (s)")
    gs.add_argument("--json", metavar="PATH", help="also write the results as JSON")
    gs.add_argument("--steps", metavar="PATH", help="the steps to time, pickled with cloudpickle (a notebook's own: "
                    "sidebyside.grid_sample.bench.run); default: the paired cells step and chain of "
                    "notebooks/03_grid_sample.py")
    gs.set_defaults(run=_grid_sample_main)
    args = parser.parse_args(argv)
    return args.run(args)


def _exit(code: int) -> None:
    """Exit with ``code`` once the exit handlers have run (the timing pool's workers closed, the compilation
    cache removed), skipping the interpreter's teardown of PyTorch, Inductor and JAX: seconds that the
    notebook waiting for this process would otherwise wait for, after its results are written."""
    import atexit

    sys.stdout.flush()
    sys.stderr.flush()
    atexit._run_exitfuncs()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


if __name__ == "__main__":
    _exit(main())
