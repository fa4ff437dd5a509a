"""Tests of sidebyside.lab.functions: the study's f in three frameworks, its
derivatives, the overhead fit, the calibration problem, FLOP counts and peaks."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import torch

from sidebyside.lab import functions as F

X = np.linspace(-7.0, 13.0, 101)


def test_f_agrees_across_frameworks():
    expected = F.f_numpy(X)
    np.testing.assert_allclose(np.asarray(F.f_jax(jnp.asarray(X, jnp.float32))), expected, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(F.f_torch(torch.tensor(X)).numpy(), expected, rtol=1e-12, atol=1e-12)
    # the original write-up printed f(3) = 1.7012903690338135: a float32 result
    assert F.f_numpy(np.float32(3.0)) == np.float32(1.7012903690338135)
    assert F.f_numpy(3.0) == pytest.approx(1.7012903690338135, rel=1e-7)


def test_derivatives_match_autodiff_in_both_frameworks():
    x32 = jnp.asarray(X, jnp.float32)
    np.testing.assert_allclose(np.asarray(jax.vmap(jax.grad(F.f_jax))(x32)), F.df(X), atol=1e-5)
    np.testing.assert_allclose(np.asarray(jax.vmap(jax.grad(jax.grad(F.f_jax)))(x32)), F.d2f(X), atol=2e-5)
    xt = torch.tensor(X, requires_grad=True)
    (grad,) = torch.autograd.grad(F.f_torch(xt).sum(), xt, create_graph=True)
    np.testing.assert_allclose(grad.detach().numpy(), F.df(X), rtol=1e-12, atol=1e-12)
    (second,) = torch.autograd.grad(grad.sum(), xt)
    np.testing.assert_allclose(second.numpy(), F.d2f(X), rtol=1e-12, atol=1e-12)
    # and the derivative against a central difference, independently of any autodiff
    h = 1e-6
    np.testing.assert_allclose(F.df(X), (F.f_numpy(X + h) - F.f_numpy(X - h)) / (2 * h), atol=1e-8)


def test_f_works_under_jit_and_torch_func():
    x = jnp.linspace(0, 1, 8)
    np.testing.assert_allclose(np.asarray(jax.jit(F.f_jax)(x)), np.asarray(F.f_jax(x)), rtol=1e-6)
    xt = torch.linspace(0, 1, 8, dtype=torch.float64)
    per_element = torch.func.vmap(torch.func.grad(F.f_torch))(xt)
    np.testing.assert_allclose(per_element.numpy(), F.df(xt.numpy()), rtol=1e-12)


def test_fit_overhead_recovers_known_line():
    sizes = np.logspace(1, 8, 8)
    a, b = 2e-6, 3e-9
    got_a, got_b = F.fit_overhead(sizes, a + b * sizes)
    assert got_a == pytest.approx(a, rel=1e-6)
    assert got_b == pytest.approx(b, rel=1e-6)
    # multiplicative noise of 5 % still gives both to ~10 %
    rng = np.random.default_rng(0)
    noisy = (a + b * sizes) * (1 + 0.05 * rng.standard_normal(sizes.shape))
    got_a, got_b = F.fit_overhead(sizes, noisy)
    assert got_a == pytest.approx(a, rel=0.15) and got_b == pytest.approx(b, rel=0.15)
    with pytest.raises(ValueError):
        F.fit_overhead([10], [1e-6])


def test_calibration_losses_agree_and_lstsq_is_the_minimum():
    data = F.calibration_data(0, 500)
    assert data.raw.shape == data.reference.shape == (500,)
    best = F.calibration_lstsq(data.raw, data.reference)
    # the noise is small: the optimum lies near the truth
    np.testing.assert_allclose(best, [data.slope, data.offset], atol=0.05)
    loss_np = F.calibration_rmse_numpy(best, data.raw, data.reference)
    with jax.enable_x64(True):
        loss_jax = float(F.calibration_rmse_jax(jnp.asarray(best), jnp.asarray(data.raw), jnp.asarray(data.reference)))
        grad_jax = np.asarray(jax.grad(F.calibration_rmse_jax)(jnp.asarray(best), jnp.asarray(data.raw), jnp.asarray(data.reference)))
    loss_torch = float(F.calibration_rmse_torch(torch.tensor(best), torch.tensor(data.raw), torch.tensor(data.reference)))
    assert loss_jax == pytest.approx(loss_np, rel=1e-12)
    assert loss_torch == pytest.approx(loss_np, rel=1e-12)
    assert 0.05 < loss_np < 0.2  # ≈ slope × noise std
    np.testing.assert_allclose(grad_jax, 0.0, atol=1e-9)  # stationary point
    for step in ([1e-3, 0], [0, 1e-3], [-1e-3, 1e-3]):
        assert F.calibration_rmse_numpy(best + np.array(step), data.raw, data.reference) > loss_np
    # same seed, same data
    np.testing.assert_array_equal(F.calibration_data(0, 500).raw, data.raw)


def test_flop_counts_and_peaks():
    assert F.matmul_flops(2) == 16 and F.inverse_flops(10) == 2000
    assert F.peak_flops("NVIDIA H100 80GB HBM3", "tf32_tensor") == pytest.approx(494.5e12)
    assert F.peak_flops("NVIDIA H100 PCIe", "fp32") == pytest.approx(51e12)
    assert F.peak_flops("NVIDIA H200", "fp64_tensor") == pytest.approx(67e12)
    assert F.peak_flops("NVIDIA A100-SXM4-80GB", "fp64_tensor") == pytest.approx(19.5e12)
    assert F.peak_flops("NVIDIA GeForce RTX 3060 Ti", "fp32") is None
    with pytest.raises(KeyError):
        F.peak_flops("NVIDIA H100 80GB HBM3", "fp8")
    for peaks in F.GPU_PEAK_TFLOPS.values():
        assert peaks["tf32_tensor"] > peaks["fp32"] >= peaks["fp64_tensor"] >= peaks["fp64"]


def test_cpu_peak_estimate_scales_and_states_its_assumption():
    f64, why = F.cpu_peak_flops_estimate("float64", cores=2, ghz=2.0)
    f32, _ = F.cpu_peak_flops_estimate("float32", cores=2, ghz=2.0)
    f64_4, _ = F.cpu_peak_flops_estimate("float64", cores=4, ghz=2.0)
    assert f32 == 2 * f64 and f64_4 == 2 * f64
    assert 2 * 2e9 * 4 <= f64 <= 2 * 2e9 * 32  # between SSE and AVX-512 with 2 FMA units
    assert "assumed" in why and "2 cores" in why
    assert F.cpu_peak_flops_estimate("float64", cores=1, ghz=2.0)[1].startswith("1 core ×")
