"""What a run costs here (sidebyside.publish.footprint): the estimate ``make reproduce`` prints
before it runs, the process tree's peak memory (per part of a notebook), the record of each run's
time and peak, and the caches' cap, least recently used out first."""

from __future__ import annotations

import json
import os
import sys
import tempfile
import textwrap
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
from conftest import ROOT

from sidebyside.publish import footprint, running
from sidebyside.publish.common import PublishError

MB = 2**20


def _record(**provenance) -> dict:
    return {
        "slug": "post",
        "profile": "cpu",
        "provenance": {"device": "Old CPU (1 core)", **provenance},
    }


def test_the_estimate_scales_the_recorded_time_by_this_machines_calibration():
    record = _record(
        run_s=1000.0,
        peak_rss_bytes=24 * 10**9,
        machine={"quiet_level": {"compute_s": 0.004, "copy_s": 0.003}},
    )
    e = footprint.estimate(
        "post",
        record,
        "cpu",
        here=lambda: {"compute_s": 0.008, "copy_s": 0.006},
        available=lambda: 16 * 10**9,
    )
    assert e.factor == pytest.approx(2.0)
    assert e.expected_s == pytest.approx(2000.0)
    said = footprint.describe(e)
    assert "about 33 min here" in said and "1,000 s recorded on Old CPU (1 core)" in said
    assert "a peak of about 24.0 GB" in said and "it may not fit" in said


def test_the_estimate_falls_back_on_the_committed_baseline_of_the_recorded_fingerprint(tmp_path):
    (tmp_path / "params").mkdir()
    (tmp_path / "params" / "quiet-baselines.json").write_text(
        json.dumps(
            {"Old CPU kind": {"compute_s": 0.01, "copy_s": 0.01, "fingerprint": {"family": 6}}}
        )
    )
    record = _record(run_s=600.0, machine_kind="Old CPU kind")
    e = footprint.estimate(
        "post",
        record,
        "cpu",
        here=lambda: {"compute_s": 0.005, "copy_s": 0.005},
        root=tmp_path,
        available=lambda: None,
    )
    assert e.factor == pytest.approx(0.5) and e.expected_s == pytest.approx(300.0)
    assert "committed baseline" in footprint.describe(e)
    assert "peak memory not recorded" in footprint.describe(e)


def test_a_record_without_figures_says_so_and_calibrates_nothing():
    def never():
        raise AssertionError("no calibration is needed where nothing is recorded")

    said = footprint.describe(footprint.estimate("post", _record(), "cpu", here=never))
    assert said.startswith("post: no estimate of time or memory") and "run_s" in said


def test_a_gpu_run_is_read_from_the_records_gpu_run_and_not_scaled():
    record = {
        **_record(),
        "gpu_run": {
            "profile": "gpu",
            "provenance": {"device": "NVIDIA H200", "run_s": 400.0, "peak_rss_bytes": 9 * 10**9},
        },
    }
    e = footprint.estimate(
        "post", record, "gpu", here=lambda: {"compute_s": 1.0}, available=lambda: None
    )
    assert (e.run_s, e.factor, e.device) == (400.0, None, "NVIDIA H200")
    assert "not scaled" in footprint.describe(e)


def test_the_calibration_here_is_quick_and_has_both_workloads():
    start = time.perf_counter()
    found = footprint.calibrate_here(rounds=2, runs=2)
    assert set(found) == {"compute_s", "copy_s"} and all(v > 0 for v in found.values())
    assert time.perf_counter() - start < 10


CHILD = textwrap.dedent("""
    import subprocess, sys
    code = "import time; block = bytes([1]) * ({mb} * 2**20); time.sleep(1.5)"
    subprocess.run([sys.executable, "-c", code], check=True)
""")


def test_the_peak_counts_a_child_process(capsys):
    mb = 300
    code = footprint.memory(command=[sys.executable, "-c", CHILD.format(mb=mb)], interval=0.1)
    assert code == 0
    out = capsys.readouterr().out
    peak_gb = float(out.split("peak ")[1].split(" GB")[0])
    assert peak_gb * 1e9 >= 0.9 * mb * MB, out  # the grandchild's block, seen


def test_a_watch_keeps_each_cells_peak_and_time(tmp_path):
    cells = tmp_path / "cell.json"
    cells.write_text(json.dumps({"index": 0}))
    with footprint.Watch(interval=0.05, cells=cells) as watch:
        time.sleep(0.2)
        cells.write_text(json.dumps({"index": 2}))
        block = bytes([1]) * (200 * MB)
        time.sleep(0.2)
        del block
    assert set(watch.cell_s) == {0, 2} and watch.cell_s[0] >= 0.15
    assert watch.cell_peak[2] - watch.cell_peak[0] >= 150 * MB


def test_parts_follow_the_notebooks_second_level_headings():
    cells = [
        {"cell_type": "code", "source": "x = 1"},
        {"cell_type": "markdown", "source": "# Title"},
        {"cell_type": "markdown", "source": "## 1. Small\ntext"},
        {"cell_type": "code", "source": "a = 1"},
        {"cell_type": "markdown", "source": ["## 2. Big\n", "more"]},
        {"cell_type": "code", "source": "b = 2"},
    ]
    assert footprint.parts(cells) == [footprint.OPENING] * 2 + ["1. Small"] * 2 + ["2. Big"] * 2


def test_a_finished_runs_time_and_peak_go_into_its_provenance():
    saved = {"provenance": {"device": "x"}}
    watch = SimpleNamespace(wall_s=12.345, peak_bytes=7 * 10**9)
    footprint.note_run(saved, watch)
    assert saved["provenance"] == {"device": "x", "run_s": 12.3, "peak_rss_bytes": 7 * 10**9}


def test_the_cell_file_is_where_a_publisher_run_has_papermill_write_it(tmp_path):
    info = SimpleNamespace(slug="post")
    child = running._Child(
        info,
        tmp_path / "build",
        tmp_path / "in.ipynb",
        tmp_path / "out.ipynb",
        tmp_path,
        {},
        "python3",
        False,
        None,
        {},
        None,
    )
    assert Path(child.job["cell_file"]) == footprint.cell_file(tmp_path / "build", "post")


# ------------------------------------------------------------------ caches


def _entry(
    folder: Path, name: str, size: int, used: float, companion: str | None = None
) -> list[Path]:
    made = []
    for path in [folder / name] + ([folder / companion] if companion else []):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"x" * size)
        os.utime(path, (used, used))
        made.append(path)
    return made


def test_pruning_removes_the_least_recently_used_entries_first(tmp_path):
    now = time.time()
    cache = tmp_path / "cache"
    oldest = _entry(cache, "jax/jit_a-cache", 400, now - 5000, companion="jax/jit_a-atime")
    older = _entry(cache, "native/k-1.so", 300, now - 4000, companion="native/k-1.so.sha256")
    old = _entry(cache, "inductor/fx/abc/entry", 300, now - 3000)
    recent = _entry(cache, "jax/jit_b-cache", 300, now - 2000)
    removed, freed, left = footprint.prune(cache, 700, now=now)
    assert (removed, left) == (2, 600)
    assert freed == 2 * 400 + 2 * 300  # each entry with its companion
    assert not any(p.exists() for p in oldest + older)
    assert all(p.exists() for p in old + recent)
    assert not (cache / "native").exists()  # an emptied folder goes too
    assert footprint.prune(cache, 700, now=now) == (0, 0, 600)


def test_pruning_keeps_what_a_run_may_be_using_whatever_the_cap(tmp_path):
    now = time.time()
    _entry(tmp_path, "a", 500, now - 60)
    assert footprint.prune(tmp_path, 0, now=now) == (0, 0, 500)
    assert footprint.prune(tmp_path, 0, now=now, keep_recent_s=30) == (1, 500, 0)


def test_the_cache_folders_are_the_native_kernels_a_kept_compile_cache_and_the_tests(tmp_path):
    env = {
        "SIDEBYSIDE_NATIVE_CACHE": str(tmp_path / "native"),
        "SIDEBYSIDE_COMPILE_CACHE": str(tmp_path / "c"),
    }
    assert footprint.cache_folders(tmp_path, env) == [
        tmp_path / "native",
        tmp_path / "c",
        tmp_path / "build" / "test-cache",
    ]
    assert footprint.cache_folders(tmp_path, {})[0] == Path.home() / ".cache" / "sidebyside"


def _caches_in(tmp_path: Path, monkeypatch) -> tuple[Path, Path, Path]:
    native, temp = tmp_path / "native", tmp_path / "tmp"
    temp.mkdir()
    monkeypatch.setenv("SIDEBYSIDE_NATIVE_CACHE", str(native))
    monkeypatch.delenv("SIDEBYSIDE_COMPILE_CACHE", raising=False)
    monkeypatch.setattr(tempfile, "tempdir", str(temp))
    stale = temp / (footprint.TEMPORARY_PREFIX + "killed")
    _entry(stale, "jax/x-cache", 10, time.time() - 2 * running.RUN_LIMIT_S)
    os.utime(stale / "jax", (0, 0))
    os.utime(stale, (0, 0))
    young = temp / (footprint.TEMPORARY_PREFIX + "running")
    _entry(young, "jax/y-cache", 10, time.time())
    return native, stale, young


def test_the_publishers_pruning_caps_each_folder_and_removes_killed_runs_temporaries(
    tmp_path, monkeypatch
):
    native, stale, young = _caches_in(tmp_path, monkeypatch)
    _entry(native, "old.so", 2000, time.time() - 7200, companion="old.so.sha256")
    _entry(native, "new.so", 2000, time.time() - 3600)
    said = footprint.prune_caches(tmp_path, cap_gb=3000 / 1e9)
    assert not (native / "old.so").exists() and (native / "new.so").exists()
    assert not stale.exists() and young.exists()
    assert len(said) == 2 and "least recently used" in said[0]


def test_emptying_the_caches_leaves_a_running_runs_temporary(tmp_path, monkeypatch):
    native, stale, young = _caches_in(tmp_path, monkeypatch)
    _entry(native, "k.so", 100, time.time())
    (tmp_path / "build" / "test-cache" / "jax").mkdir(parents=True)
    said = footprint.empty_caches(tmp_path)
    assert native.is_dir() and not any(native.iterdir())
    assert not any((tmp_path / "build" / "test-cache").iterdir())
    assert not stale.exists() and young.exists()
    assert any(line.startswith(f"kept {young}") for line in said)


def test_a_cap_that_is_not_a_number_says_what_to_give(monkeypatch):
    monkeypatch.setenv(footprint.CAP_ENV, "lots")
    with pytest.raises(PublishError, match="give a number"):
        footprint.prune_caches()


# ------------------------------------------------------------------ a notebook, part by part

NOTEBOOK = "\n".join(
    [
        "# ---",
        "# jupyter:",
        "#   kernelspec:",
        "#     display_name: Python 3",
        "#     language: python",
        "#     name: python3",
        "#   sidebyside:",
        "#     slug: footprint-fixture",
        "#     title: Footprint",
        "#     date: '2026-11-30'",
        "#     description: Allocates a known amount in a child process.",
        "#     compared: Nothing.",
        "#     metrics: [mb]",
        "# ---",
        "",
        '# %% tags=["parameters"]',
        "mb = 1",
        "",
        "# %% [markdown]",
        "# ## 1. Small",
        "",
        "# %%",
        "import subprocess, sys, time",
        "time.sleep(1)",
        "",
        "# %% [markdown]",
        "# ## 2. Big",
        "",
        "# %%",
        "code = f'import time; block = bytes([1]) * ({mb} * 2**20); time.sleep(2)'",
        "subprocess.run([sys.executable, '-c', code], check=True)",
        "",
        "# %%",
        "from sidebyside.run import provenance",
        "provenance.save_results({'mb': mb})",
        "",
    ]
)


@pytest.mark.slow  # starts a kernel
def test_a_notebooks_peak_is_seen_in_the_part_whose_child_allocated_it(tmp_path, capsys):
    notebooks, params = tmp_path / "notebooks", tmp_path / "params"
    notebooks.mkdir()
    params.mkdir()
    (notebooks / "01_footprint.py").write_text(NOTEBOOK)
    (params / "footprint-fixture.yaml").write_text(
        "smoke: {mb: 400}\ncpu: {mb: 400}\ngpu: {mb: 400}\n"
    )
    assert (
        footprint.memory(
            only="footprint-fixture",
            profile="smoke",
            build=tmp_path / "build",
            notebooks=notebooks,
            params_dir=params,
            root=ROOT,
            interval=0.1,
        )
        == 0
    )
    out = capsys.readouterr().out
    report = out[out.index("footprint-fixture: peak") :]
    small = float(report.split("1. Small: peak ")[1].split(" GB")[0])
    big = float(report.split("2. Big: peak ")[1].split(" GB")[0])
    assert (big - small) * 1e9 >= 0.9 * 400 * MB, report  # the child's 400 MiB, in its own part
    total = float(report.split("footprint-fixture: peak ")[1].split(" GB")[0])
    assert total >= big, report


# ------------------------------------------------------------------ make reproduce's start


def test_reproduce_says_its_estimate_first_and_shows_the_cells_done(tmp_path, monkeypatch, capsys):
    from sidebyside.publish import reproduce

    slug = "jit-and-autograd-timing"
    record = {
        **_record(run_s=900.0, peak_rss_bytes=3 * 10**9),
        "slug": slug,
        "source_hash": "k",
        "executed_at": "2026-11-29T20:18:24+00:00",
        "metrics": {"verdicts": []},
    }
    record["provenance"]["machine"] = {"quiet_level": {"compute_s": 1.0, "copy_s": 1.0}}
    site = tmp_path / "site"
    (site / "_data" / "results").mkdir(parents=True)
    (site / "_data" / "results" / f"{slug}.json").write_text(json.dumps(record))
    monkeypatch.setattr(footprint, "calibrate_here", lambda: {"compute_s": 1.5, "copy_s": 1.5})

    def fake_run(**kwargs):  # the publisher's run: papermill at its fourth cell, then the record
        cells = footprint.cell_file(kwargs["build"], slug)
        cells.parent.mkdir(parents=True)
        cells.write_text(json.dumps({"index": 3}))
        time.sleep(1.2)
        out = kwargs["site"] / "_data" / "results" / f"{slug}.json"
        out.parent.mkdir(parents=True)
        out.write_text(json.dumps(record))
        return 0

    monkeypatch.setattr("sidebyside.publish.pipeline.run", fake_run)
    reproduce.reproduce(only=slug, site=site, scratch=tmp_path / "scratch")
    captured = capsys.readouterr()
    lines = captured.out.splitlines()
    assert lines[0].startswith(f"{slug} (cpu profile): expect about 22 min here (900 s recorded")
    assert "a peak of about 3.0 GB" in lines[0] and "running it here" in lines[1]
    assert f"{slug}: cells:" in captured.err and " 3/" in captured.err  # three cells done
    assert any(line.startswith(f"{slug}: ran in") for line in lines)
