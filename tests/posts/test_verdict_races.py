"""Every post names each race it judges: each call that builds or frames a verdict passes ``race=``.

A verdict's id (:func:`sidebyside.lab.framing.verdict_id`) is its race's name and a digest of its
size; a verdict built without a race's name falls back to its question's words, so rewording a question
would break the match of a reader's run with the published one. Each post's report tests check the
verdicts it builds from fixture data (the ``framed_verdicts`` fixture); this test reads every post's
code and notebook for a verdict built without a race's name, so a new race cannot slip in unnamed. A plain
``verdict.Verdict(...)`` is not checked here: the posts hand each to ``framing.frame`` with its race.
"""

from __future__ import annotations

import ast
from pathlib import Path

from conftest import ROOT

#: (module, function) calls that build or frame a verdict, as the posts spell them.
BUILDERS = {("verdict", "speed"), ("verdict", "seeds"), ("verdict", "not_applied"), ("ladders", "ladder"),
            ("framing", "frame")}


def unnamed(source: str, name: str) -> list[str]:
    """``name:line module.function`` for each verdict-building call in ``source`` without ``race=``."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                and isinstance(node.func.value, ast.Name) and (node.func.value.id, node.func.attr) in BUILDERS
                and not any(k.arg in ("race", None) for k in node.keywords)):  # None: a **mapping may hold it
            found.append(f"{name}:{node.lineno} {node.func.value.id}.{node.func.attr}")
    return found


def _sources() -> dict[str, str]:
    files = sorted((ROOT / "src" / "sidebyside" / "posts").rglob("*.py")) + sorted((ROOT / "notebooks").glob("*.py"))
    return {str(Path(f).relative_to(ROOT)): Path(f).read_text() for f in files}


def test_every_verdict_a_post_builds_passes_its_races_name():
    sources = _sources()
    assert any(name.endswith("report.py") for name in sources)
    problems = [p for name, text in sources.items() for p in unnamed(text, name)]
    assert not problems, "verdicts built without race= (the race's name, for the verdict's id): " + "; ".join(problems)


def test_the_check_finds_a_verdict_without_a_race():
    source = ("v = verdict.speed(a, b, question='Which is faster?')\n"
              "w = ladders.ladder(e, question='q', race='race/best')\n"
              "x = framing.frame(v, scale=s, key='race/best')\n")
    assert unnamed(source, "post.py") == ["post.py:1 verdict.speed", "post.py:3 framing.frame"]
