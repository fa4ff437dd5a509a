"""Plots and pictures shared by the posts.

Colours are fixed per framework across every post: PyTorch is always
``COLORS["torch"]``, JAX/Flax always ``COLORS["jax"]``.

Weight grids (:func:`weight_mosaic`, :func:`weight_grid`, :func:`shared_vmax`):
weights in PyTorch's layout ``(units, inputs)`` with ``inputs = H*W``; each
row is drawn as one ``H x W`` image on a diverging colour scale centred at
zero (:data:`DIVERGING_CMAP`, chosen not to clash with the framework colours).

Computation graphs of JAX functions (:func:`jaxpr_graph`): ``fn`` is any
function JAX can trace (``jax.make_jaxpr(fn)(*args)`` must work) whose
arguments are pytrees of arrays; the result is a ``graphviz.Digraph`` with
one node per equation (primitive), one edge per variable (labelled with its
dtype and shape), the flattened inputs as source nodes (parameters, i.e. the
arguments in ``param_argnums``, drawn apart from data) and the outputs as
sink nodes. Equations that hold a nested jaxpr (``jit``/``pjit``,
``custom_jvp_call``, ``custom_vjp_call``, ``closed_call``, ``remat``, and
control flow such as ``cond``/``scan``/``while``) are drawn as ONE node
labelled ``primitive: name`` (e.g. ``jit: log_softmax``); with
``expand_depth=k`` the call-like ones (not control flow) are opened, up to
``k`` levels deep, as a dashed cluster holding their own equations.
Rendering (``.pipe``, SVG) needs graphviz's ``dot`` program.
"""

from __future__ import annotations

import math
from typing import Any, Callable, Sequence

import numpy as np

__all__ = [
    "COLORS", "LABELS", "DIVERGING_CMAP", "color", "style",
    "weight_mosaic", "shared_vmax", "weight_grid", "jaxpr_graph", "svg",
]

COLORS = {
    "torch": "#EE4C2C",  # PyTorch orange-red
    "jax": "#1A73E8",    # JAX blue
    "flax": "#1A73E8",   # Flax is JAX's network library: same colour
    "numpy": "#4D4D4D",  # reference baselines in grey
    "scipy": "#8C8C8C",
}

LABELS = {"torch": "PyTorch", "jax": "JAX", "flax": "Flax", "numpy": "NumPy", "scipy": "SciPy"}

#: Colour map for signed weights: brown (negative) - white (zero) - teal
#: (positive); neither end looks like PyTorch's red or JAX's blue.
DIVERGING_CMAP = "BrBG"


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
