# ---
# jupyter:
#   jupytext:
#     cell_metadata_filter: tags,figure,alt,summary,-all
#     formats: ipynb,py:percent
#     notebook_metadata_filter: sidebyside,kernelspec,jupytext,colab,accelerator
#     text_representation:
#       extension: .py
#       format_name: percent
#       format_version: '1.3'
#       jupytext_version: 1.19.6
#   kernelspec:
#     display_name: Python 3 (ipykernel)
#     language: python
#     name: python3
#   sidebyside:
#     compared: The same FashionMNIST MLP trained in PyTorch and in Flax over several
#       seeds, compared on the smoothness of its first-layer weight templates and the
#       similarity (linear CKA) of its hidden layers, within and across the two frameworks.
#     date: '2026-11-22'
#     description: The first-layer weights and computation graphs of the same MLP in
#       PyTorch and Flax, and a test with numbers of whether the framework or the seed
#       decides what it learns.
#     metrics:
#     - cka
#     - total_variation
#     - param_counts
#     slug: weight-visualisation
#     tags:
#     - pytorch
#     - jax
#     - flax
#     - visualisation
#     - cka
#     - torchviz
#     - jaxpr
#     title: 'What the network learned: PyTorch and Flax weights, graphs and representations'
# ---

# %% [markdown]
# # What the network learned: PyTorch and Flax weights, graphs and representations
#
# Does a FashionMNIST MLP learn different weights in Flax than in PyTorch? We look at the weights
# and the computation graphs of both, then answer with numbers: smoothness of the weight templates
# over several seeds, and the similarity (linear CKA) of the hidden layers within and across frameworks.

# %% tags=["colab-install"]
# Run this post yourself: on Colab this installs the library and the versions the post ran with.
import subprocess
import sys

REPOSITORY = "sidebyside-ml/pytorch-vs-jax@main"  # the site's repository@branch (_config.yml); a fork names its own
if "google.colab" in sys.modules:
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "torchviz", "timm==1.0.31",
                    f"sidebyside @ git+https://github.com/{REPOSITORY}"], check=True)
from sidebyside.run import colab

colab.setup("weight-visualisation", REPOSITORY)

# %% tags=["parameters"]
num_train = 6000      # training images (60000: all of them)
num_test = 2000       # test images for accuracy
num_cka = 1000        # held-out (test) images on which hidden layers are compared
num_epochs = 2        # training epochs of every network
batch_size = 128
lr = 1e-3
optimizer = "adam"
schedule = "cosine"
num_seeds = 2         # networks per framework and initialiser (pairs of seeds give the CKA)
graph_batch = 2       # batch size of the inputs traced for the computation graphs

# %% tags=["remove_cell", "colab-profile"]
# The settings to run with: "smoke" (the test suite's small sizes, a minute), "cpu", or "gpu" (a GPU post's own
# settings, on a GPU runtime); "auto" takes the post's own on a GPU runtime and smoke elsewhere.
PROFILE = "auto"
globals().update(colab.parameters("weight-visualisation", PROFILE, REPOSITORY))

# %% [markdown]
# A popular blog post, *Exploring PyTorch and JAX*, trained this 784-128-10 MLP in both frameworks,
# plotted the 128 first-layer weight vectors of each as 28×28 images, drew PyTorch's graph with
# torchviz ("no simple equivalent in JAX"), and concluded by eye that JAX's weights had "more
# fine-grained variation", perhaps why its network was more accurate. Two things differed besides
# the framework: the **initialisation** (PyTorch's `nn.Linear` draws weights and biases from
# $U(\pm 1/\sqrt{\text{fan-in}})$, Flax's `Dense` uses `lecun_normal` weights, a truncated normal
# with standard deviation $1/\sqrt{\text{fan-in}}$, i.e. $\sqrt 3\approx1.7$ times wider, and zero
# biases) and the **test-set normalisation** (the PyTorch test set was normalised to [-1, 1], its
# training set was not). Here both frameworks get the same data, normalisation, batches, optimiser and
# learning-rate schedule, and each network is trained from several seeds, in four variants:
#
# | variant | framework | initialisation | what it isolates |
# |---|---|---|---|
# | `torch` | PyTorch | its default, uniform | |
# | `flax` | Flax (NNX) | its default, `lecun_normal` | the comparison the original post made |
# | `flax_torch_init` | Flax (NNX) | PyTorch's uniform scheme (`torch_init=True`) | framework alone, with a fresh random draw |
# | `flax_same_init` | Flax (NNX) | a copy of the PyTorch network's initial weights, same batches | framework alone, nothing random differs (seed 0 only) |
#
# The original used Flax Linen (`nn.Dense`, `model.init`, `TrainState`) and `jax.random.PRNGKey`;
# this post uses Flax NNX (whose `nnx.Rngs` holds typed `jax.random.key`s), the current APIs.

# %% tags=["appendix"] summary="Set-up: imports, conditions, data"
import torch

# Nothing in this post is timed. On a CPU, one intra-op thread keeps PyTorch's many small matmuls
# from waiting for a second core that other work may hold (up to ~10x slower epochs otherwise).
torch.set_num_threads(1)
from sidebyside.lab import notebook

setup = notebook.setup(same_conditions=False, warm=None)  # no conditions to set, no compiler to warm
device = setup.torch_device

import copy
import dataclasses
import math
import re

import jax
import jax.numpy as jnp
import matplotlib.pyplot as plt
import numpy as np
import optax
import pandas as pd
import torch.nn.functional as F
from flax import nnx
from IPython.display import Markdown, Pretty
from torch import nn
from torchviz import make_dot

from sidebyside.lab import analysis, data, models, tables, training, viz
from sidebyside.posts.weight_visualisation import report
from sidebyside.run import provenance

tables.table(provenance.table(setup.provenance))

# %% tags=["appendix"]
ds = data.load()
arrays = training.prepare(ds, num_train=num_train, num_test=num_test)
X_cka = arrays.X_test[:num_cka]  # held out: never seen in training
config = training.TrainConfig(num_epochs=num_epochs, batch_size=batch_size, lr=lr,
                              optimizer=optimizer, schedule=schedule)
# The paired training cells below write Adam with a cosine decay to zero, one step per full batch.
assert (optimizer, schedule, config.warmup_epochs, config.drop_last) == ("adam", "cosine", 0.0, True), \
    "the training cells write Adam with a cosine schedule and no warm-up; change them with these parameters"
steps_per_epoch = config.steps_per_epoch(len(arrays.X_train))  # full batches only; the remainder is dropped
X_test, y_test = arrays.X_test, arrays.y_test
post = report  # this post's tables, record and conclusion
VARIANTS = post.VARIANTS  # torch, flax, flax_torch_init, flax_same_init -> how the tables name them
tables.table(pd.DataFrame({"setting": ["training images", "test images", "held-out images for CKA", "epochs", "batch size",
                          "optimiser", "learning rate", "seeds per variant", "device"],
              "value": [len(arrays.X_train), len(arrays.X_test), len(X_cka), num_epochs, batch_size,
                        f"{optimizer}, {schedule} schedule", lr, num_seeds,
                        f"PyTorch: {device}, JAX: {jax.devices()[0].platform}"]}).set_index("setting"))

# %% [markdown]
# ## 1. The first-layer weights
#
# ### 1.1 Training
#
# The network is the same in both frameworks: `fc1` from the 784 pixels to 128 hidden units, a
# ReLU, `fc2` to the 10 classes. PyTorch's `nn.Linear` brings its own initialisation; Flax's
# `nnx.Linear` takes initialisers as arguments, so the Flax network can also be given PyTorch's
# uniform scheme (`torch_init=True`). Both networks keep a `hidden` method, for the hidden layer's
# activations.

# %% tags=["pair:model:torch", "collapsed"] summary="The code: the network in each framework"
class TorchMLP(nn.Module):
    def __init__(self, hidden=128, classes=10):
        super().__init__()
        # nn.Linear draws weights and biases from U(-1/sqrt(fan_in), 1/sqrt(fan_in))
        self.fc1 = nn.Linear(28 * 28, hidden)
        self.fc2 = nn.Linear(hidden, classes)

    def hidden(self, x):
        return torch.relu(self.fc1(x.flatten(1)))

    def forward(self, x):
        return self.fc2(self.hidden(x))

# %% tags=["pair:model:jax", "collapsed"]
def uniform_like_torch(fan_in):
    """PyTorch's nn.Linear initialiser, U(-1/sqrt(fan_in), 1/sqrt(fan_in)), for Flax."""
    bound = 1 / math.sqrt(fan_in)
    return lambda key, shape, dtype=jnp.float32: jax.random.uniform(key, shape, dtype, -bound, bound)


class FlaxMLP(nnx.Module):
    def __init__(self, hidden=128, classes=10, *, rngs, torch_init=False):
        # nnx.Linear's default: lecun_normal weights, zero biases
        def init(fan_in):
            return dict(kernel_init=uniform_like_torch(fan_in), bias_init=uniform_like_torch(fan_in)) if torch_init else {}
        self.fc1 = nnx.Linear(28 * 28, hidden, rngs=rngs, **init(28 * 28))
        self.fc2 = nnx.Linear(hidden, classes, rngs=rngs, **init(hidden))

    def hidden(self, x):
        return nnx.relu(self.fc1(x.reshape(x.shape[0], -1)))

    def __call__(self, x):
        return self.fc2(self.hidden(x))

# %% [markdown]
# A seed fixes both the initial weights and the order of the training batches: every epoch is a
# permutation of the training images drawn from (seed, epoch) alone (`batch_order`, its code in the
# appendix), the same for both frameworks. Both train with Adam and a learning rate that decays from
# `lr` to zero along a cosine over the whole run. After every epoch, and once before training, a
# hook (`recorder`) keeps a copy of the weights; before and after training it also records the
# hidden layer's activations on the held-out images (`finish`).

# %% tags=["appendix-input"]
def batch_order(seed, epoch):
    """The training images' indices for each step of ``epoch``, (steps, batch_size): a function of
    (seed, epoch) alone, so both frameworks see the same batches."""
    return training.index_batches(len(arrays.X_train), dataclasses.replace(config, seed=seed), epoch)


def layer_weights(model):
    """fc1 and fc2 weights as NumPy, in PyTorch's (out, in) layout for both frameworks."""
    if models.is_torch(model):
        return {name: getattr(model, name).weight.detach().cpu().numpy().copy() for name in ("fc1", "fc2")}
    return {name: np.asarray(getattr(model, name).kernel[...]).T.copy() for name in ("fc1", "fc2")}


def recorder(run):
    """An on_epoch_end hook filling ``run``: weights at every epoch, hidden activations at the start."""
    run["weights"] = {}

    def on_epoch_end(epoch, model):
        run["weights"][epoch] = layer_weights(model)
        if epoch == 0:
            run["hidden_init"] = models.hidden_activations(model, X_cka)

    return on_epoch_end


def finish(run, model, accuracy):
    run["hidden"] = models.hidden_activations(model, X_cka)
    run["accuracy"] = accuracy
    return run


runs = {variant: [] for variant in VARIANTS}

# %% [markdown]
# PyTorch on the left, JAX on the right: the loss, one training step, the epochs over the same
# batches, and the loop over seeds. PyTorch's step updates the model in place (`zero_grad`,
# `backward`, `step`, then the scheduler's step); the JAX step is one compiled function
# (`nnx.jit`) that takes the gradient with `nnx.value_and_grad` and hands it to an optax
# optimiser, whose schedule counts the steps itself. The `flax_same_init` network starts from
# PyTorch's initial weights, copied across (transposed: Flax keeps a kernel as (in, out)).

# %% tags=["pair:training:torch", "collapsed"] summary="The code: the training loop in each framework"
def train_torch(model, seed, on_epoch_end):
    X = torch.as_tensor(arrays.X_train, device=device)
    y = torch.as_tensor(arrays.y_train, device=device)
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=num_epochs * steps_per_epoch)
    on_epoch_end(0, model)
    model.train()
    for epoch in range(num_epochs):
        for index in torch.as_tensor(batch_order(seed, epoch), device=device):
            optimizer.zero_grad()
            loss = F.cross_entropy(model(X[index]), y[index])
            loss.backward()
            optimizer.step()
            scheduler.step()
        on_epoch_end(epoch + 1, model)
    model.eval()
    with torch.no_grad():
        logits = model(torch.as_tensor(X_test, device=device))
    return float((logits.argmax(1).cpu().numpy() == y_test).mean())  # test accuracy


torch_initial = {}  # seed -> an untouched copy of the initial network, for the same-init control
for seed in range(num_seeds):
    torch.manual_seed(seed)
    torch_model = TorchMLP().to(device)
    torch_initial[seed] = copy.deepcopy(torch_model).cpu()
    run = {"seed": seed}
    accuracy = train_torch(torch_model, seed, on_epoch_end=recorder(run))
    runs["torch"].append(finish(run, torch_model, accuracy))
    print(f"PyTorch, seed {seed}: test accuracy {accuracy:.4f}")

# %% tags=["pair:training:jax", "collapsed"]
def flax_loss(model, X, y):
    return optax.softmax_cross_entropy_with_integer_labels(model(X), y).mean()


@nnx.jit
def train_step(model, optimizer, X, y, index):
    loss, grads = nnx.value_and_grad(flax_loss)(model, X[index], y[index])
    optimizer.update(model, grads)  # the optax update, applied to the model's parameters
    return loss


def train_flax(model, seed, on_epoch_end):
    X = jnp.asarray(arrays.X_train)
    y = jnp.asarray(arrays.y_train, dtype=jnp.int32)
    learning_rate = optax.cosine_decay_schedule(lr, decay_steps=num_epochs * steps_per_epoch)
    optimizer = nnx.Optimizer(model, optax.adam(learning_rate), wrt=nnx.Param)
    on_epoch_end(0, model)
    for epoch in range(num_epochs):
        for index in batch_order(seed, epoch):
            train_step(model, optimizer, X, y, index)
        on_epoch_end(epoch + 1, model)
    logits = model(jnp.asarray(X_test))
    return float((np.asarray(logits.argmax(-1)) == y_test).mean())  # test accuracy


def flax_network(variant, seed):
    model = FlaxMLP(rngs=nnx.Rngs(seed), torch_init=(variant != "flax"))
    if variant == "flax_same_init":  # PyTorch's initial weights; Flax keeps a kernel as (in, out)
        for name in ("fc1", "fc2"):
            layer = getattr(torch_initial[seed], name)
            getattr(model, name).kernel[...] = jnp.asarray(layer.weight.detach().numpy().T)
            getattr(model, name).bias[...] = jnp.asarray(layer.bias.detach().numpy())
    return model


for variant in ("flax", "flax_torch_init", "flax_same_init"):
    for seed in range(1 if variant == "flax_same_init" else num_seeds):
        flax_model = flax_network(variant, seed)
        run = {"seed": seed}
        accuracy = train_flax(flax_model, seed, on_epoch_end=recorder(run))
        runs[variant].append(finish(run, flax_model, accuracy))
        print(f"{VARIANTS[variant]}, seed {seed}: test accuracy {accuracy:.4f}")

# %% tags=["appendix-input", "appendix"] summary="Test accuracy, every variant and seed"
accuracy = pd.DataFrame(
    [{"variant": VARIANTS[v], "seed": r["seed"], "test accuracy (%)": 100 * r["accuracy"]}
     for v, rs in runs.items() for r in rs]
).pivot(index="variant", columns="seed", values="test accuracy (%)").reindex(list(VARIANTS.values()))
accuracy["mean"] = accuracy.mean(axis=1)
tables.table(accuracy, 4)

# %% [markdown]
# ### 1.2 Side by side, at the end of training
#
# Row $u$ of `fc1`'s weight matrix holds the 784 weights with which hidden unit $u$ looks at the
# image: drawn as a 28×28 picture, it is the unit's *template*. All panels share one colour scale,
# centred at zero (brown negative, teal positive; colours saturate at the 99.5th percentile of
# |w| over the panels). The first seed of each variant is shown.

# %% figure="weights-end" alt="First-layer weights of PyTorch and Flax networks after training, 128 templates of 28 by 28 pixels each, on one colour scale" tags=["appendix-input", "appendix"] summary="All 128 templates of each network"
panels = ["torch", "flax", "flax_torch_init"]
end = {v: runs[v][0]["weights"][num_epochs]["fc1"] for v in panels}
vmax = viz.shared_vmax(*end.values(), quantile=0.995)
fig, axes = plt.subplots(1, 3, figsize=(16, 3.6), constrained_layout=True)
for ax, variant in zip(axes, panels):
    image = viz.weight_grid(ax, end[variant], vmax=vmax, title=VARIANTS[variant])
    ax.title.set_color(viz.color(variant))
fig.colorbar(image, ax=axes, shrink=0.8, label="weight (unitless)")
fig.suptitle(f"First-layer weights after {num_epochs} epochs (seed 0)", fontweight="bold")
plt.show()

# %% [markdown]
# Up close, the first three units of each, large enough to see each pixel, are the figure at the top of this post (the full grids are in the appendix).

# %% figure="weights-closeup" alt="Close-up of the first three first-layer templates of PyTorch and Flax networks after training" tags=["key-figure", "appendix-input"]
fig, axes = plt.subplots(3, 1, figsize=(3.6, 5.6), constrained_layout=True)
for ax, variant in zip(axes, panels):
    image = viz.weight_grid(ax, end[variant][:3], vmax=vmax, ncols=3, title=VARIANTS[variant])
    ax.title.set_color(viz.color(variant))
fig.colorbar(image, ax=axes, shrink=0.8, location="bottom", label="weight (unitless)")
plt.show()

# %% [markdown] tags=["appendix"]
# ### 1.3 How they evolve
#
# The same templates at initialisation, after one epoch and at the end, for both frameworks with
# their default initialisers, again on one shared scale.

# %% figure="weights-evolution" alt="First-layer weights of PyTorch and Flax at initialisation, after one epoch and at the end of training" tags=["appendix-input", "appendix"]
stages = {0: "initialisation", 1: "after 1 epoch", num_epochs: f"after {num_epochs} epochs"}
shown = {(v, e): runs[v][0]["weights"][e]["fc1"] for v in ("torch", "flax") for e in stages}
vmax = viz.shared_vmax(*shown.values(), quantile=0.995)
fig, axes = plt.subplots(2, len(stages), figsize=(5.4 * len(stages), 6.2), constrained_layout=True, squeeze=False)
for row, variant in enumerate(("torch", "flax")):
    for col, (epoch, stage) in enumerate(stages.items()):
        ax = axes[row, col]
        image = viz.weight_grid(ax, shown[variant, epoch], vmax=vmax, title=f"{VARIANTS[variant]}: {stage}")
        ax.title.set_color(viz.color(variant))
fig.colorbar(image, ax=axes, shrink=0.6, label="weight (unitless)")
plt.show()

# %% [markdown] tags=["appendix"]
# At initialisation both are noise; Flax's is visibly stronger noise (a wider distribution). Training
# adds smooth, garment-shaped patterns on top; how much of the initial noise still shows at the end
# depends on how large it was to begin with. Section 3 measures this.

# %% [markdown]
# ## 2. Computation graphs
#
# ### 2.1 PyTorch: torchviz
#
# `torchviz.make_dot` walks the autograd graph that PyTorch records during a forward pass: it shows
# the *backward* functions (`AddmmBackward0`, `ReluBackward0`, ...) that will compute the gradient,
# with the parameters as blue leaves. Here it is for the training loss on a small batch of images
# (`graph_batch` of them).

# %% figure="torch-graph" alt="torchviz graph of the PyTorch MLP's loss: autograd nodes from the parameters to the loss" tags=["appendix-input", "collapsed"] summary="torchviz's graph of the PyTorch loss"
torch_model = TorchMLP().to(device)
X_graph = arrays.X_train[:graph_batch]
y_graph = arrays.y_train[:graph_batch]
torch_loss = F.cross_entropy(torch_model(torch.as_tensor(X_graph, device=device)), torch.as_tensor(y_graph, device=device))
torch_graph = make_dot(torch_loss, params=dict(torch_model.named_parameters()))
viz.svg(torch_graph)

# %% [markdown]
# ### 2.2 JAX: the jaxpr, drawn
#
# JAX has no autograd tape to walk, but it has something better suited to drawing: `jax.make_jaxpr`
# traces a function into a *jaxpr*, a small typed program of primitive operations. `viz.jaxpr_graph`
# renders one with graphviz: each equation is a node, each variable an edge labelled with its type
# and shape, parameters are blue boxes, data grey ellipses, outputs green. Calls with a jaxpr inside
# (`jit`, `custom_jvp_call`) are drawn as one double-bordered node named after the function
# (`expand_depth=1` would open them). First the forward pass of the Flax model, from parameters and
# images to logits, is folded below.

# %% figure="jaxpr-forward-graph" alt="Graph of the jaxpr of the Flax MLP's forward pass: parameters and images to logits" tags=["appendix-input", "collapsed"] summary="The jaxpr of the forward pass, drawn"
flax_model = FlaxMLP(rngs=nnx.Rngs(0))
graphdef, params = nnx.split(flax_model)


def forward(params, X):
    return nnx.merge(graphdef, params)(X)


def loss_fn(params, X, y):
    return optax.softmax_cross_entropy_with_integer_labels(forward(params, X), y).mean()


X_graph_jax, y_graph_jax = jnp.asarray(X_graph), jnp.asarray(y_graph, dtype=jnp.int32)
forward_graph = viz.jaxpr_graph(forward, params, X_graph_jax, arg_names=["params", "X"], out_name="logits")
viz.svg(forward_graph)

# %% [markdown] tags=["appendix"] summary="The gradient's jaxpr, drawn"
# And the gradient of the loss with respect to the parameters, `jax.grad(loss_fn)`: the forward pass,
# then the backward pass that `jax.grad` derived, as one program (the loss value itself, which
# `jax.grad` discards, is pruned). This is the JAX counterpart of what torchviz shows: torchviz draws
# the recorded backward functions, the jaxpr spells out their arithmetic.

# %% figure="jaxpr-gradient-graph" alt="Graph of the jaxpr of the gradient of the Flax MLP's loss with respect to its parameters" tags=["appendix"]
gradient_graph = viz.jaxpr_graph(jax.grad(loss_fn), params, X_graph_jax, y_graph_jax,
                                 arg_names=["params", "X", "y"], out_name="grad")
viz.svg(gradient_graph)

# %% [markdown] tags=["appendix"]
# ### 2.3 Summaries and parameter counts
#
# PyTorch prints a module's structure; Flax NNX's `nnx.tabulate` runs the model once and tabulates
# each layer's inputs, outputs and parameters.

# %% tags=["pair:summary:torch", "appendix"]
torch_model

# %% tags=["pair:summary:jax", "appendix"]
# Plain text: without these settings, rich would draw its own (coloured) widget in a notebook.
Pretty(nnx.tabulate(flax_model, jnp.asarray(X_graph), console_kwargs={"force_jupyter": False, "color_system": None}))

# %% tags=["appendix-input", "appendix"]
torch_shapes = {name: tuple(p.shape) for name, p in torch_model.named_parameters()}
flax_shapes = {".".join(map(str, path)): tuple(leaf.shape)
               for path, leaf in nnx.to_flat_state(nnx.state(flax_model, nnx.Param))}
rows = []
for (torch_name, torch_shape), (flax_name, flax_shape) in zip(
        torch_shapes.items(), sorted(flax_shapes.items(), key=lambda kv: (kv[0].split(".")[0], kv[0].endswith("bias")))):
    rows.append({"PyTorch parameter": torch_name, "PyTorch shape": str(torch_shape),
                 "Flax parameter": flax_name, "Flax shape": str(flax_shape),
                 "count": int(np.prod(torch_shape))})
param_counts = {"torch": models.param_count(torch_model), "flax": models.param_count(flax_model)}
rows.append({"PyTorch parameter": "total", "PyTorch shape": "", "Flax parameter": "total", "Flax shape": "",
             "count": param_counts["torch"]})
param_table = pd.DataFrame(rows)
assert param_counts["torch"] == param_counts["flax"] == param_table["count"].iloc[:-1].sum()
tables.table(param_table)

# %% [markdown] tags=["appendix"]
# Same parameters, transposed: PyTorch stores a linear layer's weight as (out, in) and computes
# $xW^\top + b$; Flax stores a kernel (in, out) and computes $xW + b$. The counts agree, layer by
# layer. The graphs differ in what they count: torchviz draws backward functions and parameters, a
# jaxpr draws primitive operations.

# %% tags=["appendix-input", "appendix"]
tables.table(pd.DataFrame({
    "graph": ["PyTorch autograd graph (torchviz)", "JAX forward jaxpr", "JAX gradient jaxpr"],
    "nodes": [len(re.findall(r"^\s*\d+ \[label=", torch_graph.source, re.M)),
              forward_graph.equations, gradient_graph.equations],
    "what a node is": ["backward function or parameter", "primitive or call", "primitive or call"],
}).set_index("graph"))

# %% [markdown]
# ## 3. The claim, tested
#
# "More fine-grained variation" is a statement about spatial roughness. We measure it with the
# **normalised total variation** of each 28×28 template (`analysis.total_variation`): the mean
# absolute difference between horizontally and vertically adjacent weights, divided by the
# template's root-mean-square value. The division makes it scale-free, so templates of different
# sizes (different initialisers) compare on shape alone: a constant template scores 0, a smooth one
# little, white noise about $2/\sqrt\pi \approx 1.13$ (Gaussian) or $2/\sqrt3 \approx 1.15$ (uniform).
# We compute it for the initial templates, the final ones, and the **learned update** (final minus
# initial), per network (mean over its 128 units), then mean and spread over seeds.

# %% [markdown] tags=["appendix"]
# ### 3.1 Weight statistics per layer

# %% tags=["appendix-input", "appendix"]
per_network = post.weight_statistics(runs, num_epochs)  # (variant, layer) -> one row per seed
post.weight_table(per_network)

# %% [markdown] tags=["appendix"]
# Values are mean ± standard deviation over seeds; norms are Frobenius norms (unit norm: the L2 norm
# of one unit's incoming weights); "relative change" is $\lVert W_\text{end}-W_\text{init}\rVert/\lVert W_\text{init}\rVert$.

# %% [markdown]
# ### 3.2 Smoothness of the templates

# %% figure="total-variation" alt="Normalised total variation of first-layer templates at initialisation, at the end, and of the learned update, per variant, with one dot per seed" tags=["appendix-input"]
tv_variants = ["torch", "flax", "flax_torch_init"]
tv_colors = {"torch": viz.COLORS["torch"], "flax": viz.COLORS["flax"], "flax_torch_init": "#8AB4F8"}
columns = ["tv_init", "tv_end", "tv_update"]
fig, ax = plt.subplots(figsize=(8, 4.2))
width = 0.26
for i, variant in enumerate(tv_variants):
    table = per_network[variant, "fc1"]
    positions = np.arange(len(columns)) + (i - 1) * width
    means = table[columns].mean().to_numpy()
    spread = table[columns].std(ddof=1).to_numpy() if len(table) > 1 else None
    ax.bar(positions, means, width, yerr=spread, capsize=3, color=tv_colors[variant], alpha=0.85,
           label=VARIANTS[variant])
    for j, column in enumerate(columns):
        ax.scatter(np.full(len(table), positions[j]), table[column], s=10, color="black", zorder=3)
ax.axhline(analysis.WHITE_NOISE_TV, color="#4D4D4D", linestyle="--", linewidth=1, label="Gaussian white noise")
ax.set_xticks(np.arange(len(columns)), ["initial templates", "final templates", "learned update (final − initial)"])
ax.set(title="Roughness of the first-layer templates (bars: mean over seeds; dots: seeds)",
       xlabel="templates", ylabel="normalised total variation (unitless)")
ax.legend(loc="upper right", fontsize=8, frameon=True)
plt.show()

# %% [markdown]
# ### 3.3 Representational similarity of the hidden layers
#
# Linear CKA (centred kernel alignment, `analysis.linear_cka`) compares two networks by the
# geometry their hidden layers give to the same held-out images: 1 when one representation is a
# rotation and rescaling of the other, near 0 for unrelated ones; it does not care which unit is
# which, so networks whose units are permuted still score 1. Pairs within a framework differ in seed
# (initial weights and batch order); for pairs across frameworks we use seeds $i \ne j$ too, so
# that both kinds of pair differ in the same things. Random, untrained networks are the baseline.

# %% tags=["appendix-input", "appendix"] summary="CKA of each comparison, as a table"
networks = [(variant, r["seed"]) for variant, rs in runs.items() for r in rs]
cka_trained = analysis.cka_matrix([r["hidden"] for rs in runs.values() for r in rs])
cka_untrained = analysis.cka_matrix([r["hidden_init"] for rs in runs.values() for r in rs])
cka = post.cka_values(cka_trained, cka_untrained, networks)  # the pairs of each comparison in the table
tables.table(post.cka_table(cka), 4)

# %% figure="cka-matrix" alt="Linear CKA between the hidden layers of every trained network, PyTorch and Flax, every seed" tags=["appendix-input"]
short = {"torch": "PyTorch", "flax": "Flax", "flax_torch_init": "Flax, torch init", "flax_same_init": "Flax, copied init"}
fig, ax = plt.subplots(figsize=(7.5, 6.2))
image = viz.similarity_matrix(ax, cka_trained, [f"{short[variant]} s{seed}" for variant, seed in networks],
                              colors=[viz.color(variant) for variant, _ in networks])
fig.colorbar(image, ax=ax, label="linear CKA (unitless)")
ax.set(title="Hidden-layer similarity, trained networks", xlabel="network (label colour: PyTorch red, Flax blue)",
       ylabel="network")
plt.show()

# %% [markdown] tags=["appendix"]
# ### 3.4 Same start, same batches
#
# The `flax_same_init` network starts from a copy of PyTorch seed 0's initial weights and sees the
# same batches, so the arithmetic of the two frameworks is the only difference left. How far apart
# are their first-layer weights after each epoch?

# %% tags=["appendix-input", "appendix"]
same_start = pd.DataFrame([
    {"epoch": epoch,
     "relative difference (%)": 100 * analysis.relative_change(runs["torch"][0]["weights"][epoch]["fc1"],
                                                               runs["flax_same_init"][0]["weights"][epoch]["fc1"]),
     "largest difference in one weight": float(np.abs(runs["torch"][0]["weights"][epoch]["fc1"]
                                                      - runs["flax_same_init"][0]["weights"][epoch]["fc1"]).max())}
    for epoch in range(num_epochs + 1)
]).set_index("epoch")
tables.table(same_start)

# %% [markdown] tags=["appendix"]
# Relative difference: $\lVert W_\text{Flax} - W_\text{PyTorch}\rVert / \lVert W_\text{PyTorch}\rVert$ for `fc1`.
# Both start identical (epoch 0). The two frameworks sum in different orders, so their float32
# results differ in the last bits; that can decide whether a unit sitting at its ReLU threshold fires
# for an example, and Adam, whose steps are about the learning rate whatever the size of the
# gradient, turns such a flip in a rarely active unit into a full-size step. The differences then
# compound over the epochs. Yet the function the two networks compute stays close: see their CKA in
# the table above.
#
# ## Results

# %% tags=["appendix-input"]
metrics = post.summarise(
    runs, cka, param_counts=param_counts, num_images=len(X_cka), num_epochs=num_epochs,
    num_train=len(arrays.X_train), num_steps=num_epochs * config.steps_per_epoch(len(arrays.X_train)),
    graph_equations={"forward": forward_graph.equations, "gradient": gradient_graph.equations})
tables.table(post.results_table(metrics))

# %% [markdown]
# Test accuracy: mean ± standard deviation over seeds; TV: normalised total variation (section 3),
# mean ± standard deviation over seeds; CKA with PyTorch: mean over pairs of networks (section 3.3).
# Whether a difference is more than seed noise is decided below by one test for every quantity
# (`sidebyside.lab.verdict.seeds`: the difference of the means against two standard errors).
#
# ## 4. Conclusion

# %% tags=["remove_input", "collapsed"] summary="The conclusion in full"
Markdown(post.conclusion(metrics))

# %% tags=["remove_cell"]
record = provenance.save_results(metrics)
record["metrics"]


# %% tags=["remove_cell", "colab-compare"]
# Your figures beside the post's, verdict by verdict.
from sidebyside.publish import reproduce

reproduce.in_notebook("weight-visualisation", record, REPOSITORY)
