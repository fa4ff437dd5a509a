"""What both frameworks' training loops share (:mod:`sidebyside.lab.training`): the data as
:class:`Arrays`, the :class:`TrainConfig`, the batches of an epoch (:func:`index_batches`), the learning
rate of a step (:func:`learning_rate`), the precisions, and the epoch loop (:func:`epochs`) that
:mod:`.torch_loops`, :mod:`.flax_loops` and a post's own trainers run their epochs in."""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from sidebyside.lab import data as sbs_data
from sidebyside.lab import progress as sbs_progress

__all__ = ["PRECISIONS", "check_precision", "precision_not_applicable", "Arrays", "prepare", "as_arrays",
           "TrainConfig", "History", "learning_rate", "index_batches", "progress_bar", "epoch_done", "epochs"]

PRECISIONS = ("float32", "tf32", "bfloat16")


def check_precision(precision: str) -> None:
    """Raise ``ValueError`` unless ``precision`` is one of :data:`PRECISIONS`."""
    if precision not in PRECISIONS:
        raise ValueError(f"precision must be one of {PRECISIONS}, got {precision!r}")


def precision_not_applicable(precision: str, platform: str, capability: tuple[int, int] | None = None) -> str | None:
    """Why ``precision`` cannot run on a device, or None where it can.

    ``platform``: ``"cuda"``/``"gpu"`` or ``"cpu"`` (PyTorch's device type or JAX's platform);
    ``capability``: an NVIDIA GPU's compute capability ``(major, minor)`` where known. Only TF32
    depends on the device: it is a mode of NVIDIA tensor cores (compute capability 8.0, Ampere, or
    newer); a CPU has no TF32 mode, so a TF32 row there would repeat the float32 one."""
    check_precision(precision)
    if precision != "tf32":
        return None
    if platform not in ("cuda", "gpu"):
        return ("TF32 is a tensor-core mode of NVIDIA GPUs (Ampere or newer); a CPU computes float32 matmuls "
                "in float32 whatever the setting, so this row would repeat the float32 one")
    if capability is not None and tuple(capability) < (8, 0):
        return (f"TF32 needs an NVIDIA GPU of compute capability 8.0 (Ampere) or newer; this one is "
                f"{capability[0]}.{capability[1]}")
    return None


@dataclasses.dataclass(frozen=True)
class Arrays:
    """Normalised float32 images ``(N, 28, 28)`` and int64 labels ``(N,)``."""

    X_train: np.ndarray
    y_train: np.ndarray
    X_test: np.ndarray
    y_test: np.ndarray

    def __repr__(self) -> str:
        return f"Arrays(train={len(self.X_train)}, test={len(self.X_test)})"


def prepare(ds: Any, *, train_norm: tuple[float, float] | None = None,
            test_norm: tuple[float, float] | None = None,
            num_train: int | None = None, num_test: int | None = None) -> Arrays:
    """FashionMNIST (uint8) -> :class:`Arrays`.

    ``train_norm`` / ``test_norm``: ``(mean, std)`` applied after scaling to
    [0, 1]; ``None`` means the training set's statistics (``data.MEAN``,
    ``data.STD``). ``(0, 1)`` keeps [0, 1]; ``(0.5, 0.5)`` maps to [-1, 1].
    ``num_train`` / ``num_test``: keep only the first examples (small runs).
    """
    def norm(X, spec):
        mean, std = spec if spec is not None else (sbs_data.MEAN, sbs_data.STD)
        return sbs_data.normalise(X, mean=mean, std=std)

    Xtr, ytr = ds.X_train[:num_train], ds.y_train[:num_train]
    Xte, yte = ds.X_test[:num_test], ds.y_test[:num_test]
    return Arrays(norm(Xtr, train_norm), ytr.astype(np.int64), norm(Xte, test_norm), yte.astype(np.int64))


def as_arrays(data: Any) -> Arrays:
    """``data`` as :class:`Arrays`: itself, a FashionMNIST (uint8) through :func:`prepare`, or any
    object with the four arrays."""
    if isinstance(data, Arrays):
        return data
    if getattr(data, "X_train", None) is not None and data.X_train.dtype == np.uint8:
        return prepare(data)
    return Arrays(*(np.asarray(getattr(data, k)) for k in ("X_train", "y_train", "X_test", "y_test")))


@dataclasses.dataclass(frozen=True)
class TrainConfig:
    """Everything that defines a training run, shared by both frameworks.

    ``schedule``: "constant", or "cosine" (cosine decay to 0 over the run,
    after ``warmup_epochs`` of linear warm-up from ~0; with a warm-up this is
    the usual one-cycle shape).
    """

    num_epochs: int = 2
    batch_size: int = 64
    lr: float = 1e-3
    optimizer: str = "sgd"  # "sgd" | "adam"
    momentum: float = 0.9
    schedule: str = "constant"  # "constant" | "cosine"
    warmup_epochs: float = 0.0
    weight_decay: float = 0.0
    seed: int = 0
    drop_last: bool = True

    def __post_init__(self):
        if self.optimizer not in ("sgd", "adam"):
            raise ValueError(f"optimizer must be 'sgd' or 'adam', got {self.optimizer!r}")
        if self.schedule not in ("constant", "cosine"):
            raise ValueError(f"schedule must be 'constant' or 'cosine', got {self.schedule!r}")
        if self.num_epochs < 0 or self.batch_size < 1:
            raise ValueError("num_epochs must be >= 0 and batch_size >= 1")

    def steps_per_epoch(self, n: int) -> int:
        return sbs_data.num_batches(n, self.batch_size, drop_last=self.drop_last)


@dataclasses.dataclass
class History:
    """Per-epoch record of a run (lists indexed by epoch - 1)."""

    framework: str
    loop: str
    train_loss: list[float] = dataclasses.field(default_factory=list)
    test_accuracy: list[float] = dataclasses.field(default_factory=list)
    epoch_seconds: list[float] = dataclasses.field(default_factory=list)
    compile_seconds: float = 0.0  # ahead-of-time compilation (JAX), not in epoch_seconds

    def to_frame(self):
        import pandas as pd

        return pd.DataFrame({
            "epoch": np.arange(1, len(self.train_loss) + 1),
            "train_loss": self.train_loss,
            "test_accuracy": self.test_accuracy,
            "epoch_seconds": self.epoch_seconds,
        }).set_index("epoch")


def learning_rate(step, config: TrainConfig, steps_per_epoch: int, xp=np):
    """The learning rate of optimiser step ``step`` (0-based), for both
    frameworks; ``xp`` is ``numpy`` (PyTorch side) or ``jax.numpy`` (optax)."""
    if config.schedule == "constant":
        return config.lr * xp.ones_like(xp.asarray(step, dtype=xp.float32))
    total = max(config.num_epochs * steps_per_epoch, 1)
    warmup = int(round(config.warmup_epochs * steps_per_epoch))
    step = xp.asarray(step, dtype=xp.float32)
    warm = xp.minimum(1.0, (step + 1.0) / warmup) if warmup > 0 else 1.0
    progress = xp.clip((step - warmup) / max(total - warmup, 1), 0.0, 1.0)
    return config.lr * warm * 0.5 * (1.0 + xp.cos(math.pi * progress))


def index_batches(n: int, config: TrainConfig, epoch: int) -> np.ndarray:
    """Indices of the batches of ``epoch`` (0-based), ``(steps, batch_size)``
    when ``drop_last``; a list of arrays otherwise."""
    order = sbs_data.epoch_permutation(n, config.seed, epoch)
    steps = config.steps_per_epoch(n)
    if config.drop_last:
        return order[: steps * config.batch_size].reshape(steps, config.batch_size)
    return [order[i:i + config.batch_size] for i in range(0, n, config.batch_size)]


def progress_bar(progress: bool | str, total: int, desc: str):
    """A progress bar over ``total`` epochs, titled ``desc`` (or ``progress`` where it is a string); None
    where ``progress`` is False."""
    if progress is False:
        return None
    return sbs_progress.bar(total=total, desc=desc if progress is True else str(progress))


def epoch_done(bar, history: History) -> None:
    """Move the epoch bar (if any) on by one, showing the epoch's training loss and, where
    it was evaluated, its test accuracy."""
    if bar is not None:
        evaluated = len(history.test_accuracy) == len(history.train_loss)
        bar.set_postfix(loss=f"{history.train_loss[-1]:.3f}", acc=f"{history.test_accuracy[-1]:.3f}" if evaluated else "-")
        bar.update(1)


def epochs(run_epoch: Callable[[int], float], history: History, num_epochs: int, *, desc: str,
           progress: bool | str, after_epoch: Callable[[], Any] | None = None,
           evaluate: Callable[[], float] | None = None, on_epoch_end: Callable[[int], Any] | None = None) -> None:
    """The epoch loop every trainer shares. Epoch ``e`` (0-based) is timed from its start to
    ``run_epoch(e)``'s mean training loss as a Python float (which waits for the device); then
    ``after_epoch()`` (the model brought up to date), the test accuracy ``evaluate()`` (not recorded
    without it) and ``on_epoch_end(e + 1)``. Appends to ``history``; a bar over the epochs unless
    ``progress`` is False."""
    bar = progress_bar(progress, num_epochs, desc)
    for epoch in range(num_epochs):
        start = time.perf_counter()
        loss = float(run_epoch(epoch))
        history.epoch_seconds.append(time.perf_counter() - start)
        history.train_loss.append(loss)
        if after_epoch is not None:
            after_epoch()
        if evaluate is not None:
            history.test_accuracy.append(float(evaluate()))
        epoch_done(bar, history)
        if on_epoch_end is not None:
            on_epoch_end(epoch + 1)
    if bar is not None:
        bar.close()
