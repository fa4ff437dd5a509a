"""The quiet check is quiet on a quiet machine (issue 59, item 5): on a simulated idle machine of a
shared host (the readings of /proc monkeypatched: a few daemons' ticks, a little steal, a run queue
of one or two, and a calibration whose speed swings for seconds at a time, as a shared host's does
with nothing else running) at most 5% of the timed sections are flagged; a busy one is flagged in
every window, saying what was measured; and a committed baseline of another fingerprint, or of the
same name on a host whose calibration differs, flags nothing."""

from __future__ import annotations

import json
import os
import random

import pytest

from sidebyside.lab import load, quiet
from sidebyside.run import context, provenance

HZ = 100  # clock ticks a second, as /proc/stat counts them
OWN = os.getpid()


class Machine:
    """A 2-CPU machine whose /proc readings are made up: this process computes on one core through each
    timed section of ``section_s``; ``others`` (pid -> (name, share of a core)) and ``steal`` (a share
    of the machine) take the rest; ``swing`` makes one calibration in five up to that much slower (a
    shared host's speed, with nothing here to see)."""

    def __init__(self, *, others=None, steal=0.0, queue=(1, 2), swing=0.8, section_s=0.3, seed=59):
        self.rng = random.Random(seed)
        self.others, self.steal, self.queue, self.swing, self.section_s = others or {}, steal, queue, swing, section_s
        self.t, self.busy_ticks, self.steal_ticks = 0.0, 0, 0
        self.ticks = {OWN: 0, **{pid: 0 for pid in self.others}}

    def calibrate(self, gpu=None):
        slow = 1 + (self.rng.uniform(0.1, self.swing) if self.rng.random() < 0.2 else self.rng.uniform(0, 0.05))
        return {"compute_s": 0.0029 * slow, "copy_s": 0.0020 * slow}

    def snapshot(self):
        return {"t": self.t, "cpus": 2, "busy_ticks": self.busy_ticks, "steal_ticks": self.steal_ticks,
                "run_queue": self.rng.choice(self.queue), "load1": 1.0,
                "processes": {OWN: ("python", 1, self.ticks[OWN]),
                              **{pid: (name, 1, self.ticks[pid]) for pid, (name, _) in self.others.items()}}}

    def run_section(self):
        """The section's time passes: this process's core, the others' and the hypervisor's shares."""
        ticks = round(self.section_s * HZ)
        self.ticks[OWN] += ticks
        used = ticks
        for pid, (_, share) in self.others.items():
            taken = round(self.section_s * HZ * share * self.rng.uniform(0.5, 1.5))
            self.ticks[pid] += taken
            used += taken
        stolen = round(2 * self.section_s * HZ * self.steal * self.rng.uniform(0.5, 1.5))
        daemons = self.rng.choice([0, 0, 0, 1, 2])  # sshd, the journal: untracked ticks
        self.steal_ticks += stolen
        self.busy_ticks += used + stolen + daemons
        self.t += self.section_s

    def monitor(self, **kwargs):
        return quiet.Monitor(judged=True, calibrate=self.calibrate, snapshot=self.snapshot,
                             cpu_between=lambda a, b: load.cpu_between(a, b, own=OWN, ticks_per_s=HZ),
                             gpu=lambda: None, **kwargs)


def _share_flagged(machine, monitor, sections=200):
    flagged = 0
    for i in range(sections):
        with monitor.section(f"torch/eager, jax/jit #{i}") as found:
            machine.run_section()
        flagged += bool(found)
    return flagged / sections


IDLE = {"others": {}, "steal": 0.01}


@pytest.mark.parametrize("baseline", [None, {"compute_s": 0.0029, "copy_s": 0.0020}, {"compute_s": 0.0015}],
                         ids=["no baseline", "this host's", "a faster host's of the same fingerprint"])
def test_an_idle_machine_whose_speed_swings_flags_at_most_5_percent_of_sections(baseline):
    machine = Machine(**IDLE)
    m = machine.monitor(baseline=baseline, kind="K")
    assert _share_flagged(machine, m) <= 0.05
    record = m.record()
    assert record["worst"]["calibration_slowdown"] > 0.1  # the swings were there, and recorded
    assert all("slowdown" in s and s["steal_share"] is not None for s in record["sections"])
    if baseline and "copy_s" not in baseline:  # a host the baseline's does not describe: a figure, not load
        assert record["quiet_level_vs_baseline"]["compute_s"] > 0.8


def test_a_busy_machine_is_flagged_with_what_was_measured():
    machine = Machine(others={4242: ("burner", 0.9)}, steal=0.08, queue=(3, 4))
    m = machine.monitor(baseline={"compute_s": 0.0029, "copy_s": 0.0020}, kind="K")
    share = _share_flagged(machine, m, sections=40)
    assert share >= 0.45  # every window of half a second (two sections of 0.3 s) is flagged
    finding = m.findings[0]
    assert "of the machine's 2 CPUs" in finding and "burner (pid 4242)" in finding
    assert "hypervisor steal" in finding and "run queue 3" in finding and "load average 1.00" in finding
    assert m.record()["status"].startswith("busy") and m.record()["worst"]["steal_share"] > 0.03


def test_steal_alone_is_load_and_is_said():
    machine = Machine(steal=0.3)
    m = machine.monitor(kind="K")
    assert _share_flagged(machine, m, sections=20) >= 0.45
    assert "hypervisor steal" in m.findings[0] and m.record()["worst"]["steal_share"] >= 0.2


@pytest.fixture
def run_here(monkeypatch, tmp_path):
    """The run context of a cpu run and a fresh monitor, with the committed baselines in ``tmp_path``."""
    for name in context.ENV.values():
        monkeypatch.delenv(name, raising=False)
    for name, value in context.RunContext(profile="cpu").env().items():
        monkeypatch.setenv(name, value)
    monkeypatch.setattr(quiet, "_MONITOR", None)
    monkeypatch.setattr(provenance, "_MACHINE", None)
    path = tmp_path / "quiet-baselines.json"
    monkeypatch.setattr(quiet, "baselines_file", lambda: path)
    yield path
    quiet._MONITOR = None


def test_a_baseline_of_another_fingerprint_flags_nothing(run_here, monkeypatch):
    this = provenance.cpu_fingerprint()
    other = {**this, "family": (this["family"] or 0) + 1, "l3_kib": 16384}
    kind_of_other = provenance.machine_kind({"cpu": other})
    # Twice as fast as anything here, committed from another host: of another fingerprint, and of the old name.
    for kind in (kind_of_other, "AMD EPYC (2 cores)", provenance.cpu_name()):
        quiet.save_baseline(kind, {"compute_s": 1e-6, "copy_s": 1e-6}, run_here, fingerprint=other)
    m = quiet.monitor()
    assert m.kind == quiet.machine_kind() != kind_of_other and m.baseline is None
    machine = Machine(**IDLE)
    monkeypatch.setattr(m, "_calibrate", machine.calibrate)
    monkeypatch.setattr(m, "_snapshot", machine.snapshot)
    monkeypatch.setattr(m, "_cpu_between", lambda a, b: load.cpu_between(a, b, own=OWN, ticks_per_s=HZ))
    monkeypatch.setattr(m, "_gpu", lambda: None)
    assert _share_flagged(machine, m, sections=50) == 0
    record = m.record()
    assert record["baseline"] == "no baseline for this fingerprint" and record["committed_baseline"] is None
    assert provenance._MACHINE["baseline"] == "no baseline for this fingerprint"


def test_a_baseline_of_this_fingerprint_is_found_by_the_run_and_said_beside_measured_load(run_here):
    quiet.save_baseline(quiet.machine_kind(), {"compute_s": 0.001}, run_here,
                        fingerprint=provenance.cpu_fingerprint())
    assert json.loads(run_here.read_text())[quiet.machine_kind()]["fingerprint"] == provenance.cpu_fingerprint()
    m = quiet.monitor()
    assert m.baseline == {"compute_s": 0.001} and m.record()["baseline"] == "the quiet baseline of this fingerprint"
