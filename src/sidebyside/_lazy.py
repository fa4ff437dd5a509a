"""Lazy package faces: a package's modules, found on disk, each imported on first use, so that
``import sidebyside`` or ``import sidebyside.lab`` pulls in neither PyTorch nor JAX."""

from __future__ import annotations

import ast
import importlib
import pkgutil
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
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


def submodules(path: Iterable[str]) -> list[str]:
    """The modules and packages in a package's ``__path__`` whose names do not start with "_", sorted."""
    return sorted(m.name for m in pkgutil.iter_modules(list(path)) if not m.name.startswith("_"))


def listed_names(source: Path) -> list[str]:
    """The names a module's literal ``__all__`` lists, read from its source without importing it."""
    for node in ast.parse(source.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets):
            try:
                return [str(n) for n in ast.literal_eval(node.value)]
            except ValueError as exc:
                raise ImportError(f"{source}: __all__ must be a literal list of names to be re-exported") from exc
    return []


def package(name: str, path: Iterable[str], *, reexport: bool = False) -> tuple[list[str], Callable[[str], Any]]:
    """The face of package ``name`` from what is on disk: ``(__all__, __getattr__)``. ``__all__`` holds its
    :func:`submodules`, and with ``reexport`` every name a submodule lists in its ``__all__`` (read by
    :func:`listed_names`), served from that submodule; a name two submodules list is an error."""
    path = list(path)
    modules = submodules(path)
    names: dict[str, str] = {}
    if reexport:
        for module in modules:
            folder = Path(path[0])
            source = folder / module / "__init__.py" if (folder / module).is_dir() else folder / f"{module}.py"
            for listed in listed_names(source):
                if listed in names or listed in modules:
                    raise ImportError(f"{name}: {listed!r} is listed by both {names.get(listed, listed)} and {module}; "
                                      "rename one, or drop it from one module's __all__")
                names[listed] = module
    return modules + sorted(names), face(name, modules, names)
