"""grid-sample-parity: the parity record, the speed verdicts and the post's conclusion.

The notebook measures (:mod:`sidebyside.grid_sample.parity` for the errors,
:func:`sidebyside.grid_sample.bench.run` for the times, a photograph, a timing pitfall and
PyTorch's crash on a NaN grid); this module turns what it measured into the results
record (:func:`summarise`) and the record into prose: the notes under the parity
tables (:func:`parity_note`, :func:`affine_note`), the timing pitfall
(:func:`pitfall_note`), the results table (:func:`results_table`) and the generated
Conclusion (:func:`conclusion`), built from one small function per kind of claim.

Record keys (``metrics``): ``parity`` and ``parity_affine`` (per configuration key
``mode/padding/align_corners/dims/dtype``: the largest errors and ``passed``; pure JAX),
``parity_native`` (the same for this project's C++ kernel, float32 on a CPU; empty on a GPU),
``parity_reference_device``, ``parity_transform``, ``speed`` (per
``mode/size/forward|forward+backward``: the benchmark's times, quartiles, ratios, memory
floor, ``goal`` (per call) and ``goals``: every goal of the row,
:func:`sidebyside.grid_sample.goals.goals`), ``gpu_goals``, ``photo_max_abs_diff``, ``timing_pitfall_ms``,
``torch_cpu_nan_backward_returncode``, ``device``, ``device_kind``, ``verdicts``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from sidebyside.lab import framing, ladders, verdict, words

__all__ = ["ERROR_COLUMNS", "SPEED_KEYS", "each_option_once", "summarise", "verdicts", "parity_verdict", "native_parity_verdict",
           "speed_verdicts",
           "largest_by_dtype", "headline_key", "parity_note", "affine_note", "pitfall_note", "results_table", "conclusion",
           "parity_claim", "photo_claim", "non_finite_claim", "speed_claim", "floor_claim", "slower_claim",
           "goals_claim", "device_claim"]

#: The relative errors a configuration is judged by: output, input gradient, grid gradient.
ERROR_COLUMNS = ("max_rel_err", "grad_input_max_rel_err", "grad_grid_max_rel_err")
_PARITY_KEYS = ("max_abs_err", "grad_input_max_abs_err", "grad_grid_max_abs_err", *ERROR_COLUMNS, "passed")
#: The benchmark's columns kept in the record, per configuration (quartiles included, so
#: the verdicts can be recomputed from the record alone).
SPEED_KEYS = ("jax_ms", "torch_ms", "ratio", "jax_iqr_ms", "torch_iqr_ms", "jax_q1_ms", "jax_q3_ms", "torch_q1_ms",
              "torch_q3_ms", "naive_ms", "implementation", "xla_ms", "xla_ratio", "shape", "jax_kernel_ms",
              "torch_kernel_ms", "kernel_ratio", "jax_kernel_iqr_ms", "torch_kernel_iqr_ms", "jax_kernel_q1_ms",
              "jax_kernel_q3_ms", "torch_kernel_q1_ms", "torch_kernel_q3_ms", "copies", "calls", "inputs_bytes",
              "cache_bytes", "inputs_exceed_cache", "torch_kernel_tool", "pallas_channels_ms", "pallas_channels_ratio",
              "jax_channels_kernel_ms", "channels_kernel_ratio", "min_bytes", "copy_gbs", "floor_ms",
              "jax_floor_speed", "torch_floor_speed", "ladder", "jax_processes_ms", "torch_processes_ms",
              "jax_kernel_processes_ms", "torch_kernel_processes_ms", "floor", "busy", "kernel_floor", "kernel_busy")


def each_option_once(configs):
    """A sample of ``configs`` (:class:`sidebyside.grid_sample.parity.Config`) in which every mode, padding,
    align_corners, dimensionality and dtype among them appears at least once: greedily, the configuration
    that adds the most options not yet taken, the first in order among equals (from the 30 float32
    configurations: nearest/zeros/False/2d, bilinear/border/True/3d, bicubic/reflection/False/2d). The
    smoke profile's parity sections (``parity_sample``); the test suite runs every configuration."""
    names = ("mode", "padding_mode", "align_corners", "dims", "dtype")
    options = [{(name, getattr(c, name)) for name in names} for c in configs]
    missing, sample = set().union(*options), []
    while missing:
        best = max(range(len(configs)), key=lambda i: len(options[i] & missing))  # the first among equals
        sample.append(configs[best])
        missing -= options[best]
    return sample


# ----------------------------------------------------------------------------- the record


def summarise(parity_rows: Mapping[str, Mapping[str, Any]], affine_rows: Mapping[str, Mapping[str, Any]],
              speed: Mapping[str, Mapping[str, Any]], *, device: str, device_kind: str, torch_device: str,
              parity_transform: str, warp_diff: Mapping[str, float], pitfall: Mapping[str, Any],
              nan_backward_returncode: int, parts: Mapping[str, Any] | None = None,
              native_rows: Mapping[str, Mapping[str, Any]] | None = None) -> dict[str, Any]:
    """The post's results record from what the notebook measured.

    ``parity_rows``/``affine_rows``: :func:`sidebyside.grid_sample.parity.measure` per
    configuration key; ``speed``: the benchmark's ``results``; ``warp_diff``: the
    photograph's largest difference per mode/padding; ``pitfall``: per path, the two timings
    (``"unsynchronised"``, ``"synchronised"``: anything with ``median_s``);
    ``nan_backward_returncode``: the exit code of PyTorch's CPU backward on a NaN grid;
    ``parts``: for a run in parts (:class:`sidebyside.run.checkpoints.Checkpoints`), which run measured each
    part, at which commit; ``native_rows``: the parity rows of this project's C++ kernel (a CPU run),
    in the form of ``parity_rows``.
    """
    from sidebyside.grid_sample import goals as sampling_goals

    metrics: dict[str, Any] = {
        "parity": {k: {q: r[q] for q in _PARITY_KEYS} for k, r in parity_rows.items()},
        "parity_affine": {k: {q: v for q, v in r.items() if q.endswith("_err") or q == "passed"}
                          for k, r in affine_rows.items()},
        "parity_native": {k: {q: r[q] for q in _PARITY_KEYS} for k, r in (native_rows or {}).items()},
        "parity_reference_device": torch_device,
        "parity_transform": parity_transform,
        "speed": {k: {**{q: v.get(q) for q in SPEED_KEYS}, "goal": sampling_goals.goal_for(k, device_kind),
                      "goals": sampling_goals.goals(k, v, device_kind)}
                  for k, v in speed.items()},
        "gpu_goals": "measured" if device_kind == "gpu" else "not yet measured",
        "photo_max_abs_diff": max(warp_diff.values()),
        "timing_pitfall_ms": {path: {name: pair[name].median_s * 1e3 for name in ("unsynchronised", "synchronised")}
                              for path, pair in pitfall.items()},
        "torch_cpu_nan_backward_returncode": int(nan_backward_returncode),
        "device": device,
        "device_kind": device_kind,
        "parts": dict(parts or {}),
    }
    metrics["verdicts"] = [v.to_dict() for v in verdicts(metrics)]
    return metrics


def _largest(rows: Mapping[str, Mapping[str, Any]]) -> float:
    return max((float(r[c]) for r in rows.values() for c in ERROR_COLUMNS), default=0.0)


def _dtypes(metrics: Mapping[str, Any]) -> list[str]:
    return list(dict.fromkeys(k.rsplit("/", 1)[-1] for k in metrics["parity"]))


def largest_by_dtype(metrics: Mapping[str, Any]) -> dict[str, float]:
    """The largest relative error per dtype, over the parity table and the large
    non-power-of-two case: a float16 error and a float32 error answer different
    questions, so they are never pooled."""
    rows = [*metrics["parity"].items(), *metrics.get("parity_affine", {}).items()]
    return {dtype: _largest({i: r for i, (k, r) in enumerate(rows) if k.rsplit("/", 1)[-1] == dtype})
            for dtype in _dtypes(metrics)}


#: PyTorch's side of every parity verdict: its built-in, called as users call it.
_TORCH_BUILT_IN = framing.contestant("torch", "eager", "ATen's grid_sampler kernel")


def _parity_scale(metrics: Mapping[str, Any], rows: Mapping[str, Any]) -> dict[str, Any]:
    dims = sorted({k.split("/")[3] for k in rows if k.count("/") == 4})
    return framing.scale_of(input=f"{' and '.join(dims)} grids, every mode, padding and align_corners",
                            precision=", ".join(dict.fromkeys(k.rsplit("/", 1)[-1] for k in rows)),
                            device=metrics["device"])


def _parity(rows: Mapping[str, Mapping[str, Any]], by_dtype_errors: Mapping[str, float], *, who: str,
            question: str, extra: str) -> verdict.Verdict:
    n, n_within = len(rows), sum(bool(r["passed"]) for r in rows.values())
    largest = words.fmt_number(_largest(rows))
    errors = [f"{words.fmt_number(e)} in {dtype}" for dtype, e in by_dtype_errors.items()]
    by_dtype = ", ".join(errors[:-1]) + (" and " if len(errors) > 1 else "") + errors[-1] if errors else largest
    dtypes = ", ".join(dict.fromkeys(k.rsplit("/", 1)[-1] for k in rows))
    if n_within == n:
        sentence = (f"{who} gives PyTorch's numbers: in {n_within} of {n} configurations (every mode, padding, "
                    f"align_corners and dimensionality, in {dtypes}{extra}) the output and both gradients agree "
                    f"within the tolerance of their dtype; the largest relative error is {by_dtype}.")
    else:
        sentence = (f"{who} does not give PyTorch's numbers everywhere: {words.plural(n - n_within, 'configuration')} "
                    f"of {n} exceed their tolerance (largest relative error {largest}).")
    return verdict.Verdict(
        question=question, label="same" if n_within == n else "different", sentence=sentence, subject="jax",
        other="torch", winner=None,
        test="largest error of output, input gradient and grid gradient within the documented tolerance, "
             "per configuration")


def parity_verdict(metrics: Mapping[str, Any]) -> verdict.Verdict:
    """Same numbers or not, in pure JAX (jnp compiled by XLA; on a GPU, float32 through the
    Pallas kernels): every configuration of the parity table and the large non-power-of-two
    case within its tolerance, with the largest relative error per dtype. This project's C++
    kernel is judged apart (:func:`native_parity_verdict`)."""
    rows = {**metrics["parity"], **{f"affine:{k}": v for k, v in metrics["parity_affine"].items()}}
    gpu = metrics.get("device_kind") == "gpu"
    implementation = ("grid_sample in jnp compiled by XLA" + ("; float32 as Pallas kernels" if gpu else ""))
    v = _parity(rows, largest_by_dtype(metrics), who="Pure JAX",
                question="Does grid_sample written in pure JAX give PyTorch's numbers?",
                extra=", plus the large non-power-of-two case")
    return framing.frame(v, contestants={
        "torch": _TORCH_BUILT_IN,
        "jax": framing.contestant("jax", metrics.get("parity_transform", "jit"), implementation, origin="built_with")},
        scale=_parity_scale(metrics, metrics["parity"]), race="parity/pure-jax")


def native_parity_verdict(metrics: Mapping[str, Any]) -> verdict.Verdict | None:
    """The same test for this project's C++ kernel (through XLA's FFI; float32 on a CPU),
    labelled ``kind="custom"``; None where the record has no such rows (a GPU run)."""
    rows = metrics.get("parity_native") or {}
    if not rows:
        return None
    v = _parity(rows, {"float32": _largest(rows)}, who="This project's C++ kernel",
                question="Does this project's C++ kernel give PyTorch's numbers?", extra="")
    return framing.frame(v, kind="custom", contestants={
        "torch": _TORCH_BUILT_IN,
        "jax": framing.contestant("jax", metrics.get("parity_transform", "jit"), "C++ kernel through XLA's FFI",
                                  origin="project")},
        scale=_parity_scale(metrics, rows), race="parity/cpp-kernel")


def headline_key(speed: Mapping[str, Mapping[str, Any]]) -> str:
    """The configuration the speed verdicts speak of: bilinear forward at the size where
    the GPU goals are set (32x3x256x256) where it was measured, else at the largest 2-D
    size (else the first row)."""
    from sidebyside.grid_sample.goals import FLOOR_GOAL_SHAPE

    sizes = {k.split("/")[1]: (tuple(r["shape"]) == FLOOR_GOAL_SHAPE, math.prod(r["shape"]))
             for k, r in speed.items() if len(r["shape"]) == 4}
    if sizes:
        key = f"bilinear/{max(sizes, key=sizes.get)}/forward"
        if key in speed:
            return key
    return next(iter(speed))


def _timing(row: Mapping[str, Any], side: str, kind: str) -> dict[str, float]:
    infix = "_kernel" if kind == "kernel" else ""
    prefix = "kernel_" if kind == "kernel" else ""
    return {"median_s": row[f"{side}{infix}_ms"] / 1e3, "q1_s": row[f"{side}{infix}_q1_ms"] / 1e3,
            "q3_s": row[f"{side}{infix}_q3_ms"] / 1e3,
            "processes_s": [r / 1e3 for r in row.get(f"{side}{infix}_processes_ms") or []],
            "floor": row.get(f"{prefix}floor"), "busy": row.get(f"{prefix}busy") or []}


def scale(metrics: Mapping[str, Any], key: str) -> dict[str, Any]:
    """The scale of the row ``key``: its input shape, batch, float32, the device (an op: no parameters)."""
    shape = metrics["speed"][key]["shape"]
    return framing.scale_of(input="×".join(map(str, shape)), batch=shape[0], precision="float32",
                            device=metrics["device"])


#: What the JAX side of the main pair runs, per ``implementation``: (implementation, origin).
_JAX_PATHS = {"native": ("C++ kernel through XLA's FFI", "project"),
              "xla": ("grid_sample in jnp, compiled by XLA", "built_with"),
              "pallas": ("grid_sample as Pallas kernels", "built_with")}


def _jax_side(row: Mapping[str, Any], tool: str) -> dict[str, Any]:
    implementation, origin = _JAX_PATHS.get(row.get("implementation") or "xla", _JAX_PATHS["xla"])
    return framing.contestant("jax", tool, implementation, origin=origin)


def framework_verdict(metrics: Mapping[str, Any], key: str | None = None) -> verdict.Verdict | None:
    """What each framework gives its users, per call at :func:`headline_key`: PyTorch's
    built-in ``grid_sample`` at its best (eager, ``torch.compile``) against pure JAX at
    its best (the XLA path; on a GPU also the Pallas kernels), from the row's ``ladder``
    (None for a record measured before it had one)."""
    key = key or headline_key(metrics["speed"])
    row = metrics["speed"][key]
    if not row.get("ladder"):
        return None
    return ladders.ladder(
        row["ladder"], question=f"Which framework's grid_sample is faster per call from Python ({key})?",
        scale=scale(metrics, key), race=f"{key}/per-call/best")


def custom_verdicts(metrics: Mapping[str, Any]) -> list[verdict.Verdict]:
    """What this project's C++ kernel (through XLA's FFI) buys, where the main pair's JAX
    side runs it: per call against PyTorch's built-in eager call, and chained inside one
    program where the kernel times were measured. Where JAX's side is pure JAX (a GPU's
    Pallas path), the chained comparison is a framework verdict instead."""
    key = headline_key(metrics["speed"])
    row = metrics["speed"][key]
    native = row.get("implementation") == "native"
    kind = "custom" if native else "framework"
    what = "this project's C++ kernel" if native else "JAX's grid_sample"
    via = "C++ kernel via XLA's FFI, " if native else ""  # the sentence names what JAX's side runs
    out = []
    if row.get("jax_kernel_ms") is not None:
        graph = row.get("torch_kernel_tool") == "cuda graph"
        chained_torch = framing.contestant(
            "torch", "CUDA graph" if graph else "eager calls in a Python loop", _TORCH_BUILT_IN["implementation"])
        out.append(verdict.speed(
            _timing(row, "torch", "kernel"), _timing(row, "jax", "kernel"),
            question=f"How fast is {what} inside one compiled program ({key}, calls chained)?",
            subject_tool=chained_torch["tool"], other_tool=f"{via}one jit, chained", kind=kind,
            contestants={"torch": chained_torch, "jax": _jax_side(row, "one jit, chained")},
            scale=scale(metrics, key), race=f"{key}/chained",
            caveat="" if graph else "PyTorch's side is a Python loop of eager calls: on a CPU it has no "
                                    "one-program form here."))
    if native:
        out.append(verdict.speed(
            _timing(row, "torch", "call"), _timing(row, "jax", "call"),
            question=f"What does this project's C++ kernel buy per call from Python ({key})?",
            subject_tool="eager", other_tool=f"{via}jit", kind="custom",
            contestants={"torch": _TORCH_BUILT_IN, "jax": _jax_side(row, "jit")}, scale=scale(metrics, key),
            race=f"{key}/per-call/cpp-kernel"))
    return out


def speed_verdicts(metrics: Mapping[str, Any]) -> list[verdict.Verdict]:
    """At :func:`headline_key`: the frameworks' verdict (:func:`framework_verdict`) first,
    then each hand-written kernel's own, labelled verdicts (:func:`custom_verdicts`)."""
    head = framework_verdict(metrics)
    return [*([head] if head is not None else []), *custom_verdicts(metrics)]


def verdicts(metrics: Mapping[str, Any]) -> list[verdict.Verdict]:
    """The post's verdicts, from the record: parity, then speed (the frameworks' verdict
    before any hand-written kernel's)."""
    native = native_parity_verdict(metrics)
    out = [parity_verdict(metrics), *speed_verdicts(metrics), *([native] if native else [])]
    framing.check_headline(out)
    return out


# ----------------------------------------------------------------------------- notes under the tables


def parity_note(parity_rows: Mapping[str, Mapping[str, Any]], *, transform: str, backend: str,
                torch_device: str) -> str:
    """The paragraph under the parity table: how each side ran, how many configurations
    passed, the tolerances and the largest relative error per dtype."""
    gpu = backend == "gpu"
    passed = sum(bool(r["passed"]) for r in parity_rows.values())
    dtypes = list(dict.fromkeys(k.rsplit("/", 1)[-1] for k in parity_rows))
    worst = {d: max(float(r[c]) for k, r in parity_rows.items() if k.endswith("/" + d) for c in ERROR_COLUMNS)
             for d in dtypes}
    nearest = ("Tolerances: nearest's output must be exact; its input gradient, a sum that a GPU adds with atomics "
               "in no fixed order (PyTorch's CUDA kernel too), gets the dtype's tolerance; " if gpu else
               "Tolerances: nearest must be exact; ")
    return (
        f"JAX run: `{transform}` on the {backend.upper()}"
        + (" (float32 through the Pallas kernels)" if gpu else " (pure JAX: jnp compiled by XLA)")
        + f", PyTorch on the {torch_device.upper()}" + (" (half precision on the CPU)" if gpu else "")
        + f". **{passed} of {len(parity_rows)} configurations** are within tolerance for the output and both "
        "gradients. " + nearest + "float32 within 1e-5 and float64 within 1e-10 of the output's scale. "
        "Both sides round the coordinates alike (the same formulas, each rounded once or twice where PyTorch's kernel "
        "on that device rounds it); what is left is the order of a few additions and whether a multiply-add inside a "
        "weight is fused, around 1e-7 and 1e-16. float16 and bfloat16 get 2 units in the last place for outputs and 8 "
        "for gradients, which are sums of up to 16 terms rounded to the dtype in a different order. "
        "Largest relative error per dtype: " + ", ".join(f"{d} {words.fmt_number(v)}" for d, v in worst.items())
        + "."
    )


def affine_note(affine_rows: Mapping[str, Mapping[str, Any]], size_2d, size_3d) -> str:
    """The paragraph under the large non-power-of-two table (with PyTorch's CUDA
    kernel against its CPU kernel where the rows carry that yardstick)."""
    passed = sum(bool(r["passed"]) for r in affine_rows.values())
    text = (f"On {' x '.join(map(str, size_2d))} images (3-D: {' x '.join(map(str, size_3d))}) of 0-255 values under "
            f"a 45-degree warp, **{passed} of {len(affine_rows)} configurations** are within tolerance; the largest "
            f"relative error of the output or either gradient is {words.fmt_number(_largest(affine_rows))}.")
    yardstick = [float(r[f"torch_cuda_vs_cpu_{c}"]) for r in affine_rows.values() for c in ERROR_COLUMNS
                 if f"torch_cuda_vs_cpu_{c}" in r]
    if yardstick:
        text += f" PyTorch's CUDA kernel against its own CPU kernel: at most {words.fmt_number(max(yardstick))}."
    return text


#: An unsynchronised timer "shows" the pitfall where it reports less than this share of the real time.
PITFALL_SHOWS = 0.5


def pitfall_note(config_name: str, cases: Mapping[str, Mapping[str, Any]]) -> str:
    """The paragraph under the timing pitfall: per path (``cases``: path -> ``{"unsynchronised",
    "synchronised"}``, timings with ``median_s``), what the timer that does not wait reports
    against the real time, and whether the mistake shows there (JAX returned before the work
    was done) or not (it returned only once the work was done)."""
    sentences = []
    for path, pair in cases.items():
        wrong, right = pair["unsynchronised"].median_s, pair["synchronised"].median_s
        if wrong < PITFALL_SHOWS * right:
            sentences.append(f"Through the {path} path, the timer that does not wait reports "
                             f"{words.fmt_seconds(wrong)} per call for {config_name}; the computation takes "
                             f"{words.fmt_seconds(right)}, {words.fmt_ratio(right / wrong)} longer: the "
                             "unsynchronised figure is the time to queue the work.")
        else:
            sentences.append(f"Through the {path} path, the timer that does not wait reports "
                             f"{words.fmt_seconds(wrong)} against {words.fmt_seconds(right)} for {config_name}: "
                             "JAX returned only once the work was done, so the mistake does not show with this "
                             "path on this device.")
    return " ".join(sentences) + (" A JAX timing that never calls `block_until_ready` cannot be trusted: whether it "
                                  "measures the work or only its queueing depends on the program and the device.")


def results_table(metrics: Mapping[str, Any]):
    """The results at a glance (a one-column DataFrame) from the record."""
    import pandas as pd

    parity, affine = metrics["parity"], metrics["parity_affine"]
    counts = {f"{goal} goals met": f"{sum(met)} / {len(met)}" for goal, met in _goals_met(metrics).items()}
    return pd.DataFrame({
        "configurations within tolerance": [f"{sum(bool(r['passed']) for r in parity.values())} / {len(parity)}"],
        "largest relative error": [_largest(parity)],
        "large non-power-of-two case within tolerance":
            [f"{sum(bool(r['passed']) for r in affine.values())} / {len(affine)}"],
        "photo warps, max |difference|": [metrics["photo_max_abs_diff"]],
        **{name: [value] for name, value in (counts or {"speed goals": "none set"}).items()},
        "device": [metrics["device"]],
    }).T.rename(columns={0: "value"})


def _goals_met(metrics: Mapping[str, Any]) -> dict[str, list[bool]]:
    """Per kind of goal (per call, kernel, memory floor), whether each measured one is met, in
    the order of the record."""
    out: dict[str, list[bool]] = {}
    for row in metrics["speed"].values():
        for goal in row.get("goals", []):
            if goal["met"] is not None:
                out.setdefault(goal["goal"], []).append(bool(goal["met"]))
    return out


# ----------------------------------------------------------------------------- the conclusion, claim by claim


def parity_claim(metrics: Mapping[str, Any]) -> str:
    """Same numbers or not (:func:`parity_verdict`), in bold; then this project's C++ kernel's
    own parity (:func:`native_parity_verdict`), labelled, where the record has it."""
    native = native_parity_verdict(metrics)
    return f"**{parity_verdict(metrics).sentence}**" + (f" Judged apart: {native.sentence}" if native else "")


def photo_claim(metrics: Mapping[str, Any]) -> str:
    """The photograph's largest difference."""
    return f"The warped photograph differs by at most {words.fmt_number(metrics['photo_max_abs_diff'])} in any pixel."


def non_finite_claim(metrics: Mapping[str, Any]) -> str:
    """Non-finite grids: which rule JAX follows, and whether PyTorch's CPU backward crashed."""
    crashed = metrics["torch_cpu_nan_backward_returncode"] < 0
    return ("Non-finite grids follow PyTorch's CUDA rule on every path (finite output, zero gradient), where PyTorch's "
            "CPU kernels return NaN, clamp to different edges in 2-D and 3-D" + (", and crash in backward." if crashed
                                                                                else "."))


def speed_claim(metrics: Mapping[str, Any]) -> str:
    """The speed verdicts: what each framework gives its users first, then what a
    hand-written kernel buys, each labelled."""
    parts = []
    for v in speed_verdicts(metrics):
        label = ("What the frameworks give their users" if v.kind == "framework" and v.question.startswith("Which")
                 else "What a hand-written kernel buys" if v.kind == "custom" else "Inside one compiled program")
        parts.append(f"{label}: {v.sentence}")
    return f"**Speed on {metrics['device']}, {headline_key(metrics['speed'])}.** " + " ".join(parts)


#: The largest per-call gap put down to JAX's dispatch: it costs tens of microseconds a
#: call, so a gap of more than this is not dispatch alone.
DISPATCH_MS = 0.2


def _slower(row: Mapping[str, Any], kind: str) -> bool:
    """Whether PyTorch wins the speed verdict of this row's kernel or per-call time (JAX slower
    beyond noise and outside the noise floor)."""
    if kind == "kernel" and row.get("jax_kernel_ms") is None:
        return False
    found = verdict.speed(_timing(row, "torch", kind), _timing(row, "jax", kind), question="", race=f"slower/{kind}")
    return found.winner == "torch"


def slower_claim(metrics: Mapping[str, Any]) -> str:
    """Where JAX is slower beyond noise: by its kernel; only per call, by no more than
    dispatch costs; or only per call by more than that (the two measurements disagree, and
    no cause is named that the record does not measure)."""
    speed = metrics["speed"]
    slower_kernel = [k for k, r in speed.items() if _slower(r, "kernel")]
    call_only = [k for k, r in speed.items()
                 if _slower(r, "call") and k not in slower_kernel and r.get("jax_kernel_ms") is not None]
    dispatch_bound = [k for k in call_only if speed[k]["jax_ms"] - speed[k]["torch_ms"] <= DISPATCH_MS]
    unexplained = [k for k in call_only if k not in dispatch_bound]
    parts = []
    if slower_kernel:
        parts.append(f"JAX's kernel is slower than PyTorch's in {words.plural(len(slower_kernel), 'configuration')} "
                     f"of {len(speed)} ({', '.join(slower_kernel)})")
    if dispatch_bound:
        parts.append(f"In {words.plural(len(dispatch_bound), 'configuration')} ({', '.join(dispatch_bound)}) JAX's "
                     "kernel is not slower but its per-call time is, by at most "
                     f"{words.fmt_seconds(max(speed[k]['jax_ms'] - speed[k]['torch_ms'] for k in dispatch_bound) / 1e3)}"
                     ": there JAX's dispatch, not its kernel, sets the pace of a Python loop, and disappears inside a "
                     "larger jitted model")
    if unexplained:
        gap = max(speed[k]["jax_ms"] - speed[k]["torch_ms"] for k in unexplained)
        cause = ": the two measurements disagree there, and this run measures no cause, so it gives no verdict on them"
        parts.append(f"In {words.plural(len(unexplained), 'configuration')} ({', '.join(unexplained)}) JAX is "
                     f"slower per call but not inside one program, by up to {words.fmt_seconds(gap / 1e3)}, more "
                     f"than dispatch costs{cause}")
    return ". ".join(parts) + "." if parts else "JAX is not slower anywhere in this run."


def floor_claim(metrics: Mapping[str, Any]) -> str:
    """How close the kernels come to the memory floor at :func:`headline_key` (where the
    kernel times were measured): each side's share of the floor's speed."""
    key = headline_key(metrics["speed"])
    row = metrics["speed"][key]
    if row.get("jax_floor_speed") is None:
        return ""
    return (f"Against the memory floor (every array read or written once, at the {row['copy_gbs']:,.0f} GB/s of a "
            f"plain copy measured in the same run), JAX's kernel runs at {row['jax_floor_speed']:.0%} of the floor's "
            f"speed there and PyTorch's at {row['torch_floor_speed']:.0%}.")


def goals_claim(metrics: Mapping[str, Any]) -> str:
    """Where the goals set for this device are met, and which are missed, by name."""
    met = _goals_met(metrics)
    if not met:
        return ""
    missed = [f"{g['goal']} at {key} ({words.fmt_number(g['value'])} against {words.fmt_number(g['limit'])})"
              for key, row in metrics["speed"].items() for g in row.get("goals", []) if g["met"] is False]
    counts = ", ".join(f"{goal} {sum(values)} of {len(values)}" for goal, values in met.items())
    if not missed:
        return f"Every goal set for this device is met ({counts})."
    return f"Goals met: {counts}. Missed: {'; '.join(missed)}."


def device_claim(metrics: Mapping[str, Any]) -> str:
    """On a CPU run: where the GPU numbers will come from."""
    if metrics["device_kind"] == "gpu":
        return ""
    return ("These timings are from a CPU; the GPU kernels (Pallas) and the GPU goals are measured by the `gpu` "
            "profile.")


def conclusion(metrics: Mapping[str, Any]) -> str:
    """The post's Conclusion (Markdown, under its heading), from the record alone."""
    first = " ".join([parity_claim(metrics), photo_claim(metrics), non_finite_claim(metrics)])
    second = " ".join(filter(None, [speed_claim(metrics), floor_claim(metrics), slower_claim(metrics),
                                    goals_claim(metrics), device_claim(metrics)]))
    return first + "\n\n" + second
