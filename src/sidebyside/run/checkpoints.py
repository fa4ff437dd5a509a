"""A run in parts: a lent GPU allows a few minutes a call, and the gpu profile of grid-sample-parity,
Swin V2 or the real models needs more. :class:`Checkpoints` saves each expensive part of a notebook run
(a parity table, a seed's training, a speed setting, a benchmark configuration) to one JSON file as it
finishes; a run stops before a part that would end past its time budget, and a later run reads back the
parts whose inputs are the same, also from an earlier commit, session or machine with the same GPU.

A part's key holds what changes its measurement, and nothing else:

- its name and arguments;
- the ``stamp`` the notebook gives: the device (the GPU model, or the CPU model where the CPU
  measures) and the libraries' versions (the provenance record), and what the notebook derived from
  its parameters. Of the provenance record, what belongs to the host or the moment rather than to the
  measurement is left out (:data:`NOT_MEASURED`: the commit, the host's CPU model beside a GPU, the
  quiet-machine check);
- the run's own inputs (:func:`run_inputs`): the source of every library module imported and every
  data file read when the :class:`Checkpoints` is made (make it after the notebook's imports and data
  loading, so that every run has the same list there), the stack (the installed versions of the pinned
  packages imported, :func:`sidebyside.run.runkey.stack`), and what the publisher declares
  (:func:`sidebyside.run.runkey.declared_inputs`): the notebook's code cells (not its prose, layout tags
  or header, its ``gpu`` budget included), the profile and its parameters but those that only steer the
  run (``checkpoint_file``, ``run_budget_s``). A notebook run by hand (no run context) cannot name its
  notebook: there the commit counts instead.

So a part is read back exactly when measuring it again would run the same code on the same GPU and
libraries with the same arguments; a commit that changed none of that (a post published, prose
reworded, another notebook edited) keeps finished GPU work. Each saved part keeps the commit that
measured it, and :func:`describe_parts` says in the post which commit measured which part.

One clock: a device call (``tools/device-run.sh``) passes its start, as seconds since the epoch, in
:data:`CALL_START_ENV`, and its deadline, in seconds from that start, in :data:`CALL_DEADLINE_ENV`. A
run's ``budget_s`` then counts from the call's start, as the call's deadline does, and no part starts
that would end past either. Without them (a run by hand, ``make execute``) the budget counts from the
:class:`Checkpoints`' creation. A part is predicted by the parts measured before (:meth:`predicted_s`),
else by the estimates of the notebook's header (:data:`ESTIMATES_ENV`, which the box's runner passes).

This module imports neither PyTorch nor JAX.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import re
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from sidebyside.run import context, runkey

__all__ = ["BudgetSpent", "Checkpoints", "run_inputs", "describe_parts", "CALL_START_ENV", "CALL_DEADLINE_ENV",
           "ESTIMATES_ENV", "LATER_ENV", "COPY_ENV", "NOT_MEASURED"]

#: The call's start, seconds since the epoch (``tools/device-run.sh`` sets it): every budget counts from it.
CALL_START_ENV = "SIDEBYSIDE_CALL_START"
#: The call's deadline, seconds from its start (``DEADLINE_S`` of ``tools/device-run.sh``).
CALL_DEADLINE_ENV = "SIDEBYSIDE_CALL_DEADLINE_S"
#: JSON ``{part name or "kind/*": seconds}``: the estimates of the post's GPU budget (its ``parts``).
ESTIMATES_ENV = "SIDEBYSIDE_PART_ESTIMATES"
#: JSON list of part names (or ``kind/*``) that a fixed GPU plan gives a later call: none of them starts here.
LATER_ENV = "SIDEBYSIDE_PARTS_LATER"
#: A folder (the device call's output) that receives a copy of the checkpoint file each time a part finishes.
COPY_ENV = "SIDEBYSIDE_PARTS_OUT"
#: Entries of a stamp's ``provenance`` left out of a part's key: the commit (kept beside each part
#: instead), the host's CPU model (the ``device`` names what measured: the GPU, or the CPU on a cpu run)
#: and the quiet-machine check of this process's timed sections.
NOT_MEASURED = ("git_sha", "cpu", "machine")


class BudgetSpent(RuntimeError):
    """A run stopped before a part that would not fit in its time budget; what finished is saved."""


def run_inputs(commit: str | None = None) -> dict[str, Any]:
    """What every part of this run depends on besides its arguments and the notebook's stamp: the
    modules and data files read so far, the stack (:func:`sidebyside.run.runkey.stack`) and the inputs
    the publisher declared in the run context (:func:`sidebyside.run.runkey.declared_inputs`). A run by
    hand, with no context, counts ``commit``."""
    ctx = context.current()
    root = runkey.project_root()
    out: dict[str, Any] = {"recorded": runkey.recorded(root), "stack": runkey.stack(root=root)}
    if ctx.inputs is None:
        out["commit"] = commit
        return out
    return {**out, **ctx.inputs}


def _measured(stamp: Mapping[str, Any] | None) -> dict[str, Any]:
    """``stamp`` with :data:`NOT_MEASURED` left out of its ``provenance``."""
    stamp = dict(stamp or {})
    if isinstance(stamp.get("provenance"), Mapping):
        stamp["provenance"] = {k: v for k, v in stamp["provenance"].items() if k not in NOT_MEASURED}
    return stamp


def _env_float(name: str) -> float | None:
    try:
        value = float(os.environ.get(name, ""))
    except ValueError:
        return None
    return value if value > 0 else None


def _env_later() -> tuple[str, ...]:
    try:
        found = json.loads(os.environ.get(LATER_ENV) or "[]")
        return tuple(str(name) for name in found) if isinstance(found, list) else ()
    except ValueError:
        return ()


def _env_estimates() -> dict[str, float]:
    try:
        found = json.loads(os.environ.get(ESTIMATES_ENV) or "{}")
        return {str(k): float(v) for k, v in found.items() if v is not None}
    except (ValueError, TypeError, AttributeError):
        return {}


def _stable_repr(value: Any) -> str:
    """A value's part of a key, the same in every process: a function by its module and name (the code
    it runs is in the key already, through the notebook's code and the library's source), anything else
    by its repr without the memory address an object's default repr carries."""
    if callable(value) and hasattr(value, "__qualname__"):
        return f"<callable {getattr(value, '__module__', None)}.{value.__qualname__}>"
    return re.sub(r" at 0x[0-9a-fA-F]+", "", repr(value))


class Checkpoints:
    """The expensive parts of a run, saved to one JSON file as each finishes.

    ``path``: the file ("" or None: off, every part is computed and nothing is saved).
    ``budget_s``: seconds from the start past which no part may be expected to end: a part whose
    predicted cost (:meth:`predicted_s`) would take the run past it, or past the call's deadline
    (``deadline_s``), does not start, and :class:`BudgetSpent` says so; 0: no budget.
    ``stamp``: what the notebook adds to every part's key (the provenance record, of which
    :data:`NOT_MEASURED` is left out, and what it derived from its parameters); :func:`run_inputs` is
    added to it.
    ``commit``: the commit of this run, saved with each part it measures (not part of the key).
    ``started_at``: the start, seconds since the epoch (default: :data:`CALL_START_ENV`, else now);
    ``deadline_s``: the call's deadline from that start (default: :data:`CALL_DEADLINE_ENV`, else none);
    ``estimates``: costs for parts of which nothing alike was measured (default: :data:`ESTIMATES_ENV`).
    ``later``: parts a fixed GPU plan gives a later call (names, or ``kind/*``; default :data:`LATER_ENV`):
    none of them starts in this run, :class:`BudgetSpent` says so. ``copy_to``: a folder that receives a copy
    of the file each time a part finishes (default :data:`COPY_ENV`; a device call's output, so that a call
    stopped anywhere returns every part it finished).
    ``log`` says, per part, whether this run measured it or read it back, its cost in seconds and
    the commit it was measured at.
    """

    def __init__(self, path: str | os.PathLike | None = None, *, budget_s: float = 0.0,
                 stamp: dict[str, Any] | None = None, commit: str | None = None,
                 clock: Callable[[], float] = time.monotonic, started_at: float | None = None,
                 deadline_s: float | None = None, estimates: Mapping[str, float] | None = None,
                 later: tuple[str, ...] | None = None, copy_to: str | os.PathLike | None = None):
        self.path = Path(path) if path else None
        self.later = _env_later() if later is None else tuple(later)
        copy_to = os.environ.get(COPY_ENV) if copy_to is None else copy_to
        self.copy_to = Path(copy_to) if copy_to else None
        started_at = _env_float(CALL_START_ENV) if started_at is None else started_at
        deadline_s = _env_float(CALL_DEADLINE_ENV) if deadline_s is None else deadline_s
        ends = [float(b) for b in (budget_s, deadline_s) if b]
        self.budget_s = min(ends) if ends else 0.0
        self.clock = clock
        self.start = clock() - (max(0.0, time.time() - started_at) if started_at else 0.0)
        self.estimates = dict(_env_estimates() if estimates is None else estimates)
        self.commit = commit
        self.stamp = {**_measured(stamp), "inputs": run_inputs(commit)} if self.path is not None else {}
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
                          sort_keys=True, default=_stable_repr)
        return hashlib.sha256(text.encode()).hexdigest()

    def predicted_s(self, name: str) -> float:
        """The cost of part ``name``: the largest measured so far of its kind (the name up to its
        last "/"), else of its kind's kind ("speed/train/bfloat16/32" is first predicted by
        "speed/train/float32/..."), else the estimate given for it (its name, or the longest
        ``kind/*`` that it starts with), else 0: only a part of which nothing is known or estimated
        (a run by hand) always starts."""
        parts = name.split("/")
        for depth in (len(parts) - 1, len(parts) - 2):
            if depth < 1:
                break
            costs = [p["seconds"] for n, p in self.saved.items() if n.split("/")[:depth] == parts[:depth]
                     and len(n.split("/")) == len(parts)]
            if costs:
                return max(costs)
        if name in self.estimates:
            return self.estimates[name]
        kinds = [k for k in self.estimates if k.endswith("/*") and name.startswith(k[:-1])]
        return self.estimates[max(kinds, key=len)] if kinds else 0.0

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
        if any(name == later or (later.endswith("/*") and name.startswith(later[:-1])) for later in self.later):
            raise BudgetSpent(
                f"the next part, {name!r}, is planned for a later call (the fixed GPU plan's); this run stops "
                f"here, with every part it measured saved in {self.path}. Merge this call's output, then run "
                f"the plan's next call.")
        elapsed = self.clock() - self.start
        predicted = self.predicted_s(name)
        if self.budget_s and elapsed + predicted > self.budget_s:
            done = sum(1 for p in self.log.values() if p["measured"] == "this run")
            raise BudgetSpent(
                f"the time budget of this run ({self.budget_s:.0f} s from its start, the call's where a device "
                f"call gave it) is spent: {elapsed:.0f} s have passed and the next part, {name!r}, is expected "
                f"to take {predicted:.0f} s. {done} parts were measured in "
                f"this run and saved, with those of earlier runs, in {self.path}. Run the same command again, "
                f"with that file in place (same machine and libraries; a later commit is fine where it changed "
                f"none of this notebook's inputs), to measure the rest.")
        start = self.clock()
        value = fn(*args, **kwargs)
        seconds = self.clock() - start
        stored = dataclasses.asdict(value) if dataclasses.is_dataclass(value) else value
        self.saved[name] = {"key": key, "seconds": seconds, "commit": self.commit, "value": stored}
        self.log[name] = {"measured": "this run", "seconds": seconds, "commit": self.commit}
        text = json.dumps(self.saved, default=float)
        for target in (self.path, *([self.copy_to / self.path.name] if self.copy_to else [])):
            target.parent.mkdir(parents=True, exist_ok=True)
            tmp = target.with_suffix(".tmp")
            tmp.write_text(text)
            os.replace(tmp, target)
        return value

    def drawn(self, generator: Any, name: str, fn: Callable[..., Any], *args: Any,
              decode: Callable[[Any], Any] | None = None, **kwargs: Any) -> Any:
        """``self(name, fn, *args, decode=decode, **kwargs)`` for a part that draws its data from
        ``generator`` (a :class:`numpy.random.Generator`): the generator's state the part leaves is saved
        with its value and put back when the part is read back, so every draw after it is the one a run
        that measured it makes (a run in parts draws the data of an uninterrupted run)."""
        def measured(*given: Any, **named: Any) -> _Drawn:
            return _Drawn(fn(*given, **named), generator.bit_generator.state)

        def read(saved: Mapping[str, Any]) -> _Drawn:
            generator.bit_generator.state = saved["rng"]
            return _Drawn(decode(saved["value"]) if decode else saved["value"], saved["rng"])

        return self(name, measured, *args, decode=read, **kwargs).value


@dataclasses.dataclass
class _Drawn:
    """A part's ``value`` and the state its draws left the generator in (``rng``: the
    ``bit_generator.state`` of a :class:`numpy.random.Generator`)."""

    value: Any
    rng: dict[str, Any]


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
