"""A timing worker holds nothing of a job once it has answered (sidebyside.lab.pool): not the
contestants it built, not what they returned or measured, not the programs JAX compiled for them.

The worker imports this file by its name (its folder is put on the worker's ``PYTHONPATH``): the
measuring function below runs there and keeps a weak reference to what each job built and returned,
and the next job reports which of them are still alive."""

from __future__ import annotations

import gc
import os
import weakref
from pathlib import Path

import pytest

from sidebyside.lab import pool

HERE = Path(__file__).resolve().parent

#: In the worker: weak references to each job's contestants, their results, and what it measured.
_SEEN: list[weakref.ref] = []


class Result:
    """What a contestant returns and what the measuring function sends back (weakly referable)."""

    def __init__(self, size: int = 0) -> None:
        self.block = bytearray(size)


def probe(fns, **options):
    """The measuring function, in the worker: the previous jobs' objects still alive, then this
    job's contestants called and weakly kept. Sends back a :class:`Result` (kept weakly too)."""
    gc.collect()
    alive = sum(ref() is not None for ref in _SEEN)
    cached = None
    if options.get("jitted") is not None:
        cached = JITTED._cache_size()
    for fn in fns.values():
        _SEEN.extend([weakref.ref(fn), weakref.ref(fn())])
    sent = Result()
    _SEEN.append(weakref.ref(sent))
    return {"alive": alive, "cached": cached, "sent": sent}, {}


def _jitted():
    import jax

    return jax.jit(lambda x: x * 2)


JITTED = _jitted() if os.environ.get("POOL_RELEASE_JAX") else None


def _builder_value():
    def build():
        model = Result(64 * 2**20)  # a model of 64 MiB, held by the contestant's closure
        return {"a": lambda: model}

    return build


@pytest.fixture
def worker_sees_this_file(monkeypatch):
    paths = [str(HERE), os.environ.get("PYTHONPATH")]
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(p for p in paths if p))
    pool.close()
    yield
    pool.close()


def test_a_job_s_contestants_and_results_are_gone_once_it_has_answered(worker_sees_this_file):
    packed = pool.pack(_builder_value())
    first, _ = pool.measure_elsewhere(packed, 1, probe)
    assert first["alive"] == 0
    second, _ = pool.measure_elsewhere(packed, 1, probe)
    # the first job's contestant, the model its call returned and the result it sent: none alive
    assert second["alive"] == 0, f"the worker kept {second['alive']} objects of the previous job"
    assert isinstance(second["sent"], Result)


def test_answering_in_process_keeps_no_reference_to_the_job():
    import cloudpickle

    kept: list[weakref.ref] = []

    def measure(fns, **options):
        kept.extend(weakref.ref(fn) for fn in fns.values())
        kept.append(weakref.ref(fns["a"]()))
        return {}, {}

    answer = pool._answer({"builder": cloudpickle.dumps(_builder_value()), "aa": False,
                           "measure": measure, "options": {}})
    assert answer["fatal"] is None
    gc.collect()
    assert len(kept) == 2 and all(ref() is None for ref in kept)


def test_programs_jax_compiled_for_a_job_are_dropped_after_it(worker_sees_this_file, monkeypatch):
    pytest.importorskip("jax")
    monkeypatch.setenv("POOL_RELEASE_JAX", "1")  # the worker makes JITTED, jitted at module level

    def build():
        import jax.numpy as jnp
        import test_pool_release

        return {"a": lambda: (test_pool_release.JITTED(jnp.ones(3)), Result())[1]}

    packed = pool.pack(build)
    pool.measure_elsewhere(packed, 1, probe, jitted=True)
    second, _ = pool.measure_elsewhere(packed, 1, probe, jitted=True)
    # JITTED outlives the jobs (its module does), but not the program it compiled in the first job
    assert second["cached"] == 0
