"""Side by Side: the library the PyTorch-vs-JAX notebooks share.

One topic per module (each imports lazily: ``import sidebyside`` pulls in
neither torch nor JAX; ``sidebyside.<module>`` imports it on first use):

- ``data``: FashionMNIST as NumPy arrays and identical batches for both frameworks.
- ``models``: the same architectures in PyTorch and Flax, with the same public names.
- ``training``: training loops for both frameworks, every rung of each one's ladder of tools.
- ``functions``: the small functions the timing posts compile, differentiate and time.
- ``timing``: the one benchmark harness (warm-up and compilation apart, synchronised,
  the ladder of tools, the same conditions on both sides).
- ``peaks``: the hardware floor: data-sheet peaks of GPUs, measured copy bandwidth.
- ``verdict``: measured numbers into claims (faster / slower / within noise) and their sentences.
- ``report``: each post's results record and generated conclusion, one module per post.
- ``analysis``: representation similarity (CKA) and weight statistics.
- ``sampling``: the ``grid_sample`` package (a JAX port with PyTorch's semantics: XLA
  path, Pallas and native kernels, parity harness, benchmark), its function re-exported
  here as ``sidebyside.grid_sample`` (the package has another name so that the
  function is never shadowed by it).
- ``swin``: Swin Transformer V2 in Flax NNX, a port of timm's with weight copying and a parity check, its
  training and its speed ladder.
- ``bench``: the command line of the benchmarks (``python -m sidebyside.bench grid_sample``).
- ``viz``: shared colours, weight grids, computation graphs, plots.
- ``tables``: tables a reader can read (numbers formatted once, no cell cut short).
- ``provenance``: the hardware/version stamp and the results file of a run.
- ``context``: the one contract between the publisher and a running notebook (slug, profile, paths, commit).
- ``runkey``: a run's inputs (the modules and data files it read) and its commit stamp: the cache key.
- ``progress``: progress bars that render cleanly both live and in published posts.
- ``publish``: the publisher package: discovery, parameters, cache, execution, rendering, the site (CLI).
"""

from __future__ import annotations

import importlib

__all__ = [
    "analysis",
    "bench",
    "context",
    "data",
    "functions",
    "grid_sample",
    "models",
    "peaks",
    "progress",
    "provenance",
    "publish",
    "report",
    "runkey",
    "sampling",
    "swin",
    "tables",
    "timing",
    "training",
    "verdict",
    "viz",
]

__version__ = "0.1.0"

_SUBMODULES = set(__all__) - {"grid_sample"}


def __getattr__(name: str):
    if name == "grid_sample":
        module = importlib.import_module(".sampling", __name__)
        return module.grid_sample
    if name in _SUBMODULES:
        return importlib.import_module(f".{name}", __name__)
    raise AttributeError(f"module 'sidebyside' has no attribute {name!r}")
