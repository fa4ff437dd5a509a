"""Pallas kernels for ``grid_sample`` (2-D and 3-D) on NVIDIA GPUs (Triton backend).

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

Two layouts of the work (``layout=``), the same arithmetic:

- ``"points"`` (the default, what ``implementation="auto"`` runs): a program takes
  :data:`BLOCK` output points of one batch element, computes their taps once and
  loops over the channels one at a time, one gather of ``BLOCK`` values per tap and
  channel. Few programs and a serial loop when there are many channels.
- ``"channels"`` (issue 13: for many channels, where the points layout's serial loop
  over channels is slow): a program takes a tile of :data:`CHANNEL_POINTS` points
  by up to :data:`CHANNEL_BLOCK` channels. The taps are computed once per point and
  reused across the block's channels, and each tap is one gather of the whole
  (channels x points) tile: every row reads neighbouring points of one channel plane,
  and all the block's loads are issued together instead of one channel after another.
  The forward pass puts the channel blocks on the launch grid too (more programs at
  large C); the backward pass loops over them, summing the grid gradient of a block
  across its channels first, and scatters the input gradient of a whole tile in one
  atomic add. Same taps and the same order of the sum per channel as the points
  layout: nearest gives the same bits; elsewhere a compiler may contract a multiply-add
  of the tile where it did not in a row (an ulp, seen in bicubic in the interpreter), and
  the grid gradient sums the channels in another order.

Which layout is faster is for a GPU to say (``python -m sidebyside.posts.bench grid_sample
--pallas-layouts points channels``); ``implementation="auto"`` keeps ``"points"``
until it does.

Scope: float32 input, 4-D (nearest, bilinear, bicubic) or 5-D (nearest, trilinear;
the taps of :func:`.taps.taps_3d`, unnormalised with one rounding as PyTorch's CUDA
kernel does), every padding and ``align_corners``, on a CUDA device, or anywhere in
Pallas' interpreter (slow; what the CPU tests use). Other dtypes and arrays of 2**31
elements or more use the XLA path. Under ``jit``, ``vmap`` and ``grad`` (reverse mode: the kernels carry a
``custom_vjp``; forward mode, ``jax.jvp`` of the sampler itself, needs the XLA path).
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np

from sidebyside.grid_sample.taps import combine_rows, first_order_only, taps_2d, taps_3d

__all__ = ["LAYOUTS", "supported", "grid_sample_pallas"]

LAYOUTS = ("points", "channels")
BLOCK = 256  # output points per program (a power of two, as Triton wants)
INTERPRET_BLOCK = 64  # smaller blocks keep the interpreter's tests quick
CHANNEL_BLOCK = 16  # "channels" layout: channels per tile (a power of two; fewer when C is smaller)
CHANNEL_POINTS = 128  # "channels" layout: output points per tile
INTERPRET_CHANNEL_POINTS = 32
_INT32_LIMIT = 2**31


def supported(input_shape, grid_shape, dtype) -> bool:
    """Whether the kernels handle this call (else use the XLA path)."""
    if len(input_shape) not in (4, 5) or jnp.dtype(dtype) != jnp.float32:
        return False
    n, c = input_shape[:2]
    dims = len(input_shape) - 2
    points = int(np.prod(grid_shape[1:-1]))
    return (int(np.prod(input_shape)) < _INT32_LIMIT and n * c * points < _INT32_LIMIT
            and dims * n * points < _INT32_LIMIT)


def _pallas():
    from jax.experimental import pallas as pl
    from jax.experimental.pallas import triton as plgpu

    return pl, plgpu


def _points(pl, grid_ref, n, j, points: int, block: int, dims: int):
    """The block's lanes (clamped into range), whether each is a real point, and its
    grid values (x, y[, z]); the grid is read in its (N, *out, dims) layout."""
    lane = j * block + jax.lax.iota(jnp.int32, block)
    valid = lane < points
    lane = jnp.where(valid, lane, 0)
    at = (n * points + lane) * dims
    return lane, valid, [grid_ref[at + k] for k in range(dims)]


def _taps(gs, sizes, mode, padding_mode, align_corners):
    """The taps of :mod:`.taps` for grid values ``gs`` (x, y[, z]) on an input of
    spatial ``sizes`` ((H, W) or (D, H, W))."""
    if len(sizes) == 2:
        return taps_2d(*gs, *sizes, mode, padding_mode, align_corners)
    return taps_3d(*gs, *sizes, mode, padding_mode, align_corners, fused=True)  # as PyTorch's CUDA kernel


def _static(mode, padding_mode, align_corners, c, sizes, points, padded, block):
    return dict(mode=mode, padding_mode=padding_mode, align_corners=align_corners,
                c=c, sizes=sizes, points=points, padded=padded, block=block)


def _forward_kernel(grid_ref, x_ref, out_ref, *, mode, padding_mode, align_corners, c, sizes, points, padded, block):
    pl, _ = _pallas()
    n, j = pl.program_id(0), pl.program_id(1)
    _, _, gs = _points(pl, grid_ref, n, j, points, block, len(sizes))
    rows = _taps(gs, sizes, mode, padding_mode, align_corners)
    plane = int(np.prod(sizes))

    def channel(ch, carry):
        base = (n * c + ch) * plane
        out_ref[pl.ds((n * c + ch) * padded + j * block, block)] = combine_rows(rows, lambda index: x_ref[base + index])
        return carry

    jax.lax.fori_loop(0, c, channel, 0)


def _channel_rows(n, k, c, cblock):
    """The channels of tile ``k`` (clamped into range) and whether each is real."""
    ch = k * cblock + jax.lax.iota(jnp.int32, cblock)
    real = ch < c
    return jnp.where(real, ch, 0), real


def _forward_kernel_channels(grid_ref, x_ref, out_ref, *, mode, padding_mode, align_corners, c, sizes, points, padded,
                             block, cblock, cpad):
    pl, _ = _pallas()
    n, j, k = pl.program_id(0), pl.program_id(1), pl.program_id(2)
    _, _, gs = _points(pl, grid_ref, n, j, points, block, len(sizes))
    rows = _taps(gs, sizes, mode, padding_mode, align_corners)
    ch, _ = _channel_rows(n, k, c, cblock)
    base = ((n * c + ch) * int(np.prod(sizes)))[:, None]  # (cblock, 1): each row one channel plane
    tile = combine_rows(rows, lambda index: x_ref[base + index[None, :]], expand=lambda a: a[None, :])
    # Rows of channels past C land in the padding of the output, which the caller drops.
    out_ref[pl.ds(n * cpad + k * cblock, cblock), pl.ds(j * block, block)] = tile


def _scatter_add(plgpu, ref, index, value, mask, interpret: bool):
    """``ref[index] += value`` where ``mask``, with repeated indices summed (``index``
    of any shape). On the GPU an atomic add; Pallas' interpreter does not sum repeated
    indices of one atomic add, so there it adds one element at a time."""
    if not interpret:
        plgpu.atomic_add(ref, index, value, mask=mask)
        return
    index, value = index.reshape(-1), jnp.where(mask, value, 0).reshape(-1)

    def lane(k, carry):
        i = index[k]
        ref[i] = ref[i] + value[k]
        return carry

    jax.lax.fori_loop(0, index.shape[0], lane, 0)


def _backward_kernel(grid_ref, x_ref, cot_ref, zeros_ref, *refs, mode, padding_mode, align_corners, c, sizes,
                     points, padded, block, interpret):
    del zeros_ref  # aliased to gin_ref: the input gradient starts at zero
    *grad_grid_refs, gin_ref = refs  # one per grid axis (x, y[, z]), then the input gradient
    pl, plgpu = _pallas()
    dims = len(sizes)
    n, j = pl.program_id(0), pl.program_id(1)
    lane, valid, gs = _points(pl, grid_ref, n, j, points, block, dims)
    taps, weight, derivatives = _taps_and_derivatives(gs, sizes, mode, padding_mode, align_corners)
    with_grid = mode != "nearest"  # nearest passes no gradient to the grid
    plane = int(np.prod(sizes))
    zeros = jnp.zeros_like(gs[0])

    def channel(ch, acc):
        cot = jnp.where(valid, cot_ref[(n * c + ch) * points + lane], 0)
        base = (n * c + ch) * plane
        acc = list(acc)
        for k, (index, inside) in enumerate(taps):
            if with_grid:
                value = jnp.where(inside, x_ref[base + index], 0) * cot
                acc = [a + value * d[k] for a, d in zip(acc, derivatives)]
            _scatter_add(plgpu, gin_ref, base + index, cot * weight[k], inside & valid, interpret)
        return tuple(acc)

    acc = jax.lax.fori_loop(0, c, channel, (zeros,) * dims)
    for ref, a in zip(grad_grid_refs, acc):
        ref[pl.ds(n * padded + j * block, block)] = a


def _backward_kernel_channels(grid_ref, x_ref, cot_ref, zeros_ref, *refs, mode, padding_mode, align_corners, c, sizes,
                              points, padded, block, cblock, cpad, interpret):
    del zeros_ref, cpad  # zeros_ref: aliased to gin_ref
    *grad_grid_refs, gin_ref = refs
    pl, plgpu = _pallas()
    dims = len(sizes)
    n, j = pl.program_id(0), pl.program_id(1)
    lane, valid, gs = _points(pl, grid_ref, n, j, points, block, dims)
    taps, weight, derivatives = _taps_and_derivatives(gs, sizes, mode, padding_mode, align_corners)
    with_grid = mode != "nearest"
    plane = int(np.prod(sizes))
    zeros = jnp.zeros_like(gs[0])

    def channel_block(k, acc):
        ch, real = _channel_rows(n, k, c, cblock)
        live = real[:, None] & valid[None, :]  # (cblock, block)
        cot = jnp.where(live, cot_ref[((n * c + ch) * points)[:, None] + lane[None, :]], 0)
        base = ((n * c + ch) * plane)[:, None]
        acc = list(acc)
        for t, (index, inside) in enumerate(taps):
            at = base + index[None, :]
            if with_grid:
                value = jnp.where(inside[None, :], x_ref[at], 0) * cot
                # This block's channels summed first, then added to the point's running sum.
                acc = [a + jnp.sum(value * d[t][None, :], axis=0) for a, d in zip(acc, derivatives)]
            _scatter_add(plgpu, gin_ref, at, cot * weight[t][None, :], live & inside[None, :], interpret)
        return tuple(acc)

    acc = jax.lax.fori_loop(0, -(-c // cblock), channel_block, (zeros,) * dims)
    for ref, a in zip(grad_grid_refs, acc):
        ref[pl.ds(n * padded + j * block, block)] = a


def _taps_and_derivatives(gs, sizes, mode, padding_mode, align_corners):
    """For grid values ``gs``: the taps ``(index, inside)`` in :func:`.taps.combine_rows`'
    order, each tap's weight, and per grid axis the derivative of every weight (the
    forward-mode derivative of the same tap arithmetic)."""
    dims = len(sizes)
    rows = _taps(gs, sizes, mode, padding_mode, align_corners)
    taps = [(index, inside) for _, cols in rows for index, inside, _ in cols]

    def weights(*gs):
        out = []
        for row_weight, cols in _taps(gs, sizes, mode, padding_mode, align_corners):
            for _, _, weight in cols:
                if weight is None:
                    weight = jnp.ones_like(gs[0])
                out.append(weight if row_weight is None else weight * row_weight)
        return tuple(out)

    ones, zeros = jnp.ones_like(gs[0]), jnp.zeros_like(gs[0])
    derivatives = []  # per axis: d weight_k / d g_axis
    for axis in range(dims):
        weight, d = jax.jvp(weights, tuple(gs), tuple(ones if k == axis else zeros for k in range(dims)))
        derivatives.append(d)
    return taps, weight, derivatives


@functools.cache
def _relaxed_atomics_params():
    """Compiler parameters whose Triton lowering emits relaxed atomic adds, or None
    where this JAX's internals differ (the kernels then keep Pallas' default).

    Pallas lowers every atomic add with acquire-release semantics, which orders each
    one against the thread's other memory operations. Summing a gradient needs no
    ordering, and PyTorch's CUDA kernel uses relaxed ``atomicAdd``; the ordered adds
    make the backward pass markedly slower. This registers a lowering rule for
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


def _geometry(input, grid, interpret, layout="points"):
    n, c = input.shape[:2]
    sizes = tuple(input.shape[2:])
    points = int(np.prod(grid.shape[1:-1]))
    if layout == "channels":
        block = INTERPRET_CHANNEL_POINTS if interpret else CHANNEL_POINTS
    else:
        block = INTERPRET_BLOCK if interpret else BLOCK
    blocks = -(-points // block)
    return n, c, sizes, points, blocks * block, blocks, block


def _channel_tiles(c):
    """Channels per tile (a power of two, at most :data:`CHANNEL_BLOCK`) and C padded
    to a whole number of tiles."""
    cblock = min(CHANNEL_BLOCK, 1 << max(c - 1, 0).bit_length())
    return cblock, -(-c // cblock) * cblock


def _check_layout(layout):
    if layout not in LAYOUTS:
        raise ValueError(f"grid_sample(): pallas_layout must be one of {LAYOUTS}, got {layout!r}")


def _forward_call(input, grid, mode, padding_mode, align_corners, interpret, layout):
    n, c, sizes, points, padded, blocks, block = _geometry(input, grid, interpret, layout)
    static = _static(mode, padding_mode, align_corners, c, sizes, points, padded, block)
    if layout == "channels":
        cblock, cpad = _channel_tiles(c)
        kernel = functools.partial(_forward_kernel_channels, **static, cblock=cblock, cpad=cpad)
        out = _call(kernel, jax.ShapeDtypeStruct((n * cpad, padded), input.dtype), (n, blocks, cpad // cblock),
                    interpret)(grid.reshape(-1), input.reshape(-1))
        return out.reshape(n, cpad, padded)[:, :c, :points].reshape(n, c, *grid.shape[1:-1])
    kernel = functools.partial(_forward_kernel, **static)
    out = _call(kernel, jax.ShapeDtypeStruct((n * c * padded,), input.dtype), (n, blocks), interpret)(
        grid.reshape(-1), input.reshape(-1))
    return out.reshape(n, c, padded)[:, :, :points].reshape(n, c, *grid.shape[1:-1])


_forward = first_order_only(_forward_call, "Pallas", (2, 3, 4, 5, 6))


def _backward_call(input, grid, cot, mode, padding_mode, align_corners, interpret, layout):
    n, c, sizes, points, padded, blocks, block = _geometry(input, grid, interpret, layout)
    dims = len(sizes)
    static = _static(mode, padding_mode, align_corners, c, sizes, points, padded, block)
    if layout == "channels":
        cblock, cpad = _channel_tiles(c)
        kernel = functools.partial(_backward_kernel_channels, interpret=interpret, **static, cblock=cblock, cpad=cpad)
    else:
        kernel = functools.partial(_backward_kernel, interpret=interpret, **static)
    flat = jax.ShapeDtypeStruct((n * padded,), grid.dtype)
    *grads, gin = _call(
        kernel, (flat,) * dims + (jax.ShapeDtypeStruct((input.size,), input.dtype),), (n, blocks), interpret,
        input_output_aliases={3: dims},
    )(grid.reshape(-1), input.reshape(-1), cot.reshape(-1), jnp.zeros((input.size,), input.dtype))
    grad_grid = jnp.stack([g.reshape(n, padded)[:, :points] for g in grads], axis=-1)
    return gin.reshape(input.shape), grad_grid.reshape(grid.shape)


_backward = first_order_only(_backward_call, "Pallas", (3, 4, 5, 6, 7))


@functools.partial(jax.custom_vjp, nondiff_argnums=(2, 3, 4, 5, 6))
def grid_sample_pallas(input, grid, mode: str, padding_mode: str, align_corners: bool, interpret: bool = False,
                       layout: str = "points"):
    """float32 ``grid_sample`` (4-D or 5-D) through the Pallas kernels (arguments checked by
    :func:`sidebyside.grid_sample`, which calls this; ``interpret=True`` runs them in
    Pallas' interpreter on any backend; ``layout``: one of :data:`LAYOUTS`, see the
    module docstring)."""
    _check_layout(layout)
    return _forward(input, grid, mode, padding_mode, align_corners, interpret, layout)


def _vjp_forward(input, grid, mode, padding_mode, align_corners, interpret, layout):
    _check_layout(layout)
    return _forward(input, grid, mode, padding_mode, align_corners, interpret, layout), (input, grid)


def _vjp_backward(mode, padding_mode, align_corners, interpret, layout, residuals, cot):
    input, grid = residuals
    return _backward(input, grid, cot, mode, padding_mode, align_corners, interpret, layout)


grid_sample_pallas.defvjp(_vjp_forward, _vjp_backward)
