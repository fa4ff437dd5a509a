"""Training loops for PyTorch and Flax (NNX) that see exactly the same data.

- ``loop``: what both sides share: the data and its batches, the configuration, the learning rate,
  the precisions, and the epoch loop (:func:`epochs`).
- ``torch_loops``: the PyTorch trainer and its loop styles, :func:`train_torch`.
- ``flax_loops``: the Flax trainer and its loop styles, :func:`train_flax`.
- ``rungs``: :func:`torch_rung` and :func:`flax_rung`, the rungs of the speed ladder that train.

Every public name of the four is reachable from here (``training.TrainConfig``).

Input contract
- ``data``: an :class:`Arrays` (float32 images ``(N, 28, 28)``, int64 labels),
  or a :class:`sidebyside.lab.data.FashionMNIST`, which :func:`prepare` normalises
  with the training set's statistics (the same for both frameworks).
  ``prepare`` can also normalise train and test differently, to reproduce a
  mismatch on purpose.
- ``config``: a :class:`TrainConfig`. Batches come from
  :func:`sidebyside.lab.data.epoch_permutation` ``(config.seed, epoch)``: both
  frameworks see the same examples in the same order, batch for batch.
  ``drop_last=True`` (default) drops the last, incomplete batch of an epoch,
  so that every step has the same shape (a requirement of ``lax.scan``).
- Learning rate: one formula (:func:`learning_rate`), evaluated per step by
  both frameworks. Optimisers match update for update: "sgd" is
  ``torch.optim.SGD`` / ``optax.sgd`` (heavy-ball momentum, coupled weight
  decay), "adam" is ``torch.optim.Adam`` / ``optax.adam``, or with
  ``weight_decay > 0`` ``AdamW`` / ``optax.adamw`` (decoupled).

Loop styles (``loop=``): :mod:`.torch_loops` (the PyTorch side, eager to CUDA graphs) and
:mod:`.flax_loops` (the JAX side, one jitted step to a whole epoch in ``lax.scan``).

Precision (``precision=``, both trainers alike; one setting for both sides, never one side only)
- ``"float32"`` (default): float32 throughout; TF32 stays as :func:`sidebyside.lab.conditions.same_conditions`
  set it (off).
- ``"tf32"``: float32 storage, matmuls and convolutions on TensorFloat-32 tensor cores on both sides
  (PyTorch's cuBLAS and cuDNN switches around each call; JAX's default matmul precision
  ``"tensorfloat32"`` while its steps are traced). Only NVIDIA GPUs of compute capability 8.0 or
  newer have it: elsewhere the trainers raise :class:`sidebyside.lab.timing.NotApplicable` with the
  reason (:func:`precision_not_applicable`).
- ``"bfloat16"``: mixed precision with one policy on both sides: the network computes in bfloat16
  from float32 master weights (PyTorch ``torch.autocast(dtype=torch.bfloat16)``; JAX casts the
  parameters and the batch to bfloat16 inside the differentiated loss), the logits go back to
  float32 for the softmax cross-entropy, and gradients, optimiser state and weights stay float32.

:func:`torch_rung` and :func:`flax_rung` build one ready-to-time rung of the speed ladder
(:func:`sidebyside.lab.timing.ladder`): a runner, or a ``NotApplicable`` with its reason, or the error
that building it raised (a failure is a finding, kept as a row).

Outputs: ``train_torch`` / ``train_flax`` return ``(model, History)``; the
Flax model is updated in place too. ``on_epoch_end(epoch, model)`` is called
with ``epoch=0`` before training (the initial model) and after every epoch
(1..num_epochs), with the model's current parameters, e.g. to snapshot weights.
"""

from __future__ import annotations

from sidebyside._lazy import package

__all__, __getattr__ = package(__name__, __path__, reexport=True)
