"""Merge the archives of GPU calls into a site: every post from one commit
and one stack.

An archive is what ``tools/device-run.sh`` packs (a ``.tgz``): the site's
``_posts/``, ``images/``, ``_data/`` and ``checkpoints/`` after the call,
and at its root :data:`MANIFEST`, written by :func:`write_manifest`:
``commit`` (the commit the call ran from), ``stack`` (Python, the
libraries and the CUDA/cuDNN each framework uses), ``device``, ``planned``
(the posts the call was to publish), ``published`` (those it did),
``started`` and ``stub`` (true for a dry run with a stub publisher).

:func:`merge` first reads and checks every archive, and refuses, changing
nothing, when:

- an archive is corrupt: not a gzip'd tar, a member that is not a plain file
  or folder or that points outside the archive, no readable manifest, or a
  post it names as published whose post, results record or images are
  missing or unreadable;
- the archives name different commits or stacks, or a post's own record
  names another commit, stack or device than its archive, or its two
  frameworks ran on different devices, or two archives both published it;
- a dry run's archive (``stub``) is merged without ``allow_stub``.

Then it publishes each post with the publisher's transaction
(:func:`sidebyside.publish.site.publish`: a post, its images and its
results together or not at all), and writes each post's checkpoint file
(the latest call's). A post planned by an archive or named in ``expect``
that no archive published is reported as missing.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import os
import platform
import sys
import tarfile
from collections.abc import Iterable, Mapping
from pathlib import Path, PurePosixPath
from typing import Any

from sidebyside.publish.common import ROOT, PublishError, say

__all__ = ["MANIFEST", "STACK_KEYS", "Archive", "Merged", "read_archive", "merge", "main_merge", "write_manifest", "stack"]

MANIFEST = "gpu-run.json"
#: What a stack is: the versions a run computes with. A post's provenance record holds the same keys.
STACK_KEYS = ("python", "torch", "jax", "jaxlib", "flax", "optax", "numpy", "torch_cuda", "torch_cudnn", "jax_cuda",
              "jax_cudnn")
_ROOTS = ("_posts", "images", "_data", "checkpoints", "build", MANIFEST)


@dataclasses.dataclass
class Archive:
    """A checked archive: its manifest and, per post it published, the files to publish."""

    path: Path
    manifest: dict[str, Any]
    posts: dict[str, tuple[str, str, dict[str, bytes], dict[str, Any]]]  # slug -> (post name, text, images, record)
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
                   devices: Mapping[str, Any] | None, stub: bool = False, call: str = "") -> dict[str, Any]:
    """Write the manifest of a call into ``path`` and return it. A planned
    post counts as published when ``site`` holds its gpu results record,
    from ``commit``, executed at or after ``started`` (ISO 8601)."""
    since = dt.datetime.fromisoformat(started)
    published = []
    for slug in dict.fromkeys(planned):
        try:
            record = json.loads((Path(site) / "_data" / "results" / f"{slug}.json").read_text())
            recent = dt.datetime.fromisoformat(record["executed_at"]) >= since
        except (OSError, ValueError, KeyError, TypeError):  # no record, or one without a time zone: not this call's
            continue
        if recent and record.get("profile") == "gpu" and _same_commit(record.get("provenance", {}).get("git_sha"),
                                                                       commit):
            published.append(slug)
    devices = dict(devices or {})
    manifest = {"commit": commit, "stack": stack(devices), "device": devices.get("torch_device"),
                "devices": devices, "planned": list(dict.fromkeys(planned)), "published": published,
                "started": started, "call": call, "stub": stub}
    Path(path).write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n")
    return manifest


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
        planned, published = list(manifest["planned"]), list(manifest["published"])
        if not isinstance(manifest["commit"], str) or not isinstance(manifest["stack"], dict):
            raise TypeError("commit or stack")
    except KeyError as exc:
        raise _corrupt(path, f"its manifest {MANIFEST} is missing or lacks {exc}") from None
    except (ValueError, TypeError) as exc:
        raise _corrupt(path, f"its manifest {MANIFEST} is unreadable ({exc})") from None
    posts = {}
    for slug in published:
        if slug not in planned:
            raise _corrupt(path, f"its manifest says it published {slug}, which it did not plan")
        names = [n for n in files if PurePosixPath(n).parent == PurePosixPath("_posts")
                 and n.endswith(f"-{slug}.md") and n[len("_posts/"):-len(f"-{slug}.md")].count("-") == 2]
        if len(names) != 1:
            raise _corrupt(path, f"it published {slug} but holds {len(names)} posts of it in _posts/")
        try:
            record = json.loads(files[f"_data/results/{slug}.json"])
            text = files[names[0]].decode("utf-8")
        except KeyError:
            raise _corrupt(path, f"it published {slug} but holds no _data/results/{slug}.json") from None
        except (ValueError, UnicodeDecodeError) as exc:
            raise _corrupt(path, f"the post or results record of {slug} is unreadable ({exc})") from None
        if not isinstance(record, dict) or record.get("slug") != slug or not isinstance(record.get("provenance"), dict):
            raise _corrupt(path, f"_data/results/{slug}.json is not the results record of {slug}")
        prefix = f"images/{slug}/"
        images = {n[len(prefix):]: b for n, b in files.items() if n.startswith(prefix)}
        if any("/" in name for name in images):
            raise _corrupt(path, f"images/{slug}/ holds folders; a post's images are one flat folder")
        posts[slug] = (PurePosixPath(names[0]).name, text, images, record)
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
        for slug, (_, _, _, record) in archive.posts.items():
            prov = record["provenance"]
            if slug in seen:
                problems.append(f"{slug}: published by both {seen[slug].path.name} and {archive.path.name} "
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


def merge(paths: Iterable[Path], *, site: Path = ROOT, notebooks: Path = ROOT / "notebooks",
          expect: Iterable[str] = (), allow_stub: bool = False) -> Merged:
    """Merge the archives at ``paths`` into ``site`` (see the module
    docstring). Raises :class:`PublishError`, with nothing changed, when
    they may not be merged."""
    from sidebyside.publish.discovery import discover
    from sidebyside.publish.site import lock, publish, recover

    paths = [Path(p) for p in paths]
    if not paths:
        raise PublishError("no archives to merge: name the gpu-run*.tgz of every call")
    archives = [read_archive(p) for p in paths]
    problems = _check(archives)
    stubs = [a.path.name for a in archives if a.manifest.get("stub")]
    if stubs and not allow_stub:
        problems.append(f"{', '.join(stubs)} came from a dry run with a stub publisher, not from a GPU")
    infos = {i.slug: i for i in discover(notebooks)}
    for archive in archives:
        for slug, (name, _, _, _) in archive.posts.items():
            if slug not in infos:
                problems.append(f"{slug} (in {archive.path.name}) is no notebook of {notebooks}")
            elif name != f"{infos[slug].date}-{slug}.md":
                problems.append(f"{slug}: {archive.path.name} holds _posts/{name}, but the notebook's date makes "
                                f"it {infos[slug].date}-{slug}.md (an archive of another version of the notebook)")
    if problems:
        raise PublishError("merge refused; nothing was changed:\n  " + "\n  ".join(problems))
    published: dict[str, str] = {}
    site = Path(site)
    with lock(site):
        for message in recover(site):
            say(f"recovered {message}")
        for archive in archives:
            for slug, (_, text, images, record) in archive.posts.items():
                publish(site, infos[slug], text, images, record)
                published[slug] = archive.path.name
                say(f"{slug}: published from {archive.path.name} (commit {archive.manifest['commit']})")
        latest: dict[str, bytes] = {}
        for archive in sorted(archives, key=lambda a: str(a.manifest.get("started", ""))):
            latest.update(archive.checkpoints)
        for name, payload in latest.items():
            target = site / "checkpoints" / name
            target.parent.mkdir(parents=True, exist_ok=True)
            tmp = target.with_name(f".{name}.tmp")
            tmp.write_bytes(payload)
            os.replace(tmp, target)
    wanted = list(dict.fromkeys([*expect, *(s for a in archives for s in a.manifest["planned"])]))
    missing = {}
    for slug in wanted:
        if slug not in published:
            why = [f"{a.path.name} planned it and did not publish it" for a in archives
                   if slug in a.manifest["planned"]] or ["no archive planned it"]
            missing[slug] = "; ".join(why)
    return Merged(published, missing)


def main_merge(paths: list[Path], *, site: Path, notebooks: Path, expect: str | None, allow_missing: bool,
               allow_stub: bool) -> int:
    """The ``merge`` command: 0 when every expected post was published, 1 when one is missing (reported)."""
    merged = merge(paths, site=site, notebooks=notebooks, expect=[s for s in (expect or "").split(",") if s],
                   allow_stub=allow_stub)
    for slug, why in merged.missing.items():
        print(f"missing: {slug}: {why}; run its call again (tools/device-run.sh {slug}) and merge its archive",
              file=sys.stderr)
    say(f"merged {len(merged.published)} post(s) from {len(paths)} archive(s)"
        + (f"; {len(merged.missing)} missing" if merged.missing else ""))
    return 1 if merged.missing and not allow_missing else 0

