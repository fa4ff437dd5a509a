"""What a notebook prints, made safe to print in a post.

A post is kramdown (GFM) read by Jekyll, so cell output could otherwise
leave the block it is shown in: a line of three backticks closes a code
fence, raw HTML passes through, ``{::nomarkdown}`` and ``{: attr}`` are
kramdown extensions. The functions here are the one place where output is
escaped; the post template applies them as Jinja filters (:data:`FILTERS`),
so every byte of output goes through one of them wherever it is printed.

- :func:`fenced`: a code block whose fence is longer than any run of
  backticks in its text (it cannot be closed from inside).
- :func:`safe_url`: the one test of a URL: after entity decoding and the
  removal of whitespace and control characters, only ``http``, ``https``,
  ``mailto`` and relative URLs pass (an allow-list, never a list of bad schemes).
- :func:`sanitise`: HTML through ``nh3`` (see below) with an allow-list of
  tags and attributes (tables, inline formatting, links whose URL passes
  :func:`safe_url`, images only where the caller's test passes their
  ``src``); the result is balanced, on one line, and a note says how many
  URLs were removed. :func:`safe_html` applies it to ``text/html`` output;
  :mod:`sidebyside.publish.markdown` to the HTML it renders from
  ``text/markdown`` and ``text/latex`` output (parsed by a CommonMark parser
  first, never guessed at with a pattern; its ``safe_markdown`` and the post
  template's filters, ``FILTERS``, live there). The sanitised
  HTML is bounded (:func:`bounded`): an output that nests deeper than
  :data:`MAX_HTML_DEPTH`, holds more than :data:`MAX_HTML_ELEMENTS` elements
  or takes more than :data:`MAX_HTML_BYTES` is left out with a note, before
  kramdown ever reads it.
- :func:`safe_links`: the links of the notebook's own Markdown cells (the
  project's text, which kramdown reads): every link or image whose URL fails
  :func:`safe_url` is pointed at :data:`REMOVED_URL` with a visible note.
- :func:`drop_controls`: control characters (C0 but tab and newline, DEL,
  C1, bidirectional overrides), lone surrogates and the noncharacters
  U+FFFE/U+FFFF removed: none can be shown, and YAML loaders (Jekyll's) refuse them.
- :func:`clean`: a function applied to every string of a nested value (keys too).

Liquid needs no escaping: posts carry ``render_with_liquid: false``.

The HTML side uses ``nh3`` (pinned in requirements.txt), the Python binding
of the Rust crate ``ammonia``: a maintained sanitiser that parses with a real
HTML5 parser (html5ever, the one Servo uses), so it reads markup exactly as a
browser would (entities, broken tags, foreign content) rather than as a
hand-written filter guesses; it keeps only what an allow-list names, checks
URL schemes after the browser's own decoding, and balances every tag. SVG
figures are sanitised by :mod:`sidebyside.publish.svg`.
"""

from __future__ import annotations

import html
import re
from collections.abc import Callable, Iterator
from html.parser import HTMLParser
from typing import Any

from sidebyside.publish.common import warn

__all__ = ["drop_controls", "fenced", "safe_url", "url_scheme", "safe_html", "safe_links", "image_alt",
           "clean", "sanitise", "bounded", "html_shape", "SAFE_SCHEMES", "REMOVED_URL", "REMOVED_NOTE",
           "MAX_HTML_DEPTH", "MAX_HTML_ELEMENTS", "MAX_HTML_BYTES"]

CONTROL_RE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069\ud800-\udfff\ufffe\uffff]")


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


# --------------------------------------------------------------------------- URLs

#: The only schemes a published URL may have (a relative URL has none).
SAFE_SCHEMES = frozenset({"http", "https", "mailto"})
#: What an unsafe URL is replaced with: a fragment that goes nowhere.
REMOVED_URL = "#unsafe-url-removed"
#: Shown where a link or an image lost its URL.
REMOVED_NOTE = "(unsafe link removed)"
# What a browser drops from a URL or ignores around it, and what could hide a scheme from the eye:
# every C0 control and space, DEL, C1, soft hyphen, zero-width and bidirectional marks, BOM.
_URL_INVISIBLE = re.compile("[\x00-\x20\x7f-\x9f\u00ad\u180e\u200b-\u200f\u2028-\u202e\u2060-\u206f\ufeff]")


def url_scheme(url: str) -> str | None:
    """The scheme a browser would read in ``url`` (lower case), or None for a
    relative URL. ``url`` is read as an attribute value: HTML entities are
    decoded (repeatedly, so ``&amp;#106;`` counts as ``j``), then every
    whitespace and control character is removed (browsers strip tab and newline
    anywhere in a URL). Anything before the first ``:`` that comes before any
    ``/``, ``\\``, ``?`` or ``#`` counts as a scheme, valid or not."""
    text = str(url)
    for _ in range(8):
        decoded = html.unescape(text)
        if decoded == text:
            break
        text = decoded
    text = _URL_INVISIBLE.sub("", text)
    match = re.match(r"([^/\\?#]*):", text)
    return match.group(1).lower() if match else None


def safe_url(url: str) -> bool:
    """Whether ``url`` may be published: relative, or ``http``, ``https`` or
    ``mailto`` as a browser would read it (see :func:`url_scheme`)."""
    scheme = url_scheme(url)
    return scheme is None or scheme in SAFE_SCHEMES


# --------------------------------------------------------------------------- HTML

ALLOWED_TAGS = frozenset(
    "table thead tbody tfoot tr th td caption colgroup col div span p br hr b i em strong u s small sub sup "
    "code pre kbd samp var ul ol li dl dt dd h1 h2 h3 h4 h5 h6 blockquote abbr a".split())
ALLOWED_ATTRIBUTES = {"*": {"class", "title", "colspan", "rowspan", "align", "valign", "border", "span"},
                      "a": {"href"}}
# Their content is code or markup for another engine, never text to show.
DROPPED_WITH_CONTENT = frozenset({"script", "style", "template", "noscript", "iframe", "object", "svg", "math",
                                  "textarea", "title", "xmp", "noembed", "noframes", "plaintext"})
#: Attributes that hold URLs (CSS ``url()`` lives in ``style``); none but a link's ``href`` survives
#: (figures come as image outputs, published as files, never as HTML ``<img>``).
URL_ATTRIBUTES = frozenset({"href", "src", "xlink:href", "srcset", "action", "formaction", "poster", "background",
                            "data", "cite", "longdesc", "ping", "style"})
_CSS_URL = re.compile(r"url\(\s*(['\"]?)(.*?)\1\s*\)", re.I | re.S)


def unsafe_urls(text: str) -> int:
    """How many URLs in the markup ``text`` fail :func:`safe_url`: in URL
    attributes (each candidate of a ``srcset``) and CSS ``url()``, in any tag."""
    found = 0

    class Counter(HTMLParser):
        def handle_starttag(self, tag, attrs):
            nonlocal found
            for name, value in attrs:
                if name not in URL_ATTRIBUTES or value is None:
                    continue
                if name == "style":
                    urls = [m.group(2) for m in _CSS_URL.finditer(html.unescape(value))]
                elif name == "srcset":
                    urls = [part.split()[0] for part in value.split(",") if part.split()]
                else:
                    urls = [value]
                found += sum(not safe_url(url) for url in urls)

        handle_startendtag = handle_starttag

        def handle_data(self, data):  # <style> and <svg> content: CSS url() too
            nonlocal found
            found += sum(not safe_url(m.group(2)) for m in _CSS_URL.finditer(data))

    counter = Counter(convert_charrefs=True)
    counter.feed(str(text))
    counter.close()
    return found


#: The deepest one HTML output may nest its elements in a post. The deepest real output nests 5 (a pandas
#: table: table, thead, tr, th, and a span); kramdown (which has no limit of its own to set) parses nested HTML
#: by recursion and overflows Ruby's stack between 1,000 and 2,000 levels, stopping the build of the whole site.
MAX_HTML_DEPTH = 32
#: The most elements one HTML output may hold. kramdown reads an HTML block in a time that grows with its
#: elements times its bytes (5,000 elements of 50 bytes: about a second); the largest real output holds 1,224.
MAX_HTML_ELEMENTS = 5_000
#: The most bytes one sanitised HTML output may take: what :data:`sidebyside.publish.preprocess.OUTPUT_CAP`
#: keeps of it (200 KB), and room for the character references sanitising writes (a newline becomes ``&#10;``).
MAX_HTML_BYTES = 300_000
_VOID = frozenset("area base br col embed hr img input link meta param source track wbr".split())


def html_shape(markup: str) -> tuple[int, int]:
    """``(depth, elements)`` of HTML ``markup``: how deep its elements nest (void elements such as
    ``<br>`` add none) and how many there are. Read by Python's ``HTMLParser``, which keeps no stack
    of its own: no depth can stop it."""
    depth = deepest = elements = 0

    class Reader(HTMLParser):
        def handle_starttag(self, tag, attrs):
            nonlocal depth, deepest, elements
            elements += 1
            if tag not in _VOID:
                depth += 1
                deepest = max(deepest, depth)

        def handle_startendtag(self, tag, attrs):
            nonlocal elements
            elements += 1

        def handle_endtag(self, tag):
            nonlocal depth
            if tag not in _VOID:
                depth = max(0, depth - 1)

    reader = Reader(convert_charrefs=False)
    reader.feed(str(markup))
    reader.close()
    return deepest, elements


def bounded(markup: str) -> str:
    """``markup`` (sanitised HTML, balanced) when it nests at most :data:`MAX_HTML_DEPTH` deep, holds
    at most :data:`MAX_HTML_ELEMENTS` elements and takes at most :data:`MAX_HTML_BYTES` bytes (UTF-8);
    else, in its place, one paragraph saying which limit it passed and by how much and that the whole
    output is in the executed notebook among the post's downloads (said on stderr too). Nothing
    over a limit reaches kramdown."""
    size = len(markup.encode("utf-8"))
    depth, elements = html_shape(markup) if size <= MAX_HTML_BYTES else (0, 0)
    over = (f"it takes {size:,} bytes, more than the {MAX_HTML_BYTES:,} a post shows" if size > MAX_HTML_BYTES else
            f"it nests {depth:,} elements deep, deeper than the {MAX_HTML_DEPTH} a post shows"
            if depth > MAX_HTML_DEPTH else
            f"it holds {elements:,} elements, more than the {MAX_HTML_ELEMENTS:,} a post shows"
            if elements > MAX_HTML_ELEMENTS else "")
    if not over:
        return markup
    warn(f"an HTML output was left out of the post: {over}")
    return (f'<p class="output-left-out">[an HTML output was left out: {over}; the whole output is in the executed '
            "notebook among this post's downloads]</p>")


def sanitise(markup: str, *, image: Callable[[str], bool] | None = None) -> str:
    """HTML reduced by ``nh3`` to the allow-list (:data:`ALLOWED_TAGS`,
    :data:`ALLOWED_ATTRIBUTES`): no script, no style, no event handler, no
    form, no frame, every tag balanced so that it cannot close the block
    around it. Links keep their URL only where it passes :func:`safe_url`
    (nh3 checks the scheme too, after the HTML parser's own decoding); when
    any URL was removed, a paragraph saying how many ends the output. With
    ``image`` (a test of an ``<img>``'s ``src``), images whose ``src`` passes
    it are kept (``src`` and ``alt`` only); without, no ``<img>`` is. The
    result is one line, newlines written ``&#10;``, so that kramdown, which
    ends an HTML block at a blank line, passes it through whole, and within
    the bounds of :func:`bounded` (else a note stands in its place)."""
    import nh3

    text = drop_controls(str(markup))
    tags = set(ALLOWED_TAGS) | ({"img"} if image else set())
    attributes = {tag: set(names) for tag, names in ALLOWED_ATTRIBUTES.items()}
    if image:
        attributes["img"] = {"src", "alt"}

    def keep(tag: str, attribute: str, value: str) -> str | None:
        if attribute == "href" and not safe_url(value):
            return None
        if tag == "img" and attribute == "src" and not (image and image(value)):
            return None
        return drop_controls(value)

    out = nh3.clean(text, tags=tags, clean_content_tags=set(DROPPED_WITH_CONTENT), attributes=attributes,
                    attribute_filter=keep, url_schemes=set(SAFE_SCHEMES), strip_comments=True,
                    link_rel="noopener noreferrer nofollow")
    removed = unsafe_urls(text)
    if removed:
        out += f'<p class="unsafe-url-removed">{removed} unsafe link{"s" if removed > 1 else ""} removed from this output</p>'
    return bounded(out.replace("\n", "&#10;"))


def safe_html(text: str) -> str:
    """``text/html`` output, sanitised by :func:`sanitise` without images
    (figures come as image outputs, published as files)."""
    return sanitise(text)


# --------------------------------------------------------------------------- Markdown

_FENCE_OPEN = re.compile(r"^ {0,3}(`{3,}|~{3,})")
# Code spans and math on one line, whose links safe_links leaves alone (the notebook's own text).
_PROTECTED = re.compile(r"(?<![\\`])(`+)[^`\n](?:[^\n]*?[^`\n])?\1(?!`)|(?<!\\)\$\$[^\n]+?\$\$")
# Where a link or image destination starts: an inline ``](`` (kramdown allows space between), a reference
# definition ``[id]: url``.
_INLINE_DEST = re.compile(r"\]\s*\(")
# What could be a reference definition: kramdown reads one only at the start of a block, its URL the
# rest of the line; every line that looks like one is checked (a paragraph's line too: never fewer).
_REFERENCE_DEF = re.compile(r"^( {0,3}\[[^\]\n]+\]:)[ \t]*(\S.*)$")
_TITLE = re.compile(r"""\s+("[^"]*"|'[^']*'|\([^()]*\))\s*$""", re.S)


def _destination(inner: str) -> str:
    """The URL of a link's ``(...)``: its title (quoted or parenthesised, after a space) left out."""
    inner = inner.strip()
    if inner.startswith("&lt;") and ">" in inner:
        return inner[4:inner.index(">")]
    return _TITLE.sub("", inner)


def _check_links(text: str) -> str:
    """Every inline link or image destination and every reference definition
    in ``text`` whose URL fails :func:`safe_url` is replaced by
    :data:`REMOVED_URL`, followed by :data:`REMOVED_NOTE`. An inline
    destination is read to its balanced closing parenthesis (or the end of the
    paragraph), across whitespace and newlines: never shorter than kramdown
    reads it; a definition's URL is the rest of its line, as kramdown reads it."""
    out, last = [], 0
    for match in _INLINE_DEST.finditer(text):
        if match.start() < last:
            continue
        start, depth, i = match.end(), 1, match.end()
        while i < len(text) and depth:
            if text[i] == "\\":
                i += 2
                continue
            if text[i] == "(":
                depth += 1
            elif text[i] == ")":
                depth -= 1
            elif text.startswith("\n\n", i):
                break
            i += 1
        end = i - 1 if depth == 0 else i  # the closing parenthesis, or where the paragraph ends
        if not safe_url(_destination(text[start:end])):
            out.append(text[last:start] + REMOVED_URL + ") " + REMOVED_NOTE)
            last = end + 1 if depth == 0 else end
    out.append(text[last:])
    text = "".join(out)

    lines = text.split("\n")
    for n, line in enumerate(lines):
        definition = _REFERENCE_DEF.match(line)
        if definition and not safe_url(_destination(definition.group(2))):
            lines[n] = f"{definition.group(1)} {REMOVED_URL}\n\n{REMOVED_NOTE}\n"
    return "\n".join(lines)


def _split_fences(lines: list[str]) -> Iterator[tuple[str, list[str], str | None]]:
    """``lines`` as runs of prose and fenced blocks, in order: ``(opening, body, closing)`` where
    ``opening`` is "" for a run of prose (then ``body`` is its lines and ``closing`` None), else the
    fence's opening line; ``closing`` is its closing line, None when the text ends inside the block."""
    prose: list[str] = []
    i = 0
    while i < len(lines):
        opening = _FENCE_OPEN.match(lines[i])
        if not opening:
            prose.append(lines[i])
            i += 1
            continue
        yield "", prose, None
        prose = []
        fence = opening.group(1)
        closing = re.compile(r"^ {0,3}" + re.escape(fence[0]) + "{" + str(len(fence)) + r",}\s*$")
        first, body = lines[i], []
        i += 1
        while i < len(lines) and not closing.match(lines[i]):
            body.append(lines[i])
            i += 1
        yield first, body, lines[i] if i < len(lines) else None
        i += 1
    yield "", prose, None


def safe_links(markdown: str) -> str:
    """Markdown written by the project (a notebook's Markdown cells): kept as
    it is, raw HTML included, but every link and image outside code and math
    whose URL fails :func:`safe_url` is pointed at :data:`REMOVED_URL`, followed by
    :data:`REMOVED_NOTE` (:func:`_check_links`)."""
    out: list[str] = []
    for opening, body, closing in _split_fences(str(markdown).split("\n")):
        if opening:
            out.append("\n".join([opening, *body, *([closing] if closing is not None else [])]))
            continue
        text = "\n".join(body)
        parts, last = [], 0
        for match in _PROTECTED.finditer(text):
            parts += [_check_links(text[last:match.start()]), match.group(0)]
            last = match.end()
        out.append("".join(parts) + _check_links(text[last:]))
    return "\n".join(out)


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

