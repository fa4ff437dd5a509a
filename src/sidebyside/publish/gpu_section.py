"""A GPU run's part of its post: one section, never a post of its own.

A post's body is its cpu run's rendered notebook (:func:`sidebyside.publish.rendering.render`);
a GPU run adds a section to it (:func:`render_section`) and replaces nothing. Under the gpu
profile a notebook measures only what needs the GPU (speed, compile time, peak memory, float32
parity of the timed models); what does not depend on the hardware is the cpu run's, in the body.
So the section shows only what the GPU run produced: under a heading naming the GPU, the day and
the commit (:func:`heading`), its verdicts and its key figure (the cell tagged ``key-figure``),
then each other figure and table of its executed notebook closed (``<details>``) under the title
it stood under there (its ``summary``, else the heading above it), so that the section adds a
screen to its page, not another page; its prose and code are the body's.

The section is set between the markers :data:`START` and :data:`END` (HTML comments, which
kramdown passes through): :func:`sidebyside.publish.runs.combine` puts it into the post before
the appendix, or takes it out again, and the post's layout hides it while its run is withdrawn.
Its files (figures, its executed notebook, its tables as CSV) are named with :data:`PREFIX`
(``gpu.``), a name no figure of the body can take (they are ``[a-z0-9-]`` before the extension),
so that the body's files and the section's are told apart in ``images/<slug>/``.
"""

from __future__ import annotations

import html
import re
from pathlib import Path
from typing import Any

from sidebyside.publish.common import ROOT, TEMPLATES, PublishError
from sidebyside.publish.discovery import NotebookInfo

__all__ = ["START", "END", "PREFIX", "heading", "render_section", "split", "insert"]

START, END = "<!-- sidebyside:gpu-run -->", "<!-- /sidebyside:gpu-run -->"
PREFIX = "gpu."
_SECTION = re.compile(re.escape(START) + r".*?" + re.escape(END) + r"\n?", re.S)
_APPENDIX = "## Appendix {#appendix}"
_HEADING = re.compile(r"^(#{1,6})\s+(.+?)\s*#*\s*$")
_NUMBERING = re.compile(r"^\d+(\.\d+)*\.?\s+")


def heading(record: dict[str, Any]) -> str:
    """The section's title: "GPU run: <GPU>, <day>, commit <commit>"."""
    prov = record.get("provenance") or {}
    day = str(record.get("executed_at") or "")[:10] or "an unknown day"
    return f"GPU run: {prov.get('device') or 'an unnamed GPU'}, {day}, commit {prov.get('git_sha') or 'unknown'}"


def split(post: str) -> tuple[str, str | None]:
    """``(post without its GPU section, the section or None)``."""
    found = _SECTION.search(post)
    if not found:
        return post, None
    return post[:found.start()] + post[found.end():], found.group().rstrip("\n")


def insert(post: str, section: str) -> str:
    """``post`` (without a GPU section) with ``section`` put before its appendix, else at its end."""
    at = post.find("\n" + _APPENDIX)
    if at < 0:
        return post.rstrip("\n") + "\n\n" + section + "\n"
    return post[:at].rstrip("\n") + "\n\n" + section + "\n\n" + post[at + 1:]


def _verdicts(record: dict[str, Any]) -> str:
    from sidebyside.publish.frontpage import answer

    items = []
    for v in (record.get("metrics") or {}).get("verdicts") or []:
        if isinstance(v, dict):
            said, interval = answer(v)
            items.append(f"<li><span class=\"verdict-question\">{html.escape(str(v.get('question') or ''))}</span> "
                         f"<b>{html.escape(said)}</b>{f' ({html.escape(interval)})' if interval else ''}</li>")
    return f'<ul class="gpu-verdicts">{"".join(items)}</ul>' if items else ""


def _shown(output) -> bool:
    """A figure or a table: what a GPU section keeps of a cell's outputs."""
    from sidebyside.publish.preprocess import table_rows

    data = output.get("data") or {}
    return any(m.startswith("image/") for m in data) or table_rows(output) > 0


def render_section(executed_nb, record: dict[str, Any], info: NotebookInfo, site_config: dict[str, Any], *,
                   root: Path = ROOT) -> tuple[str, dict[str, bytes]]:
    """The GPU section of ``info``'s post from its executed gpu-profile notebook (see the module
    docstring): ``(section Markdown between START and END, {file name: bytes})``, every file name
    beginning with :data:`PREFIX`. Raises :class:`PublishError` for a run of another profile, or a
    section the lint refuses (:mod:`sidebyside.publish.lint`)."""
    import nbformat
    from nbconvert import MarkdownExporter
    from traitlets.config import Config

    from sidebyside.publish import downloads, lint, markdown
    from sidebyside.publish.preprocess import KEY_FIGURE_TAG, details, preprocess, scrub, scrub_rules

    if record.get("profile") != "gpu":
        raise PublishError(f"{info.slug}: a GPU section comes from a gpu run, not a {record.get('profile')} run")
    nb, files = preprocess(executed_nb, info.slug, root)
    renamed = {name: PREFIX + name for name in files}
    cells = [nbformat.v4.new_markdown_cell(f"## {heading(record)} {{#gpu-run}}"),
             nbformat.v4.new_markdown_cell(
                 '<p class="gpu-run-note">What the GPU run measured: its verdicts, figures and tables. Everything '
                 "else on this page (and what does not depend on the hardware) comes from the CPU run.</p>"
                 + _verdicts(record))]
    pending = above = None  # the heading to show before the next open output, and the last heading seen
    closed: list[tuple[str, Any]] = []  # every figure and table but the key figure: closed, under its title
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            for line in cell.source.splitlines():
                match = _HEADING.match(line)
                if match:
                    pending = above = _NUMBERING.sub("", match.group(2)).strip() or pending
            continue
        kept = [o for o in cell.get("outputs", []) if _shown(o)]
        if not kept:
            continue
        for output in kept:
            names = (output.get("metadata") or {}).get("filenames") or {}
            for mime, path in names.items():
                base = path.rsplit("/", 1)[-1]
                names[mime] = f"../../images/{info.slug}/{renamed.get(base, base)}"
        moved = nbformat.v4.new_code_cell("")
        moved.outputs = kept
        if KEY_FIGURE_TAG not in cell.metadata.get("tags", []):
            closed.append((str(cell.metadata.get("summary") or above or "More of the GPU run"), moved))
            continue
        if pending:
            cells.append(nbformat.v4.new_markdown_cell(f"### {pending}"))
            pending = None
        cells.append(moved)
    for title, moved in closed:
        opening, closing = details(f"GPU run: {title}", "appendix")
        cells += [opening, moved, closing]
    section_nb = nbformat.v4.new_notebook(cells=cells, metadata=nb.metadata)
    rules = scrub_rules(root)
    extra = downloads.files(info.slug, executed_nb, section_nb, record, lambda text: scrub(text, rules))
    extra.pop(downloads.RESULTS, None)  # the post's results.json holds both runs (runs.combine)
    out = {renamed[name]: payload for name, payload in files.items()}
    out.update({PREFIX + name: payload for name, payload in extra.items()})
    config = Config({"ExtractOutputPreprocessor": {"enabled": False}})
    exporter = MarkdownExporter(config=config, extra_template_basedirs=[str(TEMPLATES)], template_name="sidebyside",
                                filters=markdown.FILTERS)
    body, _ = exporter.from_notebook_node(section_nb, resources={"slug": info.slug})
    body = re.sub(r"\n{3,}", "\n\n", body).strip()
    section = f"{START}\n\n{body}\n\n{END}"
    lint.check(section, f"{info.path} (its GPU section)")
    return section, out
