"""Is each published result current? The home page's scoreboard says.

Jekyll cannot hash sources, so the publisher writes the answer into the site
as ``_data/freshness.json`` at the end of every ``execute`` and ``render``:
``{slug: "current" | "stale"}``. A result is "current" when the cache key of
its notebook, for the profile it was published with, still equals the
``source_hash`` of its results file (``freshness``, the one test
behind ``publish list`` and the cache); "stale" when one of its inputs
changed since it ran. The answer holds as of that publisher
run: a later commit changes it only at the next ``make``.
"""

from __future__ import annotations

import json
from pathlib import Path

from sidebyside.publish.cache import freshness as record_freshness
from sidebyside.publish.cache import published_record
from sidebyside.publish.common import write_atomic

__all__ = ["freshness", "write_freshness"]


def freshness(site: Path, infos, params_by_profile: dict, root: Path) -> dict[str, str]:
    """``{slug: "current" | "stale"}`` for each notebook in ``infos`` with a
    published result in ``site``."""
    states = {}
    for info in infos:
        record = published_record(site, info.slug)
        if record is None:
            continue
        current, _ = record_freshness(info, record, params_by_profile, root)
        states[info.slug] = "current" if current else "stale"
    return states


def write_freshness(site: Path, infos, params_by_profile: dict, root: Path, every=None) -> Path:
    """Write :func:`freshness` to ``site/_data/freshness.json`` (atomically;
    other slugs already there are kept), then what the pages show of every
    result, ``site/_data/board.json`` (:func:`sidebyside.publish.frontpage.write_board`,
    which refuses a record of too many verdicts; a post owes a GPU run where its header among ``every``,
    the project's notebooks (default ``infos``), plans a GPU section: :func:`.schedule.gpu_sections`), copy
    the committed noise floors (``params/noise-floor.json``) to ``site/_data/noise_floor.json``,
    write the checked summary of readers' reproductions
    (:func:`sidebyside.publish.reproductions.write_summary`), and return the first path."""
    path = Path(site) / "_data" / "freshness.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        states = json.loads(path.read_text()) if path.is_file() else {}
    except json.JSONDecodeError:
        states = {}
    states.update(freshness(Path(site), infos, params_by_profile, root))
    write_atomic(path, json.dumps(states, indent=2, sort_keys=True) + "\n")
    floors = Path(root) / "params" / "noise-floor.json"  # measured by python -m sidebyside.lab.noise --save
    if floors.is_file():  # for "How we measure", which states each machine kind's floor
        write_atomic(path.with_name("noise_floor.json"), floors.read_bytes())
    from sidebyside.publish import frontpage, reproductions, schedule

    reproductions.write_summary(Path(site))

    gpu_owed = schedule.gpu_sections(infos if every is None else every) if "gpu" in params_by_profile else set()
    frontpage.write_board(Path(site), states, gpu_owed, root)
    return path
