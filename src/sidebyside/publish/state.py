"""Whether a site is whole: no publication left half done, no published file missing.

Two checks, read-only (they change nothing; :func:`sidebyside.publish.site.recover`
repairs the first):

- :func:`unfinished`: a publication that a killed process left between its
  journal and its last swap (``<site>/.sidebyside/journal-<slug>.json``, or the
  ``images/.<slug>.old`` / ``.new`` folders of earlier publishers). Until it is
  finished or rolled back, the post, figures and results of that slug may be a
  mix of two runs, or missing.
- :func:`incomplete`: a published post whose files are not all there. What
  was published is read from the manifest each publication writes into its
  figures folder (:data:`MANIFEST`, ``images/<slug>/manifest.json``: the
  post's file name, the run it shows, and every file of the folder with its
  size); a publication older than the manifest is checked against the
  results record and the figures its post links.

``list`` (hence ``make site`` and ``make serve``) and ``execute`` report both,
with what to do (:func:`problems`).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from sidebyside.publish.cache import is_post_of

__all__ = ["MANIFEST", "manifest", "unfinished", "incomplete", "problems", "RECOVER"]

#: The manifest of a publication, inside its figures folder (published with it: it is public too).
MANIFEST = "manifest.json"
#: How to finish or roll back an interrupted publication.
RECOVER = ("run `make recover` (python -m sidebyside.publish recover): it rolls back a publication that "
           "had not swapped all its files (the previous post, figures and results come back) and completes one "
           "that had, and says which; `make execute` and `make render` do the same before anything else")
_RUN_FIELDS = ("profile", "executed_at", "source_hash")
_SAME_RUN = ("executed_at", "source_hash")  # what tells two runs apart


def manifest(slug: str, post_name: str, files: dict[str, bytes], record: dict[str, Any]) -> bytes:
    """The manifest of a publication of ``slug``: its post's file name (under
    ``_posts/``), the run it shows (from ``record``) and each of ``files``
    (the figures folder) with its size."""
    return (json.dumps({"slug": slug, "post": post_name, "run": {k: record.get(k) for k in _RUN_FIELDS},
                        "files": {name: len(data) for name, data in sorted(files.items()) if name != MANIFEST}},
                       indent=2, sort_keys=True) + "\n").encode()


def unfinished(site: Path) -> list[str]:
    """One sentence per publication of ``site`` left half done, with what to do."""
    site = Path(site)
    said = []
    for journal in sorted((site / ".sidebyside").glob("journal-*.json")):
        slug = journal.name[len("journal-"):-len(".json")]
        try:
            entry = json.loads(journal.read_text())
            state, started = entry.get("state"), entry.get("started", "an unknown time")
        except (OSError, ValueError, AttributeError):
            state, started = "unreadable", "an unknown time"
        done = {"committed": "all its files were swapped in; recovery completes it",
                "prepared": "it stopped part way through swapping its files; recovery rolls it back"}.get(
            state, "its journal cannot be read; recovery removes it, then check the files with git status")
        said.append(f"{slug}: a publication started at {started} was interrupted ({journal}): {done}. Its post, "
                    f"figures and results may be a mix of two runs until then: {RECOVER}")
    for leftover in sorted([*site.glob("images/.*.old"), *site.glob("images/.*.new")]):
        said.append(f"{leftover.name[1:-4]}: {leftover} was left by an interrupted publication: {RECOVER}")
    return said


def _restore(slug: str, post: str | None) -> str:
    paths = " ".join(p for p in (post and f"_posts/{post}", f"images/{slug}", f"_data/results/{slug}.json") if p)
    return (f"Restore the published files (git checkout -- {paths}), or publish it again "
            f"(make execute ONLY={slug} FORCE=1, which replaces a larger profile's result too)")


def incomplete(site: Path, slug: str, record: dict[str, Any] | None) -> str | None:
    """What is missing from the publication of ``slug`` in ``site`` (with
    what to do), or None when it is whole or nothing is published. ``record``
    is its published results record (None when there is none)."""
    site = Path(site)
    posts = sorted(p.name for p in (site / "_posts").glob(f"*-{slug}.md") if is_post_of(p, slug))
    if record is None and not posts:
        return None
    folder = site / "images" / slug
    missing: list[str] = []
    mismatch = ""
    entry = None
    if (folder / MANIFEST).is_file():
        try:
            entry = json.loads((folder / MANIFEST).read_text())
            files, post = dict(entry["files"]), str(entry["post"])
        except (OSError, ValueError, KeyError, TypeError) as exc:
            return f"{slug}: its manifest {folder / MANIFEST} is unreadable ({exc}): {_restore(slug, None)}"
        if post not in posts:
            missing.append(f"_posts/{post}")
        for name, size in files.items():
            path = folder / name
            if not path.is_file():
                missing.append(f"images/{slug}/{name}")
            elif path.stat().st_size != size:
                missing.append(f"images/{slug}/{name} (its {path.stat().st_size} bytes, not the {size} published: "
                               "cut short or replaced)")
        run = entry.get("run") or {}
        if record is not None and any(run.get(k) != record.get(k) for k in _SAME_RUN):
            mismatch = (f" The figures folder is of the {run.get('profile')} run of {run.get('executed_at')}, the "
                        f"results record of the {record.get('profile')} run of {record.get('executed_at')}: "
                        "they come from two publications.")
    else:
        post = posts[-1] if posts else None
        if not posts:
            missing.append(f"_posts/<date>-{slug}.md (the post)")
        if not folder.is_dir():
            missing.append(f"images/{slug}/ (its figures and downloads)")
        elif post:
            text = (site / "_posts" / post).read_text(errors="replace")
            for name in sorted(set(re.findall(r"\.\./\.\./images/" + re.escape(slug) + r"/([^)\s\"'<>]+)", text))):
                if not (folder / name).is_file():
                    missing.append(f"images/{slug}/{name}")
    if record is None:
        missing.append(f"_data/results/{slug}.json (its results record)")
    if not missing and not mismatch:
        return None
    what = f"{', '.join(missing)} {'is' if len(missing) == 1 else 'are'} missing." if missing else ""
    return f"{slug}: the published post is incomplete: {what}{mismatch} {_restore(slug, posts[-1] if posts else None)}"


def problems(site: Path, slugs: list[str], records: dict[str, dict[str, Any] | None]) -> list[str]:
    """Every unfinished publication of ``site``, then every incomplete post
    among ``slugs`` (``records``: each slug's published record, or None)."""
    found = unfinished(site)
    for slug in slugs:
        message = incomplete(site, slug, records.get(slug))
        if message:
            found.append(message)
    return found
