"""The channel-blocked layout of the Pallas kernels (``pallas_layout="channels"``, issue 13
item 2): its tiling, its refusal of an unknown layout and its place in the benchmark.

Its numbers (the same as PyTorch's and as the default "points" layout's, in every mode,
padding and align_corners, 2-D and 3-D, forward and backward, below and across a channel
tile) are held in test_grid_sample.py
(test_channels_layout_matches_points_layout_and_pytorch), beside the points layout's
matrix, whose compiled programs it shares; its lowering to Triton for CUDA there too
(test_pallas_kernels_lower_to_triton_for_cuda).
"""

from __future__ import annotations

import jax.numpy as jnp
import pytest

from sidebyside import grid_sample
from sidebyside.grid_sample import pallas


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
    from grid_sample_cells import steps

    from sidebyside.grid_sample import bench, goals

    rows = bench.bench(bench.configs(("bilinear",), {"tiny": (1, 2, 8, 8)}), repeats=1, min_repeat_s=0.001,
                       backward=False, copies=2, implementation="pallas", steps=steps())
    (row,) = rows.values()
    assert row["implementation"] == "pallas"
    assert row["pallas_channels_ms"] > 0 and row["pallas_channels_ratio"] > 0
    assert row["jax_channels_kernel_ms"] > 0 and row["channels_kernel_ratio"] > 0
    table = goals.speed_table(rows)
    assert "Pallas channels layout / PyTorch per call" in table.columns
    only_points = bench.bench(bench.configs(("bilinear",), {"tiny": (1, 2, 8, 8)}), repeats=1, min_repeat_s=0.001,
                              backward=False, copies=2, implementation="pallas", pallas_layouts=("points",),
                              steps=steps())
    assert "pallas_channels_ms" not in next(iter(only_points.values()))
