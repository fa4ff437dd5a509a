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
"""

from __future__ import annotations

import hashlib
import shutil
import tempfile
from pathlib import Path

from sidebyside.publish.cache import is_post_of
from sidebyside.publish.common import PublishError

__all__ = ["Guard", "GUARDED", "manifest"]

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
