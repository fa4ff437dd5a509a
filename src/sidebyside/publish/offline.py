"""What one call to a lent GPU machine carries, and whether it fits: `make offline`'s arithmetic.

A call carries the tree as git ships it (each tracked file at its size in git's index, _posts/,
images/ and _data/ included, and each untracked file git does not ignore) plus ``.offline/``: the
execution wheels, FashionMNIST when one of the call's posts reads it, and the lists. A call may
carry :data:`CALL_MIB`; ``make offline`` refuses above :data:`LIMIT_MIB`, naming what to drop.

Which posts read FashionMNIST is derived from their code, not listed: a post reads it when the code
cells of its notebook, or a module of this library that they import (followed through the
module's own imports), call ``load`` of ``sidebyside.lab.data``.

Command line (tools/prepare-offline.sh)::

    python -m sidebyside.publish.offline posts [SLUGS]  the call's posts (default: every post
                                                        with a GPU section), "<slug> fashion|-"
    python -m sidebyside.publish.offline check DIR      the sizes with DIR as .offline/; exit 3,
                                                        saying what to drop, over LIMIT_MIB

Imports neither PyTorch nor JAX.
"""

from __future__ import annotations

import ast
import dataclasses
import subprocess
import sys
from pathlib import Path

from sidebyside.publish.common import ROOT, PublishError

__all__ = ["MIB", "LIMIT_MIB", "CALL_MIB", "DATA_FILE", "LOADER", "Carry", "tree_bytes",
           "dir_bytes", "reads_fashion_mnist", "call_posts", "measure", "check", "main"]

MIB = 2**20
#: What ``make offline`` lets a call carry, tree and ``.offline/`` together.
LIMIT_MIB = 48
#: What a call to a lent GPU machine may carry at most.
CALL_MIB = 64
#: The list of the posts ``.offline/`` was made for, "<slug> fashion|-" a line.
DATA_FILE = "POSTS"
#: The function whose call marks a post that reads FashionMNIST.
LOADER = "sidebyside.lab.data.load"


@dataclasses.dataclass
class Carry:
    """Bytes a call carries, by kind; ``fashion`` names the posts the data is carried for."""

    tree: int
    wheels: int
    data: int
    other: int
    tree_files: int = 0
    posts: tuple[str, ...] = ()
    fashion: tuple[str, ...] = ()
    largest: tuple[tuple[str, int], ...] = ()  # the tree's largest top-level folders, largest first

    @property
    def total(self) -> int:
        return self.tree + self.wheels + self.data + self.other


def _git(root: Path, *args: str, stdin: str | None = None) -> str:
    try:
        done = subprocess.run(["git", "-C", str(root), *args], input=stdin, capture_output=True,
                              text=True, check=True)
    except (OSError, subprocess.CalledProcessError) as exc:
        raise PublishError(f"git {' '.join(args)} failed in {root} ({exc}); make offline measures "
                           "the tree with git: run it from the project's git checkout") from None
    return done.stdout


def tree_bytes(root: Path = ROOT) -> tuple[int, int, dict[str, int]]:
    """(bytes, files, bytes by top-level entry: ``images/``, ``README.md``) of what a call ships of
    ``root``: each tracked file at its size in git's index, and each untracked file git does not
    ignore at its size."""
    listing = _git(root, "ls-files", "-s", "-z").split("\0")
    staged = [line.split("\t", 1) for line in listing if line]
    blobs = [(meta.split()[1], path) for meta, path in staged if not meta.startswith("160000")]
    sizes = _git(root, "cat-file", "--batch-check=%(objectsize)",
                 stdin="".join(f"{oid}\n" for oid, _ in blobs)).split()
    files = [(path, int(size)) for (_, path), size in zip(blobs, sizes, strict=True)]
    for path in _git(root, "ls-files", "-o", "--exclude-standard", "-z").split("\0"):
        if path and (Path(root) / path).is_file():
            files.append((path, (Path(root) / path).stat().st_size))
    by_top: dict[str, int] = {}
    for path, size in files:
        top = path.split("/", 1)[0] + ("/" if "/" in path else "")
        by_top[top] = by_top.get(top, 0) + size
    return sum(size for _, size in files), len(files), by_top


def dir_bytes(path: Path) -> int:
    """The bytes of every file under ``path`` (0 where it is absent)."""
    return sum(p.stat().st_size for p in Path(path).rglob("*") if p.is_file())


def _module_file(name: str, src: Path) -> Path | None:
    base = src.joinpath(*name.split("."))
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def _names(tree: ast.AST, package: str) -> tuple[dict[str, str], set[str]]:
    """The names ``tree`` binds by import (name to dotted path) and the modules it imports."""
    aliases: dict[str, str] = {}
    modules: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                top = a.name.split(".")[0]
                aliases[a.asname or top] = a.name if a.asname else top
                modules.add(a.name)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*parent, *([base] if base else [])])
            modules.add(base)
            for a in node.names:
                aliases[a.asname or a.name] = f"{base}.{a.name}"
                modules.add(f"{base}.{a.name}")
    return aliases, modules


def _dotted(node: ast.AST) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        head = _dotted(node.value)
        return None if head is None else f"{head}.{node.attr}"
    return None


def _calls_loader(tree: ast.AST, aliases: dict[str, str]) -> bool:
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and (name := _dotted(node.func)):
            head, _, rest = name.partition(".")
            if ".".join(filter(None, [aliases.get(head, head), rest])) == LOADER:
                return True
    return False


def _parse(code: str, where: Path) -> ast.AST:
    # IPython's magics and shell escapes are no Python; what they run is no library call
    lines = [line for line in code.splitlines() if not line.lstrip().startswith(("%", "!"))]
    try:
        return ast.parse("\n".join(lines))
    except SyntaxError as exc:
        raise PublishError(f"{where}: its code does not parse ({exc}); fix it, then run make "
                           "offline again") from None


def reads_fashion_mnist(notebook: Path, src: Path = ROOT / "src") -> bool:
    """Whether the notebook's code cells, or a module under ``src`` they import (followed through
    its imports), call :data:`LOADER`."""
    from sidebyside.run.runkey import code_cells

    todo = [(_parse("\n".join(code_cells(notebook)), notebook), "")]
    seen: set[str] = set()
    while todo:
        tree, package = todo.pop()
        aliases, modules = _names(tree, package)
        if _calls_loader(tree, aliases):
            return True
        for name in sorted(modules - seen):
            seen.add(name)
            path = _module_file(name, Path(src)) if name.startswith("sidebyside") else None
            if path is not None:
                own = name if path.name == "__init__.py" else name.rpartition(".")[0]
                todo.append((_parse(path.read_text(encoding="utf-8"), path), own))
    return False


def call_posts(slugs: str | None, notebooks: Path = ROOT / "notebooks",
               src: Path = ROOT / "src") -> list[tuple[str, bool]]:
    """(slug, reads FashionMNIST) for each post of ``slugs`` (comma-separated), or, without any,
    for each post whose settings plan a GPU section, in the notebooks' order."""
    from sidebyside.publish.discovery import discover, select
    from sidebyside.publish.schedule import gpu_sections

    infos = discover(notebooks)
    if slugs and slugs.strip():
        chosen = select(infos, slugs)
    else:
        gpu = gpu_sections(infos)
        chosen = [i for i in infos if i.slug in gpu]
    return [(i.slug, reads_fashion_mnist(i.path, src)) for i in chosen]


def measure(offline: Path, root: Path = ROOT) -> Carry:
    """What a call carries with ``offline`` as its ``.offline/``: the tree of ``root``, its wheels
    (``wheels/``), its FashionMNIST (``fashion-mnist/``) and the rest; the posts the data is for
    come from its :data:`DATA_FILE`."""
    offline = Path(offline)
    tree, count, by_top = tree_bytes(root)
    wheels = dir_bytes(offline / "wheels")
    data = dir_bytes(offline / "fashion-mnist")
    posts = (offline / DATA_FILE).read_text(encoding="utf-8").split("\n") \
        if (offline / DATA_FILE).is_file() else []
    rows = [line.split() for line in posts if line.strip()]
    largest = tuple(sorted(by_top.items(), key=lambda kv: -kv[1])[:3])
    return Carry(tree=tree, wheels=wheels, data=data, other=dir_bytes(offline) - wheels - data,
                 tree_files=count, posts=tuple(r[0] for r in rows),
                 fashion=tuple(r[0] for r in rows if r[1:] == ["fashion"]), largest=largest)


def _mib(n: float) -> str:
    return f"{n / MIB:5.1f} MiB"


def check(carry: Carry, limit_mib: float = LIMIT_MIB) -> tuple[bool, list[str]]:
    """Whether ``carry`` fits ``limit_mib``, and the lines that say what it carries and, when it
    does not fit, what to drop."""
    for_posts = f"FashionMNIST, for {', '.join(carry.fashion)}" if carry.data else "no FashionMNIST"
    lines = [f"  tree   {_mib(carry.tree)}  ({carry.tree_files} files as git ships them)",
             f"  wheels {_mib(carry.wheels)}  (.offline/wheels: what the box lacks)",
             f"  data   {_mib(carry.data)}  ({for_posts})",
             f"  lists  {_mib(carry.other)}",
             f"  total  {_mib(carry.total)}  of {limit_mib} MiB allowed; a GPU call may carry "
             f"{CALL_MIB} MiB"]
    over = carry.total - limit_mib * MIB
    if over <= 0:
        return True, lines
    lines.append(f"refused: {_mib(over).strip()} over {limit_mib} MiB; nothing was written to "
                 ".offline/.")
    others = [slug for slug in carry.posts if slug not in carry.fashion]
    if carry.data and over <= carry.data and others:
        lines.append(f"  Drop the posts that read FashionMNIST ({', '.join(carry.fashion)}) from "
                     "SLUGS "
                     f"(SLUGS={','.join(others)}): without them the call carries "
                     f"{_mib(carry.total - carry.data).strip()}.")
    else:
        big = ", ".join(f"{name} {_mib(size).strip()}" for name, size in carry.largest)
        need = f"; {', '.join(carry.fashion)} cannot go without the data" if carry.fashion else ""
        lines.append(f"  Shrink what git tracks (largest: {big}) or the wheels by "
                     f"{_mib(over).strip()}{need}.")
    return False, lines


def main(argv: list[str] | None = None, root: Path = ROOT) -> int:
    """The command line (see the module docstring), for the tree of ``root``."""
    args = list(sys.argv[1:] if argv is None else argv)
    try:
        if args[:1] == ["posts"] and len(args) <= 2:
            for slug, fashion in call_posts(args[1] if len(args) == 2 else None, root / "notebooks",
                                           root / "src"):
                print(slug, "fashion" if fashion else "-")
            return 0
        if args[:1] == ["check"] and len(args) == 2:
            ok, lines = check(measure(Path(args[1]), root))
            print("\n".join(lines), file=sys.stdout if ok else sys.stderr)
            return 0 if ok else 3
    except PublishError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print("usage: python -m sidebyside.publish.offline posts [SLUG,SLUG] | check OFFLINE_DIR",
          file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
