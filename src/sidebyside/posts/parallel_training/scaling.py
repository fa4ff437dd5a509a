"""parallel-training's scaling over real GPUs (two or more): the strategies at 1, 2, 4, ... and every
GPU with the same global batch. :func:`scaling_record` keeps, per framework, strategy and GPU count,
the step time, the strong-scaling efficiency (:func:`scaling_efficiency`: ``t1 / (n * tn)``, each
strategy against its own one-GPU step) and the losses' largest deviation from the framework's
one-device run; :func:`scaling_table`, :func:`scaling_figure` and :func:`scaling_claim` show it."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sidebyside.lab import words
from sidebyside.posts.parallel_training.names import STRATEGY_NAMES, TOOLS, spoken_list

__all__ = ["scaling_efficiency", "scaling_record", "scaling_table", "scaling_figure", "scaling_claim"]


def scaling_efficiency(times: Mapping[int, float]) -> dict[int, float]:
    """Strong-scaling efficiency per device count from step times at the same global batch
    (``times``: device count -> seconds): ``t1 / (n * tn)``; 1 at one device, 1/n where more
    devices saved no time. ValueError without a time at one device, or for a time that is not
    positive."""
    if 1 not in times:
        raise ValueError(f"scaling efficiency needs the step time on one device; got counts {sorted(times)}")
    bad = {n: t for n, t in times.items() if t is None or not t > 0}
    if bad:
        raise ValueError(f"step times must be positive seconds; got {bad}")
    return {n: times[1] / (n * times[n]) for n in sorted(times)}


def scaling_record(runs: Mapping[int, Mapping[str, Any]], *, device: str, tolerance: float,
                   model_parallel: Mapping[int, int] | None = None) -> dict[str, Any] | None:
    """The scaling runs over real GPUs (``runs``: GPU count -> ``{"torch": torch_record(...), "jax":
    jax_record(...)}``, 1 among the counts) as the record keeps them: ``device`` (the GPU's name),
    ``counts``, ``model_parallel`` (count -> the 2-D strategy's model axis), ``tolerance``, and
    ``strategies``: framework -> strategy -> str(count) -> ``median_s``, ``iqr_s``, ``efficiency``
    (:func:`scaling_efficiency` of that strategy's medians) and ``max_loss_deviation`` from the
    framework's one-device run with ``within_tolerance``. The one-device strategy is the losses'
    reference, not a row. None when ``runs`` is empty (no scaling measured)."""
    if not runs:
        return None
    counts = sorted(runs)
    out: dict[str, dict[str, dict[str, Any]]] = {}
    for fw in ("torch", "jax"):
        out[fw] = {}
        for s in STRATEGY_NAMES:
            if s == "one_device" or any(s not in runs[n][fw] for n in counts):
                continue
            recs = {n: runs[n][fw][s] for n in counts}
            efficiency = scaling_efficiency({n: r["time"]["median_s"] for n, r in recs.items()})
            out[fw][s] = {str(n): {"median_s": r["time"]["median_s"], "iqr_s": r["time"]["iqr_s"],
                                   "efficiency": efficiency[n], "max_loss_deviation": r["max_loss_deviation"],
                                   "within_tolerance": r["max_loss_deviation"] <= tolerance}
                          for n, r in recs.items()}
    return {"device": device, "counts": counts, "tolerance": tolerance,
            "model_parallel": {str(n): int((model_parallel or {}).get(n, 1)) for n in counts}, "strategies": out}


def _scaling_rows(scaling: Mapping[str, Any]):
    for s in STRATEGY_NAMES:
        for fw in ("torch", "jax"):
            for n, r in scaling["strategies"][fw].get(s, {}).items():
                yield s, fw, int(n), r


def scaling_table(metrics: Mapping[str, Any]):
    """One row per strategy, framework and GPU count of the scaling runs: step time (median, IQR,
    and the CPU threads of each worker process, ``metrics["threads"]``), scaling efficiency and the
    largest loss deviation; None where the record has no scaling runs."""
    import pandas as pd

    scaling = metrics.get("scaling")
    if not scaling:
        return None
    threads = metrics.get("threads")
    rows = [{"strategy": STRATEGY_NAMES[s], "framework, tool": f"{words.FRAMEWORKS[fw]}, {TOOLS[fw][s]}",
             "GPUs": n, "step time (ms, median)": 1e3 * r["median_s"], "IQR (ms)": 1e3 * r["iqr_s"],
             "CPU threads per worker process": "not recorded" if threads is None else threads,
             "scaling efficiency (%)": 100 * r["efficiency"], "largest loss deviation": r["max_loss_deviation"]}
            for s, fw, n, r in _scaling_rows(scaling)]
    return pd.DataFrame(rows).set_index(["strategy", "framework, tool", "GPUs"])


def scaling_figure(metrics: Mapping[str, Any]):
    """Scaling efficiency against the GPU count, one panel per framework, one line per strategy,
    the ideal (100%) dashed; None where the record has no scaling runs."""
    import matplotlib.pyplot as plt

    scaling = metrics.get("scaling")
    if not scaling:
        return None
    counts = scaling["counts"]
    fig, axes = plt.subplots(1, 2, figsize=(10, 4), sharey=True)
    for ax, fw in zip(axes, ("torch", "jax")):
        for (s, per), marker in zip(scaling["strategies"][fw].items(), "s^vDo"):
            ax.plot([int(n) for n in per], [100 * r["efficiency"] for r in per.values()], marker=marker,
                    label=f"{STRATEGY_NAMES[s]} ({TOOLS[fw][s]})")
        ax.axhline(100, color="grey", linestyle="--", label="ideal")
        ax.set_xscale("log", base=2)
        ax.set_xticks(counts, [str(n) for n in counts])
        ax.set(title=words.FRAMEWORKS[fw], xlabel=f"GPUs ({scaling['device']})")
        ax.legend(fontsize=7)
    axes[0].set_ylabel("scaling efficiency, t1 / (n × tn) (%)")
    fig.tight_layout()
    return fig


def scaling_claim(metrics: Mapping[str, Any]) -> str:
    """What the scaling runs over real GPUs measured, from the record alone: where they ran, each
    strategy's efficiency at the largest count per framework, the highest and lowest, and whether
    every strategy's losses follow its framework's one-device run. Without scaling runs, the run's
    GPU note (which says that scaling was not measured)."""
    scaling = metrics.get("scaling")
    if not scaling:
        return metrics.get("gpu_note") or "Scaling was not measured: this run had fewer than two GPUs."
    counts, top = scaling["counts"], str(max(scaling["counts"]))
    at_top = [(r["efficiency"], fw, s) for s, fw, n, r in _scaling_rows(scaling) if str(n) == top]
    per_fw = "; ".join(
        f"{words.FRAMEWORKS[fw]} " + spoken_list([f"{STRATEGY_NAMES[s]} ({TOOLS[fw][s]}) "
                                              f"{words.fmt_number(100 * e)}%" for e, f, s in at_top if f == fw])
        for fw in ("torch", "jax"))
    (low, lfw, ls), (high, hfw, hs) = min(at_top), max(at_top)
    rows = list(_scaling_rows(scaling))
    worst = max(rows, key=lambda row: row[3]["max_loss_deviation"])
    beyond = [f"{words.FRAMEWORKS[fw]} {STRATEGY_NAMES[s]} on {words.plural(n, 'GPU')}"
              for s, fw, n, r in rows if not r["within_tolerance"]]
    tolerance = words.fmt_number(scaling["tolerance"])
    losses = (f"Every strategy's losses follow its framework's one-device run at every GPU count: the largest "
              f"deviation is {words.fmt_number(worst[3]['max_loss_deviation'])}, inside the float32 tolerance of "
              f"{tolerance}." if not beyond else
              f"Beyond the float32 tolerance of {tolerance} from the framework's one-device run: {spoken_list(beyond)}.")
    return (f"Measured on real GPUs ({scaling['device']}): every strategy of both frameworks ran on "
            f"{spoken_list([str(n) for n in counts])} GPUs with the same global batch of {metrics['batch_size']} "
            f"(strong scaling), PyTorch over NCCL with one torchrun worker per GPU, JAX in one process driving "
            f"them all. Scaling efficiency, t1 / (n × tn) with each strategy against its own one-GPU step, at "
            f"{top} GPUs: {per_fw}. Highest: {words.FRAMEWORKS[hfw]}'s {STRATEGY_NAMES[hs]} at "
            f"{words.fmt_number(100 * high)}%; lowest: {words.FRAMEWORKS[lfw]}'s {STRATEGY_NAMES[ls]} at "
            f"{words.fmt_number(100 * low)}%. The 2-D strategy's model axis: " + spoken_list(
                [f"{mp} on {words.plural(int(n), 'GPU')}" for n, mp in scaling["model_parallel"].items()]) +
            f". {losses}")
