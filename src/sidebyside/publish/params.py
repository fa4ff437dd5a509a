"""Profiles and the parameters each profile gives each notebook
(``params/<profile>.yaml``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from sidebyside.publish.common import PROFILES, PublishError
from sidebyside.publish.discovery import NotebookInfo
from sidebyside.run import provenance

__all__ = ["detect_profile", "check_profile", "load_params", "load_all_params"]


def detect_profile() -> str:
    """``gpu`` where the driver shows a GPU, else ``cpu`` (asked without
    importing PyTorch or JAX; the gpu profile then checks that both use it)."""
    return "gpu" if provenance.gpu_present() else "cpu"


def check_profile(profile: str) -> str:
    if profile not in PROFILES:
        raise PublishError(f"unknown profile {profile!r}; valid profiles: {', '.join(PROFILES)} (or 'auto')")
    return profile


def load_params(params_dir: Path, profile: str, infos: list[NotebookInfo]) -> dict[str, dict[str, Any]]:
    """Parameters of ``profile`` per slug, checked against each notebook's parameters cell.

    ``infos`` are all the notebooks of the folder the params file serves (not
    a selection of them): a top-level key that is none of their slugs is an error.
    """
    check_profile(profile)
    path = Path(params_dir) / f"{profile}.yaml"
    if not path.is_file():
        raise PublishError(f"{path} is missing; create it with one mapping per notebook slug")
    try:
        table = yaml.safe_load(path.read_text()) or {}
    except yaml.YAMLError as exc:
        raise PublishError(f"{path} is not valid YAML: {exc}") from exc
    if not isinstance(table, dict):
        raise PublishError(f"{path} must map notebook slugs to parameter mappings")
    by_slug = {i.slug: i for i in infos}
    result: dict[str, dict[str, Any]] = {}
    unknown_slugs = sorted(str(slug) for slug in table if slug not in by_slug)
    if unknown_slugs:
        raise PublishError(f"{path}: {', '.join(map(repr, unknown_slugs))} is not the slug of a notebook; "
                           f"valid slugs: {', '.join(by_slug) or '(none)'} (fix the spelling or remove the entry)")
    for slug, values in table.items():
        values = values or {}
        if not isinstance(values, dict):
            raise PublishError(f"{path}: the entry for {slug!r} must be a mapping of parameter names to values")
        unknown = sorted(set(values) - set(by_slug[slug].parameters))
        if unknown:
            raise PublishError(
                f"{path}: {slug} sets {', '.join(unknown)}, which its parameters cell "
                f"({by_slug[slug].path.name}) does not define; valid names: {', '.join(by_slug[slug].parameters)}"
            )
        result[slug] = values
    for info in infos:
        result.setdefault(info.slug, {})
    return result



def load_all_params(params_dir: Path, infos: list[NotebookInfo]) -> dict[str, dict[str, dict[str, Any]]]:
    """``{profile: {slug: parameters}}`` for every profile with a file in
    ``params_dir`` (``--params``); ``infos`` are all the notebooks."""
    return {p: load_params(params_dir, p, infos) for p in PROFILES if (Path(params_dir) / f"{p}.yaml").is_file()}
