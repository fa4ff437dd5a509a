"""The one benchmark harness for both frameworks.

Rules it enforces, so that every published figure is comparable:

- The first call is timed on its own (``first_s``): it holds tracing and
  compilation for ``jax.jit`` and ``torch.compile``. ``compile_s`` is that
  first call minus the steady-state median, never mixed into the run time.
- Every timed call waits for its result: JAX arrays are blocked on
  (``block_until_ready``), CUDA work is synchronised (``torch.cuda.synchronize``).
  ``synchronize=False`` exists only to show what an unsynchronised timer reports;
  even then the number of calls per repeat is chosen from synchronised calls
  (otherwise dispatch-only timings would queue thousands of asynchronous calls),
  and the queue is drained after the repeats so the next measurement starts clean.
- Each repeat runs the function ``number`` times (chosen automatically so one
  repeat lasts at least ``min_repeat_s``), and the result keeps every
  per-call time: median, quartiles and IQR come from those.
- The repeats form :data:`REPETITIONS` independent repetitions (blocks spread
  over the section, each starting the functions in another order); each
  repetition's median is kept (``repetitions_s``), and a speed verdict's
  interval covers the spread between them (:func:`sidebyside.lab.verdict.speed`).
- Every timed section is bracketed by the quiet-machine check
  (:mod:`sidebyside.lab.quiet`): calibration and load readings before and
  after, and a run that publishes stops when the machine was busy.
- Nothing is printed: functions return data for the notebook to show.

One measuring loop does all of this (``_measure``): :func:`time_fn` (one
function), :func:`compare` (several, interleaved) and :func:`ladder` (several,
interleaved, failures kept as rows) are views of it, so they cannot drift apart.

Inputs: a zero-argument callable (use ``functools.partial`` or a lambda).
Outputs: :class:`Timing` records, or a dict of them from :func:`compare`.

The fair-comparison set-up lives here too, once for every notebook:

- :func:`same_conditions` (call it before importing JAX): the same threads on
  a CPU for PyTorch, XLA and NumPy's BLAS, float32 with TF32 off on both sides
  (or on, on both sides), and a record of what was set, for the post and the
  results JSON (:func:`conditions_sentence` writes the post's sentence).
- :func:`tf32`: a context that allows TF32 on both sides and restores.
- :func:`warm_start`: pays each framework's one-time compiler start-up on a
  trivial function, so that the compile times of a ladder are those of a warm
  process; the start-up is returned, to be reported apart.
- :func:`ladder`: each framework's ladder of tools timed in one interleaved run
  (like :func:`compare`), where a tool that fails keeps its row with its error
  and a tool that cannot run here (a GPU-only rung on a CPU) keeps its row as
  not applicable, with the reason (:class:`NotApplicable`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import gc
import os
import statistics
import sys
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from sidebyside.lab import quiet

__all__ = ["Timing", "block", "time_fn", "compare", "summarise", "ratio", "same_conditions", "conditions_sentence",
           "tf32", "warm_start", "NotApplicable", "ladder", "ladder_table", "REPETITIONS"]

#: Independent repetitions of every timed section (fewer only when there are fewer repeats).
REPETITIONS = 3


def _is_jax_array(x: Any) -> bool:
    return hasattr(x, "block_until_ready") and type(x).__module__.startswith(("jax", "jaxlib"))


def _leaves(tree: Any) -> Iterable[Any]:
    if isinstance(tree, (list, tuple)):
        for item in tree:
            yield from _leaves(item)
    elif isinstance(tree, Mapping):
        for item in tree.values():
            yield from _leaves(item)
    elif dataclasses.is_dataclass(tree) and not isinstance(tree, type):
        for field in dataclasses.fields(tree):
            yield from _leaves(getattr(tree, field.name))
    else:
        yield tree


def block(result: Any) -> Any:
    """Wait until every array in ``result`` (any nesting of lists, tuples,
    dicts, dataclasses) has been computed, then return ``result``.

    JAX dispatches asynchronously: without this, a timer measures dispatch.
    CUDA kernels from PyTorch are asynchronous too: a tensor on a CUDA device
    synchronises its device. CPU tensors and NumPy arrays are already done.
    """
    cuda_devices = set()
    for leaf in _leaves(result):
        if _is_jax_array(leaf):
            leaf.block_until_ready()
        elif type(leaf).__module__.startswith("torch") and getattr(leaf, "is_cuda", False):
            cuda_devices.add(leaf.device)
        elif hasattr(leaf, "block_until_ready"):  # e.g. a JAX pytree node object
            leaf.block_until_ready()
    if cuda_devices:
        import torch

        for device in cuda_devices:
            torch.cuda.synchronize(device)
    return result


@dataclasses.dataclass
class Timing:
    """Per-call times of one function, in seconds.

    ``times_s`` holds one mean per repeat (each repeat ran ``number`` calls);
    ``first_s`` the very first call (compilation included, if any);
    ``repetitions_s`` the median of each independent repetition (block of repeats).
    """

    name: str
    times_s: list[float]
    number: int
    first_s: float
    synchronized: bool = True
    repetitions_s: list[float] = dataclasses.field(default_factory=list)

    @property
    def median_s(self) -> float:
        return statistics.median(self.times_s)

    @property
    def q1_s(self) -> float:
        return _quantile(self.times_s, 0.25)

    @property
    def q3_s(self) -> float:
        return _quantile(self.times_s, 0.75)

    @property
    def iqr_s(self) -> float:
        return self.q3_s - self.q1_s

    @property
    def min_s(self) -> float:
        return min(self.times_s)

    @property
    def compile_s(self) -> float:
        """Time the first call took beyond a steady-state call (>= 0)."""
        return max(self.first_s - self.median_s, 0.0)

    @property
    def repeats(self) -> int:
        return len(self.times_s)

    def to_dict(self) -> dict:
        return {
            "median": self.median_s,
            "iqr": self.iqr_s,
            "q1": self.q1_s,
            "q3": self.q3_s,
            "min": self.min_s,
            "first": self.first_s,
            "compile": self.compile_s,
            "repeats": self.repeats,
            "number": self.number,
            "synchronized": self.synchronized,
            "repetitions": list(self.repetitions_s),
        }

    def __str__(self) -> str:
        return f"{self.name}: {_fmt(self.median_s)} ± {_fmt(self.iqr_s / 2)} (median ± IQR/2, {self.repeats}×{self.number})"


def _quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    if len(ordered) == 1:
        return ordered[0]
    position = q * (len(ordered) - 1)
    low = int(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def _fmt(seconds: float) -> str:
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("µs", 1e-6)):
        if seconds >= scale:
            return f"{seconds / scale:.3g} {unit}"
    return f"{seconds / 1e-9:.3g} ns"


def _call(fn: Callable[[], Any], synchronize: bool) -> Any:
    result = fn()
    if synchronize:
        block(result)
    return result


def _choose_number(fn: Callable[[], Any], min_repeat_s: float, max_number: int) -> int:
    """Calls per repeat so that one repeat lasts at least ``min_repeat_s``,
    judged from synchronised calls (the real cost, never dispatch alone)."""
    number = 1
    while number < max_number:
        start = time.perf_counter()
        for _ in range(number):
            _call(fn, True)
        elapsed = time.perf_counter() - start
        if elapsed >= min_repeat_s:
            break
        # Grow geometrically, aiming a little past the target.
        number = min(max_number, max(number * 2, int(number * min_repeat_s * 1.2 / max(elapsed, 1e-9))))
    return number


def _validate(repeats: int, warmup: int) -> None:
    if repeats < 1:
        raise ValueError(f"repeats must be >= 1, got {repeats}")
    if warmup < 0:
        raise ValueError(f"warmup must be >= 0, got {warmup}")


def _measure(
    fns: Mapping[str, Callable[[], Any]],
    *,
    repeats: int,
    warmup: int,
    number: int | None,
    min_repeat_s: float,
    max_number: int,
    synchronize: bool,
    pipelined: bool,
    keep_errors: bool,
) -> tuple[dict[str, Timing], dict[str, BaseException]]:
    """The one measuring loop behind :func:`time_fn`, :func:`compare` and :func:`ladder`.

    Each function is called once alone (timed: ``first_s``, compilation included), warmed up
    ``warmup`` times, and given its ``number`` of calls per repeat (chosen from synchronised
    calls unless given); then the repeats alternate between the functions (A B C A B C ...), in
    :data:`REPETITIONS` blocks, each starting with the next function (B C A ..., C A B ...), each
    block's median kept as one repetition. The repeats are one section of the quiet-machine
    check (:func:`sidebyside.lab.quiet.section`), which raises
    :class:`~sidebyside.lab.quiet.BusyMachine` after them in a run that publishes on a busy
    machine. Every clock read follows a synchronised result, except with ``synchronize=False`` (the
    pitfall, shown on purpose), where the queue is drained, outside the clock, before another
    function's repeat and at the end. ``pipelined=True`` waits once per repeat, for its last
    call. With ``keep_errors`` a function that raises (first call, warm-up, or a repeat) is
    dropped from the run and its exception returned; otherwise the exception propagates.
    Returns ``(timings, errors)``, each keyed by name, in the order of ``fns``.
    """
    _validate(repeats, warmup)
    first: dict[str, float] = {}
    numbers: dict[str, int] = {}
    errors: dict[str, BaseException] = {}
    running: dict[str, Callable[[], Any]] = {}
    for name, fn in fns.items():
        try:
            start = time.perf_counter()
            _call(fn, synchronize)
            first[name] = time.perf_counter() - start
            for _ in range(warmup):
                _call(fn, synchronize)
            numbers[name] = number if number is not None else _choose_number(fn, min_repeat_s, max_number)
            running[name] = fn
        except Exception as error:
            if not keep_errors:
                raise
            errors[name] = error
    times: dict[str, list[float]] = {name: [] for name in running}
    blocks: dict[str, list[list[float]]] = {name: [] for name in running}
    queued: dict[str, Any] = {}  # unsynchronised results not yet waited for
    sizes = _block_sizes(repeats, REPETITIONS)
    with quiet.section(", ".join(running) or ", ".join(fns)):
        gc_was_enabled = gc.isenabled()
        gc.disable()
        try:
            for block_index, size in enumerate(sizes):
                order = list(running)
                shift = block_index % max(len(order), 1)
                for name in order:
                    blocks[name].append([])
                for _ in range(size):
                    for name in order[shift:] + order[:shift]:  # each repetition starts with another function
                        if name not in running:
                            continue
                        fn, n = running[name], numbers[name]
                        try:
                            start = time.perf_counter()
                            for _ in range(n):
                                result = _call(fn, synchronize and not pipelined)
                            if pipelined and synchronize:
                                block(result)  # the repeat ends when its last call is done
                            elapsed = (time.perf_counter() - start) / n
                            times[name].append(elapsed)
                            blocks[name][-1].append(elapsed)
                            if not synchronize:
                                queued[name] = result
                                if len(running) > 1:
                                    block(queued.pop(name))  # drain before another function's repeat
                        except Exception as error:
                            if not keep_errors:
                                raise
                            errors[name] = error
                            del running[name]
        finally:
            if gc_was_enabled:
                gc.enable()
        for result in queued.values():
            block(result)  # drain what the unsynchronised repeats left queued
    timings = {name: Timing(name, times[name], numbers[name], first[name], synchronize,
                            [statistics.median(b) for b in blocks[name] if b]) for name in running}
    return timings, errors


def _block_sizes(repeats: int, repetitions: int) -> list[int]:
    """``repeats`` split into ``repetitions`` blocks as even as can be (fewer when there are fewer repeats)."""
    count = max(1, min(repeats, repetitions))
    return [repeats // count + (1 if i < repeats % count else 0) for i in range(count)]


def time_fn(
    fn: Callable[[], Any],
    *,
    name: str | None = None,
    repeats: int = 7,
    warmup: int = 1,
    number: int | None = None,
    min_repeat_s: float = 0.05,
    max_number: int = 10_000,
    synchronize: bool = True,
) -> Timing:
    """Time ``fn()``.

    The first call is timed alone (``first_s``, compilation included); then
    ``warmup`` untimed calls; then ``repeats`` repeats of ``number`` calls each
    (``number=None`` picks one so a repeat lasts at least ``min_repeat_s``).
    Returns a :class:`Timing` with per-call seconds.
    """
    name = name or getattr(fn, "__name__", "fn")
    timings, _ = _measure({name: fn}, repeats=repeats, warmup=warmup, number=number, min_repeat_s=min_repeat_s,
                          max_number=max_number, synchronize=synchronize, pipelined=False, keep_errors=False)
    return timings[name]


def compare(
    fns: Mapping[str, Callable[[], Any]],
    *,
    repeats: int = 7,
    warmup: int = 1,
    min_repeat_s: float = 0.05,
    max_number: int = 10_000,
    synchronize: bool = True,
    pipelined: bool = False,
) -> dict[str, Timing]:
    """Time several functions in one interleaved run.

    Each is called once alone (timed: ``first_s``), warmed up, and given its
    own ``number``; then the repeats alternate between them (A B C A B C ...),
    so slow drifts of a shared, noisy machine hit all of them alike. Ratios
    between the returned timings are therefore measured in one run.

    ``pipelined=True`` (GPU kernels): a repeat issues its ``number`` calls back to
    back and waits once, at its end, for the last result (work on one device
    stream finishes in order), so the per-call time is the device's throughput
    rather than launch-and-wait latency, as in a training loop. Without it every
    call is waited for, and a kernel of tens of microseconds is timed together
    with the host's dispatch and the synchronisation.
    """
    _validate(repeats, warmup)
    if not fns:
        raise ValueError("compare() needs at least one function")
    timings, _ = _measure(fns, repeats=repeats, warmup=warmup, number=None, min_repeat_s=min_repeat_s,
                          max_number=max_number, synchronize=synchronize, pipelined=pipelined, keep_errors=False)
    return timings


def ratio(numerator: Timing, denominator: Timing) -> float:
    """Median time ratio ``numerator / denominator`` (e.g. JAX / PyTorch)."""
    return numerator.median_s / denominator.median_s


def summarise(timings: Mapping[str, Timing] | Iterable[Timing], unit: str = "ms"):
    """A pandas DataFrame of timings: median, IQR, first call, compile time,
    in ``unit`` ("s", "ms" or "us"), one row per timing."""
    import pandas as pd

    scale = {"s": 1.0, "ms": 1e3, "us": 1e6}[unit]
    items = timings.values() if isinstance(timings, Mapping) else timings
    rows = [
        {
            "name": t.name,
            f"median ({unit})": t.median_s * scale,
            f"IQR ({unit})": t.iqr_s * scale,
            f"first call ({unit})": t.first_s * scale,
            f"compile ({unit})": t.compile_s * scale,
            "repeats": f"{t.repeats}×{t.number}",
        }
        for t in items
    ]
    return pd.DataFrame(rows).set_index("name")


# ----------------------------------------------------------------------------- same conditions

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
    import jax  # noqa: F401  (after the thread settings above)

    _set_tf32(tf32)
    return {
        "threads": threads,
        "torch_threads": torch.get_num_threads(),
        "numpy_blas_threads": blas_threads,
        "xla_cpu_cores": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else threads,
        "xla_flags": os.environ.get("XLA_FLAGS", ""),
        "tf32": bool(tf32),
        **_precision_record(),
        "rules": ["data already on the device", "synchronised before every clock read",
                  "first call and compilation timed apart, in a warm process", "median and IQR over repeats",
                  "each framework's ladder of tools in one interleaved run"],
    }


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
    threads = (f"On the CPU every library runs {conditions['threads']} thread"
               f"{'s' if conditions['threads'] != 1 else ''}: PyTorch {conditions['torch_threads']}, NumPy's BLAS "
               f"{conditions['numpy_blas_threads']}, XLA over {conditions['xla_cpu_cores']} core"
               f"{'s' if conditions['xla_cpu_cores'] != 1 else ''}.")
    where = "on the GPU" if on_gpu else "on the CPU"
    return (f"Same conditions for both frameworks {where}: {precision}; data already on the device; every clock "
            f"read after the work is synchronised; first calls and compilation timed apart, in a warm process; "
            f"median and interquartile range over interleaved repeats. {threads}")


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


def warm_start(device: str = "cpu", frameworks: Iterable[str] = ("torch", "jax")) -> dict[str, float]:
    """Pay the one-time start-up of ``torch.compile`` and ``jax.jit`` (imports,
    compiler threads, the first code generation) on a trivial function on
    ``device`` ("cpu" or "cuda"), so that the compile times measured after it
    are those of a warm process. Returns the seconds each first call took,
    to be reported apart as library start-up. ``frameworks``: the compilers
    the notebook uses (a notebook without ``torch.compile`` skips its start-up)."""
    import jax
    import jax.numpy as jnp
    import torch

    out = {}
    if "torch" in frameworks:
        torch_device = torch.device("cuda" if device in ("cuda", "gpu") else "cpu")
        x = torch.ones(8, device=torch_device)

        def _torch_start(t):
            return t * 2 + 1

        start = time.perf_counter()
        block(torch.compile(_torch_start, dynamic=False)(x))
        out["torch_compile_startup_s"] = time.perf_counter() - start
    if "jax" not in frameworks:
        return out
    jax_device = jax.devices("gpu" if device in ("cuda", "gpu") else "cpu")[0]
    y = jax.device_put(jnp.ones(8, jnp.float32), jax_device)
    start = time.perf_counter()
    block(jax.jit(lambda v: v * 2 + 1)(y))
    out["jax_jit_startup_s"] = time.perf_counter() - start
    return out


# ----------------------------------------------------------------------------- the ladder


class NotApplicable(Exception):
    """A rung that cannot run here, with the reason (e.g. a CUDA-graph rung on
    a machine without a GPU). :func:`ladder` keeps its row as not applicable."""

    @classmethod
    def cuda_graphs(cls, device_type: str) -> NotApplicable:
        """The one reason every CUDA-graph rung gives off a CUDA device."""
        return cls(f"CUDA graphs need a CUDA GPU; this run is on the {device_type.upper()}")


def _one_line(error: BaseException) -> str:
    text = f"{type(error).__name__}: {error}"
    return " ".join(text.split())[:300]


def ladder(
    candidates: Mapping[str, Any],
    *,
    needs: Mapping[str, str] | None = None,
    repeats: int = 7,
    warmup: int = 1,
    min_repeat_s: float = 0.05,
    max_number: int = 10_000,
    pipelined: bool = False,
) -> tuple[dict[str, dict[str, Any]], dict[str, Timing]]:
    """Time a ladder of tools in one interleaved run, failures kept.

    ``candidates`` maps ``"<framework>/<tool>"`` to a zero-argument callable
    (what :func:`compare` takes), to a :class:`NotApplicable` (a rung that
    cannot run on this machine), or to an exception raised while building
    the tool. A callable whose first call, warm-up or repeats raise keeps its
    row with the error in one line; ``needs`` says per name what the tool
    needs, appended to its error (e.g. "a CUDA GPU and a capturable optimiser").

    Returns ``(entries, timings)``: ``entries`` holds one
    :func:`sidebyside.lab.verdict.ladder_entry` per candidate, in order (the
    results JSON's ``"ladder"``); ``timings`` the :class:`Timing` of those
    that ran.
    """
    from sidebyside.lab import verdict

    _validate(repeats, warmup)
    needs = dict(needs or {})
    entries: dict[str, dict[str, Any]] = {}

    def fail(name: str, error: BaseException | str) -> None:
        text = error if isinstance(error, str) else _one_line(error)
        if needs.get(name):
            text += f" (needs {needs[name]})"
        entries[name] = verdict.ladder_entry(error=text)

    callables: dict[str, Callable[[], Any]] = {}
    for name, candidate in candidates.items():
        verdict._split(name)  # "<framework>/<tool>" or a clear error
        if isinstance(candidate, NotApplicable):
            entries[name] = verdict.ladder_entry(not_applicable=str(candidate))
        elif isinstance(candidate, BaseException):
            fail(name, candidate)
        else:
            entries[name] = {}  # keeps the order of the candidates
            callables[name] = candidate
    timings, errors = _measure(callables, repeats=repeats, warmup=warmup, number=None, min_repeat_s=min_repeat_s,
                               max_number=max_number, synchronize=True, pipelined=pipelined, keep_errors=True)
    for name, error in errors.items():  # a failing tool is a finding: keep its row
        fail(name, error)
    for name, t in timings.items():
        entries[name] = verdict.ladder_entry(t)
    return entries, timings


def ladder_table(entries: Mapping[str, Mapping[str, Any]], *, labels: Mapping[str, str] | None = None,
                 unit: str = "ms", scale: float = 1.0):
    """A pandas DataFrame of a ladder, one row per tool, each row naming its
    framework and tool: median, IQR, compile time (s), and the error or the
    reason it does not apply. ``scale`` multiplies the times (e.g. steps per
    epoch / steps per call, to show an epoch)."""
    import pandas as pd

    from sidebyside.lab.verdict import FRAMEWORKS

    factor = {"s": 1.0, "ms": 1e3, "us": 1e6, "µs": 1e6}[unit] * scale
    rows = []
    for name, e in entries.items():
        framework, tool = name.split("/", 1)
        rows.append({
            "framework / tool": (labels or {}).get(name, f"{FRAMEWORKS.get(framework, framework)}, {tool}"),
            f"median ({unit})": None if e.get("median_s") is None else e["median_s"] * factor,
            f"IQR ({unit})": None if e.get("iqr_s") is None else e["iqr_s"] * factor,
            "compile (s)": e.get("compile_s"),
            "status": ("ran" if e.get("median_s") is not None else
                       f"not applicable: {e['not_applicable']}" if e.get("not_applicable") else f"failed: {e.get('error')}"),
        })
    return pd.DataFrame(rows).set_index("framework / tool")
