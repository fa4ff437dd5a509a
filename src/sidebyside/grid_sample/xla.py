"""grid_sample as plain XLA (gathers and ``where``), for any backend, dtype and
dimensionality, and under every JAX transformation (no custom derivative rule):
the reference path the kernels are held to, and the one ``implementation="xla"``
takes. Taps from :mod:`.taps`."""

from __future__ import annotations

import jax
import jax.numpy as jnp

from sidebyside.grid_sample.taps import combine_rows, taps_2d, taps_3d, unnormalize

__all__ = ["sample_2d", "sample_3d", "grid_sample_naive"]


def _gather(flat, index):
    """``flat`` (N, C, S), ``index`` (N, P) int32 in [0, S) -> (N, C, P)."""
    return jax.vmap(lambda f, i: f.at[:, i].get(mode="promise_in_bounds"))(flat, index)


def _channels(a):
    return a[:, None, :]


def sample_2d(input, grid, mode, padding_mode, align_corners):
    """(N, C, H, W) at grid (N, H_out, W_out, 2) -> (N, C, H_out, W_out)."""
    n, c, h, w = input.shape
    flat = input.reshape(n, c, h * w)
    points = grid.shape[1] * grid.shape[2]
    rows = taps_2d(grid[..., 0].reshape(n, points), grid[..., 1].reshape(n, points), h, w, mode, padding_mode,
                   align_corners)
    out = combine_rows(rows, lambda index: _gather(flat, index), _channels)
    return out.reshape(n, c, *grid.shape[1:3])


def sample_3d(input, grid, mode, padding_mode, align_corners, fused):
    """(N, C, D, H, W) at grid (N, D_out, H_out, W_out, 3) -> (N, C, D_out, H_out,
    W_out); ``fused`` as in :func:`.taps.taps_3d`."""
    n, c, d, h, w = input.shape
    points = grid.shape[1] * grid.shape[2] * grid.shape[3]
    flat = input.reshape(n, c, d * h * w)
    g = [grid[..., axis].reshape(n, points) for axis in range(3)]
    rows = taps_3d(*g, d, h, w, mode, padding_mode, align_corners, fused)
    out = combine_rows(rows, lambda index: _gather(flat, index), _channels)
    return out.reshape(n, c, *grid.shape[1:4])


def grid_sample_naive(input, grid, mode: str = "bilinear", padding_mode: str = "zeros", align_corners: bool = False):
    """The formulation most ports use, kept as the speed baseline: 4-D bilinear only,
    corners gathered with fancy indexing from a zero-padded image, indices clamped
    with ``jnp.clip``. Same contract as :func:`sidebyside.grid_sample` for
    ``mode="bilinear"``, ``padding_mode="zeros"``; not exact elsewhere."""
    if mode != "bilinear" or padding_mode != "zeros" or jnp.ndim(input) != 4:
        raise ValueError("grid_sample_naive() only implements 4-D bilinear with zeros padding")
    n, c, h, w = input.shape
    x = unnormalize(grid[..., 0], w, align_corners)
    y = unnormalize(grid[..., 1], h, align_corners)
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
