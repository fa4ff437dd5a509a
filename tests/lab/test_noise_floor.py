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


def test_the_spread_between_runs_is_what_the_runs_intervals_do_not_explain():
    import statistics

    same = [(0.25, 0.01), (0.25, 0.01), (0.25, 0.01)]
    assert stats.between_run_sd(same) == 0.0
    wobbly = [(0.248, 0.006), (0.26, 0.05), (0.301, 0.04), (0.303, 0.05)]  # grid's per-call headline
    expected = statistics.variance([math.log(r) for r, _ in wobbly]) - statistics.fmean([s * s for _, s in wobbly])
    assert stats.between_run_sd(wobbly) == pytest.approx(math.sqrt(expected)) and stats.between_run_sd(wobbly) > 0.08
    # ratios that move no more than their errors say: no spread
    assert stats.between_run_sd([(1.0, 0.05), (1.03, 0.05), (0.98, 0.05)]) == 0.0
    for bad in ([(1.0, 0.01)], [(0.0, 0.01), (1.0, 0.01)], [(1.0, -0.1), (1.0, 0.01)]):
        with pytest.raises(ValueError):
            stats.between_run_sd(bad)
    with pytest.raises(ValueError, match="standard deviation"):
        stats.ratio_interval([1.0, 1.1], [1.0, 1.0], between_sd=-0.1)
    # no count of processes narrows the interval below the spread between runs
    many = stats.ratio_interval([1.0] * 200, [2.0] * 200, between_sd=0.05)
    assert math.log(many["interval"][1] / many["ratio"]) > 1.9 * 0.05


def test_spreads_between_runs_are_pooled_over_versions_and_read_by_machine_kind(tmp_path):
    path = tmp_path / "between-runs.json"
    assert floors.between_runs("kind", path) == {}
    part = {"slug": "s", "source_hash": "k1", "runs": 4, "sd": 0.09, "measured_at": "t"}
    floors.save_between("kind", "race@1", part, path)
    floors.save_between("kind", "quiet@1", {**part, "sd": 0.0}, path)
    floors.save_between("other kind", "race@1", {**part, "sd": 0.5}, path)
    assert floors.between_runs("kind", path) == {"race@1": {"sd": 0.09, "runs": 4}}  # a zero spread is left out
    # the same version measured again replaces its part; another version pools with it, by runs - 1
    floors.save_between("kind", "race@1", {**part, "sd": 0.06}, path)
    record = floors.save_between("kind", "race@1", {**part, "source_hash": "k2", "runs": 3, "sd": 0.03}, path)
    assert [p["source_hash"] for p in record["parts"]] == ["k1", "k2"]
    assert record["sd"] == pytest.approx(math.sqrt((3 * 0.06 ** 2 + 2 * 0.03 ** 2) / 5), abs=1e-4)
    assert floors.between_runs("kind", path)["race@1"]["runs"] == 7
    assert floors.between_runs("other kind", path) == {"race@1": {"sd": 0.5, "runs": 4}}
    assert "less the mean of their squared within-run" in json.loads(path.read_text())["kind"]["race@1"]["method"]


def test_the_committed_spreads_between_runs_are_keyed_by_machine_kind_and_verdict_id():
    committed = json.loads((ROOT / "params" / "between-runs.json").read_text(encoding="utf-8"))
    for kind, races in committed.items():
        assert "family" in kind and "model" in kind  # a fingerprint in words, as the floors are keyed
        for vid, record in races.items():
            assert "@" in vid and record["sd"] >= 0 and all(p["runs"] >= 2 for p in record["parts"])


def test_a_pooled_timing_carries_its_machine_kinds_spreads_between_runs(monkeypatch):
    monkeypatch.setattr(floors, "between_runs", lambda kind=None, path=None: {"race@1": {"sd": 0.1, "runs": 4}})
    t = timing.compare({"A": lambda: sum(range(100))}, repeats=2, min_repeat_s=0.001, processes=1)
    assert t["A"].between == {"race@1": {"sd": 0.1, "runs": 4}} and t["A"].entry()["between"] == t["A"].between
