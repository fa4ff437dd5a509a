"""The notebooks: discovery, their header, their parameters cell, and their
``.ipynb`` pairs.

A notebook's header (the YAML front matter in the leading comment block of a
jupytext percent ``.py``) and its cells are read here without jupytext
(importing it costs seconds); :func:`read_notebook_info` reads the
notebook with jupytext only when it is to be run."""

from __future__ import annotations

import ast
import datetime as dt
import json
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from sidebyside.publish.common import ROOT, PublishError

__all__ = ["NotebookInfo", "read_header", "notebook_info", "read_notebook_info", "discover", "select", "check_pairs",
           "read_gpu_budget", "GPU_BUDGET_KEY", "SLUG_RE", "HEADER_TEXT_RE", "DATE_RE",
           "HEADER_LIMITS", "MAX_TAGS", "check_header_fields"]

#: The entry of a post's settings file (params/<slug>.yaml) that holds its GPU budget, beside the profiles.
GPU_BUDGET_KEY = "gpu_budget"

REQUIRED_METADATA = ("slug", "title", "date", "description", "compared", "metrics")
#: A slug, matched whole (``\A...\Z``: ``$`` would also match before a trailing newline).
SLUG_RE = re.compile(r"\A[a-z0-9]+(?:-[a-z0-9]+)*\Z")
#: A header's text field, matched whole: one line, no blank at either end, and none of the
#: characters that would change how a page reads (controls, line and paragraph separators,
#: bidirectional and zero-width marks, byte-order marks, noncharacters, lone surrogates).
HEADER_TEXT_RE = re.compile("\\A(?!\\s)[^\x00-\x1f\x7f-\x9f\u2028\u2029\u200b-\u200f"
                            "\u202a-\u202e\u2060-\u206f\ufeff\ufffe\uffff\ud800-\udfff]+"
                            "(?<!\\s)\\Z")
#: A header's date, matched whole: YYYY-MM-DD.
DATE_RE = re.compile(r"\A[0-9]{4}-[0-9]{2}-[0-9]{2}\Z")
#: The most characters of each text field of a header (a tag: each tag; metrics: each key).
HEADER_LIMITS = {"title": 200, "description": 500, "compared": 1000, "tags": 50, "metrics": 100}
#: The most tags a header may give.
MAX_TAGS = 20
STEM_RE = re.compile(r"^[0-9]{2}_([a-z][a-z0-9_]*)$")


@dataclass
class NotebookInfo:
    """A notebook source and the metadata the site needs."""

    path: Path
    slug: str
    title: str
    date: str
    description: str
    tags: list[str] = field(default_factory=list)
    parameters: list[str] = field(default_factory=list)
    #: The work a post compares, in one or two sentences with no figures (the publisher adds the
    #: scale and device from the run: :func:`sidebyside.publish.rendering.compared_paragraph`).
    compared: str = ""
    #: The notebook's stem without its number (``03_grid_sample.py``: ``grid_sample``): the name of its
    #: package (``sidebyside.posts.<package>``) and of its test folder (``tests/posts/<package>``).
    package: str = ""
    #: The keys its results record must carry under ``metrics`` (the publisher refuses a run without one).
    metrics: list[str] = field(default_factory=list)
    #: Its GPU budget (:mod:`sidebyside.publish.schedule`): ``budget_s``, ``measured`` and optionally
    #: ``parts`` (written in the header as a list, in run order; here a mapping in that order) and
    #: ``rank`` (its place in the order the GPU runs are owed); None for a post that does not run on a GPU.
    gpu: dict[str, Any] | None = None

    def relpath(self, root: Path) -> str:
        try:
            return self.path.resolve().relative_to(root.resolve()).as_posix()
        except ValueError:
            return self.path.name


def _parameter_names(source: str) -> list[str]:
    names: list[str] = []
    for node in ast.parse(source).body:
        targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, ast.AnnAssign) else []
        for target in targets:
            if isinstance(target, ast.Name):
                names.append(target.id)
    return names


def read_header(path: Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The notebook metadata and cells of ``path`` without jupytext:
    ``(metadata, [{"cell_type", "metadata", "source"}, ...])``.

    For a jupytext percent ``.py``: the YAML between the ``# ---`` lines of
    its leading comment block, under ``jupyter:``, and one cell per ``# %%``
    marker (``[markdown]``/``[raw]`` after it sets the type; ``key=value``
    pairs, values in JSON, its metadata). For a ``.ipynb``: its JSON.
    Raises ``ValueError`` on a file it cannot read.
    """
    path = Path(path)
    text = path.read_text(encoding="utf-8")
    if path.suffix == ".ipynb":
        nb = json.loads(text)
        cells = [{"cell_type": c.get("cell_type"), "metadata": c.get("metadata") or {},
                  "source": c["source"] if isinstance(c.get("source"), str) else "".join(c.get("source") or [])}
                 for c in nb.get("cells", [])]
        return nb.get("metadata") or {}, cells
    lines = text.splitlines()
    metadata: dict[str, Any] = {}
    body_start = 0
    skip = 1 if lines and lines[0].startswith("#!") else 0
    if len(lines) > skip and lines[skip].rstrip() == "# ---":
        for end in range(skip + 1, len(lines)):
            if lines[end].rstrip() == "# ---":
                break
            if not (lines[end] == "#" or lines[end].startswith("# ")):
                raise ValueError(f"line {end + 1} of the header is not a comment")
        else:
            raise ValueError("the header's '# ---' block is not closed")
        header = yaml.safe_load("\n".join(line[2:] for line in lines[skip + 1:end])) or {}
        if not isinstance(header, dict):
            raise ValueError("the header is not a YAML mapping")
        metadata = header.get("jupyter") or {}
        body_start = end + 1
    cells: list[dict[str, Any]] = []
    for number, line in enumerate(lines[body_start:], body_start + 1):
        match = _CELL_MARKER.match(line)
        if match:
            cells.append({"cell_type": {"md": "markdown"}.get(match.group(1), match.group(1) or "code"), "metadata": _cell_metadata(match.group(2), number),
                          "source": []})
        elif cells:
            cells[-1]["source"].append(line)
    for cell in cells:
        cell["source"] = "\n".join(cell["source"]).strip("\n")
    return metadata, cells


_CELL_MARKER = re.compile(r"^# %%(?:\s+\[(markdown|md|raw)\])?(.*)$")
_CELL_OPTION = re.compile(r"\s*([A-Za-z_][\w.-]*)=")


def _cell_metadata(options: str, number: int) -> dict[str, Any]:
    """``key=<json>`` pairs after a ``# %%`` marker (as jupytext writes
    them); a title or anything else is not metadata."""
    found: dict[str, Any] = {}
    decoder = json.JSONDecoder()
    rest = options
    while rest.strip():
        match = _CELL_OPTION.match(rest)
        if not match:
            break  # a cell title: jupytext keeps it as text, not metadata
        try:
            value, used = decoder.raw_decode(rest, match.end())
        except ValueError:
            raise ValueError(f"line {number}: cannot read the cell option {rest.strip()!r}") from None
        found[match.group(1)] = value
        rest = rest[used:]
    return found


def notebook_info(path: Path) -> NotebookInfo:
    """Read a notebook's header (without jupytext: :func:`read_header`) and
    check what publication needs; raises :class:`PublishError` naming the
    notebook and what to add."""
    try:
        metadata, cells = read_header(path)
    except (OSError, UnicodeDecodeError, ValueError, yaml.YAMLError) as exc:
        raise PublishError(f"{path}: its header cannot be read ({exc})") from exc
    meta = metadata.get("sidebyside") or {}
    missing = [key for key in REQUIRED_METADATA if not meta.get(key)]
    if missing:
        raise PublishError(
            f"{path}: its header lacks {', '.join(missing)}. Add them under 'sidebyside:' in the "
            f"jupytext header, e.g.\n#   sidebyside:\n#     slug: my-topic\n#     title: \"My topic\"\n"
            f"#     date: '{dt.date.today().isoformat()}'\n#     description: One sentence.\n"
            f"#     compared: The work compared, e.g. training one MLP in PyTorch and in Flax.\n#     tags: [pytorch, jax]\n"
            f"#     metrics: [accuracy]  # the keys its results record must carry"
        )
    check_header_fields(path, meta)
    slug = meta["slug"]
    date = meta["date"] if isinstance(meta["date"], str) else meta["date"].isoformat()
    if not metadata.get("kernelspec", {}).get("name"):
        raise PublishError(f"{path}: no kernelspec; papermill needs one. Run: {sys.executable} -m jupytext "
                           f"--set-kernel python3 {path} (jupytext is a module of the Python that runs the publisher)")
    cells = [c for c in cells if "parameters" in (c["metadata"].get("tags") or [])]
    if len(cells) != 1:
        raise PublishError(
            f"{path}: needs exactly one cell tagged 'parameters' (found {len(cells)}). "
            "Put every size knob in one code cell that starts with: # %% tags=[\"parameters\"]"
        )
    stem = STEM_RE.match(Path(path).stem)
    if not stem:
        raise PublishError(f"{path}: name a notebook NN_<package>.py (two digits, then the name of its package "
                           "under src/sidebyside/posts/ and of its folder under tests/posts/), e.g. 09_my_topic.py")
    metrics = meta["metrics"]
    if meta.get("gpu") is not None:
        raise PublishError(f"{path}: its header gives a gpu budget; a post's GPU budget lives in its settings "
                           f"file, params/{slug}.yaml, under {GPU_BUDGET_KEY}: (move it there)")
    gpu = read_gpu_budget(Path(path).resolve().parent.parent / "params" / f"{slug}.yaml")
    tags = meta.get("tags") or []
    info = NotebookInfo(path, slug, str(meta["title"]), date, str(meta["description"]),
                        [str(t) for t in tags], _parameter_names(cells[0]["source"]), str(meta["compared"]),
                        package=stem.group(1), metrics=list(metrics), gpu=gpu)
    return info


def _text_problem(value: Any, limit: int) -> str | None:
    """Why ``value`` is not a header text of at most ``limit`` characters
    (:data:`HEADER_TEXT_RE`), or None."""
    if not isinstance(value, str):
        return f"must be text, not {type(value).__name__}"
    if len(value) > limit:
        return f"holds {len(value)} characters, more than {limit}"
    if not HEADER_TEXT_RE.fullmatch(value):
        return ("must be one line with no blank at either end and no control, separator, "
                "bidirectional or zero-width character (a block scalar, '|' or '>', ends with a "
                "line break: write it on one line)")
    return None


def check_header_fields(path: Path, meta: dict[str, Any]) -> None:
    """Raise :class:`PublishError` naming ``path``, the field and what to write, unless every
    field of the header's ``sidebyside:`` mapping ``meta`` that a page shows matches whole, after
    YAML parsing: ``slug`` (:data:`SLUG_RE`), ``date`` (:data:`DATE_RE`, a real day; or a date
    YAML read), ``title``, ``description``, ``compared`` and each of ``tags`` (at most
    :data:`MAX_TAGS`) and ``metrics`` (:data:`HEADER_TEXT_RE`, at most :data:`HEADER_LIMITS`
    characters)."""
    slug = meta.get("slug")
    if not (isinstance(slug, str) and SLUG_RE.fullmatch(slug)):
        raise PublishError(f"{path}: slug {slug!r} must be lowercase words joined by hyphens, on "
                           "one line, e.g. 'grid-sample-parity'")
    date = meta.get("date")
    written = isinstance(date, str) and DATE_RE.fullmatch(date) and _is_day(date)
    if not (type(date) is dt.date or written):
        raise PublishError(f"{path}: date {date!r} is not a day written YYYY-MM-DD, on one line, "
                           "e.g. '2026-11-22'")
    for key in ("title", "description", "compared"):
        why = _text_problem(meta.get(key), HEADER_LIMITS[key])
        if why:
            raise PublishError(f"{path}: its header's {key} {why}")
    examples = {"tags": "a list, e.g. tags: [jax, pytorch]",
                "metrics": "a list of the keys its results record carries, e.g. "
                           "metrics: [accuracy, verdicts]"}
    for key, example in examples.items():
        values = meta.get(key) if key == "metrics" else (meta.get(key) or [])
        if not isinstance(values, list) or (key == "metrics" and not values):
            raise PublishError(f"{path}: its header's {key} must be {example} "
                               f"(found {values!r:.80})")
        if key == "tags" and len(values) > MAX_TAGS:
            raise PublishError(f"{path}: its header's tags number {len(values)}, "
                               f"more than {MAX_TAGS}")
        for value in values:
            why = _text_problem(value, HEADER_LIMITS[key])
            if why:
                raise PublishError(f"{path}: its header's {key} entry {value!r:.80} {why}")


def _is_day(text: str) -> bool:
    try:
        dt.date.fromisoformat(text)
    except ValueError:
        return False
    return True


def read_gpu_budget(settings: Path) -> dict[str, Any] | None:
    """The GPU budget of a post's settings file (its :data:`GPU_BUDGET_KEY` entry, checked by
    :func:`_gpu_budget`), None where the file or the entry is absent (the post plans no GPU run)."""
    if not settings.is_file():
        return None
    try:
        table = yaml.safe_load(settings.read_text(encoding="utf-8")) or {}
    except yaml.YAMLError as exc:
        raise PublishError(f"{settings} is not valid YAML: {exc}") from exc
    gpu = table.get(GPU_BUDGET_KEY) if isinstance(table, dict) else None
    return None if gpu is None else _gpu_budget(settings, gpu)


def _gpu_budget(path: Path, gpu: Any) -> dict[str, Any]:
    """A settings file's GPU budget, checked, with ``parts`` turned from the file's list into a mapping in
    the same order; ``derivation`` (optional) maps a part (or ``budget_s``) to how its seconds were found;
    raises :class:`PublishError` naming ``path`` and what to write."""
    if not (isinstance(gpu, dict) and "budget_s" in gpu and gpu.get("measured")
            and (gpu["budget_s"] is None or isinstance(gpu["budget_s"], (int, float)))):
        raise PublishError(f"{path}: its {GPU_BUDGET_KEY} must be a mapping with budget_s (device seconds of one run, "
                           f"null until measured) and measured (where that figure comes from), e.g. gpu: "
                           f"{{budget_s: 300, measured: \"the GPU and commit of the run\"}} (found {gpu!r})")
    if gpu.get("rank") is not None and not (isinstance(gpu["rank"], int) and gpu["rank"] > 0):
        raise PublishError(f"{path}: its gpu_budget.rank must be a whole number from 1 (owed first), "
                           f"found {gpu['rank']!r}")
    if gpu.get("parts") is not None:
        parts = gpu["parts"]
        if not (isinstance(parts, list) and all(isinstance(p, dict) and len(p) == 1 for p in parts)):
            raise PublishError(f"{path}: its gpu_budget.parts must be a list of one-entry mappings, in the order "
                               "the notebook runs them (a mapping's order is not kept), e.g. parts: [{parity: 120}, "
                               f"{{bench/*: {{count: 3, each_s: 60}}}}] (found {parts!r})")
        gpu = {**gpu, "parts": {name: cost for part in parts for name, cost in part.items()}}
    derivation = gpu.get("derivation") or {}
    if not (isinstance(derivation, dict) and all(isinstance(v, str) and v.strip() for v in derivation.values())):
        raise PublishError(f"{path}: its gpu_budget.derivation must map a part (or budget_s) to a sentence saying how "
                           f"its seconds were found (found {derivation!r})")
    return gpu


def read_notebook_info(path: Path):
    """:func:`notebook_info`, and the notebook as jupytext reads it (to run
    it): ``(NotebookInfo, notebook)``."""
    info = notebook_info(path)
    import jupytext

    try:
        nb = jupytext.read(path)
    except Exception as exc:
        raise PublishError(f"{path}: jupytext cannot read it ({exc})") from exc
    return info, nb


def discover(notebooks_dir: Path) -> list[NotebookInfo]:
    """All ``NN_topic.py`` notebooks in ``notebooks_dir``, checked, in order."""
    paths = sorted(p for p in Path(notebooks_dir).glob("*.py") if not p.name.startswith("_"))
    infos = [notebook_info(p) for p in paths]
    seen: dict[str, Path] = {}
    for info in infos:
        if info.slug in seen:
            raise PublishError(f"slug {info.slug!r} is used by both {seen[info.slug]} and {info.path}")
        seen[info.slug] = info.path
    return infos


def select(infos: list[NotebookInfo], only: str | None) -> list[NotebookInfo]:
    if not only:
        return infos
    wanted = [s.strip() for s in only.split(",") if s.strip()]
    if not wanted:
        raise PublishError(f"ONLY={only!r} names no slug: give slugs separated by commas (e.g. ONLY=xla-and-scipy), "
                           "or leave ONLY empty for every notebook")
    by_slug = {i.slug: i for i in infos}
    unknown = [s for s in wanted if s not in by_slug]
    if unknown:
        raise PublishError(f"unknown slug {', '.join(unknown)}; valid slugs: {', '.join(by_slug) or '(none)'}")
    return [by_slug[s] for s in wanted]


def check_pairs(notebooks: Path = ROOT / "notebooks") -> list[str]:
    """Problems with the .py/.ipynb pairs (missing, out of date, or with outputs) and with their
    paired cells (this library's code where a framework's belongs: :func:`sidebyside.publish.pairs.code_problems`)."""
    import jupytext

    from sidebyside.publish.pairs import code_problems

    problems = []
    for py in sorted(Path(notebooks).glob("*.py")):
        metadata, cells = read_header(py)
        under_test = (metadata.get("sidebyside") or {}).get("under_test") or []
        problems += code_problems(cells, under_test=under_test, name=py.name)
        ipynb = py.with_suffix(".ipynb")
        if not ipynb.is_file():
            problems.append(f"{ipynb} is missing (run: make sync)")
            continue
        a, b = jupytext.read(py), jupytext.read(ipynb)
        if [(c.cell_type, c.source) for c in a.cells] != [(c.cell_type, c.source) for c in b.cells]:
            problems.append(f"{ipynb} differs from {py.name} (run: make sync)")
        if a.metadata.get("sidebyside") != b.metadata.get("sidebyside"):
            problems.append(f"{ipynb} metadata differs from {py.name} (run: make sync)")
        if any(c.get("outputs") or c.get("execution_count") for c in b.cells if c.cell_type == "code"):
            problems.append(f"{ipynb} holds outputs; pairs are kept clean for Colab (run: make sync)")
    return problems

