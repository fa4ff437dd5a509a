"""Code that only one post uses, one package per post, each with its ``report`` (the
post's results record and generated conclusion). Only notebooks import these.

- ``fashion_mnist``: fashion-mnist-pytorch-vs-flax.
- ``weight_visualisation``: weight-visualisation.
- ``grid_sample``: grid-sample-parity (its report; the code it tests is ``sidebyside.grid_sample``).
- ``jit_autograd``: jit-and-autograd-timing.
- ``xla_and_scipy``: xla-and-scipy.
- ``swin_v2``: swin-transformer-v2 (the Flax port of timm's model, weight porting, training, ladder).
- ``parallel_training``: parallel-training (the ViT in both frameworks, each framework's strategies and
  launcher, collective counting, the cost model).
- ``real_models``: real-models (Flax NNX ports of timm's ResNet-50 and ViT-B/16, GPT-2 in both
  frameworks with a key-value cache, the weight copy and parity check, the ladders and costs).
- ``bench``: the command line of the posts' benchmarks (``python -m sidebyside.posts.bench grid_sample``).
"""

from __future__ import annotations

from sidebyside._lazy import package

__all__, __getattr__ = package(__name__, __path__)
