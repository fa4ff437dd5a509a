"""Swin V2 configuration shared by both sides: sizes, timm's constants, timm's PyTorch model, and the
window geometry (relative offsets, the shifted-window mask) both models are built from."""


from __future__ import annotations

import dataclasses
import functools
import math
from typing import Any

import numpy as np

__all__ = ['LOGIT_SCALE_MAX', 'MASK_VALUE', 'CPB_HIDDEN', 'SwinConfig', 'torch_model', 'relative_tables', 'shift_mask']

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
