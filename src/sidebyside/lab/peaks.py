"""What the hardware can do: published peaks of GPUs and a measured memory
bandwidth, so that a timing can be set beside its floor.

- :data:`GPU_PEAKS`: dense peaks from NVIDIA's data sheets, per GPU model:
  ``fp64`` (CUDA cores), ``fp64_tensor`` (what DGEMM reaches), ``fp32``
  (CUDA cores: a float32 matmul with TF32 off), ``tf32_tensor`` and
  ``bf16_tensor`` (tensor cores, dense: half the "with sparsity" figure the
  data sheets headline), all in TFLOP/s; ``hbm_gbs``: memory bandwidth in
  GB/s (10^9 bytes/s). Keys match the names ``torch.cuda.get_device_name``
  writes, tried in order, as whole words (``GH200`` is not an ``H200``).
- :func:`peak_flops`, :func:`memory_bandwidth`: one figure for a device name
  (None for a GPU not in the table).
- :func:`measure_copy_bandwidth`: a STREAM-like copy (``dst.copy_(src)`` on
  buffers far larger than the caches) on any torch device, with PyTorch's
  threads on a CPU: read plus write bytes per second.
- :func:`floor_seconds`: the least time moving ``nbytes`` can take at a
  bandwidth: the hardware floor of a memory-bound operation.
- :func:`cpu_peak_flops`: a CPU's peak, estimated from its clock and vector
  units, raised to the best rate measured in the run where that beats it,
  and always returned with where it came from.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from pathlib import Path

__all__ = ["GPU_PEAKS", "gpu_peaks", "peak_flops", "memory_bandwidth", "measure_copy_bandwidth", "floor_seconds",
           "cpu_peak_flops_estimate", "cpu_peak_flops", "PRECISIONS"]

PRECISIONS = ("fp64", "fp64_tensor", "fp32", "tf32_tensor", "bf16_tensor")

# NVIDIA data sheets (H100/H200 SXM and NVL, A100, L4, A10). Dense figures.
GPU_PEAKS: dict[str, dict[str, float]] = {
    "H100 PCIe": {"fp64": 26.0, "fp64_tensor": 51.0, "fp32": 51.0, "tf32_tensor": 378.0, "bf16_tensor": 756.0,
                  "hbm_gbs": 2000.0},
    "H100 NVL": {"fp64": 30.0, "fp64_tensor": 60.0, "fp32": 60.0, "tf32_tensor": 417.5, "bf16_tensor": 835.0,
                 "hbm_gbs": 3900.0},
    # SXM5, named e.g. "NVIDIA H100 80GB HBM3"
    "H100": {"fp64": 34.0, "fp64_tensor": 67.0, "fp32": 67.0, "tf32_tensor": 494.5, "bf16_tensor": 989.5,
             "hbm_gbs": 3350.0},
    "H200 NVL": {"fp64": 30.0, "fp64_tensor": 60.0, "fp32": 60.0, "tf32_tensor": 417.5, "bf16_tensor": 835.0,
                 "hbm_gbs": 4800.0},
    # SXM, named "NVIDIA H200"
    "H200": {"fp64": 34.0, "fp64_tensor": 67.0, "fp32": 67.0, "tf32_tensor": 494.5, "bf16_tensor": 989.5,
             "hbm_gbs": 4800.0},
    "A100-SXM4-80GB": {"fp64": 9.7, "fp64_tensor": 19.5, "fp32": 19.5, "tf32_tensor": 156.0, "bf16_tensor": 312.0,
                       "hbm_gbs": 2039.0},
    "A100 80GB PCIe": {"fp64": 9.7, "fp64_tensor": 19.5, "fp32": 19.5, "tf32_tensor": 156.0, "bf16_tensor": 312.0,
                       "hbm_gbs": 1935.0},
    # the 40 GB models, SXM4 and PCIe
    "A100": {"fp64": 9.7, "fp64_tensor": 19.5, "fp32": 19.5, "tf32_tensor": 156.0, "bf16_tensor": 312.0,
             "hbm_gbs": 1555.0},
    "L4": {"fp64": 0.47, "fp64_tensor": 0.47, "fp32": 30.3, "tf32_tensor": 60.0, "bf16_tensor": 121.0,
           "hbm_gbs": 300.0},
    "A10G": {"fp64": 0.98, "fp64_tensor": 0.98, "fp32": 31.2, "tf32_tensor": 62.5, "bf16_tensor": 125.0,
             "hbm_gbs": 600.0},
}


def _matches(key: str, device_name: str) -> bool:
    return re.search(rf"(?<![A-Za-z0-9]){re.escape(key)}(?![A-Za-z0-9])", device_name, re.IGNORECASE) is not None


def gpu_peaks(device_name: str) -> tuple[str, dict[str, float]] | None:
    """``(model key, peaks)`` of the first table entry matching
    ``device_name`` (as ``torch.cuda.get_device_name`` writes it), or None."""
    for key, peaks in GPU_PEAKS.items():
        if _matches(key, device_name):
            return key, peaks
    return None


def peak_flops(device_name: str, precision: str) -> float | None:
    """Published dense peak in FLOP/s of a GPU for ``precision`` (one of
    :data:`PRECISIONS`); None for a GPU not in the table."""
    if precision not in PRECISIONS:
        raise KeyError(f"unknown precision {precision!r}; known: {', '.join(PRECISIONS)}")
    found = gpu_peaks(device_name)
    return None if found is None else found[1][precision] * 1e12


def memory_bandwidth(device_name: str) -> float | None:
    """Published memory bandwidth of a GPU in bytes/s; None if not in the table."""
    found = gpu_peaks(device_name)
    return None if found is None else found[1]["hbm_gbs"] * 1e9


def floor_seconds(nbytes: float, bytes_per_s: float | None) -> float | None:
    """The least time moving ``nbytes`` (read + written) can take at
    ``bytes_per_s``; None when the bandwidth is unknown."""
    if not bytes_per_s:
        return None
    return nbytes / bytes_per_s


def measure_copy_bandwidth(device: str = "cpu", *, nbytes: int = 256 * 2**20, repeats: int = 5,
                           min_repeat_s: float = 0.0) -> dict:
    """A STREAM-like copy: ``dst.copy_(src)`` of ``nbytes`` float32 on a torch
    ``device`` ("cpu" or "cuda"), timed by the harness (:func:`sidebyside.lab.timing.time_fn`:
    first call apart, every call synchronised, ``repeats`` repeats). The buffers should be far
    larger than the last-level cache (the default, 256 MiB each, is). Counts read plus written
    bytes, as STREAM does (a CPU's write-allocate traffic is not counted).

    Returns ``{"bytes_per_s" (median), "median_s", "nbytes_moved", "threads",
    "device", "method"}``.
    """
    import torch

    from sidebyside.lab import timing

    torch_device = torch.device("cuda" if device in ("cuda", "gpu") else device)
    n = nbytes // 4
    src = torch.ones(n, dtype=torch.float32, device=torch_device)
    dst = torch.empty_like(src)
    median = timing.time_fn(lambda: dst.copy_(src), name="copy", repeats=repeats, min_repeat_s=min_repeat_s,
                            probe=True).median_s
    moved = 2 * n * 4
    return {"bytes_per_s": moved / median, "median_s": median, "nbytes_moved": moved,
            "threads": torch.get_num_threads() if torch_device.type == "cpu" else None,
            "device": str(torch_device),
            "method": f"torch copy_ of {n * 4 / 2**20:.0f} MiB float32, read + write bytes, median of {repeats}"}


def cpu_peak_flops_estimate(dtype: str, cores: int | None = None, ghz: float | None = None) -> tuple[float, str]:
    """An ESTIMATE of this CPU's peak FLOP/s for ``dtype`` ("float32"/"float64"),
    with the assumption it rests on, as ``(flops, assumption)``.

    cores × clock × FLOPs per cycle, where FLOPs per cycle assume two fused
    multiply-add units of the widest vector width the CPU flags advertise
    (AVX-512: 512 bit, AVX2+FMA: 256 bit, else 128 bit). The clock is the
    highest the kernel reports (``cpuinfo_max_freq``) where it does, else the
    one ``/proc/cpuinfo`` reports now, which may be below the boost clock; on
    a VM a "core" may be a hyper-thread.
    """
    flags, mhz = set(), None
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("flags") and not flags:
                flags = set(line.split(":", 1)[1].split())
            elif line.startswith("cpu MHz") and mhz is None:
                mhz = float(line.split(":", 1)[1])
    except OSError:
        pass
    clock_source = "current clock from /proc/cpuinfo"
    try:
        max_khz = float(Path("/sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq").read_text())
        mhz, clock_source = max_khz / 1000, "maximum clock from cpufreq"
    except (OSError, ValueError):
        pass
    if cores is None:
        try:
            cores = len(os.sched_getaffinity(0))
        except AttributeError:
            cores = os.cpu_count() or 1
    if ghz is None:
        ghz = (mhz or 2000.0) / 1000.0
    else:
        clock_source = "given clock"
    if "avx512f" in flags:
        bits, isa = 512, "AVX-512"
    elif "avx2" in flags and "fma" in flags:
        bits, isa = 256, "AVX2+FMA"
    else:
        bits, isa = 128, "SSE"
    width = {"float32": 32, "float64": 64}[dtype]
    per_cycle = 2 * 2 * bits // width  # 2 FMA units × 2 FLOPs per FMA × lanes
    flops = cores * ghz * 1e9 * per_cycle
    assumption = (f"{cores} {'core' if cores == 1 else 'cores'} × {ghz:.2f} GHz ({clock_source}) × {per_cycle} "
                  f"{dtype} FLOPs/cycle ({isa}, 2 FMA units assumed)")
    return flops, assumption


def cpu_peak_flops(dtype: str, measured: Iterable[float] = (), cores: int | None = None) -> tuple[float, str]:
    """The CPU peak to divide by, and where it comes from.

    The clock-based estimate (:func:`cpu_peak_flops_estimate`) where every
    ``measured`` rate (FLOP/s reached in this run) stays below it; otherwise
    the best measured rate, said so: the estimate's clock was too low, and a
    share of a peak above 100% would be a wrong peak, not a fast library.
    """
    estimate, assumption = cpu_peak_flops_estimate(dtype, cores=cores)
    best = max(measured, default=0.0)
    if best > estimate:
        return best, (f"measured: the best rate reached in this run, since the documented-clock estimate "
                      f"({estimate / 1e9:.0f} GFLOP/s: {assumption}) was below it")
    return estimate, f"estimated: {assumption}"
