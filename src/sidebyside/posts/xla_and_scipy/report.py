"""xla-and-scipy: the results record and the generated conclusion.

``summarise(...)`` turns the notebook's measured objects (the linear-algebra ladders,
the device peaks, the inverse accuracy, the default-precision table, the optimisers,
the recompilation tables) into the JSON-able record the post publishes;
``conclusion(metrics)`` writes the post's Conclusion from that record alone, one small
function per kind of claim (linear algebra per device, inverse accuracy, default
precision, the calibration fit, recompilation). ``optimise_note`` is the paragraph
under the optimisation table.

A reduced-precision row (:data:`REDUCED`: TF32, bfloat16) is raced only where the record
holds a check that the setting took effect on both sides (``precision_applied``, per
``op/device/mode``: :func:`sidebyside.lab.framing.precision_applied` per framework);
otherwise its verdict reads "not applied: <reason>". Each checked row's verdict carries
both sides' error against float64.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from sidebyside.lab import framing, functions, ladders, verdict, viz, words

__all__ = ["OPTIMISER_LABELS", "CONVERGED_WITHIN", "CUSOLVER_FINDING", "summarise", "verdicts", "linalg_claim", "accuracy_claim",
           "precision_claim", "optimise_note", "optimise_claim", "retrace_claim", "conclusion"]

#: How the post names each optimiser.
OPTIMISER_LABELS = {"scipy_bfgs_finite_diff": "SciPy BFGS, finite differences",
                    "scipy_bfgs_jax_grad": "SciPy BFGS, jax.grad gradients",
                    "jax_scipy_bfgs_legacy": "jax.scipy.optimize BFGS (legacy)",
                    "optax_lbfgs": "optax L-BFGS", "torch_lbfgs": "torch.optim.LBFGS"}

#: A fit "lands on the optimum" when its parameters are this close to the exact least-squares solution.
CONVERGED_WITHIN = 1e-4

_FLOPS = {"matmul": functions.matmul_flops, "inverse": functions.inverse_flops}

#: Arithmetic modes that must be shown to take effect before they are raced.
REDUCED = ("tf32", "bfloat16")
#: The finding where JAX's TF32 inverse on a GPU equals its float32 one: the precision context sets
#: XLA's dot precision, and the inverse's LU is a cuSOLVER call, which it does not govern.
CUSOLVER_FINDING = "jax.default_matmul_precision does not reach cuSOLVER, whose LU computes the inverse"


def summarise(*, conditions, startup, linalg_entries, device_peaks, inverse_accuracy, n_acc, condition,
              precision_table, precision_size, optimise, truth, optimum, retrace_table, lengths, pad_to,
              static_table, precision_applied=None) -> dict[str, Any]:
    """The results record of the post.

    ``linalg_entries``: ``{(op, device, mode, n): ladder}``; ``device_peaks``:
    ``{(device, mode): (FLOP/s or None, source)}``; ``inverse_accuracy``,
    ``precision_table``, ``retrace_table``, ``static_table``: the notebook's
    DataFrames; ``optimise``: ``{method: record}``; ``truth`` and ``optimum``: the
    true and the least-squares parameters; ``precision_applied``: ``{(op, device, mode):
    {"torch": check, "jax": check}}`` (:func:`sidebyside.lab.framing.precision_applied`) for
    the reduced-precision rows that ran. The verdicts are computed from the record itself
    (:func:`verdicts`) and stored in it.
    """
    metrics = {
        "conditions": dict(conditions),
        "startup_s": dict(startup),
        **{op: {f"{d}/{t}/{n}": {"ladder": e, "best": ladders.best(e)}
                for (o, d, t, n), e in linalg_entries.items() if o == op} for op in ("matmul", "inverse")},
        "peak_flops": {f"{d}/{t}": {"flops": p, "source": why} for (d, t), (p, why) in device_peaks.items()},
        "inverse_error": {f"{d}/{t}/{n_acc}": {k: float(v) for k, v in row.items() if not math.isnan(v)}
                          for (t, d), row in inverse_accuracy.iterrows()},
        "inverse_condition": float(condition),
        "matmul_precision": {f"{d}/{fw}/{s}": row
                             for (d, fw, s), row in precision_table.to_dict(orient="index").items()},
        "precision_size": int(precision_size),
        "optimise": optimise,
        "truth": [float(v) for v in truth],
        "lstsq_optimum": [float(v) for v in optimum],
        "retrace": {s: {"traces": int(row["traces"]), "first_calls_total_s": row["first calls, total (ms)"] / 1e3,
                        "first_call_max_s": row["first call, max (ms)"] / 1e3,
                        "steady_median_s": row["steady, median (ms)"] / 1e3}
                    for s, row in retrace_table.iterrows()},
        "retrace_lengths": [int(n) for n in lengths],
        "retrace_pad_to": int(pad_to),
        "static_config": {a: {"calls_per_pass": int(row["calls per pass"]),
                              "traces_two_passes": int(row["traces in both passes"]),
                              "first_pass_s": row["first pass (ms)"] / 1e3, "second_pass_s": row["second pass (ms)"] / 1e3}
                          for a, row in static_table.iterrows()},
        "precision_applied": {f"{o}/{d}/{m}": dict(sides) for (o, d, m), sides in (precision_applied or {}).items()},
    }
    metrics["verdicts"] = [v.to_dict() for v in verdicts(metrics)]
    return metrics


# ----------------------------------------------------------------------------- reading the record


def _main_device(metrics) -> str:
    devices = {key.split("/")[0] for key in metrics["matmul"]}
    return "gpu" if "gpu" in devices else "cpu"


def _devices(metrics) -> list[str]:
    main = _main_device(metrics)
    return [main] + sorted({key.split("/")[0] for key in metrics["matmul"]} - {main})


def _cases(metrics, device):
    """(op, mode, entries) at the largest size run on ``device``, and that size."""
    n_big = max(int(key.split("/")[2]) for key in metrics["matmul"] if key.startswith(device + "/"))
    cases = []
    for op in ("matmul", "inverse"):
        for key, row in metrics[op].items():
            d, mode, n = key.split("/")
            if d == device and int(n) == n_big:
                cases.append((op, mode, row["ladder"]))
    return n_big, cases


def _ran(entries) -> bool:
    return any(e.get("median_s") is not None for e in entries.values())


def _applied(metrics, op, mode, device) -> tuple[dict[str, str | None] | None, str]:
    """For a reduced-precision row: per side None (the setting took effect) or why not, and
    the caveat with each side's error against float64. (None, "") for float32 and float64."""
    if mode not in REDUCED:
        return None, ""
    checks = metrics.get("precision_applied", {}).get(f"{op}/{device}/{mode}")
    if not checks:
        return {"torch": f"no check that {mode} took effect on either side was recorded", "jax": None}, ""
    reasons = {side: checks[side].get("reason") if side in checks else "not checked" for side in ("torch", "jax")}
    if op == "inverse" and device == "gpu" and mode == "tf32" and reasons["jax"] and "jax" in checks:
        reasons["jax"] = f"{CUSOLVER_FINDING} ({reasons['jax']})"
    errors = ", ".join(f"{words.FRAMEWORKS[side]} {words.fmt_number(checks[side]['error'])} (float32 "
                       f"{words.fmt_number(checks[side]['float32_error'])})" for side in ("torch", "jax")
                       if side in checks)
    return reasons, f"Relative error against float64 in {mode}: {errors}."


def _linalg_verdict(op, mode, entries, device, n, metrics=None):
    applied, caveat = _applied(metrics or {}, op, mode, device)
    precision = {"tf32": "float32 data, TF32 allowed", "bfloat16": "bfloat16"}.get(mode, mode)
    return ladders.ladder({k: e for k, e in entries.items() if not k.startswith("numpy/")},
                          question=f"Which framework computes a {n}×{n} {op} in {mode} faster on the "
                                   f"{device.upper()}?", applied=applied, caveat=caveat, race=f"{op}/{mode}/{device}",
                          scale=framing.scale_of(input=f"{n}×{n}", precision=precision, device=device.upper()))


def verdicts(metrics: Mapping[str, Any]) -> list[verdict.Verdict]:
    """The post's verdicts: per device (main first), per operation and arithmetic
    that ran there, JAX's best against PyTorch's at the largest size."""
    out = []
    for device in _devices(metrics):
        n, cases = _cases(metrics, device)
        out += [_linalg_verdict(op, mode, entries, device, n, metrics) for op, mode, entries in cases
                if _ran(entries)]
    return out


# ----------------------------------------------------------------------------- claims


def linalg_claim(metrics: Mapping[str, Any], device: str) -> str:
    """Linear algebra on one device at its largest size: per operation and arithmetic,
    best against best, NumPy against JAX, and each library's share of the peak (or why
    the row did not run here)."""
    n, cases = _cases(metrics, device)
    parts = []
    for op, mode, entries in cases:
        if not _ran(entries):  # e.g. a GPU-only arithmetic on the CPU
            reasons = sorted({e.get("not_applicable") or e.get("error") for e in entries.values()} - {None, ""})
            parts.append(f"*{op}, {mode}*: not run here ({'; '.join(reasons)}).")
            continue
        v = _linalg_verdict(op, mode, entries, device, n, metrics)
        if v.label == verdict.NOT_APPLIED:
            parts.append(f"*{op}, {mode}*: {v.sentence}")
            continue
        peak = metrics["peak_flops"].get(f"{device}/{mode}", {})
        share = [f"{viz.LABELS[name.split('/')[0]]} "
                 f"{words.fmt_number(100 * _FLOPS[op](n) / e['median_s'] / peak['flops'])}%"
                 for name, e in entries.items() if e.get("median_s") and peak.get("flops")]
        numpy_s = (entries.get("numpy/numpy") or {}).get("median_s")
        jax_s = (entries.get("jax/jit") or {}).get("median_s")
        numpy_text = f" {ladders.relative(numpy_s, jax_s, 'JAX', 'NumPy')}." if numpy_s and jax_s else ""
        parts.append(f"*{op}, {mode}*: {v.sentence}{numpy_text}"
                     + (f" Share of the peak ({peak['source']}): " + ", ".join(share) + "." if share else ""))
    return f"**{device.upper()}, n = {n}.** " + " ".join(parts)


def accuracy_claim(metrics: Mapping[str, Any]) -> str:
    """‖A·A⁻¹ − I‖ of each library's inverse in float32 and float64 on the main device."""
    main = _main_device(metrics)
    rows = {key.split("/")[1]: (int(key.split("/")[2]), row) for key, row in metrics["inverse_error"].items()
            if key.startswith(main + "/")}
    n_acc = next(iter(rows.values()))[0]

    def listed(dtype):
        return ", ".join(f"{fw} {v:.1e}" for fw, v in rows[dtype][1].items())

    numpy_note = (" (NumPy inverts float32 input in float64 and rounds the result)."
                  if "NumPy" in rows["float32"][1] else ".")
    return (f"**Inverse accuracy** (n = {n_acc}, condition number {metrics['inverse_condition']:.0f}): "
            f"‖A·A⁻¹ − I‖_F is {listed('float32')} in float32 and {listed('float64')} in float64{numpy_note}")


def precision_claim(metrics: Mapping[str, Any]) -> str:
    """Each library's default float32 matmul precision on the main device, and
    whether JAX's default used TF32 where PyTorch's did not."""
    main, n = _main_device(metrics), metrics["precision_size"]
    table = metrics["matmul_precision"]
    jax_default = table[f"{main}/JAX/default (precision=None)"]["relative error"]
    jax_highest = table[f'{main}/JAX/precision="highest"']["relative error"]
    torch_default = table[f'{main}/PyTorch/default ("highest")']["relative error"]
    tf32_seen = jax_default > 1e-4
    return (f"**Default float32 precision** on the {main.upper()}: a {n}×{n} product has a relative error of "
            f"{jax_default:.1e} in JAX and {torch_default:.1e} in PyTorch by default — "
            + (f"JAX used TF32 where PyTorch did not; `precision=\"highest\"` brings JAX to {jax_highest:.1e}."
               if tf32_seen else
               "both full FP32 here: the TF32 difference appears only on GPUs with tensor cores."))


def _converged(optimise) -> tuple[list[str], list[str]]:
    converged = [k for k, o in optimise.items() if o["error_vs_optimum"] < CONVERGED_WITHIN]
    return converged, [k for k in optimise if k not in converged]


def optimise_note(optimise: Mapping[str, Any], truth, optimum) -> str:
    """The paragraph under the optimisation table: how many methods land on the
    least-squares optimum, and for each that stopped short, where and why."""
    converged, stalled = _converged(optimise)
    distance = math.dist(optimum, truth)
    text = (f"The distance to the truth ({distance:.1e} for the exact optimum) is set by the noise; "
            f"{len(converged)} of {len(optimise)} methods land on the least-squares optimum"
            + (f" to within {max(optimise[k]['error_vs_optimum'] for k in converged):.0e}, the precision of their "
               "stopping rules, and differ only in the work and time it takes them. " if converged else ". ")
            + "‖∇‖∞ is the largest gradient component at the result, computed the same way for all (with "
            "`jax.grad`); \"reports\" is the optimiser's own verdict where it gives one. The first call of each "
            "method is timed apart from the median: for the jitted ones it holds compilation.")
    for k in stalled:
        o = optimise[k]
        status = ""
        if o["status"] is not None:
            status = f", and reports status {o['status']}" + (
                " (line-search failure)" if k == "jax_scipy_bfgs_legacy" and o["status"] >= 2 else "")
        text += (f"\n\n**{OPTIMISER_LABELS.get(k, k)} stopped short**: after {o['nit']} iterations at "
                 f"({o['params'][0]:.4f}, {o['params'][1]:.4f}), {o['error_vs_optimum']:.1e} away from the optimum, "
                 f"with a gradient of {o['grad_inf_norm']:.1e}{status}.")
        if k == "jax_scipy_bfgs_legacy":
            text += (" Nothing raises: only `success` and `status` in the result tell, so check them. (The original "
                     "write-up's `jax.scipy` run did report success; its JAX and SciPy fits cannot be compared, as "
                     "their final RMSEs, 0.445 and 0.081, say they did not fit the same data.)")
    return text


def optimise_claim(metrics: Mapping[str, Any]) -> str:
    """The calibration fit: how many methods reach the optimum, and each one's time
    and work per fit, with the jitted ones' first call."""
    optimise, (a, b) = metrics["optimise"], metrics["lstsq_optimum"]
    converged, stalled = _converged(optimise)
    truth = ", ".join(words.fmt_number(v) for v in metrics["truth"])
    within = (f" within {max(optimise[k]['error_vs_optimum'] for k in converged):.0e} of" if converged else "")
    first = [f"{words.fmt_seconds(optimise[k]['first_call_s'])} for {label}"
             for k, label in (("jax_scipy_bfgs_legacy", "`jax.scipy`"), ("optax_lbfgs", "optax")) if k in optimise]
    return (f"**Calibration fit.** {len(converged)} of {len(optimise)} methods find slope and offset{within} the exact "
            f"least-squares optimum ({a:.4f}, {b:.4f}; truth {truth})"
            + (f"; {', '.join(OPTIMISER_LABELS.get(k, k) for k in stalled)} stopped short of it" if stalled else "")
            + ". Per fit: "
            + ", ".join(f"{OPTIMISER_LABELS.get(k, k)} {words.fmt_seconds(o['seconds'])} ({o['nit']} iterations, "
                        f"{o['nfev']} evaluations)" for k, o in optimise.items())
            + (". The jitted ones pay their compilation once, in a first call of " + " and ".join(first) + "."
               if first else ".")
            + (" SciPy's optimisers iterate on the CPU in NumPy whatever the device of the others, so their times "
               "are CPU times and not a race with the GPU methods." if _main_device(metrics) == "gpu" and
               any(k.startswith("scipy_") for k in optimise) else ""))


def retrace_claim(metrics: Mapping[str, Any]) -> str:
    """Recompilation: compilations and first-call time per strategy over the data
    lengths, and a fresh ``jit`` per call against a static argument."""
    rt, st = metrics["retrace"], metrics["static_config"]
    fresh, static = st["new jit per call"], st["static argument"]
    return (f"**Recompilation.** {len(metrics['retrace_lengths'])} data lengths cost the naive `jit` "
            f"{rt['naive']['traces']} compilations ({words.fmt_seconds(rt['naive']['first_calls_total_s'])} of first "
            f"calls in all); padding to {metrics['retrace_pad_to']} with a traced length needs "
            f"{rt['padding']['traces']} ({words.fmt_seconds(rt['padding']['first_calls_total_s'])}), buckets "
            f"{rt['buckets']['traces']}, and marking the length static brings back "
            f"{rt['padding, length static']['traces']}. For configuration, a fresh `jit` per call traced "
            f"{fresh['traces_two_passes']} times in two passes of {fresh['calls_per_pass']} calls (second pass "
            f"{words.fmt_seconds(fresh['second_pass_s'])}), a static argument {static['traces_two_passes']} times "
            f"(second pass {words.fmt_seconds(static['second_pass_s'])}).")


def conclusion(metrics: Mapping[str, Any]) -> str:
    """The body of the post's Conclusion (Markdown, under the notebook's heading),
    computed from the results record only."""
    parts = [linalg_claim(metrics, device) for device in _devices(metrics)]
    parts += [accuracy_claim(metrics), precision_claim(metrics), optimise_claim(metrics), retrace_claim(metrics)]
    return "\n\n".join(parts)
