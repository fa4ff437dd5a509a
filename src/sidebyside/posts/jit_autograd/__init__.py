"""The jit-and-autograd-timing post.

- ``control``: the control race, the same function without sin and cos, and what it says of the headline.
- ``kernels``: the GPU's kernel time per call, from each framework's profiler, apart from launch and wait.
- ``report``: its results record and generated conclusion (the jit sweep, gradients, HVP, the pitfall).
- ``sweeps``: its timed parts (a size of a sweep, a checked ladder, the pitfall) for a run in parts.
"""

from __future__ import annotations

from sidebyside._lazy import package

__all__, __getattr__ = package(__name__, __path__)
