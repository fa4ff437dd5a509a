"""Side by Side: the library the PyTorch-vs-JAX notebooks share.

One topic per module:

- ``data``: FashionMNIST as NumPy arrays and identical batches for both frameworks.
- ``models``: the same architectures in PyTorch and Flax, with the same public names.
- ``training``: training loops for both frameworks.
- ``timing``: the one benchmark harness (warm-up and compilation apart, synchronised).
- ``sampling``: ``grid_sample``, a JAX port with PyTorch's semantics, re-exported
  here as ``sidebyside.grid_sample`` (the module has another name so that the
  function is never shadowed by it).
- ``viz``: shared colours, weight grids, computation graphs, plots.
- ``provenance``: the hardware/version stamp and the results file of a run.
- ``verdict``: measured numbers into claims (faster / slower / within noise) and their sentences.
- ``progress``: progress bars that render cleanly both live and in published posts.
- ``publish``: executing notebooks, the cache, rendering posts (CLI).

Submodules import lazily, so ``import sidebyside`` does not pull in torch or JAX.
"""

from __future__ import annotations

import importlib

__all__ = [
    "data",
    "models",
    "training",
    "timing",
    "viz",
    "provenance",
    "progress",
    "publish",
    "sampling",
    "grid_sample",
    "verdict",
]

__version__ = "0.1.0"

_SUBMODULES = {"data", "models", "training", "timing", "viz", "provenance", "progress", "publish", "bench", "sampling",
               "verdict", "swin"}


def __getattr__(name: str):
    if name == "grid_sample":
        module = importlib.import_module(".sampling", __name__)
        return module.grid_sample
    if name in _SUBMODULES:
        return importlib.import_module(f".{name}", __name__)
    raise AttributeError(f"module 'sidebyside' has no attribute {name!r}")
