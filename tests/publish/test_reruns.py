"""The log of re-runs (`make reproduce` on a machine of the published fingerprint) and the spread between
runs that the verdict box shows beside each verdict."""

from __future__ import annotations

import json

import pytest
from test_reproduce import CPUS, EPYC, OTHER, PUBLISHED, READER, SLUG, _record, _speed

from sidebyside.publish import frontpage, reruns
from sidebyside.publish.common import PublishError
from sidebyside.publish.reruns import speed_verdicts


def _ids(record):
    """The speed verdicts' ids by question."""
    return {v["question"]: v["id"] for v in speed_verdicts(record)}


def test_a_run_logs_only_where_it_speaks_for_the_published_run(tmp_path):
    site, reader = tmp_path, _record(EPYC, READER)
    assert reruns.log(site, SLUG, PUBLISHED, _record(OTHER, READER)).startswith("not logged as a re-run: the machine")
    assert reruns.log(site, SLUG, PUBLISHED, {**reader, "source_hash": "other"}).startswith(
        "not logged as a re-run: this tree runs another version")
    assert reruns.log(site, SLUG, PUBLISHED, _record(EPYC, READER, profile="smoke")).startswith(
        "not logged as a re-run: the smoke profile's sizes")
    assert reruns.log(site, SLUG, PUBLISHED, _record(EPYC, READER, cpu="unknown")).startswith(
        "not logged as a re-run: the machine")
    assert not reruns.path(site, SLUG).exists()
    assert reruns.log(site, SLUG, PUBLISHED, reader).startswith("logged as re-run 1 ")
    assert reruns.log(site, SLUG, PUBLISHED, reader).startswith("logged as re-run 2 ")
    found = reruns.read(site, SLUG)
    assert found["source_hash"] == "k" and found["fingerprint"] == {"cpu": CPUS[EPYC], "gpu": None}
    ids = _ids(reader)
    assert set(found["runs"][0]["verdicts"]) == set(ids.values())  # its speed verdicts alone, by id
    # a republished run (another run key) starts the log again
    assert reruns.log(site, SLUG, {**PUBLISHED, "source_hash": "k2"}, {**reader, "source_hash": "k2"}).startswith(
        "logged as re-run 1 ")


def test_the_spread_counts_the_published_run_and_every_re_run_and_says_where_the_answer_did_not_hold(tmp_path):
    site = tmp_path
    reruns.log(site, SLUG, PUBLISHED, _record(EPYC, READER))
    reruns.log(site, SLUG, PUBLISHED, _record(EPYC, [_speed("held", 3.1, 1.0), _speed("turned", 1.0, 1.5)]))
    spreads = reruns.spread(site, SLUG, PUBLISHED)
    ids = _ids(PUBLISHED)
    assert set(spreads) == {ids["held"], ids["turned"], ids["shrank"]}  # "gone" was never measured again
    held, turned, shrank = (spreads[ids[q]] for q in ("held", "turned", "shrank"))
    assert (held["runs"], held["held"], turned["runs"], turned["held"], shrank["runs"]) == (3, 3, 3, 2, 2)
    published = {v["question"]: v for v in PUBLISHED["metrics"]["verdicts"] if v.get("id")}
    ends = [e for r in (published["held"], *[_speed("held", 2.9, 1.0), _speed("held", 3.1, 1.0)]) for e in r["interval"]]
    assert (held["low"], held["high"]) == (min(ends), max(ends))
    assert turned["low"] < 1 < turned["high"]  # PyTorch faster in two runs, JAX in one
    said = reruns.sentence(turned)
    assert said.startswith("Between runs: 3 runs on machines of this fingerprint") and "PyTorch's time over JAX's" in said
    assert "held in 2 of them: read it as unsettled between runs" in said
    assert "held in every one" in reruns.sentence(held)
    # another version's log says nothing of this run
    assert reruns.spread(site, SLUG, {**PUBLISHED, "source_hash": "k2"}) == {}


def test_the_verdict_box_shows_the_spread_beside_the_verdict_it_concerns(tmp_path):
    site = tmp_path
    results = site / "_data" / "results"
    results.mkdir(parents=True)
    (results / f"{SLUG}.json").write_text(json.dumps(PUBLISHED))
    reruns.log(site, SLUG, PUBLISHED, _record(EPYC, READER))
    shown = frontpage.board(site, {}, set(), site)["posts"][SLUG]["runs"][0]["verdicts"]
    by_question = {w["question"]: w["reruns"] for w in shown}
    assert {w["question"] for w in shown if w["unsettled"]} == {"turned"}  # marked beside its answer
    assert by_question["turned"].endswith("held in 1 of them: read it as unsettled between runs.")
    assert by_question["held"].endswith("held in every one.") and by_question["gone"] == ""
    assert by_question["same accuracy?"] == ""  # not a speed verdict
    # a view made without the site (no log read) shows none
    assert [w["reruns"] for w in frontpage.post_view(PUBLISHED, [], None, False)["runs"][0]["verdicts"]] == [""] * 5


@pytest.mark.parametrize("content", ["{not json", json.dumps({"slug": "another", "source_hash": "k", "runs": []}),
                                     json.dumps([1, 2])])
def test_a_damaged_log_is_refused_saying_how_to_restore_it(tmp_path, content):
    where = reruns.path(tmp_path, SLUG)
    where.parent.mkdir(parents=True)
    where.write_text(content)
    with pytest.raises(PublishError, match=r"git checkout -- _data/reruns/grid-sample-parity.json\) or delete it"):
        reruns.spread(tmp_path, SLUG, PUBLISHED)


def test_a_logged_figure_that_is_no_number_is_left_out_of_the_spread(tmp_path):
    reruns.log(tmp_path, SLUG, PUBLISHED, _record(EPYC, READER))
    where = reruns.path(tmp_path, SLUG)
    found = json.loads(where.read_text())
    held = _ids(PUBLISHED)["held"]
    found["runs"].append({"verdicts": {held: {"ratio": "<script>", "interval": None, "winner": None}}})
    found["runs"].append({"verdicts": {held: {"ratio": 2.0, "interval": [1.0, "x"], "winner": None}}})
    where.write_text(json.dumps(found))
    assert reruns.spread(tmp_path, SLUG, PUBLISHED)[held]["runs"] == 2  # the published run and the good re-run


def test_a_logged_re_run_writes_each_races_spread_between_runs_for_the_next_run_on_that_kind(tmp_path):
    from sidebyside.lab import floors
    from sidebyside.run import provenance

    site = tmp_path
    said = reruns.log(site, SLUG, PUBLISHED, _record(EPYC, READER))
    assert said.endswith(f"the spread between runs of 3 races written to {site / 'params' / 'between-runs.json'}")
    kind = provenance.machine_kind({"cpu": CPUS[EPYC], "gpu": None})
    spreads = json.loads((site / "params" / "between-runs.json").read_text())[kind]
    ids = _ids(PUBLISHED)
    assert set(spreads) == {ids["held"], ids["turned"], ids["shrank"]}  # "gone" was not measured again
    # 3x then 2x with intervals of a few percent: a large spread; 3x then 2.9x: a small one
    assert spreads[ids["shrank"]]["sd"] > 0.2 > 0.05 > spreads[ids["held"]]["sd"]
    assert spreads[ids["shrank"]]["parts"] == [{"slug": SLUG, "source_hash": "k", "runs": 2,
                                                "sd": spreads[ids["shrank"]]["sd"],
                                                "measured_at": "2026-11-24T00:00:00+00:00"}]
    assert floors.between_runs(kind, site / "params" / "between-runs.json")[ids["shrank"]] == {
        "sd": spreads[ids["shrank"]]["sd"], "runs": 2}
    # a run widened by a spread is read back at its width over processes alone
    widened = _record(EPYC, [_speed("held", 3.0, 1.0)])
    entry = reruns.speed_verdicts(widened)[0]
    plain_se = reruns._within_se(entry, 3)
    lo, hi = entry["interval"]
    wide = {**entry, "between_sd": 0.1, "interval": [lo * 0.8, hi * 1.25]}
    assert reruns._within_se(wide, 3) < reruns._within_se({**wide, "between_sd": 0.0}, 3)
    assert plain_se > 0 and reruns._within_se({**entry, "interval": None}, 3) is None
