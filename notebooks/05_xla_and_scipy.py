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
#     compared: Dense matrix products and inverses in NumPy, JAX and PyTorch across
#       matrix sizes and arithmetics (float32, TF32, bfloat16, float64), with accuracy
#       against float64; and a two-parameter calibration fitted with SciPy, jax.scipy,
#       optax and torch.optim.
#     date: '2026-11-22'
#     description: Matrix products and inverses in NumPy, JAX and PyTorch in float32
#       and float64, with their precision defaults made visible, and a small calibration
#       fit with SciPy, jax.scipy, optax and torch.optim.
#     metrics:
#     - matmul
#     - inverse
#     - optimise
#     - retrace
#     slug: xla-and-scipy
#     tags:
#     - jax
#     - pytorch
#     - numpy
#     - scipy
#     - linear-algebra
#     - optimisation
#     - xla
#     title: XLA linear algebra and SciPy-style optimisation
# ---

# %% [markdown]
# # XLA linear algebra and SciPy-style optimisation
#
# How fast and how accurate are NumPy, JAX and PyTorch at dense linear algebra, in float32 and
# float64, and which tool should fit a two-parameter model: SciPy, `jax.scipy`, optax or
# `torch.optim`?
#
# A public "JAX capability analysis" compared the three libraries on random float64 matrices and
# fitted a sensor calibration with `scipy.optimize.minimize(method="BFGS")` and with
# `jax.scipy.optimize.minimize`, noting that a jitted function recompiles whenever its input shape
# changes. Here the same questions get synchronised timers with compilation apart, both precisions,
# achieved FLOP/s, the accuracy of the results, and measured costs and remedies for recompilation.

# %% tags=["colab-install"]
# Run this post yourself: on Colab this installs the library and the versions the post ran with.
import subprocess
import sys

REPOSITORY = "sidebyside-ml/pytorch-vs-jax@main"  # the site's repository@branch (_config.yml); a fork names its own
if "google.colab" in sys.modules:
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "torchviz", "timm==1.0.31",
                    f"sidebyside @ git+https://github.com/{REPOSITORY}"], check=True)
from sidebyside.run import colab

colab.setup("xla-and-scipy", REPOSITORY)

# %% tags=["parameters"]
linalg_sizes = [256, 512]   # square matrix sizes for product and inverse
cpu_max_size = 8192         # largest of those sizes run on the CPU (the GPU runs them all)
precision_size = 512        # matrix size for the precision comparison
num_points = 1000           # calibration measurements
retrace_lengths = 4         # distinct data lengths fed to a jitted loss in section 3
repeats = 5                 # timed repeats per measurement (median and IQR over them)
min_repeat_s = 0.02         # each repeat runs the function enough times to last this long
threads = 0                 # CPU threads for PyTorch, XLA and NumPy alike; 0: every core this process may use
seed = 0
# A run in parts (a lent GPU allows 10 minutes a command): each linear-algebra case, precision
# check and comparison, each fit, each retracing strategy and each static-argument approach is saved
# to this file as it finishes and read back by the next run; no part starts that would end past
# run_budget_s.
checkpoint_file = ""        # "": off, everything is measured in this run
run_budget_s = 0            # seconds; 0: no budget

# %% tags=["remove_cell", "colab-profile"]
# The settings to run with: "smoke" (the test suite's small sizes, a minute), "cpu", or "gpu" (a GPU post's own
# settings, on a GPU runtime); "auto" takes the post's own on a GPU runtime and smoke elsewhere.
PROFILE = "auto"
globals().update(colab.parameters("xla-and-scipy", PROFILE, REPOSITORY))

# %% [markdown] tags=["appendix"]
# ## Setup
#
# Both frameworks run under the same conditions, set by one library call before JAX starts
# (`notebook.setup`, through `conditions.same_conditions`): float32 with TF32 off on both sides,
# and the same number of CPU threads for PyTorch, XLA and NumPy's BLAS. JAX computes in float32 unless told otherwise: float64
# arrays need the `jax_enable_x64` flag, set here before any JAX array exists. With it, JAX's
# *default* dtype becomes float64 too, so every array below is created with an explicit dtype.

# %% tags=["appendix"]
from sidebyside.lab import notebook

# first, before JAX starts; float64 allowed in JAX before any JAX array exists; no torch.compile in this post
setup = notebook.setup(threads=threads, tf32=False, compilers=("jax",), jax_x64=True)
conditions, record, on_gpu, startup = setup.conditions, setup.provenance, setup.on_gpu, setup.startup
devices, main_device, jax_devices, torch_devices = (setup.devices, setup.main_device, setup.jax_devices,
                                                    setup.torch_devices)

import functools

import jax
import jax.numpy as jnp
import jax.scipy.optimize
import matplotlib.pyplot as plt
import numpy as np
import optax
import pandas as pd
import scipy.optimize
import torch
from IPython.display import Markdown

from sidebyside.lab import functions, peaks, progress, timing, viz
from sidebyside.lab.conditions import conditions_sentence
from sidebyside.posts.xla_and_scipy import measure, report
from sidebyside.run import checkpoints, provenance

# The BLAS behind PyTorch's CPU matmul (linked into torch, so the provenance's list of BLAS libraries,
# read by threadpoolctl, does not show it): the first thing to read when its share of the peak is low.
conditions["torch_blas"] = dict(item.split("=", 1) for item in torch.__config__.show().replace(",", " ").split()
                                if item.startswith(("BLAS_INFO=", "LAPACK_INFO=")))
torch.manual_seed(seed)
rng = np.random.default_rng(seed)
parts = setup.parts(checkpoint_file, run_budget_s)  # a run in parts (see the parameters)
provenance.table(record)

# %% tags=["remove_input", "appendix"]
Markdown(conditions_sentence(conditions, on_gpu=on_gpu))

# %% [markdown]
# ## 1. Linear algebra: matrix product and inverse
#
# Square matrices with standard normal entries, the same NumPy data copied to each framework. NumPy
# runs on the CPU only; JAX and PyTorch on every device present. The JAX functions are jitted (the
# first call, with compilation, is timed apart by the harness); all three libraries hand the work to
# optimised kernels (BLAS/LAPACK on the CPU, cuBLAS/cuSOLVER on a GPU), so this measures those
# kernels and the overhead around them. The three run interleaved (`timing.ladder`): the functions
# timed are the ones in the two cells below (NumPy's with JAX's), each called on the case's arrays.
#
# Each arithmetic is the same on both sides, one row each:
#
# - **float32**: full FP32, TF32 off on both sides (PyTorch's `"highest"`, JAX `precision="highest"`);
# - **tf32**: float32 data with TF32 tensor cores allowed on both sides (PyTorch's `"high"`, JAX
#   `precision="tensorfloat32"`), a GPU mode: on a CPU these rows say so;
# - **bfloat16** (product only): bfloat16 data on both sides, a GPU mode too;
# - **float64**.

# %% tags=["pair:matmul:torch"]
def torch_matmul(a, b):
    return torch.matmul(a, b)  # in the dtype of a and b: float32, bfloat16 or float64


def torch_inverse(a):
    return torch.linalg.inv(a)


def with_precision(precision, fn):
    """fn under a float32 matmul precision for each call, the previous one restored afterwards:
    "high" allows TF32 tensor cores, "highest" (the default) computes in full FP32."""
    def call(*args):
        before = torch.get_float32_matmul_precision()
        torch.set_float32_matmul_precision(precision)
        try:
            return fn(*args)
        finally:
            torch.set_float32_matmul_precision(before)
    return call


def torch_matmul_in(mode):
    return with_precision("high", torch_matmul) if mode == "tf32" else torch_matmul


def torch_inverse_in(mode):
    return with_precision("high", torch_inverse) if mode == "tf32" else torch_inverse


# %% tags=["pair:matmul:jax"]
# Each row's arithmetic: "highest" (full FP32) for float32 and float64, TF32 for "tf32", and the
# native bfloat16 product (float32 accumulation) for "bfloat16".
PRECISION = {"float32": "highest", "tf32": "tensorfloat32", "bfloat16": "default", "float64": "highest"}


def jax_matmul_with(precision):
    @jax.jit
    def matmul(a, b):
        return jnp.matmul(a, b, precision=precision)
    return matmul


def jax_inverse_with(precision):
    @jax.jit
    def inverse(a):
        with jax.default_matmul_precision(precision):  # any product inside the inverse in this precision
            return jnp.linalg.inv(a)
    return inverse


def jax_matmul_in(mode):
    return jax_matmul_with(PRECISION[mode])


def jax_inverse_in(mode):
    return jax_inverse_with(PRECISION[mode])


# NumPy, the CPU reference that jax.numpy mirrors, computes in the dtype of its arrays.
def numpy_matmul(a, b):
    return np.matmul(a, b)


def numpy_inverse(a):
    return np.linalg.inv(a)


# %% tags=["appendix-input"]
jax_matmul = jax_matmul_in("float32")
jax_inv = jax_inverse_in("float32")
OPS = {
    "matmul": {"numpy": numpy_matmul, "jax": jax_matmul_in, "torch": torch_matmul_in,
               "flops": functions.matmul_flops, "modes": ["float32", "tf32", "bfloat16", "float64"]},
    "inverse": {"numpy": numpy_inverse, "jax": jax_inverse_in, "torch": torch_inverse_in,
                "flops": functions.inverse_flops, "modes": ["float32", "tf32", "float64"]},
}
DTYPES = {"float32": (np.float32, torch.float32), "float64": (np.float64, torch.float64)}
MODE_DTYPES = {"float32": (np.float32, jnp.float32, torch.float32), "tf32": (np.float32, jnp.float32, torch.float32),
               "bfloat16": (np.float32, jnp.bfloat16, torch.bfloat16), "float64": (np.float64, jnp.float64, torch.float64)}
GPU_ONLY = {"tf32": "TF32 is a tensor-core mode of NVIDIA GPUs; a CPU computes float32 in full FP32",
            "bfloat16": "bfloat16 matmul is timed where tensor cores run it, on a GPU"}
jitted = {(op, mode): OPS[op]["jax"](mode) for op in OPS for mode in OPS[op]["modes"]}
torch_fns = {(op, mode): OPS[op]["torch"](mode) for op in OPS for mode in OPS[op]["modes"]}


def linalg_candidates(op, device, mode, n):
    """The ladder's contestants: the paired cells' functions with this case's arrays bound."""
    np_dtype, jax_dtype, torch_dtype = MODE_DTYPES[mode]
    a_np = rng.standard_normal((n, n)).astype(np_dtype)
    b_np = rng.standard_normal((n, n)).astype(np_dtype)
    if device == "cpu" and mode in GPU_ONLY:
        absent = timing.NotApplicable(GPU_ONLY[mode])
        return {"torch/eager": absent, "jax/jit": absent, "numpy/numpy": absent}
    a_jax, b_jax = (jax.device_put(jnp.asarray(m, dtype=jax_dtype), jax_devices[device]) for m in (a_np, b_np))
    a_torch, b_torch = (torch.from_numpy(m).to(torch_devices[device], torch_dtype) for m in (a_np, b_np))
    args = {"torch": (a_torch, b_torch), "jax": (a_jax, b_jax), "numpy": (a_np, b_np)}
    if op != "matmul":
        args = {side: pair[:1] for side, pair in args.items()}
    fns = {"torch/eager": functools.partial(torch_fns[op, mode], *args["torch"]),
           "jax/jit": functools.partial(jitted[op, mode], *args["jax"]),
           "numpy/numpy": functools.partial(OPS[op]["numpy"], *args["numpy"])}
    if device != "cpu":
        del fns["numpy/numpy"]
    elif mode == "bfloat16":
        fns["numpy/numpy"] = timing.NotApplicable("NumPy has no bfloat16")
    return fns


def sizes_on(device):
    return [n for n in linalg_sizes if device != "cpu" or n <= cpu_max_size]


def linalg_ladder(op, device, mode, n):  # one part: one case's ladder, its data drawn from rng
    return measure.ladder_entries(linalg_candidates(op, device, mode, n), repeats=repeats,
                                  min_repeat_s=min_repeat_s)


linalg_entries = {}  # (op, device, mode, n) -> {"<library>/<tool>": entry}
cases = [(op, device, mode, n) for op in OPS for device in devices for mode in OPS[op]["modes"]
         for n in sizes_on(device)]
for op, device, mode, n in progress.bar(cases, desc="linear algebra"):
    # the state of rng the part leaves is saved with it (parts.drawn)
    linalg_entries[op, device, mode, n] = parts.drawn(rng, f"linalg/{op}/{device}/{n}/{mode}", linalg_ladder, op, device, mode, n)

# %% tags=["appendix-input"]
# A TF32 or bfloat16 row is raced only once its result shows the setting reached the computation on
# both sides (it differs from float32's by more than float32's own error), each with its error
# against float64 (sidebyside.lab.framing.precision_applied).
from sidebyside.lab import framing  # noqa: E402


def precision_check(op, device, mode, n=precision_size):
    a = rng.standard_normal((n, n)) + (np.sqrt(n) * np.eye(n) if op == "inverse" else 0)  # well conditioned
    b = rng.standard_normal((n, n))
    args = (a, b) if op == "matmul" else (a,)
    found = {}
    for side, fns, put in (
            ("torch", torch_fns, lambda m, m_mode: torch.from_numpy(m).to(torch_devices[device],
                                                                          MODE_DTYPES[m_mode][2])),
            ("jax", jitted, lambda m, m_mode: jax.device_put(jnp.asarray(m, dtype=MODE_DTYPES[m_mode][1]),
                                                               jax_devices[device]))):
        results = {}
        for m_mode in (mode, "float32", "float64"):
            out = fns[op, m_mode](*(put(x, m_mode) for x in args))
            results[m_mode] = (out.double().cpu().numpy() if side == "torch"
                               else np.asarray(jnp.asarray(out, jnp.float32 if m_mode != "float64" else jnp.float64),
                                               dtype=np.float64))
        found[side] = framing.precision_applied(results[mode], results["float32"], results["float64"],
                                                precision=mode)
    return found


precision_applied = {(op, device, mode): parts.drawn(rng, f"applied/{op}/{device}/{mode}",
                                                       precision_check, op, device, mode)
                     for op in OPS for device in devices if device != "cpu"
                     for mode in OPS[op]["modes"] if mode in GPU_ONLY}

# %% [markdown] tags=["appendix"] summary="Method: FLOP/s against the device's peak"
# ### Achieved FLOP/s against the device's peak
#
# Both operations count as $2n^3$ floating-point operations (the product: $n^2$ dot products of
# length $n$; the inverse by LU, as LAPACK does it: $\tfrac23 n^3 + \tfrac43 n^3$). A GPU's peak
# comes from NVIDIA's data sheets (`sidebyside.lab.peaks.GPU_PEAKS`, dense figures) for the row's
# arithmetic: float32 rows divide by the FP32 CUDA-core peak, tf32 rows by the TF32 tensor-core
# peak, bfloat16 by the BF16 tensor-core peak, float64 by the FP64 tensor-core peak that DGEMM
# reaches. A CPU's peak cannot be read from the machine reliably: the one below is estimated from
# its clock and vector units, or, where a library ran faster than that estimate, the best rate
# measured in this run; its source is printed with it, and no share of it exceeds 100%.

# %% tags=["appendix-input", "appendix"]
PRECISION_OF = {"float32": "fp32", "tf32": "tf32_tensor", "bfloat16": "bf16_tensor", "float64": "fp64_tensor"}


def rate(op, n, entry):
    return OPS[op]["flops"](n) / entry["median_s"] if entry["median_s"] else None


def peak(device, mode):
    """(FLOP/s, where the number comes from) for a device and arithmetic."""
    if device == "gpu":
        value = peaks.peak_flops(record["device"], PRECISION_OF[mode])
        return value, (f"{record['device']} data sheet, {PRECISION_OF[mode]}" if value else "unknown GPU: not in the table")
    if mode in GPU_ONLY:
        return None, "not applicable on a CPU"
    measured = [rate(op, n, e) for (op, d, m, n), entries in linalg_entries.items() if d == device and m == mode
                for e in entries.values() if e["median_s"]]
    return peaks.cpu_peak_flops(mode, measured)


device_peaks = {(device, mode): peak(device, mode) for device in devices for mode in MODE_DTYPES}
pd.DataFrame([{"device": d, "arithmetic": t, "peak (GFLOP/s)": (p / 1e9 if p else None), "source": why}
              for (d, t), (p, why) in device_peaks.items()]).set_index(["device", "arithmetic"])

# %% tags=["appendix-input", "appendix"] summary="FLOP/s, every size and precision"
rows = []
for (op, device, mode, n), entries in linalg_entries.items():
    flops = OPS[op]["flops"](n)
    peak_value = device_peaks[device, mode][0]
    for name, e in entries.items():
        if e["median_s"] is None:
            continue
        framework = name.split("/")[0]
        achieved = flops / e["median_s"]
        rows.append({"op": op, "device": device, "dtype": mode, "n": n, "framework": viz.LABELS[framework],
                     "median (ms)": e["median_s"] * 1e3, "IQR (ms)": e["iqr_s"] * 1e3, "GFLOP/s": achieved / 1e9,
                     "GFLOP/s at q3": flops / e["q3_s"] / 1e9, "GFLOP/s at q1": flops / e["q1_s"] / 1e9,
                     "% of peak": 100 * achieved / peak_value if peak_value else None})
linalg_table = pd.DataFrame(rows)
(linalg_table.pivot_table(index=["op", "device", "dtype", "n"], columns="framework", values="GFLOP/s", sort=False)
 .round(1))

# %% figure="linalg-gflops" alt="Achieved GFLOP/s of NumPy, JAX and PyTorch for matrix product and inverse against matrix size, per arithmetic (float32, TF32, bfloat16, float64)" tags=["key-figure", "appendix-input"]
LINE = {"float32": "-", "tf32": "-.", "bfloat16": ":", "float64": "--"}
fig, axes = plt.subplots(1, 2, figsize=(11, 4.2), sharey=True)
for ax, op in zip(axes, OPS):
    for framework in ["numpy", "jax", "torch"]:
        for device in devices:
            for mode in OPS[op]["modes"]:
                sel = linalg_table[(linalg_table.op == op) & (linalg_table.device == device)
                                   & (linalg_table.dtype == mode) & (linalg_table.framework == viz.LABELS[framework])]
                if sel.empty:
                    continue
                ax.errorbar(sel.n, sel["GFLOP/s"], yerr=[sel["GFLOP/s"] - sel["GFLOP/s at q3"],
                                                         sel["GFLOP/s at q1"] - sel["GFLOP/s"]],
                            linestyle=LINE[mode], marker="o" if device == "cpu" else "s", color=viz.COLORS[framework],
                            capsize=2, label=f"{viz.LABELS[framework]} {mode} ({device.upper()})")
    ax.set(xscale="log", yscale="log", xlabel="matrix size n", title=f"{op} (2n³ FLOPs)")
    ax.minorticks_off()
    ax.set_xticks(linalg_sizes, [str(n) for n in linalg_sizes])
axes[0].set_ylabel("achieved GFLOP/s (median, IQR bars)")
fig.suptitle(f"Dense linear algebra on {record['device']}", fontsize=10)
axes[1].legend(fontsize=7, ncols=2)
plt.show()

# %% [markdown] tags=["appendix"]
# ### Accuracy of the inverse
#
# $\lVert A A^{-1} - I\rVert_F$, computed in float64 from each library's inverse, for the largest
# size every device ran (a random normal matrix of size $n$ has a condition number of order $n$; the conclusion
# gives this one's). Watch NumPy's float32 column: `numpy.linalg` computes real float32 inputs in
# float64 internally and rounds the result back to float32 (its `_commonType` picks `double` as the
# computation type), so its float32 inverse is as accurate as a rounded float64 one, and costs like
# one too. JAX and PyTorch invert in float32 (so does `scipy.linalg.inv`).

# %% tags=["appendix-input", "appendix"]
n_acc = sizes_on("cpu")[-1]
inverse_rows = []
a64 = rng.standard_normal((n_acc, n_acc))
identity = np.eye(n_acc)
for dtype, (np_dtype, _torch_dtype) in DTYPES.items():
    a = a64.astype(np_dtype)
    for device in devices:
        inverses = {"jax": np.asarray(jax_inv(jax.device_put(a, jax_devices[device]))),
                    "torch": torch.linalg.inv(torch.from_numpy(a).to(torch_devices[device])).cpu().numpy()}
        if device == "cpu":
            inverses["numpy"] = np.linalg.inv(a)
        for framework, inverse in inverses.items():
            assert inverse.dtype == np_dtype
            residual = a.astype(np.float64) @ inverse.astype(np.float64) - identity
            inverse_rows.append({"dtype": dtype, "device": device, "framework": viz.LABELS[framework],
                                 "‖A·A⁻¹ − I‖_F": np.linalg.norm(residual)})
inverse_accuracy = pd.DataFrame(inverse_rows).pivot_table(index=["dtype", "device"], columns="framework",
                                                          values="‖A·A⁻¹ − I‖_F", sort=False)
condition = np.linalg.cond(a64)
inverse_accuracy.map(lambda e: f"{e:.2e}")

# %% [markdown] tags=["appendix"]
# ### Default float32 matmul precision, made visible
#
# On recent NVIDIA GPUs a float32 product may run on tensor cores in TF32, which keeps only 10 bits
# of mantissa. JAX's default precision allows XLA to do so (whether it does is what the numbers
# below show); PyTorch's default (`torch.get_float32_matmul_precision() == "highest"`) does not. Below, the relative error of a
# float32 product against the float64 product of the same numbers, and its time, under each
# library's default and under the setting that makes the other library's behaviour its own:
# JAX `precision="highest"` (full FP32) and PyTorch `set_float32_matmul_precision("high")`
# (TF32 allowed). On a CPU there are no tensor cores and every setting computes in full FP32.

# %% tags=["appendix-input", "appendix"]
n_prec = precision_size
a_np = rng.standard_normal((n_prec, n_prec)).astype(np.float32)
b_np = rng.standard_normal((n_prec, n_prec)).astype(np.float32)
reference = a_np.astype(np.float64) @ b_np.astype(np.float64)
# JAX's library default, whatever same_conditions set: an explicit "default" precision ignores the config.
jax_matmul_default = jax_matmul_with("default")
jax_matmul_highest = jax_matmul  # precision="highest", as timed in section 1
# PyTorch under each float32 matmul precision, set around each call and restored (the paired cell's with_precision)
torch_matmul_highest, torch_matmul_high = (with_precision(p, torch_matmul) for p in ("highest", "high"))


def precision_on(device):
    """One part: the four settings timed together on this device (measure.precision_rows:
    timing.compare, then each result's error relative to the float64 product)."""
    a_jax, b_jax = (jax.device_put(m, jax_devices[device]) for m in (a_np, b_np))
    a_torch, b_torch = (torch.from_numpy(m).to(torch_devices[device]) for m in (a_np, b_np))
    variants = {
        ("JAX", "default (precision=None)"): functools.partial(jax_matmul_default, a_jax, b_jax),
        ("JAX", 'precision="highest"'): functools.partial(jax_matmul_highest, a_jax, b_jax),
        ("PyTorch", 'default ("highest")'): functools.partial(torch_matmul_highest, a_torch, b_torch),
        ("PyTorch", 'set_float32_matmul_precision("high")'): functools.partial(torch_matmul_high, a_torch, b_torch),
    }
    return measure.precision_rows(variants, reference, device=device, repeats=repeats,
                                  min_repeat_s=min_repeat_s)


precision_rows = []
for device in devices:
    precision_rows += parts(f"precision/{device}/{n_prec}", precision_on, device)
precision_table = pd.DataFrame(precision_rows).set_index(["device", "framework", "setting"])
precision_table.assign(**{"relative error": precision_table["relative error"].map("{:.2e}".format)}).round(3)

# %% [markdown] tags=["appendix"]
# A relative error near $10^{-7}$ to $10^{-6}$ is full FP32 (24-bit mantissa, growing slowly with
# $n$); near $10^{-3}$ it is TF32. To make the two libraries equal, pick one behaviour for both:
# `jax.config.update("jax_default_matmul_precision", "highest")` (or `precision=` per call) and
# PyTorch's default for full FP32, or PyTorch's `"high"` and JAX's default for TF32 speed.

# %% [markdown]
# ## 2. Optimisation: a sensor calibration
#
# A sensor's raw readings $r$ map to reference values $y$ through a slope and an offset; we fit
# $(a, b)$ minimising $\mathrm{RMSE}(a r + b, y)$ on `num_points` synthetic measurements with
# known truth $a = 1.5$, $b = 3$ and noise (`sidebyside.lab.functions.calibration_data`). The loss is
# written once per library in the cells below (`rmse_torch`; `rmse_numpy` for SciPy and `rmse_jax`);
# since it is a linear least squares problem in disguise, its exact minimiser is also known
# (`calibration_lstsq`), which tells optimiser error apart from noise. All runs start at $(0, 0)$, in float64, and stop at a
# gradient norm of $10^{-6}$ where the method has such a test:
#
# - SciPy BFGS with finite-difference gradients (what the original did);
# - SciPy BFGS with exact gradients from `jax.grad` (jitted, `jac=True`);
# - `jax.scipy.optimize.minimize(method="BFGS")`: **a legacy API**: JAX keeps it only for
#   compatibility, with BFGS as its only method, and points users to optax and other libraries;
# - optax's L-BFGS (`optax.lbfgs` with its zoom line search), the whole loop in one jitted
#   `jax.lax.while_loop`;
# - `torch.optim.LBFGS` with a strong-Wolfe line search.
#
# "nfev" counts calls to the objective (for SciPy with finite differences: every call, including
# the ones that estimate the gradient; for optax: the initial call plus every line-search step;
# for PyTorch: its own `func_evals`). The PyTorch cell below is its L-BFGS fit; the JAX cell holds
# the four others (SciPy's with the NumPy loss beside the JAX one). Each is timed as written.

# %% tags=["appendix-input"]
data = functions.calibration_data(seed, num_points)
truth = np.array([data.slope, data.offset])
best = functions.calibration_lstsq(data.raw, data.reference)
x0 = np.zeros(2)
gtol = 1e-6
opt_device = main_device

raw_jax, ref_jax = (jax.device_put(v, jax_devices[opt_device]) for v in (data.raw, data.reference))
raw_torch, ref_torch = (torch.from_numpy(v).to(torch_devices[opt_device]) for v in (data.raw, data.reference))


# %% tags=["pair:optimise:torch", "collapsed"] summary="The code: the fits"
def rmse_torch(params, raw, reference):
    residual = params[0] * raw + params[1] - reference
    return torch.sqrt(torch.mean(residual**2))


def torch_lbfgs():
    params = torch.zeros(2, dtype=torch.float64, device=raw_torch.device, requires_grad=True)  # start at x0 = (0, 0)
    optimizer = torch.optim.LBFGS([params], max_iter=200, tolerance_grad=gtol, tolerance_change=1e-12,
                                  line_search_fn="strong_wolfe")

    def closure():
        optimizer.zero_grad()
        loss = rmse_torch(params, raw_torch, ref_torch)
        loss.backward()
        return loss

    optimizer.step(closure)  # runs L-BFGS until a tolerance or max_iter
    state = optimizer.state[params]
    return params.detach(), state["n_iter"], state["func_evals"], None, None


# %% tags=["pair:optimise:jax", "collapsed"]
def rmse_numpy(params, raw, reference):
    residual = params[0] * raw + params[1] - reference
    return float(np.sqrt(np.mean(residual**2)))


def rmse_jax(params, raw, reference):
    residual = params[0] * raw + params[1] - reference
    return jnp.sqrt(jnp.mean(residual**2))


def loss_jax(params):
    return rmse_jax(params, raw_jax, ref_jax)


value_and_grad_jax = jax.jit(jax.value_and_grad(loss_jax))


def scipy_fd():  # SciPy BFGS, gradients by finite differences
    r = scipy.optimize.minimize(rmse_numpy, x0, args=(data.raw, data.reference), method="BFGS",
                                options={"gtol": gtol})
    return r.x, r.nit, r.nfev, bool(r.success), int(r.status)


def scipy_jax_grad():  # SciPy BFGS, exact gradients from jax.grad
    def fun(p):
        value, grad = value_and_grad_jax(jnp.asarray(p, jnp.float64))
        return float(value), np.asarray(grad)
    r = scipy.optimize.minimize(fun, x0, jac=True, method="BFGS", options={"gtol": gtol})
    return r.x, r.nit, r.nfev, bool(r.success), int(r.status)


jax_scipy_minimize = jax.jit(lambda p0: jax.scipy.optimize.minimize(loss_jax, p0, method="BFGS", tol=gtol))


def jax_scipy():  # the legacy jax.scipy.optimize.minimize
    r = jax_scipy_minimize(jnp.asarray(x0))
    return r.x, r.nit, r.nfev, bool(r.success), int(r.status)


lbfgs = optax.lbfgs()
value_and_grad_from_state = optax.value_and_grad_from_state(loss_jax)


@jax.jit
def optax_run(params):
    """optax L-BFGS until the gradient norm drops below gtol (at most 200 iterations)."""
    def cond(carry):
        _, state, k, _ = carry
        grad = optax.tree.get(state, "grad")
        return (k == 0) | ((k < 200) & (optax.tree.norm(grad) > gtol))

    def body(carry):
        params, state, k, nfev = carry
        value, grad = value_and_grad_from_state(params, state=state)
        updates, state = lbfgs.update(grad, state, params, value=value, grad=grad, value_fn=loss_jax)
        return optax.apply_updates(params, updates), state, k + 1, nfev + optax.tree.get(state, "num_linesearch_steps")

    return jax.lax.while_loop(cond, body, (params, lbfgs.init(params), 0, 1))


def optax_lbfgs():
    params, _, nit, nfev = optax_run(jnp.asarray(x0))
    return params, nit, nfev, None, None


# %% tags=["appendix-input"]
OPTIMISERS = {"scipy_bfgs_finite_diff": scipy_fd, "scipy_bfgs_jax_grad": scipy_jax_grad,
              "jax_scipy_bfgs_legacy": jax_scipy, "optax_lbfgs": optax_lbfgs, "torch_lbfgs": torch_lbfgs}
OPT_LABEL = report.OPTIMISER_LABELS
optimise, opt_rows = {}, []
for name, run in progress.bar(OPTIMISERS.items(), desc="optimisers"):
    # one part per optimiser: the paired cells' function timed as written, then its result scored
    fitted = functools.partial(measure.fit, run, name=name, truth=truth, optimum=best,
                               loss=lambda p: rmse_numpy(p, data.raw, data.reference),
                               gradient=lambda p: value_and_grad_jax(jnp.asarray(p))[1])
    optimise[name] = o = parts(f"optimise/{name}", fitted, repeats=repeats,
                               min_repeat_s=min_repeat_s)
    says = ("–" if o["success"] is None else
            "success" if o["success"] else f"failure (status {o['status']})")
    opt_rows.append({"method": OPT_LABEL[name], "reports": says, "‖∇‖∞": o["grad_inf_norm"],
                     "slope": o["params"][0], "offset": o["params"][1], "RMSE": o["rmse"],
                     "‖θ − θ_true‖": o["error"],
                     "‖θ − θ_lstsq‖": o["error_vs_optimum"],
                     "nit": o["nit"], "nfev": o["nfev"], "median (ms)": o["seconds"] * 1e3,
                     "IQR (ms)": o["iqr_s"] * 1e3, "first call (ms)": o["first_call_s"] * 1e3})
opt_rows.append({"method": "exact least squares", "slope": best[0], "offset": best[1],
                 "RMSE": rmse_numpy(best, data.raw, data.reference),
                 "‖θ − θ_true‖": float(np.linalg.norm(best - truth)), "‖θ − θ_lstsq‖": 0.0})
optimise_table = pd.DataFrame(opt_rows).set_index("method")
FORMATS = {"reports": "{}", "‖∇‖∞": "{:.1e}", "slope": "{:.6f}", "offset": "{:.6f}", "RMSE": "{:.6f}", "‖θ − θ_true‖": "{:.2e}", "‖θ − θ_lstsq‖": "{:.1e}",
           "nit": "{:.0f}", "nfev": "{:.0f}", "median (ms)": "{:.2f}", "IQR (ms)": "{:.2f}", "first call (ms)": "{:.0f}"}
optimise_table.apply(lambda col: col.map(lambda v: "–" if pd.isna(v) else FORMATS[col.name].format(v)))

# %% tags=["remove_input"]
Markdown(report.optimise_note(optimise, truth, best))

# %% [markdown]
# ## 3. Recompilation when shapes change
#
# `jax.jit` specialises a function to the shapes and dtypes of its arguments (and the values of
# any static arguments): a new data length means a new trace and a new compilation. Below, the
# calibration loss is evaluated once for each of `retrace_lengths` data lengths, four ways:
#
# - **naive**: `jit(loss)` on the raw data: one compilation per length;
# - **padding**: every dataset padded to one fixed length with a mask, the true length passed as
#   an ordinary (traced) argument: one compilation in all;
# - **padding, length static** (a misuse): the same with the length marked `static_argnames`: a
#   compilation per length again, since static values are part of the cache key;
# - **buckets**: padding to the next power of two: one compilation per bucket.
#
# A Python counter inside each function counts traces (the body runs in Python only when JAX
# traces it). "first call" is the time for one evaluation with a new length, compilation included;
# "steady" a repeated call. The JAX cell below is what is timed; the PyTorch cell shows the eager
# counterpart, which has nothing to recompile (its values are checked against NumPy's at every length).

# %% tags=["appendix-input"]
# subsets of the calibration data, from a quarter of it to all of it: several power-of-two buckets
lengths = sorted(set(np.linspace(num_points // 4, num_points, retrace_lengths).astype(int).tolist()))
pad_to = int(2 ** np.ceil(np.log2(max(lengths))))


# %% tags=["pair:retrace:torch", "collapsed"] summary="The code: avoiding a recompilation per length"
# Eager PyTorch keeps no trace to reuse: every call runs its kernels for the shapes it is given, so
# a new data length costs what any call costs, and nothing needs padding. (torch.compile, which this
# post does not use, specialises to shapes as jax.jit does; by default, after a second shape it
# compiles one graph with a symbolic length.)
def torch_rmse_first(params, n):
    return rmse_torch(params, raw_torch[:n], ref_torch[:n])


# %% tags=["pair:retrace:jax", "collapsed"]
traces = {}


def counted(name, fn):
    """fn, counting its traces: jax.jit runs its Python body only when it traces."""
    def wrapper(*args, **kwargs):
        traces[name] = traces.get(name, 0) + 1
        return fn(*args, **kwargs)
    return wrapper


def masked_rmse(params, raw, reference, n_valid):
    mask = jnp.arange(raw.shape[0]) < n_valid
    residual = jnp.where(mask, params[0] * raw + params[1] - reference, 0.0)
    return jnp.sqrt(jnp.sum(residual**2) / n_valid)


def pad(v, size):
    return np.pad(v, (0, size - v.shape[0]))


strategies = {
    "naive": jax.jit(counted("naive", rmse_jax)),
    "padding": jax.jit(counted("padding", masked_rmse)),
    "padding, length static": jax.jit(counted("padding, length static", masked_rmse), static_argnames="n_valid"),
    "buckets": jax.jit(counted("buckets", masked_rmse)),
}


def call(strategy, n, params):
    """The loss on the first n measurements, the way the strategy feeds it to its jitted function."""
    raw, ref = data.raw[:n], data.reference[:n]
    if strategy == "naive":
        return strategies[strategy](params, raw, ref)
    size = pad_to if strategy.startswith("padding") else int(2 ** np.ceil(np.log2(n)))
    return strategies[strategy](params, pad(raw, size), pad(ref, size), n_valid=n)


# %% tags=["appendix-input"]
params0 = jnp.asarray(truth)


def torch_agrees(n, expected):  # the PyTorch cell's eager loss agrees, at every length
    params = torch.from_numpy(truth).to(raw_torch.device)
    np.testing.assert_allclose(float(torch_rmse_first(params, n)), expected, rtol=1e-12)


def retraced(strategy):
    """One part: the strategy at every length, each value checked against NumPy's, its traces
    counted (measure.first_calls)."""
    def expected(n):
        return rmse_numpy(truth, data.raw[:n], data.reference[:n])

    return measure.first_calls(functools.partial(call, strategy, params=params0), lengths,
                               strategy=strategy, traces=traces, min_repeat_s=min_repeat_s,
                               expected=expected,
                               check=torch_agrees if strategy == "naive" else None)


retrace_rows = []
for strategy in progress.bar(strategies, desc="retracing"):
    done = parts(f"retrace/{measure.slug(strategy)}", retraced, strategy)
    retrace_rows += done["rows"]
    traces[strategy] = done["traces"]  # the count of the run that measured it
retrace_detail = pd.DataFrame(retrace_rows)
retrace_table = retrace_detail.groupby("strategy", sort=False).agg(
    **{"first calls, total (ms)": ("first call (ms)", "sum"), "first call, max (ms)": ("first call (ms)", "max"),
       "steady, median (ms)": ("steady (ms)", "median")})
retrace_table.insert(0, "traces", [traces[s] for s in retrace_table.index])
retrace_table.round(3)

# %% [markdown] tags=["appendix"] summary="Padding: compilations against work"
# Padding trades compilations for work: the padded call processes `pad_to` elements whatever the
# true length, which the steady-state column prices. JAX also offers ahead-of-time compilation
# (`jax.jit(f).lower(*args).compile()`) to pay compilation before a latency-sensitive loop, and a
# persistent compilation cache across processes (`jax_compilation_cache_dir`); neither removes the
# per-shape compilation, they move it.
#
# ### Static arguments, used right
#
# Static arguments are the remedy for the other common cause of recompilation: configuration
# that changes the computation itself, here the loss (`"rmse"` or `"mae"`). Wrapping a fresh
# closure in `jax.jit` for each call, which looks harmless inside a loop, hands JAX a new function
# every time and compiles every time; one jitted function with the configuration as a static
# argument compiles once per distinct value and is served from the cache afterwards. Below, a pass
# of `2 × retrace_lengths` calls alternates between the two losses on the full data; the harness
# runs the pass twice (first pass timed alone, then one timed repeat), and the trace counter
# covers both passes. In eager PyTorch the same configuration is an ordinary argument, with no cache
# to miss.

# %% tags=["appendix-input", "appendix"]
kinds = ["rmse", "mae"] * retrace_lengths  # one pass: the two losses alternating
raw_full, ref_full = jnp.asarray(data.raw), jnp.asarray(data.reference)


# %% tags=["pair:static-argument:torch", "appendix"]
# In eager PyTorch a configuration is an ordinary Python argument: each call takes its branch,
# and nothing is traced or cached.
def calibration_loss_torch(params, raw, reference, kind):
    residual = params[0] * raw + params[1] - reference
    return torch.sqrt(torch.mean(residual**2)) if kind == "rmse" else torch.mean(torch.abs(residual))


# %% tags=["pair:static-argument:jax", "appendix"]
def calibration_loss(params, raw, reference, kind):
    residual = params[0] * raw + params[1] - reference
    return jnp.sqrt(jnp.mean(residual**2)) if kind == "rmse" else jnp.mean(jnp.abs(residual))


loss_static = jax.jit(counted("static argument", calibration_loss), static_argnames="kind")


def closure_per_call():  # the pitfall: a new function for jax.jit at every call
    for kind in kinds:
        fresh = jax.jit(counted("new jit per call", lambda p, kind=kind: calibration_loss(p, raw_full, ref_full, kind)))
        fresh(params0).block_until_ready()


def static_argument():  # the remedy: one jitted function, the configuration static
    for kind in kinds:
        loss_static(params0, raw_full, ref_full, kind=kind).block_until_ready()


# %% tags=["appendix-input", "appendix"]
for kind in ("rmse", "mae"):  # the PyTorch cell's loss agrees with JAX's
    np.testing.assert_allclose(float(calibration_loss_torch(torch.from_numpy(truth), torch.from_numpy(data.raw),
                                                            torch.from_numpy(data.reference), kind)),
                               float(calibration_loss(params0, raw_full, ref_full, kind)), rtol=1e-12)

static_rows = []
for name, fn in {"new jit per call": closure_per_call, "static argument": static_argument}.items():
    # one part per approach: a pass timed twice, its traces counted (measure.two_passes)
    passes = functools.partial(measure.two_passes, fn, traces=traces)
    static_rows.append(parts(f"static/{measure.slug(name)}", passes, approach=name,
                             calls=len(kinds)))
static_table = pd.DataFrame(static_rows).set_index("approach")
static_table.round(1)

# %% [markdown] tags=["appendix"]
# ## Results

# %% tags=["appendix-input", "appendix"]
summary_rows = []
for op in OPS:
    for device in devices:
        for mode in OPS[op]["modes"]:
            n_big = sizes_on(device)[-1]
            entries = linalg_entries[op, device, mode, n_big]
            row = {"op": op, "device": device, "arithmetic": mode, "n": n_big}
            for name, label in (("numpy/numpy", "NumPy"), ("jax/jit", "JAX"), ("torch/eager", "PyTorch")):
                e = entries.get(name)
                row[f"{label} (ms)"] = e["median_s"] * 1e3 if e and e["median_s"] else None
            summary_rows.append(row)
results = pd.DataFrame(summary_rows).set_index(["op", "device", "arithmetic"])
results.round(2)

# %% [markdown]
# ## 4. Conclusion
#
# Written from the results record by `sidebyside.posts.xla_and_scipy.report`, so that every number below is the run's.

# %% tags=["remove_input", "collapsed"] summary="The conclusion in full"
metrics = report.summarise(
    conditions=conditions, startup=startup, linalg_entries=linalg_entries, device_peaks=device_peaks,
    inverse_accuracy=inverse_accuracy, n_acc=n_acc, condition=condition, precision_table=precision_table,
    precision_size=n_prec, optimise=optimise, truth=truth, optimum=best, retrace_table=retrace_table,
    lengths=lengths, pad_to=pad_to, static_table=static_table, precision_applied=precision_applied)
if parts.log:  # a run in parts: which run measured which part
    metrics["parts"] = parts.log
Markdown("\n\n".join(filter(None, [report.conclusion(metrics),
                                    checkpoints.describe_parts(parts.log)])))

# %% tags=["remove_cell"]
record = provenance.save_results(metrics)
record["metrics"]["optimise"]


# %% tags=["remove_cell", "colab-compare"]
# Your figures beside the post's, verdict by verdict.
from sidebyside.publish import reproduce

reproduce.in_notebook("xla-and-scipy", record, REPOSITORY)
