"""GPT-2 small written compactly in each framework's idiom, with a key-value cache.

The same network on both sides (Radford et al., 2019; the layout of OpenAI's checkpoint, so the
names are the familiar ``wte``, ``wpe``, ``h.<i>.ln_1``, ``attn.c_attn``, ``attn.c_proj``,
``mlp.c_fc``, ``mlp.c_proj``, ``ln_f``): learned token and position embeddings, pre-norm blocks
(LayerNorm epsilon 1e-5, GELU with the tanh approximation), causal attention, and logits from the
token embedding itself (tied weights). :class:`GPTConfig`'s defaults are GPT-2 small: 12 layers,
768 wide, 12 heads, 1,024 positions, 50,257 tokens (124M parameters).

- :class:`GPT` (PyTorch, ``nn.Module``): ``forward(idx)`` is causal attention through
  ``F.scaled_dot_product_attention``; ``forward(idx, cache, pos)`` writes the new keys and values
  into the preallocated ``cache`` (:meth:`GPT.new_cache`) in place (``index_copy_``) at positions
  ``pos, pos + 1, ...`` (a 0-d tensor, so that a compiled step sees one shape) and attends to every
  cached position up to its own.
- :class:`FlaxGPT` (Flax NNX): the same, functional: ``__call__(idx, cache, pos)`` returns the
  logits and the updated cache (``lax.dynamic_update_slice``; keys and values ``(batch, length,
  heads, head_dim)``, the layout ``jax.nn.dot_product_attention`` takes). Attention is
  ``jax.nn.dot_product_attention`` (:func:`.attention.dot_product_attention`, which computes a
  float64 softmax in float64) with the ``attention`` implementation given (None: JAX's
  default, XLA's; ``"cudnn"``: cuDNN's fused kernel, on a GPU in bfloat16 or float16 only):
  ``is_causal=True`` without a cache; with one, the mask PyTorch's cached path passes too (a query
  at position ``pos + i`` sees the cached positions up to its own), since ``is_causal`` aligns the
  causal triangle at the first key and a query at ``pos > 0`` would see key 0 only.
- bfloat16, one policy on both sides, ``torch.autocast``'s: float32 parameters; every linear layer,
  the tied logits and attention in bfloat16 (PyTorch: autocast; Flax: the model built with
  ``dtype=jnp.bfloat16``, Flax's compute dtype); embeddings, LayerNorm, the residual stream and the
  softmax inside attention in float32; the key-value cache in bfloat16 on both sides.
- :func:`*_generate_uncached`: greedy generation from the whole sequence at every step, without a
  cache: the tokens that generation with the cache (the notebook's ``generate`` pair) must equal.
"""

from __future__ import annotations

import dataclasses
import math

import jax
import jax.numpy as jnp
import torch
import torch.nn.functional as F
from flax import nnx
from torch import nn

from sidebyside.posts.real_models.attention import dot_product_attention

__all__ = ["GPTConfig", "GPT", "torch_generate_uncached", "FlaxGPT", "jax_generate_uncached"]


@dataclasses.dataclass(frozen=True)
class GPTConfig:
    """GPT-2's size; the defaults are GPT-2 small (124M)."""

    n_layer: int = 12
    n_embd: int = 768
    n_head: int = 12
    n_positions: int = 1024
    vocab_size: int = 50257


# ----------------------------------------------------------------------------- PyTorch


class CausalSelfAttention(nn.Module):
    def __init__(self, c: GPTConfig):
        super().__init__()
        self.n_head = c.n_head
        self.c_attn = nn.Linear(c.n_embd, 3 * c.n_embd)
        self.c_proj = nn.Linear(c.n_embd, c.n_embd)

    def forward(self, x, cache=None, pos=None):
        B, T, C = x.shape
        q, k, v = (t.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
                   for t in self.c_attn(x).split(C, dim=2))
        if cache is None:
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:
            k_cache, v_cache = cache
            positions = pos + torch.arange(T, device=x.device)
            k_cache.index_copy_(2, positions, k)
            v_cache.index_copy_(2, positions, v)
            mask = torch.arange(k_cache.shape[2], device=x.device) <= positions[:, None]
            y = F.scaled_dot_product_attention(q, k_cache, v_cache, attn_mask=mask)
        return self.c_proj(y.transpose(1, 2).reshape(B, T, C))


class MLP(nn.Module):
    def __init__(self, c: GPTConfig):
        super().__init__()
        self.c_fc, self.c_proj = nn.Linear(c.n_embd, 4 * c.n_embd), nn.Linear(4 * c.n_embd, c.n_embd)

    def forward(self, x):
        return self.c_proj(F.gelu(self.c_fc(x), approximate="tanh"))


class TorchBlock(nn.Module):
    def __init__(self, c: GPTConfig):
        super().__init__()
        self.ln_1, self.attn = nn.LayerNorm(c.n_embd), CausalSelfAttention(c)
        self.ln_2, self.mlp = nn.LayerNorm(c.n_embd), MLP(c)

    def forward(self, x, cache=None, pos=None):
        x = x + self.attn(self.ln_1(x), cache, pos)
        return x + self.mlp(self.ln_2(x))


class GPT(nn.Module):
    """GPT-2 in PyTorch; initialised as GPT-2 is (normal 0.02, residual projections scaled by
    1/sqrt(2 n_layer))."""

    def __init__(self, c: GPTConfig = GPTConfig()):
        super().__init__()
        self.config = c
        self.wte, self.wpe = nn.Embedding(c.vocab_size, c.n_embd), nn.Embedding(c.n_positions, c.n_embd)
        self.h = nn.ModuleList(TorchBlock(c) for _ in range(c.n_layer))
        self.ln_f = nn.LayerNorm(c.n_embd)
        for name, p in self.named_parameters():
            if p.dim() == 2:
                std = 0.02 / math.sqrt(2 * c.n_layer) if name.endswith("c_proj.weight") else 0.02
                nn.init.normal_(p, 0.0, std)
            elif name.endswith("bias") and "ln" not in name:
                nn.init.zeros_(p)

    def new_cache(self, batch: int, length: int, dtype=None):
        """Zeroed keys and values, ``(batch, heads, length, head_dim)`` per layer, in ``dtype``
        (None: the parameters'; under ``torch.autocast``, give autocast's dtype, which the keys and
        values are computed in: ``index_copy_`` refuses to mix dtypes)."""
        c, p = self.config, self.wte.weight
        shape = (batch, c.n_head, length, c.n_embd // c.n_head)
        dtype = dtype or p.dtype
        return [(torch.zeros(shape, dtype=dtype, device=p.device), torch.zeros(shape, dtype=dtype, device=p.device))
                for _ in range(c.n_layer)]

    def forward(self, idx, cache=None, pos=None):
        positions = torch.arange(idx.shape[1], device=idx.device) + (0 if pos is None else pos)
        x = self.wte(idx) + self.wpe(positions)
        for i, block in enumerate(self.h):
            x = block(x, None if cache is None else cache[i], pos)
        return F.linear(self.ln_f(x), self.wte.weight)  # tied: logits from the token embedding


@torch.no_grad()
def torch_generate_uncached(model: GPT, prompt, new_tokens: int):
    """The same greedy tokens, each from a forward over the whole sequence so far (no cache)."""
    seq = prompt
    for _ in range(new_tokens):
        seq = torch.cat([seq, model(seq)[:, -1].argmax(-1, keepdim=True)], dim=1)
    return seq[:, prompt.shape[1]:]


# ----------------------------------------------------------------------------- Flax NNX


class FlaxAttention(nnx.Module):
    def __init__(self, c: GPTConfig, *, implementation: str | None = None, dtype=None, rngs: nnx.Rngs):
        self.n_head = c.n_head
        self.implementation = implementation
        self.c_attn = nnx.Linear(c.n_embd, 3 * c.n_embd, dtype=dtype, rngs=rngs)
        self.c_proj = nnx.Linear(c.n_embd, c.n_embd, dtype=dtype, rngs=rngs)

    def __call__(self, x, cache=None, pos=0):
        B, T, C = x.shape
        q, k, v = (t.reshape(B, T, self.n_head, C // self.n_head) for t in jnp.split(self.c_attn(x), 3, axis=-1))
        if cache is None:
            y = dot_product_attention(q, k, v, is_causal=True, implementation=self.implementation)
        else:
            k = jax.lax.dynamic_update_slice(cache[0], k, (0, pos, 0, 0))
            v = jax.lax.dynamic_update_slice(cache[1], v, (0, pos, 0, 0))
            cache = (k, v)
            mask = jnp.arange(k.shape[1]) <= (pos + jnp.arange(T))[:, None]  # (query, key), as PyTorch's
            y = dot_product_attention(q, k, v, mask=mask[None, None], implementation=self.implementation)
        return self.c_proj(y.reshape(B, T, C)), cache


class FlaxMLP(nnx.Module):
    def __init__(self, c: GPTConfig, *, dtype=None, rngs: nnx.Rngs):
        self.c_fc = nnx.Linear(c.n_embd, 4 * c.n_embd, dtype=dtype, rngs=rngs)
        self.c_proj = nnx.Linear(4 * c.n_embd, c.n_embd, dtype=dtype, rngs=rngs)

    def __call__(self, x):
        return self.c_proj(jax.nn.gelu(self.c_fc(x), approximate=True))


class FlaxBlock(nnx.Module):
    def __init__(self, c: GPTConfig, *, attention: str | None = None, dtype=None, rngs: nnx.Rngs):
        self.ln_1 = nnx.LayerNorm(c.n_embd, epsilon=1e-5, use_fast_variance=False, rngs=rngs)
        self.attn = FlaxAttention(c, implementation=attention, dtype=dtype, rngs=rngs)
        self.ln_2 = nnx.LayerNorm(c.n_embd, epsilon=1e-5, use_fast_variance=False, rngs=rngs)
        self.mlp = FlaxMLP(c, dtype=dtype, rngs=rngs)

    def __call__(self, x, cache=None, pos=0):
        y, cache = self.attn(self.ln_1(x), cache, pos)
        x = x + y
        return x + self.mlp(self.ln_2(x)), cache


def _like_first(arrays, /, *, dtype=None, inexact=True):
    """The embedding's dtype promotion: every array in the first one's dtype (a lookup: the table as
    it is; ``attend``: the table in the query's dtype). ``nnx.Embed`` otherwise computes in the
    dtype its table had when it was built (float32), even after the parameters are cast to another
    (to float64 for the parity check, the whole residual stream would stay float32), and ``attend``
    of a bfloat16 query would multiply in float32."""
    return tuple(a.astype(arrays[0].dtype) for a in arrays)


class FlaxGPT(nnx.Module):
    """GPT-2 in Flax NNX: ``model(idx)`` gives logits; ``model(idx, cache, pos)`` gives
    ``(logits, cache)``. ``attention``: the implementation ``jax.nn.dot_product_attention`` is
    given (None: XLA's). ``dtype``: Flax's compute dtype (None: the parameters' own), given to
    every ``Linear`` and to the tied logits' product, the layers ``torch.autocast`` runs in it;
    parameters, embeddings, LayerNorm, the residual stream and the softmax inside attention stay
    float32, as under autocast, and the key-value cache is kept in ``dtype`` (what its keys and
    values are computed in)."""

    def __init__(self, c: GPTConfig = GPTConfig(), *, attention: str | None = None, dtype=None, rngs: nnx.Rngs):
        self.config = c
        self.dtype = dtype
        init = nnx.initializers.normal(0.02)
        self.wte = nnx.Embed(c.vocab_size, c.n_embd, embedding_init=init, promote_dtype=_like_first, rngs=rngs)
        self.wpe = nnx.Embed(c.n_positions, c.n_embd, embedding_init=init, promote_dtype=_like_first, rngs=rngs)
        self.h = nnx.List([FlaxBlock(c, attention=attention, dtype=dtype, rngs=rngs) for _ in range(c.n_layer)])
        self.ln_f = nnx.LayerNorm(c.n_embd, epsilon=1e-5, use_fast_variance=False, rngs=rngs)

    def new_cache(self, batch: int, length: int, dtype=None):
        """Zeroed keys and values, ``(batch, length, heads, head_dim)`` per layer, in ``dtype``
        (None: the compute dtype, else float32)."""
        c = self.config
        shape = (batch, length, c.n_head, c.n_embd // c.n_head)
        dtype = dtype or self.dtype or jnp.float32
        return [(jnp.zeros(shape, dtype), jnp.zeros(shape, dtype)) for _ in range(c.n_layer)]

    def __call__(self, idx, cache=None, pos=0):
        x = self.wte(idx) + self.wpe(pos + jnp.arange(idx.shape[1]))
        new = []
        for i, block in enumerate(self.h):
            x, layer_cache = block(x, None if cache is None else cache[i], pos)
            new.append(layer_cache)
        h = self.ln_f(x)
        logits = self.wte.attend(h if self.dtype is None else h.astype(self.dtype))  # tied: from the token embedding
        return logits if cache is None else (logits, new)


def jax_generate_uncached(model: FlaxGPT, prompt, new_tokens: int):
    """The same greedy tokens, each from a forward over the whole sequence so far (no cache). The
    sequence lives in a buffer of its final length, so that one compiled forward serves every step
    (a growing sequence would compile every operation again at each length); causal attention keeps
    the unfilled tail from reaching the position read."""
    B, P = prompt.shape
    seq = jnp.zeros((B, P + new_tokens), prompt.dtype).at[:, :P].set(prompt)
    forward = nnx.jit(lambda m, s: m(s))
    for i in range(new_tokens):
        seq = seq.at[:, P + i].set(jnp.argmax(forward(model, seq)[:, P + i - 1], axis=-1).astype(seq.dtype))
    return seq[:, P:]
