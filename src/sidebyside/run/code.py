"""Which code a run timed, and which code it showed: the proof that a post's paired cells are the
code its figures measured.

The harness (:mod:`sidebyside.lab.timing`) notes every contestant it times with :func:`note_timed`;
:func:`source`, the one way a notebook shows a function that lives in the library, notes what it
showed and from which cell with :func:`note_shown`. :func:`record` is the ``code`` object of a
results record::

    {"timed": [{"contestant": "torch/compile", "function": "train_step", "where": "cell:<sha>", "line": 3}, ...],
     "shown": [{"function": "data_parallel", "where": "src/.../torch_parallel.py", "line": 120,
                "from": "cell:<sha>"}, ...]}

``where`` names the file that defines the function: a notebook cell as ``cell:`` and the
:func:`cell_id` of its source, a file under the project root by its relative path, any other
file by its path (``~`` for the home directory). What a function wraps is followed to what it
wraps (``functools.partial``, ``functools.wraps``, ``torch.compile``, ``jax.jit``, a bound method,
a module's ``forward``, an object's ``__call__``), so a compiled notebook function counts as that
function.

Imports nothing but the standard library.
"""

from __future__ import annotations

import functools
import hashlib
import inspect
import linecache
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

from sidebyside.run import context

__all__ = ["Source", "cell_id", "origin", "note_timed", "note_shown", "source", "record", "clear"]

_timed: list[dict[str, Any]] = []
_shown: list[dict[str, Any]] = []


def cell_id(text: str) -> str:
    """``cell:`` and the first 16 hex digits of the SHA-256 of a cell's source, stripped."""
    return "cell:" + hashlib.sha256(text.strip().encode()).hexdigest()[:16]


def _unwrap(fn: Any) -> Any:
    seen: set[int] = set()
    while id(fn) not in seen:
        seen.add(id(fn))
        if isinstance(fn, functools.partial):
            fn = fn.func
        elif inspect.ismethod(fn):
            fn = fn.__func__
        elif getattr(fn, "_torchdynamo_orig_callable", None) is not None:  # torch.compile(fn)
            fn = fn._torchdynamo_orig_callable
        elif getattr(fn, "_orig_mod", None) is not None:  # torch.compile(module)
            fn = fn._orig_mod
        elif getattr(fn, "__wrapped__", None) is not None:  # functools.wraps, jax.jit, nnx.jit
            fn = fn.__wrapped__
        elif not inspect.isfunction(fn) and not inspect.isclass(fn):
            call = getattr(type(fn), "forward", None) or next(
                (vars(k)["__call__"] for k in type(fn).__mro__ if "__call__" in vars(k)), None)
            if call is None or not inspect.isfunction(call):
                break
            fn = call
        else:
            break
    return fn


def _where(filename: str) -> str:
    path = Path(filename)
    if path.is_file() and not filename.startswith("<"):
        resolved, root = path.resolve(), context.current().project_root().resolve()
        if resolved.is_relative_to(root):
            return resolved.relative_to(root).as_posix()
        home = Path.home().resolve()
        return "~/" + resolved.relative_to(home).as_posix() if resolved.is_relative_to(home) else resolved.as_posix()
    lines = linecache.getlines(filename)
    return cell_id("".join(lines)) if lines else filename


def origin(fn: Any) -> dict[str, Any]:
    """Where ``fn`` (followed through what it wraps) is defined: ``{"function", "where", "line"}``."""
    inner = _unwrap(fn)
    if inspect.isclass(inner):
        try:
            return {"function": inner.__qualname__, "where": _where(inspect.getsourcefile(inner) or "unknown"),
                    "line": inspect.getsourcelines(inner)[1]}
        except (OSError, TypeError):
            return {"function": inner.__qualname__, "where": "unknown", "line": None}
    code = getattr(inner, "__code__", None)
    if code is None:
        return {"function": type(inner).__name__, "where": "unknown", "line": None}
    return {"function": getattr(inner, "__qualname__", code.co_name), "where": _where(code.co_filename),
            "line": code.co_firstlineno}


def note_timed(name: str, fn: Callable) -> None:
    """Remember that the contestant ``name`` was the callable ``fn``."""
    entry = {"contestant": name, **origin(fn)}
    if entry not in _timed:
        _timed.append(entry)


def note_shown(fn: Any, caller: str) -> None:
    """Remember that the cell or file ``caller`` (a :func:`_where` name) showed ``fn``'s source."""
    entry = {**origin(fn), "from": caller}
    if entry not in _shown:
        _shown.append(entry)


class Source(str):
    """A function's source that a notebook cell shows as it is (its repr is the text)."""

    def __repr__(self) -> str:
        return str(self)


def source(*objects: Callable) -> Source:
    """The source of functions or classes, one after another, for a paired cell; each is noted as
    shown by the cell that called this (:func:`note_shown`)."""
    caller = _where(sys._getframe(1).f_code.co_filename)
    for obj in objects:
        note_shown(obj, caller)
    return Source("\n\n".join(textwrap.dedent(inspect.getsource(o)).rstrip() for o in objects))


def record() -> dict[str, list[dict[str, Any]]]:
    """This process's ``code`` object (see the module)."""
    return {"timed": [dict(e) for e in _timed], "shown": [dict(e) for e in _shown]}


def clear() -> None:
    """Forget what was noted (a test's fresh start)."""
    _timed.clear()
    _shown.clear()
