"""weight-visualisation: the record and the conclusion of the post on what a
PyTorch and a Flax MLP learn (roughness of the first-layer templates, CKA of the
hidden layers, accuracy).

Input contract of the notebook's measured objects:

- ``runs``: ``{variant: [run, ...]}`` with the variants of :data:`VARIANTS`
  (``torch``, ``flax``, ``flax_torch_init``, ``flax_same_init``), one run per
  seed, each a dict with ``seed`` (int), ``accuracy`` (test accuracy, a
  fraction) and ``weights``: ``{epoch: {"fc1": (128, 784), "fc2": (10, 128)}}``
  in PyTorch's ``(units, inputs)`` layout, epoch 0 being the initial weights.
- ``cka``: ``{"trained": {comparison: values}, "untrained": {...}}`` as
  :func:`cka_values` returns it (the comparisons of :data:`CKA_COMPARISONS`).

One seed-noise rule: every "within seed noise" below is
:func:`sidebyside.lab.verdict.seeds` (difference of the means against two Welch
standard errors), through :func:`roughness` and :func:`accuracy`; the verdict
box reads the same verdicts from the record. The CKA claims are
:func:`cka_like_within` and :func:`closer_than_any_two_seeds`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from sidebyside.lab import analysis, framing, verdict, words
from sidebyside.run import provenance

__all__ = [
    "VARIANTS",
    "CKA_COMPARISONS",
    "weight_statistics",
    "weight_table",
    "cka_values",
    "cka_table",
    "summarise",
    "results_table",
    "roughness",
    "accuracy",
    "cka_like_within",
    "closer_than_any_two_seeds",
    "batches_matter",
    "headline",
    "look_of_the_weights",
    "what_the_networks_compute",
    "accuracy_claim",
    "graphs_claim",
    "conclusion",
]

#: The variants the post trains, and how its tables name them.
VARIANTS = {
    "torch": "PyTorch (default init)",
    "flax": "Flax (default init)",
    "flax_torch_init": "Flax (PyTorch's init)",
    "flax_same_init": "Flax (PyTorch's initial weights)",
}

#: The variants whose templates are compared for roughness (``flax_same_init`` has one seed only).
TV_VARIANTS = ("torch", "flax", "flax_torch_init")

#: Record key -> (table label, group a, group b, same seed): which CKA pairs each comparison takes
#: (see :func:`sidebyside.lab.analysis.cka_pairs`). Across frameworks, pairs with different seeds, so that
#: they differ in the same things as two seeds of one framework; "same seed" pairs share the batch order.
CKA_COMPARISONS = {
    "torch_vs_torch": ("PyTorch vs PyTorch (seeds)", "torch", "torch", False),
    "flax_vs_flax": ("Flax vs Flax (seeds)", "flax", "flax", False),
    "torch_vs_flax": ("PyTorch vs Flax (default inits)", "torch", "flax", False),
    "torch_vs_flax_torch_init": ("PyTorch vs Flax (PyTorch's init)", "torch", "flax_torch_init", False),
    "torch_vs_flax_torch_init_same_batches": ("PyTorch vs Flax (PyTorch's init), same seed: same batches",
                                              "torch", "flax_torch_init", True),
    "flax_vs_flax_torch_init": ("Flax vs Flax (default vs PyTorch's init)", "flax", "flax_torch_init", False),
    "torch_vs_flax_same_init": ("PyTorch vs Flax (same initial weights, same batches)",
                                "torch", "flax_same_init", True),
}

#: Cross-framework CKA counts as "like within-framework pairs" when it lies inside their range widened by
#: this much: a small run has few within-framework pairs, so their range understates the seed spread.
CKA_MARGIN = 0.005

#: The original post's test accuracies (percent), quoted, not measured here.
ORIGINAL_ACCURACY = {"torch": 57.6, "jax": 79.7}

WITHIN = "within seed noise"

_COLUMNS = {"norm_init": "norm at init", "norm_end": "norm at end", "relative_change": "relative change",
            "unit_norm_end": "unit norm at end", "std_end": "std at end", "tv_init": "TV at init",
            "tv_end": "TV at end", "tv_update": "TV of update"}


# ----------------------------------------------------------------------------- the notebook's tables


def weight_statistics(runs: Mapping[str, Sequence[Mapping]], num_epochs: int) -> dict[tuple[str, str], Any]:
    """Per network, how its weights changed in training: ``{(variant, layer): DataFrame}``,
    one row per seed, the columns of :func:`sidebyside.lab.analysis.weight_change` (``fc1``
    with the total variation of its 28x28 templates)."""
    import pandas as pd

    out = {}
    for variant, rs in runs.items():
        for layer in ("fc1", "fc2"):
            shape = (28, 28) if layer == "fc1" else None
            out[variant, layer] = pd.DataFrame([
                analysis.weight_change(r["weights"][0][layer], r["weights"][num_epochs][layer], shape) for r in rs])
    return out


def _mean_pm_std(values) -> str:
    mean, std = analysis.mean_std(values)
    return words.fmt_number(mean) + ("" if np.isnan(std) else f" ± {words.fmt_number(std)}")


def weight_table(per_network: Mapping[tuple[str, str], Any], variants: Mapping[str, str] = VARIANTS):
    """The weight statistics of :func:`weight_statistics` as one table: a row per
    variant and layer, each value "mean ± standard deviation over seeds"."""
    import pandas as pd

    rows = []
    for (variant, layer), frame in per_network.items():
        row = {"variant": variants[variant], "layer": layer, "seeds": len(frame)}
        row.update({_COLUMNS[c]: _mean_pm_std(frame[c]) for c in frame})
        rows.append(row)
    return pd.DataFrame(rows).set_index(["variant", "layer"]).fillna("")


def cka_values(trained, untrained, networks: Sequence[tuple[str, int]]) -> dict[str, dict[str, np.ndarray]]:
    """The CKA pairs of every comparison in :data:`CKA_COMPARISONS`, from the CKA
    matrices of the trained and untrained networks (rows named by ``networks``,
    ``(variant, seed)``): ``{"trained": {key: values}, "untrained": {key: values}}``."""
    comparisons = {key: spec[1:] for key, spec in CKA_COMPARISONS.items()}
    return {"trained": analysis.cka_comparisons(trained, networks, comparisons),
            "untrained": analysis.cka_comparisons(untrained, networks, comparisons)}


def cka_table(cka: Mapping[str, Mapping[str, Sequence[float]]]):
    """The CKA comparisons as a table: pairs, trained mean and range, untrained mean."""
    import pandas as pd

    rows = {}
    for key, (label, *_) in CKA_COMPARISONS.items():
        end, start = np.asarray(cka["trained"][key], float), np.asarray(cka["untrained"][key], float)
        rows[label] = {"pairs": len(end), "CKA, trained (mean)": _mean(end),
                       "CKA, trained (min–max)": f"{end.min():.3f}–{end.max():.3f}" if len(end) else "",
                       "CKA, untrained (mean)": _mean(start)}
    return pd.DataFrame.from_dict(rows, orient="index")


def _mean(values) -> float:
    values = np.asarray(values, dtype=float)
    return float(values.mean()) if values.size else float("nan")


# ----------------------------------------------------------------------------- the record


def _spread(values) -> dict[str, float]:
    return dict(zip(("mean", "std"), analysis.mean_std(values)))


def summarise(runs: Mapping[str, Sequence[Mapping]], cka: Mapping[str, Mapping[str, Sequence[float]]], *,
              param_counts: Mapping[str, int], graph_equations: Mapping[str, int], num_images: int,
              num_epochs: int, num_train: int, num_steps: int, variants: Mapping[str, str] = VARIANTS,
              device: str | None = None) -> dict[str, Any]:
    """The post's results record (JSON-able) from its measured objects.

    ``runs`` and ``cka``: see the module docstring. ``param_counts``: parameters
    per framework (``torch``, ``flax``); ``graph_equations``: equations in the
    ``forward`` and ``gradient`` jaxprs; ``num_images``: held-out images behind
    the CKA; ``num_steps``: optimiser steps per network; ``device``: where it
    ran (default: :func:`sidebyside.run.provenance.collect`'s). The record keeps the
    per-seed values that :func:`conclusion` and the verdicts test.
    """
    missing = [v for v in VARIANTS if v not in runs or not runs[v]]
    if missing:
        raise ValueError(f"summarise needs runs of every variant; none for {missing}: train them first")
    stats = weight_statistics({v: runs[v] for v in TV_VARIANTS}, num_epochs)
    fc1 = {v: stats[v, "fc1"] for v in TV_VARIANTS}
    trained = {k: np.asarray(v, float) for k, v in cka["trained"].items()}
    untrained = {k: np.asarray(v, float) for k, v in cka["untrained"].items()}
    torch_end = runs["torch"][0]["weights"][num_epochs]["fc1"]
    copied_end = runs["flax_same_init"][0]["weights"][num_epochs]["fc1"]
    metrics = {
        "cka": {k: _mean(trained[k]) for k in ("torch_vs_flax", "torch_vs_torch", "flax_vs_flax")},
        "cka_controls": {
            **{k: _mean(trained[k]) for k in ("torch_vs_flax_torch_init", "torch_vs_flax_torch_init_same_batches",
                                              "torch_vs_flax_same_init")},
            **{f"untrained_{k}": _mean(untrained[k]) for k in ("torch_vs_flax", "torch_vs_torch", "flax_vs_flax")},
            "num_images": num_images,
        },
        "cka_pairs": {"trained": trained, "untrained": untrained},
        "total_variation": {v: _spread(fc1[v]["tv_end"]) for v in ("torch", "flax")},
        "total_variation_details": {
            "definition": "mean |difference of 4-neighbour weights| / RMS of the 28x28 template; per network: "
                          "mean over its units; mean and std over seeds",
            "flax_torch_init": _spread(fc1["flax_torch_init"]["tv_end"]),
            "update": {v: _spread(fc1[v]["tv_update"]) for v in TV_VARIANTS},
            "init": {v: _spread(fc1[v]["tv_init"]) for v in TV_VARIANTS},
        },
        "param_counts": dict(param_counts),
        "accuracy": {v: _mean([r["accuracy"] for r in rs]) for v, rs in runs.items()},
        "per_seed": {
            "accuracy": {v: [float(r["accuracy"]) for r in rs] for v, rs in runs.items()},
            "total_variation": {v: fc1[v]["tv_end"].tolist() for v in TV_VARIANTS},
        },
        "init_std_ratio": float(np.std(runs["flax"][0]["weights"][0]["fc1"])
                                / np.std(runs["torch"][0]["weights"][0]["fc1"])),
        "same_start": {"relative_difference": analysis.relative_change(torch_end, copied_end),
                       "num_steps": num_steps},
        "graph_equations": dict(graph_equations),
        "variants": dict(variants),
        "device": device if device is not None else provenance.collect()["device"],
        "num_seeds": len(runs["torch"]),
        "num_epochs": num_epochs,
        "num_train": num_train,
    }
    scale = framing.scale_of(parameters=param_counts.get("torch"), input="28×28 FashionMNIST images",
                             precision="float32", device=metrics["device"])
    metrics["verdicts"] = [  # the seed's claim first (default initialisers), then the control, then accuracy
        roughness(metrics, "flax", question="With their default initialisers, are Flax's final first-layer "
                                            "templates rougher than PyTorch's?",
                  min_seeds=MIN_SEEDS, scale=scale).to_dict(),
        roughness(metrics, "flax_torch_init",
                  question="Given the same initialiser, are Flax's learned first-layer templates rougher than "
                           "PyTorch's?",
                  caveat="Flax here is the Flax network with PyTorch's initialiser; with its own, its initial "
                         "noise shows.", min_seeds=MIN_SEEDS, scale=scale).to_dict(),
        accuracy(metrics, "flax", question="With their default initialisers, which MLP reaches the higher "
                                           "test accuracy?", min_seeds=MIN_SEEDS, scale=scale).to_dict(),
    ]
    return provenance.to_jsonable(metrics)


def results_table(metrics: Mapping[str, Any]):
    """The post's results table, from the record: accuracy, roughness of the final
    templates and of the learned update, and CKA with PyTorch, per variant."""
    import pandas as pd

    names = metrics["variants"]
    details = metrics["total_variation_details"]
    tv_end = {**metrics["total_variation"], "flax_torch_init": details["flax_torch_init"]}
    cka = {"torch": (metrics["cka"]["torch_vs_torch"], 3, " (other seeds)"),
           "flax": (metrics["cka"]["torch_vs_flax"], 3, ""),
           "flax_torch_init": (metrics["cka_controls"]["torch_vs_flax_torch_init"], 3, ""),
           "flax_same_init": (metrics["cka_controls"]["torch_vs_flax_same_init"], 4, " (same start)")}

    def spread(entry: Mapping[str, Any]) -> str:
        return f"{entry['mean']:.3f} ± {entry['std']:.3f}" if entry.get("std") is not None else f"{entry['mean']:.3f}"

    return pd.DataFrame({
        "test accuracy (%)": {names[v]: _mean_pm_percent(a) for v, a in metrics["per_seed"]["accuracy"].items()},
        "TV of final templates": {names[v]: spread(e) for v, e in tv_end.items()},
        "TV of learned update": {names[v]: spread(e) for v, e in details["update"].items()},
        "CKA with PyTorch (trained)": {names[v]: f"{value:.{digits}f}{note}" for v, (value, digits, note) in cka.items()},
    }).fillna("")


def _mean_pm_percent(values: Sequence[float]) -> str:
    mean, std = analysis.mean_std(100 * np.asarray(values, float))
    return f"{mean:.2f}" + ("" if np.isnan(std) else f" ± {std:.2f}")


# ----------------------------------------------------------------------------- claims


#: The verdict box's seed verdicts need this many seeds a side (the prose's claims report any number).
MIN_SEEDS = 5


def roughness(metrics: Mapping[str, Any], variant: str, *, question: str = "", caveat: str = "",
              min_seeds: int = 1, scale: Mapping[str, Any] | None = None) -> verdict.Verdict:
    """:func:`sidebyside.lab.verdict.seeds` on the normalised total variation of the final
    templates, PyTorch (subject) against the Flax ``variant`` (``flax`` or
    ``flax_torch_init``); lower is smoother. ``min_seeds`` and ``scale``: as in
    :func:`sidebyside.lab.verdict.seeds`. Its race (its id's first part): ``roughness/<variant>``."""
    tv = metrics["per_seed"]["total_variation"]
    return verdict.seeds(tv["torch"], tv[variant], subject_name="torch", other_name="jax",
                         question=question or f"Are {variant}'s final first-layer templates rougher than PyTorch's?",
                         quantity="normalised total variation of the final templates", unit="",
                         higher_is_better=False, caveat=caveat, min_seeds=min_seeds, scale=scale,
                         race=f"roughness/{variant}")


def accuracy(metrics: Mapping[str, Any], variant: str, *, question: str = "", min_seeds: int = 1,
             scale: Mapping[str, Any] | None = None) -> verdict.Verdict:
    """:func:`sidebyside.lab.verdict.seeds` on test accuracy (percent), PyTorch (subject)
    against the Flax ``variant``. ``min_seeds`` and ``scale``: as in :func:`sidebyside.lab.verdict.seeds`.
    Its race (its id's first part): ``accuracy/<variant>``."""
    acc = metrics["per_seed"]["accuracy"]
    return verdict.seeds([100 * a for a in acc["torch"]], [100 * a for a in acc[variant]],
                         subject_name="torch", other_name="jax", min_seeds=min_seeds, scale=scale,
                         race=f"accuracy/{variant}", question=question or f"Does {variant} reach a different test accuracy from PyTorch?")


def _within(v: verdict.Verdict) -> bool:
    return v.label == WITHIN


def _against_noise(v: verdict.Verdict, unit: str = "") -> str:
    """"inside two standard errors (0.008): within seed noise" or "beyond ...", the verdict's own test."""
    where = "inside" if _within(v) else "beyond"
    text = f"{where} two standard errors ({words.fmt_number(v.threshold)}{unit})"
    return text + (": within seed noise" if _within(v) else "")


def _cka(metrics: Mapping[str, Any], key: str) -> np.ndarray:
    return np.asarray(metrics["cka_pairs"]["trained"][key], dtype=float)


def _fixed(value: float | None, digits: int = 3) -> str:
    """A value to ``digits`` decimals; "n/a" when the record holds none (NaN is stored as null)."""
    return "n/a" if value is None or np.isnan(value) else f"{value:.{digits}f}"


def _within_framework(metrics: Mapping[str, Any]) -> np.ndarray:
    return np.concatenate([_cka(metrics, "torch_vs_torch"), _cka(metrics, "flax_vs_flax")])


def cka_like_within(metrics: Mapping[str, Any]) -> bool:
    """Is the CKA of a PyTorch and a Flax network (default inits, different seeds)
    like that of two networks of one framework: inside the range of the
    within-framework pairs, widened by :data:`CKA_MARGIN`?"""
    within = _within_framework(metrics)
    if within.size == 0:
        return False
    return bool(within.min() - CKA_MARGIN <= metrics["cka"]["torch_vs_flax"] <= within.max() + CKA_MARGIN)


def closer_than_any_two_seeds(metrics: Mapping[str, Any]) -> bool:
    """Do the PyTorch and Flax networks started from the same weights on the same
    batches end more alike (CKA) than any pair that differs in seed or batches?"""
    others = [_within_framework(metrics), _cka(metrics, "torch_vs_flax_torch_init"),
              _cka(metrics, "torch_vs_flax_torch_init_same_batches")]
    highest = max((o.max() for o in others if o.size), default=-np.inf)
    return bool(metrics["cka_controls"]["torch_vs_flax_same_init"] > highest)


def batches_matter(metrics: Mapping[str, Any]) -> bool:
    """Do a PyTorch and a Flax network that share a seed's batch order (not its initial
    draw) score above every cross-framework pair with different batches?"""
    different = _cka(metrics, "torch_vs_flax_torch_init")
    return bool(different.size and metrics["cka_controls"]["torch_vs_flax_torch_init_same_batches"] > different.max())


def _initialiser_explains(metrics: Mapping[str, Any]) -> bool:
    return _within(roughness(metrics, "flax_torch_init"))


def _flax_rougher(metrics: Mapping[str, Any]) -> bool:
    v = roughness(metrics, "flax")
    return not _within(v) and v.difference < 0  # difference: PyTorch minus Flax


def headline(metrics: Mapping[str, Any]) -> str:
    """The answer to "does the framework matter, or the seed?": the seed and the
    initialiser when cross-framework CKA is like within-framework CKA and, given
    the same initialiser, the templates' roughness is within seed noise."""
    if cka_like_within(metrics) and _initialiser_explains(metrics):
        return "The seed and the initialiser; not the framework."
    if cka_like_within(metrics):
        return "For what the networks compute, the seed; the look of the weights needs the details below."
    return "Here the framework seems to matter; see the details below."


def look_of_the_weights(metrics: Mapping[str, Any]) -> str:
    """Roughness of the final templates, default inits and then PyTorch's init in
    Flax (both through :func:`roughness`); the learned update against the initial
    noise; and, when the initialiser explains the difference, why."""
    tv = {v: metrics["total_variation"][v]["mean"] for v in ("torch", "flax")}
    default, control = roughness(metrics, "flax"), roughness(metrics, "flax_torch_init")
    numbers = (f"normalised total variation {_fixed(tv['flax'])} against "
               f"{_fixed(tv['torch'])}, a difference of {words.fmt_signed(-default.difference)}, "
               f"{_against_noise(default)}")
    if _within(default):
        look = f"With their default initialisers, Flax's final templates are no rougher than PyTorch's: {numbers}."
    else:
        rougher = default.difference < 0
        look = (f"With their default initialisers, Flax's final templates are {'rougher' if rougher else 'smoother'} "
                f"than PyTorch's: {numbers}"
                + (", so the original post saw a real difference." if rougher
                   else ", the opposite of the original post's impression."))
    details = metrics["total_variation_details"]
    update = {v: _fixed(details["update"][v]["mean"]) for v in TV_VARIANTS}
    init = {v: _fixed(details["init"][v]["mean"], 2) for v in ("torch", "flax")}
    text = (f"{look} Give Flax PyTorch's initialiser and the difference becomes "
            f"{words.fmt_signed(-control.difference)}, {_against_noise(control)}. "
            f"The learned update (final minus initial weights) is about as smooth in both frameworks "
            f"({update['torch']} in PyTorch, {update['flax']} in Flax, {update['flax_torch_init']} in Flax with "
            f"PyTorch's init), far smoother than the initial weights, which are white noise ({init['torch']} in "
            f"PyTorch, {init['flax']} in Flax).")
    if _within(control) and _flax_rougher(metrics):
        text += (f" So the \"fine-grained variation\" is initial noise that "
                 f"{words.plural(metrics['num_epochs'], 'epoch')} of training did not wash out, and Flax's "
                 f"`lecun_normal` starts with {metrics['init_std_ratio']:.2f} times as much of it (standard "
                 f"deviation) as PyTorch's uniform initialiser.")
    return text


def what_the_networks_compute(metrics: Mapping[str, Any]) -> str:
    """The CKA claims: across against within frameworks (:func:`cka_like_within`),
    the batch order (:func:`batches_matter`) and the same start
    (:func:`closer_than_any_two_seeds`)."""
    cka, controls = metrics["cka"], metrics["cka_controls"]
    within = _within_framework(metrics)
    untrained = metrics["cka_pairs"]["untrained"]
    baseline = np.mean([_mean(v) for k, v in untrained.items() if k != "torch_vs_flax_same_init" and len(v)])
    like = ("like two networks of one framework" if cka_like_within(metrics)
            else "unlike two networks of one framework")
    if within.size == 0:  # one seed per variant: no two networks of one framework to compare
        return (f"With one seed per variant there are no two networks of one framework to compare; started from "
                f"the same weights on the same batches, a PyTorch and a Flax network reach CKA "
                f"{_fixed(controls['torch_vs_flax_same_init'], 4)} on {controls['num_images']} held-out images.")
    text = (f"The hidden layers of a PyTorch and a Flax network with different seeds have linear CKA "
            f"{_fixed(cka['torch_vs_flax'])} on {controls['num_images']} held-out images "
            f"({_fixed(controls['torch_vs_flax_torch_init'])} with PyTorch's initialiser in Flax), {like}: "
            f"{_fixed(cka['torch_vs_torch'])} for two PyTorch networks and {_fixed(cka['flax_vs_flax'])} for two "
            f"Flax networks (within-framework pairs range from {within.min():.3f} to {within.max():.3f}; untrained "
            f"networks score about {baseline:.2f}).")
    different = _cka(metrics, "torch_vs_flax_torch_init")
    same_batches = controls["torch_vs_flax_torch_init_same_batches"]
    if different.size:
        span = f"{different.min():.3f} to {different.max():.3f}"
        if batches_matter(metrics):
            text += (f" A PyTorch and a Flax network that share the seed's batch order (not its initial draw) "
                     f"score {_fixed(same_batches)}, above every pair with different batches ({span}): part of what "
                     f"\"the seed\" decides is the order of the batches.")
        else:
            text += (f" Sharing the batch order (not the initial draw) changes little: {_fixed(same_batches)} against "
                     f"{span} for pairs with different batches.")
    closeness = "closer than any two seeds" if closer_than_any_two_seeds(metrics) else "about as close as two seeds"
    same = metrics["same_start"]
    text += (f" Started from the same weights on the same batches, the two frameworks' networks end {closeness} "
             f"(CKA {_fixed(controls['torch_vs_flax_same_init'], 4)}), but not identical: last-bit differences in their "
             f"float32 arithmetic, amplified by ReLU thresholds and Adam over {same['num_steps']} steps, leave their "
             f"first-layer weights {words.fmt_number(100 * same['relative_difference'], 2)}% apart (section 3.4).")
    return text


def accuracy_claim(metrics: Mapping[str, Any]) -> str:
    """Test accuracy, Flax against PyTorch with default inits and with PyTorch's init
    in Flax (both through :func:`accuracy`), and why the original's gap says nothing."""
    acc = {v: 100 * a for v, a in metrics["accuracy"].items()}
    default, control = accuracy(metrics, "flax"), accuracy(metrics, "flax_torch_init")
    return (f"With the same data, normalisation and optimiser, Flax's default networks score {acc['flax']:.2f}% "
            f"against PyTorch's {acc['torch']:.2f}% ({words.plural(metrics['num_seeds'], 'seed')} each), a "
            f"difference of {words.fmt_signed(-default.difference)} points, {_against_noise(default, ' points')}; "
            f"with PyTorch's initialiser, Flax's networks score {acc['flax_torch_init']:.2f}%, "
            f"{words.fmt_signed(-control.difference)} points against PyTorch, "
            f"{_against_noise(control, ' points')}. "
            f"The original's {ORIGINAL_ACCURACY['torch']}% (PyTorch) against {ORIGINAL_ACCURACY['jax']}% (JAX) says "
            f"nothing about the frameworks: among other differences, its PyTorch test set was normalised to "
            f"[-1, 1] while its training set was not.")


def graphs_claim(metrics: Mapping[str, Any]) -> str:
    """JAX's counterpart of torchviz, with the sizes of the two jaxprs drawn."""
    graphs = metrics["graph_equations"]
    return (f"JAX's counterpart of torchviz is its jaxpr, which a small renderer (`viz.jaxpr_graph`) draws with "
            f"graphviz: {graphs['forward']} equations for the forward pass, {graphs['gradient']} for the gradient, "
            f"against torchviz's view of the recorded backward functions.")


def conclusion(metrics: Mapping[str, Any]) -> str:
    """The post's Conclusion (Markdown, without its heading), from the record alone."""
    seeds_note = (" With one seed per variant the seed-to-seed spread is unknown: treat every difference as a "
                  "single observation." if metrics["num_seeds"] < 2 else "")
    return (f"**Does the framework matter, or the seed? {headline(metrics)}**\n\n"
            f"- *The look of the weights.* {look_of_the_weights(metrics)}\n"
            f"- *What the networks compute.* {what_the_networks_compute(metrics)}\n"
            f"- *Accuracy.* {accuracy_claim(metrics)}\n"
            f"- *Graphs.* {graphs_claim(metrics)}\n\n"
            f"Measured with {words.plural(metrics['num_seeds'], 'seed')} per variant, {metrics['num_train']} "
            f"training images and {words.plural(metrics['num_epochs'], 'epoch')}, on {metrics['device']}. "
            f"Nothing here is timed, so this post has no GPU figures to add.{seeds_note}\n")
