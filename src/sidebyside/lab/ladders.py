"""The ladder of tools: each framework's rungs, best against best.

A ladder is a mapping ``"<framework>/<tool>" -> entry`` where an entry is a
timing entry of the one schema (:func:`sidebyside.lab.entry.read`), or
``error`` / ``not_applicable`` for a tool that failed or cannot run here
(:func:`ladder_entry`). :func:`best` picks each framework's fastest working
tool; :func:`ladder` compares best with best (:func:`sidebyside.lab.verdict.speed`)
and says what the rest of the ladder shows.

Inputs: ladder entries. Outputs: entries, sentences, a verdict.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from sidebyside.lab import verdict
from sidebyside.lab.entry import ENTRY_KEYS, read
from sidebyside.lab.framing import contestant, frame
from sidebyside.lab.words import fmt_ratio, fmt_seconds, plural
from sidebyside.lab.words import name as _name

__all__ = ["ladder_entry", "scaled", "split", "best", "relative", "IMPLEMENTATIONS", "slower_than_eager", "ladder"]


def _median(entry: Any) -> float:
    """The time a rung is ranked and printed by: :func:`sidebyside.lab.verdict.typical_s` (the
    statistic of the head verdict's times and factor)."""
    return verdict.typical_s(entry)


def ladder_entry(timing: Any = None, *, error: BaseException | str | None = None,
                 not_applicable: str | None = None) -> dict[str, Any]:
    """One ladder row for the results JSON: a timing entry of the one schema
    (:data:`sidebyside.lab.entry.ENTRY_KEYS`: ``median_s``, quartiles, ``compile_s``, ``first_s``,
    every process's median ``processes_s``, ``floor``, ``busy``), plus ``error`` (one line, or None)
    and ``not_applicable`` (why the tool cannot run on this machine, or None). A failed tool passes
    ``error=`` and no timing; a tool that does not apply, ``not_applicable=``."""
    empty = dict.fromkeys(ENTRY_KEYS)
    if error is not None:
        text = error if isinstance(error, str) else f"{type(error).__name__}: {error}"
        text = " ".join(str(text).split())[:300]
        return {**empty, "error": text, "not_applicable": None}
    if not_applicable is not None:
        return {**empty, "error": None, "not_applicable": " ".join(str(not_applicable).split())}
    return {**read(timing), "error": None, "not_applicable": None}


#: The fields of a timing entry that are per-call times (scaled by :func:`scaled`).
_TIMES = ("median_s", "iqr_s", "q1_s", "q3_s", "min_s")


def scaled(entries: Mapping[str, Mapping[str, Any]], factor: float) -> dict[str, dict[str, Any]]:
    """Ladder entries with their per-call times (each process's too) multiplied by ``factor``
    (e.g. steps per epoch over steps per timed call); compile times, errors and reasons are kept."""
    out = {}
    for name, entry in entries.items():
        e = dict(entry)
        for key in _TIMES:
            if e.get(key) is not None:
                e[key] = e[key] * factor
        if e.get("processes_s"):
            e["processes_s"] = [x * factor for x in e["processes_s"]]
        out[name] = e
    return out


def split(name: str) -> tuple[str, str]:
    """``"<framework>/<tool>"`` as ``(framework, tool)``; ValueError for any other name."""
    framework, sep, tool = name.partition("/")
    if not sep or not tool:
        raise ValueError(f"ladder names are '<framework>/<tool>', got {name!r}")
    return framework, tool


def _usable(entry: Any) -> bool:
    if isinstance(entry, Mapping):
        return not entry.get("error") and entry.get("median_s", entry.get("median")) is not None
    return entry is not None


def best(entries: Mapping[str, Any], frameworks: Sequence[str] = ("torch", "jax")) -> dict[str, Any]:
    """Each framework's fastest working tool by :func:`sidebyside.lab.verdict.typical_s`: ``{"torch": tool,
    "jax": tool, "ratio": torch_time / jax_time}`` (ratio > 1: JAX's best is faster).
    A framework whose every tool failed gets None (and the ratio is None)."""
    out: dict[str, Any] = {}
    medians: dict[str, float] = {}
    for framework in frameworks:
        candidates = [(_median(e), split(n)[1]) for n, e in entries.items()
                      if split(n)[0] == framework and _usable(e)]
        if candidates:
            medians[framework], out[framework] = min(candidates)
        else:
            out[framework] = None
    a, b = frameworks[0], frameworks[1]
    out["ratio"] = medians[a] / medians[b] if a in medians and b in medians else None
    return out


def relative(seconds: float, reference_s: float, reference: str, subject: str = "") -> str:
    """``seconds`` against ``reference_s`` as a factor >= 1: "2.7× the time of
    <reference>" or "1.5× faster than <reference>"; with a ``subject``, a clause
    with the verb that fits: "<subject> takes 2.7× the time of <reference>" or
    "<subject> is 1.5× faster than <reference>"."""
    if seconds >= reference_s:
        text, verb = f"{fmt_ratio(seconds / reference_s)} the time of {reference}", "takes"
    else:
        text, verb = f"{fmt_ratio(reference_s / seconds)} faster than {reference}", "is"
    return f"{subject} {verb} {text}" if subject else text


def _against(seconds: float, rival_s: float, rival: str) -> str:
    """How a rung compares with the rival's best, as a factor >= 1."""
    return relative(seconds, rival_s, f"{_name(rival)}'s best")


#: What does the work in a ladder rung, by tool, unless its entry names it (``implementation``).
IMPLEMENTATIONS = {
    ("torch", "eager"): "ATen's kernels, one launch per op from Python",
    ("torch", "device"): "ATen's kernels, one launch per op from Python",
    ("torch", "dataloader"): "ATen's kernels, batches from a DataLoader",
    ("torch", "compile"): "kernels Inductor generates",
    ("torch", "autograd"): "ATen's kernels, backward by autograd",
    ("torch", "func"): "torch.func transforms over ATen's kernels",
    ("torch", "cuda-graph"): "ATen's kernels replayed from a CUDA graph",
    ("torch", "cuda_graph"): "ATen's kernels replayed from a CUDA graph",
    ("jax", "jit"): "one program compiled by XLA",
    ("jax", "jit+scan"): "one XLA program looping over the steps",
    ("jax", "jit_scan"): "one XLA program looping over the steps",
    ("torch", "cuda-graph-steps"): "ATen's kernels for K steps replayed from one CUDA graph",
    ("torch", "compile+cuda-graphs"): "kernels Inductor generates, replayed from CUDA graphs",
    ("jax", "scan"): "one XLA program looping over the steps",
    ("jax", "eager"): "jnp ops dispatched one by one",
    ("numpy", "eager"): "NumPy's LAPACK/BLAS",
    ("scipy", "eager"): "SciPy's compiled routines",
}


def _contestant_of(name: str, entry: Any) -> dict[str, Any]:
    framework, tool = split(name)
    given = entry if isinstance(entry, Mapping) else {}
    implementation = given.get("implementation") or IMPLEMENTATIONS.get((framework, tool)) or next(
        (text for (fw, t), text in IMPLEMENTATIONS.items() if fw == framework and tool.startswith(t)),
        f"{_name(framework)}'s own ops")
    return contestant(framework, tool, implementation, origin=given.get("origin") or "framework")


def slower_than_eager(entries: Mapping[str, Any], framework: str = "torch") -> list[str]:
    """One sentence for each compiled rung of ``framework`` (a tool whose
    name holds "compile") that is slower than its eager rung, with the reason
    its entry measured: ``why`` (one line), or ``graph_breaks`` (the count
    ``torch._dynamo.explain`` reported). Without either the sentence says
    that no measurement in the run explains it."""
    eager = next((e for n, e in entries.items() if split(n) in ((framework, "eager"), (framework, "device"))
                  and _usable(e)), None)
    if eager is None:
        return []
    eager_s = _median(eager)
    out = []
    for name, entry in entries.items():
        fw, tool = split(name)
        if fw != framework or "compile" not in tool or not _usable(entry):
            continue
        seconds = _median(entry)
        if seconds <= eager_s:
            continue
        given = entry if isinstance(entry, Mapping) else {}
        if given.get("why"):
            why = given["why"]
        elif given.get("graph_breaks") is not None:
            breaks = int(given["graph_breaks"])
            why = (f"Dynamo split the step into {plural(breaks + 1, 'graph')} ({plural(breaks, 'graph break')}, "
                   "counted by torch._dynamo.explain), so Python runs between the compiled pieces and the "
                   "pieces cannot fuse across the breaks")
        else:
            why = "no measurement in this run explains it yet"
        out.append(f"{_name(framework)}'s {tool} is slower than its eager rung ({fmt_seconds(seconds)} against "
                   f"{fmt_seconds(eager_s)}): {why}.")
    return out


def ladder(entries: Mapping[str, Any], *, question: str, caveat: str = "",
           frameworks: Sequence[str] = ("torch", "jax"), scale: Mapping[str, Any] | None = None,
           against: Mapping[str, Any] | None = None, applied: Mapping[str, str | None] | None = None,
           kind: str = "framework", race: str = "") -> Any:
    """Best against best, then what the ladder shows.

    The sentence first compares each framework's fastest working tool (with
    the quartile test of :func:`speed`), then names the slowest working rung
    of each side against the other's best, explains each compiled rung slower
    than eager (:func:`slower_than_eager`), and lists every tool that failed.
    The contestants are the two best rungs (an entry may name its
    ``implementation`` and ``origin``; see :func:`contestant`). ``applied``:
    side key -> None where a precision setting took effect, or the reason it
    did not; any reason gives :func:`not_applied` instead of a race.
    ``scale``, ``against``, ``kind`` and ``race`` (the race's name, for its id) go to :func:`frame`.
    """
    a, b = frameworks
    if applied and any(applied.values()):
        return verdict.not_applied(question, applied, subject_name=a, other_name=b, scale=scale, race=race)
    chosen = best(entries, frameworks)
    failed = [f"{_name(split(n)[0])} {split(n)[1]} ({e.get('error')})" for n, e in entries.items()
              if isinstance(e, Mapping) and e.get("error")]
    absent = [f"{_name(split(n)[0])} {split(n)[1]} ({e.get('not_applicable')})" for n, e in entries.items()
              if isinstance(e, Mapping) and e.get("not_applicable") and not e.get("error")]
    if chosen[a] is None or chosen[b] is None:
        missing = a if chosen[a] is None else b
        sentence = (f"No {_name(missing)} tool ran, so there is no comparison: " + "; ".join(failed + absent) + ".")
        v = verdict.Verdict(question=question, label="no comparison", sentence=sentence, test="none",
                    subject=a, other=b, winner=None, caveat=caveat)
        return frame(v, scale=scale, against=against, kind=kind, race=race)
    names = {side: f"{side}/{chosen[side]}" for side in (a, b)}
    head = verdict.speed(entries[names[a]], entries[names[b]], question=question,
                 subject_name=a, other_name=b, subject_tool=chosen[a], other_tool=chosen[b],
                 contestants={side: _contestant_of(names[side], entries[names[side]]) for side in (a, b)},
                 scale=scale, kind=kind, race=race)
    parts = [f"Best against best: {head.sentence}"]
    for side, rival in ((a, b), (b, a)):
        working = [(_median(e), split(n)[1]) for n, e in entries.items()
                   if split(n)[0] == side and _usable(e)]
        if len(working) < 2:
            continue
        slowest_s, slowest = max(working)
        fastest_s, fastest = min(working)
        rival_s = _median(entries[f"{rival}/{chosen[rival]}"])
        parts.append(f"{_name(side)}'s ladder runs from {slowest} ({_against(slowest_s, rival_s, rival)}) to "
                     f"{fastest} ({_against(fastest_s, rival_s, rival)}).")
    for side in (a, b):
        parts.extend(slower_than_eager(entries, side))
    if failed:
        parts.append("Failed, kept as findings: " + "; ".join(failed) + ".")
    if absent:
        parts.append("Not applicable on this machine: " + "; ".join(absent) + ".")
    if caveat:
        parts.append(caveat)
    head.sentence = " ".join(parts)
    head.caveat = f"{caveat} {head.caveat}".strip()
    return frame(head, against=against, kind=kind, race=race)
