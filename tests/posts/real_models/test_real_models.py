"""real-models: the ports against PyTorch, the weight copy, FLOP counts, generation with the cache.

The rungs, training step and generation loop are the notebook's paired cells (the code the post
shows is the code it times): :func:`notebook` runs those cells, as they are, into a namespace.

Fast tests run every model at the notebook's smoke size; the full-size ports run one forward on
the CPU each (slow). Tolerances are the post's: logits within 1e-4 of their scale, the gradients
in float64 within ``port.GRAD_TOLERANCE``; the two frameworks' FLOP counts within
``report.FLOP_TOLERANCE`` at smoke size (XLA also counts elementwise operations), and at full size
within 5% of each other, with PyTorch's count of a forward, attention included, within 2% of the
published figure (2 FLOPs per published multiply-add; GPT-2's plus attention at its length).
"""

from __future__ import annotations

import functools
import importlib.util
import os

import numpy as np
import pytest

torch = pytest.importorskip("torch")
# timm is looked for, not imported: importing it costs every test worker seconds at collection
if importlib.util.find_spec("timm") is None:
    pytest.skip("timm is not installed", allow_module_level=True)
jax = pytest.importorskip("jax")

import jax.numpy as jnp  # noqa: E402
import optax  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from conftest import run_pairs  # noqa: E402
from flax import nnx  # noqa: E402

from sidebyside.posts.real_models import attention, config, gpt2, port, report, vision, work  # noqa: E402

# Real models at smoke size still build ResNet-50, ViT-B/16 and GPT-2 graphs: a minute and more in all.
pytestmark = [pytest.mark.usefixtures("float32_on_both_sides"), pytest.mark.slow]

SMOKE = {"resnet50": {"layers": [1, 1, 1, 1], "channels": [8, 8, 16, 16]},
         "vit_b16": {"depth": 2, "embed_dim": 32, "num_heads": 2, "patch_size": 8},
         "gpt2": {"n_layer": 2, "n_embd": 32, "n_head": 2, "n_positions": 64, "vocab_size": 512}}
KEYS = list(SMOKE)
#: At width 32 the softmax, GELU and normalisation XLA counts are up to about 40% of the matmuls' FLOPs.
SMOKE_FLOP_TOLERANCE = 0.6


def smoke(key: str) -> config.ModelSpec:
    return config.spec(key, SMOKE[key], img_size=32, num_classes=10, seq_len=16)


#: The notebook's pairs that hold the work and the rungs.
WORK_PAIRS = ("train", "generate", "serve", "ladder")


@functools.cache
def notebook() -> dict:
    """The namespace of the notebook's paired cells of :data:`WORK_PAIRS`, run in order with the
    set-up cell's imports."""
    return run_pairs("08_real_models.py", WORK_PAIRS, {
        "functools": functools, "os": os, "np": np, "torch": torch, "F": F, "jax": jax, "jnp": jnp,
        "optax": optax, "nnx": nnx})


def rungs() -> dict:
    """The notebook's rungs, as :func:`work.build` takes them."""
    return {"torch_rung": notebook()["torch_rung"], "jax_rung": notebook()["jax_rung"]}


@pytest.mark.parametrize("key", KEYS)
def test_smoke_parity_logits_and_gradients(key, executed):
    """port.parity at smoke size, on each model: as the notebook's smoke execution of this test run measured
    it (its record) for the models its smoke profile checks (``parity_models``), measured here for the others."""
    record = executed("real-models").record["metrics"]["parity"]
    assert record, "the smoke execution checks at least one model's parity"
    p = record[key] if key in record else port.parity(smoke(key), batch=2, seed=0)
    assert p["relative_logit_diff"] <= port.LOGIT_TOLERANCE, p
    assert p["grad_diff"] <= port.GRAD_TOLERANCE and p["max_relative_grad_diff"] <= port.GRAD_TOLERANCE, p
    assert p["within_tolerance"] and p["tensors"] > 4
    # float32 rounding is seen, and is far above what the float64 comparison allows
    assert port.GRAD_TOLERANCE < p["float32_grad_diff"] < 1e-2 and 0 < p["torch_float32_error"] < 1e-2, p


def test_flax_gpt2_computes_in_the_dtype_of_its_parameters():
    """Cast to bfloat16 for a step, the Flax GPT-2 computes in bfloat16 end to end (nnx.Embed would
    otherwise keep the float32 it was built with, and so would everything after the embedding)."""
    s = smoke("gpt2")
    graphdef, params = nnx.split(config.flax_model(s))
    low = jax.tree_util.tree_map(lambda a: a.astype(jnp.bfloat16) if jnp.issubdtype(a.dtype, jnp.floating) else a,
                                 params)
    tokens = jnp.asarray(port.inputs(s, 2)[0].astype("int32"))
    assert nnx.merge(graphdef, low)(tokens).dtype == jnp.bfloat16
    assert nnx.merge(graphdef, params)(tokens).dtype == jnp.float32


@pytest.mark.parametrize("key", KEYS)
def test_bfloat16_is_one_policy_on_both_sides(key, monkeypatch):
    """In bfloat16 every layer the two sides share outputs the same dtype (PyTorch under
    torch.autocast, the Flax model built with dtype=jnp.bfloat16), the Flax parameters stay float32,
    and so do the float32 layers (norms, embeddings) on both sides; the logits agree to bfloat16's
    precision."""
    s = smoke(key)
    t, f = port.pair(s, dtype=jnp.bfloat16)
    t.eval()
    f.eval()
    assert {v.dtype for v in jax.tree.leaves(nnx.state(f, nnx.Param))} == {jnp.dtype(jnp.float32)}
    torch_dtypes, flax_dtypes = {}, {}
    for name, module in t.named_modules():
        if name and not list(module.children()):
            module.register_forward_hook(lambda m, i, out, name=name: torch_dtypes.__setitem__(name, str(out.dtype)))
    paths = {id(m): ".".join(map(str, path)) for path, m in nnx.iter_modules(f)}
    for cls in (nnx.Linear, nnx.Conv, nnx.LayerNorm, nnx.BatchNorm, nnx.Embed):
        def recorded(self, *args, _call=cls.__call__, **kwargs):
            out = _call(self, *args, **kwargs)
            flax_dtypes[paths[id(self)]] = str(out.dtype)
            return out
        monkeypatch.setattr(cls, "__call__", recorded)
    x, _ = port.inputs(s, 2)
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
        expected = t(torch.from_numpy(x)).float().numpy()
    got = np.asarray(f(jnp.asarray(x.astype("int32")) if s.kind == "gpt2" else jnp.asarray(x.transpose(0, 2, 3, 1))),
                     np.float32)
    shared = sorted(set(torch_dtypes) & set(flax_dtypes))
    assert len(shared) >= 8, shared
    assert {n: flax_dtypes[n] for n in shared} == {n: torch_dtypes[n].removeprefix("torch.") for n in shared}
    # ResNet computes every layer in bfloat16 (BatchNorm's output too); the transformers keep their norms in float32
    assert {flax_dtypes[n] for n in shared} == ({"bfloat16"} if key == "resnet50" else {"bfloat16", "float32"})
    np.testing.assert_allclose(got, expected, atol=0.05 * np.abs(expected).max())


@pytest.mark.parametrize("key", KEYS)
def test_weight_copy_round_trips(key):
    t, f = port.pair(smoke(key))
    back = port.flax_state_dict(f)
    expected = {k: v.numpy() for k, v in t.state_dict().items() if not k.endswith("num_batches_tracked")}
    assert set(back) == set(expected)
    for name, value in back.items():
        np.testing.assert_array_equal(value, expected[name], err_msg=name)


def test_weight_copy_refuses_a_model_of_another_shape():
    t = config.torch_model(smoke("vit_b16"))
    other = config.flax_model(config.spec("vit_b16", {**SMOKE["vit_b16"], "depth": 1}, img_size=32, num_classes=10))
    with pytest.raises(ValueError, match="only in PyTorch"):
        port.copy_torch_to_flax(t, other)


def test_a_wrong_port_fails_parity(monkeypatch):
    """The check can fail: a ReLU in GPT-2's Flax MLP where PyTorch's has a GELU."""
    def relu(self, x):
        return self.c_proj(jax.nn.relu(self.c_fc(x)))
    monkeypatch.setattr(gpt2.FlaxMLP, "__call__", relu)
    spec = config.spec("gpt2", {**SMOKE["gpt2"], "n_embd": 64}, seq_len=16)
    t, f = port.pair(spec, initialise=False)
    x, _ = port.inputs(spec, 2)
    with torch.no_grad():
        ref = t(torch.from_numpy(x)).numpy()
    got = np.asarray(f(jnp.asarray(x, jnp.int32)))
    assert np.abs(ref - got).max() / np.abs(ref).max() > port.LOGIT_TOLERANCE


def test_generation_with_the_cache_equals_generation_without():
    spec = smoke("gpt2")
    t, f = port.pair(spec, initialise=False)
    t.eval()
    f.eval()
    prompt, _ = port.inputs(spec, 3)
    prompt = prompt[:, :5]
    cached = notebook()["torch_generate"](t, torch.from_numpy(prompt), 7).numpy()
    uncached = gpt2.torch_generate_uncached(t, torch.from_numpy(prompt), 7).numpy()
    graphdef, params = nnx.split(f)
    jitted = jax.jit(notebook()["jax_generate"], static_argnums=(0, 4), donate_argnums=(3,))
    jax_cached = np.asarray(jitted(graphdef, params, jnp.asarray(prompt, jnp.int32), f.new_cache(3, 12), 7)[0])
    jax_uncached = np.asarray(gpt2.jax_generate_uncached(f, jnp.asarray(prompt, jnp.int32), 7))
    assert cached.shape == (3, 7)
    np.testing.assert_array_equal(cached, uncached)
    np.testing.assert_array_equal(jax_cached, jax_uncached)
    np.testing.assert_array_equal(cached, jax_cached)


@pytest.mark.parametrize("key,workload", [("resnet50", "infer"), ("vit_b16", "infer"), ("vit_b16", "train"),
                                          ("gpt2", "train")])
def test_both_frameworks_flop_counts_agree(key, workload):
    counts = work.flops(smoke(key), workload, 2, prompt_len=4, new_tokens=4, flax_init=False, **rungs())
    assert counts["torch"] > 0 and counts["jax"] > 0
    assert abs(counts["jax"] / counts["torch"] - 1) <= SMOKE_FLOP_TOLERANCE, counts


def test_ladder_builds_every_rung_and_keeps_what_cannot_run():
    built = work.build(smoke("vit_b16"), "infer", 2, torch_tools=("eager", "cuda-graph"), jax_tools=("jit",),
                       **rungs())
    assert set(built) == {"torch/eager", "torch/cuda-graph", "jax/jit"}
    out_t, out_j = built["torch/eager"](), built["jax/jit"]()
    np.testing.assert_allclose(out_t.numpy(), np.asarray(out_j), rtol=1e-4, atol=1e-5)
    if not torch.cuda.is_available():
        assert isinstance(built["torch/cuda-graph"], Exception)


def test_jax_training_rung_updates_in_place_and_lowers_the_loss():
    built = work.build(smoke("resnet50"), "train", 4, torch_tools=("eager",), jax_tools=("jit",), **rungs())
    torch_losses = [float(built["torch/eager"]()) for _ in range(3)]
    jax_losses = [float(built["jax/jit"]()) for _ in range(3)]
    np.testing.assert_allclose(torch_losses, jax_losses, rtol=1e-3)
    assert jax_losses[-1] < jax_losses[0]


@pytest.mark.slow
@pytest.mark.parametrize("key", KEYS)
def test_full_size_port_forward_matches_on_the_cpu(key):
    """At full size, PyTorch's weights copied into the Flax model built empty (the user's path, initialisers
    first, is tested at smoke size) give PyTorch's logits, the Flax forward in one jitted program as the
    notebook runs it; PyTorch's model has the published parameter count."""
    spec = config.spec(key, {})
    t, f = port.pair(spec, initialise=False)
    if key == "resnet50":
        port.randomise_batchnorm_(t)
        port.copy_torch_to_flax(t, f)
    t.eval()
    f.eval()
    x, _ = port.inputs(spec, 1)
    with torch.no_grad():
        ref = t(torch.from_numpy(x)).numpy()
    forward = nnx.jit(lambda model, inputs: model(inputs))
    got = np.asarray(forward(f, jnp.asarray(x, jnp.int32) if key == "gpt2" else jnp.asarray(x.transpose(0, 2, 3, 1))))
    assert np.abs(ref - got).max() / np.abs(ref).max() <= port.LOGIT_TOLERANCE
    assert config.param_count(t) == config.PUBLISHED[key]["parameters"]


@pytest.mark.slow
@pytest.mark.parametrize("key", KEYS)
def test_full_size_flops_match_each_other_and_the_published_figure(key):
    """A full-size forward (one image; GPT-2: one sequence of 1,024 tokens), attention included on both
    sides: PyTorch's count within 2% of the published figure, XLA's within 5% of PyTorch's, and
    attention's part of PyTorch's count the analytic one (on the CPU FlopCounterMode counts the
    attention kernel as 0 by itself)."""
    s = config.spec(key, {})
    counts = work.flops(s, "infer", 1, flax_init=False, **rungs())  # a count needs no initialiser to run
    tokens = s.seq_len if key == "gpt2" else None
    record = report.flops_record(counts, model=key, workload="infer", batch=1, tokens=tokens, full_size=True)
    assert abs(record["ratio"] - 1) <= 0.05, record
    assert abs(record["torch_over_published"] - 1) <= 0.02, record
    tokens_in = {"resnet50": 0, "vit_b16": (224 // 16) ** 2 + 1, "gpt2": s.seq_len}[key]
    assert counts["torch_attention"] == work.attention_flops(s, 1, tokens_in), counts


@pytest.mark.parametrize("causal", [False, True])
def test_attention_flops_are_counted_alike_on_both_sides(causal):
    """One attention alone, forward and with its backward: FlopCounterMode (given attention's formula)
    counts the analytic QKᵀ and AV exactly (the full square, causal or not; the backward four more
    products), and XLA's cost_analysis of jax.nn.dot_product_attention the same within the softmax's
    elementwise work (the XLA implementation computes the full square and masks it)."""
    from torch.utils.flop_counter import FlopCounterMode

    B, H, S, D = 2, 4, 64, 64
    analytic = 2 * 2 * B * H * S * S * D
    spec = config.spec("gpt2", {"n_layer": 1, "n_embd": H * D, "n_head": H})
    assert work.attention_flops(spec, B, S) == analytic
    assert work.attention_flops(spec, B, S, backward=True) == 3 * analytic
    q, k, v = (torch.randn(B, H, S, D, requires_grad=True) for _ in range(3))
    with FlopCounterMode(display=False) as bare:
        F.scaled_dot_product_attention(q, k, v, is_causal=causal)
    with FlopCounterMode(display=False, custom_mapping=work._attention_formulas()) as forward:
        F.scaled_dot_product_attention(q, k, v, is_causal=causal)
    with FlopCounterMode(display=False, custom_mapping=work._attention_formulas()) as both:
        (F.scaled_dot_product_attention(q, k, v, is_causal=causal) ** 2).sum().backward()
    assert bare.get_total_flops() in (0, analytic)  # 0: the CPU's kernel, which the counter lacks
    assert forward.get_total_flops() == analytic and both.get_total_flops() == 3 * analytic

    def f(q, k, v):
        return (jax.nn.dot_product_attention(q, k, v, is_causal=causal) ** 2).sum()

    x = jnp.ones((B, S, H, D))
    xla = [work._xla_flops(jax.jit(g).lower(x, x, x).compile().cost_analysis())
           for g in (f, jax.grad(f, argnums=(0, 1, 2)))]
    assert analytic <= xla[0] <= 1.05 * analytic, xla
    assert 3 * analytic <= xla[1] <= 1.05 * 3 * analytic, xla


def test_float64_attention_takes_jaxs_steps_with_a_float64_softmax():
    """jax.nn.dot_product_attention computes the softmax in float32 whatever its inputs (1e-7 relative
    in float64, above the float64 parity tolerance): float64 inputs take its XLA steps with the softmax
    in float64 and agree with PyTorch's float64 attention to rounding; float32 inputs go to
    jax.nn.dot_product_attention itself."""
    rng = np.random.default_rng(0)
    q, k, v = (rng.standard_normal((2, 9, 3, 8)) for _ in range(3))
    mask = np.tril(np.ones((9, 9), bool))[None, None]
    for kw in ({}, {"is_causal": True}, {"mask": mask}):
        ref = F.scaled_dot_product_attention(*(torch.from_numpy(a).transpose(1, 2) for a in (q, k, v)),
                                             is_causal=bool(kw)).transpose(1, 2).numpy()
        with jax.enable_x64(True):
            exact = np.asarray(attention.dot_product_attention(*map(jnp.asarray, (q, k, v)), **kw))
            jaxs = np.asarray(jax.nn.dot_product_attention(*map(jnp.asarray, (q, k, v)), **kw))
        assert np.abs(exact - ref).max() < 1e-13 and np.abs(jaxs - ref).max() > 1e-10, kw
        q32, k32, v32 = (jnp.asarray(a, jnp.float32) for a in (q, k, v))
        np.testing.assert_array_equal(attention.dot_product_attention(q32, k32, v32, **kw),
                                      jax.nn.dot_product_attention(q32, k32, v32, **kw))


def test_the_record_names_each_sides_attention_and_the_implementation_reaches_the_model():
    s = config.spec("vit_b16", SMOKE["vit_b16"], img_size=32, num_classes=10, attention="xla")
    assert s.to_dict()["attention"] == {"torch": "F.scaled_dot_product_attention",
                                        "jax": "jax.nn.dot_product_attention (implementation='xla')"}
    assert smoke("gpt2").to_dict()["attention"]["jax"] == "jax.nn.dot_product_attention (implementation=None)"
    assert smoke("resnet50").to_dict()["attention"] is None
    vit = config.flax_model(s)
    assert isinstance(vit.blocks[0].attn, vision.Attention) and vit.blocks[0].attn.implementation == "xla"
    g = config.flax_model(config.spec("gpt2", SMOKE["gpt2"], attention="xla"))
    assert g.h[0].attn.implementation == "xla"
    assert config.torch_model(s).blocks[0].attn.fused_attn  # timm's: F.scaled_dot_product_attention


def test_compiling_a_training_step_logs_nothing_into_the_post():
    """torch logs two lines on a CPU when it compiles an AdamW step (AOTInductor's search for a CUDA runtime,
    Dynamo leaving out Optimizer.step's profiler span); the publisher refuses a log line in a post, and the
    rungs' module quiets both wherever it is imported."""
    import subprocess
    import sys

    code = ("import torch, sidebyside.posts.real_models.work\n"
            "m = torch.nn.Linear(4, 4); opt = torch.optim.AdamW(m.parameters())\n"
            "@torch.compile\n"
            "def step(x):\n"
            "    opt.zero_grad(); m(x).sum().backward(); opt.step()\n"
            "step(torch.randn(2, 4))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=600)
    assert "No CUDA runtime" not in out.stderr and "will be ignored" not in out.stderr, out.stderr


def test_generation_through_a_compiled_model_equals_eager():
    """The compiled rung of generation runs the same loop through ``torch.compile(model)``."""
    spec = smoke("gpt2")
    t = config.torch_model(spec).eval()
    prompt = torch.from_numpy(port.inputs(spec, 2)[0][:, :5])
    generate = notebook()["torch_generate"]
    eager = generate(t, prompt, 4).numpy()
    compiled = generate(t, prompt, 4, step=torch.compile(t, dynamic=False)).numpy()
    np.testing.assert_array_equal(compiled, eager)
