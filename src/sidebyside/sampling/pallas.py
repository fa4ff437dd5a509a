"""Pallas kernels for 2-D ``grid_sample`` on NVIDIA GPUs (Triton backend).

Why: on a GPU, XLA turns :mod:`.xla`'s gathers into several kernels
(coordinates, gathers per corner, the weighted sum; in the backward pass a scatter
for the input gradient), each reading and writing the whole intermediate. These
kernels do what PyTorch's CUDA kernel does: one pass per output point, coordinates
and weights computed once and kept in registers while the channels are read; the
backward pass recomputes the taps and scatters the input gradient with atomic adds.

Semantics are the XLA path's, by construction: both paths build the
taps with the same :func:`.taps.taps_2d`, and the grid gradient is the
forward-mode derivative (``jax.jvp``) of those same weights, so every rule about
borders, reflections, ties and non-finite values holds here too.

Scope: 4-D float32 input (nearest, bilinear, bicubic; every padding and
``align_corners``), on a CUDA device, or anywhere in Pallas' interpreter (slow; what
the CPU tests use). Other dtypes, 5-D input and arrays of 2**31 elements or more use
the XLA path. Under ``jit``, ``vmap`` and ``grad`` (reverse mode: the kernels carry a
``custom_vjp``; forward mode, ``jax.jvp`` of the sampler itself, needs the XLA path).
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np

from .taps import combine_rows, first_order_only, taps_2d

__all__ = ["supported", "grid_sample_pallas"]

BLOCK = 256  # output points per program (a power of two, as Triton wants)
INTERPRET_BLOCK = 64  # smaller blocks keep the interpreter's tests quick
_INT32_LIMIT = 2**31


def supported(input_shape, grid_shape, dtype) -> bool:
    """Whether the kernels handle this call (else use the XLA path)."""
    if len(input_shape) != 4 or jnp.dtype(dtype) != jnp.float32:
        return False
    n, c = input_shape[:2]
    points = int(np.prod(grid_shape[1:3]))
    return int(np.prod(input_shape)) < _INT32_LIMIT and n * c * points < _INT32_LIMIT and 2 * n * points < _INT32_LIMIT


def _pallas():
    from jax.experimental import pallas as pl
    from jax.experimental.pallas import triton as plgpu

    return pl, plgpu


def _points(pl, grid_ref, n, j, points: int, block: int):
    """The block's lanes (clamped into range), whether each is a real point, and its
    grid values; the grid is read in its (N, H_out, W_out, 2) layout."""
    lane = j * block + jax.lax.iota(jnp.int32, block)
    valid = lane < points
    lane = jnp.where(valid, lane, 0)
    at = (n * points + lane) * 2
    return lane, valid, grid_ref[at], grid_ref[at + 1]


def _static(mode, padding_mode, align_corners, c, h, w, points, padded, block):
    return dict(mode=mode, padding_mode=padding_mode, align_corners=align_corners,
                c=c, h=h, w=w, points=points, padded=padded, block=block)


def _forward_kernel(grid_ref, x_ref, out_ref, *, mode, padding_mode, align_corners, c, h, w, points, padded, block):
    pl, _ = _pallas()
    n, j = pl.program_id(0), pl.program_id(1)
    _, _, gx, gy = _points(pl, grid_ref, n, j, points, block)
    rows = taps_2d(gx, gy, h, w, mode, padding_mode, align_corners)

    def channel(ch, carry):
        base = (n * c + ch) * (h * w)
        out_ref[pl.ds((n * c + ch) * padded + j * block, block)] = combine_rows(rows, lambda index: x_ref[base + index])
        return carry

    jax.lax.fori_loop(0, c, channel, 0)


def _scatter_add(plgpu, ref, index, value, mask, interpret: bool):
    """``ref[index] += value`` where ``mask``, with repeated indices summed. On the GPU
    an atomic add; Pallas' interpreter does not sum repeated indices of one atomic add,
    so there it adds one lane at a time."""
    if not interpret:
        plgpu.atomic_add(ref, index, value, mask=mask)
        return
    value = jnp.where(mask, value, 0)

    def lane(k, carry):
        i = index[k]
        ref[i] = ref[i] + value[k]
        return carry

    jax.lax.fori_loop(0, index.shape[0], lane, 0)


def _backward_kernel(grid_ref, x_ref, cot_ref, zeros_ref, ggx_ref, ggy_ref, gin_ref, *, mode, padding_mode,
                     align_corners, c, h, w, points, padded, block, interpret):
    del zeros_ref  # aliased to gin_ref: the input gradient starts at zero
    pl, plgpu = _pallas()
    n, j = pl.program_id(0), pl.program_id(1)
    lane, valid, gx, gy = _points(pl, grid_ref, n, j, points, block)
    rows = taps_2d(gx, gy, h, w, mode, padding_mode, align_corners)
    taps = [(index, inside) for _, cols in rows for index, inside, _ in cols]

    def weights(gx, gy):
        out = []
        for row_weight, cols in taps_2d(gx, gy, h, w, mode, padding_mode, align_corners):
            for _, _, weight in cols:
                if weight is None:
                    weight = jnp.ones_like(gx)
                out.append(weight if row_weight is None else weight * row_weight)
        return tuple(out)

    ones, zeros = jnp.ones_like(gx), jnp.zeros_like(gx)
    weight, d_dx = jax.jvp(weights, (gx, gy), (ones, zeros))
    _, d_dy = jax.jvp(weights, (gx, gy), (zeros, ones))
    with_grid = mode != "nearest"  # nearest passes no gradient to the grid

    def channel(ch, acc):
        ax, ay = acc
        cot = jnp.where(valid, cot_ref[(n * c + ch) * points + lane], 0)
        base = (n * c + ch) * (h * w)
        for (index, inside), wk, dxk, dyk in zip(taps, weight, d_dx, d_dy):
            if with_grid:
                value = jnp.where(inside, x_ref[base + index], 0) * cot
                ax = ax + value * dxk
                ay = ay + value * dyk
            _scatter_add(plgpu, gin_ref, base + index, cot * wk, inside & valid, interpret)
        return ax, ay

    ax, ay = jax.lax.fori_loop(0, c, channel, (zeros, zeros))
    ggx_ref[pl.ds(n * padded + j * block, block)] = ax
    ggy_ref[pl.ds(n * padded + j * block, block)] = ay


@functools.cache
def _relaxed_atomics_params():
    """Compiler parameters whose Triton lowering emits relaxed atomic adds, or None
    where this JAX's internals differ (the kernels then keep Pallas' default).

    Pallas lowers every atomic add with acquire-release semantics, which orders each
    one against the thread's other memory operations. Summing a gradient needs no
    ordering, and PyTorch's CUDA kernel uses relaxed ``atomicAdd``; on an H100 the
    difference is 1.8x in bilinear forward+backward at N = 32, C = 3, 256 x 256
    (0.51 ms against 0.32 ms) and 2.2x in bicubic. This registers a lowering rule for
    a subclass of the Triton compiler parameters that lowers the kernel with the
    relaxed default, for the kernels of this module alone.
    """
    try:
        from jax._src.pallas import core as pallas_core
        from jax._src.pallas.triton import lowering as triton_lowering
        from jax._src.pallas.triton import pallas_call_registration  # noqa: F401 (registers the Triton rule)

        _, plgpu = _pallas()
        rule, platform = pallas_core._backend_lowering_rules[plgpu.CompilerParams]
        defaults = triton_lowering._atomic_rmw.__defaults__
        relaxed = tuple(triton_lowering.tt_dialect.MemSemantic.RELAXED if isinstance(d, type(defaults[1])) else d
                        for d in defaults)
    except (ImportError, AttributeError, KeyError, IndexError, TypeError):
        return None

    class RelaxedAtomics(plgpu.CompilerParams):
        pass

    def lower_relaxed(*args, **kwargs):
        saved = triton_lowering._atomic_rmw.__defaults__
        triton_lowering._atomic_rmw.__defaults__ = relaxed
        try:
            return rule(*args, **kwargs)
        finally:
            triton_lowering._atomic_rmw.__defaults__ = saved

    pallas_core.register_lowering_rule(RelaxedAtomics, lower_relaxed, platform)
    return RelaxedAtomics


def _call(kernel, out_shape, grid, interpret, **kw):
    pl, plgpu = _pallas()
    extra = {}
    if not interpret:
        params = _relaxed_atomics_params() or plgpu.CompilerParams
        extra["compiler_params"] = params(num_warps=4, num_stages=1)
    return pl.pallas_call(kernel, out_shape=out_shape, grid=grid, interpret=interpret, **kw, **extra)


def _geometry(input, grid, interpret):
    n, c, h, w = input.shape
    points = grid.shape[1] * grid.shape[2]
    block = INTERPRET_BLOCK if interpret else BLOCK
    blocks = -(-points // block)
    return n, c, h, w, points, blocks * block, blocks, block


def _forward_call(input, grid, mode, padding_mode, align_corners, interpret):
    n, c, h, w, points, padded, blocks, block = _geometry(input, grid, interpret)
    kernel = functools.partial(_forward_kernel, **_static(mode, padding_mode, align_corners, c, h, w, points, padded, block))
    out = _call(kernel, jax.ShapeDtypeStruct((n * c * padded,), input.dtype), (n, blocks), interpret)(
        grid.reshape(-1), input.reshape(-1))
    return out.reshape(n, c, padded)[:, :, :points].reshape(n, c, *grid.shape[1:3])


_forward = first_order_only(_forward_call, "Pallas", (2, 3, 4, 5))


def _backward_call(input, grid, cot, mode, padding_mode, align_corners, interpret):
    n, c, h, w, points, padded, blocks, block = _geometry(input, grid, interpret)
    kernel = functools.partial(_backward_kernel, interpret=interpret,
                               **_static(mode, padding_mode, align_corners, c, h, w, points, padded, block))
    flat = jax.ShapeDtypeStruct((n * padded,), grid.dtype)
    ggx, ggy, gin = _call(
        kernel, (flat, flat, jax.ShapeDtypeStruct((input.size,), input.dtype)), (n, blocks), interpret,
        input_output_aliases={3: 2},
    )(grid.reshape(-1), input.reshape(-1), cot.reshape(-1), jnp.zeros((input.size,), input.dtype))
    grad_grid = jnp.stack([ggx.reshape(n, padded)[:, :points], ggy.reshape(n, padded)[:, :points]], axis=-1)
    return gin.reshape(input.shape), grad_grid.reshape(grid.shape)


_backward = first_order_only(_backward_call, "Pallas", (3, 4, 5, 6))


@functools.partial(jax.custom_vjp, nondiff_argnums=(2, 3, 4, 5))
def grid_sample_pallas(input, grid, mode: str, padding_mode: str, align_corners: bool, interpret: bool = False):
    """4-D float32 ``grid_sample`` through the Pallas kernels (arguments checked by
    :func:`sidebyside.grid_sample`, which calls this; ``interpret=True`` runs them in
    Pallas' interpreter on any backend)."""
    return _forward(input, grid, mode, padding_mode, align_corners, interpret)


def _vjp_forward(input, grid, mode, padding_mode, align_corners, interpret):
    return _forward(input, grid, mode, padding_mode, align_corners, interpret), (input, grid)


def _vjp_backward(mode, padding_mode, align_corners, interpret, residuals, cot):
    input, grid = residuals
    return _backward(input, grid, cot, mode, padding_mode, align_corners, interpret)


grid_sample_pallas.defvjp(_vjp_forward, _vjp_backward)
