"""A run in parts: a lent GPU allows ten minutes a command and thirty a
session, and the gpu profile of grid-sample-parity or of Swin V2 needs more. :class:`Checkpoints`
saves each expensive part of a notebook run (a parity table, a seed's training, a speed setting, a
benchmark configuration) to one JSON file as it finishes; a run stops before a part that would
pass its time budget, and a later run reads back the parts whose inputs are the same, also from
an earlier commit or session. A part's inputs are:

- its name and arguments;
- the ``stamp`` the notebook gives: the device and the libraries' versions (the provenance record
  *without* its commit), and what the notebook derived from its parameters;
- the run's own inputs, as the publisher's cache key counts them (:mod:`sidebyside.run.runkey`): the
  source of every library module imported and every data file read when the :class:`Checkpoints`
  is made (make it after the notebook's imports and data loading, so that every run has the same
  list there), the notebook's source, its parameters for the profile and the pinned
  requirements. A notebook run by hand (no run context) cannot name its notebook: there the
  commit counts instead.

So a part is read back exactly when measuring it again would run the same code on the same machine
and libraries with the same arguments; a commit that changed none of that (a post published,
another notebook edited) keeps finished GPU work. Each saved part keeps the commit that measured
it, and :func:`describe_parts` says in the post which commit measured which part.

This module imports neither PyTorch nor JAX.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from sidebyside.run import context, runkey

__all__ = ["BudgetSpent", "Checkpoints", "run_inputs", "describe_parts"]


class BudgetSpent(RuntimeError):
    """A run stopped before a part that would not fit in its time budget; what finished is saved."""


def run_inputs(commit: str | None = None) -> dict[str, Any]:
    """What every part of this run depends on besides its arguments and the notebook's stamp: the
    modules and data files read so far, and the inputs the publisher declared in the run context
    (:func:`sidebyside.run.runkey.declared_inputs`). A run by hand, with no context, counts ``commit``."""
    ctx = context.current()
    out: dict[str, Any] = {"recorded": runkey.recorded(runkey.project_root())}
    if ctx.inputs is None:
        out["commit"] = commit
        return out
    return {**out, **ctx.inputs}


class Checkpoints:
    """The expensive parts of a run, saved to one JSON file as each finishes.

    ``path``: the file ("" or None: off, every part is computed and nothing is saved).
    ``budget_s``: seconds (from this object's creation) past which no part may be expected to end:
    a part whose predicted cost (:meth:`predicted_s`) would take the run past it does not start,
    and :class:`BudgetSpent` says so; 0: no budget.
    ``stamp``: what the notebook adds to every part's key (the provenance record without its
    commit, and what it derived from its parameters); :func:`run_inputs` is added to it.
    ``commit``: the commit of this run, saved with each part it measures (not part of the key).
    ``log`` says, per part, whether this run measured it or read it back, its cost in seconds and
    the commit it was measured at.
    """

    def __init__(self, path: str | os.PathLike | None = None, *, budget_s: float = 0.0,
                 stamp: dict[str, Any] | None = None, commit: str | None = None,
                 clock: Callable[[], float] = time.monotonic):
        self.path = Path(path) if path else None
        self.budget_s = float(budget_s or 0.0)
        self.clock = clock
        self.start = clock()
        self.commit = commit
        self.stamp = {**(stamp or {}), "inputs": run_inputs(commit)} if self.path is not None else {}
        self.saved: dict[str, Any] = {}
        if self.path is not None and self.path.is_file():
            try:
                self.saved = json.loads(self.path.read_text())
            except json.JSONDecodeError as err:
                raise ValueError(f"{self.path} is not a checkpoint file a run wrote ({err}); move it away to "
                                 f"measure every part again") from None
        self.log: dict[str, dict[str, Any]] = {}

    def _key(self, name: str, args: tuple, kwargs: dict) -> str:
        text = json.dumps({"name": name, "args": args, "kwargs": kwargs, "stamp": self.stamp},
                          sort_keys=True, default=repr)
        return hashlib.sha256(text.encode()).hexdigest()

    def predicted_s(self, name: str) -> float:
        """The cost of part ``name``: the largest measured so far of its kind (the name up to its
        last "/"), else of its kind's kind ("speed/train/bfloat16/32" is first predicted by
        "speed/train/float32/..."), else 0: a part of which nothing alike is known always starts."""
        parts = name.split("/")
        for depth in (len(parts) - 1, len(parts) - 2):
            if depth < 1:
                break
            costs = [p["seconds"] for n, p in self.saved.items() if n.split("/")[:depth] == parts[:depth]
                     and len(n.split("/")) == len(parts)]
            if costs:
                return max(costs)
        return 0.0

    def __call__(self, name: str, fn: Callable[..., Any], *args: Any,
                 decode: Callable[[Any], Any] | None = None, **kwargs: Any) -> Any:
        """``fn(*args, **kwargs)``, or its saved value (through ``decode``) when this part ran before
        with the same arguments and inputs. A dataclass value is saved as its fields."""
        if self.path is None:
            return fn(*args, **kwargs)
        key = self._key(name, args, kwargs)
        saved = self.saved.get(name)
        if saved is not None and saved["key"] == key:
            self.log[name] = {"measured": "earlier run", "seconds": saved["seconds"], "commit": saved.get("commit")}
            return decode(saved["value"]) if decode else saved["value"]
        elapsed = self.clock() - self.start
        predicted = self.predicted_s(name)
        if self.budget_s and elapsed + predicted > self.budget_s:
            done = sum(1 for p in self.log.values() if p["measured"] == "this run")
            raise BudgetSpent(
                f"the time budget of this run ({self.budget_s:.0f} s) is spent: {elapsed:.0f} s have passed and "
                f"the next part, {name!r}, is expected to take {predicted:.0f} s. {done} parts were measured in "
                f"this run and saved, with those of earlier runs, in {self.path}. Run the same command again, "
                f"with that file in place (same machine and libraries; a later commit is fine where it changed "
                f"none of this notebook's inputs), to measure the rest.")
        start = self.clock()
        value = fn(*args, **kwargs)
        seconds = self.clock() - start
        stored = dataclasses.asdict(value) if dataclasses.is_dataclass(value) else value
        self.saved[name] = {"key": key, "seconds": seconds, "commit": self.commit, "value": stored}
        self.log[name] = {"measured": "this run", "seconds": seconds, "commit": self.commit}
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps(self.saved, default=float))
        os.replace(tmp, self.path)
        return value


def describe_parts(log: Mapping[str, Mapping[str, Any]]) -> str:
    """A sentence for the post: which commit measured which part of a run made in parts ("" for a
    run with no checkpoint file)."""
    if not log:
        return ""
    earlier = [n for n, p in log.items() if p["measured"] == "earlier run"]
    if not earlier:
        return "This run measured all of its parts itself."
    by_commit: dict[str, list[str]] = {}
    for name, part in log.items():
        by_commit.setdefault(str(part.get("commit") or "an unknown commit"), []).append(name)
    commits = "; ".join(f"{len(names)} at commit `{commit}`" for commit, names in by_commit.items())
    return (f"This run was made in parts, on the same machine and libraries: {len(earlier)} of its {len(log)} "
            f"parts were read back from earlier runs whose inputs (library code, notebook, parameters, pins, "
            f"data) were the same as this run's. By commit: {commits}. The record's `parts` lists them.")
