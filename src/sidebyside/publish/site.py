"""The files of a site and of a build: a publication as a transaction, the
lock of a checkout, and the record that ties an executed notebook to its run.

Publication (:class:`Transaction`, driven by :func:`publish`): a post, its images and its results file
are replaced together or not at all, whatever instant the process dies. The
new files are staged under ``<site>/.sidebyside/txn-<slug>/``, then a journal
(``<site>/.sidebyside/journal-<slug>.json``) lists every swap; each target is
renamed aside into the staging folder before its new version is renamed in.
The journal is marked ``committed`` once every swap is done. :func:`recover`,
run before anything else under the lock, rolls back a journal that is not
committed (the previous files come back) and completes one that is (the
renamed-aside files are deleted), and says which. Jekyll ignores the hidden
folder.

Lock (:func:`locked`): one run at a time per site and per build folder; a
second run exits at once with a message naming the first (its pid, command
and start time). The lock is an ``flock`` on ``<dir>/.sidebyside/lock``: the
system releases it when the process dies, so it is never stale.

Run record (:func:`write_run_record`, :func:`completed_run`): a completed
execution leaves ``build/executed/<slug>.run.json`` beside the executed
notebook: the results record it produced and the notebook's SHA-256. A run
that starts removes it first, so a failed or interrupted run leaves none, and
``render`` can refuse anything but a completed run.
"""

from __future__ import annotations

import datetime as dt
import fcntl
import functools
import hashlib
import inspect
import json
import os
import shutil
import sys
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

from sidebyside.publish import caps, secrets
from sidebyside.publish.cache import is_post_of, post_path
from sidebyside.publish.common import PublishError, say, write_atomic
from sidebyside.publish.discovery import NotebookInfo
from sidebyside.publish.records import begins_with_front_matter, check_record, record_text, require_loadable

__all__ = ["Transaction", "recover", "publish", "lock", "holding_lock", "locked", "LockHeld", "write_run_record",
           "forget_run", "completed_run", "STATE_DIR"]

STATE_DIR = ".sidebyside"

#: Test hook: called with a label at every point where the process could die
#: during a publication (tests make it kill the process there).
FAULT: Callable[[str], None] | None = None


def _checkpoint(label: str) -> None:
    if FAULT is not None:
        FAULT(label)


def _write_json(path: Path, value: Any) -> None:
    write_atomic(path, json.dumps(value, indent=2, sort_keys=True) + "\n")


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    elif path.exists() or path.is_symlink():
        path.unlink()


# --------------------------------------------------------------------------- transaction


class Transaction:
    """Replace some files and folders of ``site`` together.

    ``stage(target)`` returns the path to write the new version of
    ``target`` (a file or a folder, relative to ``site``) to; ``delete(target)``
    removes one; ``commit()`` swaps them all in, as described in the module
    docstring. Nothing in ``site`` changes before ``commit()``.
    """

    def __init__(self, site: Path, name: str) -> None:
        self.site = Path(site)
        self.name = name
        self.state_dir = self.site / STATE_DIR
        self.staging = self.state_dir / f"txn-{name}"
        self.journal = self.state_dir / f"journal-{name}.json"
        self.ops: list[dict[str, Any]] = []
        self.state_dir.mkdir(parents=True, exist_ok=True)
        if self.journal.exists():
            raise RuntimeError(f"{self.journal} is pending: call recover({self.site}) first")
        _remove(self.staging)  # left by a run that died before its journal was written
        (self.staging / "new").mkdir(parents=True)
        (self.staging / "old").mkdir()

    def stage(self, target: str) -> Path:
        new = f"{STATE_DIR}/txn-{self.name}/new/{len(self.ops)}"
        self.ops.append({"target": target, "new": new, "old": f"{STATE_DIR}/txn-{self.name}/old/{len(self.ops)}"})
        return self.site / new

    def delete(self, target: str) -> None:
        self.ops.append({"target": target, "new": None, "old": f"{STATE_DIR}/txn-{self.name}/old/{len(self.ops)}"})

    def commit(self) -> None:
        for op in self.ops:
            op["existed"] = (self.site / op["target"]).exists()
            if op["new"] and not (self.site / op["new"]).exists():
                raise FileNotFoundError(f"nothing was staged for {op['target']}")
        _checkpoint("journal")
        _write_json(self.journal, {"name": self.name, "state": "prepared", "ops": self.ops,
                                   "started": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")})
        try:
            for op in self.ops:
                target = self.site / op["target"]
                target.parent.mkdir(parents=True, exist_ok=True)
                if op["existed"]:
                    _checkpoint(f"aside {op['target']}")
                    os.rename(target, self.site / op["old"])
                if op["new"]:
                    _checkpoint(f"in {op['target']}")
                    os.rename(self.site / op["new"], target)
            _checkpoint("commit")
            _write_json(self.journal, {"name": self.name, "state": "committed", "ops": self.ops})
        except KeyboardInterrupt:
            _rollback(self.site, self.ops)  # Ctrl-C: undo now; if that is cut short too, the next run does
            self.journal.unlink()
            _remove(self.staging)
            raise
        _checkpoint("cleanup")
        _remove(self.staging)
        _checkpoint("forget")
        self.journal.unlink()


def _rollback(site: Path, ops: list[dict[str, Any]]) -> None:
    """Put back what the ops of a journal moved aside (idempotent: safe to
    run again after it was itself interrupted)."""
    for op in reversed(ops):
        target, old = site / op["target"], site / op["old"]
        if old.exists():  # the previous version was moved aside: whatever is at target is new
            _remove(target)
            os.rename(old, target)
        elif not op.get("existed") and op["new"] and not (site / op["new"]).exists():
            _remove(target)  # there was nothing before, and the new version was moved in


def _recover_journals(site: Path) -> list[str]:
    """Finish or undo publications that a dead process left half done.
    Returns one sentence per publication, saying which was done."""
    state_dir = Path(site) / STATE_DIR
    said: list[str] = []
    if not state_dir.is_dir():
        return said
    for journal in sorted(state_dir.glob("journal-*.json")):
        name = journal.name[len("journal-"):-len(".json")]
        try:
            entry = json.loads(journal.read_text())
            ops, state = entry["ops"], entry["state"]
        except (OSError, ValueError, KeyError, TypeError) as exc:
            # It is written atomically before any swap: only something outside the publisher can spoil it.
            said.append(f"{name}: the journal {journal} of an interrupted publication was unreadable ({exc}) and "
                        f"was removed with its staged files; check the post, images and results of {name} "
                        "(git status), and run again with FORCE=1 if they are not right")
            ops, state = [], "unreadable"
        if state == "prepared":
            _rollback(Path(site), ops)
            said.append(f"{name}: an interrupted publication was rolled back (the previous post, images and "
                        "results are in place)")
        elif state == "committed":
            said.append(f"{name}: an interrupted publication was completed (its new post, images and results "
                        "were all in place)")
        _remove(state_dir / f"txn-{name}")
        journal.unlink()
    for staging in state_dir.glob("txn-*"):
        _remove(staging)  # staged before a journal was written: nothing in the site was touched
    for tmp in state_dir.glob(".*.tmp"):
        tmp.unlink()  # a journal that was being written
    return said


# --------------------------------------------------------------------------- lock


class LockHeld(Exception):
    """Another process holds the lock; the message names it."""


_held: dict[Path, tuple[Any, int]] = {}


@contextmanager
def _lock_one(directory: Path) -> Iterator[None]:
    path = (Path(directory) / STATE_DIR / "lock").resolve()
    if path in _held:  # re-entered by the same process (run() holds it while publish() asks again)
        handle, depth = _held[path]
        _held[path] = (handle, depth + 1)
        try:
            yield
        finally:
            handle, depth = _held[path]
            _held[path] = (handle, depth - 1)
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    handle = open(path, "a+")
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        handle.seek(0)
        holder = handle.read().strip() or "another process"
        handle.close()
        raise LockHeld(f"{directory} is in use by another run ({holder}); wait for it to finish, "
                       f"then run again (the lock, {path}, is released when that process ends)") from None
    try:
        handle.seek(0)
        handle.truncate()
        started = dt.datetime.now().astimezone().isoformat(timespec="seconds")
        handle.write(f"pid {os.getpid()}: {' '.join(sys.argv) or 'python'}, started {started}\n")
        handle.flush()
        _held[path] = (handle, 1)
        yield
    finally:
        if path in _held and _held[path][1] <= 1:
            del _held[path]
            handle.seek(0)
            handle.truncate()
            handle.close()  # releases the flock


@contextmanager
def locked(*directories: Path) -> Iterator[None]:
    """Hold the lock of each directory (a site, a build folder) for the block."""
    with ExitStack() as stack:
        seen = set()
        for directory in directories:
            key = Path(directory).resolve()
            if key not in seen:
                seen.add(key)
                stack.enter_context(_lock_one(directory))
        yield


# --------------------------------------------------------------------------- run record


def _run_record_path(executed: Path) -> Path:
    return executed.with_suffix(".run.json")


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def forget_run(executed: Path) -> None:
    """Called before a run starts: until it completes, ``executed`` is not a completed run."""
    _run_record_path(executed).unlink(missing_ok=True)


def write_run_record(executed: Path, record: dict[str, Any]) -> None:
    """Called once a run completed: ``executed`` holds the run whose results are ``record``."""
    _write_json(_run_record_path(executed), {"record": record, "executed_sha256": _sha256(executed)})


def completed_run(executed: Path) -> tuple[dict[str, Any] | None, str]:
    """The results record of the completed run that ``executed`` holds, or
    ``(None, why not)``."""
    run_path = _run_record_path(executed)
    if not executed.is_file():
        return None, f"{executed} does not exist (no run of it in this build folder)"
    if not run_path.is_file():
        return None, (f"the last run into {executed} did not complete (it failed or was interrupted), "
                      "so that copy is not a publishable run")
    try:
        entry = json.loads(run_path.read_text())
        record, digest = entry["record"], entry["executed_sha256"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        return None, f"{run_path} is unreadable ({exc})"
    if _sha256(executed) != digest:
        return None, f"{executed} changed after its run completed ({run_path} records another notebook)"
    return record, ""


# --------------------------------------------------------------------------- publication


def recover(site: Path) -> list[str]:
    """Roll back or complete a publication that an interrupted run left
    behind (the journals of :class:`Transaction`); returns what was done,
    one sentence each. Also removes the leftovers of the swaps of earlier versions."""
    said = _recover_journals(site)
    images = site / "images"
    if images.is_dir():
        for old in images.glob(".*.old"):
            slug = old.name[1:-4]
            if (images / slug).exists():
                shutil.rmtree(old, ignore_errors=True)
            else:
                old.rename(images / slug)
        for new in images.glob(".*.new"):
            shutil.rmtree(new, ignore_errors=True)
    for directory in (site / "_posts", site / "_data" / "results"):
        if directory.is_dir():
            for tmp in directory.glob(".*.tmp"):
                tmp.unlink(missing_ok=True)
    return said


def publish(site: Path, info: NotebookInfo, post: str, images: dict[str, bytes], record: dict[str, Any]) -> Path:
    """Publish one run of ``info`` into ``site``: ``post`` is its rendered post, or for a gpu run
    its post's GPU section, which joins what the site publishes of the post's other run
    (:func:`sidebyside.publish.runs.combine`: nothing published is lost but a run whose method was
    withdrawn). Replace the post, the images and the results of ``info`` in ``site``,
    together or not at all (a :class:`Transaction`); a post of the
    same slug under another date is removed in the same transaction. The
    record is written as UTF-8 and, with the post's front matter, loaded as
    Jekyll will (:mod:`.records`) before anything is swapped in: a record or
    post that Jekyll would refuse raises :class:`PublishError`, and nothing
    published changes; so does a file of ``images`` that begins with front
    matter (:func:`sidebyside.publish.records.begins_with_front_matter`: only
    a post may be a page of the site), a post over its caps (page,
    figures, files, share of the feed: :func:`sidebyside.publish.caps.check`; its record's:
    :func:`sidebyside.publish.caps.check_record_caps`), and one that would publish a secret of
    the environment (:func:`sidebyside.publish.secrets.check`)."""
    site = Path(site)
    with lock(site):
        for message in recover(site):
            say(f"recovered {message}")
        from sidebyside.publish.runs import combine

        caps.check_record_caps(record, info.slug)  # before anything recurses into it
        post, images, record = combine(site, info, post, images, record)
        txn = Transaction(site, info.slug)
        staged = txn.stage(f"images/{info.slug}")
        staged.mkdir()
        for name, payload in images.items():
            (staged / name).write_bytes(payload)
        target = post_path(site, info)
        txn.stage(f"_posts/{target.name}").write_text(post, encoding="utf-8")
        for stale in sorted((site / "_posts").glob(f"*-{info.slug}.md")):
            if stale != target and is_post_of(stale, info.slug):
                txn.delete(f"_posts/{stale.name}")
        results = txn.stage(f"_data/results/{info.slug}.json")
        try:
            pages = sorted(name for name, payload in images.items() if begins_with_front_matter(payload))
            if pages:
                raise PublishError(f"{info.slug}: {', '.join(f'images/{info.slug}/{n}' for n in pages)} would begin "
                                   "with front matter (---), so Jekyll would build it as a page of the site; only a "
                                   "post may. Nothing published was changed.")
            check_record(record, info.slug)
            caps.check(info.slug, post, images)
            text = record_text(record)
            files = {f"images/{info.slug}/{name}": data for name, data in images.items()}
            secrets.check(info.slug, {f"_posts/{target.name}": post,
                                      f"_data/results/{info.slug}.json": text, **files})
            results.write_text(text, encoding="utf-8")
            (txn.staging / "post.md").write_text(post, encoding="utf-8")
            require_loadable([results], [txn.staging / "post.md"],
                             f"{info.slug}: its results record or its post's front matter")
        except PublishError:
            _remove(txn.staging)  # nothing in the site was touched
            raise
        txn.commit()
    return target


@contextmanager
def lock(*directories: Path):
    """Hold the lock of a site and a build folder: one run at a time on them."""
    try:
        with locked(*directories):
            yield
    except LockHeld as exc:
        raise PublishError(str(exc)) from None


def holding_lock(function):
    """Run ``function`` holding the lock of its ``site`` and ``build`` arguments."""
    signature = inspect.signature(function)

    @functools.wraps(function)
    def with_lock(*args, **kwargs):
        bound = signature.bind(*args, **kwargs)
        bound.apply_defaults()
        with lock(Path(bound.arguments["site"]), Path(bound.arguments["build"])):
            return function(*args, **kwargs)

    return with_lock

