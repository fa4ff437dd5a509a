"""Where a number came from: hardware, library versions, precision settings,
commit; and the results file a notebook run leaves for the publisher.

``collect()`` returns the ``provenance`` object of DESIGN.md's results JSON::

    {"device", "device_kind": "gpu"|"cpu", "python", "torch", "jax", "jaxlib",
     "flax", "optax", "cuda", "matmul_precision", "git_sha"}

``save_results(slug, metrics)`` writes ``{"slug", "provenance", "metrics"}``
to ``$SIDEBYSIDE_RESULTS_DIR/<slug>.json`` (``build/results/`` by default);
the publisher adds profile, date and source hash.
"""

from __future__ import annotations

import importlib.metadata
import json
import math
import os
import platform
import subprocess
import sys
from pathlib import Path
from typing import Any

__all__ = ["collect", "cpu_name", "gpu_name", "git_sha", "matmul_precision", "save_results", "to_jsonable", "table"]

_LIBRARIES = ("torch", "jax", "jaxlib", "flax", "optax")


def _version(package: str) -> str | None:
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return None


def cpu_name() -> str:
    """The CPU model and the cores this process may use, e.g. ``AMD EPYC 7B13 (2 cores)``."""
    model = None
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    model = model or platform.processor() or platform.machine() or "unknown CPU"
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        cores = os.cpu_count() or 1
    return f"{model} ({cores} core{'s' if cores != 1 else ''})"


def gpu_name() -> str | None:
    """Name of the first CUDA GPU that PyTorch or JAX sees, else None.

    Only imports a framework that is already imported or installed; never
    initialises CUDA when neither framework reports a GPU.
    """
    try:
        import torch

        if torch.cuda.is_available():
            return torch.cuda.get_device_name(0)
    except ImportError:
        pass
    try:
        import jax

        gpus = [d for d in jax.devices() if d.platform == "gpu"]
        if gpus:
            return gpus[0].device_kind
    except (ImportError, RuntimeError):
        pass
    return None


def cuda_version() -> str | None:
    try:
        import torch

        if torch.cuda.is_available():
            return torch.version.cuda
    except ImportError:
        pass
    return None


def matmul_precision() -> dict[str, Any]:
    """Float32 matmul settings of both frameworks, as they stand now.

    PyTorch: ``torch.get_float32_matmul_precision()`` ("highest" means full
    FP32; "high" allows TF32) and the cuBLAS/cuDNN TF32 switches.
    JAX: ``jax_default_matmul_precision`` (None means the backend default,
    which on recent NVIDIA GPUs may use TF32 for float32).
    """
    settings: dict[str, Any] = {}
    try:
        import torch

        settings["torch_float32_matmul_precision"] = torch.get_float32_matmul_precision()
        settings["torch_cuda_matmul_allow_tf32"] = bool(torch.backends.cuda.matmul.allow_tf32)
        settings["torch_cudnn_allow_tf32"] = bool(torch.backends.cudnn.allow_tf32)
    except ImportError:
        pass
    try:
        import jax

        settings["jax_default_matmul_precision"] = jax.config.jax_default_matmul_precision
        settings["jax_enable_x64"] = bool(jax.config.jax_enable_x64)
    except ImportError:
        pass
    return settings


# What the publisher writes: a run that refreshes several posts changes these
# as it goes, and that must not mark the later notebooks of the same run dirty.
GENERATED = ("_posts", "images", "_data")


def git_sha(root: str | os.PathLike | None = None) -> str | None:
    """The commit of the project checkout, with ``-dirty`` when its sources
    have uncommitted changes (the generated posts, images and results do not
    count); None outside a git checkout (e.g. on Colab). ``$SIDEBYSIDE_GIT_SHA``,
    when set, is taken instead: the commit a copy of the tree was made from (an
    air-gapped GPU box, whose copy may carry a stale ``.git``)."""
    if os.environ.get("SIDEBYSIDE_GIT_SHA"):
        return os.environ["SIDEBYSIDE_GIT_SHA"]
    root = Path(root or os.environ.get("SIDEBYSIDE_ROOT") or Path(__file__).resolve().parents[2])
    try:
        sha = subprocess.run(
            ["git", "-C", str(root), "rev-parse", "--short=12", "HEAD"],
            capture_output=True, text=True, check=True, timeout=10,
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no", "--", ".",
             *(f":(exclude){path}" for path in GENERATED)],
            capture_output=True, text=True, check=True, timeout=10,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return f"{sha}-dirty" if dirty else sha


def collect() -> dict[str, Any]:
    """The provenance record of this process (see the module docstring)."""
    gpu = gpu_name()
    record: dict[str, Any] = {
        "device": gpu or cpu_name(),
        "device_kind": "gpu" if gpu else "cpu",
        "cpu": cpu_name(),
        "python": platform.python_version(),
    }
    for library in _LIBRARIES:
        record[library] = _version(library)
    record["numpy"] = _version("numpy")
    record["cuda"] = cuda_version()
    record["matmul_precision"] = matmul_precision()
    record["git_sha"] = git_sha()
    return record


def table(record: dict[str, Any] | None = None):
    """The provenance record as a one-column pandas DataFrame, for display."""
    import pandas as pd

    record = record or collect()
    flat = {k: (json.dumps(v) if isinstance(v, dict) else v) for k, v in record.items()}
    return pd.DataFrame.from_dict(flat, orient="index", columns=["value"])


def to_jsonable(value: Any) -> Any:
    """Convert NumPy/JAX/torch scalars and arrays, tuples and dataclass-free
    containers to plain JSON types; non-finite floats become None."""
    if isinstance(value, dict):
        return {str(k): to_jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [to_jsonable(v) for v in value]
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return value
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if hasattr(value, "tolist"):  # numpy, jax, torch arrays and scalars
        return to_jsonable(value.tolist())
    if hasattr(value, "item"):
        return to_jsonable(value.item())
    raise TypeError(f"cannot store {type(value).__name__} in a results file: {value!r}")


def results_dir() -> Path:
    configured = os.environ.get("SIDEBYSIDE_RESULTS_DIR")
    if configured:
        return Path(configured)
    return Path(__file__).resolve().parents[2] / "build" / "results"


def save_results(slug: str, metrics: dict[str, Any], provenance: dict[str, Any] | None = None) -> dict[str, Any]:
    """Write this run's metrics and provenance for the publisher; return them.

    Call once, at the end of a notebook. The publisher refuses to publish a
    run that did not call this.
    """
    record = {"slug": slug, "provenance": provenance or collect(), "metrics": to_jsonable(metrics)}
    directory = results_dir()
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{slug}.json"
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(record, indent=2, sort_keys=True) + "\n")
    os.replace(tmp, path)
    return record
