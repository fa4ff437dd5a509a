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

The package:

- ``config``: the configuration, timm's constants and model, the window geometry;
- ``model``: the Flax NNX model;
- ``port``: weight copying and the parity check;
- ``train``: training for accuracy (both frameworks, same schedule and batches);
- ``ladder``: the speed ladder and the first step;
- ``report``: the post's results record and generated conclusion.
"""

from __future__ import annotations

from sidebyside._lazy import package

__all__, __getattr__ = package(__name__, __path__, reexport=True)
