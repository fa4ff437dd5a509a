"""PyTorch's strategies, run by each ``torchrun`` worker (``python -m torch.distributed.run ... -m
sidebyside.posts.parallel_training.torch_parallel <spec.json>``; :mod:`.launch` starts it).

Each strategy is one function that takes the one-device model and the device mesh and returns the
model to train and a hook to call between ``backward()`` and the optimiser step; the lines of these
functions are what a strategy adds to the one-device step (the notebook shows and counts them):

- :func:`one_device`: the reference, on rank 0 alone, no collective.
- :func:`data_parallel`: ``DistributedDataParallel``.
- :func:`fully_sharded`: FSDP2 ``fully_shard`` on each block, then the root, over a 1-D ``DeviceMesh``,
  with FSDP2's default ``reshard_after_forward=True`` written out: each block's parameters are freed
  after its forward and gathered again for its backward.
- :func:`fully_sharded_kept`: the same with ``reshard_after_forward=False``: each block's gathered
  parameters are kept from its forward to its backward (one all-gather a step, more memory during
  it). PyTorch only: JAX's fully sharded program is raced against both (:data:`.names.COUNTERPART`).
- :func:`tensor_parallel`: a 2-D ``('data', 'model')`` ``DeviceMesh``; DTensor ``parallelize_module``
  splits ``q``/``k``/``v``/``fc1`` by columns and ``proj``/``fc2`` by rows over ``model``
  (Megatron's layout), and gradients are averaged over ``data`` with ``all_reduce``.
- :func:`manual`: replicated parameters and one ``all_reduce`` per gradient.

The worker reads a JSON spec (strategies, model config, paths of the batches and the initial
weights, ``model_parallel``, ``out``, ``device`` ("cpu" or "gpu", placed by
:func:`.launch.torch_placement`: gloo on the CPU; NCCL, ``torch.cuda.set_device`` and the model
and batches on ``cuda:<LOCAL_RANK>`` on GPUs, with TF32 off), and ``repeats`` and ``number`` for
the timing), trains every strategy on the same global batches (each data rank takes its
contiguous slice), and writes ``rank<r>.json`` with its ``device`` and, per strategy, the loss per
step, the step time (:func:`sidebyside.lab.timing.time_fn` in this worker, after the loss curve:
``number`` calls per repeat on every rank, so that the ranks' collectives pair up; a
:func:`sidebyside.lab.ladders.ladder_entry`), the bytes of parameters, gradients and optimiser
state this rank holds (local tensors of DTensors), ``peak_bytes`` (the peak within the last step,
``torch.cuda.max_memory_allocated``, on a GPU; None on the CPU) and the collectives of one step
(:class:`CollectiveLog`, each with its process group's size); rank 0 also writes the final full
parameters to ``<strategy>.npz``. A failing rank writes ``rank<r>.error.json`` (its error and
traceback) and exits non-zero, which stops ``torchrun``.
"""

from __future__ import annotations

import dataclasses
import json
import os
import sys
import traceback
from pathlib import Path

import numpy as np
import torch
import torch.distributed as dist
from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import fully_shard
from torch.distributed.tensor import DTensor
from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module
from torch.nn.parallel import DistributedDataParallel
from torch.utils import _pytree as pytree
from torch.utils._python_dispatch import TorchDispatchMode

from sidebyside.lab import ladders, timing
from sidebyside.posts.parallel_training import comms
from sidebyside.posts.parallel_training.launch import torch_placement
from sidebyside.posts.parallel_training.model import TorchViT, ViTConfig

__all__ = ["STRATEGIES", "one_device", "data_parallel", "fully_sharded", "fully_sharded_kept", "tensor_parallel", "manual",
           "sgd", "make_step", "memory", "CollectiveLog", "main"]


def _no_hook(model):
    pass


def _device_ids(mesh):
    """DDP's ``device_ids``: None on the CPU, this worker's GPU on a CUDA mesh."""
    return None if mesh.device_type == "cpu" else [torch.cuda.current_device()]


# ----------------------------------------------------------------------------- the strategies


def one_device(model, mesh):
    """The reference: the model as it is, no hook."""
    return model, _no_hook


def data_parallel(model, mesh):
    """DDP: a full replica per rank; gradients all-reduced in buckets during backward()."""
    return DistributedDataParallel(model, process_group=mesh.get_group(), device_ids=_device_ids(mesh)), _no_hook


def fully_sharded(model, mesh, reshard_after_forward=True):
    """FSDP2: parameters, gradients and optimiser state split over ``mesh``, gathered per block when used;
    reshard_after_forward=True (FSDP2's default): freed after the forward, gathered again for the backward."""
    for block in model.blocks:
        fully_shard(block, mesh=mesh, reshard_after_forward=reshard_after_forward)
    return fully_shard(model, mesh=mesh, reshard_after_forward=reshard_after_forward), _no_hook


def fully_sharded_kept(model, mesh):
    """FSDP2 with reshard_after_forward=False: each block's gathered parameters kept from forward to backward."""
    return fully_sharded(model, mesh, reshard_after_forward=False)


def tensor_parallel(model, mesh):
    """Megatron-style tensor parallelism over ``mesh["model"]``, gradients averaged over ``mesh["data"]``."""
    plan = {"attn.q": ColwiseParallel(), "attn.k": ColwiseParallel(), "attn.v": ColwiseParallel(),
            "attn.proj": RowwiseParallel(), "mlp.fc1": ColwiseParallel(), "mlp.fc2": RowwiseParallel()}
    for block in model.blocks:
        parallelize_module(block, mesh["model"], plan)
    data = mesh["data"].get_group()

    def average_over_data(model):
        if dist.get_world_size(data) == 1:
            return
        for p in model.parameters():
            grad = p.grad.to_local() if isinstance(p.grad, DTensor) else p.grad
            dist.all_reduce(grad, group=data)
            grad /= dist.get_world_size(data)
    return model, average_over_data


def manual(model, mesh):
    """Replicas, and one all_reduce per gradient written out: the average DDP computes."""
    def average(model):
        for p in model.parameters():
            dist.all_reduce(p.grad)
            p.grad /= dist.get_world_size()
    return model, average


STRATEGIES = {"one_device": one_device, "data_parallel": data_parallel, "fully_sharded": fully_sharded,
              "fully_sharded_kept": fully_sharded_kept, "tensor_parallel": tensor_parallel, "manual": manual}


def sgd(parameters, lr, momentum):
    """SGD with momentum, the options written out as on JAX's side (no dampening, no Nesterov, no
    weight decay); foreach=True: PyTorch's multi-tensor update, its default on GPUs (on the CPU its
    default is one update per parameter). DTensors and plain tensors go in separate parameter
    groups, the same options in each: one multi-tensor update takes one kind (tensor parallelism
    mixes them). The notebook's ``torch_optimizer`` cell has the same options."""
    params = list(parameters)
    kinds = ([p for p in params if isinstance(p, DTensor)],
             [p for p in params if not isinstance(p, DTensor)])
    return torch.optim.SGD([{"params": group} for group in kinds if group], lr=lr,
                           momentum=momentum, dampening=0, nesterov=False, weight_decay=0,
                           foreach=True)


def make_step(model, optimizer, after_backward=_no_hook):
    """The training step every strategy runs: ``step(xb, yb, inspect=None)`` computes the
    cross-entropy of ``model(xb)``, back-propagates, calls ``after_backward(model)`` (a strategy's
    hook), then ``inspect()`` when given (the worker reads the memory held there, gradients and
    optimiser state both alive), the optimiser step and ``zero_grad``; returns the detached loss.
    The one-device reference compiles this same function (:mod:`.reference`)."""
    def step(xb, yb, inspect=None):
        loss = torch.nn.functional.cross_entropy(model(xb), yb)
        loss.backward()
        after_backward(model)
        if inspect is not None:
            inspect()
        optimizer.step()
        optimizer.zero_grad()
        return loss.detach()
    return step


# ----------------------------------------------------------------------------- measuring


def _local(t) -> torch.Tensor:
    return t.to_local() if isinstance(t, DTensor) else t


def memory(model, optimizer) -> dict[str, int]:
    """Bytes this rank holds: ``params``, ``grads`` and ``optimizer`` state, from the local
    tensors (a DTensor counts its local shard only; FSDP2's padding counts, as it is held)."""
    def nbytes(tensors):
        return int(sum(_local(t).numel() * _local(t).element_size() for t in tensors if t is not None))
    params = list(model.parameters())
    state = [v for p in params for v in optimizer.state.get(p, {}).values() if torch.is_tensor(v)]
    return {"params": nbytes(params), "grads": nbytes(p.grad for p in params), "optimizer": nbytes(state)}


def _group_size(arguments) -> int | None:
    """The size of the process group among a c10d operator's ``arguments``: a ``ProcessGroup``
    (the c10d operators pass it boxed) or a registered group's name (the functional ones)."""
    for a in arguments:
        if isinstance(a, dist.ProcessGroup):
            return a.size()
        boxed = isinstance(a, torch.ScriptObject)
        if boxed and a._type().qualified_name().endswith("c10d.ProcessGroup"):
            return dist.ProcessGroup.unbox(a).size()
    for a in arguments:
        if isinstance(a, str):
            try:
                return dist.distributed_c10d._resolve_process_group(a).size()
            except (KeyError, RuntimeError, ValueError):
                continue
    return None


class CollectiveLog(TorchDispatchMode):
    """While active (``with log:``), records every collective dispatched from Python (FSDP2,
    DTensor, ``torch.distributed``) in ``log.found``; :meth:`watch` adds DDP's bucketed
    all-reduces, which its C++ reducer issues below the dispatcher, through a communication hook.
    Only the outermost call counts (an operator that calls another runs below the mode)."""

    def __init__(self):
        super().__init__()
        self.found: list[comms.Collective] = []
        self.active = False
        self.in_hook = False

    def __enter__(self):
        self.active = True
        return super().__enter__()

    def __exit__(self, *exc):
        self.active = False
        return super().__exit__(*exc)

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        leaves = pytree.tree_leaves((args, kwargs))
        sizes = [t.numel() * t.element_size() for t in leaves if torch.is_tensor(t)]
        found = comms.torch_collective(str(func._overloadpacket._qualified_op_name), sizes)
        if found is not None and not self.in_hook:
            self.found.append(dataclasses.replace(found, group=_group_size(leaves)))
        return func(*args, **(kwargs or {}))

    def watch(self, ddp: DistributedDataParallel) -> None:
        def hook(group, bucket):
            if self.active:
                buffer = bucket.buffer()
                nbytes = buffer.numel() * buffer.element_size()
                self.found.append(comms.Collective("all-reduce", nbytes, group.size()))
            self.in_hook = True  # the hook's own all_reduce is this one, whether the mode sees it or not
            try:
                return default_hooks.allreduce_hook(group, bucket)
            finally:
                self.in_hook = False
        ddp.register_comm_hook(ddp.process_group, hook)


def _full_params(model) -> dict[str, np.ndarray]:
    """Every parameter as a full NumPy array (DTensors gathered: a collective every rank must join)."""
    out = {}
    for name, p in model.named_parameters():
        full = p.full_tensor() if isinstance(p, DTensor) else p
        out[name.removeprefix("module.")] = full.detach().cpu().numpy()
    return out


def train(strategy: str, spec: dict, X: np.ndarray, y: np.ndarray, init: dict, mesh, device: str = "cpu") -> dict:
    """Train one strategy over every step on ``device`` (this worker's :class:`.launch.TorchPlacement`
    device); return this rank's record (see the module docstring)."""
    config = ViTConfig(**spec["config"])
    model = TorchViT(config)
    model.load_state_dict(init)
    model = model.to(device)
    model, after_backward = STRATEGIES[strategy](model, mesh)
    log = CollectiveLog()
    if isinstance(model, DistributedDataParallel):
        log.watch(model)
    optimizer = sgd(model.parameters(), lr=spec["lr"], momentum=spec["momentum"])
    if strategy == "one_device":
        data_rank, data_size, data_group = 0, 1, None
    elif strategy == "tensor_parallel":
        data_group = mesh["data"].get_group()
        data_rank, data_size = mesh["data"].get_local_rank(), mesh["data"].size()
    else:
        data_group, data_rank, data_size = mesh.get_group(), mesh.get_local_rank(), mesh.size()
    local = X.shape[1] // data_size
    one_step = make_step(model, optimizer, after_backward)
    losses, record = [], {}
    steps = X.shape[0]

    def batch(i):  # this data rank's slice of global batch i
        rows = slice(data_rank * local, (data_rank + 1) * local)
        return torch.from_numpy(X[i, rows]).to(device), torch.from_numpy(y[i, rows]).long().to(device)

    def read_memory():
        record["memory"] = memory(model, optimizer)

    cuda = str(device).startswith("cuda")
    for step in range(steps):
        last = step == steps - 1
        inspect = read_memory if last else None
        if last and cuda:  # the peak within the last step, on this rank's GPU
            torch.cuda.synchronize(device)
            torch.cuda.reset_peak_memory_stats(device)
        if step == min(1, steps - 1):
            with log:
                loss = one_step(*batch(step), inspect)
            record["collectives"] = [c.__dict__ for c in log.found]
        else:
            loss = one_step(*batch(step), inspect)
        if last:  # not measured on the CPU: PyTorch has no allocator statistics there
            record["peak_bytes"] = None
            if cuda:
                torch.cuda.synchronize(device)
                record["peak_bytes"] = int(torch.cuda.max_memory_allocated(device))
        if data_group is not None and data_size > 1:
            loss = loss.clone()
            dist.all_reduce(loss, group=data_group)
            loss /= data_size
        losses.append(float(loss))
    if "memory" not in record:
        raise ValueError("train() needs at least 2 steps: memory is read on the last, collectives on the second")
    record["losses"] = losses
    params = _full_params(model)
    if dist.get_rank() == 0:
        np.savez(Path(spec["out"]) / f"{strategy}.npz", **params)
    # Timed after the loss curve, on the first batch. Every rank calls the step equally often (a fixed
    # number of calls per repeat, never one each rank chooses), or the ranks' collectives would not pair.
    first = batch(0)
    record["time"] = ladders.ladder_entry(timing.time_fn(lambda: one_step(*first), name=strategy,
                                                         repeats=spec["repeats"], number=spec["number"]))
    return record


def main(spec_path: str) -> None:
    """Run the strategies the JSON spec at ``spec_path`` names (see the module docstring)."""
    spec = json.loads(Path(spec_path).read_text())
    out = Path(spec["out"])
    rank = int(os.environ.get("RANK", 0))
    try:
        place = torch_placement(spec.get("device", "cpu"), int(os.environ.get("LOCAL_RANK", 0)))
        torch.set_num_threads(spec.get("threads", 1))
        if place.cuda:
            torch.cuda.set_device(place.device)
            # float32 as on the CPU and in the one-device reference: no TF32 in cuBLAS or cuDNN
            torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = False
        dist.init_process_group(place.backend)
        world = dist.get_world_size()
        batches = np.load(spec["batches"])
        X, y = batches["X"], batches["y"]
        init = torch.load(spec["init"], weights_only=True)
        mp = spec["model_parallel"]
        meshes = {"1d": init_device_mesh(place.mesh, (world,), mesh_dim_names=("data",)),
                  "2d": init_device_mesh(place.mesh, (world // mp, mp), mesh_dim_names=("data", "model"))}
        records = {}
        for strategy in spec["strategies"]:
            if strategy == "one_device":
                if rank == 0:
                    records[strategy] = train(strategy, spec, X, y, init, None, place.device)
                dist.barrier()
                continue
            mesh = meshes["2d" if strategy == "tensor_parallel" else "1d"]
            records[strategy] = train(strategy, spec, X, y, init, mesh, place.device)
        (out / f"rank{rank}.json").write_text(json.dumps({"rank": rank, "world": world, "device": place.device,
                                                          "strategies": records}))
        dist.barrier()
    except BaseException as error:
        (out / f"rank{rank}.error.json").write_text(json.dumps({
            "rank": rank, "error": f"{type(error).__name__}: {error}", "traceback": traceback.format_exc()}))
        raise
    # Every rank's results are written and every rank is past the barrier: leave without the
    # interpreter's shutdown, where a still-joinable C++ thread of the distributed stack now and then
    # aborts the process ("terminate called without an active exception"), failing a finished run.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


if __name__ == "__main__":
    main(sys.argv[1])
