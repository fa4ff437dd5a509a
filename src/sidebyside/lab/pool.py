"""Independent processes for the timing harness: one process is one observation.

What changes between processes (address-space layout, page placement, the
allocators' state, which cores the threads land on, where compiled code is
aligned) is invisible inside one warm process, so :mod:`sidebyside.lab.timing`
times every comparison in several processes: its own first, then each of the
worker processes kept here, one after another (never two at once, so they do
not compete for the cores).

A worker is a fresh ``python -m sidebyside.lab.pool``, started on first use
and kept for the run (so that imports are paid once). It sets the same
conditions as this process (:func:`sidebyside.lab.conditions.applied`, before
JAX starts), inherits the run's context and compilation cache through the
environment, and answers jobs: the contestants pickled with cloudpickle (the
``{name: callable}`` mapping, whose closures travel by value with the arrays,
models and functions they hold, even those defined in a notebook; or a
builder that returns it), which it then times with the measuring function the
job sends (:func:`sidebyside.lab.timing.measure_here`), starting with the contestant its
index names, and sends the timings back, keeping nothing of the job after it
(:func:`_release`: no model, no compiled program). Its output goes to this
process's standard error, never into the notebook.

:func:`processes` says how many processes a profile pools; :func:`aa`
replaces every contestant by the first one in an A/A run (``make aa``).
"""

from __future__ import annotations

import atexit
import ctypes
import gc
import os
import pickle
import subprocess
import sys
import tempfile
import traceback
from collections.abc import Callable, Mapping
from typing import Any

from sidebyside.lab import conditions
from sidebyside.run import context

__all__ = ["PROCESSES", "BY_HAND", "processes", "aa", "pack", "measure_elsewhere", "close"]

#: Independent processes per profile: each is one observation of every speed verdict. The one place a
#: profile's count is set: no params file names ``processes`` (tests/lab/test_processes.py).
PROCESSES = {"smoke": 2, "cpu": 5, "gpu": 3}
#: A notebook run by hand (no profile) pools as many as the smoke profile.
BY_HAND = 2

_WORKERS: dict[int, _Worker] = {}


def processes(given: int | None = None) -> int:
    """How many processes a comparison pools: ``given``, else the run profile's
    (:data:`PROCESSES`), else :data:`BY_HAND`."""
    if given is not None:
        if given < 1:
            raise ValueError(f"processes must be >= 1, got {given}")
        return int(given)
    return PROCESSES.get(context.current().profile or "", BY_HAND)


def aa(fns: Mapping[str, Callable[[], Any]], on: bool | None = None) -> dict[str, Callable[[], Any]]:
    """In an A/A run (``on``, default the run context's ``aa``) every name races the first
    contestant's function, through the same processes, interleaving and statistics; otherwise
    ``fns`` unchanged."""
    fns = dict(fns)
    if not (context.current().aa if on is None else on) or not fns:
        return fns
    first = next(iter(fns.values()))
    return dict.fromkeys(fns, first)


class _Worker:
    """One worker process and its pipes."""

    def __init__(self) -> None:
        self.log = tempfile.NamedTemporaryFile(prefix="sidebyside-worker-", suffix=".log", delete=False)
        env = dict(os.environ)
        env["SIDEBYSIDE_POOL_CONDITIONS"] = repr(conditions.applied())
        # On a GPU this process already holds its memory: a worker takes what it uses, not JAX's 75% up front.
        env.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
        self.process = subprocess.Popen([sys.executable, "-m", "sidebyside.lab.pool"], stdin=subprocess.PIPE,
                                        stdout=subprocess.PIPE, stderr=self.log, env=env)

    def ask(self, job: dict[str, Any]) -> dict[str, Any]:
        try:
            pickle.dump(job, self.process.stdin)
            self.process.stdin.flush()
            return pickle.load(self.process.stdout)
        except (EOFError, BrokenPipeError, pickle.UnpicklingError) as error:
            self.process.kill()
            raise RuntimeError(f"a timing worker process died ({type(error).__name__}); the end of its log "
                               f"({self.log.name}):\n{self.tail()}") from None

    def tail(self, chars: int = 3000) -> str:
        with open(self.log.name, errors="replace") as f:
            return f.read()[-chars:]

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.stdin.close()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
        os.unlink(self.log.name)


def close() -> None:
    """End every worker process (at exit, or after a test)."""
    for worker in _WORKERS.values():
        worker.close()
    _WORKERS.clear()


atexit.register(close)


def _compiled_again(fn: Callable[..., Any], backend: Any, options: dict[str, Any] | None, dynamic: bool | None,
                    fullgraph: bool) -> Callable[..., Any]:
    import torch

    return torch.compile(fn, backend=backend, options=options, dynamic=dynamic, fullgraph=fullgraph)


def _jitted_again(fn: Callable[..., Any], options: dict[str, Any]) -> Callable[..., Any]:
    import jax

    return jax.jit(fn, **options)


#: jax.jit's options a jitted function travels with (each a parameter of ``jax.jit``), read where it keeps them.
_JIT_OPTIONS = ("static_argnums", "static_argnames", "donate_argnums", "donate_argnames", "keep_unused", "inline")


def _as_jitted(value: Any) -> tuple[Callable[..., Any], dict[str, Any]] | None:
    """``(function, options)`` of a function under ``jax.jit`` (None for anything else, and for one with
    shardings given, which cloudpickle then refuses with its own words)."""
    jax = sys.modules.get("jax")
    stages = getattr(jax, "stages", None)
    if stages is None or not isinstance(value, stages.Wrapped) or not callable(value):
        return None
    info = getattr(value, "_jit_info", None)
    if info is None or getattr(info, "user_specified_in_shardings", False):
        return None
    missing = [key for key in _JIT_OPTIONS if not hasattr(info, key)]
    if missing:
        raise RuntimeError(f"jax {jax.__version__}: a jitted function no longer says its {', '.join(missing)}; "
                           "sidebyside.lab.pool._as_jitted must learn where this version keeps them")
    return value.__wrapped__, {key: getattr(info, key) for key in _JIT_OPTIONS}


def _as_compiled(value: Any) -> tuple[Callable[..., Any], Any, dict[str, Any] | None, bool | None, bool] | None:
    """``(function, backend, options, dynamic, fullgraph)`` of a function compiled by ``torch.compile``, as
    ``torch.compile`` takes them (Inductor as ``"inductor"`` with its mode's settings as ``options``; any other
    backend as itself), None for anything else (a compiled ``nn.Module`` pickles by itself)."""
    eval_frame = getattr(getattr(sys.modules.get("torch._dynamo"), "eval_frame", None), "OptimizeContext", None)
    if eval_frame is None or not callable(value):
        return None
    context_ = next((c.cell_contents for c in getattr(value, "__closure__", None) or ()
                     if isinstance(c.cell_contents, eval_frame)), None)
    if context_ is None:
        return None
    original = getattr(value, "__wrapped__", None) or getattr(value, "_torchdynamo_orig_callable", None)
    backend = getattr(context_, "callback", None)
    while hasattr(backend, "_torchdynamo_orig_backend"):
        backend = backend._torchdynamo_orig_backend
    if original is None or backend is None or not hasattr(context_, "_dynamic"):
        import torch

        raise RuntimeError(f"torch {torch.__version__}: a function compiled by torch.compile no longer says its "
                           "function, backend or options; sidebyside.lab.pool._as_compiled must learn where this "
                           "version keeps them")
    options = None
    if type(backend).__name__ == "_TorchCompileInductorWrapper" and isinstance(getattr(backend, "config", None), dict):
        backend, options = "inductor", dict(backend.config) or None
    return original, backend, options, context_._dynamic, bool(getattr(context_, "fullgraph", False))


def _dumps(obj: Any) -> bytes:
    """``obj`` pickled with cloudpickle, where a function under ``jax.jit`` travels as the function
    and its options (jaxlib's jitted function does not pickle), and a function compiled by
    ``torch.compile`` as the function, its backend (with its mode's settings) and its options (the
    compiled wrapper holds Dynamo's configuration, which does not pickle), each compiled again on
    arrival (see :func:`pack` for what this relies on)."""
    import io

    import cloudpickle

    class Pickler(cloudpickle.Pickler):
        def reducer_override(self, value: Any) -> Any:
            jitted = _as_jitted(value)
            if jitted is not None:
                return _jitted_again, jitted
            compiled = _as_compiled(value)
            if compiled is not None:
                return _compiled_again, compiled
            return super().reducer_override(value)

    buffer = io.BytesIO()
    Pickler(buffer).dump(obj)
    return buffer.getvalue()


def pack(source: Mapping[str, Callable[[], Any]] | Callable[[], Mapping[str, Any]]) -> bytes:
    """The contestants as a worker receives them: ``source`` is the ``{name: callable}`` mapping
    itself (its closures travel by value, with the arrays and models they hold, as they are now:
    pack before the first timed call, since a call may donate or change them) or a builder
    returning it. Raises RuntimeError, saying what to do, when they cannot be pickled.

    What this relies on, and on which versions it is tested (tests/lab/test_pool_pickling.py, which
    prints the versions it ran on): cloudpickle's ``Pickler.reducer_override``; ``jax.stages.Wrapped``
    (the type of what ``jax.jit`` returns) and its ``__wrapped__``; ``torch.compile``'s wrapper's
    ``__wrapped__`` (``functools.wraps``); and, since neither framework has a public way to read back
    the options a function was compiled with, two private places, each checked, with a RuntimeError
    naming the version where it moved: the jitted function's ``_jit_info`` (the options named like
    ``jax.jit``'s own parameters, :data:`_JIT_OPTIONS`) and the ``OptimizeContext`` in the compiled
    wrapper's closure (its ``callback``, whose Inductor settings travel as ``torch.compile``'s ``options``,
    ``_dynamic`` and ``fullgraph``). A compiled ``nn.Module``
    (``OptimizedModule``) and ``nnx.jit``'s wrapper pickle by themselves."""
    try:
        return _dumps(source)
    except Exception as error:
        raise RuntimeError(f"the contestants {', '.join(source) if isinstance(source, Mapping) else source!r} cannot "
                           f"be sent to a worker process ({type(error).__name__}: {error}): everything they refer to "
                           "must pickle with cloudpickle; pass timing.compare or timing.ladder a builder (a function "
                           "that builds them) instead") from error


def measure_elsewhere(packed: bytes, index: int, measure: Callable[..., Any], **options: Any):
    """Time the contestants :func:`pack` packed in worker ``index`` (1, 2, ...), starting with the
    ``index``-th, with ``measure`` (the harness's :func:`sidebyside.lab.timing.measure_here`, sent by
    reference: the worker imports its module when it reads the job) given ``options``. Returns
    ``(timings, errors)``. Raises RuntimeError, with the worker's words, when they fail to build or
    the worker dies."""
    worker = _WORKERS.get(index)
    if worker is None or worker.process.poll() is not None:
        worker = _WORKERS[index] = _Worker()
    answer = worker.ask({"builder": packed, "aa": bool(context.current().aa), "measure": measure,
                         "options": {**options, "shift": index}})
    if answer.get("fatal"):
        raise RuntimeError(f"process {index + 1} could not build or time the contestants:\n{answer['fatal']}")
    return answer["timings"], answer["errors"]


def _give_back_memory() -> None:
    """Return the heap a job freed to the system (glibc's ``malloc_trim``; nothing elsewhere). Without
    it a worker keeps the pages of what it built until it ends: after timing ViT-B/16's training ladder
    each worker held 4.7 GB, and the cpu profile's four workers overran a 24 GB machine."""
    try:
        ctypes.CDLL(None).malloc_trim(0)
    except (OSError, AttributeError):  # not glibc
        pass


def _forget_compiled() -> None:
    """Drop the programs the frameworks compiled for a job, as a fresh process has none: JAX's
    in-memory caches (``jax.clear_caches``: every jitted function's executables, module-level
    ones included) and Dynamo's (``torch._dynamo.reset``: the graphs it keeps on shared code
    objects, such as a library module's ``forward``). Each only where the job imported it; the
    on-disk compilation cache of the run stays, so the next job compiles as a later process of
    the run does. A worker thus holds no model or compiled program between jobs."""
    if "jax" in sys.modules:
        sys.modules["jax"].clear_caches()
    dynamo = sys.modules.get("torch._dynamo")
    if dynamo is not None:
        dynamo.reset()


def _answer(job: dict[str, Any]) -> dict[str, Any]:
    """Build and time one job's contestants; the answer to send back. Everything the job built is
    referenced from this call's frame only, so it is unreachable once the call returns."""
    import cloudpickle

    answer: dict[str, Any] = {"timings": {}, "errors": {}, "fatal": None}
    try:
        sent = cloudpickle.loads(job.pop("builder"))
        built = sent if isinstance(sent, Mapping) else sent()
        fns = aa({n: f for n, f in built.items()
                  if callable(f) and not isinstance(f, BaseException)}, job["aa"])
        answer["timings"], answer["errors"] = job["measure"](fns, **job["options"])
    except Exception:
        answer["fatal"] = traceback.format_exc(limit=8)
    return answer


def _release() -> None:
    """After a job: forget what the frameworks compiled for it, collect what it built (cycles
    included) and give the freed heap back."""
    _forget_compiled()
    gc.collect()
    _give_back_memory()


def _serve() -> None:
    """A worker's loop: answer jobs on stdin until it closes, holding nothing of a job after it
    (:func:`_answer`, :func:`_release`)."""
    protocol_in, protocol_out = sys.stdin.buffer, os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)  # what the contestants print goes to the log, never into the protocol
    sys.stdout = sys.stderr
    import ast

    given = ast.literal_eval(os.environ.get("SIDEBYSIDE_POOL_CONDITIONS", "None"))
    if given is not None:
        conditions.same_conditions(**given)
    while True:
        try:
            job = pickle.load(protocol_in)
        except EOFError:
            return
        answer = _answer(job)
        job = None
        _release()  # before answering: the caller may read the worker's memory once answered
        pickle.dump(answer, protocol_out)
        protocol_out.flush()
        answer = None  # the timings sent, gone too


if __name__ == "__main__":
    _serve()
