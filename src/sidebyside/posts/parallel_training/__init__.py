"""The parallel-training post: one small ViT trained on several devices in PyTorch and JAX.

- ``model``: the ViT in PyTorch and Flax NNX, the weight copy, the shared batches.
- ``torch_parallel``: PyTorch's strategies (DDP, FSDP2, DTensor tensor parallel, manual collectives), the torchrun worker.
- ``jax_parallel``: JAX's strategies (NamedSharding meshes, shard_map), the child process.
- ``launch``: the checks, the device kinds (simulated CPU devices or real GPUs) and the GPU counts of a
  scaling run, and the child processes that run each framework's workers.
- ``comms``: collectives per step (XLA's HLO text, PyTorch's dispatcher) and bytes on the wire.
- ``costmodel``: the labelled projection to 8, 64 and 512 H100s.
- ``reference``: the one-device ladder (PyTorch eager and torch.compile, JAX jit) in this process, on the CPU or a GPU.
- ``report``: its results record, verdicts and generated prose.
- ``results``: its tables of results, and the peak memory within a step.
- ``scaling``: the scaling over real GPUs, where there are two or more: record, table, figure and claim.
- ``names``: how the post names its strategies and each framework's tools.
"""

from __future__ import annotations

from sidebyside._lazy import package

__all__, __getattr__ = package(__name__, __path__)
