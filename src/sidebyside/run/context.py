"""The one contract between the publisher and a notebook it runs.

The publisher (:mod:`sidebyside.publish`) runs a notebook in a Jupyter
kernel; the only channel into that kernel is its environment. What passes
through it is a :class:`RunContext`, written with :meth:`RunContext.env` by
the publisher and read with :func:`current` by the library inside the run
(``provenance.save_results``, ``provenance.collect``, ``progress.bar``,
``runkey``, ``checkpoints``). The context's environment variable names are
spelled here and nowhere else.

=============  ==========================  ==========================================
field          variable                    meaning
=============  ==========================  ==========================================
slug           ``SIDEBYSIDE_SLUG``         the notebook's slug, from its header
profile        ``SIDEBYSIDE_PROFILE``      smoke, cpu or gpu (gpu: refuse a one-sided run)
results_dir    ``SIDEBYSIDE_RESULTS_DIR``  where ``save_results`` writes ``<slug>.json``
root           ``SIDEBYSIDE_ROOT``         the project checkout the run belongs to
commit         ``SIDEBYSIDE_GIT_SHA``      the commit, when the tree is not a checkout (given
                                           by the user, never guessed)
headless       ``SIDEBYSIDE_HEADLESS``     "1": no widgets (text progress bars)
inputs         ``SIDEBYSIDE_INPUTS``       JSON: the inputs the publisher declares for the run
                                           (the digest of the notebook's code cells, not its
                                           prose or header; the profile; its parameters but
                                           ``runkey.STEERING_PARAMS``, e.g. ``run_budget_s``:
                                           :func:`sidebyside.run.runkey.declared_inputs`)
aa             ``SIDEBYSIDE_AA``           "1": an A/A run: every timed contestant races the first
                                           one's function (:func:`sidebyside.lab.pool.aa`)
=============  ==========================  ==========================================

The pins are not declared: a run in parts adds to its parts' keys what it
finds itself (:func:`sidebyside.run.checkpoints.run_inputs`: the modules and
data it read, and the stack, the installed versions of the pinned packages it
imported, :func:`sidebyside.run.runkey.stack`).

A notebook run by hand has no context: every field is None (``headless``
and ``aa`` False), and the library falls back to the checkout this module sits in.

Not part of the context: a device call's clock, which ``tools/device-run.sh``
sets for every run of the call, ``SIDEBYSIDE_CALL_START`` (the call's start,
seconds since the epoch) and ``SIDEBYSIDE_CALL_DEADLINE_S`` (its deadline, in
seconds from that start), and the header's part estimates that
:func:`sidebyside.publish.merge.execute` passes, ``SIDEBYSIDE_PART_ESTIMATES``.
They are spelled in :mod:`sidebyside.run.checkpoints` (``CALL_START_ENV``,
``CALL_DEADLINE_ENV``, ``ESTIMATES_ENV``), the one module that reads them: a
run's ``run_budget_s`` counts from the call's start and stops at its deadline.

:func:`results_record` is the one function that builds a results record,
both the part a notebook saves and the full record the publisher publishes
(``_data/results/<slug>.json``).

Imports nothing but the standard library: the kernel reads it at run time.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

__all__ = ["RunContext", "current", "ENV", "results_record", "RECORD_FIELDS", "default_root"]

#: Field of :class:`RunContext` -> environment variable (the only place these names are spelled).
ENV = {
    "slug": "SIDEBYSIDE_SLUG",
    "profile": "SIDEBYSIDE_PROFILE",
    "results_dir": "SIDEBYSIDE_RESULTS_DIR",
    "root": "SIDEBYSIDE_ROOT",
    "commit": "SIDEBYSIDE_GIT_SHA",
    "headless": "SIDEBYSIDE_HEADLESS",
    "inputs": "SIDEBYSIDE_INPUTS",
    "aa": "SIDEBYSIDE_AA",
}


def default_root() -> Path:
    """The checkout this library sits in (``src/sidebyside/`` is two levels down)."""
    return Path(__file__).resolve().parents[3]


@dataclass(frozen=True)
class RunContext:
    """What the publisher tells a notebook run; None where it tells nothing."""

    slug: str | None = None
    profile: str | None = None
    results_dir: Path | None = None
    root: Path | None = None
    commit: str | None = None
    headless: bool = False
    inputs: dict[str, Any] | None = None
    aa: bool = False

    def env(self) -> dict[str, str]:
        """The environment variables that carry this context into a kernel
        (fields that are None are left out: they keep what the caller has)."""
        out = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name in ("headless", "aa"):
                out[ENV[f.name]] = "1" if value else "0"
            elif f.name == "inputs" and value is not None:
                out[ENV["inputs"]] = json.dumps(value, sort_keys=True, default=str)
            elif value is not None:
                out[ENV[f.name]] = str(Path(value).resolve()) if isinstance(value, Path) else str(value)
        return out

    def project_root(self) -> Path:
        return self.root if self.root is not None else default_root()

    def results_path_dir(self) -> Path:
        return self.results_dir if self.results_dir is not None else self.project_root() / "build" / "results"


def current(environ: Mapping[str, str] | None = None) -> RunContext:
    """The context of this process (read from ``environ``, default ``os.environ``)."""
    environ = os.environ if environ is None else environ

    def get(name: str) -> str | None:
        value = environ.get(ENV[name], "").strip()
        return value or None

    results_dir, root = get("results_dir"), get("root")
    return RunContext(
        slug=get("slug"),
        profile=get("profile"),
        results_dir=Path(results_dir) if results_dir else None,
        root=Path(root) if root else None,
        commit=get("commit"),
        headless=get("headless") == "1",
        inputs=json.loads(get("inputs")) if get("inputs") else None,
        aa=get("aa") == "1",
    )


#: The fields of a published results record, in order.
RECORD_FIELDS = ("slug", "notebook", "profile", "executed_at", "source_hash", "inputs", "parameters",
                 "provenance", "code", "metrics")


def results_record(*, slug: str, provenance: dict[str, Any], metrics: dict[str, Any], inputs: dict | None,
                   notebook: str | None = None, profile: str | None = None, executed_at: str | None = None,
                   source_hash: str | None = None, parameters: dict[str, Any] | None = None,
                   code: dict[str, Any] | None = None) -> dict[str, Any]:
    """A results record. A notebook gives ``slug``, ``provenance``,
    ``metrics``, ``inputs`` and ``code`` (what it timed and showed, :mod:`sidebyside.run.code`):
    what it saves for the publisher; the publisher gives the rest too (what it publishes).
    Run facts left None are left out, so the saved part never pretends to be a published record;
    so is ``code`` (a record from before it was kept)."""
    given = {"slug": slug, "notebook": notebook, "profile": profile, "executed_at": executed_at,
             "source_hash": source_hash, "inputs": inputs, "parameters": parameters,
             "provenance": provenance, "code": code, "metrics": metrics}
    publisher = ("notebook", "profile", "executed_at", "source_hash", "parameters", "code")
    return {k: given[k] for k in RECORD_FIELDS if k not in publisher or given[k] is not None}
