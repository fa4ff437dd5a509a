# ---
# jupyter:
#   jupytext:
#     cell_metadata_filter: tags,figure,alt,-all
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
#     date: '2026-11-22'
#     description: jax.jit against torch.compile, NumPy and eager execution, and gradients
#       in both frameworks, timed with synchronised clocks and compilation kept apart.
#     slug: jit-and-autograd-timing
#     tags:
#     - jax
#     - pytorch
#     - jit
#     - torch.compile
#     - autograd
#     - benchmark
#     title: JIT and autograd timing, measured right
# ---

# %% [markdown]
# # JIT and autograd timing, measured right
#
# How much do `jax.jit` and `torch.compile` speed up a small element-wise function, from ten elements
# to many millions, and how do gradients compare between the two frameworks, once every timer waits
# for its result and compilation is measured on its own?
#
# A public "JAX capability analysis" timed $f(x) = 0.2x + \sin(x) + \cos(2x)$ with and without
# `jax.jit` and took gradients of it in JAX and in PyTorch, the latter through a Python loop over a
# thousand elements. Its JAX timers never waited for JAX's asynchronous results, and its first timed
# call included compilation, so several of its figures measure dispatch rather than work: for
# `jit` on 10⁷ elements on the CPU it reported 0.000339 s, which even as the time of a single call
# would mean streaming 80 MB (float32 in and out) through a CPU at over 200 GB/s. This post
# repeats the study with one timing harness, `sidebyside.timing`, and then shows the same mistakes on
# purpose, to see how far off they are.

# %% tags=["parameters"]
jit_max_exponent = 4        # element-wise sweep: sizes 10**1 ... 10**jit_max_exponent
autograd_max_exponent = 4   # gradient sweep: sizes 10**3 ... 10**autograd_max_exponent
torch_loop_max_size = 1000  # the per-element PyTorch loop of the original runs up to this size only
hvp_size = 10_000           # vector length of the Hessian-vector product
repeats = 5                 # timed repeats per measurement (median and IQR over them)
min_repeat_s = 0.01         # each repeat runs the function enough times to last this long
seed = 0

# %% tags=["remove_cell", "colab-install"]
# On Colab: install what Colab lacks, and this library from the repository and branch that the
# site's _config.yml names (tests/test_colab.py keeps the two in step). data.load() then downloads
# FashionMNIST there.
import subprocess
import sys

LIBRARY = "sidebyside @ git+https://github.com/sidebyside-ml/pytorch-vs-jax@main"  # repository@branch
if "google.colab" in sys.modules:
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "flax", "optax", "torchviz", LIBRARY], check=True)

# %% [markdown]
# ## Setup
#
# Both frameworks compute in float32, on the CPU and, where one is visible, on the GPU. NumPy runs
# on the CPU only. `torch.compile` is used with `dynamic=True`: it compiles one kernel for symbolic
# sizes from the start. (By default it would first specialise to the first length, then recompile
# once with symbolic sizes on meeting a second one, its "automatic dynamic shapes"; on a small CPU
# each compilation costs seconds.) What a compiled call adds, guard checks and the call into the
# generated kernel, is a fixed cost per call, visible at small sizes below. Inductor's on-disk caches are switched
# off so that the compilation time reported is a cold one, as on a fresh machine.

# %%
import logging
import os
import warnings

import jax
import jax.numpy as jnp
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import torch
import torch._inductor.config
from IPython.display import Markdown

from sidebyside import functions as F
from sidebyside import progress, provenance, timing, viz

logging.getLogger("torch.utils.cpp_extension").setLevel(logging.ERROR)  # "no CUDA runtime" on CPU machines
warnings.filterwarnings("ignore", message=".*dynamo_pgo force disabled.*")
warnings.filterwarnings("ignore", message=".*torch.jit.script. is deprecated.*", category=FutureWarning)
torch._inductor.config.force_disable_caches = True  # measure a cold torch.compile
torch.manual_seed(seed)
rng = np.random.default_rng(seed)
viz.style()

record = provenance.collect()
on_gpu = record["device_kind"] == "gpu"
devices = ["cpu", "gpu"] if on_gpu else ["cpu"]
main_device = devices[-1]
jax_devices = {"cpu": jax.devices("cpu")[0]}
torch_devices = {"cpu": torch.device("cpu")}
if on_gpu:
    jax_devices["gpu"] = jax.devices("gpu")[0]
    torch_devices["gpu"] = torch.device("cuda")
threads = {"torch intra-op threads": torch.get_num_threads(), "CPU cores visible": len(os.sched_getaffinity(0))}
pd.concat([provenance.table(record), pd.DataFrame.from_dict(threads, orient="index", columns=["value"])])

# %% [markdown]
# The function, written once per framework in `sidebyside.functions` (`f_numpy`, `f_jax`,
# `f_torch`), with its exact derivatives `df` and `d2f` to check autodiff against:
# $f'(x) = 0.2 + \cos x - 2\sin 2x$, $f''(x) = -\sin x - 4\cos 2x$.

# %%
x_demo = np.linspace(0, 4 * np.pi, 6, dtype=np.float32)
pd.DataFrame({
    "x": x_demo,
    "NumPy": F.f_numpy(x_demo),
    "JAX": np.asarray(F.f_jax(jnp.asarray(x_demo))),
    "PyTorch": F.f_torch(torch.from_numpy(x_demo)).numpy(),
})

# %% [markdown]
# ## 1. JIT: one element-wise function from 10 to 10ⁿ elements
#
# Five ways to evaluate `f` on a float32 vector: NumPy; JAX eager (each of the five operations is
# dispatched on its own); `jax.jit` (XLA fuses them into one loop); PyTorch eager; `torch.compile`
# (Inductor generates one fused kernel). At each size, `timing.compare` runs them interleaved, so
# drifts of a shared machine hit all five alike; every call waits for its result. The first call of
# each is timed apart: for `jax.jit` it compiles the function for that shape (JAX compiles once
# per shape), for `torch.compile` the very first call compiles the dynamic kernel.

# %%
sizes = [10**e for e in range(1, jit_max_exponent + 1)]
methods = ["numpy", "jax_eager", "jax_jit", "torch_eager", "torch_compile"]
LABEL = {"numpy": "NumPy", "jax_eager": "JAX eager", "jax_jit": "jax.jit",
         "torch_eager": "PyTorch eager", "torch_compile": "torch.compile"}

f_jit = jax.jit(F.f_jax)
f_compiled = torch.compile(F.f_torch, dynamic=True)


def candidates(device, n):
    """The functions to time at one (device, size), each on its own copy of the same data."""
    x_np = rng.uniform(0, 4 * np.pi, n).astype(np.float32)
    x_jax = jax.device_put(x_np, jax_devices[device])
    x_torch = torch.from_numpy(x_np).to(torch_devices[device])
    fns = {
        "jax_eager": lambda: F.f_jax(x_jax),
        "jax_jit": lambda: f_jit(x_jax),
        "torch_eager": lambda: F.f_torch(x_torch),
        "torch_compile": lambda: f_compiled(x_torch),
    }
    if device == "cpu":
        fns = {"numpy": lambda: F.f_numpy(x_np), **fns}
    return fns


jit_timings = {}  # (device, size) -> {method: Timing}
for device, n in progress.bar([(d, n) for d in devices for n in sizes], desc="f(x) sweep"):
    jit_timings[device, n] = timing.compare(candidates(device, n), repeats=repeats, min_repeat_s=min_repeat_s)

# %% [markdown]
# Per-call times, median and interquartile range over the repeats, in microseconds:

# %%
rows = []
for (device, n), timings in jit_timings.items():
    for method, t in timings.items():
        rows.append({"device": device, "size": n, "method": LABEL[method],
                     "median (µs)": t.median_s * 1e6, "IQR (µs)": t.iqr_s * 1e6,
                     "first call (µs)": t.first_s * 1e6, "repeats": f"{t.repeats}×{t.number}"})
jit_table = pd.DataFrame(rows)
jit_table.pivot_table(index=["device", "size"], columns="method", values="median (µs)", sort=False).round(1)

# %% [markdown]
# ### Where dispatch overhead stops dominating
#
# For each method and device we fit $t(n) = a + b\,n$: $a$ is the fixed cost of a call (Python,
# dispatch, kernel launch), $b$ the cost per element. At $n^* = a/b$ the two are equal: below
# $n^*$ a call is mostly overhead, above it mostly work (`sidebyside.functions.fit_overhead`, a
# least-squares fit on relative errors).

# %%
fits = {}
for device in devices:
    for method in methods:
        points = [(n, jit_timings[device, n][method].median_s) for n in sizes if method in jit_timings[device, n]]
        if len(points) >= 2:
            a, b = F.fit_overhead(*zip(*points))
            fits[device, method] = {"overhead (µs)": a * 1e6, "per element (ns)": b * 1e9,
                                    "crossover n*": a / b if b > 0 else float("inf")}
fit_table = pd.DataFrame.from_dict(fits, orient="index").rename(index=LABEL, level=1)
fit_table.index.names = ["device", "method"]
fit_table.round({"overhead (µs)": 1, "per element (ns)": 3, "crossover n*": 0})

# %% figure="time-vs-size" alt="Log-log plot of time per call against vector length for NumPy, JAX eager, jax.jit, PyTorch eager and torch.compile, with the crossover size of each marked"
STYLE = {"numpy": ("numpy", "-", "s"), "jax_eager": ("jax", "--", "o"), "jax_jit": ("jax", "-", "o"),
         "torch_eager": ("torch", "--", "^"), "torch_compile": ("torch", "-", "^")}
fig, axes = plt.subplots(1, len(devices), figsize=(7.5 * len(devices), 4.6), squeeze=False)
for ax, device in zip(axes[0], devices):
    for method in methods:
        ns = [n for n in sizes if method in jit_timings[device, n]]
        if not ns:
            continue
        ts = [jit_timings[device, n][method] for n in ns]
        colour, line, marker = STYLE[method]
        med = np.array([t.median_s for t in ts])
        ax.errorbar(ns, med, yerr=[med - [t.q1_s for t in ts], [t.q3_s for t in ts] - med],
                    color=viz.COLORS[colour], linestyle=line, marker=marker, markersize=4,
                    label=LABEL[method], capsize=2)
        crossover = fits[device, method]["crossover n*"]
        if sizes[0] <= crossover <= sizes[-1]:
            a_s = fits[device, method]["overhead (µs)"] * 1e-6
            ax.plot([crossover], [2 * a_s], marker="*", markersize=13, color=viz.COLORS[colour],
                    markeredgecolor="black", linestyle="none")
    ax.plot([], [], marker="*", color="grey", markeredgecolor="black", linestyle="none",
            label="crossover n* (overhead = work)")
    ax.set(xscale="log", yscale="log", xlabel="vector length n (float32 elements)",
           ylabel="time per call (s)", title=f"f(x) on the {device.upper()}: {record['device'] if device == main_device and on_gpu else record['cpu']}")
    ax.title.set_fontsize(10)
    ax.legend(fontsize=8)
plt.show()

# %% [markdown]
# ### Speed-ups
#
# Ratios of medians measured in the same interleaved run: how much faster the compiled version is
# than its own eager mode, and how the two compilers compare (above 1: the first is slower).

# %%
speed_rows = []
for (device, n), t in jit_timings.items():
    row = {"device": device, "size": n,
           "JAX eager / jax.jit": timing.ratio(t["jax_eager"], t["jax_jit"]),
           "PyTorch eager / torch.compile": timing.ratio(t["torch_eager"], t["torch_compile"]),
           "torch.compile / jax.jit": timing.ratio(t["torch_compile"], t["jax_jit"]),
           "PyTorch eager / JAX eager": timing.ratio(t["torch_eager"], t["jax_eager"])}
    if "numpy" in t:
        row["NumPy / jax.jit"] = timing.ratio(t["numpy"], t["jax_jit"])
        row["NumPy / torch.compile"] = timing.ratio(t["numpy"], t["torch_compile"])
    speed_rows.append(row)
speedups = pd.DataFrame(speed_rows).set_index(["device", "size"])
speedups.round(2)

# %% [markdown]
# ### Compilation, apart
#
# The first call minus a steady-state call. `jax.jit` compiles again for every new shape (and
# device), so its cost recurs at each size; `torch.compile(dynamic=True)` pays once, at its very
# first call, for a kernel that serves every length afterwards.

# %%
compile_rows = {}
for (device, n), t in jit_timings.items():
    compile_rows[device, n] = {"jax.jit (ms)": t["jax_jit"].compile_s * 1e3,
                               "torch.compile (ms)": t["torch_compile"].compile_s * 1e3}
compile_table = pd.DataFrame.from_dict(compile_rows, orient="index")
compile_table.index.names = ["device", "size"]
compile_s = {device: {"jax_jit": float(np.median([jit_timings[device, n]["jax_jit"].compile_s for n in sizes])),
                      "torch_compile": jit_timings[device, sizes[0]]["torch_compile"].compile_s}
             for device in devices}
compile_table.round(1)

# %% [markdown]
# ### The pitfall, shown: timers that do not wait, and compilation inside the timer
#
# The same functions at the largest size, timed three ways, each function alone and back to back.
# The first column is right. The second is **wrong**: it stops the clock as soon as the call
# returns (`synchronize=False`, no `block_until_ready`), which for JAX — on the CPU too — and for
# PyTorch on a GPU is when the work was queued, not done (NumPy and PyTorch on the CPU return only
# when done, so for them the two agree up to noise). The third is **wrong** too: the first call
# of the sweep at this size, with compilation for this shape inside.

# %%
n_big = sizes[-1]
pitfall_rows = []
for device in devices:
    fns = candidates(device, n_big)
    for method, fn in fns.items():
        synced = timing.time_fn(fn, repeats=repeats, min_repeat_s=min_repeat_s)
        # Same number of calls as the synchronised run: left to grow `number` by itself, an
        # unsynchronised timer sees near-zero times and would queue thousands of calls.
        unsynced = timing.time_fn(fn, repeats=repeats, number=synced.number, synchronize=False)
        timing.block(fn())  # drain the queue before the next measurement
        pitfall_rows.append({
            "device": device, "method": LABEL[method],
            "synchronised median (µs), right": synced.median_s * 1e6,
            "no sync (µs), WRONG": unsynced.median_s * 1e6,
            "first call (µs), WRONG": jit_timings[device, n_big][method].first_s * 1e6,
            "no sync / right": unsynced.median_s / synced.median_s,
        })
pitfall = pd.DataFrame(pitfall_rows).set_index(["device", "method"])
pitfall.round(2)

# %% [markdown]
# For `torch.compile` the first call at this size is cheap because the dynamic kernel was compiled
# at the first size of the sweep; its real compilation cost is in the table above. The original
# study averaged its loop with the compiling call inside and never blocked, which folds both errors
# into one number.

# %% [markdown]
# ## 2. Autograd: gradients of f
#
# ### At a scalar, checked
#
# The derivative at $x = 3$ in float32, by JAX (`jax.grad`), by PyTorch's tape (`backward()`) and by
# `torch.func.grad` (PyTorch's functional transform, the counterpart of `jax.grad`), against the
# exact derivative in float64.

# %%
x0 = 3.0
x0_torch = torch.tensor(x0, requires_grad=True)
F.f_torch(x0_torch).backward()
scalar = pd.DataFrame({
    "f'(3)": {
        "exact (float64)": float(F.df(x0)),
        "JAX jax.grad": float(jax.grad(F.f_jax)(jnp.float32(x0))),
        "PyTorch backward()": float(x0_torch.grad),
        "PyTorch torch.func.grad": float(torch.func.grad(F.f_torch)(torch.tensor(x0))),
    }
})
scalar["error"] = scalar["f'(3)"] - scalar.loc["exact (float64)", "f'(3)"]
assert (scalar["error"].abs() < 1e-6).all(), scalar
scalar

# %% [markdown]
# ### Over a vector
#
# `f` acts element by element, so its gradient at every element of a vector is a vector. The ways
# to get it:
#
# - JAX `vmap(grad(f))`, eager, and `jit(vmap(grad(f)))`; and the gradient of `sum(f(x))` under
#   `jit` (the same numbers, since element $i$ of the sum depends only on $x_i$);
# - PyTorch, as in the original: a Python loop calling `backward()` once per element (only up to
#   the `torch_loop_max_size` parameter: it is slow by construction);
# - PyTorch, idiomatically: one `backward` through `f(x).sum()` (`torch.autograd.grad`);
# - PyTorch `torch.func.vmap(torch.func.grad(f))`, the direct counterpart of JAX's transform.
#
# Everything runs on the main device, in float32, with the same input.

# %%
grad_sizes = [10**e for e in range(3, autograd_max_exponent + 1)]
jax_vmap_grad = jax.vmap(jax.grad(F.f_jax))
jax_jit_vmap_grad = jax.jit(jax.vmap(jax.grad(F.f_jax)))
jax_jit_grad_sum = jax.jit(jax.grad(lambda x: F.f_jax(x).sum()))
torch_vmap_grad = torch.func.vmap(torch.func.grad(F.f_torch))


def torch_grad_loop(x):
    """The original's approach: one backward pass per element."""
    out = torch.empty_like(x)
    for i in range(x.shape[0]):
        xi = x[i].detach().requires_grad_()
        F.f_torch(xi).backward()
        out[i] = xi.grad
    return out


def torch_grad_sum(x):
    """Idiomatic PyTorch: one backward pass through the sum."""
    x = x.detach().requires_grad_()
    (grad,) = torch.autograd.grad(F.f_torch(x).sum(), x)
    return grad


GRAD_LABEL = {"jax_vmap_grad": "JAX vmap(grad)", "jax_jit_vmap_grad": "JAX jit(vmap(grad))",
              "jax_jit_grad_sum": "JAX jit(grad(sum))", "torch_loop": "PyTorch loop of backward()",
              "torch_autograd_sum": "PyTorch autograd on sum", "torch_func_vmap_grad": "PyTorch torch.func vmap(grad)"}


def grad_candidates(n):
    x_np = rng.uniform(0, 4 * np.pi, n).astype(np.float32)
    x_jax = jax.device_put(x_np, jax_devices[main_device])
    x_torch = torch.from_numpy(x_np).to(torch_devices[main_device])
    fns = {
        "jax_vmap_grad": lambda: jax_vmap_grad(x_jax),
        "jax_jit_vmap_grad": lambda: jax_jit_vmap_grad(x_jax),
        "jax_jit_grad_sum": lambda: jax_jit_grad_sum(x_jax),
        "torch_autograd_sum": lambda: torch_grad_sum(x_torch),
        "torch_func_vmap_grad": lambda: torch_vmap_grad(x_torch),
    }
    if n <= torch_loop_max_size:
        fns["torch_loop"] = lambda: torch_grad_loop(x_torch)
    return x_np, fns


grad_timings, grad_errors = {}, {}
for n in progress.bar(grad_sizes, desc="gradient sweep"):
    x_np, fns = grad_candidates(n)
    exact = F.df(x_np.astype(np.float64))
    for method, fn in fns.items():  # values first: every method must give the same gradient
        value = fn()
        value = value.detach().cpu().numpy() if isinstance(value, torch.Tensor) else np.asarray(value)
        grad_errors.setdefault(method, {})[n] = float(np.max(np.abs(value - exact)))
    grad_timings[n] = timing.compare(fns, repeats=repeats, min_repeat_s=min_repeat_s)

errors = pd.DataFrame(grad_errors).T.rename(index=GRAD_LABEL)
errors.columns.name = "size"
assert (errors.max(axis=1) < 1e-5).all(), errors
errors.map(lambda e: f"{e:.1e}")

# %% [markdown]
# All methods agree with the exact derivative to float32 rounding (largest absolute error per
# method and size above). The time per call, median and IQR, in milliseconds:

# %%
grad_rows = []
for n, timings in grad_timings.items():
    for method, t in timings.items():
        grad_rows.append({"method": GRAD_LABEL[method], "size": n,
                          "time": f"{t.median_s * 1e3:.3g} ± {t.iqr_s * 1e3 / 2:.1g}"})
grad_table = pd.DataFrame(grad_rows).pivot(index="method", columns="size", values="time")
grad_table = grad_table.reindex([GRAD_LABEL[m] for m in GRAD_LABEL if GRAD_LABEL[m] in grad_table.index]).fillna("–")
grad_table.columns = [f"n = {n:,} (ms)" for n in grad_table.columns]
grad_table

# %% figure="gradient-time" alt="Log-log plot of gradient time against vector length for the JAX and PyTorch gradient methods"
GRAD_STYLE = {"jax_vmap_grad": ("jax", "--", "o"), "jax_jit_vmap_grad": ("jax", "-", "o"),
              "jax_jit_grad_sum": ("jax", ":", "D"), "torch_loop": ("torch", "-.", "x"),
              "torch_autograd_sum": ("torch", "-", "^"), "torch_func_vmap_grad": ("torch", "--", "v")}
fig, ax = plt.subplots()
for method, (colour, line, marker) in GRAD_STYLE.items():
    ns = [n for n in grad_sizes if method in grad_timings[n]]
    ts = [grad_timings[n][method] for n in ns]
    med = np.array([t.median_s for t in ts])
    ax.errorbar(ns, med, yerr=[med - [t.q1_s for t in ts], [t.q3_s for t in ts] - med], color=viz.COLORS[colour],
                linestyle=line, marker=marker, markersize=5, capsize=2, label=GRAD_LABEL[method])
ax.set(xscale="log", yscale="log", xlabel="vector length n (float32 elements)", ylabel="time per gradient (s)",
       title=f"Gradient of f over a vector ({main_device.upper()})")
ax.legend(fontsize=8)
plt.show()

# %% [markdown]
# ### Second order: a Hessian-vector product
#
# For the scalar $g(x) = \sum_i f(x_i)$, the Hessian is diagonal with entries $f''(x_i)$, so
# $H v = f''(x) \odot v$ is known exactly. Both frameworks compute it forward-over-reverse, the
# recommended way (`jvp` of `grad`: `jax.jvp` and `torch.func.jvp`), and PyTorch also by double
# backward (`torch.autograd.functional.hvp`, reverse-over-reverse).

# %%
def g_jax(x):
    return F.f_jax(x).sum()


def g_torch(x):
    return F.f_torch(x).sum()


def jax_hvp(x, v):
    return jax.jvp(jax.grad(g_jax), (x,), (v,))[1]


def torch_func_hvp(x, v):
    return torch.func.jvp(torch.func.grad(g_torch), (x,), (v,))[1]


def torch_double_backward_hvp(x, v):
    return torch.autograd.functional.hvp(g_torch, x, v)[1]


x_np = rng.uniform(0, 4 * np.pi, hvp_size).astype(np.float32)
v_np = rng.standard_normal(hvp_size).astype(np.float32)
x_jax, v_jax = (jax.device_put(a, jax_devices[main_device]) for a in (x_np, v_np))
x_torch, v_torch = (torch.from_numpy(a).to(torch_devices[main_device]) for a in (x_np, v_np))
jax_hvp_jit = jax.jit(jax_hvp)
hvp_fns = {
    "jax_hvp": lambda: jax_hvp(x_jax, v_jax),
    "jax_jit_hvp": lambda: jax_hvp_jit(x_jax, v_jax),
    "torch_func_hvp": lambda: torch_func_hvp(x_torch, v_torch),
    "torch_double_backward_hvp": lambda: torch_double_backward_hvp(x_torch, v_torch),
}
HVP_LABEL = {"jax_hvp": "JAX jvp(grad)", "jax_jit_hvp": "JAX jit(jvp(grad))",
             "torch_func_hvp": "PyTorch torch.func jvp(grad)", "torch_double_backward_hvp": "PyTorch double backward"}
exact_hvp = F.d2f(x_np.astype(np.float64)) * v_np
hvp_error = {}
for method, fn in hvp_fns.items():
    value = fn()
    value = value.detach().cpu().numpy() if isinstance(value, torch.Tensor) else np.asarray(value)
    hvp_error[method] = float(np.max(np.abs(value - exact_hvp)))
assert max(hvp_error.values()) < 1e-4, hvp_error
hvp_timings = timing.compare(hvp_fns, repeats=repeats, min_repeat_s=min_repeat_s)
hvp_table = timing.summarise(hvp_timings, unit="ms").rename(index=HVP_LABEL)
hvp_table.insert(0, "max |error|", [hvp_error[m] for m in hvp_fns])
hvp_table

# %% [markdown]
# ## 3. Results

# %%
big, small = sizes[-1], sizes[0]
summary_rows = []
for device in devices:
    t_big, t_small = jit_timings[device, big], jit_timings[device, small]
    for method in methods:
        if method in t_big:
            summary_rows.append({"device": device, "method": LABEL[method],
                                 f"n = {small:,} (µs)": t_small[method].median_s * 1e6,
                                 f"n = {big:,} (µs)": t_big[method].median_s * 1e6,
                                 "crossover n*": fits[device, method]["crossover n*"],
                                 "compile (s)": compile_s[device].get(method)})
results = pd.DataFrame(summary_rows).set_index(["device", "method"])
results.round(1)

# %% tags=["remove_input"]
def fmt_n(n):
    return "never within the sweep" if not np.isfinite(n) else f"{n:,.0f}"


def fmt_s(seconds):
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("µs", 1e-6)):
        if seconds >= scale:
            return f"{seconds / scale:.3g} {unit}"
    return f"{seconds * 1e9:.3g} ns"


lines = []
for device in devices:
    s_big, s_small = speedups.loc[(device, big)], speedups.loc[(device, small)]
    fit = lambda m: fits[device, m]["crossover n*"]
    overhead_bound = all(small < fit(m) for m in methods if (device, m) in fits)
    pays = lambda r: "pays" if r > 1.05 else ("breaks even" if r > 0.95 else "does not pay")
    text = (f"**{device.upper()}.** At {small:,} elements a call costs "
            f"{jit_timings[device, small]['jax_jit'].median_s * 1e6:.1f} µs with `jax.jit`, "
            f"{jit_timings[device, small]['torch_compile'].median_s * 1e6:.1f} µs with `torch.compile`, "
            f"{jit_timings[device, small]['torch_eager'].median_s * 1e6:.1f} µs in PyTorch eager and "
            f"{jit_timings[device, small]['jax_eager'].median_s * 1e6:.1f} µs in JAX eager"
            f"{': below every crossover, so mostly overhead' if overhead_bound else ''}. "
            f"Overhead stops dominating (work = overhead) at about {fmt_n(fit('jax_jit'))} elements for `jax.jit`, "
            f"{fmt_n(fit('torch_compile'))} for `torch.compile`, {fmt_n(fit('jax_eager'))} for JAX eager and "
            f"{fmt_n(fit('torch_eager'))} for PyTorch eager. At {big:,} elements `jax.jit` "
            f"{pays(s_big['JAX eager / jax.jit'])} ({s_big['JAX eager / jax.jit']:.1f}× faster than JAX eager) and "
            f"`torch.compile` {pays(s_big['PyTorch eager / torch.compile'])} "
            f"({s_big['PyTorch eager / torch.compile']:.1f}× faster than PyTorch eager); at {small:,} elements the "
            f"factors are {s_small['JAX eager / jax.jit']:.1f}× and {s_small['PyTorch eager / torch.compile']:.2f}×. "
            f"At {big:,} elements `torch.compile` takes {s_big['torch.compile / jax.jit']:.2f}× the time of `jax.jit`.")
    if "NumPy / jax.jit" in s_big and np.isfinite(s_big["NumPy / jax.jit"]):
        text += (f" NumPy takes {s_big['NumPy / jax.jit']:.1f}× the time of `jax.jit` there "
                 f"(and {s_small['NumPy / jax.jit']:.2f}× at {small:,} elements).")
    text += (f" Compilation: {compile_s[device]['jax_jit'] * 1e3:.0f} ms per new shape for `jax.jit`, "
             f"{compile_s[device]['torch_compile']:.1f} s once for `torch.compile(dynamic=True)`.")
    lines.append(text)

g_big = grad_sizes[-1]
gt = grad_timings[g_big]
grad_text = (f"**Gradients** ({main_device.upper()}, {g_big:,} elements): `jit(vmap(grad))` takes "
             f"{fmt_s(gt['jax_jit_vmap_grad'].median_s)}, PyTorch's autograd on the sum "
             f"{fmt_s(gt['torch_autograd_sum'].median_s)} and `torch.func.vmap(grad)` "
             f"{fmt_s(gt['torch_func_vmap_grad'].median_s)}; un-jitted `vmap(grad)` "
             f"{fmt_s(gt['jax_vmap_grad'].median_s)}.")
loop_sizes = [n for n in grad_sizes if "torch_loop" in grad_timings[n]]
if loop_sizes:
    n_loop = loop_sizes[-1]
    tl = grad_timings[n_loop]
    grad_text += (f" The original's per-element loop is the outlier: at {n_loop:,} elements it takes "
                  f"{fmt_s(tl['torch_loop'].median_s)}, "
                  f"{timing.ratio(tl['torch_loop'], tl['torch_autograd_sum']):.0f}× the idiomatic PyTorch "
                  f"call, so the original's comparison measured a Python loop, not PyTorch's autograd.")
grad_text += (f" The Hessian-vector product on {hvp_size:,} elements takes "
              f"{fmt_s(hvp_timings['jax_jit_hvp'].median_s)} with `jit(jvp(grad))`, "
              f"{fmt_s(hvp_timings['torch_func_hvp'].median_s)} with `torch.func.jvp(grad)` and "
              f"{fmt_s(hvp_timings['torch_double_backward_hvp'].median_s)} by PyTorch's double backward.")
pit = pitfall.loc[(main_device, "jax.jit")]
pit_text = (f"**The pitfall.** Without waiting for the result, `jax.jit` at {big:,} elements "
            f"appears to take {fmt_s(pit['no sync (µs), WRONG'] * 1e-6)} instead of "
            f"{fmt_s(pit['synchronised median (µs), right'] * 1e-6)} "
            + (f"(a factor of {1 / pit['no sync / right']:,.0f} too fast)" if pit["no sync / right"] < 0.5
               else f"({pit['no sync / right']:.2f}× the true time)")
            + f", and a first call that includes compilation reports {fmt_s(pit['first call (µs), WRONG'] * 1e-6)}.")
gpu_text = ("" if on_gpu else
            "\n\nThese figures are from a CPU with "
            f"{record['cpu']}; **the GPU figures are still to come** (the `gpu` profile of this notebook "
            "runs the same sweep on the GPU up to 10⁸ elements).")
Markdown("## Conclusion\n\n" + "\n\n".join(lines) + "\n\n" + grad_text + "\n\n" + pit_text + gpu_text)

# %% tags=["remove_cell"]
metrics = {
    "jit": {device: {str(n): {f"{m}_s": (jit_timings[device, n][m].median_s if m in jit_timings[device, n] else None)
                              for m in methods} for n in sizes} for device in devices},
    "jit_iqr": {device: {str(n): {f"{m}_s": t.iqr_s for m, t in jit_timings[device, n].items()} for n in sizes}
                for device in devices},
    "compile_s": compile_s,
    "crossover": {device: {m: fits[device, m]["crossover n*"] for m in methods if (device, m) in fits} for device in devices},
    "autograd": {m: {str(n): grad_timings[n][m].median_s for n in grad_sizes if m in grad_timings[n]} for m in GRAD_LABEL},
    "autograd_max_error": grad_errors,
    "hvp": {m: {str(hvp_size): t.median_s} for m, t in hvp_timings.items()},
    "pitfall": {f"{d}/{m}": row for (d, m), row in pitfall.to_dict(orient="index").items()},
    "autograd_device": main_device,
}
provenance.save_results("jit-and-autograd-timing", metrics)["metrics"]["compile_s"]
