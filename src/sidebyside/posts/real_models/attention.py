"""Attention on the Flax side, and the names the record gives each side's attention.

:func:`dot_product_attention` is ``jax.nn.dot_product_attention`` (the layout it takes: ``(batch,
length, heads, head_dim)``), with the ``implementation`` a model was built with: None, JAX's
default (XLA's, on every device), or ``"cudnn"`` (cuDNN's fused kernel: a GPU, bfloat16 or float16
inputs only; anything else raises). One exception, float64 inputs: JAX's XLA implementation always
computes the softmax in float32 (its source says so), which leaves a relative error of about 1e-7
where the float64 parity check (:func:`.port.parity`) allows 1e-8; float64 inputs therefore take
the same steps as that implementation (logits ``QKᵀ / sqrt(head_dim)``, the mask, softmax, ``AV``)
with the softmax in float64. Every float32 and bfloat16 call, the ones timed, goes through
``jax.nn.dot_product_attention``; so do the parity check's float32 logits and gradients.

:data:`TORCH` and :func:`jax_name` name each side's attention in the record.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

__all__ = ["TORCH", "jax_name", "dot_product_attention"]

#: The PyTorch side's attention (timm's ``fused_attn`` in ViT; GPT-2's own call).
TORCH = "F.scaled_dot_product_attention"


def jax_name(implementation: str | None) -> str:
    """The JAX side's attention as the record names it: ``jax.nn.dot_product_attention
    (implementation=None)``."""
    return f"jax.nn.dot_product_attention (implementation={implementation!r})"


def dot_product_attention(q, k, v, *, mask=None, is_causal: bool = False,
                          implementation: str | None = None):
    """``jax.nn.dot_product_attention(q, k, v, mask=mask, is_causal=is_causal, implementation=implementation)``
    (queries, keys and values, each (batch, length, heads, head dim)); float64 inputs: its XLA steps with the softmax in float64
    (see the module). ``mask``: boolean, True where a query sees a key, broadcastable to
    ``(batch, heads, query, key)``; ``is_causal``: query ``i`` sees keys ``0..i``."""
    if q.dtype != jnp.float64:
        return jax.nn.dot_product_attention(q, k, v, mask=mask, is_causal=is_causal,
                                            implementation=implementation)
    logits = jnp.einsum("BTNH,BSNH->BNTS", q, k) * (1.0 / np.sqrt(q.shape[-1]))
    if is_causal:
        causal = jnp.tril(jnp.ones(logits.shape[-2:], bool))
        mask = causal if mask is None else mask & causal
    if mask is not None:
        logits = jnp.where(mask, logits, -jnp.inf)
    return jnp.einsum("BNTS,BSNH->BTNH", jax.nn.softmax(logits, axis=-1), v)
