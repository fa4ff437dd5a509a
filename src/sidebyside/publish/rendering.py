"""From an executed notebook to a post: our preprocessing (:mod:`.preprocess`: hidden cells,
streams, figures, scrubbed paths and host name, outputs cut at
:data:`OUTPUT_CAP`, figure files made by :mod:`.figures`), the front matter,
the side-by-side pairs (:mod:`.pairs`), the downloads (:mod:`.downloads`),
the output filters (:data:`.markdown.FILTERS`, on :mod:`.escape`'s sanitiser) and the publication's manifest
(:mod:`.state`)."""

from __future__ import annotations

import datetime as dt
import re
from pathlib import Path
from typing import Any

import yaml

from sidebyside.publish import escape, markdown
from sidebyside.publish.common import ROOT, TEMPLATES, PublishError, warn
from sidebyside.publish.discovery import NotebookInfo
from sidebyside.publish.preprocess import KEY_FIGURE_TAG, details, scrub, scrub_rules, table_rows
from sidebyside.publish.preprocess import preprocess as _preprocess

__all__ = ["site_config", "check_date", "front_matter", "drop_title_heading", "run_date", "compared_paragraph",
           "arrange_lead", "arrange_appendix", "overlay_layout", "render", "front_matter_text"]



def site_config(site: Path, root: Path = ROOT) -> dict[str, Any]:
    """The site's _config.yml (the repository's when the site has none)."""
    path = next((p for p in (site / "_config.yml", root / "_config.yml") if p.is_file()), None)
    config = (yaml.safe_load(path.read_text()) or {}) if path else {}
    if not re.match(r"^[\w.-]+/[\w.-]+$", str(config.get("repository", ""))):
        raise PublishError(f"{path or site / '_config.yml'}: set 'repository: owner/name' (the GitHub repository "
                           "that Colab, download and source links point to)")
    return config


def check_date(info: NotebookInfo, site_config: dict[str, Any]) -> None:
    if not site_config.get("future") and dt.date.fromisoformat(info.date) > dt.date.today():
        warn(f"{info.path}: date {info.date} is in the future; Jekyll does not show the post until that day "
              "(set 'date:' in its header to today or earlier, or 'future: true' in _config.yml)")


def run_date(info: NotebookInfo, record: dict[str, Any]) -> str:
    """A post's date: the day its run started (``executed_at``), else the notebook header's date."""
    return str(record.get("executed_at") or "")[:10] or info.date


def front_matter(info: NotebookInfo, record: dict[str, Any], site_config: dict[str, Any], root: Path) -> dict[str, Any]:
    repository = site_config.get("repository", "")
    branch = site_config.get("branch", "main")
    notebook = info.relpath(root)
    ipynb = notebook[:-3] + ".ipynb" if notebook.endswith(".py") else notebook
    prov = record["provenance"]
    versions = {k: prov.get(k) for k in ("python", "torch", "jax", "jaxlib", "flax", "optax", "timm", "cuda") if prov.get(k)}
    return {
        "layout": "post",
        "title": info.title,
        "date": run_date(info, record),
        "description": info.description,
        "tags": info.tags,
        "slug": info.slug,
        "notebook": notebook,
        "colab": f"https://colab.research.google.com/github/{repository}/blob/{branch}/{ipynb}",
        "download": f"https://github.com/{repository}/raw/{branch}/{ipynb}",
        "source": f"https://github.com/{repository}/blob/{branch}/{notebook}",
        "profile": record["profile"],
        "hardware": prov.get("device"),
        "versions": versions,
        "matmul_precision": prov.get("matmul_precision"),
        # sorted, as the stored record holds them: a render of that record writes what its run wrote
        "parameters": dict(sorted(record.get("parameters", {}).items())),
        "executed_at": record["executed_at"],
        "git_sha": prov.get("git_sha"),
        "source_hash": record["source_hash"],
        # Posts are code and outputs: never let Liquid read {{ }} or {% %} in them.
        "render_with_liquid": False,
    }


def drop_title_heading(nb, title: str) -> None:
    """The layout prints the post's title; a notebook opens with the same
    title as a ``# Title`` heading (it reads as an article on Colab too).
    Remove that heading from the first Markdown cell, in place, so the post
    does not show it twice; a different first heading is kept."""
    first = next((c for c in nb.cells if c.cell_type == "markdown"), None)
    if first is None:
        return
    lines = first.source.lstrip("\n").split("\n")
    if lines and lines[0].startswith("# ") and lines[0][2:].strip() == title.strip():
        first.source = "\n".join(lines[1:]).lstrip("\n")
        if not first.source.strip():
            nb.cells.remove(first)


def compared_paragraph(info: NotebookInfo, record: dict[str, Any]) -> str:
    """*What was compared*, the paragraph under a post's verdict box, in Markdown: the work as the notebook's header names it (``compared``), then the
    scales the record's verdicts were measured at (:func:`sidebyside.lab.framing.scales_text`:
    merged field by field where at most one field differs between them, else each scale in
    turn), on the devices they name (else the run's device); then the profile and the day of the
    run, which every figure of the page comes from but a GPU run's section's. Returned as one HTML paragraph: header and record text is escaped as
    text (``html.escape``), never read as Markdown or HTML."""
    import html

    from sidebyside.lab.framing import SCALE_FIELDS, scales_text

    verdicts = [v for v in (record.get("metrics") or {}).get("verdicts") or [] if isinstance(v, dict)]
    scales: list[dict[str, Any]] = []
    devices: list[str] = []
    for v in verdicts:
        scale = {f: (v.get("scale") or {}).get(f) for f in SCALE_FIELDS}
        if scale["device"] and scale["device"] not in devices:
            devices.append(str(scale["device"]))
        scale["device"] = None
        if any(scale.values()) and scale not in scales:
            scales.append(scale)
    varying = [f for f in SCALE_FIELDS if len({str(s.get(f)) for s in scales}) > 1]
    size = (scales_text(scales, device=False) if len(varying) <= 1
            else "; ".join(scales_text([s], device=False) for s in scales))
    device = " and ".join(devices) or (record.get("provenance") or {}).get("device") or "an unnamed device"
    where = f"At {size}, on {device}" if size else f"On {device}"
    day = str(record.get("executed_at", ""))[:10]
    text = (f"{(info.compared or info.description).strip()} {where} "
            f"(the {record.get('profile', '?')} profile{', run on ' + day if day else ''}); every figure on this "
            "page comes from that run, but for a GPU run's section, which names its own.")
    text = html.escape(" ".join(escape.drop_controls(text).split()), quote=False)
    return f"<p><strong>What was compared.</strong> {text}</p>"


def arrange_lead(nb, compared: str, *, where: str = "") -> None:
    """Open the post's body, in place: the *what was compared*
    paragraph (HTML, already safe: :func:`compared_paragraph`), then the key figure, the
    first figure output of the first cell tagged :data:`KEY_FIGURE_TAG` (moved, with the rest
    of that cell left where it is). A tag on a cell without a figure is reported (``where``
    names the notebook) and the post goes on without one. Call it after :func:`_preprocess`
    (figures carry their file names) and before :func:`arrange_appendix`."""
    import nbformat

    lead = [nbformat.v4.new_markdown_cell(f'<div class="compared" markdown="0">{compared}</div>')]
    tagged = next((c for c in nb.cells if KEY_FIGURE_TAG in c.metadata.get("tags", [])), None)
    if tagged is not None:
        figure = next((o for o in tagged.get("outputs", [])
                       if any(m.startswith("image/") for m in (o.get("data") or {}))), None)
        if figure is None:
            warn(f"{where or 'a notebook'}: the cell tagged {KEY_FIGURE_TAG!r} has no figure among its outputs; "
                 "the post has no key figure")
        else:
            tagged.outputs = [o for o in tagged.outputs if o is not figure]
            moved = nbformat.v4.new_code_cell("")
            moved.metadata["tags"] = [KEY_FIGURE_TAG]
            moved.outputs = [figure]
            lead.append(moved)
    nb.cells[:0] = lead


#: Cell tags of the post's shape: ``appendix`` moves a cell to the
#: collapsed appendix at the end of the post; ``appendix-input`` moves only its code
#: there (its outputs, a figure or a table, stay where they are); ``collapsed`` folds it
#: where it stands.
APPENDIX_TAG, INPUT_TAG, COLLAPSED_TAG = "appendix", "appendix-input", "collapsed"
#: A table output with more rows than this, outside the appendix, is moved into it
#: (every table stays in the post's CSV download).
MAX_INLINE_ROWS = 20
_HEADING = re.compile(r"^(#{1,6})\s+(.+?)\s*#*\s*$")


def _summary(cell) -> str | None:
    """A section's title: the cell's ``summary`` metadata, or the heading that opens a
    Markdown cell (taken out of the cell: the summary line shows it)."""
    given = cell.metadata.get("summary")
    if given:
        return str(given)
    if cell.cell_type == "markdown":
        lines = cell.source.lstrip("\n").split("\n")
        match = _HEADING.match(lines[0]) if lines else None
        if match:
            cell.source = "\n".join(lines[1:]).lstrip("\n")
            return match.group(2)
    return None


def arrange_appendix(nb) -> None:
    """Give the post its shape, in place: the cells tagged ``appendix`` leave the body
    for an "Appendix" at its end, each run of them (or each cell that opens with a
    heading or carries ``summary`` metadata) one ``<details>`` section, closed, titled by
    that heading or summary (else "More on <the heading above it>"); a cell
    tagged ``appendix-input`` leaves its code there (one section per heading of the body:
    "Code: <heading>") and its outputs where they are; a run of cells tagged
    ``collapsed`` is folded where it stands. A table output of more
    than :data:`MAX_INLINE_ROWS` rows in the body goes to the appendix as a section of
    its own, named after the heading above it; a paired cell keeps its outputs.
    Call it after the downloads are written (their CSV names each table's section)
    and before :func:`sidebyside.publish.pairs.render_pairs`."""
    import nbformat

    body: list = []
    appendix: list[tuple[str, list]] = []
    folded: list = []
    section = "the post"
    previous_kind = None
    for cell in nb.cells:
        tags = set(cell.metadata.get("tags", []))
        kind = APPENDIX_TAG if APPENDIX_TAG in tags else COLLAPSED_TAG if COLLAPSED_TAG in tags else None
        if cell.cell_type == "markdown":
            for line in cell.source.splitlines():
                match = _HEADING.match(line)
                if match:
                    section = match.group(2)
        if kind is None and INPUT_TAG in tags and cell.cell_type == "code" and cell.source.strip():
            code = nbformat.v4.new_code_cell(cell.source)
            code.metadata = {k: v for k, v in cell.metadata.items() if k not in ("figure", "alt")}
            title = f"Code: {section}"
            same = next((cells for name, cells in appendix if name == title), None)
            if same is not None:
                same.append(code)
            else:
                appendix.append((title, [code]))
            cell.source = ""
            kind = None
        if kind is None:
            if folded:
                body.extend(_fold(folded))
                folded = []
            paired = any(str(t).startswith("pair:") for t in tags)
            if cell.cell_type == "code" and not paired:
                big = [o for o in cell.get("outputs", []) if table_rows(o) > MAX_INLINE_ROWS]
                if big:
                    cell.outputs = [o for o in cell.outputs if not any(o is b for b in big)]
                    for output in big:
                        moved = nbformat.v4.new_code_cell("")
                        moved.outputs = [output]
                        appendix.append((f"Full table: {section} ({table_rows(output)} rows; "
                                         "all tables are in the CSV download)", [moved]))
            body.append(cell)
        elif kind == COLLAPSED_TAG:
            folded.append(cell)
        else:
            if folded:
                body.extend(_fold(folded))
                folded = []
            title = _summary(cell)
            if title or previous_kind != APPENDIX_TAG or not appendix:
                appendix.append((title or f"More on {section}", [cell]))
            else:
                appendix[-1][1].append(cell)
        previous_kind = kind
    if folded:
        body.extend(_fold(folded))
    if appendix:
        body.append(nbformat.v4.new_markdown_cell('## Appendix {#appendix}'))
        for title, cells in appendix:
            opening, closing = details(title, "appendix")
            body += [opening, *cells, closing]
    nb.cells = body


#: What a post's layout takes from the notebook's current source (:func:`overlay_layout`).
LAYOUT_TAGS = frozenset({APPENDIX_TAG, INPUT_TAG, COLLAPSED_TAG, KEY_FIGURE_TAG})
LAYOUT_METADATA = ("summary",)


def overlay_layout(executed_nb, current_nb) -> int:
    """Give the cells of ``executed_nb`` the layout of ``current_nb`` (the notebook's
    source now), in place: the tags of :data:`LAYOUT_TAGS` and the metadata of
    :data:`LAYOUT_METADATA`, nothing that changes an output. Cells are matched by type
    and source (difflib's alignment; a changed cell between matched ones is matched by
    position when both sides changed alike), so that a post re-rendered from an earlier
    run takes the shape its notebook has today. Returns the number of cells matched."""
    import difflib

    def signature(cell) -> tuple[str, str]:
        return cell.cell_type, re.sub(r"\s+", " ", cell.source).strip()

    # papermill's cell of injected parameters has no counterpart in the source
    run_cells = [c for c in executed_nb.cells if "injected-parameters" not in c.metadata.get("tags", [])]
    old = [signature(c) for c in run_cells]
    new = [signature(c) for c in current_nb.cells]
    matched = 0
    for op, i1, i2, j1, j2 in difflib.SequenceMatcher(None, old, new, autojunk=False).get_opcodes():
        if op not in ("equal", "replace") or (i2 - i1) != (j2 - j1):
            continue
        for i, j in zip(range(i1, i2), range(j1, j2)):
            target, source = run_cells[i], current_nb.cells[j]
            if target.cell_type != source.cell_type:
                continue
            tags = [t for t in target.metadata.get("tags", []) if t not in LAYOUT_TAGS]
            tags += [t for t in source.metadata.get("tags", []) if t in LAYOUT_TAGS]
            if tags or "tags" in target.metadata:
                target.metadata["tags"] = tags
            for name in LAYOUT_METADATA:
                if name in source.metadata:
                    target.metadata[name] = source.metadata[name]
                else:
                    target.metadata.pop(name, None)
            matched += 1
    return matched


def _fold(cells: list) -> list:
    title = _summary(cells[0]) or "Details"
    opening, closing = details(title, "collapsed")
    return [opening, *cells, closing]


def render(executed_nb, record: dict[str, Any], info: NotebookInfo, site_config: dict[str, Any], *,
           root: Path = ROOT) -> tuple[str, dict[str, bytes]]:
    """Render an executed notebook: returns (post Markdown with front matter,
    ``{filename: bytes}`` of ``images/<slug>/``: figures, downloads and the
    publication's manifest, :data:`sidebyside.publish.state.MANIFEST`). A post
    whose text the lint refuses (:mod:`sidebyside.publish.lint`) raises
    :class:`PublishError` naming each line. A gpu run renders to its post's GPU
    section instead, never to a post (:func:`sidebyside.publish.gpu_section.render_section`):
    publishing it adds that section to the post (:func:`sidebyside.publish.runs.combine`)."""
    from nbconvert import MarkdownExporter

    if record.get("profile") == "gpu":
        from sidebyside.publish.gpu_section import render_section

        return render_section(executed_nb, record, info, site_config, root=root)

    if Path(info.path).suffix == ".py" and Path(info.path).is_file():
        import copy

        import jupytext

        executed_nb = copy.deepcopy(executed_nb)
        overlay_layout(executed_nb, jupytext.read(info.path))
    nb, images = _preprocess(executed_nb, info.slug, root)
    drop_title_heading(nb, info.title)
    from traitlets.config import Config

    from sidebyside.publish import downloads, pairs

    rules = scrub_rules(root)
    images.update(downloads.files(info.slug, executed_nb, nb, record, lambda text: scrub(text, rules)))
    arrange_lead(nb, scrub(compared_paragraph(info, record), rules), where=str(info.path))
    arrange_appendix(nb)
    try:
        pairs.render_pairs(nb)
    except pairs.PairError as exc:
        raise PublishError(f"{info.path}: {exc}") from None

    # Figures are extracted (with stable names) by _preprocess, not by nbconvert.
    config = Config({"ExtractOutputPreprocessor": {"enabled": False}})
    exporter = MarkdownExporter(config=config, extra_template_basedirs=[str(TEMPLATES)], template_name="sidebyside",
                                filters=markdown.FILTERS)
    body, _ = exporter.from_notebook_node(nb, resources={"slug": info.slug})
    body = re.sub(r"\n{3,}", "\n\n", body).strip() + "\n"
    post = f"---\n{front_matter_text(front_matter(info, record, site_config, root), root)}---\n\n{body}"
    from sidebyside.publish import lint

    lint.check(post, str(info.path))
    lint.check_reading(post, str(info.path), record)  # warns; strict: refuses repeats
    from sidebyside.publish import state

    images[state.MANIFEST] = state.manifest(info.slug, f"{info.date}-{info.slug}.md", images, record)
    return post, images


def front_matter_text(fields: dict[str, Any], root: Path = ROOT) -> str:
    """The YAML of a post's front matter, safe to write: every string has its
    control characters dropped and paths scrubbed before YAML quotes it (never
    after, which could break the YAML). HTML in it is escaped where the
    layouts print it (``| escape``)."""
    rules = scrub_rules(root)
    fields = escape.clean(fields, lambda text: scrub(escape.drop_controls(text), rules))
    return yaml.safe_dump(fields, sort_keys=False, allow_unicode=True)

