"""The calibration loss of notebooks/05_xla_and_scipy.py's optimisation pair, run as the notebook
writes it: the NumPy, JAX and PyTorch losses agree, and the library's exact least-squares solution
(sidebyside.lab.functions.calibration_lstsq) is their minimum."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import run_pairs

from sidebyside.lab import functions


@pytest.fixture(scope="module")
def optimise():
    """The namespace left by running the notebook's ``optimise`` pair, in order, with the set-up
    cell's imports."""
    jax = pytest.importorskip("jax")
    torch = pytest.importorskip("torch")
    optax = pytest.importorskip("optax")
    import jax.numpy as jnp
    import scipy.optimize

    return run_pairs("05_xla_and_scipy.py", ["optimise"],
                     {"np": np, "jax": jax, "jnp": jnp, "torch": torch, "optax": optax, "scipy": scipy})


def test_losses_agree_and_lstsq_is_the_minimum(optimise):
    import jax
    import jax.numpy as jnp
    import torch

    data = functions.calibration_data(0, 500)
    best = functions.calibration_lstsq(data.raw, data.reference)
    loss_np = optimise["rmse_numpy"](best, data.raw, data.reference)
    with jax.enable_x64(True):
        args = (jnp.asarray(best), jnp.asarray(data.raw), jnp.asarray(data.reference))
        loss_jax = float(optimise["rmse_jax"](*args))
        grad_jax = np.asarray(jax.grad(optimise["rmse_jax"])(*args))
    loss_torch = float(optimise["rmse_torch"](torch.tensor(best), torch.tensor(data.raw), torch.tensor(data.reference)))
    assert loss_jax == pytest.approx(loss_np, rel=1e-12)
    assert loss_torch == pytest.approx(loss_np, rel=1e-12)
    assert 0.05 < loss_np < 0.2  # ≈ slope × noise std
    np.testing.assert_allclose(grad_jax, 0.0, atol=1e-9)  # stationary point
    for step in ([1e-3, 0], [0, 1e-3], [-1e-3, 1e-3]):
        assert optimise["rmse_numpy"](best + np.array(step), data.raw, data.reference) > loss_np
