"""Training both models for accuracy: the same schedule and batches on both sides, with the optimiser
and training step that the caller passes."""


from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from sidebyside.lab import training as sbs_training
from sidebyside.posts.swin_v2.config import SwinConfig
from sidebyside.posts.swin_v2.model import FlaxSwinV2

__all__ = ['fashion_inputs', 'predict_torch', 'predict_flax', 'train_torch', 'train_flax']


def fashion_inputs(X: np.ndarray, config: SwinConfig) -> np.ndarray:
    """Normalised FashionMNIST ``(N, 28, 28)`` -> NCHW ``(N, in_chans, S, S)`` float32:
    zero-padded (after normalisation, so the border is the mean) to ``img_size``,
    centred, and repeated over the channels. Transpose to NHWC for Flax."""
    size = config.img_size
    if size < X.shape[-1]:
        raise ValueError(f"img_size {size} is smaller than the {X.shape[-1]}-pixel images; pad, do not crop")
    before = (size - X.shape[-1]) // 2
    after = size - X.shape[-1] - before
    padded = np.pad(X, ((0, 0), (before, after), (before, after)))
    return np.repeat(padded[:, None], config.in_chans, axis=1).astype(np.float32)


def predict_torch(model, X: np.ndarray, *, batch_size: int = 256) -> np.ndarray:
    """Classes predicted by timm's model (eval mode) for NCHW ``X``."""
    import torch

    device = next(model.parameters()).device
    model.eval()
    with torch.no_grad():
        out = [model(torch.as_tensor(X[i:i + batch_size], device=device)).argmax(1).cpu().numpy()
               for i in range(0, len(X), batch_size)]
    return np.concatenate(out)


_PREDICT_CACHE: dict = {}


def predict_flax(model: FlaxSwinV2, X: np.ndarray, *, batch_size: int = 256) -> np.ndarray:
    """Classes predicted by the port (eval mode) for NCHW ``X`` (transposed here)."""
    model.eval()
    graphdef, state = nnx.split(model)
    fn = _PREDICT_CACHE.get(graphdef)
    if fn is None:  # one compiled program per network, not one per call (e.g. per epoch)
        fn = _PREDICT_CACHE[graphdef] = jax.jit(lambda state, x: jnp.argmax(nnx.merge(graphdef, state)(x), axis=-1))
    return np.concatenate([np.asarray(fn(state, jnp.asarray(X[i:i + batch_size].transpose(0, 2, 3, 1))))
                           for i in range(0, len(X), batch_size)])


def train_torch(model, X: np.ndarray, y: np.ndarray, X_test: np.ndarray, y_test: np.ndarray,
                config: sbs_training.TrainConfig, *, optimizer: Callable[..., Any], train_step: Callable[..., Any],
                progress: bool | str = False) -> sbs_training.History:
    """Train timm's model in place with ``training.learning_rate``, batches from
    ``training.index_batches`` (the same as :func:`train_flax`), data on the model's device.
    ``X``: NCHW float32. Returns a History (test accuracy after every epoch).

    ``optimizer(model, lr, weight_decay)`` builds the optimiser and ``train_step(model, optimizer)``
    the step ``(x, y) -> detached loss``: the post's notebook passes the ones its paired cells
    write. The learning rate of each step is set here, in every parameter group."""
    import torch

    device = next(model.parameters()).device
    torch.manual_seed(config.seed)  # stochastic depth draws
    opt = optimizer(model, config.lr, config.weight_decay)
    step_fn = train_step(model, opt)
    Xd, yd = torch.as_tensor(X, device=device), torch.as_tensor(y, device=device)
    steps = config.steps_per_epoch(len(X))
    history = sbs_training.History("torch", "eager")
    step = 0

    def run_epoch(epoch: int) -> float:
        nonlocal step
        model.train()
        total = torch.zeros((), device=device)
        for index in torch.as_tensor(sbs_training.index_batches(len(X), config, epoch), device=device):
            for group in opt.param_groups:
                group["lr"] = float(sbs_training.learning_rate(step, config, steps))
            total += step_fn(Xd[index], yd[index])
            step += 1
        return float(total) / max(steps, 1)

    sbs_training.epochs(run_epoch, history, config.num_epochs, desc="PyTorch Swin V2", progress=progress,
                        evaluate=lambda: float(np.mean(predict_torch(model, X_test) == y_test)))
    return history


#: Compiled training steps, one per distinct program (see :func:`train_flax`).
_STEP_CACHE: dict = {}


def _compile_step(graphdef, tx, params, opt_state, rest, Xd, yd, batch_size: int, train_step):
    """The training step of :func:`train_flax`, lowered and compiled ahead of time (one XLA program)."""
    step = train_step(graphdef, tx)

    def device_step(params, opt_state, rest, X, y, index):
        return step(params, opt_state, rest, X[index], y[index])

    index0 = jax.ShapeDtypeStruct((batch_size,), jnp.int32)
    return jax.jit(device_step, donate_argnums=(0, 1, 2)).lower(params, opt_state, rest, Xd, yd, index0).compile()


def train_flax(model: FlaxSwinV2, X: np.ndarray, y: np.ndarray, X_test: np.ndarray, y_test: np.ndarray,
               config: sbs_training.TrainConfig, *, optimizer: Callable[..., Any], train_step: Callable[..., Any],
               progress: bool | str = False) -> sbs_training.History:
    """Train the port in place with the same schedule and batches as :func:`train_torch`, one
    jitted step per batch, data on the device. ``X``: NCHW float32 (transposed to NHWC once).

    ``optimizer(params, schedule, weight_decay)`` builds the optax transformation (``schedule``
    maps the step count to ``training.learning_rate``) and ``train_step(graphdef, tx)`` the pure
    step ``(params, opt_state, rest, x, y) -> (params, opt_state, rest, loss)``: the post's
    notebook passes the ones its paired cells write.

    The step is compiled once per distinct program and reused: runs that differ only in
    ``config.seed`` (and the model's initial values) run the same program, since the seed
    enters through the arguments (weights, the dropout streams' state, the batch indices),
    never through the program. ``History.compile_seconds``: the step's compilation, timed
    cold in the run that compiled it; 0.0 in a run that reused it (its epochs are then
    timed alike, compilation apart in both)."""
    model.train()
    graphdef, params, rest = nnx.split(model, nnx.Param, ...)
    steps = config.steps_per_epoch(len(X))
    tx = optimizer(params, lambda count: sbs_training.learning_rate(count, config, steps, xp=jnp), config.weight_decay)
    opt_state = tx.init(params)
    Xd, yd = jnp.asarray(X.transpose(0, 2, 3, 1)), jnp.asarray(y.astype(np.int32))
    history = sbs_training.History("flax", "jit")
    key = (graphdef, dataclasses.replace(config, seed=0), Xd.shape, str(Xd.dtype), yd.shape, jax.default_backend(),
           optimizer, train_step)
    compiled = _STEP_CACHE.get(key)
    if compiled is None:
        start = time.perf_counter()
        compiled = _STEP_CACHE[key] = _compile_step(graphdef, tx, params, opt_state, rest, Xd, yd, config.batch_size,
                                                        train_step)
        history.compile_seconds = time.perf_counter() - start
    state = {"params": params, "opt_state": opt_state, "rest": rest}

    def run_epoch(epoch: int) -> float:
        losses = []
        for index in jnp.asarray(sbs_training.index_batches(len(X), config, epoch).astype(np.int32)):
            state["params"], state["opt_state"], state["rest"], loss = compiled(
                state["params"], state["opt_state"], state["rest"], Xd, yd, index)
            losses.append(loss)
        return float(jnp.stack(losses).mean()) if losses else float("nan")

    def after_epoch() -> None:
        nnx.update(model, state["params"], state["rest"])
        # Copies: the next (donating) step must not free the arrays the model now holds.
        _, state["params"], state["rest"] = jax.tree_util.tree_map(lambda a: a.copy(), nnx.split(model, nnx.Param, ...))

    def evaluate() -> float:
        accuracy = float(np.mean(predict_flax(model, X_test) == y_test))
        model.train()
        return accuracy

    sbs_training.epochs(run_epoch, history, config.num_epochs, desc="Flax Swin V2", progress=progress,
                        after_epoch=after_epoch, evaluate=evaluate)
    return history
