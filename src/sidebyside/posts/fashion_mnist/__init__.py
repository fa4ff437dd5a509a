"""The fashion-mnist-pytorch-vs-flax post.

- ``report``: its results record and generated conclusion (training ladder, accuracy over seeds).
- ``measure``: the parts of a run in parts (a run of the original program, a seed's training, a
  speed ladder), as a checkpoint file saves and reads them back.
"""

from __future__ import annotations

from sidebyside._lazy import package

__all__, __getattr__ = package(__name__, __path__)
