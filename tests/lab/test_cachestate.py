"""A program's compilation is said cold or warm from the frameworks' own cache counters, per program."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from sidebyside.lab import cachestate

pytestmark = pytest.mark.slow  # fresh processes importing JAX

SAY = """
import json, jax
from sidebyside.lab import cachestate, conditions
conditions.use_compile_cache()
said = []
for program in (lambda x: x * 3.0, lambda x: x + 5.0):
    before = cachestate.snapshot()
    jax.jit(program)(1.0).block_until_ready()
    said.append(cachestate.state(before, cachestate.snapshot()))
before = cachestate.snapshot()
(jax.numpy.ones(3) * 2).block_until_ready()
said.append(cachestate.state(before, before))
print(json.dumps(said))
"""


def _states(cache) -> list:
    env = {**os.environ, "SIDEBYSIDE_COMPILE_CACHE": str(cache)}
    done = subprocess.run([sys.executable, "-c", SAY], env=env, capture_output=True, text=True, timeout=300,
                          check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_each_program_is_said_cold_then_warm_from_a_shared_cache(tmp_path):
    assert _states(tmp_path) == ["cold", "cold", None]  # a fresh cache: each program compiled afresh
    assert _states(tmp_path) == ["warm", "warm", None]  # the next process reads both back


def test_state_reads_the_counters():
    assert cachestate.state((3, 1), (3, 2)) == "cold"
    assert cachestate.state((3, 1), (5, 1)) == "warm"
    assert cachestate.state((3, 1), (3, 1)) is None
