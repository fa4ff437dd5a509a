"""What a reader reads of a post, counted: :func:`measure` reads a rendered post's Markdown (front
matter included) with markdown-it-py and returns a :class:`Reading`, checked against
:data:`PROSE_LIMIT` and :data:`CONCLUSION_LIMIT` (:func:`over`) and :data:`REPEAT_LIMIT`.

What counts as a word: a run of non-space characters holding a letter or a digit, in prose, that
is the text of paragraphs, list items and block quotes (inline code and math counted as their
text), and the text of raw HTML blocks (the "What was compared" paragraph, a notebook's
Markdown output such as the conclusion in full) read with Python's ``HTMLParser``. Never counted:
front matter, headings, a collapsed part's ``<summary>`` label, code blocks and fenced outputs,
tables (Markdown or HTML), paired code (``div.pair``), ``<pre>``, ``<svg>``, and images (their alt
text). The verdict box is drawn by the layout from the results record, not from the post's
Markdown, so none of its words or numbers counts.

- ``prose``: the words before the appendix heading (``{#appendix}``), collapsed parts and a GPU
  run's section included; the whole post where it has no appendix.
- ``conclusion``: the words under the heading whose text, less its number (``## 6. Conclusion``),
  begins with "Conclusion", down to the next heading of its level or above; None without one.
- ``repeated``: each sentence of the whole page (appendix included; and, given the record, the
  texts the verdict box prints: question, sentence, caveat, test) said :data:`REPEAT_LIMIT` times
  or more, normalised (:func:`normalise`: case, spaces, every number masked as ``#``).

:func:`sidebyside.publish.lint.check_reading` applies this to each post the publisher renders;
``python -m sidebyside.publish words`` (:func:`main`) prints it for every published post.
"""

from __future__ import annotations

import functools
import json
import re
from collections import Counter
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

__all__ = ["PROSE_LIMIT", "CONCLUSION_LIMIT", "REPEAT_LIMIT", "MIN_SENTENCE_WORDS", "Reading",
           "words", "normalise", "sentences", "html_prose", "measure", "over", "published", "table",
           "main"]

PROSE_LIMIT = 1500
CONCLUSION_LIMIT = 400
REPEAT_LIMIT = 3
#: A sentence shorter than this many words (a label, "See below.") is not checked for repeats.
MIN_SENTENCE_WORDS = 4

_WORD = re.compile(r"\S+")
_HAS_WORD = re.compile(r"\w")
_NUMBER = re.compile(r"[-+−]?\d+(?:[.,]\d+)*(?:[eE][-+−]?\d+)?")
#: A sentence ends at ., ! or ? (closing quotes or brackets may follow) before a space and a
#: character that is not a lower-case letter.
_SENTENCE_END = re.compile(r"(?<=[.!?])[\"'”’)\]]*\s+(?=[^a-z])")
_ATTRIBUTES = re.compile(r"\s*\{[#.:][^{}]*\}\s*$")
_SECTION_NUMBER = re.compile(r"^\s*\d+(?:\.\d+)*\.?\s+")
_CONCLUSION = re.compile(r"conclusions?\b", re.IGNORECASE)
#: HTML elements whose text is not prose, skipped with everything inside them.
_SKIPPED_TAGS = frozenset({"table", "pre", "summary", "svg", "script", "style", "math", "template"})
_SKIPPED_CLASSES = frozenset({"pair"})
_VOID = frozenset({"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta",
                   "source", "track", "wbr"})
#: HTML elements that end a run of text (a sentence never runs across them).
_BLOCKS = frozenset({"p", "li", "div", "br", "h1", "h2", "h3", "h4", "h5", "h6", "blockquote", "dd",
                     "dt", "details", "figcaption", "tr", "td", "th", "ul", "ol", "section", "hr"})


@dataclass
class Reading:
    """A post's counts: ``prose`` and ``conclusion`` words (the module docstring says which),
    ``repeated``: ``{normalised sentence: times}`` of those said :data:`REPEAT_LIMIT` times or
    more, the most said first."""

    prose: int = 0
    conclusion: int | None = None
    repeated: dict[str, int] = field(default_factory=dict)


def words(text: str) -> int:
    """How many words ``text`` holds: runs of non-space characters with a letter or a digit."""
    return sum(1 for w in _WORD.findall(text) if _HAS_WORD.search(w))


def normalise(sentence: str) -> str:
    """``sentence`` as repeats are compared: lower case, one space between words, every number
    (``12``, ``1.23``, ``-4e-3``, ``10,000``) masked as ``#``, no closing punctuation."""
    masked = _NUMBER.sub("#", sentence.casefold())
    return " ".join(masked.split()).rstrip(" .!?:;")


def sentences(text: str) -> list[str]:
    """The sentences of a run of prose ``text``: split after ., ! or ? followed by a space and
    no lower-case letter (a number's decimal point, "e.g. this" end none); empty pieces dropped."""
    return [s.strip() for s in _SENTENCE_END.split(" ".join(text.split())) if s.strip()]


class _Prose(HTMLParser):
    """The runs of prose text of an HTML fragment (:data:`_BLOCKS` end a run), skipping
    :data:`_SKIPPED_TAGS` and elements of a :data:`_SKIPPED_CLASSES` class with all they hold."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.runs: list[str] = [""]
        self._skip: tuple[str, int] | None = None  # (tag, depth of that tag) while skipping

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in _VOID:
            self._break(tag)
            return
        if self._skip is not None:
            if tag == self._skip[0]:
                self._skip = (tag, self._skip[1] + 1)
            return
        classes = set(str(dict(attrs).get("class") or "").split())
        if tag in _SKIPPED_TAGS or classes & _SKIPPED_CLASSES:
            self._skip = (tag, 1)
        self._break(tag)

    def handle_endtag(self, tag: str) -> None:
        if self._skip is not None:
            if tag == self._skip[0]:
                depth = self._skip[1] - 1
                self._skip = None if depth == 0 else (tag, depth)
            return
        self._break(tag)

    def handle_data(self, data: str) -> None:
        if self._skip is None:
            self.runs[-1] += data

    def _break(self, tag: str) -> None:
        if tag in _BLOCKS and self.runs[-1].strip():
            self.runs.append("")


def html_prose(fragment: str) -> list[str]:
    """The runs of prose of an HTML ``fragment`` (see :class:`_Prose`), each one line."""
    parser = _Prose()
    parser.feed(fragment)
    parser.close()
    return [" ".join(run.split()) for run in parser.runs if run.strip()]


@functools.lru_cache(maxsize=1)
def _parser():
    from markdown_it import MarkdownIt
    from mdit_py_plugins.dollarmath import dollarmath_plugin
    from mdit_py_plugins.front_matter import front_matter_plugin

    md = MarkdownIt("commonmark", {"html": True}).enable(["table", "strikethrough"])
    md.use(front_matter_plugin)
    md.use(dollarmath_plugin, allow_space=True, allow_digits=True, double_inline=True)
    return md


def _inline_text(token: Any) -> str:
    """The prose of an inline token: its text, inline code and math; an image's alt text (its
    children, never read here) and raw HTML tags left out."""
    out = []
    for child in token.children or []:
        if child.type in ("softbreak", "hardbreak"):
            out.append(" ")
        elif child.type in ("text", "code_inline", "math_inline", "math_inline_double"):
            out.append(child.content)
    return "".join(out)


def _heading_text(token: Any) -> str:
    return _ATTRIBUTES.sub("", token.content).strip()


def _runs(post: str) -> Iterator[tuple[str, str]]:
    """``(where, run of prose)`` of ``post`` in order; ``where`` is "prose", "conclusion" (a run of
    the conclusion, which is before the appendix too) or "appendix"."""
    tokens = _parser().parse(post)
    appendix, conclusion_level, table = False, 0, 0
    i = 0
    while i < len(tokens):
        token = tokens[i]
        if token.type == "heading_open":
            level, text = int(token.tag[1]), tokens[i + 1].content
            if conclusion_level and level <= conclusion_level:
                conclusion_level = 0
            appendix = appendix or "{#appendix}" in text
            title = _SECTION_NUMBER.sub("", _heading_text(tokens[i + 1]))
            if not appendix and _CONCLUSION.match(title):
                conclusion_level = level
            i += 3  # heading_open, inline, heading_close: a heading is not prose
            continue
        table += {"table_open": 1, "table_close": -1}.get(token.type, 0)
        where = "appendix" if appendix else "conclusion" if conclusion_level else "prose"
        if token.type == "inline" and not table:
            yield where, _inline_text(token)
        elif token.type == "html_block":
            for run in html_prose(token.content):
                yield where, run
        i += 1


def _verdict_texts(record: Mapping[str, Any]) -> Iterator[str]:
    """What the verdict box prints as prose for each verdict of ``record`` (and of its GPU run):
    question, sentence, caveat, and "Test: <test>."."""
    from sidebyside.publish import records

    for run in records.split_runs(dict(record)):
        for v in ((run or {}).get("metrics") or {}).get("verdicts") or []:
            if not isinstance(v, Mapping):
                continue
            yield from (str(v.get(k) or "") for k in ("question", "sentence", "caveat"))
            if v.get("test"):
                yield f"Test: {v['test']}."


def measure(post: str, record: Mapping[str, Any] | None = None) -> Reading:
    """The :class:`Reading` of ``post`` (a rendered post's Markdown, front matter included), its
    repeats counted over the post and, given its results ``record``, its verdict box's texts."""
    reading = Reading()
    said: Counter[str] = Counter()
    texts: list[str] = []
    for where, run in _runs(post):
        n = words(run)
        if where != "appendix":
            reading.prose += n
        if where == "conclusion":
            reading.conclusion = (reading.conclusion or 0) + n
        texts.append(run)
    if record:
        texts.extend(_verdict_texts(record))
    for text in texts:
        said.update(normalise(s) for s in sentences(text) if words(s) >= MIN_SENTENCE_WORDS)
    reading.repeated = {s: n for s, n in said.most_common() if n >= REPEAT_LIMIT}
    return reading


def over(reading: Reading) -> list[str]:
    """What of ``reading`` is over a limit, one line each ("prose 1,820 words, over 1,500")."""
    found = []
    if reading.prose > PROSE_LIMIT:
        found.append(f"prose before the appendix {reading.prose:,} words, over {PROSE_LIMIT:,}")
    if reading.conclusion is not None and reading.conclusion > CONCLUSION_LIMIT:
        found.append(f"conclusion {reading.conclusion:,} words, over {CONCLUSION_LIMIT:,}")
    return found


def published(site: Path, only: str | None = None) -> list[tuple[str, Reading]]:
    """``(slug, reading)`` of each post of ``site/_posts`` (its slug the file name less its date;
    ``only``: comma-separated slugs), its verdict box read from ``site/_data/results/<slug>.json``
    where there is one."""
    wanted = {s.strip() for s in only.split(",") if s.strip()} if only else None
    out = []
    for path in sorted((Path(site) / "_posts").glob("*.md")):
        slug = path.stem[11:]
        if wanted is not None and slug not in wanted:
            continue
        results = Path(site) / "_data" / "results" / f"{slug}.json"
        record = json.loads(results.read_text(encoding="utf-8")) if results.is_file() else None
        out.append((slug, measure(path.read_text(encoding="utf-8"), record)))
    return out


def table(rows: list[tuple[str, Reading]]) -> str:
    """``rows`` (:func:`published`) as the ``words`` command prints them: one line per post, its
    counts against the limits and what is over, then each repeated sentence with its count."""
    name = max([len("post"), *(len(slug) for slug, _ in rows)])
    lines = [f"{'post':<{name}}  {'prose':>6}/{PROSE_LIMIT:,}  "
             f"{'conclusion':>10}/{CONCLUSION_LIMIT}  {'repeats':>7}  over"]
    for slug, r in rows:
        late = [w for w, bad in (("prose", r.prose > PROSE_LIMIT),
                                 ("conclusion", (r.conclusion or 0) > CONCLUSION_LIMIT),
                                 ("repeats", bool(r.repeated))) if bad]
        conclusion = "none" if r.conclusion is None else f"{r.conclusion:,}"
        lines.append(f"{slug:<{name}}  {r.prose:>6,} {'':>5}  {conclusion:>10} {'':>3}  "
                     f"{len(r.repeated):>7}  {', '.join(late) or '-'}")
    for slug, r in rows:
        if r.repeated:
            lines.append(f"\n{slug}: sentences said {REPEAT_LIMIT} times or more "
                         "(numbers masked as #)")
            lines.extend(f"  {n:>3}×  {sentence}" for sentence, n in r.repeated.items())
    return "\n".join(lines)


def main(site: Path, only: str | None = None) -> int:
    """Print :func:`table` of ``site``'s posts; 1 where a post is over a limit or repeats a
    sentence :data:`REPEAT_LIMIT` times, else 0."""
    rows = published(site, only)
    print(table(rows) if rows else f"{site}: no post in _posts/")
    return 1 if any(over(r) or r.repeated for _, r in rows) else 0
