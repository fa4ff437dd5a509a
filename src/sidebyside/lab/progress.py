"""Progress bars that read well live and in a published post.

In an interactive notebook, ``bar`` is ``tqdm.auto`` (a widget). When a
notebook runs headless (the publisher says so in the run context,
:mod:`sidebyside.run.context`), a widget would leave only its first frame in the
saved notebook, so ``bar`` is a plain text tqdm on stdout: the publisher
keeps its final frame.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable
from typing import TypeVar

from sidebyside.run import context

__all__ = ["bar", "headless"]

T = TypeVar("T")


def headless() -> bool:
    """Whether this run is headless (the publisher's run context says so)."""
    return context.current().headless


def bar(iterable: Iterable[T] | None = None, *, desc: str | None = None, total: int | None = None, leave: bool = True, **kwargs):
    """A tqdm progress bar: a widget live, plain text on stdout when headless; none at all over an iterable
    known to be empty (a post would show "0it")."""
    if total == 0 or (total is None and hasattr(iterable, "__len__") and len(iterable) == 0):
        return _silent(iterable)
    if headless():
        from tqdm.std import tqdm

        kwargs.setdefault("file", sys.stdout)
        kwargs.setdefault("ncols", 88)
        kwargs.setdefault("mininterval", 1.0)
        kwargs.setdefault("ascii", False)
    else:
        from tqdm.auto import tqdm
    return tqdm(iterable, desc=desc, total=total, leave=leave, **kwargs)


def _silent(iterable):
    """A tqdm that shows nothing (its methods work: update, set_postfix, close)."""
    from tqdm.std import tqdm

    return tqdm(iterable, disable=True)
