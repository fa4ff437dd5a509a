"""Tests of sidebyside.lab.analysis: linear CKA against its Gram-matrix (HSIC)
definition and its invariances; total variation against a loop reference
and known values; weight statistics."""

import itertools
import math

import numpy as np
import pytest

from sidebyside.lab import analysis


def cka_reference(X, Y):
    """CKA from its definition: HSIC with n x n linear kernels and the centring matrix."""
    X = np.asarray(X, np.float64)
    Y = np.asarray(Y, np.float64)
    n = X.shape[0]
    H = np.eye(n) - np.ones((n, n)) / n
    K = H @ (X @ X.T) @ H
    L = H @ (Y @ Y.T) @ H
    hsic = lambda A, B: np.sum(A * B)  # trace(A B) for symmetric A, B
    return hsic(K, L) / math.sqrt(hsic(K, K) * hsic(L, L))


def tv_reference(img):
    """Sum of absolute 4-neighbour differences, by explicit loops."""
    H, W = img.shape
    total = 0.0
    for i in range(H):
        for j in range(W):
            if j + 1 < W:
                total += abs(img[i, j + 1] - img[i, j])
            if i + 1 < H:
                total += abs(img[i + 1, j] - img[i, j])
    return total


@pytest.fixture
def rng():
    return np.random.default_rng(0)


# ---------------------------------------------------------------- linear CKA


@pytest.mark.parametrize("n,p,q", [(7, 3, 5), (40, 12, 4), (30, 50, 20)])
def test_cka_matches_hsic_definition(rng, n, p, q):
    X = rng.normal(size=(n, p))
    Y = X[:, : min(p, q)] @ rng.normal(size=(min(p, q), q)) + 0.5 * rng.normal(size=(n, q))
    assert analysis.linear_cka(X, Y) == pytest.approx(cka_reference(X, Y), rel=1e-10)


def test_cka_identity_and_symmetry(rng):
    X = rng.normal(size=(50, 8))
    Y = np.maximum(X @ rng.normal(size=(8, 6)), 0)
    assert analysis.linear_cka(X, X) == pytest.approx(1.0, abs=1e-12)
    assert analysis.linear_cka(X, Y) == pytest.approx(analysis.linear_cka(Y, X), rel=1e-12)
    assert 0.0 <= analysis.linear_cka(X, Y) <= 1.0


def test_cka_invariances(rng):
    X = rng.normal(size=(60, 10))
    Y = np.tanh(X @ rng.normal(size=(10, 7)))
    base = analysis.linear_cka(X, Y)
    Q, _ = np.linalg.qr(rng.normal(size=(10, 10)))  # random orthogonal matrix
    assert analysis.linear_cka(X @ Q, Y) == pytest.approx(base, rel=1e-10)
    assert analysis.linear_cka(3.7 * X, 0.01 * Y) == pytest.approx(base, rel=1e-10)
    assert analysis.linear_cka(X + rng.normal(size=(1, 10)) * 100, Y) == pytest.approx(base, rel=1e-8)
    # A rotation of X compared with X itself: still identical representations.
    assert analysis.linear_cka(X @ Q, X) == pytest.approx(1.0, abs=1e-10)


def test_cka_not_invariant_to_anisotropic_scaling(rng):
    X = rng.normal(size=(80, 6))
    Y = X @ rng.normal(size=(6, 6))
    D = np.diag([100.0, 1, 1, 1, 1, 0.01])
    assert abs(analysis.linear_cka(X @ D, Y) - analysis.linear_cka(X, Y)) > 0.05


def test_cka_unrelated_representations_near_zero(rng):
    X = rng.normal(size=(5000, 5))
    Y = rng.normal(size=(5000, 5))
    # For independent Gaussian features, E[CKA] ~ p*q/(n*sqrt(p*q)) = 1e-3 here.
    assert analysis.linear_cka(X, Y) < 0.01
    assert analysis.linear_cka(X, X[:, :3]) > 0.5  # a subspace of X is related


def test_cka_accepts_float32_and_constant_gives_nan(rng):
    X = rng.normal(size=(20, 4)).astype(np.float32)
    assert analysis.linear_cka(X, X.astype(np.float64)) == pytest.approx(1.0, abs=1e-12)
    assert math.isnan(analysis.linear_cka(X, np.ones((20, 3))))


def test_cka_rejects_bad_shapes(rng):
    with pytest.raises(ValueError, match="same examples"):
        analysis.linear_cka(rng.normal(size=(10, 3)), rng.normal(size=(11, 3)))
    with pytest.raises(ValueError, match="2-D"):
        analysis.linear_cka(rng.normal(size=(10,)), rng.normal(size=(10, 3)))
    with pytest.raises(ValueError, match="at least 2"):
        analysis.linear_cka(rng.normal(size=(1, 3)), rng.normal(size=(1, 3)))


def test_cka_between_and_within(rng):
    reps = [rng.normal(size=(30, 4)) for _ in range(4)]
    others = [rng.normal(size=(30, 6)) for _ in range(2)]
    between = analysis.cka_between(reps, others)
    assert between.shape == (4, 2)
    assert between[2, 1] == pytest.approx(analysis.linear_cka(reps[2], others[1]))
    within = analysis.cka_within(reps)
    expected = [analysis.linear_cka(a, b) for a, b in itertools.combinations(reps, 2)]
    np.testing.assert_allclose(within, expected)
    assert within.shape == (6,)
    with pytest.raises(ValueError):
        analysis.cka_within(reps[:1])


def test_cka_matrix_matches_pairwise(rng):
    base = rng.normal(size=(40, 5))
    reps = [base @ rng.normal(size=(5, q)) + 0.3 * rng.normal(size=(40, q)) for q in (3, 5, 8)]
    reps.append(np.ones((40, 2)))  # constant: NaN row and column
    matrix = analysis.cka_matrix(reps)
    assert matrix.shape == (4, 4)
    np.testing.assert_allclose(matrix, matrix.T)
    for i in range(3):
        assert matrix[i, i] == 1.0
        for j in range(3):
            if i != j:
                assert matrix[i, j] == pytest.approx(analysis.linear_cka(reps[i], reps[j]), rel=1e-10)
    assert np.isnan(matrix[3]).all() and np.isnan(matrix[:, 3]).all()
    with pytest.raises(ValueError, match="same examples"):
        analysis.cka_matrix([reps[0], reps[1][:30]])


# ---------------------------------------------------------- total variation


def test_tv_matches_loop_reference(rng):
    T = rng.normal(size=(3, 5, 7))
    got = analysis.total_variation(T, normalise=False)
    np.testing.assert_allclose(got, [tv_reference(t) for t in T], rtol=1e-12)
    count = 5 * 6 + 4 * 7
    rms = np.sqrt((T**2).mean(axis=(1, 2)))
    np.testing.assert_allclose(analysis.total_variation(T), got / count / rms, rtol=1e-12)


def test_tv_flat_and_3d_layouts_agree(rng):
    T = rng.normal(size=(4, 28, 28))
    np.testing.assert_allclose(analysis.total_variation(T.reshape(4, 784)), analysis.total_variation(T))
    T2 = rng.normal(size=(2, 4, 6))
    np.testing.assert_allclose(
        analysis.total_variation(T2.reshape(2, 24), shape=(4, 6)), analysis.total_variation(T2)
    )
    # (6, 4) reads the same numbers as a different image: a different answer.
    assert not np.allclose(analysis.total_variation(T2.reshape(2, 24), shape=(6, 4)), analysis.total_variation(T2))


def test_tv_known_values():
    i, j = np.indices((28, 28))
    constant = np.full((28, 28), -3.0)
    checkerboard = np.where((i + j) % 2 == 0, 1.0, -1.0)
    ramp = j.astype(float)  # horizontal steps of 1, no vertical change
    tv = analysis.total_variation(np.stack([constant, checkerboard, ramp]))
    assert tv[0] == 0.0
    assert tv[1] == pytest.approx(2.0)
    count = 2 * 28 * 27
    assert tv[2] == pytest.approx((28 * 27) / count / np.sqrt(np.mean(ramp**2)))
    assert math.isnan(analysis.total_variation(np.zeros((1, 784)))[0])


def test_tv_scale_invariant_and_white_noise_level(rng):
    noise = rng.normal(size=(2000, 784))
    tv = analysis.total_variation(noise)
    np.testing.assert_allclose(analysis.total_variation(0.001 * noise), tv, rtol=1e-12)
    assert tv.mean() == pytest.approx(analysis.WHITE_NOISE_TV, rel=0.01)
    uniform = rng.uniform(-1, 1, size=(2000, 784))
    assert analysis.total_variation(uniform).mean() == pytest.approx(2 / math.sqrt(3), rel=0.01)
    # Smoothing lowers it: a 3x3 box blur of the noise is much smoother.
    imgs = noise[:50].reshape(50, 28, 28)
    padded = np.pad(imgs, ((0, 0), (1, 1), (1, 1)), mode="edge")
    blurred = sum(padded[:, a:a + 28, b:b + 28] for a in range(3) for b in range(3)) / 9
    assert analysis.total_variation(blurred).mean() < 0.6 * tv.mean()


def test_tv_rejects_bad_shapes(rng):
    with pytest.raises(ValueError, match="square"):
        analysis.total_variation(rng.normal(size=(2, 10)))
    with pytest.raises(ValueError, match="does not hold"):
        analysis.total_variation(rng.normal(size=(2, 12)), shape=(5, 5))
    with pytest.raises(ValueError):
        analysis.total_variation(rng.normal(size=(784,)))


# ------------------------------------------------------- weight statistics


def test_weight_stats(rng):
    W = rng.normal(size=(16, 784)) * 0.05
    W[3] = 0.0  # a dead unit: no TV (NaN), skipped in the mean
    stats = analysis.weight_stats(W, shape=(28, 28))
    assert stats["frobenius_norm"] == pytest.approx(np.sqrt((W**2).sum()))
    rows = np.linalg.norm(W, axis=1)
    assert stats["unit_norm_mean"] == pytest.approx(rows.mean())
    assert stats["unit_norm_std"] == pytest.approx(rows.std())
    assert stats["max_abs"] == pytest.approx(np.abs(W).max())
    tv = analysis.total_variation(np.delete(W, 3, axis=0))
    assert stats["tv_mean"] == pytest.approx(tv.mean())
    assert stats["tv_std"] == pytest.approx(tv.std())
    assert set(analysis.weight_stats(W)) == {"frobenius_norm", "unit_norm_mean", "unit_norm_std", "std", "mean_abs", "max_abs"}
    with pytest.raises(ValueError):
        analysis.weight_stats(W.reshape(-1))


def test_relative_change(rng):
    W0 = rng.normal(size=(4, 9))
    W1 = W0 + 0.1 * W0
    assert analysis.relative_change(W0, W1) == pytest.approx(0.1)
    assert analysis.relative_change(W0, W0) == 0.0
    with pytest.raises(ValueError):
        analysis.relative_change(W0, W0.T)


def test_weight_change_separates_the_update_from_the_start(rng):
    # A noisy start plus a smooth update: the final templates are rougher than the update alone.
    W0 = rng.normal(size=(8, 784))
    ramp = np.tile(np.linspace(-1, 1, 28), 28)  # smooth along each row of the 28x28 image
    W1 = W0 + 5.0 * ramp
    change = analysis.weight_change(W0, W1, shape=(28, 28))
    assert change["norm_init"] == pytest.approx(np.linalg.norm(W0))
    assert change["norm_end"] == pytest.approx(np.linalg.norm(W1))
    assert change["relative_change"] == pytest.approx(np.linalg.norm(W1 - W0) / np.linalg.norm(W0))
    assert change["unit_norm_end"] == pytest.approx(np.linalg.norm(W1, axis=1).mean())
    assert change["std_end"] == pytest.approx(W1.std())
    assert change["tv_init"] == pytest.approx(analysis.total_variation(W0).mean())
    assert change["tv_update"] == pytest.approx(analysis.total_variation(np.tile(ramp, (8, 1))).mean())
    assert change["tv_update"] < change["tv_end"] < change["tv_init"]
    assert "tv_end" not in analysis.weight_change(W0, W1)
    with pytest.raises(ValueError, match="same matrix"):
        analysis.weight_change(W0, W1[:4])


def test_mean_std_over_seeds():
    assert analysis.mean_std([1.0, 2.0, 3.0]) == pytest.approx((2.0, 1.0))  # ddof=1: sample spread
    mean, std = analysis.mean_std([0.7])
    assert mean == 0.7 and math.isnan(std)
    with pytest.raises(ValueError):
        analysis.mean_std([])


def test_cka_pairs_pick_the_right_entries():
    # Entry (i, j) encodes the pair, so the selection can be read off the values.
    labels = [("torch", 0), ("torch", 1), ("torch", 2), ("flax", 0), ("flax", 1)]
    k = len(labels)
    matrix = np.array([[10 * min(i, j) + max(i, j) for j in range(k)] for i in range(k)], dtype=float)
    assert analysis.cka_pairs(matrix, labels, "torch", "torch").tolist() == [1, 2, 12]
    assert analysis.cka_pairs(matrix, labels, "torch", "flax").tolist() == [4, 13, 23, 24]  # seeds differ
    assert analysis.cka_pairs(matrix, labels, "torch", "flax", same_seed=True).tolist() == [3, 14]
    assert analysis.cka_pairs(matrix, labels, "flax", "absent").size == 0
    groups = analysis.cka_comparisons(matrix, labels, {"within": ("flax", "flax", False),
                                                       "across": ("torch", "flax", True)})
    assert list(groups) == ["within", "across"]
    assert groups["within"].tolist() == [34] and groups["across"].tolist() == [3, 14]
    with pytest.raises(ValueError, match="one row per label"):
        analysis.cka_pairs(matrix[:4, :4], labels, "torch", "flax")
