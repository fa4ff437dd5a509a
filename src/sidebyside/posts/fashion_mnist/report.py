"""fashion-mnist-pytorch-vs-flax: the post's results record and its generated conclusion.

The notebook measures; this module turns what it measured into the results record
(:func:`summarise`) and that record into the post's words (:func:`conclusion`, built from one
small function per kind of claim). It also holds the names the notebook's speed ladder uses
(:data:`TORCH_TOOLS`, :data:`JAX_TOOLS`, :data:`HOST_FED`, :data:`PRECISION_TOOLS`, their
:data:`LABELS` and :data:`NEEDS`) and the tables the post shows.

Inputs: accuracies as fractions (0-1), timings as :func:`sidebyside.lab.timing.ladder` entries per
timed call. The record (``metrics``) keeps every key the site reads: ``original_setting``,
``accuracy``, ``epoch_seconds``, ``compile_seconds``, ``speed`` (per workload ``ladder``/``best``),
``verdicts``. Speed workloads are ``"mlp"`` and ``"cnn"`` in float32 (TF32 off on both sides, the
headline) and ``"<model>/tf32"``, ``"<model>/bfloat16"`` for the precision rows: each precision is
its own ladder, compared best against best within itself, never against float32.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from sidebyside.lab import framing, ladders, tables, verdict, words
from sidebyside.lab.conditions import conditions_sentence

__all__ = [
    "TORCH_TOOLS",
    "JAX_TOOLS",
    "HOST_FED",
    "PRECISION_TOOLS",
    "LABELS",
    "NEEDS",
    "ladder_tools",
    "PUBLISHED",
    "conditions_text",
    "original_record",
    "original_table",
    "original_claim",
    "accuracy_record",
    "speed_record",
    "ladder_table",
    "scan_claim",
    "summarise",
    "results_table",
    "accuracy_claim",
    "speed_claim",
    "host_claim",
    "compile_claim",
    "precision_claim",
    "conclusion",
]

#: Ladder names -> the library's training loop (``training.TORCH_LOOPS`` / ``FLAX_LOOPS``) for the same tool; the
#: notebook builds each rung by name from its paired cells (:func:`ladder_tools` gives the names).
TORCH_TOOLS = {"torch/eager": "device", "torch/compile": "compile", "torch/compile+cuda-graphs": "compile_cuda_graph",
               "torch/cuda-graph": "cuda_graph", "torch/cuda-graph+fused": "cuda_graph_fused",
               "torch/cuda-graph-steps": "cuda_graph_steps"}
JAX_TOOLS = {"jax/jit": "device", "jax/jit+scan": "scan"}
#: The loops most tutorials write, with batches sent from the host: timed beside the ladder, not on it.
HOST_FED = {"torch/dataloader": "dataloader", "jax/jit-host": "jit_step"}
#: The rungs that get the TF32 and bfloat16 rows: each side's best tools.
PRECISION_TOOLS = ("torch/compile", "torch/cuda-graph", "torch/cuda-graph+fused", "torch/cuda-graph-steps",
                   "jax/jit+scan")
#: The rungs that run a call's K steps as ONE program (JAX's lax.scan, PyTorch's K-step CUDA graph); every
#: other rung runs one step a dispatch. Verdicts race like with like (:func:`summarise`).
MULTI_STEP = ("torch/cuda-graph-steps", "jax/jit+scan")
LABELS = {"torch/eager": "PyTorch, eager", "torch/compile": "PyTorch, torch.compile (whole step)",
          "torch/compile+cuda-graphs": "PyTorch, torch.compile reduce-overhead (CUDA graphs, compiled autograd)",
          "torch/cuda-graph-steps": "PyTorch, CUDA graph of K steps (batch gather inside)",
          "torch/cuda-graph": "PyTorch, CUDA graph (capturable Adam)",
          "torch/cuda-graph+fused": "PyTorch, CUDA graph (fused Adam)", "jax/jit": "JAX, jit per step",
          "jax/jit+scan": "JAX, jit + lax.scan", "torch/dataloader": "PyTorch, DataLoader (host batches)",
          "jax/jit-host": "JAX, jit per step (host batches)"}
NEEDS = {"torch/compile": "a working Inductor back end (a C++ compiler on a CPU, Triton on a GPU)",
         "torch/cuda-graph": "a CUDA GPU and an optimiser with capturable=True",
         "torch/cuda-graph+fused": "a CUDA GPU and the fused Adam (fused=True)",
         "torch/compile+cuda-graphs": "a CUDA GPU, Inductor and compiled autograd",
         "torch/cuda-graph-steps": "a CUDA GPU and an optimiser with capturable=True"}
#: Seed verdicts need this many seeds a side.
MIN_SEEDS = 5
#: The original post's test accuracies.
PUBLISHED = {"torch": 0.576, "flax": 0.797}
_VARIANTS = {  # name -> (run, pixel range)
    "torch": ("PyTorch, as published", "train [0, 1], test [-1, 1]"),
    "flax": ("Flax, as published", "[0, 1] for both"),
    "torch_fixed_normalisation": ("PyTorch, test scaled like train", "[0, 1] for both"),
    "flax_with_torch_init": ("Flax, PyTorch's initialisation", "[0, 1] for both"),
}
_PRECISION_WORDS = {
    "tf32": "TF32 (float32 storage, matmuls and convolutions on TensorFloat-32 tensor cores, on both sides)",
    "bfloat16": ("bfloat16 mixed precision (the network computes in bfloat16 from float32 master weights, the "
                 "loss, gradients and Adam's state stay float32; `torch.autocast` on one side, the same cast "
                 "inside the jitted loss on the other)"),
}


def ladder_tools(framework: str, precision: str = "float32") -> dict[str, str]:
    """The rungs of ``framework``'s ladder (``"torch"`` or ``"jax"``) in ``precision``, name -> loop:
    the whole ladder in float32, each side's best tools (:data:`PRECISION_TOOLS`) otherwise."""
    tools = {"torch": TORCH_TOOLS, "jax": JAX_TOOLS}[framework]
    return dict(tools) if precision == "float32" else {n: loop for n, loop in tools.items() if n in PRECISION_TOOLS}


def conditions_text(conditions: Mapping[str, Any], startup: Mapping[str, float], *, on_gpu: bool) -> str:
    """The conditions both frameworks ran under, and the one-time start-up paid before timing."""
    return (conditions_sentence(conditions, on_gpu=on_gpu) + " One-time start-up, paid before any "
            f"timing: `torch.compile` {words.fmt_seconds(startup['torch_compile_startup_s'])}, `jax.jit` "
            f"{words.fmt_seconds(startup['jax_jit_startup_s'])}.")


# ----------------------------------------------------------------------------- section 1: the original setting


def original_record(original_accuracy: Mapping[str, Sequence[float]], original_seeds: Sequence[int], *,
                    num_train: int) -> dict[str, Any]:
    """The original-setting part of the record: mean accuracy per variant (0-1), per seed, the seeds."""
    return {"original_setting": {name: float(np.mean(v)) for name, v in original_accuracy.items()},
            "original_setting_per_seed": {name: [float(a) for a in v] for name, v in original_accuracy.items()},
            "original_setting_seeds": list(original_seeds), "num_train": int(num_train)}


def _effects(metrics: Mapping[str, Any]) -> dict[str, float]:
    acc = {name: 100 * v for name, v in metrics["original_setting"].items()}
    return {**acc, "normalisation": acc["torch_fixed_normalisation"] - acc["torch"],
            "init": acc["flax"] - acc["flax_with_torch_init"],
            "framework": acc["flax_with_torch_init"] - acc["torch_fixed_normalisation"]}


def original_table(metrics: Mapping[str, Any]):
    """Section 1's table: each variant's accuracy, its spread over seeds, the original post's figure,
    and what changing one thing did."""
    import pandas as pd

    e = _effects(metrics)
    shows = {
        "torch": "The published mismatch: trained on [0, 1] images, tested on [-1, 1] ones.",
        "flax": "The published Flax run: no mismatch, Flax's default initialisation.",
        "torch_fixed_normalisation": f"Only the test scaling changed: {words.fmt_signed(e['normalisation'], 2)} points.",
        "flax_with_torch_init": (f"Only the initialisation changed: {words.fmt_signed(-e['init'], 2)} points; "
                                 f"{words.fmt_signed(e['framework'], 2)} from the fixed PyTorch run."),
    }
    rows = []
    for name, accs in metrics["original_setting_per_seed"].items():
        rows.append({"run": _VARIANTS[name][0], "pixel range": _VARIANTS[name][1],
                     "test accuracy (%)": 100 * np.mean(accs),
                     "± std over seeds": 100 * np.std(accs, ddof=1) if len(accs) > 1 else np.nan,
                     "original post (%)": 100 * PUBLISHED[name] if name in PUBLISHED else np.nan,
                     "what it shows": shows[name]})
    return pd.DataFrame(rows).set_index("run")


def original_claim(metrics: Mapping[str, Any]) -> str:
    """Section 1's paragraph: the published gap reproduced and taken apart, from the record."""
    e = _effects(metrics)
    n = len(metrics["original_setting_seeds"])
    return (
        f"With {words.plural(n, 'seed')} and {metrics['num_train']:,} training images, the published setting "
        f"gives {e['torch']:.1f}% for PyTorch against {e['flax']:.1f}% for Flax (the post reported "
        f"{100 * PUBLISHED['torch']:.1f}% and {100 * PUBLISHED['flax']:.1f}%). Scaling the test images like the "
        f"training images moves PyTorch by {words.fmt_signed(e['normalisation'], 2)} points, to "
        f"{e['torch_fixed_normalisation']:.1f}%. Flax's default initialisation is worth "
        f"{words.fmt_signed(e['init'], 2)} points over PyTorch's in this setting: two epochs of SGD at a learning "
        f"rate of 0.001 leave both networks far from converged, so where they start still shows. With the same "
        f"data and the same initialisation scheme, Flax ends {words.fmt_signed(e['framework'], 2)} points from "
        f"PyTorch" + (" (the spread over seeds is in the table)." if n > 1 else " (one seed).")
        + " No theory about JAX picking up finer spatial variation is needed.")


# ----------------------------------------------------------------------------- section 3: accuracy


def accuracy_record(histories: Mapping[tuple[str, str], Sequence[Any]], seeds: Sequence[int]) -> dict[str, Any]:
    """``{model: {framework: {"mean", "std", "seeds", "per_seed"}}}`` of the final test accuracy (0-1),
    from ``histories[(model, framework)]``, one :class:`sidebyside.lab.training.History` per seed."""
    out: dict[str, Any] = {}
    for (kind, fw), runs in histories.items():
        final = [float(h.test_accuracy[-1]) for h in runs]
        out.setdefault(kind, {})[fw] = {"mean": float(np.mean(final)),
                                        "std": float(np.std(final, ddof=1)) if len(final) > 1 else 0.0,
                                        "seeds": list(seeds), "per_seed": final}
    return out


# ----------------------------------------------------------------------------- section 4: speed


def speed_record(entries: Mapping[str, Mapping[str, Any]], *, steps_per_call: int, steps_per_epoch: int,
                 precision: str = "float32") -> dict[str, Any]:
    """One workload of ``metrics["speed"]`` from a ladder timed per call: the ladder scaled to an
    epoch (``ladder``, host-fed loops apart in ``host_fed``), each side's ``best``, the per-call
    entries, and the precision it ran in."""
    epoch = ladders.scaled(entries, steps_per_epoch / steps_per_call)
    ladder = {k: e for k, e in epoch.items() if k not in HOST_FED}
    record = {"precision": precision, "ladder": ladder, "best": ladders.best(ladder), "unit": "seconds per epoch",
              "steps_per_call": steps_per_call, "steps_per_epoch": steps_per_epoch,
              "per_call_ladder": {k: dict(e) for k, e in entries.items()}}
    host = {k: e for k, e in epoch.items() if k in HOST_FED}
    if host:
        record["host_fed"] = host
    return record


def ladder_table(speed: Mapping[str, Mapping[str, Any]], workloads: Sequence[str] | None = None):
    """The ladder(s) of ``speed`` workloads as one table, seconds per epoch; with several workloads
    each row names its model and precision."""
    import pandas as pd

    workloads = list(workloads or speed)
    frames = []
    for w in workloads:
        record = speed[w]
        table = tables.ladder_table({**record["ladder"], **record.get("host_fed", {})}, labels=LABELS, unit="s")
        if len(workloads) > 1:
            table = pd.concat({(w.split("/")[0].upper(), record["precision"]): table}, names=["model", "precision"])
        frames.append(table)
    return pd.concat(frames) if len(frames) > 1 else frames[0]


def scan_claim(speed: Mapping[str, Mapping[str, Any]], *, device: str, cnn_loop: str) -> str:
    """What ``lax.scan`` buys over a jitted step, per model, on this device (float32 ladders)."""
    parts = []
    for kind in ("mlp", "cnn"):
        ladder = speed[kind]["ladder"]
        scan, jit = ladder["jax/jit+scan"], ladder["jax/jit"]
        name = kind.upper()
        if scan["median_s"] is None or jit["median_s"] is None:
            parts.append(f"For the {name}, one of JAX's two rungs did not run, so the two cannot be compared here.")
            continue
        v = verdict.speed(scan, jit, question=f"Does lax.scan speed up JAX's {name} epoch?", subject_name="jax",
                          other_name="jax", subject_tool="jit + scan", other_tool="jit per step",
                          race=f"{kind}/scan-against-jit")
        parts.append(f"For the {name}: {v.sentence}")
    return " ".join(parts) + f" (measured on {device}; the CNN's training runs in section 3 used `{cnn_loop}`.)"


# ----------------------------------------------------------------------------- the record


def _question(kind: str, precision: str, structure: str = "") -> str:
    suffix = "" if precision == "float32" else f", in {'TF32' if precision == 'tf32' else 'bfloat16 mixed precision'}"
    how = {"single": " with one step a dispatch", "multi": " with a call's steps in one program"}.get(structure, "")
    return f"Which framework trains the {kind.upper()}'s epoch faster{how}, each at its best{suffix}?"


def _structure(name: str) -> str:
    return "multi" if name in MULTI_STEP else "single"


def structure_caveat(ladder: Mapping[str, Any]) -> str:
    """What still differs in how the two best rungs of ``ladder`` run a step: a different loop
    structure (one step a dispatch against all of a call's steps in one program), and the work a
    PyTorch rung does outside its graph that JAX does inside its program."""
    chosen = ladders.best(ladder)
    if chosen["torch"] is None or chosen["jax"] is None:
        return ""
    torch_name, jax_name = f"torch/{chosen['torch']}", f"jax/{chosen['jax']}"
    words = {"single": "one step a dispatch", "multi": "all of a call's steps in one program"}
    parts = []
    if _structure(torch_name) != _structure(jax_name):
        parts.append(f"The two best rungs differ in structure: PyTorch's ({chosen['torch']}) runs "
                     f"{words[_structure(torch_name)]}, JAX's ({chosen['jax']}) {words[_structure(jax_name)]}.")
    if chosen["torch"] in ("cuda-graph", "cuda-graph+fused"):
        parts.append("PyTorch's one-step graph is replayed from Python with three launches a step outside it (the "
                     "batch's index copy, the learning-rate fill, the loss sum) that JAX's step does inside its "
                     "program.")
    if chosen["torch"] == "cuda-graph-steps":
        parts.append("PyTorch's K-step graph takes its K learning rates from the host in one copy a call; JAX "
                     "computes them inside its program.")
    return " ".join(parts)


def _race(ladder: Mapping[str, Any], question: str, scale: Mapping[str, Any], race: str) -> verdict.Verdict:
    return ladders.ladder(ladder, question=question, caveat=structure_caveat(ladder), scale=scale, race=race)


def summarise(*, original: Mapping[str, Any] | None, accuracy: Mapping[str, Any] | None,
              speed: Mapping[str, Mapping[str, Any]],
              conditions: Mapping[str, Any], startup: Mapping[str, float], device: str, batch_size: int,
              num_test: int, epochs: Mapping[str, int], flax_cnn_loop: str,
              parameters: Mapping[str, int] | None = None) -> dict[str, Any]:
    """The results record: ``original`` from :func:`original_record`, ``accuracy`` from
    :func:`accuracy_record`, ``speed`` maps workloads (``"mlp"``, ``"cnn"``, ``"mlp/bfloat16"``, ...)
    to :func:`speed_record`; ``parameters``: each model's parameter count, for the verdicts' scale.
    Verdicts: speed best against best per workload in float32, like with like: one-step rungs
    against one-step rungs (``<kind>_speed``), then a call's steps in one program against the same
    (``<kind>_speed_steps``, :data:`MULTI_STEP`); each precision that ran on both sides; accuracy
    over seeds per model (at least :data:`MIN_SEEDS`). Each names what structural difference is
    left in its caveat (:func:`structure_caveat`) and carries its ``name``. A GPU run under
    ``hardware_only`` gives ``original`` and ``accuracy`` None (the cpu run's): the record holds
    ``original_setting`` and ``accuracy`` None and no accuracy verdict."""
    for kind in ("mlp", "cnn"):
        if kind not in speed:
            raise ValueError(f"speed needs the float32 workload {kind!r}; got {sorted(speed)}")
    parameters = dict(parameters or {})

    def scale(kind, precision="float32"):
        return framing.scale_of(parameters=parameters.get(kind), input="28×28 FashionMNIST images",
                                batch=batch_size, precision=precision, device=device)

    verdicts: dict[str, Any] = {}
    for kind in ("mlp", "cnn"):
        ladder = speed[kind]["ladder"]
        single = {n: e for n, e in ladder.items() if n not in MULTI_STEP}
        multi = {n: e for n, e in ladder.items() if n in MULTI_STEP}
        verdicts[f"{kind}_speed"] = _race(single, _question(kind, "float32", "single"), scale(kind),
                                          f"{kind}/float32/one-step/best")
        if multi:
            verdicts[f"{kind}_speed_steps"] = _race(multi, _question(kind, "float32", "multi"), scale(kind),
                                                    f"{kind}/float32/whole-call/best")
    for kind in ("mlp", "cnn") if accuracy is not None else ():
        per_seed = {fw: [100 * a for a in accuracy[kind][fw]["per_seed"]] for fw in ("torch", "flax")}
        verdicts[f"{kind}_accuracy"] = verdict.seeds(
            per_seed["torch"], per_seed["flax"], question=f"Do PyTorch and Flax reach the same {kind.upper()} test "
            "accuracy?", subject_name="torch", other_name="jax", unit=" points", min_seeds=MIN_SEEDS,
            scale=scale(kind), race=f"{kind}/accuracy")
    for name, record in speed.items():
        best = record["best"]
        if record["precision"] != "float32" and best["torch"] and best["jax"]:
            kind = name.split("/")[0]
            verdicts[f"{kind}_speed_{record['precision']}"] = _race(
                record["ladder"], _question(kind, record["precision"]), scale(kind, record["precision"]),
                f"{kind}/{record['precision']}/best")
    mlp = speed["mlp"]
    epoch_rows = {**mlp["ladder"], **mlp.get("host_fed", {})}
    return {
        **(original if original is not None else {"original_setting": None}),
        "accuracy": accuracy,
        "conditions": dict(conditions),
        "startup_s": dict(startup),
        "device": device,
        "speed": {name: dict(record) for name, record in speed.items()},
        "epoch_seconds": {n: {"median": e["median_s"], "iqr": e["iqr_s"]} for n, e in epoch_rows.items()},
        "compile_seconds": {n: e["compile_s"] for n, e in mlp["per_call_ladder"].items()},
        "verdicts": [{"name": name, **v.to_dict()} for name, v in verdicts.items()],
        "speed_model": "mlp",
        "speed_steps_per_call": mlp["steps_per_call"],
        "batch_size": batch_size,
        "num_test": num_test,
        "epochs": dict(epochs),
        "flax_cnn_loop": flax_cnn_loop,
    }


def _verdict(metrics: Mapping[str, Any], name: str) -> dict[str, Any] | None:
    return next((v for v in metrics["verdicts"] if v.get("name") == name), None)


def _best_cell(record: Mapping[str, Any], framework: str) -> str:
    tool = record["best"][framework]
    if tool is None:
        return "no tool ran"
    e = record["ladder"][f"{framework}/{tool}"]
    return f"{words.fmt_seconds(e['median_s'])} ± {words.fmt_seconds(e['iqr_s'] / 2)} ({tool})"


def results_table(metrics: Mapping[str, Any]):
    """Section 5's table: the original setting, the accuracies, each side's best epoch per workload."""
    import pandas as pd

    orig, acc = metrics["original_setting"], metrics["accuracy"]

    def accuracy_cell(kind, fw):
        return f"{100 * acc[kind][fw]['mean']:.2f} ± {100 * acc[kind][fw]['std']:.2f}%"

    rows = {}
    if orig is not None:  # None: a GPU run's (hardware_only), whose accuracies are the cpu run's
        rows["original setting, as published"] = (f"{100 * orig['torch']:.1f}%", f"{100 * orig['flax']:.1f}%")
        rows["original setting, fixed"] = (f"{100 * orig['torch_fixed_normalisation']:.1f}%",
                                           f"{100 * orig['flax_with_torch_init']:.1f}% (PyTorch's init)")
    if acc is not None:
        rows[f"MLP, {metrics['epochs']['mlp']} epochs (Adam)"] = (accuracy_cell("mlp", "torch"),
                                                                 accuracy_cell("mlp", "flax"))
        rows[f"CNN, {metrics['epochs']['cnn']} epochs (Adam)"] = (accuracy_cell("cnn", "torch"),
                                                                 accuracy_cell("cnn", "flax"))
    for name, record in metrics["speed"].items():
        kind, _, precision = name.partition("/")
        if record["best"]["torch"] is None and record["best"]["jax"] is None:
            continue  # a precision this device does not have: the ladder table says why
        label = f"best {kind.upper()} epoch{'' if not precision else f', {precision}'} (median ± IQR/2, tool)"
        rows[label] = (_best_cell(record, "torch"), _best_cell(record, "jax"))
    return pd.DataFrame(rows, index=["PyTorch", "Flax / JAX"]).T


# ----------------------------------------------------------------------------- the conclusion's claims


def accuracy_claim(metrics: Mapping[str, Any]) -> str:
    """Is JAX more accurate? The original gap's two causes, then the seed verdicts per model."""
    e = _effects(metrics)
    return (
        f"**Is JAX more accurate than PyTorch?** No. The original post's "
        f"{100 * (PUBLISHED['flax'] - PUBLISHED['torch']):.0f}-point gap came from outside the frameworks: a test "
        f"set normalised differently from the training set (fixing it moves PyTorch from {e['torch']:.1f}% to "
        f"{e['torch_fixed_normalisation']:.1f}%), and two default initialisations that matter while two epochs of "
        f"slow SGD leave a network far from converged (Flax with PyTorch's initialisation: "
        f"{e['flax_with_torch_init']:.1f}%). Trained properly and identically, the MLP: "
        f"{_verdict(metrics, 'mlp_accuracy')['sentence']} The CNN: {_verdict(metrics, 'cnn_accuracy')['sentence']} "
        f"Started from the same weights, the two frameworks follow the same loss curve to float32 rounding (the "
        f"library's tests check it).")


def speed_claim(metrics: Mapping[str, Any]) -> str:
    """Best against best in float32 (TF32 off on both sides), per model, like with like: one step a
    dispatch, then a call's steps in one program, and what each ladder shows."""
    def both(kind):
        text = f"One step a dispatch: {_verdict(metrics, f'{kind}_speed')['sentence']}"
        steps = _verdict(metrics, f"{kind}_speed_steps")
        return text + (f" A call's steps in one program: {steps['sentence']}" if steps else "")

    return (f"**Where they differ is speed**, on {metrics['device']}, each framework with its whole ladder of tools, "
            f"in float32 with TF32 off on both sides. The MLP's epoch. {both('mlp')}"
            f"\n\nThe CNN's epoch. {both('cnn')}")


def host_claim(metrics: Mapping[str, Any]) -> str:
    """What the host-fed loops most tutorials write cost against the same steps on device-resident data."""
    mlp = metrics["speed"]["mlp"]
    host = {k: e for k, e in mlp.get("host_fed", {}).items() if e["median_s"] is not None}
    eager, jit = mlp["ladder"]["torch/eager"]["median_s"], mlp["ladder"]["jax/jit"]["median_s"]
    if len(host) < 2 or not eager or not jit:
        return ""
    return ("The loops most tutorials write, with batches sent from the host: "
            + ladders.relative(host["torch/dataloader"]["median_s"], eager, "the same eager step on device-resident data",
                               "a PyTorch `DataLoader` epoch")
            + ", and "
            + ladders.relative(host["jax/jit-host"]["median_s"], jit, "the device-resident jitted step",
                               "a jitted JAX step fed NumPy batches") + ".")


def compile_claim(metrics: Mapping[str, Any]) -> str:
    """The first-call overhead (compilation or capture) of the MLP's compiled float32 rungs."""
    compiled = {k: v for k, v in metrics["compile_seconds"].items()
                if v is not None and k not in ("torch/eager", *HOST_FED)}
    if not compiled:
        return ""
    return ("First-call overhead of the MLP's compiled rungs (compilation, or graph capture), paid once in a warm "
            "process: " + ", ".join(f"{LABELS.get(k, k)} {words.fmt_seconds(v)}" for k, v in compiled.items()) + ".")


def _switch(metrics: Mapping[str, Any], kind: str, precision: str) -> str:
    """Each side's best in ``precision`` against its own float32 best: what the switch buys."""
    record, base = metrics["speed"][f"{kind}/{precision}"], metrics["speed"][kind]
    parts = []
    for fw in ("torch", "jax"):
        tool, base_tool = record["best"][fw], base["best"][fw]
        if tool is None or base_tool is None:
            continue
        parts.append(ladders.relative(record["ladder"][f"{fw}/{tool}"]["median_s"],
                                      base["ladder"][f"{fw}/{base_tool}"]["median_s"], f"its float32 best ({base_tool})",
                                      f"{words.FRAMEWORKS[fw]}'s best in {precision} ({tool})"))
    return "; ".join(parts)


def precision_claim(metrics: Mapping[str, Any], kind: str, precision: str) -> str:
    """The TF32 or bfloat16 rows of one model: best against best within that precision, why a row
    does not apply, and what the precision changes (never a like-for-like race with float32)."""
    record = metrics["speed"].get(f"{kind}/{precision}")
    if record is None:
        return ""
    words = _PRECISION_WORDS[precision]
    v = _verdict(metrics, f"{kind}_speed_{precision}")
    if v is None:
        reasons = sorted({e["not_applicable"] for e in record["ladder"].values() if e.get("not_applicable")})
        errors = [f"{n} ({e['error']})" for n, e in record["ladder"].items() if e.get("error")]
        why = "; ".join(reasons + errors) or "no tool ran on one side"
        return f"The {kind.upper()} in {words}: no comparison on this machine: {why}."
    text = f"The {kind.upper()} in {words}. {v['sentence']}"
    switch = _switch(metrics, kind, precision)
    if switch:
        changes = ("bfloat16 rounds the network's inputs, weights and activations to 8 significant bits, so its "
                   "losses leave float32's, within the bfloat16 rounding bound that the library's tests check on "
                   "both sides" if precision == "bfloat16" else
                   "TF32 rounds the inputs of matmuls and convolutions to 11 significant bits")
        text += (f" The switch changes the arithmetic as well as the time: {changes}. Against each side's own "
                 f"float32 best, {switch}. A different computation, not the same work done faster or slower, so "
                 f"these rows stand beside the float32 ladder rather than race it.")
    return text


def conclusion(metrics: Mapping[str, Any]) -> str:
    """The post's Conclusion (Markdown), from the results record alone."""
    paragraphs = [accuracy_claim(metrics)] if metrics.get("accuracy") and metrics.get("original_setting") else []
    paragraphs.append(speed_claim(metrics))
    tail = " ".join(t for t in (host_claim(metrics), compile_claim(metrics)) if t)
    if tail:
        paragraphs[-1] += " " + tail
    precision_parts = [precision_claim(metrics, kind, p) for p in ("tf32", "bfloat16") for kind in ("mlp", "cnn")]
    precision_parts = [p for p in precision_parts if p]
    if precision_parts:
        covered = sorted({name.split("/")[0].upper() for name in metrics["speed"] if "/" in name})
        if covered != ["CNN", "MLP"]:
            precision_parts.append(f"The precision rows of this run cover the {' and '.join(covered)} only (its "
                                   f"`precision_models` parameter).")
        paragraphs.append("**Other precisions, each raced within itself.** " + " ".join(precision_parts))
    return "\n\n".join(paragraphs)
