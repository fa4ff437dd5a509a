"""The channel-blocked layout of the Pallas kernels (``pallas_layout="channels"``, issue 13
item 2), in Pallas' interpreter on the CPU: the same numbers as PyTorch and as the
default "points" layout in every mode, 2-D and 3-D, forward and backward, at channel
counts below, at and across a channel tile; and it lowers to Triton for CUDA without a GPU.

The fast set checks the tiling and the 2-D lowering (which runs the new kernels through
Pallas' Triton lowering); the numerical matrix (each case compiles three programs for
the interpreter, 10-20 s) runs in the slow set.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from sidebyside import grid_sample
from sidebyside.posts.grid_sample import pallas, parity

MODES = [(mode, dims) for dims in (2, 3) for mode in ("nearest", "bilinear", "bicubic")[:3 if dims == 2 else 2]]
PADDINGS = ("zeros", "border", "reflection")
CASES = [(mode, dims, padding, channels) for mode, dims in MODES for padding in PADDINGS for channels in (1, 17)]
FAST: set[str] = set()  # interpreter compilations cost 10-20 s a case: the whole matrix runs in the slow set
# Small images, and 35-36 output points: two point tiles in the interpreter (32 points each), one partly empty.
SIZES = dict(size2d=(6, 7), out2d=(5, 7), size3d=(3, 4, 5), out3d=(2, 3, 6))


def _ids(case):
    mode, dims, padding, channels = case
    return f"{mode}-{dims}d-{padding}-{channels}"


def _value_and_grads(x, g, cot, **kw):
    def f(a, b):
        out, vjp = jax.vjp(lambda p, q: grid_sample(p, q, **kw), a, b)
        return (out, *vjp(cot))

    return [np.asarray(t) for t in jax.jit(f)(x, g)]


@pytest.mark.parametrize("mode, dims, padding_mode, channels", [
    pytest.param(*case, id=_ids(case), marks=() if _ids(case) in FAST else pytest.mark.slow) for case in CASES])
def test_channels_layout_matches_points_layout_and_pytorch(mode, dims, padding_mode, channels):
    config = parity.Config(mode, padding_mode, channels == 1, dims, "float32")  # align_corners varies with C
    # Against PyTorch, with parity's hard grid points and tolerances.
    r = parity.measure(config, transform="jit", implementation="pallas", pallas_layout="channels", seed=4,
                       channels=channels, **SIZES)
    for q in ("", "grad_input_", "grad_grid_"):
        assert r[f"{q}max_rel_err"] <= r[f"{q}tolerance"], (q or "output", r)
    # Against the points layout: nearest's output (a copy) bit for bit; otherwise within parity's
    # float32 tolerance (same taps, same order of the sum per channel, but a compiler may
    # contract a multiply-add in a (channels x points) tile where it did not in a row). On a GPU
    # both layouts sum the input gradient with atomic adds, in an order that changes from run to
    # run: nearest's input gradient then gets the sum tolerance too (an H100 run differed by 1 ulp).
    x, grid, cot = (jnp.asarray(a, jnp.float32) for a in parity.make_inputs(config, seed=5, channels=channels, **SIZES))
    kw = dict(mode=mode, padding_mode=padding_mode, align_corners=config.align_corners, implementation="pallas")
    points = _value_and_grads(x, grid, cot, **kw, pallas_layout="points")
    channel = _value_and_grads(x, grid, cot, **kw, pallas_layout="channels")
    atomic = jax.default_backend() == "gpu"
    if mode == "nearest":
        np.testing.assert_array_equal(channel[0], points[0])
    for name, want, got in zip(("output", "grad_input", "grad_grid"), points, channel):
        scale = max(float(np.abs(want).max()), 1.0)
        np.testing.assert_allclose(got, want, rtol=0, atol=parity.tolerance(config, "grad_input", atomic=atomic) * scale,
                                   err_msg=name)


def test_channel_tiles():
    assert pallas._channel_tiles(1) == (1, 1)
    assert pallas._channel_tiles(3) == (4, 4)
    assert pallas._channel_tiles(16) == (16, 16)
    assert pallas._channel_tiles(17) == (16, 32)
    assert pallas._channel_tiles(64) == (pallas.CHANNEL_BLOCK, 64)


def test_unknown_layout_is_refused():
    x, g = jnp.zeros((1, 1, 4, 4)), jnp.zeros((1, 2, 2, 2))
    with pytest.raises(ValueError, match="pallas_layout must be"):
        grid_sample(x, g, implementation="pallas", pallas_layout="rows")


@pytest.mark.slow
def test_bench_times_both_layouts_where_the_pallas_kernels_run():
    """On a GPU the benchmark times the channels layout beside the points layout; here
    the kernels run in the interpreter, which checks the plumbing, not the speed."""
    from sidebyside.posts.grid_sample import bench, goals

    rows = bench.bench(bench.configs(("bilinear",), {"tiny": (1, 2, 8, 8)}), repeats=1, min_repeat_s=0.001,
                       backward=False, copies=2, implementation="pallas")
    (row,) = rows.values()
    assert row["implementation"] == "pallas"
    assert row["pallas_channels_ms"] > 0 and row["pallas_channels_ratio"] > 0
    assert row["jax_channels_kernel_ms"] > 0 and row["channels_kernel_ratio"] > 0
    table = goals.speed_table(rows)
    assert "Pallas channels layout / PyTorch per call" in table.columns
    only_points = bench.bench(bench.configs(("bilinear",), {"tiny": (1, 2, 8, 8)}), repeats=1, min_repeat_s=0.001,
                              backward=False, copies=2, implementation="pallas", pallas_layouts=("points",))
    assert "pallas_channels_ms" not in next(iter(only_points.values()))
