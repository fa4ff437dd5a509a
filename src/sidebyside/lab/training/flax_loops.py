"""The JAX side of :mod:`sidebyside.lab.training`: :class:`FlaxTrainer` (Flax NNX and optax) and its
loop styles (``loop=``, below), :func:`train_flax`, prediction and accuracy.

Loop styles (``loop=``)
- JAX: ``"scan"`` (default: data on the device, a whole epoch in one jitted
  ``lax.scan``), ``"device"`` (data on the device, one jitted step per batch
  that gathers its batch there; the batch indices are sent once and a step
  counter stays on the device, so a step sends nothing from the host),
  ``"jit_step"`` (one jitted step per batch, NumPy batches fed from the host,
  what most tutorials write).
  Whether a convolution runs slower inside ``lax.scan`` than jitted alone
  depends on the backend: fashion-mnist's notebook measures it on its device.
"""

from __future__ import annotations

import time
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

__all__ = ["FLAX_LOOPS", "FlaxTrainer", "train_flax", "predict_flax", "evaluate_flax"]

FLAX_LOOPS = ("jit_step", "device", "scan")


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
        self.arrays = as_arrays(data)
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
    arrays = trainer.arrays
    epochs(trainer.run_epoch, history, config.num_epochs, desc=f"Flax ({loop})", progress=progress,
           after_epoch=trainer.sync,
           evaluate=(lambda: evaluate_flax(model, arrays.X_test, arrays.y_test)) if evaluate else None,
           on_epoch_end=(lambda epoch: on_epoch_end(epoch, model)) if on_epoch_end else None)
    history.compile_seconds = trainer.compile_seconds
    return model, history
