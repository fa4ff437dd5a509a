"""The PyTorch side of :mod:`sidebyside.lab.training`: :class:`TorchTrainer` and its loop styles
(``loop=``, below), :func:`train_torch`, prediction and accuracy.

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
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from sidebyside.lab.training.loop import (
    History,
    TrainConfig,
    as_arrays,
    epochs,
    index_batches,
    learning_rate,
    precision_not_applicable,
)

__all__ = ["TORCH_LOOPS", "CUDA_GRAPH_LOOPS", "CUDA_ONLY_LOOPS", "COMPILED_LOOPS", "TorchTrainer", "train_torch",
           "predict_torch", "evaluate_torch"]

TORCH_LOOPS = ("dataloader", "device", "compile", "compile_cuda_graph", "cuda_graph", "cuda_graph_fused",
               "cuda_graph_steps")
CUDA_GRAPH_LOOPS = ("cuda_graph", "cuda_graph_fused", "cuda_graph_steps")
#: Loops that need a CUDA device to run as named (captured graphs, compiled or by hand).
CUDA_ONLY_LOOPS = (*CUDA_GRAPH_LOOPS, "compile_cuda_graph")
#: Loops whose compiled step Dynamo may split (:meth:`TorchTrainer.graph_breaks`).
COMPILED_LOOPS = ("compile", "compile_cuda_graph")


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
        self.arrays = as_arrays(data)
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
            from sidebyside.lab.conditions import tf32

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
    if on_epoch_end:
        on_epoch_end(0, model)
    arrays = trainer.arrays
    epochs(trainer.run_epoch, history, config.num_epochs, desc=f"PyTorch ({loop})", progress=progress,
           evaluate=(lambda: evaluate_torch(model, arrays.X_test, arrays.y_test)) if evaluate else None,
           on_epoch_end=(lambda epoch: on_epoch_end(epoch, model)) if on_epoch_end else None)
    return model, history
