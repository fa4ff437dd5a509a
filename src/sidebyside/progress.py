"""Progress bars that read well live and in a published post.

In an interactive notebook, ``bar`` is ``tqdm.auto`` (a widget). When a
notebook runs headless (papermill sets ``SIDEBYSIDE_HEADLESS=1`` through the
publisher), a widget would leave only its first frame in the saved notebook,
so ``bar`` is a plain text tqdm on stdout: the publisher keeps its final frame.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable
from typing import TypeVar

__all__ = ["bar", "headless"]

T = TypeVar("T")


def headless() -> bool:
    return os.environ.get("SIDEBYSIDE_HEADLESS") == "1"


def bar(iterable: Iterable[T] | None = None, *, desc: str | None = None, total: int | None = None, leave: bool = True, **kwargs):
    """A tqdm progress bar: a widget live, plain text on stdout when headless."""
    if headless():
        from tqdm.std import tqdm

        kwargs.setdefault("file", sys.stdout)
        kwargs.setdefault("ncols", 88)
        kwargs.setdefault("mininterval", 1.0)
        kwargs.setdefault("ascii", False)
    else:
        from tqdm.auto import tqdm
    return tqdm(iterable, desc=desc, total=total, leave=leave, **kwargs)
