"""Plots and pictures shared by the posts.

Colours are fixed per framework across every post: PyTorch is always
``COLORS["torch"]``, JAX/Flax always ``COLORS["jax"]``.
"""

from __future__ import annotations

__all__ = ["COLORS", "LABELS", "color", "style"]

COLORS = {
    "torch": "#EE4C2C",  # PyTorch orange-red
    "jax": "#1A73E8",    # JAX blue
    "flax": "#1A73E8",   # Flax is JAX's network library: same colour
    "numpy": "#4D4D4D",  # reference baselines in grey
    "scipy": "#8C8C8C",
}

LABELS = {"torch": "PyTorch", "jax": "JAX", "flax": "Flax", "numpy": "NumPy", "scipy": "SciPy"}


def color(name: str) -> str:
    """The colour of a framework, from a name such as ``torch_eager`` or ``jax-jit``."""
    key = name.lower().replace("-", "_").split("_")[0]
    if key == "pytorch":
        key = "torch"
    if key not in COLORS:
        raise KeyError(f"no colour for {name!r}; known: {', '.join(COLORS)}")
    return COLORS[key]


def style() -> None:
    """Matplotlib defaults for every post: readable sizes, light grid."""
    import matplotlib as mpl

    mpl.rcParams.update({
        "figure.dpi": 110,
        "savefig.dpi": 110,
        "figure.figsize": (7.5, 4.2),
        "axes.grid": True,
        "grid.alpha": 0.3,
        "axes.spines.top": False,
        "axes.spines.right": False,
        "axes.titleweight": "bold",
        "legend.frameon": False,
    })
