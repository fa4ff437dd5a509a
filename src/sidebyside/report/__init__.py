"""Each post's record and conclusion, written once and tested.

A notebook narrates; the library decides. For each post, one module here turns the
notebook's measured objects into the results record (``summarise(...)``: a JSON-able
dict, the ``metrics`` of the results file, its ``verdicts`` included) and that record
into the post's generated conclusion (``conclusion(metrics) -> str``, Markdown). The
conclusion reads only the record, so every sentence with a number is a function of the
published results, and a test can change a number and watch the sentence change.

Generic claims (faster / slower / within noise, ratios with intervals, seed noise) come
from ``sidebyside.verdict``; a module here composes them with what is particular to its post.

- ``fashion_mnist``: fashion-mnist-pytorch-vs-flax (training ladder, accuracy over seeds).
- ``weight_visualisation``: weight-visualisation (roughness of templates, CKA, accuracy).
- ``grid_sample_parity``: grid-sample-parity (parity table, kernel and per-call speed).
- ``jit_autograd``: jit-and-autograd-timing (the jit sweep, gradients, HVP, the pitfall).
- ``xla_and_scipy``: xla-and-scipy (matmul, inverse, optimisation, retracing).
- ``swin_v2``: swin-transformer-v2 (parity, accuracy, speed ladder, first step).
"""

from __future__ import annotations

import importlib

__all__ = ["fashion_mnist", "weight_visualisation", "grid_sample_parity", "jit_autograd", "xla_and_scipy", "swin_v2"]


def __getattr__(name: str):
    if name in __all__:
        return importlib.import_module(f".{name}", __name__)
    raise AttributeError(f"module 'sidebyside.report' has no attribute {name!r}")
