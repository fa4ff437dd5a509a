"""Links in outputs by allow-list: a URL that would run script, load something or leave the
site in a way the allow-list does not name loses its link, visibly, in Markdown and HTML
outputs and in the notebook's own Markdown cells."""

from __future__ import annotations

import re

import pytest
from test_hostile import SLUG, _assert_clean_html

from sidebyside.publish import escape
from sidebyside.publish.markdown import safe_markdown

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
        out = safe_markdown(form.format(u=url), SLUG)
        _assert_clean_html(out)
        assert "x" in re.sub(r"<[^>]+>", "", out) or "nested" in out or "unsafe" in out  # the text stays visible


@pytest.mark.parametrize("url", GOOD_URLS)
def test_markdown_keeps_safe_links(url):
    import html

    for text in (f"[x]({url})", f"[x][r]\n\n[r]: {url}"):
        out = safe_markdown(text, SLUG)
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
    assert safe_markdown("`[x](javascript:alert(1))`") == "<p><code>[x](javascript:alert(1))</code></p>&#10;"


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


