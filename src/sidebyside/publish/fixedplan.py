"""A fixed GPU plan: the device calls decided on the development machine (which has git, so it can
tell a stale saved part from a current one), committed as ``gpu-runs/plan-<date>.json``, and run
exactly as written on a box that has no git and never plans.

The file holds the commit it was made at, :func:`tree_digest` of the tree it was made from, the
limits, and per call (numbered from 1, two calls a window) its runs: the post, its parts, their
seconds and whether the run completes the post. On the box ``tools/device-run.sh`` asks
:func:`main_call` for a call's runs: it refuses a plan made from another tree (the plan's idea of
which parts are done would not hold) and prints one line per run, the post and the parts that a
later call of the plan holds (:data:`sidebyside.run.checkpoints.LATER_ENV`): the run reads back
what earlier calls saved, measures its own parts and starts none of a later call's.

Imports neither PyTorch nor JAX, and needs no git on the box.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import itertools
import json
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

__all__ = [
    "PLANS",
    "READS",
    "tree_digest",
    "into_windows",
    "plan_document",
    "write_plan",
    "read_plan",
    "newest_plan",
    "call_runs",
    "main_call",
]

#: Where plans are committed, relative to the project root.
PLANS = "gpu-runs"
#: What a GPU run reads, relative to the project root (folders walked for source, settings and pins; the
#: publisher's own code left out: it decides nothing a part measures). The checkpoint files are not in it:
#: each call of a plan adds to them, and a part is read back only where its own key matches.
READS = (
    "src/sidebyside",
    "notebooks",
    "params",
    "requirements.txt",
    "requirements-gpu-cuda12.txt",
    "requirements-gpu-cuda13.txt",
)
_SUFFIXES = {".py", ".cc", ".yaml", ".txt"}


class PlanError(Exception):
    """A plan that cannot be run here; the message says what to do."""


def _files(root: Path) -> list[Path]:
    found = []
    for name in READS:
        path = root / name
        if path.is_file():
            found.append(path)
        elif path.is_dir():
            found += [
                p
                for p in path.rglob("*")
                if p.is_file()
                and p.suffix in _SUFFIXES
                and "__pycache__" not in p.parts
                and "publish" not in p.relative_to(root).parts[:3]
            ]
    return sorted(found)


def tree_digest(root: Path) -> str:
    """A digest of what a GPU run reads in the tree at ``root`` (:data:`READS`): the same on the
    development machine and on a box that got a copy of that tree, with or without git."""
    h = hashlib.sha256()
    for path in _files(Path(root)):
        h.update(path.relative_to(root).as_posix().encode() + b"\0")
        h.update(hashlib.sha256(path.read_bytes()).digest())
    return h.hexdigest()


def into_windows(
    calls: list, per_window: int, window_s: float, rank: Mapping[str, int]
) -> list | None:
    """``calls`` in the order they run: consecutive groups of ``per_window`` calls (a window) of at
    most ``window_s`` seconds each, the runs of a post in the order given (the planner's packing), the
    most valuable posts (lowest ``rank``) first; None where no order fits."""

    def sequence(ordered: list) -> dict[str, list[int]]:
        out: dict[str, list[int]] = {}
        for call in ordered:
            for run in call.runs:
                out.setdefault(run.slug, []).append(id(run))
        return out

    wanted = sequence(calls)
    best: tuple | None = None
    for order in itertools.permutations(range(len(calls))):
        ordered = [calls[i] for i in order]
        groups = [ordered[i : i + per_window] for i in range(0, len(ordered), per_window)]
        if sequence(ordered) != wanted or any(
            sum(c.seconds for c in g) > window_s + 1e-9 for g in groups
        ):
            continue
        score = tuple(min(rank.get(r.slug, len(rank)) for r in c.runs) for c in ordered)
        if best is None or score < best[0]:
            best = (score, ordered)
    return None if best is None else best[1]


def plan_document(
    plan, *, root: Path, commit: str, made: dt.date, calls_per_window: int
) -> dict[str, Any]:
    """The JSON document of ``plan`` (:class:`sidebyside.publish.schedule.Plan`)."""
    calls = []
    for n, call in enumerate(plan.calls, 1):
        runs = [
            {
                "slug": r.slug,
                "seconds": round(r.seconds, 1),
                "parts": list(r.parts),
                "last": r.last,
                "deadline_s": r.deadline_s,
                "estimated": list(r.estimated),
            }
            for r in call.runs
        ]
        calls.append(
            {
                "call": n,
                "window": (n - 1) // calls_per_window + 1,
                "seconds": round(call.seconds, 1),
                "overhead_s": call.overhead_s,
                "runs": runs,
            }
        )
    return {
        "made": made.isoformat(),
        "commit": commit,
        "tree": tree_digest(root),
        "limits": {
            "call_limit_s": plan.limit_s,
            "window_s": plan.window_s,
            "calls_per_window": calls_per_window,
        },
        "seconds": round(plan.seconds, 1),
        "calls": calls,
        "done": plan.done,
        "not_planned": plan.not_planned,
    }


def write_plan(document: dict[str, Any], root: Path) -> Path:
    """Write ``document`` as ``gpu-runs/plan-<made>.json`` under ``root`` and return its path."""
    from sidebyside.publish.common import write_atomic

    path = Path(root) / PLANS / f"plan-{document['made']}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, json.dumps(document, indent=2) + "\n")
    return path


def read_plan(path: Path) -> dict[str, Any]:
    """The plan at ``path``, checked for the fields a call needs, or :class:`PlanError`."""
    try:
        document = json.loads(Path(path).read_text(encoding="utf-8"))
        calls = document["calls"]
        if not (
            isinstance(document["tree"], str)
            and isinstance(document["commit"], str)
            and isinstance(calls, list)
        ):
            raise TypeError("tree, commit or calls")
        for call in calls:
            for run in call["runs"]:
                if not (isinstance(run["slug"], str) and isinstance(run["parts"], list)):
                    raise TypeError("a run's slug or parts")
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise PlanError(
            f"{path} is not a GPU plan that `publish plan --write` made ({exc}); make one on the "
            "development machine and commit it"
        ) from None
    return document


def newest_plan(root: Path) -> Path:
    """The newest committed plan under ``root`` (by its date), or :class:`PlanError`."""
    plans = sorted((Path(root) / PLANS).glob("plan-*.json"))
    if not plans:
        raise PlanError(
            f"no GPU plan in {Path(root) / PLANS}: make one on the development machine "
            "(python -m sidebyside.publish plan --all --write), commit it, and carry the tree"
        )
    return plans[-1]


def _later(document: dict[str, Any], call: int, slug: str) -> list[str]:
    """The parts of ``slug`` that calls after ``call`` hold (a part of a kind counted, ``kind/#n``,
    as ``kind/*`` where this call holds none of that kind)."""
    now = {
        p
        for c in document["calls"]
        if c["call"] <= call
        for r in c["runs"]
        if r["slug"] == slug
        for p in r["parts"]
    }
    kinds_now = {p.rpartition("#")[0] for p in now if "#" in p}
    later: list[str] = []
    for c in document["calls"]:
        if c["call"] <= call:
            continue
        for r in c["runs"]:
            if r["slug"] != slug:
                continue
            for part in r["parts"]:
                name = part if "#" not in part else part.rpartition("#")[0] + "*"
                if "#" in part and part.rpartition("#")[0] in kinds_now:
                    continue
                if part not in now and name not in later:
                    later.append(name)
    return later


def call_runs(document: dict[str, Any], call: int) -> list[tuple[str, list[str]]]:
    """The runs of ``call``, in order: (post, the parts later calls hold); [] where the plan has no
    such call."""
    for c in document["calls"]:
        if c["call"] == call:
            return [(r["slug"], _later(document, call, r["slug"])) for r in c["runs"]]
    return []


def main_call(argv: list[str] | None = None, root: Path | None = None) -> int:
    """``python -m sidebyside.publish.fixedplan CALL [PLAN]``: print the runs of call CALL of PLAN
    (default the newest committed plan), one a line, ``<slug> <later parts as JSON>``; exit 2 saying
    why where the plan cannot be run from this tree."""
    argv = sys.argv[1:] if argv is None else argv
    root = Path(root) if root is not None else Path.cwd()
    try:
        if not argv or not argv[0].isdigit():
            raise PlanError("usage: python -m sidebyside.publish.fixedplan CALL [PLAN]")
        path = Path(argv[1]) if len(argv) > 1 else newest_plan(root)
        document = read_plan(path)
        here = tree_digest(root)
        if here != document["tree"]:
            raise PlanError(
                f"{path} was made from another tree (commit {document['commit']}, tree "
                f"{document['tree'][:12]}; this one is {here[:12]}): what it counts as done may "
                "not be. "
                "Make the plan again on the development machine from this tree "
                "(python -m sidebyside.publish plan --all --write), commit it, and carry that tree"
            )
    except PlanError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    for slug, later in call_runs(document, int(argv[0])):
        print(slug, json.dumps(later, separators=(",", ":")))
    return 0


if __name__ == "__main__":
    sys.exit(main_call())
