"""sidebyside.grid_sample against torch.nn.functional.grid_sample (CPU).

Every mode x padding x align_corners x 2-D/3-D x dtype: outputs and both gradients,
on grids that mix random points in [-2, 2] with pixel centres, pixel edges,
half-pixels and points far outside (the "special" case of sidebyside.grid_sample.parity),
and on PyTorch's kind of reference case: a 345 x 456 image of 0-255 values under a
45-degree affine warp (the "affine" case), where a coordinate rounded once more or
less than PyTorch rounds it shows. Tolerances are documented in parity.tolerance:
nearest exact, float32 1e-5 and float64 1e-10 of the output's scale, half precision
a few eps of the dtype. float64 runs inside `jax.enable_x64(True)`, which is local to
the call and does not leak into other tests.

One program per configuration and path. Compiling is what costs here (seconds a program;
running these batches takes milliseconds), so a configuration's special case is one batch
(`special_case`) that every path runs, each path (implementation x transform x Pallas
layout) is compiled once per configuration for the whole module (`program`), and its
results are shared by every test that reads them (`results`): the Pallas points layout's
by the comparison with PyTorch and by the channels layout's, and the jitted XLA, native and
Pallas results by the non-finite tests, which read the batch element that holds their grid.

Each parity matrix comes in three tiers (`tiered`), each case in one:

- fast (`FAST`): no mark, so `pytest -m "not slow"` runs it, in seconds. Taken together it
  covers every mode, padding, align_corners, 2-D/3-D, dtype and implementation
  (test_fast_sample_covers_every_option).
- sample (`SAMPLE`): marked slow; `make test` and CI run it on every run. With the fast tier
  it runs every path of every kind of case (special, affine, non-finite), and each
  implementation (XLA, Pallas, native) in every mode, padding, align_corners, 2-D/3-D and
  dtype it takes (test_sample_covers_every_option_on_every_path).
- full (every other case): marked slow, and run where the code it tests is not the code on
  which it last passed (`full_tier_marks`), or everywhere with SIDEBYSIDE_FULL_PARITY=1.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import warnings
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import torch
import torch.nn.functional as F

from sidebyside import grid_sample
from sidebyside.grid_sample import parity

ALL = parity.configs()
F32 = parity.configs(("float32",))

# ------------------------------------------------------------------ where the full tier runs

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "src" / "sidebyside" / "grid_sample"
#: The code the parity matrices hold to PyTorch (files of PACKAGE): every path they run, and the harness that
#: measures it.
PARITY_CODE = ["__init__.py", "taps.py", "xla.py", "native.py", "grid_sample_cpu.cc", "pallas.py", "parity.py"]
FULL_ENV = "SIDEBYSIDE_FULL_PARITY"
#: code_fingerprint() of the code on which every case of the full tier last passed (on a CPU).
FULL_TIER_PASSED_ON = "847cecfc0458f299"


def code_fingerprint(package: Path = PACKAGE) -> str:
    """A digest of the contents of PARITY_CODE in ``package``, in that order (not of where the files
    lie: a move keeps it), of the versions of JAX, jaxlib and PyTorch (less a local build tag such as
    +cu130) and of JAX's backend: what the matrices' numbers depend on."""
    import jaxlib

    digest = hashlib.sha256()
    for name in PARITY_CODE:
        digest.update((package / name).read_bytes() + b"\0")
    for part in (jax.__version__, jaxlib.__version__, torch.__version__.split("+")[0], jax.default_backend()):
        digest.update(part.encode() + b"\0")
    return digest.hexdigest()[:16]


CODE = code_fingerprint()
# The full tier's cases that passed on this code in this checkout (written by the runs before this one).
LOCAL_RECORD = ROOT / "build" / "full-parity" / f"grid_sample-{CODE}.json"


def _passed_here() -> set[str]:
    try:
        return set(json.loads(LOCAL_RECORD.read_text()))
    except (OSError, ValueError):
        return set()


PASSED_HERE = _passed_here()


def full_tier_marks(name: str) -> list:
    """Marks of the full tier's case ``name`` (``test_function[id]``): slow, and skipped where the
    code is the code on which it last passed: FULL_TIER_PASSED_ON (committed), or a pass of this
    case on this code that an earlier run in this checkout recorded (LOCAL_RECORD, under build/).
    With ``SIDEBYSIDE_FULL_PARITY=1`` it runs anyway."""
    if os.environ.get(FULL_ENV) == "1":
        return [pytest.mark.slow]
    if CODE == FULL_TIER_PASSED_ON:
        reason = (f"full parity tier: grid_sample's code is the code it last passed on ({CODE}); it runs where "
                  f"that code changes, or with {FULL_ENV}=1")
    elif name in PASSED_HERE:
        reason = f"full parity tier: passed on this code ({CODE}) in this checkout, as {LOCAL_RECORD} records"
    else:
        return [pytest.mark.slow]
    return [pytest.mark.slow, pytest.mark.skip(reason=reason)]


def record_pass(request) -> None:
    """Record that the running case passed on this code (read by full_tier_marks); nothing to
    record where the code is FULL_TIER_PASSED_ON."""
    if CODE == FULL_TIER_PASSED_ON:
        return
    passed = _passed_here() | {request.node.name}
    LOCAL_RECORD.parent.mkdir(parents=True, exist_ok=True)
    partial = LOCAL_RECORD.with_name(f"{LOCAL_RECORD.name}.{os.getpid()}")
    partial.write_text(json.dumps(sorted(passed), indent=0) + "\n")
    os.replace(partial, LOCAL_RECORD)  # whole or not at all, for a run beside this one


# ------------------------------------------------------------------ the tiers

# The non-finite tests' configurations: every mode x padding x 2-D/3-D, align_corners=False, float32.
NON_FINITE_CONFIGS = [(p, m, d) for d in (2, 3) for m in ("nearest", "bilinear", "bicubic")[:3 if d == 2 else 2]
                      for p in ("zeros", "border", "reflection")]
NON_FINITE = [(p, m, d, impl) for impl in ("xla", "auto", "pallas") for p, m, d in NON_FINITE_CONFIGS]  # auto: native

EVERY = "every case"  # a sample tier that takes every case the fast tier leaves
# The fast and the sample tier of each matrix (see the module docstring), by test id. The cases of
# Pallas, non-finite and XLA jit share their programs where they can (e.g. nearest/border/False/3d
# and bicubic/zeros/False/2d float32: Pallas points and channels layouts, XLA jit, the non-finite grid).
FAST = {
    "matches_pytorch": {"nearest/zeros/False/2d/float16", "bilinear/border/True/2d/bfloat16"},
    "transformed": {"bilinear/reflection/False/3d/float64-jit", "nearest/border/True/2d/float32-vmap"},
    "pallas": {"nearest/reflection/True/2d/float32-jit", "nearest/border/False/3d/float32-jit"},
    "channels": set(),  # Pallas' interpreter compiles for seconds: the layout's sample runs under make test
    "native": {"nearest/reflection/True/3d/float32-none", "bilinear/zeros/False/2d/float32-vmap",
               "bicubic/border/False/2d/float32-jit"},
    "affine": {"bilinear/border/False/3d/float32-native-jit"},
    "affine_7x1000": {"bilinear-native-jit"},
    "affine_pallas": set(),
    "affine_float64": set(),
    "non_finite": {"border-nearest-3-xla", "reflection-bicubic-2-auto", "border-bilinear-3-auto"},
    "every_path": {"border-nearest-3"},
    "clipped": {"False-border-xla", "True-reflection-native"},
    "empty": {"xla-0x3x5x6", "native-0x2x3x5x6", "pallas-2x3x5x6", "native-2x0x5x6"},
}
SAMPLE = {
    "matches_pytorch": {"bilinear/zeros/True/3d/float64"},
    "transformed": {"bicubic/zeros/False/2d/float32-jit", "bilinear/reflection/False/3d/float32-jit"},
    "pallas": {"bicubic/zeros/False/2d/float32-jit", "bilinear/reflection/False/3d/float32-jit",
               "bilinear/reflection/True/2d/float32-jit", "nearest/border/True/2d/float32-vmap"},
    "channels": {"bilinear/reflection/True/2d/float32", "nearest/border/False/3d/float32",
                 "bicubic/zeros/False/2d/float32"},
    "native": EVERY,  # the native kernel compiles in a fraction of a second
    "affine": {"bicubic/zeros/False/2d/float32-xla-none", "bilinear/border/True/3d/float32-xla-jit",
               "nearest/reflection/False/2d/float32-native-jit"},
    "affine_7x1000": {"bicubic-native-jit", "nearest-native-jit"},
    "affine_pallas": {"bilinear-False"},
    "affine_float64": {"bilinear"},
    "non_finite": ({f"{case}-{impl}" for case in ("zeros-bicubic-2", "reflection-bilinear-3", "border-nearest-3")
                    for impl in ("xla", "pallas")} | {f"{p}-{m}-{d}-auto" for p, m, d in NON_FINITE_CONFIGS}),
    "every_path": {"zeros-bicubic-2", "reflection-bilinear-3"},
    "clipped": EVERY,
    "empty": EVERY,
}
# Each parity matrix's cases: (test id, configuration, path), for the coverage tests.
MATRICES: dict[str, list[tuple[str, parity.Config, str]]] = {}
TIERED: set[str] = set()  # the test functions whose cases are tiered


def tiered(test: str, matrix: str, cases, ids, configs=None, paths=None):
    """``cases`` (of ``test``) as pytest params in their tiers: the fast tier (``FAST[matrix]``)
    unmarked, the sample tier (``SAMPLE[matrix]``) slow, the rest in the full tier
    (:func:`full_tier_marks`). With ``configs`` and ``paths`` (one per case) the matrix is
    registered for the coverage tests."""
    fast, sample = FAST[matrix], SAMPLE[matrix]
    unknown = (fast | (set() if sample is EVERY else sample)) - set(ids)
    assert not unknown, f"FAST or SAMPLE names cases of {matrix} that do not exist: {sorted(unknown)}"
    TIERED.add(test)
    if configs is not None:
        MATRICES[matrix] = list(zip(ids, configs, paths))
    params = []
    for case, i in zip(cases, ids):
        if i in fast:
            marks = []
        elif sample is EVERY or i in sample:
            marks = [pytest.mark.slow]
        else:
            marks = full_tier_marks(f"{test}[{i}]")
        params.append(pytest.param(*(case if isinstance(case, tuple) else (case,)), id=i, marks=marks))
    return params


def assert_within(r, *context):
    for q in ("", "grad_input_", "grad_grid_"):
        assert r[f"{q}max_rel_err"] <= r[f"{q}tolerance"], (q or "output", *context, r)


# ------------------------------------------------------------------ one program per configuration and path

OUT_3D = (4, 5, 7)  # float32's 3-D output: 140 points, room for the 125 of the non-finite grid
NON_FINITE_VALUES = np.array([np.nan, np.inf, -np.inf, 0.25, -3.0])
NON_FINITE_ELEMENT = 2  # its batch element, after parity's two


@functools.cache
def special_case(config):
    """The special case of ``config``: (input, grid, cotangent), float64 NumPy arrays rounded
    to its dtype (identical values on both sides), from :func:`parity.make_inputs` (seed 0).

    float32, the kernels' dtype, has 17 channels with align_corners=False and 1 with True
    (across one channel tile of the Pallas channels layout, 16, and below one) and 3-D outputs
    of :data:`OUT_3D`; with align_corners=False the batch holds one more element after
    parity's two, the non-finite grid: every point of {nan, inf, -inf, 0.25, -3.0} per axis,
    then 0.25, on an image of its own (seed 1), with a cotangent of ones. Other dtypes:
    parity's defaults (3 channels, two batch elements)."""
    if config.dtype != "float32":
        return parity._case_inputs(config, 0, "special", {})
    x, grid, cot = parity.make_inputs(config, seed=0, channels=1 if config.align_corners else 17, out3d=OUT_3D)
    if not config.align_corners:
        dims = config.dims
        points = np.stack(np.meshgrid(*([NON_FINITE_VALUES] * dims), indexing="ij"), -1).reshape(-1, dims)
        bad = np.full((1, *grid.shape[1:]), 0.25)
        bad.reshape(-1, dims)[:len(points)] = points
        image = np.random.default_rng(1).standard_normal((1, *x.shape[1:]))
        x, grid, cot = (np.concatenate(pair) for pair in ((x, image), (grid, bad), (cot, np.ones_like(cot[:1]))))
    return tuple(parity._round_to(a, config.dtype) for a in (x, grid, cot))


@functools.cache
def program(config, implementation: str, transform: str, layout: str = "points"):
    """``(input, grid, cotangent) -> (output, input gradient, grid gradient)`` of ``config``
    through ``implementation`` (and Pallas ``layout``) under ``transform`` ("none": op by op;
    "jit"; "vmap": over the batch, each example a batch of one, jitted), as
    :func:`parity.run_jax` builds it; one function per configuration and path for the module,
    so that each is compiled once per shape."""
    def value_and_grads(x, g, c):
        out, vjp = jax.vjp(lambda a, b: grid_sample(a, b, config.mode, config.padding_mode, config.align_corners,
                                                    implementation=implementation, pallas_layout=layout), x, g)
        return (out, *vjp(c))

    if transform == "jit":
        return jax.jit(value_and_grads)
    if transform == "vmap":
        return jax.jit(jax.vmap(lambda x, g, c: tuple(t[0] for t in value_and_grads(x[None], g[None], c[None]))))
    assert transform == "none", transform
    return value_and_grads


def run(config, implementation: str, transform: str, arrays, layout: str = "points"):
    """:func:`program` on ``arrays`` (float64 NumPy, cast to the dtype): float64 NumPy results."""
    with jax.enable_x64(config.dtype == "float64"):
        dtype = jnp.dtype(config.dtype)
        out = program(config, implementation, transform, layout)(*(jnp.asarray(a, dtype) for a in arrays))
        return tuple(np.asarray(t.astype(jnp.float32) if t.dtype == jnp.bfloat16 else t, np.float64) for t in out)


@functools.cache
def results(config, implementation: str, transform: str, layout: str = "points"):
    """:func:`run` on the special case, once per configuration and path for the module."""
    return run(config, implementation, transform, special_case(config), layout)


@functools.cache
def reference(config):
    """PyTorch's output and gradients on parity's part of the special case (not the non-finite grid)."""
    return parity.run_torch(config, *(a[:2] for a in special_case(config)))


def compare(config, ref, got) -> dict:
    """:func:`parity.measure`'s errors and tolerances of ``got`` against ``ref`` (the batch
    elements ``ref`` has)."""
    return parity._compare(config, ref, [g[:len(r)] for r, g in zip(ref, got)], atomic=jax.default_backend() == "gpu")


def check_special(config, implementation, transform, layout="points"):
    assert_within(compare(config, reference(config), results(config, implementation, transform, layout)),
                  implementation, transform, layout)


# ------------------------------------------------------------------ the special case

@pytest.mark.parametrize("config", tiered("test_matches_pytorch", "matches_pytorch", ALL, [c.key for c in ALL], ALL,
                                          ["xla-none"] * len(ALL)))
def test_matches_pytorch(config, request):
    # Op by op (no jit): each primitive compiles once per shape and is reused across the
    # 120 configurations. jit and vmap follow below.
    check_special(config, "xla", "none")
    record_pass(request)


# The same comparison under jit and under vmap (over the batch), on a cross-section: every
# mode x padding x 2-D/3-D, align_corners alternating, in float32 and (jit only) float64.
def _cross_section(dtype):
    return [c for c in parity.configs((dtype,)) if c.align_corners == (c.padding_mode == "border")]


TRANSFORMED = [(c, t) for c in _cross_section("float32") for t in ("jit", "vmap")]
TRANSFORMED += [(c, "jit") for c in _cross_section("float64") if c.mode != "nearest"]


@pytest.mark.parametrize("config, transform", tiered(
    "test_matches_pytorch_transformed", "transformed", TRANSFORMED, [f"{c.key}-{t}" for c, t in TRANSFORMED],
    [c for c, _ in TRANSFORMED], [f"xla-{t}" for _, t in TRANSFORMED]))
def test_matches_pytorch_transformed(config, transform, request):
    check_special(config, "xla", transform)
    record_pass(request)


# The Pallas kernels (what a CUDA GPU runs for float32), here in Pallas' interpreter:
# every float32 mode x padding x align_corners, 2-D and 3-D, under jit, and a
# cross-section under vmap, held to the same tolerances.
PALLAS = [(c, "jit") for c in F32]
PALLAS += [(c, "vmap") for c in _cross_section("float32")]


@pytest.mark.parametrize("config, transform", tiered(
    "test_pallas_kernels_match_pytorch", "pallas", PALLAS, [f"{c.key}-{t}" for c, t in PALLAS],
    [c for c, _ in PALLAS], [f"pallas-{t}" for _, t in PALLAS]))
def test_pallas_kernels_match_pytorch(config, transform, request):
    check_special(config, "pallas", transform)
    record_pass(request)


@pytest.mark.parametrize("config", tiered("test_channels_layout_matches_points_layout_and_pytorch", "channels", F32,
                                          [c.key for c in F32], F32, ["pallas-channels"] * len(F32)))
def test_channels_layout_matches_points_layout_and_pytorch(config, request):
    """The channel-blocked layout of the Pallas kernels (``pallas_layout="channels"``, issue 13
    item 2), in Pallas' interpreter: the same numbers as PyTorch (parity's hard grid points and
    tolerances) and as the default "points" layout, in every mode, padding and align_corners,
    2-D and 3-D, forward and backward, at 1 and at 17 channels (below a channel tile of 16 and
    across one) and 140 or 143 output points (tiles of 32 points, the last partly empty)."""
    channel = results(config, "pallas", "jit", "channels")
    assert_within(compare(config, reference(config), channel), "channels")
    # Against the points layout: nearest's output (a copy) bit for bit; otherwise within parity's
    # float32 tolerance (same taps, same order of the sum per channel, but a compiler may
    # contract a multiply-add in a (channels x points) tile where it did not in a row). On a GPU
    # both layouts sum the input gradient with atomic adds, in an order that changes from run to
    # run: nearest's input gradient then gets the sum tolerance too (an H100 run differed by 1 ulp).
    n = len(reference(config)[0])  # parity's part of the batch
    points = [t[:n] for t in results(config, "pallas", "jit")]
    channel = [t[:n] for t in channel]
    atomic = jax.default_backend() == "gpu"
    if config.mode == "nearest":
        np.testing.assert_array_equal(channel[0], points[0])
    for name, want, got in zip(("output", "grad_input", "grad_grid"), points, channel):
        scale = max(float(np.abs(want).max()), 1.0)
        np.testing.assert_allclose(got, want, rtol=0, atol=parity.tolerance(config, "grad_input", atomic=atomic) * scale,
                                   err_msg=name)
    record_pass(request)


# The native CPU kernel (what "auto" runs on a CPU for float32): every float32
# configuration, 2-D and 3-D, op by op, under jit and under vmap, same tolerances.
NATIVE = [(c, t) for c in F32 for t in ("none", "jit", "vmap")]


@pytest.mark.parametrize("config, transform", tiered(
    "test_native_kernel_matches_pytorch", "native", NATIVE, [f"{c.key}-{t}" for c, t in NATIVE],
    [c for c, _ in NATIVE], [f"native-{t}" for _, t in NATIVE]))
def test_native_kernel_matches_pytorch(config, transform, request):
    check_special(config, "native", transform)
    record_pass(request)


def test_shared_programs_measure_what_parity_measures():
    """This module's programs and comparison (one program per configuration and path) give
    parity.measure's numbers on parity's own inputs (seed 0, its default sizes)."""
    config = parity.Config("nearest", "zeros", False, 2, "float16")
    assert compare(config, reference(config), results(config, "xla", "none")) == parity.measure(
        config, transform="none", implementation="xla")


@pytest.mark.slow  # a matrix of compiled kernels
@pytest.mark.parametrize("mode", ["nearest", "bilinear", "bicubic"])
@pytest.mark.parametrize("padding_mode", ["zeros", "border", "reflection"])
@pytest.mark.parametrize("align_corners", [False, True])
def test_native_vector_and_scalar_taps_agree_bit_for_bit(mode, padding_mode, align_corners):
    """The native kernel computes the taps of 8 points at a time with AVX2 and the rest
    one by one; both must give the same bits, at edges, half-way points, far outside and
    at non-finite coordinates. 64 points go the vector way, one point the scalar way.
    Bilinear's vector way reads each row's two taps as one pair of pixels, clamped inside
    the row at its edges: hence an image two pixels wide, and non-finite pixels at the
    edges, which a tap outside the image must not let through; six channels, so that nearest,
    which samples four at a time, also takes a part block. The same for the backward passes'
    taps and sums (the grid's and the input's gradients)."""
    from sidebyside.grid_sample import native

    if not native.available():
        pytest.skip("the native kernel cannot be built here")
    rng = np.random.default_rng(7)
    wide = rng.uniform(0, 255, (1, 6, 7, 10)).astype(np.float32)  # nearest: two blocks of channels
    wide[0, 0, 0, 0], wide[0, 1, 3, -1], wide[0, 2, -1, 0] = np.nan, np.inf, -np.inf
    images = [wide, rng.uniform(0, 255, (1, 2, 5, 2)).astype(np.float32)]
    if mode != "bicubic":  # 3-D: trilinear's taps (zeros, border) and the backward's sums, 8 points at a time or one by one
        images.append(rng.uniform(0, 255, (1, 3, 4, 7, 10)).astype(np.float32))
    for x in images:
        _vector_and_scalar_taps_agree(jnp.asarray(x), rng, mode, padding_mode, align_corners)


def _vector_and_scalar_taps_agree(x, rng, mode, padding_mode, align_corners):
    dims = x.ndim - 2
    special = np.array([np.nan, np.inf, -np.inf, -1.0, 1.0, 0.0, 1 / 7, -1 / 7, 1.1, -3.5, 1e10, 0.05])
    g = rng.uniform(-1.3, 1.3, (64, dims))
    for axis in range(dims):
        g[axis * len(special):(axis + 1) * len(special), axis] = special
    g = jnp.asarray(g.reshape((1,) * dims + (64, dims)).astype(np.float32))
    kw = dict(mode=mode, padding_mode=padding_mode, align_corners=align_corners, implementation="native")
    whole = jax.jit(lambda a, b: grid_sample(a, b, **kw))(x, g)
    one = jax.jit(lambda a, b: grid_sample(a, b, **kw))
    apart = jnp.concatenate([one(x, g[..., p:p + 1, :]) for p in range(64)], axis=-1)
    np.testing.assert_array_equal(np.asarray(whole), np.asarray(apart))
    # The backward passes take the vector taps too, on a random cotangent. Each point's grid
    # gradient is its own; the input gradient adds the points' terms in point order, as the
    # sum of the points' gradients does, where a point's taps are distinct pixels (nearest:
    # one tap; zeros padding: taps are never clamped onto each other).
    cot = jnp.asarray(rng.standard_normal((1, x.shape[1]) + (1,) * (dims - 1) + (64,)).astype(np.float32))
    loss = jax.jit(jax.grad(lambda a, b, c: (grid_sample(a, b, **kw) * c).sum(), argnums=(0, 1)))
    whole_input, whole_grid = loss(x, g, cot)
    apart = [loss(x, g[..., p:p + 1, :], cot[..., p:p + 1]) for p in range(64)]
    if mode != "nearest":
        np.testing.assert_array_equal(np.asarray(whole_grid), np.concatenate([a[1] for a in apart], axis=-2))
    if mode == "nearest" or padding_mode == "zeros":
        np.testing.assert_array_equal(np.asarray(whole_input), np.asarray(sum(a[0] for a in apart)))


# The affine case (issue 13): large images whose sides are not powers of two, 0-255
# values, a 45-degree warp. Before the unnormalisation was rounded explicitly, the
# XLA path run op by op differed from PyTorch by 1.3e-5 of the scale in 2-D (rounding
# twice where PyTorch rounds once; 1.5e-5 in the input gradient at 7 x 1000) and the
# jitted XLA path and the native kernel by 1.1e-5 in 3-D at 5 x 40 x 300 (fused where
# PyTorch's 3-D CPU kernel rounds twice). Each path is the configuration's program of the
# special case (compiled again for these shapes); the paths of a configuration follow each
# other and share its inputs and PyTorch's results.
@functools.lru_cache(maxsize=2)
def affine_case(config, size=None, batch=2):
    """The affine case's inputs (:func:`parity.make_affine_inputs`, seed 0, rounded to the
    dtype) and PyTorch's results on them."""
    arrays = parity._case_inputs(config, 0, "affine", {"size": size, "batch": batch})
    return arrays, parity.run_torch(config, *arrays)


def check_affine(config, implementation, transform, **sizes):
    arrays, ref = affine_case(config, **sizes)
    assert_within(compare(config, ref, run(config, implementation, transform, arrays)), implementation, transform)


AFFINE = [(c, impl, t) for c in F32 for impl, t in (("xla", "none"), ("xla", "jit"), ("native", "jit"))]


# The fast tier keeps the 3-D native case (PyTorch's CPU kernel rounds twice there) and,
# below, 7 x 1000 through the native kernel (once); taps' rounding is pinned in
# isolation by test_grid_sample_rounding.py.
@pytest.mark.parametrize("config, implementation, transform", tiered(
    "test_affine_case_matches_pytorch", "affine", AFFINE, [f"{c.key}-{impl}-{t}" for c, impl, t in AFFINE],
    [c for c, _, _ in AFFINE], [f"{impl}-{t}" for _, impl, t in AFFINE]))
def test_affine_case_matches_pytorch(config, implementation, transform, request):
    check_affine(config, implementation, transform)
    record_pass(request)


AFFINE_7X1000 = [(m, impl, t) for impl, t in (("xla", "none"), ("native", "jit")) for m in ("bilinear", "bicubic", "nearest")]


@pytest.mark.parametrize("mode, implementation, transform", tiered(
    "test_affine_case_7x1000", "affine_7x1000", AFFINE_7X1000, ["-".join(case) for case in AFFINE_7X1000],
    [parity.Config(m, "zeros", False, 2, "float32") for m, _, _ in AFFINE_7X1000],
    [f"{impl}-{t}" for _, impl, t in AFFINE_7X1000]))
def test_affine_case_7x1000(mode, implementation, transform, request):
    check_affine(parity.Config(mode, "zeros", False, 2, "float32"), implementation, transform, size=(7, 1000))
    record_pass(request)


AFFINE_PALLAS = [(m, ac) for m in ("bilinear", "bicubic") for ac in (False, True)]


@pytest.mark.parametrize("mode, align_corners", tiered(
    "test_affine_case_pallas", "affine_pallas", AFFINE_PALLAS, [f"{m}-{ac}" for m, ac in AFFINE_PALLAS],
    [parity.Config(m, "reflection", ac, 2, "float32") for m, ac in AFFINE_PALLAS], ["pallas-jit"] * 4))
def test_affine_case_pallas(mode, align_corners, request):
    # Pallas' interpreter on a 7 x 1000 image (the 345 x 456 one takes minutes there).
    check_affine(parity.Config(mode, "reflection", align_corners, 2, "float32"), "pallas", "jit", size=(7, 1000),
                 batch=1)
    record_pass(request)


@pytest.mark.parametrize("mode", tiered("test_affine_case_float64", "affine_float64", ["bilinear", "bicubic"],
                                        ["bilinear", "bicubic"],
                                        [parity.Config(m, "zeros", False, 2, "float64") for m in ("bilinear", "bicubic")],
                                        ["xla-jit"] * 2))
def test_affine_case_float64(mode, request):
    check_affine(parity.Config(mode, "zeros", False, 2, "float64"), "xla", "jit")
    record_pass(request)


# ------------------------------------------------------------------ the tiers' coverage

def test_fast_sample_covers_every_option():
    """What ``pytest -m "not slow"`` runs of the parity matrices (their fast tier), taken together,
    holds every mode, padding, align_corners, dimensionality and dtype, and every implementation:
    XLA op by op, under jit and under vmap, the native kernel and the Pallas kernels, each kernel
    in 2-D and 3-D with both align_corners."""
    for test in TIERED:  # no mark on a tiered test moves its fast tier out of that run
        assert not [m for m in getattr(globals()[test], "pytestmark", []) if m.name in ("slow", "skip")], test
    fast = [(c, p) for matrix, cases in MATRICES.items() for i, c, p in cases if i in FAST[matrix]]
    assert {c.mode for c, _ in fast} == {"nearest", "bilinear", "bicubic"}
    assert {c.padding_mode for c, _ in fast} == {"zeros", "border", "reflection"}
    assert {c.align_corners for c, _ in fast} == {False, True}
    assert {c.dims for c, _ in fast} == {2, 3}
    assert {c.dtype for c, _ in fast} == set(parity.DTYPES)
    paths = {p for _, p in fast}
    assert {"xla-none", "xla-jit", "xla-vmap"} <= paths
    for impl in ("pallas", "native"):  # each kernel: 2-D and 3-D, both align_corners
        mine = [c for c, p in fast if p.startswith(impl)]
        assert {c.dims for c in mine} == {2, 3} and {c.align_corners for c in mine} == {False, True}, impl


# The parity matrices by the kind of case they test.
KINDS = {"special": ("matches_pytorch", "transformed", "pallas", "channels", "native"),
         "affine": ("affine", "affine_7x1000", "affine_pallas", "affine_float64"),
         "non-finite": ("non_finite", "every_path")}


def test_sample_covers_every_option_on_every_path():
    """What every run of ``make test`` holds to PyTorch, whatever the code (the fast and the
    sample tier): every path (implementation x transform, or Pallas layout) of every kind of
    case, and each implementation in every mode, padding, align_corners, 2-D/3-D and dtype it
    takes. The full tier (every other case) runs where the code changed since it last passed
    (full_tier_marks: FULL_TIER_PASSED_ON, build/full-parity/), and with SIDEBYSIDE_FULL_PARITY=1."""
    assert set(MATRICES) == {m for matrices in KINDS.values() for m in matrices}
    chosen = {}
    for matrix, cases in MATRICES.items():
        sample = SAMPLE[matrix]
        chosen[matrix] = [(c, p) for i, c, p in cases if i in FAST[matrix] or sample is EVERY or i in sample]
    for kind, matrices in KINDS.items():
        paths = {p for m in matrices for _, _, p in MATRICES[m]}
        assert paths == {p for m in matrices for _, p in chosen[m]}, kind

    def implementation(path):
        return {"auto": "native", "every path": "xla"}.get(path, path.split("-")[0])

    every = [(c, implementation(p)) for cases in MATRICES.values() for _, c, p in cases]
    mine = [(c, implementation(p)) for cases in chosen.values() for c, p in cases]
    assert {"xla", "pallas", "native"} == {i for _, i in mine}
    for impl in ("xla", "pallas", "native"):
        for field in ("mode", "padding_mode", "align_corners", "dims", "dtype"):
            assert ({getattr(c, field) for c, i in mine if i == impl}
                    == {getattr(c, field) for c, i in every if i == impl}), (impl, field)
    assert {(c.mode, c.padding_mode, c.align_corners, c.dims, c.dtype) for c, _ in every} == {
        (c.mode, c.padding_mode, c.align_corners, c.dims, c.dtype) for c in ALL}  # the matrices hold every option


def test_full_tier_runs_where_the_code_changed(tmp_path):
    """The full tier is skipped only where the fingerprint of the code it tests (PARITY_CODE,
    the frameworks' versions, the backend) is FULL_TIER_PASSED_ON or a pass of the case on it is
    recorded in this checkout; any change to that code gives another fingerprint. Where the
    fingerprint is not the committed one, a warning names it: once the full tier passed on it
    (``SIDEBYSIDE_FULL_PARITY=1 pytest tests/grid_sample/test_grid_sample.py``), it is the
    value for FULL_TIER_PASSED_ON."""
    assert re.fullmatch("[0-9a-f]{16}", CODE) and code_fingerprint() == CODE
    assert all(callable(globals().get(test)) for test in TIERED), TIERED  # the names a case is recorded under
    for name in PARITY_CODE:  # the same files elsewhere: the same fingerprint
        shutil.copyfile(PACKAGE / name, tmp_path / name)
    assert code_fingerprint(tmp_path) == CODE
    with open(tmp_path / PARITY_CODE[1], "a") as f:
        f.write("\n")
    assert code_fingerprint(tmp_path) != CODE
    marks = full_tier_marks("test_matches_pytorch[nearest/zeros/False/2d/float16]")
    skipped = any(m.name == "skip" for m in marks)
    assert skipped == (os.environ.get(FULL_ENV) != "1" and (CODE == FULL_TIER_PASSED_ON or
                                                             "test_matches_pytorch[nearest/zeros/False/2d/float16]"
                                                             in PASSED_HERE))
    if CODE != FULL_TIER_PASSED_ON:
        warnings.warn(f"grid_sample's parity code changed since its full tier last passed: the full tier runs here "
                      f"until FULL_TIER_PASSED_ON in {Path(__file__).name} is set to {CODE!r} (once it passed)",
                      stacklevel=1)


def test_native_build_says_what_is_missing(tmp_path, monkeypatch):
    from sidebyside.grid_sample import native

    monkeypatch.setenv("SIDEBYSIDE_NATIVE_CACHE", str(tmp_path))
    monkeypatch.setenv("CXX", "no-such-compiler")
    with pytest.raises(native.NativeBuildError, match="apt-get install g\\+\\+"):
        native.build()
    assert not list(tmp_path.iterdir())  # nothing half-built left behind


_USE_NATIVE = """
import sys, warnings
import jax.numpy as jnp
from sidebyside import grid_sample
from sidebyside.grid_sample import native
out = grid_sample(jnp.ones((1, 1, 4, 4)), jnp.zeros((1, 2, 2, 2)), implementation="native")
print("sum", float(out.sum()), "verified", native.verified(native.build()))
"""


@pytest.mark.slow
def test_truncated_native_library_is_rebuilt_not_loaded(tmp_path):
    """A cached kernel cut short (a full disk, an interrupted copy) would kill the
    process with SIGBUS when mapped; its recorded size and hash catch it first."""
    from sidebyside.grid_sample import native

    # A cache of its own holding this machine's build and its record (compiling it costs seconds):
    # a process loads it as it is, ...
    built = native.build()
    library = tmp_path / built.name
    for source, target in ((built, library), (native._record(built), native._record(library))):
        shutil.copyfile(source, target)
    stamp = library.stat().st_mtime_ns
    env = {**os.environ, "SIDEBYSIDE_NATIVE_CACHE": str(tmp_path)}
    run = lambda: subprocess.run([sys.executable, "-c", _USE_NATIVE], env=env, capture_output=True, text=True,
                                 timeout=600)
    first = run()
    assert first.returncode == 0 and "sum 4.0 verified True" in first.stdout, first.stderr[-2000:]
    assert library.stat().st_mtime_ns == stamp  # loaded, not rebuilt
    # ... and rebuilds it cut short.
    size = library.stat().st_size
    with open(library, "r+b") as f:
        f.truncate(size // 2)
    second = run()
    assert second.returncode == 0, (second.returncode, second.stderr[-2000:])  # no SIGBUS (-7)
    assert "sum 4.0 verified True" in second.stdout
    assert library.stat().st_size == size  # rebuilt
    assert [p.name for p in tmp_path.glob("grid_sample_cpu-*.so")] == [library.name]


def test_verified_checks_size_and_hash(tmp_path):
    from sidebyside.grid_sample import native

    lib = tmp_path / "x.so"
    lib.write_bytes(b"\x7fELF" + bytes(100))
    assert not native.verified(lib)  # no record
    (tmp_path / "x.so.sha256").write_text(native._fingerprint(lib) + "\n")
    assert native.verified(lib)
    lib.write_bytes(b"\x7fELF" + bytes(99) + b"\x01")  # same size, other bytes
    assert not native.verified(lib)
    lib.write_bytes(b"\x7fELF")
    assert not native.verified(lib)


# Each Pallas layout with a channel count, padding and align_corners of its own: "points"
# keeps a few channels in one program, "channels" tiles many (20: a partial block).
LOWERING = [("points", 3, "reflection", False), ("channels", 20, "border", True)]


def _lowered_step(mode, padding_mode="zeros", align_corners=False, layout="points"):
    """A forward+backward step through the Pallas kernels, compiled for a GPU (not interpreted):
    ``(input, grid, cotangent) -> (output, (input gradient, grid gradient))``, to lower for CUDA."""
    from sidebyside.grid_sample.pallas import grid_sample_pallas

    def step(a, b, cc):
        out, vjp = jax.vjp(lambda p, q: grid_sample_pallas(p, q, mode, padding_mode, align_corners, False, layout),
                           a, b)
        return out, vjp(cc)

    return step


@pytest.mark.parametrize("layout, channels, padding_mode, align_corners", LOWERING, ids=[c[0] for c in LOWERING])
@pytest.mark.parametrize("dims", [2, pytest.param(3, marks=pytest.mark.slow)])
def test_pallas_kernels_lower_to_triton_for_cuda(dims, layout, channels, padding_mode, align_corners):
    """The kernels of each layout (the explicit FMA emulation of taps included: bit
    casts, masks; the channels layout's (channels x points) gathers, stores and atomic
    adds) go through Pallas' Triton lowering (no GPU needed to lower)."""
    if dims == 2:
        x, g, c = jnp.zeros((2, channels, 7, 9)), jnp.zeros((2, 11, 13, 2)), jnp.zeros((2, channels, 11, 13))
    else:
        x, g = jnp.zeros((2, channels, 5, 7, 9)), jnp.zeros((2, 4, 11, 13, 3))
        c = jnp.zeros((2, channels, 4, 11, 13))
    for mode in ("nearest", "bilinear", "bicubic")[:3 if dims == 2 else 2]:
        f = _lowered_step(mode, padding_mode, align_corners, layout)
        text = jax.jit(f).trace(x, g, c).lower(lowering_platforms=("cuda",)).as_text()
        assert text.count("__gpu$xla.gpu.triton") == 2, mode  # one forward and one backward kernel


@pytest.mark.slow  # lowers the benchmark's whole chain for CUDA (4 s)
def test_a_program_of_many_calls_lowers_each_kernel_once():
    """The benchmark's chain (32 calls on a GPU) and a model's layers call the kernels many times
    with the same shapes: each kernel is lowered to Triton once, and called where it is used (on a
    GPU the chain's lowering took seconds per configuration when every call lowered its own copy)."""
    from grid_sample_cells import steps

    from sidebyside.grid_sample import bench, chain

    copies, rounds = 2, 4
    x, g = bench.inputs((2, 3, 7, 9))
    c = np.ones((2, 3, 7, 9), np.float32)

    jax_chain, order = steps()["jax_chain"], tuple(chain.chain_order(copies, rounds))  # the notebook's chain
    xs, gs, cs = ([jnp.asarray(a)] * copies for a in (x, g, c))
    text = jax_chain.trace(xs, gs, cs, step=_lowered_step("bicubic"), order=order).lower(
        lowering_platforms=("cuda",)).as_text()
    assert text.count("__gpu$xla.gpu.triton") == 2  # one forward and one backward kernel, lowered once
    calls = re.findall(r"call @(\S+)\(", text)
    assert len(calls) >= 2 * copies * rounds, calls  # ... and called once per chained call


def test_pallas_backward_uses_relaxed_atomics(monkeypatch):
    """Pallas' default acquire-release atomics cost 1.8-2.2x in forward+backward on
    an H100; the kernels lower theirs relaxed, as PyTorch's atomicAdd, and leave the
    default alone for every other kernel."""
    from jax._src.pallas.triton import lowering as triton_lowering

    semantics = []
    original = triton_lowering.tt_dialect.atomic_rmw

    def spy(*args, **kwargs):
        semantics.append(str(kwargs.get("sem")))
        return original(*args, **kwargs)

    monkeypatch.setattr(triton_lowering.tt_dialect, "atomic_rmw", spy)
    default = triton_lowering._atomic_rmw.__defaults__
    x, g, c = jnp.zeros((2, 3, 7, 9)), jnp.zeros((2, 11, 13, 2)), jnp.zeros((2, 3, 11, 13))

    jax.jit(_lowered_step("bicubic")).trace(x, g, c).lower(lowering_platforms=("cuda",))
    assert semantics == ["relaxed"] * 16  # 16 taps, one atomic add each
    assert triton_lowering._atomic_rmw.__defaults__ == default


def test_implementation_choice_is_checked():
    x, g = jnp.zeros((1, 1, 4, 4)), jnp.zeros((1, 2, 2, 2))
    with pytest.raises(ValueError, match="implementation must be one of"):
        grid_sample(x, g, implementation="cuda")
    with pytest.raises(ValueError, match="Pallas kernels take 4-D or 5-D float32"):
        grid_sample(x.astype(jnp.bfloat16), g.astype(jnp.bfloat16), implementation="pallas")
    with pytest.raises(ValueError, match="Pallas kernels take 4-D or 5-D float32"):
        grid_sample(jnp.zeros((1, 1, 2, 4, 4), jnp.float16), jnp.zeros((1, 2, 2, 2, 3), jnp.float16),
                    implementation="pallas")
    with pytest.raises(ValueError, match="native kernel takes 4-D or 5-D float32"):
        grid_sample(x.astype(jnp.float16), g.astype(jnp.float16), implementation="native")
    # An image of 2**31 pixels or more (8 GiB a channel) overflows the kernel's 32-bit
    # indices: "auto" takes the XLA path there, "native" says why not (shapes only, no data).
    from sidebyside.grid_sample import choose_implementation, native

    huge = (1, 1, 2**16, 2**15)
    assert not native.supported(huge, (1, 1, 1, 2), jnp.float32)
    assert not native.supported((1, 1, 2**10, 2**11, 2**10), (1, 1, 1, 1, 3), jnp.float32)
    assert native.supported((1, 1, 2**16, 2**15 - 1), (1, 1, 1, 2), jnp.float32)
    if jax.default_backend() == "cpu":
        assert choose_implementation(huge, (1, 1, 1, 2), jnp.float32) == "xla"
        with pytest.raises(ValueError, match=r"under 2\*\*31 pixels"):
            choose_implementation(huge, (1, 1, 1, 2), jnp.float32, implementation="native")


def _torch_grads(x, g, **kw):
    xt = torch.tensor(x, requires_grad=True)
    gt = torch.tensor(g, requires_grad=True)
    out = F.grid_sample(xt, gt, **kw)
    gx, gg = torch.autograd.grad(out.sum(), (xt, gt))
    return out.detach().numpy(), gx.numpy(), gg.numpy()


CLIPPED = [(ac, p, impl) for impl in ("xla", "native") for p in ("border", "reflection") for ac in (False, True)]


@pytest.mark.parametrize("align_corners, padding_mode, implementation", tiered(
    "test_no_grid_gradient_where_clipped", "clipped", CLIPPED, [f"{ac}-{p}-{impl}" for ac, p, impl in CLIPPED]))
def test_no_grid_gradient_where_clipped(padding_mode, align_corners, implementation):
    # Points exactly on the clip limits: torch passes no gradient there; jnp.clip
    # (or maximum/minimum) would pass half of it.
    x = np.arange(12, dtype=np.float32).reshape(1, 1, 3, 4) ** 1.5
    edge = 1.0 if align_corners else 0.75  # x = 3 (size - 1) in pixels for W = 4
    g = np.array([[[[-1.0, 0.1], [1.0, 0.1], [edge, -0.2], [-edge, 0.3], [0.2, 0.1]]]], np.float32)
    kw = dict(mode="bilinear", padding_mode=padding_mode, align_corners=align_corners)
    t_out, t_gx, t_gg = _torch_grads(x, g, **kw)
    config = parity.Config("bilinear", padding_mode, align_corners, 2, "float32")
    j_out, j_gx, j_gg = run(config, implementation, "jit", (x, g, np.ones_like(t_out)))  # the gradients of out.sum()
    np.testing.assert_allclose(j_out, t_out, rtol=0, atol=1e-5 * np.abs(t_out).max())
    np.testing.assert_allclose(j_gg, t_gg, rtol=0, atol=1e-5 * np.abs(t_gg).max())
    assert t_gg[0, 0, :2, 0].tolist() == [0.0, 0.0]
    assert j_gg[0, 0, :2, 0].tolist() == [0.0, 0.0]
    assert j_gg[0, 0, 4, 0] != 0  # an interior point does get a gradient


def non_finite_part(config, implementation):
    """The non-finite grid's batch element of ``config``'s special case (align_corners=False,
    float32) and ``implementation``'s jitted results on it, each with a batch of one:
    input, grid, output, input gradient, grid gradient."""
    x, g, _ = special_case(config)
    arrays = (x, g, *results(config, implementation, "jit"))
    return tuple(a[NON_FINITE_ELEMENT:NON_FINITE_ELEMENT + 1] for a in arrays)


@pytest.mark.parametrize("padding_mode, mode, dims, implementation", tiered(
    "test_non_finite_grid", "non_finite", NON_FINITE, ["-".join(map(str, case)) for case in NON_FINITE],
    [parity.Config(m, p, False, d, "float32") for p, m, d, _ in NON_FINITE], [impl for *_, impl in NON_FINITE]))
def test_non_finite_grid(dims, mode, padding_mode, implementation, request):
    config = parity.Config(mode, padding_mode, False, dims, "float32")
    x, g, out, gx, gg = non_finite_part(config, implementation)
    finite = np.isfinite(g.reshape(-1, dims)).all(-1)  # per point
    out = out.reshape(*out.shape[:2], -1)  # (1, C, points)
    if mode == "bicubic":
        # Weights of a non-finite coordinate are NaN, as in both PyTorch backends.
        assert np.isnan(out[..., ~finite]).all() and np.isfinite(out[..., finite]).all()
    else:
        # The documented rule (PyTorch's CUDA kernels): always finite.
        assert np.isfinite(out).all() and np.isfinite(gx).all() and np.isfinite(gg).all()
        # Non-finite coordinates get no grid gradient.
        assert (gg[~np.isfinite(g)] == 0).all()
        if padding_mode == "zeros":
            # A point with any non-finite coordinate samples nothing.
            assert (out[..., ~finite] == 0).all()
        # Where PyTorch's CPU kernel agrees with the CUDA rule (2-D forward, border and
        # reflection: NaN -> 0, +-inf -> the edge / 0), compare with it.
        if dims == 2 and padding_mode != "zeros":
            ref = F.grid_sample(torch.tensor(x, dtype=torch.float32), torch.tensor(g, dtype=torch.float32), mode=mode,
                                padding_mode=padding_mode, align_corners=False).double().numpy()
            np.testing.assert_allclose(out.reshape(ref.shape), ref, rtol=0, atol=1e-5 * np.abs(ref).max())
    record_pass(request)


@pytest.mark.parametrize(
    "x_shape, g_shape, kw, match",
    [
        ((1, 1, 4), (1, 4, 2), {}, "4D or 5D"),
        ((1, 1, 4, 4), (1, 2, 2, 3, 3), {}, "same number of dimensions"),
        ((2, 1, 4, 4), (1, 2, 2, 2), {}, "same batch size"),
        ((1, 1, 4, 4), (1, 2, 2, 3), {}, "size 2 in last dimension"),
        ((1, 1, 2, 4, 4), (1, 2, 2, 2, 2), {}, "size 3 in last dimension"),
        ((1, 1, 4, 4), (1, 2, 2, 2), {"mode": "linear"}, "mode"),
        ((1, 1, 4, 4), (1, 2, 2, 2), {"padding_mode": "wrap"}, "padding_mode"),
        ((1, 1, 2, 4, 4), (1, 2, 2, 2, 3), {"mode": "bicubic"}, "bicubic"),
        ((1, 1, 0, 4), (1, 2, 2, 2), {}, "non-empty"),
    ],
)
def test_bad_input_raises_value_error(x_shape, g_shape, kw, match):
    with pytest.raises(ValueError, match=match):
        grid_sample(jnp.zeros(x_shape), jnp.zeros(g_shape), **kw)
    # PyTorch rejects the same input too (RuntimeError or ValueError).
    with pytest.raises((RuntimeError, ValueError)):
        F.grid_sample(torch.zeros(x_shape), torch.zeros(g_shape), align_corners=False, **kw)


def test_dtype_mismatch_raises():
    with pytest.raises(ValueError, match="same dtype"):
        grid_sample(jnp.zeros((1, 1, 4, 4), jnp.float32), jnp.zeros((1, 2, 2, 2), jnp.bfloat16))


@pytest.mark.parametrize("padding_mode, mode, dims", tiered(
    "test_non_finite_grid_every_path_agrees", "every_path", NON_FINITE_CONFIGS,
    ["-".join(map(str, case)) for case in NON_FINITE_CONFIGS],
    [parity.Config(m, p, False, d, "float32") for p, m, d in NON_FINITE_CONFIGS], ["every path"] * 15))
def test_non_finite_grid_every_path_agrees(dims, mode, padding_mode, request):
    """The GPU kernels (Pallas, here interpreted), the native kernel and the XLA path
    follow one rule for NaN and +-inf (PyTorch CUDA's): the same bits, gradients too."""
    config = parity.Config(mode, padding_mode, False, dims, "float32")
    want = non_finite_part(config, "xla")[2:]
    for impl in ("native", "pallas"):
        for name, w, got in zip(("output", "grad_input", "grad_grid"), want, non_finite_part(config, impl)[2:]):
            # Same NaNs and infinities; finite values within the float32 tolerance of parity.tolerance.
            scale = max(float(np.abs(w[np.isfinite(w)]).max(initial=0)), 1.0)
            np.testing.assert_allclose(got, w, rtol=0, atol=1e-5 * scale, equal_nan=True, err_msg=f"{impl} {name}")
    record_pass(request)


EMPTY_SHAPES = [((0, 3, 5, 6), (0, 4, 4, 2)), ((2, 0, 5, 6), (2, 4, 4, 2)), ((2, 3, 5, 6), (2, 0, 4, 2)),
                ((0, 2, 3, 5, 6), (0, 2, 4, 4, 3))]
EMPTY = [(x, g, impl) for impl in ("xla", "native", "pallas") for x, g in EMPTY_SHAPES]


@pytest.mark.parametrize("x_shape, g_shape, implementation", tiered(
    "test_empty_batch_returns_empty_like_torch", "empty", EMPTY, [f"{impl}-{'x'.join(map(str, x))}" for x, _, impl in EMPTY]))
def test_empty_batch_returns_empty_like_torch(x_shape, g_shape, implementation):
    want = F.grid_sample(torch.zeros(x_shape), torch.zeros(g_shape), align_corners=False)
    f = lambda a, b: grid_sample(a, b, implementation=implementation)
    out = jax.jit(f)(jnp.ones(x_shape), jnp.zeros(g_shape))
    assert out.shape == tuple(want.shape) and out.dtype == jnp.float32
    gx, gg = jax.grad(lambda a, b: f(a, b).sum(), argnums=(0, 1))(jnp.ones(x_shape), jnp.zeros(g_shape))
    assert gx.shape == x_shape and gg.shape == g_shape


@pytest.mark.parametrize("implementation", ["auto", pytest.param("native", marks=pytest.mark.slow),
                                            pytest.param("pallas", marks=pytest.mark.slow)])  # auto on a CPU: native
def test_forward_mode_on_a_kernel_says_to_use_xla(implementation):
    x = jnp.asarray(np.random.default_rng(0).standard_normal((1, 2, 5, 6)), jnp.float32)
    g = jnp.asarray(np.random.default_rng(1).uniform(-1, 1, (1, 3, 4, 2)), jnp.float32)
    f = lambda b: grid_sample(x, b, implementation=implementation).sum()
    attempts = {
        "jvp": lambda: jax.jvp(f, (g,), (jnp.ones_like(g),)),
        "jacfwd": lambda: jax.jacfwd(f)(g),
        "grad of grad": lambda: jax.grad(lambda b: jax.grad(f)(b).sum())(g),
        "hessian": lambda: jax.hessian(f)(g),
    }
    for attempt in attempts.values():
        with pytest.raises(ValueError, match='pass implementation="xla"'):
            attempt()
    assert np.isfinite(np.asarray(jax.grad(f)(g))).all()  # first-order reverse mode works


@pytest.mark.parametrize("mode", ["bilinear", pytest.param("bicubic", marks=pytest.mark.slow)])
def test_forward_mode_and_second_order(mode):
    # The XLA path has no custom derivative rule: jvp and grad-of-grad work too.
    rng = np.random.default_rng(0)
    x = jnp.asarray(rng.standard_normal((1, 2, 5, 6)), jnp.float32)
    g = jnp.asarray(rng.uniform(-1, 1, (1, 3, 4, 2)), jnp.float32)
    f = lambda b: grid_sample(x, b, mode=mode, implementation="xla").sum()
    _, tangent = jax.jit(lambda b: jax.jvp(f, (b,), (jnp.ones_like(b),)))(g)
    np.testing.assert_allclose(tangent, jax.jit(jax.grad(f))(g).sum(), rtol=1e-4)
    hess_diag = jax.jit(jax.grad(lambda b: jax.grad(f)(b).sum()))(g)
    assert np.isfinite(np.asarray(hess_diag)).all()


@pytest.mark.slow  # a matrix of compiled kernels
def test_bench_forward_with_few_copies(monkeypatch):
    """The quick version of the benchmark's check: forward only, the kernel time over 3
    chained calls (which stay in the cache, and the row says so), timing the notebook's steps."""
    from grid_sample_cells import steps

    from sidebyside.grid_sample import bench
    from sidebyside.lab import timing

    runs, compare = [], timing.compare
    monkeypatch.setattr(timing, "compare", lambda fns, **kw: runs.append(list(fns)) or compare(fns, **kw))
    ladders, ladder = [], timing.ladder
    monkeypatch.setattr(timing, "ladder", lambda c, **kw: ladders.append(list(c)) or ladder(c, **kw))
    rows = bench.bench(bench.configs(("bilinear",), {"tiny": (1, 2, 8, 8)}), repeats=1, min_repeat_s=0.001,
                       naive=True, backward=False, copies=3, steps=steps())
    (row,) = rows.values()
    assert set(rows) == {"bilinear/tiny/forward"} and row["copies"] == 3
    # JAX and PyTorch per call in a run of their own; the frameworks' ladder (PyTorch eager and compiled, the
    # pure-JAX paths) in a second one, which gives the alternatives' ratios; then the chained kernels
    assert [sorted(r) for r in runs] == [["jax", "torch"], ["jax", "torch"]]
    assert ladders == [["torch/eager", "torch/compile", "jax/xla", "jax/naive"]]
    assert all(e["median_s"] > 0 for e in row["ladder"].values())
    assert row["ladder"]["torch/compile"]["implementation"] == "F.grid_sample compiled by Inductor"
    assert row["ladder"]["jax/xla"]["origin"] == "built_with" and row["xla_ms"] > 0
    assert row["jax_ms"] > 0 and row["torch_ms"] > 0 and row["naive_ms"] > 0 and row["jax_kernel_ms"] > 0
    assert row["kernel_ratio"] == pytest.approx(row["jax_kernel_ms"] / row["torch_kernel_ms"])
    assert row["inputs_bytes"] == 3 * (2 * 8 * 8 * 4 + 8 * 8 * 2 * 4) and not row["inputs_exceed_cache"]
    # The memory floor: input, grid and output once, at the copy speed measured in the same process.
    assert row["min_bytes"] == 2 * 8 * 8 * 4 + 8 * 8 * 2 * 4 + 2 * 8 * 8 * 4
    assert row["floor_ms"] == pytest.approx(row["min_bytes"] / (row["copy_gbs"] * 1e9) * 1e3)
    assert row["jax_floor_speed"] == pytest.approx(row["floor_ms"] / row["jax_kernel_ms"])
    assert row["torch_floor_speed"] == pytest.approx(row["floor_ms"] / row["torch_kernel_ms"])
    # each timed function's first call (compilation included), to show where a configuration's time goes
    assert {"jax", "torch", "naive"} <= set(row["first_call_ms"]) and set(row["kernel_first_call_ms"]) == {"jax", "torch"}
    assert all(ms > 0 for ms in [*row["first_call_ms"].values(), *row["kernel_first_call_ms"].values()])
    # ... and the wall time of each measurement, which holds the first calls
    assert set(row["seconds"]) == {"per_call", "kernel"}
    assert row["seconds"]["per_call"] * 1e3 > sum(row["first_call_ms"].values())
    assert row["seconds"]["kernel"] * 1e3 > sum(row["kernel_first_call_ms"].values())
    with pytest.raises(ValueError, match="copies must be at least 1"):
        bench.bench(bench.configs(("bilinear",), {"tiny": (1, 2, 8, 8)}), copies=0, steps=steps())


def test_bench_min_bytes_counts_each_array_once():
    from sidebyside.grid_sample import bench

    i, g, o = 100, 20, 50  # input, grid, output bytes
    assert bench.min_bytes(i, g, o, "bilinear", with_grad=False) == i + g + o
    # backward: read grid, cotangent (the output's size) and input; write both gradients
    assert bench.min_bytes(i, g, o, "bilinear", with_grad=True) == (i + g + o) + (g + o + i) + (i + g)
    # nearest's backward never reads the input (its grid gradient is zero)
    assert bench.min_bytes(i, g, o, "nearest", with_grad=True) == (i + g + o) + (g + o) + (i + g)


def test_bench_copy_bandwidth_is_a_plausible_memory_speed():
    from sidebyside.grid_sample import bench

    speed = bench.copy_bandwidth("cpu", 2**20, repeats=2, min_repeat_s=0.01)
    assert 1e8 < speed < 1e13  # bytes/s: 0.1 GB/s to 10 TB/s


def _goal_row(shape, ratio=0.9, kernel_ratio=0.7, floor_speed=0.75):
    return {"shape": list(shape), "ratio": ratio, "kernel_ratio": kernel_ratio, "jax_floor_speed": floor_speed}


def test_bench_goals_follow_the_device_the_shape_and_the_numbers():
    from sidebyside.grid_sample import goals

    named = lambda found: {g["goal"]: g["met"] for g in found}
    # On a GPU at 32x3x256x256, the forward has all three goals; they flip with their numbers.
    assert named(goals.goals("bilinear/2d_large_gpu/forward", _goal_row((32, 3, 256, 256)), "gpu")) == {
        "per call": True, "kernel": True, "memory floor": True}
    assert named(goals.goals("bilinear/2d_large_gpu/forward", _goal_row((32, 3, 256, 256), 1.1, 0.85, 0.6), "gpu")) == {
        "per call": False, "kernel": False, "memory floor": False}
    # forward+backward: no floor goal; 8x64x128x128 and the 3-D size: the kernel goal alone.
    assert named(goals.goals("nearest/2d_large_gpu/forward+backward", _goal_row((32, 3, 256, 256)), "gpu")) == {
        "per call": True, "kernel": True}
    assert named(goals.goals("bicubic/2d_channels/forward", _goal_row((8, 64, 128, 128)), "gpu")) == {"kernel": True}
    assert named(goals.goals("bilinear/3d/forward+backward", _goal_row((4, 8, 32, 64, 64), kernel_ratio=0.9),
                             "gpu")) == {"kernel": False}
    assert goals.goals("bilinear/2d_small/forward", _goal_row((32, 3, 128, 128)), "gpu") == []
    # A run without kernel times: the kernel goal is there, not measured.
    row = {"shape": [8, 64, 128, 128], "ratio": 1.0}
    (goal,) = goals.goals("nearest/2d_channels/forward", row, "gpu")
    assert goal["value"] is None and goal["met"] is None
    # On a CPU only the per-call goals, every mode's forward included (nearest's too), whatever the shape.
    assert named(goals.goals("bilinear/x/forward", _goal_row((32, 3, 256, 256), ratio=1.6), "cpu")) == {"per call": False}
    assert named(goals.goals("nearest/x/forward", _goal_row((32, 3, 256, 256)), "cpu")) == {"per call": True}
    assert named(goals.goals("nearest/x/forward", _goal_row((32, 3, 256, 256), ratio=2.12), "cpu")) == {
        "per call": False}
    rows = {"bilinear/2d_large_gpu/forward": _goal_row((32, 3, 256, 256), 1.1),
            "bilinear/2d_channels/forward": {"shape": [8, 64, 128, 128], "ratio": 1.0}}
    table = goals.goals_table(rows, "gpu")
    assert list(table["goal"]) == ["per call", "kernel", "memory floor", "kernel"]
    assert goals.goals_summary(table) == "goals met: per call 0 of 1, kernel 1 of 1 (1 not measured), memory floor 1 of 1"
    assert goals.goals_summary(goals.goals_table({}, "gpu")) == "goals met: none set"


@pytest.mark.slow  # compiles the chain with the C++ kernel in it (3 s)
@pytest.mark.parametrize("rounds", [1, 2])
def test_bench_chain_calls_the_kernel_once_per_copy_and_copies_nothing(rounds):
    """The kernel time's JAX program: one call per copy (per round), in order, and no data
    moved around the calls (a lax.scan over stacked copies slices every copy out and writes
    every output back, a cost PyTorch's loop does not pay); a second round over the same
    copies (fed with the first round's outputs) is computed again, not merged with the first,
    as XLA merged it when both rounds read the same arguments."""
    from grid_sample_cells import steps

    from sidebyside.grid_sample import bench, chain, native

    copies = 3
    x, grid = bench.inputs((2, 3, 8, 9))
    xs = [jnp.asarray(x + i) for i in range(copies)]
    gs = [jnp.asarray(grid * (1 - 0.1 * i)) for i in range(copies)]
    cs = [jnp.zeros(())] * copies  # a forward step reads no cotangent

    def step(a, b, c):
        return grid_sample(a, b, mode="bilinear")

    jax_chain, order = steps()["jax_chain"], tuple(chain.chain_order(copies, rounds))  # the notebook's chain
    outs = jax_chain(xs, gs, cs, step=step, order=order)
    assert len(outs) == copies * rounds
    fed = list(xs)
    for i, out in zip(order, outs):
        np.testing.assert_array_equal(out, jax.jit(step)(fed[i], gs[i], cs[i]))
        fed[i] = out
    text = jax_chain.lower(xs, gs, cs, step=step, order=order).compile().as_text()
    ops = re.findall(r"= \S+ ([a-z-]+)\(", text)
    assert not {"copy", "dynamic-slice", "slice", "dynamic-update-slice"} & set(ops), sorted(set(ops))
    if native.available():
        assert ops.count("custom-call") == copies * rounds


def test_bench_chain_is_long_against_dispatch_on_a_gpu():
    from sidebyside.grid_sample import chain

    mb = 2**20
    # 32x3x256x256 float32 with its grid and cotangent (67 MB) against an H100's 50 MB L2: two copies fill
    # twice the cache, and on a GPU 16 rounds over them make the 32 calls that outlast one dispatch.
    assert chain.chain_shape(67 * mb, 50 * mb, gpu=True) == (2, 16)
    assert chain.chain_shape(67 * mb, 50 * mb, gpu=False) == (2, 1)  # the CPU waits for each call: no rounds
    assert chain.chain_shape(10 * mb, 50 * mb, gpu=True) == (10, 4)  # 40 calls
    assert chain.chain_shape(1 * mb, 50 * mb, gpu=True) == (chain._MAX_COPIES, 1)
    assert chain.chain_shape(67 * mb, 50 * mb, copies=5, gpu=True) == (5, 7)


@pytest.mark.slow  # compiles both chains with gradients, in rounds (3 s)
def test_bench_kernel_chain_in_rounds_runs_on_both_sides_with_gradients(monkeypatch):
    """Rounds over the copies (as on a GPU), forward+backward: from the second round on, each side's
    input is its output of the round before (for PyTorch a tensor with a history, not a leaf); both
    chains run, and the time is per call of the whole chain."""
    from grid_sample_cells import steps

    from sidebyside.grid_sample import bench, chain

    bench_torch_tensor = chain.torch_tensor
    x, grid = bench.inputs((1, 2, 6, 7))
    cot = np.ones_like(x)

    def jax_step(a, b, c, with_grad=False):
        out, vjp = jax.vjp(lambda p, q: grid_sample(p, q), a, b)
        return (out, vjp(c)) if with_grad else out

    def torch_step(a, b, c, with_grad=False):
        out = F.grid_sample(a, b, align_corners=False)
        return (out, torch.autograd.grad(out, (a, b), c)) if with_grad else out

    made = []

    def torch_tensor(a, device):
        made.append((a, bench_torch_tensor(a, device)))
        return made[-1][1]

    monkeypatch.setattr(chain, "torch_tensor", torch_tensor)
    row = chain.kernel_times(jax_step, torch_step, x, grid, cot, 2, True, "cpu", 1, 0.001, rounds=3, steps=steps())
    assert row["copies"] == 2 and row["calls"] == 6 and row["torch_kernel_tool"] == "loop"
    assert row["jax_kernel_ms"] > 0 and row["torch_kernel_ms"] > 0
    # PyTorch's inputs (three arrays per copy) are its own copies, not views of NumPy's memory
    assert len(made) == 6
    for array, tensor in made:
        np.testing.assert_array_equal(tensor.detach().numpy(), array)
        assert not np.shares_memory(tensor.detach().numpy(), array)


def test_bench_gives_pytorch_memory_of_its_own():
    """NumPy asks Linux for 2 MiB pages for arrays of 4 MiB and more; ``torch.from_numpy`` would
    hand PyTorch those pages while XLA copies into 4 KiB ones: each side gets its own memory."""
    from sidebyside.grid_sample import chain

    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    t = chain.torch_tensor(a, "cpu")
    assert t.dtype == torch.float32 and t.shape == (3, 4)
    np.testing.assert_array_equal(t.numpy(), a)
    assert not np.shares_memory(t.numpy(), a)


@pytest.mark.slow
def test_bench_returns_kernel_and_per_call_times(monkeypatch):
    from grid_sample_cells import steps

    from sidebyside.grid_sample import bench

    configs = bench.configs(("bilinear",), {"tiny": (2, 3, 16, 16)})
    monkeypatch.setattr(bench, "cache_bytes", lambda device: 64 * 2**10)  # a 64 KiB cache: 8 copies overflow it
    rows = bench.bench(configs, repeats=1, min_repeat_s=0.001, naive=True, steps=steps())
    assert set(rows) == {"bilinear/tiny/forward", "bilinear/tiny/forward+backward"}
    for row in rows.values():
        assert row["jax_ms"] > 0 and row["torch_ms"] > 0
        assert row["ratio"] == pytest.approx(row["jax_ms"] / row["torch_ms"])
        assert row["jax_kernel_ms"] > 0 and row["torch_kernel_ms"] > 0
        assert row["kernel_ratio"] == pytest.approx(row["jax_kernel_ms"] / row["torch_kernel_ms"])
        # Enough copies of the inputs to overflow the cache, each call on its own.
        assert row["inputs_exceed_cache"] and row["inputs_bytes"] > row["cache_bytes"]
        assert row["inputs_bytes"] >= row["copies"] * (2 * 3 * 16 * 16 * 4 + 2 * 16 * 16 * 2 * 4)
    assert rows["bilinear/tiny/forward"]["naive_ms"] > 0


@pytest.mark.slow
def test_bench_run_each_saves_each_configuration_and_reads_it_back(tmp_path, monkeypatch, capfd):
    """run_each runs each configuration through run(), in a child process of its own (one test of both: each
    child costs its imports). The two configurations are one shape and mode under two names, so that the
    second child finds the first one's programs in the test run's compilation cache."""
    from sidebyside.grid_sample import bench
    from sidebyside.run.checkpoints import Checkpoints

    children = []

    @functools.wraps(bench.run)
    def counted(*args, **kwargs):
        children.append(args)
        return real_run(*args, **kwargs)

    real_run = bench.run
    monkeypatch.setattr(bench, "run", counted)
    sizes, modes = {"tiny": (1, 2, 8, 8), "twin": (1, 2, 8, 8)}, ("nearest",)
    settings = dict(repeats=1, min_repeat_s=0.001, threads=1, copies=2, naive=False)
    out = bench.run_each(sizes, modes, part=Checkpoints(tmp_path / "parts.json"), **settings)
    # One child process per configuration, merged into run()'s record, with the command that runs them all.
    assert children == [({"tiny": (1, 2, 8, 8)}, ("nearest",)), ({"twin": (1, 2, 8, 8)}, ("nearest",))]
    assert set(out["results"]) == {f"nearest/{n}/{k}" for n in sizes for k in ("forward", "forward+backward")}
    assert out["threads"] == 1 and out["device_kind"] == "cpu"
    assert all(row["copies"] == 2 for key, row in out["results"].items() if key.endswith("/forward"))
    shown = capfd.readouterr().err  # each child's progress, passed on as it ran
    assert "grid_sample bench" in shown and "1/1" in shown and "nearest/tiny" in shown and "nearest/twin" in shown
    assert out["command"] == ("python -m sidebyside.posts.bench grid_sample --repeats 1 --min-repeat-s 0.001 --json <json> "
                              "--modes nearest --shape tiny=1,2,8,8 --shape twin=1,2,8,8 --copies 2 --pallas-layouts points "
                              "channels --threads 1")
    again = Checkpoints(tmp_path / "parts.json")
    assert bench.run_each(sizes, modes, part=again, **settings) == out and len(children) == 2  # read back
    assert sorted(again.log) == ["bench/nearest/tiny", "bench/nearest/twin"]


@pytest.mark.slow
def test_bench_child_stderr_is_passed_on_as_it_comes_and_its_tail_kept(capfd):
    from sidebyside.grid_sample import bench

    code = "import sys; sys.stderr.write('x' * 5000 + 'end'); sys.exit(3)"
    returncode, tail = bench._run_passing_stderr_on([sys.executable, "-c", code], timeout_s=60)
    assert returncode == 3 and tail == ("x" * 5000 + "end")[-3000:]
    assert capfd.readouterr().err == "x" * 5000 + "end"
    # A child that hangs is stopped at the timeout; what it wrote before came through while it ran.
    code = "import sys, time; sys.stderr.write('started'); sys.stderr.flush(); time.sleep(60)"
    returncode, tail = bench._run_passing_stderr_on([sys.executable, "-c", code], timeout_s=3)
    assert returncode == "stopped after timeout_s=3 s" and tail == "started"
    assert capfd.readouterr().err == "started"


def test_bench_cli_help():
    result = subprocess.run([sys.executable, "-m", "sidebyside.posts.bench", "grid_sample", "--help"], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0 and "--threads" in result.stdout


def test_the_package_is_called_as_the_function_and_pickles_by_name():
    """``sidebyside.grid_sample`` is the package and, called, the function; a step that calls it is sent
    to a worker process (cloudpickle) with the package named, not copied."""
    import pickle

    import cloudpickle

    import sidebyside
    from sidebyside.grid_sample import grid_sample as function

    assert sidebyside.grid_sample is grid_sample and grid_sample.__name__ == "sidebyside.grid_sample"
    x, g = jnp.arange(12.0).reshape(1, 1, 3, 4), jnp.full((1, 2, 2, 2), 0.25)
    np.testing.assert_array_equal(grid_sample(x, g, mode="bicubic"), function(x, g, mode="bicubic"))
    assert pickle.loads(pickle.dumps(grid_sample)) is grid_sample
    step = cloudpickle.loads(cloudpickle.dumps(lambda a, b: grid_sample(a, b, mode="bicubic")))
    np.testing.assert_array_equal(step(x, g), function(x, g, mode="bicubic"))


def test_the_command_times_the_steps_of_the_posts_notebook(tmp_path):
    """Without --steps, ``python -m sidebyside.posts.bench grid_sample`` times the paired cells step and chain
    of the post's notebook (the library keeps no copy of them); where the notebook is not there (an installed
    wheel), it says what to do."""
    from sidebyside.grid_sample import bench
    from sidebyside.posts import bench as command
    from sidebyside.run import code

    steps = command.grid_sample_steps()
    assert list(steps) == list(bench.STEPS)
    where = {name: code.origin(fn)["where"] for name, fn in steps.items() if name != "grid_sample_compiled"}
    assert all(w.startswith("<03_grid_sample.py pair ") for w in where.values()), where
    assert where["jax_chain"] == "<03_grid_sample.py pair chain:jax>"
    with pytest.raises(SystemExit, match="run it from a clone of the repository, or pass --steps"):
        command.grid_sample_steps(tmp_path / "03_grid_sample.py")
    with pytest.raises(ValueError, match=r"missing here: \['jax_chain'"):
        bench.steps_from({name: fn for name, fn in steps.items() if name != "jax_chain"})


@pytest.mark.parametrize("value", ["False", "True", 0, 1, 1.0, np.bool_(True), jnp.bool_(False), [False]])
def test_align_corners_must_be_a_bool_as_in_pytorch(value):
    x, g = jnp.zeros((1, 1, 4, 4)), jnp.zeros((1, 2, 2, 2))
    with pytest.raises(TypeError, match="'align_corners' .* must be bool") as ours:
        grid_sample(x, g, align_corners=value)
    with pytest.raises(TypeError) as theirs:
        F.grid_sample(torch.zeros(1, 1, 4, 4), torch.zeros(1, 2, 2, 2), align_corners=value)
    # The same type is named as PyTorch names it ("str", "int", "numpy.bool", ...).
    assert str(ours.value).split(" not ")[-1] in str(theirs.value)


def test_align_corners_none_reads_as_false_as_in_pytorch():
    rng = np.random.default_rng(0)
    x, g = rng.standard_normal((1, 2, 5, 6)).astype(np.float32), rng.uniform(-1, 1, (1, 3, 4, 2)).astype(np.float32)
    np.testing.assert_array_equal(np.asarray(grid_sample(x, g, align_corners=None)),
                                  np.asarray(grid_sample(x, g, align_corners=False)))


# Shapes only (jax.ShapeDtypeStruct: no data), each one element past the 32-bit limit somewhere.
HUGE = [
    ("input", (1, 1, 2**16, 2**15), (1, 1, 1, 2)),  # one image of 2**31 pixels
    ("input", (2**16, 2**15, 1, 1), (2**16, 1, 1, 2)),  # small images, many of them
    ("input", (1, 1, 2**10, 2**11, 2**10), (1, 1, 1, 1, 3)),
    ("grid", (1, 1, 2, 2), (1, 2**15, 2**15, 2)),
    ("output", (1, 2**16, 1, 1), (1, 2**8, 2**7, 2)),  # channels x points
]


@pytest.mark.parametrize("implementation", ["auto", "xla", "pallas", "native"])
@pytest.mark.parametrize("which, x_shape, g_shape", HUGE, ids=[f"{h[0]}-{len(h[1])}d-{i}" for i, h in enumerate(HUGE)])
def test_sizes_beyond_32_bit_indexing_raise_naming_the_limit(which, x_shape, g_shape, implementation):
    from sidebyside.grid_sample import INDEX_LIMIT

    x, g = (jax.ShapeDtypeStruct(s, jnp.float32) for s in (x_shape, g_shape))
    with pytest.raises(ValueError, match=rf"the {which} holds \d+ elements.*fewer than 2\*\*31 = {INDEX_LIMIT}"):
        grid_sample(x, g, implementation=implementation)


def test_sizes_just_under_the_limit_pass_the_check():
    from sidebyside.grid_sample import check_inputs

    for x_shape, g_shape in [((1, 1, 2**16, 2**15 - 1), (1, 1, 1, 2)), ((1, 2**15, 1, 1), (1, 2**8, 2**8 - 1, 2))]:
        check_inputs(jax.ShapeDtypeStruct(x_shape, jnp.float32), jax.ShapeDtypeStruct(g_shape, jnp.float32),
                     "bilinear", "zeros", False)  # raises nothing


def test_bench_notes_what_its_child_timed_as_the_steps_it_was_given():
    """The benchmark's child process times the steps a notebook sent it; this process notes each
    contestant as the step it was (same function and line), skips the memory floor's copy, and
    refuses a contestant that is none of the steps."""
    from sidebyside.grid_sample import bench
    from sidebyside.run import code

    def my_step(x):
        return x

    steps = {"jax_step": my_step, "jax_step_jit": jax.jit(my_step)}
    origin = code.origin(my_step)
    code.clear()
    try:
        child = [{"contestant": "jax", "function": origin["function"], "where": "/tmp/elsewhere.py", "line": origin["line"]},
                 {"contestant": "copy", "function": "<lambda>", "where": "src/x.py", "line": 1}]
        bench._note_timed({"code": child}, steps)
        assert code.record()["timed"] == [{"contestant": "jax", **origin}]
        bench._note_timed({"code": child}, None)  # the steps the child read from the notebook: nothing to note here
        with pytest.raises(RuntimeError, match="none of the steps"):
            bench._note_timed({"code": [{**child[0], "function": "other"}]}, steps)
    finally:
        code.clear()
