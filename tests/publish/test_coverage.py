"""Coverage of the published intervals: of the logged re-runs' estimates, the share inside the 95%
interval published before them, per post and overall, against the goal; the interval is the one
the re-run's commit published (git), else the site's record where it ran before the re-run."""

from __future__ import annotations

import copy
import json

from conftest import git
from test_reproduce import PUBLISHED, SLUG

from sidebyside.publish import reruns
from sidebyside.publish.cli import main
from sidebyside.publish.reruns import speed_verdicts

IDS = [v["id"] for v in speed_verdicts(PUBLISHED)]  # held (JAX 3x), turned, shrank, gone


def _run(at, commit, ratios):
    """A logged re-run at ``at`` from ``commit`` whose verdicts measured ``ratios`` (by index)."""
    def entry(r):
        interval = [r * 0.9, r * 1.1] if isinstance(r, float) else None
        return {"ratio": r, "interval": interval, "winner": None, "processes": 5, "between_sd": 0.0}

    return {"executed_at": at, "commit": commit,
            "verdicts": {IDS[i]: entry(r) for i, r in ratios.items()}}


def _log(site, runs):
    log = {"slug": SLUG, "source_hash": "k", "runs": runs}
    (site / "_data" / "reruns").mkdir(parents=True, exist_ok=True)
    (site / "_data" / "reruns" / f"{SLUG}.json").write_text(json.dumps(log))


def _site(tmp_path, runs, record=PUBLISHED):
    site = tmp_path / "site"
    (site / "_data" / "results").mkdir(parents=True)
    (site / "_data" / "results" / f"{SLUG}.json").write_text(json.dumps(record))
    _log(site, runs)
    return site


def _middle_and_top(i=0):
    lo, hi = speed_verdicts(PUBLISHED)[i]["interval"]
    return (lo + hi) / 2, hi


def test_an_estimate_is_counted_inside_or_outside_the_interval_published_before_it(tmp_path):
    middle, top = _middle_and_top()
    runs = [_run("2026-11-25T00:00:00+00:00", "", {0: middle, 1: 9.0}),  # inside; far outside
            _run("2026-11-26T00:00:00+00:00", "", {0: top * 1.01, 2: "no number"}),  # outside; not
            _run("2026-11-23T00:00:00+00:00", "", {0: middle})]  # before the published run
    found = reruns.coverage(_site(tmp_path, runs))
    assert found == {SLUG: {"inside": 1, "counted": 3, "runs": 2, "uncounted_runs": 1}}
    text = reruns.coverage_text(found)
    assert f"  {SLUG}: 1 of 3 (33.3%) over 2 re-runs; 1 re-run not counted" in text
    assert text.endswith("overall: 1 of 3 (33.3%): below the goal of 90%")


def test_the_goal_is_met_at_90_percent_and_no_log_counts_nothing(tmp_path):
    middle, top = _middle_and_top()
    runs = [_run(f"2026-11-25T00:{m:02d}:00+00:00", "", {0: middle if m < 9 else top * 2})
            for m in range(10)]
    text = reruns.coverage_text(reruns.coverage(_site(tmp_path, runs)))
    assert text.endswith("overall: 9 of 10 (90.0%): at or above the goal of 90%")
    assert reruns.coverage(tmp_path / "empty") == {}
    assert reruns.coverage_text({}).endswith("overall: none counted: no re-run logged yet")


def test_each_re_run_is_measured_against_what_its_commit_published(tmp_path):
    """The site republished the same version with a narrower interval after the first re-run: the
    first counts against the interval of its own commit, read with git, the second against the
    new one."""
    wide, narrow = copy.deepcopy(PUBLISHED), copy.deepcopy(PUBLISHED)
    narrow["executed_at"] = "2026-11-27T00:00:00+00:00"
    for v in narrow["metrics"]["verdicts"][1:]:
        v["interval"] = [v["ratio"] * 0.999, v["ratio"] * 1.001]
    site = _site(tmp_path, [], record=wide)
    git(site, "init", "-q")
    git(site, "add", ".")
    git(site, "commit", "-qm", "wide")
    first = git(site, "rev-parse", "--short=12", "HEAD")
    (site / "_data" / "results" / f"{SLUG}.json").write_text(json.dumps(narrow))
    git(site, "commit", "-qam", "narrow")
    second = git(site, "rev-parse", "--short=12", "HEAD")
    ratio = speed_verdicts(wide)[0]["ratio"] * 1.01  # inside the wide interval, not the narrow
    runs = [_run("2026-11-26T00:00:00+00:00", first, {0: ratio}),
            _run("2026-11-28T00:00:00+00:00", second, {0: ratio})]
    _log(site, runs)
    found = reruns.coverage(site)[SLUG]
    assert found == {"inside": 1, "counted": 2, "runs": 2, "uncounted_runs": 0}
    before = reruns.published_before(site, SLUG, runs[0], "k", narrow)
    assert before["executed_at"] == wide["executed_at"]
    assert reruns.published_before(site, SLUG, runs[0], "another version", narrow) is None


def test_the_command_prints_it(tmp_path, capsys):
    lo = speed_verdicts(PUBLISHED)[0]["interval"][0]
    site = _site(tmp_path, [_run("2026-11-25T00:00:00+00:00", "", {0: lo})])
    assert main(["coverage", "--site", str(site)]) == 0
    out = capsys.readouterr().out
    assert f"  {SLUG}: 1 of 1 (100.0%) over 1 re-run\n" in out and "at or above the goal" in out
