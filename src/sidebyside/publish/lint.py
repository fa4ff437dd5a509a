"""The generated text of a post, checked before it is published.

:func:`problems` reads a post's Markdown (front matter included, so that line numbers are the
file's) and returns one message per fault, each naming its line:

- a log or warning line from a library, inside an output or not: glog/absl style
  (``W1123 04:19:28.977502  9668 file.cc:88] ...``), Python's logging (``WARNING:absl:...``),
  a warning (``file.py:12: UserWarning: ...``, ``UserWarning: ...``), or a pandas Series'
  ``dtype: float64`` trailer (a value printed where a table was meant);
- a sentence ending in a colon with nothing after it: prose whose next line is a heading,
  the end of a section (``</details>``, ``</div>``) or the end of the post;
- numbered section headings (``## 4. ...``) out of order in the body: at each level, 1, 2, 3 ...
  as they appear before the appendix (``## Appendix {#appendix}``), whose sections the publisher
  gathers from anywhere in the notebook.

:func:`check` raises :class:`PublishError` with every message; the publisher calls it on each
post it renders, so a post with any of them is refused (fix the notebook's text or outputs).

:func:`check_reading`, also called on each rendered post, measures what a reader reads
(:mod:`sidebyside.publish.wordcount`): prose before the appendix over 1,500 words, or a conclusion
over 400, is a warning; a sentence said three times or more on the page is a warning too, and
refuses the post only where the environment sets ``SIDEBYSIDE_STRICT_WORDS=1`` (so that the next
republication can turn it on once today's posts are shortened).
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from typing import Any

from sidebyside.publish.common import PublishError, warn

__all__ = ["LOG_LINES", "STRICT_WORDS", "problems", "check", "check_reading"]

#: The environment variable that turns a sentence said three times or more into a refusal.
STRICT_WORDS = "SIDEBYSIDE_STRICT_WORDS"

#: What a library's log or warning line looks like, with the name the message gives it.
LOG_LINES = (
    (re.compile(r"^\s*[IWEF]\d{4} \d\d:\d\d:\d\d(\.\d+)?\s+\d+\s+\S+:\d+\]"), "a glog/absl log line"),
    (re.compile(r"^\s*(WARNING|ERROR|INFO|DEBUG|CRITICAL):[\w.]*:"), "a Python logging line"),
    (re.compile(r"^\s*\S+\.py:\d+: \w*(Warning|Error):"), "a Python warning"),
    (re.compile(r"^\s*\w*Warning: "), "a Python warning"),
    (re.compile(r"^\s*(Name: .*, )?dtype: \w+\s*$"), "a pandas Series' dtype line (a value printed, not a table)"),
)
_FENCE = re.compile(r"^\s*(```|~~~)")
_HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
_NUMBERED = re.compile(r"^(\d+)\.\s")
_SECTION_END = re.compile(r"^\s*(</details>|</div>|<details\b|#{1,6}\s)")


def _show(line: str) -> str:
    line = line.strip()
    return line if len(line) <= 90 else line[:87] + "..."


def problems(post: str) -> list[str]:
    """Every fault of ``post`` (see the module docstring), as ``"line N: what: the line"``."""
    lines = post.split("\n")
    start = 0
    if lines and lines[0] == "---":  # the front matter: numbered, not read
        start = next((i + 1 for i in range(1, len(lines)) if lines[i] == "---"), 0)
    found: list[str] = []
    fenced = False
    numbers: dict[int, int] = {}
    appendix = False
    for i in range(start, len(lines)):
        line, where = lines[i], f"line {i + 1}"
        if _FENCE.match(line):
            fenced = not fenced
            continue
        for pattern, what in LOG_LINES:
            if pattern.search(line):
                found.append(f"{where}: {what} in the post: {_show(line)}")
                break
        if fenced:
            continue
        heading = _HEADING.match(line)
        if heading:
            level = len(heading.group(1))
            numbered = _NUMBERED.match(heading.group(2))
            appendix = appendix or "{#appendix}" in line
            if numbered and not appendix:
                n, expected = int(numbered.group(1)), numbers.get(level, 0) + 1
                if n != expected:
                    found.append(f"{where}: section {n} where section {expected} was due (numbered sections out "
                                 f"of order): {_show(line)}")
                numbers[level] = n
                for deeper in [k for k in numbers if k > level]:
                    del numbers[deeper]
            continue
        if line.rstrip().endswith(":") and line.strip() and not line.lstrip().startswith(("<", "|", "-", "*")):
            following = next((j for j in range(i + 1, len(lines)) if lines[j].strip()), None)
            if following is None or _SECTION_END.match(lines[following]):
                found.append(f"{where}: a sentence ends in a colon with nothing after it: {_show(line)}")
    return found


def check(post: str, where: str) -> None:
    """Raise :class:`PublishError` naming ``where`` and each of :func:`problems`, if any."""
    found = problems(post)
    if found:
        raise PublishError(f"{where}: the post's generated text is refused ({len(found)} "
                           f"problem{'s' if len(found) != 1 else ''}); fix the notebook's text or outputs:\n  "
                           + "\n  ".join(found))


def check_reading(post: str, where: str, record: Mapping[str, Any] | None = None) -> None:
    """Warn naming ``where`` for each limit ``post`` is over (:func:`.wordcount.over`) and each
    sentence it repeats (``record``: its results, whose verdict box texts count too); with
    :data:`STRICT_WORDS` set to 1, raise :class:`PublishError` for repeated sentences instead."""
    from sidebyside.publish import wordcount

    reading = wordcount.measure(post, record)
    for line in wordcount.over(reading):
        warn(f"{where}: {line} (shorten the notebook's text)")
    if not reading.repeated:
        return
    said = [f"{n}×: {sentence}" for sentence, n in reading.repeated.items()]
    message = (f"{where}: {len(said)} sentence{'s' if len(said) != 1 else ''} said "
               f"{wordcount.REPEAT_LIMIT} times or more on the page (numbers aside); say a caveat "
               "once, where it applies:\n  " + "\n  ".join(said))
    if os.environ.get(STRICT_WORDS) == "1":
        raise PublishError(message)
    warn(message)
