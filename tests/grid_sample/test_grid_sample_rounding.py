"""The coordinate arithmetic of sidebyside.grid_sample.taps in isolation.

PyTorch rounds the unnormalisation ``(g + 1) * (size / 2) - 0.5`` once (its CUDA
kernels and vectorised 2-D CPU kernel fuse it into an FMA) and its 3-D CPU kernel
rounds it twice. Here: ``fma_rn``/``mul_rn`` against exact rational arithmetic, and
against a "fusing compiler": an evaluator of the function's jaxpr that fuses every
multiply feeding an add or subtract into one exactly rounded FMA, as XLA:CPU under
jit or Triton may. The explicit functions give the same bits either way; the plain
expression they replace does not, which is how the GPU kernels came to differ from
PyTorch (issue 13).
"""

from __future__ import annotations

from fractions import Fraction

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.extend.core import Literal

from sidebyside.grid_sample import taps

SIZES = [7, 345, 456, 1000, 4095]


def rn32(exact: Fraction) -> np.float32:
    """``exact`` rounded to the nearest float32, ties to even."""
    guess = np.float32(float(exact))
    candidates = [np.nextafter(guess, np.float32(-np.inf)), guess, np.nextafter(guess, np.float32(np.inf))]
    best = min(abs(Fraction(float(c)) - exact) for c in candidates)
    ties = [c for c in candidates if abs(Fraction(float(c)) - exact) == best]
    return min(ties, key=lambda c: int(np.float32(c).view(np.int32)) & 1)


def exact_fma(a, b: float, c: float) -> np.ndarray:
    return np.array([rn32(Fraction(float(x)) * Fraction(b) + Fraction(c)) for x in a], np.float32)


def hard_values(size: int, count: int = 400, seed: int = 0) -> np.ndarray:
    """Grid values g where rounding (g + 1) * size / 2 - 0.5 once and twice differ,
    plus ordinary ones."""
    rng = np.random.default_rng(seed)
    g = rng.uniform(-1, 1, 400_000).astype(np.float32)
    a = (g + np.float32(1)).astype(np.float32)
    once = (a.astype(np.float64) * size / 2 - 0.5).astype(np.float32)  # exact in float64 here, then one rounding
    twice = (a * np.float32(size / 2)).astype(np.float32) - np.float32(0.5)
    hard = g[once != twice][:count]
    assert hard.size >= 50, "expected many grid values that the two roundings disagree on"
    return np.concatenate([hard, g[:count], np.float32([-1, 1, 0, -0.5, 0.5])])


# The fast set: a few sizes (`pytest -m "not slow"`); every size in the full run.
def _sizes(fast):
    return [pytest.param(s, marks=() if s in fast else pytest.mark.slow) for s in SIZES]


@pytest.mark.parametrize("size, run", [pytest.param(size, run, marks=() if (size, run) in {(345, "eager"), (4095, "jit")}
                                                    else pytest.mark.slow) for size in SIZES for run in ("eager", "jit")])
def test_fma_rn_rounds_once(size, run):
    g = hard_values(size)
    a = (g + np.float32(1)).astype(np.float32)
    f = lambda v: taps.fma_rn(v, size / 2, -0.5)
    got = np.asarray((jax.jit(f) if run == "jit" else f)(jnp.asarray(a)))
    want = exact_fma(a, size / 2, -0.5)
    np.testing.assert_array_equal(got, want)
    twice = (a * np.float32(size / 2)).astype(np.float32) - np.float32(0.5)
    assert (got != twice).sum() >= 50  # the cases that pin single rounding are there


def test_fma_rn_wide_range():
    rng = np.random.default_rng(1)
    a = (rng.uniform(0.5, 1, 3000) * 2.0 ** rng.integers(-30, 30, 3000)).astype(np.float32)
    a *= np.where(rng.random(3000) < 0.5, -1, 1).astype(np.float32)
    for b, c in [(172.5, -0.5), (3.0, 2.0**-10 + 2.0**-30), (4095.0, -123.25), (0.75, 7.0)]:
        got = np.asarray(jax.jit(lambda v: taps.fma_rn(v, b, c))(jnp.asarray(a)))
        np.testing.assert_array_equal(got, exact_fma(a, b, c), err_msg=f"b={b} c={c}")


def test_mul_rn_is_the_rounded_product_and_non_finite_passes_through():
    rng = np.random.default_rng(2)
    a = rng.uniform(-3, 3, 5000).astype(np.float32)
    for b in (172.5, 499.5, 227.5, 0.5, 2047.0):
        np.testing.assert_array_equal(np.asarray(taps.mul_rn(jnp.asarray(a), b)), a * np.float32(b))
    special = jnp.asarray([np.nan, np.inf, -np.inf], jnp.float32)
    out = np.asarray(taps.fma_rn(special, 172.5, -0.5))
    assert np.isnan(out[0]) and out[1] == np.inf and out[2] == -np.inf


def test_unnormalize_gradient_is_the_scale():
    g = jnp.linspace(-1, 1, 7, dtype=jnp.float32)
    for ac, fused, scale in [(False, True, 172.5), (True, True, 172.0), (False, False, 172.5), (True, False, 172.0)]:
        d = jax.grad(lambda v: taps.unnormalize(v, 345, ac, fused).sum())(g)
        np.testing.assert_array_equal(np.asarray(d), np.full(7, scale, np.float32))
        t = jax.jvp(lambda v: taps.unnormalize(v, 345, ac, fused), (g,), (jnp.ones_like(g),))[1]
        np.testing.assert_array_equal(np.asarray(t), np.full(7, scale, np.float32))


@pytest.mark.parametrize("size", _sizes({456}))
def test_unfused_unnormalize_rounds_twice(size):
    # PyTorch's 3-D CPU kernel: ((g + 1) * size - 1) / 2, every operation rounded.
    g = hard_values(size)
    a = (g + np.float32(1)).astype(np.float32)
    want = ((a * np.float32(size)).astype(np.float32) - np.float32(1)) / np.float32(2)
    got = np.asarray(jax.jit(lambda v: taps.unnormalize(v, size, False, fused=False))(jnp.asarray(g)))
    np.testing.assert_array_equal(got, want)


# ------------------------------------------------------------ a fusing compiler


def _fused_add(x, y, z, subtract: bool, product_first: bool) -> np.ndarray:
    """RN(x * y + z) (or the differences), element by element, exactly."""
    x, y, z = np.broadcast_arrays(np.asarray(x, np.float32), np.asarray(y, np.float32), np.asarray(z, np.float32))
    out = []
    for xi, yi, zi in zip(x.ravel(), y.ravel(), z.ravel()):
        if not (np.isfinite(xi) and np.isfinite(yi) and np.isfinite(zi)):
            p = np.float32(xi) * np.float32(yi)
            out.append(np.float32(p - zi if subtract and product_first else (zi - p if subtract else p + zi)))
            continue
        p = Fraction(float(xi)) * Fraction(float(yi))
        zf = Fraction(float(zi))
        out.append(rn32(p - zf if subtract and product_first else (zf - p if subtract else p + zf)))
    return np.array(out, np.float32).reshape(x.shape)


def evaluate(jaxpr, consts, args, fuse: bool):
    """Evaluate a closed jaxpr primitive by primitive (each rounds once, like XLA op
    by op); with ``fuse``, every float32 ``add``/``sub`` one of whose operands a
    ``mul`` of this jaxpr produced is computed as one exactly rounded FMA instead."""
    env, producer = {}, {}

    def read(v):
        return v.val if isinstance(v, Literal) else env[v]

    for v, c in zip(jaxpr.constvars, consts):
        env[v] = c
    for v, a in zip(jaxpr.invars, args):
        env[v] = a
    for eqn in jaxpr.eqns:
        vals = [read(v) for v in eqn.invars]
        inner = eqn.params.get("call_jaxpr") or eqn.params.get("jaxpr")
        name = eqn.primitive.name
        if inner is not None and hasattr(inner, "jaxpr"):
            outs = evaluate(inner.jaxpr, inner.consts, vals, fuse)
        elif fuse and name in ("add", "sub") and any(
                not isinstance(v, Literal) and v in producer for v in eqn.invars) and \
                np.dtype(eqn.outvars[0].aval.dtype) == np.float32:
            first = not isinstance(eqn.invars[0], Literal) and eqn.invars[0] in producer
            mul_var, other = (eqn.invars[0], vals[1]) if first else (eqn.invars[1], vals[0])
            x, y = producer[mul_var]
            outs = [_fused_add(x, y, other, name == "sub", product_first=first)]
        else:
            outs = eqn.primitive.bind(*vals, **eqn.params)
            outs = outs if eqn.primitive.multiple_results else [outs]
        for v, o in zip(eqn.outvars, outs):
            env[v] = np.asarray(o)
        if name == "mul":
            producer[eqn.outvars[0]] = vals
    return [read(v) for v in jaxpr.outvars]


def _both_ways(fn, g):
    closed = jax.make_jaxpr(fn)(g)
    plain = evaluate(closed.jaxpr, closed.consts, [g], fuse=False)[0]
    fused = evaluate(closed.jaxpr, closed.consts, [g], fuse=True)[0]
    return np.asarray(plain), np.asarray(fused)


@pytest.mark.parametrize("size", [345, pytest.param(1000, marks=pytest.mark.slow)])
def test_unnormalize_does_not_depend_on_what_the_compiler_fuses(size):
    g = jnp.asarray(hard_values(size, count=150))
    want = exact_fma((np.asarray(g) + np.float32(1)).astype(np.float32), size / 2, -0.5)
    plain, fused = _both_ways(lambda v: taps.unnormalize(v, size, False), g)
    np.testing.assert_array_equal(plain, want)
    np.testing.assert_array_equal(fused, want)
    # The plain expression the kernels used before: its result depends on fusion.
    plain, fused = _both_ways(lambda v: (v + 1) * (size / 2) - 0.5, g)
    np.testing.assert_array_equal(fused, want)
    assert (plain != want).sum() >= 50
    # The unfused (3-D CPU) form keeps its two roundings under a fusing compiler too.
    a = (np.asarray(g) + np.float32(1)).astype(np.float32)
    twice = ((a * np.float32(size)).astype(np.float32) - np.float32(1)) / np.float32(2)
    plain, fused = _both_ways(lambda v: taps.unnormalize(v, size, False, fused=False), g)
    np.testing.assert_array_equal(plain, twice)
    np.testing.assert_array_equal(fused, twice)


# ------------------------------------------------ a compiler that keeps excess precision

HALF = (np.dtype(jnp.float16), np.dtype(jnp.bfloat16))


def evaluate_wide(jaxpr, consts, args):
    """Evaluate a closed jaxpr with every float16/bfloat16 value held in float32: arithmetic on
    them is not rounded to the dtype and casts to them are skipped, as XLA may do inside a fusion
    where it allows excess precision (an H100 did; XLA:CPU did not). ``reduce_precision`` runs."""
    env = {}

    def widen(a):
        a = np.asarray(a)
        return a.astype(np.float32) if a.dtype in HALF else a

    def read(v):
        return widen(v.val if isinstance(v, Literal) else env[v])

    for v, c in zip(jaxpr.constvars, consts):
        env[v] = widen(c)
    for v, a in zip(jaxpr.invars, args):
        env[v] = widen(a)
    for eqn in jaxpr.eqns:
        vals = [read(v) for v in eqn.invars]
        inner = eqn.params.get("call_jaxpr") or eqn.params.get("jaxpr")
        if inner is not None and hasattr(inner, "jaxpr"):
            outs = evaluate_wide(inner.jaxpr, inner.consts, vals)
        elif eqn.primitive.name == "convert_element_type" and np.dtype(eqn.params["new_dtype"]) in HALF:
            outs = [vals[0]]
        else:
            outs = eqn.primitive.bind(*vals, **eqn.params)
            outs = outs if eqn.primitive.multiple_results else [outs]
        for v, o in zip(eqn.outvars, outs):
            env[v] = widen(o)
    return [read(v) for v in jaxpr.outvars]


def _plain_and_wide(fn, g):
    closed = jax.make_jaxpr(fn)(g)
    plain = evaluate(closed.jaxpr, closed.consts, [g], fuse=False)[0]
    wide = evaluate_wide(closed.jaxpr, closed.consts, [g])[0]
    return np.asarray(plain).astype(np.float32), np.asarray(wide)


@pytest.mark.slow  # a matrix of compiled kernels
@pytest.mark.parametrize("dtype", [np.float16, jnp.bfloat16])
@pytest.mark.parametrize("size", [345, 456])
def test_half_precision_coordinates_do_not_depend_on_excess_precision(size, dtype):
    """In float16 and bfloat16 the coordinate arithmetic (unnormalise, then reflect) rounds to the
    dtype after every operation, as PyTorch's CPU kernels do, and keeps that rounding when the
    compiler keeps float32 between operations. The plain expression it replaced does not: on an
    H100, XLA's excess precision moved coordinates across pixel and reflection boundaries (a float16
    3-D reflection case failed parity in its grid gradient)."""
    g = jnp.asarray(np.concatenate([hard_values(size, count=300), np.linspace(-3, 3, 601, dtype=np.float32)]),
                    dtype)
    g16 = np.asarray(g)
    one, scale, half = (np.asarray(c, dtype) for c in (1, size / 2, 0.5))
    want = ((g16 + one) * scale) - half  # NumPy rounds each operation to the dtype
    for fused in (True, False):
        for padding in ("zeros", "reflection"):
            fn = lambda v, fused=fused, padding=padding: taps.pad(  # noqa: E731
                taps.unnormalize(v, size, False, fused=fused), size, padding, False)
            plain, wide = _plain_and_wide(fn, g)
            np.testing.assert_array_equal(wide, plain, err_msg=f"fused={fused}, {padding}")
    plain, _ = _plain_and_wide(lambda v: taps.unnormalize(v, size, False), g)
    np.testing.assert_array_equal(plain, want.astype(np.float32))
    # The plain expression the half-precision path used before: excess precision changes it.
    plain, wide = _plain_and_wide(lambda v: (v + 1) * (size / 2) - 0.5, g)
    np.testing.assert_array_equal(plain, want.astype(np.float32))
    assert (wide != plain).sum() >= 20
