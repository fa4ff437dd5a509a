"""A notebook's outputs as a post may show them: the publisher's preprocessing.

:func:`preprocess` hides tagged cells, drops the parameter cells, cleans streams (progress bars
collapsed, control characters dropped), scrubs local paths and the host name
(:func:`scrub_rules`), cuts each output at :data:`OUTPUT_CAP`, and turns figures into files
with stable names (:mod:`.figures`). :func:`table_rows` counts a table output's rows. Shared by
a post's body (:mod:`.rendering`) and a GPU run's section (:mod:`.gpu_section`).
"""

from __future__ import annotations

import functools
import os
import re
import socket
import sys
from pathlib import Path
from typing import Any

from sidebyside.publish import caps, escape, figures
from sidebyside.publish.common import ANSI_RE, warn

__all__ = ["OUTPUT_CAP", "KEY_FIGURE_TAG", "scrub_rules", "scrub", "collapse_progress", "kramdown_math", "cap_output",
           "preprocess", "table_rows", "details"]

#: The cell tag that makes a figure the post's key figure: the first figure among the tagged
#: cell's outputs moves up, under *what was compared* (:func:`sidebyside.publish.rendering.arrange_lead`);
#: in a GPU run's section it is the one figure shown open (:mod:`sidebyside.publish.gpu_section`).
KEY_FIGURE_TAG = "key-figure"

#: The most a single cell output (a stream, a value, a traceback, HTML, Markdown) shows in a post, in
#: bytes of UTF-8; the rest is cut with a note (:func:`cap_output`). The executed notebook among the
#: post's downloads keeps it whole.
OUTPUT_CAP = 200_000


def scrub_rules(root: Path) -> list[tuple[re.Pattern, str]]:
    """Absolute local paths and the host name never reach a post. Placeholders
    use square brackets: angle brackets would read as HTML tags to kramdown.

    Each place is matched as written and resolved (symlinks), wherever it
    ends: before ``/``, a space, a quote or any punctuation (``)``, ``]``,
    ``,``, ``;``, ``.``), just not inside a longer name (``/rootfs``)."""
    import tempfile

    places: dict[str, str] = {}
    for place, replacement in ((root, "."), (sys.prefix, "[venv]"), (sys.base_prefix, "[python]"),
                               (Path.home(), "~"), (tempfile.gettempdir(), "[tmp]"),
                               (os.environ.get("TMPDIR", "/tmp"), "[tmp]")):
        for form in {str(place), os.path.realpath(place), os.path.abspath(place)}:
            form = form.rstrip("/")
            if form and form != "/":
                places.setdefault(form, replacement)
    rules = [(re.compile(re.escape(p) + r"(?![\w-])"), r) for p, r in
             sorted(places.items(), key=lambda kv: -len(kv[0]))]
    for name in _host_names():
        # Whole words only (any case): a host called "vm" must not turn "vmap" into "[host]ap".
        rules.append((re.compile(r"(?<![\w-])" + re.escape(name) + r"(?![\w-])", re.I), "[host]"))
    return rules


@functools.lru_cache(maxsize=1)
def _host_names() -> list[str]:
    """This machine's names, longest first (once per process: getfqdn may wait on DNS)."""
    names: set[str] = set()
    for host in {socket.gethostname(), socket.getfqdn(), os.uname().nodename}:
        names |= {host, host.split(".")[0]}
    return sorted(names - {"", "localhost", "localhost.localdomain"}, key=len, reverse=True)


def scrub(text: str, rules) -> str:
    for pattern, replacement in rules:
        text = pattern.sub(replacement, text)
    return text


def collapse_progress(text: str) -> str:
    r"""Keep what a terminal would show: for each line, the text after its last
    carriage return (tqdm redraws a bar with ``\r``)."""
    lines = []
    for line in text.split("\n"):
        frames = [f for f in line.split("\r") if f.strip()]
        lines.append(frames[-1] if frames else "")
    return "\n".join(lines)



_CODE_SPAN = re.compile(r"(```.*?```|~~~.*?~~~|`[^`\n]*`)", re.S)
_INLINE_MATH = re.compile(r"(?<![\\$])\$(?!\$)([^$\n]+?)(?<![\\$])\$(?!\$)")


def kramdown_math(markdown: str) -> str:
    """The notebook's own Markdown cells (the project's text, which kramdown
    reads): Jupyter writes inline math as ``$x$``; kramdown only protects
    ``$$x$$`` (it would read ``_`` inside as emphasis). Rewrite outside code.
    Outputs never come here: :mod:`.markdown` parses their math."""
    parts = _CODE_SPAN.split(markdown)
    return "".join(part if i % 2 else _INLINE_MATH.sub(r"$$\1$$", part) for i, part in enumerate(parts))


def _size(n: int) -> str:
    return f"{n / 1e6:.1f} MB" if n >= 1e6 else f"{n / 1e3:.0f} KB" if n >= 1e3 else f"{n} bytes"


def cap_output(text: str, slug: str, *, cap: int = OUTPUT_CAP, html: bool = False) -> str:
    """``text`` if it holds at most ``cap`` bytes (UTF-8); else its first
    ``cap`` bytes (back to the last line break when one is in the second
    half), then a note saying how much was cut and that the whole output is in
    the executed notebook ``<slug>.ipynb`` among the post's downloads. With
    ``html``, the note is a paragraph (the cut markup is balanced later, by
    :func:`sidebyside.publish.escape.safe_html`)."""
    data = text.encode("utf-8")
    if len(data) <= cap:
        return text
    kept = data[:cap].decode("utf-8", errors="ignore")
    line = kept.rfind("\n")
    if line > len(kept) // 2:
        kept = kept[:line]
    cut = len(data) - len(kept.encode("utf-8"))
    note = (f"[output cut: {_size(cut)} of {_size(len(data))} not shown here; the whole output is in the executed "
            f"notebook, {slug}.ipynb, among this post's downloads]")
    return f"{kept}\n<p>{note}</p>" if html else f"{kept}\n{note}"


def _slugify(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-") or "figure"



_EXT = {"image/png": "png", "image/svg+xml": "svg", "image/jpeg": "jpg"}
_SHOWN = ("text/plain", "text/html", "text/markdown", "text/latex", *_EXT)
#: The tag of a post's first code cell, "run this post yourself" (tests/test_colab.py): the post shows
#: what it prints, not the value it ends on (``colab.setup``'s versions, which its printed line names).
INSTALL_TAG = "colab-install"


def preprocess(nb, slug: str, root: Path) -> tuple[Any, dict[str, bytes]]:
    """Our preprocessing, in place on a copy: hide tagged cells, drop the
    parameter cells and the value of the :data:`INSTALL_TAG` cell, clean streams,
    scrub paths, extract figures with stable names. Returns the notebook and
    ``{filename: bytes}``."""
    from nbconvert.preprocessors import TagRemovePreprocessor

    nb = caps.cut_outputs(nb)  # a copy: each output's text cut at caps.MAX_STREAM_CHARS, marked
    nb.cells = [c for c in nb.cells if not {"parameters", "injected-parameters"} & set(c.metadata.get("tags", []))]
    tag_remover = TagRemovePreprocessor(
        remove_cell_tags={"remove_cell"}, remove_input_tags={"remove_input"},
        remove_all_outputs_tags={"remove_output"}, enabled=True,
    )
    nb, _ = tag_remover.preprocess(nb, {})
    rules = scrub_rules(root)
    images: dict[str, bytes] = {}
    unnamed = 0
    for number, cell in enumerate(nb.cells):
        if cell.cell_type == "markdown":
            cell.source = escape.safe_links(kramdown_math(escape.drop_controls(cell.source)))
            continue
        if cell.cell_type != "code":
            continue
        cell.source = scrub(escape.drop_controls(cell.source), rules)
        outputs = []
        for output in cell.get("outputs", []):
            kind = output.get("output_type")
            if kind == "execute_result" and INSTALL_TAG in cell.metadata.get("tags", []):
                continue
            if kind == "stream":
                # Chunks of one stream are one text: a tqdm frame may start in one chunk
                # and be redrawn ("\r") in the next. Join raw, clean once at the end.
                if outputs and outputs[-1].get("output_type") == "stream" and outputs[-1].get("name") == output.get("name"):
                    outputs[-1]["text"] += output.get("text", "")
                    continue
            elif kind == "error":
                traceback = "\n".join(scrub(escape.drop_controls(ANSI_RE.sub("", line)), rules)
                                      for line in output.get("traceback", []))
                output["traceback"] = cap_output(traceback, slug).split("\n")
            elif kind in ("display_data", "execute_result"):
                data = output.get("data", {})
                for mime in [m for m in data if m not in _SHOWN]:
                    data.pop(mime)  # JavaScript, widgets, anything the post template does not print safely
                for mime in ("text/plain", "text/html", "text/markdown", "text/latex"):
                    if mime in data:
                        text = data[mime] if isinstance(data[mime], str) else "".join(data[mime])
                        text = scrub(escape.drop_controls(ANSI_RE.sub("", text)), rules)
                        text = cap_output(text, slug, html=mime == "text/html")
                        data[mime] = text
                mime = next((m for m in _EXT if m in data), None)
                if mime:
                    base = cell.metadata.get("figure")
                    if not base:
                        unnamed += 1
                        base = f"figure-{unnamed}"
                    base = _slugify(str(base))
                    name, n = f"{base}.{_EXT[mime]}", 2
                    while name in images:
                        name, n = f"{base}-{n}.{_EXT[mime]}", n + 1
                    try:
                        payload = figures.figure_file(mime, data[mime], lambda text: scrub(text, rules))
                    except figures.FigureError as exc:
                        first = next((line for line in cell.source.splitlines() if line.strip()), "")[:60]
                        warn(f"{slug}: cell {number} [{first}] displays a figure ({name}) that was left out: {exc}")
                        output["data"] = {"text/plain": f"[a figure ({name}) was left out: {exc}]"}
                        outputs.append(output)
                        continue
                    images[name] = payload
                    meta = output.setdefault("metadata", {})
                    meta["filenames"] = {mime: f"../../images/{slug}/{name}"}
                    meta["alt"] = scrub(escape.drop_controls(str(cell.metadata.get("alt") or
                                                                 f"Figure: {base.replace('-', ' ')}")), rules)
                    for other in [m for m in data if m != mime and m.startswith("image/")]:
                        data.pop(other)
            outputs.append(output)
        for output in outputs:
            if output.get("output_type") == "stream":
                text = escape.drop_controls(collapse_progress(ANSI_RE.sub("", output["text"])))
                output["text"] = cap_output(scrub(text, rules).strip("\n"), slug)
        cell.outputs = [o for o in outputs if o.get("output_type") != "stream" or o["text"].strip()]
    return nb, images


_TABLE_ROW = re.compile(r"<tr[\s>]", re.I)


def table_rows(output) -> int:
    """Rows of the largest table in one output: HTML ``<tr>`` rows (less a header
    row) or Markdown table lines (less the header and its rule); 0 without one."""
    data = output.get("data") or {}
    rows = 0
    html_text = data.get("text/html")
    if html_text:
        html_text = html_text if isinstance(html_text, str) else "".join(html_text)
        for table in re.split(r"</table>", html_text, flags=re.I):
            head = re.search(r"<thead.*?</thead>", table, re.I | re.S)
            body_rows = len(_TABLE_ROW.findall(table)) - (len(_TABLE_ROW.findall(head.group())) if head else 1)
            rows = max(rows, body_rows)
    markdown = data.get("text/markdown")
    if markdown:
        markdown = markdown if isinstance(markdown, str) else "".join(markdown)
        run = 0
        for line in markdown.splitlines() + [""]:
            if line.lstrip().startswith("|"):
                run += 1
            else:
                rows, run = max(rows, run - 2), 0
    return max(rows, 0)


def details(title: str, kind: str) -> tuple[Any, Any]:
    """Two Markdown cells, to put around the cells a closed ``<details class="kind">`` titled ``title`` holds."""
    import html

    import nbformat

    opening = nbformat.v4.new_markdown_cell(
        f'<details class="{kind}" markdown="1"><summary>{html.escape(title, quote=False)}</summary>\n')
    return opening, nbformat.v4.new_markdown_cell("</details>")
