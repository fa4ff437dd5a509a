"""The same networks in PyTorch and in Flax (NNX), with the same public names.

Input contract (both frameworks): float32 images normalised as
:func:`sidebyside.lab.data.normalise` does, shaped ``(N, 28, 28)``, ``(N, 784)``,
or with a channel axis: ``(N, 1, 28, 28)`` for PyTorch (NCHW, its native
layout) and ``(N, 28, 28, 1)`` for Flax (NHWC, XLA's native layout). The
models add the channel axis themselves, so the same ``(N, 28, 28)`` array
feeds both. Output: logits ``(N, num_classes)``.

Architectures
- MLP: ``fc1`` 784 -> hidden, ReLU, ``fc2`` hidden -> classes
  (784-128-10 by default: 101,770 parameters in both frameworks).
- CNN: ``conv1`` 3x3 (1 -> c1, 'same'), ReLU, 2x2 max-pool;
  ``conv2`` 3x3 (c1 -> c2, 'same'), ReLU, 2x2 max-pool; flatten;
  ``fc1`` (7*7*c2 -> hidden), ReLU, ``fc2`` (hidden -> classes).
  Flattening follows each framework's layout (C,H,W in PyTorch, H,W,C in
  Flax); :func:`copy_torch_to_flax` permutes ``fc1`` accordingly.

Initialisation
- PyTorch ``nn.Linear`` / ``nn.Conv2d``: weights and biases
  ``U(-1/sqrt(fan_in), 1/sqrt(fan_in))`` (kaiming_uniform with a=sqrt(5)).
- Flax ``nnx.Linear`` / ``nnx.Conv``: ``lecun_normal`` weights (a truncated
  normal with std 1/sqrt(fan_in)), zero biases.
- ``torch_init=True`` gives the Flax models PyTorch's scheme, so that the
  framework is the only difference left.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

__all__ = [
    "TorchMLP",
    "FlaxMLP",
    "TorchCNN",
    "FlaxCNN",
    "torch_uniform_init",
    "param_count",
    "first_layer_weights",
    "hidden_activations",
    "copy_torch_to_flax",
    "is_torch",
]

import jax
import jax.numpy as jnp
import torch
from flax import nnx
from torch import nn as tnn

# ---------------------------------------------------------------- PyTorch


def _torch_input(x: torch.Tensor, *, flat: bool) -> torch.Tensor:
    if flat:
        return x.reshape(x.shape[0], -1)
    if x.ndim == 2:  # (N, 784)
        x = x.reshape(x.shape[0], 28, 28)
    if x.ndim == 3:  # (N, 28, 28) -> NCHW
        x = x.unsqueeze(1)
    return x


class TorchMLP(tnn.Module):
    """784-hidden-classes MLP; PyTorch's default initialisation."""

    def __init__(self, hidden: int = 128, num_classes: int = 10, in_features: int = 784):
        super().__init__()
        self.fc1 = tnn.Linear(in_features, hidden)
        self.fc2 = tnn.Linear(hidden, num_classes)

    def hidden(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.fc1(_torch_input(x, flat=True)))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(self.hidden(x))


class TorchCNN(tnn.Module):
    """Two conv blocks and a dense head (see the module docstring); NCHW."""

    def __init__(self, channels: tuple[int, int] = (16, 32), hidden: int = 64, num_classes: int = 10):
        super().__init__()
        c1, c2 = channels
        self.conv1 = tnn.Conv2d(1, c1, 3, padding=1)
        self.conv2 = tnn.Conv2d(c1, c2, 3, padding=1)
        self.fc1 = tnn.Linear(7 * 7 * c2, hidden)
        self.fc2 = tnn.Linear(hidden, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = _torch_input(x, flat=False)
        x = torch.max_pool2d(torch.relu(self.conv1(x)), 2)
        x = torch.max_pool2d(torch.relu(self.conv2(x)), 2)
        x = torch.relu(self.fc1(x.flatten(1)))
        return self.fc2(x)


# ---------------------------------------------------------------- Flax NNX


def torch_uniform_init(fan_in: int):
    """A Flax initialiser drawing ``U(-1/sqrt(fan_in), 1/sqrt(fan_in))``:
    PyTorch's default for both weights and biases of Linear and Conv layers."""
    bound = 1.0 / math.sqrt(fan_in)

    def init(key, shape, dtype=jnp.float32):
        return jax.random.uniform(key, shape, dtype, minval=-bound, maxval=bound)

    return init


def _init_kwargs(fan_in: int, torch_init: bool) -> dict[str, Any]:
    if not torch_init:
        return {}  # Flax defaults: lecun_normal kernel, zero bias
    init = torch_uniform_init(fan_in)
    return {"kernel_init": init, "bias_init": init}


def _flax_input(x: jax.Array, *, flat: bool) -> jax.Array:
    if flat:
        return x.reshape(x.shape[0], -1)
    if x.ndim == 2:
        x = x.reshape(x.shape[0], 28, 28)
    if x.ndim == 3:  # (N, 28, 28) -> NHWC
        x = x[..., None]
    return x


class FlaxMLP(nnx.Module):
    """784-hidden-classes MLP; Flax's default initialisation unless ``torch_init``."""

    def __init__(self, hidden: int = 128, num_classes: int = 10, *, rngs: nnx.Rngs,
                 torch_init: bool = False, in_features: int = 784):
        self.fc1 = nnx.Linear(in_features, hidden, rngs=rngs, **_init_kwargs(in_features, torch_init))
        self.fc2 = nnx.Linear(hidden, num_classes, rngs=rngs, **_init_kwargs(hidden, torch_init))

    def hidden(self, x: jax.Array) -> jax.Array:
        return nnx.relu(self.fc1(_flax_input(x, flat=True)))

    def __call__(self, x: jax.Array) -> jax.Array:
        return self.fc2(self.hidden(x))


def _max_pool_2x2(x: jax.Array) -> jax.Array:
    """2x2 max-pooling with stride 2 on NHWC (even H, W), written as a reshape
    and a max: the same values as ``nnx.max_pool(x, (2, 2), (2, 2))``, but its
    gradient is a plain reduction instead of ``select_and_scatter``, which
    XLA:CPU runs several times slower."""
    n, h, w, c = x.shape
    return x.reshape(n, h // 2, 2, w // 2, 2, c).max(axis=(2, 4))


class FlaxCNN(nnx.Module):
    """Two conv blocks and a dense head, as :class:`TorchCNN`; NHWC."""

    def __init__(self, channels: tuple[int, int] = (16, 32), hidden: int = 64, num_classes: int = 10,
                 *, rngs: nnx.Rngs, torch_init: bool = False):
        c1, c2 = channels
        self.conv1 = nnx.Conv(1, c1, kernel_size=(3, 3), padding="SAME", rngs=rngs,
                              **_init_kwargs(9 * 1, torch_init))
        self.conv2 = nnx.Conv(c1, c2, kernel_size=(3, 3), padding="SAME", rngs=rngs,
                              **_init_kwargs(9 * c1, torch_init))
        self.fc1 = nnx.Linear(7 * 7 * c2, hidden, rngs=rngs, **_init_kwargs(7 * 7 * c2, torch_init))
        self.fc2 = nnx.Linear(hidden, num_classes, rngs=rngs, **_init_kwargs(hidden, torch_init))

    def __call__(self, x: jax.Array) -> jax.Array:
        x = _flax_input(x, flat=False)
        x = _max_pool_2x2(nnx.relu(self.conv1(x)))
        x = _max_pool_2x2(nnx.relu(self.conv2(x)))
        x = nnx.relu(self.fc1(x.reshape(x.shape[0], -1)))
        return self.fc2(x)


# ---------------------------------------------------------------- helpers for both


def is_torch(model: Any) -> bool:
    """Whether ``model`` is a PyTorch module (else a Flax one)."""
    return isinstance(model, tnn.Module)


def param_count(model: Any) -> int:
    """Number of trainable parameters of a PyTorch or Flax NNX model."""
    if is_torch(model):
        return int(sum(p.numel() for p in model.parameters() if p.requires_grad))
    return int(sum(x.size for x in jax.tree_util.tree_leaves(nnx.state(model, nnx.Param))))


def first_layer_weights(model: Any) -> np.ndarray:
    """``fc1``'s weights as ``(hidden, in_features)`` float32 NumPy, the same
    orientation in both frameworks: row i is hidden unit i's input template
    (a 28x28 image flattened row-major). PyTorch stores (out, in) already;
    Flax stores (in, out), hence the transpose. MLPs only."""
    if hasattr(model, "conv1"):
        raise ValueError("first_layer_weights() is for the MLPs; a CNN's fc1 sees feature maps, not pixels")
    if is_torch(model):
        return model.fc1.weight.detach().cpu().numpy().astype(np.float32)
    return np.asarray(model.fc1.kernel[...]).T.astype(np.float32)


def hidden_activations(model: Any, X: np.ndarray, *, batch_size: int = 4096) -> np.ndarray:
    """Post-ReLU activations of an MLP's hidden layer, ``(N, hidden)`` NumPy,
    for normalised float32 images ``X`` of shape ``(N, 28, 28)`` or ``(N, 784)``."""
    X = np.asarray(X, dtype=np.float32)
    out = []
    if is_torch(model):
        device = next(model.parameters()).device
        with torch.no_grad():
            for start in range(0, len(X), batch_size):
                xb = torch.from_numpy(X[start:start + batch_size]).to(device)
                out.append(model.hidden(xb).cpu().numpy())
    else:
        for start in range(0, len(X), batch_size):
            out.append(np.asarray(model.hidden(jnp.asarray(X[start:start + batch_size]))))
    return np.concatenate(out) if out else np.zeros((0, model.fc1.out_features), np.float32)


def copy_torch_to_flax(torch_model: tnn.Module, flax_model: nnx.Module) -> nnx.Module:
    """Copy a PyTorch model's parameters into the matching Flax model, in
    place, converting layouts: Linear (out, in) -> (in, out); Conv
    (out, in, kh, kw) -> (kh, kw, in, out); for the CNN, ``fc1``'s input
    axis is reordered from (C, H, W) to (H, W, C) flattening. Returns
    ``flax_model``, which then computes the same function."""
    is_cnn = hasattr(torch_model, "conv1")
    for name, module in torch_model.named_children():
        target = getattr(flax_model, name)
        w = module.weight.detach().cpu().numpy()
        b = module.bias.detach().cpu().numpy()
        if isinstance(module, tnn.Conv2d):
            w = w.transpose(2, 3, 1, 0)
        else:
            w = w.T  # (in, out)
            if is_cnn and name == "fc1":
                c = torch_model.conv2.out_channels
                w = w.reshape(c, 7, 7, -1).transpose(1, 2, 0, 3).reshape(7 * 7 * c, -1)
        target.kernel[...] = jnp.asarray(w)
        target.bias[...] = jnp.asarray(b)
    return flax_model
