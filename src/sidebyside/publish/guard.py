"""A run touches only its own post.

A notebook's code runs with the publisher's rights: it could rewrite another
post, its figures, its results or its CSV downloads, or add a post of its
own. :class:`Guard` makes that fail loudly and undoes it. Made before a
notebook runs, it records a manifest of every published file (the SHA-256 of
each file under ``_posts/``, ``images/`` and ``_data/results/``, figures and
CSV downloads included) and keeps a copy of each. :meth:`Guard.check` compares
the site with that manifest: every file changed, created or removed since is
put back as it was (created ones removed), and :class:`PublishError` names
them. The publisher checks twice: after the notebook's kernel has run
(nothing in the site may differ: the kernel writes its results under the
build folder, from a scratch working directory), and after its publication
(nothing but the post's own files may differ: ``_posts/<date>-<slug>.md``,
``images/<slug>/``, ``_data/results/<slug>.json``).

The rest of the checkout and of the site is watched too (:func:`tree`, :class:`TreeWatch`): a
notebook's run may change no other file (content, mode, symbolic links; the git hooks and config
included; the site's math engine in ``assets/vendor`` included); what a run changed is put back as
it was, from copies taken before it, and a run that did is refused with the files named, or, had it
failed, fails as it did, with a warning naming them (where runs are not sandboxed: a sandboxed run
cannot write them, :mod:`sidebyside.publish.sandbox`). :func:`reaped` ends every process a run left
behind.
"""

from __future__ import annotations

import contextlib
import ctypes
import hashlib
import os
import shutil
import signal
import stat
import sys
import tempfile
import weakref
from collections.abc import Iterable, Iterator
from pathlib import Path

from sidebyside.publish import sandbox
from sidebyside.publish.cache import is_post_of
from sidebyside.publish.common import PublishError, warn

__all__ = ["Guard", "GUARDED", "manifest", "UNWATCHED", "tree", "TreeWatch", "reaped"]

#: The folders of a site whose files are published posts (relative to the site).
GUARDED = ("_posts", "images", "_data/results")


def manifest(site: Path) -> dict[str, str]:
    """``{path relative to site: SHA-256}`` of every file under :data:`GUARDED` (symbolic links by their target's
    name, never followed)."""
    site = Path(site)
    found: dict[str, str] = {}
    for top in GUARDED:
        folder = site / top
        if not folder.is_dir():
            continue
        for path in sorted(folder.rglob("*")):
            if path.is_symlink():
                found[path.relative_to(site).as_posix()] = "link:" + str(path.readlink())
            elif path.is_file():
                found[path.relative_to(site).as_posix()] = hashlib.sha256(path.read_bytes()).hexdigest()
    return found


class Guard:
    """The published files of ``site`` as they were when it was made (see the module docstring); ``slug``
    names the post whose own files :meth:`check` may let change when ``own`` is set. Use it as a context
    manager (the copies are deleted on exit)."""

    def __init__(self, site: Path, slug: str) -> None:
        self.site, self.slug = Path(site), slug
        self.before = manifest(self.site)
        self.copies = Path(tempfile.mkdtemp(prefix=f"sidebyside-guard-{slug}-"))
        for relative, digest in self.before.items():
            if not digest.startswith("link:"):
                (self.copies / relative).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(self.site / relative, self.copies / relative)

    def __enter__(self) -> Guard:
        return self

    def __exit__(self, *exc) -> None:
        shutil.rmtree(self.copies, ignore_errors=True)

    def _own(self, relative: str) -> bool:
        path = self.site / relative
        return (relative.startswith(f"images/{self.slug}/") or relative == f"_data/results/{self.slug}.json"
                or (relative.startswith("_posts/") and path.name.endswith(f"-{self.slug}.md")
                    and (not path.is_file() or is_post_of(path, self.slug))))

    def changed(self, *, own: bool = False) -> list[str]:
        """The published files that differ from the manifest (changed, created or removed), sorted; with
        ``own``, those of the post ``slug`` are left out."""
        after = manifest(self.site)
        differ = sorted(p for p in set(self.before) | set(after) if self.before.get(p) != after.get(p))
        return [p for p in differ if not (own and self._own(p))]

    def check(self, during: str, *, own: bool = False) -> None:
        """Raise :class:`PublishError` naming every published file that changed ``during`` something (see
        :meth:`changed`), after putting each back as it was."""
        differ = self.changed(own=own)
        if not differ:
            return
        how = {p: "created" if p not in self.before else "removed" if not (self.site / p).exists() else "changed"
               for p in differ}
        for relative in differ:
            path = self.site / relative
            if path.is_symlink() or path.is_file():
                path.unlink()
            elif path.is_dir():
                shutil.rmtree(path)
            digest = self.before.get(relative)
            if digest is None:
                continue
            path.parent.mkdir(parents=True, exist_ok=True)
            if digest.startswith("link:"):
                path.symlink_to(digest[len("link:"):])
            else:
                shutil.copy2(self.copies / relative, path)
        raise PublishError(
            f"{self.slug}: {during} changed published files that are not its post's own: "
            + ", ".join(f"{p} ({how[p]})" for p in differ)
            + ". Each was put back as it was (created ones removed). A notebook writes only under its scratch "
            "working directory and the run's results folder; change it so, then run it again.")


#: Names a run may write, or that are not the project's files (at the top of a checkout or site): the build
#: folder (the kernel's scratch and results), environments and caches, the publisher's own journal, Jekyll's
#: output, bundler's resolution of the Gemfile. Anywhere: Python's byte-code caches and build metadata.
UNWATCHED = frozenset({"build", ".venv", "_site", ".jekyll-cache", ".jekyll-metadata", ".sidebyside", ".pytest_cache",
                       ".ruff_cache", ".offline", ".bundle", "Gemfile.lock", ".git"})
#: What of ``.git`` is watched: what runs code or changes what git does.
WATCHED_GIT = ("hooks", "config", "info")


def _digest(path: Path) -> str:
    info = path.lstat()
    if stat.S_ISLNK(info.st_mode):
        return "link:" + os.readlink(path)
    if not stat.S_ISREG(info.st_mode):
        return f"special:{stat.S_IFMT(info.st_mode)}"
    return f"{stat.S_IMODE(info.st_mode):o}:" + hashlib.sha256(path.read_bytes()).hexdigest()


def tree(root: Path, allowed: Iterable[str] = (),
         folders: set[str] | None = None) -> dict[str, str]:
    """``{path relative to root: mode and SHA-256}`` of every file and symbolic link under ``root`` (links by
    their target, never followed) but :data:`UNWATCHED` and the paths in ``allowed`` (relative, a file or a
    folder); of ``.git``, :data:`WATCHED_GIT`. ``folders``, when given, receives the relative
    path of each folder walked."""
    root = Path(root)
    skip = {a.strip("/") for a in allowed}
    found: dict[str, str] = {}
    folders = set() if folders is None else folders

    def walk(top: Path) -> None:
        for dirpath, dirnames, filenames in os.walk(top):
            here = Path(dirpath)
            keep = []
            for name in dirnames:
                relative = (here / name).relative_to(root).as_posix()
                if name == "__pycache__" or name.endswith(".egg-info") or relative in skip or (
                        here == root and name in UNWATCHED):
                    continue
                if (here / name).is_symlink():
                    found[relative] = _digest(here / name)
                else:
                    keep.append(name)
                    folders.add(relative)
            dirnames[:] = keep
            for name in filenames:
                relative = (here / name).relative_to(root).as_posix()
                if relative not in skip and not (here == root and name in UNWATCHED):
                    with contextlib.suppress(FileNotFoundError):
                        found[relative] = _digest(here / name)

    walk(root)
    for name in WATCHED_GIT:
        path = root / ".git" / name
        if path.is_dir() and not path.is_symlink():
            folders.update({".git", f".git/{name}"})
            walk(path)
        elif path.exists() or path.is_symlink():
            found[f".git/{name}"] = _digest(path)
    return found


class TreeWatch:
    """The files of ``roots`` (a checkout, a site) as they were when it was made (:func:`tree`),
    less ``allowed`` (paths relative to each root that the run may write: its checkpoint file), with
    a copy of each, to put back what a run changed (:meth:`restore`, :meth:`check`; the copies are
    removed by the first of them). A ``sandboxed`` run (None: as
    :func:`sidebyside.publish.sandbox.enabled` says) cannot write them (read-only or absent in its
    sandbox): nothing is watched or copied, what changes meanwhile is no run's."""

    def __init__(self, roots: Iterable[Path], allowed: Iterable[str] = (), *,
                 sandboxed: bool | None = None) -> None:
        self.roots = list(dict.fromkeys(Path(r).resolve() for r in roots))
        self.allowed = tuple(allowed)
        if sandboxed is None:
            try:
                sandboxed = sandbox.enabled()
            except ValueError:  # the run itself says so, before anything runs
                sandboxed = False
        self.sandboxed = sandboxed
        self.before: dict[Path, dict[str, str]] = {}
        self.folders: dict[Path, set[str]] = {}
        self.copies = None if sandboxed else Path(tempfile.mkdtemp(prefix="sidebyside-watch-"))
        if self.copies is not None:
            weakref.finalize(self, shutil.rmtree, self.copies, ignore_errors=True)
        for n, root in enumerate(self.roots if self.copies is not None else []):
            self.folders[root] = set()
            self.before[root] = tree(root, self.allowed, self.folders[root])
            for relative, digest in self.before[root].items():
                if not digest.startswith(("link:", "special:")):
                    copy = self.copies / str(n) / relative
                    copy.parent.mkdir(parents=True, exist_ok=True)
                    with contextlib.suppress(FileNotFoundError):
                        shutil.copy2(root / relative, copy, follow_symlinks=False)

    def _put_back(self) -> list[str]:
        """Put every file of the roots that differs from its copy back as it was (created ones
        removed, with the folders made for them), and return ``"<path> (changed|created|removed)"``
        for each; the copies are removed after."""
        said = []
        try:
            for n, root in enumerate(self.roots if self.copies is not None else []):
                before, after = self.before[root], tree(root, self.allowed)
                differ = sorted(p for p in set(before) | set(after)
                                if before.get(p) != after.get(p))
                for relative in differ:
                    how = ("created" if relative not in before
                           else "removed" if relative not in after else "changed")
                    said.append(f"{root / relative} ({how})")
                created = [p for p in differ if p not in before]
                for relative in sorted(created, key=lambda p: -p.count("/")):
                    _remove(root / relative)
                    _prune(root, Path(relative).parent, self.folders[root])
                for relative in (p for p in differ if p in before):
                    _put(root, relative, before[relative], self.copies / str(n) / relative)
        finally:
            if self.copies is not None:
                shutil.rmtree(self.copies, ignore_errors=True)
                self.copies = None
        return said

    def restore(self, slug: str, during: str = "its failed run") -> list[str]:
        """Put back what changed ``during`` the run (see :meth:`_put_back`), with a warning naming
        each file; for a run that failed, whose own error is what the publisher says. Returns
        them."""
        said = self._put_back()
        if said:
            warn(f"{slug}: {during} had changed files outside its post; each was put back as it "
                 "was (created ones removed): " + ", ".join(said[:20])
                 + (f" and {len(said) - 20} more" if len(said) > 20 else ""))
        return said

    def check(self, slug: str, during: str) -> None:
        """Raise :class:`PublishError` naming every file of the roots that changed ``during`` the
        run (none where runs are sandboxed), after putting each back as it was."""
        said = self._put_back()
        if said:
            raise PublishError(
                f"{slug}: {during} changed files outside its post: " + ", ".join(said[:20])
                + (f" and {len(said) - 20} more" if len(said) > 20 else "")
                + ". Nothing was published, and each was put back as it was (created ones "
                "removed). A notebook writes only under its scratch working directory and the "
                "run's results folder (if something else changed them while it ran, run it again "
                "once they are as you want them): change it so and run it again; `git status` "
                "shows the checkout, `git checkout -- <file>` restores a tracked file by hand, "
                "`make assets` the files of assets/vendor.")


def _remove(path: Path) -> None:
    """Remove ``path``: a file, a link (never followed) or a folder with what it holds."""
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        with contextlib.suppress(FileNotFoundError):
            path.unlink()


def _prune(root: Path, folder: Path, kept: set[str]) -> None:
    """Remove ``folder`` (relative to ``root``) and each folder above it while it is empty and was
    not there before (not in ``kept``)."""
    while folder.parts and folder.as_posix() not in kept:
        with contextlib.suppress(OSError):
            (root / folder).rmdir()  # only an empty one
        folder = folder.parent


def _put(root: Path, relative: str, digest: str, copy: Path) -> None:
    """Make ``root / relative`` what ``digest`` (:func:`_digest`) says it was: a link to its target,
    or the file kept at ``copy`` with its mode (a special file, never copied, is left as it is)."""
    if digest.startswith("special:"):
        return
    path = root / relative
    for parent in reversed(Path(relative).parents[:-1]):  # a folder replaced by a link or a file
        folder = root / parent
        if folder.is_symlink() or (folder.exists() and not folder.is_dir()):
            _remove(folder)
    _remove(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    if digest.startswith("link:"):
        path.symlink_to(digest[len("link:"):])
    else:
        shutil.copy2(copy, path, follow_symlinks=False)


def _children() -> set[int]:
    """The processes whose parent is this one (Linux's /proc; empty elsewhere)."""
    mine, found = os.getpid(), set()
    for entry in Path("/proc").glob("[0-9]*"):
        with contextlib.suppress(OSError, ValueError, IndexError):
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            if int(fields[1]) == mine:
                found.add(int(entry.name))
    return found


@contextlib.contextmanager
def reaped() -> Iterator[None]:
    """Around a run: every process it started that is still alive at its end is killed, detached ones too.
    For the run, this process is a child subreaper (Linux), so that a process that left its parent (a
    daemon, a double fork) is re-parented here rather than to init, and is found among this process's
    children; it stops being one after (an orphan of anything else goes to init, as before)."""
    _subreaper(True)
    before = _children()
    try:
        yield
    finally:
        try:
            _end(before)
        finally:
            _subreaper(False)


def _subreaper(on: bool) -> None:
    if sys.platform.startswith("linux"):
        with contextlib.suppress(OSError, AttributeError):
            ctypes.CDLL(None, use_errno=True).prctl(36, int(on), 0, 0, 0)  # PR_SET_CHILD_SUBREAPER


def _end(before: set[int]) -> None:
    """Kill and reap the children of this process that are not in ``before``, and the orphans that killing
    them hands here, until none is left."""
    for _ in range(20):  # a killed process's own orphans are re-parented here in turn
        left = _children() - before
        if not left:
            break
        for pid in left:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        for pid in left:
            with contextlib.suppress(ChildProcessError, OSError):
                os.waitpid(pid, 0)
