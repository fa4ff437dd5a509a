"""The small functions behind the JIT/autograd and linear-algebra/optimisation posts.

Input contract: every function here takes arrays of ONE framework (NumPy,
JAX or PyTorch, as the name says) and returns the same kind; nothing moves
data between devices or changes dtypes. Frameworks are imported lazily, so
importing this module costs nothing.

- ``f_numpy`` / ``f_jax`` / ``f_torch``: the study's ``f(x) = 0.2x + sin(x) + cos(2x)``,
  element-wise; ``df`` / ``d2f``: its exact first and second derivatives (NumPy).
- ``vmap_grad_f_torch`` / ``vmap_grad_f_jax``, ``hvp_f_torch`` / ``hvp_f_jax``:
  the gradient over a vector and the Hessian-vector product, by each
  framework's transforms (``torch.func`` / ``jax``), to run eager or compiled.
- ``fit_overhead``: fits ``t(n) = overhead + n * per_element`` to timings, whose
  ratio is the size where dispatch overhead stops dominating.
- ``calibration_data``: a synthetic sensor calibration problem (slope, offset);
  ``calibration_rmse_*``: its RMSE loss in NumPy, JAX and PyTorch;
  ``calibration_lstsq``: its exact least-squares optimum.
- ``matmul_flops`` / ``inverse_flops``: conventional FLOP counts;
  ``GPU_PEAK_TFLOPS`` / ``peak_flops`` / ``cpu_peak_flops_estimate``: re-exported
  from :mod:`sidebyside.lab.peaks`, their home.
- ``f_torch_static`` / ``f_torch_dynamic`` / ``f_torch_cudagraphs``: ``f_torch``
  behind distinct entry points, so that ``torch.compile(dynamic=False)``,
  ``torch.compile(dynamic=True)`` and ``mode="reduce-overhead"`` keep separate caches (Dynamo caches
  compiled code per Python code object).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

__all__ = [
    "f_numpy", "f_jax", "f_torch", "f_torch_static", "f_torch_dynamic", "f_torch_cudagraphs", "df", "d2f",
    "vmap_grad_f_torch", "vmap_grad_f_jax", "hvp_f_torch", "hvp_f_jax",
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


def f_torch_static(x):
    """``f_torch``, the entry point to compile with ``dynamic=False``."""
    return f_torch(x)


def f_torch_dynamic(x):
    """``f_torch``, the entry point to compile with ``dynamic=True``."""
    return f_torch(x)


def f_torch_cudagraphs(x):
    """``f_torch``, the entry point to compile with ``mode="reduce-overhead"`` (CUDA graphs)."""
    return f_torch(x)


def vmap_grad_f_torch(x):
    """Element-wise ``f'(x)`` by ``torch.func.vmap(torch.func.grad(f_torch))``,
    PyTorch's counterpart of ``jax.vmap(jax.grad(f))`` (eager, or under
    ``torch.compile``)."""
    import torch

    return torch.func.vmap(torch.func.grad(f_torch))(x)


def vmap_grad_f_jax(x):
    """Element-wise ``f'(x)`` by ``jax.vmap(jax.grad(f_jax))`` (eager, or under ``jax.jit``)."""
    import jax

    return jax.vmap(jax.grad(f_jax))(x)


def _g_torch(x):
    return f_torch(x).sum()


def _g_jax(x):
    return f_jax(x).sum()


def hvp_f_torch(x, v):
    """Hessian-vector product of ``g(x) = sum f(x)``, forward-over-reverse:
    ``torch.func.jvp(torch.func.grad(g), (x,), (v,))``."""
    import torch

    return torch.func.jvp(torch.func.grad(_g_torch), (x,), (v,))[1]


def hvp_f_jax(x, v):
    """Hessian-vector product of ``g(x) = sum f(x)``, forward-over-reverse:
    ``jax.jvp(jax.grad(g), (x,), (v,))``."""
    import jax

    return jax.jvp(jax.grad(_g_jax), (x,), (v,))[1]


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


# Device peaks have their own home, sidebyside.lab.peaks; these names stay for the notebooks that use them.
from sidebyside.lab.peaks import GPU_PEAKS as GPU_PEAK_TFLOPS  # noqa: E402
from sidebyside.lab.peaks import cpu_peak_flops_estimate, peak_flops  # noqa: E402,F401
