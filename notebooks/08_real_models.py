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
#     compared: ResNet-50 and ViT-B/16 as PyTorch users run them (timm) against Flax
#       NNX ports given the same weights, and GPT-2 small written in each framework's
#       idiom with the same weights; checked for the same logits and gradients, then
#       timed training a step, serving images at batch 1 and in bulk, and generating
#       text with a key-value cache, each framework at its best and out of the box,
#       with compile time, peak memory and FLOPs.
#     date: '2026-11-25'
#     description: ResNet-50, ViT-B/16 and GPT-2 small at their real sizes, trained
#       and served in PyTorch and JAX with the same weights; each framework's best tool
#       against the other's, and what each costs to compile, in memory and in FLOPs.
#     metrics:
#     - parity
#     - settings
#     - flops
#     - key_table
#     - verdicts
#     slug: real-models
#     tags:
#     - pytorch
#     - jax
#     - flax
#     - resnet
#     - vision-transformer
#     - gpt-2
#     - benchmark
#     - inference
#     - training
#     title: 'Real models at their real size: ResNet-50, ViT-B/16 and GPT-2 in PyTorch
#       and JAX'
# ---

# %% [markdown]
# # Real models at their real size: ResNet-50, ViT-B/16 and GPT-2 in PyTorch and JAX
#
# Readers choose a framework for the models they train and serve. For ResNet-50,
# ViT-B/16 and GPT-2 small: which framework trains a step and serves a request
# faster, each at its best; how long does each take to compile; how much memory
# does each use; and do they compute the same thing? Keras 3's benchmark page
# times models "out of the box" on one GPU, with no spread, no parity check and no
# compiled PyTorch. Here both frameworks get the same weights, a parity check comes
# before any timing, each framework climbs its whole ladder of tools, and every
# figure carries its spread.

# %% tags=["colab-install"]
# Run this post yourself: on Colab this installs the library and the versions the post ran with.
import subprocess
import sys

REPOSITORY = "sidebyside-ml/pytorch-vs-jax@main"  # the site's repository@branch (_config.yml); a fork names its own
if "google.colab" in sys.modules:
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "torchviz", "timm==1.0.31",
                    f"sidebyside @ git+https://github.com/{REPOSITORY}"], check=True)
from sidebyside.run import colab

colab.setup("real-models", REPOSITORY)

# %% tags=["parameters"]
# Model sizes: each dict shrinks the model ({} is its published size). timm's resnet50 takes
# layers/channels (its 7x7 stem stays 64 wide); vit_base_patch16_224 depth/embed_dim/num_heads/patch_size; GPT-2
# n_layer/n_embd/n_head/n_positions/vocab_size.
resnet50 = {"layers": [1, 1, 1, 1], "channels": [8, 8, 16, 16]}
vit_b16 = {"depth": 2, "embed_dim": 32, "num_heads": 2, "patch_size": 8}
gpt2 = {"n_layer": 2, "n_embd": 32, "n_head": 2, "n_positions": 64, "vocab_size": 512}
models = ["resnet50", "vit_b16", "gpt2"]
workloads = {}             # model -> the workloads it is timed at ({}: every model at train and infer, or generate)
img_size = 32              # image side (224 at full size)
num_classes = 10           # classifier width (1000 at full size)
seq_len = 32               # GPT-2's training sequence (1024 at full size)
parity_batch = 2           # images or sequences in the parity check
parity_models = None       # the models whose parity is checked (None: every model of models)
train_batch = 4            # images per training step
train_sequences = 2        # GPT-2 sequences of seq_len tokens per training step
latency_batch = 1          # inference latency
throughput_batch = 8       # inference throughput (32 on the gpu profile)
generate_batches = [1, 2]  # GPT-2 generation (1 and 8 on the gpu profile)
prompt_len = 8             # GPT-2 prompt tokens
new_tokens = 8             # GPT-2 tokens generated per call
precisions = ["float32"]   # "bfloat16" adds rows where the device computes it natively
# PyTorch's rungs, of eager, compile, max-autotune, cuda-graph, aoti (the cpu and gpu profiles take all five; here
# compile and aoti are left out: on a CPU their C++ builds take minutes even for a tiny model)
torch_tools = ["eager", "max-autotune", "cuda-graph"]
jax_tools = ["jit"]
memory_workloads = ["train"]  # workloads whose best rungs' peak memory is measured (each in a fresh process)
repeats = 6                # timed repeats over all processes (at least 3 in each)
min_repeat_s = 0.0         # shortest repeat where the harness chooses the calls per repeat
threads = 1                # CPU threads for PyTorch, XLA and NumPy alike
profile_note = "Smoke sizes: every model shrunk to 2 blocks and a small width; the figures test the pipeline, not the frameworks."
seed = 0
flax_init = True           # the Flax ports draw their own weights before PyTorch's are copied over them, as a user's
                           # would (False: built empty and filled by the copy, the same model without its initialisers)
# A run in parts (a lent GPU allows 10 minutes a command): each parity check and each ladder is saved to
# this file as it finishes and read back by the next run; no part starts that would end past run_budget_s.
checkpoint_file = ""       # "": off, everything is measured in this run
run_budget_s = 0           # seconds; 0: no budget

# %% tags=["remove_cell", "colab-profile"]
# The settings to run with: "smoke" (the test suite's small sizes, a minute), "cpu", or "gpu" (a GPU post's own
# settings, on a GPU runtime); "auto" takes the post's own on a GPU runtime and smoke elsewhere.
PROFILE = "auto"
globals().update(colab.parameters("real-models", PROFILE, REPOSITORY))

# %% [markdown] tags=["appendix"]
# ## Setup
#
# Both frameworks run on the same device under the same conditions, set before JAX
# starts (`notebook.setup`, through `conditions.same_conditions`): float32 with TF32 off on both sides, the
# same CPU threads for PyTorch, XLA and NumPy. Each compiler's one-time start-up is
# paid first (`timing.warm_start`). Every ladder is timed in several independent
# processes: the first compiles cold, the later ones reuse the run's compilation
# caches (JAX's persistent cache, Inductor's), which gives compile time cold and
# warm. JAX is told not to reserve most of the GPU at start-up, so both frameworks
# allocate as they go.

# %% tags=["appendix"] summary="Set-up: conditions, imports, the run's device and versions"
from sidebyside.lab import notebook

# first, before JAX starts; JAX allocates GPU memory as it goes, as PyTorch does (see above). PyTorch's compiler
# is warmed where a rung compiles (compile, max-autotune, aoti), JAX's always (every JAX rung is jitted).
compiling = bool({"compile", "max-autotune", "aoti"} & set(torch_tools))
setup = notebook.setup(threads=threads, tf32=False, jax_preallocate=False,
                       compilers=("torch", "jax") if compiling else ("jax",))
conditions, prov, on_gpu, startup = setup.conditions, setup.provenance, setup.on_gpu, setup.startup

import functools
import os

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

from sidebyside.lab import peaks, progress, timing, words
from sidebyside.lab.conditions import conditions_sentence
from sidebyside.posts.real_models import attention, config, port, report, vision, work
from sidebyside.posts.real_models import gpt2 as gpt
from sidebyside.run import checkpoints, code, provenance

prov["timm"] = timm.__version__
sizes = {"resnet50": resnet50, "vit_b16": vit_b16, "gpt2": gpt2}
specs = {key: config.spec(key, sizes[key], img_size=img_size, num_classes=num_classes, seq_len=seq_len)
         for key in models}
bf16_native, bf16_reason = work.bf16_support()
parts = setup.parts(checkpoint_file, run_budget_s, specs=specs, threads=threads)  # a run in parts (see the parameters)
provenance.table(prov)

# %% tags=["remove_input", "appendix"]
Markdown(conditions_sentence(conditions, on_gpu=on_gpu) + f" {profile_note}")

# %% [markdown]
# ## 1. The same networks
#
# ResNet-50 and ViT-B/16 are timm's (`timm.create_model(..., pretrained=False)`),
# the models PyTorch users run. Their JAX side is a Flax NNX port written here
# with timm's names, so that PyTorch's `state_dict` is copied tensor by tensor
# into it (the copy refuses a tensor either side lacks). GPT-2 small is written
# compactly in each framework's idiom, and its PyTorch weights are copied across
# too. **Weights are initialised here (timm's and GPT-2's own schemes), not
# downloaded**: speed does not depend on the weights' values, since none of these
# networks has data-dependent control flow. The three networks' code, side by side,
# is in the appendix.

# %% tags=["pair:resnet:torch", "appendix"] summary="The networks: ResNet-50, as timm and this Flax port write it"
code.source(config.torch_model)

# %% tags=["pair:resnet:jax", "appendix"]
code.source(vision.Bottleneck, vision.FlaxResNet)

# %% tags=["pair:vit:torch", "appendix"] summary="The networks: ViT-B/16"
Markdown("timm's `VisionTransformer`, built by `timm.create_model('vit_base_patch16_224', pretrained=False)`.")

# %% tags=["pair:vit:jax", "appendix"]
code.source(vision.Attention, vision.Block, vision.FlaxViT, attention.dot_product_attention)

# %% tags=["pair:gpt2:torch", "appendix"] summary="The networks: GPT-2 small, in each framework's idiom"
code.source(gpt.CausalSelfAttention, gpt.GPT)

# %% tags=["pair:gpt2:jax", "appendix"]
code.source(gpt.FlaxAttention, gpt.FlaxGPT)

# %% tags=["appendix-input"]
model_info = {}
for key, s in specs.items():
    t, f = port.pair(s, seed, initialise=flax_init)
    model_info[key] = {**s.to_dict(), "parameters": config.param_count(t),
                       "round_trip": all(np.array_equal(v, t.state_dict()[k].numpy())
                                         for k, v in port.flax_state_dict(f).items())}
    del t, f
pd.DataFrame({config.NAMES[k]: {"parameters": v["parameters"], "full size": v["full_size"],
                                "weights round-trip PyTorch → Flax → PyTorch": v["round_trip"]}
              for k, v in model_info.items()}).T

# %% [markdown]
# ## 2. Parity first
#
# On the same random input: the float32 logits in evaluation mode, and the
# gradient of every parameter after one training step's loss (cross-entropy;
# GPT-2's next-token loss), in training mode (ResNet's BatchNorm on the batch's
# statistics). The logits must agree within a small fraction of their scale (their
# largest magnitude). The gradients are compared in float64 on both sides, all of
# them as one vector, ‖g_JAX − g_PyTorch‖ / ‖g_PyTorch‖ (the worst single tensor is
# shown too): in float32, a training step of a deep network on a batch of two
# carries rounding of order 1e-2 in either framework alone (the table shows
# PyTorch's float32 gradients against its own float64 ones), which would hide a
# small mistake in the port; in float64 a correct port agrees to about 1e-12. The
# tolerances are stated with the results. ResNet's BatchNorm weights are drawn at
# random first, and its running statistics set from another batch: timm starts each
# block's last BatchNorm at zero, which would make every residual branch an identity.

# %% tags=["appendix-input", "appendix"] summary="Parity, model by model: logits, gradients in float64 and float32"
checked = {key: s for key, s in specs.items() if parity_models is None or key in parity_models}
parity = {key: parts(f"parity/{key}", port.parity, s, batch=parity_batch, seed=seed)
          for key, s in progress.bar(checked.items(), desc="parity")}
assert all(p["within_tolerance"] for p in parity.values()), parity
report.parity_table(parity)

# %% tags=["remove_input"]
Markdown(report.parity_claim(parity))

# %% [markdown]
# ## 3. The work, as each framework spells it
#
# A training step is AdamW on cross-entropy (GPT-2: the next token). PyTorch's
# is the loop every tutorial writes (`zero_grad`, `backward`, `step`), the forward
# under `torch.autocast`, which is off in float32; JAX's is the step Flax's own
# examples write: an `nnx.Optimizer` over the model's parameters
# (`wrt=nnx.Param`), `nnx.value_and_grad` of the loss with respect to them
# (BatchNorm's statistics are updated by the forward, not differentiated), jitted
# with the model's and optimiser's state donated so that XLA updates them in
# place. Each function takes a model and one batch already on the device and
# returns the zero-argument step that the ladder below times.
#
# bfloat16 is one policy on both sides, `torch.autocast`'s: the parameters and
# the optimiser stay float32; matrix products, convolutions and attention compute
# in bfloat16 (and BatchNorm's output, its statistics in float32); embeddings,
# LayerNorm, the transformers' residual stream, the softmax inside attention and
# the loss stay float32; GPT-2's key-value cache is bfloat16 on both sides.
# PyTorch gets it from `torch.autocast(dtype=torch.bfloat16)`; Flax from its own
# idiom, the model built with `dtype=jnp.bfloat16` (the compute dtype; its
# `param_dtype` stays float32) on the same layers.

# %% tags=["pair:train:torch"]
def torch_train_step(model, x, y, amp):
    """One AdamW step on cross-entropy, as a function of nothing (amp: torch.autocast's arguments;
    bfloat16: float32 parameters, autocast's bfloat16 for matmuls, convolutions and attention)."""
    model.train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, capturable=x.is_cuda)

    def step():
        optimizer.zero_grad(set_to_none=True)
        with torch.autocast(**amp):
            logits = model(x)
        loss = F.cross_entropy(logits.float().reshape(-1, logits.shape[-1]), y.reshape(-1))
        loss.backward()
        optimizer.step()
        return loss.detach()
    return step


# %% tags=["pair:train:jax"]
def loss_of(model, x, y):
    logits = model(x).astype(jnp.float32)  # the loss in float32, as PyTorch's
    return optax.softmax_cross_entropy_with_integer_labels(logits.reshape(-1, logits.shape[-1]), y.reshape(-1)).mean()


def jax_train_step(model, x, y):
    """One AdamW step on cross-entropy, as Flax's examples write it, jitted with the model's and the
    optimiser's state donated (XLA updates them in place). bfloat16: the model computes in the dtype
    it was built with (dtype=jnp.bfloat16; its parameters float32), autocast's policy."""
    model.train()
    optimizer = nnx.Optimizer(model, optax.adamw(1e-4, weight_decay=0.01), wrt=nnx.Param)  # torch's AdamW defaults
    graphdef, state = nnx.split((model, optimizer))

    @functools.partial(jax.jit, donate_argnums=0)
    def step(state, x, y):
        model, optimizer = nnx.merge(graphdef, state)
        loss, grads = nnx.value_and_grad(loss_of)(model, x, y)  # with respect to the nnx.Param leaves
        optimizer.update(model, grads)
        return nnx.state((model, optimizer)), loss  # BatchNorm's statistics as the forward updated them

    held = [state]

    def train():
        held[0], loss = step(held[0], x, y)
        return loss
    train.cost = lambda: step.lower(held[0], x, y).compile().cost_analysis()  # XLA's count of its FLOPs
    return train


# %% [markdown]
# Two steps each on the parity-sized ResNet, from the same weights: the losses agree.

# %% tags=["remove_input"]
t_model, f_model = port.pair(specs["resnet50"], seed, initialise=flax_init)
X, Y = port.inputs(specs["resnet50"], parity_batch, seed)
torch_step = torch_train_step(t_model, torch.from_numpy(X), torch.from_numpy(Y),
                              dict(device_type="cpu", dtype=torch.bfloat16, enabled=False))
jax_step = jax_train_step(f_model, jnp.asarray(X.transpose(0, 2, 3, 1)), jnp.asarray(Y.astype(np.int32)))
torch_losses = [float(torch_step()) for _ in range(2)]
jax_losses = [float(jax_step()) for _ in range(2)]
pd.DataFrame({"PyTorch": torch_losses, "JAX": jax_losses}, index=["step 1", "step 2"]).rename_axis("loss")

# %% [markdown]
# Generation is greedy, with a key-value cache preallocated for the prompt and
# the new tokens (in bfloat16, a bfloat16 cache on both sides). PyTorch writes
# each step's keys and values into it in place (`index_copy_`) from a Python
# loop, eager or with the model compiled; JAX runs the prompt and a
# `lax.fori_loop` of one-token steps in one jitted program, the cache donated
# and updated in place (`lax.dynamic_update_slice`). The loops are not the same
# structure (one program against a Python loop of steps), and every generation
# verdict says so. The check: the tokens equal those generated without a cache,
# on both sides.

# %% tags=["pair:generate:torch", "collapsed"] summary="The code: generation with a key-value cache"
@torch.no_grad()
def torch_generate(model, prompt, new_tokens, step=None):
    """Greedy generation of new_tokens after prompt (batch, length) with the cache; step: what runs
    the model (the model itself, or the model compiled)."""
    step = model if step is None else step  # a compiled module has no truth value
    B, P = prompt.shape
    device = prompt.device.type  # under autocast the cache holds its dtype, which keys and values are computed in
    cache = model.new_cache(B, P + new_tokens, torch.get_autocast_dtype(device) if torch.is_autocast_enabled(device)
                            else None)
    logits = step(prompt, cache, torch.tensor(0, device=prompt.device))
    token = logits[:, -1].argmax(-1, keepdim=True)
    out = [token]
    for i in range(1, new_tokens):
        logits = step(token, cache, torch.tensor(P + i - 1, device=prompt.device))
        token = logits[:, -1].argmax(-1, keepdim=True)
        out.append(token)
    return torch.cat(out, dim=1)


# %% tags=["pair:generate:jax", "collapsed"]
def jax_generate(graphdef, params, prompt, cache, new_tokens):
    """Greedy generation, to be jitted (new_tokens static, cache donated): the prompt in one pass,
    then a lax.fori_loop of one-token steps updating the cache in place."""
    model = nnx.merge(graphdef, params)
    B, P = prompt.shape
    logits, cache = model(prompt, cache, 0)
    token = jnp.argmax(logits[:, -1], axis=-1)
    out = jnp.zeros((B, new_tokens), jnp.int32).at[:, 0].set(token)

    def body(i, carry):
        cache, out, token = carry
        logits, cache = model(token[:, None], cache, P + i - 1)
        token = jnp.argmax(logits[:, -1], axis=-1)
        return cache, out.at[:, i].set(token), token

    cache, out, _ = jax.lax.fori_loop(1, new_tokens, body, (cache, out, token))
    return out, cache


# %% tags=["appendix-input", "appendix"] summary="The generated tokens, with and without the cache"
generated = {}
if "gpt2" in specs:  # the gpu profile may leave GPT-2 out (models): its generation is then the cpu run's
    t_gpt, f_gpt = port.pair(specs["gpt2"], seed, initialise=flax_init)
    prompt, _ = port.inputs(specs["gpt2"], 2, seed)
    prompt = prompt[:, :prompt_len]
    f_gpt.eval()
    gdef, gparams = nnx.split(f_gpt)
    generated = {
        "PyTorch, cached": torch_generate(t_gpt.eval(), torch.from_numpy(prompt), new_tokens).numpy(),
        "PyTorch, no cache": gpt.torch_generate_uncached(t_gpt, torch.from_numpy(prompt), new_tokens).numpy(),
        "JAX, cached (jit)": np.asarray(jax.jit(jax_generate, static_argnums=(0, 4))(
            gdef, gparams, jnp.asarray(prompt, jnp.int32), f_gpt.new_cache(2, prompt_len + new_tokens), new_tokens)[0]),
        "JAX, no cache": np.asarray(gpt.jax_generate_uncached(f_gpt, jnp.asarray(prompt, jnp.int32), new_tokens)),
    }
generation_check = {"all_equal": all(np.array_equal(v, generated["PyTorch, cached"]) for v in generated.values())
                    if generated else None,
                    "train_losses": {"torch": torch_losses, "jax": jax_losses},
                    "train_loss_diff": float(np.max(np.abs(np.subtract(torch_losses, jax_losses))))}
(pd.DataFrame({k: [" ".join(map(str, row)) for row in v] for k, v in generated.items()}).T if generated
 else Markdown(words.from_cpu_run("GPT-2's generation", "is cut for the GPU run's budget")))

# %% [markdown]
# Serving is a forward pass without gradients. PyTorch's out-of-the-box rung calls
# the module under `torch.no_grad()`; its CUDA-graph rung captures that eager
# forward once, on a static input buffer, after three warm-up calls on a side
# stream, and replays it; its AOTInductor rung exports the model with
# `torch.export` and compiles it ahead of time into a package that it loads. JAX's
# is one jitted function of the parameters and the batch.

# %% tags=["pair:serve:torch", "collapsed"] summary="The code: inference, eager, as a CUDA graph and ahead of time"
import tempfile


def torch_infer(model, x, amp, forward=None):
    """The forward without gradients; forward: what runs the model (the model itself, or compiled)."""
    forward = model if forward is None else forward

    def infer():
        with torch.no_grad(), torch.autocast(**amp):
            return forward(x)
    return infer


def torch_cuda_graph(model, x, amp):
    """The eager forward captured once in a CUDA graph, replayed on a static input."""
    static = x.clone()
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream), torch.no_grad(), torch.autocast(**amp):
        for _ in range(3):  # warm-up calls before the capture
            model(static)
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph), torch.no_grad(), torch.autocast(**amp):
        out = model(static)

    def replay():
        graph.replay()
        return out
    return replay


def torch_aoti(model, x):
    """torch.export, then AOTInductor: the model compiled ahead of time into a package, loaded."""
    with torch.no_grad():
        exported = torch.export.export(model, (x,))
    with tempfile.TemporaryDirectory(prefix="aoti-") as folder:  # the loaded runner keeps its own copy
        path = torch._inductor.aoti_compile_and_package(exported, package_path=os.path.join(folder, "model.pt2"))
        runner = torch._inductor.aoti_load_package(path)
    return lambda: runner(x)


# %% tags=["pair:serve:jax", "collapsed"]
def jax_infer(model, x):
    """The forward, one jitted function of the parameters and the batch (in the model's compute dtype)."""
    model.eval()
    graphdef, params = nnx.split(model)

    @jax.jit
    def forward(params, x):
        return nnx.merge(graphdef, params)(x).astype(jnp.float32)

    def infer():
        return forward(params, x)
    infer.cost = lambda: forward.lower(params, x).compile().cost_analysis()  # XLA's count of its FLOPs
    return infer


# %% [markdown]
# ## 4. Each framework at its best, and out of the box
#
# The rungs: **PyTorch eager** (out of the box); **`torch.compile`** (static
# shapes); **`mode="max-autotune"`** (GPU only); a **CUDA graph** for inference
# (the eager forward captured and replayed; for generation, `mode="reduce-overhead"`;
# GPU only); **`torch.export` + AOTInductor** for serving (an ahead-of-time compiled
# library, float32). JAX: **`jax.jit`** (out of the box and its best: training
# with the buffers donated, generation in one program). Each rung is built as
# below from the functions above, on models built with the same weights on both
# sides and inputs already on the device (random); what the ladder times is what
# these cells return. A rung that cannot run here (a GPU-only tool on a CPU, a
# CUDA graph of a training step, AOTInductor beyond float32 inference) is kept as
# not applicable, and a tool that fails stays in the table with its error.
# bfloat16 rows run only where the device computes bfloat16 natively.

# %% tags=["pair:ladder:torch", "collapsed"] summary="The code: each rung of the ladder"
COMPILE = {"compile": dict(dynamic=False), "max-autotune": dict(mode="max-autotune", dynamic=False),
           "cuda-graph": dict(mode="reduce-overhead", dynamic=False)}  # cuda-graph here: generation's


def torch_rung(model, workload, tool, x, y, amp, new_tokens):
    """PyTorch's rung `tool` (eager, compile, max-autotune, cuda-graph, aoti) of a workload
    (train, infer, generate: x is the prompt), as a function of nothing."""
    if x.is_cuda and x.dim() == 4:  # images on a GPU: channels_last (NHWC, Flax's layout), PyTorch's advice for convs
        model, x = model.to(memory_format=torch.channels_last), x.contiguous(memory_format=torch.channels_last)
    if workload == "train":
        step = torch_train_step(model, x, y, amp)
        return torch.compile(step, **COMPILE[tool]) if tool in COMPILE else step
    model.eval()
    if workload == "generate":
        runner = torch.compile(model, **COMPILE[tool]) if tool in COMPILE else model

        def generate():
            with torch.autocast(**amp):
                return torch_generate(model, x, new_tokens, step=runner)
        return generate
    if tool == "cuda-graph":
        return torch_cuda_graph(model, x, amp)
    if tool == "aoti":
        return torch_aoti(model, x)
    return torch_infer(model, x, amp, torch.compile(model, **COMPILE[tool]) if tool in COMPILE else model)


# %% tags=["pair:ladder:jax", "collapsed"]
def jax_rung(model, workload, x, y, new_tokens):
    """JAX's rung, jax.jit, of a workload (train, infer, generate: x is the prompt); the model
    computes in the dtype it was built with."""
    if workload == "train":
        return jax_train_step(model, x, y)
    if workload == "infer":
        return jax_infer(model, x)
    model.eval()
    graphdef, params = nnx.split(model)
    generate = jax.jit(jax_generate, static_argnums=(0, 4), donate_argnums=(3,))
    B, P = x.shape

    def new_cache():
        return model.new_cache(B, P + new_tokens)  # in the model's compute dtype (bfloat16 or float32)

    def run():
        tokens, _ = generate(graphdef, params, x, new_cache(), new_tokens)
        return tokens
    run.cost = lambda: generate.lower(graphdef, params, x, new_cache(),
                                      new_tokens).compile().cost_analysis()  # XLA's count of its FLOPs
    return run


# %% tags=["appendix-input"] summary="Every ladder: model, workload, batch, precision"
plan = []
for key, s in specs.items():
    timed = workloads.get(key, ["train", "generate" if s.kind == "gpt2" else "infer"])
    for precision in precisions:
        if precision == "bfloat16" and not bf16_native:
            continue
        if "train" in timed:
            plan.append((key, "train", train_sequences if s.kind == "gpt2" else train_batch, precision))
        if s.kind == "gpt2" and "generate" in timed:
            plan += [(key, "generate", b, precision) for b in generate_batches]
        elif s.kind != "gpt2" and "infer" in timed:
            plan += [(key, "infer", b, precision) for b in dict.fromkeys([latency_batch, throughput_batch])]
opts = {"prompt_len": prompt_len, "new_tokens": new_tokens}
rungs = {"torch_rung": torch_rung, "jax_rung": jax_rung}  # the paired cells above: what is shown is what is timed
device_name = prov["device"]
peak = (peaks.peak_flops(device_name, "fp32"), "NVIDIA's data sheet") if on_gpu else peaks.cpu_peak_flops("float32")


def measure(key, workload, batch, precision):
    """One ladder, timed in every process, with its FLOPs and its best rungs' peak memory."""
    s = specs[key]
    tools = [t for t in torch_tools if not (t == "aoti" and workload != "infer")]
    builder = functools.partial(work.build, s, workload, batch, precision, tools, jax_tools, seed, **opts, **rungs,
                                flax_init=flax_init)
    entries, _ = timing.ladder(builder, repeats=repeats, min_repeat_s=min_repeat_s,
                               pipelined=on_gpu)
    counted = work.flops(s, workload, batch, **opts, **rungs, flax_init=flax_init)
    tokens = batch * (seq_len if workload == "train" else prompt_len + new_tokens - 1) if s.kind == "gpt2" else None
    flop = report.flops_record(counted, model=key, workload=workload, batch=batch, tokens=tokens,
                               full_size=s.full_size)
    build_s = {n: v for (m, w, b, p, n), v in work.BUILD_S.items() if (m, w, b, p) == (key, workload, batch, precision)}
    peak_here = peaks.peak_flops(device_name, "bf16_tensor") if on_gpu and precision == "bfloat16" else peak[0]
    record = report.setting_record(entries, model=key, workload=workload, batch=batch, precision=precision,
                                   spec=model_info[key], opts=opts, build_s=build_s, peak_flops=peak_here,
                                   model_flops=counted["torch"])
    if workload in memory_workloads:
        for fw in ("torch", "jax"):
            if record["best"].get(fw):
                record["memory"][fw] = work.peak_memory(s, workload, batch, precision, f"{fw}/{record['best'][fw]}",
                                                        threads=threads, flax_init=flax_init, **opts, **rungs)
    return {"record": record, "flops": flop}


settings, flop_counts = {}, {}
for key, workload, batch, precision in progress.bar(plan, desc="ladders"):
    name = report.setting_name(key, workload, batch, precision)
    measured = parts(f"ladder/{name}", measure, key, workload, batch, precision)
    settings[name] = measured["record"]
    flop_counts.setdefault(f"{key}/{workload}/{batch}", measured["flops"])
f"{len(settings)} ladders timed"

# %% [markdown]
# ## 5. The key figure
#
# One row per model and workload: each framework's best rung, its median time
# per call with the interquartile range over repeats and the work per second; the
# winner with the 95% confidence interval of its speed-up over independent
# processes; compile time cold (first process) and warm (later processes, caches
# filled); peak memory (on a GPU each framework's allocator statistics; on a CPU
# the peak resident memory of a fresh process running that rung, runtimes
# included); model FLOP utilisation against the device's peak.

# %% tags=["remove_input"]
metrics = report.summarise(parity=parity, settings=settings, flops=flop_counts, models=model_info, device=device_name,
                           profile_note=profile_note, conditions=conditions, peak_source=peak[1] if peak[0] else None,
                           bf16={"native": bf16_native, "reason": bf16_reason, "asked": list(precisions)})
metrics["generation_check"] = generation_check
metrics["startup"] = startup
metrics["parts"] = parts.log

# %% figure="key-table" alt="A table: for each model and workload, PyTorch's and JAX's best rung with its median time, interquartile range and throughput, the winner with its speed-up interval, compile times cold and warm, and peak memory" tags=["key-figure", "remove_input"]
report.key_figure(metrics)
plt.show()

# %% tags=["appendix-input", "appendix"] summary="The key table, with model FLOP utilisation"
display(report.key_table(metrics))
Markdown(report.mfu_caption(metrics))

# %% tags=["remove_input", "appendix"] summary="Every verdict in full, best against best and out of the box"
Markdown("\n\n".join(f"- {v['question']} {v['sentence']}" for v in metrics["verdicts"]))

# %% [markdown] tags=["appendix"]
# ### FLOPs, counted by both frameworks
#
# PyTorch's `FlopCounterMode` counts matrix products and convolutions (two FLOPs
# per multiply-add); the fused attention kernel, which it counts as nothing on a
# CPU, is counted by formula: $QK^\top$ and $AV$, $2 \cdot 2 \cdot B H S_q S_k d$ a
# layer, causal attention as the full square, as XLA computes and counts it (its
# share is its own column). XLA's `cost_analysis` counts every operation of the
# compiled program, elementwise ones included, so it reads a little higher. The
# published figures are multiply-accumulates (ResNet-50 4.1 G and ViT-B/16 17.6 G
# per 224² image; GPT-2 about 124M per token, plus attention), doubled here to FLOPs.

# %% tags=["appendix-input", "appendix"] summary="FLOPs per call, by PyTorch, by XLA and as published"
report.flops_table(metrics)

# %% [markdown] tags=["appendix"]
# ### Every rung
#
# Each ladder in full: median and IQR per call, compile times, build time (where
# AOTInductor compiles), errors and reasons a rung does not apply.

# %% tags=["appendix-input", "appendix"] summary="Every rung of every ladder"
pd.DataFrame([{"setting": key, "rung": e["label"], "median (s)": e.get("median_s"), "IQR (s)": e.get("iqr_s"),
               "compile cold (s)": e.get("compile_cold_s"), "compile warm (s)": e.get("compile_warm_s"),
               "build (s)": e.get("build_s"), "per second": e.get("per_s"),
               "status": e.get("error") or (f"not applicable: {e['not_applicable']}" if e.get("not_applicable") else "ran")}
              for key, s in metrics["settings"].items() for name, e in s["ladder"].items()]).set_index(["setting", "rung"])

# %% tags=["remove_input"]
Markdown("bfloat16: " + ("measured where asked." if bf16_native else f"not measured here: {bf16_reason}."))

# %% [markdown]
# ## 6. Conclusion

# %% tags=["remove_input", "collapsed"] summary="The conclusion in full"
Markdown(report.conclusion(metrics) + "\n\n" + checkpoints.describe_parts(parts.log))

# %% tags=["remove_cell"]
record = provenance.save_results(metrics, provenance=prov)
record["metrics"]["verdicts"][0]["label"]


# %% tags=["remove_cell", "colab-compare"]
# Your figures beside the post's, verdict by verdict.
from sidebyside.publish import reproduce

reproduce.in_notebook("real-models", record, REPOSITORY)
