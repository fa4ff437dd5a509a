"""One process count per profile, in one place (issue 59, item 4): ``sidebyside.lab.pool.PROCESSES``
(5 cpu, 3 gpu, 2 smoke); no params file names ``processes`` for any notebook, so none overrides it."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from sidebyside.lab import pool

PARAMS = Path(__file__).resolve().parents[2] / "params"
def test_the_counts_per_profile():
    assert pool.PROCESSES == {"smoke": 2, "cpu": 5, "gpu": 3}


@pytest.mark.parametrize("path", sorted(PARAMS.glob("*.yaml")), ids=lambda p: p.name)
def test_no_params_file_names_a_process_count(path):
    found = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    naming = sorted(profile for profile, params in found.items() if isinstance(params, dict) and "processes" in params)
    assert not naming, f"{path.name} names processes for {', '.join(naming)}: the count is pool.PROCESSES' alone"


def test_the_params_files_are_found():
    from sidebyside.publish.discovery import discover

    assert {f"{i.slug}.yaml" for i in discover(PARAMS.parent / "notebooks")} <= {p.name for p in PARAMS.glob("*.yaml")}
