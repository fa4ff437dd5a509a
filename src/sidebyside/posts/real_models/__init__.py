"""ResNet-50, ViT-B/16 and GPT-2 small at their real sizes, trained and served in PyTorch and JAX.

- ``config``: each model's size (:class:`ModelSpec`), the PyTorch models (timm's, and GPT-2), the
  Flax ones, the published figures.
- ``vision``: the Flax NNX ports of timm's ResNet-50 and ViT-B/16.
- ``gpt2``: GPT-2 in PyTorch and in Flax NNX, with a key-value cache, and greedy generation
  without the cache (the check).
- ``attention``: the Flax side's attention, ``jax.nn.dot_product_attention`` (float64 with its softmax in
  float64, for the parity check).
- ``port``: the weight copy (and back) and the parity check.
- ``work``: the workloads and each framework's rungs (the ladders), FLOPs and peak memory.
- ``report``: the post's results record, verdicts, key table and generated prose.
"""

from __future__ import annotations

from sidebyside._lazy import package

__all__, __getattr__ = package(__name__, __path__)
