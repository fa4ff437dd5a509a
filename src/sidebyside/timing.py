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
- Nothing is printed: functions return data for the notebook to show.

Inputs: a zero-argument callable (use ``functools.partial`` or a lambda).
Outputs: :class:`Timing` records, or a dict of them from :func:`compare`.
"""

from __future__ import annotations

import dataclasses
import gc
import statistics
import time
from typing import Any, Callable, Iterable, Mapping

__all__ = ["Timing", "block", "time_fn", "compare", "summarise", "ratio"]


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
    ``first_s`` the very first call (compilation included, if any).
    """

    name: str
    times_s: list[float]
    number: int
    first_s: float
    synchronized: bool = True

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
    _validate(repeats, warmup)
    start = time.perf_counter()
    _call(fn, synchronize)
    first_s = time.perf_counter() - start
    for _ in range(warmup):
        _call(fn, synchronize)
    if number is None:
        number = _choose_number(fn, min_repeat_s, max_number)
    times = []
    gc_was_enabled = gc.isenabled()
    gc.disable()
    try:
        for _ in range(repeats):
            start = time.perf_counter()
            for _ in range(number):
                result = _call(fn, synchronize)
            times.append((time.perf_counter() - start) / number)
    finally:
        if gc_was_enabled:
            gc.enable()
    if not synchronize:
        block(result)  # drain what the unsynchronised repeats left queued
    return Timing(name or getattr(fn, "__name__", "fn"), times, number, first_s, synchronize)


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
    first: dict[str, float] = {}
    numbers: dict[str, int] = {}
    for name, fn in fns.items():
        start = time.perf_counter()
        _call(fn, synchronize)
        first[name] = time.perf_counter() - start
        for _ in range(warmup):
            _call(fn, synchronize)
        numbers[name] = _choose_number(fn, min_repeat_s, max_number)
    times: dict[str, list[float]] = {name: [] for name in fns}
    gc_was_enabled = gc.isenabled()
    gc.disable()
    try:
        for _ in range(repeats):
            for name, fn in fns.items():
                n = numbers[name]
                start = time.perf_counter()
                for _ in range(n):
                    result = _call(fn, synchronize and not pipelined)
                if pipelined and synchronize:
                    block(result)  # the repeat ends when its last call is done
                times[name].append((time.perf_counter() - start) / n)
                if not synchronize:
                    block(result)  # drain before the next function's repeat
    finally:
        if gc_was_enabled:
            gc.enable()
    return {name: Timing(name, times[name], numbers[name], first[name], synchronize) for name in fns}


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
