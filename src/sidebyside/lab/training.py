"""Training loops for PyTorch and Flax (NNX) that see exactly the same data.

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

Loop styles (``loop=``)
- PyTorch: ``"device"`` (default, eager: data on the device, batches indexed
  there), ``"dataloader"`` (a ``torch.utils.data.DataLoader`` over a
  ``TensorDataset``, what most tutorials write), ``"compile"`` (the WHOLE
  training step, batch gather, forward, loss, backward and optimiser step, under
  ``torch.compile`` with static shapes; Dynamo breaks the graph at
  ``backward()`` and compiles forward+backward and the optimiser step),
  ``"cuda_graph"`` (the whole step captured once in a CUDA graph with
  ``torch.cuda.graph`` and replayed per batch; Adam/SGD with
  ``capturable=True``), ``"cuda_graph_fused"`` (the same with the fused
  optimiser, ``fused=True``), ``"cuda_graph_steps"`` (K steps in ONE CUDA
  graph, K the number of batches of the call: per step the batch gather, the
  learning rate read from a static schedule buffer, the step and the loss sum,
  all captured, so a call is one replay as JAX's ``lax.scan`` is one program),
  ``"compile_cuda_graph"`` (the whole step under ``torch.compile`` with
  ``mode="reduce-overhead"``, i.e. CUDA graphs of the compiled code, and
  compiled autograd, which captures ``backward()`` instead of breaking the
  graph there). The learning rate of the compiled and the CUDA graph loops is
  a tensor updated in place, so a schedule neither recompiles nor needs a new
  graph. CUDA graphs need a CUDA device: on a CPU the trainer refuses them,
  unless ``capture=False`` runs the same steps uncaptured (for tests; for
  ``"compile_cuda_graph"``, ``torch.compile``'s default mode).
  :meth:`TorchTrainer.graph_breaks` counts where Dynamo splits a compiled
  step (``torch._dynamo.explain``), the measurement behind a compiled rung
  that is slower than eager.
- JAX: ``"scan"`` (default: data on the device, a whole epoch in one jitted
  ``lax.scan``), ``"device"`` (data on the device, one jitted step per batch
  that gathers its batch there; the batch indices are sent once and a step
  counter stays on the device, so a step sends nothing from the host),
  ``"jit_step"`` (one jitted step per batch, NumPy batches fed from the host,
  what most tutorials write).
  Whether a convolution runs slower inside ``lax.scan`` than jitted alone
  depends on the backend: fashion-mnist's notebook measures it on its device.

Precision (``precision=``, both trainers alike; one setting for both sides, never one side only)
- ``"float32"`` (default): float32 throughout; TF32 stays as :func:`sidebyside.lab.timing.same_conditions`
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

import dataclasses
import math
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from sidebyside.lab import data as sbs_data
from sidebyside.lab import progress as sbs_progress

__all__ = [
    "Arrays",
    "TrainConfig",
    "History",
    "prepare",
    "learning_rate",
    "index_batches",
    "train_torch",
    "train_flax",
    "evaluate_torch",
    "evaluate_flax",
    "predict_torch",
    "predict_flax",
    "TorchTrainer",
    "FlaxTrainer",
    "TORCH_LOOPS",
    "CUDA_GRAPH_LOOPS",
    "CUDA_ONLY_LOOPS",
    "COMPILED_LOOPS",
    "FLAX_LOOPS",
    "PRECISIONS",
    "precision_not_applicable",
    "torch_rung",
    "flax_rung",
]

TORCH_LOOPS = ("dataloader", "device", "compile", "compile_cuda_graph", "cuda_graph", "cuda_graph_fused",
               "cuda_graph_steps")
CUDA_GRAPH_LOOPS = ("cuda_graph", "cuda_graph_fused", "cuda_graph_steps")
#: Loops that need a CUDA device to run as named (captured graphs, compiled or by hand).
CUDA_ONLY_LOOPS = (*CUDA_GRAPH_LOOPS, "compile_cuda_graph")
#: Loops whose compiled step Dynamo may split (:meth:`TorchTrainer.graph_breaks`).
COMPILED_LOOPS = ("compile", "compile_cuda_graph")
FLAX_LOOPS = ("jit_step", "device", "scan")
PRECISIONS = ("float32", "tf32", "bfloat16")


def _check_precision(precision: str) -> None:
    if precision not in PRECISIONS:
        raise ValueError(f"precision must be one of {PRECISIONS}, got {precision!r}")


def precision_not_applicable(precision: str, platform: str, capability: tuple[int, int] | None = None) -> str | None:
    """Why ``precision`` cannot run on a device, or None where it can.

    ``platform``: ``"cuda"``/``"gpu"`` or ``"cpu"`` (PyTorch's device type or JAX's platform);
    ``capability``: an NVIDIA GPU's compute capability ``(major, minor)`` where known. Only TF32
    depends on the device: it is a mode of NVIDIA tensor cores (compute capability 8.0, Ampere, or
    newer); a CPU has no TF32 mode, so a TF32 row there would repeat the float32 one."""
    _check_precision(precision)
    if precision != "tf32":
        return None
    if platform not in ("cuda", "gpu"):
        return ("TF32 is a tensor-core mode of NVIDIA GPUs (Ampere or newer); a CPU computes float32 matmuls "
                "in float32 whatever the setting, so this row would repeat the float32 one")
    if capability is not None and tuple(capability) < (8, 0):
        return (f"TF32 needs an NVIDIA GPU of compute capability 8.0 (Ampere) or newer; this one is "
                f"{capability[0]}.{capability[1]}")
    return None


# ---------------------------------------------------------------- data and configuration


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


def _as_arrays(data: Any) -> Arrays:
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


def _bar(progress: bool | str, total: int, desc: str):
    if progress is False:
        return None
    return sbs_progress.bar(total=total, desc=desc if progress is True else str(progress))


def _epoch_done(bar, history: History) -> None:
    """Move the epoch bar (if any) on by one, showing the epoch's training loss and, where
    it was evaluated, its test accuracy."""
    if bar is not None:
        evaluated = len(history.test_accuracy) == len(history.train_loss)
        bar.set_postfix(loss=f"{history.train_loss[-1]:.3f}", acc=f"{history.test_accuracy[-1]:.3f}" if evaluated else "-")
        bar.update(1)


# ---------------------------------------------------------------- PyTorch


def _fit(trainer, model, history: History, desc: str, evaluate: Callable[..., float] | None,
         on_epoch_end: Callable[[int, Any], None] | None, progress: bool | str, *,
         after_epoch: Callable[[], Any] | None = None, announce: bool = True) -> None:
    """The epoch loop both trainers share: each epoch timed from its start to its loss as a Python
    float (which waits for the device), then ``after_epoch`` (the model brought up to date), test
    accuracy (``evaluate(model, X_test, y_test)``, None: not measured) and ``on_epoch_end(epoch, model)``
    (also called with 0 before the first epoch unless ``announce`` is False: the caller did)."""
    arrays = trainer.arrays
    if on_epoch_end and announce:
        on_epoch_end(0, model)
    bar = _bar(progress, trainer.config.num_epochs, desc)
    for epoch in range(trainer.config.num_epochs):
        start = time.perf_counter()
        loss = trainer.run_epoch(epoch)
        history.epoch_seconds.append(time.perf_counter() - start)
        history.train_loss.append(loss)
        if after_epoch is not None:
            after_epoch()
        if evaluate is not None:
            history.test_accuracy.append(evaluate(model, arrays.X_test, arrays.y_test))
        _epoch_done(bar, history)
        if on_epoch_end:
            on_epoch_end(epoch + 1, model)
    if bar is not None:
        bar.close()


def _torch_device(model) -> Any:
    return next(model.parameters()).device


def predict_torch(model, X: np.ndarray, *, batch_size: int = 2000) -> np.ndarray:
    """Predicted classes ``(N,)`` of a PyTorch model for images ``X``."""
    import torch

    device = _torch_device(model)
    was_training = model.training
    model.eval()
    out = []
    with torch.no_grad():
        for start in range(0, len(X), batch_size):
            xb = torch.as_tensor(X[start:start + batch_size], device=device)
            out.append(model(xb).argmax(1).cpu().numpy())
    model.train(was_training)
    return np.concatenate(out)


def evaluate_torch(model, X: np.ndarray, y: np.ndarray, *, batch_size: int = 2000) -> float:
    """Accuracy (0-1) of a PyTorch model on ``(X, y)``."""
    return float(np.mean(predict_torch(model, X, batch_size=batch_size) == np.asarray(y)))


class TorchTrainer:
    """The PyTorch side: model, optimiser and data on the model's device.

    ``capture`` (CUDA graph loops only): ``True`` captures the step in a CUDA
    graph (needs a CUDA device); ``False`` runs the very same static-buffer
    step without capture, which is what a CPU can test.

    ``precision``: ``"float32"``, ``"tf32"`` or ``"bfloat16"`` (see the module's docstring); a
    precision the device lacks raises :class:`sidebyside.lab.timing.NotApplicable` with the reason."""

    def __init__(self, model, data: Any, config: TrainConfig, *, loop: str = "device", capture: bool = True,
                 precision: str = "float32"):
        import torch

        if loop not in TORCH_LOOPS:
            raise ValueError(f"PyTorch loop must be one of {TORCH_LOOPS}, got {loop!r}")
        self.model, self.config, self.loop, self.precision = model, config, loop, precision
        self.arrays = _as_arrays(data)
        self.device = _torch_device(model)
        capability = torch.cuda.get_device_capability(self.device) if self.device.type == "cuda" else None
        reason = precision_not_applicable(precision, self.device.type, capability)
        if reason is not None:
            from sidebyside.lab.timing import NotApplicable

            raise NotApplicable(reason)
        graph = loop in CUDA_GRAPH_LOOPS
        self.capture = loop in CUDA_ONLY_LOOPS and capture
        # bf16 mixed precision: autocast's cache of cast weights must be off inside a captured graph.
        self._autocast = {"device_type": self.device.type, "dtype": torch.bfloat16, "cache_enabled": not graph}
        if self.capture and self.device.type != "cuda":
            raise RuntimeError(f"loop={loop!r} captures a CUDA graph and needs the model on a CUDA device; it is on "
                               f"{self.device}. Move the model to 'cuda', or pass capture=False to run the same "
                               f"step uncaptured.")
        if graph and not config.drop_last:
            raise ValueError(f"loop={loop!r} needs drop_last=True (a captured step has one batch shape)")
        self.n = len(self.arrays.X_train)
        self.steps_per_epoch = config.steps_per_epoch(self.n)
        params = [p for p in model.parameters() if p.requires_grad]
        on_cuda = self.device.type == "cuda"
        # Compiled and captured steps read the learning rate from a tensor, updated in place.
        self.tensor_lr = loop in COMPILED_LOOPS or graph
        lr = torch.tensor(config.lr, dtype=torch.float32, device=self.device) if self.tensor_lr else config.lr
        extra: dict[str, Any] = {}
        if self.tensor_lr:
            # A tensor lr needs a capturable (on CUDA) or single-tensor optimiser; fused is its own kind.
            if loop == "cuda_graph_fused":
                extra = {"fused": True, "capturable": True} if on_cuda else {"foreach": False}
            elif on_cuda:
                extra = {"capturable": True} if config.optimizer == "adam" else {}
            else:
                extra = {"foreach": False}
        if config.optimizer == "sgd":
            extra.pop("capturable", None)
            self.optimizer = torch.optim.SGD(params, lr=lr, momentum=config.momentum,
                                             weight_decay=config.weight_decay, **extra)
        elif config.weight_decay > 0:
            self.optimizer = torch.optim.AdamW(params, lr=lr, weight_decay=config.weight_decay, **extra)
        else:
            self.optimizer = torch.optim.Adam(params, lr=lr, **extra)
        self.lr = lr
        self.loss_fn = torch.nn.CrossEntropyLoss()
        self.step_count = 0
        if loop == "dataloader":
            self.X_host = torch.from_numpy(self.arrays.X_train)
            self.y_host = torch.from_numpy(self.arrays.y_train)
        else:
            self.X = torch.as_tensor(self.arrays.X_train, device=self.device)
            self.y = torch.as_tensor(self.arrays.y_train, device=self.device)
        if loop == "compile":
            self._indexed_step = torch.compile(self._train_step, dynamic=False)
        elif loop == "compile_cuda_graph":
            compiled = torch.compile(self._train_step, dynamic=False,
                                     mode="reduce-overhead" if self.capture else "default")

            def indexed_step(index, compiled=compiled):
                with torch._dynamo.config.patch(compiled_autograd=True):  # backward() captured, not a graph break
                    return compiled(index)
            self._indexed_step = indexed_step
        else:
            self._indexed_step = self._train_step
        self._graph = None
        self._step_graphs: dict[int, tuple] = {}  # "cuda_graph_steps": K -> (graph, indices, lrs, total)
        if graph:
            self._static_index = torch.zeros(config.batch_size, dtype=torch.int64, device=self.device)
            self._static_loss = None

    def _set_lr(self):
        value = float(learning_rate(self.step_count, self.config, self.steps_per_epoch))
        for group in self.optimizer.param_groups:
            if self.tensor_lr:
                group["lr"].fill_(value)
            else:
                group["lr"] = value

    def _train_step(self, index):
        """The whole step on the device-resident data: gather, forward, loss,
        backward, optimiser step. What ``"compile"`` compiles and the CUDA
        graph loops capture."""
        self.optimizer.zero_grad(set_to_none=True)
        loss = self._loss(self.X[index], self.y[index])
        loss.backward()
        self.optimizer.step()
        return loss.detach()

    def _loss(self, xb, yb):
        """The loss of a batch; in bfloat16 mode the network runs under autocast and the
        cross-entropy takes its logits back in float32, as the JAX side does."""
        if self.precision != "bfloat16":
            return self.loss_fn(self.model(xb), yb)
        import torch

        with torch.autocast(**self._autocast):
            logits = self.model(xb)
        return self.loss_fn(logits.float(), yb)

    def _step(self, xb, yb):
        self._set_lr()
        self.optimizer.zero_grad(set_to_none=True)
        loss = self._loss(xb, yb)
        loss.backward()
        self.optimizer.step()
        self.step_count += 1
        return loss.detach()

    def _warm_up(self, index):
        """Three steps on a side stream (PyTorch's recipe before a capture: the
        optimiser creates its state, cuBLAS its workspaces), then the weights and
        the optimiser state put back as they were, so the warm-up does not count."""
        import torch

        params = [p for p in self.model.parameters()]
        saved = [p.detach().clone() for p in params]
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
            for _ in range(3):
                self._train_step(index)
        torch.cuda.current_stream().wait_stream(stream)
        with torch.no_grad():
            for p, s in zip(params, saved):
                p.copy_(s)
            for state in self.optimizer.state.values():
                for value in state.values():
                    if torch.is_tensor(value):
                        value.zero_()
        self.optimizer.zero_grad(set_to_none=True)

    def _capture_graph(self):
        """Capture one training step in a CUDA graph (PyTorch's whole-network
        recipe): warm up (:meth:`_warm_up`), then capture."""
        import torch

        self._warm_up(self._static_index)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            self._static_loss = self._train_step(self._static_index)
        self._graph = graph

    def _steps_body(self, indices, lrs):
        """K steps (``indices``: ``(K, batch)``, ``lrs``: ``(K,)``, both on the device): per step
        the learning rate copied from ``lrs``, the batch gathered, the step; the summed loss. What
        ``"cuda_graph_steps"`` captures in one graph."""
        import torch

        total = torch.zeros((), device=self.device)
        for i in range(len(indices)):
            for group in self.optimizer.param_groups:
                group["lr"].copy_(lrs[i])
            total += self._train_step(indices[i])
        return total

    def _steps_run(self, batches) -> Any:
        """``"cuda_graph_steps"``: all of ``batches`` (``(K, batch)`` on the device) in one
        replay of a graph captured for K steps (captured on the first call with that K); the
        schedule's K learning rates go to the device in one copy. Returns the summed loss."""
        import torch

        k = len(batches)
        lrs = torch.as_tensor(np.array([learning_rate(self.step_count + i, self.config, self.steps_per_epoch)
                                        for i in range(k)], dtype=np.float32), device=self.device)
        if not self.capture:
            total = self._steps_body(batches, lrs)
        else:
            if k not in self._step_graphs:
                indices = torch.zeros((k, self.config.batch_size), dtype=torch.int64, device=self.device)
                static_lrs = torch.zeros(k, dtype=torch.float32, device=self.device)
                indices.copy_(batches)
                self._warm_up(indices[0])
                graph = torch.cuda.CUDAGraph()
                with torch.cuda.graph(graph):
                    static_total = self._steps_body(indices, static_lrs)
                self._step_graphs[k] = (graph, indices, static_lrs, static_total)
            graph, indices, static_lrs, static_total = self._step_graphs[k]
            indices.copy_(batches)
            static_lrs.copy_(lrs)
            graph.replay()
            total = static_total.clone()  # the next replay overwrites the graph's own
        self.step_count += k
        return total

    def graph_breaks(self) -> int | None:
        """How many times Dynamo breaks the compiled step (``torch._dynamo.explain`` on one step
        of the first batch, weights and optimiser state restored after it); None for a loop that
        compiles nothing."""
        import torch

        if self.loop not in COMPILED_LOOPS:
            return None
        index = torch.as_tensor(index_batches(self.n, self.config, 0)[0], device=self.device)
        params = list(self.model.parameters())
        saved = [p.detach().clone() for p in params]
        state = {k: {n: v.clone() if torch.is_tensor(v) else v for n, v in s.items()}
                 for k, s in self.optimizer.state.items()}
        with torch._dynamo.config.patch(compiled_autograd=self.loop == "compile_cuda_graph"):
            explanation = torch._dynamo.explain(self._train_step)(index)
        with torch.no_grad():
            for p, s in zip(params, saved):
                p.copy_(s)
        self.optimizer.state.clear()
        self.optimizer.state.update(state)
        self.optimizer.zero_grad(set_to_none=True)
        return int(explanation.graph_break_count)

    def _graph_step(self, index):
        self._static_index.copy_(index)
        self._set_lr()
        if self.capture:
            if self._graph is None:
                self._capture_graph()
            self._graph.replay()
            loss = self._static_loss
        else:
            loss = self._train_step(self._static_index)
        self.step_count += 1
        return loss

    def run(self, batches) -> Any:
        """Train on the given index batches; returns the summed loss (a tensor,
        not synchronised) and the number of steps. In ``"tf32"`` mode PyTorch's
        TF32 switches are on for the call (compilation and capture included) and
        restored after it."""
        if self.precision == "tf32":
            from sidebyside.lab.timing import tf32

            with tf32(True, frameworks=("torch",)):
                return self._run(batches)
        return self._run(batches)

    def _run(self, batches) -> Any:
        import torch

        self.model.train()
        total = torch.zeros((), device=self.device)
        steps = 0
        if self.loop == "dataloader":
            dataset = torch.utils.data.TensorDataset(self.X_host, self.y_host)
            sampler = [int(i) for batch in batches for i in batch]
            loader = torch.utils.data.DataLoader(dataset, batch_size=self.config.batch_size, sampler=sampler,
                                                 drop_last=self.config.drop_last)
            for xb, yb in loader:
                total += self._step(xb.to(self.device, non_blocking=True), yb.to(self.device, non_blocking=True))
                steps += 1
            return total, steps
        if isinstance(batches, np.ndarray):  # one transfer of all indices, not one per step
            batches = torch.as_tensor(batches, device=self.device)
        if self.loop == "cuda_graph_steps":
            return self._steps_run(torch.as_tensor(batches, device=self.device)), len(batches)
        for batch in batches:
            index = torch.as_tensor(batch, device=self.device)
            if self.loop in CUDA_GRAPH_LOOPS:
                total += self._graph_step(index)
            elif self.loop in COMPILED_LOOPS:
                self._set_lr()
                total += self._indexed_step(index)
                self.step_count += 1
            else:
                total += self._step(self.X[index], self.y[index])
            steps += 1
        return total, steps

    def run_epoch(self, epoch: int) -> float:
        """One epoch (0-based ``epoch`` picks the permutation); mean train loss."""
        total, steps = self.run(index_batches(self.n, self.config, epoch))
        return float(total) / max(steps, 1)

    def runner(self, num_steps: int) -> Callable[[], Any]:
        """A zero-argument callable training ``num_steps`` steps (the first
        batches of epoch 0), returning the summed loss: for the timing harness."""
        batches = index_batches(self.n, self.config, 0)[:num_steps]
        return lambda: self.run(batches)[0]


def train_torch(model, data: Any, config: TrainConfig, *, loop: str = "device",
                on_epoch_end: Callable[[int, Any], None] | None = None,
                progress: bool | str = True, evaluate: bool = True, capture: bool = True,
                precision: str = "float32") -> tuple[Any, History]:
    """Train a PyTorch model in place; returns ``(model, History)``.
    ``capture``, ``precision``: see :class:`TorchTrainer`."""
    import torch

    trainer = TorchTrainer(model, data, config, loop=loop, capture=capture, precision=precision)
    torch.manual_seed(config.seed)  # nothing random in these models, but dropout-safe
    history = History("torch", loop)
    _fit(trainer, model, history, f"PyTorch ({loop})", evaluate_torch if evaluate else None, on_epoch_end, progress)
    return model, history


# ---------------------------------------------------------------- Flax (NNX) + optax


def _optax(config: TrainConfig, steps_per_epoch: int):
    import jax.numpy as jnp
    import optax

    def schedule(count):
        return learning_rate(count, config, steps_per_epoch, xp=jnp)

    if config.optimizer == "sgd":
        sgd = optax.sgd(schedule, momentum=config.momentum or None)
        if config.weight_decay > 0:
            return optax.chain(optax.add_decayed_weights(config.weight_decay), sgd)
        return sgd
    if config.weight_decay > 0:
        return optax.adamw(schedule, b1=0.9, b2=0.999, eps=1e-8, weight_decay=config.weight_decay)
    return optax.adam(schedule, b1=0.9, b2=0.999, eps=1e-8)


_FLAX_PREDICT_CACHE: dict = {}


def predict_flax(model, X: np.ndarray, *, batch_size: int = 2000) -> np.ndarray:
    """Predicted classes ``(N,)`` of a Flax NNX model for images ``X``."""
    import jax
    import jax.numpy as jnp
    from flax import nnx

    graphdef, state = nnx.split(model)
    fn = _FLAX_PREDICT_CACHE.get(graphdef)
    if fn is None:
        fn = jax.jit(lambda state, x: jnp.argmax(nnx.merge(graphdef, state)(x), axis=-1))
        _FLAX_PREDICT_CACHE[graphdef] = fn
    out = [np.asarray(fn(state, jnp.asarray(X[start:start + batch_size])))
           for start in range(0, len(X), batch_size)]
    return np.concatenate(out)


def evaluate_flax(model, X: np.ndarray, y: np.ndarray, *, batch_size: int = 2000) -> float:
    """Accuracy (0-1) of a Flax NNX model on ``(X, y)``."""
    return float(np.mean(predict_flax(model, X, batch_size=batch_size) == np.asarray(y)))


class FlaxTrainer:
    """The JAX side: parameters and optimiser state as pytrees, pure jitted
    steps; :meth:`sync` writes the parameters back into the NNX model.

    ``precision``: ``"float32"``, ``"tf32"`` or ``"bfloat16"`` (see the module's docstring); a
    precision the device lacks raises :class:`sidebyside.lab.timing.NotApplicable` with the reason."""

    def __init__(self, model, data: Any, config: TrainConfig, *, loop: str = "scan", precision: str = "float32"):
        import jax
        import jax.numpy as jnp
        import optax
        from flax import nnx

        if loop not in FLAX_LOOPS:
            raise ValueError(f"JAX loop must be one of {FLAX_LOOPS}, got {loop!r}")
        device = jax.devices()[0]
        capability = getattr(device, "compute_capability", None) if device.platform == "gpu" else None
        capability = tuple(int(v) for v in str(capability).split(".")[:2]) if capability else None
        reason = precision_not_applicable(precision, device.platform, capability)
        if reason is not None:
            from sidebyside.lab.timing import NotApplicable

            raise NotApplicable(reason)
        self.precision = precision
        if loop == "scan" and not config.drop_last:
            raise ValueError("loop='scan' needs drop_last=True (every step the same shape)")
        self.model, self.config, self.loop = model, config, loop
        self.arrays = _as_arrays(data)
        self.n = len(self.arrays.X_train)
        self.steps_per_epoch = config.steps_per_epoch(self.n)
        self.graphdef, self.params, self.rest = nnx.split(model, nnx.Param, ...)
        self.tx = _optax(config, self.steps_per_epoch)
        self.opt_state = self.tx.init(self.params)
        graphdef, tx = self.graphdef, self.tx

        bf16 = precision == "bfloat16"

        def loss_fn(params, rest, xb, yb):
            if bf16:  # mixed precision: a bfloat16 network from float32 master weights, whose gradients stay float32
                params = jax.tree_util.tree_map(lambda p: p.astype(jnp.bfloat16), params)
                xb = xb.astype(jnp.bfloat16)
            logits = nnx.merge(graphdef, params, rest)(xb).astype(jnp.float32)
            return optax.softmax_cross_entropy_with_integer_labels(logits, yb).mean()

        def step(params, opt_state, rest, xb, yb):
            loss, grads = jax.value_and_grad(loss_fn)(params, rest, xb, yb)
            updates, opt_state = tx.update(grads, opt_state, params)
            return optax.apply_updates(params, updates), opt_state, loss

        def scan_epoch(params, opt_state, rest, X, y, batches):
            def body(carry, index):
                params, opt_state = carry
                params, opt_state, loss = step(params, opt_state, rest, X[index], y[index])
                return (params, opt_state), loss

            (params, opt_state), losses = jax.lax.scan(body, (params, opt_state), batches)
            return params, opt_state, losses.sum()

        def device_step(params, opt_state, rest, X, y, index):
            return step(params, opt_state, rest, X[index], y[index])

        def counted_step(params, opt_state, rest, X, y, batches, i):
            # The batch indices live on the device and so does the step counter: a step sends nothing
            # from the host, like PyTorch's loop over a device tensor of indices.
            index = batches[i]
            params, opt_state, loss = step(params, opt_state, rest, X[index], y[index])
            return params, opt_state, loss, i + 1

        # Donating the parameters and optimiser state lets XLA update them in place.
        self._step = jax.jit(step, donate_argnums=(0, 1))
        self._device_step = jax.jit(device_step, donate_argnums=(0, 1))
        self._counted_step = jax.jit(counted_step, donate_argnums=(0, 1))
        self._scan = jax.jit(scan_epoch, donate_argnums=(0, 1))
        self.compile_seconds = 0.0
        if loop in ("scan", "device"):
            self.X = jax.device_put(self.arrays.X_train)
            self.y = jax.device_put(self.arrays.y_train.astype(np.int32))
        self._compiled: dict = {}

    def _compile(self, num_steps: int):
        """Ahead-of-time compilation for a given number of steps, timed apart."""
        key = num_steps if self.loop in ("scan", "device") else "step"
        if key not in self._compiled:
            with self._precision():
                self._compile_now(key, num_steps)
        return self._compiled[key]

    def _compile_now(self, key, num_steps: int) -> None:
        import jax

        start = time.perf_counter()
        bs = self.config.batch_size
        if self.loop == "scan":
            batches = jax.ShapeDtypeStruct((num_steps, bs), np.int32)
            compiled = self._scan.lower(self.params, self.opt_state, self.rest, self.X, self.y, batches).compile()
        elif self.loop == "device":
            batches = jax.ShapeDtypeStruct((num_steps, bs), np.int32)
            counter = jax.ShapeDtypeStruct((), np.int32)
            compiled = self._counted_step.lower(self.params, self.opt_state, self.rest, self.X, self.y, batches,
                                                counter).compile()
        else:
            xb = jax.ShapeDtypeStruct((bs,) + self.arrays.X_train.shape[1:], np.float32)
            yb = jax.ShapeDtypeStruct((bs,), np.int32)
            compiled = self._step.lower(self.params, self.opt_state, self.rest, xb, yb).compile()
        self._compiled[key] = compiled
        self.compile_seconds += time.perf_counter() - start

    def run(self, batches) -> Any:
        """Train on the given index batches; returns the summed loss (a JAX
        scalar, not synchronised) and the number of steps. In ``"tf32"`` mode
        the steps are traced (and compiled) with JAX's default matmul precision
        ``"tensorfloat32"``."""
        with self._precision():
            return self._run(batches)

    def _precision(self):
        """The context in which this trainer's steps are traced: TF32 matmuls in ``"tf32"`` mode."""
        import contextlib

        import jax

        if self.precision == "tf32":
            return jax.default_matmul_precision("tensorfloat32")
        return contextlib.nullcontext()

    def _run(self, batches) -> Any:
        import jax.numpy as jnp

        if self.loop == "scan":
            batches = np.asarray(batches, dtype=np.int32)
            fn = self._compile(len(batches))
            self.params, self.opt_state, total = fn(self.params, self.opt_state, self.rest, self.X, self.y,
                                                    jnp.asarray(batches))
            return total, len(batches)
        losses = []
        if self.loop == "device" and isinstance(batches, np.ndarray) and batches.ndim == 2:
            # Every batch full: the indices go to the device once, and each step picks its own.
            fn = self._compile(len(batches))
            device_batches = jnp.asarray(batches.astype(np.int32))
            i = jnp.zeros((), jnp.int32)
            for _ in range(len(batches)):
                self.params, self.opt_state, loss, i = fn(self.params, self.opt_state, self.rest, self.X, self.y,
                                                          device_batches, i)
                losses.append(loss)
            return jnp.stack(losses).sum(), len(losses)
        if self.loop == "device":  # ragged batches (drop_last=False): one index array per step
            for index in batches:
                index = jnp.asarray(np.asarray(index, dtype=np.int32))
                self.params, self.opt_state, loss = self._device_step(self.params, self.opt_state, self.rest,
                                                                      self.X, self.y, index)
                losses.append(loss)
            return jnp.stack(losses).sum(), len(losses)
        full = self._compile(0)
        X, y = self.arrays.X_train, self.arrays.y_train
        for index in batches:
            xb, yb = X[index], y[index].astype(np.int32)
            fn = full if len(index) == self.config.batch_size else self._step  # a last, smaller batch
            self.params, self.opt_state, loss = fn(self.params, self.opt_state, self.rest, xb, yb)
            losses.append(loss)
        return jnp.stack(losses).sum(), len(losses)

    def run_epoch(self, epoch: int) -> float:
        total, steps = self.run(index_batches(self.n, self.config, epoch))
        return float(total) / max(steps, 1)

    def sync(self):
        """Write the current parameters into the NNX model; returns it."""
        import jax
        from flax import nnx

        # Copies, so that the next (donating) step cannot invalidate the model's arrays.
        nnx.update(self.model, jax.tree_util.tree_map(lambda a: a.copy(), self.params))
        return self.model

    def runner(self, num_steps: int) -> Callable[[], Any]:
        """A zero-argument callable training ``num_steps`` steps (the first
        batches of epoch 0), returning the summed loss: for the timing harness.
        Its first call includes compilation (``time_fn`` times it apart)."""
        batches = index_batches(self.n, self.config, 0)[:num_steps]
        self._compiled.clear()  # so that the first call of the runner compiles

        return lambda: self.run(batches)[0]


def train_flax(model, data: Any, config: TrainConfig, *, loop: str = "scan",
               on_epoch_end: Callable[[int, Any], None] | None = None,
               progress: bool | str = True, evaluate: bool = True, precision: str = "float32") -> tuple[Any, History]:
    """Train a Flax NNX model (updated in place); returns ``(model, History)``.
    ``History.compile_seconds`` holds the ahead-of-time compilation, which
    ``epoch_seconds`` exclude. ``precision``: see :class:`FlaxTrainer`."""
    trainer = FlaxTrainer(model, data, config, loop=loop, precision=precision)
    history = History("flax", loop)
    if on_epoch_end:
        on_epoch_end(0, model)
    if config.num_epochs:
        if loop == "jit_step":
            trainer._compile(0)
        elif config.drop_last:  # "scan" and "device" compile for an epoch's number of steps
            trainer._compile(trainer.steps_per_epoch)
    _fit(trainer, model, history, f"Flax ({loop})", evaluate_flax if evaluate else None, on_epoch_end, progress,
         after_epoch=trainer.sync, announce=False)
    history.compile_seconds = trainer.compile_seconds
    return model, history


# ---------------------------------------------------------------- rungs of the speed ladder


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
