"""`make reproduce`: the reader's speed verdicts against the published ones, on synthetic
records: reproduced (same winner, overlapping 95% intervals), a different winner, the same
winner with intervals apart, and other hardware (reported, not failed): machines compared by
fingerprint, the fields that differ named, and a record without one "unknown"; the command runs
into a scratch site and never writes the published one."""

from __future__ import annotations

import json

import pytest

from sidebyside.lab import framing, verdict
from sidebyside.publish import reproduce as rep
from sidebyside.publish import reruns
from sidebyside.publish.common import PublishError

SLUG = "grid-sample-parity"  # a real notebook, so that discovery finds it; nothing of it runs here


def _speed(question, torch_s, jax_s, spread=0.02):
    """A speed verdict over three processes whose medians move by ``spread`` (the two sides apart)."""
    t = {"median_s": torch_s, "processes_s": [torch_s * (1 + f) for f in (-spread, 0, spread)]}
    j = {"median_s": jax_s, "processes_s": [jax_s * (1 + f) for f in (0, spread, -spread)]}
    return verdict.speed(t, j, question=question, subject_tool="eager", other_tool="jit").to_dict()


ZEN3 = {"vendor": "AuthenticAMD", "family": 25, "model": 17, "stepping": 1, "model_name": "AMD EPYC",
        "vector": ["avx2", "avx512f", "avx512_bf16"], "l2_kib": 1024, "l3_kib": 32768, "clock_mhz": 2600}
ZEN2 = {**ZEN3, "family": 23, "model": 49, "vector": ["avx2"], "l2_kib": 512, "l3_kib": 16384}
EPYC, OTHER = "a 2-core CPU", "a 64-core CPU"
CPUS = {EPYC: ZEN3, OTHER: ZEN2}


def _record(device, verdicts, profile="cpu", cpu=None):
    """A record measured on ``device``, whose fingerprint is ``cpu`` (default: that of ``device``;
    "unknown": none, as records written before fingerprints)."""
    seeds = verdict.seeds([90.0, 90.1], [90.0, 90.2], question="same accuracy?").to_dict()  # not a speed verdict
    cpu = CPUS.get(device) if cpu is None else cpu
    provenance = {"device": device, "device_kind": "cpu",
                  **({"fingerprint": {"cpu": cpu, "gpu": None}} if cpu != "unknown" else {})}
    return {"slug": SLUG, "profile": profile, "executed_at": "2026-11-24T00:00:00+00:00", "source_hash": "k",
            "provenance": provenance, "metrics": {"verdicts": [seeds, *verdicts]}}


PUBLISHED = _record(EPYC, [
    _speed("held", 3.0, 1.0),         # JAX 3x
    _speed("turned", 1.0, 1.5),       # PyTorch 1.5x
    _speed("shrank", 3.0, 1.0),       # JAX 3x
    _speed("gone", 1.0, 1.0),         # within noise, absent from the reader's run
])
READER = [
    _speed("held", 2.9, 1.0),         # JAX 2.9x: the intervals overlap
    _speed("turned", 1.5, 1.0),       # JAX now: a different winner
    _speed("shrank", 2.0, 1.0),       # JAX 2x: same winner, far outside
]


def test_each_verdict_is_judged_and_only_speed_verdicts_count():
    rows = rep.compare(PUBLISHED, _record(EPYC, READER))
    assert [r.question for r in rows] == ["held", "turned", "shrank", "gone"]
    outcomes = {r.question: r.outcome for r in rows}
    assert outcomes == {"held": rep.REPRODUCES, "turned": rep.OTHER_WINNER, "shrank": rep.OUTSIDE,
                        "gone": rep.MISSING}
    held = rows[0]
    assert held.combined[0] <= held.combined[1] and rows[2].combined is None
    assert [r.fails for r in rows] == [False, True, True, False]  # same hardware: a miss fails


def test_a_busier_reader_whose_interval_widens_still_reproduces():
    # Published JAX 3x with a tight interval; the reader's 2.5x with a wide one of its own (a loaded
    # machine) reproduces, the same 2.5x measured tightly does not.
    wide = rep.compare(_record(EPYC, [_speed("q", 3.0, 1.0)]), _record(EPYC, [_speed("q", 2.5, 1.0, spread=0.1)]))
    tight = rep.compare(_record(EPYC, [_speed("q", 3.0, 1.0)]), _record(EPYC, [_speed("q", 2.5, 1.0, spread=0.01)]))
    assert wide[0].outcome == rep.REPRODUCES and tight[0].outcome == rep.OUTSIDE


def test_the_table_shows_both_figures_and_both_machines_and_the_summary_counts():
    rows = rep.compare(PUBLISHED, _record(EPYC, READER))
    text = rep.table(rows)
    assert "published: JAX (jit) 3× faster" in text and f"on {EPYC}" in text
    assert "yours:     JAX (jit) 2.9× faster" in text
    assert "does NOT reproduce: a different winner (opposite winners)" in text
    assert "does NOT reproduce: the same winner, but the two 95% intervals do not overlap" in text
    assert "not measured in your run" in text and "within noise" in text
    line = rep.summary(SLUG, rows)
    assert line == (f"{SLUG}: 1 of 4 speed verdicts reproduce on the same hardware ({EPYC}, the same fingerprint); "
                    "2 contradicted by your run: FAILED")
    assert rep.machines(rows) == "machines: the same fingerprint as the published run"


def test_an_answer_only_one_run_decided_is_consistent_not_failed_and_says_which_run():
    """JAX 1.13x faster (an interval off 1) against a published "within noise" whose interval holds it: not the
    same answer, but no contradiction either, so it is counted apart and does not fail; decided in one run only
    with the intervals apart, or opposite winners, still fail."""
    published = _record(EPYC, [_speed("near", 1.0, 1.0, spread=0.1)])
    decided = _record(EPYC, [_speed("near", 1.13, 1.0)])
    rows = rep.compare(published, decided)
    assert rows[0].outcome == rep.CONSISTENT and rows[0].consistent and not rows[0].fails
    assert rows[0].combined is not None and not rows[0].reproduces
    assert ("consistent, not the same answer: decided in one run only (the published run finds no winner) and the "
            "two 95% intervals overlap, so neither run contradicts the other") in rep.table(rows)
    assert rep.summary(SLUG, rows) == (
        f"{SLUG}: 0 of 1 speed verdicts reproduce on the same hardware ({EPYC}, the same fingerprint); 1 decided in "
        "one run only, with overlapping intervals (consistent, not failed)")
    undecided_here = rep.compare(decided, published)
    assert undecided_here[0].outcome == rep.CONSISTENT
    assert "(your run finds no winner)" in rep.table(undecided_here)
    # the published run decided, the reader's holds 1 but lies wholly beyond the published interval: a contradiction
    apart = rep.compare(_record(EPYC, [_speed("near", 1.5, 1.0)]), _record(EPYC, [_speed("near", 1.0, 1.0, spread=0.03)]))
    assert apart[0].combined is None and apart[0].outcome == rep.OTHER_WINNER and apart[0].fails
    assert ("does NOT reproduce: a different winner (decided in one run only: your run finds no winner; the two 95% "
            "intervals do not overlap)") in rep.table(apart)
    back = rep.compare(decided, _record(EPYC, [_speed("near", 0.5, 1.0)]))  # PyTorch 2x: no overlap, no tie either
    assert back[0].fails and "(opposite winners)" in rep.table(back)
    assert rep.summary(SLUG, back).endswith("1 contradicted by your run: FAILED")


def test_other_hardware_is_reported_not_failed():
    rows = rep.compare(PUBLISHED, _record(OTHER, READER))
    assert [r.outcome for r in rows][:3] == [rep.REPRODUCES, rep.OTHER_WINNER, rep.OUTSIDE]
    assert not any(r.fails for r in rows)
    assert "(other hardware: reported, not failed)" in rep.table(rows)
    assert "on other hardware" in rep.summary(SLUG, rows) and "FAILED" not in rep.summary(SLUG, rows)


def test_machines_of_one_name_and_another_fingerprint_are_not_alike_and_the_fields_are_named():
    # The same name, "a 2-core CPU", on a host of another generation: compared like with unlike.
    rows = rep.compare(PUBLISHED, _record(EPYC, READER, cpu=ZEN2))
    assert not any(r.fails for r in rows) and not rows[0].same_hardware
    said = rep.machines(rows)
    assert said.startswith("machines: yours differs from the published one: ")
    assert "CPU family: published 25, yours 23" in said and "CPU model: published 17, yours 49" in said
    assert "vector extensions: published avx2, avx512f, avx512_bf16, yours avx2" in said
    assert "L3 cache (KiB): published 32768, yours 16384" in said and "nominal clock" not in said
    assert "5 fields of the fingerprint differ" in rep.summary(SLUG, rows)
    # Another thread count or core count is no part of a fingerprint: a host of ZEN3 is the same.
    assert reruns.differences(PUBLISHED, _record(OTHER, READER, cpu=dict(ZEN3))) == []


def test_a_record_without_a_fingerprint_is_unknown_and_compared_by_name_as_before():
    old = _record(EPYC, PUBLISHED["metrics"]["verdicts"][1:], cpu="unknown")  # written before fingerprints
    rows = rep.compare(old, _record(EPYC, READER))
    assert reruns.differences(old, _record(EPYC, READER)) is None and [r.fails for r in rows] == [False, True, True, False]
    assert "no fingerprint (unknown)" in rep.machines(rows)
    assert f"on the same hardware ({EPYC}, the same name; fingerprint unknown)" in rep.summary(SLUG, rows)
    elsewhere = rep.compare(old, _record(OTHER, READER, cpu="unknown"))
    assert not any(r.fails for r in elsewhere) and "fingerprint unknown), reported, not failed" in rep.summary(
        SLUG, elsewhere)


def test_a_gpu_run_compares_the_gpu_s_model_memory_clocks_and_driver():
    h100 = {"model": "NVIDIA H100 80GB HBM3", "memory_mib": 81559, "sm_clock_mhz": 1980, "memory_clock_mhz": 2619,
            "driver": "550.54.15"}
    published, reader = (_record(EPYC, [], profile="gpu"), _record(EPYC, [], profile="gpu"))
    for record, gpu in ((published, h100), (reader, {**h100, "driver": "570.86.10"})):
        record["provenance"].update(device_kind="gpu", fingerprint={"cpu": ZEN3, "gpu": gpu})
    assert reruns.differences(published, reader) == ["NVIDIA driver: published 550.54.15, yours 570.86.10"]


@pytest.mark.parametrize("reader_device, code", [(EPYC, 1), (OTHER, 0)])
def test_reproduce_runs_into_a_scratch_site_and_exits_by_the_rows(tmp_path, monkeypatch, capsys, reader_device,
                                                                   code):
    site, scratch = tmp_path / "site", tmp_path / "scratch"
    published = site / "_data" / "results" / f"{SLUG}.json"
    published.parent.mkdir(parents=True)
    published.write_text(json.dumps(PUBLISHED))
    before = published.read_bytes()
    calls = []

    def fake_run(**kwargs):  # the publisher's execute, into the site it is given
        calls.append(kwargs)
        out = kwargs["site"] / "_data" / "results" / f"{SLUG}.json"
        out.parent.mkdir(parents=True)
        out.write_text(json.dumps(_record(reader_device, READER)))
        return 0

    monkeypatch.setattr("sidebyside.publish.pipeline.run", fake_run)
    assert rep.reproduce(only=SLUG, site=site, scratch=scratch) == code
    (call,) = calls
    assert call["site"] == scratch / SLUG and call["force"] and call["profile"] == "cpu" and not call["aa"]
    assert published.read_bytes() == before  # the published record is only read
    out = capsys.readouterr().out
    lines = out.rstrip().splitlines()
    assert "published: JAX (jit) 3× faster" in out and lines[-2].startswith(f"{SLUG}: 1 of 4")
    # a run on a machine of the published fingerprint joins the log of re-runs; another machine's does not
    logged = site / "_data" / "reruns" / f"{SLUG}.json"
    assert logged.is_file() == (reader_device == EPYC)
    assert lines[-1].startswith(f"{SLUG}: logged as re-run 1" if reader_device == EPYC else
                                f"{SLUG}: not logged as a re-run: the machine's fingerprint")


def test_reproduce_needs_a_published_post(tmp_path):
    with pytest.raises(PublishError, match="not published"):
        rep.reproduce(only=SLUG, site=tmp_path, scratch=tmp_path / "scratch")
    with pytest.raises(PublishError, match="ONLY=<slug>"):
        rep.reproduce(only="", site=tmp_path)


def test_a_reader_s_run_at_other_sizes_than_the_post_s_is_compared_with_nothing(monkeypatch, capsys):
    from sidebyside.run import colab, context

    monkeypatch.setattr(colab, "published", lambda slug, repository: PUBLISHED)
    monkeypatch.setenv(context.ENV["profile"], "smoke")
    said = rep.in_notebook(SLUG, _record(EPYC, READER), "owner/name@main")
    assert 'nothing is compared: set PROFILE = "cpu"' in said and "published:" not in said
    monkeypatch.setenv(context.ENV["profile"], "cpu")
    assert "held\n  published:" in rep.in_notebook(SLUG, _record(EPYC, READER), "o/n@main")


def _sized(question, race, batch, torch_s=3.0):
    """A speed verdict of the race ``race`` at ``batch``, JAX 3x faster by default."""
    t = {"median_s": torch_s, "processes_s": [torch_s * (1 + f) for f in (-0.02, 0, 0.02)]}
    j = {"median_s": 1.0, "processes_s": [1.0 * (1 + f) for f in (0, 0.02, -0.02)]}
    scale = framing.scale_of(parameters=1000, input="32×32", batch=batch, precision="float32",
                                     device="a CPU")
    return verdict.speed(t, j, question=question, subject_tool="eager", other_tool="jit", scale=scale,
                         race=race).to_dict()


def test_verdicts_are_matched_by_their_stable_id_never_by_their_text():
    """The same race reworded is matched (its race's name and size are its id); the same words at another
    size (a smoke run against the full-size post) are not, and neither is a record without ids."""
    published = _record(EPYC, [_sized("Which is faster at batch 32?", "model/train/best", 32)])
    reworded = rep.compare(published, _record(EPYC, [_sized("Which framework is faster, batch 32?",
                                                            "model/train/best", 32)]))
    assert reworded[0].outcome == rep.REPRODUCES
    smaller = rep.compare(published, _record(EPYC, [_sized("Which is faster at batch 32?", "model/train/best", 4)]))
    assert smaller[0].outcome == rep.MISSING and smaller[0].reader is None
    other_machine = _sized("Which is faster at batch 32?", "model/train/best", 32)
    assert other_machine["id"] == published["metrics"]["verdicts"][1]["id"]  # the device is not part of the id
    old = {**published, "metrics": {"verdicts": [{k: v for k, v in published["metrics"]["verdicts"][1].items()
                                                  if k != "id"}]}}
    rows = rep.compare(old, published)
    assert rows[0].outcome == rep.MISSING and "predates verdict ids" in rep.table(rows)
