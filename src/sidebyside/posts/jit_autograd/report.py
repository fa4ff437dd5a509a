"""jit-and-autograd-timing: the results record and the generated conclusion.

``summarise(...)`` turns the notebook's measured objects (the ladders of the jit
sweep, of the gradients and of the HVP, the compile times, the memory floors, the
pitfall table) into the JSON-able record the post publishes; ``conclusion(metrics)``
writes the post's Conclusion from that record alone, one small function per kind
of claim (the jit sweep per device, compilation, gradients, HVP, the pitfall).
``setup_sentence`` states the conditions and the one-time start-up under Setup.

Two times per rung of the jit sweep: the synchronised per-call time (``jit``: launch,
work and the wait for the result, which at small sizes is mostly latency) and, where the
notebook measured it, the throughput of calls issued back to back and waited for once per
repeat (``jit_back_to_back``). On a GPU a third: the profiler's kernel time per call
(``jit_kernel``, :mod:`sidebyside.posts.jit_autograd.kernels`), so that the prose can say how much of a
synchronised call is launch and synchronisation (the call's time minus the time the GPU's
kernels and copies take); :func:`kernel_table` shows the three side by side. Each verdict
states its scale (input size, float32, device).

The control (``control``: :mod:`sidebyside.posts.jit_autograd.control`'s g, f without sin and
cos, on the same ladders at the headline's sizes) has its own verdicts, labelled
:data:`CONTROL_LABEL`, and :func:`control_claim` says how much of the headline's factor it removes.

Rungs outside the best-against-best verdicts: NumPy (one library, no framework
ladder) and the original's per-element ``backward()`` loop (slow by construction).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from typing import Any

from sidebyside.lab import framing, functions, ladders, verdict, words
from sidebyside.lab.conditions import conditions_sentence  # setup_sentence's argument is named conditions
from sidebyside.lab.ladders import best  # dispatch_claim's argument is named ladders
from sidebyside.posts.jit_autograd.control import flags_sentence  # ``control`` names the record's

__all__ = ["OUTSIDE_LADDER", "ladder_only", "setup_sentence", "summarise", "verdicts", "jit_claim", "compile_claim",
           "dispatch_claim", "gradient_claim", "hvp_claim", "pitfall_claim", "kernel_claim", "kernel_table",
           "KERNEL_ON_GPU_ONLY", "conclusion", "CONTROL_LABEL", "control_verdicts",
           "control_sentence", "control_claim"]

#: The one line a record without kernel times (a run without a GPU) gives about them.
KERNEL_ON_GPU_ONLY = ("The profiler's kernel time, which separates a call's GPU work from its launch and "
                      "synchronisation, is measured on a GPU only; this run had none.")

#: Ladder rows that are shown but never enter a best-against-best verdict.
OUTSIDE_LADDER = ("torch/loop",)


def ladder_only(entries: Mapping[str, Any]) -> dict[str, Any]:
    """The rows of a ladder that compete in its verdict: every PyTorch and JAX
    tool but the rows of :data:`OUTSIDE_LADDER` (NumPy is no framework's rung)."""
    return {k: e for k, e in entries.items() if k not in OUTSIDE_LADDER and not k.startswith("numpy/")}


def setup_sentence(conditions: Mapping[str, Any], startup: Mapping[str, float], *, on_gpu: bool) -> str:
    """The Setup's sentence: the shared conditions, then each compiler's one-time
    start-up, paid before any timing."""
    return (conditions_sentence(conditions, on_gpu=on_gpu) + " One-time start-up, paid before any timing: "
            f"`torch.compile` {words.fmt_seconds(startup['torch_compile_startup_s'])}, `jax.jit` "
            f"{words.fmt_seconds(startup['jax_jit_startup_s'])}.")


def summarise(*, conditions, startup, bandwidth, jit_entries, floors, compile_s, fits, grad_entries, grad_errors,
              hvp_entries, hvp_size, pitfall, main_device, back_to_back=None, kernel=None,
              cores=None, control=None) -> dict[str, Any]:
    """The results record of the post.

    ``jit_entries``: ``{(device, n): {"<framework>/<tool>": ladder entry}}``;
    ``floors``: ``{(device, n): memory-floor seconds}``; ``fits``: ``{(device, method):
    {"crossover n*": ...}}``; ``grad_entries``: ``{n: ladder}``; ``pitfall``: the
    notebook's pitfall DataFrame (index device, method label); ``back_to_back``: like
    ``jit_entries``, timed with calls back to back, waited for once per repeat; ``kernel``:
    like ``jit_entries``, each row one of :func:`sidebyside.posts.jit_autograd.kernels.measure` (a GPU's
    kernel time per call), stored under ``jit_kernel`` for the devices it covers; ``cores``:
    ``{(device, n): {"<framework>/<tool>": cores busy}}`` (:func:`sidebyside.lab.timing.cores_busy`),
    stored under ``cores_busy``; ``control``: ``{"jit": race, "autograd": race, "xla_flags":
    rows}``,
    each race ``{"device", "size", "ladder"}`` (the control's ladder at the headline's size), rows
    as :func:`sidebyside.posts.jit_autograd.control.flag_trials` returns them, stored under
    ``control`` with each race's ``best``. The verdicts are computed from the record itself
    (:func:`verdicts`) and stored in it.
    """
    devices = list(dict.fromkeys(d for d, _ in jit_entries))
    metrics = {
        "conditions": dict(conditions),
        "startup_s": dict(startup),
        "bandwidth": {d: dict(b) for d, b in bandwidth.items()},
        "jit": {d: {str(n): {"ladder": e, "best": ladders.best(e), "memory_floor_s": floors[d, n]}
                    for (dd, n), e in jit_entries.items() if dd == d} for d in devices},
        "compile_s": compile_s,
        "crossover": {d: {m: f["crossover n*"] for (dd, m), f in fits.items() if dd == d} for d in devices},
        "autograd": {str(n): {"ladder": e, "best": ladders.best(ladder_only(e))} for n, e in grad_entries.items()},
        "autograd_max_error": grad_errors,
        "hvp": {str(hvp_size): {"ladder": hvp_entries, "best": ladders.best(hvp_entries)}},
        "pitfall": {f"{d}/{m}": row for (d, m), row in pitfall.to_dict(orient="index").items()},
        "autograd_device": main_device,
        "jit_back_to_back": {d: {str(n): {"ladder": e, "best": ladders.best(e)}
                                 for (dd, n), e in (back_to_back or {}).items() if dd == d} for d in devices},
        "jit_kernel": {d: {str(n): dict(rows) for (dd, n), rows in (kernel or {}).items() if dd == d}
                       for d in devices if any(dd == d for dd, _ in (kernel or {}))},
        "cores_busy": {d: {str(n): dict(by_tool) for (dd, n), by_tool in (cores or {}).items() if dd == d}
                       for d in devices if any(dd == d for dd, _ in (cores or {}))},
    }
    if control:
        metrics["control"] = {
            key: (dict(race, best=ladders.best(ladder_only(race["ladder"])))
                  if key in ("jit", "autograd") else race) for key, race in control.items()}
    metrics["verdicts"] = [v.to_dict() for v in verdicts(metrics)]
    return metrics


# ----------------------------------------------------------------------------- reading the record


def _devices(metrics: Mapping[str, Any]) -> list[str]:
    """The main device first, then the others."""
    main = metrics["autograd_device"]
    return [main] + [d for d in metrics["jit"] if d != main]


def _sizes(table: Mapping[str, Any]) -> list[int]:
    return sorted(int(n) for n in table)


def _median(entries: Mapping[str, Any], name: str) -> float | None:
    e = entries.get(name)
    return None if not e or e.get("median_s") is None else e["median_s"]


def _scale(n: int, device: str) -> dict[str, Any]:
    return framing.scale_of(input=f"{n:,} float32 values", precision="float32", device=device.upper())


def _jit_verdicts(metrics, device):
    sizes = _sizes(metrics["jit"][device])
    big, small = sizes[-1], sizes[0]
    where = device.upper()
    v_big = ladders.ladder(ladder_only(metrics["jit"][device][str(big)]["ladder"]),
                           question=f"Which framework evaluates f on {big:,} floats faster on the {where}, "
                                    "each at its best (synchronised per call)?", scale=_scale(big, device),
                           race=f"jit/{device}/largest")
    v_big = dataclasses.replace(v_big, cause=_cores_cause(metrics, device, big))
    v_small = ladders.ladder(ladder_only(metrics["jit"][device][str(small)]["ladder"]),
                             question=f"Which framework has the cheaper synchronised call at {small:,} floats on the "
                                      f"{where}, each at its best (launch and wait, mostly latency)?",
                             scale=_scale(small, device), race=f"jit/{device}/smallest")
    return v_big, v_small


def _cores_cause(metrics, device, n) -> str:
    """The cores each framework's best rung kept busy at ``n`` on ``device`` where the run measured
    them and they differ by more than half a core: a measured cause of the gap ("" otherwise), with,
    on the CPU, the options XLA's CPU runtime ran with (the conditions' ``xla_flags``) and the cores
    it could use."""
    cores = (metrics.get("cores_busy") or {}).get(device, {}).get(str(n)) or {}
    chosen = ladders.best(ladder_only(metrics["jit"][device][str(n)]["ladder"]))
    busy = {fw: cores.get(f"{fw}/{chosen[fw]}") for fw in ("torch", "jax") if chosen.get(fw)}
    if len(busy) < 2 or None in busy.values() or abs(busy["torch"] - busy["jax"]) <= 0.5:
        return ""
    spelled = [f"{words.FRAMEWORKS[fw]}'s best ({chosen[fw]}) kept {words.fmt_number(c)} cores busy per call"
               for fw, c in busy.items()]
    conditions = metrics.get("conditions") or {}
    flags = conditions.get("xla_flags")  # the XLA_FLAGS the run's XLA read ("": none, its defaults)
    runtime = ("" if device != "cpu" or flags is None else
               f" XLA's CPU runtime ran with its default options (no XLA_FLAGS) over the "
               f"{conditions.get('xla_cpu_cores', 'unrecorded number of')} cores this process may use."
               if not flags else f" XLA's CPU runtime ran with XLA_FLAGS={flags}.")
    return f"{spelled[0]} and {spelled[1]} (CPU time over wall time, measured in this run).{runtime}"


def _throughput_verdict(metrics, device) -> verdict.Verdict | None:
    """At the smallest size: the throughput of back-to-back calls (waited for once per
    repeat), where the per-call verdict measures latency. None where it was not measured."""
    table = metrics.get("jit_back_to_back", {}).get(device) or {}
    if not table:
        return None
    small = _sizes(table)[0]
    return ladders.ladder(ladder_only(table[str(small)]["ladder"]),
                          question=f"Which framework has the higher throughput of back-to-back calls at {small:,} "
                                   f"floats on the {device.upper()}, each at its best?", scale=_scale(small, device),
                          race=f"back-to-back/{device}/smallest")


def _grad_verdict(metrics):
    n = _sizes(metrics["autograd"])[-1]
    return ladders.ladder(ladder_only(metrics["autograd"][str(n)]["ladder"]),
                          question=f"Which framework computes the gradient over {n:,} elements faster on the "
                                   f"{metrics['autograd_device'].upper()}, each at its best?",
                          scale=_scale(n, metrics["autograd_device"]), race=f"gradient/{metrics['autograd_device']}")


def _hvp_verdict(metrics):
    (size, hvp), = metrics["hvp"].items()
    return ladders.ladder(hvp["ladder"], question=f"Which framework computes a Hessian-vector product on "
                                                  f"{int(size):,} elements faster on the "
                                                  f"{metrics['autograd_device'].upper()}, each at its best?",
                          scale=_scale(int(size), metrics["autograd_device"]), race=f"hvp/{metrics['autograd_device']}")


def verdicts(metrics: Mapping[str, Any]) -> list[verdict.Verdict]:
    """The post's verdicts, headline first: per device (main first) the largest
    and the smallest size of the jit sweep, then gradients, then the HVP."""
    out = []
    for device in _devices(metrics):
        out += list(_jit_verdicts(metrics, device))
        throughput = _throughput_verdict(metrics, device)
        if throughput is not None:
            out.append(throughput)
    control = list(control_verdicts(metrics).values())
    return out + [_grad_verdict(metrics), _hvp_verdict(metrics)] + control


# ----------------------------------------------------------------------------- the control

#: The label that opens every control verdict's question.
CONTROL_LABEL = "control: no sin/cos"
_CONTROL_WHAT = {
    "jit": "evaluates g (f with sin and cos replaced by polynomials) on {n:,} floats",
    "autograd": "computes the gradient of g (f with sin and cos replaced by polynomials) over "
    "{n:,} elements",
}


def control_verdicts(metrics: Mapping[str, Any]) -> dict[str, verdict.Verdict]:
    """The control's verdicts, ``{"jit": ..., "autograd": ...}`` for the races the record has:
    best against best on the control's ladder, each question opening with :data:`CONTROL_LABEL`
    and each race named ``control-no-sin-cos/<race>/<device>``; {} without a control."""
    out = {}
    for key, what in _CONTROL_WHAT.items():
        race = (metrics.get("control") or {}).get(key)
        if not race:
            continue
        n, device = int(race["size"]), race["device"]
        out[key] = ladders.ladder(
            ladder_only(race["ladder"]),
            scale=_scale(n, device),
            race=f"control-no-sin-cos/{key}/{device}",
            question=f"{CONTROL_LABEL[0].upper()}{CONTROL_LABEL[1:]}. Which framework "
            f"{what.format(n=n)} "
            f"faster on the {device.upper()}, each at its best?",
        )
    return out


def _advantage(v: verdict.Verdict) -> float | None:
    """PyTorch's speed-up over JAX in a verdict (JAX's time over PyTorch's); None without one."""
    return None if v.ratio is None else 1 / v.ratio


def _factor_text(v: verdict.Verdict) -> str:
    """``PyTorch's best 8.6× faster (7.79–9.49×)``: the winner, the factor and its interval."""
    if v.ratio is None:
        return f"no comparison ({v.label})"
    torch_wins = v.ratio < 1
    who = f"{words.FRAMEWORKS['torch' if torch_wins else 'jax']}'s best"
    if v.interval is None:
        return f"{who} {words.fmt_ratio(v.factor)} faster (no interval: {v.label})"
    lo, hi = (1 / v.interval[1], 1 / v.interval[0]) if torch_wins else v.interval
    tied = "" if v.winner else f", {v.label}"
    span = f"{words.fmt_number(lo)}–{words.fmt_ratio(hi)}"
    return f"{who} {words.fmt_ratio(v.factor)} faster ({span}{tied})"


def control_sentence(head: verdict.Verdict, control: verdict.Verdict, what: str = "f") -> str:
    """One sentence: the control's factor beside the headline's (each with its interval, from the
    two verdicts), the share of the headline's factor the control removes (on a log scale: the
    headline's factor is the control's times the rest) and the rest, which goes with sin and cos."""
    h, c = _advantage(head), _advantage(control)
    start = (
        f"Without sin and cos the same race gives {_factor_text(control)} where {what} gives "
        f"{_factor_text(head)}"
    )
    if h is None or c is None or h <= 1 or head.winner is None:  # no gap in the headline to explain
        return start + "."
    kept = math.log(c) / math.log(h)
    if kept >= 1:
        return (
            start
            + ": the control removes none of the headline's factor, so sin and cos do not "
            "explain it."
        )
    if kept <= 0:
        return (
            start + ": the control removes all of the headline's factor, so sin and cos alone make "
            "PyTorch's best the faster one."
        )
    return (
        start
        + f": the control removes {words.fmt_number(100 * (1 - kept))}% of the headline's factor "
        f"on a log scale, and the rest, a factor of {words.fmt_ratio(h / c)}, goes with sin and "
        "cos "
        "(what each "
        "compiler's code for them costs beyond the polynomials that stand in for them)."
    )


def _per_element(race: Mapping[str, Any], name: str) -> str:
    seconds = _median(race["ladder"], name) and verdict.typical_s(race["ladder"][name])
    return words.fmt_seconds(seconds / int(race["size"])) if seconds else "n/a"


def control_claim(metrics: Mapping[str, Any]) -> str:
    """The control's paragraph: the answer's sentence for the element-wise race and for the
    gradient (:func:`control_sentence`), the time per element of each best rung for f and g,
    the control's verdicts, and what XLA's CPU options changed
    (:func:`sidebyside.posts.jit_autograd.control.flags_sentence`); "" without a control."""
    control = metrics.get("control") or {}
    found = control_verdicts(metrics)
    if not found:
        return ""
    heads = {
        "jit": _jit_verdicts(metrics, control["jit"]["device"])[0] if "jit" in found else None,
        "autograd": _grad_verdict(metrics) if "autograd" in found else None,
    }
    answer = [
        control_sentence(heads[k], found[k], what)
        for k, what in (("jit", "f"), ("autograd", "f's gradient"))
        if k in found
    ]
    per_element = ""
    if "jit" in found:
        race = control["jit"]
        head = metrics["jit"][race["device"]][str(race["size"])]["ladder"]
        per_element = (
            " Per element: `jax.jit` takes "
            + _per_element({**race, "ladder": head}, "jax/jit")
            + " for f and "
            + _per_element(race, "jax/jit")
            + " for g; static `torch.compile` takes "
            + _per_element({**race, "ladder": head}, "torch/compile")
            + " for f and "
            + _per_element(race, "torch/compile")
            + " for g."
        )
    races = {"jit": "element-wise", "autograd": "gradient"}
    boxes = " ".join(
        f"{CONTROL_LABEL.capitalize()}, {races[k]} ({int(control[k]['size']):,} elements): "
        f"{v.sentence}"
        for k, v in found.items()
    )
    flags = flags_sentence(
        control.get("xla_flags") or [], control.get("jaxlib", ""), control.get("xla_options")
    )
    return "\n\n".join(
        p
        for p in (
            f"**{CONTROL_LABEL.capitalize()}.** " + " ".join(answer) + per_element,
            boxes,
            flags,
        )
        if p
    )


# ----------------------------------------------------------------------------- claims


def _floor_text(metrics, device, n) -> str:
    row = metrics["jit"][device][str(n)]
    text = ""
    for framework in ("torch", "jax"):
        tool = row["best"][framework]
        median = _median(row["ladder"], f"{framework}/{tool}") if tool else None
        if median:
            text += (f" {words.FRAMEWORKS[framework]}'s best moves {words.fmt_number(8 * n / median / 1e9)} GB/s, "
                     f"{words.fmt_number(100 * row['memory_floor_s'] / median)}% of the "
                     f"{metrics['bandwidth'][device]['floor uses']} bandwidth.")
    return text


def jit_claim(metrics: Mapping[str, Any], device: str) -> str:
    """The jit sweep on one device: best against best at the largest size (with the
    share of the memory bandwidth each best reaches, and NumPy against ``jax.jit``)
    and at the smallest, where a call is mostly dispatch."""
    sizes = _sizes(metrics["jit"][device])
    big, small = sizes[-1], sizes[0]
    v_big, v_small = _jit_verdicts(metrics, device)
    entries = metrics["jit"][device][str(big)]["ladder"]
    numpy_s, jit_s = _median(entries, "numpy/numpy"), _median(entries, "jax/jit")
    numpy_text = f" {ladders.relative(numpy_s, jit_s, '`jax.jit`', 'NumPy')} there." if numpy_s and jit_s else ""
    where = device.upper()
    throughput = _throughput_verdict(metrics, device)
    back = (f" Issued back to back and waited for once, so that launches overlap the work: {throughput.sentence}"
            if throughput is not None else "")
    cause = f" The cause: {v_big.cause}" if v_big.cause else ""
    return (f"**{where}, {big:,} elements.** {v_big.sentence}{cause}{_floor_text(metrics, device, big)}{numpy_text}\n\n"
            f"**{where}, {small:,} elements**, where a synchronised call is mostly launch and wait: "
            f"{v_small.sentence}{back}")


def compile_claim(metrics: Mapping[str, Any], device: str) -> str:
    """Compilation in a warm process on one device, the one-time start-up apart."""
    cs, startup = metrics["compile_s"][device], metrics["startup_s"]
    return ("Compilation, in a warm process: "
            + (f"{words.fmt_seconds(cs['jax_jit'])} per new length for `jax.jit`, " if cs["jax_jit"] else "")
            + (f"{words.fmt_seconds(cs['torch_compile'])} per new length for static `torch.compile`, "
               if cs["torch_compile"] else "")
            + (f"{words.fmt_seconds(cs['torch_compile_dynamic'])} once for `torch.compile(dynamic=True)`"
               if cs["torch_compile_dynamic"] is not None else "dynamic `torch.compile` failed")
            + f"; one-time start-up apart ({words.fmt_seconds(startup['torch_compile_startup_s'])} for "
            f"`torch.compile`, {words.fmt_seconds(startup['jax_jit_startup_s'])} for `jax.jit`).")


def dispatch_claim(ladders: Mapping[str, Mapping[str, Any]]) -> str:
    """Whether the largest size of a sweep (``{str(n): ladder}``) still measures
    dispatch: each framework's best tool there, its ``t(n) = a + b n`` fitted over
    the sweep, and whether the crossover ``a / b`` lies beyond the largest size."""
    sizes = _sizes(ladders)
    chosen = best(ladder_only(ladders[str(sizes[-1])]))
    notes = []
    for framework in ("torch", "jax"):
        tool = chosen[framework]
        points = [(n, _median(ladders[str(n)], f"{framework}/{tool}")) for n in sizes] if tool else []
        points = [(n, t) for n, t in points if t]
        if len(points) < 2:
            continue
        a, b = functions.fit_overhead(*zip(*points))
        crossover = a / b if b > 0 else math.inf
        who = f"{words.FRAMEWORKS[framework]}'s best ({tool})"
        if crossover > sizes[-1]:
            where = "beyond the sweep" if not math.isfinite(crossover) else f"{crossover:,.0f}"
            notes.append(f"{who} is still dispatch-bound at {sizes[-1]:,} elements (fitted crossover {where})")
        else:
            notes.append(f"{who} is work-bound there (fitted crossover {crossover:,.0f})")
    return ("; ".join(notes) + ".") if notes else ""


def gradient_claim(metrics: Mapping[str, Any]) -> str:
    """Gradients at the largest size, best against best, whether that size still
    measures dispatch, and the original's per-element loop against idiomatic PyTorch."""
    ladders = {n: g["ladder"] for n, g in metrics["autograd"].items()}
    n = _sizes(ladders)[-1]
    text = (f"**Gradients** ({metrics['autograd_device'].upper()}, {n:,} elements): {_grad_verdict(metrics).sentence} "
            + dispatch_claim(ladders))
    loop_sizes = [m for m in _sizes(ladders) if _median(ladders[str(m)], "torch/loop")
                  and _median(ladders[str(m)], "torch/autograd")]
    if loop_sizes:
        m = loop_sizes[-1]
        loop_s, autograd_s = _median(ladders[str(m)], "torch/loop"), _median(ladders[str(m)], "torch/autograd")
        text += (f" The original's per-element loop is the outlier: at {m:,} elements it takes "
                 f"{words.fmt_seconds(loop_s)}, {words.fmt_ratio(loop_s / autograd_s)} the idiomatic PyTorch call, "
                 "so the original's comparison measured a Python loop, not PyTorch's autograd.")
    return text


def hvp_claim(metrics: Mapping[str, Any]) -> str:
    """The Hessian-vector product, best against best."""
    (size, _), = metrics["hvp"].items()
    return f"**Hessian-vector product** ({int(size):,} elements): {_hvp_verdict(metrics).sentence}"


def pitfall_claim(metrics: Mapping[str, Any]) -> str:
    """What a timer that does not wait, and a first call with compilation inside,
    report for ``jax.jit`` at the largest size on the main device."""
    device = metrics["autograd_device"]
    pit = metrics["pitfall"].get(f"{device}/jax.jit")
    if not pit:
        return ""
    big = _sizes(metrics["jit"][device])[-1]
    factor = pit["no sync / right"]
    how_wrong = (f"(a factor of {words.fmt_number(1 / factor)} too fast)" if factor < 0.5
                 else f"({words.fmt_ratio(factor)} the true time)")
    return (f"**The pitfall.** Without waiting for the result, `jax.jit` at {big:,} elements appears to take "
            f"{words.fmt_seconds(pit['no sync (µs), WRONG'] * 1e-6)} instead of "
            f"{words.fmt_seconds(pit['synchronised median (µs), right'] * 1e-6)} {how_wrong}, and a first call that "
            f"includes compilation reports {words.fmt_seconds(pit['first call (µs), WRONG'] * 1e-6)}.")


def _overhead(call_s: float | None, row: Mapping[str, Any] | None) -> tuple[float, float] | None:
    """``(seconds, share)`` of a synchronised call that is neither kernel nor copy on the
    device (launch and synchronisation), from its time and its kernel row; None without both."""
    if not call_s or not row or row.get("kernel_s") is None:
        return None
    rest = call_s - row["kernel_s"] - (row.get("copy_s") or 0.0)
    return rest, rest / call_s


def _kernel_sentence(metrics, device, n, framework) -> str:
    row = metrics["jit"][device][str(n)]
    tool = row["best"][framework]
    if not tool:
        return ""
    name, who = f"{framework}/{tool}", f"{words.FRAMEWORKS[framework]}'s best ({tool})"
    kernel = metrics["jit_kernel"][device].get(str(n), {}).get(name)
    if not kernel or kernel.get("not_applicable"):
        return ""
    if kernel.get("error"):
        return f" {who}: its kernel time could not be profiled ({kernel['error']})."
    call_s = _median(row["ladder"], name)
    rest = _overhead(call_s, kernel)
    if rest is None:
        return ""
    count = kernel["kernels_per_call"]
    copies = (f" and its copies {words.fmt_seconds(kernel['copy_s'])}" if kernel.get("copy_s") else "")
    if rest[0] <= 0:
        tail = "the GPU's work is the whole call, with no launch or synchronisation left over."
    else:
        tail = f"the other {words.fmt_seconds(rest[0])} ({words.fmt_number(100 * rest[1])}%) is launch and synchronisation."
    return (f" {who} takes {words.fmt_seconds(call_s)} per synchronised call, of which its "
            f"{words.fmt_number(count)} {'kernel takes' if count == 1 else 'kernels take'} "
            f"{words.fmt_seconds(kernel['kernel_s'])} on the GPU{copies}: {tail}")


def kernel_claim(metrics: Mapping[str, Any], device: str) -> str:
    """The kernel apart from the call on one device, at the smallest and the largest size:
    for each framework's best tool (per synchronised call), its time per call, the time its
    kernels (and copies) take on the device by the profiler, and the rest, launch and
    synchronisation. Empty where the record has no kernel times for ``device``."""
    if not metrics.get("jit_kernel", {}).get(device):
        return ""
    sizes = _sizes(metrics["jit"][device])
    parts = []
    for n in dict.fromkeys((sizes[0], sizes[-1])):
        text = "".join(_kernel_sentence(metrics, device, n, framework) for framework in ("torch", "jax"))
        if text:
            parts.append(f"At {n:,} elements:{text}")
    if not parts:
        return ""
    return f"**{device.upper()}, kernel and call apart** (kernel time from each framework's profiler). " + " ".join(parts)


def kernel_table(jit_entries, back_to_back, kernel, *, labels: Mapping[str, str] | None = None):
    """A pandas DataFrame, one row per (device, size, tool) with a kernel time: the synchronised
    per-call time, the back-to-back time, the kernel time, kernels per call, the copies on the
    device, and the rest of the call (launch and synchronisation) in µs and as a share.
    Arguments as :func:`summarise` takes them (keyed by ``(device, n)``)."""
    import pandas as pd

    rows = []
    for (device, n), kernel_rows in kernel.items():
        for name, k in kernel_rows.items():
            if k.get("kernel_s") is None:
                continue
            call_s = _median(jit_entries.get((device, n), {}), name)
            back_s = _median((back_to_back or {}).get((device, n), {}), name)
            rest = _overhead(call_s, k)
            rows.append({"device": device, "size": n, "tool": (labels or {}).get(name, name),
                         "per call (µs)": call_s * 1e6 if call_s else None,
                         "back to back (µs)": back_s * 1e6 if back_s else None,
                         "kernel (µs)": k["kernel_s"] * 1e6, "kernels per call": k["kernels_per_call"],
                         "copies (µs)": k["copy_s"] * 1e6,
                         "launch and sync (µs)": rest[0] * 1e6 if rest else None,
                         "launch and sync (%)": 100 * rest[1] if rest else None})
    columns = ["device", "size", "tool", "per call (µs)", "back to back (µs)", "kernel (µs)", "kernels per call",
               "copies (µs)", "launch and sync (µs)", "launch and sync (%)"]
    return pd.DataFrame(rows, columns=columns).set_index(["device", "size", "tool"])


def conclusion(metrics: Mapping[str, Any]) -> str:
    """The body of the post's Conclusion (Markdown, under the notebook's heading),
    computed from the results record only; a record without kernel times says, in one
    line, that they are measured on a GPU only."""
    parts: list[str] = []
    for device in _devices(metrics):
        parts += [jit_claim(metrics, device), kernel_claim(metrics, device), compile_claim(metrics, device)]
    if not any(metrics.get("jit_kernel", {}).values()):
        parts.append(KERNEL_ON_GPU_ONLY)
    parts += [gradient_claim(metrics), hvp_claim(metrics), control_claim(metrics),
              pitfall_claim(metrics)]
    return "\n\n".join(p for p in parts if p)
