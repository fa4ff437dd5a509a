"""Plan a GPU publication: split the stale GPU posts into device calls that fit
a per-call limit and a window, from the device seconds measured before.

A post's cost is its notebook's header entry ``gpu`` (a post without one does
not run on a GPU; :class:`sidebyside.publish.discovery.NotebookInfo`):

- ``budget_s``: the device seconds of one run of the whole post, as measured
  (``null``: not measured yet; such a post cannot be planned);
- ``parts`` (runs in parts only, see :mod:`sidebyside.run.checkpoints`): the
  measured seconds of each part, a list in the order the notebook runs them
  (``[{parity: 120}, ...]``); a name ending in ``/*`` gives the cost of each
  part of that kind, and ``count`` how many there are (``{each_s: 57, count: 12}``);
- ``measured``: where the numbers come from (commit, device);
- ``rank`` (optional): the order of value to a reader in which the GPU runs are owed (1
  first); unranked posts follow in the notebooks' order. When the stale posts do not all
  fit a window, the first ranked one is planned alone: whole where it fits, else its
  longest first runs that fit (a post in parts: the rest goes on in a later window, from
  its committed checkpoint file).

:data:`CALLS_FILE` (``params/gpu-calls.yaml``) holds what every call pays:
``call_overhead_s`` (a call's set-up: install, GPU check) and ``run_overhead_s``
(what a run in parts spends besides its parts: kernel start, imports, data, report),
added where they are paid.

A post is one run, whole, in one call. A run in parts (``checkpoint_file``
and ``run_budget_s`` among its gpu parameters) is cut into runs of at most
``run_budget_s`` seconds of parts each, as the notebook stops itself; parts
already in the committed checkpoint file count as done, unless git shows that
what a run reads (:data:`RUN_READS`: the notebook, the library outside the
publisher, the gpu parameters, the pins) changed since the commit that measured
them: such a part is measured again, so it is planned again. Where git cannot
tell (no checkout, as on an air-gapped box, or a commit it lacks) a saved part
counts as done, and the plan may be optimistic. The runs are
then packed into at most ``max_calls`` calls of at most ``limit_s`` seconds
each and ``window_s`` in all; :class:`PlanRefused` says what does not fit and
what to cut.

This module imports neither PyTorch nor JAX.
"""

from __future__ import annotations

import dataclasses
import json
import subprocess
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from sidebyside.publish.common import ROOT, PublishError

__all__ = ["LIMIT_S", "WINDOW_S", "MAX_CALLS", "CALLS_FILE", "RUN_READS", "Run", "Call", "Plan", "PlanRefused", "read_budgets", "runs_of",
           "pack", "plan_calls", "stale_gpu_posts", "format_plan"]

#: A device call's limit (9 of a lent machine's 10 minutes), the window (25 of a session's 30) and the calls in it.
LIMIT_S = 540.0
WINDOW_S = 1500.0
MAX_CALLS = 3
#: The file in params/ that holds what each GPU call and each run in parts pays besides its posts.
CALLS_FILE = "gpu-calls.yaml"
#: What a run in parts reads besides its notebook, as git pathspecs from the project root: a saved part
#: measured at a commit where any of these differed is planned again (the run key counts exactly the
#: library modules a kernel imports; this is wider, so a plan errs towards measuring again).
RUN_READS = ("src/sidebyside", ":(exclude)src/sidebyside/publish", "params/gpu.yaml", "requirements*.txt")


class PlanRefused(PublishError):
    """The posts do not fit; the message says what to cut."""


@dataclasses.dataclass(frozen=True)
class Run:
    """One run of a post: ``seconds`` of device time, including its overhead.
    ``parts``: the parts it measures (empty for a post run whole); ``last``:
    whether it completes the post (and publishes it)."""

    slug: str
    seconds: float
    parts: tuple[str, ...] = ()
    last: bool = True


@dataclasses.dataclass
class Call:
    runs: list[Run]
    overhead_s: float

    @property
    def seconds(self) -> float:
        return self.overhead_s + sum(r.seconds for r in self.runs)

    @property
    def slugs(self) -> list[str]:
        """The posts to run in this call, in order, once per run."""
        return [r.slug for r in self.runs]


@dataclasses.dataclass
class Plan:
    calls: list[Call]
    limit_s: float
    window_s: float
    done: dict[str, list[str]]  # slug -> parts read back from committed checkpoints

    @property
    def seconds(self) -> float:
        return sum(c.seconds for c in self.calls)


def read_budgets(notebooks: Path = ROOT / "notebooks", params_dir: Path = ROOT / "params") -> dict[str, Any]:
    """The planner's table: ``posts`` (slug to its header's ``gpu`` entry, for each notebook in
    ``notebooks`` that has one), ``notebooks`` (slug to its notebook's path), ``order`` (the ranked
    slugs, by rank) and the overheads of
    :data:`CALLS_FILE` in ``params_dir``."""
    from sidebyside.publish.discovery import discover

    calls_file = Path(params_dir) / CALLS_FILE
    try:
        overheads = yaml.safe_load(calls_file.read_text(encoding="utf-8")) or {}
    except (OSError, yaml.YAMLError) as exc:
        raise PublishError(f"{calls_file} cannot be read ({exc}); it holds call_overhead_s and run_overhead_s, the "
                           "seconds a GPU call and a run in parts spend besides the posts") from exc
    missing = [k for k in ("call_overhead_s", "run_overhead_s") if not isinstance(overheads.get(k), (int, float))]
    if missing:
        raise PublishError(f"{calls_file}: give {' and '.join(missing)} in seconds")
    infos = [i for i in discover(notebooks) if i.gpu is not None]
    ranked = sorted((i for i in infos if i.gpu.get("rank") is not None), key=lambda i: i.gpu["rank"])
    return {"posts": {i.slug: dict(i.gpu) for i in infos}, "notebooks": {i.slug: i.path for i in infos},
            "order": [i.slug for i in ranked],
            "call_overhead_s": overheads["call_overhead_s"], "run_overhead_s": overheads["run_overhead_s"]}


def _parts(slug: str, entry: Mapping[str, Any], saved: Mapping[str, float]) -> tuple[
        list[tuple[str, float | None]], list[str]]:
    """The parts still to measure, with their costs (None: not measured), and those done. A part named
    in full is done when ``saved`` has it; of a kind given as ``kind/*``, as many are done as ``saved``
    has names starting with ``kind/``, and a saved one's seconds stand in for an unmeasured cost."""
    todo: list[tuple[str, float | None]] = []
    done: list[str] = []
    for name, value in (entry.get("parts") or {}).items():
        name = str(name)
        if not name.endswith("/*"):
            if name in saved:
                done.append(name)
            else:
                todo.append((name, value))
            continue
        if not isinstance(value, dict) or not isinstance(value.get("count"), int):
            raise PublishError(f"{slug}: the gpu budget in its notebook's header gives {name} as {value!r}; a kind of parts "
                               "needs {each_s: <seconds or null>, count: <how many>}")
        kind = name[:-1]
        have = sorted(n for n in saved if n.startswith(kind))
        cost = value.get("each_s")
        if cost is None and have:
            cost = max(saved[n] for n in have)
        done += have[:value["count"]]
        todo += [(f"{kind}#{i + 1}", cost) for i in range(len(have), value["count"])]
    return todo, done


def _saved_parts(checkpoint: Path | None, notebook: Path | None = None, root: Path = ROOT) -> dict[str, float]:
    """Parts in a checkpoint file that a run would read back, with their measured seconds ({} where there
    is no file): those whose commit git shows to differ from the working tree in ``notebook`` or
    :data:`RUN_READS` are left out."""
    if checkpoint is None or not checkpoint.is_file():
        return {}
    try:
        saved = json.loads(checkpoint.read_text())
        parts = {name: (float(part["seconds"]), part.get("commit")) for name, part in saved.items()}
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise PublishError(f"{checkpoint} is not a checkpoint file a run wrote ({exc}); move it away to plan "
                           "every part again") from None
    changed = {commit: _changed_since(commit, notebook, root) for _, commit in parts.values()}
    return {name: seconds for name, (seconds, commit) in parts.items() if not changed[commit]}


def _changed_since(commit: str | None, notebook: Path | None, root: Path) -> bool:
    """Whether git shows ``notebook`` or :data:`RUN_READS` changed between ``commit`` and the working tree
    (False where git cannot tell)."""
    if not commit or notebook is None:
        return False
    try:
        rel = Path(notebook).resolve().relative_to(Path(root).resolve())
        done = subprocess.run(["git", "-C", str(root), "diff", "--quiet", commit, "--", str(rel), *RUN_READS],
                              capture_output=True, timeout=60)
    except (ValueError, OSError, subprocess.TimeoutExpired):
        return False
    return done.returncode == 1


def runs_of(slug: str, entry: Mapping[str, Any], params: Mapping[str, Any], *, root: Path = ROOT,
            run_overhead_s: float = 0.0, notebook: Path | None = None) -> tuple[list[Run], list[str]]:
    """The runs that publish ``slug`` and the parts already done.

    A post without ``parts`` is one run of ``budget_s``. A run in parts
    skips the parts saved in its checkpoint file (``checkpoint_file`` of
    ``params``, under ``root``) that a run of ``notebook`` would read back (see
    :func:`_saved_parts`), then groups the rest, in order, into runs of
    at most ``run_budget_s`` seconds of parts, each costing ``run_overhead_s``
    more; the last run also reads the saved parts back and publishes, so a
    post whose parts are all done still takes one run. Refuses, saying what
    to do, a post with a cost not measured or a part longer than
    ``run_budget_s``."""
    if not entry.get("parts"):
        budget = entry.get("budget_s")
        if budget is None:
            raise PlanRefused(f"{slug}: no measured cost (gpu.budget_s is null in its notebook's header): run it alone in a "
                              f"call of its own (tools/device-run.sh {slug}), then record the seconds its "
                              "timings.log gives as gpu.budget_s in its notebook's header")
        return [Run(slug, float(budget))], []
    checkpoint = params.get("checkpoint_file")
    budget_s = float(params.get("run_budget_s") or 0)
    todo, done = _parts(slug, entry, _saved_parts(root / checkpoint if checkpoint else None, notebook, root))
    unmeasured = [name for name, cost in todo if cost is None]
    if unmeasured:
        raise PlanRefused(f"{slug}: no measured cost for {len(unmeasured)} part(s) ({', '.join(unmeasured)}): "
                          f"give them under gpu.parts in its notebook's header from a measured run (checkpoints/"
                          f"{slug}.json keeps each part's seconds once a run measured it)")
    todo = [(name, float(cost)) for name, cost in todo]
    too_long = [f"{name} ({cost:.0f} s)" for name, cost in todo if budget_s and cost > budget_s]
    if too_long:
        raise PlanRefused(f"{slug}: {', '.join(too_long)} takes longer than its run_budget_s ({budget_s:.0f} s), "
                          "so no run could measure it: raise run_budget_s or shrink that part")
    runs: list[Run] = []
    group: list[tuple[str, float]] = []
    for name, cost in todo:
        if group and budget_s and sum(c for _, c in group) + cost > budget_s:
            runs.append(Run(slug, run_overhead_s + sum(c for _, c in group), tuple(n for n, _ in group), False))
            group = []
        group.append((name, cost))
    runs.append(Run(slug, run_overhead_s + sum(c for _, c in group), tuple(n for n, _ in group), True))
    return runs, done


def pack(runs: list[Run], *, limit_s: float = LIMIT_S, window_s: float = WINDOW_S, max_calls: int = MAX_CALLS,
         call_overhead_s: float = 0.0) -> list[Call] | None:
    """The fewest calls (at most ``max_calls``) that hold every run, each call
    at most ``limit_s`` and all at most ``window_s`` seconds with
    ``call_overhead_s`` per call; the runs of one post keep their order. None
    when no packing fits."""
    room = limit_s - call_overhead_s
    if not runs:
        return []
    if any(r.seconds > room for r in runs):
        return None
    order = sorted(range(len(runs)), key=lambda i: -runs[i].seconds)
    # the k-th run of a post (in the order given) may not go to a call before its (k-1)-th run's call
    rank = {}
    for i, run in enumerate(runs):
        rank[i] = sum(1 for r in runs[:i] if r.slug == run.slug)
    for n_calls in range(1, max_calls + 1):
        if n_calls * call_overhead_s + sum(r.seconds for r in runs) > window_s:
            return None
        loads = [0.0] * n_calls
        where = [-1] * len(runs)

        def allowed(i: int, c: int) -> bool:
            for j, run in enumerate(runs):
                if where[j] >= 0 and run.slug == runs[i].slug and (
                        (rank[j] < rank[i] and where[j] > c) or (rank[j] > rank[i] and where[j] < c)):
                    return False
            return True

        def place(k: int) -> bool:
            if k == len(order):
                return True
            if sum(runs[i].seconds for i in order[k:]) > sum(room - load for load in loads):
                return False
            i = order[k]
            for c in range(n_calls):
                if loads[c] + runs[i].seconds > room or not allowed(i, c):
                    continue
                loads[c] += runs[i].seconds
                where[i] = c
                if place(k + 1):
                    return True
                loads[c] -= runs[i].seconds
                where[i] = -1
            return False

        if place(0):
            calls = [Call([runs[i] for i in range(len(runs)) if where[i] == c], call_overhead_s)
                     for c in range(n_calls)]
            return [c for c in calls if c.runs]
    return None


def plan_calls(budgets: Mapping[str, Any], params: Mapping[str, Mapping[str, Any]], slugs: list[str], *,
               root: Path = ROOT, limit_s: float = LIMIT_S, window_s: float = WINDOW_S,
               max_calls: int = MAX_CALLS) -> Plan:
    """Plan the calls that publish ``slugs`` (see the module docstring), or
    raise :class:`PlanRefused` naming what to cut."""
    posts = budgets.get("posts") or {}
    order = [s for s in (budgets.get("order") or []) if s in slugs]
    slugs = order + [s for s in slugs if s not in order]
    missing = [s for s in slugs if s not in posts]
    if missing:
        raise PlanRefused(f"no gpu budget for {', '.join(missing)} in its notebook's header: a post that gains from a GPU "
                          "needs one (gpu: {budget_s, measured}); one that does not should not be planned")
    call_overhead_s = float(budgets.get("call_overhead_s") or 0)
    run_overhead_s = float(budgets.get("run_overhead_s") or 0)
    runs: list[Run] = []
    done: dict[str, list[str]] = {}
    for slug in slugs:
        post_runs, done[slug] = runs_of(slug, posts[slug], params.get(slug) or {}, root=root,
                                        run_overhead_s=run_overhead_s,
                                        notebook=(budgets.get("notebooks") or {}).get(slug))
        runs += post_runs
    calls = pack(runs, limit_s=limit_s, window_s=window_s, max_calls=max_calls, call_overhead_s=call_overhead_s)
    if calls is not None:
        return Plan(calls, limit_s, window_s, done)
    first = [r for r in runs if order and r.slug == order[0]]
    for n in range(len(first), 0, -1):
        head = first[:n - 1] + [dataclasses.replace(first[n - 1], last=first[n - 1].last and n == len(first))]
        calls = pack(head, limit_s=limit_s, window_s=window_s, max_calls=max_calls, call_overhead_s=call_overhead_s)
        if calls is not None:
            return Plan(calls, limit_s, window_s, {order[0]: done[order[0]]})
    raise PlanRefused(_what_to_cut(runs, limit_s=limit_s, window_s=window_s, max_calls=max_calls,
                                   call_overhead_s=call_overhead_s))


def _what_to_cut(runs: list[Run], *, limit_s: float, window_s: float, max_calls: int, call_overhead_s: float) -> str:
    room = limit_s - call_overhead_s
    total = sum(r.seconds for r in runs)
    per_post: dict[str, float] = {}
    for r in runs:
        per_post[r.slug] = per_post.get(r.slug, 0.0) + r.seconds
    lines = [f"the stale GPU posts need {total:.0f} device seconds ({len(runs)} runs); the window holds "
             f"{max_calls} calls of at most {limit_s:.0f} s ({call_overhead_s:.0f} s of each for set-up) and "
             f"{window_s:.0f} s in all"]
    for r in runs:
        if r.seconds > room:
            lines.append(f"{r.slug}: one run takes {r.seconds:.0f} s, more than a call's {room:.0f} s: run it in "
                         "parts (checkpoint_file and run_budget_s in params/gpu.yaml) or cut its settings")
    kept = dict(sorted(per_post.items(), key=lambda kv: kv[1]))
    cut: list[str] = []
    while kept:
        rest = [r for r in runs if r.slug in kept]
        if pack(rest, limit_s=limit_s, window_s=window_s, max_calls=max_calls,
                call_overhead_s=call_overhead_s) is not None:
            break
        slug = max(kept, key=kept.get)
        cut.append(f"{slug} ({kept.pop(slug):.0f} s)")
    if cut and kept:
        lines.append(f"cut {' and '.join(cut)} from this window (plan them in another one, --only), or shorten "
                     f"them; the rest ({', '.join(kept)}) fits")
    elif cut:
        lines.append("no post fits on its own; cut their settings (params/gpu.yaml) or raise the limits")
    return "cannot fit: " + "\n  ".join(lines)


def stale_gpu_posts(budgets: Mapping[str, Any], *, site: Path = ROOT, notebooks: Path = ROOT / "notebooks",
                    params_dir: Path = ROOT / "params", root: Path = ROOT, everything: bool = False,
                    only: str | None = None) -> tuple[list[str], dict[str, dict[str, Any]]]:
    """The GPU posts (those with a ``gpu`` budget in their header) whose gpu result is not
    current (all of them with ``everything``: one commit for every post), ranked ones first,
    and their gpu parameters."""
    from sidebyside.publish.cache import plan as decide
    from sidebyside.publish.discovery import discover, select
    from sidebyside.publish.params import load_all_params

    infos = discover(notebooks)
    params = load_all_params(params_dir, infos)
    if "gpu" not in params:
        raise PublishError(f"{params_dir / 'gpu.yaml'} is missing")
    gpu_infos = [i for i in select(infos, only) if i.slug in (budgets.get("posts") or {})]
    decisions = decide(gpu_infos, "gpu", params, site, force=everything, root=root)
    stale = [d.info.slug for d in decisions if d.action == "run"]
    order = [s for s in (budgets.get("order") or []) if s in stale]
    return order + [s for s in stale if s not in order], params["gpu"]


def format_plan(plan: Plan) -> str:
    """The plan, one line per call and run."""
    if not plan.calls:
        return "nothing to run: every GPU post is current"
    lines = [f"{len(plan.calls)} call(s), {plan.seconds:.0f} of {plan.window_s:.0f} device seconds "
             f"(each call at most {plan.limit_s:.0f} s):"]
    for n, call in enumerate(plan.calls, 1):
        lines.append(f"  call {n}: {call.seconds:.0f} s ({call.overhead_s:.0f} s set-up): "
                     f"CALL={n} tools/device-run.sh")
        for k, run in enumerate(call.runs):
            what = f"parts {', '.join(run.parts)}" if run.parts else "the whole post"
            if run.last:
                what += " (publishes)"
            elif all(r.slug != run.slug for r in call.runs[k + 1:]):
                what += "; goes on in a later call: merge this call's archive, then plan and run the next call"
            lines.append(f"    {run.slug}: {run.seconds:.0f} s, {what}")
    for slug, parts in plan.done.items():
        if parts:
            lines.append(f"  {slug}: {len(parts)} part(s) read back from committed checkpoints: {', '.join(parts)}")
    return "\n".join(lines)
