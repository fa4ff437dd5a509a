"""The arithmetic every grid_sample backend shares: coordinates, padding, taps.

This module imports nothing from the rest of the package; the XLA path
(:mod:`.xla`) and the Pallas kernels (:mod:`.pallas`) build their taps with it,
and the native C++ kernel (``grid_sample_cpu.cc``) writes the same rules once more.

Roundings, and why they are explicit here. PyTorch unnormalises a grid value ``g``
with ``((g + 1) * size - 1) / 2`` (its scalar and CUDA kernels) or
``(g + 1) * (size / 2) - 0.5`` (its vectorised 2-D CPU kernel). Its CUDA kernels
(nvcc contracts the multiply and the subtraction into one FMA) and its 2-D CPU
kernel (built with FMA contraction) round that once; its 3-D CPU kernel (scalar code
built without FMA) rounds the product and the difference apart. Whether XLA, Triton
or a C++ compiler contracts ``a * b + c`` depends on the compiler and the context
(XLA:CPU does under ``jit`` and does not op by op), so this module never leaves it to
them: :func:`fma_rn` returns the once-rounded result and :func:`mul_rn` the rounded
product, each computed from products that are exact (so a compiler that does fuse
them changes nothing) and additions (error-free transformations, with one rounding
to odd, after Boldo and Melquiond, "Emulation of FMA and correctly rounded sums:
proved algorithms using rounding to odd", IEEE Trans. Computers, 2008).

=================  =================================  ==============================
unnormalisation    align_corners=False                align_corners=True
=================  =================================  ==============================
fused (2-D; 3-D    ``fma_rn(g + 1, size / 2, -0.5)``  ``mul_rn(g + 1, (size-1) / 2)``
on a GPU)
unfused (3-D on    ``(mul_rn(g + 1, size) - 1) / 2``  ``mul_rn((g + 1) / 2, size-1)``
the CPU)
=================  =================================  ==============================

(``(g + 1) / 2`` and the final ``/ 2`` are exact, so both tables agree with torch's
formulas bit for bit.) float16 and bfloat16 keep the plain expressions, rounded in
the dtype after every operation as PyTorch's CPU kernels round them. XLA may keep
half-precision intermediates in float32 inside a fusion ("excess precision", allowed by
default; a GPU may do so where a CPU does not), which moves a coordinate across a
pixel or reflection boundary now and then. So the coordinate arithmetic of those dtypes
(:func:`unnormalize`, :func:`reflect`) runs in float32 with an explicit rounding to the
dtype after each operation (``lax.reduce_precision``, which XLA keeps): every float32
result of two half-precision operands is exact or, for a quotient, rounded finely
enough that rounding it again to the dtype gives the correctly rounded result, so this
is the dtype's own arithmetic whatever XLA fuses.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np

__all__ = ["FORWARD_MODE_HELP", "first_order_only", "MODES", "PADDING_MODES", "fma_rn", "mul_rn", "round_to_dtype",
           "unnormalize", "pad", "round_half_even", "finite_or_out",
           "cubic_coefficients", "axis_taps", "taps_2d", "taps_3d", "combine_rows"]

MODES = ("nearest", "bilinear", "bicubic")
PADDING_MODES = ("zeros", "border", "reflection")
CUBIC_A = -0.75
# Where PyTorch's CUDA kernel sends a non-finite coordinate: far out of bounds.
OUT_OF_BOUNDS = -100.0

# For each dtype the emulation covers: the integer type of its bits, how many low
# significand bits the split clears, and the most significant bits a constant factor
# may have for both partial products to be exact (12 + 12 <= 24, 27 + 26 <= 53).
_SPLIT = {np.dtype(np.float32): (jnp.int32, 12, 12), np.dtype(np.float64): (jnp.int64, 26, 26)}


FORWARD_MODE_HELP = (
    "grid_sample(): the {path} kernel supports first-order reverse mode (grad, vjp) only; for jax.jvp, "
    "jax.jacfwd, jax.hessian or a gradient of a gradient, pass implementation=\"xla\"."
)


def first_order_only(fn, path: str, static: tuple[int, ...]):
    """``fn`` (a kernel call with static arguments at positions ``static``) wrapped
    so that differentiating it in forward mode, which a gradient of a gradient does
    to the backward kernel, raises ``ValueError`` with :data:`FORWARD_MODE_HELP`
    instead of JAX's generic message about custom calls.

    ``fn`` is jitted too, so that a program calling the kernel many times with the same
    shapes and static arguments (a model's layers, the benchmark's chain of 32 calls)
    lowers it once: without the inner ``jit`` each call site lowers it again, the Triton
    kernel included, although XLA then compiles the identical kernels only once."""
    wrapped = jax.custom_jvp(jax.jit(fn, static_argnums=static), nondiff_argnums=static)

    @wrapped.defjvp
    def _jvp(*args):
        raise ValueError(FORWARD_MODE_HELP.format(path=path))

    return wrapped


# ------------------------------------------------------------- exact roundings


def _exact_dtype(x) -> bool:
    return np.dtype(x.dtype) in _SPLIT


# (exponent bits, significand bits without the implicit one) of the half-precision dtypes
_HALF_FORMATS = {np.dtype(jnp.float16): (5, 10), np.dtype(jnp.bfloat16): (8, 7)}


@functools.partial(jax.custom_jvp, nondiff_argnums=(1,))
def round_to_dtype(v, dtype):
    """float32 ``v`` rounded to the half-precision ``dtype`` (to nearest, ties to even), kept in
    float32: what ``v.astype(dtype).astype(float32)`` gives, in operations XLA does not remove
    (it may drop that pair of casts where it allows excess precision). ``reduce_precision``
    flushes float16's subnormals to zero, so those are rounded on their own grid; bfloat16 has
    float32's exponent range, and its subnormals are float32's, which XLA flushes anyway.
    Derivative: 1."""
    rounded = jax.lax.reduce_precision(v, *_HALF_FORMATS[np.dtype(dtype)])
    info = jnp.finfo(dtype)
    if float(info.smallest_normal) <= float(jnp.finfo(jnp.float32).smallest_normal):
        return rounded
    step = float(info.smallest_subnormal)
    subnormal = jnp.round(v / step) * step  # exact scalings by a power of two; round is ties-to-even
    return jnp.where(jnp.abs(v) < float(info.smallest_normal), subnormal, rounded)


@round_to_dtype.defjvp
def _round_to_dtype_jvp(dtype, primals, tangents):
    return round_to_dtype(primals[0], dtype), tangents[0]


def _in_dtype_arithmetic(x):
    """``(value, rounded, constant, back)`` for arithmetic that rounds like ``x``'s dtype after
    every operation: for float32/float64 ``x`` itself and identities; for float16/bfloat16 ``x`` in
    float32, :func:`round_to_dtype` (apply it to every operation's result), a Python constant
    rounded to the dtype, and the cast back (see the module docstring)."""
    if np.dtype(x.dtype) not in _HALF_FORMATS:
        same = lambda v: v  # noqa: E731
        return x, same, same, same
    dtype = x.dtype
    return (x.astype(jnp.float32), lambda v: round_to_dtype(v, dtype),
            lambda c: float(np.asarray(c, dtype)), lambda v: v.astype(dtype))


def _significant_bits(b: float) -> int:
    """Significant bits of a finite float constant (0 for 0)."""
    if b == 0:
        return 0
    mantissa, _ = np.frexp(abs(b))
    bits = 0
    while mantissa != 0:
        mantissa = mantissa * 2
        bit = np.floor(mantissa)
        mantissa -= bit
        bits += 1
    return bits


def _split(a):
    """``a = high + low`` exactly, ``high`` with the upper half of the significand
    (bit masking: no multiplication a compiler could fuse)."""
    int_type, low_bits, _ = _SPLIT[np.dtype(a.dtype)]
    mask = ~((1 << low_bits) - 1)
    high = jax.lax.bitcast_convert_type(jax.lax.bitcast_convert_type(a, int_type) & jnp.asarray(mask, int_type),
                                        a.dtype)
    return high, a - high


def _exact_product(a, b: float):
    """``(uh, ul)`` with ``uh = RN(a * b)`` and ``uh + ul = a * b`` exactly, for a
    constant ``b`` of at most half the significand's bits: both partial products are
    exact, so fused or not, the result is the same."""
    high, low = _split(a)
    p = high * b
    q = low * b
    uh = p + q
    return uh, q - (uh - p)  # Fast2Sum: |p| >= |q|


def _two_sum(a, b):
    s = a + b
    bb = s - a
    return s, (a - (s - bb)) + (b - bb)


def _round_to_odd_sum(a, b):
    """``a + b`` rounded to odd: the nearest value if exact, else the neighbour whose
    last significand bit is 1 (what makes a second rounding to nearest correct)."""
    s, err = _two_sum(a, b)
    int_type = _SPLIT[np.dtype(s.dtype)][0]
    bits = jax.lax.bitcast_convert_type(s, int_type)
    one = jnp.asarray(1, int_type)
    even = (bits & one) == 0
    away = (err > 0) == (s > 0)  # the exact sum lies further from zero than s
    fixed = jnp.where(away, bits + one, bits - one)
    return jax.lax.bitcast_convert_type(jnp.where((err != 0) & even, fixed, bits), s.dtype)


def _covered(a, b: float) -> bool:
    return _exact_dtype(a) and _significant_bits(b) <= _SPLIT[np.dtype(a.dtype)][2]


@functools.partial(jax.custom_jvp, nondiff_argnums=(1,))
def mul_rn(a, b: float):
    """``a * b`` rounded once, computed so that no compiler can fuse the product
    into a later addition (the product a later ``x - floor(x)`` would otherwise
    absorb). ``b`` is a Python constant; float32/float64 with ``b`` of at most 12/26
    significant bits (every image side below 4097 pixels) are exact, other cases fall
    back to the plain product."""
    if not _covered(a, b):
        return a * b
    uh, _ = _exact_product(a, b)
    return jnp.where(jnp.isfinite(uh), uh, a * b)


@mul_rn.defjvp
def _mul_rn_jvp(b, primals, tangents):
    (a,), (da,) = primals, tangents
    return mul_rn(a, b), da * b


@functools.partial(jax.custom_jvp, nondiff_argnums=(1, 2))
def fma_rn(a, b: float, c: float):
    """``a * b + c`` with one rounding (a fused multiply-add), whatever the compiler
    fuses. ``b`` and ``c`` are Python constants; coverage as :func:`mul_rn`.
    Non-finite results (a non-finite ``a``, overflow) are those of ``a * b + c``."""
    if not _covered(a, b):
        return a * b + c
    uh, ul = _exact_product(a, b)
    # c as data, not a constant: XLA's simplifier folds constants across the additions
    # of the error-free sum ((uh + c) - c -> uh), which would lose the error term.
    th, tl = _two_sum(jnp.where(a == a, jnp.asarray(c, a.dtype), a), uh)
    out = th + _round_to_odd_sum(tl, ul)
    plain = a * b + c
    return jnp.where(jnp.isfinite(plain) & jnp.isfinite(uh), out, plain)


@fma_rn.defjvp
def _fma_rn_jvp(b, c, primals, tangents):
    (a,), (da,) = primals, tangents
    return fma_rn(a, b, c), da * b


# ---------------------------------------------------------------- coordinate maps


def unnormalize(g, size: int, align_corners: bool, fused: bool = True):
    """Grid value in [-1, 1] -> pixel coordinate, with PyTorch's roundings: ``fused``
    as its CUDA and 2-D CPU kernels (one rounding), else as its 3-D CPU kernel (see
    the module docstring). Gradient: ``size / 2`` (``(size - 1) / 2``)."""
    if not _exact_dtype(g):  # half precision: as written, each operation rounded to the dtype
        v, r, c, back = _in_dtype_arithmetic(g)
        if align_corners:
            return back(r(r(v + 1) * c((size - 1) / 2)) if fused else r(r(r(v + 1) / 2) * c(size - 1)))
        return back(r(r(r(v + 1) * c(size / 2)) - 0.5) if fused else r(r(r(r(v + 1) * c(size)) - 1) / 2))
    if align_corners:
        return mul_rn(g + 1, (size - 1) / 2) if fused else mul_rn((g + 1) / 2, float(size - 1))
    if fused:
        return fma_rn(g + 1, size / 2, -0.5)
    return (mul_rn(g + 1, float(size)) - 1) / 2


def clip(x, size: int):
    """Clamp to [0, size - 1]. NaN goes to 0. The gradient is 1 strictly inside and
    0 on or beyond either border (PyTorch's ``clip_coordinates_set_grad``)."""
    high = size - 1
    below = ~(x > 0)  # NaN counts as below: it is clamped to 0
    above = x >= high
    return jnp.where(below, jnp.zeros_like(x), jnp.where(above, jnp.full_like(x, high), x))


def reflect(x, size: int, align_corners: bool, vectorised: bool):
    """Reflect about -0.5 and size - 0.5 (``align_corners=False``) or about 0 and
    size - 1 (``True``) until the coordinate lies between them, in the arithmetic of
    PyTorch's vectorised 2-D CPU kernel or (``vectorised=False``) its scalar one. The
    gradient is +-1, its sign that of PyTorch's ``reflect_coordinates_set_grad``.
    (Every product here is of integers, exact: fusing cannot change it.)"""
    if align_corners:
        low, span = 0.0, float(size - 1)
    else:
        low, span = -0.5, float(size)
    if span == 0:
        return jnp.zeros_like(x)
    v, r, c, back = _in_dtype_arithmetic(x)  # half precision: each operation rounded to the dtype
    span = c(span)
    t = r(v - low)
    negative = t < 0
    a = jnp.where(negative, -t, t)  # d a / d x is -1 or +1 (+1 at 0, as PyTorch)
    if vectorised:
        twice = c(2 * span)
        double_flips = jax.lax.stop_gradient(jnp.trunc(r(a / twice)))
        extra = r(a - r(double_flips * twice))
        reflected = r(twice - extra)
        flip = extra > reflected
        return back(r(jnp.where(flip, reflected, extra) + low))
    extra = r(jnp.fmod(a, span))
    flips = jax.lax.stop_gradient(jnp.floor(r(a / span)))
    odd = jnp.fmod(flips, 2) == 1
    return back(jnp.where(odd, r(r(span - extra) + low), r(extra + low)))


def pad(x, size: int, padding_mode: str, align_corners: bool, vectorised: bool = True):
    """Coordinate ``x`` after ``padding_mode`` (``border``: clipped; ``reflection``: reflected, then clipped;
    ``zeros``: unchanged) for an axis of ``size`` pixels."""
    if padding_mode == "border":
        return clip(x, size)
    if padding_mode == "reflection":
        return clip(reflect(x, size, align_corners, vectorised), size)
    return x


def round_half_even(x):
    """Round to the nearest integer, ties to even (``nearbyint``), exactly, with
    operations Pallas' Triton lowering has (it has no ``round``): ``x - floor(x)`` is
    exact in floating point."""
    r = jnp.floor(x)
    d = x - r
    odd = (r - 2 * jnp.floor(r / 2)) == 1
    return jnp.where((d > 0.5) | ((d == 0.5) & odd), r + 1, r)


def finite_or_out(x):
    """A coordinate that is still non-finite after padding samples nothing."""
    return jnp.where(jnp.isfinite(x), x, jnp.full_like(x, OUT_OF_BOUNDS))


def cubic_coefficients(t):
    """Keys' cubic convolution weights (A = -0.75) of the four taps at -1, 0, 1, 2
    for fractional offset ``t``, in the form of PyTorch's vectorised kernel. (Whether
    these multiply-adds are fused moves a weight by an ulp at most; the tolerance of
    :mod:`.parity` covers that, unlike a coordinate moved by an ulp, which moves the
    sample by the image's slope.)"""
    a = CUBIC_A

    def far(x):  # 1 < x < 2
        return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a

    def near(x):  # 0 <= x <= 1
        return ((a + 2) * x - (a + 3)) * x * x + 1

    return [far(t + 1), near(t), near(1 - t), far(2 - t)]


# ------------------------------------------------------------------------- taps


def axis_taps(x0, offsets, size: int):
    """For integer-valued float corner ``x0`` and integer ``offsets``, the safe int32
    index of each tap and whether it lies inside ``[0, size)``."""
    taps = []
    for k in offsets:
        xk = x0 + k
        inside = (xk >= 0) & (xk <= size - 1)
        taps.append((jnp.where(inside, xk, 0).astype(jnp.int32), inside))
    return taps


def combine_rows(rows, gather, expand=lambda a: a):
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


def taps_2d(gx, gy, h: int, w: int, mode: str, padding_mode: str, align_corners: bool):
    """The taps of 2-D sampling at grid values ``gx``, ``gy`` (arrays of one shape),
    as rows ``[(row_weight | None, [(index, inside, weight | None), ...]), ...]``:
    ``index`` is the int32 flat pixel index ``y * w + x`` (0 where outside),
    ``inside`` whether the tap lies in the image, and the sample is
    ``sum(row_weight * sum(where(inside, input[index], 0) * weight))``.
    The XLA path and the Pallas kernels both build on this one function."""
    x = unnormalize(gx, w, align_corners)
    y = unnormalize(gy, h, align_corners)

    if mode == "bicubic":
        x0 = jax.lax.stop_gradient(jnp.floor(x))
        y0 = jax.lax.stop_gradient(jnp.floor(y))
        cx = cubic_coefficients(x - x0)
        cy = cubic_coefficients(y - y0)

        def tap(c0, k, size):
            # PyTorch pads each integer tap, then truncates it to an index.
            t = pad(c0 + k, size, padding_mode, align_corners)
            inside = (t > -1) & (t < size)  # t is integer-valued (or NaN: outside)
            return jnp.where(inside, jnp.trunc(t), 0).astype(jnp.int32), inside

        xs = [tap(x0, k, w) for k in (-1, 0, 1, 2)]
        ys = [tap(y0, k, h) for k in (-1, 0, 1, 2)]
        return [(cy[j], [(iy * w + ix, mx & my, cx[i]) for i, (ix, mx) in enumerate(xs)])
                for j, (iy, my) in enumerate(ys)]

    x = finite_or_out(pad(x, w, padding_mode, align_corners))
    y = finite_or_out(pad(y, h, padding_mode, align_corners))
    if mode == "nearest":
        xn = jax.lax.stop_gradient(round_half_even(x))  # half to even, as nearbyint
        yn = jax.lax.stop_gradient(round_half_even(y))
        (ix, mx), = axis_taps(xn, (0,), w)
        (iy, my), = axis_taps(yn, (0,), h)
        return [(None, [(iy * w + ix, mx & my, None)])]

    x0 = jax.lax.stop_gradient(jnp.floor(x))
    y0 = jax.lax.stop_gradient(jnp.floor(y))
    # Weights as PyTorch's vectorised CPU kernel forms them.
    wx = x - x0
    ex = 1 - wx
    ny = y - y0
    sy = 1 - ny
    (ixw, mxw), (ixe, mxe) = axis_taps(x0, (0, 1), w)
    (iyn, myn), (iys, mys) = axis_taps(y0, (0, 1), h)
    return [(None, [
        (iyn * w + ixw, myn & mxw, sy * ex),
        (iyn * w + ixe, myn & mxe, sy * wx),
        (iys * w + ixw, mys & mxw, ny * ex),
        (iys * w + ixe, mys & mxe, ny * wx),
    ])]


def taps_3d(gx, gy, gz, d: int, h: int, w: int, mode: str, padding_mode: str, align_corners: bool, fused: bool):
    """The taps of 3-D sampling (nearest, trilinear), as one row in the form of
    :func:`taps_2d` with flat index ``(z * h + y) * w + x``, in the arithmetic of
    PyTorch's scalar 3-D kernel; ``fused``: unnormalise as its CUDA kernel (one
    rounding) rather than its CPU kernel (two)."""
    coords = []
    for g, size in ((gx, w), (gy, h), (gz, d)):
        u = unnormalize(g, size, align_corners, fused)
        coords.append(finite_or_out(pad(u, size, padding_mode, align_corners, vectorised=False)))
    x, y, z = coords

    if mode == "nearest":
        (ix, mx), (iy, my), (iz, mz) = (axis_taps(jax.lax.stop_gradient(round_half_even(v)), (0,), size)[0]
                                        for v, size in ((x, w), (y, h), (z, d)))
        return [(None, [((iz * h + iy) * w + ix, mx & my & mz, None)])]

    x0, y0, z0 = (jax.lax.stop_gradient(jnp.floor(v)) for v in (x, y, z))
    x1, y1, z1 = x0 + 1, y0 + 1, z0 + 1
    # Distances as PyTorch's scalar 3-D kernel forms them (far corner minus point).
    dxw, dxe = x1 - x, x - x0
    dyn, dys = y1 - y, y - y0
    dzt, dzb = z1 - z, z - z0
    (ixw, mxw), (ixe, mxe) = axis_taps(x0, (0, 1), w)
    (iyn, myn), (iys, mys) = axis_taps(y0, (0, 1), h)
    (izt, mzt), (izb, mzb) = axis_taps(z0, (0, 1), d)
    corners = []
    for iz, mz, wz in ((izt, mzt, dzt), (izb, mzb, dzb)):
        for iy, my, wy in ((iyn, myn, dyn), (iys, mys, dys)):
            for ix, mx, wx in ((ixw, mxw, dxw), (ixe, mxe, dxe)):
                corners.append(((iz * h + iy) * w + ix, mz & my & mx, wx * wy * wz))
    return [(None, corners)]
