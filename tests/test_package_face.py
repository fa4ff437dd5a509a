"""The package's face: every public module reachable from ``import sidebyside``,
listed in its docstring, every public function documented, random keys named
``key`` and passed first."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
from pathlib import Path

import pytest

import sidebyside

# Modules that are not part of the face: entry points run with `python -m`.
ENTRY_POINTS = {"__main__"}
_ROOT = Path(sidebyside.__file__).parent
#: Every package on disk but the publisher (its face is its own: see test_api), found, never listed.
FACES = sorted(".".join(p.parent.relative_to(_ROOT).parts) for p in _ROOT.rglob("__init__.py")
               if p.parent.relative_to(_ROOT).parts[:1] != ("publish",))


def _package(name: str):
    return importlib.import_module("sidebyside" + (f".{name}" if name else ""))


def _children(name: str) -> list[str]:
    package = _package(name)
    return sorted(m.name for m in pkgutil.iter_modules(package.__path__)
                  if not m.name.startswith("_") and m.name not in ENTRY_POINTS)


def _public_modules() -> list[str]:
    return [f"{face}.{child}".lstrip(".") for face in FACES for child in _children(face)
            if f"{face}.{child}".lstrip(".") not in FACES and child != "publish"]


@pytest.mark.parametrize("face", FACES)
def test_every_module_of_a_face_is_exported_and_listed_in_its_docstring(face):
    package = _package(face)
    modules = _children(face)
    missing = [name for name in modules if name not in package.__all__]
    assert not missing, f"add to {package.__name__}.__all__: {missing}"
    undocumented = [name for name in modules if f"``{name}``" not in package.__doc__ and f":mod:`.{name}`" not in package.__doc__]
    assert not undocumented, f"list in {package.__name__}'s docstring: {undocumented}"


def test_the_faces_are_found_on_disk():
    assert {"", "lab", "run", "posts", "posts.grid_sample", "grid_sample", "posts.swin_v2"} <= set(FACES)
    # a post's package is a face because it is on disk: its notebook's stem names it
    from sidebyside.publish import discovery

    stems = {info.package for info in discovery.discover(_ROOT.parents[1] / "notebooks")}
    assert stems and {f"posts.{s}" for s in stems} <= set(FACES)


@pytest.mark.parametrize("name", _public_modules())
def test_module_is_reachable_and_its_functions_are_documented(name):
    module = sidebyside
    for part in name.split("."):
        module = getattr(module, part)
    assert module is importlib.import_module(f"sidebyside.{name}")
    assert (module.__doc__ or "").strip(), f"sidebyside.{name} has no module docstring"
    public = getattr(module, "__all__", None) or [n for n in vars(module) if not n.startswith("_")]
    problems = []
    for attr in public:
        obj = getattr(module, attr)
        if not (inspect.isfunction(obj) or inspect.isclass(obj)) or getattr(obj, "__module__", "") != module.__name__:
            continue
        if not (obj.__doc__ or "").strip():
            problems.append(f"{attr}: no docstring")
        if inspect.isfunction(obj):
            params = list(inspect.signature(obj).parameters)
            for p in params:
                if p in {"rng", "prng", "rng_key", "prng_key", "seed_key"}:
                    problems.append(f"{attr}({p}=...): name a random key `key`")
            if "key" in params and params[0] != "key":
                problems.append(f"{attr}: the random key comes first")
    assert not problems, f"sidebyside.{name}: " + "; ".join(problems)


def _imports_of(path: Path) -> set[str]:
    import ast

    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module:
            out.add(node.module)
            out.update(f"{node.module}.{a.name}" for a in node.names)
        elif isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
    return out


@pytest.mark.parametrize("layer", ["lab", "run", "publish"])
def test_imports_go_one_way(layer):
    """lab and run import neither posts nor publish; run imports no lab; publish imports no posts."""
    forbidden = {"lab": ("sidebyside.posts", "sidebyside.publish"),
                 "run": ("sidebyside.posts", "sidebyside.publish", "sidebyside.lab"),
                 "publish": ("sidebyside.posts",)}[layer]
    root = Path(sidebyside.__file__).parent / layer
    bad = {f"{p.relative_to(root.parent)}: {m}" for p in root.rglob("*.py") for m in _imports_of(p)
           if m.startswith(forbidden)}
    assert not bad, sorted(bad)


def test_import_is_lazy():
    import subprocess
    import sys

    code = "import sys, sidebyside; sidebyside.grid_sample; print('torch' in sys.modules)"
    # grid_sample needs JAX, not torch; `import sidebyside` alone pulls in neither.
    plain = subprocess.run([sys.executable, "-c", "import sys, sidebyside; print('torch' in sys.modules, "
                            "'jax' in sys.modules)"], capture_output=True, text=True, check=True)
    assert plain.stdout.split() == ["False", "False"]
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).returncode == 0
