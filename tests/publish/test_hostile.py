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
headless Chromium, where every link and figure of the post is clicked and
every SVG figure opened on its own (no dialog may open). Also the URL
allow-list, the SVG sanitiser and the output cap unit by unit, and the
states a site can be left in (an unfinished publication, files missing)
through ``list``, ``execute`` and what ``make site`` runs. Nothing here
writes into the repo's _posts/, images/ or _data/ (conftest checks).
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
from sidebyside.publish import escape, state, svg
from sidebyside.publish.rendering import OUTPUT_CAP, cap_output, scrub_rules

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


def _destinations(prose: str) -> list[str]:
    """Every link or image destination in Markdown prose, read generously: the
    text from ``](`` to the balanced ``)`` (any whitespace inside kept), and the
    rest of the line after a reference definition's ``]:``."""
    found = []
    for match in re.finditer(r"\]\s*\(", prose):
        depth, i = 1, match.end()
        while i < len(prose) and depth:
            depth += {"(": 1, ")": -1}.get(prose[i], 0)
            i += 1
        found.append(re.sub(r"""\s+("[^"]*"|'[^']*')\s*\)?$""", "", prose[match.end():i].rstrip(")")))
    found += re.findall(r"^ {0,3}\[[^\]\n]+\]:[ \t]*(\S[^\n]*)$", prose, re.M)
    return found


def _split(post: str) -> tuple[dict, str]:
    """Front matter and body, split as Jekyll does (``---`` alone at the start of a line)."""
    import yaml

    _, header, body = re.split(r"^---[ \t]*\n", post, maxsplit=2, flags=re.M)
    return yaml.safe_load(header), body


#: The blocks of sanitised HTML the publisher writes (outputs, what was compared): one line each, which
#: kramdown passes through untouched (markdown="0").
HTML_BLOCK = re.compile(r'<div class="(output-markdown|output-html|compared)" markdown="0">\n?(.*?)\n?</div>$', re.M)


def _assert_clean_html(markup: str, slug: str = SLUG) -> None:
    """Sanitised HTML, read by an HTML parser: only allowed tags, no handler or style, links by the
    allow-list, images only from the post's own folder."""
    from html.parser import HTMLParser

    from sidebyside.publish.markdown import own_image

    class Reader(HTMLParser):
        def handle_starttag(self, tag, attrs):
            assert tag in escape.ALLOWED_TAGS | {"img", "details", "summary"}, (tag, markup[:300])
            for name, value in attrs:
                assert not name.startswith("on") and name != "style", (tag, name, value)
                if name == "href":
                    assert escape.safe_url(value or ""), (tag, value)
                if tag == "img":
                    assert name != "src" or own_image(value, slug), value

        handle_startendtag = handle_starttag

    Reader(convert_charrefs=True).feed(markup)
    assert "\n" not in markup, "an HTML block on more than one line: a blank line would end it early"


def _check_markdown(post: str) -> None:
    _, body = _split(post)
    prose = _outside_fences(body)
    for match in HTML_BLOCK.finditer(prose):
        _assert_clean_html(match.group(2))
    prose = HTML_BLOCK.sub("", prose)
    # Raw HTML outside code and those blocks may only be the template's own wrappers.
    allowed = escape.ALLOWED_TAGS | {"details", "summary"}
    for tag, attributes in re.findall(r"</?([a-zA-Z][\w-]*)([^>]*)>?", prose):
        assert tag.lower() in allowed, f"raw HTML tag outside code: {tag}"
        assert not re.search(r"\bon\w+\s*=|javascript:", attributes, re.I), f"<{tag}{attributes}>"
    assert "<script" not in prose.lower()
    assert not re.search(r"\]\(\s*<?\s*javascript:", prose, re.I), "a javascript: link"
    for destination in _destinations(prose):
        assert escape.safe_url(destination), f"a link or image to {destination!r} reached the post"
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
    assert out == ('<table border="1" class="dataframe"><tbody><tr><td>1 &lt; 2</td></tr></tbody></table>'
                   '<a rel="noopener noreferrer nofollow">a</a><div><b>open</b></div>'
                   '<p class="unsafe-url-removed">1 unsafe link removed from this output</p>')


# Markdown where kramdown pairs backticks and $$ otherwise than a pattern would guess; each hides a payload.
PAIRING = [
    "a lone ` tick <img src=x onerror=alert(1)> then ` another",
    '[dest](/a`b "ti`tle <img src=x onerror=alert(1)>") and `<script>alert(1)</script>',
    "`a span\nacross <svg onload=alert(1)>\nlines`",
    "$$\n</div><script>alert(1)</script>\n$$\n\ninline $$ <img src=x onerror=alert(1)> $$",
    "\\`<script>alert(1)</script>\\` and \\$$<script>alert(2)</script>\\$$",
    "# H `x\n<script>alert(1)</script>`",
    "{::nomarkdown}<script>alert(1)</script>{:/} para{: onclick=alert(1)}",
    "```\n<script>alert(1)</script>\n",
    "<details open><summary>s</summary><script>alert(1)</script></details> [x](<javascript:alert(1)>)",
    "\\begin{align} a &= <script>alert(1)</script> \\end{align} $\\href{javascript:alert(1)}{x}$",
]


@pytest.mark.parametrize("text", PAIRING)
def test_markdown_output_is_parsed_then_sanitised(text):
    out = escape.safe_markdown(text, SLUG)
    _assert_clean_html(out)
    assert "<script" not in out and "<svg" not in out and "alert(1)" in out  # shown, as text


def test_markdown_output_keeps_its_formatting_and_its_math_as_tex():
    out = escape.safe_markdown("**b** `<code>` $a<b$ and $$\\frac{1}{2}$$\n\n$$\nx > y\n$$\n\n| a |\n|---|\n| 1 |\n"
                               "```py\n<raw>")
    assert "<strong>b</strong> <code>&lt;code&gt;</code> " in out
    assert '<span class="math inline">\\(a&lt;b\\)</span>' in out  # KaTeX's delimiters, the TeX escaped
    assert '<span class="math display">\\[\\frac{1}{2}\\]</span>' in out and "\\[x &gt; y\\]" in out
    assert "<table>" in out and '<pre><code class="language-py">&lt;raw&gt;</code></pre>' in out


@pytest.mark.parametrize("src, own", [
    ("../../images/hostile-output/f.png", True), ("./../../images/hostile-output/a%20b.png", True),
    ("//example.org/x.png", False), ("https://example.org/x.png", False), ("/images/hostile-output/f.png", False),
    ("../../images/other/f.png", False), ("..%2F..%2Fimages%2Fother%2Fx.png", False), ("\\\\host\\x.png", False),
    ("../../images/hostile-output/../other/f.png", False), ("../../images/hostile-output/sub/f.png", False),
    ("data:image/png;base64,AAAA", False), ("../../images/hostile-output/", False),
])
def test_images_in_outputs_load_only_from_the_posts_own_folder(src, own):
    from sidebyside.publish.markdown import EXTERNAL_IMAGE_NOTE, own_image

    assert own_image(src, SLUG) is own
    out = escape.safe_markdown(f"![pic]({src})", SLUG)
    _assert_clean_html(out)
    assert ("<img" in out) is own
    if not own and "<a" in out:
        assert f"[{EXTERNAL_IMAGE_NOTE}: pic]" in out  # a visible link, never a load


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
    # the kernel worked in its scratch directory, under the build folder, never in the repository
    assert re.fullmatch(r"ran in \S+/build/scratch/hostile-output; on \[host\]\.", record["metrics"]["note"])
    raw = (hostile_site / "_data" / "results" / f"{SLUG}.json").read_text(encoding="utf-8")
    assert "🚀" in raw and "\\ud83d" not in raw.lower()  # UTF-8, never a surrogate-pair escape


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


# --------------------------------------------------------------------------- URLs by allow-list

# Each would run script, load something or leave the site if its scheme got through.
BAD_URLS = [
    "javascript:alert(1)", "JaVaScRiPt:alert(1)", "JAVASCRIPT:alert(1)", "&#106;avascript:alert(1)",
    "&#x6A;avascript:alert(1)", "&#X6a;avascript:alert(1)", "&#106avascript:alert(1)", "&#0000106;avascript:alert(1)",
    "&amp;#106;avascript:alert(1)", "&amp;amp;#106;avascript:alert(1)", "java\nscript:alert(1)", "java\tscript:alert(1)",
    "java\rscript:alert(1)", "java&#x09;script:alert(1)", "java&Tab;script:alert(1)", "java&NewLine;script:alert(1)",
    "jav&#x0A;ascript:alert(1)", " javascript:alert(1)", "\x01javascript:alert(1)", "\u200bjavascript:alert(1)",
    "\ufeffjavascript:alert(1)", "\u00adjavascript:alert(1)", "javascript&colon;alert(1)", "javascript&#58;alert(1)",
    "javascript\u3000:alert(1)", "data:text/html;base64,PHNjcmlwdD5hbGVydCgxKTwvc2NyaXB0Pg==",
    "DATA:text/html,x", "data:image/svg+xml,%3Csvg onload=alert(1)%3E", "vbscript:msgbox(1)", "VBScript:x",
    "file:///etc/passwd", "ftp://example.org/", "blob:https://example.org/x", "filesystem:x", "intent://x",
    "%6Aavascript:alert(1)",  # not a scheme to a browser; refused all the same (anything before ':' is one)
]
GOOD_URLS = ["https://example.org/a_(b)", "http://example.org/?q=1&r=2", "HTTPS://EXAMPLE.ORG/",
             "mailto:someone@example.org", "../kept/", "./kept.png", "/root/relative", "#kept", "?q=a:b",
             "path/with:colon-after-slash", "//example.org/protocol-relative"]


@pytest.mark.parametrize("url", BAD_URLS)
def test_url_allow_list_refuses(url):
    assert not escape.safe_url(url)


@pytest.mark.parametrize("url", GOOD_URLS)
def test_url_allow_list_keeps(url):
    assert escape.safe_url(url)


@pytest.mark.parametrize("url", BAD_URLS)
def test_markdown_links_images_and_references_lose_an_unsafe_url_visibly(url):
    for form in ("[x]({u})", "![x]({u})", "[x]( {u} )", "[x] ({u})", '[x]({u} "title")', "[x](<{u}>)",
                 "[a [nested] text]({u})", "[x]\n({u})", "[x][r]\n\n[r]: {u} 'title'", "<{u}> x"):
        out = escape.safe_markdown(form.format(u=url), SLUG)
        _assert_clean_html(out)
        assert "x" in re.sub(r"<[^>]+>", "", out) or "nested" in out or "unsafe" in out  # the text stays visible


@pytest.mark.parametrize("url", GOOD_URLS)
def test_markdown_keeps_safe_links(url):
    import html

    for text in (f"[x]({url})", f"[x][r]\n\n[r]: {url}"):
        out = escape.safe_markdown(text, SLUG)
        assert f'href="{html.escape(url)}"' in out, out


def test_notebook_markdown_keeps_its_html_and_loses_unsafe_links():
    text = ("<details><summary>s</summary>\n\n[ok](https://example.org) [bad](&#106;avascript:alert(1))\n\n"
            "</details>\n\n`[code](javascript:x)`\n\n```\n[fenced](javascript:y)\n```\n\n"
            "landing in\n[-1, 1]: text that is no definition.\n\n[r]: vbscript:x")
    out = escape.safe_links(text)
    assert out.startswith("<details><summary>s</summary>\n\n[ok](https://example.org) [bad](#unsafe-url-removed) ")
    assert "`[code](javascript:x)`" in out and "```\n[fenced](javascript:y)\n```" in out  # code stays code
    assert "[-1, 1]: text that is no definition." in out and "[r]: #unsafe-url-removed" in out
    assert escape.safe_links(out) == out


def test_markdown_links_in_code_stay_code():
    assert escape.safe_markdown("`[x](javascript:alert(1))`") == "<p><code>[x](javascript:alert(1))</code></p>&#10;"


def _html_urls(markup: str) -> list[tuple[str, str, str]]:
    """(tag, attribute, value) of every attribute of ``markup`` that can hold a URL or CSS."""
    from html.parser import HTMLParser

    found = []

    class Reader(HTMLParser):
        def handle_starttag(self, tag, attrs):
            found.extend((tag, name, value or "") for name, value in attrs if name in escape.URL_ATTRIBUTES)

        handle_startendtag = handle_starttag

    Reader(convert_charrefs=True).feed(markup)
    return found


@pytest.mark.parametrize("url", BAD_URLS)
def test_html_output_loses_every_unsafe_url_visibly(url):
    u = url.replace('"', "&quot;")
    markup = (f'<a href="{u}">a</a><img src="{u}"><img srcset="{u} 1x, ok.png 2x"><p style="background:url(\'{u}\')">'
              f'</p><svg><a xlink:href="{u}"><text>t</text></a><image href="{u}"/></svg><form action="{u}"><button '
              f'formaction="{u}">b</button></form><iframe src="{u}"></iframe><object data="{u}"></object>'
              f'<video poster="{u}"></video><table background="{u}"><tr><td>c</td></tr></table>'
              f'<math><mi href="{u}">m</mi></math><A HREF="{u}">upper</A><a href = \'{u}\'>quoted</a>')
    out = escape.safe_html(markup)
    kept = _html_urls(out)
    assert all(name == "href" and escape.safe_url(value) for _, name, value in kept), kept
    assert not re.search(r"javascript|vbscript|data:|file:|<svg|<form|<iframe|<object|<math|style=|srcset", out, re.I)
    assert 'class="unsafe-url-removed"' in out and "unsafe links removed" in out, out
    assert "upper" in out and "quoted" in out  # the text of a link stays


@pytest.mark.parametrize("url", GOOD_URLS)
def test_html_output_keeps_safe_links(url):
    out = escape.safe_html(f'<a href="{url}">a</a><img src="{url}" alt="i">')
    assert [value for _, _, value in _html_urls(out)] == [url]  # the link kept; never an image (figures are files)
    assert "unsafe" not in out and "<img" not in out


# --------------------------------------------------------------------------- SVG


def _svg_elements(data: bytes) -> list:
    import xml.etree.ElementTree as ET

    return list(ET.fromstring(data).iter())


def _assert_inert(data: bytes) -> None:
    """No script, handler, foreign content, animation, or reference outside the document."""
    for element in _svg_elements(data):
        namespace, _, name = element.tag[1:].partition("}")
        assert namespace == svg.SVG and name in svg.ELEMENTS, element.tag
        for key, value in element.attrib.items():
            local = key.rpartition("}")[2]
            assert not local.lower().startswith("on"), (name, key)
            if local == "href":
                assert value.startswith("#") or re.match(r"data:image/(png|jpeg|gif|webp);base64,", value), value
            for target in re.findall(r"url\(\s*['\"]?([^)'\"]*)", value):
                assert target.strip().startswith("#"), value
        if name == "style":
            assert "@import" not in (element.text or "") and not re.search(r"url\(\s*['\"]?[^#]", element.text or "")


NS = 'xmlns="http://www.w3.org/2000/svg" xmlns:xlink="http://www.w3.org/1999/xlink"'
HOSTILE_SVGS = {
    "script": f"<svg {NS}><script>alert(1)</script><g><script href='x.js'/></g><text>kept</text></svg>",
    "handlers": f"<svg {NS} onload='alert(1)'><rect ONCLICK='alert(1)' onbegin='x' width='1'/><text>kept</text></svg>",
    "foreignObject": f"<svg {NS}><foreignObject><body xmlns='http://www.w3.org/1999/xhtml'><script>alert(1)"
                     "</script></body></foreignObject><text>kept</text></svg>",
    "link": f"<svg {NS}><a href='javascript:alert(1)'><text>kept</text></a><a xlink:href='&#106;avascript:x'>"
            "<rect width='1'/></a></svg>",
    "use-external": f"<svg {NS}><use href='https://example.invalid/a.svg#x'/><use xlink:href=' //x/b.svg#y'/>"
                    "<text>kept</text></svg>",
    "image-external": f"<svg {NS}><image href='https://example.invalid/a.png'/><image xlink:href='data:image/svg+xml;"
                      "base64,PHN2Zz4='/><image href='file:///etc/passwd'/><text>kept</text></svg>",
    "css": f"<svg {NS}><style>@import url(https://x/y.css);</style><style>rect {{ fill: url(https://x/p) }}</style>"
           "<style>a { b: \\75rl(x) }</style><rect style='fill:url( https://x/q )' filter='url(https://x/f)' "
           "width='1'/><text>kept</text></svg>",
    "animation": f"<svg {NS}><a href='#'><set attributeName='href' to='javascript:alert(1)'/><animate "
                 "attributeName='href' values='javascript:alert(1)'/><text>kept</text></a></svg>",
    "namespaces": f"<svg {NS} xmlns:x='http://www.w3.org/2000/svg' xmlns:h='http://www.w3.org/1999/xhtml'>"
                  "<x:script>alert(1)</x:script><h:script>alert(1)</h:script><h:iframe src='javascript:x'/>"
                  "<handler xmlns:ev='http://www.w3.org/2001/xml-events' ev:event='load'>alert(1)</handler>"
                  "<text h:onclick='x' x:onclick='y'>kept</text></svg>",
    "no-namespace": "<svg onload='alert(1)'><script>alert(1)</script><text>kept</text></svg>",
}


@pytest.mark.parametrize("name", sorted(HOSTILE_SVGS))
def test_svg_is_rebuilt_inert_and_keeps_its_drawing(name):
    out = svg.sanitise(HOSTILE_SVGS[name].encode())
    _assert_inert(out)
    assert b"alert" not in out and b"javascript" not in out and b"example.invalid" not in out
    assert "kept" in [e.text for e in _svg_elements(out)]


@pytest.mark.parametrize("doc, why", [
    ('<?xml version="1.0"?><!DOCTYPE svg [<!ENTITY a "alert(1)">]><svg xmlns="http://www.w3.org/2000/svg">&a;</svg>',
     "declares XML entities"),
    ("<svg xmlns='http://www.w3.org/2000/svg'><text>unclosed</svg>", "not well-formed"),
    ("<html><script>alert(1)</script></html>", "root element is <html>"),
    ("<h:svg xmlns:h='http://www.w3.org/1999/xhtml'/>", "root element"),
])
def test_svg_that_cannot_be_read_safely_is_refused(doc, why):
    with pytest.raises(svg.SvgError, match=why):
        svg.sanitise(doc)


@pytest.mark.parametrize("figure", sorted((ROOT / "images" / "weight-visualisation").glob("*.svg")), ids=lambda p: p.name)
def test_svg_graphs_keep_every_element_and_label(figure):
    """The weight-visualisation graphs (graphviz) lose nothing they draw."""
    import xml.etree.ElementTree as ET

    raw = figure.read_bytes()
    out = svg.sanitise(raw)
    before, after = list(ET.fromstring(raw).iter()), _svg_elements(out)
    assert [(e.tag, e.attrib, (e.text or "").strip()) for e in before] == \
        [(e.tag, e.attrib, (e.text or "").strip()) for e in after]
    assert svg.sanitise(out) == out  # sanitising is idempotent


def test_svg_from_matplotlib_keeps_its_drawing():
    """Clip paths (url(#id)), glyphs by <use xlink:href="#id">, an embedded PNG and its style sheet stay;
    only the RDF metadata goes."""
    import io
    import xml.etree.ElementTree as ET

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots()
    ax.imshow([[0, 1], [1, 0]])
    ax.plot([0, 1], [1, 0])
    ax.set_title("T <x> & y")
    buffer = io.BytesIO()
    fig.savefig(buffer, format="svg")
    plt.close(fig)
    raw = buffer.getvalue()
    out = svg.sanitise(raw)
    _assert_inert(out)
    # Every SVG element but <metadata> (whose content is RDF, in other namespaces).
    before = [(e.tag, e.attrib) for e in ET.fromstring(raw).iter()
              if e.tag.startswith(f"{{{svg.SVG}}}") and e.tag != f"{{{svg.SVG}}}metadata"]
    assert before == [(e.tag, e.attrib) for e in _svg_elements(out)]
    assert b"data:image/png;base64," in out and b"url(#" in out and b"xlink:href=\"#" in out


# --------------------------------------------------------------------------- the output cap


def test_output_under_the_cap_is_untouched():
    text = "é" * (OUTPUT_CAP // 2)  # 2 bytes each: exactly the cap
    assert cap_output(text, "s") == text


def test_output_over_the_cap_is_cut_with_a_note_saying_where_the_rest_is():
    lines = [f"line {i:06d} " + "z" * 80 for i in range(5000)]
    text = "\n".join(lines)
    out = cap_output(text, "my-slug")
    kept, note = out.rsplit("\n", 1)
    assert len(kept.encode()) <= OUTPUT_CAP and text.startswith(kept) and kept.endswith(lines[len(kept.split("\n")) - 1])
    cut = len(text.encode()) - len(kept.encode())
    assert f"{cut / 1e3:.0f} KB of {len(text.encode()) / 1e3:.0f} KB not shown" in note
    assert "my-slug.ipynb" in note and "downloads" in note
    # One long line with multi-byte characters: cut inside it, on a character boundary.
    out = cap_output("€" * OUTPUT_CAP, "s", html=True)
    assert out.endswith("downloads]</p>") and len(out.split("\n")[0].encode()) <= OUTPUT_CAP


def test_render_caps_every_kind_of_output_and_the_download_keeps_it_whole():
    import nbformat
    from nbformat.v4 import new_code_cell, new_notebook, new_output

    big = "\n".join(f"row {i:06d} " + "q" * 70 for i in range(4000))  # about 320 KB
    cells = [
        new_code_cell("a", outputs=[new_output("stream", name="stdout", text=big)]),
        new_code_cell("b", outputs=[new_output("execute_result", data={"text/plain": big}, execution_count=1)]),
        new_code_cell("c", outputs=[new_output("display_data", data={"text/html": f"<pre>{big}</pre>"})]),
        new_code_cell("d", outputs=[new_output("display_data", data={"text/markdown": big})]),
        new_code_cell("e", outputs=[new_output("error", ename="E", evalue="v", traceback=big.split("\n"))]),
    ]
    nb = new_notebook(cells=cells, metadata={"kernelspec": {"name": "python3", "display_name": "Python 3"}})
    info = publish.NotebookInfo(HOSTILE / "00_hostile.py", SLUG, "T", "2026-11-01", "D", [])
    record = {"profile": "smoke", "executed_at": "2026-11-22T00:00:00+00:00", "source_hash": "k",
              "provenance": {"device": "cpu", "git_sha": "abc"}, "metrics": {}}
    post, files = publish.render(nbformat.from_dict(nb), record, info, {"repository": "o/r"}, root=ROOT)
    _check_markdown(post)
    assert post.count(f"the whole output is in the executed notebook, {SLUG}.ipynb") == 5
    assert "row 003999" not in post
    # each output at most the cap, HTML ones a little more (a newline is written "&#10;": one line of HTML)
    assert len(post.encode()) < 5 * OUTPUT_CAP + 60_000
    download = files[f"{SLUG}.ipynb"].decode()
    assert download.count("row 003999") == 5  # stream, value, HTML, Markdown, traceback: whole


# --------------------------------------------------------------------------- what state the site is in


def _whole_site(tmp_path: Path) -> tuple[Path, publish.NotebookInfo, dict]:
    """A site holding one complete publication of the hostile fixture (its manifest included)."""
    site = make_site(tmp_path / "site")
    info, _ = publish.read_notebook_info(HOSTILE / "00_hostile.py")
    record = {"slug": SLUG, "notebook": "n", "profile": "smoke", "executed_at": "2026-11-22T00:00:00+00:00",
              "source_hash": "k", "provenance": {"device": "cpu"}, "metrics": {}}
    files = {"figure-1.png": b"png" * 10, "figure-2.svg": b"<svg/>", "results.json": b"{}",
             f"{SLUG}.ipynb": b"{}"}
    post_name = f"{info.date}-{SLUG}.md"
    files[state.MANIFEST] = state.manifest(SLUG, post_name, files, record)
    publish.publish(site, info, f"---\nlayout: post\n---\n![a](../../images/{SLUG}/figure-1.png)\n", files, record)
    return site, info, record


def _list(site: Path, capsys, *, freshness: bool = False) -> tuple[int, str, str]:
    code = publish.list_notebooks(site=site, notebooks=HOSTILE, params_dir=HOSTILE / "params",
                                  write_freshness=freshness)
    out = capsys.readouterr()
    return code, out.out, out.err


def _execute(site: Path, tmp_path: Path) -> None:
    publish.run(profile="smoke", site=site, build=tmp_path / "build", notebooks=HOSTILE,
                params_dir=HOSTILE / "params", progress=False, dry_run=True)


def _break_folder(site):
    import shutil

    shutil.rmtree(site / "images" / SLUG)
    return f"images/{SLUG}/ (its figures and downloads) is missing"


def _break_file(site):
    (site / "images" / SLUG / "figure-2.svg").unlink()
    return f"images/{SLUG}/figure-2.svg"


def _break_truncated(site):
    (site / "images" / SLUG / "figure-1.png").write_bytes(b"png")
    return f"images/{SLUG}/figure-1.png (its 3 bytes, not the 30 published"


def _break_download(site):
    (site / "images" / SLUG / f"{SLUG}.ipynb").unlink()
    return f"images/{SLUG}/{SLUG}.ipynb"


def _break_post(site):
    next((site / "_posts").glob(f"*-{SLUG}.md")).unlink()
    return f"_posts/2026-11-01-{SLUG}.md"


def _break_results_of_another_run(site):
    path = site / "_data" / "results" / f"{SLUG}.json"
    record = json.loads(path.read_text())
    path.write_text(json.dumps({**record, "executed_at": "2026-11-23T00:00:00+00:00"}))
    return "they come from two publications"


def _break_legacy(site):
    """A publication from before the manifest: the figures its post links are checked."""
    (site / "images" / SLUG / state.MANIFEST).unlink()
    (site / "images" / SLUG / "figure-1.png").unlink()
    return f"images/{SLUG}/figure-1.png"


BREAKS = [_break_folder, _break_file, _break_truncated, _break_download, _break_post, _break_results_of_another_run,
          _break_legacy]


def test_a_whole_site_lists_cleanly(tmp_path, capsys):
    site, _, _ = _whole_site(tmp_path)
    code, out, err = _list(site, capsys, freshness=True)
    assert code == 0 and "INCOMPLETE" not in out and "smoke run of 2026-11-22" in out and not err
    _execute(site, tmp_path)  # raises nothing


@pytest.mark.parametrize("damage", BREAKS, ids=[b.__name__[7:] for b in BREAKS])
def test_incomplete_post_is_reported_by_list_site_and_execute(tmp_path, capsys, damage):
    site, _, _ = _whole_site(tmp_path)
    said = damage(site)
    code, out, err = _list(site, capsys)
    assert code == 2 and f"{SLUG}" in out and "INCOMPLETE" in out
    assert said in err and "git checkout --" in err and f"make execute ONLY={SLUG} FORCE=1" in err, err
    code, _, err = _list(site, capsys, freshness=True)  # what `make site` runs before Jekyll
    assert code == 2 and said in err and not (site / "_data" / "freshness.json").exists()
    with pytest.raises(publish.PublishError, match="nothing was run") as refused:
        _execute(site, tmp_path)
    assert said in str(refused.value) and not (tmp_path / "build" / "executed").exists()


def _interrupt(site: Path, info, record, monkeypatch, at: str) -> None:
    """Publish again, dying (an exception, no clean-up) at swap point ``at``."""
    from sidebyside.publish import site as sitefiles

    class Died(Exception):
        pass

    def fault(label):
        if label == at:
            raise Died(label)

    record = {**record, "executed_at": "2026-11-23T00:00:00+00:00"}
    files = {"figure-1.png": b"new" * 10}
    files[state.MANIFEST] = state.manifest(SLUG, f"{info.date}-{SLUG}.md", files, record)
    monkeypatch.setattr(sitefiles, "FAULT", fault)
    with pytest.raises(Died):
        publish.publish(site, info, "---\nlayout: post\n---\nnew\n", files, record)
    monkeypatch.setattr(sitefiles, "FAULT", None)


@pytest.mark.parametrize("at, then", [(f"in images/{SLUG}", "rolls it back"), ("cleanup", "completes it")])
def test_unfinished_publication_is_reported_by_list_site_and_execute(tmp_path, capsys, monkeypatch, at, then):
    site, info, record = _whole_site(tmp_path)
    _interrupt(site, info, record, monkeypatch, at)
    journal = site / ".sidebyside" / f"journal-{SLUG}.json"
    assert journal.exists()
    code, _, err = _list(site, capsys)
    assert code == 2 and f"{SLUG}: a publication started at" in err and then in err and "make recover" in err, err
    assert _list(site, capsys, freshness=True)[0] == 2  # make site
    assert journal.exists()  # list changes nothing
    # execute finishes or rolls it back first, and says which; then the site is whole again.
    _execute(site, tmp_path)
    said = capsys.readouterr().out + capsys.readouterr().err
    assert "recovered" in said and not journal.exists()
    assert _list(site, capsys)[0] == 0


def test_recover_command_finishes_what_list_reported(tmp_path, capsys, monkeypatch):
    site, info, record = _whole_site(tmp_path)
    _interrupt(site, info, record, monkeypatch, f"in images/{SLUG}")
    assert publish.main(["recover", "--site", str(site)]) == 0
    assert "rolled back" in capsys.readouterr().out
    assert _list(site, capsys)[0] == 0
    assert (site / "images" / SLUG / "figure-1.png").read_bytes() == b"png" * 10  # the previous publication


def test_make_site_and_serve_check_the_site_before_jekyll():
    import subprocess

    for target in ("site", "serve"):
        proc = subprocess.run(["make", "-n", target, "SETUP=0", "PYTHON=python3"], cwd=ROOT, capture_output=True,
                              text=True, timeout=60)
        lines = proc.stdout.splitlines()
        check = next(i for i, line in enumerate(lines) if "sidebyside.publish list --site ." in line)
        jekyll = next(i for i, line in enumerate(lines) if "jekyll" in line)
        assert check < jekyll, proc.stdout


def test_published_fixture_is_whole(hostile_site, capsys):
    """A real publication writes a manifest that matches what it published."""
    manifest = json.loads((hostile_site / "images" / SLUG / state.MANIFEST).read_text())
    folder = {p.name: p.stat().st_size for p in (hostile_site / "images" / SLUG).iterdir() if p.name != state.MANIFEST}
    assert manifest["files"] == folder and (hostile_site / "_posts" / manifest["post"]).is_file()
    assert _list(hostile_site, capsys)[0] == 0


# --------------------------------------------------------------------------- the built site, clicked through


def _page_urls(markup: str) -> list[tuple[str, str]]:
    """(attribute, URL) of every URL in a built page: URL attributes (each ``srcset`` candidate) and CSS ``url()``."""
    from html.parser import HTMLParser

    found = []

    class Reader(HTMLParser):
        def handle_starttag(self, tag, attrs):
            for name, value in attrs:
                value = value or ""
                if name == "srcset":
                    found.extend((name, part.split()[0]) for part in value.split(",") if part.split())
                elif name == "style":
                    found.extend((name, m) for m in re.findall(r"url\(\s*['\"]?([^'\")]*)", value))
                elif name in escape.URL_ATTRIBUTES:
                    found.append((name, value))

        handle_startendtag = handle_starttag

    Reader(convert_charrefs=True).feed(markup)
    return found


@pytest.mark.slow
def test_built_page_holds_only_allowed_urls(hostile_page, hostile_site):
    page = hostile_page["html"]
    content = page[page.index('class="post-content'):page.index("</article>")]  # the layout's own icon is data:,
    urls = _page_urls(content)
    assert len(urls) > 40  # the fixture's links are there, each checked
    bad = [(name, url) for name, url in urls if not escape.safe_url(url)]
    assert not bad, bad
    # Visibly: for each of the 19 URLs, its Markdown link, image and titled link stay as text, and the
    # HTML output says how many links it lost.
    for i in range(19):
        for what in ("bad link", "bad image", "titled"):
            assert f"{what} {i}" in hostile_page["text"], (what, i)
    assert "unsafe links removed from this output" in hostile_page["html"]
    assert "good link 0" in hostile_page["text"] and 'href="https://example.org/a_(b)"' in hostile_page["html"]


@pytest.mark.slow
def test_published_svg_figures_are_inert_and_the_unreadable_one_is_left_out(hostile_site):
    figures = sorted((hostile_site / "images" / SLUG).glob("*.svg"))
    assert len(figures) == 10, figures  # eleven displayed, the one declaring entities left out
    for figure in figures:
        _assert_inert(figure.read_bytes())
        assert b"alert" not in figure.read_bytes()
    post = next((hostile_site / "_posts").glob(f"*-{SLUG}.md")).read_text()
    assert re.search(r"\[a figure \(figure-\d+\.svg\) was left out: it declares XML entities", post)


@pytest.mark.slow
def test_big_output_is_cut_in_the_post_and_whole_in_the_download(hostile_site):
    post = next((hostile_site / "_posts").glob(f"*-{SLUG}.md")).read_text()
    assert "big line 000000" in post and "big line 003999" not in post
    assert f"the whole output is in the executed notebook, {SLUG}.ipynb, among this post's downloads" in post
    assert "big line 003999" in (hostile_site / "images" / SLUG / f"{SLUG}.ipynb").read_text()


def _click_everything(built: Path) -> dict:
    """Open the post, click each link and each figure of its content (the page is
    opened again after a click that left it), then open each SVG figure as a page
    of its own; requests that leave the local server are refused."""
    from test_site import browsing

    dialogs: list[str] = []
    pwned: list[str] = []
    clicked = {"a": 0, "img": 0}
    with browsing(built) as (browser, base):
        context = browser.new_context()
        context.route("**/*", lambda route: route.continue_() if route.request.url.startswith(base) else route.abort())

        def watch(page):
            page.on("dialog", lambda d: (dialogs.append(f"{page.url}: {d.message}"), d.dismiss()))

        context.on("page", watch)
        page = context.new_page()
        post = f"{base}/posts/{SLUG}/"

        def check(where: str) -> None:
            for p in context.pages:
                for attempt in range(5):  # a click may still be navigating: read the page once it has loaded
                    try:
                        p.wait_for_load_state("load", timeout=5000)
                        if p.url.startswith(base) and p.evaluate("() => window.__pwned_output !== undefined"):
                            pwned.append(where)
                        break
                    except Exception:
                        if attempt == 4:
                            raise
                        p.wait_for_timeout(100)

        page.goto(post, wait_until="load")
        for selector in ("a", "img"):
            count = page.locator(f".post-content {selector}").count()
            for i in range(count):
                if page.url.split("#")[0] != post:
                    page.goto(post, wait_until="load")
                element = page.locator(f".post-content {selector}").nth(i)
                try:
                    element.click(timeout=1000, no_wait_after=True)  # as a reader would
                except Exception:  # hidden (a closed <details>) or covered: activate it as a script would
                    element.evaluate("e => e.click()")
                page.wait_for_timeout(40)
                check(f"{selector} {i}")
                clicked[selector] += 1
                for other in context.pages[1:]:
                    other.close()
        if page.url.split("#")[0] != post:
            page.goto(post, wait_until="load")
        svgs = page.evaluate("() => Array.from(document.querySelectorAll('.post-content img'))"
                             ".map(i => i.src).filter(s => s.endsWith('.svg'))")
        for src in svgs:
            page.goto(src, wait_until="load")
            page.wait_for_timeout(200)
            check(src)
            page.mouse.click(10, 10)
            page.wait_for_timeout(40)
            check(src)
        context.close()
    return {"dialogs": dialogs, "pwned": pwned, "clicked": clicked, "svgs": svgs}


@pytest.mark.slow
def test_clicking_every_link_and_figure_opens_no_dialog(hostile_site, hostile_page):
    report = _click_everything(hostile_site / "_site")
    assert report["clicked"]["a"] >= 19 * 2 + 10 and report["clicked"]["img"] >= 7, report["clicked"]
    published = sorted(p.name for p in (hostile_site / "images" / SLUG).glob("*.svg"))
    shown = {src.rsplit("/", 1)[-1] for src in report["svgs"] if f"/images/{SLUG}/" in src}
    assert sorted(shown) == published, report["svgs"]  # each one opened on its own (the Colab badge too)
    assert not report["dialogs"], report["dialogs"]
    assert not report["pwned"], report["pwned"]


@pytest.mark.slow
def test_the_click_harness_sees_what_it_must_not_find(tmp_path):
    """Without the publisher in between, a javascript: link, an unsanitised SVG
    opened on its own and a script setting the flag are all caught."""
    (tmp_path / "posts" / SLUG).mkdir(parents=True)
    (tmp_path / "images" / SLUG).mkdir(parents=True)
    (tmp_path / "images" / SLUG / "evil.svg").write_text(
        '<svg xmlns="http://www.w3.org/2000/svg" onload="alert(2)"><rect width="9" height="9"/></svg>')
    (tmp_path / "posts" / SLUG / "index.html").write_text(
        f'<div class="post-content"><a href="&#106;avascript:alert(1)">x</a> <a href="#">'
        f'<img src="/images/{SLUG}/evil.svg" onclick="window.__pwned_output = 1"></a></div>')
    report = _click_everything(tmp_path)
    assert report["clicked"] == {"a": 2, "img": 1}
    assert any(d.endswith(": 1") for d in report["dialogs"]) and any(d.endswith(": 2") for d in report["dialogs"])
    assert report["pwned"]
