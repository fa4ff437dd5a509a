"""Swin Transformer V2: timm's PyTorch model, our Flax NNX port, and a way to
prove they compute the same function.

The PyTorch side is timm's ``SwinTransformerV2`` (what PyTorch users run);
the JAX side, :class:`FlaxSwinV2`, is written here from the paper and from
reading timm's module, with the same parameter names so that
:func:`copy_timm_weights` can move every weight across and check none is left
over.

What the port implements, as timm does:

- patch embedding: a ``patch x patch`` convolution with stride ``patch``, then LayerNorm;
- window attention with *scaled cosine attention*: ``cos(q, k) * exp(min(logit_scale, log 100))``,
  one learned ``logit_scale`` per head, clamped as timm clamps it;
- the *log-spaced continuous relative position bias*: the relative offsets
  inside a window, scaled to [-8, 8] and mapped by ``sign(x) log2(1 + |x|) / 3``,
  go through a small MLP (2 -> 512 -> heads, ReLU) and ``16 * sigmoid``;
- shifted windows (every second block, by half a window) with the attention
  mask that keeps the rolled-in regions apart (-100 on their logits);
- *residual post-normalisation*: ``x + drop_path(norm(attn(x)))``, with the
  block norms initialised to zero as timm does;
- patch merging, V2 style: the 2x2 neighbourhood concatenated, a linear
  reduction 4C -> 2C, then LayerNorm;
- stochastic depth, rates rising linearly from 0 to ``drop_path_rate`` over
  the blocks;
- average pooling and a linear head.

timm's V2 has no absolute position embedding (the seed's JAX port left it
out; so does timm): there is none to port. ``pretrained_window_sizes`` are
all 0 (no pretrained weights are used), so the bias coordinates are
normalised by the window itself.

Input contract: PyTorch takes NCHW float32 images, Flax NHWC; both return
logits ``(N, num_classes)``. The window must divide every stage's feature map
(timm pads otherwise; this port refuses, with a message).

Layout of this module: configuration; the Flax model; weight copying and
parity; training for accuracy (both frameworks, same schedule and batches);
the speed ladder, kept apart at the end so it can move onto the shared
ladder harness.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import time
from collections.abc import Callable, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from . import timing as sbs_timing
from . import training as sbs_training

__all__ = [
    "SwinConfig",
    "torch_model",
    "FlaxSwinV2",
    "copy_timm_weights",
    "randomise_torch_",
    "parity",
    "fashion_inputs",
    "decays",
    "train_torch",
    "train_flax",
    "predict_torch",
    "predict_flax",
    "TORCH_TOOLS",
    "JAX_TOOLS",
    "ladder",
    "first_step",
]

LOGIT_SCALE_MAX = math.log(1.0 / 0.01)  # timm clamps the learned scale at 100
MASK_VALUE = -100.0                      # timm's logit for pairs that a shifted window keeps apart
CPB_HIDDEN = 512                         # width of the continuous-position-bias MLP


# ----------------------------------------------------------------------------- configuration


@dataclasses.dataclass(frozen=True)
class SwinConfig:
    """One Swin V2 network, the same numbers for timm and for the port."""

    img_size: int = 32
    patch_size: int = 2
    in_chans: int = 1
    num_classes: int = 10
    embed_dim: int = 24
    depths: tuple[int, ...] = (2, 2)
    num_heads: tuple[int, ...] = (2, 4)
    window_size: int = 4
    mlp_ratio: float = 4.0
    drop_path_rate: float = 0.1

    def __post_init__(self):
        object.__setattr__(self, "depths", tuple(int(d) for d in self.depths))
        object.__setattr__(self, "num_heads", tuple(int(h) for h in self.num_heads))
        if len(self.depths) != len(self.num_heads):
            raise ValueError(f"depths {self.depths} and num_heads {self.num_heads} need one entry per stage")
        if self.img_size % self.patch_size:
            raise ValueError(f"img_size {self.img_size} must be a multiple of patch_size {self.patch_size}")
        for i, (res, heads) in enumerate(zip(self.resolutions(), self.num_heads)):
            window, _ = self.window_and_shift(res)
            if res % window:
                raise ValueError(f"stage {i}: window {window} does not divide the {res}x{res} feature map; "
                                 "choose img_size/patch_size/window_size so that it does")
            if self.dim(i) % heads:
                raise ValueError(f"stage {i}: {heads} heads do not divide the width {self.dim(i)}")

    @classmethod
    def tiny_256(cls, num_classes: int = 10) -> SwinConfig:
        """Swin-V2-T at the seed's size: 256x256x3, patch 4, window 8, C=96, depths (2, 2, 6, 2)
        (timm's ``swinv2_tiny_window8_256``); 10 classes as Imagenette has."""
        return cls(img_size=256, patch_size=4, in_chans=3, num_classes=num_classes, embed_dim=96,
                   depths=(2, 2, 6, 2), num_heads=(3, 6, 12, 24), window_size=8, drop_path_rate=0.2)

    def dim(self, stage: int) -> int:
        return self.embed_dim * 2 ** stage

    def resolutions(self) -> list[int]:
        """Feature-map side of each stage (stage 0 at the patch grid)."""
        grid = self.img_size // self.patch_size
        return [math.ceil(grid / 2 ** i) for i in range(len(self.depths))]

    def window_and_shift(self, resolution: int) -> tuple[int, int]:
        """timm's rule: a window no larger than the map; no shift when one window covers it."""
        window = min(self.window_size, resolution)
        shift = 0 if resolution <= window else self.window_size // 2
        return window, shift

    def drop_path_rates(self) -> list[list[float]]:
        rates = np.linspace(0.0, self.drop_path_rate, sum(self.depths), dtype=np.float32).tolist()
        out, start = [], 0
        for depth in self.depths:
            out.append(rates[start:start + depth])
            start += depth
        return out

    def timm_kwargs(self) -> dict[str, Any]:
        return dict(img_size=self.img_size, patch_size=self.patch_size, in_chans=self.in_chans,
                    num_classes=self.num_classes, embed_dim=self.embed_dim, depths=self.depths,
                    num_heads=self.num_heads, window_size=self.window_size, mlp_ratio=self.mlp_ratio,
                    drop_path_rate=self.drop_path_rate)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def torch_model(config: SwinConfig):
    """timm's ``SwinTransformerV2`` for ``config``, randomly initialised (no download)."""
    from timm.models.swin_transformer_v2 import SwinTransformerV2

    return SwinTransformerV2(**config.timm_kwargs())


# ----------------------------------------------------------------------------- static tables


@functools.cache
def relative_tables(window: int) -> tuple[np.ndarray, np.ndarray]:
    """The continuous-position-bias inputs of a ``window x window`` window.

    Returns ``coords`` ``(2w-1, 2w-1, 2)`` float32: every relative offset
    (dy, dx), scaled to [-8, 8] and log-spaced, ``sign(t) log2(1 + |t|) / log2(8)``;
    and ``index`` ``(w*w, w*w)`` int32: for each pair of tokens, the row of
    the flattened ``coords`` holding their offset.
    """
    offsets = np.arange(-(window - 1), window, dtype=np.float32)
    coords = np.stack(np.meshgrid(offsets, offsets, indexing="ij"), axis=-1)  # (2w-1, 2w-1, 2): (dy, dx)
    coords = coords / max(window - 1, 1) * 8.0
    coords = np.sign(coords) * np.log2(np.abs(coords) + 1.0) / np.log2(8.0)
    grid = np.stack(np.meshgrid(np.arange(window), np.arange(window), indexing="ij")).reshape(2, -1)
    rel = grid[:, :, None] - grid[:, None, :] + (window - 1)  # (2, N, N), each in [0, 2w-2]
    index = rel[0] * (2 * window - 1) + rel[1]
    return coords.astype(np.float32), index.astype(np.int32)


@functools.cache
def shift_mask(resolution: int, window: int, shift: int) -> np.ndarray | None:
    """Attention mask ``(num_windows, w*w, w*w)`` of a shifted block: 0 between
    tokens of the same region of the rolled map, ``MASK_VALUE`` otherwise.
    None when there is no shift."""
    if not shift:
        return None
    regions = np.zeros((resolution, resolution), np.float32)
    label = 0
    for hs in (slice(0, -window), slice(-window, -shift), slice(-shift, None)):
        for ws in (slice(0, -window), slice(-window, -shift), slice(-shift, None)):
            regions[hs, ws] = label
            label += 1
    n = resolution // window
    windows = regions.reshape(n, window, n, window).transpose(0, 2, 1, 3).reshape(n * n, window * window)
    diff = windows[:, None, :] - windows[:, :, None]
    return np.where(diff != 0, MASK_VALUE, 0.0).astype(np.float32)


# ----------------------------------------------------------------------------- the Flax model
# Attribute names follow timm's, so a parameter's path is its timm name (see copy_timm_weights).

# timm's trunc_normal_(std=.02) truncates at +-2 in absolute value, i.e. at +-100 standard
# deviations: in effect a plain normal. JAX's truncated_normal cuts at +-2 std, so use normal.
_linear_init = nnx.initializers.normal(0.02)


def _torch_conv_init(fan_in: int):
    """PyTorch's default Conv2d initialisation (timm keeps it for the patch embedding):
    U(-1/sqrt(fan_in), 1/sqrt(fan_in)) for weight and bias alike."""
    bound = 1.0 / math.sqrt(fan_in)

    def init(key, shape, dtype=jnp.float32):
        return jax.random.uniform(key, shape, dtype, -bound, bound)

    return init


def _linear(n_in: int, n_out: int, *, rngs: nnx.Rngs, use_bias: bool = True) -> nnx.Linear:
    return nnx.Linear(n_in, n_out, use_bias=use_bias, kernel_init=_linear_init, bias_init=nnx.initializers.zeros,
                      rngs=rngs)


def _norm(dim: int, *, rngs: nnx.Rngs, zero: bool = False) -> nnx.LayerNorm:
    # PyTorch's LayerNorm: eps 1e-5 and a two-pass variance (Flax's "fast" one-pass variance rounds differently).
    return nnx.LayerNorm(dim, epsilon=1e-5, use_fast_variance=False, rngs=rngs,
                         scale_init=nnx.initializers.zeros if zero else nnx.initializers.ones)


def _l2_normalise(x: jax.Array) -> jax.Array:
    # As torch.nn.functional.normalize: x / max(||x||, 1e-12).
    return x / jnp.maximum(jnp.sqrt(jnp.sum(x * x, axis=-1, keepdims=True)), 1e-12)


class PatchEmbed(nnx.Module):
    def __init__(self, config: SwinConfig, *, rngs: nnx.Rngs):
        p, c = config.patch_size, config.in_chans
        self.proj = nnx.Conv(c, config.embed_dim, kernel_size=(p, p), strides=(p, p), padding="VALID",
                             kernel_init=_torch_conv_init(c * p * p), bias_init=_torch_conv_init(c * p * p),
                             rngs=rngs)
        self.norm = _norm(config.embed_dim, rngs=rngs)

    def __call__(self, x: jax.Array) -> jax.Array:
        return self.norm(self.proj(x))


class WindowAttention(nnx.Module):
    """Scaled cosine attention inside windows, with the continuous position bias."""

    def __init__(self, dim: int, window: int, num_heads: int, *, rngs: nnx.Rngs):
        self.window, self.num_heads = window, num_heads
        self.logit_scale = nnx.Param(jnp.full((num_heads, 1, 1), math.log(10.0), jnp.float32))
        self.cpb_mlp = nnx.Sequential(_linear(2, CPB_HIDDEN, rngs=rngs), jax.nn.relu,
                                      _linear(CPB_HIDDEN, num_heads, rngs=rngs, use_bias=False))
        self.qkv = _linear(dim, 3 * dim, rngs=rngs, use_bias=False)
        self.q_bias = nnx.Param(jnp.zeros((dim,), jnp.float32))
        self.v_bias = nnx.Param(jnp.zeros((dim,), jnp.float32))  # keys get no bias (timm's k_bias is a zero buffer)
        self.proj = _linear(dim, dim, rngs=rngs)

    def position_bias(self) -> jax.Array:
        """``(heads, N, N)``: 16 * sigmoid of the MLP's bias for each token pair."""
        coords, index = relative_tables(self.window)
        table = self.cpb_mlp(jnp.asarray(coords)).reshape(-1, self.num_heads)
        n = self.window * self.window
        bias = table[index.reshape(-1)].reshape(n, n, self.num_heads).transpose(2, 0, 1)
        return 16.0 * jax.nn.sigmoid(bias)

    def __call__(self, x: jax.Array, mask: np.ndarray | None) -> jax.Array:
        batch, n, dim = x.shape
        bias = jnp.concatenate([self.q_bias[...], jnp.zeros_like(self.q_bias[...]), self.v_bias[...]])
        qkv = (self.qkv(x) + bias.astype(x.dtype)).reshape(batch, n, 3, self.num_heads, dim // self.num_heads)
        q, k, v = qkv.transpose(2, 0, 3, 1, 4)
        attn = _l2_normalise(q) @ _l2_normalise(k).swapaxes(-1, -2)
        scale = jnp.exp(jnp.minimum(self.logit_scale[...], LOGIT_SCALE_MAX))
        attn = attn * scale.astype(attn.dtype) + self.position_bias().astype(attn.dtype)[None]
        if mask is not None:
            windows = mask.shape[0]
            attn = attn.reshape(-1, windows, self.num_heads, n, n) + jnp.asarray(mask, attn.dtype)[None, :, None]
            attn = attn.reshape(-1, self.num_heads, n, n)
        # The softmax in float32 whatever the compute dtype, as torch.autocast does.
        attn = jax.nn.softmax(attn.astype(jnp.float32), axis=-1).astype(v.dtype)
        out = (attn @ v).transpose(0, 2, 1, 3).reshape(batch, n, dim)
        return self.proj(out)


class Mlp(nnx.Module):
    def __init__(self, dim: int, hidden: int, *, rngs: nnx.Rngs):
        self.fc1 = _linear(dim, hidden, rngs=rngs)
        self.fc2 = _linear(hidden, dim, rngs=rngs)

    def __call__(self, x: jax.Array) -> jax.Array:
        return self.fc2(jax.nn.gelu(self.fc1(x), approximate=False))  # timm's GELU is the exact (erf) one


def _drop_path(rate: float, rngs: nnx.Rngs) -> nnx.Dropout:
    # Stochastic depth = dropout of a whole sample's residual branch, rescaled by 1/keep:
    # one Bernoulli draw per sample, broadcast over (H, W, C).
    return nnx.Dropout(rate, broadcast_dims=(1, 2, 3), rngs=rngs)


class SwinV2Block(nnx.Module):
    """(Shifted-)window attention and MLP, each with residual post-normalisation."""

    def __init__(self, dim: int, resolution: int, num_heads: int, window: int, shift: int, mlp_ratio: float,
                 drop_path: float, *, rngs: nnx.Rngs):
        self.resolution, self.window, self.shift = resolution, window, shift
        self.attn = WindowAttention(dim, window, num_heads, rngs=rngs)
        self.norm1 = _norm(dim, rngs=rngs, zero=True)
        self.drop_path1 = _drop_path(drop_path, rngs)
        self.mlp = Mlp(dim, int(dim * mlp_ratio), rngs=rngs)
        self.norm2 = _norm(dim, rngs=rngs, zero=True)
        self.drop_path2 = _drop_path(drop_path, rngs)

    def _attention(self, x: jax.Array) -> jax.Array:
        b, h, w, c = x.shape
        win, shift = self.window, self.shift
        if shift:
            x = jnp.roll(x, (-shift, -shift), axis=(1, 2))
        windows = x.reshape(b, h // win, win, w // win, win, c).transpose(0, 1, 3, 2, 4, 5).reshape(-1, win * win, c)
        out = self.attn(windows, shift_mask(h, win, shift))
        out = out.reshape(b, h // win, w // win, win, win, c).transpose(0, 1, 3, 2, 4, 5).reshape(b, h, w, c)
        if shift:
            out = jnp.roll(out, (shift, shift), axis=(1, 2))
        return out

    def __call__(self, x: jax.Array) -> jax.Array:
        x = x + self.drop_path1(self.norm1(self._attention(x)))
        return x + self.drop_path2(self.norm2(self.mlp(x)))


class PatchMerging(nnx.Module):
    """2x2 neighbourhoods concatenated (timm's channel order), reduced 4C -> 2C, then normalised (V2 order)."""

    def __init__(self, dim: int, *, rngs: nnx.Rngs):
        self.reduction = _linear(4 * dim, 2 * dim, rngs=rngs, use_bias=False)
        self.norm = _norm(2 * dim, rngs=rngs)

    def __call__(self, x: jax.Array) -> jax.Array:
        b, h, w, c = x.shape
        x = x.reshape(b, h // 2, 2, w // 2, 2, c).transpose(0, 1, 3, 4, 2, 5).reshape(b, h // 2, w // 2, 4 * c)
        return self.norm(self.reduction(x))


class SwinV2Stage(nnx.Module):
    def __init__(self, config: SwinConfig, index: int, *, rngs: nnx.Rngs):
        dim, resolution = config.dim(index), config.resolutions()[index]
        self.downsample = PatchMerging(config.dim(index - 1), rngs=rngs) if index > 0 else None
        window, shift = config.window_and_shift(resolution)
        rates = config.drop_path_rates()[index]
        self.blocks = nnx.List([
            SwinV2Block(dim, resolution, config.num_heads[index], window, 0 if i % 2 == 0 else shift,
                        config.mlp_ratio, rates[i], rngs=rngs)
            for i in range(config.depths[index])
        ])

    def __call__(self, x: jax.Array) -> jax.Array:
        if self.downsample is not None:
            x = self.downsample(x)
        for block in self.blocks:
            x = block(x)
        return x


class FlaxSwinV2(nnx.Module):
    """Swin Transformer V2 in Flax NNX. ``x``: NHWC images; returns logits ``(N, num_classes)``.

    ``rngs`` needs ``params`` and ``dropout`` streams (``nnx.Rngs(seed)`` gives both);
    ``model.eval()`` turns stochastic depth off, ``model.train()`` on.
    """

    def __init__(self, config: SwinConfig, *, rngs: nnx.Rngs):
        self.config = config
        self.patch_embed = PatchEmbed(config, rngs=rngs)
        self.layers = nnx.List([SwinV2Stage(config, i, rngs=rngs) for i in range(len(config.depths))])
        self.norm = _norm(config.dim(len(config.depths) - 1), rngs=rngs)
        self.head = _linear(config.dim(len(config.depths) - 1), config.num_classes, rngs=rngs)

    def features(self, x: jax.Array) -> jax.Array:
        x = self.patch_embed(x)
        for stage in self.layers:
            x = stage(x)
        return self.norm(x)

    def __call__(self, x: jax.Array) -> jax.Array:
        return self.head(self.features(x).mean(axis=(1, 2)))


# ----------------------------------------------------------------------------- weights and parity


def _timm_name(path: Sequence[Any]) -> str:
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
    return {_timm_name(path): path for path, _ in nnx.to_flat_state(nnx.state(flax_model, nnx.Param))}


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


def fashion_inputs(X: np.ndarray, config: SwinConfig) -> np.ndarray:
    """Normalised FashionMNIST ``(N, 28, 28)`` -> NCHW ``(N, in_chans, S, S)`` float32:
    zero-padded (after normalisation, so the border is the mean) to ``img_size``,
    centred, and repeated over the channels. Transpose to NHWC for Flax."""
    size = config.img_size
    if size < X.shape[-1]:
        raise ValueError(f"img_size {size} is smaller than the {X.shape[-1]}-pixel images; pad, do not crop")
    before = (size - X.shape[-1]) // 2
    after = size - X.shape[-1] - before
    padded = np.pad(X, ((0, 0), (before, after), (before, after)))
    return np.repeat(padded[:, None], config.in_chans, axis=1).astype(np.float32)


def decays(name: str, ndim: int) -> bool:
    """Whether weight decay applies to a parameter (timm's rule: matrices only,
    never the position-bias MLP nor the logit scale). One home for both sides."""
    return ndim >= 2 and "cpb_mlp" not in name and "logit_scale" not in name


def _torch_optimizer(model, config: sbs_training.TrainConfig, **kwargs):
    import torch

    groups = {True: [], False: []}
    for name, p in model.named_parameters():
        groups[decays(name, p.ndim)].append(p)
    return torch.optim.AdamW([{"params": groups[True], "weight_decay": config.weight_decay},
                              {"params": groups[False], "weight_decay": 0.0}], lr=config.lr, **kwargs)


def _optax_optimizer(params, config: sbs_training.TrainConfig, steps_per_epoch: int):
    import optax

    def name(path):  # the parameter's timm name from its pytree path (dict keys and list indices)
        return _timm_name([getattr(k, "key", getattr(k, "idx", None)) for k in path
                           if hasattr(k, "key") or hasattr(k, "idx")])

    mask = jax.tree_util.tree_map_with_path(lambda path, p: decays(name(path), p.ndim), params)

    def schedule(count):
        return sbs_training.learning_rate(count, config, steps_per_epoch, xp=jnp)

    return optax.adamw(schedule, b1=0.9, b2=0.999, eps=1e-8, weight_decay=config.weight_decay, mask=mask)


def predict_torch(model, X: np.ndarray, *, batch_size: int = 256) -> np.ndarray:
    """Classes predicted by timm's model (eval mode) for NCHW ``X``."""
    import torch

    device = next(model.parameters()).device
    model.eval()
    with torch.no_grad():
        out = [model(torch.as_tensor(X[i:i + batch_size], device=device)).argmax(1).cpu().numpy()
               for i in range(0, len(X), batch_size)]
    return np.concatenate(out)


_PREDICT_CACHE: dict = {}


def predict_flax(model: FlaxSwinV2, X: np.ndarray, *, batch_size: int = 256) -> np.ndarray:
    """Classes predicted by the port (eval mode) for NCHW ``X`` (transposed here)."""
    model.eval()
    graphdef, state = nnx.split(model)
    fn = _PREDICT_CACHE.get(graphdef)
    if fn is None:  # one compiled program per network, not one per call (e.g. per epoch)
        fn = _PREDICT_CACHE[graphdef] = jax.jit(lambda state, x: jnp.argmax(nnx.merge(graphdef, state)(x), axis=-1))
    return np.concatenate([np.asarray(fn(state, jnp.asarray(X[i:i + batch_size].transpose(0, 2, 3, 1))))
                           for i in range(0, len(X), batch_size)])


def train_torch(model, X: np.ndarray, y: np.ndarray, X_test: np.ndarray, y_test: np.ndarray,
                config: sbs_training.TrainConfig, *, progress: bool | str = False) -> sbs_training.History:
    """Train timm's model in place with AdamW and ``training.learning_rate``, batches from
    ``training.index_batches`` (the same as :func:`train_flax`), data on the model's device.
    ``X``: NCHW float32. Returns a History (test accuracy after every epoch)."""
    import torch
    import torch.nn.functional as F

    device = next(model.parameters()).device
    torch.manual_seed(config.seed)  # stochastic depth draws
    optimizer = _torch_optimizer(model, config)
    Xd, yd = torch.as_tensor(X, device=device), torch.as_tensor(y, device=device)
    steps = config.steps_per_epoch(len(X))
    history = sbs_training.History("torch", "eager")
    bar = sbs_training._bar(progress, config.num_epochs, "PyTorch Swin V2")
    step = 0
    for epoch in range(config.num_epochs):
        model.train()
        start = time.perf_counter()
        total = torch.zeros((), device=device)
        for index in torch.as_tensor(sbs_training.index_batches(len(X), config, epoch), device=device):
            for group in optimizer.param_groups:
                group["lr"] = float(sbs_training.learning_rate(step, config, steps))
            optimizer.zero_grad(set_to_none=True)
            loss = F.cross_entropy(model(Xd[index]), yd[index])
            loss.backward()
            optimizer.step()
            total += loss.detach()
            step += 1
        history.train_loss.append(float(total) / max(steps, 1))
        history.epoch_seconds.append(time.perf_counter() - start)
        history.test_accuracy.append(float(np.mean(predict_torch(model, X_test) == y_test)))
        sbs_training._epoch_done(bar, history)
    if bar is not None:
        bar.close()
    return history


def _flax_train_step(graphdef, tx, dtype=None):
    """A pure training step ``(params, opt_state, rest, X, y) -> (params, opt_state, rest, loss)``.
    ``rest`` (the dropout streams' counters) goes back out, so stochastic depth draws anew each step.
    ``dtype=jnp.bfloat16``: compute in bfloat16 from float32 master weights."""
    import optax

    def loss_fn(params, rest, X, y):
        if dtype is not None:
            params = jax.tree_util.tree_map(lambda p: p.astype(dtype), params)
            X = X.astype(dtype)
        model = nnx.merge(graphdef, params, rest)
        logits = model(X).astype(jnp.float32)
        _, _, rest = nnx.split(model, nnx.Param, ...)
        return optax.softmax_cross_entropy_with_integer_labels(logits, y).mean(), rest

    def step(params, opt_state, rest, X, y):
        # rest is an argument of the differentiated function (integer, so allow_int; its "gradient" is
        # dropped): the dropout streams then live at the trace level where the model draws from them.
        (loss, rest), (grads, _) = jax.value_and_grad(loss_fn, argnums=(0, 1), has_aux=True,
                                                      allow_int=True)(params, rest, X, y)
        updates, opt_state = tx.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), opt_state, rest, loss

    return step


def train_flax(model: FlaxSwinV2, X: np.ndarray, y: np.ndarray, X_test: np.ndarray, y_test: np.ndarray,
               config: sbs_training.TrainConfig, *, progress: bool | str = False) -> sbs_training.History:
    """Train the port in place: optax AdamW with the same schedule, weight-decay rule and
    batches as :func:`train_torch`, one jitted step per batch, data on the device.
    ``X``: NCHW float32 (transposed to NHWC once). ``History.compile_seconds``: the step's compilation."""
    model.train()
    graphdef, params, rest = nnx.split(model, nnx.Param, ...)
    steps = config.steps_per_epoch(len(X))
    tx = _optax_optimizer(params, config, steps)
    opt_state = tx.init(params)

    def device_step(params, opt_state, rest, X, y, index):
        return _flax_train_step(graphdef, tx)(params, opt_state, rest, X[index], y[index])

    Xd, yd = jnp.asarray(X.transpose(0, 2, 3, 1)), jnp.asarray(y.astype(np.int32))
    history = sbs_training.History("flax", "jit")
    start = time.perf_counter()
    index0 = jax.ShapeDtypeStruct((config.batch_size,), jnp.int32)
    compiled = jax.jit(device_step, donate_argnums=(0, 1, 2)).lower(params, opt_state, rest, Xd, yd, index0).compile()
    history.compile_seconds = time.perf_counter() - start
    bar = sbs_training._bar(progress, config.num_epochs, "Flax Swin V2")
    for epoch in range(config.num_epochs):
        start = time.perf_counter()
        losses = []
        for index in jnp.asarray(sbs_training.index_batches(len(X), config, epoch).astype(np.int32)):
            params, opt_state, rest, loss = compiled(params, opt_state, rest, Xd, yd, index)
            losses.append(loss)
        history.train_loss.append(float(jnp.stack(losses).mean()) if losses else float("nan"))
        history.epoch_seconds.append(time.perf_counter() - start)
        nnx.update(model, params, rest)
        history.test_accuracy.append(float(np.mean(predict_flax(model, X_test) == y_test)))
        model.train()
        # Copies: the next (donating) step must not free the arrays the model now holds.
        _, params, rest = jax.tree_util.tree_map(lambda a: a.copy(), nnx.split(model, nnx.Param, ...))
        sbs_training._epoch_done(bar, history)
    if bar is not None:
        bar.close()
    return history


# ============================================================================= the speed ladder
# Kept apart from the model: this section builds, for each framework, one callable per tool
# ("rung") and times them through sidebyside.timing.compare; verdicts come from
# sidebyside.verdict. It is meant to move onto the shared ladder harness (issue 12) when that
# lands: `_torch_rung`/`_jax_rung` are the Swin-specific parts, `ladder` the generic loop.

TORCH_TOOLS = ("eager", "compile", "cuda_graph")
JAX_TOOLS = ("jit", "jit_scan")
TOOL_LABELS = {
    "torch/eager": "PyTorch, eager",
    "torch/compile": "PyTorch, torch.compile",
    "torch/cuda_graph": "PyTorch, CUDA graph",
    "jax/jit": "JAX, jit step",
    "jax/jit_scan": "JAX, jit + lax.scan",
}
GPU_ONLY = ("cuda_graph",)  # rungs that need a CUDA device (timing.NotApplicable.cuda_graphs says why)
PRECISIONS = ("float32", "bfloat16")


@dataclasses.dataclass
class Rung:
    """One tool, ready to time: ``run()`` performs ``steps`` steps and returns the last result."""

    name: str
    run: Callable[[], Any] | None = None
    compile_s: float | None = None          # JAX: ahead-of-time trace + compile, measured apart
    peak_memory_bytes: Callable[[], int | None] | None = None
    error: str | None = None
    not_applicable: str | None = None       # why the tool cannot run on this machine (not a failure)


def random_batches(config: SwinConfig, batch_size: int, steps: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """``steps`` batches of random NCHW images and labels. Speed does not depend on pixel values
    (no data-dependent control flow in the network), so random data measures the same work as
    real images without a data set on disk."""
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((steps, batch_size, config.in_chans, config.img_size, config.img_size), np.float32)
    y = rng.integers(0, config.num_classes, (steps, batch_size)).astype(np.int64)
    return X, y


def _torch_state_bytes(model, optimizer, tensors) -> int:
    total = sum(t.numel() * t.element_size() for t in list(model.parameters()) + list(model.buffers()))
    if optimizer is not None:
        for state in optimizer.state.values():
            total += sum(v.numel() * v.element_size() for v in state.values() if hasattr(v, "numel"))
    return total + sum(t.numel() * t.element_size() for t in tensors)


def _torch_rung(config: SwinConfig, tool: str, phase: str, X: np.ndarray, y: np.ndarray, precision: str,
                seed: int) -> Rung:
    import torch
    import torch.nn.functional as F

    on_cuda = torch.cuda.is_available()
    device = torch.device("cuda" if on_cuda else "cpu")
    if tool in GPU_ONLY and not on_cuda:
        return Rung(f"torch/{tool}", not_applicable=str(sbs_timing.NotApplicable.cuda_graphs(device.type)))
    torch.manual_seed(seed)
    model = torch_model(config).to(device)
    amp = dict(device_type=device.type, dtype=torch.bfloat16, enabled=precision == "bfloat16")
    Xs = [torch.as_tensor(b, device=device) for b in X]
    ys = [torch.as_tensor(b, device=device) for b in y]
    optimizer = None
    if phase == "train":
        model.train()
        # capturable: the optimiser's step counter stays on the GPU, as a CUDA graph needs.
        optimizer = _torch_optimizer(model, sbs_training.TrainConfig(lr=1e-4, weight_decay=0.05),
                                     capturable=on_cuda and tool == "cuda_graph")

        def step(xb, yb):
            optimizer.zero_grad(set_to_none=True)
            with torch.autocast(**amp):
                loss = F.cross_entropy(model(xb), yb)
            loss.backward()
            optimizer.step()
            return loss.detach()
    else:
        model.eval()

        def step(xb, yb):
            with torch.no_grad(), torch.autocast(**amp):
                return model(xb)
    # Static shapes (dynamic=False): without it, the second batch size or precision that reaches this
    # code object is recompiled with a symbolic batch dimension ("automatic dynamic shapes").
    if tool == "compile":
        step = torch.compile(step, dynamic=False)
    elif tool == "cuda_graph":
        step = torch.compile(step, mode="reduce-overhead", dynamic=False)

    def run():
        out = None
        for xb, yb in zip(Xs, ys):
            out = step(xb, yb)
        return out

    def peak():
        if not on_cuda:
            return None
        torch.cuda.synchronize()
        others = torch.cuda.memory_allocated() - _torch_state_bytes(model, optimizer, Xs + ys)
        torch.cuda.reset_peak_memory_stats()
        run()
        torch.cuda.synchronize()
        return int(torch.cuda.max_memory_allocated() - others)

    return Rung(f"torch/{tool}", run=run, peak_memory_bytes=peak)


def jax_peak_bytes(compiled) -> int | None:
    """Peak device memory of one compiled executable, from XLA's own accounting:
    arguments + outputs - donated (aliased) buffers + temporaries. (The process's footprint
    mixes all programs, and by default XLA's allocator reserves most of the GPU up front.)"""
    try:
        m = compiled.memory_analysis()
    except Exception:  # noqa: BLE001  (not every backend reports it)
        return None
    if m is None:
        return None
    return int(m.argument_size_in_bytes + m.output_size_in_bytes - m.alias_size_in_bytes + m.temp_size_in_bytes)


def _jax_rung(config: SwinConfig, tool: str, phase: str, X: np.ndarray, y: np.ndarray, precision: str,
              seed: int) -> Rung:
    model = FlaxSwinV2(config, rngs=nnx.Rngs(seed))
    dtype = jnp.bfloat16 if precision == "bfloat16" else None
    if phase == "train":
        model.train()
    else:
        model.eval()
    graphdef, params, rest = nnx.split(model, nnx.Param, ...)
    Xs = jnp.asarray(X.transpose(0, 1, 3, 4, 2))  # (steps, B, H, W, C)
    ys = jnp.asarray(y.astype(np.int32))
    steps = len(X)
    if phase == "train":
        tx = _optax_optimizer(params, sbs_training.TrainConfig(lr=1e-4, weight_decay=0.05), 1)
        step = _flax_train_step(graphdef, tx, dtype)
        state = [params, tx.init(params), rest]
        if tool == "jit":
            fn, args = jax.jit(step, donate_argnums=(0, 1, 2)), (*state, Xs[0], ys[0])
        else:
            def scanned(params, opt_state, rest, Xs, ys):
                def body(carry, batch):
                    params, opt_state, rest, loss = step(*carry, *batch)
                    return (params, opt_state, rest), loss
                (params, opt_state, rest), losses = jax.lax.scan(body, (params, opt_state, rest), (Xs, ys))
                return params, opt_state, rest, losses[-1]
            fn, args = jax.jit(scanned, donate_argnums=(0, 1, 2)), (*state, Xs, ys)
    else:
        def forward(params, rest, xb):
            if dtype is not None:
                params, xb = jax.tree_util.tree_map(lambda p: p.astype(dtype), params), xb.astype(dtype)
            return nnx.merge(graphdef, params, rest)(xb).astype(jnp.float32)
        state = [params, rest]
        if tool == "jit":
            fn, args = jax.jit(forward), (params, rest, Xs[0])
        else:
            def scanned(params, rest, Xs):
                return jax.lax.scan(lambda c, xb: (c, forward(params, rest, xb)), 0, Xs)[1][-1]
            fn, args = jax.jit(scanned), (params, rest, Xs)
    start = time.perf_counter()
    compiled = fn.lower(*args).compile()
    compile_s = time.perf_counter() - start
    batches = [(Xs[i], ys[i]) for i in range(steps)]

    if phase == "train" and tool == "jit":
        def run():
            loss = None
            for xb, yb in batches:
                state[0], state[1], state[2], loss = compiled(state[0], state[1], state[2], xb, yb)
            return loss
    elif phase == "train":
        def run():
            state[0], state[1], state[2], loss = compiled(state[0], state[1], state[2], Xs, ys)
            return loss
    elif tool == "jit":
        def run():
            out = None
            for xb, _ in batches:
                out = compiled(params, rest, xb)
            return out
    else:
        def run():
            return compiled(params, rest, Xs)
    return Rung(f"jax/{tool}", run=run, compile_s=compile_s, peak_memory_bytes=lambda: jax_peak_bytes(compiled))


def _one_line(error: BaseException) -> str:
    return " ".join(f"{type(error).__name__}: {error}".split())[:300]


def ladder(config: SwinConfig, *, batch_size: int, phase: str, precision: str = "float32",
           torch_tools: Sequence[str] = TORCH_TOOLS, jax_tools: Sequence[str] = JAX_TOOLS, steps: int = 5,
           repeats: int = 5, min_repeat_s: float = 0.0, seed: int = 0) -> dict[str, Any]:
    """Time every tool of both frameworks on the same work: ``steps`` training (or evaluation)
    steps of ``batch_size`` random images per call, interleaved in one ``timing.compare`` run.

    Returns ``{"ladder": {"<framework>/<tool>": entry}, "best": verdict.best(...), ...}`` where an
    entry is ``verdict.ladder_entry`` per step (``median_s``, ``iqr_s``, ``q1_s``, ``q3_s``,
    ``compile_s``, ``first_s``, ``error``) plus ``images_per_s``, ``peak_memory_bytes``. A tool that
    fails (or cannot run on this device) keeps its row with the error.
    """
    from . import verdict as sbs_verdict

    if phase not in ("train", "eval"):
        raise ValueError(f"phase must be 'train' or 'eval', got {phase!r}")
    if precision not in PRECISIONS:
        raise ValueError(f"precision must be one of {PRECISIONS}, got {precision!r}")
    for tools, known in ((torch_tools, TORCH_TOOLS), (jax_tools, JAX_TOOLS)):
        unknown = sorted(set(tools) - set(known))
        if unknown:
            raise ValueError(f"unknown tools {unknown}; choose from {known}")
    if set(torch_tools) & {"compile", "cuda_graph"}:
        import torch

        torch._dynamo.reset()  # each setting compiles cold, from nothing an earlier setting left
    X, y = random_batches(config, batch_size, steps, seed)
    rungs: dict[str, Rung] = {}
    first: dict[str, float] = {}
    realloc: dict[str, float] = {}
    for framework, tools, build in (("torch", torch_tools, _torch_rung), ("jax", jax_tools, _jax_rung)):
        for tool in tools:
            name = f"{framework}/{tool}"
            try:
                rung = build(config, tool, phase, X, y, precision, seed)
                if rung.run is not None:
                    # The first call alone: torch.compile compiles here; JAX compiled above, ahead of time.
                    start = time.perf_counter()
                    sbs_timing.block(rung.run())
                    first[name] = time.perf_counter() - start
                    if framework == "torch" and _on_gpu():
                        # Empty PyTorch's caching allocator and call again: what this costs beyond a
                        # steady call is the allocation that the first call paid too.
                        import torch

                        torch.cuda.synchronize()
                        torch.cuda.empty_cache()
                        start = time.perf_counter()
                        sbs_timing.block(rung.run())
                        realloc[name] = time.perf_counter() - start
            except Exception as error:  # noqa: BLE001  (a failing tool is a finding, kept with its error)
                rung = Rung(name, error=_one_line(error))
            rungs[name] = rung
    working = {name: r.run for name, r in rungs.items() if r.run is not None}
    timings = sbs_timing.compare(working, repeats=repeats, warmup=1, min_repeat_s=min_repeat_s,
                                 pipelined=_on_gpu()) if working else {}
    entries: dict[str, dict[str, Any]] = {}
    for name, rung in rungs.items():
        if rung.error is not None or rung.not_applicable is not None:
            entry = (sbs_verdict.ladder_entry(error=rung.error) if rung.error is not None else
                     sbs_verdict.ladder_entry(not_applicable=rung.not_applicable))
            entries[name] = {**entry, "images_per_s": None, "peak_memory_bytes": None}
            continue
        t = timings[name]
        # The first call = compilation (torch.compile inside it; JAX's measured apart, ahead of time)
        # + allocation + `steps` steady steps. PyTorch on CUDA: allocation from the re-allocation call.
        if rung.compile_s is not None:
            compile_s, allocation_s = rung.compile_s, max(first[name] - t.median_s, 0.0)
        elif name in realloc:
            compile_s, allocation_s = max(first[name] - realloc[name], 0.0), max(realloc[name] - t.median_s, 0.0)
        else:
            compile_s, allocation_s = max(first[name] - t.median_s, 0.0), None
        per_step = {"median_s": t.median_s / steps, "q1_s": t.q1_s / steps, "q3_s": t.q3_s / steps,
                    "first_s": first[name],  # the whole first call (all its steps)
                    "compile_s": compile_s}
        entry = sbs_verdict.ladder_entry(per_step)
        entry["allocation_s"] = allocation_s
        entry["images_per_s"] = batch_size / entry["median_s"]
        try:
            entry["peak_memory_bytes"] = rung.peak_memory_bytes() if rung.peak_memory_bytes else None
        except Exception as error:  # noqa: BLE001
            entry["peak_memory_bytes"], entry["memory_error"] = None, _one_line(error)
        entries[name] = entry
    return {"phase": phase, "batch_size": batch_size, "precision": precision, "steps_per_call": steps,
            "ladder": entries, "best": sbs_verdict.best(entries)}


def _on_gpu() -> bool:
    try:
        import torch

        return torch.cuda.is_available()
    except ImportError:
        return False



def first_step(entry: dict[str, Any], *, batch_size: int, epoch_images: int = 9469) -> dict[str, Any]:
    """The seed's first-epoch observation, from one training ladder entry.

    The seed saw the first epoch, above all its first step, take much longer on both sides and
    blamed memory allocation. The first step splits into ``compile_s`` (JAX: trace and compile,
    timed ahead of time; PyTorch: what the first call costs beyond a call that re-allocates,
    i.e. ``torch.compile`` and the one-off set-up of the device's libraries), ``allocation_s``
    (PyTorch on CUDA: a call after ``torch.cuda.empty_cache()`` beyond a steady call; JAX: the
    compiled program's first run beyond a steady one, which holds its buffers' allocation when
    JAX does not preallocate the GPU; None where it cannot be separated) and one
    steady step. An epoch of ``epoch_images`` images (Imagenette's training set, the seed's data)
    is then ``first_step_s + (steps - 1) * steady_s``.
    """
    if entry.get("error"):
        return {"error": entry["error"]}
    if entry.get("median_s") is None:  # a tool that does not apply here
        return {"error": f"not applicable: {entry.get('not_applicable')}"}
    steady = entry["median_s"]
    steps = math.ceil(epoch_images / batch_size)
    first = (entry["compile_s"] or 0.0) + (entry["allocation_s"] or 0.0) + steady
    return {"compile_s": entry["compile_s"], "allocation_s": entry["allocation_s"], "steady_s": steady,
            "first_step_s": first, "steps_per_epoch": steps, "epoch_images": epoch_images,
            "first_epoch_s": first + (steps - 1) * steady, "steady_epoch_s": steps * steady,
            "first_epoch_excess": (first - steady) / (steps * steady), "error": None}
