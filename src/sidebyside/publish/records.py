"""A results record as the site publishes it, and the check that Jekyll will load it.

Jekyll reads ``_data/results/<slug>.json`` (and every other data file, and each post's front
matter) with Ruby's YAML loader (Psych, through ``Jekyll::Utils.safe_load_yaml``), not with a JSON
parser: what JSON allows but YAML refuses (a ``\\ud83d\\ude00`` surrogate-pair escape, a raw
noncharacter) stops the build of the whole site. So:

- :func:`record_text` writes a record as UTF-8 JSON (``ensure_ascii=False``: a character outside
  the Basic Multilingual Plane is written as itself, never as a surrogate-pair escape);
- :func:`load_record` reads a run's record within the caps of :mod:`.caps` (size, then nesting,
  counted before it is parsed); :func:`check_record` refuses a record the site cannot show: one
  over those caps, one that :data:`RECORD_SCHEMA` refuses (:func:`schema_problems`, by
  ``jsonschema``, pinned in requirements.txt), one with more than :data:`MAX_VERDICTS` verdicts,
  or one that lacks a metric its notebook declares;
- :func:`begins_with_front_matter` says whether Jekyll would read a file as a page (``---`` at its
  start): only a post may (:func:`site_pages_outside_posts` finds such files in ``images/``);
- :func:`jekyll_rejects` loads files exactly as Jekyll will (``Psych.safe_load``, Date and Time
  permitted, aliases on) in a ``ruby`` process, and returns what it refused; where Ruby or Jekyll
  is missing (an air-gapped GPU box), with PyYAML's ``CSafeLoader`` (libyaml, which Psych wraps).

The publisher runs both before a publication is committed
(:func:`sidebyside.publish.site.publish`), and ``list`` (``make site``'s check) runs
:func:`jekyll_rejects` on every data file and post of the site.
"""

from __future__ import annotations

import datetime as dt
import functools
import json
import re
import shutil
import subprocess
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from sidebyside.publish import caps
from sidebyside.publish.common import PROFILES, PublishError

__all__ = ["MAX_VERDICTS", "RECORD_SCHEMA", "GPU_RUN", "split_runs", "join_runs", "record_text",
           "schema_problems", "check_record", "load_record", "jekyll_rejects", "site_rejects",
           "require_loadable", "begins_with_front_matter", "site_pages_outside_posts"]

#: The most verdicts one record may hold (a post's verdict box shows each one).
MAX_VERDICTS = 50


def _object(properties: dict[str, Any], *, null: bool = False, **more: Any) -> dict[str, Any]:
    return {"type": ["object", "null"] if null else "object", "properties": properties, **more}


def _list(items: dict[str, Any], *, null: bool = False) -> dict[str, Any]:
    return {"type": ["array", "null"] if null else "array", "items": items}


_TEXT, _TEXT_OR_NULL = {"type": "string"}, {"type": ["string", "null"]}
_NUMBER_OR_NULL, _INTEGER_OR_NULL = {"type": ["number", "null"]}, {"type": ["integer", "null"]}
_SCALE = _object({"text": _TEXT, "parameters": _NUMBER_OR_NULL, "input": _TEXT_OR_NULL,
                  "batch": {"type": ["integer", "string", "null"]}, "precision": _TEXT_OR_NULL,
                  "device": _TEXT_OR_NULL}, null=True)
_VERDICT = _object({
    "question": _TEXT, "label": _TEXT, "sentence": _TEXT, "test": _TEXT, "caveat": _TEXT, "cause": _TEXT,
    "subject": _TEXT, "other": _TEXT, "winner": _TEXT_OR_NULL, "kind": {"enum": ["framework", "custom"]},
    "ratio": _NUMBER_OR_NULL, "factor": _NUMBER_OR_NULL, "difference": _NUMBER_OR_NULL,
    "threshold": _NUMBER_OR_NULL, "floor": _NUMBER_OR_NULL, "detectable": _NUMBER_OR_NULL,
    "processes": _INTEGER_OR_NULL, "busy": _list(_TEXT),
    "interval": {"type": ["array", "null"], "items": {"type": "number"}, "minItems": 2, "maxItems": 2},
    "scale": _SCALE,
    "contestants": {"type": "object", "additionalProperties": _object(
        {"framework": _TEXT, "tool": _TEXT, "implementation": _TEXT, "origin": _TEXT, "origin_text": _TEXT})},
    "sides": {"type": "object", "additionalProperties": _object(
        {"tool": _TEXT_OR_NULL, "median_s": _NUMBER_OR_NULL, "iqr_s": _NUMBER_OR_NULL, "q1_s": _NUMBER_OR_NULL,
         "q3_s": _NUMBER_OR_NULL, "mean": _NUMBER_OR_NULL, "std": _NUMBER_OR_NULL, "n": _INTEGER_OR_NULL})},
    "claim": _object({"answers": {"type": "boolean"}, "source": _TEXT, "text": _TEXT, "scale": _SCALE,
                      "differs": _list(_TEXT)}, null=True),
})
_SCALAR = {"type": ["string", "number", "boolean", "null"]}

#: Where a record keeps its GPU run beside its cpu run (:func:`split_runs`, :func:`join_runs`).
GPU_RUN = "gpu_run"
_RUN = {
    "slug": _TEXT, "notebook": _TEXT, "profile": {"enum": list(PROFILES)},
    "executed_at": {"type": "string", "format": "date-time"}, "source_hash": _TEXT,
    "parameters": {"type": "object"},
    "provenance": _object({
        "device": _TEXT, "device_kind": _TEXT, "cpu": _TEXT_OR_NULL, "git_sha": _TEXT_OR_NULL,
        **{name: _TEXT_OR_NULL for name in ("python", "torch", "jax", "jaxlib", "flax", "optax", "timm", "cuda")},
        "matmul_precision": {"type": ["object", "null"], "additionalProperties": _SCALAR},
        "differs_from_pins": _list(_TEXT),
        "machine": _object({"status": _TEXT, "caveat": _TEXT}, null=True),
        "threads": _object({"blas": _list(_object({"library": _SCALAR, "num_threads": _SCALAR}), null=True)},
                           null=True, additionalProperties=_SCALAR),
    }),
    "metrics": _object({
        "verdicts": _list(_VERDICT),
        "peak_flops": {"type": ["object", "null"], "additionalProperties": _object({"flops": _NUMBER_OR_NULL},
                                                                                   null=True)},
        "matmul": {"type": ["object", "null"], "additionalProperties": {"properties": {
            "ladder": {"type": ["object", "null"]}}}},
    }),
}

#: What a published results record must be, in JSON Schema (draft 2020-12): the type of every field
#: that the site's templates read (``_includes/verdict.html``, ``provenance.html``, through the post's
#: front matter ``_layouts/post.html``) and that the publisher's pages read to write ``_data/board.json``
#: (:mod:`.frontpage`, :mod:`.anomalies`). A field may be absent (the templates print nothing for it);
#: where present it has this type. Fields no page reads are left free.
#:
#: A record holds one run at its top level (its cpu run, or a smoke run; or, where the post has no
#: such run yet, its GPU run) and, beside a cpu or smoke run, the post's GPU run in :data:`GPU_RUN`:
#: a whole run record of the gpu profile, with the fields a run needs to be shown (profile, time,
#: key, provenance, metrics). A GPU run at the top level holds no second one.
RECORD_SCHEMA: dict[str, Any] = _object({
    **_RUN,
    GPU_RUN: _object({**_RUN, "profile": {"const": "gpu"}},
                     required=["profile", "executed_at", "source_hash", "provenance", "metrics"]),
}, **{"$schema": "https://json-schema.org/draft/2020-12/schema",
      "if": {"properties": {"profile": {"const": "gpu"}}, "required": ["profile"]},
      "then": {"not": {"required": [GPU_RUN]}}})
_JSON_TYPES = {dict: "an object", list: "an array", str: "a string", bool: "a boolean", int: "an integer",
               float: "a number", type(None): "null"}
_TYPE_NAMES = {"object": "an object", "array": "an array", "string": "a string", "boolean": "a boolean",
               "integer": "an integer", "number": "a number", "null": "null"}


@functools.lru_cache(maxsize=1)
def _validator():
    import jsonschema

    formats = jsonschema.FormatChecker(formats=())

    @formats.checks("date-time", raises=ValueError)
    def _date_time(value: Any) -> bool:  # as the publisher reads it (frontpage._instant), and Jekyll's date
        return not isinstance(value, str) or bool(dt.datetime.fromisoformat(value.replace("Z", "+00:00")))

    validator = jsonschema.Draft202012Validator
    validator.check_schema(RECORD_SCHEMA)
    return validator(RECORD_SCHEMA, format_checker=formats)


def _field(path: Sequence[Any]) -> str:
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else f".{part}" if out else str(part)
    return out or "the record"


def _why(error) -> str:
    if error.validator == "type":
        wanted = [error.validator_value] if isinstance(error.validator_value, str) else error.validator_value
        return (f"must be {' or '.join(_TYPE_NAMES[w] for w in wanted)}, not "
                f"{_JSON_TYPES.get(type(error.instance), type(error.instance).__name__)}")
    if error.validator == "enum":
        return f"must be one of {', '.join(json.dumps(v) for v in error.validator_value)}, not {error.instance!r:.60}"
    if error.validator in ("minItems", "maxItems"):
        return f"must hold exactly {error.validator_value} numbers (it holds {len(error.instance)})"
    if error.validator == "const":
        return f"must be {json.dumps(error.validator_value)}, not {error.instance!r:.60}"
    if error.validator == "required":
        return error.message[:200].replace("is a required property", "is missing")
    if error.validator == "not" and isinstance(error.instance, dict) and GPU_RUN in error.instance:
        return f"a GPU run at the top level holds no second GPU run ({GPU_RUN}): only a cpu or smoke run does"
    if error.validator == "format":
        return f"must be an ISO {error.validator_value} (2026-11-22T10:00:00+00:00), not {error.instance!r:.60}"
    return error.message[:200]


def schema_problems(record: Any) -> list[str]:
    """``"<field>: why"`` for every place where ``record`` breaks :data:`RECORD_SCHEMA` (the field
    written as a path, ``metrics.verdicts[3].scale.text``), in the order of the fields; empty when it
    keeps to it."""
    errors = sorted(_validator().iter_errors(record), key=lambda e: [str(p) for p in e.absolute_path])
    return [f"{_field(e.absolute_path)}: {_why(e)}" for e in errors]

# Loads each file named on the command line ("data:<path>" or "post:<path>") as Jekyll 4 does
# (Jekyll::Utils.safe_load_yaml, and for a post the front matter that Jekyll::Document's
# YAML_FRONT_MATTER_REGEXP finds); prints "path<TAB>why" for each it refuses. Psych alone: loading
# all of Jekyll would take seconds.
_RUBY = r"""
require "psych"
require "date"
FRONT_MATTER = %r!\A(---\s*\n.*?\n?)^((---|\.\.\.)\s*$\n?)!m
ARGV.each do |arg|
  kind, path = arg.split(":", 2)
  begin
    text = File.read(path, encoding: "utf-8")
    raise "not valid UTF-8" unless text.valid_encoding?
    if kind == "post"
      match = text.match(FRONT_MATTER)
      raise "no front matter between --- lines" unless match
      text = match[1]
    end
    Psych.safe_load(text, permitted_classes: [Date, Time], aliases: true)
  rescue StandardError => e
    puts "#{path}\t#{e.class}: #{e.message.lines.first.to_s.strip}"
  end
end
"""


def split_runs(record: dict[str, Any] | None) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
    """``(cpu run, GPU run)`` of a published record, each a whole run record or None. The cpu run is
    whatever run of another profile than gpu the record holds at its top level (a smoke run counts);
    a record whose top level is a gpu run (one published before records held two runs, or a post
    that has no other run yet) holds only a GPU run."""
    if not record:
        return None, None
    top = {k: v for k, v in record.items() if k != GPU_RUN}
    if record.get("profile") == "gpu":
        return None, top
    gpu = record.get(GPU_RUN)
    if isinstance(gpu, dict):
        gpu = {"slug": record.get("slug"), "notebook": record.get("notebook"), **gpu}
        gpu = {k: v for k, v in gpu.items() if v is not None or k not in ("slug", "notebook")}
    return top, gpu or None


def join_runs(cpu: dict[str, Any] | None, gpu: dict[str, Any] | None) -> dict[str, Any]:
    """The record that holds ``cpu`` (a run of another profile than gpu) and ``gpu`` (a gpu run),
    either of them None but not both (see :func:`split_runs`)."""
    if cpu is not None and cpu.get("profile") == "gpu":
        raise ValueError("join_runs: the cpu run is a gpu run")
    if gpu is not None and gpu.get("profile") != "gpu":
        raise ValueError(f"join_runs: the GPU run is a {gpu.get('profile')} run")
    if cpu is None:
        if gpu is None:
            raise ValueError("join_runs: no run")
        return {k: v for k, v in gpu.items() if k != GPU_RUN}
    out = {k: v for k, v in cpu.items() if k != GPU_RUN}
    if gpu is not None:
        out[GPU_RUN] = {k: v for k, v in gpu.items() if k != GPU_RUN}
    return out


def record_text(record: dict[str, Any]) -> str:
    """The text of a published results file: JSON, UTF-8, sorted keys."""
    return json.dumps(record, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def load_record(path: Path, slug: str) -> dict[str, Any]:
    """The results record a run of ``slug`` saved at ``path``: a regular file
    (:func:`sidebyside.publish.caps.read_regular`) of at most
    :data:`sidebyside.publish.caps.MAX_RECORD_BYTES`, nested at most
    :data:`sidebyside.publish.caps.MAX_RECORD_DEPTH` deep (counted before it is parsed), holding a
    JSON object. Raises :class:`PublishError` naming the cap, or what the file holds."""
    path = Path(path)
    try:
        size = path.lstat().st_size
    except OSError as exc:
        raise PublishError(f"{slug}: its results record {path} cannot be read "
                           f"({exc.strerror})") from None
    if size > caps.MAX_RECORD_BYTES:
        raise caps.refusal(slug, f"its results record ({path.name})", f"{size:,} bytes",
                           f"{caps.MAX_RECORD_BYTES:,} bytes",
                           "keep the record to the figures the post shows")
    data = caps.read_regular(path, cap=caps.MAX_RECORD_BYTES)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise PublishError(f"{slug}: its results record {path} is not UTF-8 ({exc})") from None
    caps.check_record_caps(None, slug, text)
    try:
        record = json.loads(text)
    except ValueError as exc:
        raise PublishError(f"{slug}: its results record {path} is not JSON ({exc}); save it with "
                           "sidebyside.run.provenance.save_results") from None
    if not isinstance(record, dict):
        raise PublishError(f"{slug}: its results record {path} is a JSON "
                           f"{type(record).__name__}, not an object")
    return record


def check_record(record: dict[str, Any], slug: str, metrics: Sequence[str] = ()) -> None:
    """Raise :class:`PublishError` for a record the site cannot show: one over the caps of
    :func:`sidebyside.publish.caps.check_record_caps` (nesting, then size: checked first), one that
    breaks :data:`RECORD_SCHEMA` (the message names every field, at most 20, and why), more
    verdicts than :data:`MAX_VERDICTS`, or without one of ``metrics`` (the keys its notebook's
    header declares)."""
    caps.check_record_caps(record, slug)
    problems = schema_problems(record)
    if problems:
        more = f"\n  ... and {len(problems) - 20} more" if len(problems) > 20 else ""
        raise PublishError(f"{slug}: its results record has fields the site's pages cannot show (a template would "
                           "fail on them and stop the build of the whole site, or misprint them):\n  "
                           + "\n  ".join(problems[:20]) + more + "\nSave each field with the type named "
                           "(sidebyside.lab.verdict writes verdicts so). Nothing published was changed.")
    missing = [m for m in metrics if m not in (record.get("metrics") or {})]
    if missing:
        raise PublishError(f"{slug}: its notebook's header declares the metrics {', '.join(metrics)}, and the run's "
                           f"record lacks {', '.join(missing)}; save them (provenance.save_results) or drop them "
                           "from the header's metrics. Nothing published was changed.")
    verdicts = (record.get("metrics") or {}).get("verdicts") or []
    if len(verdicts) > MAX_VERDICTS:
        raise PublishError(f"{slug}: the record holds {len(verdicts)} verdicts, more than the {MAX_VERDICTS} a post "
                           "shows; keep the verdicts that answer the post's questions (save the rest as tables, "
                           "which the CSV download carries). Nothing published was changed.")


# Jekyll::Utils.has_yaml_header? reads a file as a page when it starts with /\A---\s*\r?\n/; a byte-order
# mark or blank space before the dashes is refused too (never fewer files than Jekyll reads as pages).
_PAGE_START = re.compile(rb"\A(\xef\xbb\xbf)?\s*---")


def begins_with_front_matter(data: bytes) -> bool:
    """Whether ``data`` begins as a Jekyll page does (``---``, after an optional byte-order mark and
    blank space): no published file but a post may."""
    return bool(_PAGE_START.match(data))


def site_pages_outside_posts(site: Path) -> list[str]:
    """Every file under ``site/images/`` that :func:`begins_with_front_matter` (relative to ``site``):
    Jekyll would build it as a page."""
    folder = Path(site) / "images"
    found = []
    for path in sorted(folder.rglob("*")) if folder.is_dir() else []:
        if path.is_file():
            with open(path, "rb") as f:
                if begins_with_front_matter(f.read(4096)):
                    found.append(path.relative_to(site).as_posix())
    return found


def _front_matter(text: str) -> str | None:
    lines = text.split("\n")
    if not lines or lines[0].rstrip() != "---":
        return None
    end = next((i for i, line in enumerate(lines[1:], 1) if line.rstrip() in ("---", "...")), None)
    return None if end is None else "\n".join(lines[1:end])


def _python_rejects(files: list[tuple[str, Path]]) -> list[str]:
    import yaml

    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    refused = []
    for kind, path in files:
        try:
            text = Path(path).read_bytes().decode("utf-8")
            if kind == "post":
                text = _front_matter(text)
                if text is None:
                    raise ValueError("no front matter between --- lines")
            yaml.load(text, Loader=loader)  # noqa: S506 (a safe loader)
        except (ValueError, yaml.YAMLError) as exc:
            refused.append(f"{path}: {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}")
    return refused


def jekyll_rejects(data: list[Path], posts: list[Path] = ()) -> list[str]:
    """``"<path>: why"`` for each file that Jekyll's loader refuses: ``data``
    (JSON or YAML data files, read whole) and ``posts`` (their front matter);
    empty when it takes them all."""
    files = [("data", Path(p)) for p in data] + [("post", Path(p)) for p in posts]
    if not files:
        return []
    ruby = shutil.which("ruby")
    if ruby:
        proc = subprocess.run([ruby, "-e", _RUBY, *(f"{kind}:{path}" for kind, path in files)],
                              capture_output=True, text=True, timeout=300)
        if proc.returncode == 0:
            return [line.replace("\t", ": ", 1) for line in proc.stdout.splitlines() if line.strip()]
    return _python_rejects(files)


def site_rejects(site: Path) -> list[str]:
    """:func:`jekyll_rejects` for every data file and post of ``site``."""
    site = Path(site)
    data = [p for p in sorted((site / "_data").rglob("*")) if p.suffix.lower() in (".json", ".yml", ".yaml")
            and not p.name.startswith(".")] if (site / "_data").is_dir() else []
    posts = sorted((site / "_posts").glob("*.md")) if (site / "_posts").is_dir() else []
    return jekyll_rejects(data, posts)


def require_loadable(data: list[Path], posts: list[Path], what: str) -> None:
    """Raise :class:`PublishError` naming every file that Jekyll would refuse (see :func:`jekyll_rejects`)."""
    refused = jekyll_rejects(data, posts)
    if refused:
        raise PublishError(f"{what}: Jekyll would refuse to load it, and the whole site would fail to build:\n  "
                           + "\n  ".join(refused) + "\n  (nothing published was changed)")
