"""Measure :func:`sidebyside.grid_sample` against ``torch.nn.functional.grid_sample``.

Used by ``tests/test_grid_sample.py`` and the grid-sample post, so both report the
same thing. Inputs: a configuration (mode, padding, align_corners, 2-D/3-D, dtype
name) and sizes; outputs: maximum absolute and relative errors of the output and of
both gradients, and the tolerance each is held to.

Two kinds of case (``case=``):

- ``"special"`` (:func:`make_inputs`): small images of standard-normal values; the
  sample points (:func:`make_grid`) mix uniform random points in [-2, 2] with the
  places where an implementation is most likely to differ: exactly on pixel centres,
  on pixel edges, at half-pixels, on the image border and far outside it.
- ``"affine"`` (:func:`make_affine_inputs`): PyTorch's own kind of reference case, a
  large image whose sides are not powers of two (2 x 3 x 345 x 456; 3-D 2 x 2 x 7 x
  40 x 300) of integers 0-255, warped by a 45-degree rotation from ``affine_grid``.
  There an unnormalisation rounded once where PyTorch rounds twice (or the reverse)
  moves a coordinate by an ulp, which the slope of the image turns into errors of
  1e-5 of the scale and more; small images and powers of two hide it.

Gradients are those of ``sum(output * cotangent)`` for one random cotangent shared
by both frameworks, i.e. one vector-Jacobian product each for input and grid.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np

__all__ = ["DTYPES", "CASES", "Config", "configs", "make_grid", "make_inputs", "make_affine_inputs", "tolerance",
           "measure", "measure_torch_devices", "run_torch", "run_jax"]

CASES = ("special", "affine")
AFFINE_SIZES = {2: (345, 456), 3: (5, 40, 300)}

DTYPES = ("float16", "bfloat16", "float32", "float64")


@dataclass(frozen=True)
class Config:
    mode: str
    padding_mode: str
    align_corners: bool
    dims: int  # 2 or 3 spatial dimensions
    dtype: str

    @property
    def key(self) -> str:
        return f"{self.mode}/{self.padding_mode}/{self.align_corners}/{self.dims}d/{self.dtype}"


def configs(dtypes=DTYPES) -> list[Config]:
    """Every mode x padding x align_corners x 2-D/3-D x dtype that PyTorch supports."""
    out = []
    for dims, dtype in itertools.product((2, 3), dtypes):
        modes = ("nearest", "bilinear", "bicubic") if dims == 2 else ("nearest", "bilinear")
        for mode, padding, ac in itertools.product(modes, ("zeros", "border", "reflection"), (False, True)):
            out.append(Config(mode, padding, ac, dims, dtype))
    return out


def _special(size: int, align_corners: bool, far_limit: float = 1e3) -> np.ndarray:
    """Normalised coordinates of pixel centres, pixel edges, half-pixels (between
    centres) and points on and far beyond the border, along an axis of ``size``."""
    k = np.arange(-1, size + 1, dtype=np.float64)
    if align_corners:
        centres = 2 * k / max(size - 1, 1) - 1
        between = (2 * k + 1) / max(size - 1, 1) - 1
    else:
        centres = (2 * k + 1) / size - 1
        between = 2 * k / size - 1  # pixel edges, also half-way between centres
    quarter = centres + 0.5 / size
    far = np.array([-1.0, 1.0, -2.0, 2.0, -7.25, 9.5, -1e3, 1e3])
    far = far[np.abs(far) <= far_limit]
    return np.concatenate([centres, between, quarter, far])


def make_grid(generator: np.random.Generator, n: int, out_shape: tuple[int, ...], in_shape: tuple[int, ...], align_corners: bool, far_limit: float = 1e3) -> np.ndarray:
    """A float64 grid (N, *out_shape, dims): half uniform in [-2, 2], half special
    points (per axis, drawn from :func:`_special` of that axis)."""
    dims = len(in_shape)
    grid = generator.uniform(-2, 2, size=(n, *out_shape, dims))
    flat = grid.reshape(-1, dims)
    special = generator.random(flat.shape[0]) < 0.5
    # grid axis 0 is x (last input axis), axis 1 is y, axis 2 is z.
    for axis in range(dims):
        size = in_shape[dims - 1 - axis]
        choices = _special(size, align_corners, far_limit)
        flat[special, axis] = generator.choice(choices, size=int(special.sum()))
    return flat.reshape(grid.shape)


def make_inputs(config: Config, seed: int = 0, batch: int = 2, channels: int = 3, size2d=(7, 9), out2d=(11, 13), size3d=(5, 6, 7), out3d=(4, 5, 6)):
    """Float64 NumPy arrays (input, grid, cotangent) for ``config``."""
    rng = np.random.default_rng(seed)
    in_shape, out_shape = (size2d, out2d) if config.dims == 2 else (size3d, out3d)
    x = rng.standard_normal((batch, channels, *in_shape))
    # float16/bfloat16 cannot hold the pixel coordinate of a point 1000 image widths
    # away with unit spacing (float16's spacing at 3504 is 2), and there PyTorch (which
    # rounds every operation to the dtype) and XLA (which keeps float32 inside a fused
    # loop) reflect different taps: a difference of intermediate precision, not of
    # semantics. Half-precision grids therefore stop at 9.5 image widths.
    far_limit = 1e3 if config.dtype in ("float32", "float64") else 9.5
    grid = make_grid(rng, batch, out_shape, in_shape, config.align_corners, far_limit)
    cot = rng.standard_normal((batch, channels, *out_shape))
    return x, grid, cot


def make_affine_inputs(config: Config, seed: int = 0, batch: int = 2, channels: int = 3, size=None,
                       angle_deg: float = 45.0):
    """Float64 NumPy arrays (input, grid, cotangent): integers 0-255 on an image of
    ``size`` (default :data:`AFFINE_SIZES`), sampled on a grid of the same size from
    ``torch.nn.functional.affine_grid`` (float32) of a rotation by ``angle_deg`` about
    the image's centre (in 3-D, about the depth axis)."""
    import torch
    import torch.nn.functional as F

    rng = np.random.default_rng(seed)
    size = tuple(size or AFFINE_SIZES[config.dims])
    x = rng.integers(0, 256, size=(batch, channels, *size)).astype(np.float64)
    c, s = np.cos(np.deg2rad(angle_deg)), np.sin(np.deg2rad(angle_deg))
    if config.dims == 2:
        theta = np.array([[c, -s, 0.0], [s, c, 0.0]])
    else:
        theta = np.array([[c, -s, 0.0, 0.0], [s, c, 0.0, 0.0], [0.0, 0.0, 1.0, 0.0]])
    theta = torch.tensor(np.broadcast_to(theta, (batch, *theta.shape)).copy(), dtype=torch.float32)
    grid = F.affine_grid(theta, [batch, channels, *size], align_corners=config.align_corners)
    cot = rng.standard_normal((batch, channels, *size))
    return x, grid.double().numpy(), cot


def _torch_dtype(name):
    import torch

    return getattr(torch, name)


def run_torch(config: Config, x, grid, cot, device: str = "cpu"):
    """PyTorch's output and gradients on ``device``, as float64 NumPy arrays."""
    import torch
    import torch.nn.functional as F

    dt = _torch_dtype(config.dtype)
    xt = torch.tensor(x).to(device, dt).requires_grad_(True)
    gt = torch.tensor(grid).to(device, dt).requires_grad_(True)
    out = F.grid_sample(xt, gt, mode=config.mode, padding_mode=config.padding_mode, align_corners=config.align_corners)
    gx, gg = torch.autograd.grad(out, (xt, gt), torch.tensor(cot).to(device, dt))
    return tuple(t.detach().to("cpu", torch.float64).numpy() for t in (out, gx, gg))


def run_jax(config: Config, x, grid, cot, transform: str = "jit", implementation: str = "auto",
            pallas_layout: str = "points"):
    """JAX's output and gradients (``transform``: "none", "jit" or "vmap";
    ``implementation`` and ``pallas_layout`` as in :func:`sidebyside.grid_sample`), as
    float64 NumPy arrays.
    Enable x64 for float64 (``with jax.enable_x64(True):``)."""
    import jax
    import jax.numpy as jnp

    from sidebyside.grid_sample import grid_sample

    dt = jnp.dtype(config.dtype)
    xj, gj, cj = (jnp.asarray(np.asarray(a), dtype=dt) for a in (x, grid, cot))
    if config.dtype == "float64" and xj.dtype != jnp.float64:
        raise RuntimeError("float64 needs x64 enabled: wrap the call in `with jax.enable_x64(True):`")

    def f(xx, gg):
        return grid_sample(xx, gg, config.mode, config.padding_mode, config.align_corners, implementation=implementation,
                           pallas_layout=pallas_layout)

    def value_and_grads(xx, gg, cc):
        out, vjp = jax.vjp(f, xx, gg)
        return (out, *vjp(cc))

    if transform == "jit":
        fn = jax.jit(value_and_grads)
    elif transform == "vmap":
        # Map over the batch: each example becomes a batch of one.
        single = lambda xx, gg, cc: tuple(t[0] for t in value_and_grads(xx[None], gg[None], cc[None]))
        fn = jax.jit(jax.vmap(single))
    elif transform == "none":
        fn = value_and_grads
    else:
        raise ValueError(f"unknown transform {transform!r}")
    return tuple(np.asarray(t.astype(jnp.float32) if t.dtype == jnp.bfloat16 else t, dtype=np.float64) for t in fn(xj, gj, cj))


def tolerance(config: Config, quantity: str = "output", atomic: bool = False) -> float:
    """Tolerance on ``max_abs_err / scale`` (scale: the reference's largest magnitude)
    for ``quantity`` in "output", "grad_input", "grad_grid".

    - nearest: exact (0) for the output and the input gradient (a copy and a sum of
      copies); its grid gradient is identically zero in both. ``atomic=True`` (JAX on
      a GPU, where XLA's scatter and the Pallas kernel both sum the input gradient
      with atomic adds, in an order that changes from run to run, as PyTorch's CUDA
      kernel does): that sum gets the dtype's tolerance below, the copy stays exact.
    - float32: 1e-5, float64: 1e-10. Both frameworks make the same roundings for the
      coordinates (the same formulas, each rounded once or twice where PyTorch's
      kernel on that device rounds it: see :mod:`.taps`), so what remains is the
      order of a few additions in the interpolation and the gradient sums, and a
      multiply-add fused on one side of a weight and not on the other: ~1e-7 and
      ~1e-16. A coordinate off by one ulp is not covered: on the "affine" case it
      costs 1e-5 to 1e-4 of the scale in the output and O(1) in the grid gradient.
    - float16 (eps 2**-10) and bfloat16 (eps 2**-7): PyTorch rounds every operation
      to the dtype; so does JAX here, explicitly for the coordinates (:mod:`.taps`),
      while in the interpolation XLA may keep float32 between fused operations.
      Outputs: 2 eps (one rounding more or less). Gradients: 8 eps; each
      gradient element is a sum, in the dtype, of up to 16 products (bicubic's taps)
      accumulated in a different order, and every rounding of a partial sum can
      differ by eps of it.
    """
    if config.mode == "nearest" and (quantity == "output" or (quantity == "grad_input" and not atomic)):
        return 0.0
    if config.dtype in ("float32", "float64"):
        return {"float32": 1e-5, "float64": 1e-10}[config.dtype]
    eps = {"float16": 2.0**-10, "bfloat16": 2.0**-7}[config.dtype]
    return 2 * eps if quantity == "output" else 8 * eps


def _round_to(a, dtype: str):
    import torch

    return torch.tensor(a).to(_torch_dtype(dtype)).to(torch.float64).numpy()


def _errors(ref, got):
    ref = np.asarray(ref, np.float64)
    got = np.asarray(got, np.float64)
    both_nan = np.isnan(ref) & np.isnan(got)
    diff = np.where(both_nan, 0.0, np.abs(ref - got))
    scale = float(np.nanmax(np.abs(ref))) if ref.size else 0.0
    max_abs = float(np.max(diff)) if diff.size else 0.0
    return max_abs, (max_abs / scale if scale > 0 else max_abs), scale


def _case_inputs(config, seed, case, sizes):
    if case not in CASES:
        raise ValueError(f"case must be one of {CASES}, got {case!r}")
    x, grid, cot = (make_inputs if case == "special" else make_affine_inputs)(config, seed=seed, **sizes)
    return tuple(_round_to(a, config.dtype) for a in (x, grid, cot))  # identical values on both sides


def _compare(config, ref, got, atomic):
    result = {}
    for prefix, r, g in zip(("", "grad_input_", "grad_grid_"), ref, got):
        result[f"{prefix}tolerance"] = tolerance(config, prefix.rstrip("_") or "output", atomic)
        max_abs, max_rel, scale = _errors(r, g)
        result[f"{prefix}max_abs_err"] = max_abs
        result[f"{prefix}max_rel_err"] = max_rel
        result[f"{prefix}scale"] = scale
    result["passed"] = all(result[f"{p}max_rel_err"] <= result[f"{p}tolerance"] for p in ("", "grad_input_", "grad_grid_"))
    return result


def measure_torch_devices(config: Config, seed: int = 0, case: str = "affine", device: str = "cuda", **sizes) -> dict:
    """PyTorch on ``device`` against PyTorch on the CPU (the yardstick for the JAX
    figures), in the form of :func:`measure`."""
    x, grid, cot = _case_inputs(config, seed, case, sizes)
    return _compare(config, run_torch(config, x, grid, cot), run_torch(config, x, grid, cot, device),
                    atomic=device != "cpu")


def measure(config: Config, seed: int = 0, transform: str = "jit", implementation: str = "auto", case: str = "special",
            torch_device: str = "cpu", pallas_layout: str = "points", **sizes) -> dict:
    """Compare both frameworks on one configuration (``case``: see the module
    docstring; ``torch_device``: where PyTorch's reference runs; ``pallas_layout``: as
    in :func:`sidebyside.grid_sample`). Returns
    ``max_abs_err``, ``max_rel_err`` (relative to the reference's largest magnitude)
    and ``scale`` for the output, ``grad_input_*`` and ``grad_grid_*`` likewise, each
    with its ``*tolerance`` (see :func:`tolerance`), and ``passed``."""
    x, grid, cot = _case_inputs(config, seed, case, sizes)
    ref = run_torch(config, x, grid, cot, torch_device)
    if config.dtype == "float64":
        import jax

        with jax.enable_x64(True):
            got = run_jax(config, x, grid, cot, transform, implementation, pallas_layout)
    else:
        got = run_jax(config, x, grid, cot, transform, implementation, pallas_layout)
    import jax

    return _compare(config, ref, got, atomic=jax.default_backend() == "gpu")
