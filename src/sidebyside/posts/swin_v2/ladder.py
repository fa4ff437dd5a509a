"""The speed ladder of the Swin post: each framework's tools timed on the same batches, and the first step."""


from __future__ import annotations

import dataclasses
import functools
import math
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from sidebyside.lab import timing as sbs_timing
from sidebyside.posts.swin_v2.config import SwinConfig

__all__ = ['TORCH_TOOLS', 'JAX_TOOLS', 'TOOL_LABELS', 'GPU_ONLY', 'WHOLE_LOOP', 'PRECISIONS', 'Rung', 'by_structure',
           'random_batches', 'jax_peak_bytes', 'speed_ladder', 'first_step']

# ============================================================================= the speed ladder
# Kept apart from the model: this section builds, for each framework, one callable per tool
# ("rung") and times them through sidebyside.lab.timing.compare; verdicts come from
# sidebyside.lab.verdict. The rungs themselves come from rung builders that the caller passes (the
# notebook's paired cells write them; :func:`speed_ladder` says what a builder takes and returns);
# `_torch_rung`/`_jax_rung` wrap a builder's rung with its memory count and, for JAX, its
# ahead-of-time compilation.

TORCH_TOOLS = ("eager", "compile", "cuda_graph", "cuda_graph_steps")
JAX_TOOLS = ("jit", "jit_scan")
TOOL_LABELS = {
    "torch/eager": "PyTorch, eager",
    "torch/compile": "PyTorch, torch.compile",
    "torch/cuda_graph": "PyTorch, CUDA graph",
    "torch/cuda_graph_steps": "PyTorch, CUDA graph of K steps",
    "jax/jit": "JAX, jit step",
    "jax/jit_scan": "JAX, jit + lax.scan",
}
GPU_ONLY = ("cuda_graph", "cuda_graph_steps")  # rungs that need a CUDA device (timing.NotApplicable.cuda_graphs)
#: The rungs that run a call's K steps as ONE program: JAX's jit of a ``lax.scan`` over the steps and
#: PyTorch's CUDA graph of the K steps (a GPU only). Every other rung dispatches one step at a time
#: from Python. Best against best races like with like (:func:`by_structure`); asking for one of these
#: times the other too (:func:`speed_ladder`).
WHOLE_LOOP = ("torch/cuda_graph_steps", "jax/jit_scan")
PRECISIONS = ("float32", "bfloat16")


@dataclasses.dataclass
class Rung:
    """One tool, ready to time: ``run()`` performs ``steps`` steps and returns the last result."""

    name: str
    run: Callable[[], Any] | None = None
    compile_s: float | None = None          # JAX: ahead-of-time trace + compile; a K-step CUDA graph: its capture
    peak_memory_bytes: Callable[[], int | None] | None = None
    error: str | None = None
    not_applicable: str | None = None       # why the tool cannot run on this machine (not a failure)


def by_structure(entries: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """A ladder's rungs by loop structure: ``{"per_step": ..., "whole_loop": ...}``, the rungs that
    dispatch one step at a time and those that run a call's steps as one program
    (:data:`WHOLE_LOOP`), each in the ladder's order."""
    return {"per_step": {n: e for n, e in entries.items() if n not in WHOLE_LOOP},
            "whole_loop": {n: e for n, e in entries.items() if n in WHOLE_LOOP}}


def random_batches(config: SwinConfig, batch_size: int, steps: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """``steps`` batches of random NCHW images and labels. Speed does not depend on pixel values
    (no data-dependent control flow in the network), so random data measures the same work as
    real images without a data set on disk."""
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((steps, batch_size, config.in_chans, config.img_size, config.img_size), np.float32)
    y = rng.integers(0, config.num_classes, (steps, batch_size)).astype(np.int64)
    return X, y


def _torch_state_bytes(model, optimizer, tensors) -> int:
    total = sum(t.numel() * t.element_size() for t in list(model.parameters()) + list(model.buffers()))
    if optimizer is not None:
        for state in optimizer.state.values():
            total += sum(v.numel() * v.element_size() for v in state.values() if hasattr(v, "numel"))
    return total + sum(t.numel() * t.element_size() for t in tensors)


def _torch_rung(config: SwinConfig, tool: str, phase: str, X: np.ndarray, y: np.ndarray, precision: str,
                seed: int, build: Callable[..., Any]) -> Rung:
    """A PyTorch tool's :class:`Rung` from the rung builder ``build`` (see :func:`speed_ladder`),
    with its peak-memory count; a GPU-only tool off a GPU is not applicable, and not built. The
    CUDA graph of K steps is captured in its build, whose time is its ``compile_s`` (its first call
    is already a replay)."""
    import torch

    on_cuda = torch.cuda.is_available()
    if tool in GPU_ONLY and not on_cuda:
        return Rung(f"torch/{tool}", not_applicable=str(sbs_timing.NotApplicable.cuda_graphs("cpu")))
    start = time.perf_counter()
    run, (model, optimizer, tensors) = build(config, tool, phase, X, y, precision, seed)
    captured_s = time.perf_counter() - start if tool == "cuda_graph_steps" else None

    def peak():
        if not on_cuda:
            return None
        torch.cuda.synchronize()
        others = torch.cuda.memory_allocated() - _torch_state_bytes(model, optimizer, tensors)
        torch.cuda.reset_peak_memory_stats()
        run()
        torch.cuda.synchronize()
        return int(torch.cuda.max_memory_allocated() - others)

    return Rung(f"torch/{tool}", run=run, compile_s=captured_s, peak_memory_bytes=peak)


def jax_peak_bytes(compiled) -> int | None:
    """Peak device memory of one compiled executable, from XLA's own accounting:
    arguments + outputs - donated (aliased) buffers + temporaries. (The process's footprint
    mixes all programs, and by default XLA's allocator reserves most of the GPU up front.)"""
    try:
        m = compiled.memory_analysis()
    except Exception:  # noqa: BLE001  (not every backend reports it)
        return None
    if m is None:
        return None
    return int(m.argument_size_in_bytes + m.output_size_in_bytes - m.alias_size_in_bytes + m.temp_size_in_bytes)


def _jax_rung(config: SwinConfig, tool: str, phase: str, X: np.ndarray, y: np.ndarray, precision: str,
              seed: int, build: Callable[..., Any]) -> Rung:
    """A JAX tool's :class:`Rung` from the rung builder ``build`` (see :func:`speed_ladder`): its
    function compiled ahead of time (``compile_s``: trace and compile), then handed to its ``run``."""
    fn, args, run = build(config, tool, phase, X, y, precision, seed)
    start = time.perf_counter()
    compiled = fn.lower(*args).compile()
    compile_s = time.perf_counter() - start
    return Rung(f"jax/{tool}", run=functools.partial(run, compiled), compile_s=compile_s,
                peak_memory_bytes=lambda: jax_peak_bytes(compiled))


def _rungs(config: SwinConfig, torch_tools: Sequence[str], jax_tools: Sequence[str], phase: str, precision: str,
           batch_size: int, steps: int, seed: int, torch_rung: Callable[..., Any],
           jax_rung: Callable[..., Any]) -> dict[str, Rung]:
    """Every tool's rung on the same random batches, from the rung builders ``torch_rung`` and
    ``jax_rung``; a tool that fails to build keeps its error."""
    X, y = random_batches(config, batch_size, steps, seed)
    rungs: dict[str, Rung] = {}
    for framework, tools, wrap, build in (("torch", torch_tools, _torch_rung, torch_rung),
                                          ("jax", jax_tools, _jax_rung, jax_rung)):
        for tool in tools:
            name = f"{framework}/{tool}"
            try:
                rungs[name] = wrap(config, tool, phase, X, y, precision, seed, build)
            except Exception as error:  # noqa: BLE001  (a failing tool is a finding, kept with its error)
                rungs[name] = Rung(name, error=sbs_timing.one_line(error))
    return rungs


def _working(config: SwinConfig, names: Sequence[str], phase: str, precision: str, batch_size: int, steps: int,
             seed: int, torch_rung: Callable[..., Any], jax_rung: Callable[..., Any]) -> dict[str, Any]:
    """The builder a timing worker process calls: the rungs ``names`` built again, as callables."""
    tools = {fw: [n.split("/", 1)[1] for n in names if n.startswith(fw + "/")] for fw in ("torch", "jax")}
    rungs = _rungs(config, tools["torch"], tools["jax"], phase, precision, batch_size, steps, seed, torch_rung,
                   jax_rung)
    return {name: rungs[name].run if rungs[name].run is not None else RuntimeError(rungs[name].error)
            for name in names}


def speed_ladder(config: SwinConfig, *, batch_size: int, phase: str, precision: str = "float32",
                 torch_tools: Sequence[str] = TORCH_TOOLS, jax_tools: Sequence[str] = JAX_TOOLS, steps: int = 5,
                 repeats: int = 5, min_repeat_s: float = 0.0, seed: int = 0, torch_rung: Callable[..., Any],
                 jax_rung: Callable[..., Any]) -> dict[str, Any]:
    """Time every tool of both frameworks on the same work: ``steps`` training (or evaluation)
    steps of ``batch_size`` random images per call, interleaved in one ``timing.compare`` run.

    ``torch_rung`` and ``jax_rung`` are the rung builders (the post's notebook writes them in its
    paired cells); both take ``(config, tool, phase, X, y, precision, seed)``, build a fresh network
    with ``seed`` and run one step per batch of ``X`` (NCHW), ``y``. ``torch_rung`` returns
    ``(run, held)``: ``run()`` performs one call's steps and returns the last result; ``held`` is
    ``(model, optimizer or None, tensors)``, what the rung keeps on the device, which the memory
    count leaves out of other rungs' use (a GPU-only tool never reaches it off a GPU). ``jax_rung``
    returns ``(fn, args, run)``: the jitted function, the arguments it is compiled for ahead of time
    (``fn.lower(*args).compile()``, timed apart), and ``run(step)``, which performs one call's
    steps with the compiled ``step`` and returns the last result. Both must pickle with cloudpickle
    for the timing's worker processes, as functions defined in a notebook do.

    A whole-loop tool brings its counterpart (:data:`WHOLE_LOOP`): with ``"jit_scan"`` in
    ``jax_tools`` PyTorch's ``"cuda_graph_steps"`` is timed too (not applicable off a GPU), and the
    other way round, so that the whole-loop race has both sides wherever both exist.

    Returns ``{"ladder": {"<framework>/<tool>": entry}, "best": ..., "best_whole_loop": ..., ...}``:
    ``best`` is ``ladders.best`` over the rungs that dispatch one step at a time, ``best_whole_loop``
    over the whole-loop rungs (:func:`by_structure`); an entry is ``ladders.ladder_entry`` per step (``median_s``, ``iqr_s``, ``q1_s``, ``q3_s``,
    ``compile_s``, ``first_s``, ``error``) plus ``images_per_s``, ``peak_memory_bytes``. A tool that
    fails (or cannot run on this device) keeps its row with the error.
    """
    from sidebyside.lab import ladders as sbs_ladders

    if phase not in ("train", "eval"):
        raise ValueError(f"phase must be 'train' or 'eval', got {phase!r}")
    if precision not in PRECISIONS:
        raise ValueError(f"precision must be one of {PRECISIONS}, got {precision!r}")
    for tools, known in ((torch_tools, TORCH_TOOLS), (jax_tools, JAX_TOOLS)):
        unknown = sorted(set(tools) - set(known))
        if unknown:
            raise ValueError(f"unknown tools {unknown}; choose from {known}")
    if "jit_scan" in jax_tools and "cuda_graph_steps" not in torch_tools:
        torch_tools = (*torch_tools, "cuda_graph_steps")
    if "cuda_graph_steps" in torch_tools and "jit_scan" not in jax_tools:
        jax_tools = (*jax_tools, "jit_scan")
    if set(torch_tools) & {"compile", "cuda_graph"}:
        import torch

        torch._dynamo.reset()  # each setting compiles cold, from nothing an earlier setting left
    rungs = _rungs(config, torch_tools, jax_tools, phase, precision, batch_size, steps, seed, torch_rung, jax_rung)
    first: dict[str, float] = {}
    realloc: dict[str, float] = {}
    for name, rung in rungs.items():
        if rung.run is None:
            continue
        try:
            # The first call alone: torch.compile compiles here; JAX compiled above, ahead of time.
            start = time.perf_counter()
            sbs_timing.block(rung.run())
            first[name] = time.perf_counter() - start
            if name.startswith("torch/") and _on_gpu():
                # Empty PyTorch's caching allocator and call again: what this costs beyond a
                # steady call is the allocation that the first call paid too.
                import torch

                torch.cuda.synchronize()
                torch.cuda.empty_cache()
                start = time.perf_counter()
                sbs_timing.block(rung.run())
                realloc[name] = time.perf_counter() - start
        except Exception as error:  # noqa: BLE001  (a failing tool is a finding, kept with its error)
            rungs[name] = Rung(name, error=sbs_timing.one_line(error))
    working = {name: r.run for name, r in rungs.items() if r.run is not None}
    builder = functools.partial(_working, config, tuple(working), phase, precision, batch_size, steps, seed,
                                torch_rung, jax_rung)
    timings = sbs_timing.compare(builder, here=working, repeats=repeats, warmup=1, min_repeat_s=min_repeat_s,
                                 pipelined=_on_gpu()) if working else {}
    entries: dict[str, dict[str, Any]] = {}
    for name, rung in rungs.items():
        if rung.error is not None or rung.not_applicable is not None:
            entry = (sbs_ladders.ladder_entry(error=rung.error) if rung.error is not None else
                     sbs_ladders.ladder_entry(not_applicable=rung.not_applicable))
            entries[name] = {**entry, "images_per_s": None, "peak_memory_bytes": None}
            continue
        t = timings[name]
        # The first call = compilation (torch.compile inside it; JAX's measured apart, ahead of time)
        # + allocation + `steps` steady steps. PyTorch on CUDA: allocation from the re-allocation call.
        if rung.compile_s is not None:
            compile_s, allocation_s = rung.compile_s, max(first[name] - t.median_s, 0.0)
        elif name in realloc:
            compile_s, allocation_s = max(first[name] - realloc[name], 0.0), max(realloc[name] - t.median_s, 0.0)
        else:
            compile_s, allocation_s = max(first[name] - t.median_s, 0.0), None
        entry = sbs_ladders.scaled({name: sbs_ladders.ladder_entry(t)}, 1 / steps)[name]
        entry["first_s"] = first[name]  # the whole first call (all its steps)
        entry["compile_s"] = compile_s
        entry["allocation_s"] = allocation_s
        entry["images_per_s"] = batch_size / entry["median_s"]
        try:
            entry["peak_memory_bytes"] = rung.peak_memory_bytes() if rung.peak_memory_bytes else None
        except Exception as error:  # noqa: BLE001
            entry["peak_memory_bytes"], entry["memory_error"] = None, sbs_timing.one_line(error)
        entries[name] = entry
    return {"phase": phase, "batch_size": batch_size, "precision": precision, "steps_per_call": steps,
            "ladder": entries, "best": sbs_ladders.best(by_structure(entries)["per_step"]),
            "best_whole_loop": sbs_ladders.best(by_structure(entries)["whole_loop"])}


def _on_gpu() -> bool:
    try:
        import torch

        return torch.cuda.is_available()
    except ImportError:
        return False



def first_step(entry: dict[str, Any], *, batch_size: int, epoch_images: int = 9469) -> dict[str, Any]:
    """The seed's first-epoch observation, from one training ladder entry.

    The seed saw the first epoch, above all its first step, take much longer on both sides and
    blamed memory allocation. The first step splits into ``compile_s`` (JAX: trace and compile,
    timed ahead of time; PyTorch: what the first call costs beyond a call that re-allocates,
    i.e. ``torch.compile`` and the one-off set-up of the device's libraries; PyTorch's CUDA graph of K
    steps: its warm-up and capture, in its build), ``allocation_s``
    (PyTorch on CUDA: a call after ``torch.cuda.empty_cache()`` beyond a steady call; JAX: the
    compiled program's first run beyond a steady one, which holds its buffers' allocation when
    JAX does not preallocate the GPU; None where it cannot be separated) and one
    steady step. An epoch of ``epoch_images`` images (Imagenette's training set, the seed's data)
    is then ``first_step_s + (steps - 1) * steady_s``.
    """
    if entry.get("error"):
        return {"error": entry["error"]}
    if entry.get("median_s") is None:  # a tool that does not apply here
        return {"error": f"not applicable: {entry.get('not_applicable')}"}
    steady = entry["median_s"]
    steps = math.ceil(epoch_images / batch_size)
    first = (entry["compile_s"] or 0.0) + (entry["allocation_s"] or 0.0) + steady
    return {"compile_s": entry["compile_s"], "allocation_s": entry["allocation_s"], "steady_s": steady,
            "first_step_s": first, "steps_per_epoch": steps, "epoch_images": epoch_images,
            "first_epoch_s": first + (steps - 1) * steady, "steady_epoch_s": steps * steady,
            "first_epoch_excess": (first - steady) / (steps * steady), "error": None}
