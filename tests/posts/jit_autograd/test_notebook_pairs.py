"""The paired cells of notebooks/04_jit_autograd.py, run as the notebook writes them: f agrees across
the three frameworks and with the original write-up's value, and its gradients and Hessian-vector
products, eager and compiled, match the exact derivatives of sidebyside.lab.functions."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import run_pairs

from sidebyside.lab import functions


@pytest.fixture(scope="module")
def paired():
    """The namespace left by running the notebook's paired cells, in order, and nothing else."""
    pytest.importorskip("torch")
    pytest.importorskip("jax")
    return run_pairs("04_jit_autograd.py", ["f", "jit", "grad", "hvp"], {})


def _np(value):
    return value.detach().cpu().numpy() if hasattr(value, "detach") else np.asarray(value)


def test_f_agrees_across_frameworks(paired):
    import jax.numpy as jnp
    import torch

    x = np.linspace(-7.0, 13.0, 101)
    expected = paired["f_numpy"](x)
    np.testing.assert_allclose(_np(paired["f_torch"](torch.from_numpy(x))), expected, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(_np(paired["f_jax"](jnp.asarray(x, jnp.float32))), expected, rtol=1e-5, atol=1e-5)
    # the original write-up printed f(3) = 1.7012903690338135: a float32 result
    assert paired["f_numpy"](np.float32(3.0)) == np.float32(1.7012903690338135)
    assert paired["f_numpy"](3.0) == pytest.approx(1.7012903690338135, rel=1e-7)
    x32 = x.astype(np.float32)
    for entry in ("f_static", "f_dynamic", "f_cudagraphs"):  # the compiled rungs' entry points, uncompiled
        np.testing.assert_allclose(_np(paired[entry](torch.from_numpy(x32))), expected, rtol=1e-5, atol=1e-5)


def test_exact_derivatives_are_those_of_the_notebooks_f(paired):
    """sidebyside.lab.functions.df and d2f against a central difference of the NumPy f, and against
    two levels of autodiff through the JAX and PyTorch f."""
    import jax
    import jax.numpy as jnp
    import torch

    x = np.linspace(-7.0, 13.0, 101)
    h = 1e-6
    np.testing.assert_allclose(functions.df(x), (paired["f_numpy"](x + h) - paired["f_numpy"](x - h)) / (2 * h),
                               atol=1e-8)
    x32 = jnp.asarray(x, jnp.float32)
    np.testing.assert_allclose(np.asarray(jax.vmap(jax.grad(jax.grad(paired["f_jax"])))(x32)), functions.d2f(x),
                               atol=2e-5)
    xt = torch.tensor(x, requires_grad=True)
    (grad,) = torch.autograd.grad(paired["f_torch"](xt).sum(), xt, create_graph=True)
    np.testing.assert_allclose(grad.detach().numpy(), functions.df(x), rtol=1e-12, atol=1e-12)
    (second,) = torch.autograd.grad(grad.sum(), xt)
    np.testing.assert_allclose(second.numpy(), functions.d2f(x), rtol=1e-12, atol=1e-12)


X32 = np.linspace(0.1, 12.0, 257, dtype=np.float32)


@pytest.mark.slow  # compiles f with torch.compile twice (static and dynamic shapes): about 10 s on a 2-core CPU
def test_compiled_f_rungs_agree_with_eager(paired):
    import jax.numpy as jnp
    import torch

    expected = _np(paired["f_torch"](torch.from_numpy(X32)))
    for name in ("torch_static", "torch_dynamic"):
        np.testing.assert_allclose(_np(paired[name](torch.from_numpy(X32))), expected, rtol=1e-5, atol=1e-6,
                                   err_msg=name)
    np.testing.assert_allclose(_np(paired["torch_dynamic"](torch.from_numpy(X32[:100]))), expected[:100],
                               rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(_np(paired["f_jit"](jnp.asarray(X32))), expected, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(_np(paired["f_jax"](jnp.asarray(X32))), expected, rtol=1e-5, atol=1e-5)


@pytest.mark.slow  # compiles
def test_compiled_gradient_and_hvp_rungs_match_the_exact_ones(paired):
    import jax.numpy as jnp
    import torch

    x, v = torch.from_numpy(X32), torch.from_numpy(np.cos(X32))
    exact_grad = functions.df(X32.astype(np.float64))
    exact_hvp = functions.d2f(X32.astype(np.float64)) * np.cos(X32)
    grads = {"vmap_grad_torch_compiled": paired["vmap_grad_torch_compiled"](x),
             "vmap_grad_jax_jit": paired["vmap_grad_jax_jit"](jnp.asarray(X32))}
    for name, g in grads.items():
        np.testing.assert_allclose(_np(g), exact_grad, atol=2e-5, err_msg=name)
    hvps = {"hvp_torch_compiled": paired["hvp_torch_compiled"](x, v),
            "hvp_jax_jit": paired["hvp_jax_jit"](jnp.asarray(X32), jnp.asarray(v.numpy()))}
    for name, h in hvps.items():
        np.testing.assert_allclose(_np(h), exact_hvp, atol=5e-5, err_msg=name)


def test_gradients_match_the_exact_derivative(paired):
    import jax.numpy as jnp
    import torch

    x = np.linspace(0, 4 * np.pi, 17, dtype=np.float32)
    exact = functions.df(x.astype(np.float64))
    for name, value in {
        "vmap_grad_torch": paired["vmap_grad_torch"](torch.from_numpy(x)),
        "grad_sum_torch": paired["grad_sum_torch"](torch.from_numpy(x)),
        "grad_loop_torch": paired["grad_loop_torch"](torch.from_numpy(x)),
        "vmap_grad_jax": paired["vmap_grad_jax"](jnp.asarray(x)),
        "grad_sum_jax_jit": paired["grad_sum_jax_jit"](jnp.asarray(x)),
    }.items():
        np.testing.assert_allclose(_np(value), exact, atol=1e-5, err_msg=name)


def test_hessian_vector_products_match_the_exact_one(paired):
    import jax.numpy as jnp
    import torch

    rng = np.random.default_rng(0)
    x = rng.uniform(0, 4 * np.pi, 64).astype(np.float32)
    v = rng.standard_normal(64).astype(np.float32)
    exact = functions.d2f(x.astype(np.float64)) * v
    for name, value in {
        "hvp_torch": paired["hvp_torch"](torch.from_numpy(x), torch.from_numpy(v)),
        "hvp_double_backward_torch": paired["hvp_double_backward_torch"](torch.from_numpy(x), torch.from_numpy(v)),
        "hvp_jax": paired["hvp_jax"](jnp.asarray(x), jnp.asarray(v)),
    }.items():
        np.testing.assert_allclose(_np(value), exact, atol=1e-4, err_msg=name)
    np.testing.assert_allclose(_np(paired["hvp_torch"](torch.from_numpy(x), torch.from_numpy(v))),
                               _np(paired["hvp_jax"](jnp.asarray(x), jnp.asarray(v))), atol=1e-5)
