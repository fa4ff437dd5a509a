"""``grid_sample`` in JAX with the semantics of PyTorch's ATen kernels.

Input contract (the layout of ``torch.nn.functional.grid_sample``):

- ``input``: ``(N, C, H, W)`` (4-D) or ``(N, C, D, H, W)`` (5-D), a floating dtype
  (float16, bfloat16, float32, float64).
- ``grid``: ``(N, H_out, W_out, 2)`` or ``(N, D_out, H_out, W_out, 3)``, the same dtype,
  coordinates in ``[-1, 1]`` for the image's extent, ordered ``(x, y[, z])``
  (x indexes W, y indexes H, z indexes D).
- ``mode``: ``"nearest"``, ``"bilinear"`` (trilinear for 5-D, as in PyTorch) or
  ``"bicubic"`` (4-D only); ``padding_mode``: ``"zeros"``, ``"border"`` or
  ``"reflection"``; ``align_corners``: as in PyTorch.
- Output: ``(N, C, H_out, W_out)`` / ``(N, C, D_out, H_out, W_out)``, input's dtype.

What "PyTorch's semantics" means here, point by point:

- Unnormalisation: ``align_corners=True`` maps -1 and 1 to the centres of the corner
  pixels, ``False`` to their outer edges. The 4-D path uses the arithmetic of
  PyTorch's vectorised CPU kernel (``(g + 1) * (size / 2) - 0.5``), the 5-D path that of
  its scalar kernel (``((g + 1) * size - 1) / 2``), so that points exactly on pixel
  centres, edges and half-pixels land on the same side of a boundary. (PyTorch's
  2-D CPU kernel contracts that multiply and subtract into one FMA, as XLA does in a
  jitted function; run op by op, JAX rounds twice, which can move a coordinate by
  one unit in the last place.)
- ``border`` and ``reflection`` act on the float coordinate before interpolation;
  reflection is about -0.5 and size - 0.5 when ``align_corners=False`` (about 0 and
  size - 1 otherwise) and is then clipped to ``[0, size - 1]``.
- Bicubic uses A = -0.75 and applies the padding to each of its 16 integer taps.
- Nearest rounds half to even.
- Half precision (float16, bfloat16) is computed in the dtype, as PyTorch's CPU
  kernels do (they round every operation, so the pixel a coordinate lands on is the
  one a float16 coordinate gives; computing in float32 picks another pixel for about
  0.1% of nearest samples). XLA may keep float32 between fused operations, which
  changes the last bit of some gradients.
- Gradients (with respect to input and grid) are those of PyTorch's backward: a
  coordinate clipped at a border, or equal to it, passes no gradient to the grid (the
  clip is written with ``where``, never ``clip``/``maximum``, which would split a
  gradient 0.5/0.5 at a tie); nearest passes none to the grid at all.

Non-finite grid values (NaN, +-inf) never raise and follow PyTorch's **CUDA**
kernels (``safe_downgrade_to_int_range`` in ATen's ``GridSampler.cuh``):
``border``/``reflection`` clamp a NaN coordinate to 0 and +-inf to the nearer edge
(reflection of an infinity is NaN, hence 0); a coordinate that is still non-finite
after padding (``zeros``) is out of bounds, so it samples 0 and passes a zero
gradient. Bicubic weights computed from a non-finite coordinate are NaN, so bicubic
returns NaN there, as both PyTorch backends do. PyTorch's CPU kernels disagree with
each other: the 2-D CPU kernel returns NaN for ``zeros`` with bilinear, and its
backward crashes the process (segmentation fault, torch 2.14.1) for NaN with
``border``/``reflection``; the 3-D CPU kernel clamps NaN to size - 1.

Under ``jit``, ``vmap`` and ``grad`` it is plain JAX (gathers and ``where``); reverse
and forward mode both work, because no custom derivative rule is involved. By default
(``implementation="auto"``), float32 calls go to a kernel instead: on a CUDA GPU (4-D)
the Pallas kernels of :mod:`sidebyside.sampling_pallas`, which build their taps with
:func:`taps_2d` like this path; on the CPU (4-D and 5-D) the C++ kernel of
:mod:`sidebyside.sampling_native`. Both carry a ``custom_vjp`` (first-order reverse
mode); the tests hold all three to PyTorch.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

__all__ = ["grid_sample", "grid_sample_naive", "choose_implementation", "taps_2d", "MODES", "PADDING_MODES",
           "IMPLEMENTATIONS"]

MODES = ("nearest", "bilinear", "bicubic")
PADDING_MODES = ("zeros", "border", "reflection")
_CUBIC_A = -0.75
# Where PyTorch's CUDA kernel sends a non-finite coordinate: far out of bounds.
_OUT_OF_BOUNDS = -100.0


# --------------------------------------------------------------------------- checks


def _check(input: Any, grid: Any, mode: str, padding_mode: str) -> None:
    if mode not in MODES:
        raise ValueError(
            f"grid_sample(): expected mode to be 'bilinear', 'nearest' or 'bicubic', but got: {mode!r}"
        )
    if padding_mode not in PADDING_MODES:
        raise ValueError(
            "grid_sample(): expected padding_mode to be 'zeros', 'border', or 'reflection', "
            f"but got: {padding_mode!r}"
        )
    in_shape, grid_shape = tuple(np.shape(input)), tuple(np.shape(grid))
    if len(in_shape) not in (4, 5) or len(grid_shape) != len(in_shape):
        raise ValueError(
            "grid_sample(): expected 4D or 5D input and grid with same number of dimensions, "
            f"but got input with sizes {list(in_shape)} and grid with sizes {list(grid_shape)}"
        )
    if in_shape[0] != grid_shape[0]:
        raise ValueError(
            "grid_sample(): expected grid and input to have same batch size, but got "
            f"input with sizes {list(in_shape)} and grid with sizes {list(grid_shape)}"
        )
    spatial = len(in_shape) - 2
    if grid_shape[-1] != spatial:
        raise ValueError(
            f"grid_sample(): expected grid to have size {spatial} in last dimension, but got "
            f"grid with sizes {list(grid_shape)}"
        )
    if any(s == 0 for s in in_shape[2:]):
        raise ValueError(
            f"grid_sample(): expected input to have non-empty spatial dimensions, but input has sizes {list(in_shape)}"
        )
    if mode == "bicubic" and spatial != 2:
        raise ValueError("grid_sample(): bicubic interpolation only supports 4D input")
    in_dtype, grid_dtype = jnp.result_type(input), jnp.result_type(grid)
    if not jnp.issubdtype(in_dtype, jnp.floating) or not jnp.issubdtype(grid_dtype, jnp.floating):
        raise ValueError(
            f"grid_sample(): expected floating-point input and grid, but got {in_dtype} and {grid_dtype}"
        )
    if in_dtype != grid_dtype:
        raise ValueError(
            f"grid_sample(): expected input and grid to have same dtype, but input has {in_dtype} "
            f"and grid has {grid_dtype}"
        )


# ---------------------------------------------------------------- coordinate maps


def _unnormalize(g, size: int, align_corners: bool, vectorised: bool):
    """Grid value in [-1, 1] -> pixel coordinate, with the arithmetic of PyTorch's
    vectorised (4-D CPU) or scalar (5-D CPU) kernel."""
    if vectorised:
        if align_corners:
            return (g + 1) * ((size - 1) / 2)
        return (g + 1) * (size / 2) - 0.5
    if align_corners:
        return ((g + 1) / 2) * (size - 1)
    return ((g + 1) * size - 1) / 2


def _clip(x, size: int):
    """Clamp to [0, size - 1]. NaN goes to 0. The gradient is 1 strictly inside and
    0 on or beyond either border (PyTorch's ``clip_coordinates_set_grad``)."""
    high = size - 1
    below = ~(x > 0)  # NaN counts as below: it is clamped to 0
    above = x >= high
    return jnp.where(below, jnp.zeros_like(x), jnp.where(above, jnp.full_like(x, high), x))


def _reflect(x, size: int, align_corners: bool, vectorised: bool):
    """Reflect about -0.5 and size - 0.5 (``align_corners=False``) or about 0 and
    size - 1 (``True``) until the coordinate lies between them. The gradient is +-1,
    its sign that of PyTorch's backward (``reflect_coordinates_set_grad``)."""
    if align_corners:
        low, span = 0.0, float(size - 1)
    else:
        low, span = -0.5, float(size)
    if span == 0:
        return jnp.zeros_like(x)
    t = x - low
    negative = t < 0
    a = jnp.where(negative, -t, t)  # d a / d x is -1 or +1 (+1 at 0, as PyTorch)
    if vectorised:
        twice = 2 * span
        double_flips = jax.lax.stop_gradient(jnp.trunc(a / twice))
        extra = a - double_flips * twice
        reflected = twice - extra
        flip = extra > reflected
        return jnp.where(flip, reflected, extra) + low
    extra = jnp.fmod(a, span)
    flips = jax.lax.stop_gradient(jnp.floor(a / span))
    odd = jnp.fmod(flips, 2) == 1
    return jnp.where(odd, span - extra + low, extra + low)


def _pad(x, size: int, padding_mode: str, align_corners: bool, vectorised: bool):
    if padding_mode == "border":
        return _clip(x, size)
    if padding_mode == "reflection":
        return _clip(_reflect(x, size, align_corners, vectorised), size)
    return x


def _round_half_even(x):
    """Round to the nearest integer, ties to even (``nearbyint``), exactly, with
    operations Pallas' Triton lowering has (it has no ``round``): ``x - floor(x)`` is
    exact in floating point."""
    r = jnp.floor(x)
    d = x - r
    odd = (r - 2 * jnp.floor(r / 2)) == 1
    return jnp.where((d > 0.5) | ((d == 0.5) & odd), r + 1, r)


def _finite_or_out(x):
    """A coordinate that is still non-finite after padding samples nothing."""
    return jnp.where(jnp.isfinite(x), x, jnp.full_like(x, _OUT_OF_BOUNDS))


# -------------------------------------------------------------------------- gathers


def _axis_taps(x0, offsets, size: int):
    """For integer-valued float corner ``x0`` and integer ``offsets``, the safe int32
    index of each tap and whether it lies inside ``[0, size)``."""
    taps = []
    for k in offsets:
        xk = x0 + k
        inside = (xk >= 0) & (xk <= size - 1)
        taps.append((jnp.where(inside, xk, 0).astype(jnp.int32), inside))
    return taps


def _gather(flat, index):
    """``flat`` (N, C, S), ``index`` (N, P) int32 in [0, S) -> (N, C, P)."""
    return jax.vmap(lambda f, i: f.at[:, i].get(mode="promise_in_bounds"))(flat, index)


def _combine_rows(rows, gather, expand=lambda a: a):
    """Sum the taps of ``rows`` (see :func:`taps_2d`) in their order: within a row
    ``where(inside, value, 0) * weight``, then the row times its weight.
    ``gather(index)`` returns the values at ``index``; ``expand`` broadcasts a
    per-point array against them (over channels)."""
    out = None
    for row_weight, cols in rows:
        row = None
        for index, inside, weight in cols:
            term = jnp.where(expand(inside), gather(index), 0)
            if weight is not None:
                term = term * expand(weight)
            row = term if row is None else row + term
        if row_weight is not None:
            row = row * expand(row_weight)
        out = row if out is None else out + row
    return out


# ------------------------------------------------------------------------- kernels


def taps_2d(gx, gy, h: int, w: int, mode: str, padding_mode: str, align_corners: bool):
    """The taps of 2-D sampling at grid values ``gx``, ``gy`` (arrays of one shape),
    as rows ``[(row_weight | None, [(index, inside, weight | None), ...]), ...]``:
    ``index`` is the int32 flat pixel index ``y * w + x`` (0 where outside),
    ``inside`` whether the tap lies in the image, and the sample is
    ``sum(row_weight * sum(where(inside, input[index], 0) * weight))``.
    The XLA path and the Pallas kernels both build on this one function."""
    x = _unnormalize(gx, w, align_corners, vectorised=True)
    y = _unnormalize(gy, h, align_corners, vectorised=True)

    if mode == "bicubic":
        x0 = jax.lax.stop_gradient(jnp.floor(x))
        y0 = jax.lax.stop_gradient(jnp.floor(y))
        cx = _cubic_coefficients(x - x0)
        cy = _cubic_coefficients(y - y0)

        def tap(c0, k, size):
            # PyTorch pads each integer tap, then truncates it to an index.
            t = _pad(c0 + k, size, padding_mode, align_corners, vectorised=True)
            inside = (t > -1) & (t < size)  # t is integer-valued (or NaN: outside)
            return jnp.where(inside, jnp.trunc(t), 0).astype(jnp.int32), inside

        xs = [tap(x0, k, w) for k in (-1, 0, 1, 2)]
        ys = [tap(y0, k, h) for k in (-1, 0, 1, 2)]
        return [(cy[j], [(iy * w + ix, mx & my, cx[i]) for i, (ix, mx) in enumerate(xs)])
                for j, (iy, my) in enumerate(ys)]

    x = _finite_or_out(_pad(x, w, padding_mode, align_corners, vectorised=True))
    y = _finite_or_out(_pad(y, h, padding_mode, align_corners, vectorised=True))
    if mode == "nearest":
        xn = jax.lax.stop_gradient(_round_half_even(x))  # half to even, as nearbyint
        yn = jax.lax.stop_gradient(_round_half_even(y))
        (ix, mx), = _axis_taps(xn, (0,), w)
        (iy, my), = _axis_taps(yn, (0,), h)
        return [(None, [(iy * w + ix, mx & my, None)])]

    x0 = jax.lax.stop_gradient(jnp.floor(x))
    y0 = jax.lax.stop_gradient(jnp.floor(y))
    # Weights as PyTorch's vectorised CPU kernel forms them.
    wx = x - x0
    ex = 1 - wx
    ny = y - y0
    sy = 1 - ny
    (ixw, mxw), (ixe, mxe) = _axis_taps(x0, (0, 1), w)
    (iyn, myn), (iys, mys) = _axis_taps(y0, (0, 1), h)
    return [(None, [
        (iyn * w + ixw, myn & mxw, sy * ex),
        (iyn * w + ixe, myn & mxe, sy * wx),
        (iys * w + ixw, mys & mxw, ny * ex),
        (iys * w + ixe, mys & mxe, ny * wx),
    ])]


def _sample_2d(input, grid, mode, padding_mode, align_corners):
    n, c, h, w = input.shape
    flat = input.reshape(n, c, h * w)
    rows = taps_2d(grid[..., 0].reshape(n, -1), grid[..., 1].reshape(n, -1), h, w, mode, padding_mode, align_corners)
    out = _combine_rows(rows, lambda index: _gather(flat, index), lambda a: a[:, None, :])
    return out.reshape(n, c, *grid.shape[1:3])


def _cubic_coefficients(t):
    """Keys' cubic convolution weights (A = -0.75) of the four taps at -1, 0, 1, 2
    for fractional offset ``t``, in the form of PyTorch's vectorised kernel."""
    a = _CUBIC_A

    def far(x):  # 1 < x < 2
        return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a

    def near(x):  # 0 <= x <= 1
        return ((a + 2) * x - (a + 3)) * x * x + 1

    return [far(t + 1), near(t), near(1 - t), far(2 - t)]


def _sample_3d(input, grid, mode, padding_mode, align_corners):
    n, c, d, h, w = input.shape
    out_spatial = grid.shape[1:4]
    flat = input.reshape(n, c, d * h * w)
    coords = []
    for axis, size in enumerate((w, h, d)):
        g = grid[..., axis].reshape(n, -1)
        u = _unnormalize(g, size, align_corners, vectorised=False)
        coords.append(_finite_or_out(_pad(u, size, padding_mode, align_corners, vectorised=False)))
    x, y, z = coords

    if mode == "nearest":
        taps = [
            _axis_taps(jax.lax.stop_gradient(_round_half_even(v)), (0,), size)[0]
            for v, size in ((x, w), (y, h), (z, d))
        ]
        (ix, mx), (iy, my), (iz, mz) = taps
        value = jnp.where((mx & my & mz)[:, None, :], _gather(flat, (iz * h + iy) * w + ix), 0)
        return value.reshape(n, c, *out_spatial)

    x0, y0, z0 = (jax.lax.stop_gradient(jnp.floor(v)) for v in (x, y, z))
    x1, y1, z1 = x0 + 1, y0 + 1, z0 + 1
    # Distances as PyTorch's scalar 3-D kernel forms them (far corner minus point).
    dxw, dxe = x1 - x, x - x0
    dyn, dys = y1 - y, y - y0
    dzt, dzb = z1 - z, z - z0
    (ixw, mxw), (ixe, mxe) = _axis_taps(x0, (0, 1), w)
    (iyn, myn), (iys, mys) = _axis_taps(y0, (0, 1), h)
    (izt, mzt), (izb, mzb) = _axis_taps(z0, (0, 1), d)
    corners = []
    for iz, mz, wz in ((izt, mzt, dzt), (izb, mzb, dzb)):
        for iy, my, wy in ((iyn, myn, dyn), (iys, mys, dys)):
            for ix, mx, wx in ((ixw, mxw, dxw), (ixe, mxe, dxe)):
                corners.append(((iz * h + iy) * w + ix, mz & my & mx, wx * wy * wz))
    out = _combine_rows([(None, corners)], lambda index: _gather(flat, index), lambda a: a[:, None, :])
    return out.reshape(n, c, *out_spatial)


# -------------------------------------------------------------------------- public


IMPLEMENTATIONS = ("auto", "xla", "pallas", "native")


def choose_implementation(input_shape, grid_shape, dtype, implementation: str = "auto") -> str:
    """The path :func:`grid_sample` takes for these arguments: ``"pallas"``,
    ``"native"`` or ``"xla"`` (see its ``implementation``). Raises ``ValueError`` when
    the one asked for cannot take them, and the native kernel's build error when it was
    asked for and cannot be built; ``"auto"`` falls back to XLA instead."""
    if implementation not in IMPLEMENTATIONS:
        raise ValueError(f"grid_sample(): implementation must be one of {IMPLEMENTATIONS}, got {implementation!r}")
    backend = jax.default_backend()
    if implementation == "native":
        from . import sampling_native

        if backend != "cpu":
            raise ValueError(f"grid_sample(): the native kernel runs on the CPU backend; this is {backend!r}. "
                             "Use implementation='auto'.")
        if not sampling_native.supported(input_shape, grid_shape, dtype):
            raise ValueError("grid_sample(): the native kernel takes 4-D or 5-D float32 input; got input "
                             f"{list(input_shape)} of {jnp.dtype(dtype)}. Use implementation='xla' (or 'auto').")
        sampling_native.build()  # raises NativeBuildError with the reason
        return "native"
    if implementation == "pallas":
        from . import sampling_pallas

        if not sampling_pallas.supported(input_shape, grid_shape, dtype):
            raise ValueError(
                "grid_sample(): the Pallas kernels take 4-D float32 input (and fewer than 2**31 elements); "
                f"got input {list(input_shape)} of {jnp.dtype(dtype)}. Use implementation='xla' (or 'auto')."
            )
        return "pallas"
    if implementation == "auto" and backend == "gpu":
        from . import sampling_pallas

        if sampling_pallas.supported(input_shape, grid_shape, dtype):
            return "pallas"
    if implementation == "auto" and backend == "cpu":
        from . import sampling_native

        if sampling_native.supported(input_shape, grid_shape, dtype) and sampling_native.available():
            return "native"
    return "xla"


def grid_sample(input, grid, mode: str = "bilinear", padding_mode: str = "zeros", align_corners: bool = False, *,
                implementation: str = "auto"):
    """Sample ``input`` at the locations in ``grid``, exactly as
    ``torch.nn.functional.grid_sample`` does (see the module docstring).

    ``input`` (N, C, H, W) or (N, C, D, H, W); ``grid`` (N, H_out, W_out, 2) or
    (N, D_out, H_out, W_out, 3), same floating dtype. Returns (N, C, H_out, W_out) or
    (N, C, D_out, H_out, W_out) in that dtype. Raises ``ValueError`` on shapes, dtypes,
    modes or paddings PyTorch rejects.

    ``implementation``: ``"xla"`` (gathers, any backend, every transformation),
    ``"pallas"`` (the kernels of :mod:`sidebyside.sampling_pallas`: 4-D float32 only;
    on a backend other than CUDA they run in Pallas' interpreter, slowly),
    ``"native"`` (the C++ CPU kernel of :mod:`sidebyside.sampling_native`: float32 on
    the CPU), or ``"auto"`` (default): the Pallas kernels on a CUDA GPU (4-D float32)
    and the native kernel on the CPU (float32) where they apply, else XLA. Both kernels support
    first-order reverse-mode differentiation only; for ``jax.jvp``, ``jax.jacfwd`` or a
    gradient of a gradient of the sampler, pass ``implementation="xla"``.
    """
    _check(input, grid, mode, padding_mode)
    input = jnp.asarray(input)
    grid = jnp.asarray(grid)
    path = choose_implementation(input.shape, grid.shape, input.dtype, implementation)
    if path == "native":
        from . import sampling_native

        return sampling_native.grid_sample_native(input, grid, mode, padding_mode, bool(align_corners))
    if path == "pallas":
        from . import sampling_pallas

        interpret = jax.default_backend() != "gpu"
        return sampling_pallas.grid_sample_pallas(input, grid, mode, padding_mode, bool(align_corners), interpret)
    if input.ndim == 4:
        out = _sample_2d(input, grid, mode, padding_mode, bool(align_corners))
    else:
        out = _sample_3d(input, grid, mode, padding_mode, bool(align_corners))
    return out.astype(input.dtype)


def grid_sample_naive(input, grid, mode: str = "bilinear", padding_mode: str = "zeros", align_corners: bool = False):
    """The formulation most ports use, kept as the speed baseline: 4-D bilinear only,
    corners gathered with fancy indexing from a zero-padded image, indices clamped
    with ``jnp.clip``. Same contract as :func:`grid_sample` for ``mode="bilinear"``,
    ``padding_mode="zeros"``; not exact elsewhere."""
    if mode != "bilinear" or padding_mode != "zeros" or jnp.ndim(input) != 4:
        raise ValueError("grid_sample_naive() only implements 4-D bilinear with zeros padding")
    n, c, h, w = input.shape
    x = _unnormalize(grid[..., 0], w, align_corners, vectorised=True)
    y = _unnormalize(grid[..., 1], h, align_corners, vectorised=True)
    padded = jnp.pad(input, ((0, 0), (0, 0), (1, 1), (1, 1)))
    x0 = jnp.floor(x)
    y0 = jnp.floor(y)
    batch = jnp.arange(n)[:, None, None]

    def corner(yy, xx):
        yi = jnp.clip(yy + 1, 0, h + 1).astype(jnp.int32)
        xi = jnp.clip(xx + 1, 0, w + 1).astype(jnp.int32)
        return jnp.moveaxis(padded[batch, :, yi, xi], -1, 1)  # (N, C, Ho, Wo)

    wx1 = (x - x0)[:, None]
    wy1 = (y - y0)[:, None]
    wx0, wy0 = 1 - wx1, 1 - wy1
    return (
        corner(y0, x0) * wy0 * wx0
        + corner(y0, x0 + 1) * wy0 * wx1
        + corner(y0 + 1, x0) * wy1 * wx0
        + corner(y0 + 1, x0 + 1) * wy1 * wx1
    )
