"""The kernel time of a grid_sample call: calls chained inside one program, each on its own copy
of the inputs (:mod:`sidebyside.grid_sample.bench` reports it beside the per-call time).

The chain (``jax_kernel_ms``, ``torch_kernel_ms``): ``copies`` calls chained inside
one program, each on its own copy of the inputs, so that together they are larger
than the last-level cache (``cache_bytes``; the L2 on a GPU) and every call reads
its inputs from memory: JAX runs them in one jitted program, PyTorch as one
CUDA graph (on the CPU, a loop: its dispatch is small against a CPU
kernel). Divided by the number of calls: what the call costs inside a larger jitted
model, where JAX's dispatch is paid once for the whole program.

On a GPU the chain makes at least :data:`_MIN_GPU_CALLS` calls, going round the
copies as often as that takes (``calls``; each call still reads its copy from memory,
since the calls between two uses of a copy move more bytes than the L2 holds). A
chain of only the copies (two, for large inputs) can run about as long as JAX's
dispatch of it, while PyTorch's CUDA graph launches in a few microseconds: the chain
must be long against the dispatch for the time to be the kernel's.

The JAX chain takes each copy as its own argument and calls the kernel once per
copy, one after the other (an ``optimization_barrier`` orders them without moving
data), so it moves no more bytes than PyTorch's loop. A ``lax.scan`` over stacked
copies would not: it slices each copy out and writes each output into the stacked
result, two extra copies per call that PyTorch does not make, which would count
against JAX. The chains themselves are the post's code: the paired cells ``chain`` of
``notebooks/03_grid_sample.py`` (``jax_chain``, ``torch_chain``, ``torch_graph``,
``torch_replay``) define them, and :func:`kernel_times` runs the ones it is given, each
contestant a ``functools.partial`` of one of them, so that the harness notes where it is
defined; a test holds the notebook's compiled JAX chain free of copies and slices.

**Memory of the same kind** (:func:`torch_tensor`): each side's inputs are in memory its own
framework allocated, never shared with NumPy. NumPy asks Linux for 2 MiB pages for arrays
of 4 MiB and more (``madvise(MADV_HUGEPAGE)``) and ``torch.from_numpy`` would share them,
while XLA's buffers lie on 4 KiB pages. Allocating each side's inputs in its own framework
keeps the page size out of every comparison.
"""

from __future__ import annotations

import functools
import math
import os

__all__ = ["cache_bytes", "torch_tensor", "chain_shape", "chain_order", "kernel_times"]

_CPU_CACHE_BYTES = 32 * 2**20  # assumed last-level cache where none is reported
_MAX_COPIES = 64  # the chain is unrolled: tiny inputs stop here (inputs_exceed_cache then says so)
_MIN_GPU_CALLS = 32  # calls per chain on a GPU: enough kernels to outlast one dispatch of the chain


def cache_bytes(device: str) -> int:
    """The last-level cache of ``device`` ("cuda": the GPU's L2; else the CPU's L3, or an assumed 32 MiB)."""
    if device == "cuda":
        import torch

        return int(getattr(torch.cuda.get_device_properties(0), "L2_cache_size", 50 * 2**20))
    try:
        return int(os.sysconf("SC_LEVEL3_CACHE_SIZE")) or _CPU_CACHE_BYTES
    except (ValueError, OSError, AttributeError):
        return _CPU_CACHE_BYTES


def torch_tensor(a, device: str):
    """``a`` (a NumPy array) as a PyTorch tensor in memory PyTorch allocated (a copy, even
    on the CPU, where ``torch.from_numpy`` would share NumPy's pages: see the module
    docstring), as JAX's inputs are in memory XLA allocated."""
    import torch

    return torch.from_numpy(a).to(device, copy=True)


def chain_shape(bytes_per_call: int, cache_bytes: int, copies: int | None = None, *, gpu: bool) -> tuple[int, int]:
    """``(copies, rounds)`` of the kernel time's chain: ``copies`` (default: enough copies of the
    inputs to fill twice the last-level cache, 2 to :data:`_MAX_COPIES`) and, on a GPU, enough
    rounds over them for at least :data:`_MIN_GPU_CALLS` calls (see the module docstring)."""
    chained = copies or max(2, min(_MAX_COPIES, math.ceil(2 * cache_bytes / bytes_per_call)))
    return chained, (math.ceil(_MIN_GPU_CALLS / chained) if gpu else 1)


def chain_order(copies: int, rounds: int) -> list[int]:
    """The copy each chained call reads, in order: round after round over the copies (both
    sides' chains follow it: :func:`kernel_times`)."""
    return list(range(copies)) * rounds


def kernel_times(jax_step, torch_step, x, grid, cot, copies, with_grad, device, repeats, min_repeat_s, layouts=(),
                 rounds: int = 1, *, steps):
    """Per-call time of ``copies * rounds`` chained calls going ``rounds`` times round ``copies``
    copies of the inputs (see the module docstring); ``layouts``: other Pallas layouts to chain
    alike. ``jax_step(x, grid, cotangent, with_grad=..., implementation=..., pallas_layout=...)`` and
    ``torch_step(x, grid, cotangent, with_grad=...)`` make one call; ``steps`` holds the chains, as the
    notebook's paired cells ``chain`` define them: ``jax_chain(xs, grids, cotangents, *, step, order)``
    (jitted, ``step`` and ``order`` static), ``torch_chain(xs, grids, cotangents, *, step, order,
    with_grad)``, ``torch_graph(run)`` (a CUDA graph of ``run``) and ``torch_replay(graph)``; each
    contestant is a ``functools.partial`` of one of them, so the harness notes where it is defined."""
    import jax.numpy as jnp
    import numpy as np

    from sidebyside.lab import timing

    order = tuple(chain_order(copies, rounds))
    # `copies` distinct buffers of the same values, one per chained call (np.array copies,
    # so no two device buffers can share host memory)
    xs, gs, cs = ([jnp.asarray(np.array(a)) for _ in range(copies)] for a in (x, grid, cot))

    def chain(step):
        return functools.partial(steps["jax_chain"], xs, gs, cs, step=step, order=order)

    fns = {"jax": chain(functools.partial(jax_step, with_grad=with_grad))}
    for layout in layouts:
        fns[layout] = chain(functools.partial(jax_step, implementation="pallas", with_grad=with_grad,
                                              pallas_layout=layout))

    torch_inputs = []
    for _ in range(copies):
        xt, gt, ct = (torch_tensor(a, device) for a in (x, grid, cot))
        if with_grad:
            xt.requires_grad_(True)
            gt.requires_grad_(True)
        torch_inputs.append((xt, gt, ct))
    # the JAX chain's order and feeding
    torch_loop = functools.partial(steps["torch_chain"], *zip(*torch_inputs), step=torch_step, order=order,
                                   with_grad=with_grad)
    torch_chain, tool = torch_loop, "loop"  # on the CPU a loop: its dispatch is small against a CPU kernel
    if device == "cuda":
        try:
            torch_chain, tool = functools.partial(steps["torch_replay"], steps["torch_graph"](torch_loop)), "cuda graph"
        except RuntimeError:  # not capturable: a loop, pipelined
            pass
    t = timing.compare({**fns, "torch": torch_chain}, repeats=repeats, min_repeat_s=min_repeat_s,
                       pipelined=device == "cuda")
    bytes_per_call = x.nbytes + grid.nbytes + (cot.nbytes if with_grad else 0)
    n = copies * rounds
    row = {"copies": copies, "calls": n, "torch_kernel_tool": tool, "inputs_bytes": copies * bytes_per_call,
           "kernel_ratio": timing.ratio(t["jax"], t["torch"]),
           "kernel_first_call_ms": {name: timed.first_s * 1e3 for name, timed in t.items()}}
    for side in ("jax", "torch"):
        row.update({f"{side}_kernel_ms": t[side].median_s * 1e3 / n,
                    f"{side}_kernel_iqr_ms": t[side].iqr_s * 1e3 / n,
                    f"{side}_kernel_q1_ms": t[side].q1_s * 1e3 / n,
                    f"{side}_kernel_q3_ms": t[side].q3_s * 1e3 / n,
                    f"{side}_kernel_processes_ms": [r * 1e3 / n for r in t[side].processes_s]})
    row.update(kernel_floor=t["jax"].floor, kernel_busy=t["jax"].busy)
    for layout in layouts:
        row[f"jax_{layout}_kernel_ms"] = t[layout].median_s * 1e3 / n
        row[f"{layout}_kernel_ratio"] = timing.ratio(t[layout], t["torch"])
    del torch_inputs, fns
    return row
