"""PyTorch's weights into Flax NNX and back, and the parity check that both compute one function.

:func:`copy_torch_to_flax` copies every tensor of a PyTorch ``state_dict`` (parameters and
BatchNorm running statistics; ``num_batches_tracked`` aside) into the Flax model with the same
names (:func:`torch_name`), in Flax's layouts (a conv's ``(out, in, kh, kw)`` as
``(kh, kw, in, out)``, a linear weight transposed), and refuses when either side holds a tensor
the other lacks. :func:`flax_state_dict` is the way back, so the copy can be shown to round-trip.

:func:`parity` runs both models on the same input: float32 logits in evaluation mode, their
largest difference relative to the logits' scale (the largest |logit|), and the gradients of one
training step's loss (cross-entropy; GPT-2's next-token loss; training mode) for every parameter,
computed in float64 on both sides, all of them as one vector ``‖g_JAX − g_PyTorch‖ / ‖g_PyTorch‖``
(and the worst single tensor, reported); the float32 gradients are reported beside, with PyTorch's
own float32 rounding. For ResNet the BatchNorm weights are randomised first and its running
statistics calibrated on another batch (:func:`randomise_batchnorm_`): timm starts each block's
last BatchNorm at zero, which would make every residual branch an identity and hide a wrong port.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from sidebyside.posts.real_models import config

__all__ = ["LOGIT_TOLERANCE", "GRAD_TOLERANCE", "torch_name", "copy_torch_to_flax", "flax_state_dict",
           "flax_from_torch", "randomise_batchnorm_", "pair", "inputs", "parity"]

#: Largest logit difference allowed, relative to the largest |logit| (float32).
LOGIT_TOLERANCE = 1e-4
#: Largest relative difference allowed of all gradients taken as one vector, computed in float64 on both
#: sides (a correct port agrees to about 1e-12 there; a wrong one differs by order one). In float32 the
#: gradients of a deep network at a small batch carry rounding of order 1e-2 on either framework, which
#: would hide a small error in the port; that figure is reported beside.
GRAD_TOLERANCE = 1e-8

_LEAF = {"kernel": "weight", "scale": "weight", "embedding": "weight", "mean": "running_mean", "var": "running_var"}


def torch_name(path) -> str:
    """A Flax state path as the PyTorch ``state_dict`` key (``layer1/0/bn1/scale`` -> ``layer1.0.bn1.weight``)."""
    parts = [str(p) for p in path]
    parts[-1] = _LEAF.get(parts[-1], parts[-1])
    return ".".join(parts)


def _flat(flax_model) -> dict[str, Any]:
    state = nnx.state(flax_model, (nnx.Param, nnx.BatchStat))
    return {torch_name(path): (path, var) for path, var in nnx.to_flat_state(state)}


def _to_flax(value: np.ndarray, leaf: str) -> np.ndarray:
    if value.ndim == 4:
        return value.transpose(2, 3, 1, 0)  # conv (out, in, kh, kw) -> (kh, kw, in, out)
    if value.ndim == 2 and leaf == "kernel":
        return value.T  # linear (out, in) -> (in, out)
    return value


def _to_torch(value: np.ndarray, leaf: str) -> np.ndarray:
    if value.ndim == 4:
        return value.transpose(3, 2, 0, 1)
    if value.ndim == 2 and leaf == "kernel":
        return value.T
    return value


def _torch_tensors(torch_model) -> dict[str, np.ndarray]:
    """The ``state_dict`` as NumPy arrays: float64 tensors as they are, any other floating type as float32."""
    tensors = {k: v.detach().cpu() for k, v in torch_model.state_dict().items() if not k.endswith("num_batches_tracked")}
    return {k: (v if v.dtype.is_floating_point and v.dtype.itemsize == 8 else v.float()).numpy() for k, v in tensors.items()}


def copy_torch_to_flax(torch_model, flax_model):
    """Copy every tensor of ``torch_model.state_dict()`` into ``flax_model`` (in place; returns it)."""
    tensors, flat = _torch_tensors(torch_model), _flat(flax_model)
    only_torch, only_flax = sorted(set(tensors) - set(flat)), sorted(set(flat) - set(tensors))
    if only_torch or only_flax:
        raise ValueError(f"PyTorch and Flax disagree on tensors: only in PyTorch {only_torch[:5]}, "
                         f"only in Flax {only_flax[:5]}")
    for name, (path, var) in flat.items():
        value = _to_flax(tensors[name], str(path[-1]))
        if value.shape != tuple(var.shape):
            raise ValueError(f"{name}: PyTorch {tensors[name].shape} does not fit Flax {tuple(var.shape)}")
        var.set_value(jnp.asarray(value))
    return flax_model


def flax_state_dict(flax_model) -> dict[str, np.ndarray]:
    """The Flax model's tensors as a PyTorch ``state_dict`` would hold them (NumPy arrays)."""
    return {name: _to_torch(np.asarray(var.get_value()), str(path[-1])) for name, (path, var) in _flat(flax_model).items()}


def pair(s: config.ModelSpec, seed: int = 0, dtype=None, *, initialise: bool = True):
    """``(torch_model, flax_model)`` with the same weights: PyTorch's state_dict copied into Flax
    (``dtype``: the Flax model's compute dtype, as :func:`sidebyside.posts.real_models.config.flax_model`
    takes it). ``initialise``: the Flax model draws its own weights first, as a user's would, and the
    copy overwrites them; False builds it empty (:func:`flax_from_torch`), the same model without
    running its initialisers (XLA compiles each for every weight shape: seconds on a CPU)."""
    t = config.torch_model(s, seed)
    if not initialise:
        return t, flax_from_torch(s, t, seed, dtype)
    f = config.flax_model(s, seed, dtype)
    copy_torch_to_flax(t, f)
    return t, f


def flax_from_torch(s: config.ModelSpec, torch_model, seed: int = 0, dtype=None):
    """The Flax model at ``s``'s size holding ``torch_model``'s weights, built empty (``nnx.eval_shape``:
    no initialiser runs) and filled by :func:`copy_torch_to_flax`, which sets every tensor; what
    :func:`parity` compares."""
    return copy_torch_to_flax(torch_model, nnx.eval_shape(lambda: config.flax_model(s, seed, dtype)))


def randomise_batchnorm_(torch_model, seed: int = 0, calibrate=None) -> None:
    """BatchNorm weights and biases drawn at random (in place); the running statistics then set
    to those of the batch ``calibrate`` (NCHW), so that evaluation keeps activations of order one
    through the depth (random running statistics would let them grow to logits of order 1e3,
    where float32 rounding, not the port, dominates a gradient comparison)."""
    import torch

    g = torch.Generator().manual_seed(seed)
    norms = [m for m in torch_model.modules() if isinstance(m, torch.nn.BatchNorm2d)]
    with torch.no_grad():
        for m in norms:
            m.weight.copy_(0.5 + torch.rand(m.weight.shape, generator=g))
            m.bias.copy_(0.1 * torch.randn(m.bias.shape, generator=g))
            m.running_mean.copy_(0.1 * torch.randn(m.running_mean.shape, generator=g))
            m.running_var.copy_(0.5 + torch.rand(m.running_var.shape, generator=g))
        if calibrate is not None:
            momenta = [m.momentum for m in norms]
            for m in norms:
                m.reset_running_stats()
                m.momentum = None  # a cumulative average: after one batch, that batch's statistics
            was_training = torch_model.training
            torch_model.train()
            torch_model(torch.as_tensor(calibrate))
            torch_model.train(was_training)
            for m, momentum in zip(norms, momenta):
                m.momentum = momentum


def inputs(spec, batch: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Random inputs and targets: NCHW images and class labels, or GPT-2 tokens and the next tokens."""
    rng = np.random.default_rng(seed)
    if spec.kind == "gpt2":
        vocab = spec.kwargs.get("vocab_size", 50257)
        tokens = rng.integers(0, vocab, (batch, spec.seq_len + 1))
        return tokens[:, :-1].astype(np.int64), tokens[:, 1:].astype(np.int64)
    x = rng.standard_normal((batch, 3, spec.img_size, spec.img_size), dtype=np.float32)
    return x, rng.integers(0, spec.num_classes, batch).astype(np.int64)


def _to_jax_input(spec, x: np.ndarray):
    return jnp.asarray(x.astype(np.int32)) if spec.kind == "gpt2" else jnp.asarray(x.transpose(0, 2, 3, 1))


def _jax_loss(spec, logits, y):
    import optax

    return optax.softmax_cross_entropy_with_integer_labels(logits.reshape(-1, logits.shape[-1]), y.reshape(-1)).mean()


def _as_input(spec, x: np.ndarray, dtype) -> np.ndarray:
    return x if spec.kind == "gpt2" else x.astype(dtype)


def _torch_grads(t, x, y) -> dict[str, np.ndarray]:
    """PyTorch's gradients of one training step's loss (training mode), by ``state_dict`` name."""
    import torch
    import torch.nn.functional as F

    t.train()
    t.zero_grad()
    logits = t(torch.from_numpy(x))
    F.cross_entropy(logits.reshape(-1, logits.shape[-1]), torch.from_numpy(y).reshape(-1)).backward()
    return {k: p.grad.numpy() for k, p in t.named_parameters()}


def _flax_grads(spec, f, x, y) -> dict[str, np.ndarray]:
    """JAX's gradients of the same loss (training mode), by PyTorch name and in PyTorch's layouts."""
    f.train()
    graphdef, state = nnx.split(f)

    def grads_of(state):
        # with respect to the parameters alone (nnx.grad's default, nnx.Param), as a Flax training step takes them
        model = nnx.merge(graphdef, state)
        return nnx.grad(lambda m: _jax_loss(spec, m(_to_jax_input(spec, x)), jnp.asarray(y)))(model)

    grads = jax.jit(grads_of)(state)
    f.eval()
    return {torch_name(path): _to_torch(np.asarray(g.get_value() if hasattr(g, "get_value") else g), str(path[-1]))
            for path, g in nnx.to_flat_state(grads)}


def _difference(grads: dict[str, np.ndarray], reference: dict[str, np.ndarray]) -> tuple[float, str, float]:
    """``grads`` against ``reference``: the worst per-tensor relative difference, its tensor, and the
    relative difference of all gradients taken as one vector."""
    worst, worst_name, diff2, norm2 = 0.0, "", 0.0, 0.0
    for name, ref in reference.items():
        d, r = grads[name].astype(np.float64) - ref, ref.astype(np.float64)
        rel = float(np.linalg.norm(d) / max(np.linalg.norm(r), 1e-300))
        diff2, norm2 = diff2 + float(np.sum(d**2)), norm2 + float(np.sum(r**2))
        if rel > worst:
            worst, worst_name = rel, name
    return worst, worst_name, (diff2 / max(norm2, 1e-300)) ** 0.5


def parity(spec, *, batch: int = 2, seed: int = 0) -> dict[str, Any]:
    """Both models on the same weights and input. Logits in float32 (evaluation mode): their largest
    difference, the logits' scale and their ratio. One training step's gradients (training mode:
    ResNet's BatchNorm on batch statistics) in float64 on both sides: all of them as one vector, and
    the worst tensor and its name. Beside them, the float32 gradients: JAX's against PyTorch's, and
    PyTorch's against its own float64 gradients (what float32 rounding alone does to them). Returns
    those figures, the tensors compared, the tolerances and whether both checks are within them."""
    import copy

    import torch

    t = config.torch_model(spec, seed)
    if spec.kind == "resnet":
        randomise_batchnorm_(t, seed, calibrate=inputs(spec, 4, seed + 1)[0])
    t64 = copy.deepcopy(t).double()
    f = flax_from_torch(spec, t, seed)
    x, y = inputs(spec, batch, seed)
    t.eval()
    f.eval()
    with torch.no_grad():
        t_logits = t(torch.from_numpy(x)).numpy()
    f_logits = np.asarray(nnx.jit(lambda m, v: m(v))(f, _to_jax_input(spec, x)))
    scale = float(np.abs(t_logits).max())
    logit_diff = float(np.abs(t_logits - f_logits).max())
    t32, f32 = _torch_grads(t, x, y), _flax_grads(spec, f, x, y)
    x64 = _as_input(spec, x, np.float64)
    t64_grads = _torch_grads(t64, x64, y)
    with jax.enable_x64(True):
        f64 = flax_from_torch(spec, t64, seed)
        f64_grads = _flax_grads(spec, f64, x64, y)
    worst, worst_name, overall = _difference(f64_grads, t64_grads)
    return {"model": spec.key, "batch": batch, "max_abs_logit_diff": logit_diff, "logit_scale": scale,
            "relative_logit_diff": logit_diff / max(scale, 1e-30), "grad_diff": overall,
            "max_relative_grad_diff": worst, "worst_grad_tensor": worst_name, "tensors": len(t32),
            "float32_grad_diff": _difference(f32, t32)[2], "torch_float32_error": _difference(t32, t64_grads)[2],
            "logit_tolerance": LOGIT_TOLERANCE, "grad_tolerance": GRAD_TOLERANCE,
            "within_tolerance": logit_diff / max(scale, 1e-30) <= LOGIT_TOLERANCE and overall <= GRAD_TOLERANCE}
