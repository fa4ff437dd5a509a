"""JAX's strategies, run in a child process that sees ``num_devices`` devices (``python -m
sidebyside.posts.parallel_training.jax_parallel <spec.json>``; :mod:`.launch` starts it with
simulated CPU devices set in ``XLA_FLAGS`` before JAX starts, or on the machine's GPUs with
``device`` "gpu"). :func:`pick_devices` chooses the first ``num_devices`` of the spec's kind.

The step is one pure function of the Flax NNX parameters, the optax SGD-with-momentum state and a
global batch, jitted with the state it replaces donated. Each strategy is one function, what it
adds to the one-device step (the notebook shows and counts its lines):

- :func:`one_device`: everything on the first device.
- :func:`data_parallel`: a ``('data',)`` mesh; parameters replicated, the batch split.
- :func:`fully_sharded`: FSDP under ``shard_map``: parameters and optimiser state split over
  ``data``, gathered by the loss; their gradients reduce-scattered (autodiff's transpose).
- :func:`tensor_parallel`: a ``('data', 'model')`` mesh; ``q``/``k``/``v``/``fc1`` split by
  columns and ``proj``/``fc2`` by rows over ``model`` (Megatron's layout), the batch over ``data``.
- :func:`manual`: ``jax.shard_map`` over ``data`` with an explicit ``lax.pmean`` of the gradients.

The layouts of the others are ``NamedSharding`` specs, XLA placing their collectives;
:func:`comms.parse_hlo` reads every strategy's from the compiled program. The child writes
``result.json`` (per strategy: losses, the step time from one interleaved
:func:`sidebyside.lab.timing.compare`, compile time, bytes per device of parameters, gradients and
optimiser state between steps from the arrays' ``addressable_shards``, the peak within a step
(:func:`peak_bytes`), collectives; a multi-process run is not timed) and ``<strategy>.npz``
(final parameters, PyTorch's names and layouts); a failure writes ``error.json``.
"""

from __future__ import annotations

import json
import math
import sys
import time
import traceback
from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path
from typing import Any

import jax
import numpy as np
import optax
from flax import nnx
from jax.experimental import multihost_utils
from jax.sharding import AxisType, NamedSharding
from jax.sharding import PartitionSpec as P

from sidebyside.lab import ladders, timing
from sidebyside.posts.parallel_training import comms
from sidebyside.posts.parallel_training.launch import LaunchError, device_kind
from sidebyside.posts.parallel_training.model import ViTConfig, flax_from_torch

__all__ = ["STRATEGIES", "one_device", "data_parallel", "fully_sharded", "tensor_parallel", "manual",
           "pick_devices", "bytes_per_device", "peak_bytes", "main"]

COLUMNS, ROWS = ("q", "k", "v", "fc1"), ("proj", "fc2")


def _path(path) -> tuple[str, ...]:
    """A pytree path as names: ``('blocks', '0', 'attn', 'q', 'kernel')`` (NNX's ``.value`` dropped)."""
    names = (getattr(k, "key", getattr(k, "idx", getattr(k, "name", k))) for k in path)
    return tuple(str(n) for n in names if n != "value")


# ----------------------------------------------------------------------------- the strategies


def one_device(mesh, params):
    """The reference: every array whole (on a one-device mesh)."""
    return jax.tree.map(lambda _: P(), params), P()


def data_parallel(mesh, params):
    """Parameters replicated, the batch split over ``data``: XLA all-reduces the gradients."""
    return jax.tree.map(lambda _: P(), params), P("data")


def fully_sharded(mesh, params, loss_fn, tx):
    """FSDP, the step written per device: parameters and optimiser state split over ``data`` (each
    along its first axis the device count divides; replicated when none does), gathered whole by the
    loss (``all_gather``); autodiff turns that gather into a ``psum_scatter`` of the gradients (a
    reduce-scatter), so each device reduces and keeps its own shard, never the full gradient."""
    n = mesh.shape["data"]

    def spec(x):
        axis = next((i for i, size in enumerate(x.shape) if size % n == 0), None)
        return P() if axis is None else P(*[None] * axis, "data")
    specs = jax.tree.map(spec, params)
    opt_specs = optax.tree_map_params(tx, lambda _, s: s, jax.eval_shape(tx.init, params), specs,
                                      transform_non_params=lambda _: P())

    def gathered(shards):
        return jax.tree.map(lambda x, s: jax.lax.all_gather(x, "data", axis=s.index("data"),
                                                            tiled=True) if "data" in s else x,
                            shards, specs)

    @partial(jax.jit, donate_argnums=(0, 1))
    @partial(jax.shard_map, mesh=mesh, in_specs=(specs, opt_specs, P("data"), P("data")),
             out_specs=(specs, opt_specs, P()))
    def step(params, opt_state, X, y):
        loss, grads = jax.value_and_grad(lambda p: loss_fn(gathered(p), X, y))(params)
        grads = jax.tree.map(lambda g: g / n, grads)  # summed over devices: the mean of their means
        updates, opt_state = tx.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), opt_state, jax.lax.pmean(loss, "data")
    return specs, step


def tensor_parallel(mesh, params):
    """Megatron-style specs over ``model``, the batch over ``data``; XLA places the collectives."""
    def spec(path, x):
        layer, leaf = (("",) + _path(path))[-2:]
        if layer in COLUMNS:
            return P(None, "model") if leaf == "kernel" else P("model")
        if layer in ROWS and leaf == "kernel":
            return P("model", None)
        return P()
    return jax.tree_util.tree_map_with_path(spec, params), P("data")


def manual(mesh, loss_fn, tx):
    """The step written per device with ``shard_map``; its one collective, ``pmean``, spelled out."""
    @partial(jax.jit, donate_argnums=(0, 1))
    # check_vma=False: gradients stay per device until the pmean below (with the check on, JAX would
    # already sum the gradients of the replicated parameters in the backward pass).
    @partial(jax.shard_map, mesh=mesh, in_specs=(P(), P(), P("data"), P("data")), out_specs=P(), check_vma=False)
    def step(params, opt_state, X, y):
        loss, grads = jax.value_and_grad(loss_fn)(params, X, y)
        grads, loss = jax.lax.pmean((grads, loss), "data")
        updates, opt_state = tx.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), opt_state, loss
    return step


STRATEGIES = {"one_device": one_device, "data_parallel": data_parallel, "fully_sharded": fully_sharded,
              "tensor_parallel": tensor_parallel, "manual": manual}


# ----------------------------------------------------------------------------- devices


def pick_devices(devices: Sequence[Any], kind: str, num_devices: int) -> list[Any]:
    """The first ``num_devices`` of ``devices`` (JAX devices, in JAX's order) on the platform of
    ``kind`` ("cpu": the simulated CPU devices; "gpu" or "cuda": the GPUs); LaunchError, saying how
    many there are, when there are fewer."""
    platform = device_kind(kind)
    found = [d for d in devices if d.platform == platform]
    if len(found) < num_devices:
        raise LaunchError(f"a mesh of {num_devices} devices is larger than the {len(found)} JAX {platform} devices "
                          f"available; ask for at most {len(found)}")
    return found[:num_devices]


# ----------------------------------------------------------------------------- measuring


def bytes_per_device(tree) -> int:
    """The most bytes of ``tree``'s arrays that any one device holds, summed from each array's
    ``addressable_shards`` (a replicated array counts whole on every device); a
    ``jax.ShapeDtypeStruct`` with a sharding (a program's output, not computed) counts the slices its
    sharding gives this process's devices."""
    held: dict = {}
    for leaf in jax.tree.leaves(tree):
        if isinstance(leaf, jax.ShapeDtypeStruct):
            for device, index in leaf.sharding.addressable_devices_indices_map(leaf.shape).items():
                size = math.prod(len(range(*i.indices(n))) for i, n in zip(index, leaf.shape))
                held[device] = held.get(device, 0) + size * leaf.dtype.itemsize
            continue
        for shard in leaf.addressable_shards:
            held[shard.device] = held.get(shard.device, 0) + shard.data.nbytes
    return int(max(held.values(), default=0))


def peak_bytes(compiled) -> dict[str, int] | None:
    """The memory one device needs within a step, from XLA's analysis of the compiled program
    (``compiled.memory_analysis()``): its ``argument``, ``output``, ``alias`` (outputs written
    into donated arguments) and ``temp`` bytes, and ``bytes``, their peak: arguments + outputs -
    aliased + temporaries. None where the backend gives no analysis."""
    stats = compiled.memory_analysis()
    if stats is None:
        return None
    out = {"argument": int(stats.argument_size_in_bytes), "output": int(stats.output_size_in_bytes),
           "alias": int(stats.alias_size_in_bytes), "temp": int(stats.temp_size_in_bytes)}
    out["bytes"] = out["argument"] + out["output"] - out["alias"] + out["temp"]
    return out


def _put(tree, shardings):
    """NumPy (or JAX) arrays laid out by ``shardings``: every process holds the whole value and
    gives each of its devices its slice, so this works with one process or several."""
    def put(x, sharding):
        host = np.asarray(x)
        return jax.make_array_from_callback(host.shape, sharding, lambda index: host[index])
    return jax.tree.map(put, tree, shardings)


def _gather(x) -> np.ndarray:
    """The whole value of ``x`` on this process (a collective when other processes hold parts)."""
    if x.is_fully_addressable:
        return np.asarray(x)
    return np.asarray(multihost_utils.process_allgather(x, tiled=True))


def _torch_names(params) -> dict[str, np.ndarray]:
    """Flax parameters under PyTorch's names and layouts (kernels transposed, scale -> weight)."""
    out = {}
    for path, value in jax.tree_util.tree_leaves_with_path(params):
        parts, value = list(_path(path)), _gather(value)
        if parts[-1] == "kernel":
            parts[-1], value = "weight", value.T
        elif parts[-1] == "scale":
            parts[-1] = "weight"
        out[".".join(parts)] = value
    return out


def train(strategy: str, spec: dict, X: np.ndarray, y: np.ndarray, init: dict,
          devices: Sequence[jax.Device] | None = None) -> tuple[dict, dict, Callable[[], Any]]:
    """Train one strategy over every step from ``init`` (PyTorch's state dict as NumPy arrays) on
    the first devices of ``devices`` (default: every JAX device; the one-device reference on a
    chosen device passes ``[device]``). Returns its record, its final parameters, and one
    compiled step on the first batch, to be timed with :mod:`sidebyside.lab.timing`: each call
    continues from the state the last returned (the step donates the state it replaces)."""
    config = ViTConfig(**spec["config"])
    flax_model = flax_from_torch(config, init)
    graphdef, params = nnx.split(flax_model, nnx.Param)
    # the notebook's jax_optimizer
    tx = optax.sgd(spec["lr"], momentum=spec["momentum"], nesterov=False)

    def loss_fn(params, X, y):
        logits = nnx.merge(graphdef, params)(X)
        return optax.softmax_cross_entropy_with_integer_labels(logits, y).mean()

    def step(params, opt_state, X, y):
        loss, grads = jax.value_and_grad(loss_fn)(params, X, y)
        updates, opt_state = tx.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), opt_state, loss

    n, mp = spec["num_devices"], spec["model_parallel"]
    devices = list(devices or jax.devices())
    shape, names = {"one_device": ((1,), ("data",)), "tensor_parallel": ((n // mp, mp), ("data", "model"))}.get(
        strategy, ((n,), ("data",)))
    # Auto axes: XLA's sharding propagation places the collectives (JAX's default is now Explicit).
    mesh = jax.make_mesh(shape, names, axis_types=(AxisType.Auto,) * len(names), devices=devices[:math.prod(shape)])
    jitted = None
    if strategy == "manual":
        param_specs, batch_spec = jax.tree.map(lambda _: P(), params), P("data")
        jitted = manual(mesh, loss_fn, tx)
    elif strategy == "fully_sharded":
        (param_specs, jitted), batch_spec = fully_sharded(mesh, params, loss_fn, tx), P("data")
    else:
        param_specs, batch_spec = STRATEGIES[strategy](mesh, params)
    param_sh = jax.tree.map(lambda s: NamedSharding(mesh, s), param_specs)
    params = _put(params, param_sh)
    opt_sh = optax.tree_map_params(tx, lambda _, s: s, jax.eval_shape(tx.init, params), param_sh,
                                   transform_non_params=lambda _: NamedSharding(mesh, P()))
    opt_state = jax.jit(tx.init, out_shardings=opt_sh)(params)
    batch_sh = NamedSharding(mesh, batch_spec)
    if jitted is None:  # the state it replaces is donated, as PyTorch updates its own in place
        jitted = jax.jit(step, out_shardings=(param_sh, opt_sh, NamedSharding(mesh, P())),
                         donate_argnums=(0, 1))
    Xd, yd = _put(X[0], batch_sh), _put(y[0], batch_sh)
    start = time.perf_counter()
    compiled = jitted.lower(params, opt_state, Xd, yd).compile()
    compile_s = time.perf_counter() - start
    collectives = comms.parse_hlo(compiled.as_text())
    peak = peak_bytes(compiled)
    # The gradients as jax.grad's program lays them out (as the parameters), lowered, not compiled: the
    # shards its arrays would hold, without a second compilation of the backward pass.
    grads = jax.jit(jax.grad(loss_fn), out_shardings=param_sh).lower(params, Xd, yd).out_info
    memory = {"params": bytes_per_device(params), "grads": bytes_per_device(grads),
              "optimizer": bytes_per_device(opt_state)}
    losses = []
    for i in range(X.shape[0]):
        Xd, yd = _put(X[i], batch_sh), _put(y[i], batch_sh)
        params, opt_state, loss = compiled(params, opt_state, Xd, yd)
        losses.append(float(loss.addressable_data(0)))  # replicated: any local copy
    record = {"losses": losses, "compile_s": compile_s, "memory": memory, "peak": peak,
              "collectives": [c.__dict__ for c in collectives], "mesh": dict(mesh.shape)}
    state, first = [params, opt_state], (_put(X[0], batch_sh), _put(y[0], batch_sh))

    def timed():  # each call donates the state and keeps the state it returns
        state[0], state[1], loss = compiled(state[0], state[1], *first)
        return state[0], state[1], loss
    return record, _torch_names(params), timed


def main(spec_path: str, process_id: int = 0) -> None:
    """Run the strategies the JSON spec at ``spec_path`` names (see the module docstring). With
    ``num_processes`` in the spec, this is process ``process_id`` of a multi-process run: JAX's
    multi-host path (``jax.distributed.initialize``; gloo collectives between CPU processes), the
    same code a run over several hosts uses; process 0 writes the results."""
    spec = json.loads(Path(spec_path).read_text())
    out = Path(spec["out"])
    first = process_id == 0
    try:
        if spec.get("num_processes"):
            jax.config.update("jax_cpu_collectives_implementation", "gloo")
            jax.distributed.initialize(coordinator_address=spec["coordinator"], num_processes=spec["num_processes"],
                                       process_id=process_id)
        kind = device_kind(spec.get("device", "cpu"))
        if kind == "gpu":  # float32 as on the CPU and in the one-device reference: no TF32
            jax.config.update("jax_default_matmul_precision", "highest")
        try:
            devices = pick_devices(jax.devices(), kind, spec["num_devices"])
        except LaunchError as error:
            (out / "error.json").write_text(json.dumps({"launch": True, "error": str(error)}))
            sys.exit(2)
        batches = np.load(spec["batches"])
        init = dict(np.load(spec["init_npz"]))  # PyTorch's state dict as arrays: no PyTorch in this process
        records, steps = {}, {}
        for strategy in spec["strategies"]:
            records[strategy], params, steps[strategy] = train(strategy, spec, batches["X"], batches["y"], init,
                                                               devices)
            if first:
                np.savez(out / f"{strategy}.npz", **params)
        # A multi-process run is not timed: each process would choose its own calls per repeat, and
        # the processes' collectives would not pair up.
        if not spec.get("num_processes"):
            # Timed in this worker alone (its device mesh is this process's): the strategies' times
            # are shown beside each other, and no speed verdict is drawn from them.
            timings = timing.compare(steps, repeats=spec["repeats"], min_repeat_s=spec["min_repeat_s"], processes=1)
            for strategy, t in timings.items():
                records[strategy]["time"] = ladders.ladder_entry(t)
        if not first:
            return
        (out / "result.json").write_text(json.dumps({
            "strategies": records, "devices": [str(d) for d in devices],
            "platform": devices[0].platform, "processes": jax.process_count()}))
    except Exception as error:
        (out / ("error.json" if first else f"error{process_id}.json")).write_text(json.dumps({
            "error": f"{type(error).__name__}: {error}", "traceback": traceback.format_exc()}))
        raise


if __name__ == "__main__":
    main(sys.argv[1], *(int(a) for a in sys.argv[2:3]))
