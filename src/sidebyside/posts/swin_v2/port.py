"""Weights from timm into the Flax port, and the parity check that the two compute one function."""


from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from sidebyside.posts.swin_v2.config import LOGIT_SCALE_MAX, SwinConfig, torch_model
from sidebyside.posts.swin_v2.model import FlaxSwinV2

__all__ = ['timm_name', 'flax_param_names', 'copy_timm_weights', 'randomise_torch_', 'parity']


def timm_name(path: Sequence[Any]) -> str:
    """Flax parameter path -> timm state-dict key (``cpb_mlp/layers/0/kernel`` -> ``cpb_mlp.0.weight``)."""
    parts = [str(p) for p in path]
    out = []
    for i, part in enumerate(parts):
        if part == "layers" and i > 0 and parts[i - 1] == "cpb_mlp":
            continue  # nnx.Sequential keeps its layers in .layers; torch's Sequential indexes directly
        out.append(part)
    if out[-1] in ("kernel", "scale"):
        out[-1] = "weight"
    if out[0] == "head" and out[-1] in ("weight", "bias"):
        out.insert(1, "fc")  # timm's ClassifierHead holds the linear layer as .fc
    return ".".join(out)


def _to_flax_layout(name: str, value: np.ndarray, flax_shape: tuple[int, ...]) -> np.ndarray:
    if value.ndim == 4:          # conv: (out, in, kh, kw) -> (kh, kw, in, out)
        value = value.transpose(2, 3, 1, 0)
    elif value.ndim == 2 and name.endswith("weight"):  # linear: (out, in) -> (in, out)
        value = value.T
    if value.shape != tuple(flax_shape):
        raise ValueError(f"{name}: timm shape {value.shape} does not fit the Flax parameter {tuple(flax_shape)}")
    return value


def flax_param_names(flax_model: FlaxSwinV2) -> dict[str, tuple]:
    """timm key -> Flax path, for every parameter of the port."""
    return {timm_name(path): path for path, _ in nnx.to_flat_state(nnx.state(flax_model, nnx.Param))}


def copy_timm_weights(torch_model, flax_model: FlaxSwinV2) -> FlaxSwinV2:
    """Copy every parameter of timm's model into the port (in place; returns it).

    Raises if a timm parameter has no place in the port or the port has one
    timm lacks, so a missing part of the network cannot go unnoticed.
    """
    torch_params = {name: p.detach().cpu().numpy() for name, p in torch_model.named_parameters()}
    paths = flax_param_names(flax_model)
    missing, extra = sorted(set(torch_params) - set(paths)), sorted(set(paths) - set(torch_params))
    if missing or extra:
        raise ValueError(f"timm and the Flax port disagree on parameters: only in timm {missing[:5]}, "
                         f"only in Flax {extra[:5]}")
    state = nnx.state(flax_model, nnx.Param)
    flat = dict(nnx.to_flat_state(state))
    for name, path in paths.items():
        flat[path].set_value(jnp.asarray(_to_flax_layout(name, torch_params[name], flat[path].shape)))
    return flax_model


def randomise_torch_(torch_model, seed: int = 0, *, scale: float = 0.5) -> None:
    """Overwrite every parameter with Gaussian noise (in place), so that a parity
    check exercises every path: timm initialises the post-norms to zero, which
    would make each block an identity and its gradients zero. Half the
    heads' ``logit_scale`` go above the clamp, to test it."""
    import torch

    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in torch_model.named_parameters():
            noise = torch.randn(p.shape, generator=generator)
            if name.endswith("logit_scale"):
                heads = p.shape[0]
                p.copy_(torch.where(torch.arange(heads).view(-1, 1, 1) % 2 == 0,
                                    math.log(10.0) + 0.3 * noise, LOGIT_SCALE_MAX + 0.5 + 0.1 * noise.abs()))
            elif name.endswith(("norm1.weight", "norm2.weight", "norm.weight")):
                p.copy_(1.0 + 0.2 * noise)
            else:
                p.copy_(scale * noise / math.sqrt(max(p[0].numel() if p.ndim > 1 else 1, 1)))


def parity(config: SwinConfig, *, batch_size: int = 4, seed: int = 0) -> dict[str, Any]:
    """Same weights, same input, float32: timm (on the CPU) against the port (on JAX's default device).

    Returns ``max_abs_logit_err`` (eval mode, largest |logit difference|),
    ``max_rel_grad_err`` (one training step's loss, stochastic depth off: the largest,
    over parameter tensors, of ||g_jax - g_torch|| / ||g_torch||), the tensor
    where it occurs, ``logit_scale`` (largest |logit|) and the count of
    parameter tensors compared.
    """
    import optax
    import torch

    no_drop = dataclasses.replace(config, drop_path_rate=0.0)
    torch.manual_seed(seed)
    tmodel = torch_model(no_drop)
    randomise_torch_(tmodel, seed)
    fmodel = copy_timm_weights(tmodel, FlaxSwinV2(no_drop, rngs=nnx.Rngs(seed)))
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((batch_size, config.in_chans, config.img_size, config.img_size)).astype(np.float32)
    y = rng.integers(0, config.num_classes, batch_size)
    X_nhwc = X.transpose(0, 2, 3, 1)

    # Stochastic depth is off, so eval mode and a training step compute the same function: one
    # compiled program gives the eval-mode logits and the gradients of the step's loss.
    tmodel.eval()
    with torch.no_grad():
        torch_logits = tmodel(torch.from_numpy(X)).numpy()
    tmodel.train()
    loss = torch.nn.functional.cross_entropy(tmodel(torch.from_numpy(X)), torch.from_numpy(y))
    loss.backward()
    fmodel.eval()
    graphdef, params, rest = nnx.split(fmodel, nnx.Param, ...)

    def loss_fn(params):
        logits = nnx.merge(graphdef, params, rest)(jnp.asarray(X_nhwc))
        return optax.softmax_cross_entropy_with_integer_labels(logits, jnp.asarray(y)).mean(), logits

    (flax_loss, flax_logits), grads = jax.jit(jax.value_and_grad(loss_fn, has_aux=True))(params)
    flax_logits = np.asarray(flax_logits)
    flat_grads = dict(nnx.to_flat_state(grads))
    worst, worst_name = 0.0, None
    for name, path in flax_param_names(fmodel).items():
        p = dict(tmodel.named_parameters())[name]
        g_torch = p.grad.numpy()
        g_flax = np.asarray(_flax_to_torch_layout(np.asarray(flat_grads[path].get_value())))
        denom = np.linalg.norm(g_torch)
        if denom == 0:
            raise AssertionError(f"{name}: zero PyTorch gradient; the parity check would not test it")
        err = float(np.linalg.norm(g_flax - g_torch) / denom)
        if err > worst:
            worst, worst_name = err, name
    return {
        "max_abs_logit_err": float(np.max(np.abs(flax_logits - torch_logits))),
        "logit_scale": float(np.max(np.abs(torch_logits))),
        "loss_err": abs(float(flax_loss) - loss.item()),
        "max_rel_grad_err": worst,
        "worst_grad": worst_name,
        "tensors_compared": len(flat_grads),
        "batch_size": batch_size,
        "config": config.to_dict(),
    }


def _flax_to_torch_layout(value: np.ndarray) -> np.ndarray:
    if value.ndim == 4:
        return value.transpose(3, 2, 0, 1)
    if value.ndim == 2:
        return value.T
    return value


# ----------------------------------------------------------------------------- data and training


