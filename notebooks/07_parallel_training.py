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
#     compared: One small vision transformer with the same weights and batches, trained
#       in PyTorch and in JAX on one device and under data-parallel, fully sharded,
#       2-D (data and tensor) and hand-written collective strategies, compared on losses,
#       code added, memory per device and bytes moved by collectives; on one device,
#       the step time of PyTorch eager, torch.compile and JAX jit.
#     date: '2026-11-24'
#     description: One small vision transformer trained on several devices in JAX and
#       PyTorch, data parallel, fully sharded, tensor parallel and by hand, with the
#       same weights and batches; what each strategy costs in code, memory per device
#       and bytes moved, and a labelled projection to 512 H100s.
#     metrics:
#     - runs
#     - code_lines
#     - projection
#     - verdicts
#     slug: parallel-training
#     tags:
#     - pytorch
#     - jax
#     - flax
#     - distributed
#     - fsdp
#     - sharding
#     - vision-transformer
#     title: 'One model on many devices: data, fully sharded and tensor parallelism
#       in JAX and PyTorch'
# ---

# %% [markdown]
# # One model on many devices: data, fully sharded and tensor parallelism in JAX and PyTorch
#
# Once one device is not enough, how does each framework spread a training step
# over many, and what does it cost? The same small vision transformer, with the
# same weights and the same batches, is trained under five strategies in each
# framework, each on the framework's own distributed engine; we check that every
# strategy reaches the one-device losses, then count the code it adds, the
# memory each device holds and the bytes its collectives move.

# %% tags=["colab-install"]
# Run this post yourself: on Colab this installs the library and the versions the post ran with.
import subprocess
import sys

REPOSITORY = "sidebyside-ml/pytorch-vs-jax@main"  # the site's repository@branch (_config.yml); a fork names its own
if "google.colab" in sys.modules:
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "torchviz", "timm==1.0.31",
                    f"sidebyside @ git+https://github.com/{REPOSITORY}"], check=True)
from sidebyside.run import colab

colab.setup("parallel-training", REPOSITORY)

# %% tags=["parameters"]
device_counts = [2, 4]     # devices per run (simulated CPU devices here); the largest carries the verdicts
model_parallel = 2         # size of the 'model' axis of the 2-D strategy
batch_size = 32            # global batch, split over the data axis
steps = 4                  # training steps per strategy (the loss curve)
lr = 0.05                  # SGD's learning rate, both frameworks
momentum = 0.9             # SGD's momentum (its buffer is the optimiser state each device holds)
patch = 7                  # ViT: patch side (28 / patch patches per side)
dim = 32                   # ViT: embedding width
depth = 1                  # ViT: transformer blocks
heads = 4                  # ViT: attention heads
mlp = 64                   # ViT: MLP width
loss_tolerance = 1e-4      # largest loss difference from the one-device run that float32 reduction order may explain
projection_counts = [8, 64, 512]  # H100 counts of the cost model's projection
multiprocess = [2, 2]      # JAX's multi-host path, once: processes x devices per process (their product among device_counts)
threads = 1                # CPU threads per worker process
torch_tools = ["eager", "compile"]  # PyTorch's one-device rungs (JAX's: jit)
repeats = 3                # timed repeats of every step (sidebyside.lab.timing)
min_repeat_s = 0.01        # shortest repeat where the harness chooses the calls per repeat (one process)
worker_calls = 1           # calls per repeat in a torchrun worker (fixed: every rank makes the same calls)
# The gpu profile's: the one-device ladder on the GPU (its losses checked against the CPU's eager run, the
# reference); the strategies on simulated devices, their code, memory, collectives and projection are the cpu run's.
hardware_only = False
seed = 0

# %% tags=["remove_cell", "colab-profile"]
# The settings to run with: "smoke" (the test suite's small sizes, a minute), "cpu", or "gpu" (a GPU post's own
# settings, on a GPU runtime); "auto" takes the post's own on a GPU runtime and smoke elsewhere.
PROFILE = "auto"
globals().update(colab.parameters("parallel-training", PROFILE, REPOSITORY))

# %% [markdown] tags=["appendix"]
# ## Setup
#
# Every strategy runs outside this kernel, on each framework's own engine:
# PyTorch's in `torchrun` (`torch.distributed.run`) worker processes talking
# over gloo, one process per device; JAX's in one child process that sees as
# many CPU devices as asked (`--xla_force_host_platform_device_count`, which
# must be set before JAX starts, and this kernel's JAX has started already).
# The library launches both, gathers what they report, stops the whole run
# with the failing rank's error and log if a worker fails, and leaves no
# process behind. The one-device reference runs in this kernel, under the
# same conditions for both frameworks (`notebook.setup`, through
# `conditions.same_conditions`, before JAX starts), with each compiler's one-time start-up paid first
# (`timing.warm_start`), so that compile times are those of a warm process;
# both compilers cache in this run's own folder, so this kernel compiles cold
# and later processes reuse it, on both sides alike.

# %% tags=["appendix"] summary="Set-up: imports, the run's devices and versions"
from sidebyside.lab import notebook

# first, before JAX starts; each compiler the one-device reference uses is warmed on each device it runs on
setup = notebook.setup(tf32=False, warm="every", compilers=("torch", "jax") if "compile" in torch_tools else ("jax",))
conditions, prov, startup = setup.conditions, setup.provenance, setup.startup

import jax
import jax.numpy as jnp
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import torch
from IPython.display import Markdown

from sidebyside.lab import data, progress, tables, viz, words
from sidebyside.posts.parallel_training import (
    costmodel,
    jax_parallel,
    launch,
    model,
    reference,
    report,
    results,
    scaling,
    torch_parallel,
)
from sidebyside.posts.parallel_training.names import STRATEGY_NAMES
from sidebyside.run import code, provenance

gpu = reference.gpu_plan(torch.cuda.device_count(), sum(d.platform == "gpu" for d in jax.devices()), prov["device"])
provenance.table(prov)

# %% tags=["remove_input", "appendix"]
Markdown(report.conditions_text(conditions, startup, on_gpu=gpu["reference"]))

# %% [markdown]
# ## 1. The model and the data
#
# A small vision transformer, written once per framework with the same layer
# names: 7×7 patches, pre-norm attention with separate `q`, `k`, `v` (so tensor
# parallelism can split heads), an MLP, mean pooling. PyTorch initialises it and
# Flax NNX gets a copy of its weights; every strategy trains from them on the same
# FashionMNIST batches with SGD and momentum, which, unlike Adam, shows a wrongly
# averaged gradient in the loss at once.

# %% tags=["appendix-input"]
config = model.ViTConfig(patch=patch, dim=dim, depth=depth, heads=heads, mlp=mlp)
torch_model = model.TorchViT(config, seed=seed)
flax_model = model.flax_from_torch(config, torch_model)  # Flax NNX's model, holding PyTorch's weights
fashion = data.load()
batches = model.batches(fashion.X_train, fashion.y_train, batch_size=batch_size, steps=steps, seed=seed)
X, y = np.stack([b[0] for b in batches]), np.stack([b[1] for b in batches])
with torch.no_grad():
    torch_logits = torch_model(torch.from_numpy(X[0])).numpy()
flax_logits = np.asarray(flax_model(jnp.asarray(X[0])))
tables.table(pd.Series({"parameters": model.param_count(config), "global batch": batch_size, "steps": steps,
                        "largest logit difference, PyTorch against Flax": np.abs(torch_logits - flax_logits).max()},
                       name="value"))

# %% [markdown]
# ## 2. What each strategy adds, side by side
#
# Each strategy is one function per framework: what it adds to the one-device
# training step. PyTorch wraps or rewrites the module (DDP, FSDP2's
# `fully_shard`, DTensor's `parallelize_module`) and may need a hook between
# `backward()` and the optimiser step; JAX keeps the step as it is and says
# where each array lives (a `PartitionSpec` per parameter on a `Mesh`), and
# XLA inserts the collectives, except in `shard_map`, where the step is
# written per device with its collectives spelled out. JAX's fully sharded
# step is one of those: laid out by specs alone, XLA's CPU partitioner
# all-reduced the whole gradient and kept a slice, so every device held full
# gradients; written under `shard_map`, the loss gathers the parameters
# (`all_gather`) and autodiff turns that gather into a reduce-scatter of the
# gradients, as FSDP does.
#
# FSDP2 makes a choice that moves bytes: with `reshard_after_forward=True`, its
# default, each block's parameters are freed after the block's forward and
# gathered again for its backward; with `False` they are kept from forward to
# backward, gathered once a step and held longer. PyTorch's fully sharded
# strategy runs both ways, two labelled rows, each raced against JAX's one
# fully sharded program, where XLA decides what a step gathers and keeps.

# %% tags=["pair:data-parallel:torch"]
code.source(torch_parallel.data_parallel)

# %% tags=["pair:data-parallel:jax"]
code.source(jax_parallel.data_parallel)

# %% tags=["pair:fully-sharded:torch"]
code.source(torch_parallel.fully_sharded, torch_parallel.fully_sharded_kept)

# %% tags=["pair:fully-sharded:jax"]
code.source(jax_parallel.fully_sharded)

# %% tags=["pair:tensor-parallel:torch"]
code.source(torch_parallel.tensor_parallel)

# %% tags=["pair:tensor-parallel:jax"]
code.source(jax_parallel.tensor_parallel)

# %% tags=["pair:manual:torch"]
code.source(torch_parallel.manual)

# %% tags=["pair:manual:jax"]
code.source(jax_parallel.manual)

# %% tags=["appendix"] summary="Lines each strategy adds, per framework"
lines_added = {fw: {s: report.code_lines(getattr(module, s)) for s in launch.STRATEGIES}
               for fw, module in (("torch", torch_parallel), ("jax", jax_parallel))}
pd.DataFrame({f"{viz.LABELS[fw]} (lines)": lines_added[fw] for fw in lines_added}).rename(index=STRATEGY_NAMES)

# %% [markdown]
# ## 3. Training under every strategy
#
# For each device count, one `torchrun` launch trains all of PyTorch's
# strategies and one JAX child process trains all of JAX's, from the same
# weights on the same batches, on simulated CPU devices (also on a machine with
# GPUs: section 7 runs them on real ones).

# %% [markdown] tags=["appendix"] summary="Method: what each worker measures"
# Each worker reports its losses, the bytes its own shards hold between steps,
# the peak within a step where it can be measured, the collectives of one step
# with the size of each one's group (JAX: read from the compiled program's HLO,
# its `replica_groups`; PyTorch: every c10d call recorded by a
# `TorchDispatchMode`, as PyTorch's own `CommDebugMode` does, with its process
# group's size, plus DDP's bucketed all-reduces through its communication hook)
# and its step time (PyTorch: `threads` CPU threads per torchrun worker; JAX:
# one process for every simulated device, `OMP_NUM_THREADS` set alike, XLA's
# CPU thread pool its own), measured inside the worker by the
# same harness as every figure of this site (`sidebyside.lab.timing`: median
# and interquartile range over repeats; a torchrun worker makes a fixed number
# of calls per repeat so that the ranks' collectives pair up, and the slowest
# rank's time is the strategy's). Simulated devices measure what the strategies
# do, not how fast real devices do it.

# %% tags=["appendix-input"]
common = dict(X=X, y=y, torch_state=torch_model.state_dict(), config=config, lr=lr, momentum=momentum, threads=threads)
torch_args = dict(common, repeats=repeats, number=worker_calls)
jax_args = dict(common, repeats=repeats, min_repeat_s=min_repeat_s)
runs = {}  # hardware_only: none (see the parameters)
for n in progress.bar([] if hardware_only else device_counts, desc="device counts"):
    torch_result = launch.run_torch(n, model_parallel=model_parallel, device="cpu", **torch_args)
    jax_result = launch.run_jax(n, model_parallel=model_parallel, device="cpu", **jax_args)
    runs[n] = {"torch": report.torch_record(torch_result), "jax": report.jax_record(jax_result)}
largest = max(device_counts)
(Markdown(words.from_cpu_run("Every strategy on simulated devices")) if hardware_only else
 f"{len(device_counts)} device counts, {len(launch.STRATEGIES)} strategies, 2 frameworks: done")

# %% [markdown] tags=["appendix"]
# ### JAX's multi-host path, once
#
# On a cluster, each host runs one JAX process that sees only its own devices;
# `jax.distributed.initialize` joins them into one set of devices, and the same
# mesh, shardings and step run unchanged (each process feeds the slices of the
# batch its devices hold). The library starts that here with local processes of
# simulated devices, and trains data parallel once.

# %% tags=["appendix"]
processes, devices_per_process = multiprocess
multi_record = None  # hardware_only: the cpu run's (see the parameters)
if not hardware_only:
    if processes * devices_per_process not in runs:
        raise ValueError(f"multiprocess={multiprocess} needs {processes * devices_per_process} among "
                         f"device_counts={device_counts}")
    multi = launch.run_jax_multiprocess(processes, devices_per_process, X=X, y=y, torch_state=torch_model.state_dict(),
                                        config=config, lr=lr, momentum=momentum, model_parallel=model_parallel,
                                        threads=threads)
    multi_record = report.multiprocess_record(multi, runs[processes * devices_per_process]["jax"],
                                              processes=processes, devices_per_process=devices_per_process)
Markdown(words.from_cpu_run("JAX's multi-host path") if hardware_only else
         report.multiprocess_claim(multi_record, tolerance=loss_tolerance))

# %% [markdown]
# ## 4. One device: eager, `torch.compile` and `jit`
#
# Every strategy's reference is one device, where each framework has its ladder
# of tools: PyTorch eager and `torch.compile` of the whole step, JAX `jit`, on the
# same weights, batches and optimiser, timed in one interleaved run, each rung's
# losses checked against PyTorch eager's on the CPU (and on a GPU where one is
# visible). The step each rung times, as each framework writes it: PyTorch's
# loss, `backward()`, the optimiser's `step()` and `zero_grad()`, eager or
# compiled whole by `torch.compile`; JAX's a pure function of the parameters and
# the optimiser state, differentiated by `jax.value_and_grad`, updated by optax
# and compiled by `jax.jit`. Both optimisers are SGD with momentum, written
# below with their options (`torch.optim.SGD`, `optax.sgd`); every strategy
# above runs this same step.

# %% tags=["pair:one-device:torch", "collapsed"] summary="The code: the one-device step"
def torch_optimizer(parameters, lr, momentum):
    """SGD with momentum, every option written out as on JAX's side; foreach=True: the multi-tensor
    update (PyTorch's default on a GPU), as every strategy's worker runs it."""
    return torch.optim.SGD(parameters, lr=lr, momentum=momentum, dampening=0, nesterov=False,
                           weight_decay=0, foreach=True)


def torch_step(net, optimizer, tool):
    """The one-device training step, eager or (tool "compile") compiled whole with static shapes."""
    def step(xb, yb):
        loss = torch.nn.functional.cross_entropy(net(xb), yb)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        return loss.detach()
    return torch.compile(step, dynamic=False) if tool == "compile" else step


# %% tags=["pair:one-device:jax", "collapsed"]
from functools import partial

import optax
from flax import nnx


def jax_optimizer(lr, momentum):
    """SGD with momentum, every option written out as on PyTorch's side: the buffer is optax's
    trace, updated as PyTorch's with no dampening; optax.sgd has no weight decay (PyTorch's
    is 0)."""
    return optax.sgd(lr, momentum=momentum, nesterov=False)


def jax_step(graphdef, tx):
    """The one-device training step, jitted: a pure function of the parameters and optimiser
    state, which it donates (their buffers are reused for the new ones, as PyTorch updates its
    own in place)."""
    def loss_fn(params, X, y):
        logits = nnx.merge(graphdef, params)(X)
        return optax.softmax_cross_entropy_with_integer_labels(logits, y).mean()

    @partial(jax.jit, donate_argnums=(0, 1))
    def step(params, opt_state, X, y):
        loss, grads = jax.value_and_grad(loss_fn)(params, X, y)
        updates, opt_state = tx.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), opt_state, loss
    return step


# %% tags=["appendix"] summary="The one-device ladder, rung by rung"
steps_shown = {"torch_step": torch_step, "jax_step": jax_step,  # the paired cells above: shown is timed
               "torch_optimizer": torch_optimizer, "jax_optimizer": jax_optimizer}
reference_only = hardware_only and gpu["reference"]  # the CPU's PyTorch eager run: the losses' reference alone
ladders = {"cpu": reference.run(X, y, torch_model.state_dict(), config, lr=lr, momentum=momentum, torch_device="cpu",
                                jax_device=jax.devices("cpu")[0], torch_tools=["eager"] if reference_only else
                                torch_tools, repeats=repeats, min_repeat_s=min_repeat_s, **steps_shown)}
names = {"cpu": prov["cpu"]}
if gpu["reference"]:
    ladders["gpu"] = reference.run(X, y, torch_model.state_dict(), config, lr=lr, momentum=momentum,
                                   torch_device="cuda", jax_device=next(d for d in jax.devices() if d.platform == "gpu"),
                                   torch_tools=torch_tools, repeats=repeats, min_repeat_s=min_repeat_s,
                                   **steps_shown)
    names["gpu"] = prov["device"]
one_device = report.reference_record(ladders, names=names, tolerance=loss_tolerance,
                                     threads=conditions["threads"])
results.reference_table({"reference": one_device})

# %% tags=["remove_input"]
Markdown(report.reference_claim(one_device, tolerance=loss_tolerance) + "\n\n" + gpu["note"])

# %% [markdown]
# ## 5. Correctness: the loss against the one-device run
#
# Splitting a batch over devices changes the order of float32 sums, and
# nothing else; each strategy's loss per step should follow its framework's
# one-device run to within that rounding.

# %% figure="loss-deviation" alt="Loss per step of the one-device runs, and each strategy's absolute loss difference from its framework's one-device run, PyTorch and JAX" tags=["key-figure", "appendix-input"]
if runs:  # hardware_only: none (see the parameters)
    fig, axes = plt.subplots(1, 2, figsize=(10, 4.2))
    run = runs[largest]
    for fw in ("torch", "jax"):
        axes[0].plot(np.arange(1, steps + 1), run[fw]["one_device"]["losses"], color=viz.COLORS[fw],
                     label=f"{viz.LABELS[fw]}, one device", marker="o")
        for s, marker in zip(launch.TORCH_STRATEGIES[1:], "s^vDo"):  # PyTorch's FSDP2 both ways; JAX's one program
            if s not in run[fw]:
                continue
            reference = np.array(run[fw]["one_device"]["losses"])
            deviation = np.abs(np.array(run[fw][s]["losses"]) - reference)
            axes[1].semilogy(np.arange(1, steps + 1), np.maximum(deviation, 1e-9), color=viz.COLORS[fw], marker=marker,
                             label=f"{viz.LABELS[fw]}, {STRATEGY_NAMES[s]}", alpha=0.8)
    axes[0].set(title="One-device reference loss", xlabel="step", ylabel="training loss (cross-entropy)")
    axes[1].axhline(loss_tolerance, color="grey", linestyle="--", label="tolerance")
    axes[1].set(title=f"|loss − reference| on {largest} devices (floor 1e-9)", xlabel="step",
                ylabel="absolute loss difference")
    axes[0].legend()
    axes[1].legend(fontsize=7, ncol=3, loc="upper center", bbox_to_anchor=(0.5, -0.18))
    fig.tight_layout()
    plt.show()
else:
    display(Markdown(words.from_cpu_run("Every strategy's loss against the one-device run")))

# %% [markdown]
# ## 6. Results
#
# Memory per device comes in two figures. *Between steps*: what the shards
# themselves hold (JAX's `addressable_shards`, PyTorch's local tensors):
# parameters, gradients and the momentum buffers, against the one-device total;
# the parameters a fully sharded step gathers for a while are not in it.
# *Peak within a step*: on JAX, XLA's memory analysis of the compiled step
# (`compiled.memory_analysis()`: arguments, outputs and temporaries, a donated
# buffer counted once), on simulated CPU devices here; on PyTorch,
# `torch.cuda.max_memory_allocated` on a GPU, and on the CPU not measured.
#
# Collectives are counted per training step, by kind, two ways: the *buffer*
# each works on, and the bytes each device sends *on the wire* by the ring
# algorithm over its group of g devices: an all-reduce sends 2(g-1)/g of its
# buffer, an all-gather, reduce-scatter or all-to-all (g-1)/g. The bytes
# verdicts compare wire bytes: an all-reduce moves the same wire bytes as the
# reduce-scatter and all-gather that FSDP splits it into, although the buffers
# add up to twice as much.

# %% tags=["remove_input", "appendix"] summary="Every strategy and framework: code, correctness, memory, collectives, step time"
if hardware_only:
    metrics = report.reference_summary(
        reference=one_device, parameters=model.param_count(config), config=config.__dict__, batch_size=batch_size,
        steps=steps, lr=lr, momentum=momentum, loss_tolerance=loss_tolerance, gpu_note=gpu["note"])
else:
    metrics = report.summarise(
        runs=runs, code=lines_added, parameters=model.param_count(config), config=config.__dict__, batch_size=batch_size,
        steps=steps, lr=lr, momentum=momentum, model_parallel=model_parallel, device=provenance.cpu_name(),
        simulated=True, loss_tolerance=loss_tolerance, projection={}, threads=threads,
        reference=one_device, gpu_note=gpu["note"])
Markdown(words.from_cpu_run("Every strategy's code, memory and collectives")) if hardware_only else \
    results.results_table(metrics)

# %% tags=["remove_input"]
None if hardware_only else Markdown(results.peak_claim(metrics))

# %% tags=["appendix"] summary="Collectives per step: kind, count, buffer and wire bytes per device"
None if hardware_only else results.collectives_table(metrics)

# %% tags=["remove_input"]
None if hardware_only else Markdown(report.collectives_claim(metrics))

# %% [markdown]
# Step times on simulated devices (in the appendix) are not scaling evidence:
# the simulated devices share this machine's cores. The speed verdict rests on
# the one-device ladder alone.

# %% [markdown]
# ## 7. Scaling over real GPUs
#
# With two GPUs or more, every strategy runs on the GPUs themselves (NCCL for
# PyTorch, one process over every GPU for JAX) at 1, 2, 4, ... N GPUs with the
# same global batch. Scaling efficiency is t1 / (n × tn): 100% is a step n times
# as fast. With one GPU or none, scaling is not measured.

# %% tags=["appendix-input"]
gpu_counts = launch.scaling_plan(gpu["scaling"], batch_size=batch_size, config=config, model_parallel=model_parallel)
scaling_runs = {}
for n, axis in progress.bar(gpu_counts, desc="GPUs"):
    scaling_runs[n] = {"torch": report.torch_record(launch.run_torch(n, model_parallel=axis, device="gpu", **torch_args)),
                       "jax": report.jax_record(launch.run_jax(n, model_parallel=axis, device="gpu", **jax_args))}
metrics["scaling"] = scaling.scaling_record(scaling_runs, device=prov["device"], tolerance=loss_tolerance,
                                            model_parallel=dict(gpu_counts))

# %% tags=["remove_input"]
Markdown(scaling.scaling_claim(metrics))

# %% figure="scaling-efficiency" alt="Scaling efficiency against the number of GPUs, one line per strategy, PyTorch and JAX side by side" tags=["remove_input"]
if scaling.scaling_figure(metrics) is not None:
    plt.show()

# %% tags=["remove_input"]
scaling.scaling_table(metrics)  # None without scaling runs: no table

# %% [markdown]
# ## 8. At scale, on paper
#
# A cost model (`sidebyside.posts.parallel_training.costmodel`) projects each
# strategy's step to 8, 64 and 512 H100s from the bytes measured above: compute
# from the model's FLOPs and a share of the GPU's peak, communication from each
# collective's bytes by the ring algorithm over NVLink inside a node and
# InfiniBand between nodes. **This is a projection, not a measurement**; its
# inputs and their sources:

# %% tags=["appendix"] summary="The cost model's inputs and their sources"
tokens_per_device = (batch_size // largest) * config.tokens
costmodel.inputs_table(params=model.param_count(config), tokens_per_device=tokens_per_device,
                       model_parallel=model_parallel)

# %% tags=["appendix-input"]
metrics["multiprocess"] = multi_record
metrics["projection"] = {} if hardware_only else {fw: {s: costmodel.project(
    s, collectives=runs[largest][fw][s]["collectives"], grad_bytes=runs[largest][fw][s]["memory"]["grads"],
    measured_devices=largest, params=model.param_count(config), tokens_per_device=tokens_per_device,
    model_parallel=model_parallel, device_counts=projection_counts) for s in launch.STRATEGIES[1:]}
    for fw in ("torch", "jax")}
(Markdown(words.from_cpu_run("The projection")) if hardware_only
 else results.projection_table(metrics))

# %% tags=["remove_input"]
None if hardware_only else Markdown(report.projection_claim(metrics))

# %% [markdown]
# ## 9. Conclusion

# %% tags=["remove_input", "collapsed"] summary="The conclusion in full"
Markdown(report.reference_claim(one_device, tolerance=loss_tolerance) if hardware_only else report.conclusion(metrics))

# %% tags=["remove_cell"]
record = provenance.save_results(metrics)
record["metrics"]["verdicts"][0]["label"]


# %% tags=["remove_cell", "colab-compare"]
# Your figures beside the post's, verdict by verdict.
from sidebyside.publish import reproduce

reproduce.in_notebook("parallel-training", record, REPOSITORY)
