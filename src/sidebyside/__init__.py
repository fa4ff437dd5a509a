"""Side by Side: the library the PyTorch-vs-JAX notebooks share, laid out by who uses it.

- ``lab``: the measuring tools every post shares (data, models, training, timing, verdicts, plots).
- ``run``: what a notebook's process knows about its run (its context, inputs, provenance, checkpoints).
- ``publish``: the publisher: discovery, parameters, cache, execution, rendering, the site (CLI).
- ``posts``: code that only one post uses, one package per post, with that post's report.
- ``grid_sample``: the grid_sample library (the XLA path, the Pallas and native kernels, the parity harness,
  the benchmark); the package is itself callable, ``sidebyside.grid_sample(input, grid, ...)``.

Imports go one way: ``posts`` -> ``grid_sample``, ``lab``, ``run``; ``grid_sample`` -> ``lab``, ``run``;
``publish`` -> ``run`` (and ``lab.tables``); only notebooks import ``posts``. Every face imports lazily:
``import sidebyside`` pulls in neither PyTorch nor JAX.
"""

from __future__ import annotations

from sidebyside._lazy import face

__all__ = ['lab', 'run', 'publish', 'posts', 'grid_sample']

__getattr__ = face(__name__, ['lab', 'run', 'publish', 'posts', 'grid_sample'])
