"""Tests of sidebyside.lab.viz: the weight mosaic's layout, the shared colour
scale, and the jaxpr -> graphviz renderer (structure of the graph, not its
pixels: node kinds, edges, nesting, pruning; and that `dot` renders it)."""

import re
import shutil

import matplotlib

matplotlib.use("Agg")

import jax
import jax.numpy as jnp
import matplotlib.pyplot as plt
import numpy as np
import pytest

from sidebyside.lab import viz

# ------------------------------------------------------------ unchanged API


def test_colors_and_labels_kept():
    assert viz.color("torch_eager") == viz.COLORS["torch"] == "#EE4C2C"
    assert viz.color("PyTorch") == viz.COLORS["torch"]
    assert viz.color("jax-jit") == viz.COLORS["jax"] == viz.COLORS["flax"] == "#1A73E8"
    assert viz.LABELS["torch"] == "PyTorch"
    with pytest.raises(KeyError):
        viz.color("tensorflow")


# ------------------------------------------------------------ weight grids


def test_mosaic_places_each_unit_row_major():
    k, H, W = 5, 3, 4
    weights = np.arange(k * H * W, dtype=float).reshape(k, H * W)
    mosaic = viz.weight_mosaic(weights, (H, W), ncols=2, pad=1)
    assert mosaic.shape == (3 * (H + 1) - 1, 2 * (W + 1) - 1)
    for u in range(k):
        r, c = divmod(u, 2)
        np.testing.assert_array_equal(mosaic[r * 4:r * 4 + H, c * 5:c * 5 + W], weights[u].reshape(H, W))
    # Separators and the unused sixth cell are NaN; nothing else is.
    assert np.isnan(mosaic[H, :]).all() and np.isnan(mosaic[:, W]).all()
    assert np.isnan(mosaic[8:, 5:]).all()
    assert np.isfinite(mosaic).sum() == weights.size


def test_mosaic_3d_input_no_pad_and_errors():
    weights = np.random.default_rng(0).normal(size=(4, 28, 28))
    mosaic = viz.weight_mosaic(weights, ncols=2, pad=0)
    np.testing.assert_array_equal(mosaic, np.block([[weights[0], weights[1]], [weights[2], weights[3]]]))
    with pytest.raises(ValueError):
        viz.weight_mosaic(np.zeros((4, 100)))
    with pytest.raises(ValueError):
        viz.weight_mosaic(weights, (14, 56))


def test_shared_vmax():
    a = np.array([[0.1, -0.5]])
    b = np.array([[2.0, -3.0, 0.0]])
    assert viz.shared_vmax(a, b) == 3.0
    assert viz.shared_vmax(a) == 0.5
    assert viz.shared_vmax(np.zeros((2, 2))) == 1.0  # never a degenerate scale
    assert viz.shared_vmax(np.linspace(-1, 1, 1001), quantile=0.5) == pytest.approx(0.5)


def test_weight_grid_draws_on_a_symmetric_scale():
    viz.style()
    weights = np.random.default_rng(1).normal(size=(128, 784))
    fig, (left, right) = plt.subplots(1, 2)
    vmax = viz.shared_vmax(weights, 2 * weights)
    image = viz.weight_grid(left, weights, vmax=vmax, title="PyTorch")
    assert image.get_clim() == (-vmax, vmax)
    assert image.get_array().shape == (8 * 29 - 1, 16 * 29 - 1)
    assert left.get_title() == "PyTorch"
    assert "128 units" in left.get_xlabel()
    default = viz.weight_grid(right, weights)
    assert default.get_clim() == pytest.approx((-np.abs(weights).max(), np.abs(weights).max()))
    fig.colorbar(image, ax=[left, right])
    fig.canvas.draw()
    plt.close(fig)


# -------------------------------------------------------- jaxpr -> graphviz


def mlp(params, X):
    h = jax.nn.relu(X @ params["fc1"]["kernel"] + params["fc1"]["bias"])
    return h @ params["fc2"]["kernel"] + params["fc2"]["bias"]


def loss(params, X, y):
    logits = mlp(params, X)
    return -jnp.mean(jnp.take_along_axis(jax.nn.log_softmax(logits), y[:, None], axis=1))


@pytest.fixture
def mlp_args():
    params = {
        "fc1": {"kernel": jnp.ones((6, 5)), "bias": jnp.zeros(5)},
        "fc2": {"kernel": jnp.ones((5, 3)), "bias": jnp.zeros(3)},
    }
    return params, jnp.ones((2, 6)), jnp.zeros(2, jnp.int32)


NODE = re.compile(r'^\s*(n\d+) \[label=(?:"((?:[^"\\]|\\.)*)"|([^\s\]]+))', re.M)


def nodes(graph):
    """{node id: label} from a graph's DOT source (node statements only)."""
    return {m.group(1): m.group(2) if m.group(2) is not None else m.group(3) for m in NODE.finditer(graph.source)}


def edges(graph):
    return re.findall(r"(n\d+) -> (n\d+) \[label=\" ?(.*?) ?\"\]", graph.source)


def test_forward_graph_structure(mlp_args):
    params, X, _ = mlp_args
    graph = viz.jaxpr_graph(mlp, params, X, arg_names=["params", "X"], out_name="logits")
    labels = nodes(graph)
    sources = [n for n, label in labels.items() if "params." in label or label.startswith("X\n")]
    assert sorted(labels[n].split("\n")[0] for n in sources) == [
        "X", "params.fc1.bias", "params.fc1.kernel", "params.fc2.bias", "params.fc2.kernel"
    ]
    # Parameters and data are styled apart.
    assert graph.source.count('fillcolor="#D2E3FC"') == 4
    # Two matmuls, relu collapsed into one node named after it.
    assert sum(label == "dot_general" for label in labels.values()) == 2
    assert any(label == "custom_jvp_call: relu" for label in labels.values())
    assert any(label.startswith("logits\nf32[2,3]") for label in labels.values())
    # Edges carry shapes; the kernel's edge goes into a dot_general.
    kernel = next(n for n in sources if labels[n].startswith("params.fc1.kernel"))
    (target, shape), = [(t, s) for s_, t, s in edges(graph) if s_ == kernel]
    assert labels[target] == "dot_general" and shape == "f32[6,5]"
    # Every edge's ends exist, and the count of equation nodes is reported.
    assert all(a in labels and b in labels for a, b, _ in edges(graph))
    jaxpr = jax.make_jaxpr(mlp)(params, X).jaxpr
    assert graph.equations == len(jaxpr.eqns)


def test_expand_depth_opens_nested_calls(mlp_args):
    params, X, y = mlp_args
    flat = viz.jaxpr_graph(loss, params, X, y, arg_names=["params", "X", "y"])
    deep = viz.jaxpr_graph(loss, params, X, y, arg_names=["params", "X", "y"], expand_depth=3)
    assert "subgraph cluster" not in flat.source
    assert "jit: log_softmax" in flat.source
    assert "subgraph cluster" in deep.source and 'label="jit: log_softmax"' in deep.source
    assert deep.equations > flat.equations
    assert "exp" in nodes(deep).values() and "exp" not in nodes(flat).values()
    # Edges are stated at the top level only (an edge inside a cluster would
    # drag its outside endpoint into that cluster).
    blocks = re.findall(r"subgraph cluster_\d+ \{(.*?)\n\t\}", deep.source, re.S)
    assert blocks and all("[label=" in block for block in blocks)
    assert not any("->" in block for block in blocks)


def test_gradient_graph_pruned_and_named(mlp_args):
    params, X, y = mlp_args
    graph = viz.jaxpr_graph(jax.grad(loss), params, X, y, arg_names=["params", "X", "y"], out_name="grad")
    unpruned = viz.jaxpr_graph(jax.grad(loss), params, X, y, arg_names=["params", "X", "y"], prune=False)
    outputs = sorted(label.split("\n")[0] for label in nodes(graph).values() if label.startswith("grad."))
    assert outputs == ["grad.fc1.bias", "grad.fc1.kernel", "grad.fc2.bias", "grad.fc2.kernel"]
    # jax.grad's jaxpr computes the loss value and drops it: pruning removes that work.
    assert graph.equations < unpruned.equations
    # Every equation node drawn has a path to an output (no dead ends).
    succ = {}
    for a, b, _ in edges(graph):
        succ.setdefault(a, set()).add(b)
    labels = nodes(graph)
    sinks = {n for n, label in labels.items() if label.startswith("grad.")}
    def reaches(n, seen=()):
        return n in sinks or any(reaches(m, seen + (n,)) for m in succ.get(n, ()) if m not in seen)
    assert all(reaches(n) for n in labels)


def test_nnx_state_names_and_literal_outputs():
    from flax import nnx

    model = nnx.Linear(4, 2, rngs=nnx.Rngs(0))
    graphdef, state = nnx.split(model)
    graph = viz.jaxpr_graph(lambda s, x: nnx.merge(graphdef, s)(x), state, jnp.ones((3, 4)), arg_names=["params", "X"])
    labels = [label.split("\n")[0] for label in nodes(graph).values()]
    assert "params.kernel" in labels and "params.bias" in labels
    const = viz.jaxpr_graph(lambda x: (x * 2.0, 1.0), jnp.ones(3), param_argnums=())
    assert any(label.startswith("out.1 = 1") for label in nodes(const).values())


def test_jaxpr_graph_argument_errors(mlp_args):
    params, X, _ = mlp_args
    with pytest.raises(ValueError, match="arg_names"):
        viz.jaxpr_graph(mlp, params, X, arg_names=["params"])
    with pytest.raises(ValueError, match="param_argnums"):
        viz.jaxpr_graph(mlp, params, X, param_argnums=(2,))


@pytest.mark.skipif(shutil.which("dot") is None, reason="graphviz's dot is not installed")
def test_graph_renders_to_svg(mlp_args):
    params, X, y = mlp_args
    graph = viz.jaxpr_graph(jax.grad(loss), params, X, y, arg_names=["params", "X", "y"], expand_depth=2, title="grad")
    image = viz.svg(graph)
    assert "<svg" in image.data and "grad" in image.data


def test_similarity_matrix_writes_each_value_and_colours_the_labels():
    matrix = np.array([[1.0, 0.95, 0.9], [0.95, 1.0, 0.97], [0.9, 0.97, 1.0]])
    fig, ax = plt.subplots()
    image = viz.similarity_matrix(ax, matrix, ["a", "b", "c"], colors=[viz.COLORS["torch"], "#000000", "#1A73E8"])
    assert image.norm.vmin == pytest.approx(0.89) and image.norm.vmax == 1.0  # just below the smallest value
    texts = [t.get_text() for t in ax.texts]
    assert len(texts) == 9 and texts[1] == "0.950" and texts[5] == "0.970"  # three digits by default
    assert [t.get_text() for t in ax.get_xticklabels()] == ["a", "b", "c"]
    assert matplotlib.colors.to_hex(ax.get_yticklabels()[0].get_color()).upper() == viz.COLORS["torch"].upper()
    with pytest.raises(ValueError, match="one colour per label"):
        viz.similarity_matrix(ax, matrix, ["a", "b", "c"], colors=["#000000"])
    with pytest.raises(ValueError, match="for 2 labels"):
        viz.similarity_matrix(ax, matrix, ["a", "b"])
    plt.close(fig)
