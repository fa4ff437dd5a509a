"""Swin Transformer V2: the Flax port against timm, on the CPU at a tiny size.

The parity tolerances are float32 ones, for logits of order one:
|logit difference| <= 1e-5 and, for each parameter tensor's gradient,
||g_jax - g_torch|| / ||g_torch|| <= 1e-3 (summation order differs between
the frameworks; measured errors are about 3e-7 and 5e-5).

The optimisers, training steps and rungs are the notebook's paired cells (the code the post shows
is the code it trains and times): :func:`notebook` runs those cells, as they are, into a namespace.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib.util
import types

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
from conftest import ROOT, run_pairs  # noqa: E402
from flax import nnx  # noqa: E402

from sidebyside.lab import training  # noqa: E402
from sidebyside.posts import swin_v2 as swin  # noqa: E402

pytestmark = pytest.mark.usefixtures("float32_on_both_sides")

LOGIT_ATOL = 1e-5
GRAD_RTOL = 1e-3

# Stage 0: an 8x8 map in 4x4 windows, a plain then a shifted block; stage 1: patch merging, then a
# 4x4 map that one window covers (timm's rule: no shift there).
TINY = swin.SwinConfig(img_size=16, patch_size=2, in_chans=2, num_classes=5, embed_dim=8, depths=(2, 1),
                       num_heads=(2, 4), window_size=4, drop_path_rate=0.1)


#: The notebook's pairs that hold the networks, the training steps and the rungs.
WORK_PAIRS = ("model", "train", "ladder")


@functools.cache
def notebook() -> dict:
    """The namespace of the notebook's paired cells of :data:`WORK_PAIRS`, run in order with the
    set-up cell's imports and device (the model cells build their networks at :data:`TINY`)."""
    return run_pairs("06_swin_v2.py", WORK_PAIRS, {
        "np": np, "torch": torch, "F": F, "jax": jax, "jnp": jnp, "optax": optax, "nnx": nnx,
        "FlaxSwinV2": swin.FlaxSwinV2, "model_config": TINY,
        "torch_device": torch.device("cuda" if torch.cuda.is_available() else "cpu")})


@functools.cache
def flax_swin_on(device_type: str):
    """The notebook's ``flax_swin`` (its model pair), building the port for a PyTorch device of this type."""
    return run_pairs("06_swin_v2.py", ("model",), {
        "torch": torch, "jax": jax, "jnp": jnp, "nnx": nnx, "FlaxSwinV2": swin.FlaxSwinV2, "model_config": TINY,
        "torch_device": types.SimpleNamespace(type=device_type)})["flax_swin"]


def rungs() -> dict:
    """The notebook's rung builders, as :func:`swin.speed_ladder` takes them."""
    return {"torch_rung": notebook()["torch_rung"], "jax_rung": notebook()["jax_rung"]}


@pytest.fixture(scope="module")
def tiny_parity():
    return swin.parity(TINY, batch_size=3, seed=0)


def test_config_follows_timms_window_rule():
    assert TINY.resolutions() == [8, 4]
    assert TINY.window_and_shift(8) == (4, 2)
    assert TINY.window_and_shift(4) == (4, 0)
    with pytest.raises(ValueError, match="does not divide"):
        swin.SwinConfig(img_size=24, patch_size=2, window_size=8)


def test_tables_and_mask_match_timm():
    model = swin.torch_model(TINY)
    block = model.layers[0].blocks[1]
    coords, index = swin.relative_tables(4)
    np.testing.assert_allclose(coords, block.attn.relative_coords_table[0].numpy(), rtol=0, atol=1e-6)
    np.testing.assert_array_equal(index, block.attn.relative_position_index.numpy())
    np.testing.assert_array_equal(swin.shift_mask(8, 4, 2), block.attn_mask.numpy())
    assert swin.shift_mask(8, 4, 0) is None and model.layers[0].blocks[0].attn_mask is None


def test_every_timm_parameter_has_a_place_in_the_port():
    torch_model = swin.torch_model(TINY)
    # Shapes only (nnx.eval_shape): no arrays to initialise, nothing to compile.
    flax_model = nnx.eval_shape(lambda: swin.FlaxSwinV2(TINY, rngs=nnx.Rngs(0)))
    assert set(swin.flax_param_names(flax_model)) == {n for n, _ in torch_model.named_parameters()}
    assert sum(p.numel() for p in torch_model.parameters()) == sum(
        x.size for x in jax.tree_util.tree_leaves(nnx.state(flax_model, nnx.Param)))
    wider = swin.SwinConfig(**{**TINY.to_dict(), "depths": (2, 2)})
    other = nnx.eval_shape(lambda: swin.FlaxSwinV2(wider, rngs=nnx.Rngs(0)))
    with pytest.raises(ValueError, match="disagree on parameters"):
        swin.copy_timm_weights(torch_model, other)


@pytest.mark.slow  # the tiny parity fixture builds and ports both networks
def test_logits_agree_in_eval_mode(tiny_parity):
    assert tiny_parity["logit_scale"] > 0.5  # logits of order one, so the absolute tolerance means something
    assert tiny_parity["max_abs_logit_err"] <= LOGIT_ATOL


@pytest.mark.slow  # the tiny parity fixture builds and ports both networks
def test_gradients_of_one_training_step_agree(tiny_parity):
    assert tiny_parity["tensors_compared"] == len(list(swin.torch_model(TINY).parameters()))
    assert tiny_parity["loss_err"] <= 1e-5
    assert tiny_parity["max_rel_grad_err"] <= GRAD_RTOL, tiny_parity["worst_grad"]


@pytest.mark.slow  # a second full parity run (the negative check); the parity itself stays in the fast set
def test_parity_catches_a_missing_shift_mask(monkeypatch):
    """The check has teeth: a port without the shifted-window mask disagrees."""
    monkeypatch.setattr(swin.model, "shift_mask", lambda resolution, window, shift: None)
    broken = swin.parity(TINY, batch_size=3, seed=0)
    assert broken["max_abs_logit_err"] > 100 * LOGIT_ATOL


@pytest.mark.slow  # runs both networks in training mode over many draws
def test_stochastic_depth_drops_whole_samples_in_training_only():
    config = swin.SwinConfig(**{**TINY.to_dict(), "drop_path_rate": 0.5})
    block = swin.FlaxSwinV2(config, rngs=nnx.Rngs(0)).layers[1].blocks[0]  # the last block: rate 0.5
    assert block.drop_path1.rate == pytest.approx(0.5)
    x = jax.numpy.ones((64, 4, 4, 16))
    kept = np.asarray(block.drop_path1(x))
    per_sample = kept.reshape(64, -1)
    assert set(np.unique(per_sample)) <= {0.0, 2.0}  # dropped, or kept and scaled by 1/keep
    assert (per_sample.min(1) == per_sample.max(1)).all()  # one draw per sample
    assert 10 < (per_sample[:, 0] == 0).sum() < 54
    block.drop_path1.deterministic = True
    np.testing.assert_array_equal(np.asarray(block.drop_path1(x)), np.asarray(x))


@pytest.mark.slow
def test_initialisation_matches_timms_scheme():
    flax_model = swin.FlaxSwinV2(TINY, rngs=nnx.Rngs(0))
    block = flax_model.layers[1].blocks[0]
    assert float(np.abs(block.norm1.scale[...]).max()) == 0.0  # residual post-norms start at zero, as in timm
    fc1 = np.asarray(block.mlp.fc1.kernel[...])  # 16 x 64 weights: their std is 0.02 to about 2%
    assert abs(fc1.std() - 0.02) < 0.002
    np.testing.assert_allclose(np.asarray(block.attn.logit_scale[...]), np.log(10.0), rtol=1e-6)


@pytest.mark.slow  # compiles both AdamW updates over the whole network
def test_weight_decay_rule_is_timms():
    """Both of the notebook's AdamWs decay timm's choice: matrices only, never the position-bias
    MLP nor the logit scale. The JAX side is read from an update with zero gradients, which is
    the weight decay alone."""
    ns = notebook()
    torch_model = ns["torch_swin"](TINY)
    swin.randomise_torch_(torch_model, 1)  # no parameter left at zero, so each decayed one moves
    names = {p: n for n, p in torch_model.named_parameters()}
    groups = ns["torch_adamw"](torch_model, 1e-3, 0.5).param_groups
    torch_decayed = {names[p] for g in groups if g["weight_decay"] > 0 for p in g["params"]}
    expected = {n for n, p in torch_model.named_parameters()
                if p.ndim >= 2 and "cpb_mlp" not in n and "logit_scale" not in n}
    assert torch_decayed == expected
    assert "layers.0.blocks.0.attn.qkv.weight" in expected
    assert not {"layers.0.blocks.0.attn.cpb_mlp.0.weight", "layers.0.blocks.0.attn.logit_scale",
                "layers.0.blocks.0.norm1.weight"} & expected
    flax_model = swin.copy_timm_weights(torch_model, ns["flax_swin"](TINY, 0))
    params = nnx.state(flax_model, nnx.Param)
    tx = ns["jax_adamw"](params, 1e-3, 0.5)
    updates, _ = tx.update(jax.tree_util.tree_map(jnp.zeros_like, params), tx.init(params), params)
    flat = dict(nnx.to_flat_state(updates))
    jax_decayed = {n for n, path in swin.flax_param_names(flax_model).items()
                   if np.abs(np.asarray(flat[path].get_value())).max() > 0}
    assert jax_decayed == expected


def test_fashion_inputs_pad_and_repeat():
    X = np.random.default_rng(0).standard_normal((2, 28, 28)).astype(np.float32)
    out = swin.fashion_inputs(X, swin.SwinConfig(img_size=32, in_chans=3))
    assert out.shape == (2, 3, 32, 32)
    np.testing.assert_array_equal(out[:, 1, 2:30, 2:30], X)
    assert (out[:, :, :2] == 0).all()


@pytest.mark.slow  # runs the notebook's model, training and ladder cells (2 s with the JAX cache warm, 6 s cold)
def test_ladder_keeps_every_row_and_marks_gpu_only_tools():
    result = swin.speed_ladder(TINY, batch_size=2, phase="eval", torch_tools=("eager", "cuda_graph"), jax_tools=(),
                               steps=1, repeats=2, **rungs())
    eager = result["ladder"]["torch/eager"]
    assert eager["error"] is None and eager["median_s"] > 0
    assert eager["images_per_s"] == pytest.approx(2 / eager["median_s"])
    assert eager["q1_s"] <= eager["median_s"] <= eager["q3_s"]
    if not torch.cuda.is_available():
        graph = result["ladder"]["torch/cuda_graph"]
        assert graph["median_s"] is None and graph["error"] is None
        assert graph["not_applicable"] == "CUDA graphs need a CUDA GPU; this run is on the CPU"
    assert result["best"]["torch"] == "eager" and result["best"]["jax"] is None
    with pytest.raises(ValueError, match="unknown tools"):
        swin.speed_ladder(TINY, batch_size=2, phase="eval", torch_tools=("eagre",), jax_tools=(), **rungs())


@pytest.mark.slow  # compiles the port's whole evaluation loop under lax.scan
def test_a_whole_loop_rung_brings_its_rival_and_is_not_raced_per_step():
    result = swin.speed_ladder(TINY, batch_size=2, phase="eval", torch_tools=("eager",), jax_tools=("jit_scan",),
                               steps=2, repeats=2, **rungs())
    assert set(result["ladder"]) == {"torch/eager", "torch/cuda_graph_steps", "jax/jit_scan"}
    assert result["best"]["jax"] is None  # the scan is not a per-step rung
    assert result["best_whole_loop"]["jax"] == "jit_scan"
    if not torch.cuda.is_available():
        assert result["ladder"]["torch/cuda_graph_steps"]["not_applicable"]
        assert result["best_whole_loop"]["torch"] is None


@pytest.mark.slow  # compiles four bfloat16 steps and loops of both sides
@pytest.mark.parametrize("phase", ["train", "eval"])
def test_the_bfloat16_rungs_run_in_autocasts_policy(phase):
    """Each side's bfloat16 rung runs, per step and as a whole loop: PyTorch under torch.autocast, JAX the port
    built in autocast's dtypes (no cast of the parameters inside the step)."""
    result = swin.speed_ladder(TINY, batch_size=2, phase=phase, precision="bfloat16", torch_tools=("eager",),
                               jax_tools=("jit", "jit_scan"), steps=2, repeats=2, **rungs())
    for name in ("torch/eager", "jax/jit", "jax/jit_scan"):
        assert result["ladder"][name]["error"] is None and result["ladder"][name]["median_s"] > 0, name


def test_first_step_adds_up():
    entry = {"median_s": 0.1, "compile_s": 30.0, "allocation_s": 2.0, "error": None}
    split = swin.first_step(entry, batch_size=32, epoch_images=320)
    assert split["first_step_s"] == pytest.approx(32.1)
    assert split["first_epoch_s"] == pytest.approx(32.1 + 9 * 0.1)
    assert split["steady_epoch_s"] == pytest.approx(1.0)
    assert split["first_epoch_excess"] == pytest.approx(32.0 / 1.0)
    assert swin.first_step({"error": "boom"}, batch_size=32) == {"error": "boom"}


@pytest.mark.slow  # compiles a whole AdamW step on both sides
def test_one_adamw_step_agrees_with_timms_model():
    """The notebook's two optimisers and training steps: same weights, batch, schedule and
    weight-decay rule -> the same parameters after two steps (AdamW's second step uses its
    moment estimates).

    Tolerance, per tensor: ||update_jax - update_torch|| / ||update_torch|| <= 1e-2. Adam divides
    each gradient entry by its running RMS, so an entry whose gradient is near zero (where float32
    rounding decides its sign) can move by a fraction of the learning rate on one side only; a
    wrong schedule or weight-decay rule (lr * 0.5 * |w| on every entry) moves whole tensors."""
    ns = notebook()
    config = swin.SwinConfig(**{**TINY.to_dict(), "drop_path_rate": 0.0})
    train_config = training.TrainConfig(num_epochs=1, lr=1e-2, optimizer="adam", schedule="cosine",
                                        warmup_epochs=0.0, weight_decay=0.5)
    torch_model = swin.torch_model(config)
    swin.randomise_torch_(torch_model, 1)
    flax_model = swin.copy_timm_weights(torch_model, swin.FlaxSwinV2(config, rngs=nnx.Rngs(0)))
    rng = np.random.default_rng(1)
    X = rng.standard_normal((2, 3, 2, 16, 16)).astype(np.float32)
    y = rng.integers(0, 5, (2, 3))
    before = {n: p.detach().numpy().copy() for n, p in torch_model.named_parameters()}
    optimizer = ns["torch_adamw"](torch_model, train_config.lr, train_config.weight_decay)
    torch_step = ns["torch_train_step"](torch_model, optimizer)
    for step in range(2):
        for group in optimizer.param_groups:
            group["lr"] = float(training.learning_rate(step, train_config, 4))
        torch_step(torch.from_numpy(X[step]), torch.from_numpy(y[step]))
    flax_model.train()
    graphdef, params, rest = nnx.split(flax_model, nnx.Param, ...)
    tx = ns["jax_adamw"](params, lambda count: training.learning_rate(count, train_config, 4, xp=jnp),
                         train_config.weight_decay)
    opt_state = tx.init(params)
    step_fn = jax.jit(ns["jax_train_step"](graphdef, tx))
    for step in range(2):
        params, opt_state, rest, _ = step_fn(params, opt_state, rest, X[step].transpose(0, 2, 3, 1),
                                             y[step].astype(np.int32))
    flat = dict(nnx.to_flat_state(params))
    for name, path in swin.flax_param_names(flax_model).items():
        expected = dict(torch_model.named_parameters())[name].detach().numpy()
        got = swin.port._flax_to_torch_layout(np.asarray(flat[path].get_value()))
        update_torch, update_jax = expected - before[name], got - before[name]
        assert np.linalg.norm(update_torch) > 0, name
        assert np.linalg.norm(update_jax - update_torch) <= 1e-2 * np.linalg.norm(update_torch), name


@pytest.mark.slow  # compiles a whole training step
@pytest.mark.parametrize("precision", ["float32", "bfloat16"])
def test_the_jax_step_differentiates_the_parameters_alone_and_advances_the_streams(precision):
    """The notebook's JAX step takes the gradient with respect to the nnx.Param state alone (no
    allow_int over the stochastic-depth streams), keeps float32 parameters in either precision, and
    returns the streams the forward advanced, so that the next step draws new masks."""
    ns = notebook()
    model = ns["flax_swin"](swin.SwinConfig(**{**TINY.to_dict(), "drop_path_rate": 0.5}), 0, precision)
    model.train()
    graphdef, params, rest = nnx.split(model, nnx.Param, ...)
    tx = ns["jax_adamw"](params, 1e-3, 0.05)
    step = jax.jit(ns["jax_train_step"](graphdef, tx))
    x = np.random.default_rng(0).standard_normal((3, 16, 16, 2)).astype(np.float32)
    new_params, _, new_rest, loss = step(params, tx.init(params), rest, x, np.arange(3, dtype=np.int32) % 5)
    assert np.isfinite(float(loss))
    assert {a.dtype for a in jax.tree.leaves(new_params)} == {np.dtype(np.float32)}
    counts = [(np.asarray(a), np.asarray(b)) for a, b in zip(jax.tree.leaves(rest), jax.tree.leaves(new_rest))
              if jnp.issubdtype(a.dtype, jnp.integer)]  # the streams' counts (their keys stay)
    assert counts and any((b > a).any() for a, b in counts)  # the streams moved on
    for name in ("06_swin_v2.py", "08_real_models.py"):  # no Flax step differentiates integers (streams, counts)
        assert "allow_int" not in (ROOT / "notebooks" / name).read_text(), name


def _layer_dtypes(monkeypatch, tmodel, fmodel, x_nchw, device_type):
    """Each side's output dtype of every layer, by timm's name, under bfloat16 (PyTorch in torch.autocast,
    Flax in the dtypes fmodel was built with), and the dtypes of every softmax over attention logits."""
    torch_dtypes, flax_dtypes, softmax = {}, {}, {"torch": set(), "jax": set()}
    for name, module in tmodel.named_modules():
        if name and not list(module.children()):
            module.register_forward_hook(lambda m, i, out, name=name: torch_dtypes.__setitem__(name, str(out.dtype)))
        if isinstance(module, torch.nn.Softmax):
            module.register_forward_hook(lambda m, i, out: softmax["torch"].add(str(out.dtype)))
    paths = {id(m): swin.timm_name((*path, "kernel")).removesuffix(".weight") for path, m in nnx.iter_modules(fmodel)}
    for cls in (nnx.Linear, nnx.Conv, nnx.LayerNorm):
        def recorded(self, *args, _call=cls.__call__, **kwargs):
            out = _call(self, *args, **kwargs)
            flax_dtypes[paths[id(self)]] = str(out.dtype)
            return out
        monkeypatch.setattr(cls, "__call__", recorded)
    jax_softmax = jax.nn.softmax
    monkeypatch.setattr(jax.nn, "softmax", lambda a, **kw: softmax["jax"].add(str(a.dtype)) or jax_softmax(a, **kw))
    with torch.no_grad(), torch.autocast(device_type, dtype=torch.bfloat16):
        expected = tmodel(torch.from_numpy(x_nchw)).float().numpy()
    got = np.asarray(fmodel(jnp.asarray(x_nchw.transpose(0, 2, 3, 1))), np.float32)
    return torch_dtypes, flax_dtypes, softmax, expected, got


@pytest.mark.slow  # every layer of both networks, hooked, in bfloat16
def test_bfloat16_is_one_policy_on_both_sides(monkeypatch):
    """In bfloat16 every layer the two sides share outputs the same dtype (PyTorch under CPU autocast, the
    port built by the notebook's flax_swin for the CPU), the attention's softmax is float32 on both sides, the port's
    parameters stay float32, and the logits agree to bfloat16's precision."""
    config = dataclasses.replace(TINY, drop_path_rate=0.0)
    torch.manual_seed(0)
    tmodel = swin.torch_model(config)
    swin.randomise_torch_(tmodel, 0)
    fmodel = swin.copy_timm_weights(tmodel, flax_swin_on("cpu")(config, 0, "bfloat16"))
    tmodel.eval()
    fmodel.eval()
    assert {v.dtype for v in jax.tree.leaves(nnx.state(fmodel, nnx.Param))} == {jnp.dtype(jnp.float32)}
    x = np.random.default_rng(0).standard_normal((2, config.in_chans, config.img_size, config.img_size))
    torch_dtypes, flax_dtypes, softmax, expected, got = _layer_dtypes(monkeypatch, tmodel, fmodel,
                                                                      x.astype(np.float32), "cpu")
    shared = sorted(set(torch_dtypes) & set(flax_dtypes))
    # every Flax layer has its timm twin but qkv, which timm calls through F.linear (no hook fires)
    assert set(flax_dtypes) - set(torch_dtypes) == {n for n in flax_dtypes if n.endswith(".qkv")}
    assert len(shared) >= 20, shared
    assert {n: flax_dtypes[n] for n in shared} == {n: torch_dtypes[n].removeprefix("torch.") for n in shared}
    assert softmax == {"torch": {"torch.float32"}, "jax": {"float32"}}
    # on the CPU autocast runs LayerNorm in its input's dtype, so every shared layer is bfloat16 there
    assert {flax_dtypes[n] for n in shared} == {"bfloat16"}
    np.testing.assert_allclose(got, expected, atol=0.05 * np.abs(expected).max())


def test_the_gpu_policy_keeps_norms_and_the_residual_stream_in_float32():
    """The notebook's bfloat16 port for a GPU follows CUDA autocast's policy: LayerNorm (on its float32 list)
    outputs float32 and with it the residual stream, while the convolution and the linear layers output
    bfloat16; its parameters stay float32. Dtypes are fixed when JAX traces the code, so the port is built and run
    abstractly (nnx.eval_shape: the same dtypes and shapes, no arrays drawn or computed op by op)."""
    model = nnx.eval_shape(lambda: flax_swin_on("cuda")(TINY, 0, "bfloat16"))
    assert {v.dtype for v in jax.tree.leaves(nnx.state(model, nnx.Param))} == {jnp.dtype(jnp.float32)}
    model.eval()
    x = jnp.asarray(np.random.default_rng(0).standard_normal((2, 16, 16, 2)), jnp.float32)
    assert nnx.eval_shape(lambda m, x: m.features(x), model, x).dtype == jnp.float32
    assert nnx.eval_shape(lambda m, x: m(x), model, x).dtype == jnp.bfloat16
    assert nnx.eval_shape(lambda m, x: m.patch_embed.proj(x), model, x).dtype == jnp.bfloat16


@pytest.mark.slow  # runs the notebook's model, training and ladder cells (2 s with the JAX cache warm, 6 s cold)
def test_compiled_rungs_are_static_shapes(monkeypatch):
    """torch.compile's automatic dynamic shapes would give the second batch size a symbolic batch
    dimension: each compiled rung asks for static shapes."""
    calls = []
    monkeypatch.setattr(torch, "compile", lambda fn, **kwargs: calls.append(kwargs) or fn)
    X, y = swin.random_batches(TINY, 2, 1)
    rung = swin.ladder._torch_rung(TINY, "compile", "train", X, y, "float32", 0, notebook()["torch_rung"])
    assert rung.run is not None and calls == [{"dynamic": False}]


@pytest.mark.slow  # trains two seeds of both frameworks
def test_the_seeds_of_one_program_compile_its_training_step_once(monkeypatch):
    """Seeds differ in the arguments (weights, dropout streams, batches), not in the program: the
    accuracy runs compile the step once and reuse it, and a reused step trains exactly as a freshly
    compiled one; another batch size is another program and compiles again."""
    from sidebyside.posts.swin_v2 import train as swin_train

    compiles = []
    real = swin_train._compile_step
    monkeypatch.setattr(swin_train, "_compile_step", lambda *a, **k: compiles.append(1) or real(*a, **k))
    monkeypatch.setattr(swin_train, "_STEP_CACHE", {})
    rng = np.random.default_rng(0)
    X = rng.standard_normal((24, 2, 16, 16)).astype(np.float32)
    y = rng.integers(0, 5, 24)

    def run(seed, batch_size=8):
        config = training.TrainConfig(num_epochs=1, batch_size=batch_size, lr=1e-3, optimizer="adam",
                                      schedule="cosine", seed=seed)
        return swin.train_flax(swin.FlaxSwinV2(TINY, rngs=nnx.Rngs(seed)), X, y, X[:8], y[:8], config,
                               optimizer=notebook()["jax_adamw"], train_step=notebook()["jax_train_step"])

    first, second = run(0), run(1)
    assert len(compiles) == 1
    assert first.compile_seconds > 0 and second.compile_seconds == 0.0
    assert first.train_loss != second.train_loss  # the seed still decides the run
    again = run(1)  # reused once more: the same numbers as the run before
    assert again.train_loss == second.train_loss and len(compiles) == 1
    swin_train._STEP_CACHE.clear()
    fresh = run(1)  # compiled anew: the same numbers as the reused program
    assert fresh.train_loss == second.train_loss and len(compiles) == 2
    run(0, batch_size=12)
    assert len(compiles) == 3


def test_rungs_come_from_the_builders_passed():
    """The notebook's paired cells write the rungs: the ladder times what its builders return."""
    def torch_rung(config, tool, phase, X, y, precision, seed):
        def run():
            return torch.zeros(1)
        return run, (torch.nn.Linear(1, 1), None, [])

    def jax_rung(config, tool, phase, X, y, precision, seed):
        def run(step):
            return step(jnp.ones(2))
        return jax.jit(lambda x: 2 * x), (jnp.ones(2),), run

    rungs = swin.ladder._rungs(TINY, ("eager", "cuda_graph"), ("jit",), "eval", "float32", 2, 1, 0, torch_rung,
                               jax_rung)
    assert rungs["torch/eager"].run().item() == 0.0
    np.testing.assert_array_equal(np.asarray(rungs["jax/jit"].run()), [2.0, 2.0])
    assert rungs["jax/jit"].compile_s >= 0 and rungs["jax/jit"].run.func.__name__ == "run"
    if not torch.cuda.is_available():
        assert rungs["torch/cuda_graph"].not_applicable and rungs["torch/cuda_graph"].run is None
