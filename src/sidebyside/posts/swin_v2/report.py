"""swin-transformer-v2: the record and the conclusion of the Swin Transformer V2 post.

The notebook measures four things: parity (:func:`sidebyside.posts.swin_v2.parity`, one run per model
size), accuracy over seeds (a :class:`sidebyside.lab.training.History` per framework and seed), the
speed ladders (:func:`sidebyside.posts.swin_v2.speed_ladder`, one per precision, phase and batch) and, from the
training ladders, the first step and first epoch (:func:`sidebyside.posts.swin_v2.first_step`). Here they
become the results record (:func:`summarise`) and the post's sentences, each from a small claim
function: :func:`parity_claim`, :func:`accuracy_claim`, :func:`first_epoch_claim`,
:func:`seed_pairing_claim`, :func:`headline_claim`, composed by :func:`conclusion`.

The seed reported JAX 27% faster at training and 140% faster at validating: time ratios
PyTorch / JAX of 1.27 and 2.40 (:data:`SEED_RATIO`), for Swin-V2-T at 256×256 on the seed's GPU
(``seed_scale``, which the notebook states). Every speed verdict states its own scale and is read
against that claim (:func:`sidebyside.lab.framing.frame`): a run at another scale says it does not
answer it yet.
The per-epoch times of the accuracy runs are read against the ladder at their batch
(:func:`epoch_claim`), so a record whose two measurements point opposite ways says why.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from typing import Any

from sidebyside.lab import analysis, framing, ladders, verdict, words

__all__ = [
    "TOLERANCE",
    "SEED_RATIO",
    "within_tolerance",
    "parity_record",
    "parity_table",
    "accuracy_record",
    "accuracy_verdict",
    "speed_rows",
    "speed_table",
    "first_steps",
    "IMPLEMENTATIONS",
    "ACROSS",
    "whole_loop_verdict",
    "speed_verdicts",
    "summarise",
    "setting_name",
    "parity_claim",
    "accuracy_claim",
    "first_epoch_claim",
    "seed_pairing_claim",
    "epoch_claim",
    "headline_claim",
    "conclusion",
]

#: Parity tolerances for float32 and logits of order one: the largest |logit difference|, and for
#: each parameter tensor ||g_JAX - g_PyTorch|| / ||g_PyTorch|| (tests/test_swin.py uses the same).
TOLERANCE = {"abs_logit": 1e-5, "rel_grad": 1e-3}

#: The seed's figures as time ratios PyTorch / JAX: "27% faster" training, "140% faster" validation.
SEED_RATIO = {"train": 1.27, "eval": 2.40}

#: Seed verdicts need this many seeds a side.
MIN_SEEDS = 5


def seed_claim(phase: str, scale: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """The seed's claim for ``phase`` ("train" or "eval") at the seed's ``scale``
    (:func:`sidebyside.lab.framing.scale_of`; the seed ran batch 32 and 64, named in the claim's
    text rather than compared), or None without a scale."""
    if scale is None:
        return None
    what = "training" if phase == "train" else "validation"
    return framing.claim("the seed", f"JAX {words.fmt_ratio(SEED_RATIO[phase])} PyTorch's {what} throughput, "
                                     "batch 32 and 64", scale)

_TIMED_COLUMNS = ("median_s", "iqr_s", "q1_s", "q3_s", "images_per_s", "compile_s", "peak_memory_bytes")


# ----------------------------------------------------------------------------- parity


def within_tolerance(run: Mapping[str, Any], tolerance: Mapping[str, float] = TOLERANCE) -> bool:
    """Whether one :func:`sidebyside.posts.swin_v2.parity` run is inside the float32 tolerances."""
    return run["max_abs_logit_err"] <= tolerance["abs_logit"] and run["max_rel_grad_err"] <= tolerance["rel_grad"]


def parity_record(runs: Mapping[str, Mapping[str, Any]], *, headline: str = "trained model") -> dict[str, Any]:
    """The record's ``parity``: the ``headline`` run's errors at the top level (the model whose
    accuracy the post reports; it must pass), the tolerances, and every run as measured."""
    run = runs[headline]
    return {"max_abs_logit_err": run["max_abs_logit_err"], "max_rel_grad_err": run["max_rel_grad_err"],
            "worst_grad": run["worst_grad"], "loss_err": run["loss_err"],
            "tensors_compared": run["tensors_compared"], "tolerance": dict(TOLERANCE), "runs": dict(runs)}


def parity_table(runs: Mapping[str, Mapping[str, Any]]):
    """One row per parity run: the largest logit, the errors, the worst tensor, pass or not."""
    import pandas as pd

    return pd.DataFrame({
        name: {"largest |logit|": r["logit_scale"], "max |logit difference|": r["max_abs_logit_err"],
               "loss difference": r["loss_err"], "max relative gradient error": r["max_rel_grad_err"],
               "worst tensor": r["worst_grad"], "tensors compared": r["tensors_compared"],
               "within tolerance": within_tolerance(r)}
        for name, r in runs.items()
    }).T


def parity_claim(parity: Mapping[str, Any]) -> str:
    """The parity sentence, from the record's ``parity``: the errors against their tolerances,
    and whether the two frameworks compute the same network."""
    tol = parity.get("tolerance", TOLERANCE)
    passed = within_tolerance(parity, tol)
    measured = (f"Same weights, same input: the logits differ by at most "
                f"{words.fmt_number(parity['max_abs_logit_err'])} (tolerance {words.fmt_number(tol['abs_logit'])}), "
                f"and over all {parity['tensors_compared']} parameter tensors the largest relative gradient error is "
                f"{words.fmt_number(parity['max_rel_grad_err'])} (`{parity['worst_grad']}`; tolerance "
                f"{words.fmt_number(tol['rel_grad'])})")
    if passed:
        return measured + (": float32 rounding, in a different summation order. "
                           "The two frameworks compute the same network.")
    return measured + ": outside the tolerance, so the two networks differ and the timings below compare two functions."


# ----------------------------------------------------------------------------- accuracy


def accuracy_record(histories: Mapping[str, Sequence[Any]], seeds: Sequence[int]) -> dict[str, Any]:
    """The record's ``accuracy``: per framework, the final test accuracy's ``mean``, ``std``
    (over seeds, :func:`analysis.mean_std`: ddof 1, NaN with one seed, whose spread is
    unknown; null in the JSON), ``seeds``, ``per_seed`` and the median epoch time."""
    out = {}
    for framework, runs in histories.items():
        final = [float(h.test_accuracy[-1]) for h in runs]
        epochs = [s for h in runs for s in h.epoch_seconds]
        mean, std = analysis.mean_std(final)
        out[framework] = {
            "mean": mean,
            "std": std,
            "seeds": list(seeds),
            "per_seed": final,
            "epoch_seconds_median": statistics.median(epochs) if epochs else None,
        }
    return out


def accuracy_verdict(accuracy: Mapping[str, Any], scale: Mapping[str, Any] | None = None) -> verdict.Verdict:
    """Do the two frameworks train the network to the same test accuracy (in points, over
    seeds)? No verdict with fewer than :data:`MIN_SEEDS` seeds a side."""
    return verdict.seeds([100 * a for a in accuracy["torch"]["per_seed"]],
                         [100 * a for a in accuracy["jax"]["per_seed"]],
                         question="Do the two frameworks train Swin V2 to the same accuracy?",
                         quantity="test accuracy", unit=" points", min_seeds=MIN_SEEDS, scale=scale, race="accuracy")


def accuracy_claim(accuracy: Mapping[str, Any], *, num_train: int, num_epochs: int) -> str:
    """The accuracy sentence: the seed-noise verdict, then how much training it rests on."""
    return (accuracy_verdict(accuracy).sentence
            + f" ({num_train:,} training images, {words.plural(num_epochs, 'epoch')}.)")


# ----------------------------------------------------------------------------- speed


def setting_name(key: str) -> str:
    """``"float32/train/64"`` -> "training, batch 64, float32"."""
    precision, phase, batch = key.split("/")
    return f"{'training' if phase == 'train' else 'evaluation'}, batch {batch}, {precision}"


def speed_rows(speed: Mapping[str, Mapping[str, Any]]):
    """Every rung of every ladder as one row (precision, phase, batch, tool, name and the
    ladder entry), a failed or absent tool's missing numbers as NaN."""
    import pandas as pd

    from sidebyside.posts import swin_v2 as swin

    rows = pd.DataFrame([
        {"precision": r["precision"], "phase": r["phase"], "batch": r["batch_size"],
         "tool": swin.TOOL_LABELS[name], "name": name, **entry}
        for r in speed.values() for name, entry in r["ladder"].items()
    ])
    for column in _TIMED_COLUMNS:
        if column in rows:
            rows[column] = pd.to_numeric(rows[column], errors="coerce")
    return rows


def speed_table(rows):
    """The post's speed table from :func:`speed_rows`: per step in ms with its IQR, images per
    second, compile time, peak memory in MiB, and whether the tool ran (or why not)."""
    import pandas as pd

    def status(median, not_applicable, error):
        if median == median:  # not NaN
            return "ran"
        return f"not applicable: {not_applicable}" if not_applicable else f"failed: {error}"

    return pd.DataFrame({
        "precision": rows["precision"], "phase": rows["phase"], "batch": rows["batch"], "tool": rows["tool"],
        "per step (ms, median)": 1e3 * rows["median_s"], "IQR (ms)": 1e3 * rows["iqr_s"],
        "images / s": rows["images_per_s"], "compile (s)": rows["compile_s"],
        "peak memory (MiB)": rows["peak_memory_bytes"] / 2**20,
        "status": [status(m, na, e) for m, na, e in zip(rows["median_s"], rows["not_applicable"], rows["error"])],
    }).set_index(["precision", "phase", "batch", "tool"])


def first_steps(speed: Mapping[str, Mapping[str, Any]], *, epoch_images: int = 9469) -> dict[str, Any]:
    """The record's ``first_step``: :func:`sidebyside.posts.swin_v2.first_step` for every working rung of
    every training ladder, keyed ``"<precision>/train/<batch>/<framework>/<tool>"``."""
    from sidebyside.posts import swin_v2 as swin

    return {
        f"{key}/{name}": {"precision": r["precision"], "batch": r["batch_size"], "tool": swin.TOOL_LABELS[name],
                          **swin.first_step(e, batch_size=r["batch_size"], epoch_images=epoch_images)}
        for key, r in speed.items() if r["phase"] == "train" for name, e in r["ladder"].items()
        if e["median_s"] is not None
    }


def _headline_key(speed: Mapping[str, Mapping[str, Any]]) -> str:
    """The setting the conclusion leads with: float32 training at the largest batch."""
    return max((k for k in speed if speed[k]["phase"] == "train" and speed[k]["precision"] == "float32"),
               key=lambda k: speed[k]["batch_size"], default=next(iter(speed)))


def _both_ran(entries: Mapping[str, Any], names: Sequence[str] = ("torch/eager", "jax/jit")) -> bool:
    return all(entries.get(n, {}).get("median_s") is not None for n in names)


def speed_scale(result: Mapping[str, Any], model: Mapping[str, Any] | None, device: str | None,
                parameters: int | None = None) -> dict[str, Any]:
    """The scale of one ladder (``result``: a ``speed`` entry) on the timed ``model`` (a config dict)."""
    size = f"{model['img_size']}×{model['img_size']}×{model['in_chans']}" if model else None
    return framing.scale_of(parameters=parameters, input=size, batch=result["batch_size"],
                            precision=result["precision"], device=device)


#: What does the work in each rung (the verdicts' contestants): timm's model on PyTorch's side, this
#: project's Flax NNX port, written with Flax's own tools, on JAX's.
IMPLEMENTATIONS = {
    "torch/eager": ("timm's SwinV2 on ATen's kernels, one launch per op from Python", "framework"),
    "torch/compile": ("timm's SwinV2 in kernels Inductor generates, one step a call", "framework"),
    "torch/cuda_graph": ("timm's SwinV2 in kernels Inductor generates, one step's CUDA graph replayed a call",
                         "framework"),
    "torch/cuda_graph_steps": ("timm's SwinV2 on ATen's kernels, a call's K steps replayed from one CUDA graph",
                               "framework"),
    "jax/jit": ("the Flax NNX port, one XLA program a step", "built_with"),
    "jax/jit_scan": ("the Flax NNX port, one XLA program looping over a call's K steps (lax.scan)", "built_with"),
}

#: The question of the cross-structure verdict, where PyTorch has no whole-loop program to race JAX's.
ACROSS = "JAX's whole loop in one program (lax.scan) against PyTorch's best per-step dispatch"


def _described(entries: Mapping[str, Any]) -> dict[str, Any]:
    """Ladder entries with what does their work (:data:`IMPLEMENTATIONS`), for the contestants."""
    out = {}
    for name, e in entries.items():
        implementation, origin = IMPLEMENTATIONS.get(name, (None, None))
        out[name] = {**e, "implementation": e.get("implementation") or implementation,
                     "origin": e.get("origin") or origin}
    return out


def _ran(entry: Mapping[str, Any] | None) -> bool:
    return bool(entry) and not entry.get("error") and entry.get("median_s") is not None


def whole_loop_verdict(result: Mapping[str, Any], *, scale: Mapping[str, Any] | None = None,
                       against: Mapping[str, Any] | None = None) -> verdict.Verdict | None:
    """The race of one ladder's whole-loop rungs (``result``: a ``speed`` entry), or None where
    JAX's ``jit_scan`` was not asked for. Where PyTorch's CUDA graph of K steps ran, whole loop
    against whole loop, best against best (:func:`sidebyside.lab.ladders.ladder`). Where it did not
    (a CPU has none; or it failed), ``jit_scan`` gets its own labelled verdict, :data:`ACROSS`,
    against PyTorch's fastest per-step rung, whose sentence and caveat name the structural
    difference and why PyTorch has no whole-loop program here."""
    from sidebyside.posts import swin_v2 as swin

    entries = result["ladder"]
    parts = swin.by_structure(entries)
    whole = _described(parts["whole_loop"])
    if "jax/jit_scan" not in whole:
        return None
    race = f"{result['precision']}/{result['phase']}/{result['batch_size']}"
    setting = setting_name(race)
    k = result.get("steps_per_call")
    steps = words.plural(k, "step") if k else "steps"
    graph = whole.get("torch/cuda_graph_steps")
    per_step = ladders.best(parts["per_step"])
    if _ran(graph) or not _ran(whole["jax/jit_scan"]) or per_step["torch"] is None:
        return ladders.ladder(whole, scale=scale, against=against, race=f"{race}/whole-loop/best",
                              question=f"Which framework is faster at Swin V2 {setting} with a call's steps in one "
                                       "program, JAX's lax.scan against PyTorch's CUDA graph of K steps?")
    torch_name = f"torch/{per_step['torch']}"
    why = ("not timed in this run" if graph is None else
           f"failed: {graph['error']}" if graph.get("error") else graph.get("not_applicable") or "it did not run")
    structure = (f"Not the same loop structure: JAX runs a call's {steps} as one XLA program, one dispatch a call; "
                 f"PyTorch ({per_step['torch']}) dispatches each step from Python, and has no whole-loop program to "
                 f"race it here (a CUDA graph of K steps: {why}). The difference includes the per-step dispatch that "
                 "JAX's scan does not pay.")
    described = _described({torch_name: entries[torch_name], "jax/jit_scan": entries["jax/jit_scan"]})
    v = verdict.speed(described[torch_name], described["jax/jit_scan"], subject_tool=per_step["torch"],
                      other_tool="jit_scan", caveat=structure, scale=scale, against=against,
                      race=f"{race}/whole-loop-against-per-step",
                      question=f"{ACROSS}: which is faster at Swin V2 {setting}?",
                      contestants={side: framing.contestant(side, name.split("/")[1], described[name]["implementation"],
                                                            origin=described[name]["origin"])
                                   for side, name in (("torch", torch_name), ("jax", "jax/jit_scan"))})
    v.sentence = f"{ACROSS}: {v.sentence}"
    return v


def speed_verdicts(speed: Mapping[str, Mapping[str, Any]], *, model: Mapping[str, Any] | None = None,
                   device: str | None = None, parameters: int | None = None,
                   seed_scale: Mapping[str, Any] | None = None) -> list[verdict.Verdict]:
    """Best tool against best tool for every setting (float32 training at the largest batch
    first), like loop structure against like (:func:`sidebyside.posts.swin_v2.by_structure`): the
    rungs that dispatch one step at a time against each other, then per setting the whole-loop
    race (:func:`whole_loop_verdict`: JAX's ``lax.scan`` against PyTorch's CUDA graph of K steps,
    or, where PyTorch has none, :data:`ACROSS`, labelled as such), then the seed's own pairing,
    PyTorch eager against JAX jit, in float32. Each states its scale (``model``: the timed model's
    config dict, its ``parameters``, the ``device``) and is read against the seed's claim for its
    phase at ``seed_scale`` (:func:`seed_claim`)."""
    from sidebyside.posts import swin_v2 as swin

    headline = _headline_key(speed)
    order = [headline] + [k for k in speed if k != headline]
    out = [ladders.ladder(_described(swin.by_structure(speed[k]["ladder"])["per_step"]),
                          question=f"Which framework is faster at Swin V2 {setting_name(k)}, one step a dispatch, "
                                   f"best tool against best tool?",
                          scale=speed_scale(speed[k], model, device, parameters),
                          against=seed_claim(speed[k]["phase"], seed_scale), race=f"{k}/per-step/best") for k in order]
    for k in order:
        whole = whole_loop_verdict(speed[k], scale=speed_scale(speed[k], model, device, parameters),
                                   against=seed_claim(speed[k]["phase"], seed_scale))
        if whole is not None:
            out.append(whole)
    for key in order:
        entries = speed[key]["ladder"]
        if speed[key]["precision"] == "float32" and _both_ran(entries):
            out.append(verdict.speed(
                entries["torch/eager"], entries["jax/jit"], subject_tool="eager", other_tool="jit",
                question=f"With the seed's pairing, PyTorch eager against JAX jit, which is faster at Swin V2 "
                         f"{setting_name(key)}?",
                contestants={"torch": framing.contestant("torch", "eager", "timm's SwinV2 on ATen's kernels"),
                             "jax": framing.contestant("jax", "jit", "the Flax NNX port, one XLA program a step",
                                                       origin="built_with")},
                scale=speed_scale(speed[key], model, device, parameters),
                against=seed_claim(speed[key]["phase"], seed_scale), race=f"{key}/eager-against-jit"))
    return out


# ----------------------------------------------------------------------------- the record


def summarise(*, parity_runs: Mapping[str, Mapping[str, Any]], accuracy: Mapping[str, Any] | None,
              speed: Mapping[str, Mapping[str, Any]], model_config, speed_config, num_train: int, num_test: int,
              num_epochs: int, allow_tf32: bool, timm_version: str, conditions: Mapping[str, Any], device: str,
              on_gpu: bool, parts: Mapping[str, Any] | None = None, batch_size: int | None = None,
              parameters: Mapping[str, int] | None = None,
              seed_scale: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The post's results record: ``parity``, ``accuracy``, ``speed`` (per precision/phase/batch
    ladder), ``first_step``, ``verdicts`` (speed verdicts, then accuracy) and what the numbers were
    measured on (models, data sizes, TF32, timm's version, the conditions, the device) and, for a
    run in parts (:class:`sidebyside.run.checkpoints.Checkpoints`), which run measured each part, at
    which commit (``parts``). ``batch_size``: the accuracy runs' batch; ``parameters``: the
    parameter count of ``"model"`` (trained) and ``"speed_model"`` (timed), for the verdicts' scale;
    ``seed_scale``: where the seed measured (:func:`seed_claim`). A GPU run under ``hardware_only`` gives
    ``accuracy`` None (the cpu run's: no accuracy verdict) and the timed model's parity alone, which then
    heads ``parity``."""
    parameters = dict(parameters or {})
    model, timed = model_config.to_dict(), speed_config.to_dict()
    verdicts = speed_verdicts(speed, model=timed, device=device, parameters=parameters.get("speed_model"),
                              seed_scale=seed_scale)
    if accuracy is not None:
        verdicts.append(accuracy_verdict(accuracy, framing.scale_of(
            parameters=parameters.get("model"), input=f"{model['img_size']}×{model['img_size']}×{model['in_chans']}",
            batch=batch_size, precision="float32", device=device)))
    out = {
        "parity": parity_record(parity_runs, headline="trained model" if "trained model" in parity_runs else
                                "timed model"),
        "accuracy": None if accuracy is None else dict(accuracy),
        "speed": dict(speed),
        "first_step": first_steps(speed),
        "verdicts": [v.to_dict() for v in verdicts],
        "model": model_config.to_dict(),
        "speed_model": speed_config.to_dict(),
        "num_train": num_train,
        "num_test": num_test,
        "num_epochs": num_epochs,
        "allow_tf32": allow_tf32,
        "timm": timm_version,
        "conditions": dict(conditions),
        "device": device,
        "on_gpu": on_gpu,
        "parts": dict(parts or {}),
        "batch_size": batch_size,
        "parameters": parameters,
    }
    note = epoch_claim(out)
    if note:  # the two measurements of training speed disagree: the seed-pairing verdict says why
        for v in out["verdicts"]:
            if v["question"].startswith("With the seed's pairing") and "training" in v["question"]:
                v["caveat"] = f"{v['caveat']} {note}".strip()
                v["sentence"] = f"{v['sentence']} {note}"
    return out


# ----------------------------------------------------------------------------- claims


def epoch_claim(metrics: Mapping[str, Any]) -> str:
    """The accuracy runs' per-epoch times (PyTorch eager, JAX one jitted step a batch, at
    ``batch_size``) against the float32 training ladder's eager and jit rungs. Empty when they
    point the same way (or cannot be compared); else which way each points, and the ladder at the
    accuracy runs' batch where it was measured, which says whether the batch explains it."""
    acc = metrics.get("accuracy") or {}
    epochs = {k: acc.get(k, {}).get("epoch_seconds_median") for k in ("torch", "jax")}
    ladders = {k: r for k, r in metrics.get("speed", {}).items()
               if r["phase"] == "train" and r["precision"] == "float32" and _both_ran(r["ladder"])}
    if None in epochs.values() or not ladders:
        return ""
    epoch_jax_faster = epochs["jax"] < epochs["torch"]
    per_step = {k: r["ladder"]["jax/jit"]["median_s"] < r["ladder"]["torch/eager"]["median_s"]
                for k, r in ladders.items()}
    if all(faster == epoch_jax_faster for faster in per_step.values()):
        return ""
    batch = metrics.get("batch_size")
    same = [k for k, r in ladders.items() if r["batch_size"] == batch]
    head = (f"The accuracy runs point the other way: a training epoch (batch {batch}, "
            f"{'one input channel' if metrics.get('model', {}).get('in_chans') == 1 else 'its own input'}) takes "
            f"JAX {words.fmt_seconds(epochs['jax'])} against PyTorch eager's {words.fmt_seconds(epochs['torch'])}.")
    if same:
        r = ladders[same[0]]["ladder"]
        agrees = per_step[same[0]] == epoch_jax_faster
        return head + (f" The ladder at that batch agrees with them (JAX jit {words.fmt_seconds(r['jax/jit']['median_s'])}"
                       f" against PyTorch eager {words.fmt_seconds(r['torch/eager']['median_s'])} a step): the "
                       "direction depends on the batch." if agrees else
                       f" The ladder at that batch does not (JAX jit {words.fmt_seconds(r['jax/jit']['median_s'])} "
                       f"against PyTorch eager {words.fmt_seconds(r['torch/eager']['median_s'])} a step), so the "
                       "difference lies in the training loops themselves, which this run does not separate further.")
    return head + (f" The ladder was not run at batch {batch}, so this run cannot say whether the batch explains "
                   "it; a run with the accuracy batch in speed_batch_sizes would.")


def first_epoch_claim(first_step: Mapping[str, Mapping[str, Any]]) -> str:
    """The seed's first-epoch observation, tool by tool: compilation and set-up, allocation
    (or that it cannot be separated), a steady step, and how much longer the first epoch is."""
    parts = []
    for f in first_step.values():
        if f.get("error"):
            continue
        alloc = ("allocation cannot be separated on this device" if f["allocation_s"] is None else
                 f"allocation {words.fmt_seconds(f['allocation_s'])}")
        parts.append(f"{f['tool']} (batch {f['batch']}, {f['precision']}): compilation and one-off set-up "
                     f"{words.fmt_seconds(f['compile_s'] or 0.0)}, {alloc}, a steady step "
                     f"{words.fmt_seconds(f['steady_s'])}; the first epoch is "
                     f"{words.fmt_number(100 * f['first_epoch_excess'])}% longer than a steady one")
    return "; ".join(parts) + "." if parts else "No training rung ran, so there is no first step to split."


def seed_pairing_claim(speed: Mapping[str, Mapping[str, Any]], phase: str) -> str | None:
    """For float32 ``phase`` ("train" or "eval") at the largest batch: the seed's pairing (PyTorch
    eager against JAX jit) as JAX's throughput over PyTorch's beside the seed's figure, then best
    against best, like loop structure against like (:func:`sidebyside.posts.swin_v2.by_structure`):
    one step a dispatch, and whole loop against whole loop where both sides ran one. None when no
    such setting was measured."""
    from sidebyside.posts import swin_v2 as swin

    keys = [k for k in speed if speed[k]["precision"] == "float32" and speed[k]["phase"] == phase]
    if not keys:
        return None
    key = max(keys, key=lambda k: speed[k]["batch_size"])
    entries = speed[key]["ladder"]
    parts = []
    if _both_ran(entries):
        ratio = entries["torch/eager"]["median_s"] / entries["jax/jit"]["median_s"]
        parts.append(f"the seed's pairing, PyTorch eager against JAX jit, gives JAX {words.fmt_ratio(ratio)} "
                     f"PyTorch's throughput (the seed reported {words.fmt_ratio(SEED_RATIO[phase])})")
    for structure, what in (("per_step", "one step a dispatch"), ("whole_loop", "a call's steps in one program")):
        chosen = ladders.best(swin.by_structure(entries)[structure])
        if chosen["ratio"] is not None:
            parts.append(f"best against best with {what} (PyTorch {chosen['torch']}, JAX {chosen['jax']}) gives "
                         f"{words.fmt_ratio(chosen['ratio'])}")
    if not parts:
        return None
    what = f"{'Training' if phase == 'train' else 'Evaluation'} at batch {speed[key]['batch_size']}"
    return f"{what}: " + "; ".join(parts) + "."


def headline_claim(metrics: Mapping[str, Any]) -> str:
    """The seed's question and the first verdict's answer, with the device, the input size and
    the parity that makes the comparison one of the same network."""
    size = metrics["speed_model"]["img_size"]
    return (f"**Is JAX really 27% faster at training and 140% faster at validating?** Measured on "
            f"{metrics['device']}, {size}×{size} inputs, the same network on both sides (logits within "
            f"{words.fmt_number(metrics['parity']['max_abs_logit_err'])}): {metrics['verdicts'][0]['sentence']}")


def conclusion(metrics: Mapping[str, Any]) -> str:
    """The post's Conclusion (Markdown), computed from the results record alone."""
    answers = [a for a in (seed_pairing_claim(metrics["speed"], "train"),
                           seed_pairing_claim(metrics["speed"], "eval")) if a]
    rest = "\n\n".join(f"- {v['question']} {v['sentence']}" for v in metrics["verdicts"][1:])
    closing = ("The seed compared PyTorch eager with JAX's jit; each framework's best tool against the other's, "
               "like loop structure against like (one step a dispatch against one step a dispatch, a whole loop in "
               "one program against the same), is the fairer question, and the ladder shows how much of a gap comes "
               "from the tool rather than the framework.")
    if not metrics["on_gpu"]:
        closing += (" These are CPU figures for a small model at a small size: they show that the port computes the "
                    "same network and how each framework's tools rank at this size on one core, not how the "
                    "frameworks compare at the seed's size on a GPU; the `gpu` profile times the seed's model size "
                    "and input.")
    return "\n\n".join(part for part in (headline_claim(metrics), " ".join(answers), rest, closing) if part)
