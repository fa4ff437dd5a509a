"""A post's two runs, published together: its cpu run (the body) and its GPU run (a section).

:func:`combine` turns what was rendered from one run into what is published for the post, beside
what the site already publishes of its other run:

- a cpu (or smoke) run: its rendered post, with the GPU section of the post as published (its
  text between :data:`sidebyside.publish.gpu_section.START` and ``END``, put before the appendix)
  and the section's files (``images/<slug>/gpu.*``); its record holds the published GPU run
  (:data:`sidebyside.publish.records.GPU_RUN`);
- a gpu run: its section (:func:`sidebyside.publish.gpu_section.render_section`) put into the
  published post in place of the previous one, the body's files kept; where the post has no cpu
  run, the post is front matter and the section alone (its layout says the cpu run is owed);
- the other run is dropped when its method was withdrawn since it ran
  (:func:`sidebyside.publish.frontpage.superseding`): its figures must not stay on the site.

Then, where it holds a GPU run or anything published before, the post's ``results.json`` download
holds the combined record, and the publication's manifest (:data:`sidebyside.publish.state.MANIFEST`)
names every file of both runs; a cpu run published alone is published as it was rendered.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from sidebyside.publish import caps, gpu_section, records
from sidebyside.publish.common import ROOT, PublishError, say, warn
from sidebyside.publish.discovery import NotebookInfo

__all__ = ["published", "combine"]


def published(site: Path, slug: str) -> tuple[dict[str, Any] | None, str | None, dict[str, bytes]]:
    """What ``site`` publishes of ``slug``: its results record (None when there is none or it
    cannot be read: a warning says so), its post's text (None without one) and the files of
    ``images/<slug>/`` (:func:`sidebyside.publish.caps.read_folder`: anything but a regular file
    there raises :class:`PublishError`)."""
    from sidebyside.publish.cache import is_post_of

    site = Path(site)
    record = None
    path = site / "_data" / "results" / f"{slug}.json"
    if path.is_file():
        try:
            record = json.loads(path.read_text(encoding="utf-8"))
            if not isinstance(record, dict):
                raise ValueError(f"a JSON {type(record).__name__}, not an object")
        except (OSError, ValueError) as exc:
            warn(f"{path} cannot be read ({exc}): the post's other run is not kept")
            record = None
    posts = sorted(p for p in (site / "_posts").glob(f"*-{slug}.md") if is_post_of(p, slug))
    post = posts[-1].read_text(encoding="utf-8") if posts else None
    folder = site / "images" / slug
    files = caps.read_folder(folder)  # regular files only: never through a link, never a FIFO
    return record, post, files


def _standing(run: dict[str, Any] | None, what: str, site: Path, root: Path) -> dict[str, Any] | None:
    from sidebyside.publish.frontpage import load_changelog, superseding

    entry = superseding(run, load_changelog(site, root))
    if entry is not None:
        say(f"{run.get('slug')}: its published {what} of {run.get('executed_at')} is dropped: its method was "
            f"withdrawn since ({entry['title']}); the post owes that run")
        return None
    return run


def combine(site: Path, info: NotebookInfo, post: str, images: dict[str, bytes], record: dict[str, Any], *,
            root: Path = ROOT) -> tuple[str, dict[str, bytes], dict[str, Any]]:
    """``(post, images, record)`` to publish for ``info`` in ``site``, from what was rendered of one
    run (a post, or for a gpu run its section; see the module docstring)."""
    from sidebyside.publish import downloads, state
    from sidebyside.publish.cache import post_path

    site = Path(site)
    old_record, old_post, old_files = published(site, info.slug)
    old_cpu, old_gpu = records.split_runs(old_record)
    old_body, old_section = gpu_section.split(old_post) if old_post is not None else (None, None)
    body_files = {n: b for n, b in old_files.items() if not n.startswith(gpu_section.PREFIX)}
    section_files = {n: b for n, b in old_files.items() if n.startswith(gpu_section.PREFIX)}
    if record.get("profile") == "gpu":
        if not post.startswith(gpu_section.START):
            raise PublishError(f"{info.slug}: a gpu run is published as its post's GPU section "
                               "(sidebyside.publish.gpu_section.render_section), not as a post")
        cpu, gpu = _standing(old_cpu, "cpu run", site, root), record
        if cpu is not None and old_body is None:
            raise PublishError(f"{info.slug}: its cpu run is published (_data/results/{info.slug}.json) but its post "
                               f"is missing: restore it (git checkout -- _posts/), or publish the cpu run again, "
                               "before adding the GPU run's section. Nothing published was changed.")
        if cpu is not None:
            out_post, files = gpu_section.insert(old_body, post), {**body_files, **images}
        else:
            from sidebyside.publish.rendering import front_matter, front_matter_text, site_config

            cpu = None
            matter = front_matter(info, record, site_config(site, root), root)
            out_post, files = f"---\n{front_matter_text(matter, root)}---\n\n{post}\n", dict(images)
    else:
        cpu, gpu = record, _standing(old_gpu, "GPU run", site, root)
        files = dict(images)
        if gpu is not None and old_section is not None:
            out_post = gpu_section.insert(gpu_section.split(post)[0], old_section)
            files.update(section_files)
        else:
            out_post = post
            if gpu is not None:
                warn(f"{info.slug}: the published GPU run of {gpu.get('executed_at')} has no section on its page (it "
                     "was published before a GPU run was a section); its verdicts are kept, and merging its "
                     "archive again (publish merge) renders its section")
    combined = records.join_runs(cpu, gpu)
    if record.get("profile") == "gpu" or combined != record or files != images:  # else as rendered
        files.pop(state.MANIFEST, None)
        files[downloads.RESULTS] = (json.dumps(combined, indent=2, sort_keys=True) + "\n").encode()
        files[state.MANIFEST] = state.manifest(info.slug, post_path(site, info).name, files, combined)
    return out_post, files, combined
