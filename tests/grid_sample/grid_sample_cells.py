"""The grid_sample post's paired cells ``step`` and ``chain`` (notebooks/03_grid_sample.py), run as the
notebook runs them (conftest.run_pairs): the steps and chains the benchmark times, the tests' as the
post's, with no copy of them in the library."""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import torch
import torch.nn.functional as F
from conftest import run_pairs

from sidebyside import grid_sample
from sidebyside.grid_sample import bench


@functools.cache
def steps() -> dict:
    """The notebook's steps and chains by name (:data:`sidebyside.grid_sample.bench.STEPS`), run once per
    test process, in a namespace holding what the notebook's set-up cell gives them."""
    namespace = {"functools": functools, "jax": jax, "jnp": jnp, "torch": torch, "F": F, "grid_sample": grid_sample}
    return bench.steps_from(run_pairs("03_grid_sample.py", ["step", "chain"], namespace))
