"""The pooled processes' pickling (issue 58, item 7): every kind of contestant the posts race travels to a
worker process as :func:`sidebyside.lab.pool.pack` packs it and comes back whole there: a function under
``jax.jit`` with the same options and the same result, a function compiled by ``torch.compile`` with the
same function, backend and options. The versions it covers are those installed where it runs, read from the
packages: they are in every test's id (``pytest -v`` prints them) and in every failure's message. The pins
(requirements.txt) are the project's machines'; a GPU box may have others (issue 58 names torch 2.11 and
JAX 0.11.2): run this file there to cover them."""

from __future__ import annotations

import functools
import inspect
import subprocess
import sys
import textwrap
from importlib.metadata import version

import pytest

from sidebyside.lab import pool

VERSIONS = {name: version(name) for name in ("torch", "jax", "jaxlib", "flax", "cloudpickle")}
ON = "-".join(f"{name}{v}" for name, v in VERSIONS.items())


def _jax_contestants():
    """The jitted forms the posts race, named by a post that races each (a closure holds the arrays)."""
    import jax
    import jax.numpy as jnp
    from flax import nnx

    def f(x, y):
        return x * 2.0 + y

    def g(n, x):
        return x * n

    x, y = jnp.arange(4.0), jnp.ones(4)
    plain = jax.jit(f)  # jit-and-autograd-timing, xla-and-scipy: @jax.jit
    donated = jax.jit(f, donate_argnums=(0,))  # swin-transformer-v2, fashion-mnist: state donated
    static = jax.jit(g, static_argnums=(0,))  # real-models' generation: the token count static
    decorated = functools.partial(jax.jit, donate_argnums=(0,))(f)  # real-models' training step
    model = nnx.Linear(4, 2, rngs=nnx.Rngs(0))
    forward = nnx.jit(lambda m, v: m(v))  # real-models' parity: nnx.jit
    return {"jit": (plain, lambda fn: fn(x, y)), "jit_donate": (donated, lambda fn: fn(jnp.arange(4.0), y)),
            "jit_static": (static, lambda fn: fn(3, x)), "partial_jit": (decorated, lambda fn: fn(jnp.arange(4.0), y)),
            "nnx_jit": (forward, lambda fn: fn(model, x))}


def _torch_contestants():
    """The torch.compile forms the posts race (not called here: calling compiles C++ for minutes on a CPU)."""
    import torch

    def step(x):
        return torch.sin(x) + 1

    return {"compile": torch.compile(step, dynamic=False),  # every post's torch/compile rung
            "reduce_overhead": torch.compile(step, mode="reduce-overhead", dynamic=False),  # cuda-graph rungs
            "max_autotune": torch.compile(step, mode="max-autotune", dynamic=False),  # real-models
            "fullgraph_dynamic": torch.compile(step, fullgraph=True, dynamic=True),
            "module": torch.compile(torch.nn.Linear(3, 2), dynamic=False)}  # real-models' generation: a module


def _backend(backend) -> str:
    """A backend as another process can compare it: its name or type, not its address."""
    return backend if isinstance(backend, str) else type(backend).__name__


def _in_a_fresh_process(program: str, packed: bytes) -> str:
    """Run ``program`` in a new interpreter (as a pool worker is: ``sys.executable``) with ``packed`` on stdin
    as ``PACKED``; its stdout."""
    code = "import sys, cloudpickle\nPACKED = sys.stdin.buffer.read()\n" + textwrap.dedent(program)
    done = subprocess.run([sys.executable, "-c", code], input=packed, capture_output=True, timeout=600)
    assert done.returncode == 0, f"on {ON}:\n{done.stderr.decode()[-3000:]}"
    return done.stdout.decode()


@pytest.mark.slow  # unpickles jitted functions in a fresh interpreter (2 s)
@pytest.mark.parametrize("on", [ON])
def test_jitted_contestants_arrive_with_their_options_and_results(on):
    import numpy as np

    contestants = _jax_contestants()
    expected = {name: np.asarray(call(fn)).tolist() for name, (fn, call) in _jax_contestants().items()}
    options = {name: pool._as_jitted(fn)[1] for name, (fn, _) in contestants.items() if pool._as_jitted(fn)}
    assert set(options) == {"jit", "jit_donate", "jit_static", "partial_jit"}, on
    assert options["jit_donate"]["donate_argnums"] == (0,) and options["jit_static"]["static_argnums"] == (0,), on
    packed = pool.pack({name: fn for name, (fn, _) in contestants.items()})
    # the calls travel too (by value), each applied to its own contestant there
    calls = pool.pack({name: call for name, (_, call) in contestants.items()})
    out = _in_a_fresh_process(f"""
        import json
        import numpy as np
        from sidebyside.lab import pool
        fns = cloudpickle.loads(PACKED[:{len(packed)}])
        calls = cloudpickle.loads(PACKED[{len(packed)}:])
        print(json.dumps({{"results": {{n: np.asarray(calls[n](f)).tolist() for n, f in fns.items()}},
                          "options": {{n: pool._as_jitted(f)[1] for n, f in fns.items() if pool._as_jitted(f)}}}},
                         default=repr))
        """, packed + calls)
    import json

    there = json.loads(out.splitlines()[-1])
    assert there["results"] == expected, on
    # as JSON both sides: tuples as lists, and a value JSON lacks as its repr (jax 0.11's ``inline`` is an Inline)
    assert json.loads(json.dumps(options, default=repr)) == there["options"], on


@pytest.mark.slow  # a fresh interpreter imports torch's compiler stack to unpickle them: about 8 s on a 2-core CPU
@pytest.mark.parametrize("on", [ON])
def test_compiled_contestants_arrive_with_their_function_backend_and_options(on):
    contestants = _torch_contestants()
    here = {name: pool._as_compiled(fn) for name, fn in contestants.items()}
    assert here["module"] is None and all(here[n] for n in contestants if n != "module"), on
    said = {name: (c[0].__name__, _backend(c[1]), c[2], c[3], c[4]) for name, c in here.items() if c}
    assert said["compile"][1:] == ("inductor", None, False, False), on
    assert said["fullgraph_dynamic"][3:] == (True, True), on
    assert said["reduce_overhead"][2] == {"triton.cudagraphs": True}, on  # a mode travels as its settings
    assert said["max_autotune"][2]["max_autotune"] is True, on
    packed = pool.pack(contestants)
    out = _in_a_fresh_process(f"""
        import json
        import torch
        from sidebyside.lab import pool
        {textwrap.indent(inspect.getsource(_backend), " " * 8).strip()}
        fns = cloudpickle.loads(PACKED)
        said = {{n: pool._as_compiled(f) for n, f in fns.items()}}
        print(json.dumps({{"said": {{n: (c[0].__name__, _backend(c[1]), c[2], c[3], c[4]) for n, c in said.items() if c}},
                          "module": type(fns["module"]).__name__, "inner": type(fns["module"]._orig_mod).__name__}}))
        """, packed)
    import json

    there = json.loads(out.splitlines()[-1])
    assert {n: list(v) for n, v in said.items()} == there["said"], on
    assert (there["module"], there["inner"]) == ("OptimizedModule", "Linear"), on


def test_what_cannot_travel_is_refused_saying_what_to_do():
    import threading

    lock = threading.Lock()
    with pytest.raises(RuntimeError, match="cannot be sent to a worker process.*pass timing.compare or timing.ladder "
                                           "a builder"):
        pool.pack({"holds_a_lock": lambda: lock.acquire(blocking=False)})
