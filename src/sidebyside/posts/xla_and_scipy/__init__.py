"""The xla-and-scipy post.

- ``measure``: its timed parts (a linear-algebra case, the precision rows, a fit, retracing), as
  a run in parts saves them.
- ``report``: its results record and generated conclusion (matmul, inverse, optimisation, retracing).
"""

from __future__ import annotations

from sidebyside._lazy import package

__all__, __getattr__ = package(__name__, __path__)
