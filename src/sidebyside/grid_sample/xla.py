"""grid_sample as plain XLA (gathers and ``where``), for any backend, dtype and
dimensionality, and under every JAX transformation (no custom derivative rule):
the reference path the kernels are held to, and the one ``implementation="xla"``
takes. Taps from :mod:`.taps`."""

from __future__ import annotations

import jax

from sidebyside.grid_sample.taps import combine_rows, taps_2d, taps_3d

__all__ = ["sample_2d", "sample_3d"]


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
