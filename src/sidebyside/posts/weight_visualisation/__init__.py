"""The weight-visualisation post.

- ``report``: its results record and generated conclusion (roughness of templates, CKA, accuracy).
"""

from __future__ import annotations

from sidebyside._lazy import face

__all__ = ['report']

__getattr__ = face(__name__, ['report'])
