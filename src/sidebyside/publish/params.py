"""Profiles, and the settings each post gives its notebook under each profile: one file per post,
``params/<slug>.yaml`` (:data:`sidebyside.run.colab.SETTINGS`), mapping ``smoke``, ``cpu`` and ``gpu``
to the names of its parameters cell. The publisher, the GPU planner, ``make reproduce``, the tests and
the notebook itself on Colab all read that one file; the processes a profile pools are the profile's,
not a post's (:data:`sidebyside.lab.pool.PROCESSES`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from sidebyside.publish.common import PROFILES, PublishError
from sidebyside.publish.discovery import GPU_BUDGET_KEY, NotebookInfo
from sidebyside.publish.schedule import CALLS_FILE
from sidebyside.run import colab, provenance

__all__ = ["detect_profile", "check_profile", "settings_file", "load_params", "load_all_params"]

#: Files of params/ that hold no post's settings.
OTHER_FILES = (CALLS_FILE,)


def detect_profile() -> str:
    """``gpu`` where the driver shows a GPU, else ``cpu`` (asked without
    importing PyTorch or JAX; the gpu profile then checks that both use it)."""
    return "gpu" if provenance.gpu_present() else "cpu"


def check_profile(profile: str) -> str:
    if profile not in PROFILES:
        raise PublishError(f"unknown profile {profile!r}; valid profiles: {', '.join(PROFILES)} (or 'auto')")
    return profile


def settings_file(params_dir: Path, slug: str) -> Path:
    """The file of ``params_dir`` that holds the post ``slug``'s settings."""
    return Path(params_dir) / Path(colab.SETTINGS.format(slug=slug)).name


def _settings(params_dir: Path, info: NotebookInfo) -> dict[str, dict[str, Any]]:
    """``{profile: parameters}`` of one post, checked against its parameters cell ({} for each profile
    where the post has no file: the parameters cell as written)."""
    path = settings_file(params_dir, info.slug)
    if not path.is_file():
        return {p: {} for p in PROFILES}
    try:
        table = yaml.safe_load(path.read_text()) or {}
    except yaml.YAMLError as exc:
        raise PublishError(f"{path} is not valid YAML: {exc}") from exc
    if not isinstance(table, dict):
        raise PublishError(f"{path} must map profiles ({', '.join(PROFILES)}) to parameter mappings")
    unknown_profiles = sorted(str(p) for p in table if p not in PROFILES and p != GPU_BUDGET_KEY)
    if unknown_profiles:
        raise PublishError(f"{path}: {', '.join(map(repr, unknown_profiles))} is not a profile; valid profiles: "
                           f"{', '.join(PROFILES)} (fix the spelling or remove the entry)")
    result: dict[str, dict[str, Any]] = {}
    for profile in PROFILES:
        values = table.get(profile) or {}
        if not isinstance(values, dict):
            raise PublishError(f"{path}: {profile} must be a mapping of parameter names to values")
        unknown = sorted(set(values) - set(info.parameters))
        if unknown:
            raise PublishError(
                f"{path}: {profile} sets {', '.join(unknown)}, which the parameters cell of "
                f"{info.path.name} does not define; valid names: {', '.join(info.parameters)}"
            )
        result[profile] = values
    return result


def load_all_params(params_dir: Path, infos: list[NotebookInfo]) -> dict[str, dict[str, dict[str, Any]]]:
    """``{profile: {slug: parameters}}`` for every profile and every notebook of ``infos`` (all the
    notebooks of the folder ``params_dir`` serves, not a selection: a settings file that names none
    of them is an error, so that a misspelt file is not silently ignored)."""
    params_dir = Path(params_dir)
    slugs = {i.slug for i in infos}
    stray = sorted(p.name for p in params_dir.glob("*.yaml") if p.stem not in slugs and p.name not in OTHER_FILES)
    if stray:
        raise PublishError(
            f"{params_dir}: {', '.join(stray)} is not the settings file of a notebook (settings live in one file "
            f"per post, <slug>.yaml, mapping {', '.join(PROFILES)} to its parameters); valid slugs: "
            f"{', '.join(sorted(slugs)) or '(none)'} (rename or remove the file)")
    by_post = {info.slug: _settings(params_dir, info) for info in infos}
    return {profile: {slug: table[profile] for slug, table in by_post.items()} for profile in PROFILES}


def load_params(params_dir: Path, profile: str, infos: list[NotebookInfo]) -> dict[str, dict[str, Any]]:
    """``{slug: parameters}`` of ``profile`` (see :func:`load_all_params`)."""
    return load_all_params(params_dir, infos)[check_profile(profile)]
