"""What a reader can download from a post, written beside its figures.

Jekyll does not serve ``_data/``, so the publisher puts these files into
``images/<slug>/`` with the figures, where they ride the same atomic swap:

- ``results.json``: the published results record (the same as
  ``_data/results/<slug>.json``);
- ``tables.csv``: every table the post shows (the HTML table outputs), one
  tidy CSV (``table, section, row, column, value``; see
  :func:`sidebyside.lab.tables.tables_csv`), every text cell passed through
  :func:`neutralise` (a spreadsheet opening it evaluates no formula);
- ``<slug>.ipynb``: the executed notebook, with the outputs the post shows,
  each output's text cut at :data:`sidebyside.publish.caps.MAX_STREAM_CHARS`
  with a marker (:func:`sidebyside.publish.caps.cut_outputs`), local paths and
  host name scrubbed as in the post, and every raster output (PNG, JPEG, GIF,
  WebP) decoded and encoded again from its pixels alone
  (:func:`sidebyside.publish.figures.reencode`), each at most
  :data:`sidebyside.publish.caps.MAX_FIGURE_FILE_BYTES` (a larger one refuses the post).

The post layout links each file that exists (``_includes/downloads.html``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

from sidebyside.lab.tables import parse_html, tables_csv

__all__ = ["NAMES", "FORMULA_STARTS", "files", "neutralise", "post_tables", "scrub_notebook"]

RESULTS, TABLES = "results.json", "tables.csv"
NAMES = (RESULTS, TABLES)  # and "<slug>.ipynb"


#: What a spreadsheet may read as the start of a formula (OWASP's CSV injection rule).
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")
_NUMBER = re.compile(r"[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?")


def neutralise(cell: str) -> str:
    """A CSV cell that no spreadsheet evaluates (OWASP's rule against CSV injection): a cell that
    starts with one of :data:`FORMULA_STARTS` (``=``, ``+``, ``-``, ``@``, tab, carriage return) gets a
    single quote in front, so that it is read as text and shows as it was. The one exception: a cell
    that is a plain number in full (``-1.5``, ``+3``, ``-2.5e-3``: optional sign, digits, optional
    decimals and exponent, nothing else) stays as it is, so a negative figure stays a number;
    ``-1+1``, ``-1.5 ms`` or ``-inf`` are not plain numbers and are quoted. Any other cell is kept."""
    cell = str(cell)
    if cell.startswith(FORMULA_STARTS) and not _NUMBER.fullmatch(cell):
        return "'" + cell
    return cell


def _text(value: Any) -> str:
    return value if isinstance(value, str) else "".join(value or [])


def post_tables(nb) -> list[tuple[str, list[list[str]]]]:
    """``(section heading, rows)`` of every HTML table in the outputs of
    ``nb``, in order; the heading is the last Markdown heading above it."""
    section, found = "", []
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            for line in cell.source.splitlines():
                if line.startswith("#"):
                    section = line.lstrip("#").strip()
            continue
        for output in cell.get("outputs", []):
            html = (output.get("data") or {}).get("text/html")
            if html:
                found += [(section, rows) for rows in parse_html(_text(html))]
    return found


def files(slug: str, executed_nb, preprocessed_nb, record: dict[str, Any],
          scrub: Callable[[str], str] = lambda text: text) -> dict[str, bytes]:
    """``{filename: bytes}`` of the downloads: ``preprocessed_nb`` is the
    notebook as the post shows it (its tables, each heading and cell
    passed through :func:`neutralise`), ``executed_nb`` the full executed
    notebook (written through ``scrub``, its outputs cut: :func:`scrub_notebook`)."""
    out = {RESULTS: (json.dumps(record, indent=2, sort_keys=True) + "\n").encode()}
    tables = [(neutralise(section), [[neutralise(value) for value in row] for row in rows])
              for section, rows in post_tables(preprocessed_nb)]
    if tables:
        out[TABLES] = tables_csv(tables).encode()
    out[f"{slug}.ipynb"] = scrub_notebook(executed_nb, scrub, slug=slug).encode()
    return out


def scrub_notebook(nb, scrub: Callable[[str], str], *, slug: str = "the post") -> str:
    """The notebook's JSON written through ``scrub``, each output's text cut at
    :data:`sidebyside.publish.caps.MAX_STREAM_CHARS` (:func:`sidebyside.publish.caps.cut_outputs`),
    its raster outputs (PNG, JPEG, GIF,
    WebP: :data:`sidebyside.publish.figures.RASTERS`) encoded again from their pixels alone
    (:func:`sidebyside.publish.figures.reencode`: no metadata, comment, text chunk or trailing
    byte is kept); one that cannot be (not a whole image, too many pixels) is removed, its
    output saying why in its ``text/plain``. The base64 payloads are kept out of the scrub:
    a rule for a short host name (whole words, any case) would otherwise match inside
    the base64 text, between its ``/`` and ``+``, and corrupt the figure. Each payload
    is set aside under a random token for the scrub and put back after it. A raster over
    :data:`sidebyside.publish.caps.MAX_FIGURE_FILE_BYTES` once encoded again raises
    :class:`sidebyside.publish.common.PublishError` naming ``slug`` and the cap."""
    import base64
    import binascii
    import secrets

    import nbformat

    from sidebyside.publish import caps
    from sidebyside.publish.figures import RASTERS, FigureError, reencode

    nb = caps.cut_outputs(nb)  # a copy
    kept: dict[str, str] = {}
    for cell in nb.cells:
        for output in cell.get("outputs", []):
            data = output.get("data") or {}
            for mime in [m for m in RASTERS if m in data]:
                try:
                    raw = reencode(mime, base64.b64decode(_text(data[mime])))
                except (FigureError, binascii.Error, ValueError) as exc:
                    del data[mime]
                    data["text/plain"] = f"[a figure ({mime}) was left out of this download: {exc}]"
                    continue
                if len(raw) > caps.MAX_FIGURE_FILE_BYTES:
                    raise caps.refusal(
                        slug, f"a figure ({mime}) of its executed notebook, the download",
                        f"{len(raw):,} bytes", f"{caps.MAX_FIGURE_FILE_BYTES:,} bytes",
                        "draw it smaller (a smaller figsize or dpi, fewer points)")
                payload = base64.b64encode(raw).decode()
                token = f"sidebysidebinary{secrets.token_hex(16)}"
                kept[token] = payload
                data[mime] = token
    text = scrub(nbformat.writes(nb))
    for token, payload in kept.items():
        text = text.replace(token, json.dumps(payload)[1:-1])  # as the JSON string it was
    return text
