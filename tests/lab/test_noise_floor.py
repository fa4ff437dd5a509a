"""The noise floor (issue 59, item 2): a stated upper quantile of the A/A ratios, not their maximum,
applied only at the process count it was measured at; the committed floors say which quantile and
how many races; a record written before the quantile (the maximum) is read at the quantile."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from sidebyside.lab import floors, stats, timing

ROOT = Path(__file__).resolve().parents[2]
#: 24 A/A ratios, one race far out (it set the old floor, the maximum, alone).
RATIOS = [1.010, 0.990, 1.009, 1.015, 1.011, 1.027, 1.019, 0.994, 0.987, 1.001, 1.015, 1.011,
          0.980, 0.989, 0.991, 1.076, 1.015, 1.001, 1.005, 0.980, 0.991, 0.991, 0.993, 1.041]


def test_the_floor_is_the_95th_percentile_of_the_distance_from_1_not_the_maximum():
    expected = math.exp(np.percentile(np.abs(np.log(RATIOS)), 95)) - 1
    assert stats.FLOOR_QUANTILE == 0.95
    assert stats.noise_floor(RATIOS) == pytest.approx(expected, rel=1e-12)
    assert stats.noise_floor(RATIOS) < 0.076 / 1.5  # one race far out does not set it
    assert stats.noise_floor(RATIOS, 1.0) == pytest.approx(0.076)  # the quantile 1 is the maximum
    # symmetric: a ratio and its inverse are the same distance from 1
    assert stats.noise_floor([1 / r for r in RATIOS]) == pytest.approx(stats.noise_floor(RATIOS))
    for bad, quantile in (([], 0.95), ([1.0, -1.0], 0.95), (RATIOS, 0.0), (RATIOS, 1.5)):
        with pytest.raises(ValueError):
            stats.noise_floor(bad, quantile)


def _floors(tmp_path: Path, record: dict) -> Path:
    path = tmp_path / "noise-floor.json"
    path.write_text(json.dumps({"Kind (2 cores)": record}), encoding="utf-8")
    return path


def test_a_floor_applies_only_at_the_process_count_it_was_measured_at(tmp_path):
    path = _floors(tmp_path, {"floor": 0.04, "quantile": 0.95, "trials": 24, "processes": 5, "ratios": RATIOS})
    assert floors.floor("Kind (2 cores)", path, processes=5) == 0.04
    assert floors.floor("Kind (2 cores)", path, processes=2) is None
    assert floors.floor("Kind (2 cores)", path, processes=3) is None
    assert floors.floor("Another kind", path, processes=5) is None
    assert floors.floor("Kind (2 cores)", tmp_path / "absent.json", processes=5) is None


def test_a_record_written_as_the_maximum_is_read_at_the_quantile(tmp_path):
    old = {"floor": 0.076, "largest": 1.076, "trials": 24, "processes": 5, "ratios": RATIOS,
           "method": "the largest time ratio of a function raced against itself (A/A) through the harness, as "
                     "exp(max |ln r|) - 1", "measured_at": "2026-11-26T01:08:33+00:00"}
    found = floors.record("Kind (2 cores)", _floors(tmp_path, old))
    assert found["quantile"] == 0.95 and found["floor"] == round(stats.noise_floor(RATIOS), 4)
    assert "95th percentile" in found["method"] and found["trials"] == 24 and found["largest"] == 1.076
    assert floors.floor("Kind (2 cores)", _floors(tmp_path, old), processes=5) == found["floor"]


def test_the_committed_floors_state_their_quantile_and_races():
    floors = json.loads((ROOT / "params" / "noise-floor.json").read_text(encoding="utf-8"))
    assert floors
    for kind, record in floors.items():
        assert record["quantile"] == stats.FLOOR_QUANTILE, kind
        assert record["trials"] == len(record["ratios"]) >= 20, kind
        assert isinstance(record["processes"], int) and record["processes"] >= 2, kind
        assert record["floor"] == round(stats.noise_floor(record["ratios"], record["quantile"]), 4), kind
        assert "95th percentile" in record["method"], kind


def test_a_pooled_timing_carries_the_floor_of_its_own_process_count(monkeypatch):
    asked = []
    monkeypatch.setattr(floors, "floor", lambda kind=None, path=None, *, processes=None: asked.append(processes))
    t = timing.compare({"A": lambda: sum(range(100)), "B": lambda: sum(range(200))}, repeats=2, min_repeat_s=0.001,
                       processes=1)
    assert asked == [1] and t["A"].floor is None
