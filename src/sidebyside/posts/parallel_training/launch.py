"""Start each framework's distributed run in child processes, and gather what they report.

- :func:`plan`: the checks every run makes first (device counts, the batch and the model's
  dimensions against the mesh), with errors that say what to change.
- :func:`device_kind`, :func:`torch_placement`: the kind of device a run uses ("cpu" or "gpu"),
  and what it means for a PyTorch worker (gloo on the CPU; NCCL and ``cuda:<LOCAL_RANK>`` on GPUs).
- :func:`scaling_counts`, :func:`scaling_plan`: the device counts of a strong-scaling run over
  real GPUs (1, 2, 4, ... and every GPU), each with its model axis, checked before any run.
- :func:`run_torch`: ``torchrun`` (``python -m torch.distributed.run``) with ``num_devices``
  workers on gloo (NCCL on GPUs), running :mod:`.torch_parallel`; returns the ranks' records.
- :func:`run_jax_multiprocess`: JAX's multi-host path (``jax.distributed.initialize``) with several
  child processes of simulated devices, as a run over several hosts would be.
- :func:`run_jax`: one child Python with ``--xla_force_host_platform_device_count`` in its
  ``XLA_FLAGS`` before JAX starts (the calling kernel may have started JAX with one CPU device
  already), running :mod:`.jax_parallel`; on GPUs, one child that drives the first
  ``num_devices`` local GPUs; returns its record.

A child that fails raises :class:`WorkerError` naming the rank, its error and the tail of its log.
Every child runs in its own process group, killed whole when the run fails, times out or is
interrupted: no worker outlives the call.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from sidebyside.posts.parallel_training.model import ViTConfig
from sidebyside.run import context

__all__ = ["WorkerError", "LaunchError", "plan", "free_port", "check_port", "find_torchrun", "worker_env",
           "DEVICE_KINDS", "TorchPlacement", "device_kind", "torch_placement", "scaling_counts", "scaling_plan",
           "run_torch", "run_jax", "run_jax_multiprocess", "STRATEGIES", "TORCH_STRATEGIES"]

#: The strategies both frameworks run.
STRATEGIES = ("one_device", "data_parallel", "fully_sharded", "tensor_parallel", "manual")
#: PyTorch's: the same, and FSDP2 both ways, ``reshard_after_forward`` True (``fully_sharded``) and False
#: (``fully_sharded_kept``), each raced against JAX's one fully sharded program (:data:`.names.COUNTERPART`).
TORCH_STRATEGIES = ("one_device", "data_parallel", "fully_sharded", "fully_sharded_kept", "tensor_parallel", "manual")
#: The kinds of device a run uses: the CPU (simulated devices) or real GPUs.
DEVICE_KINDS = ("cpu", "gpu")


class LaunchError(RuntimeError):
    """A run that cannot start: a missing launcher, a port in use, too few devices."""


class WorkerError(RuntimeError):
    """A worker that failed: ``rank`` (None when the launcher itself failed), ``error``, ``log``."""

    def __init__(self, framework: str, rank: int | None, error: str, log: str):
        self.framework, self.rank, self.error, self.log = framework, rank, error, log
        who = f"rank {rank}" if rank is not None else "the launcher"
        super().__init__(f"{framework} worker failed ({who}): {error}\n--- last lines of its log ---\n{log}")


def plan(num_devices: int, *, batch_size: int, config: ViTConfig, model_parallel: int,
         available: int | None = None) -> dict[str, tuple[int, ...]]:
    """The meshes a run at ``num_devices`` uses: ``{"1d": (N,), "2d": (N // model_parallel, model_parallel)}``.

    Raises ValueError when ``num_devices`` or the data axis does not divide ``batch_size``, when
    ``model_parallel`` does not divide ``num_devices``, the heads or the MLP width; LaunchError when
    the mesh needs more than ``available`` devices (None: simulated devices, as many as asked)."""
    if num_devices < 1:
        raise ValueError(f"num_devices must be >= 1, got {num_devices}")
    if available is not None and num_devices > available:
        raise LaunchError(f"a mesh of {num_devices} devices is larger than the {available} devices available; "
                          f"ask for at most {available}")
    if batch_size % num_devices:
        raise ValueError(f"{num_devices} devices do not divide the global batch of {batch_size}: each device "
                         f"needs an equal slice; choose a batch size that is a multiple of {num_devices}")
    if num_devices % model_parallel:
        raise ValueError(f"the model axis ({model_parallel}) does not divide {num_devices} devices")
    config.check(model_parallel)
    return {"1d": (num_devices,), "2d": (num_devices // model_parallel, model_parallel)}


def device_kind(kind: str) -> str:
    """``kind`` as one of :data:`DEVICE_KINDS`: "cpu", or "gpu" (also spelled "cuda", PyTorch's name);
    ValueError for anything else."""
    found = {"cpu": "cpu", "gpu": "gpu", "cuda": "gpu"}.get(str(kind).lower())
    if found is None:
        raise ValueError(f"unknown device kind {kind!r}; choose 'cpu' (simulated devices) or 'gpu' (real GPUs)")
    return found


@dataclass(frozen=True)
class TorchPlacement:
    """Where a PyTorch worker runs: its process group ``backend``, the ``device`` of its tensors and
    model, and the ``mesh`` device type of its ``DeviceMesh``."""

    backend: str
    device: str
    mesh: str

    @property
    def cuda(self) -> bool:
        """Whether the worker owns a GPU (it calls ``torch.cuda.set_device`` on ``device``)."""
        return self.mesh == "cuda"


def torch_placement(kind: str, local_rank: int = 0) -> TorchPlacement:
    """The one place that maps a device kind to a PyTorch worker's placement: on the CPU, gloo and
    "cpu" for every rank; on GPUs, NCCL and ``cuda:<local_rank>`` (one GPU per worker)."""
    if local_rank < 0:
        raise ValueError(f"local_rank must be >= 0, got {local_rank}")
    if device_kind(kind) == "cpu":
        return TorchPlacement(backend="gloo", device="cpu", mesh="cpu")
    return TorchPlacement(backend="nccl", device=f"cuda:{local_rank}", mesh="cuda")


def scaling_counts(gpus: int) -> list[int]:
    """The device counts of a strong-scaling run over ``gpus`` devices: the powers of two up to
    ``gpus``, then ``gpus`` itself where it is not one (6 -> [1, 2, 4, 6]); [] for none."""
    counts, n = [], 1
    while n <= gpus:
        counts.append(n)
        n *= 2
    if gpus >= 1 and counts[-1] != gpus:
        counts.append(gpus)
    return counts


def scaling_plan(counts: Sequence[int], *, batch_size: int, config: ViTConfig,
                 model_parallel: int) -> list[tuple[int, int]]:
    """Each device count of a scaling run with its model axis, ``min(model_parallel, n)`` (one
    device runs the 2-D strategy on a 1 x 1 mesh), every one checked with :func:`plan` before any
    run starts, so that a count the batch or the model cannot take fails at once."""
    out = []
    for n in counts:
        axis = min(model_parallel, n)
        plan(n, batch_size=batch_size, config=config, model_parallel=axis)
        out.append((n, axis))
    return out


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def check_port(port: int) -> None:
    """Raise LaunchError when ``port`` on 127.0.0.1 is taken (torchrun's rendezvous needs it)."""
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 0)
        try:
            s.bind(("127.0.0.1", port))
        except OSError as error:
            raise LaunchError(f"port {port} is already in use ({error.strerror}); pass another master_port, "
                              f"or master_port=None to pick a free one") from None


_FIND_TORCHRUN = """
import importlib.util, os, sys
spec = importlib.util.find_spec("torch")
if spec is None or spec.origin is None:
    print("no module named torch"); sys.exit(1)
if not os.path.exists(os.path.join(os.path.dirname(spec.origin), "distributed", "run.py")):
    print("torch without torch.distributed.run"); sys.exit(1)
"""


def find_torchrun(python: str = sys.executable) -> list[str]:
    """The command that starts ``torchrun`` with ``python``; LaunchError when ``python`` is missing
    or cannot import ``torch.distributed.run``."""
    if shutil.which(python) is None:
        raise LaunchError(f"torchrun cannot start: no Python at {python}")
    # Look for the module's file without importing PyTorch (seconds on a small machine).
    probe = subprocess.run([python, "-c", _FIND_TORCHRUN], capture_output=True, text=True)
    if probe.returncode:
        raise LaunchError(f"torchrun is missing: {python} has no torch.distributed.run ({probe.stdout.strip()}); "
                          "install PyTorch with its distributed package")
    return [python, "-m", "torch.distributed.run"]


def _tail(path: Path, lines: int = 40) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""


_ROOT_CAUSE = re.compile(r"Root Cause.*?rank\s*:\s*(\d+)", re.S)
_ROOT_CAUSE_EXIT = re.compile(r"Root Cause.*?exitcode\s*:\s*([^\n]*)", re.S)


def _root_cause(log: Path) -> int | None:
    """The rank torchrun names as the first to fail, from its log (None where it names none)."""
    try:
        match = _ROOT_CAUSE.search(log.read_text(errors="replace"))
    except OSError:
        return None
    return int(match.group(1)) if match else None


def _run_groups(commands: Sequence[Sequence[str]], *, env: dict, logs: Sequence[Path], timeout: float) -> list[int]:
    """Run ``commands`` side by side, each in a new process group with its output in its log; stop
    at the first that fails (non-zero exit), at ``timeout`` (TimeoutExpired), or on interruption;
    kill every group whatever happens; return the exit codes (None for one killed unfinished)."""
    procs, files = [], []
    try:
        for command, log in zip(commands, logs):
            files.append(open(log, "w"))
            procs.append(subprocess.Popen(list(command), stdout=files[-1], stderr=subprocess.STDOUT, env=env,
                                          start_new_session=True))
        deadline = time.monotonic() + timeout
        while any(p.poll() is None for p in procs):
            if any(p.returncode not in (None, 0) for p in procs):
                break
            if time.monotonic() > deadline:
                raise subprocess.TimeoutExpired(list(commands[0]), timeout)
            time.sleep(0.05)
        return [p.returncode for p in procs]
    finally:
        for p in procs:
            try:
                os.killpg(p.pid, signal.SIGKILL)  # the group: torchrun's workers too
            except ProcessLookupError:
                pass
            p.wait()
        for f in files:
            f.close()


def _run_group(command: Sequence[str], *, env: dict, log: Path, timeout: float) -> int:
    """:func:`_run_groups` for one command; its exit code."""
    return _run_groups([command], env=env, logs=[log], timeout=timeout)[0]


def _write_inputs(directory: Path, X: np.ndarray, y: np.ndarray, torch_state: dict) -> tuple[Path, Path]:
    """The batches and the initial weights (``init.pt`` for PyTorch, ``init.npz`` for JAX's child,
    which then needs no PyTorch) in ``directory``."""
    import torch

    batches, init = directory / "batches.npz", directory / "init.pt"
    np.savez(batches, X=X, y=y)
    torch.save(torch_state, init)
    np.savez(directory / "init.npz", **{k: v.detach().cpu().numpy() for k, v in torch_state.items()})
    return batches, init


def run_torch(num_devices: int, *, X: np.ndarray, y: np.ndarray, torch_state: dict, config: ViTConfig, lr: float,
              momentum: float = 0.9, model_parallel: int = 2, strategies: Sequence[str] = TORCH_STRATEGIES,
              device: str = "cpu", master_port: int | None = None, python: str = sys.executable, threads: int = 1,
              repeats: int = 5, number: int = 2, timeout: float = 900,
              workdir: str | os.PathLike | None = None) -> dict:
    """Train ``strategies`` with ``num_devices`` torchrun workers on the global batches ``X`` (steps,
    B, 28, 28) and ``y`` (steps, B) with SGD (``lr``, ``momentum``), every strategy starting from
    ``torch_state``; each worker then times its step with :func:`sidebyside.lab.timing.time_fn`,
    ``repeats`` repeats of ``number`` calls (fixed, the same on every rank). ``device``: "cpu"
    (gloo, every worker on the CPU) or "gpu" (NCCL, one GPU per worker; see :func:`torch_placement`).

    Returns ``{"ranks": [record per rank], "params": {strategy: {name: array}}}``; see
    :mod:`.torch_parallel` for a rank's record. Raises WorkerError naming the failed rank."""
    kind = device_kind(device)
    available = None
    if kind == "gpu":
        import torch

        available = torch.cuda.device_count()
    plan(num_devices, batch_size=X.shape[1], config=config, model_parallel=model_parallel, available=available)
    launcher = find_torchrun(python)
    if master_port is None:
        master_port = free_port()
    check_port(master_port)
    with tempfile.TemporaryDirectory(dir=workdir, prefix="torchrun-") as tmp:
        tmp = Path(tmp)
        batches, init = _write_inputs(tmp, X, y, torch_state)
        spec = {"strategies": list(strategies), "config": config.__dict__, "lr": lr, "momentum": momentum, "batches": str(batches),
                "init": str(init), "model_parallel": model_parallel, "out": str(tmp), "device": kind,
                "threads": threads, "repeats": repeats, "number": number}
        (tmp / "spec.json").write_text(json.dumps(spec))
        command = [*launcher, "--nnodes", "1", "--nproc-per-node", str(num_devices), "--master-addr", "127.0.0.1",
                   "--master-port", str(master_port), "--max-restarts", "0", "--log-dir", str(tmp / "logs"),
                   "--redirects", "3", "--tee", "3",
                   "-m", "sidebyside.posts.parallel_training.torch_parallel", str(tmp / "spec.json")]
        env = worker_env(threads)
        log = tmp / "log.txt"
        try:
            code = _run_group(command, env=env, log=log, timeout=timeout)
        except subprocess.TimeoutExpired:
            raise WorkerError("PyTorch", None, f"timed out after {timeout:.0f} s", _tail(log)) from None
        errors = sorted(tmp.glob("rank*.error.json"), key=lambda p: int(p.name[4:].split(".")[0]))
        if errors:
            first = json.loads(errors[0].read_text())
            raise WorkerError("PyTorch", first["rank"], first["error"],
                              first["traceback"].strip().splitlines()[-1] + "\n" + _tail(log))
        if code != 0:
            rank = _root_cause(log)
            rank_log = "\n".join(_tail(p) for p in sorted((tmp / "logs").glob(f"*/attempt_*/{rank}/std*.log")))
            raise WorkerError("PyTorch", rank, f"torchrun exited with {code}" + (
                f"; rank {rank} died first ({_ROOT_CAUSE_EXIT.search(log.read_text(errors='replace')).group(1)})"
                if rank is not None and _ROOT_CAUSE_EXIT.search(log.read_text(errors="replace")) else ""),
                (rank_log + "\n" if rank_log else "") + _tail(log))
        ranks = [json.loads((tmp / f"rank{r}.json").read_text()) for r in range(num_devices)]
        params = {s: dict(np.load(tmp / f"{s}.npz")) for s in strategies}
    return {"ranks": ranks, "params": params}


def worker_env(threads: int) -> dict:
    """This process's environment for a worker: ``threads`` OpenMP threads, unbuffered output, and
    no run profile. A worker's timed sections are therefore recorded, not judged, by the
    quiet-machine check (:mod:`sidebyside.lab.quiet`): its simulated devices share the cores with
    the other workers by design, so those would always read as a busy machine (the post labels
    these times as not scaling evidence; the notebook's own timed sections stay judged)."""
    env = {k: v for k, v in os.environ.items() if k != context.ENV["profile"]}
    env.update(OMP_NUM_THREADS=str(threads), PYTHONUNBUFFERED="1")
    return env


def _simulated_env(devices: int, threads: int) -> dict:
    env = worker_env(threads)
    flags = [f for f in env.get("XLA_FLAGS", "").split() if "force_host_platform_device_count" not in f]
    env["XLA_FLAGS"] = " ".join(flags + [f"--xla_force_host_platform_device_count={devices}"])
    env["JAX_PLATFORMS"] = "cpu"
    return env


def _gpu_env(threads: int) -> dict:
    """A JAX child on GPUs: memory taken as needed, not most of every GPU at start (the calling
    kernel's JAX may hold its share of them already)."""
    env = worker_env(threads)
    env["XLA_PYTHON_CLIENT_PREALLOCATE"] = "false"
    return env


def run_jax_multiprocess(num_processes: int, devices_per_process: int, *, X: np.ndarray, y: np.ndarray,
                         torch_state: dict, config: ViTConfig, lr: float, momentum: float = 0.9,
                         model_parallel: int = 2, strategies: Sequence[str] = ("data_parallel",),
                         python: str = sys.executable, threads: int = 1, timeout: float = 900,
                         workdir: str | os.PathLike | None = None) -> dict:
    """JAX's multi-host path on one machine: ``num_processes`` child processes, each with
    ``devices_per_process`` simulated CPU devices, joined by ``jax.distributed.initialize`` (a
    coordinator on a free local port) into one mesh of ``num_processes * devices_per_process``
    devices. Returns process 0's record, as :func:`run_jax` does; a failing process raises
    WorkerError with its process index as the rank."""
    num_devices = num_processes * devices_per_process
    plan(num_devices, batch_size=X.shape[1], config=config, model_parallel=model_parallel)
    with tempfile.TemporaryDirectory(dir=workdir, prefix="jax-mp-") as tmp:
        tmp = Path(tmp)
        batches, init = _write_inputs(tmp, X, y, torch_state)
        spec = {"strategies": list(strategies), "config": config.__dict__, "lr": lr, "momentum": momentum,
                "batches": str(batches), "init_npz": str(init.with_suffix(".npz")), "model_parallel": model_parallel,
                "out": str(tmp), "num_devices": num_devices, "num_processes": num_processes,
                "coordinator": f"127.0.0.1:{free_port()}"}
        (tmp / "spec.json").write_text(json.dumps(spec))
        commands = [[python, "-m", "sidebyside.posts.parallel_training.jax_parallel", str(tmp / "spec.json"), str(i)]
                    for i in range(num_processes)]
        logs = [tmp / f"log{i}.txt" for i in range(num_processes)]
        try:
            codes = _run_groups(commands, env=_simulated_env(devices_per_process, threads), logs=logs,
                                timeout=timeout)
        except subprocess.TimeoutExpired:
            raise WorkerError("JAX", None, f"timed out after {timeout:.0f} s", _tail(logs[0])) from None
        for i in range(num_processes):
            error = tmp / ("error.json" if i == 0 else f"error{i}.json")
            if error.exists():
                raise WorkerError("JAX", i, json.loads(error.read_text())["error"], _tail(logs[i]))
        failed = next((i for i, c in enumerate(codes) if c not in (0, None)), None)
        if failed is not None or not (tmp / "result.json").exists():
            i = failed if failed is not None else 0
            raise WorkerError("JAX", i, f"process {i} exited with {codes[i]}", _tail(logs[i]))
        result = json.loads((tmp / "result.json").read_text())
        result["params"] = {s: dict(np.load(tmp / f"{s}.npz")) for s in strategies}
    return result


def run_jax(num_devices: int, *, X: np.ndarray, y: np.ndarray, torch_state: dict, config: ViTConfig, lr: float,
            momentum: float = 0.9, model_parallel: int = 2, strategies: Sequence[str] = STRATEGIES, device: str = "cpu",
            python: str = sys.executable, threads: int = 1, repeats: int = 5, min_repeat_s: float = 0.05,
            timeout: float = 900, workdir: str | os.PathLike | None = None) -> dict:
    """Train ``strategies`` in JAX on ``num_devices`` devices in a child process, each starting from
    ``torch_state`` copied into the Flax model; the child then times the strategies' steps in one
    interleaved :func:`sidebyside.lab.timing.compare` (``repeats``, ``min_repeat_s``). ``device``:
    "cpu" (``num_devices`` simulated CPU devices) or "gpu" (the first ``num_devices`` of the GPUs the
    child sees, one process driving them all; :func:`.jax_parallel.pick_devices`; LaunchError when
    it sees fewer). Returns the child's record (see :mod:`.jax_parallel`) with ``"params"``:
    ``{strategy: {name: array}}``."""
    kind = device_kind(device)
    plan(num_devices, batch_size=X.shape[1], config=config, model_parallel=model_parallel)
    with tempfile.TemporaryDirectory(dir=workdir, prefix="jax-") as tmp:
        tmp = Path(tmp)
        batches, init = _write_inputs(tmp, X, y, torch_state)
        spec = {"strategies": list(strategies), "config": config.__dict__, "lr": lr, "momentum": momentum, "batches": str(batches),
                "init_npz": str(init.with_suffix(".npz")), "model_parallel": model_parallel, "out": str(tmp),
                "num_devices": num_devices, "repeats": repeats, "min_repeat_s": min_repeat_s, "device": kind}
        (tmp / "spec.json").write_text(json.dumps(spec))
        env = _simulated_env(num_devices, threads) if kind == "cpu" else _gpu_env(threads)
        log = tmp / "log.txt"
        command = [python, "-m", "sidebyside.posts.parallel_training.jax_parallel", str(tmp / "spec.json")]
        try:
            code = _run_group(command, env=env, log=log, timeout=timeout)
        except subprocess.TimeoutExpired:
            raise WorkerError("JAX", None, f"timed out after {timeout:.0f} s", _tail(log)) from None
        error = tmp / "error.json"
        if error.exists():
            record = json.loads(error.read_text())
            if record.get("launch"):
                raise LaunchError(record["error"])
            raise WorkerError("JAX", 0, record["error"], _tail(log))
        if code != 0:
            raise WorkerError("JAX", 0, f"the JAX process exited with {code}", _tail(log))
        result = json.loads((tmp / "result.json").read_text())
        result["params"] = {s: dict(np.load(tmp / f"{s}.npz")) for s in strategies}
    return result
