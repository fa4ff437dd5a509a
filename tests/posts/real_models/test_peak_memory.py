"""real-models' peak memory, measured as the notebook measures it (``work.peak_memory``: the rung built
and called in a fresh process, the notebook's rungs sent by value). The smoke profile measures no memory
(each measurement is a fresh process paying its imports), so this is where the path is proved."""

from __future__ import annotations

import pytest
from test_real_models import rungs, smoke

from sidebyside.posts.real_models import work

pytestmark = pytest.mark.slow  # two fresh processes, each importing both frameworks


@pytest.mark.parametrize("name", ["torch/eager", "jax/jit"])
def test_a_rung_s_peak_memory_comes_from_a_fresh_process(name):
    found = work.peak_memory(smoke("gpt2"), "train", 1, "float32", name, threads=1, **rungs())
    assert "error" not in found, found
    # the process's own high-water mark: past what its imports alone held
    assert found["peak_rss_bytes"] >= found["import_rss_bytes"] > 100 * 2**20, found
