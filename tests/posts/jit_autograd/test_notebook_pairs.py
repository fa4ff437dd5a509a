"""The paired cells of notebooks/04_jit_autograd.py compute what the library's reference functions
(sidebyside.lab.functions) compute: f, its gradient over a vector and the Hessian-vector product,
eager (the compiled rungs wrap these same functions; compiling them is left to the smoke run)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from sidebyside.lab import functions
from sidebyside.publish.discovery import read_header
from sidebyside.publish.pairs import TAG_RE

NOTEBOOK = Path(__file__).resolve().parents[3] / "notebooks" / "04_jit_autograd.py"


@pytest.fixture(scope="module")
def paired():
    """The namespace left by running the notebook's paired cells, in order, and nothing else."""
    pytest.importorskip("torch")
    pytest.importorskip("jax")
    _, cells = read_header(NOTEBOOK)
    namespace: dict = {}
    ran = []
    for cell in cells:
        tags = [TAG_RE.match(str(t)) for t in cell["metadata"].get("tags", [])]
        match = next((m for m in tags if m), None)
        if match and cell["cell_type"] == "code":
            exec(compile(cell["source"], f"<pair {match.group(1)}:{match.group(2)}>", "exec"), namespace)
            ran.append(match.group(1))
    assert {"f", "jit", "grad", "hvp"} <= set(ran)
    return namespace


def _np(value):
    return value.detach().cpu().numpy() if hasattr(value, "detach") else np.asarray(value)


def test_f_in_each_framework_is_the_library_f(paired):
    import jax.numpy as jnp
    import torch

    x = np.linspace(0, 4 * np.pi, 33, dtype=np.float32)
    expected = functions.f_numpy(x)
    np.testing.assert_allclose(paired["f_numpy"](x), expected, rtol=1e-6)
    np.testing.assert_allclose(_np(paired["f_jax"](jnp.asarray(x))), expected, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(_np(paired["f_torch"](torch.from_numpy(x))), expected, rtol=1e-5, atol=1e-6)
    for entry in ("f_static", "f_dynamic", "f_cudagraphs"):  # the compiled rungs' entry points, uncompiled
        np.testing.assert_allclose(_np(paired[entry](torch.from_numpy(x))), expected, rtol=1e-5, atol=1e-6)


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
    library = _np(functions.hvp_f_torch(torch.from_numpy(x), torch.from_numpy(v)))
    for name, value in {
        "hvp_torch": paired["hvp_torch"](torch.from_numpy(x), torch.from_numpy(v)),
        "hvp_double_backward_torch": paired["hvp_double_backward_torch"](torch.from_numpy(x), torch.from_numpy(v)),
        "hvp_jax": paired["hvp_jax"](jnp.asarray(x), jnp.asarray(v)),
    }.items():
        np.testing.assert_allclose(_np(value), exact, atol=1e-4, err_msg=name)
        np.testing.assert_allclose(_np(value), library, atol=1e-5, err_msg=name)
