"""The run's compilation cache (``conditions.same_conditions``): a folder given through
``SIDEBYSIDE_COMPILE_CACHE`` (a device call's, shared by its runs; the test run's) is used by both frameworks,
and the conditions record says whether this process found it cold, so that a compile time read from a
warm cache is never reported as cold."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

pytestmark = pytest.mark.slow  # a fresh process importing both frameworks, twice

SAY = ("import json, os; from sidebyside.lab.conditions import same_conditions; c = same_conditions(threads=1); "
       "print(json.dumps([c['compile_cache_cold_at_start'], os.environ['TORCHINDUCTOR_CACHE_DIR']]))")


def _conditions(cache) -> list:
    env = {**os.environ, "SIDEBYSIDE_COMPILE_CACHE": str(cache)}
    env.pop("TORCHINDUCTOR_CACHE_DIR", None)
    done = subprocess.run([sys.executable, "-c", SAY], env=env, capture_output=True, text=True, timeout=300, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_a_given_cache_is_used_and_said_cold_or_warm(tmp_path):
    cold, inductor = _conditions(tmp_path)
    assert cold is True and inductor == str(tmp_path / "inductor")
    (tmp_path / "jax").mkdir(exist_ok=True)
    (tmp_path / "jax" / "an-earlier-entry").write_bytes(b"x")
    assert _conditions(tmp_path)[0] is False


def test_a_post_that_sets_no_conditions_still_compiles_into_the_shared_cache(tmp_path):
    """grid_sample's notebook times in workers and sets no conditions in its own process; its JAX compiles
    (parity, the first calls) go to the run's shared cache all the same."""
    say = ("import jax; from sidebyside.lab import notebook; notebook.setup(same_conditions=False, warm=None); "
           "jax.jit(lambda x: x * 2)(1.0).block_until_ready(); print(jax.config.jax_compilation_cache_dir)")
    env = {**os.environ, "SIDEBYSIDE_COMPILE_CACHE": str(tmp_path)}
    done = subprocess.run([sys.executable, "-c", say], env=env, capture_output=True, text=True, timeout=300,
                          check=True)
    assert done.stdout.strip().splitlines()[-1] == str(tmp_path / "jax")
    assert any((tmp_path / "jax").iterdir())  # the program compiled is in the shared cache
