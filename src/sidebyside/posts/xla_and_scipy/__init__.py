"""The xla-and-scipy post.

- ``report``: its results record and generated conclusion (matmul, inverse, optimisation, retracing).
"""

from __future__ import annotations

from sidebyside._lazy import face

__all__ = ['report']

__getattr__ = face(__name__, ['report'])
