"""The rungs of the speed ladder (:func:`sidebyside.lab.timing.ladder`) that train: one ready-to-time
runner per framework and loop style, or a ``NotApplicable`` with its reason, or the error that building
it raised (a failure is a finding, kept as a row)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from sidebyside.lab.training.flax_loops import FlaxTrainer
from sidebyside.lab.training.loop import TrainConfig, precision_not_applicable
from sidebyside.lab.training.torch_loops import COMPILED_LOOPS, CUDA_ONLY_LOOPS, TorchTrainer

__all__ = ["torch_rung", "flax_rung"]


def torch_rung(make_model: Callable[[], Any], data: Any, config: TrainConfig, steps: int, *, loop: str = "device",
               precision: str = "float32", device: Any = None) -> Any:
    """One PyTorch rung for :func:`sidebyside.lab.timing.ladder`: a zero-argument runner training
    ``steps`` steps of a fresh ``make_model()`` (seeded with 0) on ``device`` (default: CUDA where
    present, else the CPU), or a :class:`sidebyside.lab.timing.NotApplicable` with its reason (a CUDA
    graph on a CPU, TF32 without tensor cores), or the exception that building it raised, which
    the ladder keeps as a failed row. A compiled rung's runner carries ``graph_breaks``
    (:meth:`TorchTrainer.graph_breaks`), or ``graph_breaks_error`` where counting failed."""
    import torch

    from sidebyside.lab.timing import NotApplicable

    device = torch.device(device if device is not None else ("cuda" if torch.cuda.is_available() else "cpu"))
    capability = torch.cuda.get_device_capability(device) if device.type == "cuda" else None
    reason = precision_not_applicable(precision, device.type, capability)  # before the loop's: it is the row's cause
    if reason is not None:
        return NotApplicable(reason)
    if loop in CUDA_ONLY_LOOPS and device.type != "cuda":
        return NotApplicable.cuda_graphs(device.type)
    try:
        torch.manual_seed(0)
        trainer = TorchTrainer(make_model().to(device), data, config, loop=loop, precision=precision)
        runner = trainer.runner(steps)
    except Exception as error:  # noqa: BLE001  (a failure is a finding: the row stays, with its error)
        return error
    if loop in COMPILED_LOOPS:  # the measurement that explains a compiled rung slower than eager
        try:
            runner.graph_breaks = trainer.graph_breaks()
        except Exception as error:  # noqa: BLE001  (no count is no reason to drop the rung)
            runner.graph_breaks_error = f"{type(error).__name__}: {error}"
    return runner


def flax_rung(make_model: Callable[[], Any], data: Any, config: TrainConfig, steps: int, *, loop: str = "scan",
              precision: str = "float32") -> Any:
    """One JAX rung for :func:`sidebyside.lab.timing.ladder`: a zero-argument runner training
    ``steps`` steps of ``make_model()`` on JAX's default device (its first call compiles), or a
    :class:`sidebyside.lab.timing.NotApplicable` with its reason, or the exception that building it
    raised."""
    try:
        return FlaxTrainer(make_model(), data, config, loop=loop, precision=precision).runner(steps)
    except Exception as error:  # noqa: BLE001
        return error
