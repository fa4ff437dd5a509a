"""The post's model, written once per framework with the same names: a small vision transformer.

``(N, 28, 28)`` float32 images are cut into ``patch x patch`` patches, embedded, given a learned
position embedding, passed through ``depth`` pre-norm blocks (multi-head self-attention with
separate ``q``, ``k``, ``v`` projections and an output ``proj``; an MLP ``fc1`` -> GELU (tanh) ->
``fc2``), averaged over tokens and classified by ``head`` into 10 classes. Attention finds its
number of heads from the width of ``q``'s output (``width // head_dim``), so a tensor-parallel
shard that holds a slice of the heads runs the same code.

- :class:`ViTConfig`: the sizes, with :meth:`ViTConfig.check` for the divisibility a mesh needs.
- :class:`TorchViT` / :class:`FlaxViT`: the two networks (PyTorch ``nn.Module``, Flax NNX).
- :func:`copy_torch_to_flax`: PyTorch's weights into the Flax model, so both start identical;
  :func:`flax_from_torch`: a Flax model with PyTorch's weights, built without Flax's initialisation.
- :func:`batches`: the global batches both frameworks train on, as NumPy arrays.

No distributed code here: the strategies live in ``torch_parallel`` and ``jax_parallel``.
"""

from __future__ import annotations

import dataclasses

import numpy as np

__all__ = ["ViTConfig", "TorchViT", "FlaxViT", "copy_torch_to_flax", "flax_from_torch", "batches", "param_count"]


@dataclasses.dataclass(frozen=True)
class ViTConfig:
    """Sizes of the vision transformer; ``dim`` must be ``heads * head_dim``."""

    patch: int = 7
    dim: int = 32
    depth: int = 1
    heads: int = 4
    mlp: int = 64
    num_classes: int = 10
    image: int = 28

    @property
    def head_dim(self) -> int:
        return self.dim // self.heads

    @property
    def tokens(self) -> int:
        return (self.image // self.patch) ** 2

    def check(self, model_parallel: int = 1) -> None:
        """Raise ValueError unless the sizes are consistent and ``model_parallel`` divides the heads
        and the MLP width (tensor parallelism splits both)."""
        if self.image % self.patch:
            raise ValueError(f"patch {self.patch} does not divide the image side {self.image}")
        if self.dim % self.heads:
            raise ValueError(f"heads {self.heads} do not divide dim {self.dim}")
        if model_parallel < 1:
            raise ValueError(f"model_parallel must be >= 1, got {model_parallel}")
        for name, size in (("heads", self.heads), ("mlp", self.mlp)):
            if size % model_parallel:
                raise ValueError(f"the model axis ({model_parallel} devices) does not divide the model's "
                                 f"{name} ({size}); choose model_parallel among the divisors of {size}")


def param_count(config: ViTConfig) -> int:
    """Number of parameters of the network ``config`` describes (both frameworks)."""
    d, m, p = config.dim, config.mlp, config.patch
    block = 2 * 2 * d + 4 * (d * d + d) + (d * m + m) + (m * d + d)
    return (p * p * d + d) + config.tokens * d + config.depth * block + 2 * d + (d * config.num_classes
                                                                               + config.num_classes)


def batches(images: np.ndarray, labels: np.ndarray, *, batch_size: int, steps: int, seed: int = 0):
    """``steps`` global batches ``(X, y)`` (float32 ``(B, 28, 28)`` standardised, int32 ``(B,)``),
    drawn in the order of ``lab.data.epoch_permutation(seed, epoch)``: the same batches for every
    strategy and both frameworks."""
    from sidebyside.lab import data

    out, epoch = [], 0
    while len(out) < steps:
        order = data.epoch_permutation(len(images), seed, epoch)
        for start in range(0, len(order) - batch_size + 1, batch_size):
            index = order[start:start + batch_size]
            out.append((data.normalise(images[index]), labels[index].astype(np.int32)))
            if len(out) == steps:
                break
        epoch += 1
    return out


# ----------------------------------------------------------------------------- PyTorch


def _torch_classes():
    import torch
    from torch import nn

    class Attention(nn.Module):
        def __init__(self, dim: int, head_dim: int):
            super().__init__()
            self.head_dim = head_dim
            self.q, self.k, self.v = nn.Linear(dim, dim), nn.Linear(dim, dim), nn.Linear(dim, dim)
            self.proj = nn.Linear(dim, dim)

        def forward(self, x):
            B, T, _ = x.shape
            q, k, v = (f(x).view(B, T, -1, self.head_dim).transpose(1, 2) for f in (self.q, self.k, self.v))
            weights = torch.softmax(q @ k.transpose(-1, -2) / self.head_dim ** 0.5, dim=-1)
            return self.proj((weights @ v).transpose(1, 2).reshape(B, T, -1))

    class MLP(nn.Module):
        def __init__(self, dim: int, hidden: int):
            super().__init__()
            self.fc1, self.fc2 = nn.Linear(dim, hidden), nn.Linear(hidden, dim)

        def forward(self, x):
            return self.fc2(nn.functional.gelu(self.fc1(x), approximate="tanh"))

    class Block(nn.Module):
        def __init__(self, config: ViTConfig):
            super().__init__()
            self.norm1, self.norm2 = nn.LayerNorm(config.dim), nn.LayerNorm(config.dim)
            self.attn = Attention(config.dim, config.head_dim)
            self.mlp = MLP(config.dim, config.mlp)

        def forward(self, x):
            x = x + self.attn(self.norm1(x))
            return x + self.mlp(self.norm2(x))

    class TorchViT(nn.Module):
        """The ViT in PyTorch: ``(N, 28, 28)`` images -> ``(N, 10)`` logits."""

        def __init__(self, config: ViTConfig):
            super().__init__()
            config.check()
            self.config = config
            self.embed = nn.Linear(config.patch ** 2, config.dim)
            self.pos = nn.Parameter(torch.randn(config.tokens, config.dim) * 0.02)
            self.blocks = nn.ModuleList(Block(config) for _ in range(config.depth))
            self.norm = nn.LayerNorm(config.dim)
            self.head = nn.Linear(config.dim, config.num_classes)

        def forward(self, x):
            p, n = self.config.patch, self.config.image // self.config.patch
            x = x.reshape(-1, n, p, n, p).transpose(2, 3).reshape(-1, n * n, p * p)
            x = self.embed(x) + self.pos
            for block in self.blocks:
                x = block(x)
            return self.head(self.norm(x).mean(1))

    return TorchViT


def TorchViT(config: ViTConfig, *, seed: int = 0):
    """A :class:`TorchViT` with PyTorch's default initialisation under ``torch.manual_seed(seed)``."""
    import torch

    torch.manual_seed(seed)
    return _torch_classes()(config)


# ----------------------------------------------------------------------------- Flax NNX


def _flax_classes():
    import jax
    import jax.numpy as jnp
    from flax import nnx

    class Attention(nnx.Module):
        def __init__(self, dim: int, head_dim: int, *, rngs):
            self.head_dim = head_dim
            self.q, self.k, self.v = (nnx.Linear(dim, dim, rngs=rngs) for _ in range(3))
            self.proj = nnx.Linear(dim, dim, rngs=rngs)

        def __call__(self, x):
            B, T, _ = x.shape
            q, k, v = (f(x).reshape(B, T, -1, self.head_dim).transpose(0, 2, 1, 3) for f in (self.q, self.k, self.v))
            weights = jax.nn.softmax(q @ k.transpose(0, 1, 3, 2) / self.head_dim ** 0.5, axis=-1)
            return self.proj((weights @ v).transpose(0, 2, 1, 3).reshape(B, T, -1))

    class MLP(nnx.Module):
        def __init__(self, dim: int, hidden: int, *, rngs):
            self.fc1, self.fc2 = nnx.Linear(dim, hidden, rngs=rngs), nnx.Linear(hidden, dim, rngs=rngs)

        def __call__(self, x):
            return self.fc2(jax.nn.gelu(self.fc1(x), approximate=True))

    class Block(nnx.Module):
        def __init__(self, config: ViTConfig, *, rngs):
            self.norm1 = nnx.LayerNorm(config.dim, epsilon=1e-5, rngs=rngs)
            self.norm2 = nnx.LayerNorm(config.dim, epsilon=1e-5, rngs=rngs)
            self.attn = Attention(config.dim, config.head_dim, rngs=rngs)
            self.mlp = MLP(config.dim, config.mlp, rngs=rngs)

        def __call__(self, x):
            x = x + self.attn(self.norm1(x))
            return x + self.mlp(self.norm2(x))

    class FlaxViT(nnx.Module):
        """The ViT in Flax NNX: ``(N, 28, 28)`` images -> ``(N, 10)`` logits."""

        def __init__(self, config: ViTConfig, *, rngs):
            config.check()
            self.config = config
            self.embed = nnx.Linear(config.patch ** 2, config.dim, rngs=rngs)
            self.pos = nnx.Param(jnp.zeros((config.tokens, config.dim)))
            self.blocks = nnx.List([Block(config, rngs=rngs) for _ in range(config.depth)])
            self.norm = nnx.LayerNorm(config.dim, epsilon=1e-5, rngs=rngs)
            self.head = nnx.Linear(config.dim, config.num_classes, rngs=rngs)

        def __call__(self, x):
            p, n = self.config.patch, self.config.image // self.config.patch
            x = x.reshape(-1, n, p, n, p).transpose(0, 1, 3, 2, 4).reshape(-1, n * n, p * p)
            x = self.embed(x) + self.pos[...]
            for block in self.blocks:
                x = block(x)
            return self.head(self.norm(x).mean(1))

    return FlaxViT


def FlaxViT(config: ViTConfig, *, seed: int = 0):
    """A :class:`FlaxViT` with Flax's default initialisation from ``nnx.Rngs(seed)``."""
    from flax import nnx

    return _flax_classes()(config, rngs=nnx.Rngs(seed))


def copy_torch_to_flax(torch_model, flax_model) -> None:
    """Copy every PyTorch parameter into the Flax model of the same config, in place: Linear
    weights transposed (PyTorch stores ``(out, in)``, Flax ``(in, out)``), LayerNorm weight -> scale.
    ``torch_model`` is the PyTorch model or its state dict (tensors or NumPy arrays)."""
    from flax import nnx

    params = nnx.state(flax_model, nnx.Param)
    flat = dict(nnx.to_flat_state(params))
    state = torch_model.state_dict() if hasattr(torch_model, "state_dict") else torch_model
    for name, tensor in state.items():
        parts = name.split(".")
        value = tensor.detach().cpu().numpy() if hasattr(tensor, "detach") else np.asarray(tensor)
        leaf = parts[-1]
        if leaf == "weight" and value.ndim == 2:
            parts[-1], value = "kernel", value.T
        elif leaf == "weight":
            parts[-1] = "scale"
        key = tuple(int(p) if p.isdigit() else p for p in parts)
        if key not in flat:
            raise KeyError(f"no Flax parameter for PyTorch's {name} (looked for {key})")
        if flat[key].shape != value.shape:
            raise ValueError(f"{name}: PyTorch shape {value.shape} against Flax {flat[key].shape}")
        flat[key].set_value(np.asarray(value)) if hasattr(flat[key], "set_value") else setattr(
            flat[key], "value", np.asarray(value))
    nnx.update(flax_model, params)


def flax_from_torch(config: ViTConfig, torch_model):
    """A :class:`FlaxViT` of ``config`` holding PyTorch's weights (``torch_model`` or its state dict, as
    :func:`copy_torch_to_flax` takes it): the model :func:`FlaxViT` then :func:`copy_torch_to_flax`
    give, built abstractly (``nnx.eval_shape``) so that Flax's random initialisation, whose every
    value the copy replaces, never runs (each of its eager operations compiles on its own: seconds in
    a fresh process). ValueError when a Flax parameter is left without a PyTorch value."""
    import jax
    from flax import nnx

    flax_model = nnx.eval_shape(lambda: FlaxViT(config))
    copy_torch_to_flax(torch_model, flax_model)
    missing = [".".join(map(str, path)) for path, leaf in nnx.to_flat_state(nnx.state(flax_model))
               if isinstance(leaf.get_value() if hasattr(leaf, "get_value") else leaf, jax.ShapeDtypeStruct)]
    if missing:
        raise ValueError(f"no PyTorch value for the Flax parameters {missing}")
    return flax_model
