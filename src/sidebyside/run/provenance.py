"""Where a number came from: hardware, library versions, precision settings,
commit; and the results file a notebook run leaves for the publisher.

``collect()`` returns the ``provenance`` object of a results record (:data:`sidebyside.run.context.RECORD_FIELDS`)::

    {"device", "device_kind": "gpu"|"cpu", "python", "torch", "jax", "jaxlib",
     "flax", "optax", "cuda", "matmul_precision", "git_sha",
     # each framework asked separately (devices()):
     "torch_backend", "torch_device", "torch_cuda", "torch_cudnn",
     "jax_backend", "jax_device", "jax_cuda", "jax_cudnn",
     "threads": {...},                 # threads(): a condition of the run, not of the machine
     "fingerprint": {"cpu": {...}, "gpu": {...} | None},  # fingerprint(): what changes the figures
     "machine_kind": "...",            # machine_kind(): the fingerprint in words, the key of floors and baselines
     "differs_from_pins": [...],       # stack packages not at their pinned version
     "machine": {...} | None}          # the quiet-machine check of the timed sections (note_machine)

The **fingerprint** names the hardware that changes the figures, and nothing that a run sets
(threads, cores allowed): the CPU's vendor, family, model, stepping, model name, vector
extensions (among AVX2, AVX-512F, AVX-512 BF16, AMX), L2 and L3 sizes and nominal clock
(:func:`cpu_fingerprint`, from ``/proc/cpuinfo`` and ``/sys/devices/system/cpu/cpu0``); on a GPU
its model, memory, clocks and driver (:func:`gpu_fingerprint`, from ``nvidia-smi``). Two hosts
with the same fingerprint have the same :func:`machine_kind`, the key of the noise floors and
the quiet baselines. A record written before fingerprints has none: its kind is "unknown".

``device_kind`` is "gpu" only when PyTorch and JAX compute on the same GPU
model. :func:`check_gpu_profile` is the one judge of a gpu run: the publisher asks it
before anything runs (both frameworks probed in a child process) and again of the
devices this record names before it publishes, so a one-sided "gpu" post cannot be
published.

``save_results(metrics)`` writes ``{"slug", "provenance", "metrics",
"inputs", "code"}`` (built by :func:`sidebyside.run.context.results_record`) to
``<results_dir>/<slug>.json`` of the run context (:mod:`sidebyside.run.context`:
the slug and folder the publisher passes; ``build/results/`` by default),
``inputs`` being the library modules and data files the run used
(:mod:`sidebyside.run.runkey`); the publisher adds profile, date and key. A
notebook run by hand, outside the publisher, names its slug:
``save_results("my-slug", metrics)``.
"""

from __future__ import annotations

import importlib.metadata
import json
import math
import os
import platform
import subprocess
import sys
import warnings
from pathlib import Path
from typing import Any

from sidebyside.run import code, context, runkey

__all__ = ["collect", "cpu_name", "cpu_fingerprint", "gpu_fingerprint", "fingerprint", "machine_kind",
           "VECTOR_EXTENSIONS", "gpu_name", "gpu_present", "devices", "threads", "check_gpu_profile",
           "GPUProfileError", "probe_devices", "differs_from_pins", "git_sha", "matmul_precision", "save_results",
           "to_jsonable", "table", "note_machine"]

_LIBRARIES = ("torch", "jax", "jaxlib", "flax", "optax")


def _version(package: str) -> str | None:
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return None


def cpu_name() -> str:
    """The CPU model and the cores this process may use, e.g. ``<model name> (2 cores)``."""
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


#: The vector extensions a fingerprint names (``/proc/cpuinfo`` flag: how it is said).
VECTOR_EXTENSIONS = {"avx2": "AVX2", "avx512f": "AVX-512F", "avx512_bf16": "AVX-512 BF16", "amx_tile": "AMX"}


def _cache_kib(size: str) -> int | None:
    """``1024K`` / ``32M`` (sysfs' cache size) -> KiB."""
    size = size.strip().upper()
    scale = {"K": 1, "M": 1024, "G": 1024 * 1024}.get(size[-1:], None)
    try:
        return int(size[:-1]) * scale if scale else int(size) // 1024
    except ValueError:
        return None


def _nominal_mhz(model_name: str | None, cpuinfo_mhz: str | None, cpufreq: Path) -> int | None:
    """The nominal clock in MHz, rounded to 100 MHz: the model name's (``@ 2.60GHz``), else
    cpufreq's base frequency, else its maximum, else ``cpu MHz`` of ``/proc/cpuinfo``."""
    import re

    found = re.search(r"@\s*([0-9.]+)\s*GHz", model_name or "")
    mhz = float(found.group(1)) * 1000 if found else None
    for name in ("base_frequency", "cpuinfo_max_freq"):
        if mhz is None:
            try:
                mhz = int((cpufreq / name).read_text().strip()) / 1000  # kHz
            except (OSError, ValueError):
                pass
    if mhz is None and cpuinfo_mhz:
        try:
            mhz = float(cpuinfo_mhz)
        except ValueError:
            pass
    return int(round(mhz / 100) * 100) if mhz else None


def cpu_fingerprint(cpuinfo: Path = Path("/proc/cpuinfo"),
                    cpu0: Path = Path("/sys/devices/system/cpu/cpu0")) -> dict[str, Any]:
    """The CPU's fingerprint: ``{"vendor", "family", "model", "stepping", "model_name", "vector",
    "l2_kib", "l3_kib", "clock_mhz"}`` from the first processor of ``cpuinfo`` and the caches
    and cpufreq of ``cpu0``. ``vector``: the :data:`VECTOR_EXTENSIONS` its flags hold, in that
    order; ``clock_mhz``: the nominal clock (the model name's, else cpufreq's base or maximum,
    else ``cpu MHz``), rounded to 100 MHz. A field that cannot be read is None. Nothing in it
    depends on the threads or cores a run uses."""
    fields: dict[str, str] = {}
    try:
        for line in cpuinfo.read_text().splitlines():
            if not line.strip():
                if fields:
                    break  # the first processor only
                continue
            key, _, value = line.partition(":")
            fields.setdefault(key.strip(), value.strip())
    except OSError:
        pass

    def number(key: str) -> int | None:
        return int(fields[key]) if fields.get(key, "").isdigit() else None

    caches: dict[str, int | None] = {"l2_kib": None, "l3_kib": None}
    for index in sorted(cpu0.glob("cache/index*")):
        try:
            level, kind = (index / "level").read_text().strip(), (index / "type").read_text().strip()
            size = _cache_kib((index / "size").read_text())
        except OSError:
            continue
        if level in ("2", "3") and kind in ("Unified", "Data"):
            caches[f"l{level}_kib"] = size
    flags = set(fields.get("flags", "").split())
    model_name = fields.get("model name") or platform.processor() or None
    return {"vendor": fields.get("vendor_id"), "family": number("cpu family"), "model": number("model"),
            "stepping": number("stepping"), "model_name": model_name,
            "vector": [flag for flag in VECTOR_EXTENSIONS if flag in flags], **caches,
            "clock_mhz": _nominal_mhz(model_name, fields.get("cpu MHz"), cpu0 / "cpufreq")}


def gpu_fingerprint(run: Any = subprocess.run) -> dict[str, Any] | None:
    """The first GPU's fingerprint as ``nvidia-smi`` reports it: ``{"model", "memory_mib",
    "sm_clock_mhz", "memory_clock_mhz", "driver"}`` (the maximum clocks); None where there is no
    ``nvidia-smi`` or it does not answer."""
    try:
        listing = run(["nvidia-smi", "--query-gpu=name,memory.total,clocks.max.sm,clocks.max.mem,driver_version",
                       "--format=csv,noheader,nounits", "-i", "0"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return None
    parts = [p.strip() for p in (listing.stdout or "").strip().splitlines()[0].split(",")] if (
        listing.returncode == 0 and (listing.stdout or "").strip()) else []
    if len(parts) < 5:
        return None

    def number(text: str) -> int | None:
        try:
            return int(float(text))
        except ValueError:
            return None

    return {"model": parts[0], "memory_mib": number(parts[1]), "sm_clock_mhz": number(parts[2]),
            "memory_clock_mhz": number(parts[3]), "driver": parts[4]}


def fingerprint(gpu: bool | None = None) -> dict[str, Any]:
    """``{"cpu": cpu_fingerprint(), "gpu": gpu_fingerprint() or None}``; the GPU is asked only
    where ``gpu`` is true (default: where the driver shows one, :func:`gpu_present`)."""
    gpu = gpu_present() if gpu is None else gpu
    return {"cpu": cpu_fingerprint(), "gpu": gpu_fingerprint() if gpu else None}


def _size(kib: int | None) -> str:
    if kib is None:
        return "unknown"
    return f"{kib // 1024:g} MiB" if kib % 1024 == 0 else f"{kib} KiB"


def machine_kind(found: dict[str, Any] | None, *, gpu: bool = False) -> str:
    """A fingerprint (:func:`fingerprint`) in words, the same for every host of that fingerprint
    and for every thread count: the key of the noise floors and the quiet baselines. With ``gpu``
    the GPU's (model, memory, clocks, driver), else the CPU's: ``<model name> (<vendor> family F
    model M stepping S; <vector extensions>; L2 <size>, L3 <size>; <clock> GHz)``; "unknown"
    without a fingerprint (a record written before them)."""
    found = found or {}
    if gpu and found.get("gpu"):
        g = found["gpu"]
        return (f"{g.get('model')} ({g.get('memory_mib')} MiB; SM {g.get('sm_clock_mhz')} MHz, memory "
                f"{g.get('memory_clock_mhz')} MHz; driver {g.get('driver')})")
    c = found.get("cpu")
    if not c:
        return "unknown"
    vector = ", ".join(VECTOR_EXTENSIONS[v] for v in c.get("vector") or []) or "no AVX2"
    clock = f"{c['clock_mhz'] / 1000:g} GHz" if c.get("clock_mhz") else "clock unknown"
    return (f"{c.get('model_name') or 'unknown CPU'} ({c.get('vendor') or 'unknown vendor'} family "
            f"{c.get('family')} model {c.get('model')} stepping {c.get('stepping')}; {vector}; "
            f"L2 {_size(c.get('l2_kib'))}, L3 {_size(c.get('l3_kib'))}; {clock})")


def gpu_present() -> bool:
    """Whether the NVIDIA driver shows a GPU (``/proc/driver/nvidia/gpus`` or
    ``nvidia-smi -L``), asked without importing PyTorch or JAX. An empty
    ``CUDA_VISIBLE_DEVICES`` hides the GPUs, as it does from both frameworks."""
    if os.environ.get("CUDA_VISIBLE_DEVICES", "x").strip() in ("", "-1"):
        return False
    gpus = Path("/proc/driver/nvidia/gpus")
    try:
        if gpus.is_dir() and any(gpus.iterdir()):
            return True
    except OSError:
        pass
    try:
        listing = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        return False
    return any(line.startswith("GPU ") for line in listing.splitlines())


def _cuda_version(number: int | None) -> str | None:
    """12080 -> "12.8" (CUDA's encoding: 1000 * major + 10 * minor)."""
    return f"{number // 1000}.{number % 1000 // 10}" if number else None


def _cudnn_version(number: int | None) -> str | None:
    """91002 -> "9.10.2" (cuDNN 9's encoding: 10000 * major + 100 * minor + patch)."""
    if not number:
        return None
    if number >= 10000:
        return f"{number // 10000}.{number % 10000 // 100}.{number % 100}"
    return f"{number // 1000}.{number % 1000 // 100}.{number % 100}"  # cuDNN 8 and older


def devices() -> dict[str, Any]:
    """What each framework computes on, asked of each separately::

        {"torch_backend": "cuda"|"cpu", "torch_device": "<CUDA device name>"|"cpu",
         "torch_cuda", "torch_cudnn", "jax_backend": "gpu"|"cpu"|..., "jax_device",
         "jax_cuda", "jax_cudnn"}

    ``torch_cuda`` is the CUDA the wheel was built for (None: a CPU build);
    ``jax_cuda``/``jax_cudnn`` come from JAX's CUDA plugin (None without one).
    A framework that is not installed gives None for its fields. Imports
    both frameworks, and so starts their GPU runtimes.
    """
    found: dict[str, Any] = dict.fromkeys(("torch_backend", "torch_device", "torch_cuda", "torch_cudnn",
                                           "jax_backend", "jax_device", "jax_cuda", "jax_cudnn"))
    try:
        import torch

        if torch.cuda.is_available():
            found.update(torch_backend="cuda", torch_device=torch.cuda.get_device_name(0))
            found["torch_cudnn"] = _cudnn_version(torch.backends.cudnn.version())
        else:
            found.update(torch_backend="cpu", torch_device="cpu")
        found["torch_cuda"] = torch.version.cuda
    except ImportError:
        pass
    try:
        import jax

        device = jax.devices()[0]
        found["jax_backend"] = device.platform
        found["jax_device"] = device.device_kind if device.platform != "cpu" else "cpu"
        try:
            from jax._src.lib import cuda_versions  # the CUDA plugin's own report; None without it
        except ImportError:
            cuda_versions = None
        if cuda_versions is not None:
            for name, call, fmt in (("jax_cuda", "cuda_runtime_get_version", _cuda_version),
                                    ("jax_cudnn", "cudnn_get_version", _cudnn_version)):
                try:
                    found[name] = fmt(getattr(cuda_versions, call)())
                except Exception:  # an older or partial plugin: leave it unknown
                    pass
    except (ImportError, RuntimeError):
        pass
    return found


def _same_gpu(found: dict[str, Any]) -> str | None:
    """The GPU model both frameworks compute on, else None."""
    torch_gpu = found.get("torch_device") if found.get("torch_backend") == "cuda" else None
    jax_gpu = found.get("jax_device") if found.get("jax_backend") == "gpu" else None
    if torch_gpu and jax_gpu and " ".join(torch_gpu.split()).lower() == " ".join(jax_gpu.split()).lower():
        return torch_gpu
    return None


class GPUProfileError(RuntimeError):
    """The gpu profile was asked for, but PyTorch and JAX do not both compute on the same GPU."""


def check_gpu_profile(found: dict[str, Any], pins: dict[str, str] | None = None, *,
                      driver_gpu: bool | None = None) -> str:
    """The GPU both frameworks compute on (``found`` is :func:`devices`'
    record), or :class:`GPUProfileError` saying what to install. A "gpu" post
    whose JAX (or PyTorch) half ran on the CPU must be impossible.
    ``driver_gpu``: whether the driver shows a GPU (:func:`gpu_present`), when known."""
    gpu = _same_gpu(found)
    if gpu:
        return gpu
    if driver_gpu is False:
        raise GPUProfileError("the gpu profile needs a GPU, and the NVIDIA driver shows none here (nvidia-smi -L "
                              "lists no GPU). Run it on a GPU box, or run on the CPU: make execute PROFILE=cpu")
    pins = _pins("gpu") if pins is None else pins
    jax_pin, torch_pin = pins.get("jax", "<pinned>"), pins.get("torch", "<pinned>")

    def sees(backend, device, gpu_backend, framework):
        if backend is None:
            return f"nothing ({framework} is not installed)"
        return f"{device} ({backend})" if backend == gpu_backend else "no GPU, only the CPU"

    fixes = []
    if found.get("jax_backend") != "gpu":
        fixes.append(f"install JAX's CUDA build: make setup GPU=1 (or: pip install \"jax[cuda13]=={jax_pin}\"; "
                     "cuda12 where the driver is older than CUDA 13)")
    if found.get("torch_backend") != "cuda" and found.get("torch_cuda"):
        fixes.append(f"PyTorch is a CUDA {found['torch_cuda']} build that sees no GPU (is the driver older than "
                     f"CUDA {found['torch_cuda']}?): make setup GPU=1 installs the build that matches the driver")
    elif found.get("torch_backend") != "cuda":
        fixes.append(f"install a CUDA build of PyTorch: make setup GPU=1 (or: pip install torch=={torch_pin} "
                     "--index-url https://download.pytorch.org/whl/cu130)")
    if not fixes:
        fixes.append("they see different GPUs: give both the same one with CUDA_VISIBLE_DEVICES=<index>")
    raise GPUProfileError(
        "the gpu profile needs PyTorch and JAX on the same GPU, but PyTorch sees "
        f"{sees(found.get('torch_backend'), found.get('torch_device'), 'cuda', 'PyTorch')} and JAX sees "
        f"{sees(found.get('jax_backend'), found.get('jax_device'), 'gpu', 'JAX')}. To fix it, "
        + "; and ".join(fixes) + ". Or run on the CPU: make execute PROFILE=cpu"
    )


def probe_devices(python: str | None = None) -> dict[str, Any]:
    """:func:`devices` asked in a child process, so that the caller (the
    publisher) neither loads the frameworks nor holds GPU memory."""
    env = dict(os.environ, XLA_PYTHON_CLIENT_PREALLOCATE="false")
    src = str(Path(__file__).resolve().parents[2])
    env["PYTHONPATH"] = src + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    program = "import json; from sidebyside.run import provenance; print(json.dumps(provenance.devices()))"
    proc = subprocess.run([python or sys.executable, "-c", program], capture_output=True, text=True, env=env,
                          timeout=600)
    if proc.returncode != 0:
        raise GPUProfileError(f"could not ask PyTorch and JAX for their devices:\n{proc.stderr[-2000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def gpu_name() -> str | None:
    """The GPU model that both PyTorch and JAX compute on, else None."""
    return _same_gpu(devices())


def threads() -> dict[str, Any]:
    """The thread settings a CPU figure depends on, conditions of the run recorded apart from
    the machine's :func:`fingerprint`: the CPUs online, the cores this process may use,
    PyTorch's intra- and inter-op threads, the environment that sets OpenMP, MKL, OpenBLAS and
    XLA threads, and NumPy's BLAS pools (via threadpoolctl, None where it is not installed)."""
    found: dict[str, Any] = {"cpus_online": os.cpu_count()}
    try:
        found["cpu_affinity"] = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        found["cpu_affinity"] = os.cpu_count()
    try:
        import torch

        found["torch_num_threads"] = torch.get_num_threads()
        found["torch_num_interop_threads"] = torch.get_num_interop_threads()
    except ImportError:
        pass
    for name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "XLA_FLAGS"):
        found[name] = os.environ.get(name)
    try:
        from threadpoolctl import threadpool_info

        found["blas"] = [{"library": pool.get("internal_api"), "num_threads": pool.get("num_threads")}
                         for pool in threadpool_info() if pool.get("user_api") == "blas"]
    except ImportError:
        found["blas"] = None
    return found


# The stack a post is compared with its pins on; other packages (the notebook runner's) may differ freely.
_STACK = ("torch", "torchvision", "jax", "jaxlib", "flax", "optax", "numpy", "scipy")


def _pins(profile: str) -> dict[str, str]:
    try:
        return runkey.read_pins(runkey.pins_files(profile, runkey.project_root()))
    except OSError:
        return {}


def differs_from_pins(profile: str, pins: dict[str, str] | None = None) -> list[str]:
    """The stack's packages whose installed version is not the pinned one,
    e.g. ``["torch 2.11.0 (pinned 2.14.1)"]``; empty when the run used the
    pins. A local build label (``+cu130``) is not a difference."""
    pins = _pins(profile) if pins is None else pins
    out = []
    for package in _STACK:
        installed, pinned = _version(package), pins.get(package)
        if pinned and (installed or "").split("+")[0] != pinned:
            out.append(f"{package} {installed or 'not installed'} (pinned {pinned})")
    return out


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


def git_sha(root: str | os.PathLike | None = None) -> str | None:
    """The commit of the project checkout, ``-dirty`` when its sources have
    uncommitted changes (the generated posts, images and results do not
    count); the run context's ``commit`` when set; None outside a checkout (a
    notebook run by hand, e.g. on Colab). The publisher stamps a published
    run more narrowly: dirty only for that run's inputs
    (:func:`sidebyside.run.runkey.commit_stamp`)."""
    return runkey.commit_stamp(root, strict=False)


def collect() -> dict[str, Any]:
    """The provenance record of this process (see the module docstring): what each framework
    computes on, as found; the publisher judges it (:func:`check_gpu_profile`)."""
    found = devices()
    gpu = _same_gpu(found)
    if gpu:
        device = gpu
    elif found.get("torch_backend") == "cuda" or found.get("jax_backend") not in (None, "cpu"):
        device = f"PyTorch: {found.get('torch_device')}; JAX: {found.get('jax_device')} ({cpu_name()})"
    else:
        device = cpu_name()
    record: dict[str, Any] = {
        "device": device,
        "device_kind": "gpu" if gpu else "cpu",
        "cpu": cpu_name(),
        "python": platform.python_version(),
    }
    for library in _LIBRARIES:
        record[library] = _version(library)
    record["numpy"] = _version("numpy")
    record["cuda"] = found["torch_cuda"] if found.get("torch_backend") == "cuda" else None
    record.update(found)
    record["threads"] = threads()
    record["fingerprint"] = fingerprint(gpu=True if gpu else None)
    record["machine_kind"] = machine_kind(record["fingerprint"], gpu=bool(gpu))
    record["matmul_precision"] = matmul_precision()
    record["differs_from_pins"] = differs_from_pins(context.current().profile or ("gpu" if gpu else "cpu"))
    record["git_sha"] = git_sha()
    record["machine"] = _MACHINE
    return record


#: The quiet-machine check's record of this process's timed sections; None before any ran.
_MACHINE: dict[str, Any] | None = None


def note_machine(machine: dict[str, Any] | None) -> None:
    """Keep ``machine`` as the ``machine`` entry of :func:`collect`: the quiet-machine
    check (:mod:`sidebyside.lab.quiet`, which calls this after every timed section)."""
    global _MACHINE
    _MACHINE = machine


def table(record: dict[str, Any] | None = None):
    """The provenance record as a one-column pandas DataFrame, for display."""
    import pandas as pd

    record = record or collect()
    flat = {k: (json.dumps(v) if isinstance(v, (dict, list)) else v) for k, v in record.items()}
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
    """Where ``save_results`` writes: the run context's folder, else ``build/results/``."""
    return context.current().results_path_dir()


def run_slug(slug: str | None = None) -> str | None:
    """The slug of this run: the publisher's (the notebook's header, passed in
    the run context), else ``slug``, else None (a notebook run by hand, on
    Colab say); both given and different is an error."""
    given = context.current().slug
    if given and slug and given != slug:
        raise ValueError(f"save_results was given slug {slug!r}, but the publisher runs this notebook as {given!r} "
                         "(the slug in its header): drop the slug argument, or make the two agree")
    return given or slug


def save_results(slug: str | dict[str, Any] | None = None, metrics: dict[str, Any] | None = None,
                 provenance: dict[str, Any] | None = None) -> dict[str, Any]:
    """Write this run's metrics, provenance and inputs for the publisher; return them.

    Call once, at the end of a notebook: ``save_results(metrics)`` (the
    publisher gives the slug), or ``save_results(slug, metrics)`` by hand;
    by hand without a slug (Colab) the record is returned and not written.
    The publisher refuses to publish a run that did not call this.
    """
    if metrics is None and isinstance(slug, dict):
        slug, metrics = None, slug
    if metrics is None:
        raise TypeError("save_results needs the metrics: save_results(metrics) or save_results(slug, metrics)")
    slug = run_slug(slug)
    record = context.results_record(slug=slug, provenance=provenance or collect(), metrics=to_jsonable(metrics),
                                    inputs=runkey.recorded(), code=code.record())
    if slug is None:
        # Run by hand (Colab, a plain Jupyter): the notebook's last cell still shows its results.
        warnings.warn("not run by the publisher and no slug given: results returned, not written "
                      "(to write them: save_results('<slug from the header>', metrics))", stacklevel=2)
        return record
    directory = results_dir()
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{slug}.json"
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(record, indent=2, sort_keys=True) + "\n")
    os.replace(tmp, path)
    return record
