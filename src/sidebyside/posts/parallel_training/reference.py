"""The one-device reference, in this process, on the device the caller names: each framework's
ladder of tools for the same training step (PyTorch eager and ``torch.compile`` of the whole step,
JAX ``jit``), trained from the same weights on the same batches with the same optimiser, then timed
in one interleaved run of :func:`sidebyside.lab.timing.ladder`.

- :func:`run`: the ladder on one device (``torch_device`` "cpu" or "cuda", ``jax_device`` a JAX
  device): the loss per step of every tool, its ladder entry (a tool that fails keeps its row with
  its error), and for ``torch.compile`` the graph breaks Dynamo makes (``torch._dynamo.explain``),
  the measurement that explains a compiled rung slower than eager.
- :func:`gpu_plan`: what the gpu profile runs on the GPUs this machine shows: the one-device
  ladder on one GPU, and with two or more the device counts of the scaling runs over them.

The steps and the optimisers are the notebook's paired cells (``torch_step``, ``jax_step``,
``torch_optimizer``, ``jax_optimizer``: the options the post shows are the options run), the same computation as
:func:`.torch_parallel.make_step`, the step the strategies' workers run, and the step of
:func:`.jax_parallel.train`; JAX's is placed on ``jax_device``. The data is on the device before
any clock starts; every timed call is synchronised by the harness. The
strategies on several devices are not here: they run in worker processes (:mod:`.launch`), on
simulated CPU devices and, with two or more GPUs, on the GPUs.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from functools import partial
from typing import Any

import numpy as np

from sidebyside.lab import ladders, timing
from sidebyside.posts.parallel_training.launch import scaling_counts
from sidebyside.posts.parallel_training.model import ViTConfig

__all__ = ["TORCH_TOOLS", "run", "gpu_plan"]

#: PyTorch's one-device rungs: eager, and ``torch.compile`` of the whole step (static shapes).
TORCH_TOOLS = ("eager", "compile")


def _torch_trainer(torch_state: Mapping[str, Any], config: ViTConfig, *, lr: float, momentum: float, device: str,
                   tool: str, torch_step: Callable, torch_optimizer: Callable):
    """The notebook's one-device PyTorch step (``torch_step(net, optimizer, tool)``) with its
    optimiser (``torch_optimizer(parameters, lr, momentum)``) on ``device`` from ``torch_state``, and
    a ``reset()`` that puts the weights back and empties the optimiser state in place (so a compiled
    step keeps its compiled code)."""
    from sidebyside.posts.parallel_training.model import TorchViT

    model = TorchViT(config).to(device)
    model.load_state_dict(torch_state)
    optimizer = torch_optimizer(model.parameters(), lr=lr, momentum=momentum)
    step = torch_step(model, optimizer, tool)

    def reset():
        model.load_state_dict(torch_state)
        optimizer.state.clear()
        optimizer.zero_grad(set_to_none=True)
    return step, reset


def _jax_rung(X: np.ndarray, y: np.ndarray, torch_state: Mapping[str, Any], config: ViTConfig, lr: float,
              momentum: float, jax_platform: str, jax_step: Callable,
              jax_optimizer: Callable) -> tuple[dict[str, Any], Callable[[], Any]]:
    """The notebook's one-device JAX step (``jax_step(graphdef, tx)``, jitted, with the optimiser
    ``tx = jax_optimizer(lr, momentum)``) on the first device of
    ``jax_platform``, from PyTorch's weights: compiled ahead of time once (``compile_s``), trained over
    every batch (``losses``), and the step on the first batch from the final state, to be timed
    (each call continues from the state the last returned: the step donates what it replaces)."""
    import jax
    from flax import nnx

    from sidebyside.posts.parallel_training.model import flax_from_torch

    device = jax.devices(jax_platform)[0]
    flax_model = flax_from_torch(config, {k: v.detach().cpu().numpy() for k, v in torch_state.items()})
    graphdef, params = nnx.split(flax_model, nnx.Param)
    tx = jax_optimizer(lr=lr, momentum=momentum)
    step = jax_step(graphdef, tx)
    params = jax.device_put(params, device)
    opt_state = jax.device_put(tx.init(params), device)
    first = (jax.device_put(X[0], device), jax.device_put(y[0], device))
    start = time.perf_counter()
    step.lower(params, opt_state, *first).compile()
    compile_s = time.perf_counter() - start
    losses = []
    for i in range(X.shape[0]):
        params, opt_state, loss = step(params, opt_state, jax.device_put(X[i], device), jax.device_put(y[i], device))
        losses.append(float(loss))
    state = [params, opt_state]

    def timed():  # the step donates the state it replaces: each call continues from the last one's
        state[0], state[1], loss = step(state[0], state[1], *first)
        return state[0], state[1], loss
    timed.__wrapped__ = step  # what is timed is the step: its code is the paired cell's (run.code.origin)
    return {"losses": losses, "compile_s": compile_s}, timed


def _contestants(X: np.ndarray, y: np.ndarray, torch_state: Mapping[str, Any], config: ViTConfig, lr: float,
                 momentum: float, torch_device: str, torch_tools: Sequence[str], jax_platform: str,
                 torch_step: Callable, jax_step: Callable, torch_optimizer: Callable, jax_optimizer: Callable):
    """Every rung built on the first batch: ``(candidates, trainers, jax_record, losses)`` (a tool
    that fails to build keeps its error as its candidate)."""
    import torch

    common = dict(lr=lr, momentum=momentum, device=torch_device, torch_step=torch_step, torch_optimizer=torch_optimizer)
    Xt = torch.from_numpy(X).to(torch_device)
    yt = torch.from_numpy(y).long().to(torch_device)
    candidates: dict[str, Any] = {}
    trainers = {}
    for tool in torch_tools:
        name = f"torch/{tool}"
        try:  # a tool that fails keeps its row, with its error
            step, reset = _torch_trainer(torch_state, config, tool=tool, **common)
            trainers[name], candidates[name] = (step, reset), partial(step, Xt[0], yt[0])
        except Exception as error:  # noqa: BLE001
            candidates[name] = error
    losses = {}
    try:
        jax_record, candidates["jax/jit"] = _jax_rung(X, y, torch_state, config, lr, momentum, jax_platform, jax_step,
                                                      jax_optimizer)
        losses["jax/jit"] = jax_record["losses"]
    except Exception as error:  # noqa: BLE001
        candidates["jax/jit"], jax_record = error, None
    return candidates, trainers, jax_record, losses


def _candidates(*args: Any) -> dict[str, Any]:
    """The rungs alone, as a timing worker process builds them (:func:`_contestants`'s arguments)."""
    return _contestants(*args)[0]


def run(X: np.ndarray, y: np.ndarray, torch_state: Mapping[str, Any], config: ViTConfig, *, lr: float,
        momentum: float, torch_step: Callable, jax_step: Callable, torch_optimizer: Callable, jax_optimizer: Callable,
        torch_device: str = "cpu", jax_device: Any = None,
        torch_tools: Sequence[str] = TORCH_TOOLS, repeats: int = 5, min_repeat_s: float = 0.05) -> dict[str, Any]:
    """The one-device ladder on one device, trained on the global batches ``X`` (steps, B, 28, 28)
    and ``y`` (steps, B) with the notebook's optimisers (``lr``, ``momentum``) from ``torch_state``.

    The steps and the optimisers are the notebook's paired cells (the code shown is the code timed):
    ``torch_step(net, optimizer, tool)`` returns PyTorch's step ``step(xb, yb)`` for ``tool``
    (eager, or compiled whole), ``jax_step(graphdef, tx)`` JAX's jitted ``step(params, opt_state,
    X, y)``; ``torch_optimizer(parameters, lr, momentum)`` returns PyTorch's optimiser,
    ``jax_optimizer(lr, momentum)`` optax's transformation, each with the options the cell writes.
    This builds the models from the same weights and the optimisers from those cells, and puts the
    batches on the device. Every rung is first timed on the first batch
    (:func:`sidebyside.lab.timing.ladder`, ``repeats`` and ``min_repeat_s``: its first call holds
    the compilation), then trained from the initial weights over every batch for its loss curve
    (JAX's before the timing, from which its timed call starts). ``jax_device``: the JAX device
    (default: JAX's first CPU device). Returns ``{"torch_device", "jax_device", "entries":
    {"<framework>/<tool>": ladder entry}, "losses": {name: [loss per step]}}``; a ``torch/compile``
    entry also carries ``graph_breaks`` (or ``graph_breaks_error``), a ``jax/jit`` entry the
    ahead-of-time ``compile_s``."""
    import jax
    import torch

    unknown = set(torch_tools) - set(TORCH_TOOLS)
    if unknown:
        raise ValueError(f"unknown PyTorch tools {sorted(unknown)}; choose among {TORCH_TOOLS}")
    jax_device = jax_device if jax_device is not None else jax.devices("cpu")[0]
    common = dict(lr=lr, momentum=momentum, device=torch_device, torch_step=torch_step, torch_optimizer=torch_optimizer)
    Xt = torch.from_numpy(X).to(torch_device)
    yt = torch.from_numpy(y).long().to(torch_device)
    breaks: dict[str, Any] = {}
    if "compile" in torch_tools:
        # First: explain() resets Dynamo's caches, which would throw the timed rung's compiled code away.
        try:
            step, _ = _torch_trainer(torch_state, config, tool="eager", **common)
            breaks["graph_breaks"] = int(torch._dynamo.explain(step)(Xt[0], yt[0]).graph_break_count)
        except Exception as error:  # noqa: BLE001  (the count is a finding; its failure is one too)
            breaks["graph_breaks_error"] = f"{type(error).__name__}: {error}"[:300]
    args = (X, y, torch_state, config, lr, momentum, torch_device, tuple(torch_tools), jax_device.platform, torch_step,
            jax_step, torch_optimizer, jax_optimizer)
    candidates, trainers, jax_record, losses = _contestants(*args)
    builder = partial(_candidates, *args)  # each worker process builds the rungs again (the steps travel by value)
    entries, _ = timing.ladder(builder, here=candidates, repeats=repeats, min_repeat_s=min_repeat_s)
    if jax_record is not None and entries["jax/jit"].get("median_s") is not None:
        entries["jax/jit"]["compile_s"] = jax_record["compile_s"]  # compiled ahead of time, before its first call
    for name, (step, reset) in trainers.items():
        if entries[name].get("error"):
            continue
        try:
            reset()
            losses[name] = [float(step(Xt[i], yt[i])) for i in range(len(X))]
        except Exception as error:  # noqa: BLE001
            entries[name] = ladders.ladder_entry(error=error)
    if "torch/compile" in entries:
        entries["torch/compile"].update(breaks)
    return {"torch_device": str(torch_device), "jax_device": str(jax_device), "entries": entries, "losses": losses}


def gpu_plan(torch_gpus: int, jax_gpus: int, device: str = "GPU") -> dict[str, Any]:
    """What the gpu profile runs with ``torch_gpus`` and ``jax_gpus`` visible (``device``: the GPU's
    name): ``reference`` (run the one-device reference on the GPU too: both frameworks see one),
    ``gpus`` (the count both see), ``scaling`` (the GPU counts of the strong-scaling runs,
    :func:`.launch.scaling_counts`, with two or more GPUs; [] otherwise) and ``note``, the post's
    sentence on GPUs and scaling. The strategies' memory, collectives and verdicts come from the
    simulated CPU devices in every case."""
    gpus = min(torch_gpus, jax_gpus)
    scaling = scaling_counts(gpus) if gpus >= 2 else []
    if gpus == 0:
        note = ("No GPU is visible to both frameworks here, so everything ran on the CPU and scaling was not "
                "measured.")
    elif gpus == 1:
        note = ("This machine has one GPU: the one-device reference ran on it as well, and scaling was not "
                "measured (the strategies ran on simulated CPU devices).")
    else:
        counts = ", ".join(map(str, scaling[:-1])) + f" and {scaling[-1]}"
        note = (f"This machine has {gpus} GPUs ({device}): the one-device reference ran on one of them, and every "
                f"strategy of both frameworks also ran on {counts} of them with the same global batch to measure "
                "its scaling (PyTorch over NCCL, one torchrun worker per GPU; JAX in one process driving them all). "
                "The memory, collectives and verdicts come from the simulated CPU devices.")
    return {"reference": gpus >= 1, "gpus": gpus, "scaling": scaling, "note": note}
