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
#     compared: torch.nn.functional.grid_sample, PyTorch's built-in, against a port
#       in pure JAX (jnp compiled by XLA) in every mode, padding, dimensionality and
#       dtype, first for identical outputs and gradients, then for speed per kernel
#       and per call; this project's own C++ kernel, called from JAX through XLA's FFI,
#       is raced separately and labelled.
#     date: '2026-11-22'
#     description: A JAX grid_sample measured against PyTorch's own kernel in every
#       mode, padding, dimension and dtype, for outputs and both gradients, and timed
#       honestly.
#     metrics:
#     - parity
#     - speed
#     slug: grid-sample-parity
#     tags:
#     - jax
#     - pytorch
#     - grid_sample
#     - parity
#     - benchmark
#     title: 'grid_sample in JAX, identical to PyTorch''s: the proof and the price'
#     under_test:
#     - grid_sample
# ---

# %% [markdown]
# # grid_sample in JAX, identical to PyTorch's
#
# Can a JAX port of `torch.nn.functional.grid_sample` give *the same numbers* as PyTorch (outputs, input gradients and grid gradients) in every mode, padding, dimensionality and dtype, and how fast is it, per kernel and per call?

# %% tags=["colab-install"]
# Run this post yourself: on Colab this installs the library and the versions the post ran with.
import subprocess
import sys

REPOSITORY = "sidebyside-ml/pytorch-vs-jax@main"  # the site's repository@branch (_config.yml); a fork names its own
if "google.colab" in sys.modules:
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "torchviz", "timm==1.0.31",
                    f"sidebyside @ git+https://github.com/{REPOSITORY}"], check=True)
from sidebyside.run import colab

colab.setup("grid-sample-parity", REPOSITORY)

# %% tags=["parameters"]
# Parity: dtypes compared (every mode x padding x align_corners x 2-D/3-D for each).
parity_dtypes = ["float32"]
parity_seed = 0
# How the JAX side runs in the parity table: "jit", "vmap" (over the batch) or "none" (op by op).
parity_transform = "jit"
# True: the parity tables and the affine case take a sample of their configurations in which every mode, padding,
# align_corners and dimensionality appears once (the smoke profile's; the test suite runs every configuration).
parity_sample = False
# The large non-power-of-two case (0-255 values under a 45-degree warp): the 2-D and 3-D image sizes and the modes.
affine_size = [345, 456]
affine_size_3d = [5, 40, 300]
affine_modes = ["bilinear", "bicubic"]
# The photograph, resized to image_size x image_size pixels.
image_size = 96
# Speed: shapes per configuration, (N, C, H, W) or (N, C, D, H, W), and repeats.
bench_sizes = {"2d_small": [4, 3, 64, 64], "2d_large": [2, 3, 96, 96], "3d": [2, 4, 8, 16, 16]}
bench_modes = ["nearest", "bilinear", "bicubic"]
bench_repeats = 3
# Cores for both libraries in the speed section (None: every core this process may use).
bench_threads = None
bench_min_repeat_s = 0.02
# Copies of the inputs that the kernel time's chain goes round (None: enough to fill twice the last-level cache).
bench_copies = None
# Pallas layouts timed where the Pallas kernels run (a GPU): "points" is the one grid_sample takes; "channels" blocks
# the channels, which only many channels can use.
bench_pallas_layouts = ["points", "channels"]
# A run in parts: the parity tables and each benchmark configuration are saved to this file as they
# finish and read back by the next run; no part starts that would end past run_budget_s.
checkpoint_file = ""       # "": off, everything is measured in this run (the benchmark in one process)
run_budget_s = 0           # seconds; 0: no budget

# %% tags=["remove_cell", "colab-profile"]
# The settings to run with: "smoke" (the test suite's small sizes, a minute), "cpu", or "gpu" (a GPU post's own
# settings, on a GPU runtime); "auto" takes the post's own on a GPU runtime and smoke elsewhere.
PROFILE = "auto"
globals().update(colab.parameters("grid-sample-parity", PROFILE, REPOSITORY))

# %% [markdown] tags=["appendix"]
# ## Setup
#
# Both frameworks run on the same device when they can see a GPU, on the CPU otherwise. Everything below is float32 unless a dtype is named; float64 runs inside `jax.enable_x64(True)`, a context that leaves the rest of the process in float32.

# %% tags=["appendix"]
from sidebyside.lab import notebook

# no conditions set here, as before: the speed section's benchmark sets them in a fresh process of its own
setup = notebook.setup(same_conditions=False, warm=None)
record, on_gpu, torch_device = setup.provenance, setup.on_gpu, setup.torch_device.type

import functools
import subprocess
import sys
import textwrap

import jax
import jax.numpy as jnp
import matplotlib.cbook
import matplotlib.pyplot as plt
import matplotlib.ticker
import numpy as np
import pandas as pd
import torch
import torch.nn.functional as F
from IPython.display import Markdown

from sidebyside import grid_sample
from sidebyside.grid_sample import bench as sampling_bench
from sidebyside.grid_sample import choose_implementation, parity
from sidebyside.grid_sample import goals as sampling_goals
from sidebyside.lab import progress, tables, timing, viz, words
from sidebyside.posts.grid_sample import report
from sidebyside.run import checkpoints, provenance

torch.manual_seed(0)
key = jax.random.key(0)
parts = setup.parts(checkpoint_file, run_budget_s)  # a run in parts (see the parameters)
provenance.table(record)

# %% [markdown]
# ## 1. What PyTorch computes
#
# `grid_sample(input, grid)` reads `input` (N, C, H, W) at the points of `grid` (N, H_out, W_out, 2), given as (x, y) in [-1, 1]. The details that a port has to get right, all taken from PyTorch's ATen kernels, are listed in the appendix (what a port must get right).

# %% [markdown] tags=["appendix"] summary="What a port must get right: PyTorch's arithmetic in detail"
# - **Unnormalisation, and how it is rounded.** With `align_corners=True`, -1 and 1 are the *centres* of the corner pixels: x = (g + 1)(W - 1)/2. With `False` they are the *outer edges*: x = ((g + 1)W - 1)/2. PyTorch's CUDA kernels and its 2-D CPU kernel compute the multiply and the subtraction as one fused multiply-add (one rounding); its 3-D CPU kernel rounds the product and the difference apart. An ulp more or less in a coordinate of 400 pixels is 3e-5 of a pixel, which the slope of a 0-255 image turns into an error of 1e-5 of the scale, and which now and then moves a coordinate across a pixel boundary, where the grid gradient changes completely. `sidebyside.grid_sample` computes these roundings explicitly (an exact emulation of the fused multiply-add from exact partial products and error-free additions), so they do not depend on what XLA, Triton or g++ decide to fuse.
# - **Padding acts on the coordinate, before interpolation.** `border` clamps it to [0, W - 1]; `reflection` mirrors it about -0.5 and W - 0.5 when `align_corners=False` (about 0 and W - 1 otherwise), then clamps. Bicubic applies the padding to each of its 16 integer taps instead.
# - **Bicubic** is Keys' kernel with A = -0.75. **Nearest** rounds half to even.
# - **Gradients.** A clamped coordinate, *including one exactly on the limit*, passes no gradient to the grid; nearest passes none at all. Writing the clamp as `jnp.clip` would hand half a gradient to a point sitting exactly on the border, so `sidebyside.grid_sample` writes it with `where`.
#
# `sidebyside.grid_sample` is a package with a small face: `grid_sample` checks its arguments and picks a path; one module (`taps`) holds the arithmetic above, and every path builds on it. The plain `jax.numpy` path (`implementation="xla"`) has no custom derivative rule, so `jit`, `vmap`, `grad` and forward mode all apply.
#
# On a CUDA GPU, float32 calls (4-D in every mode, 5-D in nearest and trilinear) take two Pallas kernels (Triton), one for the forward pass and one for the backward pass, which do what PyTorch's CUDA kernel does: one pass per output point, the coordinates and weights computed once and kept in registers while the channels are read, the input gradient scattered with atomic adds. They build their taps with the same `taps` module and take the grid gradient as the forward-mode derivative of those same weights; the tests run them in Pallas' interpreter against PyTorch on the CPU. On a CPU, float32 calls (2-D and 3-D) go to a C++ kernel called through XLA's FFI (`sidebyside.grid_sample.native`, built with `g++` on first use and verified by size and hash before it is loaded), which splits the batch over XLA's own CPU thread pool as PyTorch splits it over its threads. Both kernels carry a custom VJP: `jit`, `vmap` and `grad` work; forward mode or a gradient of a gradient raises an error that says to pass `implementation="xla"`.

# %% [markdown]
# ## 2. Parity, configuration by configuration
#
# A mean squared error over [0, 1] images under one gentle warp, the evidence a public port offers for being "near-identical", cannot see a wrong pixel: a pixel that is off by 0.5 in a 128 x 128 RGB image moves the MSE by 5e-6. So we report the **largest** absolute and relative error, for the output and for both gradients, over grids built to hit the hard cases.

# %% [markdown] tags=["appendix"] summary="Method: how parity is tested"
# For each configuration both frameworks get the same input, the same grid and the same output cotangent (rounded to the dtype once, so the inputs are bit-identical). Half of the grid points are uniform in [-2, 2]; the other half sit where ports go wrong: exactly on pixel centres, on pixel edges, at half-pixels, on the border, and far outside (up to 1000 image widths; 9.5 in half precision, whose spacing there is wider than a pixel). PyTorch runs on the device JAX runs on (its CUDA kernel on a GPU), except in half precision, which PyTorch's CUDA kernels compute in float32 and its CPU kernels, like this port, in the dtype: there PyTorch runs on the CPU. The JAX side runs the way the `parity_transform` parameter says (this run: shown below the table); the test suite repeats the comparison op by op, under `jit` and under `vmap`. Errors are reported relative to the largest magnitude of PyTorch's result.

# %% tags=["appendix-input"]
def reference_device(config):
    """PyTorch's device for a configuration: JAX's, except half precision, which PyTorch's CUDA kernels compute
    in float32 and its CPU kernels (like this port) in the dtype."""
    return torch_device if config.dtype in ("float32", "float64") else "cpu"


# Pure JAX: jnp compiled by XLA, and on a GPU float32 through the Pallas kernels ("auto" there);
# this project's C++ kernel ("native", the CPU's "auto" in float32) is tested apart, below.
pure_jax = "auto" if on_gpu else "xla"


def parity_configs(dtypes, modes=("nearest", "bilinear", "bicubic")):
    configs = [c for c in parity.configs(tuple(dtypes)) if c.mode in modes]
    return report.each_option_once(configs) if parity_sample else configs


def parity_rows_for(dtypes, implementation):
    return {config.key: parity.measure(config, seed=parity_seed, transform=parity_transform,
                                       implementation=implementation, torch_device=reference_device(config))
            for config in progress.bar(parity_configs(dtypes), desc=f"parity ({implementation})")}


parity_rows = parts("parity", parity_rows_for, parity_dtypes, pure_jax)

parity_table = pd.DataFrame.from_dict(parity_rows, orient="index")
parity_table.index.name = "mode/padding/align_corners/dims/dtype"
shown = parity_table[["max_abs_err", "max_rel_err", "grad_input_max_abs_err", "grad_input_max_rel_err",
                      "grad_grid_max_abs_err", "grad_grid_max_rel_err", "tolerance", "passed"]]
with pd.option_context("display.max_rows", 200, "display.float_format", "{:.2e}".format):
    display(shown)

# %% tags=["remove_input"]
Markdown(report.parity_note(parity_rows, transform=parity_transform, backend=jax.default_backend(),
                                               torch_device=torch_device))

# %% [markdown]
# ### This project's C++ kernel, tested apart
#
# On a CPU, `grid_sample` sends float32 calls to this project's C++ kernel (through XLA's FFI) unless told otherwise. It is not part of JAX, so the table above tests pure JAX, and the kernel is held to the same tolerances here and gets a verdict of its own, labelled. A GPU has no such kernel.

# %% tags=["appendix-input"]
native_rows = {} if on_gpu else parts("parity_native", parity_rows_for, ["float32"], "native")
if native_rows:
    native_table = pd.DataFrame.from_dict(native_rows, orient="index")
    native_table.index.name = "mode/padding/align_corners/dims/dtype"
    with pd.option_context("display.max_rows", 200, "display.float_format", "{:.2e}".format):
        display(native_table[[*report.ERROR_COLUMNS, "passed"]])
native_view = report.native_parity_verdict({"parity_native": native_rows, "device": record["device"],
                                            "parity_transform": parity_transform})
Markdown(native_view.sentence if native_view else "No C++ kernel on this device: nothing to test apart.")

# %% [markdown]
# ### The large non-power-of-two case
#
# The grids above are small. PyTorch's own kind of reference case is larger: an image of integers 0-255 whose sides are not powers of two, warped by a 45-degree rotation from `affine_grid`. There a coordinate rounded once where PyTorch rounds twice (or the reverse) is off by an ulp of a few hundred pixels, and with image values of 255 that is an error above the 1e-5 tolerance; with sides that are powers of two the product is exact and nothing shows. On a GPU the same case also compares PyTorch's CUDA kernel with its CPU kernel, the yardstick for what "the same numbers" can mean across devices.

# %% tags=["appendix-input"]
def affine_rows_for(modes, size_2d, size_3d):
    rows = {}
    for config in progress.bar(parity_configs(["float32"], modes), desc="affine case"):
        size = tuple(size_2d if config.dims == 2 else size_3d)
        row = parity.measure(config, transform="jit", implementation=pure_jax, case="affine",
                             torch_device=torch_device, size=size)
        if on_gpu:
            yardstick = parity.measure_torch_devices(config, case="affine", device="cuda", size=size)
            row.update({f"torch_cuda_vs_cpu_{k}": yardstick[k] for k in report.ERROR_COLUMNS})
        rows[config.key] = row
    return rows


# affine_modes empty (the gpu profile's, for its budget): the case is the cpu run's
affine_rows = parts("affine", affine_rows_for, affine_modes, affine_size, affine_size_3d) if affine_modes else {}
if affine_rows:
    affine_table = pd.DataFrame.from_dict(affine_rows, orient="index")
    affine_table.index.name = "mode/padding/align_corners/dims/dtype"
    affine_shown = affine_table[[c for c in affine_table.columns if c.endswith("max_rel_err")] + ["passed"]]
    with pd.option_context("display.max_rows", 200, "display.float_format", "{:.2e}".format):
        display(affine_shown)

# %% tags=["remove_input"]
Markdown(report.affine_note(affine_rows, affine_size, affine_size_3d) if affine_rows else words.from_cpu_run(
    "The large non-power-of-two case", "is cut for the GPU run's budget"))

# %% [markdown]
# ## 3. A photograph, warped both ways
#
# Grace Hopper (a sample image that ships with matplotlib), rotated by 25°, shrunk to 70% and shifted, so that part of each output samples outside the picture: that is where the padding modes differ. Each row is one mode and padding; the right column is the absolute difference between the frameworks, on its own colour scale.

# %% tags=["appendix-input"]
photo = plt.imread(matplotlib.cbook.get_sample_data("grace_hopper.jpg", asfileobj=False))
photo = torch.from_numpy(photo.astype(np.float32) / 255).permute(2, 0, 1)[None]  # (1, 3, H, W) in [0, 1]
photo = F.interpolate(photo, size=(image_size, image_size), mode="bilinear", antialias=True, align_corners=False)
angle = np.deg2rad(25)
theta = torch.tensor([[[np.cos(angle) / 0.7, -np.sin(angle) / 0.7, 0.15],
                       [np.sin(angle) / 0.7, np.cos(angle) / 0.7, -0.1]]], dtype=torch.float32)
affine_grid = F.affine_grid(theta, list(photo.shape), align_corners=False)  # (1, H, W, 2)
photo_jax, grid_jax = jnp.asarray(photo.numpy()), jnp.asarray(affine_grid.numpy())
warp_modes = [(mode, padding) for mode in ("nearest", "bilinear", "bicubic") for padding in ("zeros", "border", "reflection")]

# %% tags=["pair:warp:torch"]
torch_warps = {(mode, padding): F.grid_sample(photo, affine_grid, mode=mode, padding_mode=padding,
                                              align_corners=False)[0].numpy()
               for mode, padding in warp_modes}

# %% tags=["pair:warp:jax"]
jax_warps = {(mode, padding): np.asarray(grid_sample(photo_jax, grid_jax, mode=mode, padding_mode=padding,
                                                     align_corners=False)[0])
             for mode, padding in warp_modes}

# %% tags=["appendix-input", "appendix"] summary="The photograph, warped in every mode"
warp_diff = {f"{m}/{p}": float(np.abs(torch_warps[m, p] - jax_warps[m, p]).max()) for m, p in warp_modes}
pd.Series(warp_diff, name="max |PyTorch - JAX| (pixel values in [0, 1])").to_frame()

# %% figure="photo-warps" alt="Grace Hopper's photograph rotated and shrunk by PyTorch and by JAX in nine mode and padding combinations, with the difference images" tags=["appendix-input", "appendix"]
fig, axes = plt.subplots(len(warp_modes), 3, figsize=(6.6, 2.0 * len(warp_modes)))
for row, (mode, padding) in enumerate(warp_modes):
    torch_img, jax_img = torch_warps[mode, padding], jax_warps[mode, padding]
    diff = np.abs(torch_img - jax_img).max(axis=0)
    panels = [(np.clip(torch_img.transpose(1, 2, 0), 0, 1), "PyTorch"), (np.clip(jax_img.transpose(1, 2, 0), 0, 1), "JAX")]
    for col, (img, who) in enumerate(panels):
        axes[row, col].imshow(img)
        axes[row, col].set_title(f"{who}: {mode}, {padding}", fontsize=8, color=viz.color("torch" if who == "PyTorch" else "jax"))
    im = axes[row, 2].imshow(diff, cmap="magma", vmin=0, vmax=max(float(diff.max()), 1e-7))
    axes[row, 2].set_title(f"|difference|, max {diff.max():.1e}", fontsize=8)
    fig.colorbar(im, ax=axes[row, 2], fraction=0.046, pad=0.02, format="%.0e")
for ax in axes.ravel():
    ax.set_xticks([]), ax.set_yticks([]), ax.grid(False)
fig.suptitle("An affine warp, PyTorch vs JAX (axes: pixels)", fontsize=10)
fig.tight_layout(rect=(0, 0, 1, 0.985))
plt.show()

# %% [markdown]
# ## 4. Speed: the kernel and the call
#
# Two different questions get two different numbers, both measured with PyTorch and JAX in one interleaved run (`sidebyside.lab.timing.compare`: first call and compilation apart, every result waited for, median and quartiles of the repeats), float32, a random affine warp; forward+backward is the output and the gradient with respect to both input and grid.
#
# What is timed is one step, written below as each framework spells it: PyTorch's `F.grid_sample`, its gradients from `torch.autograd.grad`, eager and under `torch.compile`; JAX's `grid_sample` (the port under test), its gradients from `jax.vjp`, under `jax.jit`. Both steps return the output with the gradients, as PyTorch's autograd computes it (otherwise XLA would drop the forward wherever the gradients do not need it, as in nearest). The JAX cell also holds the naive port (gather the four corners of every point from a zero-padded image, weight and sum), timed as the baseline most ports use.

# %% tags=["pair:step:torch", "collapsed"] summary="The code: the steps timed, forward and backward"
def torch_step(x, grid, cotangent=None, *, mode="bilinear", padding_mode="zeros", align_corners=False,
               with_grad=False, sample=F.grid_sample):
    out = sample(x, grid, mode=mode, padding_mode=padding_mode, align_corners=align_corners)
    if not with_grad:
        return out
    return out, torch.autograd.grad(out, (x, grid), cotangent)


# The compiled rung: F.grid_sample compiled by Inductor for static shapes (the backward through AOTAutograd),
# called as torch_step(x, grid, cotangent, sample=grid_sample_compiled).
grid_sample_compiled = torch.compile(F.grid_sample, dynamic=False)

# %% tags=["pair:step:jax", "collapsed"]
def jax_step(x, grid, cotangent=None, *, mode="bilinear", padding_mode="zeros", align_corners=False,
             with_grad=False, implementation="auto", pallas_layout="points"):
    def sample(a, b):
        return grid_sample(a, b, mode=mode, padding_mode=padding_mode, align_corners=align_corners,
                           implementation=implementation, pallas_layout=pallas_layout)

    if not with_grad:
        return sample(x, grid)
    out, vjp = jax.vjp(sample, x, grid)
    return out, vjp(cotangent)


jax_step_jit = jax.jit(jax_step, static_argnames=("mode", "padding_mode", "align_corners", "with_grad",
                                                  "implementation", "pallas_layout"))


def jax_naive(x, grid, align_corners=False):
    """The naive port: 4-D bilinear with zeros padding, the four corners gathered from a zero-padded image."""
    n, c, h, w = x.shape
    if align_corners:
        px, py = (grid[..., 0] + 1) * (w - 1) / 2, (grid[..., 1] + 1) * (h - 1) / 2
    else:
        px, py = ((grid[..., 0] + 1) * w - 1) / 2, ((grid[..., 1] + 1) * h - 1) / 2
    padded = jnp.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
    x0, y0 = jnp.floor(px), jnp.floor(py)
    batch = jnp.arange(n)[:, None, None]

    def corner(yy, xx):
        yi = jnp.clip(yy + 1, 0, h + 1).astype(jnp.int32)
        xi = jnp.clip(xx + 1, 0, w + 1).astype(jnp.int32)
        return jnp.moveaxis(padded[batch, :, yi, xi], -1, 1)  # (N, C, H_out, W_out)

    wx1, wy1 = (px - x0)[:, None], (py - y0)[:, None]
    wx0, wy0 = 1 - wx1, 1 - wy1
    return (corner(y0, x0) * wy0 * wx0 + corner(y0, x0 + 1) * wy0 * wx1
            + corner(y0 + 1, x0) * wy1 * wx0 + corner(y0 + 1, x0 + 1) * wy1 * wx1)


jax_naive_jit = jax.jit(jax_naive, static_argnames="align_corners")

# %% [markdown]
# The kernel time chains many calls in one program, each on its own copy of the inputs (the method is in the appendix below). PyTorch runs the chain as a loop, captured as one CUDA graph on a GPU so that no launch overhead is left; JAX traces the same loop into one jitted program, an `optimization_barrier` making each call wait for the one before without moving any data. From the second round over the copies on, a copy's input is its output of the round before.

# %% tags=["pair:chain:torch", "collapsed"] summary="The code: the chain timed for kernel time"
def torch_chain(xs, grids, cotangents, *, step, order, with_grad):
    fed = list(xs)
    for i in order:
        out = step(fed[i], grids[i], cotangents[i], with_grad=with_grad)
        # the output as a new leaf: the next call differentiates with respect to it as to a fresh input
        fed[i] = (out[0] if with_grad else out).detach().requires_grad_(with_grad)


def torch_graph(run):
    stream = torch.cuda.Stream()  # warm up on a side stream first, as torch.cuda.graph asks
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        run()
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        run()
    return graph


def torch_replay(graph):
    graph.replay()

# %% tags=["pair:chain:jax", "collapsed"]
@functools.partial(jax.jit, static_argnames=("step", "order"))
def jax_chain(xs, grids, cotangents, *, step, order):
    outs, previous, fed = [], None, list(xs)
    for i in order:
        args = (fed[i], grids[i], cotangents[i])
        if previous is not None:  # wait for the call before, moving no data
            previous, args = jax.lax.optimization_barrier((previous, args))
        previous = step(*args)
        fed[i] = previous[0] if isinstance(previous, tuple) else previous
        outs.append(previous)
    return outs

# %% [markdown] tags=["appendix"] summary="Method: kernel time, the memory floor, call time, the alternatives"
# - **Kernel time**: what one call costs inside a larger compiled program. Many calls are chained in one program, each on its own copy of the inputs, the copies together at least twice the size of the last-level cache (the L2 on a GPU), so that every call reads its inputs from memory rather than from a cache warmed by the previous call: JAX as one jitted program that calls the kernel once per copy, in order, PyTorch as one CUDA graph on a GPU (a loop on the CPU). Neither side moves any data between calls: a `lax.scan` over stacked copies would slice each copy out and write each output back, two copies per call that PyTorch's loop does not make, which would count against JAX. Inside a jitted model, JAX's dispatch is paid once for the whole program, so this is the number that matters there. On a GPU the chain makes at least 32 calls, going round the copies as often as that takes: a chain of two large calls runs about as long as JAX takes to dispatch it, and would time the dispatch, not the kernels.
# - **The memory floor**: the time a call would take if it did nothing but move its data: each array it reads or writes, once (input, grid and output; in forward+backward also the grid, the cotangent and, except in nearest, the input again, and both gradients), at the speed of a plain copy (PyTorch's `copy_` of a buffer four times the last-level cache) measured on the same device in the same run. A kernel's share of the floor's speed is the floor divided by its kernel time: 100% would be a kernel as fast as a copy of its data. Where a kernel is far below it, arithmetic or scattered reads set its pace, not memory.
# - **Per-call time**: a Python loop of calls, as a script that calls `grid_sample` on its own makes them. Each framework's dispatch is included: JAX's costs tens of microseconds per call whatever the size of the problem, PyTorch's about ten, so a small problem can be faster in JAX's kernel and slower in JAX's loop. On a CPU with more than one thread there is a second cost of the same kind: PyTorch's OpenMP threads keep spinning for a while after a call, so the next call finds them awake, while the threads of XLA's pool, which the native kernel shares, go to sleep between calls and are woken for each (measured with an instrumented build of the kernel: `ParallelBatches` in `sidebyside/grid_sample/grid_sample_cpu.cc`). The wake-up is paid inside one program too, where the pool's threads also fall asleep between one call and the next, but it is a fixed cost: it weighs most on the shortest calls, nearest's forward above all, and more per call (inputs in the cache) than in the kernel time (inputs from memory). On a GPU the calls of a repeat are issued back to back and waited for once.
#
# The steps and chains timed are those of the paired cells above, sent to the benchmark's process with cloudpickle (`sidebyside.grid_sample.bench.run`): each contestant is one of them, given its arguments with `functools.partial`.
#
# Both sides' inputs lie in memory their own framework allocated (`sidebyside.grid_sample.chain.torch_tensor`). `torch.from_numpy` would share NumPy's memory, which NumPy asks Linux to back with 2 MiB pages for arrays of 4 MiB and more, while XLA copies into buffers on ordinary 4 KiB pages. A check of PyTorch's CPU kernel on both kinds of page found no difference, but the comparison does not depend on that.
#
# Where `grid_sample` takes a kernel (Pallas on a GPU, native on a CPU), the `jax.numpy` (XLA) path is timed too; in bilinear 2-D forward the naive formulation (gather the four corners of every point from a zero-padded image, weight and sum) is timed as well, as the baseline most ports use. These alternatives run against PyTorch in a second interleaved run, apart from the main pair: interleaved with it, the XLA path's large temporaries cost the call after them page faults, and moved both sides' per-call times (see `sidebyside.grid_sample.bench`). On a GPU the Pallas kernels can also be timed in their second layout (`pallas_layout="channels"`: tiles of points by channels, each point's taps reused across a block of channels), which may suit many channels better, where `bench_pallas_layouts` names it (the gpu profile, whose sizes have 3 channels, does not); `implementation="auto"` keeps the first, which was the faster in every configuration of an earlier run on an H100; the columns "Pallas channels layout / PyTorch" show a run's figures where it timed them. The benchmark runs in a fresh process, `python -m sidebyside.posts.bench grid_sample`, because the thread count of XLA's CPU client is fixed when JAX starts: there both libraries get the same cores. A run in parts (the gpu profile, made in device calls of a few minutes) starts one such process per configuration and saves each configuration as it finishes.

# %% tags=["appendix-input"]
bench_steps = sampling_bench.steps_from(globals())  # the paired cells' steps and chains, by name
bench_run = sampling_bench.run_each({k: tuple(v) for k, v in bench_sizes.items()}, tuple(bench_modes),
                                    part=parts if checkpoint_file else None, repeats=bench_repeats,
                                    min_repeat_s=bench_min_repeat_s, threads=bench_threads, copies=bench_copies,
                                    pallas_layouts=tuple(bench_pallas_layouts), steps=bench_steps)
speed = bench_run["results"]
speed_rows = sampling_goals.speed_table(speed)
speed_rows.insert(0, "JAX implementation", [speed[k]["implementation"] for k in speed_rows.index])
with pd.option_context("display.float_format", "{:.3g}".format, "display.width", 200):
    display(speed_rows)
Markdown(f"{bench_run['device_kind'].upper()}, {words.plural(bench_run['threads'], 'thread')} for both libraries: "
         f"`{bench_run['command']}`")

# %% [markdown] tags=["appendix"] summary="The goals this device is held to"
# The goals this device is held to (`sidebyside.grid_sample.goals.goals`): per call everywhere they are set; on a GPU also each kernel against PyTorch's CUDA kernel (at most 0.8 of its time at 32×3×256², 8×64×128² and 4×8×32×64², forward and forward+backward) and the forward at 32×3×256² at 70% of the memory floor's speed or more.

# %% tags=["appendix-input", "appendix"]
goals = sampling_goals.goals_table(speed, record["device_kind"])
with pd.option_context("display.float_format", "{:.3g}".format, "display.width", 200):
    display(goals.set_index(["config", "goal"]))
Markdown(sampling_goals.goals_summary(goals))

# %% figure="speed-ratios" alt="For each grid_sample configuration, the time per call of pure JAX at its best and of this project's C++ kernel, relative to PyTorch's built-in grid_sample at its best (eager or torch.compile), log scale" tags=["key-figure", "appendix-input"]
def best_call(ladder, framework):
    """The fastest rung of ``framework`` in a row's ladder: (its tool, seconds per call), or (None, nan)."""
    rungs = [(name.split("/", 1)[1], e["median_s"]) for name, e in ladder.items()
             if name.startswith(framework + "/") and e.get("median_s")]
    return min(rungs, key=lambda rung: rung[1]) if rungs else (None, np.nan)


labels = [k for k in speed if speed[k].get("ladder")]
torch_best = {k: best_call(speed[k]["ladder"], "torch") for k in labels}
jax_best = {k: best_call(speed[k]["ladder"], "jax") for k in labels}
fig, ax = plt.subplots(figsize=(7.5, 0.36 * len(labels) + 1.6))
ypos = np.arange(len(labels))
pure = [jax_best[k][1] / torch_best[k][1] for k in labels]
jax_tools = ", ".join(sorted({tool for tool, _ in jax_best.values() if tool}))
ax.hlines(ypos, 1.0, pure, color=viz.COLORS["jax"], lw=2)  # from PyTorch's time to pure JAX's
ax.scatter(pure, ypos, color=viz.COLORS["jax"], s=30, zorder=3, label=f"pure JAX at its best ({jax_tools})")
custom = [k for k in labels if speed[k]["implementation"] == "native"]
if custom:
    ax.scatter([speed[k]["jax_ms"] / 1e3 / torch_best[k][1] for k in custom], [labels.index(k) for k in custom],
               color="black", marker="D", s=18, zorder=3, label="this project's C++ kernel through XLA's FFI")
ax.axvline(1.0, color=viz.COLORS["torch"], lw=2, label="PyTorch's built-in at its best (= 1)")
ax.set_xscale("log")
ticks = [t for t in (0.25, 0.5, 1, 2, 4, 8, 16) if ax.get_xlim()[0] <= t <= ax.get_xlim()[1]]
ax.set_xticks(ticks, [f"{t:g}×" for t in ticks])
ax.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
ax.set_yticks(ypos, [f"{k} (PyTorch: {torch_best[k][0]})" for k in labels], fontsize=7)
ax.invert_yaxis()
ax.set(xlabel="time per call relative to PyTorch's best (log scale; under 1: faster than PyTorch)",
       title=f"grid_sample per call on {record['device']}")
ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.14), ncol=2)
plt.show()

# %% figure="floor-speed" alt="Bar chart of each grid_sample kernel's share of the memory floor's speed, JAX and PyTorch side by side for each configuration, with the goal marked where one is set" tags=["appendix-input", "appendix"] summary="Against the memory floor"
floor_keys = [k for k in speed if speed[k].get("jax_floor_speed") is not None]
if floor_keys:
    fig, ax = plt.subplots(figsize=(7.5, 0.42 * len(floor_keys) + 1.4))
    ypos = np.arange(len(floor_keys))
    ax.barh(ypos - 0.2, [speed[k]["jax_floor_speed"] for k in floor_keys], height=0.4, color=viz.COLORS["jax"],
            label="JAX kernel")
    ax.barh(ypos + 0.2, [speed[k]["torch_floor_speed"] for k in floor_keys], height=0.4, color=viz.COLORS["torch"],
            label="PyTorch kernel")
    floor_goals = [(i, g["limit"]) for i, k in enumerate(floor_keys)
                   for g in sampling_goals.goals(k, speed[k], record["device_kind"]) if g["goal"] == "memory floor"]
    for i, limit in floor_goals:
        ax.plot([limit, limit], [i - 0.4, i], color="black", lw=1.5)
    if floor_goals:
        ax.plot([], [], color="black", lw=1.5, label="goal (JAX)")
    ax.axvline(1.0, color="grey", ls="--", lw=1, label="the floor: a plain copy's speed")
    ax.xaxis.set_major_formatter(matplotlib.ticker.PercentFormatter(1.0))
    ax.set_yticks(ypos, floor_keys, fontsize=7)
    ax.invert_yaxis()
    ax.set(xlabel="share of the memory floor's speed (floor time / kernel time)", ylabel="configuration",
           title=f"How close each kernel comes to moving only its data, {record['device']}")
    ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.12), ncol=3)
    plt.show()

# %% [markdown] tags=["appendix"]
# ### The asynchronous-timing pitfall
#
# JAX usually returns as soon as the work is *queued*. A timer that does not wait for the result (`block_until_ready`) then measures the dispatch, not the computation. Below, the same jitted call (`jax_step_jit` from the paired cells of section 4) timed both ways, through the path `grid_sample` takes on this device and, where that is a kernel, through the XLA path too: whether JAX returns before the work is done depends on the program and the device. The rows marked **WRONG** are shown only to be recognised. A JAX figure of some 10 µs per call that does not grow with the batch or the image, such as the CPU figures in the write-up this post answers, is dispatch time.

# %% tags=["appendix-input", "appendix"]
bench_configs = sampling_bench.configs(tuple(bench_modes), {k: tuple(v) for k, v in bench_sizes.items()})
first_cfg = next((c for c in bench_configs if c["mode"] == "bilinear"), bench_configs[0])
x_np, grid_np = sampling_bench.inputs(first_cfg["shape"])
x_j, grid_j = jnp.asarray(x_np), jnp.asarray(grid_np)
default_path = choose_implementation(x_np.shape, grid_np.shape, x_np.dtype)
pitfall = {}
for path in dict.fromkeys([default_path, "xla"]):
    jax_fwd = functools.partial(jax_step_jit, x_j, grid_j, implementation=path)  # the paired cell's step, jitted
    jax_fwd().block_until_ready()  # compile outside both timers
    # One call per timed repeat, as a hand-written `t0 = perf_counter(); f(x); t1 = perf_counter()` would do.
    pitfall[path] = {
        "unsynchronised": timing.time_fn(jax_fwd, name=f"WRONG: {path}, no block_until_ready",
                                         number=1, warmup=0, repeats=bench_repeats, synchronize=False),
        "synchronised": timing.time_fn(jax_fwd, name=f"right: {path}, block_until_ready",
                                       number=1, repeats=bench_repeats)}
tables.summarise([t for pair in pitfall.values() for t in pair.values()])

# %% tags=["remove_input", "appendix"]
Markdown(report.pitfall_note(first_cfg["name"], pitfall))

# %% [markdown] tags=["appendix"]
# ## Where the frameworks differ by design: non-finite grids
#
# A NaN or infinite grid value has no right answer, but it must not crash, and PyTorch's backends do not agree. Read from ATen's sources: the CUDA kernels clamp NaN to 0 under `border`/`reflection` and send a coordinate that is still non-finite to -100, that is, out of bounds (`safe_downgrade_to_int_range`), so the result is finite. PyTorch's CPU kernels, measured here, do three different things. Every path of `sidebyside.grid_sample` (the Pallas kernels, the native CPU kernel and the XLA path, which the tests hold to the same bits) follows the CUDA rule in nearest, bilinear and trilinear (finite, zero gradient for the non-finite coordinate) and returns NaN for bicubic, as both PyTorch backends do; none follows PyTorch's CPU kernels.

# %% tags=["appendix-input", "appendix"]
nan_grid = np.array([[[[np.nan, 0.0], [0.0, 0.0]]]], np.float32)  # (1, 1, 2, 2): one NaN point, one centre point
nan_image = np.arange(1, 13, dtype=np.float32).reshape(1, 1, 3, 4)
nan_grid3 = np.array([[[[[np.nan, 0.0, 0.0], [0.0, 0.0, 0.0]]]]], np.float32)
nan_image3 = np.arange(1, 25, dtype=np.float32).reshape(1, 1, 2, 3, 4)
rows = []
for label, img, g, padding in [("2-D bilinear, zeros", nan_image, nan_grid, "zeros"),
                               ("2-D bilinear, border", nan_image, nan_grid, "border"),
                               ("3-D trilinear, border", nan_image3, nan_grid3, "border")]:
    t = F.grid_sample(torch.tensor(img), torch.tensor(g), padding_mode=padding, align_corners=False).flatten().tolist()
    j = np.asarray(grid_sample(jnp.asarray(img), jnp.asarray(g), padding_mode=padding, align_corners=False)).ravel().tolist()
    rows.append({"case": label, "PyTorch CPU (NaN point, centre point)": t, "JAX (NaN point, centre point)": j})
pd.DataFrame(rows).set_index("case")

# %% [markdown] tags=["appendix"]
# PyTorch's 2-D CPU kernel returns NaN under `zeros` (a NaN weight times a masked-out zero), clamps NaN to 0 under `border`, while its 3-D CPU kernel clamps the same NaN to the *far* edge. Its 2-D CPU **backward** is worse: in torch 2.14.1, with `border` or `reflection`, it crashes the process (a segmentation fault, a negative exit code below). We run it in a child process so that this notebook survives:

# %% tags=["appendix-input", "appendix"]
crash_code = textwrap.dedent("""
    import torch, torch.nn.functional as F
    x = torch.arange(12.0).reshape(1, 1, 3, 4).requires_grad_(True)
    g = torch.full((1, 1, 1, 2), float("nan"), requires_grad=True)
    F.grid_sample(x, g, padding_mode="border", align_corners=False).sum().backward()
    print("backward finished")
""")
child = subprocess.run([sys.executable, "-c", crash_code], capture_output=True, text=True, timeout=300)
gx_nan, gg_nan = jax.grad(lambda a, b: grid_sample(a, b, padding_mode="border").sum(), argnums=(0, 1))(
    jnp.arange(12.0).reshape(1, 1, 3, 4), jnp.full((1, 1, 1, 2), jnp.nan))
pd.DataFrame({
    "PyTorch CPU backward": [f"exit code {child.returncode}" + (" (killed by a signal: crash)" if child.returncode < 0 else ""), "-"],
    "JAX backward": ["finished", f"grid gradient {np.asarray(gg_nan).ravel().tolist()}, input gradient sum {float(gx_nan.sum())}"],
}, index=["outcome", "values"])

# %% [markdown]
# ## 5. Results
#
# The results record, from everything measured above (`sidebyside.posts.grid_sample.report` turns it into the table below and into the conclusion):

# %% tags=["appendix-input"]
metrics = report.summarise(
    parity_rows, affine_rows, speed, device=record["device"], device_kind=record["device_kind"],
    torch_device=torch_device, parity_transform=parity_transform, warp_diff=warp_diff,
    pitfall=pitfall, nan_backward_returncode=child.returncode,
    parts=parts.log, native_rows=native_rows)
report.results_table(metrics)

# %% [markdown]
# ## 6. Conclusion

# %% tags=["remove_input", "collapsed"] summary="The conclusion in full"
Markdown(report.conclusion(metrics) + "\n\n" + checkpoints.describe_parts(parts.log))

# %% tags=["remove_cell"]
record = provenance.save_results(metrics)
record["metrics"]["gpu_goals"]


# %% tags=["remove_cell", "colab-compare"]
# Your figures beside the post's, verdict by verdict.
from sidebyside.publish import reproduce

reproduce.in_notebook("grid-sample-parity", record, REPOSITORY)
