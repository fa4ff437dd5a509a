"""``grid_sample`` in JAX with the semantics of PyTorch's ATen kernels.

Input contract (the layout of ``torch.nn.functional.grid_sample``):

- ``input``: ``(N, C, H, W)`` (4-D) or ``(N, C, D, H, W)`` (5-D), a floating dtype
  (float16, bfloat16, float32, float64).
- ``grid``: ``(N, H_out, W_out, 2)`` or ``(N, D_out, H_out, W_out, 3)``, the same dtype,
  coordinates in ``[-1, 1]`` for the image's extent, ordered ``(x, y[, z])``
  (x indexes W, y indexes H, z indexes D).
- ``mode``: ``"nearest"``, ``"bilinear"`` (trilinear for 5-D, as in PyTorch) or
  ``"bicubic"`` (4-D only); ``padding_mode``: ``"zeros"``, ``"border"`` or
  ``"reflection"``; ``align_corners``: as in PyTorch.
- Output: ``(N, C, H_out, W_out)`` / ``(N, C, D_out, H_out, W_out)``, input's dtype.
  An empty batch (or no channels, or an empty grid) gives an empty result, as in
  PyTorch.

What "PyTorch's semantics" means here, point by point:

- Unnormalisation: ``align_corners=True`` maps -1 and 1 to the centres of the corner
  pixels, ``False`` to their outer edges, rounded as PyTorch rounds it: once (a fused
  multiply-add) in 2-D everywhere and in 3-D on a GPU (PyTorch's CUDA kernels and its
  vectorised 2-D CPU kernel), twice in 3-D on the CPU (PyTorch's scalar 3-D CPU
  kernel). :mod:`.taps` computes these roundings explicitly, so they do not depend on
  what XLA, Triton or g++ fuse; with an ulp more or less a coordinate lands on
  another side of a pixel boundary in large images (345 x 456 is enough).
- ``border`` and ``reflection`` act on the float coordinate before interpolation;
  reflection is about -0.5 and size - 0.5 when ``align_corners=False`` (about 0 and
  size - 1 otherwise) and is then clipped to ``[0, size - 1]``.
- Bicubic uses A = -0.75 and applies the padding to each of its 16 integer taps.
- Nearest rounds half to even.
- Half precision (float16, bfloat16) is computed in the dtype, as PyTorch's CPU
  kernels do. The coordinates round every operation to the dtype explicitly
  (``taps.round_to_dtype``), so that which pixel a point falls in does not depend on
  XLA keeping float32 between fused operations; elsewhere it may, which changes the
  last bit of some outputs and gradients.
- Gradients (with respect to input and grid) are those of PyTorch's backward: a
  coordinate clipped at a border, or equal to it, passes no gradient to the grid (the
  clip is written with ``where``, never ``clip``/``maximum``, which would split a
  gradient 0.5/0.5 at a tie); nearest passes none to the grid at all.

Non-finite grid values (NaN, +-inf) never raise. Every path here (XLA, Pallas,
native) follows PyTorch's **CUDA** kernels (``safe_downgrade_to_int_range`` in ATen's
``GridSampler.cuh``), and none follows its CPU kernels: ``border``/``reflection``
clamp a NaN coordinate to 0 and +-inf to the nearer edge (reflection of an infinity is
NaN, hence 0); a coordinate that is still non-finite after padding (``zeros``) is out
of bounds, so it samples 0 and passes a zero gradient. Bicubic weights computed from
a non-finite coordinate are NaN, so bicubic returns NaN there, as both PyTorch
backends do. PyTorch's CPU kernels disagree with each other: the 2-D CPU kernel
returns NaN for ``zeros`` with bilinear, and its backward crashes the process
(segmentation fault, torch 2.14.1) for NaN with ``border``/``reflection``; the 3-D CPU
kernel clamps NaN to size - 1.

The package: this face (checks, the choice of path); :mod:`.taps`, the arithmetic
every backend shares; :mod:`.xla`, the plain XLA path; :mod:`.pallas`, the GPU
kernels; :mod:`.native`, the C++ CPU kernel (``grid_sample_cpu.cc``, shipped in the wheel
and built on first use); :mod:`.parity`, the comparison with PyTorch; :mod:`.bench`, the
benchmark (``python -m sidebyside.posts.bench grid_sample``), with :mod:`.chain` (its kernel
time) and :mod:`.goals` (its goals and tables). The backends import :mod:`.taps`, never this
face. The package is itself callable: ``sidebyside.grid_sample(input, grid, ...)`` is
:func:`grid_sample`. The grid-sample-parity post keeps only its report
(``sidebyside.posts.grid_sample.report``).
"""

from __future__ import annotations

import importlib
import sys
import types
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from sidebyside._lazy import package
from sidebyside.grid_sample.taps import FORWARD_MODE_HELP, MODES, PADDING_MODES
from sidebyside.grid_sample.xla import sample_2d, sample_3d

_MODULES, __getattr__ = package(__name__, __path__)
__all__ = ["grid_sample", "choose_implementation", "check_inputs", "MODES", "PADDING_MODES",
           "IMPLEMENTATIONS", *_MODULES]

IMPLEMENTATIONS = ("auto", "xla", "pallas", "native")


#: Every path indexes with 32-bit integers (XLA's gathers, the Pallas kernels, the C++ kernel).
INDEX_LIMIT = 2**31


def check_inputs(input: Any, grid: Any, mode: str, padding_mode: str, align_corners: Any = False) -> None:
    """Raise what PyTorch raises for what it rejects, with its wording: ``TypeError``
    for an ``align_corners`` that is not a ``bool`` (or ``None``, which PyTorch reads as
    ``False``), ``ValueError`` for modes, shapes and dtypes. Also ``ValueError`` where
    PyTorch would go on but this implementation cannot: an input, grid or output of
    :data:`INDEX_LIMIT` (2**31) elements or more, beyond the 32-bit indices of every
    path (xla, pallas, native). Reads shapes and dtypes only (no data)."""
    if align_corners is not None and type(align_corners) is not bool:
        kind = type(align_corners)
        name = kind.__name__ if kind.__module__ == "builtins" else f"{kind.__module__}.{kind.__name__}"
        raise TypeError(f"grid_sampler(): argument 'align_corners' (position 5) must be bool, not {name}")
    if mode not in MODES:
        raise ValueError(
            f"grid_sample(): expected mode to be 'bilinear', 'nearest' or 'bicubic', but got: {mode!r}"
        )
    if padding_mode not in PADDING_MODES:
        raise ValueError(
            "grid_sample(): expected padding_mode to be 'zeros', 'border', or 'reflection', "
            f"but got: {padding_mode!r}"
        )
    in_shape, grid_shape = tuple(np.shape(input)), tuple(np.shape(grid))
    if len(in_shape) not in (4, 5) or len(grid_shape) != len(in_shape):
        raise ValueError(
            "grid_sample(): expected 4D or 5D input and grid with same number of dimensions, "
            f"but got input with sizes {list(in_shape)} and grid with sizes {list(grid_shape)}"
        )
    if in_shape[0] != grid_shape[0]:
        raise ValueError(
            "grid_sample(): expected grid and input to have same batch size, but got "
            f"input with sizes {list(in_shape)} and grid with sizes {list(grid_shape)}"
        )
    spatial = len(in_shape) - 2
    if grid_shape[-1] != spatial:
        raise ValueError(
            f"grid_sample(): expected grid to have size {spatial} in last dimension, but got "
            f"grid with sizes {list(grid_shape)}"
        )
    if any(s == 0 for s in in_shape[2:]):
        raise ValueError(
            f"grid_sample(): expected input to have non-empty spatial dimensions, but input has sizes {list(in_shape)}"
        )
    if mode == "bicubic" and spatial != 2:
        raise ValueError("grid_sample(): bicubic interpolation only supports 4D input")
    in_dtype, grid_dtype = jnp.result_type(input), jnp.result_type(grid)
    if not jnp.issubdtype(in_dtype, jnp.floating) or not jnp.issubdtype(grid_dtype, jnp.floating):
        raise ValueError(
            f"grid_sample(): expected floating-point input and grid, but got {in_dtype} and {grid_dtype}"
        )
    if in_dtype != grid_dtype:
        raise ValueError(
            f"grid_sample(): expected input and grid to have same dtype, but input has {in_dtype} "
            f"and grid has {grid_dtype}"
        )
    out_shape = (in_shape[0], in_shape[1], *grid_shape[1:-1])
    for name, shape in (("input", in_shape), ("grid", grid_shape), ("output", out_shape)):
        if int(np.prod(shape, dtype=object)) >= INDEX_LIMIT:
            raise ValueError(
                f"grid_sample(): the {name} holds {int(np.prod(shape, dtype=object))} elements (sizes "
                f"{list(shape)}); every path here (xla, pallas, native) indexes with 32-bit integers, so input, grid "
                f"and output must each hold fewer than 2**31 = {INDEX_LIMIT} elements. Split the call along the "
                "batch or the channels (or the output points) and concatenate the results."
            )


def choose_implementation(input_shape, grid_shape, dtype, implementation: str = "auto") -> str:
    """The path :func:`grid_sample` takes for these arguments: ``"pallas"``,
    ``"native"`` or ``"xla"`` (see its ``implementation``). Raises ``ValueError`` when
    the one asked for cannot take them, and the native kernel's build error when it was
    asked for and cannot be built; ``"auto"`` falls back to XLA instead."""
    if implementation not in IMPLEMENTATIONS:
        raise ValueError(f"grid_sample(): implementation must be one of {IMPLEMENTATIONS}, got {implementation!r}")
    backend = jax.default_backend()
    if implementation == "native":
        from sidebyside.grid_sample import native

        if backend != "cpu":
            raise ValueError(f"grid_sample(): the native kernel runs on the CPU backend; this is {backend!r}. "
                             "Use implementation='auto'.")
        if not native.supported(input_shape, grid_shape, dtype):
            raise ValueError("grid_sample(): the native kernel takes 4-D or 5-D float32 input, each image under "
                             "2**31 pixels; got input "
                             f"{list(input_shape)} of {jnp.dtype(dtype)}. Use implementation='xla' (or 'auto').")
        native.build()  # raises NativeBuildError with the reason
        return "native"
    if implementation == "pallas":
        from sidebyside.grid_sample import pallas

        if not pallas.supported(input_shape, grid_shape, dtype):
            raise ValueError(
                "grid_sample(): the Pallas kernels take 4-D or 5-D float32 input (and fewer than 2**31 elements); "
                f"got input {list(input_shape)} of {jnp.dtype(dtype)}. Use implementation='xla' (or 'auto')."
            )
        return "pallas"
    if implementation == "auto" and backend == "gpu":
        from sidebyside.grid_sample import pallas

        if pallas.supported(input_shape, grid_shape, dtype):
            return "pallas"
    if implementation == "auto" and backend == "cpu":
        from sidebyside.grid_sample import native

        if native.supported(input_shape, grid_shape, dtype) and native.available():
            return "native"
    return "xla"


def _output_shape(input_shape, grid_shape):
    return (input_shape[0], input_shape[1], *grid_shape[1:-1])


def grid_sample(input, grid, mode: str = "bilinear", padding_mode: str = "zeros", align_corners: bool = False, *,
                implementation: str = "auto", pallas_layout: str = "points"):
    """Sample ``input`` at the locations in ``grid``, exactly as
    ``torch.nn.functional.grid_sample`` does (see the package docstring).

    ``input`` (N, C, H, W) or (N, C, D, H, W); ``grid`` (N, H_out, W_out, 2) or
    (N, D_out, H_out, W_out, 3), same floating dtype. Returns (N, C, H_out, W_out) or
    (N, C, D_out, H_out, W_out) in that dtype. Raises ``ValueError`` on shapes, dtypes,
    modes or paddings PyTorch rejects, ``TypeError`` on a non-bool ``align_corners``, and
    ``ValueError`` on sizes of 2**31 elements or more (see :func:`check_inputs`).

    ``implementation``: ``"xla"`` (gathers, any backend, every transformation),
    ``"pallas"`` (the kernels of :mod:`sidebyside.grid_sample.pallas`: float32 only;
    on a backend other than CUDA they run in Pallas' interpreter, slowly),
    ``"native"`` (the C++ CPU kernel of :mod:`sidebyside.grid_sample.native`: float32 on
    the CPU), or ``"auto"`` (default): the Pallas kernels on a CUDA GPU (float32)
    and the native kernel on the CPU (float32) where they apply, else XLA. Both kernels
    support first-order reverse-mode differentiation only; ``jax.jvp``,
    ``jax.jacfwd`` or a gradient of a gradient through them raises a ``ValueError``
    that says to pass ``implementation="xla"``.

    ``pallas_layout``: how the Pallas kernels split the work, ``"points"`` (default)
    or ``"channels"`` (tiles of points x channels, the taps reused across a block of
    channels; see :mod:`sidebyside.grid_sample.pallas`). Same results; only the speed
    differs, and only where the Pallas kernels run.
    """
    check_inputs(input, grid, mode, padding_mode, align_corners)
    if pallas_layout not in ("points", "channels"):
        raise ValueError(f"grid_sample(): pallas_layout must be 'points' or 'channels', got {pallas_layout!r}")
    input = jnp.asarray(input)
    grid = jnp.asarray(grid)
    align_corners = bool(align_corners)  # a bool, or None (False, as in PyTorch): check_inputs refused the rest
    path = choose_implementation(input.shape, grid.shape, input.dtype, implementation)
    out_shape = _output_shape(input.shape, grid.shape)
    if 0 in out_shape:
        # Nothing to sample (N, C or the grid is empty): PyTorch returns an empty tensor.
        return jnp.zeros(out_shape, input.dtype)
    if path in ("native", "pallas"):
        try:
            if path == "native":
                from sidebyside.grid_sample import native

                return native.grid_sample_native(input, grid, mode, padding_mode, align_corners)
            from sidebyside.grid_sample import pallas

            interpret = jax.default_backend() != "gpu"
            return pallas.grid_sample_pallas(input, grid, mode, padding_mode, align_corners, interpret, pallas_layout)
        except TypeError as exc:  # jax.jvp of the custom_vjp itself
            if "forward-mode" in str(exc) or "jvp" in str(exc):
                raise ValueError(FORWARD_MODE_HELP.format(path=path)) from exc
            raise
    if input.ndim == 4:
        out = sample_2d(input, grid, mode, padding_mode, align_corners)
    else:
        # PyTorch's 3-D CPU kernel rounds the unnormalisation twice, its CUDA kernel once.
        out = sample_3d(input, grid, mode, padding_mode, align_corners, fused=jax.default_backend() != "cpu")
    return out.astype(input.dtype)


class _CallablePackage(types.ModuleType):
    """This package's module type: calling the package calls :func:`grid_sample`, so that
    ``sidebyside.grid_sample`` is both the package and the function (``from sidebyside import
    grid_sample; grid_sample(x, g)``)."""

    def __call__(self, *args: Any, **kwargs: Any):
        return grid_sample(*args, **kwargs)

    def __reduce__(self):
        # pickled by name, as pickle and cloudpickle send a plain module (a function that calls the
        # package, sent to a worker process, refers to it)
        return importlib.import_module, (self.__name__,)


sys.modules[__name__].__class__ = _CallablePackage
