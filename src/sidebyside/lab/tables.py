"""Tables a reader can read: numbers formatted once, nothing truncated.

:func:`table` turns a pandas DataFrame (or anything ``pd.DataFrame`` takes)
into a :class:`Table` whose cells are strings: integers (and floats that
hold a whole number, such as a parameter count stored as ``101770.0``) as
integers with thousands separators, other floats to significant figures
(``words.fmt_number``), never "-0". A notebook ends a cell with it::

    tables.table(results)            # instead of results.round(2)

It shows as HTML with every cell in full (pandas' notebook display cuts
long cells to "..."), and as plain text the same way.

:func:`parse_html` reads the tables back out of an HTML output (a pandas or
:class:`Table` table, as the executed notebook holds it) as rows of cell
texts; :func:`tables_csv` writes such tables as one CSV (the post's download).

Inputs: DataFrames, numbers, strings. Outputs: strings, :class:`Table`,
lists of rows, CSV text.
"""

from __future__ import annotations

import csv
import io
import math
import numbers
from collections.abc import Iterable, Mapping, Sequence
from html.parser import HTMLParser
from typing import Any

import numpy as np

from sidebyside.lab.words import FRAMEWORKS, fmt_number

__all__ = ["format_value", "table", "Table", "show_in_full", "parse_html", "tables_csv", "ladder_table", "summarise"]


def format_value(value: Any, digits: int = 3) -> str:
    """One cell: integers as integers (``101,770``), floats to ``digits``
    significant figures (``0.0123``, ``45,803``), NaN and None as "n/a",
    booleans as "yes"/"no", anything else as ``str``."""
    if value is None:
        return "n/a"
    if isinstance(value, (bool, np.bool_)):
        return "yes" if value else "no"
    if isinstance(value, numbers.Integral):
        return f"{int(value):,}"
    if isinstance(value, numbers.Real):
        value = float(value)
        if math.isnan(value):
            return "n/a"
        if math.isinf(value):
            return "∞" if value > 0 else "-∞"
        if value.is_integer():
            return f"{int(value):,}"
        return fmt_number(value, digits)
    return str(value)


def show_in_full(digits: int = 4) -> None:
    """Make every pandas table a notebook shows readable: no cell cut to
    "...", no column or row elided, floats through :func:`format_value`
    (whole numbers as integers, others to ``digits`` significant figures,
    enough for an accuracy such as 88.95). A notebook
    calls it once in its set-up cell; :func:`table` formats one table
    explicitly where a column needs its own digits."""
    import pandas as pd

    pd.set_option("display.max_colwidth", None)
    pd.set_option("display.max_columns", None)
    pd.set_option("display.max_rows", None)
    pd.set_option("display.width", None)
    pd.set_option("display.float_format", lambda value: format_value(value, digits))


class Table:
    """A formatted table: ``frame`` holds the cells as strings."""

    def __init__(self, frame):
        self.frame = frame

    def _repr_html_(self) -> str:
        # to_html, unlike the notebook display, never cuts a cell short.
        return self.frame.to_html(escape=True, border=0, classes="dataframe")

    def __repr__(self) -> str:
        return self.frame.to_string()

    def to_csv(self) -> str:
        return self.frame.to_csv()


def table(data: Any, digits: int = 3, **columns_digits: int) -> Table:
    """Format every cell of ``data`` (a DataFrame, Series or what
    ``pd.DataFrame`` accepts) with :func:`format_value`; ``digits``
    significant figures for floats, or per column by keyword where a column
    name is a Python identifier. The index and column names are kept."""
    import pandas as pd

    frame = data.to_frame() if isinstance(data, pd.Series) else pd.DataFrame(data)
    out = frame.astype(object).copy()
    for column in frame.columns:
        n = columns_digits.get(str(column), digits)
        out[column] = [format_value(v, n) for v in frame[column]]
    if frame.index.dtype.kind in "fiu":
        out.index = [format_value(v, digits) for v in frame.index]
        out.index.name = frame.index.name
    return Table(out)


class _TableParser(HTMLParser):
    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.tables: list[list[list[str]]] = []
        self._depth = 0
        self._row: list[str] | None = None
        self._cell: list[str] | None = None
        self._span = 1

    def handle_starttag(self, tag, attrs):
        if tag == "table":
            self._depth += 1
            if self._depth == 1:
                self.tables.append([])
        elif self._depth == 1 and tag == "tr":
            self._row = []
        elif self._depth == 1 and tag in ("td", "th") and self._row is not None:
            self._cell = []
            span = dict(attrs).get("colspan") or "1"
            self._span = int(span) if span.isdigit() else 1
        elif tag == "br" and self._cell is not None:
            self._cell.append(" ")

    def handle_endtag(self, tag):
        if tag == "table":
            self._depth -= 1
        elif self._depth == 1 and tag in ("td", "th") and self._cell is not None and self._row is not None:
            text = " ".join("".join(self._cell).split())
            self._row.extend([text] + [""] * (self._span - 1))
            self._cell = None
        elif self._depth == 1 and tag == "tr" and self._row is not None:
            if any(cell for cell in self._row):
                self.tables[-1].append(self._row)
            self._row = None

    def handle_data(self, data):
        if self._cell is not None and self._depth == 1:
            self._cell.append(data)


def parse_html(text: str) -> list[list[list[str]]]:
    """The tables in an HTML fragment: for each table, its rows (header rows
    first, as they come), each a list of cell texts (entities decoded,
    whitespace collapsed; a ``colspan`` cell is followed by empty cells).
    Nested tables are not descended into."""
    parser = _TableParser()
    parser.feed(text)
    parser.close()
    return [rows for rows in parser.tables if rows]


def tables_csv(tables: Iterable[tuple[str, Sequence[Sequence[str]]]]) -> str:
    """Several tables as one tidy CSV: ``table, section, row, column, value``
    (one line per cell; ``table`` numbers them from 1, ``section`` names the
    heading they appear under, ``row`` 0 is usually the header)."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(["table", "section", "row", "column", "value"])
    for n, (section, rows) in enumerate(tables, 1):
        for r, row in enumerate(rows):
            for c, value in enumerate(row):
                writer.writerow([n, section, r, c, value])
    return buffer.getvalue()


def ladder_table(entries: Mapping[str, Mapping[str, Any]], *, labels: Mapping[str, str] | None = None,
                 unit: str = "ms", scale: float = 1.0):
    """A pandas DataFrame of a ladder, one row per tool, each row naming its
    framework and tool: median, IQR, compile time (s), and the error or the
    reason it does not apply. ``scale`` multiplies the times (e.g. steps per
    epoch / steps per call, to show an epoch)."""
    import pandas as pd

    factor = {"s": 1.0, "ms": 1e3, "us": 1e6, "µs": 1e6}[unit] * scale
    rows = []
    for name, e in entries.items():
        framework, tool = name.split("/", 1)
        rows.append({
            "framework / tool": (labels or {}).get(name, f"{FRAMEWORKS.get(framework, framework)}, {tool}"),
            f"median ({unit})": None if e.get("median_s") is None else e["median_s"] * factor,
            f"IQR ({unit})": None if e.get("iqr_s") is None else e["iqr_s"] * factor,
            "compile (s)": e.get("compile_s"),
            "status": ("ran" if e.get("median_s") is not None else
                       f"not applicable: {e['not_applicable']}" if e.get("not_applicable") else f"failed: {e.get('error')}"),
        })
    return pd.DataFrame(rows).set_index("framework / tool")


def summarise(timings: Mapping[str, Any] | Iterable[Any], unit: str = "ms"):
    """A pandas DataFrame of :class:`sidebyside.lab.entry.Timing` objects: median, IQR, first call, compile time,
    in ``unit`` ("s", "ms" or "us"), one row per timing."""
    import pandas as pd

    scale = {"s": 1.0, "ms": 1e3, "us": 1e6}[unit]
    items = timings.values() if isinstance(timings, Mapping) else timings
    rows = [{"name": t.name, f"median ({unit})": t.median_s * scale, f"IQR ({unit})": t.iqr_s * scale,
             f"first call ({unit})": t.first_s * scale, f"compile ({unit})": t.compile_s * scale,
             "repeats": f"{t.repeats}×{t.number}", "processes": len(t.processes_s)} for t in items]
    return pd.DataFrame(rows).set_index("name")
