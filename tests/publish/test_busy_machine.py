"""The publisher's side of the quiet-machine check: a saved record whose machine was busy is
published like any other, its findings said once by the publisher; each speed verdict already
carries the findings of the measurement it came from (sidebyside.lab.verdict.speed)."""

from __future__ import annotations

from sidebyside.lab import verdict
from sidebyside.publish.running import check_machine

FINDING = "other processes used 64% of the machine's 2 CPUs (limit 10%)"


def _entry(median, busy):
    return {"median_s": median, "processes_s": [median * f for f in (0.98, 1.0, 1.02)], "busy": busy}


def test_a_busy_record_is_never_refused_and_its_findings_are_said(capsys):
    busy = verdict.speed(_entry(1.0, [FINDING]), _entry(2.0, [FINDING]), question="busy").to_dict()
    record = {"provenance": {"machine": {"findings": [FINDING]}}, "metrics": {"verdicts": [busy]}}
    assert check_machine(record, "slug") == [FINDING]
    assert "64% of the machine's 2 CPUs" in capsys.readouterr().out
    assert FINDING in busy["caveat"] and busy["busy"] == [FINDING]  # beside the verdict it touched, once
    assert busy["sentence"].count(FINDING) == 1
    assert check_machine({"provenance": {"machine": {"findings": []}}}, "slug") == []


def test_a_quiet_verdict_says_nothing_about_load():
    quiet = verdict.speed(_entry(1.0, []), _entry(2.0, []), question="quiet")
    assert quiet.busy == [] and "busy" not in quiet.sentence
