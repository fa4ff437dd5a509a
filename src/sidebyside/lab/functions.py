"""The reference and measuring helpers behind the JIT/autograd and linear-algebra/optimisation posts.

Input contract: the functions defined here take and return NumPy arrays or
Python values; none imports PyTorch or JAX or moves data between devices. The
framework code of each post (``f`` and its transforms, the calibration loss) is
written in the notebook's paired cells.

- ``df`` / ``d2f``: the exact first and second derivatives of the study's
  ``f(x) = 0.2x + sin(x) + cos(2x)`` (NumPy), to check autodiff against.
- ``fit_overhead``: fits ``t(n) = overhead + n * per_element`` to timings, whose
  ratio is the size where dispatch overhead stops dominating.
- ``calibration_data``: a synthetic sensor calibration problem (slope, offset);
  ``calibration_lstsq``: the exact least-squares optimum of its RMSE loss.
- ``matmul_flops`` / ``inverse_flops``: conventional FLOP counts (the devices' peaks
  are :mod:`sidebyside.lab.peaks`).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

__all__ = [
    "df", "d2f",
    "fit_overhead",
    "Calibration", "calibration_data", "calibration_lstsq",
    "matmul_flops", "inverse_flops",
]


# --- the exact derivatives of the study's f -------------------------------------

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
