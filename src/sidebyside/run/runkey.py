"""What a notebook run depended on, and the commit it ran from.

A run's inputs are its notebook source, its parameters for the profile, the
pinned requirements, and what it actually used while it ran: the library
modules it imported (``sys.modules`` of the kernel, recorded by
:func:`recorded`, which ``provenance.save_results`` calls) and the data files
it read (announced with :func:`note_input`, e.g. by ``sidebyside.lab.data``)::

    inputs = {"modules": {"src/sidebyside/lab/data.py": "<sha256>", ...},
              "data": {"/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz": "<sha256>", ...}}

Paths are relative to the project root when under it (else absolute, with
``~`` for the home directory). The publisher stores ``inputs`` in the results
file; :func:`key` hashes the notebook, the parameters, the pins and the
*current* content of each recorded file, so a run is stale exactly when one
of its inputs changed. A recorded file that this machine does not have (a
data folder on the GPU box that ran it) counts with its recorded digest.

A record without a module list is stale: its key cannot be told, so it runs again.

:func:`commit_stamp` is the commit a run came from: ``HEAD`` of the project
checkout, ``-dirty`` only when one of the run's inputs has uncommitted
changes. A tree that is not its own git checkout must be given the commit
(``$SIDEBYSIDE_GIT_SHA``); it is never guessed.

This module imports neither PyTorch nor JAX: the publisher uses it to decide,
in a second, that nothing has to run.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import re
import subprocess
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from sidebyside.run import context

__all__ = [
    "GIT_SHA_ENV",
    "StampError",
    "project_root",
    "note_input",
    "recorded",
    "pins_files",
    "read_pins",
    "key",
    "run_key",
    "declared_inputs",
    "code_cells",
    "code_digest",
    "stack",
    "STEERING_PARAMS",
    "freshness",
    "input_paths",
    "commit_stamp",
]

GIT_SHA_ENV = context.ENV["commit"]
PACKAGE = "sidebyside"
# What the publisher writes: never an input, never a reason to call a run dirty.
GENERATED = ("_posts", "images", "_data")
_SHA_RE = re.compile(r"^[0-9a-f]{7,40}(-dirty)?$")
#: Parameters that steer a run without changing what it measures: where a run in parts saves its parts,
#: when it stops, and prose it prints. A run's declared inputs (:func:`declared_inputs`) leave them out.
STEERING_PARAMS = ("checkpoint_file", "run_budget_s", "profile_note")


class StampError(Exception):
    """The commit of a run cannot be told; the message says what to pass."""


def project_root() -> Path:
    """The checkout the run belongs to: the run context's ``root`` (set by the
    publisher for the kernel, :mod:`sidebyside.run.context`), else the tree this module sits in."""
    return context.current().project_root()


# --------------------------------------------------------------------------- recording, inside the run

_noted: list[Path] = []


def note_input(path: str | os.PathLike) -> None:
    """Declare that this run read the data file ``path`` (called by the
    library where it reads data, so notebooks need not)."""
    resolved = Path(path).resolve()
    if resolved not in _noted:
        _noted.append(resolved)


_digests: dict[tuple[str, int, int], str] = {}


def digest(path: Path) -> str:
    """SHA-256 of a file's content, memoised per (path, size, mtime) in this process."""
    stat = path.stat()
    memo = (str(path), stat.st_size, stat.st_mtime_ns)
    if memo not in _digests:
        sha = hashlib.sha256()
        with open(path, "rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                sha.update(block)
        _digests[memo] = sha.hexdigest()
    return _digests[memo]


def _name(path: Path, root: Path) -> str:
    try:
        return path.relative_to(root.resolve()).as_posix()
    except ValueError:
        pass
    home = Path.home()
    try:
        return "~/" + path.relative_to(home).as_posix()
    except ValueError:
        return path.as_posix()


def _path(name: str, root: Path) -> Path:
    if name.startswith("~/"):
        return Path.home() / name[2:]
    path = Path(name)
    return path if path.is_absolute() else root / path


def imported_modules(modules: dict[str, Any] | None = None) -> list[Path]:
    """The files of the library's modules imported in this process."""
    modules = sys.modules if modules is None else modules
    files = set()
    for name, module in list(modules.items()):
        if name != PACKAGE and not name.startswith(PACKAGE + "."):
            continue
        file = getattr(module, "__file__", None)
        if file and file.endswith(".py"):
            files.add(Path(file).resolve())
    return sorted(files)


def recorded(root: str | os.PathLike | None = None, modules: dict[str, Any] | None = None) -> dict[str, dict[str, str]]:
    """This run's inputs so far: imported library modules and noted data files, with digests."""
    root = Path(root) if root is not None else project_root()
    return {
        "modules": {_name(p, root): digest(p) for p in imported_modules(modules)},
        "data": {_name(p, root): digest(p) for p in _noted if p.is_file()},
    }


# --------------------------------------------------------------------------- the key


def pins_files(profile: str, root: Path) -> list[Path]:
    """The pinned requirements a run of ``profile`` installs from: ``requirements.txt``,
    and for the gpu profile the CUDA layers ``requirements-gpu-cuda*.txt``."""
    root = Path(root)
    gpu = sorted(root.glob("requirements-gpu*.txt")) if profile == "gpu" else []
    return [p for p in [root / "requirements.txt", *gpu] if p.is_file()]


def read_pins(paths: Iterable[Path]) -> dict[str, str]:
    """``{package: version}`` of the ``name==version`` lines (extras and local
    labels dropped; a line naming ``${...}`` keeps its version)."""
    pins: dict[str, str] = {}
    for path in paths:
        for line in Path(path).read_text().splitlines():
            line = line.split("#", 1)[0].strip()
            match = re.match(r"^([A-Za-z0-9_.-]+)(?:\[[^\]]*\])?\s*==\s*([^\s;+]+)", line)
            if match:
                pins[match.group(1).lower().replace("_", "-")] = match.group(2)
    return pins


def _start(info_path: Path, profile: str, params: dict[str, Any]):
    sha = hashlib.sha256()
    sha.update(Path(info_path).read_bytes() + b"\0")
    sha.update(json.dumps({"profile": profile, "params": params}, sort_keys=True, default=str).encode())
    return sha


def key(info_path: Path, profile: str, params: dict[str, Any], inputs: dict[str, dict[str, str]], root: Path) -> str:
    """The key of a run whose recorded ``inputs`` are given (see the module
    docstring): notebook source, parameters, pins, and the current digest of
    each recorded module and data file."""
    sha = _start(info_path, profile, params)
    sha.update(b"inputs-v1\0")
    for pins in pins_files(profile, root):
        sha.update(pins.name.encode() + b"\0" + pins.read_bytes() + b"\0")
    for kind in ("modules", "data"):
        for name, recorded_digest in sorted((inputs.get(kind) or {}).items()):
            path = _path(name, root)
            current = digest(path) if path.is_file() else (recorded_digest if kind == "data" else "missing")
            sha.update(f"{kind}\0{name}\0{current}\0".encode())
    return sha.hexdigest()


def code_cells(path: str | os.PathLike, text: str | None = None) -> list[str]:
    """The code cells of the notebook at ``path`` (or of ``text``, its content at another commit, say),
    each as its source: of a jupytext percent ``.py``, the cells after its header (the ``# ---`` block)
    split at the ``# %%`` markers, markdown and raw cells left out and each marker line (with its tags
    and other metadata) left out; of an ``.ipynb``, its cells of type code. What a run executes, without
    its prose, its layout or its header."""
    path = Path(path)
    text = path.read_text(encoding="utf-8") if text is None else text
    if path.suffix == ".ipynb":
        cells = json.loads(text).get("cells", [])
        return ["".join(c["source"]) if isinstance(c.get("source"), list) else str(c.get("source", ""))
                for c in cells if c.get("cell_type") == "code"]
    lines = text.splitlines()
    start = 1 if lines and lines[0].startswith("#!") else 0
    if len(lines) > start and lines[start].rstrip() == "# ---":
        ends = [n for n in range(start + 1, len(lines)) if lines[n].rstrip() == "# ---"]
        start = ends[0] + 1 if ends else start
    cells: list[list[str]] = []
    kinds: list[str] = []
    for line in lines[start:]:
        marker = _CELL_MARKER.match(line)
        if marker:
            kinds.append(marker.group(1) or "code")
            cells.append([])
        elif cells:
            cells[-1].append(line)
        elif line.strip():  # code before the first marker is a cell of its own
            kinds.append("code")
            cells.append([line])
    return ["\n".join(cell).strip("\n") for cell, kind in zip(cells, kinds) if kind == "code"]


_CELL_MARKER = re.compile(r"^# %%(?:\s+\[(markdown|md|raw)\])?(?:\s.*)?$")


def code_digest(path: str | os.PathLike, text: str | None = None) -> str:
    """SHA-256 of the notebook's :func:`code_cells`: the same while only its prose, its tags or its
    header (its ``gpu`` budget, say) change."""
    return hashlib.sha256("\0".join(code_cells(path, text)).encode()).hexdigest()


def declared_inputs(info_path: Path, profile: str, params: dict[str, Any], root: Path) -> dict[str, Any]:
    """The inputs a run is given before it starts (the publisher hands them to the notebook through the
    run context, and a run in parts keys its parts with them, :mod:`sidebyside.run.checkpoints`): the
    digest of the notebook's code cells (:func:`code_digest`: not its prose, layout tags or header), the
    profile and its parameters but those of :data:`STEERING_PARAMS`. ``root`` is unused (kept for callers)."""
    return {"code": code_digest(Path(info_path)), "profile": profile,
            "params": {k: v for k, v in params.items() if k not in STEERING_PARAMS}}


@functools.lru_cache(maxsize=1)
def _distributions() -> dict[str, list[str]]:
    """The installed distributions of each top-level module name (what is installed does not change
    while a run runs)."""
    import importlib.metadata

    return importlib.metadata.packages_distributions()


def stack(profile: str | None = None, root: Path | None = None,
          modules: dict[str, Any] | None = None) -> dict[str, str | None]:
    """The stack a measurement ran on: the installed version of every pinned package (:func:`pins_files`
    of ``profile``, default the run context's, else gpu) that this process has imported, e.g.
    ``{"torch": "2.11.0", "jax": "0.11.2", "timm": "1.0.31", ...}``: the box's own versions where they
    differ from the pins, and nothing of the packages it did not import."""
    import importlib.metadata

    root = Path(root) if root is not None else project_root()
    pinned = read_pins(pins_files(profile or context.current().profile or "gpu", root))
    tops = {name.split(".")[0] for name in (sys.modules if modules is None else modules)}
    found: dict[str, str | None] = {}
    for top, dists in _distributions().items():
        if top not in tops:
            continue
        for dist in dists:
            name = dist.lower().replace("_", "-")
            if name in pinned:
                try:
                    found[name] = importlib.metadata.version(dist)
                except importlib.metadata.PackageNotFoundError:
                    found[name] = None
    return dict(sorted(found.items()))


def run_key(info_path: Path, profile: str, params: dict[str, Any], inputs: dict | None, root: Path) -> str:
    """The key for a run's record, from its recorded inputs (none recorded: a key no run of today matches)."""
    if inputs and inputs.get("modules"):
        return key(info_path, profile, params, inputs, root)
    return "no-inputs-recorded"


def freshness(info_path: Path, record: dict[str, Any], params: dict[str, Any], root: Path) -> tuple[bool, str]:
    """Whether a published ``record`` is current for the notebook at
    ``info_path`` with ``params`` (its profile's parameters): ``(current, key)``.
    The one test of staleness, used by ``publish execute``, ``publish list`` and the scoreboard
    (through :func:`sidebyside.publish.cache.freshness`)."""
    inputs = record.get("inputs")
    current = run_key(info_path, record.get("profile"), params, inputs, root)
    return bool(inputs and inputs.get("modules")) and current == record.get("source_hash"), current


# --------------------------------------------------------------------------- the commit


def input_paths(info_path: Path, params_file: Path, profile: str, inputs: dict | None, root: Path) -> list[Path]:
    """The files whose uncommitted changes make a run ``-dirty``: the notebook,
    its parameters file, the pins, the recorded modules and data files (or,
    without a record, the whole library)."""
    paths = [Path(info_path), Path(params_file), *pins_files(profile, root)]
    if inputs and inputs.get("modules"):
        for kind in ("modules", "data"):
            paths += [_path(name, root) for name in (inputs.get(kind) or {})]
    else:
        paths.append(root / "src" / PACKAGE)
    return paths


def _git(root: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True, check=True,
                          timeout=30).stdout.strip()


def commit_stamp(root: str | os.PathLike | None = None, paths: Iterable[str | os.PathLike] | None = None, *,
                 strict: bool = True) -> str | None:
    """The commit a run came from, ``<sha12>`` or ``<sha12>-dirty``.

    ``$SIDEBYSIDE_GIT_SHA``, when set, is taken as given (a copy of the tree
    made from that commit). Otherwise ``root`` must be the top level of a git
    checkout; the run is ``-dirty`` when any of ``paths`` (inside the
    checkout) has uncommitted changes, tracked or not; ``paths=None`` means
    every file but the generated posts, images and results. A tree that is
    not its own checkout raises :class:`StampError` (``strict``) or gives
    None (a notebook run by hand, e.g. on Colab).
    """
    given = context.current().commit or ""
    if given:
        if not _SHA_RE.match(given):
            raise StampError(f"{GIT_SHA_ENV}={given!r} is not a commit: give the hexadecimal sha "
                             "(7 to 40 characters) of the commit the tree was copied from")
        return given
    root = Path(root) if root is not None else project_root()
    try:
        top = _git(root, "rev-parse", "--show-toplevel")
        sha = _git(root, "rev-parse", "--short=12", "HEAD")
    except (OSError, subprocess.SubprocessError) as exc:
        if not strict:
            return None
        reason = "git is not installed" if isinstance(exc, OSError) else f"{root} is not a git checkout"
        raise StampError(
            f"cannot tell which commit this run comes from ({reason}), and it will not guess. "
            f"Pass the commit the tree was made from: {GIT_SHA_ENV}=<commit> make execute ...") from None
    if Path(top).resolve() != root.resolve():
        if not strict:
            return None
        raise StampError(
            f"{root} is not the top of its own git checkout (git found {top}), so that checkout's commit "
            f"is not this tree's. Pass the commit the tree was made from: {GIT_SHA_ENV}=<commit> make execute ...")
    if paths is None:
        specs = [".", *(f":(exclude){p}" for p in GENERATED)]
        untracked = "--untracked-files=no"
    else:
        specs = []
        for path in paths:
            try:
                specs.append(Path(path).resolve().relative_to(root.resolve()).as_posix())
            except ValueError:
                continue  # outside the checkout (e.g. Debian's data folder): not git's to judge
        untracked = "--untracked-files=all"
        if not specs:
            return sha
    try:
        dirty = _git(root, "status", "--porcelain", untracked, "--", *(f":(literal){s}" if paths is not None else s
                                                                       for s in specs))
    except (OSError, subprocess.SubprocessError) as exc:
        raise StampError(f"git status failed in {root}: {exc}") from None
    return f"{sha}-dirty" if dirty else sha
