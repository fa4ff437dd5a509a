"""fashion-mnist's record and conclusion: built from synthetic measurements (no training, no
notebook), each claim checked, and the sentences watched as the numbers change."""

from __future__ import annotations

import copy

import pytest
from conftest import per_process

from sidebyside.lab import ladders, training
from sidebyside.posts.fashion_mnist import report as report

CPU_TF32 = "TF32 is a tensor-core mode of NVIDIA GPUs (Ampere or newer); a CPU has none"


def _entry(median, iqr=None, compile_s=None):
    iqr = median / 20 if iqr is None else iqr
    return ladders.ladder_entry({"median_s": median, "iqr_s": iqr, "compile_s": compile_s,
                                 "processes_s": per_process(median, iqr / median / 2 if median else 0.0)})


def _na(reason="CUDA graphs need a CUDA GPU; this run is on the CPU"):
    return ladders.ladder_entry(not_applicable=reason)


def _float32_ladder(torch_eager=2.0, torch_compile=1.5, jax_jit=1.0, jax_scan=0.5, host=True, torch_steps=None):
    ladder = {"torch/eager": _entry(torch_eager), "torch/compile": _entry(torch_compile, compile_s=30.0),
              "torch/compile+cuda-graphs": _na(), "torch/cuda-graph": _na(), "torch/cuda-graph+fused": _na(),
              "torch/cuda-graph-steps": _na() if torch_steps is None else _entry(torch_steps, compile_s=2.0),
              "jax/jit": _entry(jax_jit, compile_s=0.4), "jax/jit+scan": _entry(jax_scan, compile_s=0.9)}
    if host:
        ladder |= {"torch/dataloader": _entry(3 * torch_eager), "jax/jit-host": _entry(2 * jax_jit, compile_s=0.3)}
    return ladder


def _precision_ladder(precision, torch_compile=1.2, jax_scan=0.4):
    if precision == "tf32":
        return {name: _na(CPU_TF32) for name in report.PRECISION_TOOLS}
    return {"torch/compile": _entry(torch_compile, compile_s=35.0), "torch/cuda-graph": _na(),
            "torch/cuda-graph+fused": _na(), "torch/cuda-graph-steps": _na(), "jax/jit+scan": _entry(jax_scan, compile_s=1.1)}


def _histories(accuracies):
    out = []
    for a in accuracies:
        h = training.History("x", "device")
        h.test_accuracy.append(a)
        out.append(h)
    return out


def record(mlp=None, cnn=None, bf16=None, accuracy=None, original=None, precision_models=("mlp",)):
    """A record as the notebook builds it, from per-call ladders of 5 steps and 468-step epochs."""
    speed = {}
    for name, entries in (("mlp", mlp or _float32_ladder()), ("cnn", cnn or _float32_ladder(host=False))):
        speed[name] = report.speed_record(entries, steps_per_call=5, steps_per_epoch=468)
    for kind in precision_models:
        for precision in ("tf32", "bfloat16"):
            entries = bf16 if (precision == "bfloat16" and bf16 is not None) else _precision_ladder(precision)
            speed[f"{kind}/{precision}"] = report.speed_record(entries, steps_per_call=5, steps_per_epoch=468,
                                                               precision=precision)
    accuracy = accuracy or {("mlp", "torch"): [0.85, 0.86, 0.855, 0.85, 0.86], ("mlp", "flax"): [0.851, 0.858, 0.856,
                                                                                               0.852, 0.857],
                            ("cnn", "torch"): [0.90, 0.905, 0.902, 0.9, 0.905],
                            ("cnn", "flax"): [0.899, 0.904, 0.903, 0.9, 0.904]}
    original = original or {"torch": [0.57, 0.58], "flax": [0.79, 0.80], "torch_fixed_normalisation": [0.70, 0.71],
                            "flax_with_torch_init": [0.70, 0.72]}
    return report.summarise(
        original=report.original_record(original, [0, 1], num_train=60000),
        accuracy=report.accuracy_record({k: _histories(v) for k, v in accuracy.items()}, [0, 1, 2, 3, 4]),
        speed=speed, conditions={"tf32": False}, startup={"torch_compile_startup_s": 20.0, "jax_jit_startup_s": 0.1},
        device="a 2-core CPU", batch_size=128, num_test=10000, epochs={"mlp": 10, "cnn": 4}, flax_cnn_loop="device")


def test_record_keeps_the_keys_the_site_reads_and_ladders_per_workload():
    m = record()
    assert {"original_setting", "accuracy", "epoch_seconds", "compile_seconds", "speed", "verdicts"} <= set(m)
    assert set(m["speed"]) == {"mlp", "cnn", "mlp/tf32", "mlp/bfloat16"}
    for w in m["speed"].values():
        assert {"ladder", "best", "precision", "per_call_ladder"} <= set(w)
    mlp = m["speed"]["mlp"]
    assert mlp["precision"] == "float32" and set(mlp["host_fed"]) == set(report.HOST_FED)
    assert not set(report.HOST_FED) & set(mlp["ladder"])  # the host-fed loops are not rungs
    assert mlp["ladder"]["jax/jit+scan"]["median_s"] == pytest.approx(0.5 * 468 / 5)  # scaled to an epoch
    assert mlp["best"] == {"torch": "compile", "jax": "jit+scan", "ratio": pytest.approx(3.0)}
    assert m["speed"]["mlp/tf32"]["best"] == {"torch": None, "jax": None, "ratio": None}
    names = [v["name"] for v in m["verdicts"]]
    assert names == ["mlp_speed", "mlp_speed_steps", "cnn_speed", "cnn_speed_steps", "mlp_accuracy", "cnn_accuracy",
                     "mlp_speed_bfloat16"]
    assert m["epoch_seconds"]["torch/dataloader"]["median"] == pytest.approx(6.0 * 468 / 5)
    assert m["compile_seconds"]["torch/compile"] == 30.0
    assert m["accuracy"]["mlp"]["torch"]["per_seed"] == [0.85, 0.86, 0.855, 0.85, 0.86]


def test_original_claim_takes_the_gap_apart_from_the_record():
    text = report.original_claim(record())
    assert "57.5% for PyTorch against 79.5% for Flax" in text
    assert "moves PyTorch by +13 points, to 70.5%" in text
    assert "spread over seeds is in the table" in text
    flipped = report.original_claim(record(original={"torch": [0.60], "flax": [0.79], "torch_fixed_normalisation":
                                                     [0.60], "flax_with_torch_init": [0.79]}))
    assert "moves PyTorch by 0 points" in flipped and flipped != text


def test_accuracy_claim_says_within_noise_or_names_the_winner():
    same = report.accuracy_claim(record())
    assert same.startswith("**Is JAX more accurate than PyTorch?** No.")
    assert "reach the same test accuracy within seed noise" in same
    apart = report.accuracy_claim(record(accuracy={("mlp", "torch"): [0.80, 0.801, 0.802, 0.8, 0.801],
                                                   ("mlp", "flax"): [0.85, 0.851, 0.852, 0.85, 0.851],
                                                   ("cnn", "torch"): [0.90, 0.905, 0.902, 0.9, 0.905],
                                                   ("cnn", "flax"): [0.899, 0.904, 0.903, 0.9, 0.904]}))
    assert "JAX reaches a higher test accuracy" in apart and apart != same


def test_speed_claim_follows_the_winner():
    jax_wins = report.speed_claim(record())
    assert "on a 2-core CPU" in jax_wins and "TF32 off on both sides" in jax_wins
    # One step a dispatch against one step a dispatch: JAX's jitted step (1.0) against torch.compile (1.5).
    assert "One step a dispatch: Best against best: JAX (jit) is 1.5× faster than PyTorch (compile)" in jax_wins
    # A call's steps in one program: PyTorch's K-step graph needs a GPU, so no race on this CPU.
    assert "A call's steps in one program: No PyTorch tool ran" in jax_wins
    torch_wins = report.speed_claim(record(mlp=_float32_ladder(torch_compile=0.1)))
    assert "PyTorch (compile) is 10× faster than JAX (jit)" in torch_wins
    tie = report.speed_claim(record(mlp=_float32_ladder(torch_compile=1.0, jax_jit=1.0)))
    assert "within noise" in tie.split("\n\n")[0]
    gpu = report.speed_claim(record(mlp=_float32_ladder(torch_steps=0.25)))
    assert "A call's steps in one program: Best against best: PyTorch (cuda-graph-steps) is 2× faster than JAX " \
           "(jit+scan)" in gpu


def test_verdicts_race_like_with_like_and_name_what_still_differs():
    m = record(mlp=_float32_ladder(torch_steps=0.25))
    by_name = {v["name"]: v for v in m["verdicts"]}
    single, multi = by_name["mlp_speed"], by_name["mlp_speed_steps"]
    assert single["sides"]["torch"]["tool"] == "compile" and single["sides"]["jax"]["tool"] == "jit"
    assert multi["sides"]["torch"]["tool"] == "cuda-graph-steps" and multi["sides"]["jax"]["tool"] == "jit+scan"
    assert "one copy a call" in multi["caveat"] and "differ in structure" not in multi["caveat"]
    assert single["scale"]["batch"] == 128 and single["scale"]["device"] == "a 2-core CPU"
    # A one-step CUDA graph as PyTorch's best names the launches it makes outside its graph.
    graph = report.structure_caveat({"torch/cuda-graph": _entry(0.1), "jax/jit": _entry(0.2)})
    assert "three launches a step outside it" in graph
    # A precision row whose two bests differ in structure says so.
    bf16 = by_name["mlp_speed_bfloat16"]
    assert "PyTorch's (compile) runs one step a dispatch, JAX's (jit+scan) all of a call's steps" in bf16["caveat"]


def test_a_compile_rung_slower_than_eager_is_explained_by_its_graph_breaks():
    ladder = _float32_ladder(torch_eager=0.719, torch_compile=0.833)
    ladder["torch/compile"]["graph_breaks"] = 1
    text = {v["name"]: v for v in record(mlp=ladder)["verdicts"]}["mlp_speed"]["sentence"]
    assert "PyTorch's compile is slower than its eager rung" in text and "1 graph break, counted by" in text


def test_accuracy_verdicts_need_five_seeds():
    few = record(accuracy={k: v[:3] for k, v in {
        ("mlp", "torch"): [0.80, 0.801, 0.802], ("mlp", "flax"): [0.85, 0.851, 0.852],
        ("cnn", "torch"): [0.90, 0.905, 0.902], ("cnn", "flax"): [0.899, 0.904, 0.903]}.items()})
    assert {v["label"] for v in few["verdicts"] if v["name"].endswith("accuracy")} == {"too few seeds"}


def test_host_and_compile_claims():
    m = record()
    assert report.host_claim(m) == ("The loops most tutorials write, with batches sent from the host: a PyTorch "
                                    "`DataLoader` epoch takes 3× the time of the same eager step on device-resident "
                                    "data, and a jitted JAX step fed NumPy batches takes 2× the time of the "
                                    "device-resident jitted step.")
    # Faster than the device-resident step (a fast host, a slow device): "is ... faster", never "takes ... faster".
    m["speed"]["mlp"]["host_fed"]["torch/dataloader"]["median_s"] = m["speed"]["mlp"]["ladder"]["torch/eager"][
        "median_s"] / 2
    assert "a PyTorch `DataLoader` epoch is 2× faster than the same eager step" in report.host_claim(m)
    text = report.compile_claim(m)
    assert "PyTorch, torch.compile (whole step) 30 s" in text and "JAX, jit + lax.scan 900 ms" in text
    assert "eager" not in text and "host" not in text
    m["speed"]["mlp"]["host_fed"]["jax/jit-host"] = ladders.ladder_entry(error="boom")
    assert report.host_claim(m) == ""


def test_precision_claims_race_within_a_precision_and_say_why_tf32_is_absent():
    m = record()
    bf16 = report.precision_claim(m, "mlp", "bfloat16")
    assert "The MLP in bfloat16 mixed precision" in bf16 and bf16.count("Best against best") == 1
    assert "JAX (jit+scan) is 3× faster than PyTorch (compile)" in bf16
    assert ("PyTorch's best in bfloat16 (compile) is 1.25× faster than its float32 best (compile); JAX's "
            "best in bfloat16 (jit+scan) is 1.25× faster than its float32 best (jit+scan)") in bf16
    assert "not the same work done faster or slower" in bf16
    tf32 = report.precision_claim(m, "mlp", "tf32")
    assert "no comparison on this machine" in tf32 and CPU_TF32 in tf32
    assert report.precision_claim(m, "cnn", "bfloat16") == ""  # not run for the CNN
    flipped = report.precision_claim(record(bf16=_precision_ladder("bfloat16", torch_compile=0.1)), "mlp", "bfloat16")
    assert "PyTorch (compile) is 4× faster than JAX (jit+scan)" in flipped
    assert "PyTorch's best in bfloat16 (compile) is 15× faster than its float32 best" in flipped
    slower = report.precision_claim(record(bf16=_precision_ladder("bfloat16", torch_compile=3.0)), "mlp", "bfloat16")
    assert "PyTorch's best in bfloat16 (compile) takes 2× the time of its float32 best (compile)" in slower


def test_conclusion_is_computed_from_the_record():
    m = record()
    text = report.conclusion(m)
    assert text.count("\n\n") == 3  # accuracy, MLP speed, CNN speed (+ host and compile), precisions
    assert "**Other precisions, each raced within itself.**" in text
    assert "The precision rows of this run cover the MLP only" in text
    both = report.conclusion(record(precision_models=("mlp", "cnn")))
    assert "cover the" not in both and "The CNN in bfloat16" in both
    changed = copy.deepcopy(m)
    changed["device"] = "an NVIDIA H100"
    assert "on an NVIDIA H100" in report.conclusion(changed) and report.conclusion(changed) != text


def test_results_table_rows_and_scan_claim():
    m = record()
    table = report.results_table(m)
    assert "best MLP epoch, bfloat16 (median ± IQR/2, tool)" in table.index
    assert not any("tf32" in row for row in table.index)  # nothing ran in TF32 on this machine
    assert table.loc["MLP, 10 epochs (Adam)", "PyTorch"] == "85.50 ± 0.50%"
    text = report.scan_claim(m["speed"], device="a CPU", cnn_loop="device")
    assert "For the MLP: JAX (jit + scan) is 2× faster than JAX (jit per step)" in text
    assert "used `device`" in text
    assert report.ladder_tools("torch", "bfloat16") == {"torch/compile": "compile", "torch/cuda-graph": "cuda_graph",
                                                       "torch/cuda-graph+fused": "cuda_graph_fused",
                                                       "torch/cuda-graph-steps": "cuda_graph_steps"}
    assert report.ladder_tools("jax", "float32") == report.JAX_TOOLS


def test_a_gpu_run_under_hardware_only_holds_the_speed_and_leaves_the_accuracies_to_the_cpu_run():
    """The gpu profile (hardware_only) measures the speed section alone: the record's original setting and
    accuracy are None, no verdict is about accuracy, and the table and conclusion say the speed alone."""
    full = record()
    speed = {name: report.speed_record(entries, steps_per_call=5, steps_per_epoch=468)
             for name, entries in (("mlp", _float32_ladder()), ("cnn", _float32_ladder(host=False)))}
    metrics = report.summarise(original=None, accuracy=None, speed=speed, conditions={"tf32": False},
                               startup={"torch_compile_startup_s": 20.0, "jax_jit_startup_s": 0.1},
                               device="NVIDIA H100 80GB HBM3", batch_size=128, num_test=10000,
                               epochs={"mlp": 10, "cnn": 4}, flax_cnn_loop="scan")
    assert metrics["original_setting"] is None and metrics["accuracy"] is None
    assert [v["name"] for v in metrics["verdicts"]] == [v["name"] for v in full["verdicts"] if not v["name"].endswith(
        ("_accuracy", "_tf32", "_bfloat16"))]  # the same speed verdicts, none about accuracy (no precision rows here)
    table = report.results_table(metrics)
    assert not any("original" in row or "epochs (Adam)" in row for row in table.index)
    conclusion = report.conclusion(metrics)
    assert "more accurate" not in conclusion and conclusion.startswith("**Where they differ is speed**")


def test_every_verdict_the_post_builds_names_its_race(framed_verdicts):
    """Each verdict names its race (model, precision, loop structure), never its question's words, so that
    a reader's run is matched with the published one by id; the races differ within a run."""
    m = record(precision_models=("mlp", "cnn"))
    report.scan_claim(m["speed"], device="a CPU", cnn_loop="device")
    assert framed_verdicts and not [v.question for v in framed_verdicts if not v.race]
    races = [v["race"] for v in m["verdicts"]]
    assert len(set(races)) == len(races) and {"mlp/float32/one-step/best", "cnn/float32/whole-call/best",
                                              "mlp/accuracy", "cnn/bfloat16/best"} <= set(races)
