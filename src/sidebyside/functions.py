"""The small functions behind the JIT/autograd and linear-algebra/optimisation posts.

Input contract: every function here takes arrays of ONE framework (NumPy,
JAX or PyTorch, as the name says) and returns the same kind; nothing moves
data between devices or changes dtypes. Frameworks are imported lazily, so
importing this module costs nothing.

- ``f_numpy`` / ``f_jax`` / ``f_torch``: the study's ``f(x) = 0.2x + sin(x) + cos(2x)``,
  element-wise; ``df`` / ``d2f``: its exact first and second derivatives (NumPy).
- ``fit_overhead``: fits ``t(n) = overhead + n * per_element`` to timings, whose
  ratio is the size where dispatch overhead stops dominating.
- ``calibration_data``: a synthetic sensor calibration problem (slope, offset);
  ``calibration_rmse_*``: its RMSE loss in NumPy, JAX and PyTorch;
  ``calibration_lstsq``: its exact least-squares optimum.
- ``matmul_flops`` / ``inverse_flops``: conventional FLOP counts;
  ``GPU_PEAK_TFLOPS`` / ``peak_flops``: published dense peaks of a few GPUs;
  ``cpu_peak_flops_estimate``: an assumption-laden CPU estimate.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import NamedTuple

import numpy as np

__all__ = [
    "f_numpy", "f_jax", "f_torch", "df", "d2f",
    "fit_overhead",
    "Calibration", "calibration_data", "calibration_rmse_numpy", "calibration_rmse_jax",
    "calibration_rmse_torch", "calibration_lstsq",
    "matmul_flops", "inverse_flops", "GPU_PEAK_TFLOPS", "peak_flops", "cpu_peak_flops_estimate",
]


# --- the function of the study -------------------------------------------------

def f_numpy(x):
    """``0.2x + sin(x) + cos(2x)`` for a NumPy array (or scalar)."""
    return 0.2 * x + np.sin(x) + np.cos(2 * x)


def f_jax(x):
    """``0.2x + sin(x) + cos(2x)`` for a JAX array (differentiable, jittable)."""
    import jax.numpy as jnp

    return 0.2 * x + jnp.sin(x) + jnp.cos(2 * x)


def f_torch(x):
    """``0.2x + sin(x) + cos(2x)`` for a torch tensor (autograd, torch.func, torch.compile)."""
    import torch

    return 0.2 * x + torch.sin(x) + torch.cos(2 * x)


def df(x):
    """Exact ``f'(x) = 0.2 + cos(x) - 2 sin(2x)`` (NumPy)."""
    x = np.asarray(x)
    return 0.2 + np.cos(x) - 2 * np.sin(2 * x)


def d2f(x):
    """Exact ``f''(x) = -sin(x) - 4 cos(2x)`` (NumPy)."""
    x = np.asarray(x)
    return -np.sin(x) - 4 * np.cos(2 * x)


# --- where dispatch overhead stops dominating -----------------------------------

def fit_overhead(sizes, seconds) -> tuple[float, float]:
    """Fit ``t(n) = a + b n`` (``a`` fixed overhead in s, ``b`` s per element).

    Least squares on relative residuals ``(a + b n - t) / t``, so that the
    microsecond timings at small ``n`` weigh as much as the second-long ones.
    Both coefficients are clipped at 0. The crossover size ``a / b`` is where
    the work equals the overhead: below it, a call costs mostly dispatch.
    """
    n = np.asarray(sizes, dtype=float)
    t = np.asarray(seconds, dtype=float)
    if n.shape != t.shape or n.size < 2:
        raise ValueError("need at least two (size, seconds) pairs of equal length")
    design = np.stack([1.0 / t, n / t], axis=1)
    (a, b), *_ = np.linalg.lstsq(design, np.ones_like(t), rcond=None)
    return max(float(a), 0.0), max(float(b), 0.0)


# --- sensor calibration ---------------------------------------------------------

class Calibration(NamedTuple):
    """Raw sensor readings ``raw`` and reference values ``reference`` (float64
    NumPy arrays of equal length) with the true ``slope`` and ``offset`` that
    map raw readings to reference values: ``reference ≈ slope * raw + offset``."""

    raw: np.ndarray
    reference: np.ndarray
    slope: float
    offset: float


def calibration_data(seed: int, n: int, slope: float = 1.5, offset: float = 3.0, noise: float = 0.1) -> Calibration:
    """``n`` reference values uniform in [0, 10]; the sensor reads
    ``(reference - offset) / slope`` plus Gaussian noise of std ``noise``."""
    rng = np.random.default_rng(seed)
    reference = rng.uniform(0.0, 10.0, size=n)
    raw = (reference - offset) / slope + noise * rng.standard_normal(n)
    return Calibration(raw, reference, float(slope), float(offset))


def calibration_rmse_numpy(params, raw, reference):
    """RMSE of ``params[0] * raw + params[1]`` against ``reference`` (NumPy)."""
    residual = params[0] * raw + params[1] - reference
    return float(np.sqrt(np.mean(residual**2)))


def calibration_rmse_jax(params, raw, reference):
    """RMSE of ``params[0] * raw + params[1]`` against ``reference`` (JAX)."""
    import jax.numpy as jnp

    residual = params[0] * raw + params[1] - reference
    return jnp.sqrt(jnp.mean(residual**2))


def calibration_rmse_torch(params, raw, reference):
    """RMSE of ``params[0] * raw + params[1]`` against ``reference`` (PyTorch)."""
    import torch

    residual = params[0] * raw + params[1] - reference
    return torch.sqrt(torch.mean(residual**2))


def calibration_lstsq(raw, reference) -> np.ndarray:
    """The exact minimiser ``[slope, offset]`` of the RMSE (linear least squares)."""
    design = np.stack([np.asarray(raw, float), np.ones(len(raw))], axis=1)
    solution, *_ = np.linalg.lstsq(design, np.asarray(reference, float), rcond=None)
    return solution


# --- FLOPs and peaks ------------------------------------------------------------

def matmul_flops(n: int) -> int:
    """FLOPs of an ``n×n @ n×n`` product: ``n^2`` outputs of ``n`` multiplies and
    ``n - 1`` adds, counted as the conventional ``2 n^3``."""
    return 2 * n**3


def inverse_flops(n: int) -> int:
    """FLOPs of an ``n×n`` inverse by LU (LAPACK getrf + getri): ``2/3 n^3 + 4/3 n^3 = 2 n^3``."""
    return 2 * n**3


# Published dense peaks in TFLOP/s (NVIDIA data sheets; TF32 figures are the
# dense ones, i.e. half the "with sparsity" number the data sheets headline).
# "fp64_tensor": FP64 on tensor cores (what DGEMM uses); "fp32": FP32 on the
# CUDA cores (FP32 matmul without TF32); "tf32_tensor": FP32 matmul with TF32.
# Keys are matched, in order, as substrings of the device name.
GPU_PEAK_TFLOPS: dict[str, dict[str, float]] = {
    "H100 PCIe": {"fp64": 26.0, "fp64_tensor": 51.0, "fp32": 51.0, "tf32_tensor": 378.0},
    "H100 NVL": {"fp64": 30.0, "fp64_tensor": 60.0, "fp32": 60.0, "tf32_tensor": 417.5},
    "H100": {"fp64": 34.0, "fp64_tensor": 67.0, "fp32": 67.0, "tf32_tensor": 494.5},  # SXM5 (e.g. "H100 80GB HBM3")
    "H200 NVL": {"fp64": 30.0, "fp64_tensor": 60.0, "fp32": 60.0, "tf32_tensor": 417.5},
    "H200": {"fp64": 34.0, "fp64_tensor": 67.0, "fp32": 67.0, "tf32_tensor": 494.5},  # SXM
    "A100": {"fp64": 9.7, "fp64_tensor": 19.5, "fp32": 19.5, "tf32_tensor": 156.0},
}


def peak_flops(device_name: str, precision: str) -> float | None:
    """Published peak in FLOP/s of a GPU named ``device_name`` (as
    ``torch.cuda.get_device_name`` writes it) for ``precision`` (a key of
    ``GPU_PEAK_TFLOPS`` entries); None for an unknown device."""
    for key, peaks in GPU_PEAK_TFLOPS.items():
        if key.lower() in device_name.lower():
            if precision not in peaks:
                raise KeyError(f"unknown precision {precision!r}; known: {', '.join(peaks)}")
            return peaks[precision] * 1e12
    return None


def cpu_peak_flops_estimate(dtype: str, cores: int | None = None, ghz: float | None = None) -> tuple[float, str]:
    """An ESTIMATE of this CPU's peak FLOP/s for ``dtype`` ("float32"/"float64"),
    with the assumption it rests on, as ``(flops, assumption)``.

    cores × clock × FLOPs per cycle, where FLOPs per cycle assume two fused
    multiply-add units of the widest vector width the CPU flags advertise
    (AVX-512: 512 bit, AVX2+FMA: 256 bit, else 128 bit). The clock is the
    one ``/proc/cpuinfo`` reports now, not the boost clock; on a VM a "core"
    may be a hyper-thread. Treat it as an order of magnitude, not a peak.
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
    if cores is None:
        try:
            cores = len(os.sched_getaffinity(0))
        except AttributeError:
            cores = os.cpu_count() or 1
    if ghz is None:
        ghz = (mhz or 2000.0) / 1000.0
    if "avx512f" in flags:
        bits, isa = 512, "AVX-512"
    elif "avx2" in flags and "fma" in flags:
        bits, isa = 256, "AVX2+FMA"
    else:
        bits, isa = 128, "SSE"
    width = {"float32": 32, "float64": 64}[dtype]
    per_cycle = 2 * 2 * bits // width  # 2 FMA units × 2 FLOPs per FMA × lanes
    flops = cores * ghz * 1e9 * per_cycle
    assumption = f"{cores} cores × {ghz:.2f} GHz × {per_cycle} {dtype} FLOPs/cycle ({isa}, 2 FMA units assumed)"
    return flops, assumption
