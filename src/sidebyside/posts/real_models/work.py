"""The work a user does with each model, as each framework's rungs, and what the work costs.

Workloads: ``train`` (one AdamW step on cross-entropy; GPT-2's next-token loss over ``seq_len``
tokens), ``infer`` (a forward pass without gradients: latency at batch 1, throughput at a larger
batch) and, for GPT-2, ``generate`` (greedy generation of ``new_tokens`` after a ``prompt_len``
prompt, with the key-value cache).

:func:`build` returns one workload's ladder for :func:`sidebyside.lab.timing.ladder`:
``"torch/<tool>"`` and ``"jax/<tool>"`` mapped to zero-argument callables on inputs already on the
device, to a :class:`~sidebyside.lab.timing.NotApplicable` (a GPU-only tool on a CPU), or to the
exception a tool raised while it was built (a finding, kept). It is called again in every timing
process (a builder travels by value, with the notebook's rung functions, so nothing compiled has to
pickle). The rungs themselves are the notebook's paired cells (``torch_rung``, ``jax_rung``: the
code shown is the code timed); this module builds the models with the same weights, puts the
inputs on the device and says which tools do not apply here. PyTorch's tools: ``eager``;
``compile`` (``torch.compile``, static shapes); ``max-autotune`` (``mode="max-autotune"``, GPU
only); ``cuda-graph`` (inference: the eager forward captured in a CUDA graph; generation:
``mode="reduce-overhead"``; GPU only); ``aoti`` (inference: ``torch.export`` then AOTInductor,
float32). JAX's: ``jit``. bfloat16: one policy on both sides, ``torch.autocast``'s: float32
parameters, matrix products, convolutions and attention in bfloat16, norms' statistics, the softmax
and the loss in float32 (PyTorch: ``torch.autocast``; JAX: the Flax model built with
``dtype=jnp.bfloat16``, Flax's compute dtype, on the same layers; see :mod:`.vision` and :mod:`.gpt2`).

Costs: :func:`flops` counts one call's FLOPs on both sides (``FlopCounterMode`` on the eager rung,
with attention's formula given for every ``scaled_dot_product_attention`` kernel: on the CPU the
counter has none and counts the kernel as 0; XLA's ``cost_analysis`` of the compiled program);
:func:`attention_flops` is attention's analytic count; :func:`peak_memory` runs one rung in a fresh
process and reports its peak (GPU: each framework's allocator statistics; CPU: the process's peak
resident memory, ``VmHWM``, with the resident memory after the imports beside it).
:data:`BUILD_S` keeps, in this process, the seconds each rung's build took (AOTInductor compiles
there, before its first call).
"""

from __future__ import annotations

import ctypes
import gc
import logging
import os
import time
from collections.abc import Callable, Sequence
from typing import Any

__all__ = ["TORCH_TOOLS", "JAX_TOOLS", "GPU_ONLY", "TOOL_LABELS", "BUILD_S", "build", "flops", "attention_flops",
           "peak_memory", "bf16_support"]

# Two torch log lines that say nothing about a run (and a log line is refused in a post): Dynamo leaving out
# the profiler span that Optimizer.step opens inside a compiled step, and AOTInductor looking for a CUDA
# runtime on a machine without one. This module is imported wherever the rungs are built.
for _name in ("torch._dynamo.variables.ctx_manager", "torch.utils.cpp_extension"):
    logging.getLogger(_name).setLevel(logging.ERROR)

TORCH_TOOLS = ("eager", "compile", "max-autotune", "cuda-graph", "aoti")
JAX_TOOLS = ("jit",)
GPU_ONLY = ("max-autotune", "cuda-graph")
TOOL_LABELS = {"torch/eager": "PyTorch eager", "torch/compile": "torch.compile",
               "torch/max-autotune": 'torch.compile(mode="max-autotune")', "torch/cuda-graph": "CUDA graph",
               "torch/aoti": "torch.export + AOTInductor", "jax/jit": "jax.jit"}
#: Seconds each rung's build took in this process, by (model, workload, batch, precision, rung).
BUILD_S: dict[tuple, float] = {}


def bf16_support() -> tuple[bool, str]:
    """Whether this machine computes bfloat16 natively, and why not (a GPU of compute
    capability 8 or more; on a CPU, the ``avx512_bf16`` or ``amx_bf16`` instructions)."""
    import torch

    if torch.cuda.is_available():
        major = torch.cuda.get_device_capability()[0]
        return major >= 8, f"compute capability {major}.x (bfloat16 tensor cores need 8.0 or later)"
    flags = ""
    try:
        flags = next(line for line in open("/proc/cpuinfo") if line.startswith("flags"))
    except (OSError, StopIteration):
        pass
    native = "avx512_bf16" in flags or "amx_bf16" in flags
    return native, ("this CPU has bfloat16 instructions" if native else
                    "this CPU has no bfloat16 instructions (no avx512_bf16 or amx_bf16): bfloat16 would be "
                    "emulated in float32 arithmetic plus conversions, timing the emulation, not the format")


def _not_applicable(workload: str, tool: str, precision: str, device_type: str):
    """Why PyTorch's ``tool`` does not run ``workload`` here (a :class:`NotApplicable`), or None."""
    from sidebyside.lab import timing

    if tool in GPU_ONLY and device_type != "cuda":
        return timing.NotApplicable.cuda_graphs("cpu") if tool == "cuda-graph" else timing.NotApplicable(
            'mode="max-autotune" tunes GPU kernels; this run is on the CPU')
    if tool == "aoti" and workload != "infer":
        return timing.NotApplicable("AOTInductor is a serving tool: timed on inference only")
    if tool == "aoti" and precision != "float32":
        return timing.NotApplicable("the AOTInductor rung is exported in float32 only")
    if tool == "cuda-graph" and workload == "train":
        return timing.NotApplicable("CUDA graphs are timed on inference only")
    return None


def _torch_side(spec, workload: str, tool: str, x, y, precision: str, seed: int, opts: dict, rung: Callable):
    """The PyTorch model and inputs on the device, handed to the notebook's ``rung``."""
    import torch

    from sidebyside.posts.real_models.config import torch_model

    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    reason = _not_applicable(workload, tool, precision, device.type)
    if reason is not None:
        return reason
    model = torch_model(spec, seed).to(device)
    x, y = torch.as_tensor(x, device=device), torch.as_tensor(y, device=device)
    if workload == "generate":
        x = x[:, :opts["prompt_len"]]
    amp = dict(device_type=device.type, dtype=torch.bfloat16, enabled=precision == "bfloat16")
    return rung(model, workload, tool, x, y, amp, opts["new_tokens"])


def _jax_side(spec, workload: str, tool: str, x, y, precision: str, seed: int, opts: dict, rung: Callable,
              flax_init: bool = True):
    """The Flax model (PyTorch's weights copied in; ``flax_init``: as :func:`.port.pair`'s ``initialise``)
    and inputs on the device, handed to ``rung``."""
    import gc

    import jax.numpy as jnp

    from sidebyside.posts.real_models.port import pair

    torch_side, model = pair(spec, seed, dtype=jnp.bfloat16 if precision == "bfloat16" else None,
                             initialise=flax_init)
    del torch_side
    gc.collect()
    x = jnp.asarray(x.astype("int32")) if spec.kind == "gpt2" else jnp.asarray(x.transpose(0, 2, 3, 1))
    y = jnp.asarray(y.astype("int32"))
    if workload == "generate":
        x = x[:, :opts["prompt_len"]]
    return rung(model, workload, x, y, opts["new_tokens"])


def _give_back_memory() -> None:
    """Return to the system the heap this process freed since (glibc's ``malloc_trim``; nothing elsewhere), before a
    ladder builds. The notebook's kernel times every ladder first and otherwise keeps the pages of the ladders before:
    on the cpu profile it held 12.3 GB at GPT-2's training ladder while a worker built its own, and a 23 GB machine
    ran out. (The timing workers do the same after each job.)"""
    gc.collect()
    try:
        ctypes.CDLL(None).malloc_trim(0)
    except (OSError, AttributeError):  # not glibc
        pass


def build(spec, workload: str, batch: int, precision: str = "float32", torch_tools: Sequence[str] = ("eager",),
          jax_tools: Sequence[str] = ("jit",), seed: int = 0, prompt_len: int = 8, new_tokens: int = 8, *,
          torch_rung: Callable, jax_rung: Callable, flax_init: bool = True) -> dict:
    """One workload's ladder (see the module): ``"<framework>/<tool>"`` -> callable, NotApplicable or
    the exception its build raised. ``batch``: images, or sequences (GPT-2).

    The rungs are the notebook's paired cells: ``torch_rung(model, workload, tool, x, y, amp,
    new_tokens)`` and ``jax_rung(model, workload, x, y, new_tokens)`` return the zero-argument
    callable that does the work; this builds the models (the same weights on both sides; in
    bfloat16 the Flax model with ``dtype=jnp.bfloat16``, Flax's compute dtype) and puts the inputs
    on the device (``x`` the prompt for generation, images NHWC for Flax), with ``amp`` the keyword
    arguments of ``torch.autocast``. ``flax_init``: whether the Flax model draws its own weights
    before PyTorch's are copied in (:func:`.port.pair`'s ``initialise``)."""
    from sidebyside.posts.real_models.port import inputs

    if workload not in ("train", "infer", "generate"):
        raise ValueError(f"workload is train, infer or generate, got {workload!r}")
    _give_back_memory()
    x, y = inputs(spec, batch, seed)
    opts = {"prompt_len": prompt_len, "new_tokens": new_tokens}
    out: dict[str, Any] = {}
    for framework, tools in (("torch", torch_tools), ("jax", jax_tools)):
        for tool in tools:
            name = f"{framework}/{tool}"
            start = time.perf_counter()
            try:
                if framework == "torch":
                    out[name] = _torch_side(spec, workload, tool, x, y, precision, seed, opts, torch_rung)
                else:
                    out[name] = _jax_side(spec, workload, tool, x, y, precision, seed, opts, jax_rung, flax_init)
            except Exception as error:  # noqa: BLE001  (a tool that fails to build is a finding, kept)
                out[name] = error
            BUILD_S[(spec.key, workload, batch, precision, name)] = time.perf_counter() - start
    return out


def _xla_flops(cost: Any) -> float:
    if isinstance(cost, (list, tuple)):
        cost = cost[0]
    return float(cost.get("flops", 0.0))


def attention_flops(spec, batch: int, q_len: int, k_len: int | None = None, *, backward: bool = False) -> float:
    """Attention's FLOPs in one forward of ``spec`` (ViT-B/16 or GPT-2; 0 for ResNet-50): the two
    products QKᵀ and AV, ``2 · 2 · B · H · S_q · S_k · D_head`` per layer (``H · D_head`` is the
    width), with causal attention counted as the full square (what JAX's XLA implementation
    computes, masking the upper triangle afterwards, and what XLA's ``cost_analysis`` and
    ``FlopCounterMode``'s own attention formula count). ``k_len``: the keys, ``q_len`` when None.
    ``backward``: with the backward pass, four more products (twice the forward; a kernel that
    recomputes the scores does more work, which is not the model's)."""
    kw = spec.kwargs
    if spec.kind == "resnet":
        return 0.0
    layers, width = ((kw.get("n_layer", 12), kw.get("n_embd", 768)) if spec.kind == "gpt2"
                     else (kw.get("depth", 12), kw.get("embed_dim", 768)))
    forward = layers * 2 * 2 * batch * q_len * (q_len if k_len is None else k_len) * width
    return float(forward * (3 if backward else 1))


def _attention_flop(query_shape, key_shape, value_shape, *args, out_shape=None, **kwargs) -> int:
    """QKᵀ and AV of one ``scaled_dot_product_attention`` kernel, shapes ``(B, H, S, D)``."""
    b, h, s_q, d = query_shape
    return 2 * b * h * s_q * key_shape[2] * (d + value_shape[3])


def _attention_backward_flop(grad_out_shape, query_shape, key_shape, value_shape, *args, out_shape=None,
                             **kwargs) -> int:
    return 2 * _attention_flop(query_shape, key_shape, value_shape)


def _attention_formulas() -> dict:
    """FlopCounterMode's formula for every attention kernel ``F.scaled_dot_product_attention``
    dispatches to (the CPU's flash kernel, which the counter lacks; the GPU's, whose backward it
    counts with the scores recomputed), as :func:`attention_flops` counts them."""
    import torch

    aten = torch.ops.aten
    forward = ("_scaled_dot_product_flash_attention_for_cpu", "_scaled_dot_product_flash_attention",
               "_scaled_dot_product_efficient_attention", "_scaled_dot_product_cudnn_attention")
    formulas = {getattr(aten, name): _attention_flop for name in forward if hasattr(aten, name)}
    formulas.update({getattr(aten, name + "_backward"): _attention_backward_flop for name in forward
                     if hasattr(aten, name + "_backward")})
    return formulas


def flops(spec, workload: str, batch: int, *, prompt_len: int = 8, new_tokens: int = 8, torch_rung: Callable,
          jax_rung: Callable, flax_init: bool = True) -> dict[str, float]:
    """One call's FLOPs counted by each framework: ``torch``, PyTorch's ``FlopCounterMode`` over
    the eager rung (matmuls, convolutions and attention: 2 per multiply-add; attention's kernels
    counted as :func:`attention_flops` counts them, since on the CPU the counter knows none and
    counts them as 0), with ``torch_attention`` the part of it attention's kernels made (0 where
    attention ran as separate matmuls, which the counter counts among the rest); ``jax``, XLA's
    ``cost_analysis`` of the compiled program (every operation it counts, elementwise ones
    included; the JAX rung's callable carries ``cost``, returning it). The rungs as :func:`build`
    takes them (``flax_init`` too)."""
    from torch.utils.flop_counter import FlopCounterMode

    built = build(spec, workload, batch, torch_tools=("eager",), jax_tools=("jit",), prompt_len=prompt_len,
                  new_tokens=new_tokens, torch_rung=torch_rung, jax_rung=jax_rung, flax_init=flax_init)
    for rung in built.values():
        if isinstance(rung, BaseException):
            raise rung
    formulas = _attention_formulas()
    with FlopCounterMode(display=False, custom_mapping=formulas) as counter:
        built["torch/eager"]()
    by_op = counter.get_flop_counts().get("Global", {})
    kernels = {op._overloadpacket if hasattr(op, "_overloadpacket") else op for op in formulas}
    return {"torch": float(counter.get_total_flops()), "jax": _xla_flops(built["jax/jit"].cost()),
            "torch_attention": float(sum(n for op, n in by_op.items() if op in kernels))}


def _rss(field: str) -> int | None:
    """This process's resident memory from /proc/self/status (``VmHWM``: its peak), in bytes. Not
    ``getrusage``: Linux carries ``ru_maxrss`` across exec, so a spawned child would report its
    parent's peak."""
    try:
        for line in open("/proc/self/status"):
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def _child(spec, workload: str, batch: int, precision: str, name: str, threads: int, extra: dict,
           rungs: bytes) -> dict:
    os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")

    from sidebyside.lab import conditions, timing

    conditions.same_conditions(threads=threads or None, tf32=False)
    import cloudpickle
    import jax
    import torch

    imported = _rss("VmRSS")
    framework, tool = name.split("/", 1)
    rung = build(spec, workload, batch, precision, torch_tools=(tool,) if framework == "torch" else (),
                 jax_tools=(tool,) if framework == "jax" else (), **extra, **cloudpickle.loads(rungs))[name]
    if isinstance(rung, BaseException):
        raise rung
    for _ in range(2):
        timing.block(rung())
    out = {"peak_rss_bytes": _rss("VmHWM"),
           "import_rss_bytes": imported, "device_peak_bytes": None}
    if framework == "torch" and torch.cuda.is_available():
        out["device_peak_bytes"] = int(torch.cuda.max_memory_allocated())
    elif framework == "jax" and jax.devices()[0].platform == "gpu":
        out["device_peak_bytes"] = int((jax.devices()[0].memory_stats() or {}).get("peak_bytes_in_use", 0)) or None
    return out


def peak_memory(spec, workload: str, batch: int, precision: str, name: str, *, threads: int = 0,
                prompt_len: int = 8, new_tokens: int = 8, torch_rung: Callable, jax_rung: Callable,
                flax_init: bool = True) -> dict:
    """The rung ``name`` built and called twice in a fresh process (spawned; the run's compilation
    cache inherited): its peak resident memory, the resident memory after its imports, and on a GPU
    the framework's own peak allocation (``torch.cuda.max_memory_allocated``; JAX's
    ``peak_bytes_in_use``). An ``error`` instead when the rung fails there. The rungs as
    :func:`build` takes them (``flax_init`` too); they travel by value (cloudpickle), so a notebook's
    functions do."""
    import concurrent.futures
    import multiprocessing

    import cloudpickle

    from sidebyside.lab import timing

    extra = {"prompt_len": prompt_len, "new_tokens": new_tokens, "flax_init": flax_init}
    rungs = cloudpickle.dumps({"torch_rung": torch_rung, "jax_rung": jax_rung})
    try:
        with concurrent.futures.ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as pool:
            return pool.submit(_child, spec, workload, batch, precision, name, threads, extra, rungs).result()
    except Exception as error:  # noqa: BLE001  (kept as the rung's memory error)
        return {"error": timing.one_line(error)}
