"""Plan a GPU publication: split the GPU posts into device calls that fit a call's deadline, a window
and the plan's windows, from the device seconds measured (or derived) before.

A post's cost is the ``gpu_budget`` of its settings file (:func:`sidebyside.publish.discovery.read_gpu_budget`):
``budget_s`` (one run of the whole post), or ``parts`` in the order the notebook runs them (a name ending
in ``/*`` with ``each_s`` and ``count`` for a kind of part), ``measured`` and ``derivation`` (where each
figure comes from), ``rank`` (order of value to a reader, 1 first) and ``not_planned`` (why no GPU section
is planned). :data:`CALLS_FILE` holds what every call and run pay besides their parts and the limits: a
call's deadline, a window's seconds and calls, the windows of a plan, each post's limit and all of them
together; a budget over its limit is refused, naming what to cut (:func:`over_budget`).

One clock: a call counts from its start; a run in parts (``checkpoint_file`` and ``run_budget_s`` among its
gpu parameters) stops starting parts at ``run_budget_s`` from the call's start, so the planner cuts it into
runs that end by then and by the deadline. Parts in the committed checkpoint file count as done unless git
shows that what a run reads changed since the commit that measured them (:func:`_saved_parts`); git is
asked here, on the development machine, never on the box, which runs the fixed plan written from this one
(:mod:`sidebyside.publish.fixedplan`). A cost not given is estimated, and the plan says how. The runs are
packed into the fewest calls, then ordered into windows, the most valuable posts first.

This module imports neither PyTorch nor JAX.
"""

from __future__ import annotations

import dataclasses
import json
import math
import subprocess
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from sidebyside.publish.common import ROOT, PublishError
from sidebyside.run import colab

__all__ = ["gpu_sections", "LIMIT_S", "WINDOW_S", "MAX_CALLS", "CALLS_FILE", "RUN_READS", "Run", "Call", "Plan", "PlanRefused",
           "read_budgets", "runs_of", "pack", "plan_calls", "over_budget", "part_estimates"]

#: A device call's running (its deadline: DEADLINE_S of tools/device-run.sh), a window's running and its calls,
#: where params/gpu-calls.yaml does not say: a lent machine's 15 minutes less its starts, in calls of at most 10.
LIMIT_S = 480.0
WINDOW_S = 800.0
MAX_CALLS = 2
#: The file in params/ that holds what each GPU call and each run in parts pays besides its posts, and the limits.
CALLS_FILE = "gpu-calls.yaml"
#: What a run in parts reads besides its notebook's code, as git pathspecs from the project root: a saved part
#: measured at a commit where any of these differed is planned again (a part's key counts exactly the library
#: modules a kernel imports; this is wider, so a plan errs towards measuring again).
RUN_READS = ("src/sidebyside", ":(exclude)src/sidebyside/publish", "requirements*.txt")
#: The limits params/gpu-calls.yaml may give (seconds, or a count for max_calls).
_LIMITS = ("call_limit_s", "window_s", "max_calls", "post_limit_s", "total_limit_s", "windows")


class PlanRefused(PublishError):
    """The posts do not fit; the message says what to cut."""


@dataclasses.dataclass(frozen=True)
class Run:
    """One run of a post: ``seconds`` of device time, including its overhead.
    ``parts``: the parts it measures (empty for a post run whole); ``last``:
    whether it completes the post (and publishes it); ``deadline_s``: seconds
    from its call's start by which it must end (a run in parts: its ``run_budget_s``;
    None: the call's limit); ``estimated``: what of its cost is estimated, and how."""

    slug: str
    seconds: float
    parts: tuple[str, ...] = ()
    last: bool = True
    deadline_s: float | None = None
    estimated: tuple[str, ...] = ()


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
    not_planned: dict[str, str] = dataclasses.field(default_factory=dict)  # slug -> why no GPU section is planned

    @property
    def seconds(self) -> float:
        return sum(c.seconds for c in self.calls)


def gpu_sections(infos) -> set[str]:
    """The slugs of ``infos`` whose settings file plans a GPU section: a ``gpu_budget`` entry that does not say ``not_planned``
    (the posts the planner plans, and that owe a GPU run until one stands)."""
    return {i.slug for i in infos if i.gpu is not None and "not_planned" not in i.gpu}


def read_budgets(notebooks: Path = ROOT / "notebooks", params_dir: Path = ROOT / "params") -> dict[str, Any]:
    """The planner's table: ``posts`` (slug to its ``gpu_budget`` entry, for each notebook in
    ``notebooks`` that has one and does not say ``not_planned``), ``not_planned`` (slug to why, for
    those that do), ``notebooks`` (slug to its notebook's path), ``order`` (the ranked slugs, by rank),
    the overheads of :data:`CALLS_FILE` in ``params_dir`` and the limits it gives (``call_limit_s``,
    ``window_s``, ``max_calls``, ``post_limit_s``, ``post_calls``, ``total_limit_s``)."""
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
    wrong = [k for k in _LIMITS if k in overheads and not (isinstance(overheads[k], (int, float)) and overheads[k] > 0)]
    post_calls = overheads.get("post_calls") or {}
    if not (isinstance(post_calls, dict) and all(isinstance(v, int) and v > 0 for v in post_calls.values())):
        wrong.append("post_calls (slug: calls)")
    if wrong:
        raise PublishError(f"{calls_file}: {', '.join(wrong)} must be positive numbers")
    infos = [i for i in discover(notebooks) if i.gpu is not None]
    not_planned = {i.slug: i.gpu["not_planned"] for i in infos if "not_planned" in i.gpu}
    wrong = [f"{i.path}" for i in infos if i.slug in not_planned
             and not (isinstance(not_planned[i.slug], str) and not_planned[i.slug].strip())]
    if wrong:
        raise PublishError(f"{', '.join(wrong)}: its gpu_budget.not_planned must say, in a sentence, why no GPU "
                           "section of the post is planned (or be left out to plan one)")
    planned = gpu_sections(infos)
    infos = [i for i in infos if i.slug in planned]
    ranked = sorted((i for i in infos if i.gpu.get("rank") is not None), key=lambda i: i.gpu["rank"])
    return {"posts": {i.slug: dict(i.gpu) for i in infos}, "notebooks": {i.slug: i.path for i in infos},
            "order": [i.slug for i in ranked], "not_planned": not_planned,
            "call_overhead_s": overheads["call_overhead_s"], "run_overhead_s": overheads["run_overhead_s"],
            **{k: overheads[k] for k in _LIMITS if k in overheads}, "post_calls": dict(post_calls)}


def _declared(value: Any) -> float | None:
    """The seconds a budget gives one part (``each_s`` for a kind), None where it gives none."""
    cost = value.get("each_s") if isinstance(value, dict) else value
    return float(cost) if isinstance(cost, (int, float)) and not isinstance(cost, bool) else None


def _parts(slug: str, entry: Mapping[str, Any], saved: Mapping[str, float]) -> tuple[
        list[tuple[str, float | None, str]], list[str]]:
    """The parts still to measure, with their costs (None: not measured) and the budget's name for them,
    and those done. A part named in full is done when ``saved`` has it; of a kind given as ``kind/*``, as
    many are done as ``saved`` has names starting with ``kind/``, and a saved one's seconds stand in for
    an unmeasured cost."""
    todo: list[tuple[str, float | None, str]] = []
    done: list[str] = []
    for name, value in (entry.get("parts") or {}).items():
        name = str(name)
        if not name.endswith("/*"):
            if name in saved:
                done.append(name)
            else:
                todo.append((name, _declared(value), name))
            continue
        if not isinstance(value, dict) or not isinstance(value.get("count"), int):
            raise PublishError(f"{slug}: its gpu_budget gives {name} as {value!r}; a kind of parts "
                               "needs {each_s: <seconds or null>, count: <how many>}")
        kind = name[:-1]
        have = sorted(n for n in saved if n.startswith(kind))
        cost = _declared(value)
        if cost is None and have:
            cost = max(saved[n] for n in have)
        done += have[:value["count"]]
        todo += [(f"{kind}#{i + 1}", cost, name) for i in range(len(have), value["count"])]
    return todo, done


def _estimate(entry: Mapping[str, Any], todo: list[tuple[str, float | None, str]], saved: Mapping[str, float],
              room: float) -> tuple[list[tuple[str, float, str]], dict[str, str]]:
    """``todo`` with every unknown cost estimated (the module docstring says how), and what was estimated
    and how, per header name."""
    header = entry.get("parts") or {}
    unknown = list(dict.fromkeys(h for _, cost, h in todo if cost is None))
    guess: dict[str, tuple[float, str]] = {}
    for h in unknown:
        parent = (h[:-2] if h.endswith("/*") else h).rpartition("/")[0]
        if not parent:
            continue
        measured = [s for n, s in saved.items() if n.startswith(parent + "/")]
        declared = [c for n, v in header.items() if n != h and str(n).startswith(parent + "/")
                    and (c := _declared(v)) is not None]
        if measured:
            guess[h] = (max(measured), f"the largest part measured under {parent}/")
        elif declared:
            guess[h] = (max(declared), f"the largest part its budget declares under {parent}/")
    rest = [h for h in unknown if h not in guess]
    if rest:
        count = sum(1 for _, cost, h in todo if cost is None and h in rest)
        known = sum(_declared(v) * (v.get("count", 1) if isinstance(v, dict) else 1)
                    for v in header.values() if _declared(v) is not None)
        budget = entry.get("budget_s")
        share = (float(budget) - known) / count if isinstance(budget, (int, float)) and count else 0.0
        for h in rest:
            guess[h] = ((share, "its budget_s less the parts it declares, shared") if share > 0 else
                        (room, "nothing alike is known: a run of its own, the most a run holds"))
    notes = {h: f"{h} at {guess[h][0]:.0f} s{' each' if h.endswith('/*') else ''}, estimated from {guess[h][1]}"
             for h in unknown}
    return [(n, float(cost) if cost is not None else guess[h][0], h) for n, cost, h in todo], notes


def _saved_parts(checkpoint: Path | None, notebook: Path | None = None, root: Path = ROOT,
                 settings: str | None = None) -> dict[str, float]:
    """Parts in a checkpoint file that a run would read back, with their measured seconds ({} where there
    is no file): those whose commit git shows to differ from the working tree in ``notebook``'s code cells,
    :data:`RUN_READS` or the gpu profile of the post's ``settings`` file (relative to ``root``) are left out."""
    if checkpoint is None or not checkpoint.is_file():
        return {}
    try:
        saved = json.loads(checkpoint.read_text())
        parts = {name: (float(part["seconds"]), part.get("commit")) for name, part in saved.items()}
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise PublishError(f"{checkpoint} is not a checkpoint file a run wrote ({exc}); move it away to plan "
                           "every part again") from None
    changed = {commit: _changed_since(commit, notebook, root) or _gpu_settings_changed(commit, settings, root)
               for _, commit in parts.values()}
    return {name: seconds for name, (seconds, commit) in parts.items() if not changed[commit]}


def _gpu_settings_changed(commit: str | None, settings: str | None, root: Path) -> bool:
    """Whether the gpu profile of the ``settings`` file (relative to ``root``) differs between ``commit`` and
    the working tree; its budget, beside it in the same file, is not what a run reads (False where git
    cannot tell)."""
    if not commit or not settings:
        return False
    try:
        then = subprocess.run(["git", "-C", str(root), "show", f"{commit}:{settings}"], capture_output=True,
                              text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return False
    if then.returncode != 0:
        return False  # no checkout, a commit git lacks, or a file it did not have then
    path = Path(root) / settings
    try:
        now = yaml.safe_load(path.read_text(encoding="utf-8")) if path.is_file() else {}
        return (yaml.safe_load(then.stdout) or {}).get("gpu") != (now or {}).get("gpu")
    except (yaml.YAMLError, AttributeError):
        return True


def _changed_since(commit: str | None, notebook: Path | None, root: Path, reads: tuple[str, ...] = RUN_READS) -> bool:
    """Whether git shows the code cells of ``notebook`` (:func:`sidebyside.run.runkey.code_digest`: not its
    prose, tags or header) or the pathspecs ``reads`` changed between ``commit`` and the working tree (False
    where git cannot tell)."""
    from sidebyside.run import runkey

    if not commit or notebook is None:
        return False
    try:
        rel = Path(notebook).resolve().relative_to(Path(root).resolve())
        done = subprocess.run(["git", "-C", str(root), "diff", "--quiet", commit, "--", *reads],
                              capture_output=True, timeout=60)
        then = subprocess.run(["git", "-C", str(root), "show", f"{commit}:{rel.as_posix()}"],
                              capture_output=True, text=True, timeout=60)
    except (ValueError, OSError, subprocess.TimeoutExpired):
        return False
    if done.returncode not in (0, 1) or then.returncode != 0:
        return False  # a commit git lacks
    return done.returncode == 1 or runkey.code_digest(notebook, then.stdout) != runkey.code_digest(notebook)


def _group(slug: str, todo: list[tuple[str, float, str]], notes: Mapping[str, str], *, room: float,
           run_overhead_s: float, deadline_s: float | None) -> list[Run]:
    """``todo``'s parts, in order, in runs of at most ``room`` seconds of parts each (a longer part alone)."""
    runs: list[Run] = []
    group: list[tuple[str, float, str]] = []

    def close(last: bool) -> None:
        said = tuple(notes[h] for h in dict.fromkeys(h for _, _, h in group) if h in notes)
        runs.append(Run(slug, run_overhead_s + sum(c for _, c, _ in group), tuple(n for n, _, _ in group), last,
                        deadline_s, said))

    for part in todo:
        if group and sum(c for _, c, _ in group) + part[1] > room:
            close(False)
            group = []
        group.append(part)
    close(True)
    return runs


def _room(params: Mapping[str, Any], limit_s: float, call_overhead_s: float,
          run_overhead_s: float) -> tuple[float | None, float]:
    """A run in parts' deadline from its call's start (its ``run_budget_s``, at most the call's limit; None: the
    limit) and the seconds of parts it holds when it starts its call."""
    budget_s = float(params.get("run_budget_s") or 0)
    deadline = min(budget_s, limit_s) if budget_s else None
    return deadline, (deadline or limit_s) - call_overhead_s - run_overhead_s


def runs_of(slug: str, entry: Mapping[str, Any], params: Mapping[str, Any], *, root: Path = ROOT,
            run_overhead_s: float = 0.0, notebook: Path | None = None, limit_s: float = LIMIT_S,
            call_overhead_s: float = 0.0, post_limit_s: float | None = None) -> tuple[list[Run], list[str]]:
    """The runs that publish ``slug`` and the parts already done.

    A post without ``parts`` is one run of ``budget_s`` (not measured: estimated at the most a post
    may take, ``post_limit_s`` or a call's ``limit_s``, less the call's set-up). A run in parts
    skips the parts saved in its checkpoint file (``checkpoint_file`` of ``params``, under ``root``)
    that a run of ``notebook`` would read back (see :func:`_saved_parts`), estimates the parts with
    no cost (see the module docstring), then groups the rest, in order, into runs whose parts end
    by its deadline when the run starts its call: at most ``min(run_budget_s, limit_s)`` less
    ``call_overhead_s`` and ``run_overhead_s`` seconds of parts each, each costing ``run_overhead_s``
    more; the last run also reads the saved parts back and publishes, so a post whose parts are all
    done still takes one run. Refuses, saying what to do, a part that no run could finish before its
    call's deadline."""
    if not entry.get("parts"):
        budget = entry.get("budget_s")
        if budget is None:
            most = (post_limit_s or limit_s) - call_overhead_s
            return [Run(slug, most, estimated=(f"budget_s at {most:.0f} s, estimated as the most a post may take "
                                               "(not measured yet)",))], []
        return [Run(slug, float(budget))], []
    checkpoint = params.get("checkpoint_file")
    deadline, room = _room(params, limit_s, call_overhead_s, run_overhead_s)
    saved = _saved_parts(root / checkpoint if checkpoint else None, notebook, root,
                         settings=colab.SETTINGS.format(slug=slug))
    todo, done = _parts(slug, entry, saved)
    todo, notes = _estimate(entry, todo, saved, room)
    too_long = [f"{name} ({cost:.0f} s{', estimated' if header in notes else ''})" for name, cost, header in todo
                if cost > room]
    if too_long:
        raise PlanRefused(f"{slug}: {', '.join(too_long)} cannot finish before its call's deadline: a run of it holds at "
                          f"most {room:.0f} s of parts (run_budget_s {params.get('run_budget_s') or 'not set'}, at "
                          f"most the call's {limit_s:.0f} s, counted from the call's start, less {call_overhead_s:.0f} s "
                          f"of the call's set-up and {run_overhead_s:.0f} s of the run's own): shrink that part, or "
                          f"raise run_budget_s (gpu: in {colab.SETTINGS.format(slug=slug)}) up to the call's limit")
    return _group(slug, todo, notes, room=room, run_overhead_s=run_overhead_s, deadline_s=deadline), done


def part_estimates(slug: str, entry: Mapping[str, Any], params: Mapping[str, Any],
                   budgets: Mapping[str, Any]) -> dict[str, float]:
    """The seconds a GPU budget ``entry`` gives each of its parts or kinds (``kind/*``), those it leaves out
    estimated as a plan estimates them ({} for a post run whole): what a run in parts predicts a part by before
    anything alike was measured (:data:`sidebyside.run.checkpoints.ESTIMATES_ENV`). ``budgets``: the overheads
    and limits of :func:`read_budgets` (may be empty)."""
    if not entry.get("parts"):
        return {}
    _, room = _room(params, float(budgets.get("call_limit_s") or LIMIT_S), float(budgets.get("call_overhead_s") or 0),
                    float(budgets.get("run_overhead_s") or 0))
    todo, _ = _parts(slug, entry, {})
    todo, _ = _estimate(entry, todo, {}, room)
    return {header: cost for _, cost, header in todo}


def _fits(runs: list[Run], overhead_s: float, limit_s: float) -> bool:
    """Whether one call runs ``runs`` (in the order given, the earlier deadline first) with every run ended by
    its deadline and the call's limit, after ``overhead_s`` of set-up."""
    end = overhead_s
    for run in sorted(runs, key=lambda r: r.deadline_s or limit_s):
        end += run.seconds
        if end > min(run.deadline_s or limit_s, limit_s) + 1e-9:
            return False
    return True


def pack(runs: list[Run], *, limit_s: float = LIMIT_S, window_s: float = WINDOW_S, max_calls: int = MAX_CALLS,
         call_overhead_s: float = 0.0, arrange=None) -> list[Call] | None:
    """The fewest calls (at most ``max_calls``) that hold every run, each call
    at most ``limit_s`` and all at most ``window_s`` seconds with
    ``call_overhead_s`` per call; every run ends by its ``deadline_s`` (from its
    call's start), the runs of a call in order of deadline (:func:`_fits`); the runs
    of one post keep their order. ``arrange`` (optional) orders a packing's calls, or
    returns None to have the search go on (windows). None when no packing fits."""
    room = limit_s - call_overhead_s
    if not runs:
        return []
    if any(not _fits([r], call_overhead_s, limit_s) for r in runs):
        return None
    order = sorted(range(len(runs)), key=lambda i: -runs[i].seconds)
    # the k-th run of a post (in the order given) may not go to a call before its (k-1)-th run's call
    rank = {}
    for i, run in enumerate(runs):
        rank[i] = sum(1 for r in runs[:i] if r.slug == run.slug)
    for n_calls in range(1, max_calls + 1):
        if n_calls * call_overhead_s + sum(r.seconds for r in runs) > window_s:
            return None
        members: list[list[int]] = [[] for _ in range(n_calls)]
        where = [-1] * len(runs)

        def allowed(i: int, c: int) -> bool:
            for j, run in enumerate(runs):
                if where[j] >= 0 and run.slug == runs[i].slug and (
                        (rank[j] < rank[i] and where[j] > c) or (rank[j] > rank[i] and where[j] < c)):
                    return False
            return True

        def place(k: int) -> bool:
            if k == len(order):
                return arrange is None or arrange(calls_of(members)) is not None
            free = sum(room - sum(runs[j].seconds for j in m) for m in members)
            if sum(runs[i].seconds for i in order[k:]) > free:
                return False
            i = order[k]
            for c in range(n_calls):
                if not allowed(i, c) or not _fits([runs[j] for j in sorted([*members[c], i])], call_overhead_s,
                                                  limit_s):
                    continue
                members[c].append(i)
                where[i] = c
                if place(k + 1):
                    return True
                members[c].remove(i)
                where[i] = -1
            return False

        def calls_of(members: list[list[int]]) -> list[Call]:
            calls = [Call(sorted((runs[j] for j in sorted(m)), key=lambda r: r.deadline_s or limit_s), call_overhead_s)
                     for m in members]
            return [c for c in calls if c.runs]

        if place(0):
            return calls_of(members) if arrange is None else arrange(calls_of(members))
    return None


def _limits(budgets: Mapping[str, Any], limit_s: float | None, window_s: float | None, max_calls: int | None):
    return (float(limit_s or budgets.get("call_limit_s") or LIMIT_S), float(window_s or budgets.get("window_s") or WINDOW_S),
            int(max_calls or budgets.get("max_calls") or MAX_CALLS))


def plan_calls(budgets: Mapping[str, Any], params: Mapping[str, Mapping[str, Any]], slugs: list[str], *,
               root: Path = ROOT, limit_s: float | None = None, window_s: float | None = None,
               max_calls: int | None = None) -> Plan:
    """Plan the calls that publish ``slugs`` (see the module docstring), or
    raise :class:`PlanRefused` naming what to cut. The limits not given come from
    ``budgets`` (:func:`read_budgets`), else :data:`LIMIT_S`, :data:`WINDOW_S` and
    :data:`MAX_CALLS`. Where ``budgets`` gives ``post_limit_s``, the budgets of ``slugs``
    over their budget (:func:`over_budget`) are refused first; a slug whose budget says
    ``not_planned`` is refused, and the plan names every such post with its reason."""
    limit_s, window_s, max_calls = _limits(budgets, limit_s, window_s, max_calls)
    posts = budgets.get("posts") or {}
    order = [s for s in (budgets.get("order") or []) if s in slugs]
    slugs = order + [s for s in slugs if s not in order]
    not_planned = dict(budgets.get("not_planned") or {})
    unplanned = [f"{s} ({not_planned[s]})" for s in slugs if s in not_planned]
    if unplanned:
        raise PlanRefused(f"no GPU section is planned for {'; '.join(unplanned)}: its settings file says so "
                          "(gpu_budget.not_planned); remove that line to plan one")
    missing = [s for s in slugs if s not in posts]
    if missing:
        raise PlanRefused(f"no gpu budget for {', '.join(missing)} in params/<slug>.yaml (gpu_budget): a post that gains from a GPU "
                          "needs one (gpu_budget: {budget_s, measured}); one that does not should not be planned")
    if budgets.get("post_limit_s"):
        problems = over_budget(budgets, params, slugs)
        if problems:
            raise PlanRefused("the gpu budgets (params/<slug>.yaml) are over their limits (params/gpu-calls.yaml); "
                              "nothing is planned until they fit:\n  " + "\n  ".join(problems))
    call_overhead_s = float(budgets.get("call_overhead_s") or 0)
    run_overhead_s = float(budgets.get("run_overhead_s") or 0)
    runs: list[Run] = []
    done: dict[str, list[str]] = {}
    for slug in slugs:
        post_runs, done[slug] = runs_of(slug, posts[slug], params.get(slug) or {}, root=root,
                                        run_overhead_s=run_overhead_s, limit_s=limit_s,
                                        call_overhead_s=call_overhead_s, post_limit_s=budgets.get("post_limit_s"),
                                        notebook=(budgets.get("notebooks") or {}).get(slug))
        runs += post_runs
    windows = int(budgets.get("windows") or 1)
    total_s = min(float(budgets.get("total_limit_s") or window_s * windows), window_s * windows)
    sizes = dict(limit_s=limit_s, window_s=total_s, max_calls=max_calls * windows, call_overhead_s=call_overhead_s)
    rank = {s: i for i, s in enumerate(slugs)}

    from sidebyside.publish import fixedplan  # not at import: `python -m sidebyside.publish.fixedplan` on the box

    def arranged(calls: list[Call] | None) -> list[Call] | None:
        return None if calls is None else fixedplan.into_windows(calls, max_calls, window_s, rank)

    sizes["arrange"] = arranged
    for n in range(len(slugs), 1 if order else len(slugs) - 1, -1):  # all; else the most, in order, that fit
        calls = arranged(pack([r for r in runs if r.slug in slugs[:n]], **sizes))
        if calls is not None:
            return Plan(calls, limit_s, total_s, {s: done[s] for s in slugs[:n]}, not_planned)
    first = [r for r in runs if order and r.slug == order[0]]
    for n in range(len(first), 0, -1):
        head = first[:n - 1] + [dataclasses.replace(first[n - 1], last=first[n - 1].last and n == len(first))]
        calls = arranged(pack(head, **sizes))
        if calls is not None:
            return Plan(calls, limit_s, total_s, {order[0]: done[order[0]]}, not_planned)
    raise PlanRefused(_what_to_cut(runs, **sizes))


def over_budget(budgets: Mapping[str, Any], params: Mapping[str, Mapping[str, Any]],
                slugs: list[str] | None = None) -> list[str]:
    """What is over the limits of the budgets of ``slugs`` (default: every GPU post), one sentence
    each, naming what to cut (empty: nothing): each post must run, every part of it measured, in
    ``post_calls`` calls (1 unless named there) of at most ``post_limit_s`` seconds, set-up included; all
    of them in ``total_limit_s`` together (said only where cutting each post to its own limit is not
    enough). A post's need is its runs (as :func:`runs_of` makes them with a call of ``post_limit_s``,
    unknown costs estimated) and a set-up per call."""
    limit = float(budgets["post_limit_s"])
    setup, run_overhead = float(budgets.get("call_overhead_s") or 0), float(budgets.get("run_overhead_s") or 0)
    problems: list[str] = []
    needs: dict[str, tuple[float, float]] = {}  # slug -> (what it needs, what it may take)
    posts = budgets.get("posts") or {}
    for slug in posts if slugs is None else [s for s in slugs if s in posts]:
        entry = posts[slug]
        calls = int((budgets.get("post_calls") or {}).get(slug, 1))
        allowed = limit * calls
        if not entry.get("parts"):
            runs, _ = runs_of(slug, entry, {}, limit_s=limit, call_overhead_s=setup, post_limit_s=limit)
            need = setup + runs[0].seconds
            needs[slug] = (need, allowed)
            if need > limit:
                problems.append(f"{slug}: needs {need:,.0f} s (budget_s {runs[0].seconds:,.0f} s and {setup:,.0f} s of "
                                f"set-up), over the {limit:,.0f} s a post may take (set-up included): cut its settings "
                                f"until budget_s is at most {limit - setup:,.0f} s, or run it in parts")
            continue
        deadline, room = _room(params.get(slug) or {}, limit, setup, run_overhead)
        todo, _ = _parts(slug, entry, {})
        todo, notes = _estimate(entry, todo, {}, room)

        def need_of(kept: list[tuple[str, float, str]]) -> tuple[float, bool]:
            runs = _group(slug, kept, notes, room=room, run_overhead_s=run_overhead, deadline_s=deadline)
            packed = pack(runs, limit_s=limit, window_s=allowed, max_calls=calls, call_overhead_s=setup)
            seconds = sum(r.seconds for r in runs)
            n_calls = len(packed) if packed else max(1, math.ceil(seconds / max(limit - setup, 1.0)))
            return seconds + setup * n_calls, packed is not None

        need, fits = need_of(todo)
        needs[slug] = (need, allowed)
        if fits:
            continue
        kept = list(todo)
        cut: dict[str, list[float]] = {}
        for part in sorted(todo, key=lambda p: -p[1]):
            kept.remove(part)
            cut.setdefault(part[2], []).append(part[1])
            if need_of(kept)[1]:
                break
        counts = {h: (v.get("count", 1) if isinstance(v, dict) else 1) for h, v in entry["parts"].items()}
        said = [f"{h} ({len(c)} of {counts[h]}, {sum(c):,.0f} s)" if h.endswith("/*") else f"{h} ({sum(c):,.0f} s)"
                for h, c in cut.items()]
        estimated = f"; estimated: {'; '.join(notes.values())}" if notes else ""
        narrow = (f" (its run_budget_s, {deadline:,.0f} s from the call's start, allows no more: raising it up to "
                  f"{limit:,.0f} s puts more parts in a run)" if deadline and deadline < limit else "")
        problems.append(f"{slug}: needs {need:,.0f} s ({len(todo)} parts, {sum(p[1] for p in todo):,.0f} s, in runs of "
                        f"at most {room:,.0f} s of parts{narrow} with {run_overhead:,.0f} s each besides, and "
                        f"{setup:,.0f} s of set-up a call), over its {calls} call(s) of {limit:,.0f} s (set-up included): "
                        f"cut {', '.join(said)}, or shrink them; the rest, {need_of(kept)[0]:,.0f} s, fits{estimated}")
    total_limit = float(budgets.get("total_limit_s") or 0)
    total = sum(n for n, _ in needs.values())
    capped = sum(min(n, a) for n, a in needs.values())  # each post cut to its own limit, as said above
    if total_limit and capped > total_limit:
        listing = ", ".join(f"{s} {n:,.0f} s" for s, (n, _) in sorted(needs.items(), key=lambda kv: -kv[1][0]))
        said = (f"{'all GPU posts' if slugs is None or set(posts) <= set(slugs) else 'these posts'} together need "
                f"{total:,.0f} s, over the {total_limit:,.0f} s they may take in all ({listing})")
        if capped < total:
            said += f"; cut to their own limits they would still need {capped:,.0f} s"
        problems.append(said + f": cut {capped - total_limit:,.0f} s more, the largest first")
    return problems


def _what_to_cut(runs: list[Run], *, limit_s: float, window_s: float, max_calls: int, call_overhead_s: float,
                 arrange=None) -> str:
    total = sum(r.seconds for r in runs)
    per_post: dict[str, float] = {}
    for r in runs:
        per_post[r.slug] = per_post.get(r.slug, 0.0) + r.seconds
    lines = [f"the stale GPU posts need {total:.0f} device seconds ({len(runs)} runs); the window holds "
             f"{max_calls} calls of at most {limit_s:.0f} s ({call_overhead_s:.0f} s of each for set-up) and "
             f"{window_s:.0f} s in all"]
    for r in runs:
        if not _fits([r], call_overhead_s, limit_s):
            ends = min(r.deadline_s or limit_s, limit_s)
            lines.append(f"{r.slug}: one run takes {r.seconds:.0f} s, more than a call's {ends - call_overhead_s:.0f} s "
                         "after its set-up: run it in parts (checkpoint_file and run_budget_s under gpu: in "
                         f"{colab.SETTINGS.format(slug=r.slug)}) or cut its settings")
    kept = dict(sorted(per_post.items(), key=lambda kv: kv[1]))
    cut: list[str] = []
    while kept:
        rest = [r for r in runs if r.slug in kept]
        if pack(rest, limit_s=limit_s, window_s=window_s, max_calls=max_calls,
                call_overhead_s=call_overhead_s, arrange=arrange) is not None:
            break
        slug = max(kept, key=kept.get)
        cut.append(f"{slug} ({kept.pop(slug):.0f} s)")
    if cut and kept:
        lines.append(f"cut {' and '.join(cut)} from this window (plan them in another one, --only), or shorten "
                     f"them; the rest ({', '.join(kept)}) fits")
    elif cut:
        lines.append("no post fits on its own; cut their settings (gpu: in params/<slug>.yaml) or raise the limits")
    return "cannot fit: " + "\n  ".join(lines)

