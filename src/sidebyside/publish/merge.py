"""The two halves of a GPU call: the box executes, the machine that publishes
renders. Every post from one commit and one stack.

On the box, ``tools/device-run.sh`` runs each post with :func:`execute` (by
:func:`main_execute`): the notebook is executed into
``build/executed/<slug>.ipynb`` and its run record completed beside it
(``<slug>.run.json``: the results record and the executed notebook's digest),
and nothing is rendered or published, so the box imports nothing of the
rendering and sanitising side (nbconvert, nh3, markdown-it, tinycss2): it needs
only its own stack and the execution wheels of ``make offline``. An archive is
what the call packs (a ``.tgz``): ``build/executed/`` and ``checkpoints/``
after the call, and at its root :data:`MANIFEST`, written by
:func:`write_manifest`: ``commit`` (the commit the call ran from), ``stack``
(Python, the libraries and the CUDA/cuDNN each framework uses), ``device``,
``planned`` (the posts the call was to run), ``executed`` (those whose run
completed), ``started`` and ``stub`` (true for a dry run with a stub executor).

On the machine that publishes, :func:`merge` first reads and checks every
archive, and refuses, changing nothing, when:

- an archive is corrupt: not a gzip'd tar, a member that is not a plain file
  or folder or that points outside the archive, no readable manifest, or a
  post it names as executed whose executed notebook or run record is missing,
  unreadable or not the notebook its record names;
- the archives name different commits or stacks, or a post's own record
  names another commit, stack or device than its archive, or its two
  frameworks ran on different devices, or two archives both executed it, or
  it is not a gpu run;
- a post's record has another key than this tree gives it (the archive ran
  another version of its notebook, parameters, pins or library: merge at the
  archive's commit);
- a dry run's archive (``stub``) is merged without ``allow_stub``.

Then it renders every executed post's GPU section here
(:func:`sidebyside.publish.rendering.render`, which renders a gpu run as a section:
:mod:`sidebyside.publish.gpu_section`), refusing, with nothing changed, when one cannot be
rendered; then publishes each with the publisher's transaction
(:func:`sidebyside.publish.site.publish`: the section joins the post's published cpu run,
replacing nothing but the previous GPU section, its post, images and results together or not at
all), keeps its executed notebook and run record as ``build/executed/<slug>.gpu.ipynb`` (beside
the cpu run's, which ``make render`` renders again, keeping the GPU section), and writes each
post's checkpoint file (``checkpoints/<slug>.json``) from the latest call that planned it. A post
planned by an archive or named in ``expect`` that no archive executed is reported as missing.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import hashlib
import json
import os
import platform
import sys
import tarfile
from collections.abc import Iterable, Mapping
from pathlib import Path, PurePosixPath
from typing import Any

from sidebyside.publish.common import ROOT, PublishError, say, write_atomic

__all__ = ["MANIFEST", "STACK_KEYS", "Archive", "Merged", "read_archive", "merge", "main_merge", "write_manifest", "stack",
           "execute", "main_execute", "read_parts", "merge_parts"]

MANIFEST = "gpu-run.json"
#: What a stack is: the versions a run computes with. A post's provenance record holds the same keys.
STACK_KEYS = ("python", "torch", "jax", "jaxlib", "flax", "optax", "numpy", "torch_cuda", "torch_cudnn", "jax_cuda",
              "jax_cudnn")
_ROOTS = ("checkpoints", "build", MANIFEST)
_EXECUTED = "build/executed"


@dataclasses.dataclass
class Archive:
    """A checked archive: its manifest and, per post it executed, the executed notebook and its record."""

    path: Path
    manifest: dict[str, Any]
    posts: dict[str, tuple[bytes, dict[str, Any]]]  # slug -> (executed notebook, results record)
    checkpoints: dict[str, bytes]  # file name -> content


@dataclasses.dataclass
class Merged:
    published: dict[str, str]  # slug -> the archive it came from
    missing: dict[str, str]  # slug -> why


def _version(package: str) -> str | None:
    import importlib.metadata

    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return None


def stack(devices: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """This Python's stack (:data:`STACK_KEYS`): versions from the installed
    packages, CUDA and cuDNN from ``devices`` (what
    :func:`sidebyside.run.provenance.devices` found; None where not given)."""
    out: dict[str, Any] = {"python": platform.python_version()}
    for package in ("torch", "jax", "jaxlib", "flax", "optax", "numpy"):
        out[package] = _version(package)
    for key in ("torch_cuda", "torch_cudnn", "jax_cuda", "jax_cudnn"):
        out[key] = (devices or {}).get(key)
    return out


def write_manifest(path: Path, *, site: Path, commit: str, planned: list[str], started: str,
                   devices: Mapping[str, Any] | None, stub: bool = False, call: str = "",
                   build: Path | None = None) -> dict[str, Any]:
    """Write the manifest of a call into ``path`` and return it. A planned
    post counts as executed when ``build`` (default ``site/build``) holds its
    completed gpu run (:func:`sidebyside.publish.site.completed_run`), from
    ``commit``, executed at or after ``started`` (ISO 8601)."""
    from sidebyside.publish.site import completed_run

    since = dt.datetime.fromisoformat(started)
    build = Path(site) / "build" if build is None else Path(build)
    executed = []
    for slug in dict.fromkeys(planned):
        record, _ = completed_run(build / "executed" / f"{slug}.ipynb")
        try:
            recent = dt.datetime.fromisoformat(record["executed_at"]) >= since
        except (ValueError, KeyError, TypeError):  # no run, or one without a time zone: not this call's
            continue
        if recent and record.get("profile") == "gpu" and _same_commit(record.get("provenance", {}).get("git_sha"),
                                                                       commit):
            executed.append(slug)
    devices = dict(devices or {})
    manifest = {"commit": commit, "stack": stack(devices), "device": devices.get("torch_device"),
                "devices": devices, "planned": list(dict.fromkeys(planned)), "executed": executed,
                "started": started, "call": call, "stub": stub}
    Path(path).write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n")
    return manifest


def execute(slug: str, *, profile: str = "gpu", site: Path = ROOT, build: Path = ROOT / "build",
            notebooks: Path = ROOT / "notebooks", params_dir: Path = ROOT / "params", root: Path = ROOT,
            progress: bool = False) -> dict[str, Any]:
    """The box's half of a call: run the notebook of ``slug`` with the ``profile`` parameters into
    ``build/executed/<slug>.ipynb`` and complete its run record there (the published results record:
    key, commit, time), checked as a publication would check it; render and publish nothing. Returns
    the record. A run in parts is handed its header's estimates of its parts
    (:data:`sidebyside.run.checkpoints.ESTIMATES_ENV`). The commit must be told (a checkout, or
    ``SIDEBYSIDE_GIT_SHA``); whether both frameworks computed on one GPU is judged from the run's own
    record. Imports nothing of the rendering side. Raises :class:`PublishError`."""
    from sidebyside.publish import schedule
    from sidebyside.publish.discovery import discover, read_notebook_info, select
    from sidebyside.publish.guard import Guard
    from sidebyside.publish.params import check_profile, load_all_params
    from sidebyside.publish.records import check_record
    from sidebyside.publish.running import complete_record, key_and_stamp
    from sidebyside.publish.running import execute as run_notebook
    from sidebyside.publish.site import forget_run, lock, recover, write_run_record
    from sidebyside.run import checkpoints, runkey

    everything = discover(notebooks)
    chosen = select(everything, slug)
    if len(chosen) != 1:
        raise PublishError(f"execute runs one post at a time; {slug!r} names {len(chosen)}")
    info = chosen[0]
    params = load_all_params(params_dir, everything)[check_profile(profile)]
    try:
        runkey.commit_stamp(root, [])
    except runkey.StampError as exc:
        raise PublishError(str(exc)) from None
    try:
        budgets = schedule.read_budgets(notebooks, params_dir)
    except PublishError:
        budgets = {}
    estimates = schedule.part_estimates(info.slug, info.gpu or {}, params[slug], budgets)
    with lock(site, build):
        for message in recover(site):
            say(f"recovered {message}")
        _, nb = read_notebook_info(info.path)
        executed = build / "executed" / f"{slug}.ipynb"
        forget_run(executed)
        before = os.environ.get(checkpoints.ESTIMATES_ENV)
        os.environ[checkpoints.ESTIMATES_ENV] = json.dumps(estimates)
        try:
            with Guard(site, slug) as guard:  # the run may write no published file
                try:
                    executed, saved = run_notebook(info, nb, profile, params[slug], build, root=root,
                                                   progress=progress)
                finally:
                    guard.check("its notebook's run")
        finally:
            if before is None:
                os.environ.pop(checkpoints.ESTIMATES_ENV, None)
            else:
                os.environ[checkpoints.ESTIMATES_ENV] = before
        key, saved["provenance"]["git_sha"] = key_and_stamp(info, profile, params[slug], params_dir, saved, root)
        record = complete_record(saved, info, profile, params[slug], key, root)
        check_record(record, slug, info.metrics)
        write_run_record(executed, record)
    return record


def main_execute(slug: str, **kwargs: Any) -> int:
    """:func:`execute` for ``tools/device-run.sh``: 0 when the run completed, 2 (said on stderr) when not."""
    try:
        record = execute(slug, **kwargs)
    except PublishError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    say(f"{slug}: executed ({record['profile']} run of {record['executed_at']}, commit "
        f"{record['provenance'].get('git_sha')}); its archive is rendered where it is merged")
    return 0


def _same_commit(a: str | None, b: str | None) -> bool:
    """Two commit names for one commit (one may be abbreviated; a ``-dirty`` one is no commit)."""
    if not a or not b or a.endswith("-dirty") or b.endswith("-dirty"):
        return False
    n = min(len(a), len(b))
    return n >= 7 and a[:n] == b[:n]


def _corrupt(path: Path, why: str) -> PublishError:
    return PublishError(f"{path} is corrupt: {why}; nothing was merged. Pack it again from its call's $OUT, or run "
                        "that call again")


def read_archive(path: Path) -> Archive:
    """Read and check one archive (see the module docstring), or raise."""
    path = Path(path)
    files: dict[str, bytes] = {}
    try:
        with tarfile.open(path, "r:gz") as tar:
            for member in tar:
                name = PurePosixPath(member.name)
                parts = [p for p in name.parts if p != "."]
                if name.is_absolute() or ".." in parts or not parts or parts[0] not in _ROOTS:
                    raise _corrupt(path, f"it holds {member.name!r}, outside what an archive holds "
                                         f"({', '.join(_ROOTS)})")
                if member.isdir():
                    continue
                if not member.isfile():
                    raise _corrupt(path, f"{member.name!r} is not a plain file (a link or device)")
                handle = tar.extractfile(member)
                files["/".join(parts)] = handle.read() if handle else b""
    except (tarfile.TarError, OSError, EOFError) as exc:
        raise _corrupt(path, f"it is not a readable .tgz ({exc})") from None
    try:
        manifest = json.loads(files[MANIFEST])
        planned, executed = list(manifest["planned"]), list(manifest["executed"])
        if not isinstance(manifest["commit"], str) or not isinstance(manifest["stack"], dict):
            raise TypeError("commit or stack")
    except KeyError as exc:
        raise _corrupt(path, f"its manifest {MANIFEST} is missing or lacks {exc}") from None
    except (ValueError, TypeError) as exc:
        raise _corrupt(path, f"its manifest {MANIFEST} is unreadable ({exc})") from None
    posts = {}
    for slug in executed:
        if slug not in planned:
            raise _corrupt(path, f"its manifest says it executed {slug}, which it did not plan")
        try:
            notebook = files[f"{_EXECUTED}/{slug}.ipynb"]
            entry = json.loads(files[f"{_EXECUTED}/{slug}.run.json"])
            record, digest = entry["record"], entry["executed_sha256"]
        except KeyError:
            raise _corrupt(path, f"it executed {slug} but holds no {_EXECUTED}/{slug}.ipynb with its "
                                 f"{slug}.run.json") from None
        except (ValueError, TypeError) as exc:
            raise _corrupt(path, f"the run record of {slug} is unreadable ({exc})") from None
        if hashlib.sha256(notebook).hexdigest() != digest:
            raise _corrupt(path, f"{_EXECUTED}/{slug}.ipynb is not the notebook its run record names")
        if not isinstance(record, dict) or record.get("slug") != slug or not isinstance(record.get("provenance"), dict):
            raise _corrupt(path, f"{_EXECUTED}/{slug}.run.json does not hold the results record of {slug}")
        posts[slug] = (notebook, record)
    checkpoints = {n[len("checkpoints/"):]: b for n, b in files.items()
                   if n.startswith("checkpoints/") and n.count("/") == 1 and n.endswith(".json")}
    return Archive(path, manifest, posts, checkpoints)


def _check(archives: list[Archive]) -> list[str]:
    """What forbids merging ``archives`` together (empty: nothing)."""
    problems: list[str] = []
    first = archives[0]
    for other in archives[1:]:
        if not _same_commit(first.manifest["commit"], other.manifest["commit"]):
            problems.append(f"mixed commits: {first.path.name} ran from {first.manifest['commit']}, "
                            f"{other.path.name} from {other.manifest['commit']}; run every call from one commit")
        differ = sorted(k for k in STACK_KEYS if first.manifest["stack"].get(k) != other.manifest["stack"].get(k))
        if differ:
            problems.append(f"mixed stacks: {first.path.name} and {other.path.name} differ in "
                            + ", ".join(f"{k} ({first.manifest['stack'].get(k)} / {other.manifest['stack'].get(k)})"
                                        for k in differ) + "; run every call with one stack")
    seen: dict[str, Archive] = {}
    for archive in archives:
        for slug, (_, record) in archive.posts.items():
            prov = record["provenance"]
            if slug in seen:
                problems.append(f"{slug}: executed by both {seen[slug].path.name} and {archive.path.name} "
                                "(measured twice); keep the archive of one call")
            seen.setdefault(slug, archive)
            if not _same_commit(prov.get("git_sha"), archive.manifest["commit"]):
                problems.append(f"{slug}: its record in {archive.path.name} names commit {prov.get('git_sha')}, "
                                f"its archive {archive.manifest['commit']} (mixed commits within one post)")
            differ = sorted(k for k in STACK_KEYS if k in prov and prov[k] != archive.manifest["stack"].get(k))
            if differ:
                problems.append(f"{slug}: its record in {archive.path.name} names another stack than its archive "
                                f"({', '.join(differ)}: mixed stacks within one post)")
            kinds = {prov.get("torch_device"), prov.get("jax_device"), archive.manifest.get("device")} - {None}
            if len(kinds) > 1:
                problems.append(f"{slug}: in {archive.path.name}, PyTorch ran on {prov.get('torch_device')}, JAX on "
                                f"{prov.get('jax_device')}, the call on {archive.manifest.get('device')}: mixed device "
                                "kinds within one post")
            if record.get("profile") != "gpu":
                problems.append(f"{slug}: {archive.path.name} holds a {record.get('profile')} run of it, not a gpu one")
    return problems


def _render(notebook: bytes, record: dict[str, Any], info, config: dict[str, Any], root: Path) -> tuple[
        str, dict[str, bytes]]:
    """The post and images of an executed notebook, rendered here (the publisher's renderer)."""
    import nbformat

    from sidebyside.publish.rendering import render

    return render(nbformat.reads(notebook.decode("utf-8"), as_version=4), record, info, config, root=root)


def merge(paths: Iterable[Path], *, site: Path = ROOT, notebooks: Path = ROOT / "notebooks",
          params_dir: Path = ROOT / "params", build: Path = ROOT / "build", root: Path = ROOT,
          expect: Iterable[str] = (), allow_stub: bool = False) -> Merged:
    """Merge the archives at ``paths`` into ``site``: render each executed post
    here and publish it (see the module docstring). Raises :class:`PublishError`,
    with nothing changed, when they may not be merged or a post cannot be rendered."""
    from sidebyside.publish.cache import cache_key
    from sidebyside.publish.discovery import discover
    from sidebyside.publish.params import load_all_params
    from sidebyside.publish.rendering import check_date, site_config
    from sidebyside.publish.site import lock, publish, recover, write_run_record

    paths = [Path(p) for p in paths]
    if not paths:
        raise PublishError("no archives to merge: name the gpu-run*.tgz of every call")
    archives = [read_archive(p) for p in paths]
    problems = _check(archives)
    stubs = [a.path.name for a in archives if a.manifest.get("stub")]
    if stubs and not allow_stub:
        problems.append(f"{', '.join(stubs)} came from a dry run with a stub executor, not from a GPU")
    everything = discover(notebooks)
    infos = {i.slug: i for i in everything}
    gpu_params = load_all_params(params_dir, everything).get("gpu") or {}
    for archive in archives:
        for slug, (_, record) in archive.posts.items():
            if slug not in infos:
                problems.append(f"{slug} (in {archive.path.name}) is no notebook of {notebooks}")
            elif not archive.manifest.get("stub") and record.get("source_hash") != cache_key(
                    infos[slug], "gpu", gpu_params.get(slug) or {}, root, record.get("inputs")):
                problems.append(f"{slug}: {archive.path.name} ran another version of it than this tree holds (its "
                                "notebook, gpu parameters, pins or a library module it imported differ): merge it "
                                f"at the commit it ran from, {archive.manifest['commit']}")
    if problems:
        raise PublishError("merge refused; nothing was changed:\n  " + "\n  ".join(problems))
    site = Path(site)
    config = site_config(site, root)
    rendered = []
    for archive in archives:
        for slug, (notebook, record) in archive.posts.items():
            try:
                check_date(infos[slug], config)
                post, images = _render(notebook, record, infos[slug], config, root)
            except PublishError as exc:
                raise PublishError(f"merge refused; nothing was changed: {slug} (in {archive.path.name}) cannot be "
                                   f"rendered: {exc}") from None
            rendered.append((archive, slug, post, images, notebook, record))
    published: dict[str, str] = {}
    with lock(site, build):
        for message in recover(site):
            say(f"recovered {message}")
        for archive, slug, post, images, notebook, record in rendered:
            publish(site, infos[slug], post, images, record)
            executed = Path(build) / "executed" / f"{slug}.gpu.ipynb"
            executed.parent.mkdir(parents=True, exist_ok=True)
            executed.write_bytes(notebook)
            write_run_record(executed, record)
            published[slug] = archive.path.name
            say(f"{slug}: rendered and published from {archive.path.name} (commit {archive.manifest['commit']})")
        latest: dict[str, bytes] = {}
        for archive in sorted(archives, key=lambda a: str(a.manifest.get("started", ""))):
            # only its own posts' parts: a call packs every checkpoint file of its tree, and another post's there
            # is whatever that tree held (an earlier call's archive not merged into it yet, or none)
            latest.update({name: payload for name, payload in archive.checkpoints.items()
                           if name.removesuffix(".json") in archive.manifest["planned"]})
        for name, payload in latest.items():
            target = site / "checkpoints" / name
            target.parent.mkdir(parents=True, exist_ok=True)
            write_atomic(target, payload)
    wanted = list(dict.fromkeys([*expect, *(s for a in archives for s in a.manifest["planned"])]))
    missing = {}
    for slug in wanted:
        if slug not in published:
            why = [f"{a.path.name} planned it and did not execute it" for a in archives
                   if slug in a.manifest["planned"]] or ["no archive planned it"]
            missing[slug] = "; ".join(why)
    return Merged(published, missing)


def read_parts(folder: Path) -> dict[str, bytes]:
    """The checkpoint files of a call's ``parts/`` folder (``tools/device-run.sh`` copies a run's file there as
    each part finishes), each checked to be one a run wrote (parts with their key, seconds and value), or raise."""
    found: dict[str, bytes] = {}
    for path in sorted(Path(folder).iterdir()):
        if path.suffix == ".tmp":
            continue  # a copy the call was writing when it stopped; the file before it is whole
        if path.is_symlink() or not path.is_file() or path.suffix != ".json":
            raise _corrupt(folder, f"{path.name} is not a checkpoint file (a plain <slug>.json)")
        payload = path.read_bytes()
        try:
            parts = json.loads(payload)
            ok = isinstance(parts, dict) and all(isinstance(p, dict) and {"key", "seconds", "value"} <= set(p)
                                                 for p in parts.values())
        except ValueError:
            ok = False
        if not ok:
            raise _corrupt(folder, f"{path.name} is not a checkpoint file a run wrote")
        found[path.name] = payload
    return found


def merge_parts(folders: Iterable[Path], *, site: Path = ROOT) -> list[str]:
    """Write the checkpoint files of ``folders`` (:func:`read_parts`, all checked first) into
    ``site/checkpoints/``, the later folder's file winning; return the files written. A part is read back
    by a later run only where its key matches, so parts from a stopped call are safe to keep."""
    found: dict[str, bytes] = {}
    for folder in folders:
        found.update(read_parts(folder))
    for name, payload in found.items():
        target = Path(site) / "checkpoints" / name
        target.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(target, payload)
    return sorted(found)


def main_merge(paths: list[Path], *, site: Path, notebooks: Path, expect: str | None, allow_missing: bool,
               allow_stub: bool, params_dir: Path = ROOT / "params", build: Path = ROOT / "build") -> int:
    """The ``merge`` command: 0 when every expected post was published, 1 when one is missing (reported).
    A folder among ``paths`` is a call's ``parts/`` (:func:`merge_parts`), written after the archives, so the
    parts a call finished after its last archive was packed are kept too."""
    folders = [Path(p) for p in paths if Path(p).is_dir()]
    archives = [Path(p) for p in paths if not Path(p).is_dir()]
    if folders and not archives:
        for name in merge_parts(folders, site=site):
            say(f"checkpoints/{name}: the parts the call finished, kept for the next call")
        return 0
    merged = merge(archives, site=site, notebooks=notebooks, params_dir=params_dir, build=build,
                   expect=[s for s in (expect or "").split(",") if s], allow_stub=allow_stub)
    for name in merge_parts(folders, site=site):
        say(f"checkpoints/{name}: the parts the call finished, kept for the next call")
    for slug, why in merged.missing.items():
        print(f"missing: {slug}: {why}; run its call again (tools/device-run.sh {slug}) and merge its archive",
              file=sys.stderr)
    say(f"merged {len(merged.published)} post(s) from {len(paths)} archive(s)"
        + (f"; {len(merged.missing)} missing" if merged.missing else ""))
    return 1 if merged.missing and not allow_missing else 0

