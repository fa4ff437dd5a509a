"""The one benchmark harness for both frameworks: the measuring loop.

Rules it enforces, so that every published figure is comparable:

- One process is one observation. :func:`compare` and :func:`ladder` time
  their contestants in :func:`sidebyside.lab.pool.processes` independent
  processes (cpu 5, gpu 3, smoke 2): this one first, then fresh worker
  processes (:mod:`sidebyside.lab.pool`) that receive the contestants by
  value (cloudpickle), or a *builder* that builds them. Each process
  interleaves the contestants (A B C A B C ...), the starting one alternating
  between processes, and keeps each one's median per-call time
  (``processes_s``); a speed verdict's interval is a confidence interval over
  those (:mod:`sidebyside.lab.stats`).
- The first call is timed on its own (``first_s``): it holds tracing and
  compilation for ``jax.jit`` and ``torch.compile``, cold, in the first
  process. ``compile_s`` is that first call minus the steady-state median,
  never mixed into the run time. Later processes reuse the run's
  compilation cache (:mod:`sidebyside.lab.conditions`); ``first_cache`` says
  whether that first call's compilation found it cold or warm
  (:mod:`sidebyside.lab.cachestate`), program by program.
- Every timed call waits for its result: JAX arrays are blocked on
  (``block_until_ready``), CUDA work is synchronised (``torch.cuda.synchronize``).
  ``synchronize=False`` exists only to show what an unsynchronised timer reports;
  even then the number of calls per repeat is chosen from synchronised calls,
  and the queue is drained after the repeats so the next measurement starts clean.
- Each repeat runs the function ``number`` times (chosen so one repeat lasts
  at least ``min_repeat_s``); ``repeats`` is the count over all processes
  together, at least :data:`MIN_REPEATS` in each.
- Every pooled measurement is one section of the quiet-machine check
  (:mod:`sidebyside.lab.quiet`): what it found busy is kept in each entry
  (``busy``), with the machine kind's noise floor measured at the same count
  of processes (``floor``, :func:`sidebyside.lab.floors.floor`; None without
  one) and its races' spreads between runs (``between``,
  :func:`sidebyside.lab.floors.between_runs`), so that a verdict reads all three from its inputs.
- Every contestant is noted where it is defined (:func:`sidebyside.run.code.note_timed`), so a
  results record shows that the code a post pairs is the code it timed.
- Nothing is printed: functions return data for the notebook to show.

Every timing, in a notebook and in a results record, is one entry of one
schema (:data:`ENTRY_KEYS`, seconds): :meth:`Timing.entry` writes it and
:func:`read` reads it; a bare number is refused.

:func:`warm_start` pays each framework's one-time compiler start-up before
anything is timed. The conditions (threads, precision, compilation cache) live in
:mod:`sidebyside.lab.conditions`, the entry schema in :mod:`sidebyside.lab.entry`,
the ladder's rows and verdicts in :mod:`sidebyside.lab.ladders`: import each from there.
"""

from __future__ import annotations

import dataclasses
import gc
import math
import statistics
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from sidebyside.lab import cachestate, floors, ladders, pool, quiet
from sidebyside.lab.entry import Timing
from sidebyside.run import code

__all__ = ["block", "warm_start", "time_fn", "cores_busy", "compare", "ladder", "measure_here", "ratio",
           "MIN_REPEATS", "NotApplicable", "one_line"]

#: The fewest repeats of each function in each process.
MIN_REPEATS = 3

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
        number = min(max_number, max(number * 2, int(number * min_repeat_s * 1.2 / max(elapsed, 1e-9))))
    return number


def _validate(repeats: int, warmup: int) -> None:
    if repeats < 1:
        raise ValueError(f"repeats must be >= 1, got {repeats}")
    if warmup < 0:
        raise ValueError(f"warmup must be >= 0, got {warmup}")


def one_line(error: BaseException) -> str:
    """An exception as one line of at most 300 characters, for a table row."""
    return " ".join(f"{type(error).__name__}: {error}".split())[:300]


def measure_here(fns: Mapping[str, Callable[[], Any]], *, repeats: int, warmup: int = 1, number: int | None = None,
                 min_repeat_s: float = 0.05, max_number: int = 10_000, synchronize: bool = True,
                 pipelined: bool = False, keep_errors: bool = False, shift: int = 0, probe: bool = False,
                 ) -> tuple[dict[str, Timing], dict[str, str]]:
    """The measuring loop of one process.

    Each function is called once alone (timed: ``first_s``, compilation included), warmed up
    ``warmup`` times, and given its ``number`` of calls per repeat (chosen from synchronised
    calls unless given; one function raced under several names, as in an A/A run, gets one
    number for all); then ``repeats`` rounds alternate between the functions, round ``r``
    starting with function ``shift + r`` (A B C, B C A, C A B, ... for ``shift=0``), so that every
    function takes every place in the round equally often: no function is always the one that
    runs first, or after a given other. Every clock read follows a
    synchronised result, except with ``synchronize=False`` (the pitfall, shown on purpose), where
    the queue is drained, outside the clock, before another function's repeat and at the end.
    ``pipelined=True`` waits once per repeat, for its last call. With ``keep_errors`` a function
    that raises is dropped and its error kept as one line; otherwise the exception propagates.
    Each function is noted as a contestant (:func:`sidebyside.run.code.note_timed`), except with
    ``probe=True``: a measurement of the machine (a copy's bandwidth), which no post pairs.
    Returns ``(timings, errors)``, each keyed by name, in the order of ``fns``.
    """
    _validate(repeats, warmup)
    first: dict[str, float] = {}
    caches: dict[str, str | None] = {}  # each first call's compilation: cold, warm or none
    numbers: dict[str, int] = {}
    errors: dict[str, str] = {}
    running: dict[str, Callable[[], Any]] = {}
    for name, fn in fns.items():
        if not probe:
            code.note_timed(name, fn)
        try:
            before = cachestate.snapshot()
            start = time.perf_counter()
            _call(fn, synchronize)
            first[name] = time.perf_counter() - start
            caches[name] = cachestate.state(before, cachestate.snapshot())
            for _ in range(warmup):
                _call(fn, synchronize)
            numbers[name] = number if number is not None else next(
                (numbers[other] for other in running if running[other] is fn), None) or _choose_number(
                fn, min_repeat_s, max_number)
            running[name] = fn
        except Exception as error:
            if not keep_errors:
                raise
            errors[name] = one_line(error)
    times: dict[str, list[float]] = {name: [] for name in running}
    queued: dict[str, Any] = {}  # unsynchronised results not yet waited for
    order = list(running)
    shift = shift % max(len(order), 1)
    gc_was_enabled = gc.isenabled()
    gc.disable()
    try:
        for r in range(repeats):
            start_at = (shift + r) % max(len(order), 1)
            for name in order[start_at:] + order[:start_at]:
                if name not in running:
                    continue
                fn, n = running[name], numbers[name]
                try:
                    start = time.perf_counter()
                    for _ in range(n):
                        result = _call(fn, synchronize and not pipelined)
                    if pipelined and synchronize:
                        block(result)  # the repeat ends when its last call is done
                    times[name].append((time.perf_counter() - start) / n)
                    if not synchronize:
                        queued[name] = result
                        if len(running) > 1:
                            block(queued.pop(name))  # drain before another function's repeat
                except Exception as error:
                    if not keep_errors:
                        raise
                    errors[name] = one_line(error)
                    del running[name]
    finally:
        if gc_was_enabled:
            gc.enable()
    for result in queued.values():
        block(result)  # drain what the unsynchronised repeats left queued
    timings = {name: Timing(name, times[name], numbers[name], first[name], synchronize,
                            [statistics.median(times[name])], [first[name]], first_cache=caches[name])
               for name in running}
    return timings, errors


def _pooled(source: Mapping[str, Callable[[], Any]] | Callable[[], Mapping[str, Any]], *, repeats: int,
            processes: int | None, keep_errors: bool, here: Mapping[str, Any] | None = None, **options: Any,
            ) -> tuple[Mapping[str, Any], dict[str, Timing], dict[str, str]]:
    """Build the contestants here (``source()``, or ``source`` itself when it is a mapping, or
    ``here`` when this process built them already from the builder ``source``), time
    the callables among them in this process and, for a builder, in the other processes of
    :func:`pool.processes`, one after another, the starting contestant alternating. Returns
    ``(built, timings, errors)``: what this process built, the pooled :class:`Timing` of every
    contestant that ran in every process, and one error line for each that failed anywhere."""
    pooled = callable(source) and not isinstance(source, Mapping)
    built = here if here is not None else source() if pooled else source
    if not isinstance(built, Mapping):
        raise TypeError(f"a builder returns a mapping of name -> zero-argument callable, got {type(built).__name__}")
    count = pool.processes(processes)
    callables = {n: f for n, f in built.items() if callable(f) and not isinstance(f, BaseException)}
    fns = pool.aa(callables)
    per = max(MIN_REPEATS if count > 1 else 1, math.ceil(repeats / count))
    packed = pool.pack(source if pooled else callables) if count > 1 else b""
    runs: list[dict[str, Timing]] = []
    errors: dict[str, str] = {}
    with quiet.section(", ".join(fns) or "nothing") as busy:
        here, failed = measure_here(fns, repeats=per, keep_errors=keep_errors, shift=0, **options)
        runs.append(here)
        errors.update(failed)
        for index in range(1, count):
            there, failed = pool.measure_elsewhere(packed, index, measure_here, repeats=per, keep_errors=keep_errors, **options)
            runs.append(there)
            errors.update({n: f"{e} (in process {index + 1} of {count})" for n, e in failed.items() if n not in errors})
    floor = floors.floor(processes=count)  # measured at this count of processes, or none
    between = floors.between_runs()
    timings = {}
    for name in fns:
        parts = [run[name] for run in runs if name in run]
        if name in errors or len(parts) < count:
            errors.setdefault(name, "did not run in every process")
            continue
        timings[name] = Timing(name, [t for p in parts for t in p.times_s], parts[0].number, parts[0].first_s,
                               parts[0].synchronized, [p.processes_s[0] for p in parts],
                               [p.first_s for p in parts], floor, list(busy), between, parts[0].first_cache)
    return built, timings, errors


def time_fn(fn: Callable[[], Any], *, name: str | None = None, repeats: int = 7, warmup: int = 1,
            number: int | None = None, min_repeat_s: float = 0.05, max_number: int = 10_000,
            synchronize: bool = True, probe: bool = False) -> Timing:
    """Time ``fn()`` in this process: one observation, for a figure that draws no verdict (a
    bandwidth, what an unsynchronised timer reports). The first call is timed alone (``first_s``);
    then ``warmup`` untimed calls; then ``repeats`` repeats of ``number`` calls each. ``probe``: as in
    :func:`measure_here`."""
    name = name or getattr(fn, "__name__", "fn")
    timings, _ = measure_here({name: fn}, repeats=repeats, warmup=warmup, number=number, min_repeat_s=min_repeat_s,
                              max_number=max_number, synchronize=synchronize, probe=probe)
    return timings[name]


def cores_busy(fn: Callable[[], Any], *, min_s: float = 0.5) -> float:
    """How many CPU cores ``fn()`` keeps busy: this process's CPU time (every thread's) over the wall
    time of synchronised calls, after one untimed call, summed until ``min_s`` of wall time. 1.0 is
    one thread at work; on a GPU it counts the host's share only."""
    _call(fn, True)
    wall = cpu = 0.0
    while wall < min_s:
        cpu_start, wall_start = time.process_time(), time.perf_counter()
        _call(fn, True)
        cpu += time.process_time() - cpu_start
        wall += time.perf_counter() - wall_start
    return cpu / wall


def compare(fns: Mapping[str, Callable[[], Any]] | Callable[[], Mapping[str, Callable[[], Any]]], *,
            repeats: int = 7, warmup: int = 1, min_repeat_s: float = 0.05, max_number: int = 10_000,
            synchronize: bool = True, pipelined: bool = False, processes: int | None = None,
            here: Mapping[str, Callable[[], Any]] | None = None) -> dict[str, Timing]:
    """Time several functions interleaved, in every process of the run (see the module).

    ``fns``: the ``{name: callable}`` mapping (sent by value to each worker process: everything
    the callables hold must pickle with cloudpickle, which takes functions and classes defined in
    a notebook) or a builder, a zero-argument function returning it, built again in each worker.
    ``pipelined=True`` (GPU kernels): a repeat issues its calls back to back and waits once, at
    its end, so the per-call time is the device's throughput rather than launch-and-wait latency.
    ``processes``: how many (default :func:`pool.processes`); ``here``: what the builder built in
    this process already, so that it is not built twice. A function that raises stops it.
    """
    _validate(repeats, warmup)
    _, timings, _ = _pooled(fns, repeats=repeats, processes=processes, keep_errors=False, here=here, warmup=warmup,
                            min_repeat_s=min_repeat_s, max_number=max_number, synchronize=synchronize,
                            pipelined=pipelined)
    if not timings:
        raise ValueError("compare() needs at least one function")
    return timings


def ratio(numerator: Timing, denominator: Timing) -> float:
    """Median time ratio ``numerator / denominator`` (e.g. JAX / PyTorch)."""
    return numerator.median_s / denominator.median_s


class NotApplicable(Exception):
    """A rung that cannot run here, with the reason (e.g. a CUDA-graph rung on
    a machine without a GPU). :func:`ladder` keeps its row as not applicable."""

    @classmethod
    def cuda_graphs(cls, device_type: str) -> NotApplicable:
        """The one reason every CUDA-graph rung gives off a CUDA device."""
        return cls(f"CUDA graphs need a CUDA GPU; this run is on the {device_type.upper()}")


def ladder(candidates: Mapping[str, Any] | Callable[[], Mapping[str, Any]], *, needs: Mapping[str, str] | None = None,
           repeats: int = 7, warmup: int = 1, min_repeat_s: float = 0.05, max_number: int = 10_000,
           pipelined: bool = False, processes: int | None = None, here: Mapping[str, Any] | None = None,
           ) -> tuple[dict[str, dict[str, Any]], dict[str, Timing]]:
    """Time a ladder of tools interleaved in every process of the run, failures kept.

    ``candidates`` (or what its builder returns, as in :func:`compare`) maps
    ``"<framework>/<tool>"`` to a zero-argument callable, to a :class:`NotApplicable` (a rung
    that cannot run on this machine), or to an exception raised while building the tool. A
    callable that raises keeps its row with the error in one line; ``needs`` says per name what
    the tool needs, appended to its error; ``here``, as in :func:`compare`. A callable's ``graph_breaks`` attribute (a
    ``torch.compile`` rung's count) is kept in its entry.

    Returns ``(entries, timings)``: one :func:`sidebyside.lab.ladders.ladder_entry` per
    candidate, in order (the results JSON's ``"ladder"``), and the :class:`Timing` of those that ran.
    """
    _validate(repeats, warmup)
    needs = dict(needs or {})
    built, timings, errors = _pooled(candidates, repeats=repeats, processes=processes, keep_errors=True, here=here,
                                     warmup=warmup, min_repeat_s=min_repeat_s, max_number=max_number,
                                     synchronize=True, pipelined=pipelined)
    entries: dict[str, dict[str, Any]] = {}
    for name, candidate in built.items():
        ladders.split(name)  # "<framework>/<tool>" or a clear error
        if isinstance(candidate, NotApplicable):
            entries[name] = ladders.ladder_entry(not_applicable=str(candidate))
        elif isinstance(candidate, BaseException) or name in errors:
            text = one_line(candidate) if isinstance(candidate, BaseException) else errors[name]
            entries[name] = ladders.ladder_entry(error=text + (f" (needs {needs[name]})" if needs.get(name) else ""))
        else:
            entries[name] = ladders.ladder_entry(timings[name])
            if getattr(candidate, "graph_breaks", None) is not None:
                entries[name]["graph_breaks"] = candidate.graph_breaks
    return entries, timings
