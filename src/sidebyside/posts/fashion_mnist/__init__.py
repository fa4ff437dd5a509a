"""The fashion-mnist-pytorch-vs-flax post.

- ``report``: its results record and generated conclusion (training ladder, accuracy over seeds).
"""

from __future__ import annotations

from sidebyside._lazy import package

__all__, __getattr__ = package(__name__, __path__)
