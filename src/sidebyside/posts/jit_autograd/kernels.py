"""Kernel time: what the GPU computes per call, apart from launch and synchronisation.

A synchronised per-call time (:func:`sidebyside.lab.timing.time_fn`) holds the host's
dispatch, the kernel launches, the kernels themselves and the wait for the result. The
framework's profiler sees the kernels alone: this module runs a warmed callable ``calls``
times under it (``torch.profiler`` with CUDA activity; ``jax.profiler.trace``) and returns
the GPU's kernel time per call, so that a post can say how much of a call is launch and
synchronisation overhead (the call's time minus its kernel time).

Two steps, kept apart so that the second is testable without a GPU:

- collect a trace: :func:`collect_torch` (PyTorch's profiler events) and :func:`collect_jax`
  (JAX's trace, read back as ``jax.profiler.ProfileData``); both need a CUDA GPU.
- sum the device events: :func:`torch_device_events` keeps the events on the CUDA device whose
  activity is a kernel (``"kernel"``), and apart the memory copies and fills (``"gpu_memcpy"``,
  ``"gpu_memset"``); host events, CUDA runtime calls and GPU annotations (spans that cover
  kernels) are left out. :func:`jax_device_events` keeps the events of the device plane
  (``/device:GPU:<index>``) that carry the ``kernel_details`` statistic (the kernels), and apart
  those that carry memcpy or memset details; the host planes and the lines derived from the
  kernels ("XLA Ops", "XLA Modules", "Steps": the same time again) are left out.
  :func:`summarise` turns those into a :class:`KernelTime`.

:func:`torch_kernel_time` and :func:`jax_kernel_time` do both steps; :func:`measure` does them
for a ladder of ``"<framework>/<tool>"`` callables and keeps a failure as its row's error. On a
machine without a CUDA GPU they raise :class:`sidebyside.lab.timing.NotApplicable`: kernel
time needs a CUDA GPU.
"""

from __future__ import annotations

import dataclasses
import tempfile
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from sidebyside.lab import timing

__all__ = ["KernelTime", "summarise", "torch_device_events", "jax_device_events", "collect_torch", "collect_jax",
           "torch_kernel_time", "jax_kernel_time", "measure", "CALLS"]

#: Calls profiled per measurement: the kernel time is their total over this count.
CALLS = 20

#: PyTorch (Kineto) activity types of device work: kernels, and memory copies and fills.
_TORCH_KERNEL = "kernel"
_TORCH_COPIES = ("gpu_memcpy", "gpu_memset")
#: Statistics that mark device work on JAX's device plane (XSpace stat names).
_JAX_KERNEL = "kernel_details"
_JAX_COPIES = ("memcpy_details", "memset_details")


@dataclasses.dataclass(frozen=True)
class KernelTime:
    """The device's work per call, in seconds, over ``calls`` profiled calls.

    ``kernel_s``: the kernels' total time divided by ``calls``; ``copy_s``: the same for memory
    copies and fills on the device; ``kernels_per_call``: kernels launched per call; ``top``:
    the kernels that took the most time, each ``(name, seconds per call, launches per call)``,
    the largest first.
    """

    calls: int
    kernel_s: float
    copy_s: float
    kernels_per_call: float
    top: tuple[tuple[str, float, float], ...]

    @property
    def device_s(self) -> float:
        """Time the device was busy per call: kernels and copies."""
        return self.kernel_s + self.copy_s

    def to_dict(self) -> dict[str, Any]:
        """The results JSON's form: ``kernel_s``, ``copy_s``, ``kernels_per_call``, ``calls`` and
        ``top`` (a list of ``{"name", "s", "count"}``, per call)."""
        return {"kernel_s": self.kernel_s, "copy_s": self.copy_s, "kernels_per_call": self.kernels_per_call,
                "calls": self.calls, "top": [{"name": n, "s": s, "count": c} for n, s, c in self.top]}


def summarise(kernels: Iterable[tuple[str, float]], copies: Iterable[tuple[str, float]] = (), *, calls: int,
              top: int = 5) -> KernelTime:
    """Per-call kernel time from device events: ``kernels`` and ``copies`` are ``(name, seconds)``
    pairs, one per event, from ``calls`` calls. Kernels of the same name are added up for ``top``."""
    _validate(calls)
    total: defaultdict[str, float] = defaultdict(float)
    count: Counter[str] = Counter()
    for name, seconds in kernels:
        total[name] += seconds
        count[name] += 1
    ranked = sorted(total, key=lambda n: (-total[n], n))[:top]
    return KernelTime(calls=calls, kernel_s=sum(total.values()) / calls,
                      copy_s=sum(seconds for _, seconds in copies) / calls,
                      kernels_per_call=sum(count.values()) / calls,
                      top=tuple((n, total[n] / calls, count[n] / calls) for n in ranked))


# ----------------------------------------------------------------------------- summing the device events


def torch_device_events(events: Iterable[Any], *, gpu: int = 0) -> tuple[list[tuple[str, float]],
                                                                          list[tuple[str, float]]]:
    """``(kernels, copies)``, each a list of ``(name, seconds)``, from PyTorch profiler events
    (``prof.events()``: ``FunctionEvent``\\ s): the events on CUDA device ``gpu`` whose activity
    type is a kernel, and those that copy or fill memory. Each event's time is its span on the
    device (what ``device_time_total`` reports for a device event). Everything else (CPU
    operators, CUDA runtime calls, GPU user annotations) is left out."""
    from torch.autograd import DeviceType

    kernels, copies = [], []
    for event in events:
        if event.device_type != DeviceType.CUDA or event.device_index != gpu:
            continue
        kind = _torch_kind(event)
        seconds = event.time_range.elapsed_us() * 1e-6
        if kind == _TORCH_KERNEL:
            kernels.append((event.name, seconds))
        elif kind in _TORCH_COPIES:
            copies.append((event.name, seconds))
    return kernels, copies


def _torch_kind(event: Any) -> str:
    """A device event's Kineto activity type. Where ``FunctionEvent`` does not keep it (PyTorch 2.11
    among others), it is told from what the event does keep: a GPU annotation is marked
    ``is_user_annotation``, Kineto names copies and fills ``Memcpy ...`` and ``Memset ...``, and the
    rest of the device's events are kernels."""
    kind = getattr(event, "activity_type", None)
    if kind:
        return str(kind).lower()
    if getattr(event, "is_user_annotation", False):
        return "gpu_user_annotation"
    name = event.name.lower()
    return "gpu_memcpy" if name.startswith("memcpy") else "gpu_memset" if name.startswith("memset") else _TORCH_KERNEL


def _device_plane(gpu: int) -> str:
    return f"/device:GPU:{gpu}"


def jax_device_events(profile: Any, *, gpu: int = 0) -> tuple[list[tuple[str, float]], list[tuple[str, float]]]:
    """``(kernels, copies)``, each a list of ``(name, seconds)``, from a JAX trace
    (``jax.profiler.ProfileData``, or anything with its ``planes`` / ``lines`` / ``events`` /
    ``stats``): on the device plane ``/device:GPU:<gpu>`` only, the events that carry the
    ``kernel_details`` statistic (kernels) and those that carry memcpy or memset details
    (copies). Host planes and the lines derived from the kernels carry neither: left out.
    A trace without that plane gives two empty lists."""
    kernels, copies = [], []
    for plane in profile.planes:
        if plane.name != _device_plane(gpu):
            continue
        for line in plane.lines:
            for event in line.events:
                stats = {str(name).lower() for name, _ in event.stats}
                seconds = event.duration_ns * 1e-9
                if _JAX_KERNEL in stats:
                    kernels.append((event.name, seconds))
                elif stats.intersection(_JAX_COPIES):
                    copies.append((event.name, seconds))
    return kernels, copies


# ----------------------------------------------------------------------------- collecting a trace


def _validate(calls: int) -> None:
    if calls < 1:
        raise ValueError(f"calls must be >= 1, got {calls}")


def _torch_gpu() -> None:
    import torch

    if not torch.cuda.is_available():
        raise timing.NotApplicable("kernel time needs a CUDA GPU; PyTorch sees none on this machine")


def _jax_gpu(gpu: int) -> None:
    import jax

    try:
        count = len(jax.devices("gpu"))
    except RuntimeError:
        count = 0
    if count <= gpu:
        raise timing.NotApplicable(f"kernel time needs a CUDA GPU; JAX sees {count} GPU"
                                   f"{'s' if count != 1 else ''} on this machine (asked for GPU {gpu})")


def collect_torch(fn: Callable[[], Any], *, calls: int = CALLS, warmup: int = 1) -> list[Any]:
    """PyTorch profiler events (``FunctionEvent``\\ s) of ``calls`` calls of ``fn``, each waited
    for (:func:`sidebyside.lab.timing.block`), under ``torch.profiler`` with CUDA activity;
    ``warmup`` calls run before, outside the profile. Needs a CUDA GPU."""
    _validate(calls)
    _torch_gpu()
    import torch
    from torch.profiler import ProfilerActivity, profile

    for _ in range(warmup):
        timing.block(fn())
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(calls):
            timing.block(fn())
        torch.cuda.synchronize()
    return list(prof.events())


def collect_jax(fn: Callable[[], Any], *, calls: int = CALLS, warmup: int = 1, gpu: int | None = 0) -> Any:
    """JAX's trace (``jax.profiler.ProfileData``) of ``calls`` calls of ``fn``, each waited for,
    under ``jax.profiler.trace`` into a temporary directory; ``warmup`` calls run before, outside
    the trace. Needs a CUDA GPU unless ``gpu=None`` (a trace of whatever runs, e.g. to test
    the reading on a CPU)."""
    _validate(calls)
    if gpu is not None:
        _jax_gpu(gpu)
    import jax

    for _ in range(warmup):
        timing.block(fn())
    with tempfile.TemporaryDirectory(prefix="sidebyside-trace-") as directory:
        with jax.profiler.trace(directory):
            for _ in range(calls):
                timing.block(fn())
        files = sorted(Path(directory).rglob("*.xplane.pb"), key=lambda p: p.stat().st_mtime)
        if not files:
            raise RuntimeError(f"jax.profiler.trace wrote no .xplane.pb file under {directory}")
        return jax.profiler.ProfileData.from_file(str(files[-1]))


def _no_kernels(framework: str, calls: int, gpu: int) -> RuntimeError:
    return RuntimeError(f"{framework}'s profiler recorded no kernel on GPU {gpu} in {calls} calls (is CUPTI, the "
                        "CUDA profiling library, installed and free: no other profiler attached?)")


def torch_kernel_time(fn: Callable[[], Any], *, calls: int = CALLS, warmup: int = 1, gpu: int = 0,
                      top: int = 5) -> KernelTime:
    """The GPU kernel time per call of ``fn`` (PyTorch work on CUDA device ``gpu``), from
    ``torch.profiler``: :func:`collect_torch` then :func:`torch_device_events` and
    :func:`summarise`. Raises :class:`~sidebyside.lab.timing.NotApplicable` without a CUDA GPU."""
    kernels, copies = torch_device_events(collect_torch(fn, calls=calls, warmup=warmup), gpu=gpu)
    if not kernels:
        raise _no_kernels("PyTorch", calls, gpu)
    return summarise(kernels, copies, calls=calls, top=top)


def jax_kernel_time(fn: Callable[[], Any], *, calls: int = CALLS, warmup: int = 1, gpu: int = 0,
                    top: int = 5) -> KernelTime:
    """The GPU kernel time per call of ``fn`` (JAX work on GPU ``gpu``), from ``jax.profiler``:
    :func:`collect_jax` then :func:`jax_device_events` and :func:`summarise`. Raises
    :class:`~sidebyside.lab.timing.NotApplicable` without a CUDA GPU."""
    kernels, copies = jax_device_events(collect_jax(fn, calls=calls, warmup=warmup, gpu=gpu), gpu=gpu)
    if not kernels:
        raise _no_kernels("JAX", calls, gpu)
    return summarise(kernels, copies, calls=calls, top=top)


_BY_FRAMEWORK = {"torch": torch_kernel_time, "jax": jax_kernel_time}


def measure(candidates: Mapping[str, Any], *, calls: int = CALLS, warmup: int = 1,
            gpu: int = 0) -> dict[str, dict[str, Any]]:
    """The kernel time of each ``"<framework>/<tool>"`` callable (a ladder's candidates, as
    :func:`sidebyside.lab.timing.ladder` takes them), with its framework's profiler, JAX's
    candidates first (so a process measures all its candidates in one call), after
    ``warmup`` unprofiled calls (more than one where a tool settles over its first calls, as a
    CUDA graph is recorded only after a warm-up call).

    Returns one row per candidate, in order: :meth:`KernelTime.to_dict` with ``error`` and
    ``not_applicable`` None; or, for a tool whose measurement failed, ``{"error": one line}``;
    for one that cannot be profiled here (no CUDA GPU, a framework without a profiler here, a
    candidate that is not a callable), ``{"not_applicable": reason}``.
    """
    rows: dict[str, dict[str, Any]] = {}
    # JAX's first: once PyTorch's profiler has run in a process (even over CPU operators alone), JAX's
    # cannot subscribe to CUPTI ("cuptiSubscribeV2: ignored due to a previous error")
    for name in sorted(candidates, key=lambda n: n.split("/", 1)[0] != "jax"):
        candidate = candidates[name]
        framework = name.split("/", 1)[0]
        kernel_time = _BY_FRAMEWORK.get(framework)
        try:
            if kernel_time is None:
                raise timing.NotApplicable(f"kernel time is profiled for PyTorch and JAX only, not {framework}")
            if not callable(candidate):
                raise timing.NotApplicable(str(candidate) if isinstance(candidate, BaseException)
                                           else "not a callable")
            rows[name] = {**kernel_time(candidate, calls=calls, warmup=warmup, gpu=gpu).to_dict(), "error": None,
                          "not_applicable": None}
        except timing.NotApplicable as reason:
            rows[name] = {"error": None, "not_applicable": str(reason)}
        except Exception as error:  # a failing profile is a finding: keep its row
            rows[name] = {"error": timing.one_line(error), "not_applicable": None}
    return {name: rows[name] for name in candidates}
