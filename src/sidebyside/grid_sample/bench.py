"""Benchmark :func:`sidebyside.grid_sample` against ``torch.nn.functional.grid_sample``.

Two times per configuration (float32, a random affine warp; forward, and forward +
backward: the output and the gradient of ``sum(output * cotangent)`` with respect to
input and grid), each measured with both frameworks in one interleaved run
(:func:`sidebyside.lab.timing.compare`):

- **per call** (``jax_ms``, ``torch_ms``): a Python loop of calls to the jitted
  function / to PyTorch, as a user's loop makes them, so each framework's dispatch is
  included. On a GPU the calls of a repeat are issued back to back and waited for
  once (the time is ``max(dispatch, kernel)`` per call); on the CPU each call is waited
  for.
- **kernel** (``jax_kernel_ms``, ``torch_kernel_ms``): calls chained inside one program, so that
  every call reads its inputs from memory (:mod:`.chain`).

Each side's inputs are in memory its own framework allocated (:func:`.chain.torch_tensor`).

What is timed is the post's code, never a copy of it here: the steps and chains of the paired cells
``step`` and ``chain`` of ``notebooks/03_grid_sample.py`` (:data:`STEPS`), which the notebook passes
(:func:`steps_from`) and which ``python -m sidebyside.posts.bench grid_sample`` reads from the notebook.

**The memory floor** (``floor_ms``, with the kernel times): the bytes a call cannot avoid
moving (:func:`min_bytes`: each array it reads or writes, once) at the speed of a plain copy
on the same device, measured in the same process (:func:`copy_bandwidth`, ``copy_gbs``).
``jax_floor_speed`` and ``torch_floor_speed`` are the floor divided by
each kernel time: 1 would be a kernel that only moves its data, as fast as a copy does.

**Goals**: :mod:`.goals`.

**The alternatives apart.** The per-call times of the alternatives (the XLA path where a kernel
takes the call, the naive gather, other Pallas layouts) are measured in a second interleaved
run, against PyTorch again, and their ratios (``xla_ratio`` and the like) come from that run.
Interleaved with the main pair, the XLA path's temporaries (hundreds of MiB a call at 3-D) left
the allocator in a state that cost the call after it extra page faults (counted with
``getrusage``), which moved both sides' per-call times: hence the second run.

**The frameworks' ladder** (``ladder``, the same second run): what a user of each framework gets
from the framework, per call: PyTorch's built-in ``F.grid_sample`` eager (``torch/eager``) and
under ``torch.compile`` (``torch/compile``, static shapes; the backward through AOTAutograd),
against the pure-JAX XLA path (``jax/xla``) and, where it runs, each Pallas layout
(``jax/pallas_<layout>``), each a :func:`sidebyside.lab.ladders.ladder_entry` naming its
``implementation`` and ``origin``. The native C++ kernel called through XLA's FFI is this
project's code, not JAX's: it is the main pair's ``jax`` side where ``implementation`` is
``"native"``, and gets its own verdict. A rung that fails stays in the ladder with its error.

Where the Pallas kernels run (a CUDA GPU), each layout of ``pallas_layouts`` other
than the default ``"points"`` is timed too, per call
(``pallas_<layout>_ms``, ``pallas_<layout>_ratio``) and as a kernel
(``jax_<layout>_kernel_ms``, ``<layout>_kernel_ratio``), so that a GPU run shows
whether the channel-blocked layout wins (``implementation="auto"`` keeps "points").

Library use: :func:`configs`, :func:`inputs`, :func:`bench` and :func:`goals` return plain data;
:func:`run` runs the benchmark in a fresh process (the thread count of XLA's CPU
client is fixed when JAX starts) and returns its JSON; ``python -m sidebyside.posts.bench
grid_sample`` prints the table (:func:`cli`).
"""

from __future__ import annotations

import functools
import inspect
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping
from typing import Any

from sidebyside.grid_sample.chain import cache_bytes, chain_shape, kernel_times, torch_tensor
from sidebyside.grid_sample.goals import goals_summary, goals_table, speed_table
from sidebyside.lab import progress

__all__ = ["SIZES", "STEPS", "steps_from", "configs", "inputs", "bench", "min_bytes", "copy_bandwidth", "run", "run_each", "cli"]

# (N, C, H, W) for 2-D, (N, C, D, H, W) for 3-D; the output has the input's size.
SIZES = {
    "2d_small": (32, 3, 128, 128),
    "2d_large": (8, 3, 256, 256),
    "3d": (4, 8, 32, 64, 64),
}


#: The functions the benchmark times, each named as the paired cells ``step`` and ``chain`` of the post's
#: notebook (``notebooks/03_grid_sample.py``) define it: ``jax_step(x, grid, cotangent, *, mode, padding_mode,
#: align_corners, with_grad, implementation, pallas_layout)`` (one call of :func:`sidebyside.grid_sample`: the
#: output, and with ``with_grad`` also the gradients for ``cotangent``), ``jax_step_jit`` (it under ``jax.jit``,
#: the keywords static), ``jax_naive_jit(x, grid, align_corners)`` (the naive gather, jitted),
#: ``torch_step(x, grid, cotangent, *, mode, padding_mode, align_corners, with_grad, sample)``,
#: ``grid_sample_compiled`` (``F.grid_sample`` under ``torch.compile``, static shapes), and the chains that
#: :func:`.chain.kernel_times` runs (``jax_chain``, ``torch_chain``, ``torch_graph``, ``torch_replay``).
STEPS = ("jax_step", "jax_step_jit", "jax_naive_jit", "jax_chain",
         "torch_step", "grid_sample_compiled", "torch_chain", "torch_graph", "torch_replay")


def steps_from(namespace: Mapping[str, Any]) -> dict[str, Callable]:
    """The :data:`STEPS` that ``namespace`` defines (a notebook's ``globals()``, or the namespace its paired
    cells ran in), by name. Raises ``ValueError`` naming those it lacks."""
    missing = [name for name in STEPS if name not in namespace]
    if missing:
        raise ValueError(f"the grid_sample benchmark times {list(STEPS)}; missing here: {missing}. Define them "
                         "as the paired cells 'step' and 'chain' of notebooks/03_grid_sample.py do.")
    return {name: namespace[name] for name in STEPS}


def configs(modes=("nearest", "bilinear", "bicubic"), sizes=None) -> list[dict]:
    """The benchmark's configurations: each size with each mode it supports."""
    sizes = sizes or SIZES
    out = []
    for size_name, shape in sizes.items():
        for mode in modes:
            if len(shape) == 5 and mode == "bicubic":
                continue
            out.append({"name": f"{mode}/{size_name}", "mode": mode, "shape": tuple(shape)})
    return out


def inputs(shape, seed: int = 0):
    """float32 NumPy ``(input, grid)`` for an input of ``shape``: standard-normal values
    and, per batch element, a random affine warp (rotation, scale, shift) plus a little
    noise, partly outside the image: a realistic access pattern."""
    import numpy as np

    rng = np.random.default_rng(seed)
    x = rng.standard_normal(shape).astype(np.float32)
    n, spatial = shape[0], shape[2:]
    dims = len(spatial)
    axes = [np.linspace(-1, 1, s) for s in spatial[::-1]]  # x, y[, z]
    mesh = np.stack(np.meshgrid(*axes[::-1], indexing="ij")[::-1], axis=-1)  # (*spatial, dims) in x,y,z order
    grids = []
    for _ in range(n):
        a = np.eye(dims) * rng.uniform(0.8, 1.2)
        t = rng.uniform(-0.5, 0.5)
        a[:2, :2] = a[:2, :2] @ np.array([[np.cos(t), -np.sin(t)], [np.sin(t), np.cos(t)]])
        shift = rng.uniform(-0.1, 0.1, dims)
        grids.append(mesh @ a.T + shift + rng.normal(0, 0.01, mesh.shape))
    return x, np.stack(grids).astype(np.float32)


def min_bytes(input_bytes: int, grid_bytes: int, output_bytes: int, mode: str, with_grad: bool) -> int:
    """The bytes one call cannot avoid moving: each array it reads or writes, once. Forward:
    read the input and the grid, write the output. Forward+backward adds the backward: read
    the grid, the cotangent (the output's size) and, except in nearest (whose grid gradient
    is zero), the input; write the input gradient and the grid gradient."""
    forward = input_bytes + grid_bytes + output_bytes
    if not with_grad:
        return forward
    reads = grid_bytes + output_bytes + (input_bytes if mode != "nearest" else 0)
    return forward + reads + input_bytes + grid_bytes


def copy_bandwidth(device: str, cache_bytes: int, *, repeats: int = 7, min_repeat_s: float = 0.05) -> float:
    """Bytes per second of a plain copy (read plus write) of a float32 buffer of at least four
    times ``cache_bytes`` (64 MiB or more), on ``device`` with the threads in effect
    (:func:`sidebyside.lab.peaks.measure_copy_bandwidth`)."""
    from sidebyside.lab import peaks

    return peaks.measure_copy_bandwidth(device, nbytes=max(4 * cache_bytes, 64 * 2**20), repeats=repeats,
                                        min_repeat_s=min_repeat_s)["bytes_per_s"]


def bench(configs_=None, *, steps: Mapping[str, Callable], repeats: int = 7, min_repeat_s: float = 0.05,
          backward: bool = True, naive: bool = False, kernel: bool = True, padding_mode: str = "zeros",
          align_corners: bool = False, copies: int | None = None, pallas_layouts=("points", "channels"),
          implementation: str = "auto") -> dict[str, dict[str, Any]]:
    """Time JAX and PyTorch on each configuration (see the module docstring).

    Returns ``{"<mode>/<size>/<forward|forward+backward>": row}`` with, per call,
    ``jax_ms``, ``torch_ms``, ``ratio``, ``jax_iqr_ms``, ``torch_iqr_ms``,
    ``jax_q1_ms``/``jax_q3_ms``/``torch_q1_ms``/``torch_q3_ms``, ``jax_compile_ms``;
    with ``kernel``: ``jax_kernel_ms``, ``torch_kernel_ms``, ``kernel_ratio`` and
    their IQRs and quartiles, ``copies``, ``inputs_bytes`` (all copies together),
    ``cache_bytes``, ``inputs_exceed_cache`` (the L2 state: False only where
    :data:`_MAX_COPIES` copies still fit), ``calls`` (chained calls per program: ``copies``, or on a
    GPU at least :data:`_MIN_GPU_CALLS`, going round the copies), ``torch_kernel_tool`` ("cuda
    graph" or "loop"); ``shape``; ``implementation`` (the path ``jax_ms`` took);
    ``min_bytes`` (:func:`min_bytes`); with ``kernel`` the memory floor: ``copy_gbs``,
    ``floor_ms``, and ``jax_floor_speed``/``torch_floor_speed`` (the floor divided by each
    kernel time);
    ``xla_ms``/``xla_ratio`` (the XLA path, per call) where a kernel took it;
    ``naive_ms``/``naive_ratio`` for bilinear 2-D forward with ``naive``; ``first_call_ms`` (and with
    ``kernel``, ``kernel_first_call_ms``): each timed function's first call, compilation included;
    ``seconds``: the wall time of the row's measurement, ``per_call`` and ``kernel`` (with the first
    calls, what a run of the benchmark spends where).

    ``copies``: how many copies of the inputs the kernel time's chain goes round (default:
    enough to fill twice the last-level cache, at most :data:`_MAX_COPIES`; see
    :func:`chain_shape`). A smaller number runs faster, and ``inputs_exceed_cache`` then
    says whether the inputs still came from memory.

    ``implementation``: the path the JAX side takes (default ``"auto"``, what a user
    gets; ``"pallas"`` on a CPU runs the kernels in Pallas' interpreter, which checks
    this code, not their speed).

    ``steps``: the functions timed, by name (:data:`STEPS`; a notebook passes those of its paired
    cells: :func:`steps_from`). Every contestant is one of them, or a
    ``functools.partial``, ``jax.jit`` or ``torch.compile`` of one, so the harness notes where each is
    defined (:mod:`sidebyside.run.code`).
    """
    if copies is not None and copies < 1:
        raise ValueError(f"copies must be at least 1, got {copies}")
    import jax
    import jax.numpy as jnp
    import numpy as np
    import torch

    from sidebyside.grid_sample import choose_implementation
    from sidebyside.lab import timing

    device = "cuda" if torch.cuda.is_available() else "cpu"
    gpu = jax.default_backend() == "gpu"
    steps = steps_from(steps)
    jax_step, torch_step = steps["jax_step"], steps["torch_step"]
    cache = cache_bytes(device)
    bandwidth = copy_bandwidth(device, cache, repeats=repeats, min_repeat_s=min_repeat_s) if kernel else None
    results: dict[str, dict[str, Any]] = {}
    todo = list(configs_ or configs())
    shown = progress.bar(todo, desc="grid_sample bench", file=sys.stderr, unit="config")
    for cfg in shown:
        shown.set_postfix_str(cfg["name"], refresh=True)
        mode, shape = cfg["mode"], cfg["shape"]
        x, grid = inputs(shape)
        cot = np.random.default_rng(1).standard_normal((shape[0], shape[1], *grid.shape[1:-1])).astype(np.float32)
        xt, gt, ct = (torch_tensor(a, device) for a in (x, grid, cot))
        xj, gj, cj = (jnp.asarray(a) for a in (x, grid, cot))
        kw = dict(mode=mode, padding_mode=padding_mode, align_corners=align_corners)
        path = choose_implementation(x.shape, grid.shape, x.dtype, implementation)  # what "jax" runs

        bytes_per_call = x.nbytes + grid.nbytes + cot.nbytes
        chained, rounds = chain_shape(bytes_per_call, cache, copies, gpu=device == "cuda")
        for kind, with_grad in (("forward", False), ("forward+backward", True)):
            if with_grad and not backward:
                continue
            # Every contestant is a step itself (partial, jax.jit, torch.compile of it), so that the
            # harness notes the function that defines it (sidebyside.run.code).
            jax_call = steps["jax_step_jit"]
            fns = {"jax": functools.partial(jax_call, xj, gj, cj, **kw, with_grad=with_grad,
                                            implementation=implementation)}
            if with_grad:
                xr, gr = xt.clone().requires_grad_(True), gt.clone().requires_grad_(True)
                torch_args = (xr, gr, ct)
            else:
                torch_args = (xt, gt, ct)
            fns["torch"] = functools.partial(torch_step, *torch_args, **kw, with_grad=with_grad)
            fns["xla"] = functools.partial(jax_call, xj, gj, cj, **kw, with_grad=with_grad, implementation="xla")
            layouts = [layout for layout in pallas_layouts if layout != "points"] if path == "pallas" else []
            for layout in layouts:
                fns[f"pallas_{layout}"] = functools.partial(jax_call, xj, gj, cj, **kw, with_grad=with_grad,
                                                            implementation="pallas", pallas_layout=layout)
            if not with_grad and naive and mode == "bilinear" and len(shape) == 4 and padding_mode == "zeros":
                fns["naive"] = functools.partial(steps["jax_naive_jit"], xj, gj, align_corners=align_corners)
            started = time.perf_counter()
            pair = {side: fns.pop(side) for side in ("jax", "torch")}
            t = timing.compare(pair, repeats=repeats, min_repeat_s=min_repeat_s, pipelined=gpu)
            # the alternatives, against PyTorch in a run of their own (see the module docstring)
            torch._dynamo.reset()  # a fresh compile per configuration, never the recompile limit's eager fallback
            torch_compile = functools.partial(torch_step, *torch_args, **kw, with_grad=with_grad,
                                              sample=steps["grid_sample_compiled"])
            if path == "pallas":
                fns["pallas_points"] = pair["jax"]
            candidates = {"torch/eager": pair["torch"], "torch/compile": torch_compile,
                          **{f"jax/{extra}": fn for extra, fn in fns.items()}}
            ladder, timed = timing.ladder(candidates, repeats=repeats, min_repeat_s=min_repeat_s, pipelined=gpu)
            others = {("torch" if name == "torch/eager" else name.split("/", 1)[1]): t for name, t in timed.items()}
            fns.pop("pallas_points", None)
            row = {"shape": list(shape), "implementation": path, "jax_compile_ms": t["jax"].compile_s * 1e3,
                   "ratio": timing.ratio(t["jax"], t["torch"]),
                   "min_bytes": min_bytes(x.nbytes, grid.nbytes, cot.nbytes, mode, with_grad)}
            for side in ("jax", "torch"):
                row.update({f"{side}_ms": t[side].median_s * 1e3, f"{side}_iqr_ms": t[side].iqr_s * 1e3,
                            f"{side}_q1_ms": t[side].q1_s * 1e3, f"{side}_q3_ms": t[side].q3_s * 1e3,
                            f"{side}_processes_ms": [r * 1e3 for r in t[side].processes_s]})
            row.update(floor=t["jax"].floor, busy=t["jax"].busy)
            # the first call of each (compilation included): where a configuration's time goes
            row["first_call_ms"] = {name: timed.first_s * 1e3 for name, timed in t.items()}
            for extra in fns:
                if extra not in others:  # failed: its error is in the ladder
                    continue
                row["first_call_ms"][extra] = others[extra].first_s * 1e3
                row[f"{extra}_ms"] = others[extra].median_s * 1e3
                if "torch" in others:
                    row[f"{extra}_ratio"] = timing.ratio(others[extra], others["torch"])
            row["ladder"] = {name: {**entry, **_ORIGIN.get(name.split("/", 1)[1].split("_")[0], {})}
                             for name, entry in ladder.items()}
            row["seconds"] = {"per_call": time.perf_counter() - started}
            if kernel:
                started = time.perf_counter()
                row.update(kernel_times(functools.partial(jax_step, **kw), functools.partial(torch_step, **kw), x,
                                         grid, cot, chained, with_grad, device, repeats, min_repeat_s, layouts,
                                         rounds=rounds, steps=steps))
                row["cache_bytes"] = cache
                row["inputs_exceed_cache"] = row["inputs_bytes"] > cache
                row["copy_gbs"] = bandwidth / 1e9
                row["floor_ms"] = row["min_bytes"] / bandwidth * 1e3
                for side in ("jax", "torch"):
                    row[f"{side}_floor_speed"] = row["floor_ms"] / row[f"{side}_kernel_ms"]
                row["seconds"]["kernel"] = time.perf_counter() - started
            results[f"{cfg['name']}/{kind}"] = row
    return results


#: What does the work in each ladder rung, and where it comes from (see :func:`sidebyside.lab.framing.contestant`).
_ORIGIN = {
    "eager": {"implementation": "ATen's grid_sampler kernel", "origin": "framework"},
    "compile": {"implementation": "F.grid_sample compiled by Inductor", "origin": "framework"},
    "xla": {"implementation": "grid_sample in jnp, compiled by XLA", "origin": "built_with"},
    "pallas": {"implementation": "grid_sample as Pallas kernels", "origin": "built_with"},
    "naive": {"implementation": "a naive jnp gather, compiled by XLA", "origin": "built_with"},
}


def run(sizes: dict, modes=("nearest", "bilinear", "bicubic"), *, repeats: int = 7, min_repeat_s: float = 0.05,
        threads: int | None = None, naive: bool = True, kernel: bool = True, copies: int | None = None,
        pallas_layouts=("points", "channels"), timeout_s: float = 3600,
        steps: Mapping[str, Callable] | None = None) -> dict:
    """Run the benchmark in a fresh process (``python -m sidebyside.posts.bench
    grid_sample``) on ``sizes`` (``{name: shape}``) and return its JSON:
    ``{"threads", "device_kind", "command", "results": {key: row}}`` (rows as
    :func:`bench`; ``copies`` as there). The child's progress (one step per configuration) and
    warnings are passed on to ``sys.stderr`` as they come, so that a long run shows how far it got,
    also in a notebook saved while it runs. Raises ``RuntimeError`` with the end of the child's error
    output if it fails or outlasts ``timeout_s``.

    ``steps``: the functions to time (:data:`STEPS`; default: the child runs the paired cells ``step``
    and ``chain`` of ``notebooks/03_grid_sample.py``, as the command does without ``--steps``), sent to the
    child with cloudpickle (:func:`sidebyside.lab.pool.pack`); the JSON's ``code`` lists the
    contestants the child timed (:func:`sidebyside.run.code.record`), which :func:`run_each` notes in
    this process."""
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "bench-grid-sample.json")
        command = [sys.executable, *_arguments(sizes, modes, repeats=repeats, min_repeat_s=min_repeat_s,
                                               threads=threads, naive=naive, kernel=kernel, copies=copies,
                                               pallas_layouts=pallas_layouts, json_path=path)]
        if steps is not None:
            from sidebyside.lab import pool

            steps_path = os.path.join(tmp, "steps.pickle")
            with open(steps_path, "wb") as f:
                f.write(pool.pack(dict(steps)))
            command += ["--steps", steps_path]
        returncode, tail = _run_passing_stderr_on(command, timeout_s)
        if returncode != 0:
            raise RuntimeError(f"benchmark failed ({' '.join(command[1:])}; exit: {returncode}):\n{tail}")
        with open(path) as f:
            out = json.load(f)
    out["command"] = " ".join(["python", *command[1:]]).replace(path, "<json>")
    return out


def _arguments(sizes: dict, modes, *, repeats: int, min_repeat_s: float, threads: int | None, naive: bool,
               kernel: bool, copies: int | None, pallas_layouts, json_path: str = "<json>") -> list[str]:
    """The command line of ``python -m sidebyside.posts.bench grid_sample`` for these settings."""
    args = ["-m", "sidebyside.posts.bench", "grid_sample", "--repeats", str(repeats), "--min-repeat-s", str(min_repeat_s),
            "--json", json_path, "--modes", *modes]
    args += [arg for name, shape in sizes.items() for arg in ("--shape", f"{name}=" + ",".join(map(str, shape)))]
    if naive:
        args.append("--naive")
    if not kernel:
        args.append("--no-kernel")
    if copies is not None:
        args += ["--copies", str(copies)]
    args += ["--pallas-layouts", *pallas_layouts]
    if threads is not None:
        args += ["--threads", str(threads)]
    return args


def run_each(sizes: dict, modes=("nearest", "bilinear", "bicubic"), *, part: Callable[..., Any] | None = None,
             **kwargs: Any) -> dict:
    """:func:`run`, for a run in parts: one configuration at a time, each in a fresh process,
    merged into the record :func:`run` returns (``command``: the one command that measures them
    all). ``part(name, fn, *args, **kwargs)`` runs each configuration: a
    :class:`sidebyside.run.checkpoints.Checkpoints` saves each as it finishes (part ``bench/<config>``),
    reads back those an earlier run measured and stops before one that would overrun its budget.
    Without ``part``: :func:`run`, in one process. ``steps`` (a keyword argument): as :func:`run` takes
    them; each contestant the child timed is then noted here (:func:`sidebyside.run.code.note_timed`)
    as the step it came from."""
    steps = kwargs.pop("steps", None)
    if part is None:
        out = run(sizes, modes, **kwargs, **({"steps": steps} if steps is not None else {}))
        _note_timed(out, steps)
        return out
    # the steps are not part of a part's key (their repr changes from one process to the next)
    measure = functools.partial(run, steps=steps) if steps is not None else run
    out = {"results": {}}
    for cfg in progress.bar(configs(tuple(modes), sizes), desc="grid_sample bench, per configuration"):
        size = cfg["name"].split("/", 1)[1]
        one = part(f"bench/{cfg['name']}", measure, {size: tuple(cfg["shape"])}, (cfg["mode"],), **kwargs)
        _note_timed(one, steps)
        out["results"].update(one["results"])
        out.update(threads=one["threads"], device_kind=one["device_kind"])
    settings = {name: kwargs.get(name, p.default) for name, p in inspect.signature(run).parameters.items()
                if p.kind is p.KEYWORD_ONLY and name not in ("timeout_s", "steps")}
    out["command"] = " ".join(["python", *_arguments(sizes, tuple(modes), **settings)])
    return out


def _note_timed(out: Mapping[str, Any], steps: Mapping[str, Callable] | None) -> None:
    """Note in this process each contestant the child timed (``out["code"]``) as the step of ``steps`` it
    was (same function and line: a notebook's function is named by its cell only here, where the
    notebook's cells are known). The memory floor's copy is the floor's yardstick, not a contestant.
    Raises RuntimeError for a contestant that is none of the steps."""
    if steps is None:
        return
    from sidebyside.run import code

    sent = {(o["function"], o["line"]): fn for fn in steps.values() for o in [code.origin(fn)]}
    for entry in out.get("code") or []:
        fn = sent.get((entry["function"], entry["line"]))
        if fn is not None:
            code.note_timed(entry["contestant"], fn)
        elif entry["contestant"] != "copy":
            raise RuntimeError(f"the benchmark timed {entry['contestant']!r} as {entry['function']!r} "
                               f"({entry['where']}, line {entry['line']}), which is none of the steps it was given")


def _run_passing_stderr_on(command: list[str], timeout_s: float, keep: int = 3000) -> tuple[int | str, str]:
    """Run ``command`` with its stdout discarded and its stderr written on to ours as it comes;
    returns its exit code (or a sentence saying it was stopped at ``timeout_s``) and the last
    ``keep`` characters of its stderr."""
    import codecs
    import threading

    tail = [""]
    child = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    decode = codecs.getincrementaldecoder("utf-8")(errors="replace")

    def pump():
        for raw in iter(lambda: child.stderr.read1(4096), b""):
            text = decode.decode(raw)
            sys.stderr.write(text)
            sys.stderr.flush()
            tail[0] = (tail[0] + text)[-keep:]

    pumping = threading.Thread(target=pump, daemon=True)
    pumping.start()
    try:
        returncode: int | str = child.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        child.kill()
        child.wait()
        returncode = f"stopped after timeout_s={timeout_s:g} s"
    pumping.join(timeout=10)
    return returncode, tail[0]


def cli(args, threads: int, steps: Mapping[str, Callable]) -> int:
    """``python -m sidebyside.posts.bench grid_sample``: the table, and ``--json``, timing ``steps``
    (:data:`STEPS`; the command reads them: :mod:`sidebyside.posts.bench`)."""
    import pandas as pd
    import torch

    from sidebyside.run import code

    sizes = dict(SIZES)
    if args.sizes:
        unknown = sorted(set(args.sizes) - set(SIZES))
        if unknown:
            raise SystemExit(f"--sizes: unknown {unknown}; choose from {sorted(SIZES)}")
        sizes = {name: SIZES[name] for name in args.sizes}
    if args.shape:
        sizes = {} if not args.sizes else sizes
        for spec in args.shape:
            name, _, dims = spec.partition("=")
            shape = tuple(int(d) for d in dims.split(","))
            if len(shape) not in (4, 5) or not name:
                raise SystemExit(f"--shape wants NAME=N,C,H,W or NAME=N,C,D,H,W, got {spec!r}")
            sizes[name] = shape
    gpu = torch.cuda.is_available()
    if gpu and not (args.sizes or args.shape):
        sizes["2d_large_gpu"] = (32, 3, 256, 256)  # the GPU goal is stated at N = 32, C = 3, 256 x 256
    results = bench(configs(tuple(args.modes), sizes), repeats=args.repeats, min_repeat_s=args.min_repeat_s,
                    naive=args.naive, kernel=not args.no_kernel, copies=args.copies,
                    pallas_layouts=tuple(args.pallas_layouts), steps=steps)
    table = speed_table(results)
    targets = goals_table(results, "gpu" if gpu else "cpu")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"threads": threads, "device_kind": "gpu" if gpu else "cpu", "results": results,
                       "code": code.record()["timed"]}, f, indent=1)
    with pd.option_context("display.width", 200, "display.max_rows", 200, "display.float_format", "{:.3g}".format):
        print(f"grid_sample, float32, {'GPU' if gpu else f'CPU, {threads} thread(s) for both'}; medians of "
              f"{args.repeats} interleaved repeats; per call: a Python loop of calls (dispatch included); kernel: "
              "calls chained in one program on inputs larger than the last-level cache"
              + "".join(f"; memory floor: each array moved once at the copy speed measured here, "
                        f"{row['copy_gbs']:,.0f} GB/s" for row in list(results.values())[:1] if "copy_gbs" in row))
        print(table.to_string())
        print(targets.to_string(index=False) if len(targets) else "no goals are set for these configurations")
    print(goals_summary(targets))
    return 0


