"""What a notebook's process knows about its run.

- ``context``: the one contract between the publisher and a running notebook (slug, profile,
  parameters, paths, commit).
- ``runkey``: a run's inputs (the modules and data files it read) and its commit stamp: the cache key.
- ``provenance``: the hardware/version stamp and the results file of a run.
- ``checkpoints``: a run in parts, each part saved as it finishes and read back while its inputs hold.
- ``code``: which functions a run timed and which sources it showed, where each is defined.
- ``colab``: a post's notebook run by a reader (Colab): the versions the post ran with, a profile's parameters.

Imports nothing above it (no ``lab``, ``posts`` or ``publish``) and neither PyTorch nor JAX at import.
"""

from __future__ import annotations

from sidebyside._lazy import package

__all__, __getattr__ = package(__name__, __path__)
