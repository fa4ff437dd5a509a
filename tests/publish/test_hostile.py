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
every SVG figure opened on its own (no dialog may open). Also Markdown
outputs (parsed, then sanitised) and the output cap unit by unit. Links by
allow-list are in test_urls, SVG in test_svg, the states a site can be left
in in test_site_state, the other classes of untrusted output in
test_untrusted. Nothing here writes into the repo's _posts/, images/ or
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
from conftest import ROOT
from test_svg import _assert_inert

from sidebyside import publish
from sidebyside.publish import escape
from sidebyside.publish.markdown import safe_markdown
from sidebyside.publish.preprocess import OUTPUT_CAP, cap_output, scrub_rules

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
    out = safe_markdown(text, SLUG)
    _assert_clean_html(out)
    assert "<script" not in out and "<svg" not in out and "alert(1)" in out  # shown, as text


def test_markdown_output_keeps_its_formatting_and_its_math_as_tex():
    out = safe_markdown("**b** `<code>` $a<b$ and $$\\frac{1}{2}$$\n\n$$\nx > y\n$$\n\n| a |\n|---|\n| 1 |\n"
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
    out = safe_markdown(f"![pic]({src})", SLUG)
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
        _assert_inert(figure.read_bytes())  # as test_svg checks each hostile document
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
    """Open the post with every section opened, click each link and each figure of its content (the
    page is opened again after a click that left it), then open each SVG figure as a page of its own;
    requests that leave the local server are refused."""
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

        def open_post() -> None:  # every section opened, as a reader who reads it all would
            page.goto(post, wait_until="load")
            page.evaluate("() => document.querySelectorAll('details').forEach(d => { d.open = true; })")

        open_post()
        for selector in ("a", "img"):
            count = page.locator(f".post-content {selector}").count()
            for i in range(count):
                if page.url.split("#")[0] != post:
                    open_post()
                element = page.locator(f".post-content {selector}").nth(i)
                if not element.is_visible():  # hidden: activate it as a script would (no click to wait for)
                    element.evaluate("e => e.click()")
                else:
                    try:
                        element.click(timeout=1000, no_wait_after=True)  # as a reader would
                    except Exception:  # covered: as a script would
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
