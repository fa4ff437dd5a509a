"""Lazy package faces: a package lists its modules (and re-exported names) and imports each on
first use, so that ``import sidebyside`` or ``import sidebyside.lab`` pulls in neither PyTorch nor JAX."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterable, Mapping
from typing import Any


def face(package: str, modules: Iterable[str], names: Mapping[str, str] | None = None) -> Callable[[str], Any]:
    """A module ``__getattr__`` for ``package``: ``modules`` are its submodules, imported on first use;
    ``names`` maps a re-exported name to the submodule that defines it."""
    modules, names = set(modules), dict(names or {})

    def __getattr__(name: str) -> Any:
        if name in modules:
            return importlib.import_module(f"{package}.{name}")
        if name in names:
            return getattr(importlib.import_module(f"{package}.{names[name]}"), name)
        raise AttributeError(f"module {package!r} has no attribute {name!r}")

    return __getattr__
