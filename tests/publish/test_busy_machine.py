"""The publisher's side of the quiet-machine check (issue 37): a saved record whose machine was
busy is not published under the cpu and gpu profiles unless ALLOW_BUSY, and then every speed
verdict of the record says so, even one the notebook made before the first busy section."""

from __future__ import annotations

import pytest

from sidebyside.lab import verdict
from sidebyside.publish.common import PublishError
from sidebyside.publish.running import check_machine

BUSY = "Measured on a busy machine (published with ALLOW_BUSY): other processes used up to 64% of its CPU time."


def _record(findings):
    early = verdict.speed({"median_s": 1.0}, {"median_s": 2.0}, question="early").to_dict()
    late = verdict.speed({"median_s": 1.0}, {"median_s": 2.0}, question="late", caveat=BUSY).to_dict()
    seeds = verdict.seeds([90.0, 90.1], [90.0, 90.2], question="accuracy").to_dict()
    return {"provenance": {"machine": {"findings": findings, "caveat": BUSY if findings else ""}},
            "metrics": {"verdicts": [early, late, seeds]}}


def test_a_busy_record_is_refused_with_its_findings_unless_allowed():
    record = _record(["other processes used 64% of the machine's 2 CPUs"])
    with pytest.raises(PublishError, match="64% of the machine's 2 CPUs.*ALLOW_BUSY=1"):
        check_machine(record, "slug", "cpu", allow_busy=False)
    assert check_machine(record, "slug", "smoke", allow_busy=False) == []  # smoke never refuses
    assert check_machine(_record([]), "slug", "gpu", allow_busy=False) == []  # quiet


def test_allowed_every_speed_verdict_carries_the_busy_caveat_once():
    record = _record(["other processes used 64% of the machine's 2 CPUs"])
    assert check_machine(record, "slug", "cpu", allow_busy=True)
    early, late, seeds = record["metrics"]["verdicts"]
    assert early["caveat"] == BUSY and late["caveat"] == BUSY  # added where missing, never twice
    assert seeds["caveat"] == ""  # not a speed verdict
