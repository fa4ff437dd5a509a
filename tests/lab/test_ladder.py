"""The compile matrix: every rung of each framework's ladder runs and computes
what eager computes (float32 tolerance), the harness keeps failing and
not-applicable rungs as rows, and the same-conditions set-up records itself.
No timed assertions: speed belongs in the posts."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import torch
from flax import nnx

from sidebyside.lab import conditions, data, ladders, models, peaks, tables, timing, training

CUDA = torch.cuda.is_available()


@pytest.fixture(scope="module")
def arrays():
    return training.prepare(data.load(), num_train=512, num_test=100)


CONFIG = training.TrainConfig(num_epochs=1, batch_size=64, lr=3e-3, optimizer="adam", schedule="cosine",
                              warmup_epochs=0.25)
STEPS = 6


def _torch_losses(arrays, loop, config=CONFIG, **kwargs):
    torch.manual_seed(0)
    model = models.TorchMLP(hidden=32)
    trainer = training.TorchTrainer(model, arrays, config, loop=loop, **kwargs)
    batches = training.index_batches(trainer.n, config, 0)[:STEPS]
    losses = [float(trainer.run(batches[i:i + 1])[0]) for i in range(STEPS)]
    return losses, models.first_layer_weights(model)


@pytest.fixture(scope="module")
def eager(arrays):
    return _torch_losses(arrays, "device")


@pytest.mark.slow  # compiles a training step with Inductor
def test_torch_compile_of_the_whole_step_matches_eager(arrays, eager):
    losses, weights = _torch_losses(arrays, "compile")
    np.testing.assert_allclose(losses, eager[0], rtol=1e-5)
    np.testing.assert_allclose(weights, eager[1], atol=1e-5)  # the optimiser step ran inside, same updates


@pytest.mark.slow  # trains the MLP eagerly and in each CUDA-graph loop (3 s with its fixture)
@pytest.mark.parametrize("loop", training.CUDA_GRAPH_LOOPS)
def test_cuda_graph_step_uncaptured_matches_eager(arrays, eager, loop):
    # The code path of the CUDA-graph rungs (static index buffer, tensor learning rate, capturable/fused
    # optimiser where the device allows) without the capture itself, which needs a GPU.
    losses, weights = _torch_losses(arrays, loop, capture=False)
    np.testing.assert_allclose(losses, eager[0], rtol=1e-5)
    np.testing.assert_allclose(weights, eager[1], atol=1e-5)


def test_cuda_graph_capture_is_refused_on_a_cpu_with_a_clear_error(arrays):
    if CUDA:
        pytest.skip("a CUDA device is present")
    with pytest.raises(RuntimeError, match="CUDA device.*capture=False"):
        training.TorchTrainer(models.TorchMLP(hidden=8), arrays, CONFIG, loop="cuda_graph")


def _eager_and_captured_on_a_gpu(arrays, loop):
    """Two trainers on the GPU from the same weights: eager (``loop="device"``) and ``loop``; the batches."""
    torch.manual_seed(0)
    reference = models.TorchMLP(hidden=32).cuda()
    captured = models.TorchMLP(hidden=32).cuda()
    captured.load_state_dict(reference.state_dict())
    batches = training.index_batches(len(arrays.X_train), CONFIG, 0)[:STEPS]
    return (training.TorchTrainer(reference, arrays, CONFIG, loop="device"),
            training.TorchTrainer(captured, arrays, CONFIG, loop=loop), batches)


@pytest.mark.skipif(not CUDA, reason="CUDA graph capture needs a CUDA GPU")
@pytest.mark.parametrize("loop", training.CUDA_GRAPH_LOOPS)
def test_cuda_graph_capture_matches_eager_on_a_gpu(arrays, loop):
    ref, cap, batches = _eager_and_captured_on_a_gpu(arrays, loop)
    for i in range(STEPS):
        a = float(ref.run(batches[i:i + 1])[0])
        b = float(cap.run(batches[i:i + 1])[0])
        assert b == pytest.approx(a, rel=1e-4)


@pytest.mark.slow  # trains the MLP eagerly and k steps a call (2 s with its fixture)
def test_k_steps_in_one_graph_uncaptured_match_eager(arrays, eager):
    # The code path of the K-step CUDA graph (the batch gather, the per-step learning rate from a
    # static buffer and the loss sum inside; one call for all K steps) without the capture.
    torch.manual_seed(0)
    model = models.TorchMLP(hidden=32)
    trainer = training.TorchTrainer(model, arrays, CONFIG, loop="cuda_graph_steps", capture=False)
    total, steps = trainer.run(training.index_batches(trainer.n, CONFIG, 0)[:STEPS])
    assert steps == STEPS and trainer.step_count == STEPS
    assert float(total) == pytest.approx(sum(eager[0]), rel=1e-5)
    np.testing.assert_allclose(models.first_layer_weights(model), eager[1], atol=1e-5)


@pytest.mark.slow  # compiles or starts a fresh process
def test_compile_with_compiled_autograd_uncaptured_matches_eager_and_counts_graph_breaks(arrays, eager):
    losses, weights = _torch_losses(arrays, "compile_cuda_graph", capture=False)
    np.testing.assert_allclose(losses, eager[0], rtol=1e-5)
    np.testing.assert_allclose(weights, eager[1], atol=1e-5)
    torch.manual_seed(0)
    model = models.TorchMLP(hidden=32)
    trainer = training.TorchTrainer(model, arrays, CONFIG, loop="compile")
    before = models.first_layer_weights(model).copy()
    breaks = trainer.graph_breaks()
    assert isinstance(breaks, int) and breaks >= 1  # Dynamo stops at backward() without compiled autograd
    np.testing.assert_array_equal(models.first_layer_weights(model), before)  # counting trained nothing
    assert training.TorchTrainer(model, arrays, CONFIG, loop="device").graph_breaks() is None


def test_the_new_cuda_rungs_say_why_not_on_a_cpu(arrays):
    if CUDA:
        pytest.skip("a CUDA device is present")
    for loop in ("cuda_graph_steps", "compile_cuda_graph"):
        rung = training.torch_rung(lambda: models.TorchMLP(hidden=8), arrays, CONFIG, 2, loop=loop)
        assert isinstance(rung, timing.NotApplicable)


@pytest.mark.skipif(not CUDA, reason="CUDA graph capture needs a CUDA GPU")
@pytest.mark.parametrize("loop", ["cuda_graph_steps", "compile_cuda_graph"])
def test_k_step_graph_and_compiled_graphs_match_eager_on_a_gpu(arrays, loop):
    ref, cap, batches = _eager_and_captured_on_a_gpu(arrays, loop)
    expected = sum(float(ref.run(batches[i:i + 1])[0]) for i in range(STEPS))
    assert float(cap.run(batches)[0]) == pytest.approx(expected, rel=1e-4)
    np.testing.assert_allclose(models.first_layer_weights(cap.model), models.first_layer_weights(ref.model),
                               atol=1e-5)


@pytest.mark.slow
@pytest.mark.parametrize("loop", ["device", "scan"])
def test_jax_rungs_match_torch_eager(arrays, eager, loop):
    torch.manual_seed(0)
    torch_model = models.TorchMLP(hidden=32)
    flax_model = models.copy_torch_to_flax(torch_model, models.FlaxMLP(hidden=32, rngs=nnx.Rngs(0)))
    trainer = training.FlaxTrainer(flax_model, arrays, CONFIG, loop=loop)
    batches = training.index_batches(trainer.n, CONFIG, 0)[:STEPS]
    losses = [float(trainer.run(batches[i:i + 1])[0]) for i in range(STEPS)]
    np.testing.assert_allclose(losses, eager[0], rtol=1e-4)


# ----------------------------------------------------------------------------- precision rows

# bfloat16 keeps 8 significant bits: unit roundoff u = 2**-8 (0.39%). Under the mixed-precision policy the
# inputs, weights and activations of the network are rounded to bf16 (the logits carry about u of relative
# error: 0.34% for PyTorch, 0.40% for JAX at this size), the loss is taken in float32 from those logits, and
# six Adam steps from float32 master weights add a little divergence. Four unit roundoffs (1.6%) bound that
# with room (observed: 0.06% PyTorch, 0.5% JAX); a float32 step agrees to 1e-5, so the lower bound below
# shows the bf16 path was taken at all.
BF16_RTOL = 4 * 2.0**-8
FLOAT32_RTOL = 1e-5


def _assert_bf16_losses(losses, reference):
    np.testing.assert_allclose(losses, reference, rtol=BF16_RTOL)
    assert np.max(np.abs(np.asarray(losses) / np.asarray(reference) - 1)) > FLOAT32_RTOL, "no bf16 rounding seen"


@pytest.mark.slow
@pytest.mark.parametrize("loop,kwargs", [("compile", {}), ("cuda_graph", {"capture": False})],
                         ids=["compile", "cuda_graph-uncaptured"])
def test_torch_bf16_rung_matches_float32_eager_within_bf16_rounding(arrays, eager, loop, kwargs):
    losses, weights = _torch_losses(arrays, loop, precision="bfloat16", **kwargs)
    _assert_bf16_losses(losses, eager[0])
    assert weights.dtype == np.float32  # float32 master weights


@pytest.mark.slow
def test_flax_bf16_rung_matches_float32_eager_within_bf16_rounding(arrays, eager):
    torch.manual_seed(0)
    torch_model = models.TorchMLP(hidden=32)
    flax_model = models.copy_torch_to_flax(torch_model, models.FlaxMLP(hidden=32, rngs=nnx.Rngs(0)))
    trainer = training.FlaxTrainer(flax_model, arrays, CONFIG, loop="scan", precision="bfloat16")
    batches = training.index_batches(trainer.n, CONFIG, 0)[:STEPS]
    losses = [float(trainer.run(batches[i:i + 1])[0]) for i in range(STEPS)]
    _assert_bf16_losses(losses, eager[0])
    floats = [a.dtype for a in jax.tree_util.tree_leaves((trainer.params, trainer.opt_state))
              if jnp.issubdtype(a.dtype, jnp.floating)]
    assert floats and all(d == jnp.float32 for d in floats)  # master weights and Adam's moments stay float32


@pytest.mark.slow  # compiles or starts a fresh process
def test_bf16_rungs_time_on_both_sides(arrays):
    config = training.TrainConfig(num_epochs=1, batch_size=64, optimizer="adam")
    entries, timings = timing.ladder({
        "torch/eager": training.torch_rung(lambda: models.TorchMLP(hidden=16), arrays, config, 2, precision="bfloat16"),
        "jax/jit+scan": training.flax_rung(lambda: models.FlaxMLP(hidden=16, rngs=nnx.Rngs(0)), arrays, config, 2,
                                           precision="bfloat16"),
    }, repeats=2, min_repeat_s=0.0)
    assert set(timings) == {"torch/eager", "jax/jit+scan"}
    assert all(e["error"] is None and e["median_s"] > 0 for e in entries.values())


def test_tf32_rows_are_not_applicable_on_a_cpu_with_a_reason(arrays):
    if CUDA:
        pytest.skip("a CUDA device is present")
    candidates = {
        "torch/compile": training.torch_rung(models.TorchMLP, arrays, CONFIG, 2, loop="compile", precision="tf32"),
        "torch/cuda-graph": training.torch_rung(models.TorchMLP, arrays, CONFIG, 2, loop="cuda_graph",
                                                precision="tf32"),
        "jax/jit+scan": training.flax_rung(lambda: models.FlaxMLP(rngs=nnx.Rngs(0)), arrays, CONFIG, 2,
                                           precision="tf32"),
    }
    entries, timings = timing.ladder(candidates, repeats=2)
    assert timings == {}
    for entry in entries.values():
        assert entry["error"] is None and entry["median_s"] is None
        assert "TF32" in entry["not_applicable"] and "CPU" in entry["not_applicable"]
    with pytest.raises(timing.NotApplicable, match="TF32"):
        training.TorchTrainer(models.TorchMLP(hidden=8), arrays, CONFIG, precision="tf32")


def test_precision_not_applicable_reads_the_device():
    assert training.precision_not_applicable("float32", "cpu") is None
    assert training.precision_not_applicable("bfloat16", "cpu") is None
    assert "CPU" in training.precision_not_applicable("tf32", "cpu")
    assert training.precision_not_applicable("tf32", "cuda", (9, 0)) is None
    assert training.precision_not_applicable("tf32", "gpu", (8, 0)) is None
    assert "7.0" in training.precision_not_applicable("tf32", "cuda", (7, 0))
    with pytest.raises(ValueError, match="precision"):
        training.precision_not_applicable("float16", "cpu")


@pytest.mark.skipif(not CUDA, reason="TF32 needs an NVIDIA GPU")
def test_tf32_rung_matches_eager_on_a_gpu(arrays):
    # TF32 keeps 11 significant bits (u = 2**-11) in the matmuls' inputs: well inside the bf16 bound.
    torch.manual_seed(0)
    reference = models.TorchMLP(hidden=32).cuda()
    tf32_model = models.TorchMLP(hidden=32).cuda()
    tf32_model.load_state_dict(reference.state_dict())
    batches = training.index_batches(len(arrays.X_train), CONFIG, 0)[:STEPS]
    ref = training.TorchTrainer(reference, arrays, CONFIG, loop="device")
    fast = training.TorchTrainer(tf32_model, arrays, CONFIG, loop="device", precision="tf32")
    a = [float(ref.run(batches[i:i + 1])[0]) for i in range(STEPS)]
    b = [float(fast.run(batches[i:i + 1])[0]) for i in range(STEPS)]
    np.testing.assert_allclose(b, a, rtol=BF16_RTOL)
    assert not torch.backends.cuda.matmul.allow_tf32  # switched back off after each call


# ----------------------------------------------------------------------------- the harness


def test_ladder_keeps_failures_and_not_applicable_rows_in_order():
    def boom():
        raise RuntimeError("graph capture failed\nat line 3")

    entries, timings = timing.ladder({
        "torch/eager": lambda: sum(range(100)),
        "torch/cuda-graph": timing.NotApplicable("needs a CUDA GPU; this machine has none"),
        "torch/compile": boom,
        "jax/jit": lambda: sum(range(50)),
        "jax/jit+scan": ValueError("could not build"),
    }, needs={"torch/compile": "a working C++ compiler"}, repeats=3, min_repeat_s=0.001)
    assert list(entries) == ["torch/eager", "torch/cuda-graph", "torch/compile", "jax/jit", "jax/jit+scan"]
    assert set(timings) == {"torch/eager", "jax/jit"}
    assert entries["torch/compile"]["error"] == ("RuntimeError: graph capture failed at line 3 "
                                                 "(needs a working C++ compiler)")
    assert entries["torch/cuda-graph"]["not_applicable"].startswith("needs a CUDA GPU")
    assert entries["torch/cuda-graph"]["error"] is None and entries["torch/cuda-graph"]["median_s"] is None
    assert entries["jax/jit+scan"]["error"] == "ValueError: could not build"
    for name in ("torch/eager", "jax/jit"):
        e = entries[name]
        assert e["median_s"] > 0 and e["iqr_s"] >= 0 and e["compile_s"] >= 0 and e["error"] is None
    v = ladders.ladder(entries, question="q")
    assert "Not applicable on this machine: PyTorch cuda-graph" in v.sentence
    assert "Failed, kept as findings: PyTorch compile (RuntimeError" in v.sentence
    table = tables.ladder_table(entries)
    assert table.loc["PyTorch, cuda-graph", "status"].startswith("not applicable")
    assert table.loc["PyTorch, compile", "status"].startswith("failed")
    with pytest.raises(ValueError, match="framework"):
        timing.ladder({"eager": lambda: 1})


def test_ladder_verdict_sentence_follows_the_numbers():
    def entry(median):  # three processes, one figure each
        return ladders.ladder_entry({"median_s": median, "processes_s": [median * 0.99, median, median * 1.01]})

    entries = {"torch/eager": entry(2e-3), "torch/cuda-graph": ladders.ladder_entry(not_applicable="needs a CUDA GPU"),
               "jax/jit": entry(1e-3)}
    before = ladders.ladder(entries, question="q")
    assert before.winner == "jax" and "JAX (jit) is 2× faster" in before.sentence
    entries["torch/eager"] = entry(0.25e-3)
    after = ladders.ladder(entries, question="q")
    assert after.winner == "torch" and "PyTorch (eager) is 4× faster" in after.sentence
    assert before.sentence != after.sentence


# ----------------------------------------------------------------------------- same conditions


def test_same_conditions_refuses_to_run_after_jax_started():
    jax.numpy.zeros(1).block_until_ready()  # the backend is up
    with pytest.raises(RuntimeError, match="before JAX"):
        conditions.same_conditions()


def test_tf32_switch_sets_both_sides_and_restores():
    before = (torch.get_float32_matmul_precision(), jax.config.jax_default_matmul_precision)
    with conditions.tf32(True):
        assert torch.get_float32_matmul_precision() == "high" and torch.backends.cuda.matmul.allow_tf32
        assert jax.config.jax_default_matmul_precision == "tensorfloat32"
    assert (torch.get_float32_matmul_precision(), jax.config.jax_default_matmul_precision) == before


def test_conditions_sentence_states_threads_and_precision():
    base = {"threads": 2, "torch_threads": 2, "numpy_blas_threads": 2, "xla_cpu_cores": 2, "tf32": False,
            "torch_float32_matmul_precision": "highest", "jax_default_matmul_precision": "highest"}
    off = conditions.conditions_sentence(base, on_gpu=False)
    assert "TF32 off on both sides" in off and "set to 2" in off and "NumPy's BLAS 2" in off
    # XLA takes no thread count: the sentence says what it may use, never that it ran over its cores
    assert "XLA may use 2 cores" in off and "XLA over" not in off
    assert "XLA may use 1 core (" in conditions.conditions_sentence({**base, "xla_cpu_cores": 1}, on_gpu=False)
    on = conditions.conditions_sentence({**base, "tf32": True, "torch_float32_matmul_precision": "high",
                                     "jax_default_matmul_precision": "tensorfloat32"}, on_gpu=True)
    assert "TF32 allowed on both sides" in on and "on the GPU" in on and on != off


# ----------------------------------------------------------------------------- peaks


def test_device_peaks_by_name():
    assert peaks.memory_bandwidth("NVIDIA H100 80GB HBM3") == pytest.approx(3.35e12)
    assert peaks.memory_bandwidth("NVIDIA H200") == pytest.approx(4.8e12)
    assert peaks.peak_flops("NVIDIA H100 PCIe", "bf16_tensor") == pytest.approx(756e12)
    assert peaks.memory_bandwidth("NVIDIA A100-SXM4-40GB") == pytest.approx(1.555e12)
    assert peaks.memory_bandwidth("NVIDIA A100-SXM4-80GB") == pytest.approx(2.039e12)
    assert peaks.gpu_peaks("NVIDIA GH200 480GB") is None  # not an H200
    assert peaks.gpu_peaks("NVIDIA H100 NVL")[0] == "H100 NVL"
    with pytest.raises(KeyError, match="precision"):
        peaks.peak_flops("NVIDIA H100 80GB HBM3", "fp8")
    for model, p in peaks.GPU_PEAKS.items():
        assert p["bf16_tensor"] > p["tf32_tensor"] > p["fp32"] >= p["fp64_tensor"] >= p["fp64"], model
    assert peaks.floor_seconds(8e9, 4e12) == pytest.approx(2e-3)
    assert peaks.floor_seconds(8e9, None) is None


def test_measured_copy_bandwidth_and_cpu_peak_never_below_a_measured_rate():
    copy = peaks.measure_copy_bandwidth("cpu", nbytes=8 * 2**20, repeats=3)
    assert copy["bytes_per_s"] > 1e8 and copy["nbytes_moved"] == 2 * 8 * 2**20
    estimate, why = peaks.cpu_peak_flops("float32")
    assert why.startswith("estimated")
    raised, why = peaks.cpu_peak_flops("float32", measured=[2 * estimate])
    assert raised == 2 * estimate and why.startswith("measured")


def test_scaled_entries_keep_errors_and_compile_times():
    entries = {"torch/eager": ladders.ladder_entry({"median_s": 2e-3, "iqr_s": 1e-4, "compile_s": 0.5}),
               "torch/cuda-graph": ladders.ladder_entry(not_applicable="needs a CUDA GPU")}
    epoch = ladders.scaled(entries, 10)
    assert epoch["torch/eager"]["median_s"] == pytest.approx(2e-2) and epoch["torch/eager"]["iqr_s"] == pytest.approx(1e-3)
    assert epoch["torch/eager"]["compile_s"] == 0.5
    assert epoch["torch/cuda-graph"] == entries["torch/cuda-graph"]
    assert entries["torch/eager"]["median_s"] == 2e-3  # the input is left alone


def test_relative_reads_as_a_factor_of_at_least_one():
    assert ladders.relative(2.7, 1.0, "eager") == "2.7× the time of eager"
    assert ladders.relative(1.0, 1.5, "eager") == "1.5× faster than eager"
    # With a subject, the verb follows the direction: never "takes 1.5× faster".
    assert ladders.relative(2.7, 1.0, "eager", "NumPy") == "NumPy takes 2.7× the time of eager"
    assert ladders.relative(1.0, 1.5, "eager", "NumPy") == "NumPy is 1.5× faster than eager"


@pytest.mark.slow  # compiles or starts a fresh process
def test_same_conditions_pins_every_library_in_a_fresh_process():
    import json
    import os
    import subprocess
    import sys
    from pathlib import Path

    code = ("import json; from sidebyside.lab import conditions; c = conditions.same_conditions(threads=1); "
            "import jax, torch; c['jax_cpu_devices'] = len(jax.devices('cpu')); print(json.dumps(c))")
    src = str(Path(__file__).resolve().parents[2] / "src")
    env = {**os.environ, "PYTHONPATH": src + os.pathsep + os.environ.get("PYTHONPATH", "")}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300, check=True)
    c = json.loads(out.stdout.strip().splitlines()[-1])
    assert c["threads"] == c["torch_threads"] == c["xla_cpu_cores"] == 1
    assert c["numpy_blas_threads"] == 1  # threadpoolctl (pinned in requirements.txt) limited NumPy's BLAS
    assert "intra_op_parallelism_threads=1" in c["xla_flags"]
    assert c["tf32"] is False and c["torch_float32_matmul_precision"] == "highest"
    assert c["jax_default_matmul_precision"] == "highest" and not c["torch_cuda_matmul_allow_tf32"]
