"""sidebyside.posts.xla_and_scipy.report: the record's verdicts and the generated conclusion
follow the numbers (a synthetic record; no timing, no notebook)."""

from __future__ import annotations

import copy

import pandas as pd
from conftest import per_process

from sidebyside.lab import ladders
from sidebyside.posts.xla_and_scipy import report as rep


def _e(median_s, iqr_frac=0.02):
    return ladders.ladder_entry({"median_s": median_s, "iqr_s": median_s * iqr_frac,
                                 "processes_s": per_process(median_s, iqr_frac / 2)})


def _inputs():
    gpu_only = ladders.ladder_entry(not_applicable="TF32 is a tensor-core mode of NVIDIA GPUs")
    linalg = {}
    for op in ("matmul", "inverse"):
        for n in (256, 512):
            linalg[op, "cpu", "float32", n] = {"torch/eager": _e(2e-3 * n / 512), "jax/jit": _e(1e-3 * n / 512),
                                               "numpy/numpy": _e(3e-3 * n / 512)}
            linalg[op, "cpu", "tf32", n] = {"torch/eager": gpu_only, "jax/jit": gpu_only, "numpy/numpy": gpu_only}
    inverse_accuracy = pd.DataFrame([{"dtype": "float32", "device": "cpu", "JAX": 2e-4, "NumPy": 1e-12, "PyTorch": 3e-4},
                                     {"dtype": "float64", "device": "cpu", "JAX": 1e-12, "NumPy": 1e-12,
                                      "PyTorch": 2e-12}]).set_index(["dtype", "device"])
    precision = pd.DataFrame([
        {"device": "cpu", "framework": "JAX", "setting": "default (precision=None)", "relative error": 3e-7},
        {"device": "cpu", "framework": "JAX", "setting": 'precision="highest"', "relative error": 3e-7},
        {"device": "cpu", "framework": "PyTorch", "setting": 'default ("highest")', "relative error": 3e-7},
        {"device": "cpu", "framework": "PyTorch", "setting": 'set_float32_matmul_precision("high")',
         "relative error": 3e-7}]).set_index(["device", "framework", "setting"])
    opt = {"seconds": 2e-3, "iqr_s": 1e-4, "first_call_s": 0.5, "nit": 12, "nfev": 20, "params": [1.5, 3.0],
           "error": 1e-2, "error_vs_optimum": 1e-6, "rmse": 0.1, "grad_inf_norm": 1e-7, "success": True, "status": 0}
    optimise = {k: dict(opt) for k in rep.OPTIMISER_LABELS}
    optimise["jax_scipy_bfgs_legacy"].update(error_vs_optimum=0.3, status=3, success=False, params=[1.2, 2.5])
    retrace = pd.DataFrame([{"strategy": s, "traces": t, "first calls, total (ms)": 40.0 * t,
                             "first call, max (ms)": 40.0, "steady, median (ms)": 0.02}
                            for s, t in (("naive", 4), ("padding", 1), ("padding, length static", 4),
                                         ("buckets", 2))]).set_index("strategy")
    static = pd.DataFrame([{"approach": "new jit per call", "calls per pass": 8, "traces in both passes": 16,
                            "first pass (ms)": 300.0, "second pass (ms)": 290.0},
                           {"approach": "static argument", "calls per pass": 8, "traces in both passes": 2,
                            "first pass (ms)": 40.0, "second pass (ms)": 0.2}]).set_index("approach")
    return dict(conditions={"threads": 1}, startup={"jax_jit_startup_s": 0.1}, linalg_entries=linalg,
                device_peaks={("cpu", "float32"): (1000e9, "estimated from the clock"),
                              ("cpu", "tf32"): (None, "not applicable on a CPU")},
                inverse_accuracy=inverse_accuracy, n_acc=512, condition=812.3, precision_table=precision,
                precision_size=512, optimise=optimise, truth=[1.5, 3.0], optimum=[1.4999, 3.0002],
                retrace_table=retrace, lengths=[250, 500, 750, 1000], pad_to=1024, static_table=static)


def test_summarise_keeps_every_key_and_its_verdicts():
    metrics = rep.summarise(**_inputs())
    assert {"conditions", "startup_s", "matmul", "inverse", "verdicts", "peak_flops", "inverse_error",
            "matmul_precision", "optimise", "retrace", "retrace_lengths", "static_config"} <= set(metrics)
    assert set(metrics["matmul"]) == {"cpu/float32/256", "cpu/float32/512", "cpu/tf32/256", "cpu/tf32/512"}
    assert len(metrics["verdicts"]) == 2  # the float32 product and inverse at 512; TF32 did not run on a CPU
    assert metrics["verdicts"][0]["winner"] == "jax"


def test_conclusion_states_each_claim_from_the_record():
    text = rep.conclusion(rep.summarise(**_inputs()))
    assert text.startswith("**CPU, n = 512.** *matmul, float32*: Best against best: JAX (jit) is 2× faster")
    assert "*matmul, tf32*: not run here (TF32 is a tensor-core mode of NVIDIA GPUs)." in text
    assert "NumPy takes 3× the time of JAX." in text
    assert "Share of the peak (estimated from the clock): PyTorch 13.4%, JAX 26.8%, NumPy 8.95%." in text
    assert "condition number 812" in text and "(NumPy inverts float32 input in float64" in text
    assert "both full FP32 here" in text
    assert "4 of 5 methods find slope and offset within 1e-06 of the exact least-squares optimum (1.4999, 3.0002" in text
    assert "jax.scipy.optimize BFGS (legacy) stopped short of it" in text
    assert "cost the naive `jit` 4 compilations (160 ms" in text and "a static argument 2 times" in text


def test_sentences_change_when_the_numbers_change():
    inputs = _inputs()
    before = rep.conclusion(rep.summarise(**inputs))
    inputs["linalg_entries"]["matmul", "cpu", "float32", 512]["torch/eager"] = _e(0.25e-3)
    inputs["precision_table"].loc[("cpu", "JAX", "default (precision=None)"), "relative error"] = 2e-3
    after = rep.conclusion(rep.summarise(**inputs))
    assert "*matmul, float32*: Best against best: PyTorch (eager) is 4× faster" in after
    assert "JAX used TF32 where PyTorch did not" in after and "JAX used TF32" not in before
    tied = copy.deepcopy(_inputs())
    tied["linalg_entries"]["inverse", "cpu", "float32", 512]["torch/eager"] = _e(1.004e-3, iqr_frac=0.1)
    assert "*inverse, float32*: Best against best: PyTorch (eager) and JAX (jit) are within noise" in rep.conclusion(
        rep.summarise(**tied))


def test_optimise_note_names_the_methods_that_stopped_short():
    inputs = _inputs()
    note = rep.optimise_note(inputs["optimise"], inputs["truth"], inputs["optimum"])
    assert "4 of 5 methods land on the least-squares optimum to within 1e-06" in note
    assert "**jax.scipy.optimize BFGS (legacy) stopped short**: after 12 iterations at (1.2000, 2.5000)" in note
    assert "(line-search failure)" in note
    for o in inputs["optimise"].values():
        o["error_vs_optimum"] = 1e-6
    assert "stopped short" not in rep.optimise_note(inputs["optimise"], inputs["truth"], inputs["optimum"])


def test_numpy_sentence_reads_right_whichever_side_is_faster():
    metrics = rep.summarise(**_inputs())
    metrics["matmul"]["cpu/float32/512"]["ladder"]["numpy/numpy"]["median_s"] = 0.00025
    text = rep.conclusion(metrics)
    assert "NumPy is 4× faster than JAX." in text and "NumPy takes 4×" not in text


def _gpu_inputs():
    """The CPU inputs moved to a GPU, where the TF32 rows ran (PyTorch 1 ms, JAX 2 ms at 512)."""
    inputs = _inputs()
    inputs["linalg_entries"] = {(op, "gpu", mode, n): ({"torch/eager": _e(1e-3), "jax/jit": _e(2e-3)}
                                                       if mode == "tf32" else {k: e for k, e in entries.items()
                                                                               if not k.startswith("numpy/")})
                                for (op, _, mode, n), entries in inputs["linalg_entries"].items()}
    inputs["inverse_accuracy"] = inputs["inverse_accuracy"].rename(index={"cpu": "gpu"})
    inputs["precision_table"] = inputs["precision_table"].rename(index={"cpu": "gpu"})
    return inputs


def _check(applied, error):
    return {"precision": "tf32", "applied": applied, "error": error, "float32_error": 1e-6, "change": error,
            "reason": None if applied else "the tf32 result equals the float32 result (relative change 0), so the "
                                           "setting did not reach the computation"}


def test_a_tf32_row_is_raced_only_once_it_took_effect_on_both_sides():
    inputs = _gpu_inputs()
    # Unchecked: no race.
    unchecked = rep.summarise(**inputs)
    tf32 = [v for v in unchecked["verdicts"] if " in tf32 " in v["question"]]
    assert tf32 and all(v["label"] == "not applied" and v["winner"] is None for v in tf32)
    # JAX's solver ignored the setting (its result equals float32's): still no race, and the reason is given.
    inputs["precision_applied"] = {(op, "gpu", "tf32"): {"torch": _check(True, 1e-3), "jax": _check(False, 1e-6)}
                                   for op in ("matmul", "inverse")}
    half = rep.summarise(**inputs)
    inverse = next(v for v in half["verdicts"] if v["question"].startswith("Which framework computes a 512×512 "
                                                                          "inverse in tf32"))
    assert inverse["label"] == "not applied" and "the tf32 result equals the float32 result" in inverse["sentence"]
    # the inverse's is a finding of its own: the precision context does not reach cuSOLVER
    assert f"JAX: {rep.CUSOLVER_FINDING}" in inverse["sentence"]
    matmul = next(v for v in half["verdicts"] if " matmul in tf32 " in v["question"])
    assert "cuSOLVER" not in matmul["sentence"] and "JAX: the tf32 result equals" in matmul["sentence"]
    assert "not applied: JAX" in rep.linalg_claim(half, "gpu")
    # Both took effect: raced, with each side's error against float64 in the caveat.
    inputs["precision_applied"] = {(op, "gpu", "tf32"): {"torch": _check(True, 1e-3), "jax": _check(True, 2e-3)}
                                   for op in ("matmul", "inverse")}
    raced = next(v for v in rep.summarise(**inputs)["verdicts"] if " in tf32 " in v["question"])
    assert raced["winner"] == "torch"
    assert raced["caveat"] == ("Relative error against float64 in tf32: PyTorch 0.001 (float32 1.00e-06), JAX 0.002 "
                               "(float32 1.00e-06).")
    assert raced["scale"]["precision"] == "float32 data, TF32 allowed" and raced["scale"]["input"] == "512×512"


def test_scipy_is_said_to_run_on_the_cpu_when_the_others_ran_on_a_gpu():
    assert "SciPy's optimisers iterate on the CPU" in rep.optimise_claim(rep.summarise(**_gpu_inputs()))
    assert "SciPy's optimisers iterate on the CPU" not in rep.optimise_claim(rep.summarise(**_inputs()))
