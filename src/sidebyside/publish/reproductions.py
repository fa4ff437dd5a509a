"""Reproductions from readers' hardware: the file ``make reproduce`` leaves, and its one reader.

Every ``make reproduce ONLY=<slug>`` (:func:`sidebyside.publish.reproduce.reproduce`), on any
machine, writes its comparison as ``reproductions/<slug>/<date>-<short fingerprint>.json``
(:func:`write`): the machine's fingerprint as the records keep it, its :func:`short_fingerprint`,
the date, the library versions, the profile and, per speed verdict, its id, the published figure
and interval, the reader's, and the outcome (:data:`OUTCOMES`). A file is never overwritten: a
second one of the same day and machine takes a suffix (``-2``). A reader sends it as a pull
request.

The files are untrusted input, kept outside ``_data/`` (Jekyll would load every file there, and one
it refused would stop the whole build) and excluded from the site by ``_config.yml``. Only
:func:`read` opens them: a regular file of at most :data:`MAX_BYTES`, nested at most
:data:`MAX_DEPTH` deep (counted before parsing), JSON with finite numbers only, kept to
:data:`SCHEMA` (types, enumerated outcomes, string lengths, no control characters; by
``jsonschema``), its name agreeing with its slug, date and fingerprint. Anything else raises
:class:`ReproductionRefused`, which names the file and why. At most :data:`MAX_PER_POST` files of a
post are read.

:func:`write_summary` (run by ``make site``'s ``publish list --freshness``) writes what
:func:`read` accepted as ``_data/reproductions_summary.json``, which
``_includes/reproductions.html`` and the home page print, every string through Liquid's ``escape``;
a refused file is named on stderr and left out.
"""

from __future__ import annotations

import functools
import hashlib
import json
import math
import os
import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from sidebyside.publish import caps
from sidebyside.publish.common import PROFILES, PublishError, warn, write_atomic
from sidebyside.run import provenance

__all__ = ["FOLDER", "SUMMARY", "MAX_BYTES", "MAX_DEPTH", "MAX_PER_POST", "MAX_VERDICTS",
           "OUTCOMES", "SCHEMA", "VERSIONS", "ReproductionRefused", "short_fingerprint", "build",
           "problems", "write", "read", "summary", "write_summary"]

#: Where a site keeps the submitted files, one folder per post.
FOLDER = "reproductions"
#: The checked summary the pages read, relative to the site.
SUMMARY = Path("_data") / "reproductions_summary.json"
#: The largest file read, in bytes.
MAX_BYTES = 64 * 1024
#: The deepest nesting of arrays and objects a file may hold (the schema needs 5).
MAX_DEPTH = 6
#: The most files of one post read; the rest (by name) are refused.
MAX_PER_POST = 100
#: The most verdicts one file may hold.
MAX_VERDICTS = 60
#: How a file names each outcome of :func:`sidebyside.publish.reproduce.compare`.
OUTCOMES = ("reproduces", "consistent", "contradicts", "not measured")
#: The library versions a file states, from the reader's record's provenance.
VERSIONS = ("python", "torch", "jax", "jaxlib", "flax", "optax", "cuda")

_NAME = re.compile(r"\A(\d{4}-\d{2}-\d{2})-([0-9a-f]{12}|unknown)(?:-([1-9][0-9]{0,2}))?\.json\Z")
_SLUG = r"\A[a-z0-9][a-z0-9-]{0,79}\Z"
# Characters no string may hold: controls, surrogates, noncharacters (Jekyll's YAML loader
# refuses some of them).
_UNSAFE = "[\x00-\x1f\x7f-\x9f\ud800-\udfff\ufdd0-\ufdef\ufffe\uffff]"
_UNSAFE_RE = re.compile(_UNSAFE)


def _text(most: int, *, null: bool = False, pattern: str | None = None) -> dict[str, Any]:
    return {"type": ["string", "null"] if null else "string", "maxLength": most,
            "not": {"type": "string", "pattern": _UNSAFE},
            **({"pattern": pattern} if pattern else {})}


def _object(properties: dict[str, Any], *, null: bool = False) -> dict[str, Any]:
    return {"type": ["object", "null"] if null else "object", "properties": properties,
            "required": sorted(properties), "additionalProperties": False}


_INT = {"type": ["integer", "null"], "minimum": 0, "maximum": 10**9}
_POSITIVE = {"type": "number", "exclusiveMinimum": 0, "maximum": 1e12}
_FIGURE = _object({"ratio": {**_POSITIVE, "type": ["number", "null"]},
                   "winner": _text(40, null=True),
                   "interval": {"type": ["array", "null"], "items": _POSITIVE, "minItems": 2,
                                "maxItems": 2}}, null=True)
_CPU = {"vendor": _text(40, null=True), "family": _INT, "model": _INT, "stepping": _INT,
        "model_name": _text(120, null=True), "l2_kib": _INT, "l3_kib": _INT, "clock_mhz": _INT,
        "vector": {"type": "array", "items": _text(20), "maxItems": 16}}
_GPU = {"model": _text(120, null=True), "memory_mib": _INT, "sm_clock_mhz": _INT,
        "memory_clock_mhz": _INT, "driver": _text(40, null=True)}
_DATE_TIME = r"\A\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,6})?(Z|[+-]\d{2}:\d{2})\Z"

#: What a reproduction file must be, in JSON Schema (draft 2020-12): every field required, no other.
SCHEMA: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    **_object({
        "format": {"const": "sidebyside-reproduction/1"},
        "slug": _text(80, pattern=_SLUG),
        "date": _text(10, pattern=r"\A\d{4}-\d{2}-\d{2}\Z"),
        "executed_at": _text(40, pattern=_DATE_TIME),
        "hardware": _text(200), "machine_kind": _text(300),
        "fingerprint": _object({"cpu": _object(_CPU, null=True), "gpu": _object(_GPU, null=True)},
                               null=True),
        "short_fingerprint": _text(12, pattern=r"\A([0-9a-f]{12}|unknown)\Z"),
        "profile": {"enum": list(PROFILES)},
        "versions": _object({k: _text(60, null=True) for k in VERSIONS}),
        "source_hash": _text(100), "commit": _text(64),
        "published": _object({"executed_at": _text(40, pattern=_DATE_TIME), "hardware": _text(200),
                              "source_hash": _text(100)}),
        "verdicts": {"type": "array", "maxItems": MAX_VERDICTS, "items": _object({
            "id": _text(200, null=True), "question": _text(300), "published": _FIGURE,
            "measured": _FIGURE, "outcome": {"enum": list(OUTCOMES)}})},
    }),
}


class ReproductionRefused(PublishError):
    """A submitted reproduction file that :func:`read` does not accept; the message says which and
    why."""


def short_fingerprint(found: Mapping[str, Any] | None) -> str:
    """The first 12 hex digits of the SHA-256 of a fingerprint (its canonical JSON); "unknown" for
    none."""
    if not isinstance(found, Mapping) or not found.get("cpu"):
        return "unknown"
    canonical = json.dumps(found, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return hashlib.sha256(canonical.encode("ascii")).hexdigest()[:12]


def _clean(value: Any, most: int) -> str:
    return _UNSAFE_RE.sub("", str(value))[:most]


def _maybe(value: Any, most: int) -> str | None:
    return None if value is None else _clean(value, most)


def _part(found: Any, fields: Mapping[str, Any]) -> dict[str, Any] | None:
    """One part of a fingerprint (cpu or gpu) cut to the schema's fields and types."""
    if not isinstance(found, Mapping):
        return None
    out: dict[str, Any] = {}
    for key, rule in fields.items():
        value = found.get(key)
        if rule is _INT:
            ok = isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= 10**9
            out[key] = value if ok else None
        elif key == "vector":
            out[key] = [_clean(v, 20) for v in (value if isinstance(value, list) else [])][:16]
        else:
            out[key] = _maybe(value, rule["maxLength"])
    return out


def _figure(v: Mapping[str, Any] | None) -> dict[str, Any] | None:
    def number(x: Any) -> float | None:
        ok = isinstance(x, (int, float)) and math.isfinite(x) and 0 < x <= 1e12
        return float(x) if ok else None

    if v is None:
        return None
    interval = [number(x) for x in (v.get("interval") or ())]
    return {"ratio": number(v.get("ratio")), "winner": _maybe(v.get("winner"), 40),
            "interval": interval if len(interval) == 2 and None not in interval else None}


def build(slug: str, published: Mapping[str, Any], mine: Mapping[str, Any],
          rows: Iterable[Any]) -> dict[str, Any]:
    """The reproduction file of the reader's run ``mine`` of ``slug`` against ``published``, from
    the rows of :func:`sidebyside.publish.reproduce.compare` (each with ``kind``, one of
    :data:`OUTCOMES`)."""
    prov, theirs = mine.get("provenance") or {}, published.get("provenance") or {}
    found = prov.get("fingerprint") if isinstance(prov.get("fingerprint"), Mapping) else None
    fingerprint = ({"cpu": _part(found.get("cpu"), _CPU), "gpu": _part(found.get("gpu"), _GPU)}
                   if found and isinstance(found.get("cpu"), Mapping) else None)
    executed = str(mine.get("executed_at") or "")
    return {"format": "sidebyside-reproduction/1", "slug": slug, "date": executed[:10],
            "executed_at": executed,
            "hardware": _clean(prov.get("device") or "unknown hardware", 200),
            "machine_kind": _clean(provenance.machine_kind(fingerprint), 300),
            "fingerprint": fingerprint, "short_fingerprint": short_fingerprint(fingerprint),
            "profile": mine.get("profile"),
            "versions": {k: _maybe(prov.get(k), 60) for k in VERSIONS},
            "source_hash": _clean(mine.get("source_hash") or "", 100),
            "commit": _clean(prov.get("git_sha") or "", 64),
            "published": {"executed_at": str(published.get("executed_at") or ""),
                          "hardware": _clean(theirs.get("device") or "unknown hardware", 200),
                          "source_hash": _clean(published.get("source_hash") or "", 100)},
            "verdicts": [{"id": _maybe(row.published.get("id"), 200),
                          "question": _clean(row.question, 300),
                          "published": _figure(row.published), "measured": _figure(row.reader),
                          "outcome": row.kind} for row in rows]}


@functools.lru_cache(maxsize=1)
def _validator():
    import jsonschema

    jsonschema.Draft202012Validator.check_schema(SCHEMA)
    return jsonschema.Draft202012Validator(SCHEMA)


_WHY = {"not": "holds a control character, a surrogate or a noncharacter",
        "maxLength": "is too long: at most {v} characters", "pattern": "does not have the form {v}",
        "maxItems": "holds too many items: at most {v}", "minItems": "holds too few items: {v}",
        "type": "is not of type {v}", "enum": "is not one of {v}", "const": "is not {v}"}


def _why(error: Any) -> str:
    """Why a value breaks the schema, in words that name the rule, never the whole value."""
    if error.validator in _WHY:
        shown = error.validator_value
        return _WHY[error.validator].format(v=json.dumps(shown, ensure_ascii=True)[:120])
    return _UNSAFE_RE.sub("?", error.message)[:160]


def problems(value: Any) -> list[str]:
    """``"<JSON path>: why"`` for every place where ``value`` breaks :data:`SCHEMA`, and where its
    ``short_fingerprint`` is not that of its ``fingerprint``; empty when it keeps to both."""
    errors = sorted(_validator().iter_errors(value), key=lambda e: e.json_path)
    found = [f"{e.json_path}: {_why(e)}" for e in errors]
    if not found and value["short_fingerprint"] != short_fingerprint(value["fingerprint"]):
        found.append("$.short_fingerprint: is not the digest of $.fingerprint")
    return found


def _text_of(value: Mapping[str, Any]) -> str:
    return json.dumps(value, indent=1, ensure_ascii=False, allow_nan=False) + "\n"


def write(site: Path, value: Mapping[str, Any]) -> Path:
    """Write the file :func:`build` made into ``<site>/reproductions/<slug>/`` as
    ``<date>-<short fingerprint>.json``, or with the first free suffix (``-2``, ``-3``, ...) where
    that name is taken: never over an existing file. Refuses (:class:`PublishError`) a file that
    :func:`read` would refuse. Returns its path."""
    found = problems(value)
    text = _text_of(value)
    if found or len(text.encode("utf-8")) > MAX_BYTES:
        why = "; ".join(found[:3]) or f"over {MAX_BYTES} bytes"
        raise PublishError(f"{value.get('slug')}: the reproduction file of this run would be "
                           f"refused ({why}): not written")
    folder = Path(site) / FOLDER / value["slug"]
    folder.mkdir(parents=True, exist_ok=True)
    stem = f"{value['date']}-{value['short_fingerprint']}"
    for n in range(1, 1000):
        path = folder / (f"{stem}.json" if n == 1 else f"{stem}-{n}.json")
        try:
            with open(path, "x", encoding="utf-8") as handle:  # exclusive: never replaces a file
                handle.write(text)
            return path
        except FileExistsError:
            continue
    raise PublishError(f"{folder} already holds 999 reproductions of {stem}: not written")


def _finite(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"the number {text[:40]} is not finite")
    return value


def _nan(text: str) -> Any:
    raise ValueError(f"{text} is not a number JSON allows")


def read(path: Path, slug: str) -> dict[str, Any]:
    """The reproduction file ``path`` of the post ``slug``, checked (see the module docstring);
    :class:`ReproductionRefused` naming it and why otherwise."""
    path = Path(path)

    def refuse(why: str) -> ReproductionRefused:
        return ReproductionRefused(f"{FOLDER}/{slug}/{_clean(path.name, 80)!r} is refused: {why}")

    named = _NAME.match(path.name)
    if not named:
        raise refuse("its name is not <YYYY-MM-DD>-<12 hex digits of the fingerprint>[-<n>].json")
    try:
        data = caps.read_regular(path, cap=MAX_BYTES)
        text = data.decode("utf-8")
    except PublishError as exc:
        raise refuse(str(exc).replace(str(path), "it")) from None
    except UnicodeDecodeError:
        raise refuse("it is not UTF-8") from None
    depth = caps.json_depth(text)
    if depth > MAX_DEPTH:
        raise refuse(f"it nests {depth} levels deep, over the cap of {MAX_DEPTH}")
    try:
        value = json.loads(text, parse_float=_finite, parse_constant=_nan)
    except (ValueError, RecursionError) as exc:
        raise refuse(f"it is not JSON with finite numbers ({_clean(exc, 160)})") from None
    found = problems(value)
    if found:
        more = f"; and {len(found) - 5} more" if len(found) > 5 else ""
        raise refuse("; ".join(found[:5]) + more)
    said = (value["slug"], value["date"], value["short_fingerprint"])
    if said != (slug, named.group(1), named.group(2)):
        raise refuse(f"it says slug {said[0]!r}, date {said[1]}, fingerprint {said[2]}: its folder "
                     "and name say otherwise")
    return value


def _same(published: Mapping[str, Any] | None, value: Mapping[str, Any]) -> bool | None:
    """Whether the file's machine has the published run's fingerprint (None: one has none)."""
    from sidebyside.publish.reruns import differences

    if published is None:
        return None
    kind = "gpu" if value["profile"] == "gpu" else "cpu"
    reader = {"provenance": {"fingerprint": value["fingerprint"], "device_kind": kind}}
    differs = differences(published, reader)
    return None if differs is None else not differs


def _row(name: str, value: Mapping[str, Any],
         published: Mapping[str, Any] | None) -> dict[str, Any]:
    counts = {k: sum(v["outcome"] == k for v in value["verdicts"]) for k in OUTCOMES}
    versions = ", ".join(f"{k} {v}" for k, v in value["versions"].items() if v)
    return {"file": f"{FOLDER}/{value['slug']}/{name}", "date": value["date"],
            "hardware": value["hardware"], "machine_kind": value["machine_kind"],
            "profile": value["profile"], "versions": versions,
            "same_fingerprint": _same(published, value),
            "same_version": bool(published)
            and value["source_hash"] == published.get("source_hash"),
            "reproduces": counts["reproduces"], "consistent": counts["consistent"],
            "contradicts": counts["contradicts"], "not_measured": counts["not measured"]}


def _post(site: Path, slug: str, refused: list[str]) -> dict[str, Any]:
    """What a post's page shows of its accepted files (the refused ones added to ``refused``)."""
    from sidebyside.publish.cache import published_record

    folder = Path(site) / FOLDER / slug
    names = sorted(os.listdir(folder)) if folder.is_dir() and not folder.is_symlink() else []
    if len(names) > MAX_PER_POST:
        refused.append(f"{FOLDER}/{slug}/ holds {len(names)} files, over the cap of "
                       f"{MAX_PER_POST}: the {len(names) - MAX_PER_POST} last by name are refused")
        names = names[:MAX_PER_POST]
    try:
        published = published_record(site, slug)
    except PublishError:
        published = None
    rows, before = [], len(refused)
    for name in names:
        try:
            rows.append(_row(name, read(folder / name, slug), published))
        except ReproductionRefused as exc:
            refused.append(str(exc))
    rows.sort(key=lambda r: (r["date"], r["file"]), reverse=True)
    other = [r for r in rows if r["same_fingerprint"] is not True]
    return {"rows": other, "other_hardware": len(other), "same_fingerprint": len(rows) - len(other),
            "refused": len(refused) - before,
            **{k: sum(r[k] for r in other) for k in ("reproduces", "consistent", "contradicts")}}


def summary(site: Path) -> tuple[dict[str, Any], list[str]]:
    """``({"posts": {slug: ...}}, refused)``: per published post (``_data/results/<slug>.json``),
    the rows of its accepted files from machines of another fingerprint than its published run's
    (newest first), their count, the count of those of its own fingerprint (the verdict box's
    spread between runs), and the verdicts they reproduce, find consistent and contradict; and one
    line per refused file (or folder of no published post)."""
    site, refused = Path(site), []
    results = Path(site) / "_data" / "results"
    slugs = sorted(p.stem for p in results.glob("*.json") if re.match(_SLUG, p.stem)) \
        if results.is_dir() else []
    posts = {slug: _post(site, slug, refused) for slug in slugs}
    folder = site / FOLDER
    if folder.is_dir():
        strays = sorted(n for n in os.listdir(folder) if n not in posts)
        refused += [f"{FOLDER}/{_clean(n, 80)!r} is refused: no published post has that slug"
                    for n in strays[:20]]
    return {"posts": posts}, refused


def write_summary(site: Path) -> Path:
    """Write :func:`summary` to ``<site>/_data/reproductions_summary.json`` (atomically), warn of
    each refused file on stderr, and return the path."""
    found, refused = summary(site)
    for line in refused:
        warn(line)
    path = Path(site) / SUMMARY
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, json.dumps(found, indent=1, sort_keys=True, ensure_ascii=False) + "\n")
    return path
