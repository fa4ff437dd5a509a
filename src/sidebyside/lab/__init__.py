"""The measuring tools every post shares.

- ``data``: FashionMNIST as NumPy arrays and identical batches for both frameworks.
- ``models``: the same architectures in PyTorch and Flax, with the same public names.
- ``training``: training loops for both frameworks, every rung of each one's ladder of tools.
- ``functions``: the small functions the timing posts compile, differentiate and time.
- ``timing``: the one benchmark harness's measuring loop (warm start, warm-up and compilation apart,
  synchronised, interleaved, pooled over independent processes, the ladder of tools).
- ``pool``: the worker processes the harness times in (one process is one observation).
- ``cachestate``: whether one program's compilation found the shared compilation cache cold or warm.
- ``conditions``: the same conditions on both sides (threads, precision, compile cache).
- ``stats``: the statistics verdicts rest on (t-intervals over processes, Welch's test).
- ``noise``: each machine kind's noise floor, measured by A/A races through the harness.
- ``floors``: the committed noise floors, as every timing reads them.
- ``quiet``: the quiet-machine check around every timed section (calibration, load; it records).
- ``load``: the machine's load as Linux's /proc and nvidia-smi tell it, for the quiet check.
- ``peaks``: the hardware floor: data-sheet peaks of GPUs, measured copy bandwidth.
- ``entry``: the one timing-entry schema (seconds; a bare number refused).
- ``verdict``: measured numbers into claims (faster / slower / within noise / practically tied) and their sentences.
- ``ladders``: each framework's ladder of tools, best against best.
- ``framing``: who races and at what size (contestants, scale, claims, precision that took effect).
- ``words``: how numbers and frameworks read in every sentence.
- ``analysis``: representation similarity (CKA) and weight statistics.
- ``viz``: shared colours, weight grids, computation graphs, plots.
- ``tables``: tables a reader can read (numbers formatted once, no cell cut short).
- ``progress``: progress bars that render cleanly both live and in published posts.
- ``notebook``: the one set-up every notebook makes (conditions, log filters, devices, provenance, warm
  start) and its run in parts.

Nothing here imports ``sidebyside.posts`` or ``sidebyside.publish``, and nothing imports in a circle
(``tests/test_import_graph.py``): the statistics and wording at the bottom (``words``, ``stats``,
``entry``, ``framing``, then ``verdict`` and ``ladders``), the harness above them (``conditions``,
``pool``, ``floors``, ``timing``, then ``noise``, which measures through it). Each name is imported
from the module that defines it.
"""

from __future__ import annotations

from sidebyside._lazy import package

__all__, __getattr__ = package(__name__, __path__)
