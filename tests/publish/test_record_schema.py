"""A results record the site's pages cannot show is refused before it is published.

The class: any field that a template reads (``_includes/verdict.html``,
``provenance.html``, the post's front matter) or that the publisher's pages read
(:mod:`sidebyside.publish.frontpage`, :mod:`sidebyside.publish.anomalies`), given a
value of another JSON type (a mapping with a ``size`` key where a list is read, a list
where a mapping is, text where a number is, ...). Each is refused by
:func:`sidebyside.publish.records.check_record` (``jsonschema`` against
:data:`sidebyside.publish.records.RECORD_SCHEMA`) with a message naming the field, and
the publication changes nothing. Every published record keeps to the schema, the schema
types every field the templates read (read from the templates themselves), and (slow) a
site whose record holds every field at its allowed types, null included, builds.
"""

from __future__ import annotations

import copy
import json
import re
from typing import Any

import pytest
from conftest import ROOT, make_site

from sidebyside import publish
from sidebyside.publish import frontpage, records
from sidebyside.publish.common import PublishError

SCHEMA = records.RECORD_SCHEMA
# A value of each JSON type, and the schema types it satisfies (a bool is not an integer in JSON).
POOL = [({"size": 3, "first": "x"}, {"object"}), ([1, 2], {"array"}), ("text", {"string"}), (3, {"integer", "number"}),
        (2.5, {"number"}), (True, {"boolean"}), (None, {"null"})]


def _types(node: dict[str, Any]) -> set[str]:
    kind = node.get("type", ())
    return {kind} if isinstance(kind, str) else set(kind)


def _paths(node: dict[str, Any], path: tuple = ()):
    """Every (path, schema node) of the schema: a property by its name, an item of a list as index 0,
    an entry of a free-keyed mapping as "torch"."""
    yield path, node
    for name, child in node.get("properties", {}).items():
        yield from _paths(child, path + (name,))
    if isinstance(node.get("additionalProperties"), dict):
        yield from _paths(node["additionalProperties"], path + ("torch",))
    if isinstance(node.get("items"), dict):
        yield from _paths(node["items"], path + (0,))


def _put(record: dict, path: tuple, value: Any) -> dict:
    """``record`` with ``value`` at ``path``, the mappings and lists on the way made as needed."""
    record = copy.deepcopy(record)
    here = record
    for part, following in zip(path, path[1:]):
        empty = [] if isinstance(following, int) else {}
        if isinstance(part, int):
            if not here:
                here.append(empty)
            here = here[0]
        else:
            if not isinstance(here.get(part), type(empty)):
                here[part] = empty
            here = here[part]
    if isinstance(path[-1], int):
        here[:] = [value] * max(1, len(here))
    else:
        here[path[-1]] = value
    return record


def _field(path: tuple) -> str:
    return "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in path).lstrip(".")


def _wrong_values(node: dict[str, Any]) -> list[Any]:
    if "enum" in node:
        return ["not one of them", {"size": 1}, 3]
    allowed = _types(node)
    if "format" in node:
        return ["2026-02-31T10:00:00", "yesterday", "{{ site.time }}"]
    return [value for value, satisfies in POOL if allowed and not satisfies & allowed]


TYPED = [(path, node) for path, node in _paths(SCHEMA) if path and (_types(node) or "enum" in node)]


def _base() -> dict:
    return {"slug": "hostile-output", "notebook": "n", "profile": "smoke", "executed_at": "2026-11-22T00:00:00+00:00",
            "source_hash": "k", "provenance": {"device": "cpu"}, "metrics": {}}


@pytest.mark.parametrize("path, node", TYPED, ids=[_field(p) for p, _ in TYPED])
def test_a_field_of_another_type_is_refused_naming_it(path, node):
    values = _wrong_values(node)
    assert values, path
    for value in values:
        record = _put(_base(), path, value)
        with pytest.raises(PublishError) as err:
            records.check_record(record, "hostile-output")
        said = str(err.value)
        assert f"\n  {_field(path)}: must be" in said, (value, said)
        assert "Nothing published was changed" in said


def test_every_field_names_its_own_path_even_many_at_once():
    record = _base()
    for path, node in TYPED:
        record = _put(record, path, _wrong_values(node)[0]) if len(path) == 1 else record
    problems = records.schema_problems(record)
    assert {p.split(":")[0] for p in problems} == {_field(path) for path, _ in TYPED if len(path) == 1}


def test_a_verdicts_mapping_with_a_size_key_and_a_mapping_of_pins_are_refused():
    """The round's two records, as instances of the class above."""
    record = _base()
    record["metrics"]["verdicts"] = {"size": 2, "0": {"question": "q"}}
    record["provenance"]["differs_from_pins"] = {"size": 1, "first": "torch 0.0"}
    problems = records.schema_problems(record)
    assert problems == ["metrics.verdicts: must be an array, not an object",
                        "provenance.differs_from_pins: must be an array, not an object"]


def test_every_published_record_keeps_to_the_schema():
    published = sorted((ROOT / "_data" / "results").glob("*.json"))
    assert published
    for path in published:
        assert records.schema_problems(json.loads(path.read_text(encoding="utf-8"))) == [], path.name


def test_records_of_the_tests_minimal_shapes_keep_to_it():
    """Fields may be absent: what a template does not find, it does not print."""
    for record in ({}, {"v": 1}, {"metrics": {"n": 3, "verdicts": []}}, _base(),
                   _put(_base(), ("metrics", "verdicts"), [{"question": "q"}])):
        assert records.schema_problems(record) == [], record


# The variables of the templates that hold a part of the results record, and the schema path each stands for.
# The names the templates give the results record ("run" in provenance.html; in verdict.html a run of the
# board, not of the record), one of its runs ("rec": the top level or gpu_run, of the same schema) and its
# GPU run ("gpu", in provenance.html).
TEMPLATE_VARIABLES = {"result": (), "run": (), "rec": (), "gpu": ("gpu_run",), "verdicts": ("metrics", "verdicts"),
                      "v": ("metrics", "verdicts", 0),
                      "k": ("metrics", "verdicts", 0, "contestants", "torch"),
                      "s": ("metrics", "verdicts", 0, "sides", "torch"),
                      "first": ("metrics", "verdicts", 0, "sides", "torch")}
LIQUID_PROPERTIES = {"size", "first", "last"}


def _node(path: tuple) -> dict | None:
    for found, node in _paths(SCHEMA):
        if found == path:
            return node
    return None


def test_the_schema_types_every_field_the_templates_read():
    read = set()
    for template in sorted((ROOT / "_includes").glob("*.html")) + sorted((ROOT / "_layouts").glob("*.html")):
        text = template.read_text()
        for variable, field in re.findall(r"\b(result|run|rec|gpu|verdicts|v|k|s|first)((?:\.[a-z_]+)+)", text):
            if variable in ("v", "k", "s", "first", "rec") and not template.name.startswith("verdict"):
                continue
            if (variable == "run" and template.name == "verdict.html") or (
                    variable == "gpu" and template.name != "provenance.html"):
                continue
            parts = [p for p in field.strip(".").split(".") if p not in LIQUID_PROPERTIES]
            read.add(TEMPLATE_VARIABLES[variable] + tuple(parts))
    assert ("provenance", "differs_from_pins") in read and ("metrics", "verdicts", 0, "scale", "text") in read
    assert ("gpu_run", "provenance", "git_sha") in read and ("gpu_run", "executed_at") in read
    untyped = sorted(_field(path) for path in read if not (_node(path) and (_types(_node(path)) or
                                                                             "enum" in _node(path))))
    assert not untyped, f"fields a template reads that the schema does not type: {untyped}"
    # and the front matter's fields that come from the record
    for path in [("profile",), ("executed_at",), ("source_hash",), ("parameters",), ("provenance", "device"),
                 ("provenance", "git_sha"), ("provenance", "matmul_precision"), ("provenance", "torch")]:
        assert _node(path) and _types(_node(path)) | set(_node(path).get("enum", ())), path


def test_publish_refuses_such_a_record_and_keeps_what_was_published(tmp_path):
    site = make_site(tmp_path / "site")
    info, _ = publish.read_notebook_info(ROOT / "tests" / "fixtures" / "hostile" / "00_hostile.py")
    publish.publish(site, info, "---\nlayout: post\n---\nfirst\n", {"a.png": b"x"}, _base())
    before = {p.relative_to(site).as_posix(): p.read_bytes() for p in sorted(site.rglob("*")) if p.is_file()
              and ".sidebyside" not in p.parts}
    bad = _put(_base(), ("metrics", "verdicts"), {"size": 1})
    with pytest.raises(PublishError, match=r"metrics\.verdicts: must be an array, not an object"):
        publish.publish(site, info, "---\nlayout: post\n---\nsecond\n", {"a.png": b"y"}, bad)
    after = {p.relative_to(site).as_posix(): p.read_bytes() for p in sorted(site.rglob("*")) if p.is_file()
             and ".sidebyside" not in p.parts}
    assert after == before


def test_a_published_record_that_breaks_the_schema_is_named_by_the_site_check(tmp_path, capsys):
    site = make_site(tmp_path / "site")
    hostile = ROOT / "tests" / "fixtures" / "hostile"
    info, _ = publish.read_notebook_info(hostile / "00_hostile.py")
    (site / "_data" / "results").mkdir(parents=True)
    record = {**_base(), "slug": info.slug, "provenance": {"device": "cpu", "differs_from_pins": {"size": 1}}}
    (site / "_data" / "results" / f"{info.slug}.json").write_text(json.dumps(record))
    code = publish.list_notebooks(site=site, notebooks=hostile, params_dir=hostile / "params")
    err = capsys.readouterr().err
    assert code == 2 and "provenance.differs_from_pins: must be an array" in err, err


def _every_field(null: bool) -> dict:
    """A record with every field of the schema at an allowed type: null wherever null is allowed (``null``),
    else a value of the first type allowed."""
    sample = {"object": {}, "array": [], "string": "{{ site.title }} <b>x</b> 🚀", "integer": 3, "number": 0.25,
              "boolean": True, "null": None}
    record: dict = {}
    for path, node in sorted(_paths(SCHEMA), key=lambda pn: len(pn[0])):
        if not path:
            continue
        allowed = _types(node)
        if "const" in node:
            value = node["const"]
        elif "enum" in node:
            value = node["enum"][-1]
        elif "format" in node:
            value = "2026-11-22T00:00:00+00:00"
        elif null and "null" in allowed:
            value = None
        elif "minItems" in node:
            value = [0.5] * node["minItems"]
        elif allowed - {"null"}:
            kind = sorted(allowed - {"null"}, key=["object", "array", "string", "number", "integer", "boolean"].index)[0]
            value = copy.deepcopy(sample[kind])
        else:
            continue
        try:
            record = _put(record, path, value) if not _under_null(record, path) else record
        except (AttributeError, TypeError, IndexError):
            continue
    return record


def _under_null(record: dict, path: tuple) -> bool:
    here: Any = record
    for part in path[:-1]:
        if here is None:
            return True
        if isinstance(part, int):
            if not isinstance(here, list) or not here:
                return False
            here = here[0]
        else:
            if not isinstance(here, dict) or part not in here:
                return False
            here = here[part]
    return here is None or not isinstance(here, (dict, list))


@pytest.mark.slow
@pytest.mark.parametrize("null", [False, True], ids=["every-field", "null-where-allowed"])
def test_a_record_at_the_schemas_allowed_types_builds(tmp_path, null):
    from test_site import _jekyll

    # a cpu run at the top level, so that its GPU run (gpu_run, every field filled too) may stand beside it
    record = {**_every_field(null), "slug": "hostile-output", "profile": "cpu"}
    assert records.schema_problems(record) == []
    assert record["metrics"]["verdicts"], record
    site = make_site(tmp_path / "site")
    info, _ = publish.read_notebook_info(ROOT / "tests" / "fixtures" / "hostile" / "00_hostile.py")
    post = ("---\nlayout: post\ntitle: T\nslug: hostile-output\ndate: 2026-11-22\nprofile: smoke\n"
            "executed_at: '2026-11-22T00:00:00+00:00'\n---\nbody\n")
    publish.publish(site, info, post, {"a.png": b"x"}, record)
    frontpage.write_board(site, {}, {"hostile-output"})  # the publisher's pages read it too: the home page, the verdict box
    built = _jekyll(site)
    page = (built / "posts" / "hostile-output" / "index.html").read_text()
    assert 'class="verdict"' in page and "Liquid" not in page
