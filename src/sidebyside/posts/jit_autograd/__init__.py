"""The jit-and-autograd-timing post.

- ``report``: its results record and generated conclusion (the jit sweep, gradients, HVP, the pitfall).
"""

from __future__ import annotations

from sidebyside._lazy import face

__all__ = ['report']

__getattr__ = face(__name__, ['report'])
