"""The fashion-mnist-pytorch-vs-flax post.

- ``report``: its results record and generated conclusion (training ladder, accuracy over seeds).
"""

from __future__ import annotations

from sidebyside._lazy import face

__all__ = ['report']

__getattr__ = face(__name__, ['report'])
