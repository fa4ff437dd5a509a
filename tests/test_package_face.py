"""The package's face: every public module reachable from ``import sidebyside``,
listed in its docstring, every public function documented, random keys named
``key`` and passed first (STYLE.md, items 6 and 12)."""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import pytest

import sidebyside

# Modules that are not part of the face: entry points run with `python -m`.
ENTRY_POINTS = {"__main__"}


def _public_modules() -> list[str]:
    return sorted(m.name for m in pkgutil.iter_modules(sidebyside.__path__)
                  if not m.name.startswith("_") and m.name not in ENTRY_POINTS)


def test_every_public_module_is_exported_and_listed_in_the_docstring():
    modules = _public_modules()
    missing = [name for name in modules if name not in sidebyside.__all__]
    assert not missing, f"add to sidebyside.__all__: {missing}"
    undocumented = [name for name in modules if f"``{name}``" not in sidebyside.__doc__]
    assert not undocumented, f"list in sidebyside's docstring: {undocumented}"


def _report_modules() -> list[str]:
    import sidebyside.report

    return [f"report.{name}" for name in sidebyside.report.__all__]


def test_every_report_module_exists_and_is_listed():
    import sidebyside.report

    on_disk = sorted(m.name for m in pkgutil.iter_modules(sidebyside.report.__path__) if not m.name.startswith("_"))
    assert on_disk == sorted(sidebyside.report.__all__)
    assert all(f"``{name}``" in sidebyside.report.__doc__ for name in on_disk)


@pytest.mark.parametrize("name", _public_modules() + _report_modules())
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


def test_import_is_lazy():
    import subprocess
    import sys

    code = "import sys, sidebyside; sidebyside.grid_sample; print('torch' in sys.modules)"
    # grid_sample needs JAX, not torch; `import sidebyside` alone pulls in neither.
    plain = subprocess.run([sys.executable, "-c", "import sys, sidebyside; print('torch' in sys.modules, "
                            "'jax' in sys.modules)"], capture_output=True, text=True, check=True)
    assert plain.stdout.split() == ["False", "False"]
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).returncode == 0
