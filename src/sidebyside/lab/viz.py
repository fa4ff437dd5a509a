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
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

__all__ = [
    "COLORS", "LABELS", "DIVERGING_CMAP", "MAX_PNG_BYTES", "color", "style", "optimise_png",
    "weight_mosaic", "shared_vmax", "weight_grid", "similarity_matrix", "jaxpr_graph", "svg",
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


# ------------------------------------------------------------ figure files

#: The most bytes a post's PNG figure may take (a reader on a phone).
MAX_PNG_BYTES = 400_000


def optimise_png(data: bytes, max_bytes: int = MAX_PNG_BYTES) -> bytes:
    """A PNG figure as a post serves it: the same picture as a 256-colour palette PNG
    (opaque where every pixel is), which keeps a plot's flat colours and a weight
    map's diverging scale; where that is still over ``max_bytes`` it is scaled down
    (Lanczos) until it fits. Returns the smaller of the palette image and ``data``
    when ``data`` fits; never a PNG larger than ``max_bytes`` unless one pixel is.
    Bytes that Pillow cannot read are returned unchanged."""
    import io

    from PIL import Image

    try:
        image = Image.open(io.BytesIO(data))
        image.load()
    except OSError:  # not a PNG that Pillow reads: served as it came (the image-size test still sees it)
        return data
    if image.mode in ("RGBA", "LA") and image.getchannel("A").getextrema() == (255, 255):
        image = image.convert("RGB")
    elif image.mode not in ("RGB", "RGBA"):
        image = image.convert("RGBA" if "A" in image.getbands() else "RGB")
    best, scale = data, 1.0
    while True:
        frame = image if scale == 1.0 else image.resize(
            (max(1, round(image.width * scale)), max(1, round(image.height * scale))), Image.Resampling.LANCZOS)
        method = Image.Quantize.FASTOCTREE if frame.mode == "RGBA" else Image.Quantize.MEDIANCUT
        buffer = io.BytesIO()
        frame.quantize(colors=256, method=method, dither=Image.Dither.NONE).save(buffer, format="PNG", optimize=True)
        encoded = buffer.getvalue()
        if scale < 1.0 or len(encoded) < len(best):
            best = encoded
        if len(best) <= max_bytes or frame.width * frame.height <= 1:
            return best
        scale *= 0.9 * (max_bytes / len(best)) ** 0.5


# ------------------------------------------------------------ weight grids


def weight_mosaic(weights, shape: tuple[int, int] = (28, 28), *, ncols: int = 16, pad: int = 1) -> np.ndarray:
    """Tile the rows of ``weights`` ``(k, H*W)`` (or ``(k, H, W)``) into one
    2-D image: ``ceil(k / ncols)`` rows of ``ncols`` templates, row-major
    (unit ``u`` at row ``u // ncols``, column ``u % ncols``), separated by
    ``pad`` pixels. Gaps and unused cells are NaN (drawn as background).
    Returns float64 ``(rows*(H+pad)-pad, ncols*(W+pad)-pad)``."""
    W = np.asarray(weights, dtype=np.float64)
    H, Wd = shape
    if W.ndim == 3:
        if tuple(W.shape[1:]) != (H, Wd):
            raise ValueError(f"templates of shape {W.shape[1:]} do not match shape={tuple(shape)}")
    elif W.ndim == 2 and W.shape[1] == H * Wd:
        W = W.reshape(W.shape[0], H, Wd)
    else:
        raise ValueError(f"weights must be (k, {H * Wd}) or (k, {H}, {Wd}), got {W.shape}")
    if ncols < 1 or pad < 0:
        raise ValueError("ncols must be >= 1 and pad >= 0")
    k = W.shape[0]
    ncols = min(ncols, max(k, 1))
    nrows = max(1, math.ceil(k / ncols))
    mosaic = np.full((nrows * (H + pad) - pad, ncols * (Wd + pad) - pad), np.nan)
    for u in range(k):
        r, c = divmod(u, ncols)
        mosaic[r * (H + pad):r * (H + pad) + H, c * (Wd + pad):c * (Wd + pad) + Wd] = W[u]
    return mosaic


def shared_vmax(*weights, quantile: float = 1.0) -> float:
    """One symmetric colour limit for several weight arrays: the ``quantile``
    of ``|w|`` over all of them together (1.0: the largest magnitude;
    e.g. 0.995 keeps a few outliers from washing out the rest)."""
    if not weights:
        raise ValueError("pass at least one array")
    values = np.concatenate([np.abs(np.asarray(w, dtype=np.float64)).ravel() for w in weights])
    vmax = float(np.quantile(values, quantile))
    return vmax if vmax > 0 else 1.0


def weight_grid(
    ax,
    weights,
    *,
    vmax: float | None = None,
    shape: tuple[int, int] = (28, 28),
    ncols: int = 16,
    pad: int = 1,
    cmap: str = DIVERGING_CMAP,
    title: str | None = None,
):
    """Draw ``weights`` ``(k, H*W)`` as a grid of ``k`` images on ``ax``, on
    the colour scale ``[-vmax, vmax]`` (centred at zero; default: this
    array's largest magnitude; pass :func:`shared_vmax` of several arrays to
    compare them on one scale). Returns the ``AxesImage`` (for a colorbar)."""
    import matplotlib as mpl

    mosaic = weight_mosaic(weights, shape, ncols=ncols, pad=pad)
    if vmax is None:
        vmax = shared_vmax(weights)
    colormap = mpl.colormaps[cmap].with_extremes(bad="white")
    image = ax.imshow(mosaic, cmap=colormap, vmin=-vmax, vmax=vmax, interpolation="nearest")
    ax.set_xticks([])
    ax.set_yticks([])
    ax.grid(False)
    for spine in ax.spines.values():
        spine.set_visible(False)
    k = np.asarray(weights).shape[0]
    # Short enough to fit under a close-up of three templates.
    ax.set_xlabel(f"{k} units, {shape[0]}×{shape[1]} input pixels each" if k <= ncols else
                  f"{k} units, {ncols} per row; each image {shape[0]}×{shape[1]} input pixels")
    if title:
        ax.set_title(title)
    return image


def similarity_matrix(ax, matrix, labels: Sequence[str], *, colors: Sequence[str] | None = None,
                      cmap: str = "viridis", digits: int = 3):
    """Draw a symmetric similarity matrix ``(k, k)`` (e.g. linear CKA between
    networks) on ``ax``, each cell written out to ``digits`` decimals (three by default:
    CKA values of trained networks differ in the third), with
    ``labels`` on both axes (tick label ``i`` in ``colors[i]``, e.g. the
    framework colour of network ``i``). The scale runs from just below the
    smallest value to 1, so that small differences stay visible and the
    colour bar says how small. Returns the ``AxesImage`` (for a colorbar)."""
    matrix = np.asarray(matrix, dtype=np.float64)
    k = len(labels)
    if matrix.shape != (k, k):
        raise ValueError(f"matrix must be (k, k) for {k} labels, got {matrix.shape}")
    if colors is not None and len(colors) != k:
        raise ValueError(f"one colour per label: {len(colors)} colours for {k} labels")
    vmin = min(np.floor(np.nanmin(matrix) * 100) / 100 - 0.01, 0.99)
    image = ax.imshow(matrix, cmap=cmap, vmin=vmin, vmax=1.0)
    fontsize = 8 if k <= 16 else 6
    ax.set_xticks(range(k), labels, rotation=60, ha="right", fontsize=fontsize)
    ax.set_yticks(range(k), labels, fontsize=fontsize)
    if colors is not None:
        for tick_x, tick_y, c in zip(ax.get_xticklabels(), ax.get_yticklabels(), colors):
            tick_x.set_color(c)
            tick_y.set_color(c)
    middle = (1.0 + vmin) / 2
    for i in range(k):
        for j in range(k):
            ax.text(j, i, f"{matrix[i, j]:.{digits}f}", ha="center", va="center", fontsize=6 if k <= 16 else 5,
                    color="white" if matrix[i, j] < middle else "black")
    ax.grid(False)
    return image


# ------------------------------------------------- jaxpr computation graphs

#: Primitives whose nested jaxpr is a plain call (inputs and outputs map one
#: to one onto the equation's): these can be expanded in place.
_CALL_PRIMITIVES = {
    "jit", "pjit", "closed_call", "core_call", "custom_jvp_call", "custom_vjp_call",
    "custom_vjp_call_jaxpr", "remat", "remat2", "checkpoint", "custom_lin",
}
#: Primitives whose nested jaxprs are loop bodies or branches: always one node.
_CONTROL_PRIMITIVES = {"cond", "while", "scan", "shard_map", "xla_pmap", "custom_transpose_call"}

_NODE_STYLE = {
    "param": dict(shape="box", style="rounded,filled", fillcolor="#D2E3FC", color="#1A73E8", penwidth="1.5"),
    "data": dict(shape="ellipse", style="filled", fillcolor="#EEEEEE", color="#4D4D4D"),
    "const": dict(shape="box", style="dashed", color="#8C8C8C"),
    "eqn": dict(shape="box", style="filled", fillcolor="white", color="#4D4D4D"),
    "call": dict(shape="box", style="filled", fillcolor="#F1F3F4", color="#4D4D4D", peripheries="2"),
    "output": dict(shape="ellipse", style="filled,bold", fillcolor="#E6F4EA", color="#188038"),
}


def _path_name(prefix: str, path) -> str:
    parts = [prefix] if prefix else []
    for key in path:
        for attribute in ("key", "name", "idx"):
            if hasattr(key, attribute):
                parts.append(str(getattr(key, attribute)))
                break
        else:
            parts.append(str(key))
    # NNX variables flatten to their `.value`: the name reads better without it.
    if len(parts) > 1 and parts[-1] in ("value", "raw_value"):
        parts.pop()
    return ".".join(parts) or "?"


def _subjaxprs(eqn) -> list:
    from jax.extend import core as jcore

    found = []
    for value in eqn.params.values():
        items = value if isinstance(value, (tuple, list)) else (value,)
        for item in items:
            if isinstance(item, (jcore.ClosedJaxpr, jcore.Jaxpr)):
                found.append(item)
    return found


def _call_name(eqn, sub) -> str:
    name = eqn.params.get("name")
    if not name:
        jaxpr = getattr(sub, "jaxpr", sub)
        info = getattr(jaxpr, "debug_info", None)
        source = getattr(info, "func_src_info", None) or ""
        name = source.split(" ")[0] if source else ""
    return f"{eqn.primitive.name}: {name}" if name else eqn.primitive.name


def _is_literal(v) -> bool:
    from jax.extend import core as jcore

    return isinstance(v, jcore.Literal)


def _is_drop(v) -> bool:
    from jax.extend import core as jcore

    return isinstance(v, jcore.DropVar)


def _format_literal(v) -> str:
    value = np.asarray(v.val)
    if value.ndim == 0:
        return f"{value.item():.4g}" if np.issubdtype(value.dtype, np.floating) else str(value.item())
    return f"const{list(value.shape)}"


def _live_equations(jaxpr, needed_outvars) -> list:
    """Equations that contribute to ``needed_outvars`` (or have effects), in order."""
    live = {v for v in needed_outvars if not _is_literal(v)}
    kept = []
    for eqn in reversed(jaxpr.eqns):
        if eqn.effects or any((not _is_drop(o)) and o in live for o in eqn.outvars):
            kept.append(eqn)
            live.update(v for v in eqn.invars if not _is_literal(v))
    return kept[::-1]


class _GraphBuilder:
    def __init__(self, dot, expand_depth: int, prune: bool):
        self.dot = dot
        self.expand_depth = expand_depth
        self.prune = prune
        self.counter = 0
        self.equations = 0

    def node(self, graph, label: str, kind: str) -> str:
        self.counter += 1
        node_id = f"n{self.counter}"
        graph.node(node_id, label, **_NODE_STYLE[kind])
        return node_id

    def edge(self, source: str, target: str, var) -> None:
        # Always on the root graph: an edge stated inside a cluster would pull
        # both of its nodes into that cluster.
        self.dot.edge(source, target, label=" " + var.aval.str_short(short_dtypes=True) + " ")

    def render(self, graph, jaxpr, env: dict, depth: int, needed_outvars) -> None:
        """Add ``jaxpr``'s equations to ``graph``; ``env`` maps each Var to
        the id of the node that produces it (inputs already filled in)."""
        eqns = _live_equations(jaxpr, needed_outvars) if self.prune else list(jaxpr.eqns)
        for eqn in eqns:
            subs = _subjaxprs(eqn)
            sub = subs[0] if len(subs) == 1 else None
            inner = getattr(sub, "jaxpr", sub)
            expandable = (
                sub is not None
                and depth < self.expand_depth
                and eqn.primitive.name in _CALL_PRIMITIVES
                and len(inner.invars) == len(eqn.invars)
                and len(inner.outvars) == len(eqn.outvars)
            )
            if expandable:
                self.expand(graph, eqn, sub, env, depth)
                continue
            literals = [_format_literal(v) for v in eqn.invars if _is_literal(v)]
            name = eqn.primitive.name
            if name in _CALL_PRIMITIVES and len(subs) == 1:
                label, kind = _call_name(eqn, subs[0]), "call"
            elif name in _CONTROL_PRIMITIVES:
                label, kind = (f"{name} ({len(subs)} branches)" if len(subs) > 1 else name), "call"
            else:  # e.g. scatter-add, whose nested jaxpr is only its combiner
                label, kind = name, "eqn"
            if literals:
                label += "\n(" + ", ".join(literals) + ")"
            node_id = self.node(graph, label, kind)
            self.equations += 1
            for v in eqn.invars:
                if not _is_literal(v):
                    self.edge(env[v], node_id, v)
            for v in eqn.outvars:
                if not _is_drop(v):
                    env[v] = node_id

    def expand(self, graph, eqn, sub, env: dict, depth: int) -> None:
        inner = getattr(sub, "jaxpr", sub)
        self.counter += 1
        with graph.subgraph(name=f"cluster_{self.counter}") as cluster:
            cluster.attr(label=_call_name(eqn, sub), style="dashed,rounded", color="#8C8C8C", fontcolor="#4D4D4D")
            inner_env: dict = {}
            for v in inner.constvars:
                inner_env[v] = self.node(cluster, f"const\n{v.aval.str_short(short_dtypes=True)}", "const")
            for outer, v in zip(eqn.invars, inner.invars):
                if _is_literal(outer):
                    inner_env[v] = self.node(cluster, _format_literal(outer), "const")
                else:
                    inner_env[v] = env[outer]
            needed = [iv for iv, ov in zip(inner.outvars, eqn.outvars) if not _is_drop(ov)]
            self.render(cluster, inner, inner_env, depth + 1, needed)
        for outer, v in zip(eqn.outvars, inner.outvars):
            if _is_drop(outer):
                continue
            if _is_literal(v):
                env[outer] = self.node(graph, _format_literal(v), "const")
            else:
                env[outer] = inner_env[v]


def jaxpr_graph(
    fn: Callable,
    *args: Any,
    param_argnums: Sequence[int] = (0,),
    arg_names: Sequence[str] | None = None,
    out_name: str = "out",
    expand_depth: int = 0,
    prune: bool = True,
    title: str | None = None,
    rankdir: str = "LR",
):
    """The computation graph of ``fn(*args)`` as traced by JAX, as a
    ``graphviz.Digraph`` (see the module docstring for what is drawn).

    - ``param_argnums``: which positional arguments are parameters (drawn as
      blue boxes); the others are data (grey ellipses).
    - ``arg_names``: a name per argument, prefixed to the pytree path of each
      leaf (default ``arg0``, ``arg1``...), e.g. ``params.fc1.kernel``.
    - ``out_name``: prefix of the output nodes' names (e.g. ``grad``).
    - ``expand_depth``: how many levels of nested call-like jaxprs to open
      (0: each is one node labelled ``primitive: name``).
    - ``prune``: drop equations whose results are never used (``jax.grad``'s
      jaxpr keeps, e.g., the forward loss it discards).
    - ``rankdir``: graphviz's direction, left to right by default: a long
      program then grows sideways, where a post's figure box scrolls, and its
      labels keep their size (at least 9 pt, 12 px, for edges) instead of being
      shrunk to the column's width.

    The graph's ``.equations`` attribute holds the number of equation nodes drawn.
    """
    import graphviz
    import jax

    if arg_names is not None and len(arg_names) != len(args):
        raise ValueError(f"arg_names has {len(arg_names)} names for {len(args)} arguments")
    for i in param_argnums:
        if not -len(args) <= i < len(args):
            raise ValueError(f"param_argnums {i} out of range for {len(args)} arguments")
    params = {i % len(args) for i in param_argnums}
    closed, out_shapes = jax.make_jaxpr(fn, return_shape=True)(*args)
    jaxpr = closed.jaxpr

    dot = graphviz.Digraph(name=title or getattr(fn, "__name__", "jaxpr"))
    dot.attr(rankdir=rankdir, fontname="Helvetica", fontsize="11")
    if title:
        dot.attr(label=title, labelloc="t", fontsize="14")
    dot.attr("node", fontname="Helvetica", fontsize="10")
    dot.attr("edge", fontname="Helvetica", fontsize="9", color="#5F6368", fontcolor="#5F6368")

    builder = _GraphBuilder(dot, expand_depth, prune)
    env: dict = {}
    names, kinds = [], []
    for i, arg in enumerate(args):
        prefix = arg_names[i] if arg_names is not None else f"arg{i}"
        for path, _ in jax.tree_util.tree_flatten_with_path(arg)[0]:
            names.append(_path_name(prefix, path))
            kinds.append("param" if i in params else "data")
    if len(names) != len(jaxpr.invars):  # cannot happen for pytrees of arrays
        raise ValueError(f"{len(names)} argument leaves but the jaxpr has {len(jaxpr.invars)} inputs")
    needed_inputs = set()
    for eqn in (_live_equations(jaxpr, jaxpr.outvars) if prune else jaxpr.eqns):
        needed_inputs.update(v for v in eqn.invars if not _is_literal(v))
    needed_inputs.update(v for v in jaxpr.outvars if not _is_literal(v))
    for v, name, kind in zip(jaxpr.invars, names, kinds):
        if prune and v not in needed_inputs:
            continue
        env[v] = builder.node(dot, f"{name}\n{v.aval.str_short(short_dtypes=True)}", kind)
    for v in jaxpr.constvars:
        env[v] = builder.node(dot, f"const\n{v.aval.str_short(short_dtypes=True)}", "const")

    builder.render(dot, jaxpr, env, 0, jaxpr.outvars)

    out_paths = [_path_name(out_name, path) for path, _ in jax.tree_util.tree_flatten_with_path(out_shapes)[0]]
    for v, name in zip(jaxpr.outvars, out_paths):
        if _is_literal(v):
            label = f"{name} = {_format_literal(v)}"
            builder.node(dot, label, "output")
            continue
        sink = builder.node(dot, f"{name}\n{v.aval.str_short(short_dtypes=True)}", "output")
        builder.edge(env[v], sink, v)
    dot.equations = builder.equations
    return dot


def svg(graph):
    """A graphviz graph as an ``IPython.display.SVG`` (rendered by ``dot``),
    so that a notebook cell shows (and a post keeps) it as SVG."""
    from IPython.display import SVG

    return SVG(graph.pipe(format="svg"))
