"""The three models' sizes, and the PyTorch models as PyTorch users build them.

A :class:`ModelSpec` names one model at one size: ``kind`` is ``"resnet"`` (timm's
``resnet50``), ``"vit"`` (timm's ``vit_base_patch16_224``) or ``"gpt2"`` (GPT-2 written in
:mod:`.gpt2`); ``options`` are the keyword arguments that shrink it (empty: the published size).
:func:`torch_model` builds the PyTorch side with ``pretrained=False``: timm's own initialisation,
no download (speed does not depend on the weights' values). :func:`flax_model` builds the Flax NNX
side at the same size, and :func:`pair` both, with PyTorch's weights copied into Flax. A spec's
``attention`` is the implementation the Flax side hands ``jax.nn.dot_product_attention`` (None:
JAX's default, XLA's; ``"cudnn"`` on a GPU in bfloat16), and :meth:`ModelSpec.to_dict` (the
record's description of a model) names each side's attention.

:data:`PUBLISHED` holds the figures the models are known by (parameters; multiply-accumulates per
forward at 224² for the image models, as timm and the papers report them, attention included;
GPT-2's 124.4M parameters, one multiply-add each per token, to which attention is added at the
sequence's length), which the post checks the counted FLOPs against.
"""

from __future__ import annotations

import dataclasses
from typing import Any

__all__ = ["ModelSpec", "PUBLISHED", "NAMES", "spec", "torch_model", "flax_model", "param_count"]

#: The published figures: parameters, and multiply-accumulates per forward (one image at 224², or one token).
PUBLISHED = {
    "resnet50": {"parameters": 25_557_032, "macs_per_item": 4.1e9, "source": "timm's resnet50 card: 4.1 GMACs at 224²"},
    "vit_b16": {"parameters": 86_567_656, "macs_per_item": 17.6e9,
                "source": "timm's vit_base_patch16_224 card: 17.6 GMACs at 224²"},
    "gpt2": {"parameters": 124_439_808, "macs_per_item": 124_439_808,
             "source": "GPT-2 small: 124.4M parameters, about 2 × 124.4M FLOPs per token (one multiply-add per "
                       "weight), plus attention's QKᵀ and AV: 2 × 2 × 12 layers × 768 × S per token at sequence "
                       "length S (the full square)"},
}
#: How the post names each model.
NAMES = {"resnet50": "ResNet-50", "vit_b16": "ViT-B/16", "gpt2": "GPT-2 small"}


@dataclasses.dataclass(frozen=True)
class ModelSpec:
    """One model at one size. ``key``: resnet50, vit_b16 or gpt2. ``options``: size keyword
    arguments (timm's for the image models: ``layers``, ``channels``, ``depth``,
    ``embed_dim``, ``num_heads``, ``patch_size``; :class:`.gpt2.GPTConfig`'s for GPT-2).
    ``img_size``: the image side; ``num_classes``: the classifier's width; ``seq_len``: GPT-2's
    training sequence; ``attention``: the Flax side's ``jax.nn.dot_product_attention``
    implementation (None: XLA's; ``"cudnn"``: a GPU, bfloat16 or float16 only)."""

    key: str
    options: tuple = ()
    img_size: int = 224
    num_classes: int = 1000
    seq_len: int = 1024
    attention: str | None = None

    @property
    def kind(self) -> str:
        return {"resnet50": "resnet", "vit_b16": "vit", "gpt2": "gpt2"}[self.key]

    @property
    def kwargs(self) -> dict[str, Any]:
        return {k: tuple(v) if isinstance(v, list) else v for k, v in self.options}

    @property
    def full_size(self) -> bool:
        return not self.options

    def to_dict(self) -> dict[str, Any]:
        """The record's description of the model: its fields, and ``attention``, each side's
        attention (``{"torch": "F.scaled_dot_product_attention", "jax": "jax.nn.dot_product_attention
        (implementation=None)"}``; None for ResNet-50, which has none)."""
        from sidebyside.posts.real_models import attention

        return {"key": self.key, "options": self.kwargs, "img_size": self.img_size, "num_classes": self.num_classes,
                "seq_len": self.seq_len, "full_size": self.full_size,
                "attention": None if self.kind == "resnet" else {"torch": attention.TORCH,
                                                                 "jax": attention.jax_name(self.attention)}}


def spec(key: str, options: dict[str, Any] | None = None, **fields: Any) -> ModelSpec:
    """A :class:`ModelSpec` from a mapping of size options (the notebook's parameters)."""
    items = tuple(sorted((k, tuple(v) if isinstance(v, list) else v) for k, v in (options or {}).items()))
    return ModelSpec(key, items, **fields)


def torch_model(s: ModelSpec, seed: int = 0):
    """The PyTorch model: timm's, ``pretrained=False`` (its own initialisation), or GPT-2."""
    import torch

    torch.manual_seed(seed)
    if s.kind == "gpt2":
        from sidebyside.posts.real_models.gpt2 import GPT, GPTConfig

        return GPT(GPTConfig(**s.kwargs))
    import timm

    name = {"resnet": "resnet50", "vit": "vit_base_patch16_224"}[s.kind]
    extra = {"img_size": s.img_size} if s.kind == "vit" else {}
    return timm.create_model(name, pretrained=False, num_classes=s.num_classes, **extra, **s.kwargs)


def flax_model(s: ModelSpec, seed: int = 0, dtype=None):
    """The Flax NNX model at the same size (its own initialisation, overwritten by :func:`sidebyside.posts.real_models.port.pair`);
    ``dtype``: Flax's compute dtype (None: the parameters', float32; ``jnp.bfloat16``: the layers
    ``torch.autocast`` runs in bfloat16 run in it, the parameters stay float32)."""
    from flax import nnx

    rngs = nnx.Rngs(seed)
    if s.kind == "gpt2":
        from sidebyside.posts.real_models.gpt2 import FlaxGPT, GPTConfig

        return FlaxGPT(GPTConfig(**s.kwargs), attention=s.attention, dtype=dtype, rngs=rngs)
    from sidebyside.posts.real_models import vision

    kw = s.kwargs
    if s.kind == "resnet":
        return vision.FlaxResNet(layers=kw.get("layers", (3, 4, 6, 3)), channels=kw.get("channels", (64, 128, 256, 512)),
                                 num_classes=s.num_classes, dtype=dtype, rngs=rngs)
    return vision.FlaxViT(img_size=s.img_size, patch_size=kw.get("patch_size", 16), dim=kw.get("embed_dim", 768),
                          depth=kw.get("depth", 12), heads=kw.get("num_heads", 12), num_classes=s.num_classes,
                          attention=s.attention, dtype=dtype, rngs=rngs)




def param_count(torch_module) -> int:
    """Parameters of a PyTorch model (tied weights once)."""
    return sum(p.numel() for p in torch_module.parameters())
