"""The cache: a run's key, whether a published record is current, and the
plan of what to run (freeze semantics: a larger profile is kept; a post's GPU run is planned
against its published GPU run, any other profile against its other run: the two stand apart).

The key and its inputs are :mod:`sidebyside.run.runkey`'s (it also records
them inside the run); :func:`freshness` is the one test of staleness, used
by ``execute``, ``list`` and the scoreboard."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sidebyside.publish.common import PROFILES, ROOT, PublishError
from sidebyside.publish.discovery import NotebookInfo
from sidebyside.publish.records import split_runs
from sidebyside.run import runkey

__all__ = ["cache_key", "Decision", "published_record", "is_post_of", "post_path", "freshness", "plan"]


def cache_key(info: NotebookInfo, profile: str, params: dict[str, Any], root: Path = ROOT,
              inputs: dict[str, Any] | None = None) -> str:
    """The key of a run: notebook source, the profile's parameters for it, the
    pins, and the modules and data files the run recorded as its ``inputs``
    (without them, the whole library: see :mod:`sidebyside.run.runkey`)."""
    return runkey.run_key(info.path, profile, params, inputs, root)


@dataclass
class Decision:
    info: NotebookInfo
    action: str  # "run" | "up to date" | "kept"
    reason: str
    key: str | None  # the published record's key as it stands now (None: nothing published)


def published_record(site: Path, slug: str) -> dict[str, Any] | None:
    """The published results record of ``slug``, or None when nothing is
    published. A record that cannot be trusted (not JSON, another slug or profile, a key missing, or a
    field that breaks :data:`sidebyside.publish.records.RECORD_SCHEMA`) raises :class:`PublishError`
    (never "not published": that would let any run replace the post)."""
    path = Path(site) / "_data" / "results" / f"{slug}.json"
    fix = (f"restore it (git checkout -- _data/results/{slug}.json), or replace the published post with a new run "
           f"(make execute ONLY={slug} FORCE=1)")
    if not path.exists():
        posts = sorted(p for p in (Path(site) / "_posts").glob(f"*-{slug}.md") if is_post_of(p, slug))
        if posts:
            raise PublishError(f"{posts[0]} is published but its results file {path} is missing: {fix}")
        return None
    try:
        record = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError) as exc:
        raise PublishError(f"{path} cannot be read ({exc}): {fix}") from None
    except ValueError as exc:
        raise PublishError(f"{path} is not valid JSON ({exc}): {fix}") from None
    problem = None
    if not isinstance(record, dict):
        problem = f"holds a JSON {type(record).__name__}, not an object"
    elif record.get("slug") != slug:
        problem = f"names slug {record.get('slug')!r}, not {slug!r}"
    elif record.get("profile") not in PROFILES:
        problem = f"has profile {record.get('profile')!r}, not one of {', '.join(PROFILES)}"
    else:
        missing = [k for k, kind in (("source_hash", str), ("executed_at", str), ("provenance", dict),
                                     ("metrics", dict)) if not isinstance(record.get(k), kind)]
        if missing:
            problem = f"lacks {', '.join(missing)} (or has the wrong type)"
        else:
            from sidebyside.publish.records import schema_problems

            wrong = schema_problems(record)
            if wrong:
                problem = f"has fields the site's pages cannot show ({'; '.join(wrong[:5])})"
    if problem:
        raise PublishError(f"{path} is not a valid results record: it {problem}: {fix}")
    return record


def is_post_of(path: Path, slug: str) -> bool:
    return bool(re.match(r"\d{4}-\d{2}-\d{2}-" + re.escape(slug) + r"\.md$", path.name))


def post_path(site: Path, info: NotebookInfo) -> Path:
    return site / "_posts" / f"{info.date}-{info.slug}.md"


def freshness(info: NotebookInfo, record: dict[str, Any] | None, params_by_profile: dict[str, dict[str, dict]],
              root: Path = ROOT) -> tuple[bool | None, str | None]:
    """Whether a published record is current: ``(current, key)``, with
    ``current`` None when it cannot be told (nothing published, or no
    parameters for its profile). The one test behind ``execute`` and ``list``."""
    if record is None or info.slug not in params_by_profile.get(record.get("profile"), {}):
        return None, None
    return runkey.freshness(info.path, record, params_by_profile[record["profile"]][info.slug], root)


def plan(infos, profile, params_by_profile, site: Path, *, force: bool = False, root: Path = ROOT) -> list[Decision]:
    """Decide, per notebook, whether to run it (see the module docstring)."""
    decisions = []
    for info in infos:
        cpu_run, gpu_run = split_runs(None if force else published_record(site, info.slug))
        record = gpu_run if profile == "gpu" else cpu_run  # a post's GPU run and its other run stand apart
        post = post_path(site, info)
        current, key = freshness(info, record, params_by_profile, root)
        if force:
            decisions.append(Decision(info, "run", "forced", key))
        elif record is None or not post.is_file():
            decisions.append(Decision(info, "run", "not published yet" if cpu_run is None and gpu_run is None
                                      else f"its {'GPU' if profile == 'gpu' else 'cpu'} run is owed", key))
        elif record.get("profile") in PROFILES and PROFILES.index(record["profile"]) > PROFILES.index(profile):
            published = record["profile"]
            stale = "" if current is not False else "; its inputs changed since"
            decisions.append(Decision(
                info, "kept",
                f"published {published} result kept{stale} (PROFILE={published} to refresh it, FORCE=1 to replace it)",
                key))
        elif record.get("profile") == profile and current:
            decisions.append(Decision(info, "up to date", f"{profile} result is current", key))
        else:
            decisions.append(Decision(info, "run", "sources or parameters changed" if record.get("profile") == profile
                                      else f"replacing a {record.get('profile')} result", key))
    return decisions

