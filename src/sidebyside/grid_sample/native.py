"""A native CPU kernel for float32 ``grid_sample`` (4-D and 5-D), called through XLA's FFI.

Why: on a CPU, XLA compiles :mod:`.xla`'s gathers into one scalar
loop that recomputes each point's coordinates for every channel, 2 to 6 times
PyTorch's time. ``native/grid_sample_cpu.cc`` computes each point's taps and weights
once (2-D: 8 points at a time with AVX2), reads the channels
with AVX2 gathers (bilinear: each row's two neighbouring taps in one 8-byte read, half
the reads of one per tap), and splits the batch over the cores this process may use, as
PyTorch does. Its semantics are those of :mod:`.taps` (``taps_2d`` and ``taps_3d``),
written once more in C++ (``grid_sample_cpu.cc``, beside this file): the
unnormalisation is ``std::fma`` where PyTorch rounds once (2-D) and a product and a
difference where it rounds twice (3-D on the CPU), and the kernel is built with
``-ffp-contract=off`` so that g++ fuses nothing else. The tests hold it to PyTorch in
every mode, padding, ``align_corners`` and dimensionality.

Build: on first use, ``g++`` (Debian package ``g++``) compiles the kernel against the
XLA FFI headers that jaxlib ships (``jax.ffi.include_dir()``), with ``-march=native``,
into ``$SIDEBYSIDE_NATIVE_CACHE`` (default ``~/.cache/sidebyside``), named by a hash
of the source, the flags, jaxlib's version and the CPU, so a rebuild happens only
when one of those changes. Beside the library a ``.sha256`` file records its size and
hash at build time; a cached library that does not match them (truncated, corrupted)
is rebuilt before it is loaded, never mapped (a truncated shared object would kill the
process with SIGBUS). ``python -m sidebyside.grid_sample.native`` builds it ahead.
Where it cannot be built, ``implementation="auto"`` falls back to the XLA path with
one warning and ``implementation="native"`` raises an error that says why.
"""

from __future__ import annotations

import ctypes
import functools
import hashlib
import math
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import warnings
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

from sidebyside.grid_sample.taps import first_order_only
from sidebyside.run import runkey

__all__ = ["supported", "available", "build", "grid_sample_native", "NativeBuildError"]

SOURCE = Path(__file__).with_name("grid_sample_cpu.cc")
FLAGS = ["-O3", "-march=native", "-std=c++17", "-ffp-contract=off", "-shared", "-fPIC", "-pthread"]
_MODES = {"nearest": 0, "bilinear": 1, "bicubic": 2}
_PADDINGS = {"zeros": 0, "border": 1, "reflection": 2}


class NativeBuildError(RuntimeError):
    """The native kernel could not be built or loaded."""


def supported(input_shape, grid_shape, dtype) -> bool:
    """Whether the kernel handles this call (4-D or 5-D float32, each image under 2**31
    pixels, since the kernel indexes an image with 32-bit integers; else the XLA path)."""
    return (len(input_shape) in (4, 5) and jnp.dtype(dtype) == jnp.float32
            and math.prod(input_shape[2:]) < 2**31)


def _cpu_signature() -> str:
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return platform.processor()
    lines = [line for line in text.splitlines() if line.startswith(("model name", "flags"))]
    return "\n".join(sorted(set(lines)))


def _library_path() -> Path:
    import jaxlib

    if not SOURCE.is_file():
        raise NativeBuildError(f"the native grid_sample kernel's source {SOURCE} is missing from this installation; "
                               f"reinstall the package (pip install --force-reinstall sidebyside), or use "
                               f"implementation='xla'")
    runkey.note_input(SOURCE)  # the kernel's C++ source is an input of a run that uses it
    digest = hashlib.sha256()
    for part in (SOURCE.read_bytes(), " ".join(FLAGS).encode(), jaxlib.__version__.encode(),
                 platform.machine().encode(), _cpu_signature().encode()):
        digest.update(part + b"\0")
    cache = Path(os.environ.get("SIDEBYSIDE_NATIVE_CACHE") or Path.home() / ".cache" / "sidebyside")
    return cache / f"grid_sample_cpu-{digest.hexdigest()[:16]}.so"


def _fingerprint(path: Path) -> str:
    """``"<size> <sha256>"`` of a file."""
    digest = hashlib.sha256()
    size = 0
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
            size += len(block)
    return f"{size} {digest.hexdigest()}"


def _record(target: Path) -> Path:
    return target.with_name(target.name + ".sha256")


def verified(target: Path) -> bool:
    """Whether ``target`` exists and matches the size and hash recorded at its build."""
    record = _record(target)
    try:
        return target.is_file() and record.read_text().strip() == _fingerprint(target)
    except OSError:
        return False


def compiler() -> str:
    """The C++ compiler's path: ``$CXX``, else ``g++``. Raises NativeBuildError saying what to
    install where there is none."""
    found = shutil.which(os.environ.get("CXX", "g++"))
    if found is None:
        raise NativeBuildError("no C++ compiler found to build the native grid_sample kernel; install it "
                               "(sudo apt-get install g++) or set CXX, or use implementation='xla'")
    return found


def build() -> Path:
    """Compile the kernel unless a verified build is cached; return the library's path."""
    target = _library_path()
    if verified(target):
        return target
    cxx = compiler()
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target.parent) as tmp:
        built = Path(tmp) / target.name
        command = [cxx, *FLAGS, "-isystem", jax.ffi.include_dir(), "-o", str(built), str(SOURCE)]
        result = subprocess.run(command, capture_output=True, text=True)
        if result.returncode != 0:
            raise NativeBuildError(f"building the native grid_sample kernel failed ({' '.join(command)}):\n"
                                   f"{result.stderr[-3000:]}")
        record = Path(tmp) / (target.name + ".sha256")
        record.write_text(_fingerprint(built) + "\n")
        # Library first, then its record: a reader that sees the new record sees the new library.
        os.replace(built, target)  # atomic: a concurrent build leaves one complete library
        os.replace(record, _record(target))
    return target


@functools.cache
def _register() -> None:
    path = build()
    if not verified(path):  # replaced between the build and here
        raise NativeBuildError(f"the native grid_sample kernel {path} changed after it was built; "
                               "delete it to rebuild, or use implementation='xla'")
    library = ctypes.cdll.LoadLibrary(str(path))
    for name in ("SidebysideGridSampleForward", "SidebysideGridSampleBackward"):
        jax.ffi.register_ffi_target(name, jax.ffi.pycapsule(getattr(library, name)), platform="cpu")


@functools.cache
def available() -> bool:
    """Whether the kernel is built and registered (builds it on first call). Warns
    once, with the reason, when it is not."""
    try:
        _register()
    except (NativeBuildError, OSError) as exc:
        warnings.warn(f"sidebyside.grid_sample: native CPU kernel unavailable, using the XLA path ({exc})",
                      RuntimeWarning, stacklevel=3)
        return False
    return True


def _attrs(mode, padding_mode, align_corners):
    return dict(mode=np.int64(_MODES[mode]), padding=np.int64(_PADDINGS[padding_mode]), align_corners=bool(align_corners))


def _forward_call(input, grid, mode, padding_mode, align_corners):
    _register()
    n, c = input.shape[:2]
    out = jax.ShapeDtypeStruct((n, c, *grid.shape[1:-1]), input.dtype)
    return jax.ffi.ffi_call("SidebysideGridSampleForward", out, vmap_method="broadcast_all")(
        input, grid, **_attrs(mode, padding_mode, align_corners))


_forward = first_order_only(_forward_call, "native", (2, 3, 4))


def _backward_call(input, grid, cot, mode, padding_mode, align_corners):
    _register()
    shapes = (jax.ShapeDtypeStruct(input.shape, input.dtype), jax.ShapeDtypeStruct(grid.shape, grid.dtype))
    return jax.ffi.ffi_call("SidebysideGridSampleBackward", shapes, vmap_method="broadcast_all")(
        input, grid, cot, **_attrs(mode, padding_mode, align_corners))


_backward = first_order_only(_backward_call, "native", (3, 4, 5))


@functools.partial(jax.custom_vjp, nondiff_argnums=(2, 3, 4))
def grid_sample_native(input, grid, mode: str, padding_mode: str, align_corners: bool):
    """float32 ``grid_sample`` through the native CPU kernel (arguments checked by
    :func:`sidebyside.grid_sample`, which calls this). First-order reverse mode: the
    backward kernel has no derivative of its own."""
    return _forward(input, grid, mode, padding_mode, align_corners)


def _vjp_forward(input, grid, mode, padding_mode, align_corners):
    return _forward(input, grid, mode, padding_mode, align_corners), (input, grid)


def _vjp_backward(mode, padding_mode, align_corners, residuals, cot):
    input, grid = residuals
    return _backward(input, grid, cot, mode, padding_mode, align_corners)


grid_sample_native.defvjp(_vjp_forward, _vjp_backward)


if __name__ == "__main__":
    print(build())
    sys.exit(0)
