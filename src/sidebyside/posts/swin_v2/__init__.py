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

from sidebyside._lazy import face

__all__ = ['config', 'model', 'port', 'train', 'ladder', 'report', 'LOGIT_SCALE_MAX', 'MASK_VALUE', 'CPB_HIDDEN', 'SwinConfig', 'torch_model', 'relative_tables', 'shift_mask', 'PatchEmbed', 'WindowAttention', 'Mlp', 'SwinV2Block', 'PatchMerging', 'SwinV2Stage', 'FlaxSwinV2', 'timm_name', 'flax_param_names', 'copy_timm_weights', 'randomise_torch_', 'parity', 'fashion_inputs', 'decays', 'torch_optimizer', 'optax_optimizer', 'predict_torch', 'predict_flax', 'train_torch', 'flax_train_step', 'train_flax', 'TORCH_TOOLS', 'JAX_TOOLS', 'TOOL_LABELS', 'GPU_ONLY', 'PRECISIONS', 'Rung', 'random_batches', 'jax_peak_bytes', 'speed_ladder', 'first_step']

__getattr__ = face(__name__, ['config', 'model', 'port', 'train', 'ladder', 'report'], {'LOGIT_SCALE_MAX': 'config', 'MASK_VALUE': 'config', 'CPB_HIDDEN': 'config', 'SwinConfig': 'config', 'torch_model': 'config', 'relative_tables': 'config', 'shift_mask': 'config', 'PatchEmbed': 'model', 'WindowAttention': 'model', 'Mlp': 'model', 'SwinV2Block': 'model', 'PatchMerging': 'model', 'SwinV2Stage': 'model', 'FlaxSwinV2': 'model', 'timm_name': 'port', 'flax_param_names': 'port', 'copy_timm_weights': 'port', 'randomise_torch_': 'port', 'parity': 'port', 'fashion_inputs': 'train', 'decays': 'train', 'torch_optimizer': 'train', 'optax_optimizer': 'train', 'predict_torch': 'train', 'predict_flax': 'train', 'train_torch': 'train', 'flax_train_step': 'train', 'train_flax': 'train', 'TORCH_TOOLS': 'ladder', 'JAX_TOOLS': 'ladder', 'TOOL_LABELS': 'ladder', 'GPU_ONLY': 'ladder', 'PRECISIONS': 'ladder', 'Rung': 'ladder', 'random_batches': 'ladder', 'speed_ladder': 'ladder', 'jax_peak_bytes': 'ladder', 'ladder': 'speed_ladder', 'first_step': 'ladder'})
