"""What a network learned, in numbers: representational similarity and
weight statistics. Pure NumPy, framework-free.

Input contract:

- Representations (for CKA) are 2-D arrays ``(n_examples, n_features)``:
  row ``i`` of every representation must come from the same example ``i``.
  Anything array-like (NumPy, JAX, CPU torch tensors via ``np.asarray``) works;
  computations run in float64.
- Weight matrices use PyTorch's layout ``(units, inputs)``: row ``u`` holds
  the incoming weights of unit ``u`` (a Flax kernel ``(inputs, units)`` must
  be transposed first, as ``models.first_layer_weights`` does).
- Templates (for total variation) are ``(k, H*W)`` or ``(k, H, W)`` arrays, one
  image-shaped template per row, e.g. the 784 first-layer weights of a unit of
  an MLP on 28x28 images.

Total variation, as used here (:func:`total_variation`): the mean absolute
difference between horizontally and vertically adjacent pixels, divided by
the template's root-mean-square value. The division makes it independent of
the template's scale, so networks whose weights differ in size (different
initialisations) are compared on shape alone; a constant template scores 0,
white noise about ``2/sqrt(pi) ~ 1.13`` (Gaussian) or ``2/sqrt(3) ~ 1.15``
(uniform), a +-1 checkerboard exactly 2 (about the largest possible).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Hashable, Mapping, Sequence

import numpy as np

__all__ = [
    "WHITE_NOISE_TV",
    "linear_cka",
    "cka_between",
    "cka_within",
    "cka_matrix",
    "total_variation",
    "relative_change",
    "weight_stats",
    "weight_change",
    "mean_std",
    "cka_pairs",
    "cka_comparisons",
]

#: Expected normalised total variation of i.i.d. Gaussian noise: E|a - b| / sigma
#: for independent a, b ~ N(0, sigma^2) is 2 / sqrt(pi).
WHITE_NOISE_TV = 2.0 / math.sqrt(math.pi)


def _as_2d(name: str, X) -> np.ndarray:
    X = np.asarray(X, dtype=np.float64)
    if X.ndim != 2:
        raise ValueError(f"{name} must be 2-D (n_examples, n_features), got shape {X.shape}")
    return X


def linear_cka(X, Y) -> float:
    """Linear centred kernel alignment between two representations of the
    same ``n`` examples (Kornblith et al., 2019).

    ``X``: ``(n, p)``, ``Y``: ``(n, q)``. Returns a float in ``[0, 1]``:
    1 when ``Y`` is a rotation and/or isotropic rescaling of ``X`` (after
    centring), near 0 for unrelated representations (with ``n >> p, q``).
    Invariant to orthogonal transforms, isotropic scaling and per-feature
    offsets; not invariant to arbitrary invertible linear maps.
    Returns NaN when either representation is constant over the examples.

    Computed in feature space, ``||Yc^T Xc||_F^2 / (||Xc^T Xc||_F ||Yc^T Yc||_F)``,
    which equals the HSIC form with ``n x n`` linear Gram matrices but costs
    ``O(n p q)`` instead of ``O(n^2)`` memory.
    """
    X = _as_2d("X", X)
    Y = _as_2d("Y", Y)
    if X.shape[0] != Y.shape[0]:
        raise ValueError(f"X and Y must hold the same examples: {X.shape[0]} vs {Y.shape[0]} rows")
    if X.shape[0] < 2:
        raise ValueError("CKA needs at least 2 examples")
    X = X - X.mean(axis=0, keepdims=True)
    Y = Y - Y.mean(axis=0, keepdims=True)
    cross = np.linalg.norm(Y.T @ X, "fro") ** 2
    denominator = np.linalg.norm(X.T @ X, "fro") * np.linalg.norm(Y.T @ Y, "fro")
    if denominator == 0.0:
        return float("nan")
    # Rounding can push an identical pair a hair above 1.
    return float(min(cross / denominator, 1.0))


def cka_matrix(reps: Sequence) -> np.ndarray:
    """Linear CKA of every pair of ``reps`` (all of the same ``n`` examples):
    a symmetric ``(k, k)`` array with ones on the diagonal (NaN for a constant
    representation). Same values as :func:`linear_cka` pair by pair, but each
    representation is centred, and its own Gram norm computed, only once:
    ``k (k - 1) / 2`` cross products instead of ``3 k^2``."""
    centred = [_as_2d(f"reps[{i}]", r) for i, r in enumerate(reps)]
    if len({r.shape[0] for r in centred}) > 1:
        raise ValueError(f"representations must hold the same examples, got rows {[r.shape[0] for r in centred]}")
    centred = [r - r.mean(axis=0, keepdims=True) for r in centred]
    self_norms = [np.linalg.norm(r.T @ r, "fro") for r in centred]
    k = len(centred)
    matrix = np.full((k, k), np.nan)
    for i in range(k):
        if self_norms[i] > 0:
            matrix[i, i] = 1.0
        for j in range(i + 1, k):
            denominator = self_norms[i] * self_norms[j]
            if denominator > 0:
                value = min(np.linalg.norm(centred[j].T @ centred[i], "fro") ** 2 / denominator, 1.0)
                matrix[i, j] = matrix[j, i] = value
    return matrix


def cka_between(reps_a: Sequence, reps_b: Sequence) -> np.ndarray:
    """Linear CKA of every pair (one from ``reps_a``, one from ``reps_b``):
    a ``(len(reps_a), len(reps_b))`` array. Use it across groups, e.g. the
    hidden layers of PyTorch networks against those of Flax networks."""
    return np.array([[linear_cka(a, b) for b in reps_b] for a in reps_a], dtype=np.float64).reshape(
        len(reps_a), len(reps_b)
    )


def cka_within(reps: Sequence) -> np.ndarray:
    """Linear CKA of every unordered pair ``i < j`` of ``reps`` (e.g. networks
    of one framework trained from different seeds): a 1-D array of
    ``len(reps) * (len(reps) - 1) / 2`` values, in ``itertools.combinations`` order."""
    if len(reps) < 2:
        raise ValueError(f"need at least 2 representations for pairs, got {len(reps)}")
    return np.array([linear_cka(a, b) for a, b in itertools.combinations(reps, 2)], dtype=np.float64)


def _templates(templates, shape: tuple[int, int] | None) -> np.ndarray:
    T = np.asarray(templates, dtype=np.float64)
    if T.ndim == 3:
        if shape is not None and tuple(T.shape[1:]) != tuple(shape):
            raise ValueError(f"templates have shape {T.shape[1:]}, expected {tuple(shape)}")
        return T
    if T.ndim != 2:
        raise ValueError(f"templates must be (k, H*W) or (k, H, W), got shape {T.shape}")
    if shape is None:
        side = math.isqrt(T.shape[1])
        if side * side != T.shape[1]:
            raise ValueError(f"{T.shape[1]} values per template is not a square image: pass shape=(H, W)")
        shape = (side, side)
    if shape[0] * shape[1] != T.shape[1]:
        raise ValueError(f"shape {tuple(shape)} does not hold {T.shape[1]} values per template")
    return T.reshape(T.shape[0], *shape)


def total_variation(templates, shape: tuple[int, int] | None = None, *, normalise: bool = True) -> np.ndarray:
    """Anisotropic total variation of each image-shaped template.

    ``templates``: ``(k, H*W)`` (``shape`` gives ``(H, W)``; square by default)
    or ``(k, H, W)``. Returns ``(k,)`` float64.

    ``normalise=True`` (default): the mean absolute difference between
    4-neighbours (``H(W-1) + (H-1)W`` differences) divided by the template's
    root-mean-square value; scale-free (see the module docstring for reference
    values). NaN for an all-zero template.
    ``normalise=False``: the plain sum of absolute neighbour differences.
    """
    T = _templates(templates, shape)
    dx = np.abs(np.diff(T, axis=2)).sum(axis=(1, 2))
    dy = np.abs(np.diff(T, axis=1)).sum(axis=(1, 2))
    tv = dx + dy
    if not normalise:
        return tv
    _, H, W = T.shape
    count = H * (W - 1) + (H - 1) * W
    rms = np.sqrt(np.mean(T**2, axis=(1, 2)))
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(rms > 0, tv / count / np.where(rms > 0, rms, 1.0), np.nan)


def relative_change(before, after) -> float:
    """``||after - before||_F / ||before||_F``: how far a weight matrix moved,
    relative to where it started (e.g. initialisation -> end of training)."""
    before = np.asarray(before, dtype=np.float64)
    after = np.asarray(after, dtype=np.float64)
    if before.shape != after.shape:
        raise ValueError(f"shapes differ: {before.shape} vs {after.shape}")
    norm = np.linalg.norm(before)
    if norm == 0:
        return float("inf") if np.any(after != before) else 0.0
    return float(np.linalg.norm(after - before) / norm)


def weight_stats(W, shape: tuple[int, int] | None = None) -> dict[str, float]:
    """Summary statistics of one weight matrix ``(units, inputs)``.

    Returns a dict of floats: ``frobenius_norm``, ``unit_norm_mean`` and
    ``unit_norm_std`` (L2 norms of the rows: each unit's incoming weights),
    ``std``, ``mean_abs``, ``max_abs``; with ``shape=(H, W)`` (rows are
    ``H*W`` image templates) also ``tv_mean`` and ``tv_std``: the normalised
    :func:`total_variation` of the rows (NaN rows, all-zero units, skipped).
    """
    W = np.asarray(W, dtype=np.float64)
    if W.ndim != 2:
        raise ValueError(f"W must be 2-D (units, inputs), got shape {W.shape}")
    unit_norms = np.linalg.norm(W, axis=1)
    stats = {
        "frobenius_norm": float(np.linalg.norm(W)),
        "unit_norm_mean": float(unit_norms.mean()),
        "unit_norm_std": float(unit_norms.std()),
        "std": float(W.std()),
        "mean_abs": float(np.abs(W).mean()),
        "max_abs": float(np.abs(W).max()),
    }
    if shape is not None:
        tv = total_variation(W, shape)
        stats["tv_mean"] = float(np.nanmean(tv)) if np.any(np.isfinite(tv)) else float("nan")
        stats["tv_std"] = float(np.nanstd(tv)) if np.any(np.isfinite(tv)) else float("nan")
    return stats


def weight_change(before, after, shape: tuple[int, int] | None = None) -> dict[str, float]:
    """How one weight matrix ``(units, inputs)`` changed between two moments
    (e.g. initialisation and the end of training).

    Returns a dict of floats: ``norm_init`` and ``norm_end`` (Frobenius norms),
    ``relative_change`` (:func:`relative_change`), ``unit_norm_end`` (mean L2
    norm of a unit's incoming weights at the end) and ``std_end``; with
    ``shape=(H, W)`` (rows are image templates) also the normalised
    :func:`total_variation` of the templates, mean over units: ``tv_init``,
    ``tv_end`` and ``tv_update`` (of ``after - before``, what training added).
    """
    before = np.asarray(before, dtype=np.float64)
    after = np.asarray(after, dtype=np.float64)
    if before.shape != after.shape:
        raise ValueError(f"before and after must be the same matrix at two moments: {before.shape} vs {after.shape}")
    end = weight_stats(after, shape)
    out = {
        "norm_init": float(np.linalg.norm(before)),
        "norm_end": end["frobenius_norm"],
        "relative_change": relative_change(before, after),
        "unit_norm_end": end["unit_norm_mean"],
        "std_end": end["std"],
    }
    if shape is not None:
        out["tv_init"] = _nanmean(total_variation(before, shape))
        out["tv_end"] = end["tv_mean"]
        out["tv_update"] = _nanmean(total_variation(after - before, shape))
    return out


def _nanmean(values: np.ndarray) -> float:
    return float(np.nanmean(values)) if np.any(np.isfinite(values)) else float("nan")


def mean_std(values) -> tuple[float, float]:
    """Mean and sample standard deviation (``ddof=1``) of a quantity measured
    once per seed; the standard deviation is NaN for a single value (its
    spread is unknown), and an empty input is an error."""
    values = np.asarray(values, dtype=np.float64).ravel()
    if values.size == 0:
        raise ValueError("mean_std needs at least one value")
    return float(values.mean()), (float(values.std(ddof=1)) if values.size > 1 else float("nan"))


def cka_pairs(matrix, labels: Sequence[tuple[Hashable, Hashable]], a: Hashable, b: Hashable, *,
              same_seed: bool = False) -> np.ndarray:
    """The entries of a CKA matrix (e.g. :func:`cka_matrix`) between the
    networks of groups ``a`` and ``b``.

    ``labels[i] = (group, seed)`` names row and column ``i``. Within one
    group (``a == b``) every unordered pair of its networks, in
    ``itertools.combinations`` order; across groups, every pair whose seeds
    differ or, with ``same_seed=True``, whose seeds are equal (networks that
    share a seed may share what it fixes, such as the order of the batches).
    Returns a 1-D float64 array (empty when no pair qualifies).
    """
    matrix = np.asarray(matrix, dtype=np.float64)
    if matrix.ndim != 2 or matrix.shape[0] != matrix.shape[1] or matrix.shape[0] != len(labels):
        raise ValueError(f"matrix must be square with one row per label: {matrix.shape} for {len(labels)} labels")
    ia = [(seed, i) for i, (group, seed) in enumerate(labels) if group == a]
    ib = [(seed, j) for j, (group, seed) in enumerate(labels) if group == b]
    if a == b:
        values = [matrix[i, j] for (_, i), (_, j) in itertools.combinations(ia, 2)]
    else:
        values = [matrix[i, j] for si, i in ia for sj, j in ib if (si == sj) == same_seed]
    return np.array(values, dtype=np.float64)


def cka_comparisons(matrix, labels: Sequence[tuple[Hashable, Hashable]],
                    comparisons: Mapping[str, tuple[Hashable, Hashable, bool]]) -> dict[str, np.ndarray]:
    """Several :func:`cka_pairs` selections of one matrix at once:
    ``comparisons[name] = (a, b, same_seed)``; returns ``{name: values}`` in
    the order of ``comparisons``."""
    return {name: cka_pairs(matrix, labels, a, b, same_seed=same_seed)
            for name, (a, b, same_seed) in comparisons.items()}
