"""Flax NNX ports of timm's ResNet-50 and ViT-B/16, with timm's parameter names.

Each attribute path of a port is the key of timm's ``state_dict`` once joined with dots (a
``kernel`` or ``scale`` is timm's ``weight``, a BatchNorm's ``mean``/``var`` its
``running_mean``/``running_var``), so that :func:`sidebyside.posts.real_models.port.copy_torch_to_flax`
can move every tensor and refuse any left over. Images are NHWC here (NCHW in PyTorch).

- :class:`FlaxResNet`: timm's ``ResNet`` with ``Bottleneck`` blocks (the stride on the 3×3 conv,
  "v1.5"), a 7×7 stem, 3×3 max pool, BatchNorm (epsilon 1e-5; batch statistics in training,
  running ones in evaluation), a 1×1 conv and BatchNorm shortcut where the shape changes, global
  average pooling and a linear head.
- :class:`FlaxViT`: timm's ``VisionTransformer``: a patch convolution, a class token, learned
  position embeddings, pre-norm blocks (LayerNorm epsilon 1e-6, one ``qkv`` projection, exact GELU),
  a final LayerNorm and the class token's logits. Attention is ``jax.nn.dot_product_attention``
  (:func:`.attention.dot_product_attention`; timm's ``fused_attn`` runs
  ``F.scaled_dot_product_attention`` on the PyTorch side), with the ``attention`` implementation
  given to :class:`FlaxViT` (None: JAX's default, XLA's; ``"cudnn"``: cuDNN's fused kernel, on a
  GPU in bfloat16 or float16 only, which raises on anything else).

``dtype`` is Flax's compute dtype (None: the parameters' own, float32), given to the layers that
``torch.autocast`` runs in that dtype: every ``Conv`` and ``Linear`` (so attention, whose queries,
keys and values they make, too) and ResNet's ``BatchNorm`` (its output; Flax computes the statistics
in float32 at least). Parameters stay float32 (``param_dtype``); LayerNorm, the embeddings, the
residual stream of ViT and the softmax inside attention stay float32, as under autocast.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from flax import nnx

from sidebyside.posts.real_models.attention import dot_product_attention

__all__ = ["Bottleneck", "FlaxResNet", "PatchEmbed", "Attention", "Mlp", "Block", "FlaxViT"]


def _bn(n: int, rngs: nnx.Rngs, dtype=None) -> nnx.BatchNorm:
    # PyTorch's momentum 0.1; the variance as E[(x - mean)²], as PyTorch computes it (Flax's fast
    # E[x²] - mean² loses float32 digits when the mean is large against the spread)
    return nnx.BatchNorm(n, momentum=0.9, epsilon=1e-5, use_fast_variance=False, dtype=dtype, rngs=rngs)


def _conv(cin: int, cout: int, k: int, stride: int, rngs: nnx.Rngs, bias: bool = False, dtype=None) -> nnx.Conv:
    pad = (k - 1) // 2 if k > 1 else 0
    return nnx.Conv(cin, cout, (k, k), strides=stride, padding=((pad, pad), (pad, pad)), use_bias=bias, dtype=dtype,
                    rngs=rngs)


class Bottleneck(nnx.Module):
    """1×1 reduce, 3×3 (with the stride), 1×1 expand ×4, each with BatchNorm; ReLU after the sum."""

    def __init__(self, cin: int, planes: int, stride: int, *, dtype=None, rngs: nnx.Rngs):
        cout = planes * 4
        self.conv1, self.bn1 = _conv(cin, planes, 1, 1, rngs, dtype=dtype), _bn(planes, rngs, dtype)
        self.conv2, self.bn2 = _conv(planes, planes, 3, stride, rngs, dtype=dtype), _bn(planes, rngs, dtype)
        self.conv3, self.bn3 = _conv(planes, cout, 1, 1, rngs, dtype=dtype), _bn(cout, rngs, dtype)
        self.downsample = (nnx.List([_conv(cin, cout, 1, stride, rngs, dtype=dtype), _bn(cout, rngs, dtype)])
                           if stride != 1 or cin != cout else None)

    def __call__(self, x):
        shortcut = x
        x = jax.nn.relu(self.bn1(self.conv1(x)))
        x = jax.nn.relu(self.bn2(self.conv2(x)))
        x = self.bn3(self.conv3(x))
        if self.downsample is not None:
            shortcut = self.downsample[1](self.downsample[0](shortcut))
        return jax.nn.relu(x + shortcut)


class FlaxResNet(nnx.Module):
    """ResNet with Bottleneck blocks: ``layers`` blocks per stage of ``channels`` planes each;
    ``dtype``: the compute dtype (see the module)."""

    def __init__(self, *, layers=(3, 4, 6, 3), channels=(64, 128, 256, 512), stem_width: int = 64,
                 num_classes: int = 1000, dtype=None, rngs: nnx.Rngs):
        self.conv1, self.bn1 = _conv(3, stem_width, 7, 2, rngs, dtype=dtype), _bn(stem_width, rngs, dtype)
        cin = stem_width
        for i, (n, planes) in enumerate(zip(layers, channels)):
            blocks = []
            for j in range(n):
                blocks.append(Bottleneck(cin, planes, 2 if (i > 0 and j == 0) else 1, dtype=dtype, rngs=rngs))
                cin = planes * 4
            setattr(self, f"layer{i + 1}", nnx.List(blocks))
        self.stages = len(layers)
        self.fc = nnx.Linear(cin, num_classes, dtype=dtype, rngs=rngs)

    def __call__(self, x):
        x = jax.nn.relu(self.bn1(self.conv1(x)))
        x = jax.lax.reduce_window(x, -jnp.inf, jax.lax.max, (1, 3, 3, 1), (1, 2, 2, 1),
                                  ((0, 0), (1, 1), (1, 1), (0, 0)))
        for i in range(self.stages):
            for block in getattr(self, f"layer{i + 1}"):
                x = block(x)
        return self.fc(x.mean(axis=(1, 2)))


class PatchEmbed(nnx.Module):
    """A ``patch × patch`` convolution with stride ``patch``, flattened to tokens."""

    def __init__(self, patch: int, dim: int, *, dtype=None, rngs: nnx.Rngs):
        self.proj = nnx.Conv(3, dim, (patch, patch), strides=patch, padding="VALID", dtype=dtype, rngs=rngs)

    def __call__(self, x):
        x = self.proj(x)
        return x.reshape(x.shape[0], -1, x.shape[-1])


class Attention(nnx.Module):
    """Multi-head self-attention with one ``qkv`` projection (q, k, v in that order, heads inside),
    through ``jax.nn.dot_product_attention(..., implementation=implementation)`` (scale
    1/sqrt(head dim), no mask; :func:`.attention.dot_product_attention`)."""

    def __init__(self, dim: int, heads: int, *, implementation: str | None = None, dtype=None, rngs: nnx.Rngs):
        self.heads = heads
        self.implementation = implementation
        self.qkv = nnx.Linear(dim, 3 * dim, dtype=dtype, rngs=rngs)
        self.proj = nnx.Linear(dim, dim, dtype=dtype, rngs=rngs)

    def __call__(self, x):
        B, N, C = x.shape
        qkv = self.qkv(x).reshape(B, N, 3, self.heads, C // self.heads)  # (batch, tokens, q|k|v, heads, head dim)
        y = dot_product_attention(qkv[:, :, 0], qkv[:, :, 1], qkv[:, :, 2], implementation=self.implementation)
        return self.proj(y.reshape(B, N, C))


class Mlp(nnx.Module):
    """``fc1``, exact GELU, ``fc2``."""

    def __init__(self, dim: int, hidden: int, *, dtype=None, rngs: nnx.Rngs):
        self.fc1 = nnx.Linear(dim, hidden, dtype=dtype, rngs=rngs)
        self.fc2 = nnx.Linear(hidden, dim, dtype=dtype, rngs=rngs)

    def __call__(self, x):
        return self.fc2(jax.nn.gelu(self.fc1(x), approximate=False))


class Block(nnx.Module):
    """Pre-norm transformer block: ``x + attn(norm1(x))``, then ``x + mlp(norm2(x))``."""

    def __init__(self, dim: int, heads: int, *, attention: str | None = None, dtype=None, rngs: nnx.Rngs):
        self.norm1 = nnx.LayerNorm(dim, epsilon=1e-6, use_fast_variance=False, rngs=rngs)
        self.attn = Attention(dim, heads, implementation=attention, dtype=dtype, rngs=rngs)
        self.norm2 = nnx.LayerNorm(dim, epsilon=1e-6, use_fast_variance=False, rngs=rngs)
        self.mlp = Mlp(dim, 4 * dim, dtype=dtype, rngs=rngs)

    def __call__(self, x):
        x = x + self.attn(self.norm1(x))
        return x + self.mlp(self.norm2(x))


class FlaxViT(nnx.Module):
    """ViT with a class token: patch embedding, ``depth`` blocks, LayerNorm, the class token's logits.
    ``attention``: the implementation ``jax.nn.dot_product_attention`` is given (None: XLA's);
    ``dtype``: the compute dtype (see the module)."""

    def __init__(self, *, img_size: int = 224, patch_size: int = 16, dim: int = 768, depth: int = 12,
                 heads: int = 12, num_classes: int = 1000, attention: str | None = None, dtype=None,
                 rngs: nnx.Rngs):
        tokens = (img_size // patch_size) ** 2
        self.patch_embed = PatchEmbed(patch_size, dim, dtype=dtype, rngs=rngs)
        self.cls_token = nnx.Param(jnp.zeros((1, 1, dim)))
        self.pos_embed = nnx.Param(0.02 * jax.random.normal(rngs.params(), (1, tokens + 1, dim)))
        self.blocks = nnx.List([Block(dim, heads, attention=attention, dtype=dtype, rngs=rngs) for _ in range(depth)])
        self.norm = nnx.LayerNorm(dim, epsilon=1e-6, use_fast_variance=False, rngs=rngs)
        self.head = nnx.Linear(dim, num_classes, dtype=dtype, rngs=rngs)

    def __call__(self, x):
        x = self.patch_embed(x)
        cls = jnp.broadcast_to(self.cls_token[...], (x.shape[0], 1, x.shape[-1]))
        x = jnp.concatenate([cls, x], axis=1) + self.pos_embed[...]
        for block in self.blocks:
            x = block(x)
        return self.head(self.norm(x)[:, 0])
