"""Output crafted to break the page cannot leave its block.

The fixture notebook tests/fixtures/hostile/00_hostile.py prints fences,
script tags, event handlers, kramdown extensions, Liquid, control characters,
and local paths and the host name followed by every kind of punctuation; its
metadata holds HTML. Its scripts set ``window.__pwned_output`` (or
``__pwned_meta``) and log a console error, so a browser sees any that ran.

Checked three ways: the Markdown the publisher writes (a kramdown-like
reading of its fences: outside them, no raw HTML or extension), a synthetic
executed notebook with the outputs papermill cannot produce (an error
traceback, JavaScript), and (slow) the HTML that Jekyll builds, opened in
headless Chromium. Nothing here writes into the repo's _posts/, images/ or
_data/ (conftest checks).
"""

from __future__ import annotations

import json
import os
import re
import socket
import sys
import tempfile
from pathlib import Path

import pytest
from conftest import ROOT, make_site

from sidebyside import publish
from sidebyside.publish import escape
from sidebyside.publish.rendering import scrub_rules

HOSTILE = ROOT / "tests" / "fixtures" / "hostile"
SLUG = "hostile-output"
PWN = "<script>window.__pwned_output = 1; console.error('pwned by output')</script>"
CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def _secrets() -> list[str]:
    """Every form of a local path or the host name that must not reach a post."""
    places = {str(ROOT), os.path.realpath(ROOT), sys.prefix, os.path.realpath(sys.prefix), str(Path.home()),
              tempfile.gettempdir()}
    hosts = {socket.gethostname(), socket.gethostname().split(".")[0], socket.getfqdn()} - {"localhost", ""}
    return sorted(places | hosts | {h.upper() for h in hosts})


def _outside_fences(markdown: str) -> str:
    """The text of ``markdown`` outside its fenced code blocks, read as
    kramdown does: a fence closes only with a line of at least as many of
    its characters; an unclosed fence fails the test (it would swallow the
    rest of the post)."""
    lines, outside, i = markdown.split("\n"), [], 0
    while i < len(lines):
        opening = re.match(r"^ {0,3}(`{3,}|~{3,})", lines[i])
        if not opening:
            outside.append(lines[i])
            i += 1
            continue
        fence = opening.group(1)
        closing = re.compile(r"^ {0,3}" + re.escape(fence[0]) + "{" + str(len(fence)) + r",}\s*$")
        i += 1
        while i < len(lines) and not closing.match(lines[i]):
            i += 1
        assert i < len(lines), f"unclosed fence {fence!r}: it would swallow the rest of the post"
        i += 1
    return "\n".join(outside)


def _split(post: str) -> tuple[dict, str]:
    """Front matter and body, split as Jekyll does (``---`` alone at the start of a line)."""
    import yaml

    _, header, body = re.split(r"^---[ \t]*\n", post, maxsplit=2, flags=re.M)
    return yaml.safe_load(header), body


def _check_markdown(post: str) -> None:
    _, body = _split(post)
    prose = _outside_fences(body)
    # Raw HTML outside code may only be the template's own wrappers.
    allowed = escape.ALLOWED_TAGS | {"details", "summary"}
    for tag, attributes in re.findall(r"</?([a-zA-Z][\w-]*)([^>]*)>?", prose):
        assert tag.lower() in allowed, f"raw HTML tag outside code: {tag}"
        assert not re.search(r"\bon\w+\s*=|javascript:", attributes, re.I), f"<{tag}{attributes}>"
    assert "<script" not in prose.lower()
    assert not re.search(r"\]\(\s*<?\s*javascript:", prose, re.I), "a javascript: link"
    assert not re.search(r"(?<!\\)\{:", prose), "a kramdown extension or attribute list reached the post"
    assert not CONTROL.search(post), "control characters reached the post"
    for secret in _secrets():
        assert secret not in post, secret


# --------------------------------------------------------------------------- escape, unit by unit


def test_fence_is_longer_than_any_backtick_run():
    block = escape.fenced("a\n```\n<script>x</script>\n`````\nb", "text")
    assert block.startswith("``````text\n") and block.endswith("\n``````")
    assert escape.fenced("plain").startswith("```\n")
    assert _outside_fences(block) == ""


def test_safe_html_keeps_tables_and_drops_everything_active():
    out = escape.safe_html('<table border="1" class="dataframe" onclick="x()"><tr><td>1 &lt; 2</td></tr></table>'
                           "<script>alert(1)</script><style>p{}</style><img src=x onerror=alert(1)>"
                           '<a href="javascript:alert(1)">a</a></div><div><b>open')
    assert out == ('<table border="1" class="dataframe"><tbody><tr><td>1 &lt; 2</td></tr></tbody></table><img src="x">'
                   '<a rel="noopener noreferrer nofollow">a</a><div><b>open</b></div>'
                   '<p class="unsafe-url-removed">1 unsafe link removed from this output</p>')


def test_safe_markdown_escapes_html_and_extensions_outside_code_and_math():
    out = escape.safe_markdown("**b** <i>x</i> `<code>` $$a<b$$ {::nomarkdown}<s>{:/} [l](javascript:x)\n```py\n<raw>")
    assert "**b** &lt;i>x&lt;/i> `<code>` $$a<b$$ \\{::nomarkdown}&lt;s>\\{:/} [l](#unsafe-url-removed) (unsafe link removed)" in out
    assert out.endswith("```py\n<raw>\n```")  # the unclosed fence is closed, its text kept
    # Where kramdown would not read a code span, what looks like one is escaped too.
    assert escape.safe_markdown("\\`<script>\\`") == "\\`&lt;script>\\`"  # escaped backticks
    assert escape.safe_markdown("# H `x\n<script>y</script>`") == "# H `x\n&lt;script>y&lt;/script>`"  # two blocks


def test_drop_controls_and_alt_text():
    assert escape.drop_controls("a\x00b\x07c\x08d\te\r\nf\u202eg\x85h") == "abcd\te\nfgh"
    assert escape.image_alt("a] (x) [b\n<c>") == "a\\] (x) \\[b \\<c\\>"


def test_scrub_catches_paths_and_host_before_any_punctuation(tmp_path):
    rules = scrub_rules(tmp_path)
    host = socket.gethostname()
    for after in ")],;.:'\"> \n":
        for secret in (str(tmp_path), sys.prefix, str(Path.home()), host, host.upper()):
            out = publish.scrub(f"({secret}{after}", rules)
            assert secret not in out, (secret, after, out)
    out = publish.scrub(f"{tmp_path}fs /vmap", rules)  # a longer name is not the path, vmap not the host "vm"
    assert not out.startswith(".fs") and out.endswith("_h0fs /vmap"[-len(tmp_path.name) - 7:]), out


# --------------------------------------------------------------------------- a synthetic executed notebook


def test_render_escapes_every_kind_of_output():
    import nbformat
    from nbformat.v4 import new_code_cell, new_notebook, new_output

    cells = [
        new_code_cell("raise ValueError('```')", outputs=[new_output(
            "error", ename="ValueError", evalue="```",
            traceback=[f"\x1b[31mValueError\x1b[0m: ```\n{PWN} in {ROOT}/x.py, line 1;", "```", PWN])]),
        new_code_cell("js()", outputs=[new_output("display_data", data={
            "application/javascript": "window.__pwned_output = 1", "text/plain": "<JS>"})]),
        new_code_cell("html()", outputs=[new_output("display_data", data={
            "text/html": f"</div>{PWN}<p>kept</p>", "text/plain": "x"})]),
        new_code_cell("md()", outputs=[new_output("display_data", data={"text/markdown": f"~~~\n{PWN}"})]),
        new_code_cell("s = '```'", outputs=[new_output("stream", name="stdout", text=f"```\n{PWN}\n\x07({ROOT})\n")]),
    ]
    nb = new_notebook(cells=cells, metadata={"kernelspec": {"name": "python3", "display_name": "Python 3"}})
    info = publish.NotebookInfo(HOSTILE / "00_hostile.py", SLUG, "T <i>x</i>\x07", "2026-11-01", "D\n---\nx: 1",
                                ["<script>a</script>"])
    record = {"profile": "smoke", "executed_at": "2026-11-22T00:00:00+00:00", "source_hash": "k",
              "provenance": {"device": f"cpu on {socket.gethostname()}", "git_sha": "abc"}, "metrics": {}}
    post, _ = publish.render(nbformat.from_dict(nb), record, info, {"repository": "o/r"}, root=ROOT)
    _check_markdown(post)
    assert "window.__pwned_output = 1\n" not in post.replace(PWN, "")  # the JavaScript output is dropped
    fm, _ = _split(post)
    assert fm["title"] == "T <i>x</i>" and fm["description"] == "D\n---\nx: 1"  # YAML quoted it; no control
    assert fm["tags"] == ["<script>a</script>"] and "[host]" in fm["hardware"]


# --------------------------------------------------------------------------- the fixture notebook, executed


@pytest.fixture(scope="module")
def hostile_site(tmp_path_factory):
    base = tmp_path_factory.mktemp("hostile")
    site = make_site(base / "site")
    assert publish.run(profile="smoke", site=site, build=base / "build", notebooks=HOSTILE,
                       params_dir=HOSTILE / "params", progress=False) == 0
    return site


def test_hostile_post_markdown_keeps_every_output_in_its_block(hostile_site):
    post = next((hostile_site / "_posts").glob(f"*-{SLUG}.md")).read_text()
    _check_markdown(post)
    fm, body = _split(post)
    # Everything printed is still there, as text.
    assert "{% include ../../../../etc/passwd %} {{ site.title }} {% raw %} LIQUID_END" in body
    assert "CTRL:ABCDEFGHIJ:CTRL" in body
    assert body.count(PWN) >= 4  # inside fenced blocks, as text
    assert '<table class="dataframe" border="1"><tbody><tr><td>cell ok</td></tr>' in body
    assert fm["render_with_liquid"] is False
    assert fm["tags"] == ["<i>x</i>", "<script>window.__pwned_meta = 1</script>"]  # escaped by the layouts
    record = json.loads((hostile_site / "_data" / "results" / f"{SLUG}.json").read_text())
    text = json.dumps(record)
    for secret in _secrets():
        assert secret not in text, secret
    assert record["metrics"]["note"] == "ran in .; on [host]."


# --------------------------------------------------------------------------- built HTML in a browser


def _build_and_open(site: Path) -> dict:
    from test_site import _jekyll

    built = _jekyll(site)
    page = built / "posts" / SLUG / "index.html"
    assert page.is_file(), sorted(str(p.relative_to(built)) for p in built.rglob("*.html"))
    return {"html": page.read_text(), **_report(built)}


def _report(built: Path) -> dict:
    from test_site import browsing

    with browsing(built) as (browser, base):
        page = browser.new_page()
        errors: list[str] = []
        page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.goto(f"{base}/posts/{SLUG}/", wait_until="load")
        page.wait_for_timeout(300)
        return {
            "errors": errors,
            "pwned_output": page.evaluate("() => window.__pwned_output === undefined ? null : 1"),
            "pwned_meta": page.evaluate("() => window.__pwned_meta === undefined ? null : 1"),
            "content_scripts": page.evaluate(
                "() => document.querySelectorAll('.post-content script, .post-content iframe').length"),
            "inline_scripts": page.evaluate(
                "() => Array.from(document.scripts).filter(s => !s.src && /pwned/.test(s.text)"
                " && (!s.type || /javascript|module/.test(s.type))).length"),  # not JSON-LD data
            "handlers": page.evaluate("""() => Array.from(document.querySelectorAll('*')).flatMap(
                e => Array.from(e.attributes).filter(a => a.name.startsWith('on')).map(a => e.tagName))"""),
            "js_links": page.evaluate(
                "() => Array.from(document.links).filter(a => a.protocol === 'javascript:').length"),
            "header_html": page.evaluate("() => document.querySelector('.post-header').innerHTML"),
            "text": page.evaluate("() => document.body.innerText"),
        }


@pytest.fixture(scope="module")
def hostile_page(hostile_site):
    return _build_and_open(hostile_site)


@pytest.mark.slow
def test_hostile_outputs_are_inert_text_in_the_browser(hostile_page):
    page = hostile_page
    assert page["pwned_output"] is None, "a script from a cell output ran"
    assert not page["errors"], page["errors"]
    assert page["content_scripts"] == 0
    assert page["js_links"] == 0
    assert "CTRL:ABCDEFGHIJ:CTRL" in page["text"]
    assert "{% include ../../../../etc/passwd %} {{ site.title }} {% raw %} LIQUID_END" in page["text"]
    assert "console.error('pwned by output')" in page["text"]  # shown, as text
    assert "cell ok" in page["text"] and "Markdown kept." in page["text"]
    for secret in _secrets():
        assert secret not in page["html"], secret
        assert secret not in page["text"], secret
    assert not CONTROL.search(page["html"])


@pytest.mark.slow
def test_hostile_metadata_is_text_in_the_browser(hostile_page):
    page = hostile_page
    assert page["pwned_meta"] is None, "a script from the notebook's metadata ran"
    assert page["inline_scripts"] == 0 and not page["handlers"], page["handlers"]
    assert "<i>" not in page["header_html"] and "&lt;i&gt;x&lt;/i&gt;" in page["header_html"]
