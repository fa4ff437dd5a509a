"""The grid-sample-parity post. The code it puts on trial is the package :mod:`sidebyside.grid_sample`.

- ``report``: its results record and generated conclusion (parity, the affine case, speed, goals).
"""

from __future__ import annotations

from sidebyside._lazy import package

__all__, __getattr__ = package(__name__, __path__)
