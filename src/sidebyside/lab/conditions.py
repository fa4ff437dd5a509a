"""The same conditions for both frameworks, set once per process.

- :func:`same_conditions` (call it before importing JAX): the same threads on
  a CPU for PyTorch, XLA and NumPy's BLAS, float32 with TF32 off on both sides
  (or on, on both sides), a compilation cache shared by this run's processes,
  and a record of what was set, for the post and the results JSON
  (:func:`conditions_sentence` writes the post's sentence). The worker
  processes of :mod:`sidebyside.lab.pool` call it again with :func:`applied`.
- :func:`tf32`: a context that allows TF32 on both sides and restores.

The compilation cache: the first process of a run compiles cold (its compile
times are the ones reported) and writes JAX's persistent compilation cache
and Inductor's caches into one directory per run
(``SIDEBYSIDE_COMPILE_CACHE``, made here and inherited by the run's worker
processes), so that later processes pay the run again, not the compilation.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import shutil
import sys
import tempfile
from collections.abc import Iterable, Mapping
from typing import Any

__all__ = ["same_conditions", "applied", "conditions_sentence", "tf32", "use_compile_cache", "CACHE_ENV"]

#: The environment variable naming this run's compilation cache (inherited by worker processes).
CACHE_ENV = "SIDEBYSIDE_COMPILE_CACHE"

_APPLIED: dict[str, Any] | None = None  # the arguments of this process's same_conditions call
_BLAS_LIMITS: Any = None  # threadpoolctl's limiter, kept alive for the process



def _set_tf32(enabled: bool, frameworks: Iterable[str] = ("torch", "jax")) -> None:
    import torch

    if "torch" in frameworks:
        torch.backends.cuda.matmul.allow_tf32 = enabled
        torch.backends.cudnn.allow_tf32 = enabled
        torch.set_float32_matmul_precision("high" if enabled else "highest")
    if "jax" in frameworks and "jax" in sys.modules:
        import jax

        jax.config.update("jax_default_matmul_precision", "tensorfloat32" if enabled else "highest")


def _precision_record() -> dict[str, Any]:
    import torch

    record = {
        "torch_float32_matmul_precision": torch.get_float32_matmul_precision(),
        "torch_cuda_matmul_allow_tf32": bool(torch.backends.cuda.matmul.allow_tf32),
        "torch_cudnn_allow_tf32": bool(torch.backends.cudnn.allow_tf32),
    }
    if "jax" in sys.modules:
        import jax

        record["jax_default_matmul_precision"] = jax.config.jax_default_matmul_precision
    return record


def same_conditions(*, threads: int | None = None, tf32: bool = False) -> dict[str, Any]:
    """Put both frameworks under the same conditions; returns what was set.

    Call it once, at the top of a notebook, BEFORE importing JAX: XLA reads
    its CPU thread settings when its backend starts.

    - Threads on a CPU: ``threads`` (default: every core this process may
      use). PyTorch gets ``torch.set_num_threads(threads)`` (where its own
      count differs); NumPy's BLAS is
      limited with threadpoolctl; XLA's CPU pool follows the cores the process
      may run on, so with fewer threads than cores the process is pinned to
      ``threads`` cores (``os.sched_setaffinity``), and with one thread XLA's
      Eigen pool is switched off (``XLA_FLAGS``).
    - Precision: float32 with TF32 off on both sides (``tf32=False``): PyTorch
      ``set_float32_matmul_precision("highest")`` and both cuBLAS/cuDNN TF32
      switches off; JAX ``jax_default_matmul_precision="highest"``. ``tf32=True``
      turns TF32 on for both (a separate row, never one side only).

    Returns a dict for the results JSON (``metrics["conditions"]``): threads of
    each library, the precision settings, and the harness's rules (data on the
    device, synchronised clocks, compile apart, median and IQR).
    """
    global _APPLIED
    backends = sys.modules.get("jax._src.xla_bridge")
    if backends is not None and getattr(backends, "_backends", None):
        raise RuntimeError("same_conditions() must run before JAX starts its backend (XLA reads its thread "
                           "settings then): call it at the top of the notebook, before any JAX array exists.")
    available = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else list(range(os.cpu_count() or 1))
    threads = len(available) if threads is None else int(threads)
    if not 1 <= threads <= len(available):
        raise ValueError(f"threads must be between 1 and the {len(available)} cores this process may use, got {threads}")
    if threads < len(available) and hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, available[:threads])
    os.environ["OMP_NUM_THREADS"] = str(threads)
    if threads == 1:
        flags = os.environ.get("XLA_FLAGS", "")
        extra = "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1"
        if extra not in flags:
            os.environ["XLA_FLAGS"] = (flags + " " + extra).strip()
    import torch

    if torch.get_num_threads() != threads:
        # Only when it changes something: on a busy machine, calling set_num_threads even with
        # PyTorch's own default can make small eager ops far slower (its worker threads then
        # compete with the caller).
        torch.set_num_threads(threads)
    blas_threads: Any
    global _BLAS_LIMITS
    try:
        import threadpoolctl

        _BLAS_LIMITS = threadpoolctl.threadpool_limits(limits=threads, user_api="blas")
        infos = [info for info in threadpoolctl.threadpool_info() if info.get("user_api") == "blas"]
        blas_threads = max((info["num_threads"] for info in infos), default=None)
    except ImportError:
        blas_threads = "unknown (threadpoolctl is not installed: pip install threadpoolctl)"
    cold = use_compile_cache()  # (after the thread settings above: it imports JAX)
    _set_tf32(tf32)
    _APPLIED = {"threads": threads, "tf32": bool(tf32)}
    return {
        "threads": threads,
        "torch_threads": torch.get_num_threads(),
        "numpy_blas_threads": blas_threads,
        "xla_cpu_cores": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else threads,
        "xla_flags": os.environ.get("XLA_FLAGS", ""),
        "tf32": bool(tf32),
        "compile_cache_cold_at_start": cold,
        **_precision_record(),
        "rules": ["data already on the device", "synchronised before every clock read",
                  "first call and compilation timed apart, in a warm process (the first process compiles cold; "
                  "later processes reuse its compilation cache)",
                  "each framework's ladder of tools interleaved in every process, the order alternating "
                  "between processes",
                  "one process is one observation: a 95% confidence interval of the time ratio over independent "
                  "processes; practically tied only when the whole interval lies inside the machine's noise "
                  "floor"],
    }


def applied() -> dict[str, Any] | None:
    """The arguments of this process's :func:`same_conditions` call (None before it), for a worker
    process to set the same conditions."""
    return dict(_APPLIED) if _APPLIED is not None else None


def use_compile_cache() -> bool:
    """Point both frameworks at this run's compilation cache (:data:`CACHE_ENV`, shared by every process of
    a run or device call: JAX's persistent cache, Inductor's and Triton's), also in a process that sets no
    other condition; return whether it started cold (a cache given by the caller may already hold what an
    earlier run compiled, and compile times are then warm)."""
    cache = _compile_cache()
    cold = not any(any((cache / tool).iterdir()) for tool in ("jax", "inductor") if (cache / tool).is_dir())
    import jax

    jax.config.update("jax_compilation_cache_dir", str(cache / "jax"))
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", -1)
    return cold


def _compile_cache():
    """This run's compilation cache directory: the inherited one, or a new one removed at exit."""
    from pathlib import Path

    given = os.environ.get(CACHE_ENV)
    if given:
        path = Path(given)
    else:
        path = Path(tempfile.mkdtemp(prefix="sidebyside-compile-"))
        os.environ[CACHE_ENV] = str(path)
        atexit.register(shutil.rmtree, path, ignore_errors=True)
    os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", str(path / "inductor"))
    os.environ.setdefault("TRITON_CACHE_DIR", str(path / "triton"))
    return path


def conditions_sentence(conditions: Mapping[str, Any], *, on_gpu: bool) -> str:
    """The post's sentence stating the conditions of :func:`same_conditions`."""
    if conditions["tf32"]:
        precision = ("float32 with TF32 allowed on both sides (PyTorch matmul precision "
                     f"`{conditions['torch_float32_matmul_precision']}`, JAX "
                     f"`{conditions.get('jax_default_matmul_precision')}`)")
    else:
        precision = ("float32 with TF32 off on both sides (PyTorch matmul precision "
                     f"`{conditions['torch_float32_matmul_precision']}`, cuBLAS and cuDNN TF32 off; JAX default "
                     f"matmul precision `{conditions.get('jax_default_matmul_precision')}`)")
    # XLA's CPU runtime takes no thread count: it may use the cores the process may run on, which is all
    # that is known of it here (how many threads it kept busy is not measured).
    cores = conditions['xla_cpu_cores']
    threads = (f"On the CPU the threads are set to {conditions['threads']}: PyTorch runs "
               f"{conditions['torch_threads']}, NumPy's BLAS {conditions['numpy_blas_threads']}; XLA may use "
               f"{cores} core{'s' if cores != 1 else ''} (the cores this process may run on).")
    where = "on the GPU" if on_gpu else "on the CPU"
    return (f"Same conditions for both frameworks {where}: {precision}; data already on the device; every clock "
            f"read after the work is synchronised; first calls and compilation timed apart, in a warm process; "
            f"the contestants interleaved in each of several independent processes, a 95% confidence interval "
            f"over the processes. {threads}")


@contextlib.contextmanager
def tf32(enabled: bool = True, frameworks: Iterable[str] = ("torch", "jax")):
    """Allow (or forbid) TF32 on both sides inside the block; restores the
    previous settings of both frameworks on exit. JAX traces with the
    precision current at trace time: jit a separate function per setting (or
    pass ``precision="tensorfloat32"``) and, to switch PyTorch alone around
    each timed call, ``frameworks=("torch",)``."""
    import torch

    frameworks = tuple(frameworks)
    before = (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32,
              torch.get_float32_matmul_precision())
    touch_jax = "jax" in frameworks and "jax" in sys.modules
    jax_before = None
    if touch_jax:
        import jax

        jax_before = jax.config.jax_default_matmul_precision
    _set_tf32(enabled, frameworks)
    try:
        yield
    finally:
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = before[0], before[1]
        torch.set_float32_matmul_precision(before[2])
        if touch_jax:
            import jax

            jax.config.update("jax_default_matmul_precision", jax_before)
