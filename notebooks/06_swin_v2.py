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
#     compared: Swin Transformer V2 as PyTorch users run it (timm's model) against a
#       Flax NNX port given the same weights, first for the same outputs and gradients,
#       then for accuracy over seeds and for training and evaluation speed along each
#       framework's ladder of tools.
#     date: '2026-11-22'
#     description: A public port reported JAX 27% faster than PyTorch at training Swin
#       Transformer V2 and 140% faster at validating it; here the two networks are first
#       proved to compute the same function, then each framework is timed with its whole
#       ladder of tools.
#     metrics:
#     - parity
#     - accuracy
#     - speed
#     - verdicts
#     slug: swin-transformer-v2
#     tags:
#     - pytorch
#     - jax
#     - flax
#     - swin-transformer
#     - vision-transformer
#     - benchmark
#     - training
#     title: Swin Transformer V2 in PyTorch and Flax, the same network timed the same
#       way
#     under_test:
#     - FlaxSwinV2
# ---

# %% [markdown]
# # Swin Transformer V2 in PyTorch and Flax, the same network timed the same way
#
# A public port of Swin Transformer V2 to JAX reported, on a Tesla V100, that
# JAX trained 27% faster and validated 140% faster than PyTorch. Its PyTorch
# side ran eager, its JAX side left parts of the model out, and nothing showed
# that the two networks computed the same function. Is JAX really that much
# faster? We port timm's model to Flax, prove the port computes what timm
# computes, and time both frameworks with every tool each one offers.

# %% tags=["colab-install"]
# Run this post yourself: on Colab this installs the library and the versions the post ran with.
import subprocess
import sys

REPOSITORY = "sidebyside-ml/pytorch-vs-jax@main"  # the site's repository@branch (_config.yml); a fork names its own
if "google.colab" in sys.modules:
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "torchviz", "timm==1.0.31",
                    f"sidebyside @ git+https://github.com/{REPOSITORY}"], check=True)
from sidebyside.run import colab

colab.setup("swin-transformer-v2", REPOSITORY)

# %% tags=["parameters"]
# The network trained on FashionMNIST (images zero-padded from 28 to img_size).
img_size = 32
patch_size = 4
embed_dim = 16
depths = [2, 1]
num_heads = [2, 4]
window_size = 4
drop_path_rate = 0.1
# Training for accuracy: the same schedule, batches and seeds on both sides.
num_train = 512            # training examples used; 60000 is all of FashionMNIST's training set
num_test = 256             # test examples used; 10000 is all
seeds = [0]
num_epochs = 1
batch_size = 32
lr = 1e-3
weight_decay = 0.05
warmup_epochs = 0.2        # linear warm-up, then cosine decay to zero
parity_batch = 2           # images in the parity check
parity_on_speed_model = False  # also check parity at the speed model's size (slow on a CPU)
# The gpu profile's: only what needs the GPU is measured (the timed model's float32 parity, the speed ladders,
# compile time, memory); the trained model's parity and the accuracy over seeds are the cpu run's.
hardware_only = False
# The network timed: the seed's size is 256x256x3, Swin-V2-T (embed 96, depths 2-2-6-2, window 8).
speed_img_size = 32
speed_patch_size = 4
speed_in_chans = 3
speed_embed_dim = 16
speed_depths = [2, 1]
speed_num_heads = [2, 4]
speed_window_size = 4
speed_drop_path_rate = 0.1
speed_batch_sizes = [4]
speed_phases = ["train", "eval"]
precisions = ["float32"]   # "bfloat16" adds mixed-precision ladders on both sides
precision_batch_sizes = {}  # a precision's batches where they are fewer than speed_batch_sizes, e.g. {"bfloat16": [64]}
torch_tools = ["eager", "cuda_graph"]  # of eager, compile, cuda_graph, cuda_graph_steps
jax_tools = ["jit"]                    # of jit, jit_scan (which brings cuda_graph_steps, its whole-loop rival)
speed_steps = 1            # steps per timed call
speed_repeats = 3
allow_tf32 = False         # TensorFloat-32 matmuls on NVIDIA GPUs (both frameworks alike)
threads = 0                # CPU threads for PyTorch, XLA and NumPy alike; 0: every core this process may use
# A run in parts: each expensive part (parity, a seed's training, a speed setting) is saved to this
# file as it finishes and read back by the next run; no part starts that would end past run_budget_s.
checkpoint_file = ""       # "": off, everything is measured in this run
run_budget_s = 0           # seconds; 0: no budget

# %% tags=["remove_cell", "colab-profile"]
# The settings to run with: "smoke" (the test suite's small sizes, a minute), "cpu", or "gpu" (a GPU post's own
# settings, on a GPU runtime); "auto" takes the post's own on a GPU runtime and smoke elsewhere.
PROFILE = "auto"
globals().update(colab.parameters("swin-transformer-v2", PROFILE, REPOSITORY))

# %% [markdown] tags=["appendix"]
# ## Setup
#
# Both frameworks run on the same device (the GPU where one is visible, the
# CPU otherwise) under the same conditions, set by one library call before
# JAX starts (`notebook.setup`, through `conditions.same_conditions`): full FP32 matmuls on both sides
# unless `allow_tf32` is set, in which case both may use TensorFloat-32, and
# the same number of CPU threads for PyTorch, XLA and NumPy. The
# bfloat16 ladders, where the profile asks for them, run one policy on both
# sides, `torch.autocast`'s on the device the post runs (section 3 states it).
# Both compilers cache in
# this run's own folder, so this process compiles cold and the worker
# processes reuse it, on both sides alike. JAX is told not
# to reserve most of the GPU's memory at start-up (its default): both
# frameworks then allocate as they go and share the device, and the first
# step's allocation is paid on both sides alike (section 5).
#
# Where a machine allows only a few minutes a command, the run is made in
# parts (`checkpoint_file`, `run_budget_s`): parity, each seed's training and
# each speed setting are saved as they finish, and a run that would overrun
# stops before its next part; the same command again, on the same machine and
# libraries, reads the finished parts back and measures the rest. A part is
# read back only while everything it ran with is unchanged (library code,
# notebook, parameters, pins, data), so a later commit that changed none of it
# keeps the work done. Each speed setting is still one interleaved run; the
# end of the post says which commit measured which part.
#
# On a machine shared with other work, OpenMP's spinning barriers can make
# PyTorch far slower with two threads than with one, so the cpu profile pins
# one thread for every library (`threads`).

# %% tags=["appendix"]
from sidebyside.lab import notebook

# first, before JAX starts; JAX allocates GPU memory as it goes, as PyTorch does (see above)
setup = notebook.setup(threads=threads, tf32=allow_tf32, warm=None, jax_preallocate=False)
conditions, prov, on_gpu, torch_device = setup.conditions, setup.provenance, setup.on_gpu, setup.torch_device

import jax
import jax.numpy as jnp
import matplotlib.pyplot as plt
import numpy as np
import optax
import pandas as pd
import timm
import torch
import torch.nn.functional as F
from flax import nnx
from IPython.display import Markdown
from matplotlib.patches import Patch

from sidebyside.lab import data, framing, progress, training, viz, words
from sidebyside.lab.conditions import conditions_sentence
from sidebyside.posts import swin_v2 as swin
from sidebyside.posts.swin_v2 import report
from sidebyside.posts.swin_v2.model import FlaxSwinV2  # the port, on trial in this post (section 2)
from sidebyside.run import checkpoints, code, provenance

prov["timm"] = timm.__version__
fashion = data.load()  # now, so that a machine without the data stops here and not after the parity check
provenance.table(prov)

# %% tags=["remove_input", "appendix"]
Markdown(conditions_sentence(conditions, on_gpu=on_gpu))

# %% [markdown]
# ## 1. The network, the same on both sides
#
# The PyTorch side is timm's `SwinTransformerV2`, the implementation PyTorch
# users run, built without pretrained weights. The JAX side is
# `FlaxSwinV2`, a Flax NNX port written for this post from the paper and
# timm's module (its code, beside timm's attention block, is in the appendix), with what makes V2 what it is: scaled cosine attention with a
# learned, clamped logit scale per head; the log-spaced continuous relative
# position bias (a 2-512-heads MLP, then `16·sigmoid`); residual
# post-normalisation; shifted windows with their attention mask; V2 patch
# merging (reduction, then norm); stochastic depth. timm's V2 has no absolute
# position embedding, so neither does the port. The port's attributes carry
# timm's names, and its initialisation follows timm's: normal(0.02) linear
# weights, zero-initialised post-norms (each block starts as the identity),
# a logit scale of log 10.
#
# The seed's JAX port used Flax Linen; this one uses Flax NNX, the API Flax
# recommends today (modules hold their parameters, as in PyTorch).

# %% tags=["appendix-input", "appendix"] summary="The configuration, and both networks' sizes"
model_config = swin.SwinConfig(img_size=img_size, patch_size=patch_size, in_chans=1, num_classes=10,
                               embed_dim=embed_dim, depths=tuple(depths), num_heads=tuple(num_heads),
                               window_size=window_size, drop_path_rate=drop_path_rate)
speed_config = swin.SwinConfig(img_size=speed_img_size, patch_size=speed_patch_size, in_chans=speed_in_chans,
                               num_classes=10, embed_dim=speed_embed_dim, depths=tuple(speed_depths),
                               num_heads=tuple(speed_num_heads), window_size=speed_window_size,
                               drop_path_rate=speed_drop_path_rate)
train_config = dict(num_epochs=num_epochs, batch_size=batch_size, lr=lr, optimizer="adam", schedule="cosine",
                    warmup_epochs=warmup_epochs, weight_decay=weight_decay)
# A run in parts (see the parameters): a part is read back while everything it ran with is unchanged.
parts = setup.parts(checkpoint_file, run_budget_s, model=model_config, speed_model=speed_config, train=train_config,
                    num_train=num_train, num_test=num_test)

# %% tags=["pair:model:torch"]
from timm.models.swin_transformer_v2 import SwinTransformerV2


def torch_swin(c):
    """timm's Swin Transformer V2 for the configuration c, with timm's random initialisation."""
    return SwinTransformerV2(img_size=c.img_size, patch_size=c.patch_size, in_chans=c.in_chans,
                             num_classes=c.num_classes, embed_dim=c.embed_dim, depths=c.depths,
                             num_heads=c.num_heads, window_size=c.window_size, mlp_ratio=c.mlp_ratio,
                             drop_path_rate=c.drop_path_rate)


torch_model = torch_swin(model_config)
sum(p.numel() for p in torch_model.parameters())

# %% tags=["pair:model:jax"]
def flax_swin(c, seed, precision="float32"):
    """The Flax NNX port for the configuration c; its parameters are drawn from nnx.Rngs(seed), float32 in
    either precision. bfloat16: the model computes where torch.autocast computes on this device: matrix products in
    bfloat16, LayerNorm and the L2 normalisation in float32 on a GPU (CUDA autocast's float32 list), bfloat16 on a CPU."""
    dtypes = {}
    if precision == "bfloat16":
        dtypes = dict(dtype=jnp.bfloat16, norm_dtype=jnp.float32 if torch_device.type == "cuda" else jnp.bfloat16)
    return FlaxSwinV2(c, rngs=nnx.Rngs(seed), **dtypes)


flax_model = flax_swin(model_config, 0)
sum(x.size for x in jax.tree_util.tree_leaves(nnx.state(flax_model, nnx.Param)))

# %% tags=["pair:attention:torch", "appendix"] summary="The code: timm's attention block beside the Flax port"
code.source(timm.models.swin_transformer_v2.WindowAttention, timm.models.swin_transformer_v2.SwinTransformerV2Block)

# %% tags=["pair:attention:jax", "appendix"]
code.source(swin.PatchEmbed, swin.WindowAttention, swin.Mlp, swin.SwinV2Block, swin.PatchMerging, swin.SwinV2Stage,
              swin.FlaxSwinV2)

# %% tags=["appendix-input", "appendix"]
pd.DataFrame({
    name: {"input": f"{c.img_size}×{c.img_size}×{c.in_chans}", "patch": c.patch_size, "window": c.window_size,
           "embed dim": c.embed_dim, "depths": "-".join(map(str, c.depths)),
           "heads": "-".join(map(str, c.num_heads)), "stage maps": " → ".join(f"{r}²" for r in c.resolutions()),
           "parameters": sum(p.numel() for p in swin.torch_model(c).parameters())}
    for name, c in (("trained on FashionMNIST", model_config), ("timed", speed_config))
}).T

# %% [markdown]
# ## 2. Parity first
#
# Without this, speed numbers would compare two different networks.
# `swin.copy_timm_weights` moves every timm parameter into the port (it
# refuses if either side has a parameter the other lacks). The check first
# overwrites timm's weights with random ones: timm's zero-initialised
# post-norms would otherwise make every block an identity and its gradients
# zero, and half the heads get a logit scale above the clamp, so the clamp is
# tested too. Then, on the same random input: the logits in eval mode, and
# the gradient of every parameter tensor after one training step's loss
# (stochastic depth off, since the two frameworks' random draws differ; the
# step is then the eval-mode function, which is how the port computes both
# in one compiled program).
# Tolerances, for float32 and logits of order one: |logit difference| ≤ 1e-5,
# and for each tensor ‖g_JAX − g_PyTorch‖ / ‖g_PyTorch‖ ≤ 1e-3. The library's
# tests run the same check at a tiny size, and show that it fails for a port
# without the shifted-window mask.

# %% tags=["appendix-input"]
parity_runs = {} if hardware_only else {  # hardware_only: the cpu run's (see the parameters)
    "trained model": parts("parity/trained", swin.parity, model_config, batch_size=parity_batch)}
if parity_on_speed_model or hardware_only:
    parity_runs["timed model"] = parts("parity/timed", swin.parity, speed_config, batch_size=parity_batch)
headline = next(iter(parity_runs))
# The trained model must pass, or nothing below compares the same network; the timed model's
# result (deeper, larger activations) is reported as measured.
assert report.within_tolerance(parity_runs[headline]), parity_runs[headline]
report.parity_table(parity_runs)

# %% tags=["remove_input"]
Markdown(report.parity_claim(report.parity_record(parity_runs, headline=headline))
         + (" " + words.from_cpu_run("The trained model's parity") if hardware_only else ""))

# %% [markdown]
# ## 3. Accuracy on FashionMNIST
#
# A sanity check, not the point. The images are normalised with the training
# set's statistics and zero-padded to the model's input (the padding is the
# mean pixel). Both sides train with AdamW (weight decay on matrices only,
# never on the position-bias MLP or the logit scale, timm's rule), the same
# warm-up and cosine schedule (`training.learning_rate`), the same batches in
# the same order (`training.index_batches`), no augmentation, and each
# framework's random initialisation drawn from the same scheme. What to
# expect: the same accuracy on both sides within seed noise, since the
# networks are the same function. The level is below a small CNN's (about
# 90% in the FashionMNIST post): a vision transformer has no convolutional
# prior and learns slowly from few, small images without augmentation.
#
# Each framework's optimiser, loss and steps, as its users write them: in
# PyTorch a step that zeroes the gradients, runs the model under
# `torch.autocast` (a no-op in float32), takes the cross-entropy and calls
# `backward` and the optimiser's `step`; in JAX a pure function of the
# parameters, the optimiser state and the stochastic-depth streams, in which
# `nnx.value_and_grad` differentiates the model with respect to its parameters
# alone (`nnx.Param`, as Flax's examples do) and optax's AdamW updates. The same
# functions train for accuracy here (the learning rate of each step set from
# the schedule) and are timed in section 4.

# %% [markdown] tags=["appendix"]
# bfloat16, where the profile asks for it, is one policy on both sides,
# `torch.autocast`'s on the device the post runs: the parameters and the
# optimiser stay float32; the convolution, every linear layer and the
# attention's two matrix products compute in bfloat16; the scaled attention
# logits, their softmax and the loss in float32. LayerNorm and the cosine
# attention's normalisation, and so the residual stream, are float32 on a GPU
# (CUDA autocast's float32 list has them) and bfloat16 on the CPU (CPU
# autocast's has neither). PyTorch gets it from
# `torch.autocast(dtype=torch.bfloat16)`; Flax from its own idiom, the model
# built with those compute dtypes (`dtype`, `norm_dtype`; its `param_dtype`
# stays float32: `flax_swin` above).

# %% tags=["appendix"]
arrays = training.prepare(fashion, num_train=num_train, num_test=num_test)
X_train, X_test = swin.fashion_inputs(arrays.X_train, model_config), swin.fashion_inputs(arrays.X_test, model_config)
pd.DataFrame({"examples": [len(X_train), len(X_test)], "model input": [X_train.shape[1:], X_test.shape[1:]]},
             index=["train", "test"])

# %% tags=["pair:train:torch"]
def torch_adamw(model, lr, weight_decay, **kwargs):
    """AdamW with timm's weight-decay rule: matrices only, never the position-bias MLP or the logit scale."""
    decay, no_decay = [], []
    for name, p in model.named_parameters():
        (decay if p.ndim >= 2 and "cpb_mlp" not in name and "logit_scale" not in name else no_decay).append(p)
    return torch.optim.AdamW([{"params": decay, "weight_decay": weight_decay},
                              {"params": no_decay, "weight_decay": 0.0}], lr=lr, **kwargs)


def torch_train_step(model, optimizer, precision="float32"):
    """One AdamW step; bfloat16: the forward and loss under torch.autocast, the parameters float32."""
    amp = dict(device_type=torch_device.type, dtype=torch.bfloat16, enabled=precision == "bfloat16")

    def train_step(x, y):
        optimizer.zero_grad(set_to_none=True)
        with torch.autocast(**amp):
            loss = F.cross_entropy(model(x), y)
        loss.backward()
        optimizer.step()
        return loss.detach()

    return train_step


def torch_eval_step(model, precision="float32"):
    amp = dict(device_type=torch_device.type, dtype=torch.bfloat16, enabled=precision == "bfloat16")

    def eval_step(x, y):
        with torch.no_grad(), torch.autocast(**amp):
            return model(x)

    return eval_step

# %% tags=["pair:train:jax"]
def jax_adamw(params, lr, weight_decay):
    """optax's AdamW with the same rule, as a mask over the parameters' paths; lr: a number or a schedule."""
    def decays(path, p):
        name = jax.tree_util.keystr(path)
        return p.ndim >= 2 and "cpb_mlp" not in name and "logit_scale" not in name

    mask = jax.tree_util.tree_map_with_path(decays, params)
    return optax.adamw(lr, b1=0.9, b2=0.999, eps=1e-8, weight_decay=weight_decay, mask=mask)


def jax_train_step(graphdef, tx):
    """(params, opt_state, rest, x, y) -> (params, opt_state, rest, loss); rest holds the stochastic-depth
    streams, which go back out so that each step draws anew. The model computes in the dtypes it was built
    with (flax_swin: bfloat16 is autocast's policy), its parameters float32."""
    def loss_fn(model, x, y):
        logits = model(x).astype(jnp.float32)  # the loss in float32, as autocast's cross_entropy
        return optax.softmax_cross_entropy_with_integer_labels(logits, y).mean()

    def train_step(params, opt_state, rest, x, y):
        model = nnx.merge(graphdef, params, rest)
        # with respect to the parameters alone (nnx.value_and_grad's default, nnx.Param), as Flax's examples
        # differentiate a model; the stochastic-depth streams the forward advanced stay in the model
        loss, grads = nnx.value_and_grad(loss_fn)(model, x, y)
        rest = nnx.state(model, nnx.Not(nnx.Param))
        updates, opt_state = tx.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), opt_state, rest, loss

    return train_step


def jax_eval_step(graphdef):
    """(params, rest, x) -> float32 logits, in the dtypes the model was built with."""
    def eval_step(params, rest, x):
        return nnx.merge(graphdef, params, rest)(x).astype(jnp.float32)

    return eval_step

# %% tags=["appendix-input"]
def torch_seed(seed):
    torch.manual_seed(seed)
    model = torch_swin(model_config).to(torch_device)
    config = training.TrainConfig(seed=seed, **train_config)
    return swin.train_torch(model, X_train, arrays.y_train, X_test, arrays.y_test, config, optimizer=torch_adamw,
                            train_step=torch_train_step)


def jax_seed(seed):
    config = training.TrainConfig(seed=seed, **train_config)
    return swin.train_flax(flax_swin(model_config, seed), X_train, arrays.y_train, X_test, arrays.y_test, config,
                           optimizer=jax_adamw, train_step=jax_train_step)


# The same batches in the same order (training.index_batches) and the same schedule (training.learning_rate) on both sides.
trained_seeds = [] if hardware_only else seeds  # hardware_only: the cpu run's (see the parameters)
torch_histories = [parts(f"accuracy/torch/{seed}", torch_seed, seed, decode=lambda h: training.History(**h))
                   for seed in progress.bar(trained_seeds, desc="PyTorch seeds")]
jax_histories = [parts(f"accuracy/jax/{seed}", jax_seed, seed, decode=lambda h: training.History(**h))
                 for seed in progress.bar(trained_seeds, desc="JAX seeds")]

# %% tags=["appendix-input"]
accuracy = None if hardware_only else report.accuracy_record({"torch": torch_histories, "jax": jax_histories}, seeds)
Markdown(words.from_cpu_run("Accuracy over seeds")) if hardware_only else pd.DataFrame([
    {"framework": viz.LABELS[fw], "epochs": num_epochs, "test accuracy (%)": 100 * a["mean"],
     "± std (%)": 100 * a["std"], "per seed (%)": ", ".join(f"{100 * v:.2f}" for v in a["per_seed"]),
     "epoch time (s, median)": a["epoch_seconds_median"]}
    for fw, a in accuracy.items()
]).set_index("framework").round(2)

# %% tags=["remove_input"]
None if hardware_only else Markdown(report.accuracy_claim(accuracy, num_train=len(X_train), num_epochs=num_epochs))

# %% [markdown]
# ## 4. Speed: each framework's ladder of tools
#
# At the seed's size on the gpu profile: 256×256×3 images, batch 32 and 64,
# Swin-V2-T (timm's `swinv2_tiny_window8_256` shape, 10 classes as in the
# seed's Imagenette). The images are random: the network has no
# data-dependent control flow, so its speed does not depend on pixel values,
# and random data needs no data set on disk. Each call runs `speed_steps`
# steps, each on its own batch already on the device; a training step is
# forward, backward and an AdamW update, an evaluation step a forward pass
# without gradients. The tools:
#
# - **PyTorch, eager**: what the seed ran;
# - **PyTorch, `torch.compile`**: the whole step (forward, backward, optimiser) compiled;
# - **PyTorch, CUDA graph**: the same, `mode="reduce-overhead"`, with a capturable optimiser (GPU only);
# - **PyTorch, CUDA graph of K steps**: all the call's steps captured as one CUDA graph, replayed as one
#   launch a call (GPU only);
# - **JAX, jit step**: one jitted step per batch, parameters and optimiser state donated;
# - **JAX, jit + `lax.scan`**: all the call's steps in one jitted scan.
#
# Best against best races like loop structure against like: the rungs that
# dispatch one step at a time against each other, and the two whole-loop
# programs (`lax.scan`, the CUDA graph of K steps) against each other. Where
# PyTorch has no whole-loop program (on a CPU there is no CUDA graph), the
# scan gets its own verdict, labelled "JAX's whole loop in one program
# (lax.scan) against PyTorch's best per-step dispatch".

# %% [markdown] tags=["collapsed"] summary="The code: each rung of the ladder"
# Each rung is built below from the model and the steps above: a fresh
# network with the same seed's weights, AdamW at a constant learning rate of
# 1e-4 with weight decay 0.05, and a `run` that performs one call's steps. The
# JAX rung returns its jitted function and the arguments to compile it for:
# the ladder compiles it ahead of time, timing the compilation apart, and hands
# the compiled function to `run` as `step`.
#
# All are timed in one interleaved run per setting (`sidebyside.lab.timing`:
# results waited for, the first call apart, median and quartiles over
# repeats). JAX compiles ahead of time, timed apart; for PyTorch the first
# call's excess is its compilation. Peak memory: `torch.cuda.max_memory_allocated`
# during a call, less what other models held; for JAX, XLA's accounting of the
# compiled program (arguments + outputs − donated buffers + temporaries),
# since the process's footprint mixes every program and both frameworks
# (and, by default, XLA reserves most of the GPU at start-up). Not timed: JAX op-by-op (eager) execution, which nobody
# trains a transformer with.

# %% tags=["pair:ladder:torch", "collapsed"]
def torch_rung(config, tool, phase, X, y, precision, seed):
    """One rung: run() performs a call's steps, one per batch of X, y; also what the rung holds on the device."""
    torch.manual_seed(seed)
    model = torch_swin(config).to(torch_device)
    Xs = [torch.as_tensor(b, device=torch_device) for b in X]
    ys = [torch.as_tensor(b, device=torch_device) for b in y]
    optimizer = None
    if phase == "train":
        model.train()
        # capturable: the optimiser's step counter stays on the GPU, as a CUDA graph needs
        optimizer = torch_adamw(model, lr=1e-4, weight_decay=0.05, capturable=tool.startswith("cuda_graph"))
        step = torch_train_step(model, optimizer, precision)
    else:
        model.eval()
        step = torch_eval_step(model, precision)
    # static shapes: otherwise a second batch size reaching this code would recompile with a symbolic batch
    if tool == "compile":
        step = torch.compile(step, dynamic=False)
    elif tool == "cuda_graph":  # compiled, then captured as CUDA graphs and replayed
        step = torch.compile(step, mode="reduce-overhead", dynamic=False)
    elif tool == "cuda_graph_steps":  # the call's steps captured once as ONE CUDA graph, replayed as one launch
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):  # warm-up before capture: the optimiser's state and the libraries' workspaces
            for _ in range(3):
                step(Xs[0], ys[0])
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            for xb, yb in zip(Xs, ys):
                last = step(xb, yb)

        def replay():
            graph.replay()
            return last

        return replay, (model, optimizer, Xs + ys)

    def run():
        for xb, yb in zip(Xs, ys):
            out = step(xb, yb)
        return out

    return run, (model, optimizer, Xs + ys)

# %% tags=["pair:ladder:jax", "collapsed"]
def jax_rung(config, tool, phase, X, y, precision, seed):
    """One rung: the jitted function, the arguments to compile it for, and run(step), which performs a call's
    steps with the compiled function."""
    model = flax_swin(config, seed, precision)
    if phase == "train":
        model.train()
    else:
        model.eval()
    graphdef, params, rest = nnx.split(model, nnx.Param, ...)
    Xs, ys = jnp.asarray(X.transpose(0, 1, 3, 4, 2)), jnp.asarray(y.astype(np.int32))  # NHWC: (steps, B, H, W, C)
    batches = [(Xs[i], ys[i]) for i in range(len(Xs))]
    if phase == "train":
        tx = jax_adamw(params, lr=1e-4, weight_decay=0.05)
        train_step = jax_train_step(graphdef, tx)
        opt_state = tx.init(params)
        if tool == "jit":  # one jitted step per batch; parameters and optimiser state donated (updated in place)
            fn, args = jax.jit(train_step, donate_argnums=(0, 1, 2)), (params, opt_state, rest, *batches[0])

            def run(step):
                nonlocal params, opt_state, rest
                for xb, yb in batches:
                    params, opt_state, rest, loss = step(params, opt_state, rest, xb, yb)
                return loss
        else:  # jit_scan: all the call's steps in one program
            def train_steps(params, opt_state, rest, Xs, ys):
                def body(carry, batch):
                    *carry, loss = train_step(*carry, *batch)
                    return tuple(carry), loss

                (params, opt_state, rest), losses = jax.lax.scan(body, (params, opt_state, rest), (Xs, ys))
                return params, opt_state, rest, losses[-1]

            fn, args = jax.jit(train_steps, donate_argnums=(0, 1, 2)), (params, opt_state, rest, Xs, ys)

            def run(step):
                nonlocal params, opt_state, rest
                params, opt_state, rest, loss = step(params, opt_state, rest, Xs, ys)
                return loss
    else:
        eval_step = jax_eval_step(graphdef)
        if tool == "jit":
            fn, args = jax.jit(eval_step), (params, rest, Xs[0])

            def run(step):
                for xb, _ in batches:
                    out = step(params, rest, xb)
                return out
        else:
            def eval_steps(params, rest, Xs):
                return jax.lax.scan(lambda c, xb: (c, eval_step(params, rest, xb)), 0, Xs)[1][-1]

            fn, args = jax.jit(eval_steps), (params, rest, Xs)

            def run(step):
                return step(params, rest, Xs)
    return fn, args, run

# %% tags=["appendix-input", "appendix"] summary="Every rung of the speed ladders"
speed = {}
settings = [(p, ph, b) for ph in speed_phases for p in precisions for b in precision_batch_sizes.get(p, speed_batch_sizes)]
for precision, phase, batch in progress.bar(settings, desc="speed ladders"):
    speed[f"{precision}/{phase}/{batch}"] = parts(
        f"speed/{phase}/{precision}/{batch}", swin.speed_ladder,
        speed_config, batch_size=batch, phase=phase, precision=precision, torch_tools=torch_tools,
        jax_tools=jax_tools, steps=speed_steps, repeats=speed_repeats, torch_rung=torch_rung, jax_rung=jax_rung)
rows = report.speed_rows(speed)  # one row per rung; a failed tool's numbers are NaN
report.speed_table(rows).round(2)

# %% figure="throughput" alt="Images per second of each tool, PyTorch in orange-red and JAX in blue, training and evaluation, with interquartile error bars" tags=["key-figure", "appendix-input"]
working = rows[rows["median_s"].notna()]
fig, axes = plt.subplots(1, len(speed_phases), figsize=(12, 1.8 + 0.45 * max(len(working) // len(speed_phases), 3)),
                         squeeze=False)
for ax, phase in zip(axes[0], speed_phases):
    part = working[working["phase"] == phase]
    labels = [f"{t}, batch {b}" + (f", {p}" if len(precisions) > 1 else "")
              for t, b, p in zip(part["tool"], part["batch"], part["precision"])]
    rate = part["batch"] / part["median_s"]
    low, high = part["batch"] / part["q3_s"], part["batch"] / part["q1_s"]
    ax.barh(labels, rate, xerr=np.array([rate - low, high - rate]), color=[viz.color(n.split("/")[0]) for n in part["name"]])
    ax.invert_yaxis()
    ax.set_xlim(0, 1.1 * max(high.max(), 1e-9))
    ax.set(title=f"{'Training' if phase == 'train' else 'Evaluation'} step, {speed_config.img_size}² input",
           xlabel="images per second (median; bars: IQR)", ylabel="framework, tool, batch" if ax is axes[0][0] else "")
fig.legend(handles=[Patch(color=viz.COLORS["torch"], label="PyTorch"), Patch(color=viz.COLORS["jax"], label="JAX")],
           loc="upper center", ncol=2, title=f"Swin V2 throughput on {prov['device']}")
fig.tight_layout(rect=(0, 0, 1, 0.82))
plt.show()

# %% [markdown] tags=["appendix"]
# ### Memory
#
# Peak device memory per training or evaluation call, where the device
# reports it (on a CPU neither framework does).

# %% tags=["appendix-input", "appendix"]
memory_table = rows.pivot_table(index=["precision", "phase", "batch"], columns="tool", values="peak_memory_bytes",
                                aggfunc="first") / 2**20
memory_table.round(0) if len(memory_table) else Markdown("No device memory statistics on this device (a CPU).")

# %% [markdown]
# ## 5. The first step and the first epoch
#
# The seed saw a much slower first epoch on both sides, above all its first
# step, and put it down to memory allocation. Split from the training
# ladders: compilation and set-up (JAX's trace and compile, ahead of time;
# for PyTorch, the first call beyond a call made after emptying its caching
# allocator, that is `torch.compile` where it compiles and the libraries'
# one-off set-up; for the CUDA graph of K steps, its warm-up and capture; for
# eager PyTorch on a CPU, the first call beyond a steady one), allocation
# (that re-allocating call beyond a steady call, on CUDA; JAX: its compiled
# program's first run beyond a steady one), and the steady step. An epoch is
# taken as Imagenette's 9,469 training images.

# %% tags=["appendix-input", "appendix"] summary="The first step of every rung"
first_steps = report.first_steps(speed)  # swin.first_step for each working training rung
first_table = pd.DataFrame(first_steps.values()).set_index(["precision", "batch", "tool"])[
    ["compile_s", "allocation_s", "steady_s", "first_step_s", "first_epoch_s", "steady_epoch_s", "first_epoch_excess"]]
first_table.round(3)

# %% tags=["remove_input"]
Markdown(report.first_epoch_claim(first_steps))

# %% [markdown]
# ## 6. Conclusion

# %% tags=["remove_input", "collapsed"] summary="The conclusion in full"
metrics = report.summarise(
    parity_runs=parity_runs, accuracy=accuracy, speed=speed, model_config=model_config, speed_config=speed_config,
    num_train=len(X_train), num_test=len(X_test), num_epochs=num_epochs, allow_tf32=allow_tf32,
    timm_version=timm.__version__, conditions=conditions, device=prov["device"], on_gpu=on_gpu, parts=parts.log,
    batch_size=batch_size, parameters={name: sum(p.numel() for p in swin.torch_model(c).parameters())
                                       for name, c in (("model", model_config), ("speed_model", speed_config))},
    # where the seed measured (its Swin-V2-T, 256x256 images, a Tesla V100): the claim the verdicts are read against
    seed_scale=framing.scale_of(parameters=28_300_000, input="256×256×3", device="V100"))
Markdown(report.conclusion(metrics) + "\n\n" + checkpoints.describe_parts(parts.log))

# %% tags=["remove_cell"]
record = provenance.save_results(metrics, provenance=prov)
record["metrics"]["parity"]


# %% tags=["remove_cell", "colab-compare"]
# Your figures beside the post's, verdict by verdict.
from sidebyside.publish import reproduce

reproduce.in_notebook("swin-transformer-v2", record, REPOSITORY)
