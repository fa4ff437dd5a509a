"""The import graph of ``src/sidebyside``: no circle, and no façade.

Every ``import`` of a sidebyside module counts, wherever it stands: at the top of a module, inside a
function (an import put there to break a circle still closes it) or under ``if TYPE_CHECKING``.
Relative imports are resolved. ``from package import name`` is an edge to ``package.name`` when that is
a module, else to the package itself (its ``__init__``).

A façade is a module whose ``__all__`` lists a name it imported from another sidebyside module: a
reader looking for that name's owner is sent to the wrong room. A package's ``__init__`` may list the
names of its own modules (the package's face); nothing else may.
"""

from __future__ import annotations

import ast
from collections import deque
from pathlib import Path

from conftest import ROOT

SRC = ROOT / "src"
PACKAGE = "sidebyside"



def module_files(src: Path, package: str) -> dict[str, Path]:
    """Every module under ``src/package``, by dotted name (a package by its own name, for its ``__init__``)."""
    found = {}
    for path in sorted((src / package).rglob("*.py")):
        parts = path.relative_to(src).with_suffix("").parts
        found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def _base(module: str, path: Path, level: int) -> str:
    """The package a relative import of ``level`` dots in ``module`` starts from."""
    parts = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
    return ".".join(parts[: len(parts) - (level - 1)])


def imports(module: str, path: Path, known: set[str]) -> list[tuple[str, int]]:
    """``(imported sidebyside module, line)`` for every import in ``path`` (the module ``module``), at any depth."""
    found = []

    def owner(dotted: str) -> str | None:
        parts = dotted.split(".")
        for end in range(len(parts), 0, -1):
            if ".".join(parts[:end]) in known:
                return ".".join(parts[:end])
        return None

    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            targets = [owner(alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            source = node.module or ""
            if node.level:
                source = ".".join(p for p in (_base(module, path, node.level), source) if p)
            targets = [f"{source}.{alias.name}" if f"{source}.{alias.name}" in known else owner(source)
                       for alias in node.names]
        else:
            continue
        found += [(t, node.lineno) for t in targets if t and t != module]
    return found


def graph(src: Path, package: str) -> dict[str, dict[str, int]]:
    """Module -> {module it imports: the first line that imports it}."""
    files = module_files(src, package)
    known = set(files)
    edges: dict[str, dict[str, int]] = {}
    for module, path in files.items():
        edges[module] = {}
        for target, line in imports(module, path, known):
            edges[module].setdefault(target, line)
    return edges


def strongly_connected(edges: dict[str, dict[str, int]]) -> list[set[str]]:
    """The graph's strongly connected components of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[set[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(edges.get(node, {})):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = set()
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.add(member)
                if member == node:
                    break
            if len(component) > 1:
                components.append(component)

    for node in sorted(edges):
        if node not in index:
            visit(node)
    return components


def shortest_cycle(edges: dict[str, dict[str, int]], component: set[str]) -> list[str]:
    """One shortest circle through the component's first module, as ``module (line) -> ...``."""
    start = min(component)
    previous: dict[str, str] = {}
    queue = deque([start])
    while queue:
        node = queue.popleft()
        for nxt in sorted(edges[node]):
            if nxt not in component:
                continue
            if nxt == start:
                path = [node]
                while path[-1] != start:
                    path.append(previous[path[-1]])
                path.reverse()
                path.append(start)
                return [f"{a} (line {edges[a][b]})" for a, b in zip(path, path[1:], strict=False)] + [start]
            if nxt not in previous:
                previous[nxt] = node
                queue.append(nxt)
    raise AssertionError(f"no cycle through {start}")


def cycles(src: Path, package: str) -> list[str]:
    """Each circle of imports under ``src/package``, written out."""
    edges = graph(src, package)
    return [" -> ".join(shortest_cycle(edges, c)) + f"  [all of: {', '.join(sorted(c))}]"
            for c in strongly_connected(edges)]


def _listed(tree: ast.Module) -> list[str]:
    names: list[str] = []
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets):
            value = node.value
        elif isinstance(node, (ast.AugAssign, ast.AnnAssign)) and getattr(node.target, "id", None) == "__all__":
            value = node.value
        else:
            continue
        try:
            names += [str(n) for n in ast.literal_eval(value)]
        except ValueError:
            continue  # a computed face (sidebyside._lazy.package): its modules' own names
    return names


def facades(src: Path, package: str) -> list[str]:
    """``"module: name (from owner)"`` for each name a module's ``__all__`` lists but imported from another
    sidebyside module (a package's ``__init__`` may list its own modules' names)."""
    files = module_files(src, package)
    found = []
    for module, path in files.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        imported: dict[str, str] = {}
        for node in tree.body:
            if isinstance(node, ast.ImportFrom):
                source = node.module or ""
                if node.level:
                    source = ".".join(p for p in (_base(module, path, node.level), source) if p)
                if source.split(".")[0] == package:
                    for alias in node.names:
                        whole = f"{source}.{alias.name}"
                        imported[alias.asname or alias.name] = whole if whole in files else source
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.name.split(".")[0] == package:
                        imported[alias.asname or alias.name.split(".")[0]] = alias.name
        own_face = path.name == "__init__.py"
        for name in _listed(tree):
            source = imported.get(name)
            if source and not (own_face and source.startswith(module + ".")):
                found.append(f"{module}: {name} (from {source})")
    return found


def test_the_graph_of_src_has_no_circle():
    found = cycles(SRC, PACKAGE)
    assert not found, ("import circles in src/ (move the function to the module that owns it, the lowest "
                       "layer that needs it, and import it from there):\n" + "\n".join(found))


def test_no_module_re_exports_another_modules_names():
    found = facades(SRC, PACKAGE)
    assert not found, ("a façade: import these names from the module that defines them, and drop them from "
                       "this module's __all__:\n" + "\n".join(found))


def _tree(tmp_path: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = tmp_path / "pkg" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return tmp_path


def test_the_check_sees_circles_closed_inside_functions_and_by_relative_imports(tmp_path):
    src = _tree(tmp_path, {
        "__init__.py": "",
        "low.py": "def f():\n    from pkg import high\n    return high\n",
        "high.py": "from . import low\n",
        "sub/__init__.py": "",
        "sub/a.py": "from ..sub.b import thing\n",
        "sub/b.py": "if False:\n    import pkg.sub.a\nthing = 1\n",
        "clean.py": "from pkg.low import f\nimport os\n",
    })
    found = cycles(src, "pkg")
    assert len(found) == 2, found
    assert found[0].startswith("pkg.high (line 1) -> pkg.low (line 2) -> pkg.high")
    assert found[1].startswith("pkg.sub.a (line 1) -> pkg.sub.b (line 2) -> pkg.sub.a")


def test_the_check_sees_a_facade_but_not_a_package_face(tmp_path):
    src = _tree(tmp_path, {
        "__init__.py": "from pkg.sub.a import thing\n__all__ = ['thing']\n",
        "owner.py": "def name():\n    pass\n",
        "front.py": "from pkg.owner import name\nfrom . import owner as o\n__all__ = ['name', 'o', 'own']\nown = 1\n",
        "sub/__init__.py": "from .a import thing\n__all__ = ['thing']\n",
        "sub/a.py": "thing = 1\n",
    })
    assert facades(src, "pkg") == ["pkg.front: name (from pkg.owner)", "pkg.front: o (from pkg.owner)"]
