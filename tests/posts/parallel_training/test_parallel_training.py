"""parallel-training: each strategy against the one-device run at 2 devices (both frameworks, their
real engines: torchrun on gloo, JAX on simulated CPU devices; read from the notebook's one smoke
execution of the test run, which launches them) and on one device (launched here), JAX's multi-host
path (from the same execution), the workers' step times from the timing harness, the one-device
ladder (eager, torch.compile, jit; on a GPU too, where there is one), the collective parsers, the
memory arithmetic, the launcher's errors, the verdicts, and the notebook's smoke run through the
publisher. The one-device steps are the notebook's paired cells (:func:`steps`: the code the post
shows is the code it times)."""

from __future__ import annotations

import dataclasses
import functools
import json
import math
import os
import socket
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
from conftest import run_pairs

from sidebyside.posts.parallel_training import (
    comms,
    costmodel,
    launch,
    model,
    reference,
    report,
    results,
    scaling,
)

STRATEGIES = launch.STRATEGIES
TORCH_STRATEGIES = launch.TORCH_STRATEGIES
CONFIG = model.ViTConfig(patch=7, dim=16, depth=1, heads=4, mlp=32)
BATCH, STEPS = 8, 3


@functools.cache
def steps() -> dict:
    """The notebook's one-device steps and optimisers (its ``one-device`` pair), run as they are, as
    :func:`reference.run` takes them."""
    import jax
    import torch

    ns = run_pairs("07_parallel_training.py", ["one-device"], {"torch": torch, "jax": jax})
    return {name: ns[name] for name in ("torch_step", "jax_step", "torch_optimizer", "jax_optimizer")}


# ----------------------------------------------------------------------------- one run per framework, 2 devices


def _batches(batch_size: int, steps: int) -> tuple[np.ndarray, np.ndarray]:
    """``steps`` batches of ``batch_size`` random 28x28 images and labels, stacked (X, y)."""
    rng = np.random.default_rng(0)
    images = rng.integers(0, 256, size=(64, 28, 28), dtype=np.uint8)
    labels = rng.integers(0, 10, size=64)
    batches = model.batches(images, labels, batch_size=batch_size, steps=steps)
    return np.stack([b[0] for b in batches]), np.stack([b[1] for b in batches])


@pytest.fixture(scope="module")
def inputs():
    return *_batches(BATCH, STEPS), model.TorchViT(CONFIG).state_dict()


@pytest.fixture(scope="module")
def runs(executed):
    """The strategies at 2 devices as the notebook's one smoke execution of this test run recorded them
    (tests/executions.py: torchrun on gloo and JAX on simulated CPU devices, launched by the notebook), with
    the model, batch and steps they ran: no second launch of the same runs here."""
    metrics = executed("parallel-training").record["metrics"]
    assert metrics["simulated"] and set(metrics["runs"]) == {"2"}, "smoke runs the strategies at 2 devices alone"
    config = model.ViTConfig(**{f.name: metrics["model"][f.name] for f in dataclasses.fields(model.ViTConfig)})
    return {**metrics["runs"]["2"], "config": config, "batch": metrics["batch_size"], "steps": metrics["steps"],
            "state": model.TorchViT(config).state_dict(), "multiprocess": metrics["multiprocess"]}


@pytest.mark.slow  # the notebook's smoke execution
@pytest.mark.parametrize("framework", ["torch", "jax"])
@pytest.mark.parametrize("strategy", STRATEGIES[1:])
def test_strategy_follows_the_one_device_losses(runs, framework, strategy):
    record = runs[framework][strategy]
    assert len(record["losses"]) == runs["steps"]
    assert record["losses"][-1] != record["losses"][0]  # it trained
    assert record["max_loss_deviation"] < 1e-5, record["losses"]
    assert record["max_param_difference"] < 1e-4


@pytest.mark.slow  # the notebook's smoke execution
@pytest.mark.parametrize("framework", ["torch", "jax"])
def test_workers_time_each_strategy_with_the_harness(runs, framework):
    for strategy in STRATEGIES:
        t = runs[framework][strategy]["time"]
        assert 0 < t["q1_s"] <= t["median_s"] <= t["q3_s"] and t["iqr_s"] == pytest.approx(t["q3_s"] - t["q1_s"])
        assert t["processes_s"] == [t["median_s"]] and t["error"] is None  # lab.timing's entry: timed in the worker
    if framework == "torch":  # every rank timed its own step; one_device runs on rank 0 alone
        ranks = {s: len(runs["torch"][s]["rank_medians_s"]) for s in STRATEGIES}
        assert ranks == {**dict.fromkeys(STRATEGIES, 2), "one_device": 1}


def _rank(strategy_seconds: dict[str, float], losses=(1.0, 0.5)) -> dict:
    memory = {"params": 4, "grads": 4, "optimizer": 4}
    return {"strategies": {s: {"losses": list(losses), "memory": memory, "collectives": [],
                               "time": {"median_s": t, "q1_s": t, "q3_s": t, "iqr_s": 0.0}}
                           for s, t in strategy_seconds.items()}}


def test_torch_record_takes_the_slowest_rank():
    ranks = [_rank({"one_device": 1.0, "data_parallel": 2.0}), _rank({"data_parallel": 3.0})]
    params = {s: {"w": np.zeros(1)} for s in ("one_device", "data_parallel")}
    record = report.torch_record({"ranks": ranks, "params": params})
    assert record["data_parallel"]["time"]["median_s"] == 3.0
    assert record["data_parallel"]["rank_medians_s"] == [2.0, 3.0]
    assert record["one_device"]["time"]["median_s"] == 1.0 and record["one_device"]["rank_medians_s"] == [1.0]


def test_workers_are_not_judged_by_the_quiet_check(monkeypatch):
    """Simulated devices share the cores: the other workers would always read as a busy machine."""
    from sidebyside.run import context

    monkeypatch.setenv(context.ENV["profile"], "cpu")
    monkeypatch.setenv(context.ENV["root"], "/somewhere")
    env = launch.worker_env(3)
    assert context.ENV["profile"] not in env and env[context.ENV["root"]] == "/somewhere"
    assert env["OMP_NUM_THREADS"] == "3" and context.current(env).profile is None


@pytest.mark.slow  # the notebook's smoke execution
def test_jax_multiprocess_path_follows_the_single_process_run(runs):
    """The notebook's multi-host run (smoke: 2 processes of 1 device), against its single-process run."""
    record = runs["multiprocess"]
    assert (record["processes"], record["devices_per_process"]) == (2, 1)
    assert record["max_loss_deviation"] < 1e-5 and record["max_loss_deviation_single_process"] < 1e-5
    assert record["collectives"]["all-reduce"]["count"] >= 1
    assert "2 processes of 1 device joined" in report.multiprocess_claim(record, tolerance=1e-4)


@pytest.mark.slow  # the notebook's smoke execution
def test_both_references_agree(runs):
    """The two frameworks' one-device runs (in the notebook's 2-device launch) agree on the losses; their
    parameters are compared by the scaling path's test, which launches one device of each."""
    torch_ref, jax_ref = runs["torch"]["one_device"], runs["jax"]["one_device"]
    assert np.allclose(torch_ref["losses"], jax_ref["losses"], atol=1e-5)


def _expected_sharded_bytes(state, n, *, pad: bool) -> int:
    """Parameter bytes one device holds when each tensor is split over ``n`` devices: FSDP2 splits
    dim 0 and pads it to a multiple of ``n``; JAX splits the first axis ``n`` divides, else replicates."""
    total = 0
    for value in state.values():
        shape = tuple(value.shape)
        if pad:
            total += math.ceil(shape[0] / n) * math.prod(shape[1:]) * 4
        else:
            divisible = any(d % n == 0 for d in shape)
            total += math.prod(shape) * 4 // (n if divisible else 1)
    return total


@pytest.mark.slow  # the notebook's smoke execution
def test_memory_per_device_is_the_shards(runs):
    state = runs["state"]
    replicated = sum(v.numel() for v in state.values()) * 4
    for framework in ("torch", "jax"):
        assert runs[framework]["one_device"]["memory"] == {"params": replicated, "grads": replicated,
                                                           "optimizer": replicated, "total": 3 * replicated}
        assert runs[framework]["data_parallel"]["memory"]["params"] == replicated
    assert runs["torch"]["fully_sharded"]["memory"]["params"] == _expected_sharded_bytes(state, 2, pad=True)
    assert runs["jax"]["fully_sharded"]["memory"]["params"] == _expected_sharded_bytes(state, 2, pad=False)
    for framework in ("torch", "jax"):
        fs = runs[framework]["fully_sharded"]
        assert fs["memory"]["grads"] == fs["memory"]["params"] == fs["memory"]["optimizer"]
        assert fs["memory"]["total"] < fs["replicated_total"]


@pytest.mark.slow  # the notebook's smoke execution
def test_peak_within_a_step_where_it_is_measured(runs):
    """JAX: the compiled step's memory analysis, labelled simulated; PyTorch on the CPU: not
    measured, no figure."""
    for strategy, record in runs["jax"].items():
        peak = record["peak"]
        held = peak["argument"] + peak["output"] - peak["alias"] + peak["temp"]
        assert peak["bytes"] == held > 0, strategy
        assert peak["source"].endswith("simulated on CPU devices")
        # the state it holds between steps is among the step's arguments
        assert peak["argument"] >= record["memory"]["params"] + record["memory"]["optimizer"]
    assert all(record["peak"] is None for record in runs["torch"].values())
    metrics = {"largest": 2, "runs": {"2": {"torch": runs["torch"], "jax": runs["jax"]}}}
    claim = results.peak_claim(metrics)
    assert report.TORCH_CPU_PEAK in claim and "simulated on CPU devices): one device " in claim


@pytest.mark.slow  # the notebook's smoke execution
def test_fsdp2_runs_both_ways_and_keeping_gathers_once(runs):
    """reshard_after_forward=False gathers each block's parameters once a step instead of twice: fewer
    all-gather bytes, the same losses and the same state held between steps."""
    regathered, kept = runs["torch"]["fully_sharded"], runs["torch"]["fully_sharded_kept"]
    assert kept["max_loss_deviation"] < 1e-5 and kept["max_param_difference"] < 1e-4
    assert kept["memory"] == regathered["memory"]
    assert kept["comms"]["all-gather"]["bytes"] < regathered["comms"]["all-gather"]["bytes"]
    assert kept["comms"]["reduce-scatter"] == regathered["comms"]["reduce-scatter"]


@pytest.mark.slow  # the notebook's smoke execution
def test_collectives_match_each_strategy(runs):
    grads = sum(v.numel() for v in runs["state"].values()) * 4
    for framework in ("torch", "jax"):
        dp = runs[framework]["data_parallel"]["comms"]
        assert dp["all-reduce"]["bytes"] >= grads and set(dp) == {"all-reduce", "total"}
        assert runs[framework]["one_device"]["comms"]["total"]["count"] == 0
        assert runs[framework]["manual"]["comms"]["all-reduce"]["bytes"] >= grads
    assert runs["torch"]["fully_sharded"]["comms"]["all-gather"]["count"] >= 2
    for framework in ("torch", "jax"):  # both reduce-scatter the gradients: FSDP
        fs = runs[framework]["fully_sharded"]["comms"]
        assert fs["reduce-scatter"]["bytes"] >= grads
        assert fs.get("all-reduce", {"bytes": 0})["bytes"] < grads / 2
    # Every collective of the 2-device run has a group of 2: wire bytes are the ring's share
    for framework in ("torch", "jax"):
        for strategy, record in runs[framework].items():
            for kind, entry in record["comms"].items():
                if kind == "total":
                    continue
                assert entry["groups"] == [2], (framework, strategy, kind)
                wire = comms.wire_factor(kind, 2) * entry["bytes"]
                assert entry["wire_bytes"] == pytest.approx(wire)
    # tensor parallel on a (1, 2) mesh: activations all-reduced over the model axis, nothing else
    activation = (runs["batch"] * runs["config"].tokens * runs["config"].dim) * 4
    for framework in ("torch", "jax"):
        tp = runs[framework]["tensor_parallel"]["comms"]
        assert tp["all-reduce"]["bytes"] % activation == 0 and tp["all-reduce"]["bytes"] > 0


# ----------------------------------------------------------------------------- the one-device ladder


@pytest.fixture(scope="module")
def ladder(inputs):
    X, y, state = inputs
    return reference.run(X, y, state, CONFIG, lr=0.1, momentum=0.9, repeats=3, min_repeat_s=0.005, **steps())


@pytest.mark.slow  # the strategies' runs or the one-device ladder: a module fixture of a minute
def test_one_device_ladder_follows_the_eager_losses(ladder):
    entries, losses = ladder["entries"], ladder["losses"]
    assert set(entries) == set(losses) == {"torch/eager", "torch/compile", "jax/jit"}
    eager = np.array(losses["torch/eager"])
    assert len(eager) == STEPS and eager[-1] != eager[0]
    assert np.abs(np.array(losses["torch/compile"]) - eager).max() < 1e-5
    assert np.abs(np.array(losses["jax/jit"]) - eager).max() < 1e-5
    for name, entry in entries.items():
        assert entry["error"] is None and 0 < entry["q1_s"] <= entry["median_s"] <= entry["q3_s"], name
    assert entries["torch/compile"]["compile_s"] > entries["torch/eager"]["compile_s"]
    assert entries["jax/jit"]["compile_s"] > 0
    # Without compiled autograd Dynamo breaks the step at backward(): the count a slower compiled rung cites.
    assert entries["torch/compile"]["graph_breaks"] >= 1


@pytest.mark.slow  # the strategies' runs or the one-device ladder: a module fixture of a minute
def test_one_device_ladder_in_the_record(ladder):
    record = report.reference_record({"cpu": ladder}, names={"cpu": "a test CPU"}, tolerance=1e-4)
    rungs = record["cpu"]["rungs"]
    assert rungs["torch/eager"]["max_loss_deviation"] == 0 and all(r["within_tolerance"] for r in rungs.values())
    claim = report.reference_claim(record, tolerance=1e-4)
    assert claim.startswith("- **One device, CPU** (a test CPU): a training step takes PyTorch eager ")
    assert "eager run: PyTorch torch.compile " in claim and "all within the float32 tolerance of 0.0001." in claim
    v = report.reference_verdict("cpu", record["cpu"], scale={"text": "one CPU"}).to_dict()
    assert v["question"] == "Which framework runs the one-device training step faster on the CPU?"
    assert v["sentence"].startswith("Best against best: ") and v["scale"] == {"text": "one CPU"}
    assert {c["framework"] for c in v["contestants"].values()} == {"torch", "jax"}
    assert len(results.reference_table({"reference": record})) == 3


def test_reference_record_flags_a_deviation_and_needs_the_eager_reference():
    entry = {"median_s": 1e-3, "q1_s": 1e-3, "q3_s": 1e-3, "iqr_s": 0.0, "compile_s": None, "error": None}
    cpu = {"torch_device": "cpu", "jax_device": "cpu", "entries": {"torch/eager": entry, "jax/jit": entry},
           "losses": {"torch/eager": [2.0, 1.0], "jax/jit": [2.0, 1.0 + 1e-7]}}
    gpu = {**cpu, "losses": {"torch/eager": [2.0, 1.01], "jax/jit": [2.0, 1.0]}}
    record = report.reference_record({"cpu": cpu, "gpu": gpu}, names={"cpu": "c", "gpu": "g"}, tolerance=1e-4)
    assert record["gpu"]["rungs"]["torch/eager"]["within_tolerance"] is False
    assert record["cpu"]["rungs"]["jax/jit"]["within_tolerance"] is True
    claim = report.reference_claim(record, tolerance=1e-4)
    assert "eager run: PyTorch eager 0.01 and JAX jit 0; beyond the float32 tolerance of 0.0001: PyTorch eager." in claim
    assert "**One device, GPU** (g)" in claim
    # every speed label states the CPU threads where the caller gives them
    counted = report.reference_record({"cpu": cpu}, names={"cpu": "c"}, tolerance=1e-4, threads=2)
    claim = report.reference_claim(counted, tolerance=1e-4)
    assert claim.startswith("- **One device, CPU** (c, 2 CPU threads): ")
    assert results.reference_table({"reference": counted}).index[0][0] == "CPU (c, 2 CPU threads)"
    failed = {**cpu, "entries": {**cpu["entries"], "torch/eager": {**entry, "median_s": None, "error": "boom"}},
              "losses": {"jax/jit": [2.0, 1.0]}}
    with pytest.raises(ValueError, match="PyTorch eager rung is the one-device reference.*boom"):
        report.reference_record({"cpu": failed}, names={"cpu": "c"}, tolerance=1e-4)


def test_unknown_torch_tool(inputs):
    X, y, state = inputs
    with pytest.raises(ValueError, match=r"unknown PyTorch tools \['jit'\]"):
        reference.run(X, y, state, CONFIG, lr=0.1, momentum=0.9, torch_tools=["eager", "jit"], **steps())


def test_gpu_plan_measures_scaling_only_with_two_gpus_or_more():
    none, one = reference.gpu_plan(0, 0), reference.gpu_plan(1, 1)
    many = reference.gpu_plan(8, 6, "A Test GPU")  # both frameworks must see a GPU: 6
    assert (none["reference"], one["reference"], many["reference"]) == (False, True, True)
    assert (none["scaling"], one["scaling"], many["scaling"]) == ([], [], [1, 2, 4, 6])
    assert all("scaling was not measured" in p["note"] for p in (none, one))
    assert "one GPU" in one["note"] and "not measured" not in many["note"]
    assert many["note"].startswith("This machine has 6 GPUs (A Test GPU)") and "on 1, 2, 4 and 6 of them" in many["note"]
    assert reference.gpu_plan(1, 0)["reference"] is False  # both frameworks must see it


@pytest.mark.slow  # the strategies' runs or the one-device ladder: a module fixture of a minute
@pytest.mark.skipif(not __import__("torch").cuda.is_available(), reason="needs a CUDA GPU")
def test_gpu_reference_follows_the_cpu_losses(ladder, inputs):
    import jax

    gpus = [d for d in jax.devices() if d.platform == "gpu"]
    if not gpus:
        pytest.skip("JAX sees no GPU")
    X, y, state = inputs
    on_gpu = reference.run(X, y, state, CONFIG, lr=0.1, momentum=0.9, torch_device="cuda", jax_device=gpus[0],
                           repeats=3, min_repeat_s=0.005, **steps())
    assert on_gpu["torch_device"] == "cuda" and on_gpu["jax_device"] == str(gpus[0])
    record = report.reference_record({"cpu": ladder, "gpu": on_gpu}, names={"cpu": "c", "gpu": "g"}, tolerance=1e-4)
    for name, rung in record["gpu"]["rungs"].items():
        assert rung["error"] is None and rung["within_tolerance"], (name, rung["max_loss_deviation"])


# ----------------------------------------------------------------------------- devices and scaling


def test_torch_placement_is_decided_in_one_place():
    cpu = launch.torch_placement("cpu", 3)
    assert cpu == launch.TorchPlacement(backend="gloo", device="cpu", mesh="cpu") and not cpu.cuda
    gpu = launch.torch_placement("gpu", 3)
    assert gpu == launch.TorchPlacement(backend="nccl", device="cuda:3", mesh="cuda") and gpu.cuda
    assert launch.torch_placement("cuda", 0) == launch.TorchPlacement("nccl", "cuda:0", "cuda")  # PyTorch's name
    assert launch.torch_placement("CPU") == cpu  # every rank on the CPU, whatever its local rank
    with pytest.raises(ValueError, match="unknown device kind 'tpu'"):
        launch.torch_placement("tpu")
    with pytest.raises(ValueError, match="local_rank must be >= 0"):
        launch.torch_placement("gpu", -1)


def test_an_unknown_device_kind_fails_before_any_worker_starts(inputs, tmp_path):
    X, y, state = inputs
    for run in (launch.run_torch, launch.run_jax):
        with pytest.raises(ValueError, match="unknown device kind 'tpu'"):
            run(2, X=X, y=y, torch_state=state, config=CONFIG, lr=0.1, device="tpu", workdir=tmp_path)
    assert list(tmp_path.iterdir()) == []


def test_jax_picks_the_first_devices_of_the_kind():
    from types import SimpleNamespace

    from sidebyside.posts.parallel_training import jax_parallel

    devices = [SimpleNamespace(platform=p, id=i) for i, p in enumerate(["cpu", "gpu", "cpu", "gpu", "gpu"])]
    assert [d.id for d in jax_parallel.pick_devices(devices, "gpu", 2)] == [1, 3]
    assert [d.id for d in jax_parallel.pick_devices(devices, "cuda", 3)] == [1, 3, 4]
    assert [d.id for d in jax_parallel.pick_devices(devices, "cpu", 1)] == [0]
    with pytest.raises(launch.LaunchError, match="larger than the 3 JAX gpu devices available; ask for at most 3"):
        jax_parallel.pick_devices(devices, "gpu", 4)
    import jax

    assert jax_parallel.pick_devices(jax.devices("cpu"), "cpu", 1) == [jax.devices("cpu")[0]]


def test_scaling_counts_are_powers_of_two_then_every_gpu():
    assert [launch.scaling_counts(g) for g in (0, 1, 2, 3, 4, 6, 8, 12)] == [
        [], [1], [1, 2], [1, 2, 3], [1, 2, 4], [1, 2, 4, 6], [1, 2, 4, 8], [1, 2, 4, 8, 12]]


def test_scaling_plan_shrinks_the_model_axis_on_one_gpu_and_checks_every_count():
    assert launch.scaling_plan([1, 2, 4, 8], batch_size=64, config=CONFIG, model_parallel=2) == [
        (1, 1), (2, 2), (4, 2), (8, 2)]
    with pytest.raises(ValueError, match="6 devices do not divide the global batch of 8"):
        launch.scaling_plan([1, 2, 4, 6], batch_size=8, config=CONFIG, model_parallel=2)
    assert launch.scaling_plan([], batch_size=8, config=CONFIG, model_parallel=2) == []


def test_scaling_efficiency_arithmetic():
    assert scaling.scaling_efficiency({4: 0.5, 1: 1.0, 2: 0.5}) == {1: 1.0, 2: 1.0, 4: 0.5}
    assert scaling.scaling_efficiency({1: 2.0, 8: 2.0})[8] == pytest.approx(1 / 8)  # no time saved
    assert scaling.scaling_efficiency({1: 1.0, 2: 0.4})[2] == pytest.approx(1.25)  # superlinear stays visible
    with pytest.raises(ValueError, match="needs the step time on one device"):
        scaling.scaling_efficiency({2: 1.0, 4: 0.5})
    with pytest.raises(ValueError, match="must be positive"):
        scaling.scaling_efficiency({1: 1.0, 2: 0.0})


def _scaling_runs(deviation: float = 1e-6) -> dict:
    """Synthetic records at 1, 2 and 4 GPUs: step time t1 / n^0.5 for every strategy, PyTorch's
    DDP a quarter faster at 4."""
    def record(fw, n):
        out = {"one_device": {"time": {"median_s": 0.01, "iqr_s": 0.0}, "max_loss_deviation": 0.0}}
        for s in STRATEGIES[1:]:
            t = 0.01 / n ** 0.5 * (0.75 if (fw, s, n) == ("torch", "data_parallel", 4) else 1)
            out[s] = {"time": {"median_s": t, "iqr_s": t / 10},
                      "max_loss_deviation": deviation if (fw, s, n) == ("jax", "manual", 2) else 0.0}
        return out
    return {n: {"torch": record("torch", n), "jax": record("jax", n)} for n in (1, 2, 4)}


def test_scaling_record_table_figure_and_claim_with_gpu_runs():
    record = scaling.scaling_record(_scaling_runs(), device="Test GPU", tolerance=1e-4,
                                   model_parallel={1: 1, 2: 2, 4: 2})
    assert json.loads(json.dumps(record)) == record  # the results JSON keeps it as it is
    assert record["counts"] == [1, 2, 4] and record["model_parallel"] == {"1": 1, "2": 2, "4": 2}
    assert set(record["strategies"]["torch"]) == set(STRATEGIES[1:])  # one device is the reference, not a row
    ddp = record["strategies"]["torch"]["data_parallel"]
    assert ddp["1"]["efficiency"] == 1 and ddp["2"]["efficiency"] == pytest.approx(1 / 2 ** 0.5)
    assert ddp["4"]["efficiency"] == pytest.approx(0.01 / (4 * 0.01 / 2 * 0.75))
    metrics = {"scaling": record, "batch_size": 64, "gpu_note": "a note"}
    table = scaling.scaling_table(metrics)
    assert len(table) == 3 * 4 * 2 and list(table.index.names) == ["strategy", "framework, tool", "GPUs"]
    row = table.loc[("data parallel", "PyTorch, DistributedDataParallel", 4)]
    assert row["scaling efficiency (%)"] == pytest.approx(100 * ddp["4"]["efficiency"])
    assert row["step time (ms, median)"] == pytest.approx(1e3 * 0.01 / 2 * 0.75)
    claim = scaling.scaling_claim(metrics)
    assert claim.startswith("Measured on real GPUs (Test GPU): every strategy of both frameworks ran on 1, 2 and 4 GPUs "
                            "with the same global batch of 64 (strong scaling)")
    assert "at 4 GPUs: PyTorch data parallel (DistributedDataParallel) 66.7%" in claim
    assert "Highest: PyTorch's data parallel at 66.7%; lowest: " in claim and "at 50%." in claim
    assert "model axis: 1 on 1 GPU, 2 on 2 GPUs and 2 on 4 GPUs." in claim
    assert "inside the float32 tolerance of 0.0001" in claim
    fig = scaling.scaling_figure(metrics)
    try:
        assert [len(ax.get_lines()) for ax in fig.axes] == [5, 5]  # 4 strategies and the ideal, per framework
        assert [ax.get_title() for ax in fig.axes] == ["PyTorch", "JAX"]
        efficiency = fig.axes[0].get_lines()[0].get_ydata()  # PyTorch's data parallel
        assert list(efficiency) == pytest.approx([100, 100 / 2 ** 0.5, 100 * ddp["4"]["efficiency"]])
    finally:
        __import__("matplotlib.pyplot").pyplot.close(fig)


def test_scaling_claim_names_a_run_beyond_the_tolerance():
    record = scaling.scaling_record(_scaling_runs(deviation=0.01), device="g", tolerance=1e-4)
    claim = scaling.scaling_claim({"scaling": record, "batch_size": 8})
    assert "Beyond the float32 tolerance of 0.0001 from the framework's one-device run: JAX manual collectives on 2 GPUs." in claim
    assert record["strategies"]["jax"]["manual"]["2"]["within_tolerance"] is False


def test_without_gpu_runs_there_is_no_scaling_table():
    assert scaling.scaling_record({}, device="g", tolerance=1e-4) is None
    note = reference.gpu_plan(1, 1)["note"]
    metrics = {"scaling": None, "batch_size": 8, "gpu_note": note}
    assert scaling.scaling_table(metrics) is None and scaling.scaling_figure(metrics) is None
    assert scaling.scaling_claim(metrics) == note and "scaling was not measured" in note


@pytest.mark.slow  # launches every strategy of both frameworks: an end-to-end run, as the notebook smoke run is
def test_the_scaling_path_runs_every_strategy_on_one_device(runs):
    """The GPU scaling runs are the CPU code with another device kind: its first count, one device
    with a model axis of 1, runs every strategy of both frameworks, on the CPU when told so, and the
    two frameworks end with the same parameters; with the notebook's 2-device runs (the same model,
    batch and steps), the record follows."""
    config, batch = runs["config"], runs["batch"]
    X, y = _batches(batch, runs["steps"])
    counts = launch.scaling_plan([1, 2], batch_size=batch, config=config, model_parallel=2)
    assert counts == [(1, 1), (2, 2)]
    common = dict(X=X, y=y, torch_state=runs["state"], config=config, lr=0.1, momentum=0.9, model_parallel=1,
                  device="cpu")
    torch_result, jax_result = launch.run_torch(1, **common), launch.run_jax(1, **common)
    assert [r["device"] for r in torch_result["ranks"]] == ["cpu"] and jax_result["platform"] == "cpu"
    for name, value in torch_result["params"]["one_device"].items():
        assert np.allclose(value, jax_result["params"]["one_device"][name], atol=1e-4), name
    one = {"torch": report.torch_record(torch_result), "jax": report.jax_record(jax_result)}
    record = scaling.scaling_record({1: one, 2: {"torch": runs["torch"], "jax": runs["jax"]}}, device="simulated",
                                   tolerance=1e-4, model_parallel=dict(counts))
    for fw in ("torch", "jax"):
        assert set(record["strategies"][fw]) == set((TORCH_STRATEGIES if fw == "torch" else STRATEGIES)[1:])
        for strategy, per in record["strategies"][fw].items():
            assert per["1"]["efficiency"] == 1 and per["2"]["efficiency"] > 0, (fw, strategy)
            assert per["1"]["within_tolerance"] and per["2"]["within_tolerance"], (fw, strategy)
    assert len(scaling.scaling_table({"scaling": record})) == (5 + 4) * 2  # PyTorch's FSDP2 both ways


@pytest.mark.slow  # the strategies' runs or the one-device ladder: a module fixture of a minute
@pytest.mark.skipif(__import__("torch").cuda.device_count() < 2, reason="needs 2 GPUs or more")
def test_two_gpus_follow_the_one_device_losses(inputs, ladder):
    X, y, state = inputs
    common = dict(X=X, y=y, torch_state=state, config=CONFIG, lr=0.1, momentum=0.9, model_parallel=2, device="gpu")
    torch_result = launch.run_torch(2, strategies=("one_device", "data_parallel", "fully_sharded"), **common)
    jax_result = launch.run_jax(2, strategies=("one_device", "data_parallel", "tensor_parallel"), **common)
    assert [r["device"] for r in torch_result["ranks"]] == ["cuda:0", "cuda:1"]
    assert jax_result["platform"] == "gpu" and len(jax_result["devices"]) == 2
    cpu_eager = np.array(ladder["losses"]["torch/eager"])
    for fw, record in (("torch", report.torch_record(torch_result)), ("jax", report.jax_record(jax_result))):
        for strategy, r in record.items():
            assert r["max_loss_deviation"] < 1e-4, (fw, strategy, r["losses"])
            assert np.abs(np.array(r["losses"]) - cpu_eager).max() < 1e-4, (fw, strategy)
            assert r["losses"][-1] != r["losses"][0] and r["time"]["median_s"] > 0


# ----------------------------------------------------------------------------- parsers


HLO = textwrap.dedent("""\
    ENTRY %main {
      %all-reduce = f32[64,128]{1,0} all-reduce(f32[64,128]{1,0} %p0), channel_id=1, replica_groups={{0,1},{2,3}}, to_apply=%add
      %ar2 = (f32[32]{0}, f32[32,32]{1,0}) all-reduce(f32[32]{0} %a, f32[32,32]{1,0} %b), replica_groups=[2,4]<=[8], to_apply=%add
      %all-gather.1 = f32[8,16]{1,0} all-gather(f32[2,16]{1,0} %p1), dimensions={0}, replica_groups=mesh['data'=4,'model'=2] {'data'}
      %rs = bf16[4,16]{1,0} reduce-scatter(bf16[16,16]{1,0} %p2), dimensions={0}, replica_groups={{0,1,2,3}}, to_apply=%add
      %ags = (f32[2,16]{1,0}, f32[8,16]{1,0}) all-gather-start(f32[2,16]{1,0} %p3), dimensions={0}, replica_groups={{0,1,2,3}}
      %agd = f32[8,16]{1,0} all-gather-done((f32[2,16]{1,0}, f32[8,16]{1,0}) %ags)
      %add.3 = f32[64,128]{1,0} add(f32[64,128]{1,0} %all-reduce, f32[64,128]{1,0} %all-reduce)
      ROOT %cp = f32[4]{0} collective-permute(f32[4]{0} %x), source_target_pairs={{0,1},{1,0}}
    }""")


def test_hlo_parser_on_a_written_program():
    found = comms.parse_hlo(HLO)
    assert found == [comms.Collective("all-reduce", 64 * 128 * 4, 2),
                     comms.Collective("all-reduce", (32 + 32 * 32) * 4, 4),
                     comms.Collective("all-gather", 8 * 16 * 4, 4),
                     comms.Collective("reduce-scatter", 16 * 16 * 2, 4),
                     comms.Collective("all-gather", 8 * 16 * 4, 4),
                     comms.Collective("collective-permute", 16, 2)]
    summary = comms.summarise(found)
    pair, four = 64 * 128 * 4, (32 + 32 * 32) * 4  # buffers over groups of 2 and of 4
    assert summary["all-reduce"] == {"count": 2, "bytes": pair + four, "groups": [2, 4],
                                     "wire_bytes": pair * 2 * 1 / 2 + four * 2 * 3 / 4}
    assert summary["total"]["count"] == 6


def test_hlo_parser_refuses_a_collective_it_cannot_read():
    with pytest.raises(ValueError, match="cannot read the shapes"):
        comms.parse_hlo("  %x = token[] all-reduce(token[] %t), replica_groups={}")


PROGRAM = """
import json, jax, jax.numpy as jnp
from jax.sharding import NamedSharding, PartitionSpec as P, AxisType
from sidebyside.posts.parallel_training import comms
mesh = jax.make_mesh((2,), ("data",), axis_types=(AxisType.Auto,))
x = jax.device_put(jnp.ones((6, 8)), NamedSharding(mesh, P("data")))
w = jax.device_put(jnp.ones((8, 4)), NamedSharding(mesh, P()))
grad = jax.jit(jax.grad(lambda w, x: jnp.sum((x @ w) ** 2)), out_shardings=NamedSharding(mesh, P()))
gather = jax.jit(lambda x: x * 2, out_shardings=NamedSharding(mesh, P()))
print(json.dumps([[c.__dict__ for c in comms.parse_hlo(f.lower(*a).compile().as_text())]
                  for f, a in ((grad, (w, x)), (gather, (x,)))]))
"""


def test_hlo_parser_on_a_compiled_program():
    """A gradient over a batch split on 2 devices needs one all-reduce of the weights' gradient
    (8 x 4 float32); replicating a split array needs one all-gather of the whole (6 x 8)."""
    env = {**os.environ, "XLA_FLAGS": "--xla_force_host_platform_device_count=2", "JAX_PLATFORMS": "cpu"}
    out = subprocess.run([sys.executable, "-c", PROGRAM], capture_output=True, text=True, env=env, check=True)
    grad, gather = json.loads(out.stdout.strip().splitlines()[-1])
    assert grad == [{"kind": "all-reduce", "bytes": 8 * 4 * 4, "group": 2}]
    assert gather == [{"kind": "all-gather", "bytes": 6 * 8 * 4, "group": 2}]


GROUPS = """
import json, os, torch, torch.distributed as dist
import torch.distributed._functional_collectives as functional
from sidebyside.posts.parallel_training.torch_parallel import CollectiveLog
os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=os.environ["PORT"])
dist.init_process_group("gloo", rank=0, world_size=1)
log, t = CollectiveLog(), torch.ones(4)
with log:
    dist.all_reduce(t)
    dist.all_gather_into_tensor(torch.empty(4), t)
    functional.wait_tensor(functional.all_reduce(t, "sum", dist.group.WORLD))
dist.destroy_process_group()
print(json.dumps([c.__dict__ for c in log.found]))
"""


@pytest.mark.slow  # starts a gloo process group in a child process (5 s)
def test_torch_collectives_carry_their_process_groups_size():
    env = {**os.environ, "PORT": str(launch.free_port())}
    out = subprocess.run([sys.executable, "-c", GROUPS], capture_output=True, text=True, env=env)
    assert out.returncode == 0, out.stderr[-3000:]
    found = json.loads(out.stdout.strip().splitlines()[-1])
    assert [(c["kind"], c["bytes"], c["group"]) for c in found] == [
        ("all-reduce", 16, 1),
        ("all-gather", 16, 1),
        ("all-reduce", 16, 1),
    ]


def test_wire_factor_against_hand_counts():
    """Ring algorithms, counted by hand. g = 2: an all-reduce sends half its buffer in the
    reduce-scatter and half in the all-gather (1 buffer); an all-gather, reduce-scatter or
    all-to-all sends its one other half.
    g = 8: 7 steps of 1/8 each, twice for an all-reduce (14/8), once for the others (7/8)."""
    hand = {
        ("all-reduce", 2): 1.0,
        ("all-gather", 2): 0.5,
        ("reduce-scatter", 2): 0.5,
        ("all-to-all", 2): 0.5,
        ("collective-permute", 2): 1.0,
        ("all-reduce", 8): 14 / 8,
        ("all-gather", 8): 7 / 8,
        ("reduce-scatter", 8): 7 / 8,
        ("all-to-all", 8): 7 / 8,
        ("collective-permute", 8): 1.0,
    }
    for (kind, g), factor in hand.items():
        assert comms.wire_factor(kind, g) == pytest.approx(factor), (kind, g)
        assert comms.Collective(kind, 800, g).wire_bytes == pytest.approx(800 * factor)
    assert all(comms.wire_factor(kind, 1) == 0 for kind in comms.KINDS)
    with pytest.raises(ValueError, match="unknown collective 'broadcast'"):
        comms.wire_factor("broadcast", 2)
    with pytest.raises(ValueError, match="without a group size"):
        _ = comms.Collective("all-reduce", 8).wire_bytes
    # FSDP's reduce-scatter and all-gather send what one all-reduce of the same buffer does
    assert comms.wire_factor("reduce-scatter", 8) + comms.wire_factor(
        "all-gather", 8
    ) == comms.wire_factor("all-reduce", 8)
    summary = comms.summarise(
        [comms.Collective("all-reduce", 800, 8), comms.Collective("all-gather", 800, 2)]
    )
    assert summary["total"] == {"count": 2, "bytes": 1600, "wire_bytes": pytest.approx(1400 + 400)}
    assert summary["all-reduce"]["groups"] == [8]


def test_hlo_parser_reads_a_reduce_scatter_printed_without_operand_shapes():
    """XLA prints operands by name alone in newer versions: the buffer is the scattered result
    times the group."""
    line = (
        "  %reduce_scatter.1 = f32[4,10]{1,0} reduce-scatter(%dot.27), channel_id=1, "
        "replica_groups={{0,1,2,3,4,5,6,7}}, use_global_device_ids=true, dimensions={0}, "
        "to_apply=%add"
    )
    assert comms.parse_hlo(line) == [comms.Collective("reduce-scatter", 8 * 4 * 10 * 4, 8)]
    gather = "  %ag = f32[8,16]{1,0} all-gather(%p), replica_groups=[1,4]<=[4], dimensions={0}"
    assert comms.parse_hlo(gather) == [comms.Collective("all-gather", 8 * 16 * 4, 4)]


FULLY_SHARDED = """
import json, jax, numpy as np, optax
from flax import nnx
from jax.sharding import AxisType, NamedSharding, PartitionSpec as P
from sidebyside.posts.parallel_training import comms, jax_parallel, model
config = model.ViTConfig(patch=7, dim=16, depth=1, heads=4, mlp=32)
graphdef, params = nnx.split(model.FlaxViT(config, seed=0), nnx.Param)
tx = optax.sgd(0.1, momentum=0.9)
def loss_fn(params, X, y):
    return optax.softmax_cross_entropy_with_integer_labels(nnx.merge(graphdef, params)(X), y).mean()
mesh = jax.make_mesh((8,), ("data",), axis_types=(AxisType.Auto,))
specs, step = jax_parallel.fully_sharded(mesh, params, loss_fn, tx)
def put(tree, specs):
    return jax.tree.map(lambda x, s: jax.device_put(x, NamedSharding(mesh, s)), tree, specs)
params = put(params, specs)
opt_specs = optax.tree_map_params(tx, lambda _, s: s, jax.eval_shape(tx.init, params), specs,
                                  transform_non_params=lambda _: P())
opt_state = put(tx.init(params), opt_specs)
X, y = put((np.ones((16, 28, 28), np.float32), np.arange(16) % 10), (P("data"), P("data")))
compiled = step.lower(params, opt_state, X, y).compile()
pairs = zip(jax.tree.leaves(params), jax.tree.leaves(specs))
split = sum(x.nbytes for x, s in pairs if "data" in s)
total = sum(x.nbytes for x in jax.tree.leaves(params))
first = jax.tree.leaves(params)[0]
compiled(params, opt_state, X, y)
collectives = [c.__dict__ for c in comms.parse_hlo(compiled.as_text())]
print(json.dumps({"collectives": collectives, "split": split, "total": total,
                  "donated": first.is_deleted(), "peak": jax_parallel.peak_bytes(compiled)}))
"""


@pytest.mark.slow  # compiles the step in a child process with 8 simulated devices (10 s)
def test_jax_fully_sharded_step_reduce_scatters_its_gradients():
    """On 8 simulated CPU devices, the fully sharded step's compiled HLO gathers the split
    parameters and reduce-scatters their gradients, each exactly once (buffer bytes = the split
    parameters' bytes), and all-reduces no more than the loss and the few parameters no axis of
    which 8 divides; it donates its state; its peak within a step comes from XLA's memory
    analysis."""
    env = {
        **os.environ,
        "XLA_FLAGS": "--xla_force_host_platform_device_count=8",
        "JAX_PLATFORMS": "cpu",
    }
    out = subprocess.run(
        [sys.executable, "-c", FULLY_SHARDED], capture_output=True, text=True, env=env
    )
    assert out.returncode == 0, out.stderr[-3000:]
    found = json.loads(out.stdout.strip().splitlines()[-1])
    summary = comms.summarise(comms.Collective(**c) for c in found["collectives"])
    assert summary["reduce-scatter"]["bytes"] == found["split"] == summary["all-gather"]["bytes"]
    assert summary["reduce-scatter"]["groups"] == summary["all-gather"]["groups"] == [8]
    replicated = found["total"] - found["split"]
    assert 0 < replicated < found["total"] / 8
    assert (
        summary.get("all-reduce", {"bytes": 0})["bytes"] <= replicated + 4
    )  # the loss: one float32
    assert (
        max(c["bytes"] for c in found["collectives"] if c["kind"] == "all-reduce")
        < found["total"] / 8
    )
    assert found["donated"]
    assert (
        found["peak"]["bytes"] > 0 and found["peak"]["alias"] > 0
    )  # the donated state is written in place


def test_both_optimisers_have_the_same_options_and_updates():
    """The notebook's optimiser cells: PyTorch's options are those its workers run
    (foreach=True), and over three steps of the same gradients PyTorch's SGD and optax's move a
    parameter alike."""
    import jax.numpy as jnp
    import torch

    from sidebyside.posts.parallel_training import torch_parallel

    cells = steps()
    shown = cells["torch_optimizer"]([torch.nn.Parameter(torch.zeros(2))], lr=0.1, momentum=0.9)
    run = torch_parallel.sgd([torch.nn.Parameter(torch.zeros(2))], lr=0.1, momentum=0.9)
    assert shown.defaults == run.defaults and shown.defaults["foreach"] is True
    assert {k: shown.defaults[k] for k in ("dampening", "nesterov", "weight_decay")} == {
        "dampening": 0,
        "nesterov": False,
        "weight_decay": 0,
    }
    rng = np.random.default_rng(0)
    start, grads = (
        rng.normal(size=(3, 4)).astype(np.float32),
        rng.normal(size=(3, 3, 4)).astype(np.float32),
    )
    w = torch.nn.Parameter(torch.from_numpy(start.copy()))
    optimizer = cells["torch_optimizer"]([w], lr=0.1, momentum=0.9)
    tx = cells["jax_optimizer"](lr=0.1, momentum=0.9)
    p = jnp.asarray(start)
    state = tx.init(p)
    for g in grads:
        w.grad = torch.from_numpy(g)
        optimizer.step()
        updates, state = tx.update(jnp.asarray(g), state, p)
        p = p + updates
    assert np.allclose(w.detach().numpy(), np.asarray(p), atol=1e-6)


def test_torch_calls_become_collectives():
    assert comms.torch_collective("c10d::allreduce_", [400, 8]) == comms.Collective("all-reduce", 400)
    grouped = comms.torch_collective("c10d::allreduce_", [400], group=4)
    assert grouped == comms.Collective("all-reduce", 400, 4)
    assert comms.torch_collective("_c10d_functional::all_reduce", [128]) == comms.Collective("all-reduce", 128)
    assert comms.torch_collective("c10d::_allgather_base_", [256, 128]) == comms.Collective("all-gather", 256)
    assert comms.torch_collective("c10d::_reduce_scatter_base_", [128, 256]) == comms.Collective("reduce-scatter", 256)
    assert comms.torch_collective("all-reduce", [44]) == comms.Collective("all-reduce", 44)
    assert comms.torch_collective("aten::add", [4]) is None
    assert comms.torch_collective("c10d::barrier", [4]) is None


# ----------------------------------------------------------------------------- memory and the cost model


@pytest.mark.slow  # builds and copies the post's ViT on both sides (3 s)
def test_flax_from_torch_is_the_copied_model():
    """Built abstractly, with no random initialisation run: the same parameters as FlaxViT then the copy;
    a parameter PyTorch gives no value for is an error, not an abstract leaf left in the model."""
    from flax import nnx

    torch_model = model.TorchViT(CONFIG)
    built = model.flax_from_torch(CONFIG, torch_model)
    copied = model.FlaxViT(CONFIG, seed=1)
    model.copy_torch_to_flax(torch_model, copied)
    built_state, copied_state = (dict(nnx.to_flat_state(nnx.state(m, nnx.Param))) for m in (built, copied))
    assert built_state.keys() == copied_state.keys()
    for path, leaf in built_state.items():
        assert np.array_equal(np.asarray(leaf.get_value()), np.asarray(copied_state[path].get_value())), path
    state = {k: v for k, v in torch_model.state_dict().items() if k != "pos"}
    with pytest.raises(ValueError, match=r"no PyTorch value for the Flax parameters \['pos'\]"):
        model.flax_from_torch(CONFIG, state)


def test_torch_memory_counts_local_tensors():
    import torch

    from sidebyside.posts.parallel_training import torch_parallel

    layer = torch.nn.Linear(3, 5)
    optimizer = torch.optim.SGD(layer.parameters(), lr=0.1, momentum=0.9)
    layer(torch.ones(2, 3)).sum().backward()
    before = torch_parallel.memory(layer, optimizer)
    assert before == {"params": 80, "grads": 80, "optimizer": 0}
    optimizer.step()
    assert torch_parallel.memory(layer, optimizer)["optimizer"] == 80


def test_ring_arithmetic():
    assert costmodel.ring_seconds("all-reduce", 1e9, 8, 1e9) == pytest.approx(2 * 7 / 8)
    assert costmodel.ring_seconds("all-gather", 1e9, 4, 1e9) == pytest.approx(3 / 4)
    assert costmodel.ring_seconds("all-reduce", 1e9, 1, 1e9) == 0
    with pytest.raises(ValueError, match="unknown collective"):
        costmodel.ring_seconds("broadcast", 1, 2, 1)


def test_projection_crosses_to_the_network_beyond_a_node():
    collectives = [{"kind": "all-reduce", "bytes": 4e8}]
    p = costmodel.project("data_parallel", collectives=collectives, grad_bytes=4e8, measured_devices=8, params=10 ** 8,
                          tokens_per_device=1024, model_parallel=2)
    hw = costmodel.H100
    assert p[8]["comm_s"] == pytest.approx(hw.latency_s + 2 * 7 / 8 * 4e8 / hw.nvlink_bytes_per_s)
    assert p[64]["comm_s"] == pytest.approx(hw.latency_s + 2 * 63 / 64 * 4e8 / hw.network_bytes_per_s)
    assert p[512]["efficiency_no_overlap"] < p[8]["efficiency_no_overlap"]


# ----------------------------------------------------------------------------- errors


def test_plan_errors_say_what_to_change():
    assert launch.plan(4, batch_size=8, config=CONFIG, model_parallel=2) == {"1d": (4,), "2d": (2, 2)}
    with pytest.raises(ValueError, match="3 devices do not divide the global batch of 8"):
        launch.plan(3, batch_size=8, config=CONFIG, model_parallel=1)
    with pytest.raises(ValueError, match=r"model axis \(3 devices\) does not divide the model's heads \(4\)"):
        launch.plan(6, batch_size=12, config=CONFIG, model_parallel=3)
    with pytest.raises(ValueError, match=r"model axis \(4\) does not divide 2 devices"):
        launch.plan(2, batch_size=8, config=CONFIG, model_parallel=4)
    with pytest.raises(launch.LaunchError, match="larger than the 2 devices available"):
        launch.plan(4, batch_size=8, config=CONFIG, model_parallel=2, available=2)


@pytest.mark.skipif(__import__("torch").cuda.device_count() > 0, reason="checks a machine without GPUs")
def test_jax_mesh_larger_than_the_devices(inputs):
    X, y, state = inputs
    with pytest.raises(launch.LaunchError, match="larger than the 0 JAX gpu devices"):
        launch.run_jax(2, X=X, y=y, torch_state=state, config=CONFIG, lr=0.1, device="gpu",
                       strategies=["one_device"])


def test_missing_torchrun(tmp_path):
    with pytest.raises(launch.LaunchError, match="no Python at"):
        launch.find_torchrun(str(tmp_path / "python"))
    with pytest.raises(launch.LaunchError, match="torchrun is missing"):
        launch.find_torchrun("/usr/bin/python3")  # Debian's Python, without PyTorch


def test_port_in_use(inputs):
    X, y, state = inputs
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(launch.LaunchError, match=f"port {port} is already in use"):
            launch.run_torch(2, X=X, y=y, torch_state=state, config=CONFIG, lr=0.1, master_port=port)


def _processes_mentioning(text: str) -> list[int]:
    found = []
    for proc in Path("/proc").iterdir():
        try:
            if proc.name.isdigit() and text in (proc / "cmdline").read_bytes().decode(errors="replace"):
                found.append(int(proc.name))
        except OSError:
            continue
    return found


@pytest.mark.slow  # starts torchrun workers
def test_failing_worker_names_its_rank_and_leaves_nothing_running(inputs, tmp_path):
    X, y, state = inputs
    with pytest.raises(launch.WorkerError) as error:
        launch.run_torch(1, X=X, y=y, torch_state=state, config=CONFIG, lr=0.1, strategies=["no_such_strategy"],
                         model_parallel=1, workdir=tmp_path)
    assert error.value.rank == 0 and "KeyError" in error.value.error and "no_such_strategy" in str(error.value)
    assert _processes_mentioning(str(tmp_path)) == []


# ----------------------------------------------------------------------------- verdicts and prose


def test_code_lines_skip_docstrings_comments_and_blanks():
    from sidebyside.run import code

    def strategy(model):
        """A docstring
        over two lines."""
        # a comment

        return model
    assert report.code_lines(strategy) == 2
    assert "return model" in code.source(strategy) and repr(code.source(strategy)).startswith("def strategy")


def test_fewer_verdict_flips_with_the_numbers():
    scale = {"text": "test"}
    a = report.fewer_verdict("data_parallel", 10, 20, what="bytes", unit="", question="q", scale=scale, race="k")
    b = report.fewer_verdict("data_parallel", 20, 10, what="bytes", unit="", question="q", scale=scale, race="k")
    tie = report.fewer_verdict("data_parallel", 1000, 1005, what="bytes", unit="", question="q", scale=scale, race="k")
    assert (a.winner, b.winner, tie.winner) == ("torch", "jax", None)
    assert a.sentence.startswith("PyTorch (DistributedDataParallel) needs fewer bytes") and "2×" in a.sentence
    assert tie.label == "tie"


def test_fsdp2_is_raced_both_ways_against_jaxs_one_program():
    """Synthetic records, the shape of the 2-device run's: FSDP2 regathering for backward moves 3 units
    of parameter bytes, keeping them 2, JAX 2; each row names its resharding choice."""
    def rec(moved, held=30, deviation=0.0):
        total = {"count": 2, "bytes": 2 * moved, "wire_bytes": moved}
        return {"max_loss_deviation": deviation, "comms": {"total": total},
                "memory": {"total": held}, "replicated_total": 90}
    runs = {2: {"torch": {"one_device": rec(0, 90), "data_parallel": rec(20, 90), "fully_sharded": rec(30),
                          "fully_sharded_kept": rec(20, deviation=2e-7)},
                "jax": {"one_device": rec(0, 90), "data_parallel": rec(20, 90), "fully_sharded": rec(20)}}}
    lines = {"one_device": 0, "data_parallel": 1, "fully_sharded": 3}
    metrics = report.summarise(runs=runs, code={"torch": lines, "jax": lines}, parameters=100, config={},
                               batch_size=8, steps=2, lr=0.1, momentum=0.9, model_parallel=2, device="CPU",
                               simulated=True, loss_tolerance=1e-4, projection={}, threads=1)
    by_question = {v["question"]: v for v in metrics["verdicts"]}
    regathered = by_question["Whose collectives move fewer bytes per step for fully sharded?"]
    kept = by_question["Whose collectives move fewer bytes per step for fully sharded (parameters kept for backward)?"]
    assert regathered["winner"] == "jax" and kept["label"] == "tie"
    assert regathered["sentence"].startswith(
        "JAX (shard_map + lax.all_gather, gradients reduce-scattered) needs fewer bytes on the "
        "wire per device per step than PyTorch (FSDP2 fully_shard, reshard_after_forward=True) "
        "for fully sharded: 20 B against 30 B")
    # the verdict counts wire bytes, not the buffers (40 B, 60 B)
    assert report.WIRE in regathered["sentence"]
    assert "PyTorch (FSDP2 fully_shard, reshard_after_forward=False)" in kept["sentence"]
    assert report.RESHARDING in regathered["sentence"] and report.RESHARDING in kept["caveat"]
    memory = [v for q, v in by_question.items() if q.startswith("Whose memory per device between steps")]
    assert len(memory) == 3 and all((report.HELD in v["caveat"]) == ("fully sharded" in v["question"]) for v in memory)
    # No code verdict for the second way: it is the same function with one argument.
    assert not any(q.startswith("Which framework needs less code") and "kept" in q for q in by_question)
    assert "PyTorch at most 2.00e-07 (fully sharded (parameters kept for backward))" in metrics["verdicts"][0]["sentence"]
    text = report.conclusion(metrics)
    assert "the two tie for data parallel and fully sharded (parameters kept for backward)." in text
    assert "JAX sends fewer bytes on the wire per device per step for fully sharded" in text
    assert "Fully sharded, each device holds, between steps, 33.3% of the replicated bytes in PyTorch" in text


def test_parity_verdict_flips_past_the_tolerance():
    ok = report.parity_verdict({"torch": {"manual": 1e-7}, "jax": {"manual": 2e-7}}, tolerance=1e-3, scale={},
                               devices=2)
    off = report.parity_verdict({"torch": {"manual": 1e-7}, "jax": {"manual": 5e-2}}, tolerance=1e-3, scale={},
                                devices=2)
    assert ok.label == "both match" and off.label == "deviates" and off.winner == "torch"
    assert "JAX leave" in off.sentence


@pytest.mark.slow  # the notebook's smoke execution and the one-device ladder, a module fixture of a minute
def test_record_and_conclusion(runs, ladder):
    one_device = report.reference_record({"cpu": ladder}, names={"cpu": "a test CPU"}, tolerance=1e-3)
    note = reference.gpu_plan(0, 0)["note"]
    metrics = report.summarise(runs={2: {"torch": runs["torch"], "jax": runs["jax"]}},
                               code={"torch": dict.fromkeys(STRATEGIES, 3), "jax": dict.fromkeys(STRATEGIES, 5)},
                               parameters=model.param_count(runs["config"]), config=runs["config"].__dict__,
                               batch_size=runs["batch"], steps=runs["steps"], lr=0.1, momentum=0.9, model_parallel=2,
                               device="CPU", simulated=True,
                               loss_tolerance=1e-3, projection={}, threads=1, reference=one_device,
                               gpu_note=note)
    assert metrics["verdicts"][0]["label"] == "both match"
    speed = metrics["verdicts"][1]
    assert speed["question"].endswith("faster on the CPU?") and "one device, CPU (a test CPU)" in speed["scale"]["text"]
    text = report.conclusion(metrics)
    assert "PyTorch needs less code for data parallel" in text and "not evidence" in text
    assert "**One device, CPU** (a test CPU)" in text and text.endswith(note)
    assert len(results.results_table(metrics)) == len(STRATEGIES) + len(TORCH_STRATEGIES)
    # FSDP2 raced both ways, each row naming its resharding choice, against JAX's one fully sharded program.
    moved = {v["question"]: v for v in metrics["verdicts"] if v["question"].startswith("Whose collectives")}
    both = [moved[f"Whose collectives move fewer bytes per step for {name}?"]
            for name in ("fully sharded", "fully sharded (parameters kept for backward)")]
    assert both[0]["contestants"]["torch"]["tool"] == "FSDP2 fully_shard, reshard_after_forward=True"
    assert both[1]["contestants"]["torch"]["tool"] == "FSDP2 fully_shard, reshard_after_forward=False"
    assert all(report.RESHARDING in v["sentence"] for v in both)
    held = [v for v in metrics["verdicts"] if v["question"].startswith("Whose memory per device between steps")
            and "fully sharded" in v["question"]]
    assert len(held) == 2 and all(report.HELD in v["caveat"] for v in held)
    assert "**fully sharded (parameters kept for backward)**: PyTorch (FSDP2 fully_shard, " \
           "reshard_after_forward=False) issues" in report.collectives_claim(metrics)
    assert report.projection_claim(metrics) == ""
    metrics["projection"] = {fw: {s: costmodel.project(
        s, collectives=runs[fw][s]["collectives"], grad_bytes=runs[fw][s]["memory"]["grads"], measured_devices=2,
        params=model.param_count(CONFIG), tokens_per_device=BATCH // 2 * CONFIG.tokens, model_parallel=2)
        for s in STRATEGIES[1:]} for fw in ("torch", "jax")}
    assert "Projected, not measured: at 512 H100s" in report.projection_claim(metrics)
    assert "Projected, not measured" in report.conclusion(metrics)
    claim = report.collectives_claim(metrics)
    assert "**data parallel**: PyTorch (DistributedDataParallel) issues 1 all-reduce" in claim
    assert "Measured on real GPUs" not in report.conclusion(metrics)
    metrics["scaling"] = scaling.scaling_record(_scaling_runs(), device="Test GPU", tolerance=1e-3)
    assert scaling.scaling_claim(metrics) in report.conclusion(metrics)


# ----------------------------------------------------------------------------- the notebook, smoke profile


def test_notebook_smoke_run_through_the_publisher(executed):
    """The notebook's one smoke execution of the test run (tests/executions.py), through the publisher."""
    run = executed("parallel-training")
    record = run.record
    assert record["profile"] == "smoke"
    assert {"runs", "verdicts", "projection", "code_lines"} <= set(record["metrics"])
    assert record["metrics"]["verdicts"][0]["label"] == "both match"
    post = run.post.read_text()
    assert "Traceback" not in post and "not evidence" in post


def test_a_gpu_run_under_hardware_only_records_the_gpus_ladder_and_leaves_the_strategies_to_the_cpu_run():
    """hardware_only (the gpu profile's): the GPU's one-device ladder is the run's verdict; the CPU's eager run is
    only the losses' reference; the strategies, their code and projection are the cpu run's (empty here)."""
    def entry(seconds):
        return {"median_s": seconds, "q1_s": seconds, "q3_s": seconds, "iqr_s": 0.0, "compile_s": None, "error": None,
                "processes_s": [seconds * f for f in (0.99, 1.0, 1.01)]}

    cpu = {"torch_device": "cpu", "jax_device": "cpu", "entries": {"torch/eager": entry(1e-3)},
           "losses": {"torch/eager": [2.0, 1.0]}}
    gpu = {"torch_device": "cuda", "jax_device": "cuda:0", "entries": {"torch/eager": entry(2e-4), "jax/jit": entry(1e-4)},
           "losses": {"torch/eager": [2.0, 1.0], "jax/jit": [2.0, 1.0]}}
    record = report.reference_record({"cpu": cpu, "gpu": gpu}, names={"cpu": "c", "gpu": "g"}, tolerance=1e-4)
    metrics = report.reference_summary(reference=record, parameters=1000, config={"dim": 8}, batch_size=8, steps=2,
                                       lr=0.1, momentum=0.9, loss_tolerance=1e-4, gpu_note="one GPU")
    assert (metrics["runs"], metrics["code_lines"], metrics["projection"]) == ({}, {}, {})
    assert [v["question"] for v in metrics["verdicts"]] == [
        "Which framework runs the one-device training step faster on the GPU?"]
    assert metrics["device"] == "g" and set(metrics["reference"]) == {"cpu", "gpu"}
    json.dumps(metrics)


def test_every_verdict_the_post_builds_names_its_race(framed_verdicts):
    """Each verdict names its race (the losses' parity, each device's one-device ladder, and per strategy its
    code lines, collective bytes and memory), never its question's words, so that a reader's run is matched with
    the published one by id; the races differ within a run. Synthetic records, as in the tests above."""
    def rec(moved, held=30):
        total = {"count": 2, "bytes": moved, "wire_bytes": moved}
        return {"max_loss_deviation": 0.0, "comms": {"total": total},
                "memory": {"total": held}, "replicated_total": 90}

    def entry(seconds):
        return {"median_s": seconds, "q1_s": seconds, "q3_s": seconds, "iqr_s": 0.0, "compile_s": None, "error": None,
                "processes_s": [seconds * f for f in (0.99, 1.0, 1.01)]}

    one = {"entries": {"torch/eager": entry(1e-3), "jax/jit": entry(5e-4)},
           "losses": {"torch/eager": [2.0, 1.0], "jax/jit": [2.0, 1.0]}}
    reference_runs = {"cpu": {"torch_device": "cpu", "jax_device": "cpu", **one},
                      "gpu": {"torch_device": "cuda", "jax_device": "cuda:0", **one}}
    one_device = report.reference_record(reference_runs, names={"cpu": "c", "gpu": "g"}, tolerance=1e-4)
    runs = {2: {"torch": {"one_device": rec(0, 90), "data_parallel": rec(20, 90), "fully_sharded": rec(30),
                          "fully_sharded_kept": rec(20)},
                "jax": {"one_device": rec(0, 90), "data_parallel": rec(20, 90), "fully_sharded": rec(20)}}}
    lines = {"one_device": 0, "data_parallel": 1, "fully_sharded": 3}
    metrics = report.summarise(runs=runs, code={"torch": lines, "jax": lines}, parameters=100, config={},
                               batch_size=8, steps=2, lr=0.1, momentum=0.9, model_parallel=2, device="CPU",
                               simulated=True, loss_tolerance=1e-4, projection={}, threads=1,
                               reference=one_device)
    report.reference_summary(reference=one_device, parameters=100, config={}, batch_size=8, steps=2, lr=0.1,
                             momentum=0.9, loss_tolerance=1e-4)
    assert framed_verdicts and not [v.question for v in framed_verdicts if not v.race]
    races = [v["race"] for v in metrics["verdicts"]]
    assert len(set(races)) == len(races)
    assert {"parity/losses", "reference/cpu", "reference/gpu", "code-lines/data_parallel",
            "collective-bytes/fully_sharded_kept", "memory/fully_sharded"} <= set(races)
