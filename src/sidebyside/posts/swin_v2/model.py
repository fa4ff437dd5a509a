"""The Flax NNX Swin Transformer V2, with timm's parameter names (see :mod:`sidebyside.posts.swin_v2`).

Precision: the parameters are always float32 (``param_dtype``); the model
computes in the dtypes it is built with. In float32 everything is float32.
In bfloat16 it follows ``torch.autocast(dtype=torch.bfloat16)`` on timm's
model, so that both sides run one policy (notebook 06's ``flax_swin`` builds it
for the post's device):

- ``dtype`` (bfloat16): the convolution, every linear layer (the position-bias
  MLP included), the two attention matrix products and so the logits, as
  autocast's lower-precision list (convolutions, linear, matmul) does on
  every device;
- ``norm_dtype``: the output of every LayerNorm and of the cosine attention's
  L2 normalisation, and so the residual stream. On a GPU it is float32
  (``layer_norm`` and ``linalg_vector_norm`` are on CUDA autocast's float32
  list); on the CPU it is bfloat16 (CPU autocast's float32 list has neither,
  so they run in their input's dtype, bfloat16);
- float32 on every device: the scaled logits, from the product with the float32
  ``exp(logit_scale)`` on, through the position bias, the mask and the softmax
  (type promotion, on both sides); the loss takes float32 logits.
"""


from __future__ import annotations

import math
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from sidebyside.posts.swin_v2.config import CPB_HIDDEN, LOGIT_SCALE_MAX, SwinConfig, relative_tables, shift_mask

__all__ = ['PatchEmbed', 'WindowAttention', 'Mlp', 'SwinV2Block', 'PatchMerging', 'SwinV2Stage',
           'FlaxSwinV2']

Dtype = Any


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


def _linear(n_in: int, n_out: int, *, dtype: Dtype, rngs: nnx.Rngs, use_bias: bool = True) -> nnx.Linear:
    return nnx.Linear(n_in, n_out, use_bias=use_bias, kernel_init=_linear_init, bias_init=nnx.initializers.zeros,
                      dtype=dtype, param_dtype=jnp.float32, rngs=rngs)


def _norm(dim: int, *, dtype: Dtype, rngs: nnx.Rngs, zero: bool = False) -> nnx.LayerNorm:
    # PyTorch's LayerNorm: eps 1e-5 and a two-pass variance (Flax's "fast" one-pass variance rounds differently).
    # dtype is its output's (the statistics are float32 whatever it is).
    return nnx.LayerNorm(dim, epsilon=1e-5, use_fast_variance=False, dtype=dtype, param_dtype=jnp.float32, rngs=rngs,
                         scale_init=nnx.initializers.zeros if zero else nnx.initializers.ones)


def _l2_normalise(x: jax.Array) -> jax.Array:
    # As torch.nn.functional.normalize: x / max(||x||, 1e-12).
    return x / jnp.maximum(jnp.sqrt(jnp.sum(x * x, axis=-1, keepdims=True)), 1e-12)


class PatchEmbed(nnx.Module):
    """Non-overlapping ``patch x patch`` patches (a strided convolution), then LayerNorm; NHWC in and out."""

    def __init__(self, config: SwinConfig, *, dtype: Dtype, norm_dtype: Dtype, rngs: nnx.Rngs):
        p, c = config.patch_size, config.in_chans
        self.proj = nnx.Conv(c, config.embed_dim, kernel_size=(p, p), strides=(p, p), padding="VALID",
                             kernel_init=_torch_conv_init(c * p * p), bias_init=_torch_conv_init(c * p * p),
                             dtype=dtype, param_dtype=jnp.float32, rngs=rngs)
        self.norm = _norm(config.embed_dim, dtype=norm_dtype, rngs=rngs)

    def __call__(self, x: jax.Array) -> jax.Array:
        return self.norm(self.proj(x))


class WindowAttention(nnx.Module):
    """Scaled cosine attention inside windows, with the continuous position bias; the matrix products in
    ``dtype``, the L2 normalisation's output in ``norm_dtype``, the scaled logits and their softmax in float32."""

    def __init__(self, dim: int, window: int, num_heads: int, *, dtype: Dtype, norm_dtype: Dtype, rngs: nnx.Rngs):
        self.window, self.num_heads = window, num_heads
        self.dtype, self.norm_dtype = dtype, norm_dtype
        self.logit_scale = nnx.Param(jnp.full((num_heads, 1, 1), math.log(10.0), jnp.float32))
        self.cpb_mlp = nnx.Sequential(_linear(2, CPB_HIDDEN, dtype=dtype, rngs=rngs), jax.nn.relu,
                                      _linear(CPB_HIDDEN, num_heads, dtype=dtype, rngs=rngs, use_bias=False))
        self.qkv = _linear(dim, 3 * dim, dtype=dtype, rngs=rngs, use_bias=False)
        self.q_bias = nnx.Param(jnp.zeros((dim,), jnp.float32))
        self.v_bias = nnx.Param(jnp.zeros((dim,), jnp.float32))  # keys get no bias (timm's k_bias is a zero buffer)
        self.proj = _linear(dim, dim, dtype=dtype, rngs=rngs)

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
        qkv = self.qkv(x)
        qkv = (qkv + bias.astype(qkv.dtype)).reshape(batch, n, 3, self.num_heads, dim // self.num_heads)
        q, k, v = qkv.transpose(2, 0, 3, 1, 4)
        q, k = _l2_normalise(q.astype(self.norm_dtype)), _l2_normalise(k.astype(self.norm_dtype))
        attn = q.astype(self.dtype) @ k.astype(self.dtype).swapaxes(-1, -2)
        # From here float32 (the scale is): the scaled logits, the position bias added, the mask and the softmax.
        attn = attn * jnp.exp(jnp.minimum(self.logit_scale[...], LOGIT_SCALE_MAX)) + self.position_bias()[None]
        if mask is not None:
            windows = mask.shape[0]
            attn = attn.reshape(-1, windows, self.num_heads, n, n) + jnp.asarray(mask, attn.dtype)[None, :, None]
            attn = attn.reshape(-1, self.num_heads, n, n)
        attn = jax.nn.softmax(attn, axis=-1)
        out = (attn.astype(self.dtype) @ v.astype(self.dtype)).transpose(0, 2, 1, 3).reshape(batch, n, dim)
        return self.proj(out)


class Mlp(nnx.Module):
    """The block's feed-forward part: Linear, GELU, Linear (timm's names ``fc1``/``fc2``)."""

    def __init__(self, dim: int, hidden: int, *, dtype: Dtype, rngs: nnx.Rngs):
        self.fc1 = _linear(dim, hidden, dtype=dtype, rngs=rngs)
        self.fc2 = _linear(hidden, dim, dtype=dtype, rngs=rngs)

    def __call__(self, x: jax.Array) -> jax.Array:
        return self.fc2(jax.nn.gelu(self.fc1(x), approximate=False))  # timm's GELU is the exact (erf) one


def _drop_path(rate: float, rngs: nnx.Rngs) -> nnx.Dropout:
    # Stochastic depth = dropout of a whole sample's residual branch, rescaled by 1/keep:
    # one Bernoulli draw per sample, broadcast over (H, W, C).
    return nnx.Dropout(rate, broadcast_dims=(1, 2, 3), rngs=rngs)


class SwinV2Block(nnx.Module):
    """(Shifted-)window attention and MLP, each with residual post-normalisation."""

    def __init__(self, dim: int, resolution: int, num_heads: int, window: int, shift: int, mlp_ratio: float,
                 drop_path: float, *, dtype: Dtype, norm_dtype: Dtype, rngs: nnx.Rngs):
        self.resolution, self.window, self.shift = resolution, window, shift
        self.attn = WindowAttention(dim, window, num_heads, dtype=dtype, norm_dtype=norm_dtype, rngs=rngs)
        self.norm1 = _norm(dim, dtype=norm_dtype, rngs=rngs, zero=True)
        self.drop_path1 = _drop_path(drop_path, rngs)
        self.mlp = Mlp(dim, int(dim * mlp_ratio), dtype=dtype, rngs=rngs)
        self.norm2 = _norm(dim, dtype=norm_dtype, rngs=rngs, zero=True)
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

    def __init__(self, dim: int, *, dtype: Dtype, norm_dtype: Dtype, rngs: nnx.Rngs):
        self.reduction = _linear(4 * dim, 2 * dim, dtype=dtype, rngs=rngs, use_bias=False)
        self.norm = _norm(2 * dim, dtype=norm_dtype, rngs=rngs)

    def __call__(self, x: jax.Array) -> jax.Array:
        b, h, w, c = x.shape
        x = x.reshape(b, h // 2, 2, w // 2, 2, c).transpose(0, 1, 3, 4, 2, 5).reshape(b, h // 2, w // 2, 4 * c)
        return self.norm(self.reduction(x))


class SwinV2Stage(nnx.Module):
    """One stage: patch merging (after the first stage), then its blocks, shifted every second one."""

    def __init__(self, config: SwinConfig, index: int, *, dtype: Dtype, norm_dtype: Dtype, rngs: nnx.Rngs):
        dim, resolution = config.dim(index), config.resolutions()[index]
        self.downsample = (PatchMerging(config.dim(index - 1), dtype=dtype, norm_dtype=norm_dtype, rngs=rngs)
                           if index > 0 else None)
        window, shift = config.window_and_shift(resolution)
        rates = config.drop_path_rates()[index]
        self.blocks = nnx.List([
            SwinV2Block(dim, resolution, config.num_heads[index], window, 0 if i % 2 == 0 else shift,
                        config.mlp_ratio, rates[i], dtype=dtype, norm_dtype=norm_dtype, rngs=rngs)
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

    The parameters are float32 whatever the dtypes. ``dtype``: the compute dtype of the convolution, the
    linear layers and the attention's matrix products (so the logits'); ``norm_dtype``: the output dtype of
    every LayerNorm and of the attention's L2 normalisation (so the residual stream's). Both float32 by
    default; torch.autocast's bfloat16 policy on a device is the module docstring's.
    """

    def __init__(self, config: SwinConfig, *, rngs: nnx.Rngs, dtype: Dtype = jnp.float32,
                 norm_dtype: Dtype = jnp.float32):
        self.config = config
        self.patch_embed = PatchEmbed(config, dtype=dtype, norm_dtype=norm_dtype, rngs=rngs)
        self.layers = nnx.List([SwinV2Stage(config, i, dtype=dtype, norm_dtype=norm_dtype, rngs=rngs)
                                for i in range(len(config.depths))])
        self.norm = _norm(config.dim(len(config.depths) - 1), dtype=norm_dtype, rngs=rngs)
        self.head = _linear(config.dim(len(config.depths) - 1), config.num_classes, dtype=dtype, rngs=rngs)

    def features(self, x: jax.Array) -> jax.Array:
        x = self.patch_embed(x)
        for stage in self.layers:
            x = stage(x)
        return self.norm(x)

    def __call__(self, x: jax.Array) -> jax.Array:
        return self.head(self.features(x).mean(axis=(1, 2)))


# ----------------------------------------------------------------------------- weights and parity


