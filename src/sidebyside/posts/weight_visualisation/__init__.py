"""The weight-visualisation post.

- ``report``: its results record and generated conclusion (roughness of templates, CKA, accuracy).
"""

from __future__ import annotations

from sidebyside._lazy import package

__all__, __getattr__ = package(__name__, __path__)
