"""real-models: the results record, the verdicts, the key table and the generated prose.

Inputs: the parity results (:func:`.port.parity` per model), and per setting (a model, a workload
and its batch, a precision) the ladder that :func:`sidebyside.lab.timing.ladder` returned over
:func:`.work.build`, the FLOPs :func:`.work.flops` counted and the peak memory
:func:`.work.peak_memory` measured for each framework's best rung. :func:`setting_record` derives,
for each rung, the compile time cold (the first process's first call beyond the steady call) and
warm (the later processes' first calls, which reuse the run's compilation cache; their median,
beyond the steady call), the work per second and, where the device's peak is known, the model
FLOP utilisation (PyTorch's count of the model's FLOPs, attention included, over the time and the
peak; the setting keeps the peak it divided by). :func:`summarise` builds ``metrics``:
``verdicts`` (per setting, best against best, then the out-of-the-box rungs, PyTorch eager against
``jax.jit``), ``key_table`` (one row per setting: each framework's best rung with its median and
interquartile range, the winner, compile times, peak memory and MFU), ``flops`` (both counts,
their ratio, attention's part and the published figure), ``peak`` (the peak MFU divides by and
where it comes from: :func:`mfu_caption` words it), ``models`` (each with each side's attention)
and ``parity``. :func:`key_table`, :func:`mfu_caption` and :func:`conclusion` read the record
alone; numbers reach the prose through :mod:`sidebyside.lab.verdict`'s formatters.
"""

from __future__ import annotations

import statistics
import textwrap
from collections.abc import Mapping, Sequence
from typing import Any

from sidebyside.lab import framing, ladders, verdict, words
from sidebyside.posts.real_models.config import NAMES, PUBLISHED
from sidebyside.posts.real_models.config import spec as model_spec
from sidebyside.posts.real_models.work import TOOL_LABELS, attention_flops

__all__ = ["IMPLEMENTATIONS", "WORKLOADS", "GENERATION_STRUCTURE", "FLOP_TOLERANCE", "setting_name", "setting_record", "flops_record",
           "ATTENTION_COUNTED", "parity_table", "parity_claim", "summarise", "peak_record", "mfu_caption", "key_table",
           "key_figure", "flops_table", "conclusion"]

#: What does the work in each rung (the verdicts' contestants).
IMPLEMENTATIONS = {"torch/eager": "ATen's kernels, one launch per op from Python",
                   "torch/compile": "kernels Inductor generates",
                   "torch/max-autotune": "kernels Inductor generates, autotuned",
                   "torch/cuda-graph": "ATen's kernels replayed from a CUDA graph",
                   "torch/aoti": "a library AOTInductor compiled ahead of time from torch.export's graph",
                   "jax/jit": "one program compiled by XLA"}
#: How the post names each workload.
WORKLOADS = {"train": "training step", "infer": "inference", "generate": "generation"}
#: How far XLA's FLOP count may lie from PyTorch's: XLA also counts elementwise operations
#: (activations, normalisation, the optimiser's update), which PyTorch's counter leaves out.
FLOP_TOLERANCE = 0.25


def setting_name(model: str, workload: str, batch: int, precision: str) -> str:
    """The key of one setting: ``model/workload/batch/precision``."""
    return f"{model}/{workload}/{batch}/{precision}"


def _items(workload: str, batch: int, spec: Mapping[str, Any], opts: Mapping[str, int]) -> tuple[float, str]:
    """Work per call and its unit: images, tokens trained, or tokens generated."""
    if spec["key"] == "gpt2" and workload == "train":
        return batch * spec["seq_len"], "tokens"
    if workload == "generate":
        return batch * opts["new_tokens"], "tokens"
    return batch, "images"


def setting_record(entries: Mapping[str, Mapping[str, Any]], *, model: str, workload: str, batch: int,
                   precision: str, spec: Mapping[str, Any], opts: Mapping[str, int], build_s: Mapping[str, float],
                   peak_flops: float | None, model_flops: float | None) -> dict[str, Any]:
    """One setting's ladder with what each rung costs (see the module)."""
    work, unit = _items(workload, batch, spec, opts)
    rungs = {}
    for name, entry in entries.items():
        e = dict(entry)
        e["label"] = TOOL_LABELS.get(name, name)
        e["implementation"] = IMPLEMENTATIONS.get(name)
        e["build_s"] = build_s.get(name)
        if e.get("median_s") is not None:
            firsts = e.get("first_per_process_s") or [e["first_s"]]
            # a first call whose compilation read the shared cache back (another post or run compiled it) is
            # no cold compile: it is not reported as one
            e["compile_cold_s"] = None if e.get("first_cache") == "warm" else (
                max(firsts[0] - e["median_s"], 0.0) + (e["build_s"] if name == "torch/aoti" else 0.0))
            e["compile_warm_s"] = (max(statistics.median(firsts[1:]) - e["median_s"], 0.0) if len(firsts) > 1 else None)
            e["per_s"] = work / e["median_s"]
            e["mfu"] = (model_flops / e["median_s"] / peak_flops) if peak_flops and model_flops else None
        rungs[name] = e
    return {"model": model, "workload": workload, "batch": batch, "precision": precision, "unit": unit,
            "work_per_call": work, "opts": dict(opts), "ladder": rungs, "best": ladders.best(rungs), "memory": {},
            "peak_flops": peak_flops if model_flops else None}


#: How attention is counted, on both sides.
ATTENTION_COUNTED = ("QKᵀ and AV, 2 · 2 · B · H · S_q · S_k · D_head per layer, causal attention as the full square "
                     "(as JAX's XLA implementation computes it and cost_analysis counts it); FlopCounterMode has no "
                     "formula for the CPU's attention kernel (it counts it as 0), so each side's count is given "
                     "that formula (work.flops)")


def flops_record(counts: Mapping[str, float], *, model: str, workload: str, batch: int, tokens: int | None,
                 full_size: bool) -> dict[str, Any]:
    """Both frameworks' counts of one call (:func:`.work.flops`), their ratio (XLA over PyTorch),
    attention's part of PyTorch's count (``torch_attention``; :data:`ATTENTION_COUNTED` says how),
    and for a forward pass of a full-size model the published figure (2 FLOPs per multiply-add) per
    image or, for GPT-2, per token (``tokens``: the call's, ``batch`` sequences of ``tokens / batch``)
    plus attention at that length (:func:`.work.attention_flops`; the image models' figures include
    theirs)."""
    torch_flops, jax_flops = counts["torch"], counts["jax"]
    items = tokens if tokens else batch
    published = 2 * PUBLISHED[model]["macs_per_item"] * items if full_size and workload == "infer" else None
    if published is not None and model == "gpt2":
        published += attention_flops(model_spec("gpt2"), batch, items // batch)
    looped = workload == "generate"  # XLA's cost analysis counts a loop's body once, not once per trip
    return {"model": model, "workload": workload, "batch": batch, "torch": torch_flops, "jax": jax_flops,
            "ratio": jax_flops / torch_flops if torch_flops else None,
            "agree": None if looped else bool(torch_flops) and abs(jax_flops / torch_flops - 1) <= FLOP_TOLERANCE,
            "note": ("XLA's cost_analysis counts the lax.fori_loop body once, not once per generated token: "
                     "its figure is not the work of a call") if looped else "",
            "torch_attention": counts.get("torch_attention"), "attention_counted": ATTENTION_COUNTED,
            "published": published, "published_source": PUBLISHED[model]["source"],
            "torch_over_published": torch_flops / published if published else None}


def parity_table(parity: Mapping[str, Mapping[str, Any]]):
    """One row per model: the logit difference against its scale, the float64 gradients (all, and the
    worst tensor), the float32 gradients beside PyTorch's own float32 rounding, the verdict."""
    import pandas as pd

    return pd.DataFrame([{"model": NAMES[k], "tensors": p["tensors"], "largest |Δ logit|": p["max_abs_logit_diff"],
                          "logit scale (max |logit|)": p["logit_scale"], "relative": p["relative_logit_diff"],
                          "gradients, float64": p["grad_diff"], "worst tensor, float64": p["max_relative_grad_diff"],
                          "in": p["worst_grad_tensor"], "gradients, float32": p["float32_grad_diff"],
                          "PyTorch float32 vs float64": p["torch_float32_error"],
                          "within tolerance": p["within_tolerance"]} for k, p in parity.items()]).set_index("model")


def parity_claim(parity: Mapping[str, Mapping[str, Any]]) -> str:
    """One sentence per model on the parity check."""
    lines = []
    for key, p in parity.items():
        ok = "within" if p["within_tolerance"] else "OUTSIDE"
        lines.append(f"- **{NAMES[key]}** ({words.plural(p['tensors'], 'tensor')}): logits differ by at most "
                     f"{words.fmt_number(p['relative_logit_diff'])} of their scale (tolerance "
                     f"{words.fmt_number(p['logit_tolerance'])}); a training step's gradients in float64, as one "
                     f"vector, by {words.fmt_number(p['grad_diff'])} relative (tolerance "
                     f"{words.fmt_number(p['grad_tolerance'])}; the worst tensor, `{p['worst_grad_tensor']}`, by "
                     f"{words.fmt_number(p['max_relative_grad_diff'])}): {ok} tolerance. In float32 they differ "
                     f"by {words.fmt_number(p['float32_grad_diff'])}, where PyTorch's own float32 gradients differ "
                     f"from its float64 ones by {words.fmt_number(p['torch_float32_error'])}.")
    return "\n".join(lines)


def _describe(s: Mapping[str, Any]) -> str:
    what = WORKLOADS[s["workload"]]
    if s["workload"] == "generate":
        return (f"{what}, batch {s['batch']}, {s['opts']['prompt_len']}-token prompt, "
                f"{s['opts']['new_tokens']} new tokens")
    if s["workload"] == "infer":
        what = "inference latency" if s["batch"] == 1 else "inference throughput"
    return f"{what}, batch {s['batch']}"


#: The structural difference generation's races keep, said in each of their verdicts.
GENERATION_STRUCTURE = ("Not the same loop structure, a difference this race keeps: JAX runs the whole generation as "
                        "one compiled program (the prompt, then a lax.fori_loop of one-token steps), while every "
                        "PyTorch rung runs a Python loop that calls one step per token (eager, compiled, or a CUDA "
                        "graph per step), so PyTorch's time includes its per-token dispatch from Python.")


def _verdicts(s: Mapping[str, Any], scale: Mapping[str, Any]) -> list[verdict.Verdict]:
    name, desc = NAMES[s["model"]], _describe(s)
    caveat = GENERATION_STRUCTURE if s["workload"] == "generate" else ""
    race = setting_name(s["model"], s["workload"], s["batch"], s["precision"])
    head = ladders.ladder(s["ladder"], scale=scale, caveat=caveat, race=f"{race}/best",
                          question=f"Which framework is faster at {name} {desc} ({s['precision']}), each at its best?")
    out = [head]
    eager, jit = s["ladder"].get("torch/eager"), s["ladder"].get("jax/jit")
    if eager and jit and eager.get("median_s") is not None and jit.get("median_s") is not None:
        out.append(verdict.speed(eager, jit, subject_tool="eager", other_tool="jit", scale=scale, caveat=caveat,
                                 race=f"{race}/out-of-the-box",
                                 question=f"Out of the box (PyTorch eager against jax.jit), which is faster at "
                                          f"{name} {desc} ({s['precision']})?"))
    return out


def summarise(*, parity: Mapping[str, Any], settings: Mapping[str, Mapping[str, Any]],
              flops: Mapping[str, Mapping[str, Any]], models: Mapping[str, Mapping[str, Any]], device: str,
              profile_note: str, bf16: Mapping[str, Any], peak_source: str | None,
              conditions: Mapping[str, Any]) -> dict[str, Any]:
    """The results record (see the module). ``models``: key -> spec (``ModelSpec.to_dict``) with
    ``parameters``; ``profile_note``: what sizes this profile ran, said in the post."""
    verdicts = []
    for s in settings.values():
        spec = models[s["model"]]
        size = f"{spec['img_size']}²×3" if spec["key"] != "gpt2" else f"{spec['seq_len']} tokens"
        scale = framing.scale_of(parameters=spec["parameters"], input=size, batch=s["batch"],
                                 precision=s["precision"], device=device)
        found = _verdicts(s, scale)
        s["verdicts"] = [v.to_dict() for v in found]
        verdicts += s["verdicts"]
    record = {"parity": dict(parity), "settings": dict(settings), "flops": dict(flops), "models": dict(models),
              "device": device, "profile_note": profile_note, "bf16": dict(bf16), "peak_source": peak_source,
              "peak": peak_record(settings, peak_source),
              "conditions": dict(conditions), "flop_tolerance": FLOP_TOLERANCE, "verdicts": verdicts}
    record["key_table"] = _key_rows(record)
    return record


def _peak_kind(source: str | None) -> str | None:
    """What a peak is, from the words ``sidebyside.lab.peaks`` gives its source: an ``estimate``
    (a CPU's cores × clock × FLOPs per cycle), ``measured`` (the best rate the run reached, where it
    beat the estimate), else the device's ``nominal`` figure (a GPU's data sheet)."""
    if not source:
        return None
    return "estimate" if source.startswith("estimated") else "measured" if source.startswith("measured") else "nominal"


def peak_record(settings: Mapping[str, Mapping[str, Any]], source: str | None) -> dict[str, Any]:
    """The peaks MFU divided by, per precision (FLOP/s), where they come from (``source``, as the
    caller had it from ``sidebyside.lab.peaks``) and what they are (:func:`_peak_kind`)."""
    by_precision = {s["precision"]: s["peak_flops"] for s in settings.values() if s.get("peak_flops")}
    return {"flops": by_precision, "source": source if by_precision else None,
            "kind": _peak_kind(source) if by_precision else None}


def _rate(flops: float) -> str:
    return (f"{words.fmt_number(flops / 1e12)} TFLOP/s" if flops >= 1e12 else
            f"{words.fmt_number(flops / 1e9)} GFLOP/s")


def mfu_caption(metrics: Mapping[str, Any]) -> str:
    """The key table's caption on MFU: what is divided by what, the peak per precision and where it
    comes from (a GPU's nominal data-sheet figure; on a CPU an estimate from its clock and vector
    width, said so with the clock it used)."""
    peak = metrics.get("peak") or {}
    if not peak.get("flops"):
        return "MFU: not computed (no peak is known for this device)."
    rates = ", ".join(f"{_rate(v)} in {p}" for p, v in peak["flops"].items())
    source = peak["source"] or "source not recorded"
    what = {"estimate": "an estimate, not a nominal figure: this CPU's cores × clock × FLOPs per cycle from its "
                        "vector width, as sidebyside.lab.peaks estimates it",
            "measured": "the best rate this run reached, above the estimate from the clock",
            "nominal": "the device's nominal dense figure"}.get(peak["kind"], "a peak of unknown kind")
    return (f"MFU (model FLOP utilisation): PyTorch's count of one call's FLOPs (attention included) over the "
            f"median time per call, divided by the peak, {rates}: {what} ({source}).")


def _side(s: Mapping[str, Any], fw: str) -> dict[str, Any]:
    tool = s["best"].get(fw)
    if tool is None:
        return {"tool": None}
    e = s["ladder"][f"{fw}/{tool}"]
    memory = s["memory"].get(fw) or {}
    return {"tool": TOOL_LABELS.get(f"{fw}/{tool}", tool), "median_s": e["median_s"], "q1_s": e["q1_s"],
            "q3_s": e["q3_s"], "per_s": e["per_s"], "compile_cold_s": e.get("compile_cold_s"),
            "compile_warm_s": e.get("compile_warm_s"), "mfu": e.get("mfu"),
            "peak_bytes": memory.get("device_peak_bytes") or memory.get("peak_rss_bytes"),
            "memory_kind": "device" if memory.get("device_peak_bytes") else "process RSS" if memory else None}


def _key_rows(record: Mapping[str, Any]) -> list[dict[str, Any]]:
    rows = []
    for key, s in record["settings"].items():
        head = s["verdicts"][0]
        winner = words.FRAMEWORKS.get(head["winner"], "neither") if head["winner"] else head["label"]
        if head.get("factor") and head["winner"]:
            lo, hi = head["interval"]
            low, high = (1 / hi, 1 / lo) if head["winner"] == head["subject"] else (lo, hi)
            winner += f" {words.fmt_ratio(head['factor'])} ({words.fmt_number(low)}–{words.fmt_ratio(high)})"
        rows.append({"setting": key, "model": NAMES[s["model"]], "workload": _describe(s),
                     "precision": s["precision"], "unit": s["unit"], "torch": _side(s, "torch"),
                     "jax": _side(s, "jax"), "winner": winner, "peak_flops": s.get("peak_flops")})
    return rows


def _cell(side: Mapping[str, Any], unit: str) -> str:
    if side.get("tool") is None:
        return "did not run"
    return (f"{side['tool']}: {words.fmt_seconds(side['median_s'])} (IQR {words.fmt_seconds(side['q1_s'])}–"
            f"{words.fmt_seconds(side['q3_s'])}), {words.fmt_number(side['per_s'])} {unit}/s")


def _mb(value: float | None) -> str:
    return "n/a" if value is None else f"{words.fmt_number(value / 2**20)} MiB"


def _mfu_cell(r: Mapping[str, Any], kind: str | None) -> str:
    shares = " / ".join("n/a" if s.get("mfu") is None else f"{words.fmt_number(100 * s['mfu'])}%"
                        for s in (r["torch"], r["jax"]))
    if not r.get("peak_flops"):
        return shares
    return f"{shares} of {_rate(r['peak_flops'])}" + (f" ({kind})" if kind else "")


def key_table(metrics: Mapping[str, Any]):
    """The key figure: model × workload, each framework's best rung with its median and IQR, the
    winner (with the 95% interval of its speed-up), compile time cold / warm, peak memory, and MFU
    with the peak it divides by and what that peak is (nominal, estimate, measured;
    :func:`mfu_caption` is the caption that says where it comes from, also kept in the table's
    ``attrs["caption"]``)."""
    import pandas as pd

    rows = []
    for r in metrics["key_table"]:
        t, j = r["torch"], r["jax"]
        rows.append({
            "model": r["model"], "workload": r["workload"], "precision": r["precision"],
            "PyTorch best": _cell(t, r["unit"]), "JAX best": _cell(j, r["unit"]), "winner": r["winner"],
            "compile cold / warm (PyTorch)": " / ".join(words.fmt_seconds(x) if x is not None else "n/a" for x in (
                t.get("compile_cold_s"), t.get("compile_warm_s"))) if t.get("tool") else "n/a",
            "compile cold / warm (JAX)": " / ".join(words.fmt_seconds(x) if x is not None else "n/a" for x in (
                j.get("compile_cold_s"), j.get("compile_warm_s"))) if j.get("tool") else "n/a",
            "peak memory (PyTorch / JAX)": f"{_mb(t.get('peak_bytes'))} / {_mb(j.get('peak_bytes'))}",
            "MFU (PyTorch / JAX) of the peak": _mfu_cell(r, (metrics.get("peak") or {}).get("kind")),
        })
    table = pd.DataFrame(rows).set_index(["model", "workload", "precision"])
    table.attrs["caption"] = mfu_caption(metrics)
    return table


def key_figure(metrics: Mapping[str, Any]):
    """The key table (:func:`key_table`) drawn as a figure, one row per setting, the winner's cell
    in its framework's colour."""
    import matplotlib.pyplot as plt

    from sidebyside.lab import viz

    table = key_table(metrics).reset_index()
    columns = ["model", "workload", "precision", "PyTorch best", "JAX best", "winner",
               "compile cold / warm (PyTorch)", "compile cold / warm (JAX)", "peak memory (PyTorch / JAX)"]
    wrapped = [[textwrap.fill(str(v), 24) for v in row] for row in table[columns].itertuples(index=False)]
    lines = [max(cell.count("\n") + 1 for cell in row) for row in wrapped]
    fig, ax = plt.subplots(figsize=(15, 0.6 + 0.22 * (sum(lines) + 2 * len(lines))))
    ax.axis("off")
    drawn = ax.table(cellText=wrapped, colLabels=[textwrap.fill(c, 18) for c in columns], loc="upper center",
                     cellLoc="left", colLoc="left")
    drawn.auto_set_font_size(False)
    drawn.set_fontsize(7)
    for (r, c), cell in drawn.get_celld().items():
        cell.set_height(0.2 * (lines[r - 1] if r else 2) / max(sum(lines) + 2, 1) * 4)
        if r and columns[c] == "winner":
            who = next((fw for fw in ("torch", "jax") if str(table.iloc[r - 1]["winner"]).startswith(
                words.FRAMEWORKS[fw])), None)
            if who:
                cell.set_facecolor(viz.COLORS[who])
                cell.set_alpha(0.35)
    ax.set_title(f"Each framework's best rung per model and workload, on {metrics['device']}", fontsize=10)
    fig.tight_layout()
    return fig


def flops_table(metrics: Mapping[str, Any]):
    """FLOPs per call from both frameworks, their ratio, attention's part of PyTorch's count (see
    :data:`ATTENTION_COUNTED`), and the published figure where it applies."""
    import pandas as pd

    return pd.DataFrame([{"model": NAMES[f["model"]], "workload": WORKLOADS[f["workload"]], "batch": f["batch"],
                          "PyTorch (GFLOP)": f["torch"] / 1e9, "XLA (GFLOP)": f["jax"] / 1e9,
                          "XLA / PyTorch": f["ratio"], "agree": f["agree"], "note": f.get("note", ""),
                          "attention in PyTorch's (GFLOP)": (None if f.get("torch_attention") is None
                                                             else f["torch_attention"] / 1e9),
                          "published (GFLOP)": None if f["published"] is None else f["published"] / 1e9,
                          "PyTorch / published": f["torch_over_published"]}
                         for f in metrics["flops"].values()]).set_index(["model", "workload", "batch"])


def _list(items: Sequence[str]) -> str:
    return ", ".join(items[:-1]) + (" and " if len(items) > 1 else "") + items[-1] if items else "none"


def conclusion(metrics: Mapping[str, Any]) -> str:
    """The post's answer, from the record alone: each best-against-best verdict, the tally of wins,
    the FLOP counts' agreement and what the profile measured."""
    heads = [s["verdicts"][0] for s in metrics["settings"].values()]
    tally = {fw: sum(1 for v in heads if v["winner"] == fw) for fw in ("torch", "jax")}
    ties = len(heads) - tally["torch"] - tally["jax"]
    parts = [f"Best against best over {words.plural(len(heads), 'setting')}: PyTorch wins "
             f"{tally['torch']}, JAX wins {tally['jax']}, and {ties} are within noise or tied."]
    parts += [f"- {v['question']} {v['sentence']}" for v in heads]
    disagree = [f"{NAMES[f['model']]} {WORKLOADS[f['workload']]}" for f in metrics["flops"].values()
                if f["agree"] is False]
    parts.append("The two frameworks' FLOP counts agree within "
                 f"{words.fmt_number(100 * metrics['flop_tolerance'])}% for every workload counted (generation aside: XLA counts its loop's body once)." if not disagree
                 else f"The FLOP counts differ by more than {words.fmt_number(100 * metrics['flop_tolerance'])}% "
                      f"for {_list(disagree)}.")
    parts.append(metrics["profile_note"])
    return "\n\n".join(parts)
