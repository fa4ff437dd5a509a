"""What every notebook does first: its set-up, in one call at the top of its set-up cell.

:func:`setup`, called before JAX starts its backend, in this order:

1. keeps library log lines out of the post (the publisher refuses a post that holds one): each
   filter is one entry of :data:`LOG_FILTERS` or :data:`WARNING_FILTERS`, named with the line it hides;
2. puts both frameworks under the same conditions (:func:`sidebyside.lab.conditions.same_conditions`:
   threads, float32 with TF32 off or on for both sides, the run's compilation cache), where the post
   asks for them;
3. the post's tables and figures in the house style (:func:`sidebyside.lab.tables.show_in_full`,
   :func:`sidebyside.lab.viz.style`);
4. collects the provenance record (:func:`sidebyside.run.provenance.collect`) and, from it, the devices
   both frameworks compute on;
5. pays each compiler's one-time start-up (:func:`sidebyside.lab.timing.warm_start`), so that compile
   times measured later are those of a warm process.

It returns a :class:`Setup`, which the notebook unpacks into the names its cells use; its
:meth:`Setup.parts` starts a run in parts (:class:`sidebyside.run.checkpoints.Checkpoints`).
"""

from __future__ import annotations

import dataclasses
import logging
import os
import warnings
from collections.abc import Iterable
from typing import Any

from sidebyside.lab import conditions as same
from sidebyside.lab import tables, timing, viz
from sidebyside.run import checkpoints, provenance

__all__ = ["Setup", "setup", "LOG_FILTERS", "WARNING_FILTERS", "ENVIRONMENT", "WARM"]

#: Loggers held to errors: {logger: the line it would print}.
LOG_FILTERS = {
    "torch.utils.cpp_extension": "No CUDA runtime is found (on a machine without a GPU)",
    "torch._dynamo.variables.ctx_manager": "Profiler record function ... will be ignored (the optimiser's)",
    "torch._dynamo.variables.torch": "Profiler record function ... will be ignored (the optimiser's)",
}
#: Warnings ignored: (message pattern, category, why).
WARNING_FILTERS = (
    (".*TensorFloat32 tensor cores.*", Warning, "TF32 is off on purpose (the same conditions)"),
    (".*CUDA.*", Warning, "CUDA set-up notes of PyTorch and JAX on a machine with or without a GPU"),
    (".*torch.jit.script. is deprecated.*", FutureWarning, "TorchScript, timed on purpose as a rung of its own"),
)
#: The environment a library reads when it starts: XLA's C++ log level ("2": errors only, so not its GPU
#: autotuner's "Delay kernel timed out").
ENVIRONMENT = {"TF_CPP_MIN_LOG_LEVEL": "2"}
#: Which devices :func:`setup` warms: the one the post times on, or every one it times on.
WARM = ("main", "every")


@dataclasses.dataclass
class Setup:
    """What a notebook's cells use after :func:`setup`.

    ``conditions``: what :func:`sidebyside.lab.conditions.same_conditions` set (None where the post
    set none); ``provenance``: the provenance record (:func:`sidebyside.run.provenance.collect`), which
    the notebook may extend with versions of its own; ``on_gpu``: both frameworks compute on the same
    GPU; ``devices``: the devices the post can time on, ``["cpu"]`` or ``["cpu", "gpu"]``, the last one
    the :attr:`main_device`; ``torch_devices`` and ``jax_devices``: each one's device object per name;
    ``startup``: the seconds of each compiler's first call (:func:`sidebyside.lab.timing.warm_start`) on
    the first device warmed, ``{}`` where nothing was warmed."""

    conditions: dict[str, Any] | None
    provenance: dict[str, Any]
    on_gpu: bool
    devices: list[str]
    torch_devices: dict[str, Any]
    jax_devices: dict[str, Any]
    startup: dict[str, float]

    @property
    def main_device(self) -> str:
        """The device the post times on: "gpu" where both frameworks see the same GPU, else "cpu"."""
        return self.devices[-1]

    @property
    def torch_device(self) -> Any:
        """PyTorch's :attr:`main_device`, a ``torch.device``."""
        return self.torch_devices[self.main_device]

    def parts(self, path: str | os.PathLike | None, budget_s: float, **stamp: Any) -> checkpoints.Checkpoints:
        """A run in parts: each expensive part is saved to ``path`` as it finishes and read back by a
        later run whose inputs are the same; no part starts that would end past ``budget_s`` seconds
        (0: no budget). ``path`` "" or None: off, every part is measured. The key of every part holds
        the provenance record (:data:`sidebyside.run.checkpoints.NOT_MEASURED` left out: the commit is
        kept beside each part instead) and ``stamp``, what the notebook derived from its parameters.
        Make it after the notebook's imports and data loading (:func:`sidebyside.run.checkpoints.run_inputs`)."""
        return checkpoints.Checkpoints(path, budget_s=budget_s, commit=self.provenance.get("git_sha"),
                                       stamp={"provenance": dict(self.provenance), **stamp})


def _quiet_logs() -> None:
    for name, value in ENVIRONMENT.items():
        os.environ.setdefault(name, value)
    for name in LOG_FILTERS:
        logging.getLogger(name).setLevel(logging.ERROR)
    for pattern, category, _ in WARNING_FILTERS:
        warnings.filterwarnings("ignore", message=pattern, category=category)


def setup(*, threads: int | None = None, tf32: bool = False, same_conditions: bool = True,
             warm: str | None = "main", compilers: Iterable[str] = ("torch", "jax"),
             jax_preallocate: bool = True, jax_x64: bool = False) -> Setup:
    """Set a notebook up (see the module): call it at the top of the set-up cell, before JAX starts.

    ``threads``: CPU threads for PyTorch, XLA and NumPy alike (0 or None: every core this process may
    use); ``tf32``: TF32 allowed on both sides; both go to
    :func:`sidebyside.lab.conditions.same_conditions`. ``same_conditions=False``: a post that sets no
    conditions (it times nothing in this process), which then takes neither ``threads`` nor ``tf32``.
    ``warm``: "main" warms the :attr:`Setup.main_device`, "every" warms each device in
    :attr:`Setup.devices` (the CPU first, whose start-up is the process's first and is the one
    returned), None warms nothing; ``compilers``: the compilers warmed ("torch" for ``torch.compile``,
    "jax" for ``jax.jit``). ``jax_preallocate=False``: JAX allocates GPU memory as it goes, as PyTorch
    does, instead of reserving most of it at start-up. ``jax_x64``: JAX may compute in float64 (its
    default dtype becomes float64 too), set before any JAX array exists."""
    compilers = tuple(compilers)
    if warm not in (*WARM, None):
        raise ValueError(f"warm must be one of {WARM} or None, got {warm!r}")
    if not compilers or set(compilers) - {"torch", "jax"}:
        raise ValueError(f"compilers must name 'torch', 'jax' or both, got {compilers!r}")
    if not same_conditions and (threads or tf32):
        raise ValueError("threads and tf32 are conditions: pass them with same_conditions=True, or leave them out")
    _quiet_logs()
    if not jax_preallocate:
        os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
    # a post that sets no conditions still compiles into the run's shared cache (a device call's, a test run's)
    conditions = same.same_conditions(threads=threads or None, tf32=tf32) if same_conditions else None
    if conditions is None:
        same.use_compile_cache()
    import jax
    import torch

    if jax_x64:
        jax.config.update("jax_enable_x64", True)
    tables.show_in_full()
    viz.style()
    record = provenance.collect()
    on_gpu = record["device_kind"] == "gpu"
    devices = ["cpu", "gpu"] if on_gpu else ["cpu"]
    torch_devices = {"cpu": torch.device("cpu"), **({"gpu": torch.device("cuda")} if on_gpu else {})}
    jax_devices = {device: jax.devices(device)[0] for device in devices}
    warmed = devices[-1:] if warm == "main" else devices if warm == "every" else []
    startups = [timing.warm_start("cuda" if device == "gpu" else "cpu", frameworks=compilers) for device in warmed]
    return Setup(conditions=conditions, provenance=record, on_gpu=on_gpu, devices=devices,
                 torch_devices=torch_devices, jax_devices=jax_devices, startup=startups[0] if startups else {})
