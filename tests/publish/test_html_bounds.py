"""HTML outputs are bounded in depth, elements and bytes before kramdown reads them.

The class: an output (``text/html``, or ``text/markdown`` and ``text/latex``, which the
publisher turns into HTML) whose markup, however it is written (closed or unclosed
tags, any allowed tag or a mix, tables in tables, tags the sanitiser drops, Markdown
blockquotes and lists), nests deeper, holds more elements or takes more bytes than
kramdown can read in time or at all. kramdown parses nested HTML by recursion (at about
1,500 levels Ruby's stack overflows and the whole site stops building) and reads a block
in a time that grows with its elements times its bytes; it has no limit of its own to
set. So every sanitised output keeps to :data:`~sidebyside.publish.escape.MAX_HTML_DEPTH`,
:data:`~sidebyside.publish.escape.MAX_HTML_ELEMENTS` and
:data:`~sidebyside.publish.escape.MAX_HTML_BYTES`, or is left out with a note saying which
limit and by how much; and (slow) a site with outputs at those limits builds.
"""

from __future__ import annotations

import re

import pytest
from conftest import ROOT, make_site

from sidebyside import publish
from sidebyside.publish import escape
from sidebyside.publish.escape import MAX_HTML_BYTES, MAX_HTML_DEPTH, MAX_HTML_ELEMENTS
from sidebyside.publish.markdown import safe_markdown

LEFT_OUT = '<p class="output-left-out">[an HTML output was left out: '


def _closed(tag: str):
    return lambda n: f"<{tag}>" * n + "x" + f"</{tag}>" * n


NESTINGS = {
    "div": _closed("div"), "span": _closed("span"), "b": _closed("b"), "blockquote": _closed("blockquote"),
    "unclosed-div": lambda n: "<div>" * n + "x",
    "unclosed-inline": lambda n: "<b><i><em><strong><u><s><small><sub>" * -(-n // 8) + "x",
    "mixed": lambda n: "".join(f"<{t}>" for t in (["div", "span", "p", "em"] * n)[:n]) + "x",
    "lists": lambda n: "<ul><li>" * -(-n // 2) + "x",
    "tables": lambda n: "<table><tbody><tr><td>" * -(-n // 4) + "x",
    "dropped-tags": _closed("x-custom"),  # the sanitiser drops them: nothing nests
    "attributes": lambda n: '<div class="a" title="b">' * n + "x" + "</div>" * n,
}
#: Those the HTML parser nests as deep as written, whatever their depth (it closes some tags by itself).
DEEP = {"div", "span", "b", "blockquote", "unclosed-div", "unclosed-inline", "attributes", "tables", "lists"}


@pytest.mark.parametrize("n", [MAX_HTML_DEPTH + 1, 1_500, 10_000])
@pytest.mark.parametrize("name", sorted(NESTINGS))
def test_an_output_nested_past_the_limit_never_reaches_kramdown(name, n):
    import nh3

    markup = NESTINGS[name](n)
    out = escape.safe_html(markup)
    depth, elements = escape.html_shape(out)
    assert depth <= MAX_HTML_DEPTH and elements <= MAX_HTML_ELEMENTS and len(out.encode()) <= MAX_HTML_BYTES
    # Where the HTML parser really nests it that deep (it closes a <p> or a <li> by itself), it is left out.
    parsed = escape.html_shape(nh3.clean(markup))  # (depth, elements), read once
    nested = parsed[0] > MAX_HTML_DEPTH
    assert nested or name not in DEEP, (name, parsed)
    if nested:
        assert out.startswith(LEFT_OUT), out[:200]
        assert n > 1_500 or f"it nests {parsed[0]:,} elements deep" in out, out


@pytest.mark.parametrize("name", sorted(set(NESTINGS) - {"dropped-tags"}))
def test_an_output_at_the_depth_limit_is_kept_whole(name):
    markup = NESTINGS[name](MAX_HTML_DEPTH)
    out = escape.safe_html(markup)
    assert not out.startswith(LEFT_OUT), out[:200]
    assert escape.html_shape(out)[0] <= MAX_HTML_DEPTH and "x" in out


@pytest.mark.parametrize("markdown", [
    "> " * 5_000 + "deep", "\n".join("  " * i + "- x" for i in range(2_000)),
    "\n".join("> " * i + "1. x" for i in range(500)), "*" * 5_000 + "x" + "*" * 5_000,
    "[" * 5_000 + "x" + "](y)" * 5_000,
], ids=["blockquotes", "lists", "quoted-lists", "emphasis", "links"])
def test_markdown_outputs_keep_within_the_bounds_too(markdown):
    out = safe_markdown(markdown, "slug")
    depth, elements = escape.html_shape(out)
    assert depth <= MAX_HTML_DEPTH and elements <= MAX_HTML_ELEMENTS and len(out.encode()) <= MAX_HTML_BYTES


def test_the_element_and_byte_limits_hold_at_and_past_their_edge():
    at = "<span>x</span>" * MAX_HTML_ELEMENTS
    assert escape.safe_html(at) == at
    over = escape.safe_html(at + "<span>x</span>")
    assert over.startswith(LEFT_OUT) and f"it holds {MAX_HTML_ELEMENTS + 1:,} elements, more than the" in over
    text = "<p>" + "y" * (MAX_HTML_BYTES - 7) + "</p>"
    assert escape.safe_html(text) == text
    over = escape.safe_html(text.replace("<p>", "<p>y"))
    assert over.startswith(LEFT_OUT) and f"it takes {MAX_HTML_BYTES + 1:,} bytes, more than the" in over


def test_html_shape_reads_void_elements_and_any_depth():
    assert escape.html_shape("<p>a<br>b<img src=x><hr/></p>") == (1, 4)
    assert escape.html_shape("<div>" * 200_000) == (200_000, 200_000)  # no recursion: no depth stops it


def _notebook(outputs: list[dict]):
    import nbformat
    from nbformat.v4 import new_code_cell, new_notebook, new_output

    cells = [new_code_cell(f"show({i})", outputs=[new_output("display_data", data=data)])
             for i, data in enumerate(outputs)]
    return nbformat.from_dict(new_notebook(cells=cells, metadata={"kernelspec": {"name": "python3",
                                                                                 "display_name": "Python 3"}}))


AT_THE_LIMITS = {
    "depth": "<div>" * MAX_HTML_DEPTH + "AT-DEPTH" + "</div>" * MAX_HTML_DEPTH,
    "elements": "<span>e</span>" * (MAX_HTML_ELEMENTS - 1) + "<b>AT-ELEMENTS</b>",
    "bytes": "<p>AT-BYTES " + "z\n" * 49_000 + "</p>",  # 98 KB in, about 294 KB once newlines are written &#10;
}
PAST_THE_LIMITS = {"depth": "<b>" * 2_000 + "PAST", "elements": "<i>i</i>" * (MAX_HTML_ELEMENTS + 1),
                   "bytes": "<p>" + "z\n" * 80_000 + "</p>"}


def _render(capsys):
    info = publish.NotebookInfo(ROOT / "tests" / "fixtures" / "hostile" / "00_hostile.py", "hostile-output", "T",
                                "2026-11-01", "D", [])
    record = {"slug": "hostile-output", "profile": "smoke", "executed_at": "2026-11-22T00:00:00+00:00",
              "source_hash": "k", "provenance": {"device": "cpu", "git_sha": "abc"}, "metrics": {}}
    outputs = [{"text/html": html, "text/plain": "x"} for html in [*AT_THE_LIMITS.values(), *PAST_THE_LIMITS.values()]]
    post, files = publish.render(_notebook(outputs), record, info, {"repository": "o/r"}, root=ROOT)
    return info, record, post, files, capsys.readouterr().err


def test_a_post_holds_its_outputs_at_the_limits_and_notes_for_those_past_them(capsys):
    _, _, post, _, err = _render(capsys)
    blocks = re.findall(r'<div class="output-html" markdown="0">\n(.*?)\n</div>', post)
    assert len(blocks) == 6
    for block in blocks:
        depth, elements = escape.html_shape(block)
        assert depth <= MAX_HTML_DEPTH and elements <= MAX_HTML_ELEMENTS and len(block.encode()) <= MAX_HTML_BYTES
    kept, left = blocks[:3], blocks[3:]
    assert "AT-DEPTH" in kept[0] and escape.html_shape(kept[0])[0] == MAX_HTML_DEPTH
    assert "AT-ELEMENTS" in kept[1] and escape.html_shape(kept[1])[1] == MAX_HTML_ELEMENTS
    assert "AT-BYTES" in kept[2] and len(kept[2].encode()) > 0.9 * MAX_HTML_BYTES
    assert all(block.startswith(LEFT_OUT) for block in left)
    for said in ("deeper than the 32", f"more than the {MAX_HTML_ELEMENTS:,} a post shows",
                 f"more than the {MAX_HTML_BYTES:,} a post shows"):
        assert said in post and said in err


@pytest.mark.slow
def test_a_site_with_outputs_at_the_limits_builds(tmp_path, capsys):
    from test_site import _jekyll

    info, record, post, files, _ = _render(capsys)
    site = make_site(tmp_path / "site")
    publish.publish(site, info, post, files, record)
    built = _jekyll(site)
    page = (built / "posts" / "hostile-output" / "index.html").read_text()
    for marker in ("AT-DEPTH", "AT-ELEMENTS", "AT-BYTES"):
        assert marker in page
    assert page.count("an HTML output was left out") == 3
