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
#     compared: A small element-wise function and its gradient, from ten elements to
#       millions, in NumPy, JAX (eager and jax.jit) and PyTorch (eager and torch.compile),
#       with every timer synchronised and compilation timed on its own.
#     date: '2026-11-22'
#     description: jax.jit against torch.compile, NumPy and eager execution, and gradients
#       in both frameworks, timed with synchronised clocks and compilation kept apart.
#     metrics:
#     - jit
#     - compile_s
#     - autograd
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
# repeats the study with one timing harness, `sidebyside.lab.timing`, gives each framework its whole
# ladder of tools (eager, `torch.compile` with static and with dynamic shapes, CUDA graphs on a
# GPU, `torch.func`; eager JAX and `jax.jit`), sets every figure beside the memory-bandwidth floor
# of the device, and then shows the same timing mistakes on purpose, to see how far off they are.

# %% tags=["colab-install"]
# Run this post yourself: on Colab this installs the library and the versions the post ran with.
import subprocess
import sys

REPOSITORY = "sidebyside-ml/pytorch-vs-jax@main"  # the site's repository@branch (_config.yml); a fork names its own
if "google.colab" in sys.modules:
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "torchviz", "timm==1.0.31",
                    f"sidebyside @ git+https://github.com/{REPOSITORY}"], check=True)
from sidebyside.run import colab

colab.setup("jit-and-autograd-timing", REPOSITORY)

# %% tags=["parameters"]
jit_max_exponent = 3        # element-wise sweep: sizes 10**1 ... 10**jit_max_exponent
autograd_max_exponent = 4   # gradient sweep: sizes 10**3 ... 10**autograd_max_exponent
torch_loop_max_size = 1000  # the per-element PyTorch loop of the original runs up to this size only
hvp_size = 10_000           # vector length of the Hessian-vector product
repeats = 5                 # timed repeats per measurement (median and IQR over them)
min_repeat_s = 0.01         # each repeat runs the function enough times to last this long
kernel_calls = 20           # on a GPU: calls profiled per rung for its kernel time (torch.profiler / jax.profiler)
hardware_only = False       # the gpu profile's: the GPU alone is timed; the CPU's rows are the cpu run's
threads = 0                 # CPU threads for PyTorch, XLA and NumPy alike; 0: every core this process may use
seed = 0
# A run in parts (a lent GPU allows 10 minutes a command): each size of each sweep, the kernel
# profile and each pitfall are saved to this file as they finish and read back by the next run; no
# part starts that would end past run_budget_s.
checkpoint_file = ""        # "": off, everything is measured in this run
run_budget_s = 0            # seconds; 0: no budget

# %% tags=["remove_cell", "colab-profile"]
# The settings to run with: "smoke" (the test suite's small sizes, a minute), "cpu", or "gpu" (a GPU post's own
# settings, on a GPU runtime); "auto" takes the post's own on a GPU runtime and smoke elsewhere.
PROFILE = "auto"
globals().update(colab.parameters("jit-and-autograd-timing", PROFILE, REPOSITORY))

# %% [markdown] tags=["appendix"]
# ## Setup
#
# Both frameworks compute in float32 under the same conditions, set by one library call before JAX
# starts (`notebook.setup`, through `conditions.same_conditions`): TF32 off on both sides, the same number of CPU threads for
# PyTorch, XLA and NumPy. NumPy runs on the CPU only. `torch.compile` runs twice over: with static
# shapes (`dynamic=False`: one specialised kernel per length, recompiled for each new length, as
# `jax.jit` does) and with dynamic shapes (`dynamic=True`: one kernel for symbolic lengths from the
# start). On a GPU a third rung, `mode="reduce-overhead"`, replays the kernel from a CUDA graph.
# Both compilers keep their caches in this run's own folder: this process compiles cold, and the
# worker processes that repeat the timings reuse what it compiled. The process is warm: each
# compiler's one-time start-up is paid, and reported, before any timing.

# %% tags=["appendix"]
from sidebyside.lab import notebook

# first, before JAX starts; the CPU's start-up (the process's first) is reported, the GPU's paid too
setup = notebook.setup(threads=threads, tf32=False, warm="every")
conditions, record, on_gpu, startup = setup.conditions, setup.provenance, setup.on_gpu, setup.startup
devices, main_device, jax_devices, torch_devices = (setup.devices, setup.main_device, setup.jax_devices,
                                                    setup.torch_devices)

from functools import partial

import jax
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import torch
import torch._dynamo.config
from IPython.display import Markdown

from sidebyside.lab import functions, peaks, progress, tables, timing, viz, words
from sidebyside.posts.jit_autograd import control, kernels, report, sweeps
from sidebyside.run import checkpoints, provenance

# Static shapes compile once per length and device: allow more than the default 8 specialisations.
torch._dynamo.config.recompile_limit = 64
torch.manual_seed(seed)
rng = np.random.default_rng(seed)
parts = setup.parts(checkpoint_file, run_budget_s)  # a run in parts (see the parameters)
provenance.table(record)

# %% tags=["remove_input", "appendix"]
Markdown(report.setup_sentence(conditions, startup, on_gpu=on_gpu))

# %% [markdown] tags=["appendix"]
# ### The hardware floor
#
# `f` reads one float32 per element and writes one: at large sizes it is bound by memory bandwidth,
# and no compiler can beat $8n$ bytes divided by the bandwidth. Below, each device's bandwidth,
# measured with a large copy (`peaks.measure_copy_bandwidth`, read plus write bytes), and for a GPU
# the data sheet's figure (`peaks.GPU_PEAKS`). The sweep's floor uses the measured copy on the CPU
# and the data sheet's figure on a GPU. Small vectors sit in the caches, where a call can beat a
# memory floor: the floor is a bound for vectors far larger than the caches.

# %% tags=["appendix-input", "appendix"]
if hardware_only:  # the gpu profile's: the CPU's rows are the cpu run's (see the parameters)
    devices = [main_device]
bandwidth = {}
for device in devices:
    copy = peaks.measure_copy_bandwidth("cuda" if device == "gpu" else "cpu")
    published = peaks.memory_bandwidth(record["device"]) if device == "gpu" else None
    bandwidth[device] = {"measured copy (GB/s)": copy["bytes_per_s"] / 1e9,
                         "data sheet (GB/s)": published / 1e9 if published else None,
                         "floor uses": "data sheet" if published else "measured copy",
                         "floor_bytes_per_s": published or copy["bytes_per_s"], "method": copy["method"]}
pd.DataFrame(bandwidth).T.drop(columns="floor_bytes_per_s")

# %% [markdown]
# ## 1. JIT: one element-wise function from 10 to 10ⁿ elements
#
# The function, once per framework. `jax.numpy` spells NumPy's API, so NumPy's version, the CPU
# baseline, is the same line with `np`:

# %% tags=["pair:f:torch"]
import torch


def f_torch(x):
    return 0.2 * x + torch.sin(x) + torch.cos(2 * x)

# %% tags=["pair:f:jax"]
import jax
import jax.numpy as jnp
import numpy as np


def f_jax(x):
    return 0.2 * x + jnp.sin(x) + jnp.cos(2 * x)


def f_numpy(x):  # the NumPy baseline
    return 0.2 * x + np.sin(x) + np.cos(2 * x)

# %% [markdown] tags=["appendix"]
# The three versions of $f$ agree; its exact derivatives, to check autodiff against, are
# $f'(x) = 0.2 + \cos x - 2\sin 2x$ and $f''(x) = -\sin x - 4\cos 2x$ (`df` and `d2f` in
# `sidebyside.lab.functions`, in NumPy).

# %% tags=["appendix-input", "appendix"]
x_demo = np.linspace(0, 4 * np.pi, 6, dtype=np.float32)
pd.DataFrame({
    "x": x_demo,
    "NumPy": f_numpy(x_demo),
    "JAX": np.asarray(f_jax(jnp.asarray(x_demo))),
    "PyTorch": f_torch(torch.from_numpy(x_demo)).numpy(),
})

# %% [markdown]
# Each framework's ladder on a float32 vector: PyTorch eager, `torch.compile` static, `torch.compile`
# dynamic, `torch.compile(mode="reduce-overhead")` (CUDA graphs, GPU only); JAX eager (each of the
# five operations dispatched on its own) and `jax.jit` (XLA fuses them into one loop); and NumPy on
# the CPU. At each size, `timing.ladder` runs them interleaved, so drifts of a shared machine hit all
# alike; every call waits for its result; the first call of each is timed apart (for `jax.jit` and
# static `torch.compile` it compiles for that length; for dynamic `torch.compile` only the very first
# call compiles). A rung that fails keeps its row, with its error. The eager rungs call `f_torch`,
# `f_jax` and `f_numpy` above as they are; the compiled ones:

# %% tags=["pair:jit:torch"]
# Dynamo keeps compiled code per Python function: each setting compiles its own entry point,
# so that the three never share a cache.
def f_static(x):
    return f_torch(x)


def f_dynamic(x):
    return f_torch(x)


def f_cudagraphs(x):
    return f_torch(x)


torch_static = torch.compile(f_static, dynamic=False)  # one kernel per length, as jax.jit
torch_dynamic = torch.compile(f_dynamic, dynamic=True)  # one kernel for every length
torch_cudagraphs = torch.compile(f_cudagraphs, mode="reduce-overhead", dynamic=False)  # CUDA graphs

# %% tags=["pair:jit:jax"]
f_jit = jax.jit(f_jax)  # one fused XLA kernel per length

# %% tags=["appendix-input"]
sizes = [10**e for e in range(1, jit_max_exponent + 1)]
LABEL = {"numpy/numpy": "NumPy", "jax/eager": "JAX eager", "jax/jit": "jax.jit", "torch/eager": "PyTorch eager",
         "torch/compile": "torch.compile (static)", "torch/compile-dynamic": "torch.compile (dynamic)",
         "torch/compile-cudagraphs": "torch.compile (reduce-overhead: CUDA graphs)"}
methods = list(LABEL)
NEEDS = {"torch/compile-cudagraphs": "a CUDA GPU", "torch/compile": "a working Inductor back end",
         "torch/compile-dynamic": "a working Inductor back end"}


F_RUNGS = {"torch/eager": f_torch, "torch/compile": torch_static,
           "torch/compile-dynamic": torch_dynamic, "torch/compile-cudagraphs": torch_cudagraphs,
           "jax/eager": f_jax, "jax/jit": f_jit, "numpy/numpy": f_numpy}


def candidates(device, n, rungs=F_RUNGS, x_np=None):
    """Each framework's ladder at one (device, size), each on its own copy of the same data: the
    paired cells' functions (`rungs`) as they are, each input bound by functools.partial
    (control.bind); NumPy on the CPU only."""
    x_np = rng.uniform(0, 4 * np.pi, n).astype(np.float32) if x_np is None else x_np
    chosen = {m: fn for m, fn in rungs.items() if device == "cpu" or not m.startswith("numpy/")}
    if device != "gpu":
        chosen["torch/compile-cudagraphs"] = timing.NotApplicable.cuda_graphs(device)
    # reduce-overhead's graph reads a static buffer: an input marked static is read in place, where any
    # other input is copied into that buffer on every call, a cost the other rungs do not pay
    return control.bind(chosen, x_np, jax_device=jax_devices[device],
                        torch_device=torch_devices[device], static=["torch/compile-cudagraphs"])


jit_entries, jit_timings = {}, {}  # (device, size) -> {method: ladder entry} / {method: Timing}
back_to_back = {}  # the same ladders, calls issued back to back and waited for once per repeat: throughput
for device, n in progress.bar([(d, n) for d in devices for n in sizes], desc="f(x) sweep"):
    # one part per (device, size): its ladder, then the same ladder back to back (sweeps.sweep); its
    # data drawn from rng, whose state is saved with it (parts.drawn)
    swept = parts.drawn(rng, sweeps.part_name("jit", device, n),
                         partial(sweeps.sweep, partial(candidates, device, n)), needs=NEEDS,
                         repeats=repeats, min_repeat_s=min_repeat_s, decode=sweeps.Ladder.saved)
    jit_entries[device, n], jit_timings[device, n] = swept.entries, swept.timings
    back_to_back[device, n] = swept.back_to_back


def floor_s(device, n):
    return peaks.floor_seconds(8 * n, bandwidth[device]["floor_bytes_per_s"])


# %% [markdown] tags=["appendix"] summary="Per-call times, every size and tool"
# Per-call times, median over the repeats, in microseconds, with the memory floor of each size:

# %% tags=["appendix-input", "appendix"]
rows = []
for (device, n), entries in jit_entries.items():
    row = {"device": device, "size": n, "memory floor": floor_s(device, n) * 1e6}
    for method, e in entries.items():
        row[LABEL[method]] = None if e["median_s"] is None else e["median_s"] * 1e6
    rows.append(row)
jit_table = pd.DataFrame(rows).set_index(["device", "size"])
jit_table.round(2)

# %% tags=["appendix-input", "appendix"]
failed_or_absent = {f"{d}, {LABEL[m]}": (e["error"] or f"not applicable: {e['not_applicable']}")
                    for (d, n), entries in jit_entries.items() if n == sizes[0]
                    for m, e in entries.items() if e["median_s"] is None}
pd.Series(failed_or_absent, name="why there is no figure", dtype=object).to_frame()

# %% tags=["appendix"]
# On a GPU, the kernel apart from the call: each rung that ran is profiled (torch.profiler, jax.profiler)
# for `kernel_calls` calls, and its kernels' time per call is set beside the synchronised per-call time
# and the back-to-back time; the rest of a call is launch and synchronisation. A CPU has no kernel time.
kernel_times = {}  # (device, size) -> {method: kernel row of kernels.measure}


def profiled(calls):
    """One part: every size in one measure, which profiles all of JAX's rungs before PyTorch's
    first (see kernels.measure); three warm-up calls: reduce-overhead records its CUDA graph after
    a warm-up call. Rows by "<method>@<size>"."""
    ran = {(m, n): fn for n in sizes for m, fn in candidates("gpu", n).items()
           if m in jit_timings["gpu", n]}
    return kernels.measure({f"{m}@{n}": fn for (m, n), fn in ran.items()}, calls=calls, warmup=3)


if on_gpu:
    for rung, row in parts.drawn(rng, "kernels/gpu", profiled, kernel_calls).items():
        m, n = rung.rsplit("@", 1)
        kernel_times.setdefault(("gpu", int(n)), {})[m] = row
kernel_view = report.kernel_table(jit_entries, back_to_back, kernel_times, labels=LABEL) if on_gpu else None
kernel_view

# %% tags=["appendix"]
# On the CPU, the cores each rung keeps busy at the largest size (`timing.cores_busy`: this process's
# CPU time over the wall time of synchronised calls). A loop that one framework runs on one thread and
# the other on every core differs by that count, not by its code; the conclusion names it as the cause.
def busy_cores(n):  # one part: the cores each rung that ran keeps busy at length n
    return {m: timing.cores_busy(fn) for m, fn in candidates("cpu", n).items()
            if m in jit_timings["cpu", n]}


cores_busy = {} if "cpu" not in devices else {("cpu", sizes[-1]): parts.drawn(rng, sweeps.part_name("cores", "cpu", sizes[-1]), busy_cores, sizes[-1])}
(Markdown(words.from_cpu_run("Timing on the CPU (every CPU row, and the cores each rung keeps busy there)",
                                    "needs no GPU")) if not cores_busy else
 pd.Series(cores_busy["cpu", sizes[-1]], name="cores busy per call").rename(index=LABEL).round(2).to_frame())

# %% [markdown] tags=["appendix"]
# ### Where dispatch overhead stops dominating
#
# For each method and device we fit $t(n) = a + b\,n$: $a$ is the fixed cost of a call (Python,
# dispatch, kernel launch), $b$ the cost per element. At $n^* = a/b$ the two are equal: below
# $n^*$ a call is mostly overhead, above it mostly work (`sidebyside.lab.functions.fit_overhead`, a
# least-squares fit on relative errors).

# %% tags=["appendix"]
fits = {}
for device in devices:
    for method in methods:
        points = [(n, jit_timings[device, n][method].median_s) for n in sizes if method in jit_timings[device, n]]
        if len(points) >= 2:
            a, b = functions.fit_overhead(*zip(*points))
            fits[device, method] = {"overhead (µs)": a * 1e6, "per element (ns)": b * 1e9,
                                    "crossover n*": a / b if b > 0 else float("inf")}
fit_table = pd.DataFrame.from_dict(fits, orient="index").rename(index=LABEL, level=1)
fit_table.index.names = ["device", "method"]
fit_table.round({"overhead (µs)": 1, "per element (ns)": 3, "crossover n*": 0})

# %% figure="time-vs-size" alt="Log-log plot of time per call against vector length for NumPy, JAX eager, jax.jit, PyTorch eager and torch.compile static and dynamic, with the memory-bandwidth floor and the crossover size of each marked; on a GPU also the profiler's kernel time of jax.jit and static torch.compile" tags=["key-figure", "appendix-input"]
STYLE = {"numpy/numpy": ("numpy", "-", "s"), "jax/eager": ("jax", "--", "o"), "jax/jit": ("jax", "-", "o"),
         "torch/eager": ("torch", "--", "^"), "torch/compile": ("torch", "-", "^"),
         "torch/compile-dynamic": ("torch", ":", "v"), "torch/compile-cudagraphs": ("torch", "-.", "D")}
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
        crossover = fits.get((device, method), {}).get("crossover n*", float("inf"))
        if sizes[0] <= crossover <= sizes[-1]:
            a_s = fits[device, method]["overhead (µs)"] * 1e-6
            ax.plot([crossover], [2 * a_s], marker="*", markersize=13, color=viz.COLORS[colour],
                    markeredgecolor="black", linestyle="none")
    for method in ("torch/compile", "jax/jit"):  # on a GPU, the profiler's kernel time beside the call's
        points = [(n, kernel_times[device, n][method]["kernel_s"]) for n in sizes
                  if kernel_times.get((device, n), {}).get(method, {}).get("kernel_s")]
        if points:
            ax.plot(*zip(*points), color=viz.COLORS[STYLE[method][0]], linestyle=":", linewidth=1, marker="x",
                    markersize=4, label=f"{LABEL[method]}: kernel only (profiler)")
    ax.plot(sizes, [floor_s(device, n) for n in sizes], color="black", linewidth=1,
            label=f"memory floor ({bandwidth[device]['floor uses']})")
    ax.plot([], [], marker="*", color="grey", markeredgecolor="black", linestyle="none",
            label="crossover n* (overhead = work)")
    ax.set(xscale="log", yscale="log", xlabel="vector length n (float32 elements)",
           ylabel="time per call (s)", title=f"f(x) on the {device.upper()}: {record['device'] if device == main_device and on_gpu else record['cpu']}")
    ax.title.set_fontsize(10)
    ax.legend(fontsize=7)
plt.show()

# %% [markdown] tags=["appendix"]
# ### Speed-ups
#
# Ratios of medians measured in the same interleaved run: how much faster the compiled version is
# than its own eager mode, and how the two compilers compare (above 1: the first is slower).

# %% tags=["appendix-input", "appendix"]
def r(t, a, b):
    return t[a].median_s / t[b].median_s if a in t and b in t else None


speed_rows = []
for (device, n), t in jit_timings.items():
    row = {"device": device, "size": n,
           "JAX eager / jax.jit": r(t, "jax/eager", "jax/jit"),
           "PyTorch eager / torch.compile static": r(t, "torch/eager", "torch/compile"),
           "torch.compile static / jax.jit": r(t, "torch/compile", "jax/jit"),
           "torch.compile dynamic / jax.jit": r(t, "torch/compile-dynamic", "jax/jit"),
           "PyTorch eager / JAX eager": r(t, "torch/eager", "jax/eager")}
    if "numpy/numpy" in t:
        row["NumPy / jax.jit"] = r(t, "numpy/numpy", "jax/jit")
        row["NumPy / torch.compile static"] = r(t, "numpy/numpy", "torch/compile")
    speed_rows.append(row)
speedups = pd.DataFrame(speed_rows).set_index(["device", "size"])
speedups.round(2)

# %% [markdown] tags=["appendix"]
# ### Compilation, apart
#
# The first call minus a steady-state call, in a warm process. `jax.jit` and static `torch.compile`
# compile again for every new length (and device), so their cost recurs at each size;
# `torch.compile(dynamic=True)` pays once, at its very first call, for a kernel that serves every
# length afterwards.

# %% tags=["appendix-input", "appendix"]
COMPILED = ["jax/jit", "torch/compile", "torch/compile-dynamic", "torch/compile-cudagraphs"]
compile_table = pd.DataFrame.from_dict(
    {(device, n): {f"{LABEL[m]} (ms)": entries[m]["compile_s"] * 1e3 if entries[m]["compile_s"] is not None else None
                   for m in COMPILED} for (device, n), entries in jit_entries.items()}, orient="index")
compile_table.index.names = ["device", "size"]


def median_compile(device, method):
    values = [jit_entries[device, n][method]["compile_s"] for n in sizes
              if jit_entries[device, n][method]["compile_s"] is not None]
    return float(np.median(values)) if values else None


compile_s = {device: {"jax_jit": median_compile(device, "jax/jit"),
                      "torch_compile": median_compile(device, "torch/compile"),
                      "torch_compile_dynamic": jit_entries[device, sizes[0]]["torch/compile-dynamic"]["compile_s"],
                      "startup": startup}
             for device in devices}
compile_table.round(1)

# %% [markdown] tags=["appendix"]
# ### The pitfall, shown: timers that do not wait, and compilation inside the timer
#
# The same functions at the largest size, timed three ways, each function alone and back to back.
# The first column is right. The second is **wrong**: it stops the clock as soon as the call
# returns (`synchronize=False`, no `block_until_ready`), which for JAX — on the CPU too — and for
# PyTorch on a GPU is when the work was queued, not done (NumPy and PyTorch on the CPU return only
# when done, so for them the two agree up to noise). The third is **wrong** too: the first call
# of the sweep at this size, with compilation for this shape inside.

# %% tags=["appendix-input", "appendix"]
n_big = sizes[-1]


def timed_both_ways(device, n, methods):
    """One part: each of `methods` at (device, n) timed right, then wrong (sweeps.pitfall: the
    wrong timer makes as many calls a repeat as the right one chose; the queue drained after)."""
    fns = {m: fn for m, fn in candidates(device, n).items() if callable(fn) and m in methods}
    return sweeps.pitfall(fns, repeats=repeats, min_repeat_s=min_repeat_s)


pitfall_rows = []
for device in devices:
    timed = parts.drawn(rng, sweeps.part_name("pitfall", device, n_big), timed_both_ways,
                         device, n_big, list(jit_timings[device, n_big]))
    for method, t in timed.items():
        pitfall_rows.append({
            "device": device, "method": LABEL[method],
            "synchronised median (µs), right": t["synced_s"] * 1e6,
            "no sync (µs), WRONG": t["unsynced_s"] * 1e6,
            "first call (µs), WRONG": jit_timings[device, n_big][method].first_s * 1e6,
            "no sync / right": t["unsynced_s"] / t["synced_s"],
        })
pitfall = pd.DataFrame(pitfall_rows).set_index(["device", "method"])
pitfall.round(2)

# %% [markdown] tags=["appendix"]
# For dynamic `torch.compile` the first call at this size is cheap because its kernel was compiled
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

# %% tags=["appendix-input"]
x0 = 3.0
x0_torch = torch.tensor(x0, requires_grad=True)
f_torch(x0_torch).backward()
scalar = pd.DataFrame({
    "f'(3)": {
        "exact (float64)": float(functions.df(x0)),
        "JAX jax.grad": float(jax.grad(f_jax)(jnp.float32(x0))),
        "PyTorch backward()": float(x0_torch.grad),
        "PyTorch torch.func.grad": float(torch.func.grad(f_torch)(torch.tensor(x0))),
    }
})
scalar["error"] = scalar["f'(3)"] - scalar.loc["exact (float64)", "f'(3)"]
assert (scalar["error"].abs() < 1e-6).all(), scalar
scalar

# %% [markdown]
# ### Over a vector
#
# `f` acts element by element, so its gradient at every element of a vector is a vector. Each
# framework's ladder:
#
# - JAX `vmap(grad(f))`, eager and under `jax.jit`; and the gradient of `sum(f(x))` under `jit`
#   (the same numbers, since element $i$ of the sum depends only on $x_i$);
# - PyTorch `torch.func.vmap(torch.func.grad(f))`, the direct counterpart of JAX's transform,
#   eager and under `torch.compile` (static shapes); and idiomatic PyTorch, one `backward` through
#   `f(x).sum()` (`torch.autograd.grad`);
# - beside the ladder, the original's approach: a Python loop calling `backward()` once per element
#   (only up to the `torch_loop_max_size` parameter: it is slow by construction).
#
# Everything runs on the main device, in float32, with the same input.

# %% tags=["pair:grad:torch", "collapsed"] summary="The code: per-example gradients"
def vmap_grad_torch(x):  # f'(x) element by element, as JAX writes it
    return torch.func.vmap(torch.func.grad(f_torch))(x)


vmap_grad_torch_compiled = torch.compile(vmap_grad_torch, dynamic=False)


def grad_sum_torch(x):  # idiomatic PyTorch: one backward pass through the sum
    x = x.detach().requires_grad_()
    (grad,) = torch.autograd.grad(f_torch(x).sum(), x)
    return grad


def grad_loop_torch(x):  # the original's approach: one backward() per element
    out = torch.empty_like(x)
    for i in range(x.shape[0]):
        xi = x[i].detach().requires_grad_()
        f_torch(xi).backward()
        out[i] = xi.grad
    return out

# %% tags=["pair:grad:jax", "collapsed"]
def vmap_grad_jax(x):  # f'(x) element by element
    return jax.vmap(jax.grad(f_jax))(x)


vmap_grad_jax_jit = jax.jit(vmap_grad_jax)


def sum_f_jax(x):
    return f_jax(x).sum()


grad_sum_jax_jit = jax.jit(jax.grad(sum_f_jax))  # one reverse pass through the sum

# %% tags=["appendix"]
grad_sizes = [10**e for e in range(3, autograd_max_exponent + 1)]
GRAD_LABEL = {"jax/eager": "JAX vmap(grad)", "jax/jit": "JAX jit(vmap(grad))",
              "jax/jit-grad-sum": "JAX jit(grad(sum))", "torch/autograd": "PyTorch autograd on sum",
              "torch/func": "PyTorch torch.func vmap(grad)", "torch/func+compile": "PyTorch torch.compile(vmap(grad))",
              "torch/loop": "PyTorch loop of backward() (the original's)"}


GRAD_RUNGS = {"torch/autograd": grad_sum_torch, "torch/func": vmap_grad_torch,
              "torch/func+compile": vmap_grad_torch_compiled, "jax/eager": vmap_grad_jax,
              "jax/jit": vmap_grad_jax_jit, "jax/jit-grad-sum": grad_sum_jax_jit,
              "torch/loop": grad_loop_torch}


def grad_candidates(n, rungs=GRAD_RUNGS):
    x_np = rng.uniform(0, 4 * np.pi, n).astype(np.float32)
    chosen = {m: fn for m, fn in rungs.items() if m != "torch/loop" or n <= torch_loop_max_size}
    return x_np, control.bind(chosen, x_np, jax_device=jax_devices[main_device],
                              torch_device=torch_devices[main_device])


def gradients_at(n, rungs=GRAD_RUNGS, exact=functions.df):
    """One part: the ladder at length n, timed first, so that each first call (compilation
    included) is the ladder's; then the values: every method must give the same gradient."""
    x_np, fns = grad_candidates(n, rungs)
    return sweeps.checked(fns, exact(x_np.astype(np.float64)), repeats=repeats,
                          min_repeat_s=min_repeat_s)


grad_entries, grad_timings, grad_errors = {}, {}, {}
for n in progress.bar(grad_sizes, desc="gradient sweep"):
    swept = parts.drawn(rng, sweeps.part_name("grad", n), gradients_at, n,
                         decode=sweeps.Ladder.saved)
    grad_entries[n], grad_timings[n] = swept.entries, swept.timings
    for method, error in swept.errors.items():
        grad_errors.setdefault(method, {})[n] = error

errors = pd.DataFrame(grad_errors).T.rename(index=GRAD_LABEL)
errors.columns.name = "size"
assert (errors.max(axis=1) < 1e-5).all(), errors
errors.map(lambda e: f"{e:.1e}")

# %% [markdown] tags=["appendix"] summary="Gradient times, every size and method"
# All methods agree with the exact derivative to float32 rounding (largest absolute error per
# method and size above). The time per call, median ± IQR/2, in milliseconds:

# %% tags=["appendix-input", "appendix"]
grad_rows = []
for n, entries in grad_entries.items():
    for method, e in entries.items():
        grad_rows.append({"method": GRAD_LABEL[method], "size": n,
                          "time": (f"{e['median_s'] * 1e3:.3g} ± {e['iqr_s'] * 1e3 / 2:.1g}" if e["median_s"] is not None
                                   else f"failed: {e['error']}")})
grad_table = pd.DataFrame(grad_rows).pivot(index="method", columns="size", values="time")
grad_table = grad_table.reindex([GRAD_LABEL[m] for m in GRAD_LABEL if GRAD_LABEL[m] in grad_table.index]).fillna("–")
grad_table.columns = [f"n = {n:,} (ms)" for n in grad_table.columns]
grad_table

# %% figure="gradient-time" alt="Log-log plot of gradient time against vector length for the JAX and PyTorch gradient methods, eager and compiled" tags=["appendix-input"]
GRAD_STYLE = {"jax/eager": ("jax", "--", "o"), "jax/jit": ("jax", "-", "o"), "jax/jit-grad-sum": ("jax", ":", "D"),
              "torch/loop": ("torch", "-.", "x"), "torch/autograd": ("torch", "-", "^"),
              "torch/func": ("torch", "--", "v"), "torch/func+compile": ("torch", ":", "s")}
fig, ax = plt.subplots()
for method, (colour, line, marker) in GRAD_STYLE.items():
    ns = [n for n in grad_sizes if method in grad_timings[n]]
    if not ns:
        continue
    ts = [grad_timings[n][method] for n in ns]
    med = np.array([t.median_s for t in ts])
    ax.errorbar(ns, med, yerr=[med - [t.q1_s for t in ts], [t.q3_s for t in ts] - med], color=viz.COLORS[colour],
                linestyle=line, marker=marker, markersize=5, capsize=2, label=GRAD_LABEL[method])
ax.set(xscale="log", yscale="log", xlabel="vector length n (float32 elements)", ylabel="time per gradient (s)",
       title=f"Gradient of f over a vector ({main_device.upper()})")
ax.legend(fontsize=7)
plt.show()

# %% [markdown] tags=["appendix"] summary="Second order: a Hessian-vector product"
# ### Second order: a Hessian-vector product
#
# For the scalar $g(x) = \sum_i f(x_i)$, the Hessian is diagonal with entries $f''(x_i)$, so
# $H v = f''(x) \odot v$ is known exactly. Both frameworks compute it forward-over-reverse, the
# recommended way (`jvp` of `grad`: `jax.jvp` and `torch.func.jvp`), each eager and compiled
# (`jax.jit`, `torch.compile`), and PyTorch also by double backward
# (`torch.autograd.functional.hvp`, reverse-over-reverse).

# %% tags=["pair:hvp:torch", "appendix"]
def sum_f_torch(x):
    return f_torch(x).sum()


def hvp_torch(x, v):  # forward over reverse: the jvp of the gradient
    return torch.func.jvp(torch.func.grad(sum_f_torch), (x,), (v,))[1]


hvp_torch_compiled = torch.compile(hvp_torch, dynamic=False)


def hvp_double_backward_torch(x, v):  # reverse over reverse
    return torch.autograd.functional.hvp(sum_f_torch, x, v)[1]

# %% tags=["pair:hvp:jax", "appendix"]
def hvp_jax(x, v):  # forward over reverse: the jvp of the gradient
    return jax.jvp(jax.grad(sum_f_jax), (x,), (v,))[1]


hvp_jax_jit = jax.jit(hvp_jax)

# %% tags=["appendix-input", "appendix"]
x_np = rng.uniform(0, 4 * np.pi, hvp_size).astype(np.float32)
v_np = rng.standard_normal(hvp_size).astype(np.float32)
x_jax, v_jax = (jax.device_put(a, jax_devices[main_device]) for a in (x_np, v_np))
x_torch, v_torch = (torch.from_numpy(a).to(torch_devices[main_device]) for a in (x_np, v_np))
hvp_fns = {
    "torch/func": partial(hvp_torch, x_torch, v_torch),
    "torch/func+compile": partial(hvp_torch_compiled, x_torch, v_torch),
    "torch/double-backward": partial(hvp_double_backward_torch, x_torch, v_torch),
    "jax/eager": partial(hvp_jax, x_jax, v_jax),
    "jax/jit": partial(hvp_jax_jit, x_jax, v_jax),
}
HVP_LABEL = {"jax/eager": "JAX jvp(grad)", "jax/jit": "JAX jit(jvp(grad))",
             "torch/func": "PyTorch torch.func jvp(grad)", "torch/func+compile": "PyTorch torch.compile(jvp(grad))",
             "torch/double-backward": "PyTorch double backward"}
exact_hvp = functions.d2f(x_np.astype(np.float64)) * v_np
# one part: the ladder timed first, then the values, checked (sweeps.checked)
hvp_run = parts(sweeps.part_name("hvp", hvp_size), partial(sweeps.checked, hvp_fns, exact_hvp),
                repeats=repeats, min_repeat_s=min_repeat_s, decode=sweeps.Ladder.saved)
hvp_entries, hvp_error = hvp_run.entries, hvp_run.errors
assert max(hvp_error.values()) < 1e-4, hvp_error
hvp_table = tables.ladder_table(hvp_entries, labels=HVP_LABEL, unit="ms")
hvp_table.insert(0, "max |error|", [hvp_error.get(m) for m in hvp_entries])
hvp_table

# %% [markdown]
# ### A control: the same races without sin and cos
#
# $f$ spends most of its arithmetic in `sin` and `cos`, and each compiler brings its own code for
# them. The control $g$ is $f$ with `sin` and `cos` replaced by their Taylor polynomials (degree 7
# and 6, by Horner's rule): the same shape, one float32 read and one written per element, fused into
# one loop by either compiler, with multiplies and adds only. Its values are not $f$'s; it is there
# to be timed. It runs on the same ladders, in the same harness, at the headline's sizes only: the
# largest size of the jit sweep and of the gradient sweep. Its verdicts are labelled "control: no
# sin/cos".


# %% tags=["pair:control:torch"]
def sin_poly(x):  # x - x³/6 + x⁵/120 - x⁷/5040, multiplies and adds only
    x2 = x * x
    return x * (1 - x2 * (1 / 6 - x2 * (1 / 120 - x2 * (1 / 5040))))


def cos_poly(y):  # 1 - y²/2 + y⁴/24 - y⁶/720
    y2 = y * y
    return 1 - y2 * (1 / 2 - y2 * (1 / 24 - y2 * (1 / 720)))


def g_torch(x):  # f without sin and cos
    return 0.2 * x + sin_poly(x) + cos_poly(2 * x)


def g_static(x):
    return g_torch(x)


def g_dynamic(x):
    return g_torch(x)


def g_cudagraphs(x):
    return g_torch(x)


g_torch_static = torch.compile(g_static, dynamic=False)
g_torch_dynamic = torch.compile(g_dynamic, dynamic=True)
g_torch_cudagraphs = torch.compile(g_cudagraphs, mode="reduce-overhead", dynamic=False)


def vmap_grad_g_torch(x):
    return torch.func.vmap(torch.func.grad(g_torch))(x)


vmap_grad_g_torch_compiled = torch.compile(vmap_grad_g_torch, dynamic=False)


def grad_sum_g_torch(x):
    x = x.detach().requires_grad_()
    (grad,) = torch.autograd.grad(g_torch(x).sum(), x)
    return grad


# %% tags=["pair:control:jax"]
def sin_poly_jax(x):  # x - x³/6 + x⁵/120 - x⁷/5040, multiplies and adds only
    x2 = x * x
    return x * (1 - x2 * (1 / 6 - x2 * (1 / 120 - x2 * (1 / 5040))))


def cos_poly_jax(y):  # 1 - y²/2 + y⁴/24 - y⁶/720
    y2 = y * y
    return 1 - y2 * (1 / 2 - y2 * (1 / 24 - y2 * (1 / 720)))


def g_jax(x):  # f without sin and cos
    return 0.2 * x + sin_poly_jax(x) + cos_poly_jax(2 * x)


g_numpy = g_jax  # multiplies and adds only: the same function runs on NumPy arrays
g_jit = jax.jit(g_jax)


def vmap_grad_g_jax(x):
    return jax.vmap(jax.grad(g_jax))(x)


vmap_grad_g_jax_jit = jax.jit(vmap_grad_g_jax)


def sum_g_jax(x):
    return g_jax(x).sum()


grad_sum_g_jax_jit = jax.jit(jax.grad(sum_g_jax))

# %% tags=["appendix-input", "appendix"]
# The transcendental primitives in each function's jaxpr (control.transcendentals): f's and its
# gradient's, and none in g's
x_small = jnp.linspace(0, 4 * np.pi, 8, dtype=jnp.float32)
in_jaxpr = {
    name: sorted(control.transcendentals(fn, x_small))
    for name, fn in {
        "f": f_jax,
        "jax.vmap(jax.grad(f))": vmap_grad_jax,
        "g": g_jax,
        "jax.vmap(jax.grad(g))": vmap_grad_g_jax,
    }.items()
}
assert not in_jaxpr["g"] and not in_jaxpr["jax.vmap(jax.grad(g))"] and in_jaxpr["f"], in_jaxpr
pd.Series(
    {k: ", ".join(v) or "none" for k, v in in_jaxpr.items()}, name="transcendental primitives"
).to_frame()

# %% tags=["appendix-input", "appendix"]
G_RUNGS = {
    "torch/eager": g_torch,
    "torch/compile": g_torch_static,
    "torch/compile-dynamic": g_torch_dynamic,
    "torch/compile-cudagraphs": g_torch_cudagraphs,
    "jax/eager": g_jax,
    "jax/jit": g_jit,
    "numpy/numpy": g_numpy,
}
G_GRAD_RUNGS = {
    "torch/autograd": grad_sum_g_torch,
    "torch/func": vmap_grad_g_torch,
    "torch/func+compile": vmap_grad_g_torch_compiled,
    "jax/eager": vmap_grad_g_jax,
    "jax/jit": vmap_grad_g_jax_jit,
    "jax/jit-grad-sum": grad_sum_g_jax_jit,
}


def control_jit_at(device, n):
    """One part: the control's ladder at (device, n), timed, then each value against g (float64)."""
    x_np = rng.uniform(0, 4 * np.pi, n).astype(np.float32)
    return sweeps.checked(
        candidates(device, n, G_RUNGS, x_np),
        control.exact(x_np),
        repeats=repeats,
        min_repeat_s=min_repeat_s,
    )


n_control, n_control_grad = (
    sizes[-1],
    grad_sizes[-1],
)  # the headline's sizes: the control adds no other
control_jit = parts.drawn(rng,
    sweeps.part_name("control-jit", main_device, n_control),
    control_jit_at,
    main_device,
    n_control,
    decode=sweeps.Ladder.saved,
)
control_grad = parts.drawn(rng,
    sweeps.part_name("control-grad", main_device, n_control_grad),
    gradients_at,
    n_control_grad,
    G_GRAD_RUNGS,
    control.exact_grad,
    decode=sweeps.Ladder.saved,
)
# float32 rounding relative to g's largest value on [0, 4π]: its errors are relative
scale_g = {
    "jit": float(np.max(np.abs(control.exact([0.0, 4 * np.pi])))),
    "gradient": float(np.max(np.abs(control.exact_grad([0.0, 4 * np.pi])))),
}
control_errors = {
    (race, m): e / scale_g[race]
    for race, ladder in (("jit", control_jit), ("gradient", control_grad))
    for m, e in ladder.errors.items()
}
assert max(control_errors.values()) < 1e-5, control_errors
control_table = pd.concat(
    {
        f"g at {n_control:,}": tables.ladder_table(control_jit.entries, labels=LABEL, unit="ms"),
        f"g' at {n_control_grad:,}": tables.ladder_table(
            control_grad.entries, labels=GRAD_LABEL, unit="ms"
        ),
    }
)
control_table

# %% tags=["appendix-input", "appendix"]
# XLA's CPU options for math, tried on jax.jit's f: each in a child process of its own
# (control.flag_trials), the first with XLA's defaults; and the xla_cpu_ names the installed
# jaxlib holds (control.cpu_options)
XLA_OPTIONS = [
    "",
    "--xla_cpu_enable_fast_math=true --xla_cpu_fast_math_honor_functions=false",
    "--xla_cpu_enable_platform_dependent_math=true",
    "--xla_cpu_prefer_vector_width=512",
]


def xla_options_tried(n):
    """One part: f under jax.jit at length n with each of XLA_OPTIONS, and jaxlib's option names."""
    x_np = rng.uniform(0, 4 * np.pi, n).astype(np.float32)
    return {
        "rows": control.flag_trials(
            f_jax, x_np, XLA_OPTIONS, repeats=repeats, min_repeat_s=min_repeat_s
        ),
        "options": control.cpu_options(),
    }


xla_options = (
    parts.drawn(rng, sweeps.part_name("xla-options", n_control), xla_options_tried, n_control
    )
    if main_device == "cpu"
    else {"rows": [], "options": None}
)
pd.DataFrame(xla_options["rows"])

# %% [markdown]
# ## 3. Results

# %% tags=["appendix-input"]
big, small = sizes[-1], sizes[0]
summary_rows = []
for device in devices:
    for method in methods:
        e_big, e_small = jit_entries[device, big].get(method), jit_entries[device, small].get(method)
        if e_big is None:
            continue
        summary_rows.append({"device": device, "method": LABEL[method],
                             f"n = {small:,} (µs)": None if e_small["median_s"] is None else e_small["median_s"] * 1e6,
                             f"n = {big:,} (µs)": None if e_big["median_s"] is None else e_big["median_s"] * 1e6,
                             f"memory floor at {big:,} (µs)": floor_s(device, big) * 1e6,
                             "crossover n*": fits.get((device, method), {}).get("crossover n*"),
                             "compile (s)": e_big["compile_s"]})
results = pd.DataFrame(summary_rows).set_index(["device", "method"])
results.round(2)

# %% [markdown]
# ## 4. Conclusion
#
# Written from the results record by `sidebyside.posts.jit_autograd.report`, so that every number below is the run's.

# %% tags=["remove_input", "collapsed"] summary="The conclusion in full"
metrics = report.summarise(
    conditions=conditions, startup=startup, bandwidth=bandwidth, jit_entries=jit_entries,
    floors={(d, n): floor_s(d, n) for d, n in jit_entries}, compile_s=compile_s, fits=fits,
    grad_entries=grad_entries, grad_errors=grad_errors, hvp_entries=hvp_entries, hvp_size=hvp_size,
    pitfall=pitfall, main_device=main_device, back_to_back=back_to_back, kernel=kernel_times,
    cores=cores_busy, control={
        "jit": {"device": main_device, "size": n_control, "ladder": control_jit.entries},
        "autograd": {"device": main_device, "size": n_control_grad, "ladder": control_grad.entries},
        "xla_flags": xla_options["rows"], "xla_options": xla_options["options"],
        "jaxlib": (xla_options["options"] or {}).get("jaxlib", "")})
if parts.log:  # a run in parts: which run measured which part
    metrics["parts"] = parts.log
Markdown("\n\n".join(filter(None, [report.conclusion(metrics),
                                    checkpoints.describe_parts(parts.log)])))

# %% tags=["remove_cell"]
record = provenance.save_results(metrics)
record["metrics"]["jit"][main_device][str(sizes[-1])]["best"]


# %% tags=["remove_cell", "colab-compare"]
# Your figures beside the post's, verdict by verdict.
from sidebyside.publish import reproduce

reproduce.in_notebook("jit-and-autograd-timing", record, REPOSITORY)
