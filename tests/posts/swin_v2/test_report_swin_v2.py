"""The Swin Transformer V2 post's record and conclusion, from synthetic measurements.

No training and no timing here: a record is built by hand the way the notebook builds it, and
each claim is checked to say what the numbers say, and to change when they change.
"""

from __future__ import annotations

import copy
import dataclasses
import json
import math

import pytest
from conftest import per_process

from sidebyside.lab import framing, ladders, training
from sidebyside.posts import swin_v2 as swin
from sidebyside.posts.swin_v2 import report as swin_v2

CONFIG = swin.SwinConfig(img_size=16, patch_size=2, in_chans=1, embed_dim=8, depths=(2, 1), num_heads=(2, 4))
SPEED_CONFIG = dataclasses.replace(CONFIG, img_size=32, in_chans=3)


def entry(median_s, spread=0.02, *, compile_s=1.0, allocation_s=0.01, batch=32):
    """A ladder entry as swin.speed_ladder writes it, per step: quartiles ``spread`` either side."""
    q1, q3 = median_s * (1 - spread), median_s * (1 + spread)
    return {"median_s": median_s, "q1_s": q1, "q3_s": q3, "iqr_s": q3 - q1, "compile_s": compile_s,
            "processes_s": per_process(median_s, spread),
            "first_s": 10 * median_s + compile_s, "allocation_s": allocation_s, "error": None,
            "not_applicable": None, "images_per_s": batch / median_s, "peak_memory_bytes": 2**30}


def failed(error="RuntimeError: boom"):
    return {"median_s": None, "q1_s": None, "q3_s": None, "iqr_s": None, "compile_s": None, "first_s": None,
            "error": error, "not_applicable": None, "images_per_s": None, "peak_memory_bytes": None}


def ladder(precision, phase, batch, medians):
    """One swin.speed_ladder result; ``medians`` maps rung names to seconds per step (None: it failed)."""

    entries = {name: (failed() if m is None else entry(m, batch=batch)) for name, m in medians.items()}
    return {"phase": phase, "batch_size": batch, "precision": precision, "steps_per_call": 10,
            "ladder": entries, "best": ladders.best(swin.by_structure(entries)["per_step"]),
            "best_whole_loop": ladders.best(swin.by_structure(entries)["whole_loop"])}


def not_applicable(why="CUDA graphs need a CUDA GPU; this run is on the CPU"):
    return {**failed(None), "not_applicable": why}


def speed(train_eager=0.10, train_jit=0.08, eval_eager=0.05, eval_jit=0.02, train_compile=0.07):
    return {
        "float32/train/32": ladder("float32", "train", 32, {"torch/eager": train_eager / 2, "torch/compile":
                                                            train_compile / 2, "jax/jit": train_jit / 2}),
        "float32/train/64": ladder("float32", "train", 64, {"torch/eager": train_eager, "torch/compile":
                                                            train_compile, "jax/jit": train_jit}),
        "float32/eval/64": ladder("float32", "eval", 64, {"torch/eager": eval_eager, "torch/compile": None,
                                                          "jax/jit": eval_jit}),
    }


def histories(framework, accuracies):
    return [training.History(framework, "jit", train_loss=[0.5], test_accuracy=[a], epoch_seconds=[2.0, 3.0])
            for a in accuracies]


#: Where the seed measured (the notebook states it): Swin-V2-T on 256×256 images, on its GPU.
SEED_SCALE = framing.scale_of(parameters=28_300_000, input="256×256×3", device="V100")

PARITY = {"max_abs_logit_err": 3e-7, "max_rel_grad_err": 5e-5, "worst_grad": "head.fc.bias", "loss_err": 1e-7,
          "logit_scale": 2.5, "tensors_compared": 40}


def record(*, torch_acc=(0.80, 0.81, 0.82, 0.805, 0.815), jax_acc=(0.805, 0.81, 0.815, 0.8, 0.82), on_gpu=True,
           parity=PARITY, batch_size=64, epoch_seconds=None, **speeds):
    runs = {"torch": histories("torch", torch_acc), "jax": histories("jax", jax_acc)}
    for framework, seconds in (epoch_seconds or {}).items():
        for h in runs[framework]:
            h.epoch_seconds = [seconds]
    accuracy = swin_v2.accuracy_record(runs, seeds=list(range(len(torch_acc))))
    return swin_v2.summarise(parity_runs={"trained model": parity}, accuracy=accuracy, speed=speed(**speeds),
                             model_config=CONFIG, speed_config=SPEED_CONFIG, num_train=60000, num_test=10000,
                             num_epochs=3, allow_tf32=False, timm_version="1.0.31", conditions={"tf32": False},
                             device="NVIDIA H100 80GB HBM3", on_gpu=on_gpu, batch_size=batch_size,
                             parameters={"model": 148_000, "speed_model": 150_500}, seed_scale=SEED_SCALE)


def test_the_record_has_every_key_the_site_reads_and_is_json():
    metrics = record()
    assert {"parity", "accuracy", "speed", "verdicts", "first_step"} <= set(metrics)
    assert {"max_abs_logit_err", "max_rel_grad_err"} <= set(metrics["parity"])
    assert set(metrics["accuracy"]) == {"torch", "jax"}
    assert {"mean", "std", "seeds"} <= set(metrics["accuracy"]["torch"])
    for result in metrics["speed"].values():
        for e in result["ladder"].values():
            assert {"median_s", "iqr_s", "images_per_s", "compile_s", "peak_memory_bytes", "error"} <= set(e)
    json.dumps(metrics)  # JSON-able as it stands


def test_accuracy_record_is_mean_and_sample_std_over_seeds():
    acc = record(torch_acc=(0.80, 0.82, 0.84))["accuracy"]["torch"]
    assert acc["mean"] == pytest.approx(0.82)
    assert acc["std"] == pytest.approx(0.02)
    assert acc["per_seed"] == [0.80, 0.82, 0.84] and acc["epoch_seconds_median"] == 2.5
    assert math.isnan(record(torch_acc=(0.8,), jax_acc=(0.8,))["accuracy"]["torch"]["std"])  # one seed: unknown


def test_the_headline_verdict_is_float32_training_at_the_largest_batch():
    metrics = record()
    first = metrics["verdicts"][0]
    assert "training, batch 64, float32" in first["question"]
    # Best against best: torch.compile (70 ms) beats JAX jit (80 ms), though JAX beats eager (100 ms).
    assert first["winner"] == "torch"
    assert first["sentence"].startswith("Best against best: PyTorch (compile) is 1.14× faster than JAX (jit)")
    assert "PyTorch's ladder runs from eager (1.25× the time of JAX's best)" in first["sentence"]


def test_best_against_best_picks_each_sides_fastest_tool_and_flips_with_the_numbers():
    slower_jax = record(train_jit=0.09, train_compile=0.06)["verdicts"][0]
    assert slower_jax["winner"] == "torch" and "PyTorch (compile) is 1.5× faster than JAX (jit)" in slower_jax["sentence"]
    faster_jax = record(train_jit=0.03, train_compile=0.06)["verdicts"][0]
    assert faster_jax["winner"] == "jax" and "JAX (jit) is 2× faster than PyTorch (compile)" in faster_jax["sentence"]
    tie = record(train_jit=0.0601, train_compile=0.06)["verdicts"][0]
    assert tie["winner"] is None and "within noise" in tie["sentence"]


def test_the_seeds_pairing_is_answered_against_the_seeds_figure():
    text = swin_v2.seed_pairing_claim(speed(train_eager=0.10, train_jit=0.08), "train")
    assert text.startswith("Training at batch 64: ")
    assert "gives JAX 1.25× PyTorch's throughput (the seed reported 1.27×)" in text
    assert "best against best with one step a dispatch (PyTorch compile, JAX jit) gives 0.875×" in text
    assert "in one program" not in text  # no whole-loop rung ran on either side
    evaluation = swin_v2.seed_pairing_claim(speed(eval_eager=0.05, eval_jit=0.02), "eval")
    assert "gives JAX 2.5× PyTorch's throughput (the seed reported 2.4×)" in evaluation
    assert swin_v2.seed_pairing_claim({k: v for k, v in speed().items() if "eval" not in k}, "eval") is None


def test_the_seeds_comparison_verdicts_are_float32_eager_against_jit():
    seed_verdicts = [v for v in record()["verdicts"] if "With the seed's pairing" in v["question"] and v["question"].endswith("?")]
    assert len(seed_verdicts) == 3  # every float32 setting where both eager and jit ran
    assert all(v["sides"]["torch"]["tool"] == "eager" and v["sides"]["jax"]["tool"] == "jit" for v in seed_verdicts)


def test_a_failed_tool_is_kept_as_a_finding():
    metrics = record()
    failed_text = [v["sentence"] for v in metrics["verdicts"] if "evaluation, batch 64" in v["question"]
                   and "best tool" in v["question"]][0]
    assert "Failed, kept as findings: PyTorch compile (RuntimeError: boom)" in failed_text
    table = swin_v2.speed_table(swin_v2.speed_rows(metrics["speed"]))
    assert table.loc[("float32", "eval", 64, "PyTorch, torch.compile"), "status"] == "failed: RuntimeError: boom"
    assert table.loc[("float32", "eval", 64, "JAX, jit step"), "status"] == "ran"


def test_accuracy_claim_says_within_seed_noise_or_names_the_winner():
    same = swin_v2.accuracy_claim(record()["accuracy"], num_train=60000, num_epochs=3)
    assert "within seed noise" in same and "(60,000 training images, 3 epochs.)" in same
    apart = swin_v2.accuracy_claim(record(jax_acc=(0.90, 0.905, 0.91, 0.9, 0.91))["accuracy"], num_train=512,
                                   num_epochs=1)
    assert apart.startswith("JAX reaches a higher test accuracy") and "(512 training images, 1 epoch.)" in apart
    # Fewer than five seeds a side: no verdict, whatever the gap.
    few = record(torch_acc=(0.80, 0.81), jax_acc=(0.90, 0.91))["verdicts"][-1]
    assert few["label"] == "too few seeds" and few["winner"] is None


def test_parity_claim_states_errors_against_tolerances_and_fails_loudly():
    metrics = record()
    text = swin_v2.parity_claim(metrics["parity"])
    assert "at most 3.00e-07 (tolerance 1.00e-05)" in text and "all 40 parameter tensors" in text
    assert "`head.fc.bias`" in text and "compute the same network" in text
    broken = {**PARITY, "max_rel_grad_err": 0.2}
    assert not swin_v2.within_tolerance(broken)
    assert "outside the tolerance" in swin_v2.parity_claim(record(parity=broken)["parity"])


def test_first_epoch_claim_splits_the_first_step():
    metrics = record()
    key = "float32/train/64/jax/jit"
    assert metrics["first_step"][key]["steady_s"] == 0.08
    text = swin_v2.first_epoch_claim(metrics["first_step"])
    assert "JAX, jit step (batch 64, float32): compilation and one-off set-up 1 s, allocation 10 ms, " \
           "a steady step 80 ms" in text
    no_alloc = copy.deepcopy(metrics["first_step"])
    no_alloc[key]["allocation_s"] = None
    assert "allocation cannot be separated on this device" in swin_v2.first_epoch_claim(no_alloc)


def test_conclusion_answers_the_seed_from_the_record_alone():
    metrics = json.loads(json.dumps(record()))  # what the site holds: the record, nothing else
    text = swin_v2.conclusion(metrics)
    assert text.startswith("**Is JAX really 27% faster at training and 140% faster at validating?** Measured on "
                           "NVIDIA H100 80GB HBM3, 32×32 inputs")
    assert metrics["verdicts"][0]["sentence"] in text
    assert "- Do the two frameworks train Swin V2 to the same accuracy?" in text
    assert "CPU figures" not in text
    assert "CPU figures for a small model at a small size" in swin_v2.conclusion({**metrics, "on_gpu": False})
    flipped = swin_v2.conclusion(json.loads(json.dumps(record(train_jit=0.2, train_compile=0.2, train_eager=0.1))))
    assert "PyTorch (eager) is 2× faster than JAX (jit)" in flipped and flipped != text


def test_every_verdict_states_its_scale_and_does_not_answer_the_seed_at_another():
    metrics = record()
    for v in metrics["verdicts"]:
        assert v["scale"]["device"] == "NVIDIA H100 80GB HBM3" and v["scale"]["parameters"] in (148_000, 150_500)
    head = metrics["verdicts"][0]
    assert head["scale"]["text"] == "150k parameters, input 32×32×3, batch 64, float32, on NVIDIA H100 80GB HBM3"
    assert head["claim"]["answers"] is False and {"parameters", "input", "device"} <= set(head["claim"]["differs"])
    assert "does not answer the seed's claim (JAX 1.27× PyTorch's training throughput, batch 32 and 64) yet" \
        in head["caveat"]
    seed = [v for v in metrics["verdicts"] if v["question"].startswith("With the seed's pairing")]
    assert seed and all(v["claim"]["answers"] is False for v in seed)
    assert seed[0]["contestants"]["jax"]["origin"] == "built_with"
    # A run at the seed's scale answers it: the claim's fields all match.
    at_seed = swin_v2.speed_verdicts(speed(), model={"img_size": 256, "in_chans": 3}, device="V100",
                                     parameters=28_300_000, seed_scale=SEED_SCALE)
    assert all(v.claim["answers"] for v in at_seed) and "does not answer" not in at_seed[0].sentence


def test_per_epoch_times_that_point_the_other_way_are_explained_from_the_ladder():
    # The ladder at batch 64 says JAX jit (80 ms) beats PyTorch eager (100 ms); at batch 32 too.
    agree = record(epoch_seconds={"torch": 3.0, "jax": 2.0})
    assert swin_v2.epoch_claim(agree) == ""
    # Epochs the other way (JAX 3.6 s, PyTorch 1.8 s) at a batch where the ladder says JAX: the loops differ.
    loops = record(epoch_seconds={"torch": 1.8, "jax": 3.6})
    text = swin_v2.epoch_claim(loops)
    assert "takes JAX 3.6 s against PyTorch eager's 1.8 s" in text and "does not (JAX jit 80 ms" in text
    train_seed = [v for v in loops["verdicts"] if v["question"].startswith("With the seed's pairing")
                  and "training, batch 64" in v["question"]][0]
    assert text in train_seed["caveat"]
    # Where the ladder at the accuracy batch goes the epochs' way, the batch is the explanation.
    by_batch = record(epoch_seconds={"torch": 1.8, "jax": 3.6}, train_jit=0.2)
    assert "agrees with them" in swin_v2.epoch_claim({**by_batch, "speed": {
        **by_batch["speed"], "float32/train/32": ladder("float32", "train", 32, {
            "torch/eager": 0.05, "torch/compile": 0.04, "jax/jit": 0.03})}})
    # No ladder at the accuracy batch: the record says it cannot tell.
    elsewhere = record(epoch_seconds={"torch": 1.8, "jax": 3.6}, batch_size=128)
    assert "was not run at batch 128" in swin_v2.epoch_claim(elsewhere)


def with_whole_loop(scan_s, graph_s=None):
    """speed() with JAX's lax.scan at ``scan_s`` a step in the batch-64 training ladder, and PyTorch's
    CUDA graph of K steps at ``graph_s`` (None: not applicable, as on a CPU)."""
    out = speed()
    entries = dict(out["float32/train/64"]["ladder"])
    entries["jax/jit_scan"] = entry(scan_s, batch=64)
    entries["torch/cuda_graph_steps"] = not_applicable() if graph_s is None else entry(graph_s, batch=64)
    out["float32/train/64"] = {**out["float32/train/64"], "ladder": entries,
                               "best": ladders.best(swin.by_structure(entries)["per_step"])}
    return out


def verdicts_of(speeds):
    return [v.to_dict() for v in swin_v2.speed_verdicts(speeds, model={"img_size": 32, "in_chans": 3},
                                                        device="cpu", parameters=150_500, seed_scale=SEED_SCALE)]


def test_best_against_best_races_like_loop_structure_against_like():
    # JAX's scan (30 ms a step) is the fastest rung of all, but it runs a call's steps as one program:
    # the per-step race stays torch.compile (70 ms) against JAX jit (80 ms).
    found = verdicts_of(with_whole_loop(0.03, graph_s=0.05))
    head = found[0]
    assert "one step a dispatch" in head["question"] and "training, batch 64" in head["question"]
    assert head["sides"]["torch"]["tool"] == "compile" and head["sides"]["jax"]["tool"] == "jit"
    assert "jit_scan" not in head["sentence"] and "cuda_graph_steps" not in head["sentence"]
    # Whole loop against whole loop: the CUDA graph of K steps (50 ms) against the scan (30 ms).
    whole = [v for v in found if "in one program" in v["question"]]
    assert len(whole) == 1 and "JAX's lax.scan against PyTorch's CUDA graph of K steps" in whole[0]["question"]
    assert whole[0]["sides"]["torch"]["tool"] == "cuda_graph_steps" and whole[0]["sides"]["jax"]["tool"] == "jit_scan"
    assert whole[0]["winner"] == "jax" and "replayed from one CUDA graph" in \
        whole[0]["contestants"]["torch"]["implementation"]
    assert not any(v["question"].startswith(swin_v2.ACROSS) for v in found)
    text = swin_v2.seed_pairing_claim(with_whole_loop(0.03, graph_s=0.05), "train")
    assert "best against best with a call's steps in one program (PyTorch cuda_graph_steps, JAX jit_scan) gives " \
           "1.67×" in text


def test_without_a_pytorch_whole_loop_the_scan_gets_its_own_labelled_verdict():
    found = verdicts_of(with_whole_loop(0.03))  # on a CPU: no CUDA graph of K steps
    assert found[0]["sides"]["jax"]["tool"] == "jit"  # the per-step race is unchanged
    across = [v for v in found if v["question"].startswith(swin_v2.ACROSS)]
    assert len(across) == 1
    v = across[0]
    assert v["question"] == ("JAX's whole loop in one program (lax.scan) against PyTorch's best per-step dispatch: "
                             "which is faster at Swin V2 training, batch 64, float32?")
    assert v["sides"]["torch"]["tool"] == "compile" and v["sides"]["jax"]["tool"] == "jit_scan"
    assert v["sentence"].startswith(swin_v2.ACROSS + ": JAX (jit_scan) is 2.33× faster than PyTorch (compile)")
    assert "Not the same loop structure: JAX runs a call's 10 steps as one XLA program" in v["caveat"]
    assert "CUDA graphs need a CUDA GPU; this run is on the CPU" in v["sentence"]
    assert {c["tool"] for c in v["contestants"].values()} == {"compile", "jit_scan"}
    # The settings without a scan have no whole-loop verdict at all.
    assert not any("evaluation" in v["question"] and ("in one program" in v["question"]
                                                       or v["question"].startswith(swin_v2.ACROSS)) for v in found)


def test_a_gpu_run_under_hardware_only_has_the_timed_models_parity_and_no_accuracy():
    """The gpu profile (hardware_only) leaves the accuracy over seeds and the trained model's parity to the cpu
    run: the record holds neither an accuracy nor an accuracy verdict, and the timed model's parity heads it."""
    timed = {**PARITY, "max_abs_logit_err": 4e-6}
    metrics = swin_v2.summarise(parity_runs={"timed model": timed}, accuracy=None, speed=speed(),
                                model_config=CONFIG, speed_config=SPEED_CONFIG, num_train=60000, num_test=10000,
                                num_epochs=3, allow_tf32=False, timm_version="1.0.31", conditions={"tf32": False},
                                device="NVIDIA H100 80GB HBM3", on_gpu=True, batch_size=64,
                                parameters={"model": 148_000, "speed_model": 150_500}, seed_scale=SEED_SCALE)
    assert metrics["accuracy"] is None and metrics["parity"]["max_abs_logit_err"] == 4e-6
    assert not any("accuracy" in v["question"] for v in metrics["verdicts"])
    assert len(metrics["verdicts"]) == len(record()["verdicts"]) - 1
    assert "Is JAX really 27% faster" in swin_v2.conclusion(metrics)
    json.dumps(metrics)


def test_every_verdict_names_its_race_and_has_a_distinct_id():
    """Every verdict the post builds names its race (``race``, never its question's words), so that a reader's
    run is matched with the published one by id: per setting, the per-step race, the whole-loop race (against
    PyTorch's CUDA graph of K steps, or labelled against its per-step best), the seed's pairing; and accuracy."""
    found = record()["verdicts"] + verdicts_of(with_whole_loop(0.03, graph_s=0.05)) + verdicts_of(with_whole_loop(0.03))
    assert all(v["race"] for v in found), [v["question"] for v in found if not v["race"]]
    races = {v["race"] for v in found}
    assert {"float32/train/64/per-step/best", "float32/train/64/whole-loop/best",
            "float32/train/64/whole-loop-against-per-step", "float32/train/64/eager-against-jit", "accuracy"} <= races
    for run in (record()["verdicts"], verdicts_of(with_whole_loop(0.03, graph_s=0.05))):
        assert len({v["id"] for v in run}) == len(run)  # one id a race within a run
