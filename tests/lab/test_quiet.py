"""The quiet-machine check (issue 37): the rules on synthetic readings, the /proc reading on a
synthetic /proc, and the harness against a real busy machine (a subprocess that burns a core
during a timed section): the check records and never refuses; the timings it bracketed carry
its findings, with their figures, to every speed verdict made from them.

Nothing here depends on the machine being quiet: the load is provoked, and the rules are
judged on synthetic figures."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from sidebyside.lab import ladders, load, quiet, timing, verdict
from sidebyside.run import context, provenance

# ----------------------------------------------------------------------------- the rules, synthetic


def test_a_calibration_s_slowdowns_are_figures_against_the_run_and_the_baseline():
    slow = quiet.slowdowns({"compute_s": 1.3, "copy_s": 2.0}, {"compute_s": 1.0, "copy_s": 2.0}, {"copy_s": 1.6})
    assert slow["compute_s"]["run"] == pytest.approx(0.3) and slow["compute_s"]["baseline"] is None
    assert slow["copy_s"]["run"] == pytest.approx(0.0) and slow["copy_s"]["baseline"] == pytest.approx(0.25)


def test_other_cpu_share_over_the_limit_names_the_processes_and_says_what_was_measured():
    reading = {"wall_s": 2.0, "cpus": 2, "other_cpu_s": 1.6, "other_cpu_share": 0.4, "steal_share": 0.05,
               "run_queue": [3, 4], "load_average": [0.5, 1.9],
               "others": [{"pid": 4242, "name": "burner", "cpu_s": 1.5}, {"pid": 9, "name": "sshd", "cpu_s": 0.01}]}
    (found,) = quiet.cpu_findings(reading, slow={"compute_s": {"run": 0.3, "baseline": None}})
    assert "40% of the machine's 2 CPUs" in found and "burner (pid 4242) 1.50 s" in found
    assert "sshd" not in found  # a process that used under 5% of a core is not a cause
    assert "hypervisor steal 5% of the CPU time" in found and "run queue 3–4 runnable" in found
    assert "load average 0.50 then 1.90" in found
    assert "the one-thread compute loop ran 30% slower than its quiet level in this run" in found
    assert quiet.cpu_findings({**reading, "other_cpu_share": 0.05}) == []


def test_gpu_findings_name_other_visible_processes_only():
    listed = [{"pid": 1, "name": "me", "memory_mib": 900.0}, {"pid": 7, "name": "trainer", "memory_mib": 30000.0},
              {"pid": 99, "name": "elsewhere", "memory_mib": 10.0}]
    (found,) = quiet.gpu_findings(listed, mine={1}, visible={1, 7})
    assert "trainer (pid 7, 30000 MiB)" in found and "elsewhere" not in found and "me " not in found
    assert quiet.gpu_findings(listed[:1], mine={1}, visible={1}) == []


def test_gpu_processes_reads_nvidia_smi_and_is_none_without_it():
    class Done:
        returncode, stdout = 0, "123, python, 2048\n456, /usr/bin/other, [N/A]\n"

    got = load.gpu_processes(run=lambda *a, **k: Done())
    assert got == [{"pid": 123, "name": "python", "memory_mib": 2048.0},
                   {"pid": 456, "name": "/usr/bin/other", "memory_mib": None}]

    def missing(*a, **k):
        raise FileNotFoundError("nvidia-smi")

    assert load.gpu_processes(run=missing) is None


def _proc(root, cpu_ticks, processes, load="0.50 0.40 0.30 1/100 999", steal=0, running=None):
    root.mkdir(exist_ok=True)
    (root / "stat").write_text(f"cpu  {cpu_ticks} 0 0 1000 0 0 0 {steal} 0 0\ncpu0 1 0 0 1 0 0 0 0 0 0\n"
                               "cpu1 1 0 0 1 0 0 0 0 0 0\n"
                               + (f"procs_running {running}\nprocs_blocked 0\n" if running is not None else ""))
    (root / "loadavg").write_text(load + "\n")
    for pid, (name, ppid, ticks) in processes.items():
        (root / str(pid)).mkdir(exist_ok=True)
        (root / str(pid) / "stat").write_text(f"{pid} ({name}) R {ppid} 0 0 0 0 0 0 0 0 0 {ticks} 0 0 0 20 0\n")


def test_cpu_between_counts_other_processes_not_this_one_nor_its_children(tmp_path):
    clock = iter([10.0, 12.0])
    # 100 is this process, 101 its child (a data loader, say), 200 and 300 others; a name with a ") " in it.
    _proc(tmp_path, 1000, {100: ("python", 1, 0), 101: ("worker", 100, 0), 200: ("a (b) c", 1, 0), 300: ("idle", 1, 5)})
    start = load.snapshot(tmp_path, clock=lambda: next(clock))
    _proc(tmp_path, 1400, {100: ("python", 1, 200), 101: ("worker", 100, 50), 200: ("a (b) c", 1, 150),
                           300: ("idle", 1, 5)}, load="1.90 0.40 0.30 3/100 999")
    end = load.snapshot(tmp_path, clock=lambda: next(clock))
    reading = load.cpu_between(start, end, own=100, ticks_per_s=100)
    # 4 CPU-s on the cores, 2.5 of them this process and its child: 1.5 CPU-s by others over 2 s on 2 CPUs
    assert reading["cpus"] == 2 and reading["wall_s"] == pytest.approx(2.0)
    assert reading["other_cpu_s"] == pytest.approx(1.5) and reading["other_cpu_share"] == pytest.approx(0.375)
    assert reading["others"] == [{"pid": 200, "name": "a (b) c", "cpu_s": 1.5}]
    assert reading["load_average"] == [0.5, 1.9]
    assert reading["run_queue"] == [1, 3] and reading["steal_s"] == 0.0  # from /proc/loadavg without procs_running


def test_a_worker_started_or_waited_for_inside_the_section_is_this_process_s_work(tmp_path):
    clock = iter([0.0, 1.0])
    _proc(tmp_path, 1000, {100: ("python", 1, 0)})
    start = load.snapshot(tmp_path, clock=lambda: next(clock))
    # 150 ticks on the cores: 60 this process's, 80 a worker it started meanwhile, 10 someone else's.
    _proc(tmp_path, 1150, {100: ("python", 1, 60), 102: ("python", 100, 80)})
    reading = load.cpu_between(start, load.snapshot(tmp_path, clock=lambda: next(clock)), own=100,
                                ticks_per_s=100)
    assert reading["other_cpu_s"] == pytest.approx(0.1) and reading["others"] == []
    # A child that ended and was waited for: its time is in the parent's cutime (the 14th field after the name).
    (tmp_path / "100" / "stat").write_text("100 (python) S 1 0 0 0 0 0 0 0 0 0 60 0 80 0 20 0\n")
    assert load.snapshot(tmp_path)["processes"][100] == ("python", 1, 140)


def test_steal_and_the_run_queue_are_read_from_proc_stat(tmp_path):
    clock = iter([0.0, 1.0])
    _proc(tmp_path, 1000, {100: ("python", 1, 0)}, steal=50, running=2)
    start = load.snapshot(tmp_path, clock=lambda: next(clock))
    _proc(tmp_path, 1080, {100: ("python", 1, 0)}, steal=90, running=5)  # 40 of the 120 busy ticks stolen
    reading = load.cpu_between(start, load.snapshot(tmp_path, clock=lambda: next(clock)), own=100,
                                ticks_per_s=100)
    assert reading["steal_s"] == pytest.approx(0.4) and reading["steal_share"] == pytest.approx(0.2)
    assert reading["other_cpu_share"] == pytest.approx(0.6)  # steal is inside the other processes' share
    assert reading["run_queue"] == [2, 5]


# ----------------------------------------------------------------------------- the monitor, synthetic


def _synthetic_monitor(calibrations, share=0.0, **kwargs):
    """A monitor whose calibrations come from ``calibrations`` in turn and whose load reading is ``share``."""
    feed = iter(calibrations)
    reading = {"wall_s": 1.0, "cpus": 2, "other_cpu_s": 2 * share, "other_cpu_share": share, "others": [],
               "load_average": [0.1, 0.1]}
    return quiet.Monitor(calibrate=lambda gpu=None: {"compute_s": next(feed)},
                         snapshot=lambda: {"processes": {}}, cpu_between=lambda a, b: dict(reading),
                         gpu=lambda: None, **kwargs)


def test_a_drifting_calibration_is_recorded_never_flagged_and_never_refused():
    m = _synthetic_monitor([1.0, 1.0, 1.02, 1.4], judged=True)
    with m.section("torch/eager, jax/jit") as found:
        pass
    assert found == [] and not m.busy() and m.record()["status"] == "quiet"
    with m.section("torch/compile, jax/jit") as found:  # a host's speed swings: no load was measured
        pass
    assert found == [] and not m.busy()
    record = m.record()
    assert record["sections"][-1]["slowdown"]["compute_s"]["run"] == pytest.approx(0.4)
    assert record["worst"]["calibration_slowdown"] == pytest.approx(0.4)
    assert record["baseline"] == quiet.NO_BASELINE == "no baseline for this fingerprint"


def test_a_busy_section_says_so_with_the_figure():
    m = _synthetic_monitor([1.0, 1.0, 1.0, 1.4], share=0.45, judged=True)
    with m.section("a") as found:
        pass
    assert any("45%" in f for f in found) and m.record()["status"].startswith("busy")
    with m.section("b") as found:
        pass
    assert "compute loop ran 40% slower than its quiet level in this run" in found[0]  # said beside the load


def test_on_a_gpu_the_calibration_names_the_gpu_and_another_process_on_it_is_busy():
    calibrated_for = []

    def calibrate(gpu=None):
        calibrated_for.append(gpu)
        return {"compute_s": 1.0, "gpu_matmul_s": 1.0}

    m = quiet.Monitor(judged=True, calibrate=calibrate, gpu=lambda: "torch",
                      snapshot=lambda: {"processes": {7: ("trainer", 1, 0)}},
                      cpu_between=lambda a, b: {"wall_s": 1.0, "cpus": 2, "other_cpu_s": 0.0, "other_cpu_share": 0.0,
                                                "others": [], "load_average": [0.0, 0.0]},
                      gpu_processes=lambda: [{"pid": 7, "name": "trainer", "memory_mib": 500.0}])
    with m.section("torch/compile, jax/jit") as found:
        pass
    assert any("other processes computed on the GPU: trainer (pid 7" in f for f in found)
    assert calibrated_for == ["torch", "torch"]
    assert m.sections[-1]["calibration"]["before"]["gpu_matmul_s"] == 1.0


def test_the_gpu_is_calibrated_only_where_the_process_started_a_gpu_runtime(monkeypatch):
    import types

    monkeypatch.delitem(sys.modules, "jax._src.xla_bridge", raising=False)
    cuda = types.SimpleNamespace(is_initialized=lambda: False)
    monkeypatch.setitem(sys.modules, "torch", types.SimpleNamespace(cuda=cuda))
    assert quiet._gpu_framework() is None  # CUDA present but never started: no GPU calibration
    cuda.is_initialized = lambda: True
    assert quiet._gpu_framework() == "torch"
    monkeypatch.delitem(sys.modules, "torch")
    monkeypatch.setitem(sys.modules, "jax._src.xla_bridge", types.SimpleNamespace(_backends={"cuda": object()}))
    assert quiet._gpu_framework() == "jax"


# ----------------------------------------------------------------------------- a real busy machine


@pytest.fixture
def run_under(monkeypatch):
    """Set the run context (as the publisher does) with a fresh monitor; restore afterwards."""

    def under(**fields):
        for name in context.ENV.values():
            monkeypatch.delenv(name, raising=False)
        for name, value in context.RunContext(**fields).env().items():
            monkeypatch.setenv(name, value)
        monkeypatch.setattr(quiet, "_MONITOR", None)
        monkeypatch.setattr(provenance, "_MACHINE", None)

    yield under
    quiet._MONITOR = None


@pytest.fixture
def burner():
    """The pid of a process that burns a core until it is killed: not a child of this one (the
    check counts a run's own children as its work), so started through a shell that exits."""
    code = "while True: pass"
    shell = subprocess.run(["sh", "-c", f'"{sys.executable}" -c "{code}" >/dev/null 2>&1 & echo $!'],
                           capture_output=True, text=True, check=True)
    pid = int(shell.stdout.split()[0])
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:  # until it burns (its interpreter started)
        stat = load.snapshot()["processes"].get(pid)
        if stat and stat[2] > 5:
            break
        time.sleep(0.02)
    yield pid
    os.kill(pid, signal.SIGKILL)


def _spin(seconds: float):
    def work():
        end = time.perf_counter() + seconds
        while time.perf_counter() < end:
            pass
        return 1

    return work


def _timed_section():
    """A section of about 1 s: two functions of 0.1 s, 5 repeats each."""
    return timing.compare({"torch/a": _spin(0.1), "jax/b": _spin(0.1)}, repeats=5, warmup=0, max_number=1)


@pytest.mark.slow  # times under a load it makes
@pytest.mark.parametrize("profile", ["cpu", "smoke"])
def test_a_busy_machine_is_measured_anyway_and_every_speed_verdict_says_so(run_under, burner, profile):
    run_under(profile=profile)
    timings = _timed_section()  # never refused
    assert set(timings) == {"torch/a", "jax/b"}
    busy = timings["torch/a"].busy
    assert busy and any(f"(pid {burner})" in f for f in busy)  # the cause is named, with its figure
    v = verdict.speed(timings["torch/a"], timings["jax/b"], question="q")
    assert "The machine was busy while this was measured" in v.caveat and "%" in v.caveat
    assert v.caveat in v.sentence and v.busy == busy
    entries = {name: ladders.ladder_entry(t) for name, t in timings.items()}
    laddered = ladders.ladder(entries, question="q", caveat="Own caveat.")
    assert "Own caveat." in laddered.caveat and "was busy" in laddered.caveat
    assert laddered.sentence.count("The machine was busy while this was measured") == 1
    machine = provenance._MACHINE
    assert machine["findings"] and machine["status"].startswith("busy")
    assert machine["sections"][-1]["other_cpu_share"] > 0


def test_a_committed_baseline_is_kept_per_machine_kind_and_is_a_figure_beside_the_load(tmp_path):
    path = tmp_path / "quiet-baselines.json"
    assert quiet.load_baseline("kind A", path) is None
    quiet.save_baseline("kind A", {"compute_s": 1.0, "copy_s": 2.0}, path, fingerprint={"family": 25})
    quiet.save_baseline("kind B", {"compute_s": 5.0}, path)
    assert quiet.load_baseline("kind A", path) == {"compute_s": 1.0, "copy_s": 2.0}  # its fingerprint left out
    assert quiet.load_baseline("kind C", path) is None
    # A run slow from its start: the baseline of its fingerprint shows it, as a figure; load flags.
    m = _synthetic_monitor([1.3, 1.3], judged=True, baseline=quiet.load_baseline("kind A", path), kind="kind A")
    with m.section("a") as found:
        pass
    assert found == [] and m.record()["quiet_level_vs_baseline"]["compute_s"] == pytest.approx(0.3)
    assert m.record()["baseline"] == "the quiet baseline of this fingerprint"
    m = _synthetic_monitor([1.3, 1.3], share=0.5, judged=True, baseline={"compute_s": 1.0}, kind="kind A")
    with m.section("a") as found:
        pass
    assert "30% slower than the quiet baseline of this machine's fingerprint" in found[0]
