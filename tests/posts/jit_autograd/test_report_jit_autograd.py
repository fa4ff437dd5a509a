"""sidebyside.posts.jit_autograd.report: the record's verdicts and the generated conclusion
follow the numbers (a synthetic record; no timing, no notebook)."""

from __future__ import annotations

import copy

import pytest
from conftest import per_process

from sidebyside.lab import ladders
from sidebyside.posts.jit_autograd import report as rep


def _e(median_s, iqr_frac=0.02, compile_s=0.1):
    return ladders.ladder_entry({"median_s": median_s, "iqr_s": median_s * iqr_frac, "compile_s": compile_s,
                                 "processes_s": per_process(median_s, iqr_frac / 2)})


def _record():
    jit = {}
    for n in (10, 1000, 100_000):
        ladder = {"torch/eager": _e(5e-6 + 4e-9 * n), "torch/compile": _e(8e-6 + 1e-9 * n),
                  "torch/compile-dynamic": _e(9e-6 + 1.1e-9 * n),
                  "torch/compile-cudagraphs": ladders.ladder_entry(not_applicable="CUDA graphs need a CUDA GPU"),
                  "jax/eager": _e(20e-6 + 5e-9 * n), "jax/jit": _e(4e-6 + 0.9e-9 * n), "numpy/numpy": _e(2e-6 + 3e-9 * n)}
        jit[str(n)] = {"ladder": ladder, "best": ladders.best(ladder), "memory_floor_s": 8 * n / 20e9}
    autograd = {}
    for n in (1000, 10_000):
        ladder = {"torch/autograd": _e(30e-6 + 2e-9 * n), "torch/func": _e(60e-6 + 2e-9 * n),
                  "jax/eager": _e(300e-6 + 2e-9 * n), "jax/jit": _e(10e-6 + 1e-9 * n),
                  "torch/loop": _e(40e-6 * n) if n <= 1000 else None}
        ladder = {k: v for k, v in ladder.items() if v}
        autograd[str(n)] = {"ladder": ladder, "best": ladders.best(rep.ladder_only(ladder))}
    hvp = {"torch/func": _e(2e-4), "jax/jit": _e(1e-4)}
    metrics = {
        "startup_s": {"torch_compile_startup_s": 12.0, "jax_jit_startup_s": 0.2},
        "bandwidth": {"cpu": {"floor uses": "measured copy"}},
        "jit": {"cpu": jit},
        "compile_s": {"cpu": {"jax_jit": 0.05, "torch_compile": 0.9, "torch_compile_dynamic": 1.5, "startup": {}}},
        "autograd": autograd,
        "hvp": {"10000": {"ladder": hvp, "best": ladders.best(hvp)}},
        "pitfall": {"cpu/jax.jit": {"synchronised median (µs), right": 124.0, "no sync (µs), WRONG": 6.0,
                                    "first call (µs), WRONG": 40_000.0, "no sync / right": 6.0 / 124.0}},
        "autograd_device": "cpu",
    }
    return metrics


def test_conclusion_states_each_claim_from_the_record():
    text = rep.conclusion(_record())
    assert "**CPU, 100,000 elements.** Best against best: JAX (jit) is" in text
    assert "**CPU, 10 elements**, where a synchronised call is mostly launch and wait" in text
    assert "back to back" not in text  # not measured in this record: nothing said
    assert "NumPy takes" in text and "the time of `jax.jit` there." in text and "of the measured copy bandwidth" in text
    assert "50 ms per new length for `jax.jit`" in text and "1.5 s once for `torch.compile(dynamic=True)`" in text
    assert "The original's per-element loop is the outlier: at 1,000 elements it takes 40 ms" in text
    assert "**Hessian-vector product** (10,000 elements): Best against best: JAX (jit) is 2× faster" in text
    assert "appears to take 6 µs instead of 124 µs (a factor of 20.7 too fast)" in text
    assert "not applicable" in text.lower()  # the CUDA-graph rung keeps its row, with its reason
    assert not text.startswith("#")  # the heading is the notebook's


def test_a_sentence_changes_when_the_numbers_change():
    metrics = _record()
    before = rep.jit_claim(metrics, "cpu")
    flipped = copy.deepcopy(metrics)
    flipped["jit"]["cpu"]["100000"]["ladder"]["torch/compile"] = _e(1e-6)
    after = rep.jit_claim(flipped, "cpu")
    assert "JAX (jit) is" in before and "PyTorch (compile) is" in after and before != after
    tied = copy.deepcopy(metrics)
    jax_s = tied["jit"]["cpu"]["100000"]["ladder"]["jax/jit"]["median_s"]
    tied["jit"]["cpu"]["100000"]["ladder"]["torch/compile"] = _e(jax_s * 1.005, iqr_frac=0.1)
    assert "within noise" in rep.jit_claim(tied, "cpu")


def test_pitfall_wording_follows_how_wrong_the_timer_is():
    metrics = _record()
    metrics["pitfall"]["cpu/jax.jit"]["no sync / right"] = 0.9
    assert "(0.9× the true time)" in rep.pitfall_claim(metrics)
    del metrics["pitfall"]["cpu/jax.jit"]
    assert rep.pitfall_claim(metrics) == ""


def test_dispatch_claim_tells_dispatch_bound_from_work_bound():
    flat = {str(n): {"torch/eager": _e(50e-6), "jax/jit": _e(50e-6)} for n in (10, 100, 1000)}
    assert "still dispatch-bound at 1,000 elements" in rep.dispatch_claim(flat)
    linear = {str(n): {"torch/eager": _e(1e-9 * n), "jax/jit": _e(2e-9 * n)} for n in (10, 100, 1000)}
    assert rep.dispatch_claim(linear).count("work-bound") == 2


def test_the_loop_stays_outside_the_verdicts_and_summarise_keeps_every_key():
    pd = pytest.importorskip("pandas")
    record = _record()
    jit_entries = {("cpu", int(n)): row["ladder"] for n, row in record["jit"]["cpu"].items()}
    grad_entries = {int(n): row["ladder"] for n, row in record["autograd"].items()}
    grad_entries[1000]["torch/loop"] = _e(1e-9)  # fastest of all, yet outside the ladder
    pitfall = pd.DataFrame([{"device": "cpu", "method": "jax.jit", **record["pitfall"]["cpu/jax.jit"]}]).set_index(
        ["device", "method"])
    metrics = rep.summarise(
        conditions={"threads": 1}, startup=record["startup_s"], bandwidth=record["bandwidth"], jit_entries=jit_entries,
        floors={k: 1e-6 for k in jit_entries}, compile_s=record["compile_s"], fits={("cpu", "jax/jit"): {"crossover n*": 5.0}},
        grad_entries=grad_entries, grad_errors={"jax/jit": {1000: 1e-7}}, hvp_entries=record["hvp"]["10000"]["ladder"],
        hvp_size=10_000, pitfall=pitfall, main_device="cpu")
    assert {"conditions", "startup_s", "bandwidth", "jit", "compile_s", "crossover", "autograd", "autograd_max_error",
            "hvp", "pitfall", "autograd_device", "verdicts"} <= set(metrics)
    assert metrics["autograd"]["1000"]["best"]["torch"] == "autograd"
    assert [v["question"].split(" faster")[0] for v in metrics["verdicts"]][0].startswith("Which framework evaluates f")
    assert len(metrics["verdicts"]) == 4 and metrics["crossover"] == {"cpu": {"jax/jit": 5.0}}


def test_numpy_sentence_reads_right_whichever_side_is_faster():
    metrics = _record()
    entries = metrics["jit"]["cpu"][max(metrics["jit"]["cpu"], key=int)]["ladder"]
    entries["numpy/numpy"] = {**entries["numpy/numpy"], "median_s": entries["jax/jit"]["median_s"] / 4}
    text = rep.conclusion(metrics)
    assert "NumPy is 4× faster than `jax.jit` there." in text and "NumPy takes" not in text


def test_back_to_back_throughput_is_its_own_verdict_beside_the_per_call_latency():
    metrics = _record()
    # Back to back, JAX's dispatch overlaps the work: its jit call costs 1 µs against PyTorch eager's 3 µs.
    metrics["jit_back_to_back"] = {"cpu": {"10": {"ladder": {"torch/eager": _e(3e-6), "jax/jit": _e(1e-6)}}}}
    found = rep.verdicts(metrics)
    throughput = [v for v in found if "throughput of back-to-back calls" in v.question]
    assert len(throughput) == 1 and throughput[0].winner == "jax" and throughput[0].factor == pytest.approx(3)
    assert "Issued back to back and waited for once" in rep.jit_claim(metrics, "cpu")
    # Per-call verdicts say what they time; every verdict states its scale.
    assert any("synchronised call at 10 floats" in v.question for v in found)
    assert all(v.scale["precision"] == "float32" and v.scale["device"] == "CPU" for v in found)
    assert found[0].scale["input"] == "100,000 float32 values"


def test_the_gradient_verdicts_ratio_interval_and_sentence_run_one_way():
    metrics = _record()
    n = max(metrics["autograd"], key=int)
    # A near tie, as the H100 run had (1.029 one way, 0.972 the other): the figures must agree.
    metrics["autograd"][n]["ladder"] = {"torch/autograd": _e(1.029e-4, 0.1), "jax/jit": _e(1e-4, 0.1)}
    v = rep.verdicts(metrics)[-2]
    assert v.label == "within noise" and v.ratio == pytest.approx(1.029, rel=0.05)
    assert "PyTorch's time over JAX's 1.03, 95% confidence interval" in v.sentence
    assert v.interval[0] < v.ratio < v.interval[1]


def _kernel_row(kernel_s, count=1.0, copy_s=0.0):
    return {"kernel_s": kernel_s, "copy_s": copy_s, "kernels_per_call": count, "calls": 20,
            "top": [{"name": "triton_poi_fused", "s": kernel_s, "count": count}], "error": None, "not_applicable": None}


def _gpu_record():
    """The CPU record with a GPU sweep beside it, whose rungs carry the profiler's kernel times."""
    metrics = _record()
    gpu = copy.deepcopy(metrics["jit"]["cpu"])
    for row in gpu.values():
        row["ladder"].pop("numpy/numpy")
    metrics["jit"]["gpu"] = gpu
    metrics["bandwidth"]["gpu"] = {"floor uses": "data sheet"}
    metrics["compile_s"]["gpu"] = metrics["compile_s"]["cpu"]
    # At 10 elements JAX's jit call (4.009 µs) runs one 1.5 µs kernel; PyTorch's best there, eager (5.04 µs), five
    # kernels of 1.8 µs in all and a 0.5 µs copy. At 100,000 elements the kernels take most of the call.
    metrics["jit_kernel"] = {"gpu": {
        "10": {"jax/jit": _kernel_row(1.5e-6), "torch/compile": _kernel_row(2e-6),
               "torch/eager": _kernel_row(1.8e-6, count=5, copy_s=0.5e-6)},
        "100000": {"jax/jit": _kernel_row(90e-6, count=1), "torch/compile": {"error": "RuntimeError: no CUPTI",
                                                                            "not_applicable": None}},
    }}
    return metrics


def test_kernel_claim_separates_the_kernel_from_launch_and_synchronisation():
    metrics = _gpu_record()
    text = rep.kernel_claim(metrics, "gpu")
    assert text.startswith("**GPU, kernel and call apart**")
    # JAX at 10 elements: 4.009 µs per call, 1.5 µs kernel, the other 2.51 µs (62.6%) launch and synchronisation.
    assert ("JAX's best (jit) takes 4.01 µs per synchronised call, of which its 1 kernel takes 1.5 µs on the GPU: "
            "the other 2.51 µs (62.6%) is launch and synchronisation.") in text
    # PyTorch's best at 10 elements is eager (5.04 µs), with a copy: 5.04 - 1.8 - 0.5 = 2.74 µs.
    assert ("PyTorch's best (eager) takes 5.04 µs per synchronised call, of which its 5 kernels take 1.8 µs on the "
            "GPU and its copies 500 ns: the other 2.74 µs (54.4%)") in text
    assert "PyTorch's best (compile): its kernel time could not be profiled (RuntimeError: no CUPTI)." in text
    assert rep.kernel_claim(metrics, "cpu") == ""  # no kernel times on the CPU
    conclusion = rep.conclusion({**metrics, "autograd_device": "gpu"})
    assert "kernel and call apart" in conclusion and rep.KERNEL_ON_GPU_ONLY not in conclusion


def test_kernel_claim_follows_the_numbers():
    metrics = _gpu_record()
    metrics["jit_kernel"]["gpu"]["10"]["jax/jit"] = _kernel_row(4.009e-6, count=3)
    text = rep.kernel_claim(metrics, "gpu")
    assert "its 3 kernels take 4.01 µs on the GPU: the GPU's work is the whole call" in text


def test_a_record_without_kernel_times_still_renders_and_says_where_they_are_measured():
    metrics = _record()  # a CPU run: no "jit_kernel" at all
    text = rep.conclusion(metrics)
    assert rep.KERNEL_ON_GPU_ONLY in text and "kernel and call apart" not in text
    metrics["jit_kernel"] = {}  # as summarise() writes it without kernel times
    assert rep.conclusion(metrics) == text


def test_summarise_stores_kernel_times_by_device_and_the_table_shows_them():
    pd = pytest.importorskip("pandas")
    record = _gpu_record()
    jit_entries = {(d, int(n)): row["ladder"] for d in ("cpu", "gpu") for n, row in record["jit"][d].items()}
    back = {("gpu", 10): {"torch/compile": _e(3e-6), "jax/jit": _e(2e-6)}}
    kernel = {("gpu", int(n)): rows for n, rows in record["jit_kernel"]["gpu"].items()}
    pitfall = pd.DataFrame([{"device": "cpu", "method": "jax.jit", **record["pitfall"]["cpu/jax.jit"]}]).set_index(
        ["device", "method"])
    common = dict(conditions={"threads": 1}, startup=record["startup_s"], bandwidth=record["bandwidth"],
                  jit_entries=jit_entries, floors={k: 1e-6 for k in jit_entries}, compile_s=record["compile_s"],
                  fits={}, grad_entries={int(n): r["ladder"] for n, r in record["autograd"].items()},
                  grad_errors={}, hvp_entries=record["hvp"]["10000"]["ladder"], hvp_size=10_000, pitfall=pitfall,
                  main_device="gpu")
    metrics = rep.summarise(**common, back_to_back=back, kernel=kernel)
    assert set(metrics["jit_kernel"]) == {"gpu"}  # only the device that was profiled
    assert metrics["jit_kernel"]["gpu"]["10"]["jax/jit"]["kernel_s"] == 1.5e-6
    assert rep.summarise(**common)["jit_kernel"] == {}
    table = rep.kernel_table(jit_entries, back, kernel, labels={"jax/jit": "jax.jit"})
    assert list(table.columns) == ["per call (µs)", "back to back (µs)", "kernel (µs)", "kernels per call",
                                   "copies (µs)", "launch and sync (µs)", "launch and sync (%)"]
    row = table.loc[("gpu", 10, "jax.jit")]
    assert row["per call (µs)"] == pytest.approx(4.009) and row["back to back (µs)"] == pytest.approx(2.0)
    assert row["kernel (µs)"] == pytest.approx(1.5) and row["launch and sync (µs)"] == pytest.approx(2.509)
    assert ("gpu", 100000, "torch/compile") not in table.index  # its profile failed: no kernel figure
    assert rep.kernel_table(jit_entries, back, {}).empty


def test_the_cores_each_best_kept_busy_are_the_stated_cause_only_where_they_differ():
    metrics = _record()
    assert rep.verdicts(metrics)[0].cause == "" and "The cause:" not in rep.conclusion(metrics)
    # the best rungs at the largest size are torch/compile and jax/jit
    metrics["cores_busy"] = {"cpu": {"100000": {"torch/eager": 1.9, "torch/compile": 1.95, "jax/jit": 1.02}}}
    head = rep.verdicts(metrics)[0]
    assert head.cause == ("PyTorch's best (compile) kept 1.95 cores busy per call and JAX's best (jit) kept 1.02 "
                          "cores busy per call (CPU time over wall time, measured in this run).")
    assert head.to_dict()["cause"] == head.cause and f"The cause: {head.cause}" in rep.conclusion(metrics)
    metrics["conditions"] = {"xla_cpu_cores": 16, "xla_flags": ""}  # the options XLA's CPU runtime ran with are named
    assert rep.verdicts(metrics)[0].cause.endswith("measured in this run). XLA's CPU runtime ran with its default "
                                                   "options (no XLA_FLAGS) over the 16 cores this process may use.")
    metrics["conditions"]["xla_flags"] = "--xla_cpu_multi_thread_eigen=false"
    assert rep.verdicts(metrics)[0].cause.endswith("XLA_FLAGS=--xla_cpu_multi_thread_eigen=false.")
    metrics["cores_busy"]["cpu"]["100000"]["jax/jit"] = 1.6  # within half a core: no cause
    assert rep.verdicts(metrics)[0].cause == ""
    del metrics["cores_busy"]["cpu"]["100000"]["jax/jit"]  # not measured for one side: no cause
    assert rep.verdicts(metrics)[0].cause == ""
