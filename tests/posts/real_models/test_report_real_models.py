"""real-models' report: the record, verdicts and key table from synthetic ladders (no framework runs)."""

from __future__ import annotations

import pytest

from sidebyside.lab import ladders
from sidebyside.posts.real_models import report


def _entry(median: float, processes=(1.0, 1.02, 0.98), firsts=(5.0, 1.5, 1.4)) -> dict:
    return {"median_s": median, "q1_s": median * 0.98, "q3_s": median * 1.02, "iqr_s": median * 0.04,
            "min_s": median * 0.97, "first_s": firsts[0], "compile_s": None, "repeats": 9, "number": 1,
            "synchronized": True, "processes_s": [median * p for p in processes],
            "first_per_process_s": list(firsts), "floor": 0.02, "busy": [], "error": None, "not_applicable": None}


SPEC = {"key": "resnet50", "img_size": 224, "seq_len": 1024, "parameters": 25_557_032}


def _setting():
    entries = {"torch/eager": _entry(0.10), "torch/compile": _entry(0.05),
               "torch/aoti": ladders.ladder_entry(error="RuntimeError: no C++ compiler"),
               "torch/cuda-graph": ladders.ladder_entry(not_applicable="CUDA graphs need a CUDA GPU"),
               "jax/jit": _entry(0.08)}
    return report.setting_record(entries, model="resnet50", workload="train", batch=32, precision="float32",
                                 spec=SPEC, opts={"prompt_len": 8, "new_tokens": 8},
                                 build_s={"torch/aoti": 3.0}, peak_flops=1e12, model_flops=2e10)


def test_setting_record_derives_compile_cold_and_warm_and_work_per_second():
    s = _setting()
    compiled = s["ladder"]["torch/compile"]
    assert compiled["compile_cold_s"] == pytest.approx(5.0 - 0.05)
    assert compiled["compile_warm_s"] == pytest.approx(1.45 - 0.05)
    assert compiled["per_s"] == pytest.approx(32 / 0.05)
    assert compiled["mfu"] == pytest.approx(2e10 / 0.05 / 1e12)
    assert s["best"] == {"torch": "compile", "jax": "jit", "ratio": pytest.approx(0.05 / 0.08)}
    assert s["ladder"]["torch/aoti"]["error"].startswith("RuntimeError")


def test_summarise_draws_best_against_best_then_out_of_the_box_and_the_key_row():
    s = _setting()
    s["memory"] = {"torch": {"peak_rss_bytes": 2**30, "device_peak_bytes": None}, "jax": {"error": "x"}}
    metrics = report.summarise(parity={}, settings={"resnet50/train/32/float32": s}, flops={},
                               models={"resnet50": SPEC}, device="CPU", profile_note="note", bf16={},
                               peak_source=None, conditions={})
    first, second = metrics["verdicts"]
    assert first["winner"] == "torch" and "Best against best" in first["sentence"]
    assert "Failed, kept as findings" in first["sentence"] and "no C++ compiler" in first["sentence"]
    assert second["question"].startswith("Out of the box") and second["winner"] == "jax"
    row = metrics["key_table"][0]
    assert row["winner"].startswith("PyTorch") and row["torch"]["tool"] == "torch.compile"
    assert row["torch"]["peak_bytes"] == 2**30 and row["jax"]["peak_bytes"] is None
    table = report.key_table(metrics)
    assert table.shape[0] == 1 and table.iloc[0]["peak memory (PyTorch / JAX)"].endswith("/ n/a")
    assert "PyTorch wins 1" in report.conclusion(metrics)
    import matplotlib

    matplotlib.use("Agg")
    fig = report.key_figure(metrics)
    assert fig.axes and fig.axes[0].tables
    flops = report.flops_record({"torch": 8.2e9, "jax": 8.6e9}, model="resnet50", workload="infer", batch=1,
                                tokens=None, full_size=True)
    assert report.flops_table({"flops": {"resnet50/infer/1": flops}}).shape == (1, 8)
    parity = {"resnet50": {"tensors": 161, "max_abs_logit_diff": 1e-3, "logit_scale": 1e3, "relative_logit_diff": 1e-6,
                           "max_relative_grad_diff": 1e-6, "worst_grad_tensor": "fc.weight", "within_tolerance": True,
                           "logit_tolerance": 1e-4, "grad_tolerance": 1e-8, "grad_diff": 1e-12,
                           "float32_grad_diff": 0.02, "torch_float32_error": 0.014}}
    assert report.parity_table(parity).shape[0] == 1
    claim = report.parity_claim(parity)
    assert "ResNet-50" in claim and "within tolerance" in claim and "0.014" in claim


def test_flops_record_checks_the_published_figure_at_full_size_only():
    full = report.flops_record({"torch": 8.2e9, "jax": 8.6e9}, model="resnet50", workload="infer", batch=1,
                               tokens=None, full_size=True)
    assert full["agree"] and full["published"] == pytest.approx(8.2e9)
    assert full["torch_over_published"] == pytest.approx(1.0)
    small = report.flops_record({"torch": 1e6, "jax": 2e6}, model="resnet50", workload="infer", batch=1,
                                tokens=None, full_size=False)
    assert not small["agree"] and small["published"] is None


CPU_PEAK = ("estimated: 2 cores × 2.45 GHz (current clock from /proc/cpuinfo) × 32 float32 FLOPs/cycle "
            "(AVX-512, 2 FMA units assumed)")


def _metrics(peak_source):
    s = _setting()
    return report.summarise(parity={}, settings={"resnet50/train/32/float32": s}, flops={},
                            models={"resnet50": SPEC}, device="CPU", profile_note="note", bf16={},
                            peak_source=peak_source, conditions={})


def test_mfu_names_its_peak_and_where_it_comes_from():
    """A CPU's peak is named as the estimate from its current clock and vector width; a GPU's as the
    device's nominal figure; the key table's MFU cell says the peak it divides by, and its caption
    the source."""
    cpu = _metrics(CPU_PEAK)
    assert cpu["settings"]["resnet50/train/32/float32"]["peak_flops"] == 1e12
    assert cpu["peak"] == {"flops": {"float32": 1e12}, "source": CPU_PEAK, "kind": "estimate"}
    caption = report.mfu_caption(cpu)
    assert "1 TFLOP/s in float32" in caption and "an estimate" in caption and "current clock" in caption
    assert "vector width" in caption and "attention included" in caption
    table = report.key_table(cpu)
    assert table.attrs["caption"] == caption
    assert table.iloc[0]["MFU (PyTorch / JAX) of the peak"] == "40% / 25% of 1 TFLOP/s (estimate)"
    gpu = _metrics("NVIDIA's data sheet")
    assert gpu["peak"]["kind"] == "nominal" and "nominal" in report.mfu_caption(gpu)
    assert "NVIDIA's data sheet" in report.mfu_caption(gpu)
    none = _metrics(None)
    assert none["peak"]["kind"] is None and "source not recorded" in report.mfu_caption(none)
    assert "not computed" in report.mfu_caption({"peak": report.peak_record({}, CPU_PEAK)})


def test_flops_record_adds_attention_to_gpt2s_published_figure():
    """GPT-2's published figure is 2 FLOPs per parameter per token plus attention at the sequence's
    length (QKᵀ and AV over the full square); the image models' published figures hold theirs."""
    counts = {"torch": 2.9e11, "jax": 3.0e11, "torch_attention": 3.87e10}
    r = report.flops_record(counts, model="gpt2", workload="infer", batch=2, tokens=2048, full_size=True)
    attention = 12 * 2 * 2 * 2 * 1024 * 1024 * 768
    assert r["published"] == pytest.approx(2 * 124_439_808 * 2048 + attention)
    assert r["torch_attention"] == 3.87e10 and "full square" in r["attention_counted"]
    vit = report.flops_record(counts, model="vit_b16", workload="infer", batch=1, tokens=None, full_size=True)
    assert vit["published"] == pytest.approx(2 * 17.6e9)


def test_generation_verdicts_name_the_loop_structure_they_race_and_every_verdict_has_an_id():
    """JAX's generation is one program (a lax.fori_loop), PyTorch's a Python loop of steps: both of a
    generation setting's verdicts say so; a training setting's say nothing of it. Each verdict's id
    is its setting's race, never its text."""
    gpt = {"key": "gpt2", "img_size": 224, "seq_len": 1024, "parameters": 124_439_808}
    entries = {"torch/eager": _entry(0.10), "jax/jit": _entry(0.08)}
    generate = report.setting_record(entries, model="gpt2", workload="generate", batch=1, precision="float32",
                                     spec=gpt, opts={"prompt_len": 8, "new_tokens": 8}, build_s={},
                                     peak_flops=None, model_flops=1e9)
    metrics = report.summarise(parity={}, settings={"gpt2/generate/1/float32": generate,
                                                    "resnet50/train/32/float32": _setting()}, flops={},
                               models={"gpt2": gpt, "resnet50": SPEC}, device="CPU", profile_note="note", bf16={},
                               peak_source=None, conditions={})
    by_id = {v["id"].split("@")[0]: v for v in metrics["verdicts"]}
    assert set(by_id) == {"gpt2/generate/1/float32/best", "gpt2/generate/1/float32/out-of-the-box",
                          "resnet50/train/32/float32/best", "resnet50/train/32/float32/out-of-the-box"}
    for name, v in by_id.items():
        named = report.GENERATION_STRUCTURE in v["sentence"]
        assert named == name.startswith("gpt2/generate"), name
