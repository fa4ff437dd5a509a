"""Side-by-side code: a PyTorch cell and its JAX twin as two aligned columns.

A notebook marks the pair with cell tags (jupytext)::

    # %% tags=["pair:train-step:torch"]
    ...the PyTorch code...

    # %% tags=["pair:train-step:jax"]
    ...the JAX code...

The two cells must be consecutive code cells, in either order, with the
same ``<name>``. :func:`render_pairs` (the publisher calls it on the
preprocessed notebook, after figures are extracted) replaces each pair with
one Markdown cell holding HTML: PyTorch on the left, JAX on the right, each
with its outputs; the site's CSS stacks them on narrow screens and a toggle
(``assets/pairs.js``) shows one framework only.

Everything from a cell is escaped: code is highlighted by Pygments (which
escapes it), text outputs go into ``<pre>``, an HTML table output is read
back into cells (:func:`sidebyside.lab.tables.parse_html`) and written again
escaped, other HTML is shown as its plain-text form. Figures (already
extracted to files by the publisher) are linked images.

Input: a notebook node (nbformat v4). Output: the same node, changed in place.

A paired cell shows the code a reader would write: PyTorch's or JAX's, never this library's.
:func:`code_problems` (``publish check-pairs``, so ``make lint``) refuses a paired cell that
names anything imported from ``sidebyside``, except a cell that only shows the source of library
functions (``code.source(...)``, :func:`sidebyside.run.code.source`) and the names a notebook's
header declares ``under_test`` (the library's own code that a post puts on trial).
:func:`timed_problems` checks a run's ``code`` record (:mod:`sidebyside.run.code`): every
contestant the harness timed was defined in a paired cell, or is a function a paired cell showed.
"""

from __future__ import annotations

import ast
import html
import re
from collections.abc import Mapping, Sequence
from typing import Any

from sidebyside.lab.tables import parse_html

__all__ = ["PairError", "TAG_RE", "find_pairs", "render_pairs", "pair_html", "code_problems", "timed_problems"]

TAG_RE = re.compile(r"^pair:([A-Za-z0-9_.-]+):(torch|jax)$")
SIDES = ("torch", "jax")  # left, right
LABELS = {"torch": "PyTorch", "jax": "JAX"}


class PairError(ValueError):
    """A pair tag without its twin, or a malformed one; the message says which cell."""


def _pair_tag(cell) -> tuple[str, str] | None:
    tags = [t for t in cell.metadata.get("tags", []) if str(t).startswith("pair:")]
    if not tags:
        return None
    if len(tags) > 1:
        raise PairError(f"a cell carries two pair tags ({', '.join(tags)}); give it one")
    match = TAG_RE.match(tags[0])
    if not match:
        raise PairError(f"pair tag {tags[0]!r} must read pair:<name>:torch or pair:<name>:jax")
    if cell.cell_type != "code":
        raise PairError(f"pair tag {tags[0]!r} is on a {cell.cell_type} cell; only code cells pair")
    return match.group(1), match.group(2)


def _first_line(cell) -> str:
    return next((line.strip() for line in cell.source.splitlines() if line.strip()), "(empty)")[:60]


def find_pairs(cells) -> list[tuple[int, int]]:
    """Indices ``(torch_index, jax_index)`` of each pair, in order; raises
    :class:`PairError` for a tagged cell whose neighbour is not its twin."""
    pairs = []
    i = 0
    while i < len(cells):
        tag = _pair_tag(cells[i])
        if tag is None:
            i += 1
            continue
        name, side = tag
        twin = _pair_tag(cells[i + 1]) if i + 1 < len(cells) else None
        if twin is None or twin[0] != name or twin[1] == side:
            other = "jax" if side == "torch" else "torch"
            raise PairError(f"cell {i} [{_first_line(cells[i])}] is tagged pair:{name}:{side}, but the next cell "
                            f"is not tagged pair:{name}:{other}; put the two halves in consecutive code cells")
        pairs.append((i, i + 1) if side == "torch" else (i + 1, i))
        i += 2
    return pairs


# --------------------------------------------------------------------------- HTML


def _code(source: str) -> str:
    from pygments import highlight
    from pygments.formatters import HtmlFormatter
    from pygments.lexers import PythonLexer

    # Pygments' short class names are the ones Rouge uses, so the theme's colours apply.
    body = highlight(source, PythonLexer(), HtmlFormatter(nowrap=True)) if source.strip() else ""
    return (f'<div class="language-python highlighter-rouge"><div class="highlight">'
            f'<pre class="highlight"><code>{_lines(body.rstrip())}</code></pre></div></div>')


def _lines(escaped: str) -> str:
    # Newlines as character references: the pair stays one line of HTML, which kramdown passes
    # through as one block (a blank line in a <pre> would otherwise end the block).
    return escaped.replace("\r", "").replace("\n", "&#10;")


def _pre(text: str, css: str = "output") -> str:
    return f'<pre class="{css}">{_lines(html.escape(text))}</pre>'


def _text(value: Any) -> str:
    return value if isinstance(value, str) else "".join(value or [])


def _table(rows: list[list[str]]) -> str:
    width = max(len(r) for r in rows)
    out = ['<div class="table-scroll"><table class="dataframe">']
    for n, row in enumerate(rows):
        cells = []
        for c, value in enumerate(row + [""] * (width - len(row))):
            tag = "th" if n == 0 or c == 0 else "td"  # the header row, and the first column (the index)
            cells.append(f"<{tag}>{html.escape(value)}</{tag}>")
        out.append(f"<tr>{''.join(cells)}</tr>")
    out.append("</table></div>")
    return "".join(out)


def _output(output) -> str:
    kind = output.get("output_type")
    if kind == "stream":
        text = _text(output.get("text"))
        if output.get("name") == "stderr":
            return f'<details class="stderr"><summary>stderr</summary>{_pre(text)}</details>'
        return _pre(text)
    if kind == "error":
        return _pre("\n".join(output.get("traceback", [])), "output error")
    if kind not in ("display_data", "execute_result"):
        return ""
    data = output.get("data", {})
    files = output.get("metadata", {}).get("filenames") or {}
    for mime in ("image/png", "image/svg+xml", "image/jpeg"):
        if mime in files:
            src = html.escape(str(files[mime]), quote=True)
            alt = html.escape(str(output.get("metadata", {}).get("alt", "Figure")), quote=True)
            return f'<a class="figure-link" href="{src}"><img src="{src}" alt="{alt}" loading="lazy"></a>'
    if "text/html" in data:
        tables = parse_html(_text(data["text/html"]))
        if tables:
            return "".join(_table(rows) for rows in tables)
    for mime in ("text/markdown", "text/latex", "text/plain", "text/html"):  # a Markdown object's text, not its repr
        if mime in data:
            return _pre(_text(data[mime]))
    return ""


def pair_html(name: str, cells: dict[str, Any]) -> str:
    """The HTML of one pair: ``cells`` maps "torch" and "jax" to code cells."""
    parts = [f'<div class="pair" data-pair="{html.escape(name, quote=True)}" markdown="0">']
    for side in SIDES:
        parts.append(f'<div class="pair-head {side}">{LABELS[side]}</div>')
    for side in SIDES:
        parts.append(f'<div class="pair-code {side}">{_code(cells[side].source)}</div>')
    for side in SIDES:
        outputs = "".join(_output(o) for o in cells[side].get("outputs", []))
        parts.append(f'<div class="pair-out {side}">{outputs}</div>')
    parts.append("</div>")
    return "".join(parts)  # one line (see _lines)


def render_pairs(nb):
    """Replace each tagged pair of cells in ``nb`` by one Markdown cell with
    the two columns; returns ``nb`` (changed in place)."""
    import nbformat

    pairs = find_pairs(nb.cells)
    if not pairs:
        return nb
    replace = {}
    for t, j in pairs:
        name = _pair_tag(nb.cells[t])[0]
        cell = nbformat.v4.new_markdown_cell(pair_html(name, {"torch": nb.cells[t], "jax": nb.cells[j]}))
        cell.metadata["pair"] = name
        replace[min(t, j)] = cell
    drop = {max(t, j) for t, j in pairs}
    nb.cells = [replace.get(i, c) for i, c in enumerate(nb.cells) if i not in drop]
    return nb


# --------------------------------------------------------------------------- the frameworks' own code


def _library_names(cells: Sequence[Mapping[str, Any]]) -> set[str]:
    """The names a notebook binds to anything imported from ``sidebyside``."""
    names = set()
    for cell in cells:
        if cell["cell_type"] != "code":
            continue
        try:
            tree = ast.parse(cell["source"])
        except SyntaxError:
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "sidebyside":
                names.update(alias.asname or alias.name for alias in node.names)
            elif isinstance(node, ast.Import):
                names.update((alias.asname or alias.name).split(".")[0] for alias in node.names
                             if alias.name.split(".")[0] == "sidebyside")
    return names


def _only_shows_source(tree: ast.Module, library: set[str]) -> bool:
    def shows(node: ast.AST) -> bool:
        return (isinstance(node, ast.Expr) and isinstance(node.value, ast.Call)
                and isinstance(node.value.func, ast.Attribute) and node.value.func.attr == "source"
                and isinstance(node.value.func.value, ast.Name) and node.value.func.value.id in library)
    return bool(tree.body) and all(shows(node) for node in tree.body)


def _pair_cells(cells: Sequence[Mapping[str, Any]]) -> list[tuple[str, str, Mapping[str, Any]]]:
    out = []
    for cell in cells:
        for tag in cell.get("metadata", {}).get("tags") or []:
            match = TAG_RE.match(str(tag))
            if match and cell["cell_type"] == "code":
                out.append((match.group(1), match.group(2), cell))
    return out


def code_problems(cells: Sequence[Mapping[str, Any]], *, under_test: Sequence[str] = (), name: str = "") -> list[str]:
    """What in the paired cells of a notebook (``cells`` as
    :func:`sidebyside.publish.discovery.read_header` gives them) is this library's code
    rather than a framework's (see the module); one line per use, naming the cell."""
    imported = _library_names(cells)
    library = imported - set(under_test)
    problems = []
    for pair, side, cell in _pair_cells(cells):
        try:
            tree = ast.parse(cell["source"])
        except SyntaxError as exc:
            problems.append(f"{name}: the pair {pair!r} ({side}) is not Python: {exc}")
            continue
        if _only_shows_source(tree, imported):
            continue
        used = sorted({(n.id, n.lineno) for n in ast.walk(tree) if isinstance(n, ast.Name) and n.id in library},
                      key=lambda u: u[1])
        for used_name, line in used:
            problems.append(f"{name}: the pair {pair!r} ({side}) uses {used_name!r} from sidebyside (line {line} of the "
                            "cell); a paired cell shows PyTorch's or JAX's own code: define the model, loss, step or "
                            "rung there, and leave measuring and reporting to hidden cells (or show a library "
                            "function's source with code.source(fn) of sidebyside.run.code, alone in its cell)")
    return problems


def timed_problems(cells: Sequence[Mapping[str, Any]], code: Mapping[str, Any] | None, *, name: str = "") -> list[str]:
    """Each contestant a run timed (its record's ``code``, :mod:`sidebyside.run.code`) that was
    neither defined in one of the notebook's paired cells nor shown by one; a record that kept
    no ``code`` is one problem (a run that timed nothing has an empty list)."""
    from sidebyside.run.code import cell_id

    if not code or "timed" not in code:
        return [f"{name}: the run's record keeps no code record (run it again with this library: "
                "the harness notes each contestant it times)"]
    paired = {cell_id(cell["source"]) for _, _, cell in _pair_cells(cells)}
    shown = {(e["where"], e["function"]) for e in code.get("shown") or [] if e.get("from") in paired}
    problems = []
    for entry in code["timed"]:
        if entry["where"] in paired or (entry["where"], entry["function"]) in shown:
            continue
        problems.append(f"{name}: {entry['contestant']!r} timed {entry['function']!r} from {entry['where']} "
                        f"(line {entry['line']}), which no paired cell defines or shows")
    return problems
