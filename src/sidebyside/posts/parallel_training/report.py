"""parallel-training: the record, the verdicts and the generated prose of the post.

Inputs: what :func:`launch.run_torch` and :func:`launch.run_jax` return for each device count, the
code lines of each strategy (:func:`code_lines`), the model's size and the cost model's projection.
:func:`summarise` builds the results record (``metrics``): per device count, framework and
strategy, the loss curve and its largest deviation from the framework's one-device reference, the
final parameters' largest difference from it, the bytes per device of parameters, gradients and
optimiser state between steps against the replicated total, the peak within a step where it is
measured (JAX: the compiled step's memory analysis; PyTorch: ``torch.cuda.max_memory_allocated`` on
a GPU, not measured on the CPU), the collectives per step by kind (buffer bytes and bytes on the
wire per device, :func:`.comms.wire_factor`), the workers' step times (on simulated devices, not
scaling evidence); the one-device ladders run in the notebook's process (:func:`reference_record`);
then ``verdicts`` (headline first): whether both reach the reference's losses, which framework's
one-device step is faster on each device that ran it, and per strategy which framework needs less
code, whose collectives send fewer bytes on the wire and whose memory per device between steps is
lower (FSDP2 raced both ways against JAX's one fully sharded program: :data:`.names.COUNTERPART`,
:data:`RESHARDING`, :data:`HELD`). :func:`conclusion` writes the prose from the record alone.

On a machine with two or more GPUs, the strategies also run on real GPUs (:mod:`.scaling`);
otherwise the record's ``scaling`` is None, and the claim is the run's GPU note.

Counts (lines, bytes) are exact: a verdict on them compares the numbers, and calls a difference
under ``TIE`` (1%) a tie. Losses compare against ``loss_tolerance``, the float32 noise allowed.
"""

from __future__ import annotations

import ast
import inspect
import textwrap
from collections.abc import Callable, Mapping
from typing import Any

from sidebyside.lab import framing, ladders, verdict, words
from sidebyside.lab.conditions import conditions_sentence
from sidebyside.posts.parallel_training import comms
from sidebyside.posts.parallel_training.names import COUNTERPART, STRATEGY_NAMES, TOOLS, spoken_list
from sidebyside.posts.parallel_training.scaling import scaling_claim

__all__ = ["TIE", "RUNGS", "WHERE", "RESHARDING", "WIRE", "HELD", "TORCH_PEAK", "JAX_PEAK",
           "TORCH_CPU_PEAK", "code_lines", "torch_record", "jax_record", "conditions_text",
           "reference_record", "reference_verdict", "reference_claim", "parity_verdict",
           "fewer_verdict", "bytes_text", "device_label", "summarise", "reference_summary",
           "collectives_claim", "projection_claim", "multiprocess_record", "multiprocess_claim",
           "conclusion"]

TIE = 0.01
#: Where each framework's peak within a step comes from.
TORCH_PEAK = "torch.cuda.max_memory_allocated over the last step, the largest rank's"
JAX_PEAK = "XLA's memory analysis of the compiled step, arguments + outputs - donated + temporaries"
#: What the peak is on a PyTorch run on the CPU.
TORCH_CPU_PEAK = "not measured (PyTorch has no allocator statistics on the CPU)"


# ----------------------------------------------------------------------------- code


def _source(fn: Callable) -> str:
    return textwrap.dedent(inspect.getsource(fn))


def code_lines(fn: Callable) -> int:
    """Lines of code in ``fn``'s definition: no blank lines, comments or docstrings."""
    text = _source(fn)
    tree = ast.parse(text)
    docstrings = set()
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if isinstance(body, list) and body and isinstance(body[0], ast.Expr) and isinstance(
                getattr(body[0], "value", None), ast.Constant) and isinstance(body[0].value.value, str):
            docstrings.update(range(body[0].lineno, body[0].end_lineno + 1))
    return sum(1 for i, line in enumerate(text.splitlines(), 1)
               if line.strip() and not line.strip().startswith("#") and i not in docstrings)


# ----------------------------------------------------------------------------- the records


def _compare(strategies: dict, params: Mapping[str, Mapping[str, Any]]) -> dict:
    import numpy as np

    ref = strategies["one_device"]
    ref_params = params["one_device"]
    replicated = sum(ref["memory"].values())
    for name, s in strategies.items():
        s["max_loss_deviation"] = float(max(abs(a - b) for a, b in zip(s["losses"], ref["losses"])))
        s["max_param_difference"] = float(max(np.abs(np.asarray(params[name][k]) - np.asarray(v)).max()
                                              for k, v in ref_params.items()))
        s["memory"]["total"] = sum(s["memory"][k] for k in ("params", "grads", "optimizer"))
        s["replicated_total"] = replicated
        s["comms"] = comms.summarise(comms.Collective(**c) for c in s["collectives"])
    return strategies


def torch_record(result: Mapping[str, Any]) -> dict[str, Any]:
    """Per strategy, from :func:`launch.run_torch`'s result: rank 0's losses and collectives, the
    memory of the rank that holds the most, and the step time of the slowest rank (each rank timed
    its own step with :mod:`sidebyside.lab.timing`; a synchronous step goes at the pace of the
    slowest), with every rank's median in ``rank_medians_s``."""
    ranks = result["ranks"]
    out = {}
    for name, rec in ranks[0]["strategies"].items():
        held = [r["strategies"][name] for r in ranks if name in r["strategies"]]
        memory = max((h["memory"] for h in held), key=lambda m: sum(m.values()))
        peaks = [h.get("peak_bytes") for h in held]
        peak = None if None in peaks else {"bytes": max(peaks), "source": TORCH_PEAK}
        out[name] = {"losses": rec["losses"], "memory": dict(memory), "collectives": rec.get("collectives", []),
                     "time": max((h["time"] for h in held), key=lambda t: t["median_s"]),
                     "rank_medians_s": [h["time"]["median_s"] for h in held], "compile_s": None,
                     "peak": peak}
    return _compare(out, result["params"])


def jax_record(result: Mapping[str, Any]) -> dict[str, Any]:
    """Per strategy, from :func:`launch.run_jax`'s result (one process sees every device); ``peak``:
    the compiled step's memory analysis, labelled simulated where the devices are CPU devices."""
    simulated = result.get("platform", "cpu") == "cpu"
    source = JAX_PEAK + (", simulated on CPU devices" if simulated else "")
    out = {name: {"losses": rec["losses"], "memory": dict(rec["memory"]), "collectives": rec["collectives"],
                  "time": rec["time"], "compile_s": rec["compile_s"],
                  "peak": None if rec.get("peak") is None else {**rec["peak"], "source": source}}
           for name, rec in result["strategies"].items()}
    return _compare(out, result["params"])


# ----------------------------------------------------------------------------- the one-device reference ladder

#: Each one-device rung as the post names it.
RUNGS = {"torch/eager": "PyTorch eager", "torch/compile": "PyTorch torch.compile", "jax/jit": "JAX jit"}
#: The rungs that compile their step (their compile time is reported apart).
COMPILED = ("torch/compile", "jax/jit")
#: Where a one-device ladder ran, as the post names it.
WHERE = {"cpu": "the CPU", "gpu": "the GPU"}


def _detail(record: Mapping[str, Any]) -> str:
    """A one-device ladder's device name and CPU threads: "name, 1 CPU thread"."""
    threads = record.get("threads")
    return record["device"] + (f", {words.plural(threads, 'CPU thread')}" if threads else "")


def device_label(where: str, record: Mapping[str, Any]) -> str:
    """A one-device ladder's device as every speed label names it: "CPU (name, 1 CPU thread)"."""
    return f"{where.upper()} ({_detail(record)})"


def reference_record(ladders: Mapping[str, Mapping[str, Any]], *, names: Mapping[str, str],
                     tolerance: float, threads: int | None = None) -> dict[str, Any]:
    """The one-device ladders (:func:`.reference.run`'s results) keyed by where they ran ("cpu",
    "gpu"; ``names``: where -> the device's name), each rung's ladder entry with its losses, its
    largest loss deviation from the CPU's PyTorch eager run (the reference of every check, the
    GPU's included) and whether that is within ``tolerance``; ``threads``: the CPU threads of this
    process (:func:`sidebyside.lab.conditions.same_conditions`), named on every speed label.
    Raises ValueError when that reference did not run."""
    cpu = ladders["cpu"]
    if "torch/eager" not in cpu["losses"]:
        raise ValueError("the CPU's PyTorch eager rung is the one-device reference and it did not run: "
                         f"{cpu['entries'].get('torch/eager', {}).get('error')}")
    base = cpu["losses"]["torch/eager"]
    out = {}
    for where, ladder in ladders.items():
        rungs = {}
        for name, entry in ladder["entries"].items():
            losses = ladder["losses"].get(name)
            deviation = None if losses is None else float(max(abs(a - b) for a, b in zip(losses, base)))
            rungs[name] = {**entry, "losses": losses, "max_loss_deviation": deviation,
                           "within_tolerance": None if deviation is None else deviation <= tolerance}
        out[where] = {"device": names[where], "torch_device": ladder["torch_device"],
                      "jax_device": ladder["jax_device"], "rungs": rungs, "threads": threads}
    return out


def conditions_text(conditions: Mapping[str, Any], startup: Mapping[str, float], *, on_gpu: bool) -> str:
    """The one-device ladder's conditions (:func:`sidebyside.lab.conditions.conditions_sentence`) and
    each compiler's one-time start-up (:func:`sidebyside.lab.timing.warm_start`), paid before it."""
    paid = [f"{label} {words.fmt_seconds(startup[key])}" for key, label in (
        ("torch_compile_startup_s", "`torch.compile`"), ("jax_jit_startup_s", "`jax.jit`")) if key in startup]
    text = conditions_sentence(conditions, on_gpu=on_gpu)
    return text + (f" One-time compiler start-up, paid before any timing: {spoken_list(paid)}." if paid else "")


def reference_verdict(where: str, record: Mapping[str, Any], *, scale: Mapping[str, Any]) -> verdict.Verdict:
    """Best against best of the one-device ladder that ran at ``where`` (``record``: one entry of
    :func:`reference_record`), then what the ladder shows (:func:`sidebyside.lab.ladders.ladder`:
    a compiled rung slower than eager is explained by its measured graph breaks)."""
    return ladders.ladder(record["rungs"], scale=scale, race=f"reference/{where}",
                          question=f"Which framework runs the one-device training step faster on {WHERE[where]}?")


def reference_claim(reference: Mapping[str, Any], *, tolerance: float) -> str:
    """Per device, each rung's step time (median and IQR, from :mod:`sidebyside.lab.timing`; compile
    time apart) and whether its losses follow the CPU's PyTorch eager run, from the record alone."""
    lines = []
    for where, record in reference.items():
        times, checks, beyond, failed = [], [], [], []
        for name, r in record["rungs"].items():
            if r.get("median_s") is None:
                failed.append(f"{RUNGS.get(name, name)} did not run ({r.get('error') or r.get('not_applicable')})")
                continue
            compiled = (f", compiled in {words.fmt_seconds(r['compile_s'])}" if name in COMPILED and
                        r.get("compile_s") is not None else "")
            times.append(f"{RUNGS.get(name, name)} {words.fmt_seconds(r['median_s'])} (IQR "
                         f"{words.fmt_seconds(r['iqr_s'])}{compiled})")
            if r["max_loss_deviation"] is not None and not (where == "cpu" and name == "torch/eager"):
                checks.append(f"{RUNGS.get(name, name)} {words.fmt_number(r['max_loss_deviation'])}")
                if not r["within_tolerance"]:
                    beyond.append(RUNGS.get(name, name))
        line = (f"- **One device, {where.upper()}** ({_detail(record)}): a training step takes "
                f"{spoken_list(times)}.")
        if checks:
            line += (f" Largest loss deviation from the CPU's PyTorch eager run: {spoken_list(checks)}; " + (
                f"beyond the float32 tolerance of {words.fmt_number(tolerance)}: {spoken_list(beyond)}." if beyond else
                f"all within the float32 tolerance of {words.fmt_number(tolerance)}."))
        if failed:
            line += " " + "; ".join(failed) + "."
        lines.append(line)
    return "\n".join(lines)


# ----------------------------------------------------------------------------- verdicts


def _contestants(strategy: str) -> dict[str, dict[str, Any]]:
    return {"torch": framing.contestant("torch", TOOLS["torch"][strategy], "torch.distributed on gloo, "
                                        "torchrun workers"),
            "jax": framing.contestant("jax", TOOLS["jax"][strategy], "XLA's SPMD partitioner")}


def parity_verdict(deviations: Mapping[str, Mapping[str, float]], *, tolerance: float, scale: Mapping[str, Any],
                   devices: int) -> verdict.Verdict:
    """Do both frameworks follow their one-device loss curve under every strategy?
    ``deviations``: framework -> strategy -> largest absolute loss difference over the steps."""
    worst = {fw: max(d.items(), key=lambda kv: kv[1]) for fw, d in deviations.items()}
    off = [fw for fw, (_, dev) in worst.items() if dev > tolerance]
    figures = "; ".join(f"{words.FRAMEWORKS[fw]} at most {words.fmt_number(dev)} ({STRATEGY_NAMES[s]})"
                        for fw, (s, dev) in worst.items())
    if not off:
        label, winner = "both match", None
        sentence = (f"On {devices} devices both frameworks follow their one-device loss curve under every strategy: "
                    f"the largest deviation is {figures}, inside the float32 tolerance of "
                    f"{words.fmt_number(tolerance)}.")
    else:
        label = "deviates"
        winner = next(fw for fw in deviations if fw not in off) if len(off) < len(deviations) else None
        sentence = (f"On {devices} devices, {' and '.join(words.FRAMEWORKS[fw] for fw in off)} leave the one-device "
                    f"loss curve by more than the float32 tolerance of {words.fmt_number(tolerance)}: {figures}.")
    v = verdict.Verdict(question="Does every strategy reach the one-device reference's losses, in both frameworks?",
                        label=label, sentence=sentence, subject="torch", other="jax", winner=winner,
                        test=f"largest absolute loss difference per step against {words.fmt_number(tolerance)}",
                        threshold=tolerance)
    return framing.frame(v, contestants={fw: framing.contestant(fw, "every strategy", "the framework's own "
                                                                "distributed engine") for fw in ("torch", "jax")},
                         scale=scale, race="parity/losses")


#: What a fully sharded row's bytes rest on: the resharding choice of PyTorch's side, and JAX's one program.
RESHARDING = ("PyTorch's FSDP2 is raced both ways, reshard_after_forward=True (its default: each block's parameters "
              "gathered in the forward and again in the backward) and False (gathered once, kept from forward to "
              "backward); JAX's side is the same program in both rows, whose shard_map step "
              "gathers each split parameter once a step (autodiff keeps the gathered copy for the "
              "backward pass) and reduce-scatters its gradient (read from its compiled HLO).")
#: What the bytes verdicts count.
WIRE = ("Bytes on the wire: what each device sends by the ring algorithm, all-reduce 2(g-1)/g of "
        "its buffer, all-gather, reduce-scatter and all-to-all (g-1)/g, over a group of g devices.")
#: What the memory verdicts count, and what they leave out.
HELD = ("Counted between steps (parameters, gradients and optimiser state, each device's own shards); the parameters "
        "a step gathers for a while are not in it: FSDP2 holds the block in use (and the one it prefetches) with "
        "reshard_after_forward=True, and every block's from its forward to its backward with False; XLA holds what "
        "its schedule keeps.")


def fewer_verdict(strategy: str, torch_value: float, jax_value: float, *, what: str, unit: str, question: str,
                  scale: Mapping[str, Any], race: str, fmt: Callable[[float], str] = words.fmt_number,
                  caveat: str = "") -> verdict.Verdict:
    """Which framework needs fewer of ``what`` (code lines, bytes moved, bytes held) for
    ``strategy``? Exact counts: within ``TIE`` of each other is a tie. ``caveat``: what the
    counts rest on, added to the sentence; ``race``: the race's name, for the verdict's id."""
    t, j = float(torch_value), float(jax_value)
    big = max(t, j)
    who = {fw: f"{words.FRAMEWORKS[fw]} ({TOOLS[fw][strategy]})" for fw in ("torch", "jax")}
    if big == 0 or abs(t - j) <= TIE * big:
        label, winner, factor = "tie", None, None
        sentence = (f"{who['torch']} and {who['jax']} need the same {what} for {STRATEGY_NAMES[strategy]}: "
                    f"{fmt(t)} against {fmt(j)}{unit}.")
    else:
        winner = "torch" if t < j else "jax"
        loser = "jax" if winner == "torch" else "torch"
        low, high = min(t, j), big
        factor = high / low if low else None
        label = "fewer"
        ratio = f", {words.fmt_ratio(factor)} fewer" if factor else ""
        sentence = (f"{who[winner]} needs fewer {what} than {who[loser]} for {STRATEGY_NAMES[strategy]}: "
                    f"{fmt(low)} against {fmt(high)}{unit}{ratio}.")
    # No ratio, factor or difference on the verdict: the site reads those as a speed-up or a seed
    # difference; the counts are in the sentence.
    if caveat:
        sentence += " " + caveat
    v = verdict.Verdict(question=question, label=label, sentence=sentence, subject="torch", other="jax",
                        winner=winner, test=f"exact count; a difference under {TIE:.0%} is a tie", caveat=caveat)
    return framing.frame(v, contestants=_contestants(strategy), scale=scale, race=race)


def bytes_text(n: float) -> str:
    """``n`` bytes as the post writes them: "43.2 KiB", "20 B"."""
    for size, unit in ((2 ** 30, "GiB"), (2 ** 20, "MiB"), (2 ** 10, "KiB")):
        if n >= size:
            return f"{words.fmt_number(n / size)} {unit}"
    return f"{int(n)} B"


def summarise(*, runs: Mapping[int, Mapping[str, Any]], code: Mapping[str, Mapping[str, int]], parameters: int,
              config: Mapping[str, Any], batch_size: int, steps: int, lr: float, momentum: float, model_parallel: int,
              device: str, simulated: bool, loss_tolerance: float, projection: Mapping[str, Any],
              threads: int, reference: Mapping[str, Any] | None = None,
              gpu_note: str = "") -> dict[str, Any]:
    """The results record; ``runs``: device count -> ``{"torch": torch_record(...), "jax": jax_record(...)}``;
    ``code``: framework -> strategy -> :func:`code_lines`; ``projection``: framework -> strategy ->
    :func:`costmodel.project`'s result; ``reference``: :func:`reference_record`'s result (its speed
    verdicts follow the headline, one per device); ``threads``: CPU threads per worker process;
    ``gpu_note``: what the run says about GPUs and scaling (:func:`.reference.gpu_plan`)."""
    largest = max(runs)
    kind = "simulated CPU devices" if simulated else "devices"
    scale = framing.scale_of(parameters=parameters, input="28×28", batch=batch_size, precision="float32",
                             device=f"{largest} {kind} ({device})")
    run = runs[largest]
    strategies = [s for s in STRATEGY_NAMES if s != "one_device" and s in run["torch"] and s in run["jax"]
                  and s not in COUNTERPART]
    # PyTorch-only strategies, each raced against its JAX counterpart (FSDP2 both ways against JAX's one program)
    paired = strategies + [s for s in COUNTERPART if s in run["torch"] and COUNTERPART[s] in run["jax"]]
    jax_of = {s: COUNTERPART.get(s, s) for s in paired}
    found = [parity_verdict({"torch": {s: run["torch"][s]["max_loss_deviation"] for s in paired},
                             "jax": {s: run["jax"][s]["max_loss_deviation"] for s in strategies}},
                            tolerance=loss_tolerance, scale=scale, devices=largest)]
    for where, record in (reference or {}).items():
        found.append(reference_verdict(where, record, scale=framing.scale_of(
            parameters=parameters, input="28×28", batch=batch_size, precision="float32",
            device=f"one device, {device_label(where, record)}")))
    for s in strategies:
        found.append(fewer_verdict(s, code["torch"][s], code["jax"][s], what="lines of code", unit=" lines",
                                   race=f"code-lines/{s}",
                                   question=f"Which framework needs less code for {STRATEGY_NAMES[s]}?", scale=scale,
                                   fmt=lambda x: str(int(x))))
    sharded = ("fully_sharded", *COUNTERPART)
    for s in paired:
        found.append(fewer_verdict(
            s, run["torch"][s]["comms"]["total"]["wire_bytes"],
            run["jax"][jax_of[s]]["comms"]["total"]["wire_bytes"],
            what="bytes on the wire per device per step", unit="", fmt=bytes_text, scale=scale,
            race=f"collective-bytes/{s}", caveat=WIRE + (" " + RESHARDING if s in sharded else ""),
            question=f"Whose collectives move fewer bytes per step for {STRATEGY_NAMES[s]}?"))
    for s in paired:
        found.append(fewer_verdict(
            s, run["torch"][s]["memory"]["total"], run["jax"][jax_of[s]]["memory"]["total"], what="bytes per device",
            unit="", fmt=bytes_text, scale=scale, caveat=HELD if s in sharded else "",
            race=f"memory/{s}",
            question=f"Whose memory per device between steps (parameters, gradients, optimiser state) is lower for "
                     f"{STRATEGY_NAMES[s]}?"))
    framing.check_headline(found)
    return {
        "model": {"parameters": parameters, **dict(config)}, "batch_size": batch_size, "steps": steps, "lr": lr, "momentum": momentum,
        "model_parallel": model_parallel, "device": device, "simulated": simulated, "largest": largest,
        "threads": threads,
        "loss_tolerance": loss_tolerance, "code_lines": {fw: dict(v) for fw, v in code.items()},
        "runs": {str(n): r for n, r in runs.items()}, "projection": dict(projection),
        "reference": dict(reference or {}), "gpu_note": gpu_note,
        "verdicts": [v.to_dict() for v in found],
    }


def reference_summary(*, reference: Mapping[str, Any], parameters: int, config: Mapping[str, Any], batch_size: int,
                      steps: int, lr: float, momentum: float, loss_tolerance: float,
                      gpu_note: str = "") -> dict[str, Any]:
    """The results record of a run under ``hardware_only`` (the gpu profile's): the one-device ladders
    (:func:`reference_record`'s result) and the speed verdict of each device but the CPU, whose PyTorch eager
    run is there only as the losses' reference (the CPU's verdict where no other device ran). The strategies
    on simulated devices, their code, memory, collectives and projection are the cpu run's: ``runs``,
    ``code_lines`` and ``projection`` are empty."""
    where = [w for w in reference if w != "cpu"] or list(reference)
    found = [reference_verdict(w, reference[w], scale=framing.scale_of(
        parameters=parameters, input="28×28", batch=batch_size, precision="float32",
        device=f"one device, {device_label(w, reference[w])}")) for w in where]
    framing.check_headline(found)
    return {
        "model": {"parameters": parameters, **dict(config)}, "batch_size": batch_size, "steps": steps, "lr": lr,
        "momentum": momentum, "device": reference[where[0]]["device"], "simulated": False, "largest": None,
        "loss_tolerance": loss_tolerance, "code_lines": {}, "runs": {}, "projection": {},
        "reference": dict(reference), "gpu_note": gpu_note, "verdicts": [v.to_dict() for v in found],
    }


# ----------------------------------------------------------------------------- prose


def _kinds(entry: Mapping[str, Any]) -> str:
    parts = [f"{words.plural(e['count'], k)} ({bytes_text(e['bytes'])} of buffers, "
             f"{bytes_text(e['wire_bytes'])} on the wire)"
             for k, e in entry.items() if k != "total"]
    return spoken_list(parts) if parts else "none"


def collectives_claim(metrics: Mapping[str, Any], devices: int | None = None) -> str:
    """Per strategy, how the two frameworks' collectives differ in number and kind at ``devices``
    (the largest run by default), buffers and bytes on the wire per device: where the counts differ
    and the wire bytes agree, the same data is moved in differently sized pieces (bucketing, XLA's
    combiner, per-parameter calls)."""
    n = str(devices or metrics["largest"])
    lines = []
    for s in STRATEGY_NAMES:
        if s == "one_device":
            continue
        t, j = metrics["runs"][n]["torch"].get(s), metrics["runs"][n]["jax"].get(COUNTERPART.get(s, s))
        if t is None or j is None:
            continue
        tc, jc = t["comms"], j["comms"]
        same_bytes = abs(tc["total"]["wire_bytes"] - jc["total"]["wire_bytes"]) <= TIE * max(
            tc["total"]["wire_bytes"], jc["total"]["wire_bytes"], 1)
        line = (f"- **{STRATEGY_NAMES[s]}**: PyTorch ({TOOLS['torch'][s]}) issues {_kinds(tc)}; "
                f"JAX ({TOOLS['jax'][s]}) issues {_kinds(jc)}.")
        if tc["total"]["count"] != jc["total"]["count"] and same_bytes:
            line += " The same bytes, cut into a different number of collectives."
        lines.append(line)
    return (f"Per training step on {n} devices (bytes on the wire: each device's share, by the "
            "ring algorithm):\n\n" + "\n".join(lines))



def _tally(metrics: Mapping[str, Any], prefix: str) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {"torch": [], "jax": [], "tie": []}
    for v in metrics["verdicts"]:
        if v["question"].startswith(prefix):
            asked = v["question"].rstrip("?")
            # the strategy's name ends the question (the longest that fits: a name may hold " for ")
            strategy = max((n for n in STRATEGY_NAMES.values() if asked.endswith(f" for {n}")), key=len,
                           default=asked.split(" for ")[-1])
            out[v["winner"] or "tie"].append(strategy)
    return out


def projection_claim(metrics: Mapping[str, Any]) -> str:
    """What the cost model projects at its largest GPU count: the strategy and framework with the
    highest scaling efficiency (no overlap), the lowest, and how compute compares with
    communication; labelled a projection. Empty when the record holds no projection."""
    rows = [(p["efficiency_no_overlap"], fw, s, int(n), p) for fw, per in metrics["projection"].items()
            for s, counts in per.items() for n, p in counts.items()]
    if not rows:
        return ""
    top = max(r[3] for r in rows)
    at_top = sorted(r for r in rows if r[3] == top)
    (low, lfw, ls, _, _), (high, hfw, hs, _, hp) = at_top[0], at_top[-1]
    params = metrics["model"]["parameters"]
    return (f"Projected, not measured: at {top} H100s the cost model puts {words.FRAMEWORKS[hfw]}'s "
            f"{STRATEGY_NAMES[hs]} ({TOOLS[hfw][hs]}) highest, at {words.fmt_number(100 * high)}% scaling "
            f"efficiency without overlap ({words.fmt_seconds(hp['compute_s'])} of compute against "
            f"{words.fmt_seconds(hp['comm_s'])} of communication per step), and {words.FRAMEWORKS[lfw]}'s "
            f"{STRATEGY_NAMES[ls]} ({TOOLS[lfw][ls]}) lowest, at {words.fmt_number(100 * low)}%. A "
            f"{words.fmt_number(params)}-parameter model has too little compute per step to hide its "
            "collectives on GPUs this fast; the figures rank the strategies' communication, they do not "
            "predict a large model's scaling.")


def multiprocess_record(result: Mapping[str, Any], single: Mapping[str, Any], *, processes: int,
                        devices_per_process: int) -> dict[str, Any]:
    """JAX's multi-process data-parallel run (:func:`launch.run_jax_multiprocess`) against the
    single-process runs at the same device count (``single``: :func:`jax_record`'s result)."""
    losses = result["strategies"]["data_parallel"]["losses"]
    return {
        "processes": processes, "devices_per_process": devices_per_process, "losses": losses,
        "max_loss_deviation": float(max(abs(a - b) for a, b in zip(losses, single["one_device"]["losses"]))),
        "max_loss_deviation_single_process": float(max(
            abs(a - b) for a, b in zip(losses, single["data_parallel"]["losses"]))),
        "collectives": comms.summarise(comms.Collective(**c) for c in
                                       result["strategies"]["data_parallel"]["collectives"]),
    }


def multiprocess_claim(record: Mapping[str, Any], *, tolerance: float) -> str:
    """One sentence on the multi-process run: its layout, and whether it follows the one-device losses."""
    n = record["processes"] * record["devices_per_process"]
    ok = record["max_loss_deviation"] <= tolerance
    return (f"JAX's multi-host path, {record['processes']} processes of "
            f"{words.plural(record['devices_per_process'], 'device')} "
            f"joined by `jax.distributed.initialize` into one mesh of {n}, trains data parallel with the same "
            f"step and the same sharding code, and {'follows' if ok else 'leaves'} the one-device loss curve: "
            f"the largest deviation is {words.fmt_number(record['max_loss_deviation'])} "
            f"({'inside' if ok else 'beyond'} the tolerance of {words.fmt_number(tolerance)}), and "
            f"{words.fmt_number(record['max_loss_deviation_single_process'])} from the single-process run on "
            f"{n} devices. Its compiled step issues {_kinds(record['collectives'])}.")


def conclusion(metrics: Mapping[str, Any]) -> str:
    """The post's answer, from the record alone."""
    n = metrics["largest"]
    head = metrics["verdicts"][0]
    parts = [head["sentence"]]
    for prefix, topic, what in (("Which framework needs less code", "Code", "needs less code"),
                                ("Whose collectives move fewer bytes", "Communication",
                                 "sends fewer bytes on the wire per device per step"),
                                ("Whose memory per device", "Memory", "holds less per device")):
        t = _tally(metrics, prefix)
        clauses = [f"{words.FRAMEWORKS[fw]} {what} for {spoken_list(t[fw])}" for fw in ("torch", "jax") if t[fw]]
        if t["tie"]:
            clauses.append(f"the two tie for {spoken_list(t['tie'])}")
        parts.append(f"{topic}, on {n} devices: " + "; ".join(clauses) + ".")
    run = metrics["runs"][str(n)]
    fs = {fw: run[fw].get("fully_sharded") for fw in ("torch", "jax")}
    if all(fs.values()):
        parts.append("Fully sharded, each device holds, between steps, " + " and ".join(
            f"{words.fmt_number(100 * fs[fw]['memory']['total'] / fs[fw]['replicated_total'])}% of the replicated "
            f"bytes in {words.FRAMEWORKS[fw]}" for fw in ("torch", "jax")) + f" on {n} devices.")
    if metrics.get("reference"):
        parts.append(reference_claim(metrics["reference"], tolerance=metrics["loss_tolerance"]))
    if metrics.get("projection"):
        parts.append(projection_claim(metrics))
    if metrics["simulated"]:
        parts.append(f"The {n} devices were simulated on one CPU and share its cores, so the step times above are "
                     "not evidence of how either framework scales; the projection to H100s is a model, not a "
                     "measurement.")
    if metrics.get("scaling"):
        parts.append(scaling_claim(metrics))
    if metrics.get("gpu_note"):
        parts.append(metrics["gpu_note"])
    return "\n\n".join(parts)
