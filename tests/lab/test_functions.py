"""Tests of sidebyside.lab.functions: the exact derivatives of the study's f, the
overhead fit, the calibration problem, FLOP counts and peaks."""

import numpy as np
import pytest

from sidebyside.lab import functions as F
from sidebyside.lab import peaks as P

X = np.linspace(-7.0, 13.0, 101)


def test_derivatives_agree_with_central_differences():
    h = 1e-6
    np.testing.assert_allclose(F.df(X), 0.2 + np.cos(X) - 2 * np.sin(2 * X), rtol=1e-15)
    np.testing.assert_allclose(F.d2f(X), (F.df(X + h) - F.df(X - h)) / (2 * h), atol=1e-7)


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


def test_calibration_data_is_seeded_and_lstsq_lies_near_the_truth():
    data = F.calibration_data(0, 500)
    assert data.raw.shape == data.reference.shape == (500,)
    best = F.calibration_lstsq(data.raw, data.reference)
    # the noise is small: the optimum lies near the truth
    np.testing.assert_allclose(best, [data.slope, data.offset], atol=0.05)
    # it solves the normal equations of the linear least squares problem
    design = np.stack([data.raw, np.ones_like(data.raw)], axis=1)
    np.testing.assert_allclose(design.T @ (design @ best - data.reference), 0.0, atol=1e-9)
    # same seed, same data
    np.testing.assert_array_equal(F.calibration_data(0, 500).raw, data.raw)


def test_flop_counts_and_peaks():
    assert F.matmul_flops(2) == 16 and F.inverse_flops(10) == 2000
    assert P.peak_flops("NVIDIA H100 80GB HBM3", "tf32_tensor") == pytest.approx(494.5e12)
    assert P.peak_flops("NVIDIA H100 PCIe", "fp32") == pytest.approx(51e12)
    assert P.peak_flops("NVIDIA H200", "fp64_tensor") == pytest.approx(67e12)
    assert P.peak_flops("NVIDIA A100-SXM4-80GB", "fp64_tensor") == pytest.approx(19.5e12)
    assert P.peak_flops("NVIDIA GeForce RTX 3060 Ti", "fp32") is None
    with pytest.raises(KeyError):
        P.peak_flops("NVIDIA H100 80GB HBM3", "fp8")
    for peaks in P.GPU_PEAKS.values():
        assert peaks["tf32_tensor"] > peaks["fp32"] >= peaks["fp64_tensor"] >= peaks["fp64"]


def test_cpu_peak_estimate_scales_and_states_its_assumption():
    f64, why = P.cpu_peak_flops_estimate("float64", cores=2, ghz=2.0)
    f32, _ = P.cpu_peak_flops_estimate("float32", cores=2, ghz=2.0)
    f64_4, _ = P.cpu_peak_flops_estimate("float64", cores=4, ghz=2.0)
    assert f32 == 2 * f64 and f64_4 == 2 * f64
    assert 2 * 2e9 * 4 <= f64 <= 2 * 2e9 * 32  # between SSE and AVX-512 with 2 FMA units
    assert "assumed" in why and "2 cores" in why
    assert P.cpu_peak_flops_estimate("float64", cores=1, ghz=2.0)[1].startswith("1 core ×")
