"""What a notebook prints, made safe to print in a post.

A post is kramdown (GFM) read by Jekyll, so cell output could otherwise
leave the block it is shown in: a line of three backticks closes a code
fence, raw HTML passes through, ``{::nomarkdown}`` and ``{: attr}`` are
kramdown extensions. The functions here are the one place where output is
escaped; the post template applies them as Jinja filters (:data:`FILTERS`),
so every byte of output goes through one of them wherever it is printed.

- :func:`fenced`: a code block whose fence is longer than any run of
  backticks in its text (it cannot be closed from inside).
- :func:`safe_html`: ``text/html`` output through an allow-list (tables and
  inline formatting); everything else is text, the result is balanced.
- :func:`safe_markdown`: ``text/markdown`` output kept as Markdown, with raw
  HTML and kramdown extensions escaped and fences closed.
- :func:`drop_controls`: control characters (C0 but tab and newline, DEL,
  C1, bidirectional overrides) removed.
- :func:`clean`: a function applied to every string of a nested value (keys too).

Liquid needs no escaping: posts carry ``render_with_liquid: false``.
"""

from __future__ import annotations

import html
import re
from collections.abc import Callable
from html.parser import HTMLParser
from typing import Any

__all__ = ["drop_controls", "fenced", "safe_html", "safe_markdown", "image_alt", "clean", "FILTERS"]

CONTROL_RE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def drop_controls(text: str) -> str:
    """``text`` without control characters; ``\\r\\n`` and lone ``\\r`` become ``\\n``."""
    return CONTROL_RE.sub("", text.replace("\r\n", "\n").replace("\r", "\n"))


def fenced(text: str, info: str = "") -> str:
    """A fenced code block holding ``text`` verbatim (kramdown closes a fence
    only with a line of at least as many backticks)."""
    text = drop_controls(str(text))
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}{info}\n{text}\n{fence}"


# --------------------------------------------------------------------------- HTML

ALLOWED_TAGS = frozenset(
    "table thead tbody tfoot tr th td caption colgroup col div span p br hr b i em strong u s small sub sup "
    "code pre kbd samp var ul ol li dl dt dd h1 h2 h3 h4 h5 h6 blockquote abbr".split())
VOID_TAGS = frozenset({"br", "hr", "col"})
ALLOWED_ATTRIBUTES = frozenset({"class", "title", "colspan", "rowspan", "align", "valign", "border", "span"})
# Their content is code or markup for another engine, never text to show.
DROPPED_WITH_CONTENT = frozenset({"script", "style", "template", "noscript", "iframe", "object", "svg", "math",
                                  "textarea", "title", "xmp", "noembed", "noframes", "plaintext"})


class _Sanitiser(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.out: list[str] = []
        self.open: list[str] = []
        self.dropping: list[str] = []

    def _start(self, tag: str, attrs, closed: bool) -> None:
        if self.dropping:
            if tag in DROPPED_WITH_CONTENT and not closed:
                self.dropping.append(tag)
            return
        if tag in DROPPED_WITH_CONTENT:
            if not closed:
                self.dropping.append(tag)
            return
        if tag not in ALLOWED_TAGS:
            return
        kept = "".join(f' {name}="{html.escape(drop_controls(value or ""), quote=True)}"'
                       for name, value in attrs if name in ALLOWED_ATTRIBUTES)
        self.out.append(f"<{tag}{kept}>")
        if tag in VOID_TAGS:
            return
        if closed:
            self.out.append(f"</{tag}>")
        else:
            self.open.append(tag)

    def handle_starttag(self, tag, attrs):
        self._start(tag, attrs, closed=False)

    def handle_startendtag(self, tag, attrs):
        self._start(tag, attrs, closed=True)

    def handle_endtag(self, tag):
        if self.dropping:
            if tag == self.dropping[-1]:
                self.dropping.pop()
            return
        if tag in self.open:
            while self.open:
                top = self.open.pop()
                self.out.append(f"</{top}>")
                if top == tag:
                    break

    def handle_data(self, data):
        if not self.dropping:
            self.out.append(html.escape(drop_controls(data), quote=False))

    def finish(self) -> str:
        self.close()
        self.out.extend(f"</{tag}>" for tag in reversed(self.open))
        self.open = []
        return "".join(self.out)


def safe_html(text: str) -> str:
    """``text/html`` output reduced to an allow-list of tags and attributes
    (no script, no style, no event handler, no link), every tag balanced so
    that the output cannot close the block around it; the rest is text."""
    parser = _Sanitiser()
    parser.feed(str(text))
    return parser.finish()


# --------------------------------------------------------------------------- Markdown

_FENCE_OPEN = re.compile(r"^ {0,3}(`{3,}|~{3,})")
# Code spans and math on one line: kramdown escapes what is inside them. One line
# only, and never after a backslash: where kramdown would not read a span (it
# ends at a block boundary, or its backtick is escaped), escaping it costs at
# most a visible "&lt;", while leaving it would let raw HTML through.
_PROTECTED = re.compile(r"(?<![\\`])(`+)[^`\n](?:[^\n]*?[^`\n])?\1(?!`)|(?<!\\)\$\$[^\n]+?\$\$")
_LINK_SCHEME = re.compile(r"(\]\(\s*<?|^ {0,3}\[[^\]\n]+\]:\s*<?)\s*(?:javascript|vbscript|data|file):", re.I | re.M)


def _escape_prose(text: str) -> str:
    """Outside code and math: raw HTML and kramdown extensions as text."""
    out, last = [], 0
    for match in _PROTECTED.finditer(text):
        out.append(_escape_span(text[last:match.start()]))
        out.append(match.group(0))
        last = match.end()
    out.append(_escape_span(text[last:]))
    return "".join(out)


def _escape_span(text: str) -> str:
    text = text.replace("<", "&lt;")
    text = text.replace("{:", "\\{:")  # kramdown's IAL, ALD and extensions ({::nomarkdown})
    return _LINK_SCHEME.sub(r"\1#blocked:", text)


def safe_markdown(text: str) -> str:
    """``text/markdown`` (or ``text/latex``) output kept as Markdown, but
    self-contained: raw HTML and kramdown extensions are escaped outside code
    and math, an unclosed fence is closed, and its fenced blocks cannot be
    closed from inside."""
    lines = drop_controls(str(text)).split("\n")
    out: list[str] = []
    prose: list[str] = []
    i = 0
    while i < len(lines):
        opening = _FENCE_OPEN.match(lines[i])
        if not opening:
            prose.append(lines[i])
            i += 1
            continue
        out.append(_escape_prose("\n".join(prose)))
        prose = []
        fence = opening.group(1)
        closing = re.compile(r"^ {0,3}" + re.escape(fence[0]) + "{" + str(len(fence)) + r",}\s*$")
        info = re.sub(r"[^\w+.-]", "", lines[i][opening.end():])
        body = []
        i += 1
        while i < len(lines) and not closing.match(lines[i]):
            body.append(lines[i])
            i += 1
        i += 1  # the closing fence (or the end of the text: the block is closed here)
        out.append(fenced("\n".join(body), info))
    out.append(_escape_prose("\n".join(prose)))
    # Blank lines around each fenced block: kramdown starts a block only after one.
    return "\n\n".join(part for part in out if part.strip())


def image_alt(text: str) -> str:
    """Alt text for ``![alt](path)``: one line, brackets and backslashes escaped."""
    text = " ".join(drop_controls(str(text)).split())
    return re.sub(r"([\\\[\]<>])", r"\\\1", text)


def clean(value: Any, fn: Callable[[str], str]) -> Any:
    """``value`` with ``fn`` applied to every string in it (mapping keys included)."""
    if isinstance(value, str):
        return fn(value)
    if isinstance(value, dict):
        return {clean(k, fn): clean(v, fn) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [clean(v, fn) for v in value]
    return value


#: Jinja filters of the post template (src/sidebyside/templates/sidebyside).
FILTERS = {"fenced": fenced, "safe_html": safe_html, "safe_markdown": safe_markdown, "image_alt": image_alt}
