"""From notebook to post: execution, cache, rendering, atomic publication.

Flow (DESIGN.md)::

    notebooks/NN_topic.py --jupytext--> notebook --papermill(params/<profile>.yaml)-->
        build/executed/<slug>.ipynb + build/results/<slug>.json
    --render (nbconvert exporter, our preprocessors, our template)-->
        _posts/DATE-slug.md + images/<slug>/* + _data/results/<slug>.json

Cache with freeze semantics: a notebook runs again only when its key changes
(its source, its parameters for the profile, the pinned requirements, and
the library modules and data files its last run used: see
:mod:`sidebyside.runkey`). The key is stored as ``source_hash`` in the
published results file, with the recorded ``inputs``, so a fresh clone knows
what is up to date. A published result
of a larger profile (gpu > cpu > smoke) is kept unless ``force``.

Publication is a transaction per notebook (:mod:`sidebyside.sitefiles`):
everything is rendered before anything is written; the post, its images and
its results are swapped in together under a journal, and a publication that
died half way is rolled back or completed by the next run, which says which.
A run holds the lock of its site and build folder. ``render`` publishes only
a completed run whose record matches the published one. Every byte of cell
output is escaped by :mod:`sidebyside.escape`; paths and the host name are
scrubbed.

CLI: ``python -m sidebyside.publish {execute,render,list,profile,check-pairs} ...``
(``--help`` on each). The Makefile drives it.
"""

from __future__ import annotations

import argparse
import ast
import base64
import contextlib
import datetime as dt
import functools
import hashlib
import inspect
import json
import os
import re
import shutil
import socket
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from sidebyside import escape, provenance, runkey, sitefiles

__all__ = [
    "PROFILES",
    "PublishError",
    "NotebookInfo",
    "discover",
    "detect_profile",
    "load_params",
    "cache_key",
    "plan",
    "execute",
    "render",
    "publish",
    "run",
    "main",
]

PROFILES = ("smoke", "cpu", "gpu")  # ordered: a larger profile is never replaced by a smaller one
ROOT = Path(__file__).resolve().parents[2]
TEMPLATES = Path(__file__).resolve().parent / "templates"
REQUIRED_METADATA = ("slug", "title", "date", "description")
SLUG_RE = re.compile(r"^[a-z0-9]+(?:-[a-z0-9]+)*$")
ANSI_RE = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b\][^\x07]*\x07")


class PublishError(Exception):
    """A problem the user can fix; the message says what to do."""


# --------------------------------------------------------------------------- discovery


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


def read_notebook_info(path: Path):
    """Read a jupytext ``.py`` (or ``.ipynb``) and check what publication needs.

    Returns ``(NotebookInfo, notebook)``; raises :class:`PublishError` naming
    the notebook and what to add.
    """
    import jupytext

    try:
        nb = jupytext.read(path)
    except Exception as exc:
        raise PublishError(f"{path}: jupytext cannot read it ({exc})") from exc
    meta = nb.metadata.get("sidebyside") or {}
    missing = [key for key in REQUIRED_METADATA if not meta.get(key)]
    if missing:
        raise PublishError(
            f"{path}: its header lacks {', '.join(missing)}. Add them under 'sidebyside:' in the "
            f"jupytext header, e.g.\n#   sidebyside:\n#     slug: my-topic\n#     title: \"My topic\"\n"
            f"#     date: '{dt.date.today().isoformat()}'\n#     description: One sentence.\n#     tags: [pytorch, jax]"
        )
    slug = str(meta["slug"])
    if not SLUG_RE.match(slug):
        raise PublishError(f"{path}: slug {slug!r} must be lowercase words joined by hyphens, e.g. 'grid-sample-parity'")
    try:
        date = dt.date.fromisoformat(str(meta["date"])).isoformat()
    except ValueError as exc:
        raise PublishError(f"{path}: date {meta['date']!r} is not YYYY-MM-DD") from exc
    if not nb.metadata.get("kernelspec", {}).get("name"):
        raise PublishError(f"{path}: no kernelspec; papermill needs one. Run: {sys.executable} -m jupytext "
                           f"--set-kernel python3 {path} (jupytext is a module of the Python that runs the publisher)")
    cells = [c for c in nb.cells if "parameters" in c.metadata.get("tags", [])]
    if len(cells) != 1:
        raise PublishError(
            f"{path}: needs exactly one cell tagged 'parameters' (found {len(cells)}). "
            "Put every size knob in one code cell that starts with: # %% tags=[\"parameters\"]"
        )
    tags = meta.get("tags") or []
    info = NotebookInfo(path, slug, str(meta["title"]), date, str(meta["description"]),
                        [str(t) for t in tags], _parameter_names(cells[0].source))
    return info, nb


def discover(notebooks_dir: Path) -> list[NotebookInfo]:
    """All ``NN_topic.py`` notebooks in ``notebooks_dir``, checked, in order."""
    paths = sorted(p for p in Path(notebooks_dir).glob("*.py") if not p.name.startswith("_"))
    infos = [read_notebook_info(p)[0] for p in paths]
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


# --------------------------------------------------------------------------- profiles and parameters


def detect_profile() -> str:
    """``gpu`` where the driver shows a GPU, else ``cpu`` (asked without
    importing PyTorch or JAX; the gpu profile then checks that both use it)."""
    return "gpu" if provenance.gpu_present() else "cpu"


def check_profile(profile: str) -> str:
    if profile not in PROFILES:
        raise PublishError(f"unknown profile {profile!r}; valid profiles: {', '.join(PROFILES)} (or 'auto')")
    return profile


def load_params(params_dir: Path, profile: str, infos: list[NotebookInfo]) -> dict[str, dict[str, Any]]:
    """Parameters of ``profile`` per slug, checked against each notebook's parameters cell.

    ``infos`` are all the notebooks of the folder the params file serves (not
    a selection of them): a top-level key that is none of their slugs is an error.
    """
    check_profile(profile)
    path = Path(params_dir) / f"{profile}.yaml"
    if not path.is_file():
        raise PublishError(f"{path} is missing; create it with one mapping per notebook slug")
    try:
        table = yaml.safe_load(path.read_text()) or {}
    except yaml.YAMLError as exc:
        raise PublishError(f"{path} is not valid YAML: {exc}") from exc
    if not isinstance(table, dict):
        raise PublishError(f"{path} must map notebook slugs to parameter mappings")
    by_slug = {i.slug: i for i in infos}
    result: dict[str, dict[str, Any]] = {}
    unknown_slugs = sorted(str(slug) for slug in table if slug not in by_slug)
    if unknown_slugs:
        raise PublishError(f"{path}: {', '.join(map(repr, unknown_slugs))} is not the slug of a notebook; "
                           f"valid slugs: {', '.join(by_slug) or '(none)'} (fix the spelling or remove the entry)")
    for slug, values in table.items():
        values = values or {}
        if not isinstance(values, dict):
            raise PublishError(f"{path}: the entry for {slug!r} must be a mapping of parameter names to values")
        unknown = sorted(set(values) - set(by_slug[slug].parameters))
        if unknown:
            raise PublishError(
                f"{path}: {slug} sets {', '.join(unknown)}, which its parameters cell "
                f"({by_slug[slug].path.name}) does not define; valid names: {', '.join(by_slug[slug].parameters)}"
            )
        result[slug] = values
    for info in infos:
        result.setdefault(info.slug, {})
    return result


# --------------------------------------------------------------------------- cache


def cache_key(info: NotebookInfo, profile: str, params: dict[str, Any], root: Path = ROOT,
              inputs: dict[str, Any] | None = None) -> str:
    """The key of a run: notebook source, the profile's parameters for it, the
    pins, and the modules and data files the run recorded as its ``inputs``
    (without them, the whole library: see :mod:`sidebyside.runkey`)."""
    return runkey.run_key(info.path, profile, params, inputs, root)


@dataclass
class Decision:
    info: NotebookInfo
    action: str  # "run" | "up to date" | "kept"
    reason: str
    key: str | None  # the published record's key as it stands now (None: nothing published)


def _published_record(site: Path, slug: str) -> dict[str, Any] | None:
    """The published results record of ``slug``, or None when nothing is
    published. A record that cannot be trusted raises :class:`PublishError`
    (never "not published": that would let any run replace the post)."""
    path = Path(site) / "_data" / "results" / f"{slug}.json"
    fix = (f"restore it (git checkout -- _data/results/{slug}.json), or replace the published post with a new run "
           f"(make execute ONLY={slug} FORCE=1)")
    if not path.exists():
        posts = sorted(p for p in (Path(site) / "_posts").glob(f"*-{slug}.md") if _is_post_of(p, slug))
        if posts:
            raise PublishError(f"{posts[0]} is published but its results file {path} is missing: {fix}")
        return None
    try:
        record = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError) as exc:
        raise PublishError(f"{path} cannot be read ({exc}): {fix}") from None
    except ValueError as exc:
        raise PublishError(f"{path} is not valid JSON ({exc}): {fix}") from None
    problem = None
    if not isinstance(record, dict):
        problem = f"holds a JSON {type(record).__name__}, not an object"
    elif record.get("slug") != slug:
        problem = f"names slug {record.get('slug')!r}, not {slug!r}"
    elif record.get("profile") not in PROFILES:
        problem = f"has profile {record.get('profile')!r}, not one of {', '.join(PROFILES)}"
    else:
        missing = [k for k, kind in (("source_hash", str), ("executed_at", str), ("provenance", dict),
                                     ("metrics", dict)) if not isinstance(record.get(k), kind)]
        if missing:
            problem = f"lacks {', '.join(missing)} (or has the wrong type)"
    if problem:
        raise PublishError(f"{path} is not a valid results record: it {problem}: {fix}")
    return record


def _is_post_of(path: Path, slug: str) -> bool:
    return bool(re.match(r"\d{4}-\d{2}-\d{2}-" + re.escape(slug) + r"\.md$", path.name))


def _post_path(site: Path, info: NotebookInfo) -> Path:
    return site / "_posts" / f"{info.date}-{info.slug}.md"


def freshness(info: NotebookInfo, record: dict[str, Any] | None, params_by_profile: dict[str, dict[str, dict]],
              root: Path = ROOT) -> tuple[bool | None, str | None]:
    """Whether a published record is current: ``(current, key)``, with
    ``current`` None when it cannot be told (nothing published, or no
    parameters for its profile). The one test behind ``execute`` and ``list``."""
    if record is None or info.slug not in params_by_profile.get(record.get("profile"), {}):
        return None, None
    return runkey.freshness(info.path, record, params_by_profile[record["profile"]][info.slug], root)


def plan(infos, profile, params_by_profile, site: Path, *, force: bool = False, root: Path = ROOT) -> list[Decision]:
    """Decide, per notebook, whether to run it (see the module docstring)."""
    decisions = []
    for info in infos:
        record = None if force else _published_record(site, info.slug)
        post = _post_path(site, info)
        current, key = freshness(info, record, params_by_profile, root)
        if force:
            decisions.append(Decision(info, "run", "forced", key))
        elif record is None or not post.is_file():
            decisions.append(Decision(info, "run", "not published yet", key))
        elif record.get("profile") in PROFILES and PROFILES.index(record["profile"]) > PROFILES.index(profile):
            published = record["profile"]
            stale = "" if current is not False else "; its inputs changed since"
            decisions.append(Decision(
                info, "kept",
                f"published {published} result kept{stale} (PROFILE={published} to refresh it, FORCE=1 to replace it)",
                key))
        elif record.get("profile") == profile and current:
            decisions.append(Decision(info, "up to date", f"{profile} result is current", key))
        else:
            decisions.append(Decision(info, "run", "sources or parameters changed" if record.get("profile") == profile
                                      else f"replacing a {record.get('profile')} result", key))
    return decisions


# --------------------------------------------------------------------------- execution


def _format_failure(exc, info: NotebookInfo, nb_path: Path, executed: Path) -> str:
    cell = getattr(exc, "cell_index", None)
    source = (getattr(exc, "source", "") or "").strip().splitlines()
    first = next((line for line in source if line.strip() and not line.startswith("#")), source[0] if source else "")
    ename, evalue = getattr(exc, "ename", type(exc).__name__), getattr(exc, "evalue", str(exc))
    return (
        f"FAILED {info.slug} ({nb_path}): cell {cell} [{first[:80]}] raised {ename}: {ANSI_RE.sub('', str(evalue))}\n"
        f"  the executed copy, with the traceback, is kept at {executed}\n"
        f"  nothing published was changed"
    )


def execute(info: NotebookInfo, nb, profile: str, params: dict[str, Any], build: Path, *,
            root: Path = ROOT, progress: bool = True, timeout: int | None = None) -> tuple[Path, dict[str, Any]]:
    """Run one notebook with papermill into ``build/executed/<slug>.ipynb``.

    Returns the executed path and the results record the notebook saved.
    Raises :class:`PublishError` with the failing cell and error.
    """
    import jupytext
    import papermill

    executed_dir, results_dir, input_dir = build / "executed", build / "results", build / "input"
    for d in (executed_dir, results_dir, input_dir):
        d.mkdir(parents=True, exist_ok=True)
    input_path = input_dir / f"{info.slug}.ipynb"
    jupytext.write(nb, input_path)
    executed = executed_dir / f"{info.slug}.ipynb"
    results_path = results_dir / f"{info.slug}.json"
    results_path.unlink(missing_ok=True)
    env = {
        "SIDEBYSIDE_HEADLESS": "1",
        "SIDEBYSIDE_PROFILE": profile,
        "SIDEBYSIDE_RESULTS_DIR": str(results_dir.resolve()),
        "SIDEBYSIDE_ROOT": str(root.resolve()),
        "MPLBACKEND": "module://matplotlib_inline.backend_inline",
        "PYDEVD_DISABLE_FILE_VALIDATION": "1",
    }
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        papermill.execute_notebook(
            str(input_path), str(executed), parameters=params, kernel_name=nb.metadata["kernelspec"]["name"],
            cwd=str(root), progress_bar=progress, log_output=False, execution_timeout=timeout,
        )
    except papermill.PapermillExecutionError as exc:
        raise PublishError(_format_failure(exc, info, info.path, executed)) from None
    except Exception as exc:
        raise PublishError(f"FAILED {info.slug} ({info.path}): {type(exc).__name__}: {exc}\n"
                           f"  executed copy (if any): {executed}; nothing published was changed") from exc
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    if not results_path.is_file():
        raise PublishError(
            f"FAILED {info.slug} ({info.path}): the run saved no results. End the notebook with "
            f"sidebyside.provenance.save_results({info.slug!r}, metrics). Nothing published was changed."
        )
    record = json.loads(results_path.read_text())
    if record.get("slug") != info.slug:
        raise PublishError(f"{info.path}: save_results was called with slug {record.get('slug')!r}, expected {info.slug!r}")
    return executed, record


# --------------------------------------------------------------------------- rendering


def _scrub_rules(root: Path) -> list[tuple[re.Pattern, str]]:
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
    """Jupyter writes inline math as ``$x$``; kramdown only protects ``$$x$$``
    (it would read ``_`` inside as emphasis). Rewrite outside code."""
    parts = _CODE_SPAN.split(markdown)
    return "".join(part if i % 2 else _INLINE_MATH.sub(r"$$\1$$", part) for i, part in enumerate(parts))


def _slugify(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-") or "figure"


_EXT = {"image/png": "png", "image/svg+xml": "svg", "image/jpeg": "jpg"}
_SHOWN = ("text/plain", "text/html", "text/markdown", "text/latex", *_EXT)


def _preprocess(nb, slug: str, root: Path) -> tuple[Any, dict[str, bytes]]:
    """Our preprocessing, in place on a copy: hide tagged cells, drop the
    parameter cells, clean streams, scrub paths, extract figures with stable
    names. Returns the notebook and ``{filename: bytes}``."""
    import copy

    from nbconvert.preprocessors import TagRemovePreprocessor

    nb = copy.deepcopy(nb)
    nb.cells = [c for c in nb.cells if not {"parameters", "injected-parameters"} & set(c.metadata.get("tags", []))]
    tag_remover = TagRemovePreprocessor(
        remove_cell_tags={"remove_cell"}, remove_input_tags={"remove_input"},
        remove_all_outputs_tags={"remove_output"}, enabled=True,
    )
    nb, _ = tag_remover.preprocess(nb, {})
    rules = _scrub_rules(root)
    images: dict[str, bytes] = {}
    unnamed = 0
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            cell.source = kramdown_math(escape.drop_controls(cell.source))
            continue
        if cell.cell_type != "code":
            continue
        cell.source = scrub(escape.drop_controls(cell.source), rules)
        outputs = []
        for output in cell.get("outputs", []):
            kind = output.get("output_type")
            if kind == "stream":
                # Chunks of one stream are one text: a tqdm frame may start in one chunk
                # and be redrawn ("\r") in the next. Join raw, clean once at the end.
                if outputs and outputs[-1].get("output_type") == "stream" and outputs[-1].get("name") == output.get("name"):
                    outputs[-1]["text"] += output.get("text", "")
                    continue
            elif kind == "error":
                output["traceback"] = [scrub(escape.drop_controls(ANSI_RE.sub("", line)), rules)
                                       for line in output.get("traceback", [])]
            elif kind in ("display_data", "execute_result"):
                data = output.get("data", {})
                for mime in [m for m in data if m not in _SHOWN]:
                    data.pop(mime)  # JavaScript, widgets, anything the post template does not print safely
                for mime in ("text/plain", "text/html", "text/markdown", "text/latex"):
                    if mime in data:
                        text = data[mime] if isinstance(data[mime], str) else "".join(data[mime])
                        text = scrub(escape.drop_controls(ANSI_RE.sub("", text)), rules)
                        data[mime] = kramdown_math(text) if mime == "text/markdown" else text
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
                    payload = data[mime]
                    if mime == "image/svg+xml":
                        payload = (payload if isinstance(payload, str) else "".join(payload)).encode()
                    else:
                        payload = base64.b64decode(payload)
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
                output["text"] = scrub(text, rules).strip("\n")
        cell.outputs = [o for o in outputs if o.get("output_type") != "stream" or o["text"].strip()]
    return nb, images


def _site_config(site: Path, root: Path = ROOT) -> dict[str, Any]:
    """The site's _config.yml (the repository's when the site has none)."""
    path = next((p for p in (site / "_config.yml", root / "_config.yml") if p.is_file()), None)
    config = (yaml.safe_load(path.read_text()) or {}) if path else {}
    if not re.match(r"^[\w.-]+/[\w.-]+$", str(config.get("repository", ""))):
        raise PublishError(f"{path or site / '_config.yml'}: set 'repository: owner/name' (the GitHub repository "
                           "that Colab, download and source links point to)")
    return config


def front_matter(info: NotebookInfo, record: dict[str, Any], site_config: dict[str, Any], root: Path) -> dict[str, Any]:
    repository = site_config.get("repository", "")
    branch = site_config.get("branch", "main")
    notebook = info.relpath(root)
    ipynb = notebook[:-3] + ".ipynb" if notebook.endswith(".py") else notebook
    prov = record["provenance"]
    versions = {k: prov.get(k) for k in ("python", "torch", "jax", "jaxlib", "flax", "optax", "cuda") if prov.get(k)}
    return {
        "layout": "post",
        "title": info.title,
        "date": info.date,
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
        "parameters": record.get("parameters", {}),
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


def render(executed_nb, record: dict[str, Any], info: NotebookInfo, site_config: dict[str, Any], *,
           root: Path = ROOT) -> tuple[str, dict[str, bytes]]:
    """Render an executed notebook: returns (post Markdown with front matter, images)."""
    from nbconvert import MarkdownExporter

    nb, images = _preprocess(executed_nb, info.slug, root)
    drop_title_heading(nb, info.title)
    from traitlets.config import Config

    from sidebyside import downloads, pairs

    rules = _scrub_rules(root)
    images.update(downloads.files(info.slug, executed_nb, nb, record, lambda text: scrub(text, rules)))
    try:
        pairs.render_pairs(nb)
    except pairs.PairError as exc:
        raise PublishError(f"{info.path}: {exc}") from None

    # Figures are extracted (with stable names) by _preprocess, not by nbconvert.
    config = Config({"ExtractOutputPreprocessor": {"enabled": False}})
    exporter = MarkdownExporter(config=config, extra_template_basedirs=[str(TEMPLATES)], template_name="sidebyside",
                                filters=escape.FILTERS)
    body, _ = exporter.from_notebook_node(nb, resources={"slug": info.slug})
    body = re.sub(r"\n{3,}", "\n\n", body).strip() + "\n"
    return f"---\n{front_matter_text(front_matter(info, record, site_config, root), root)}---\n\n{body}", images


def front_matter_text(fields: dict[str, Any], root: Path = ROOT) -> str:
    """The YAML of a post's front matter, safe to write: every string has its
    control characters dropped and paths scrubbed before YAML quotes it (never
    after, which could break the YAML). HTML in it is escaped where the
    layouts print it (``| escape``)."""
    rules = _scrub_rules(root)
    fields = escape.clean(fields, lambda text: scrub(escape.drop_controls(text), rules))
    return yaml.safe_dump(fields, sort_keys=False, allow_unicode=True)


# --------------------------------------------------------------------------- atomic publication


def recover(site: Path) -> list[str]:
    """Roll back or complete a publication that an interrupted run left
    behind (:func:`sitefiles.recover`); returns what was done, one sentence
    each. Also removes the leftovers of the swaps of earlier versions."""
    said = sitefiles.recover(site)
    images = site / "images"
    if images.is_dir():
        for old in images.glob(".*.old"):
            slug = old.name[1:-4]
            if (images / slug).exists():
                shutil.rmtree(old, ignore_errors=True)
            else:
                old.rename(images / slug)
        for new in images.glob(".*.new"):
            shutil.rmtree(new, ignore_errors=True)
    for directory in (site / "_posts", site / "_data" / "results"):
        if directory.is_dir():
            for tmp in directory.glob(".*.tmp"):
                tmp.unlink(missing_ok=True)
    return said


def publish(site: Path, info: NotebookInfo, post: str, images: dict[str, bytes], record: dict[str, Any]) -> Path:
    """Replace the post, the images and the results of ``info`` in ``site``,
    together or not at all (a :class:`sitefiles.Transaction`); a post of the
    same slug under another date is removed in the same transaction."""
    site = Path(site)
    with _lock(site):
        for message in recover(site):
            _say(f"recovered {message}")
        txn = sitefiles.Transaction(site, info.slug)
        staged = txn.stage(f"images/{info.slug}")
        staged.mkdir()
        for name, payload in images.items():
            (staged / name).write_bytes(payload)
        target = _post_path(site, info)
        txn.stage(f"_posts/{target.name}").write_text(post)
        for stale in sorted((site / "_posts").glob(f"*-{info.slug}.md")):
            if stale != target and _is_post_of(stale, info.slug):
                txn.delete(f"_posts/{stale.name}")
        txn.stage(f"_data/results/{info.slug}.json").write_text(json.dumps(record, indent=2, sort_keys=True) + "\n")
        txn.commit()
    return target


# --------------------------------------------------------------------------- orchestration


def complete_record(saved: dict[str, Any], info: NotebookInfo, profile: str, params: dict[str, Any], key: str, root: Path) -> dict[str, Any]:
    """The published results file: what the notebook saved plus run facts,
    every string without control characters, paths or the host name."""
    rules = _scrub_rules(root)
    return escape.clean({
        "slug": info.slug,
        "notebook": info.relpath(root),
        "profile": profile,
        "executed_at": dt.datetime.now(dt.timezone.utc).replace(microsecond=0).isoformat(),
        "source_hash": key,
        "inputs": saved.get("inputs"),
        "parameters": params,
        "provenance": saved["provenance"],
        "metrics": saved["metrics"],
    }, lambda text: scrub(escape.drop_controls(text), rules))


def _say(message: str) -> None:
    print(message, flush=True)


def _check_before_running(profile: str, root: Path) -> None:
    """Refuse, before anything runs, a tree whose commit cannot be told and a
    gpu profile that PyTorch and JAX would not both run on the GPU."""
    try:
        runkey.commit_stamp(root, [])
        if profile == "gpu":
            gpu = provenance.check_gpu_profile(provenance.probe_devices(), driver_gpu=provenance.gpu_present())
            _say(f"gpu: PyTorch and JAX both compute on {gpu}")
    except (runkey.StampError, provenance.GPUProfileError) as exc:
        raise PublishError(str(exc)) from None


def _key_and_stamp(info: NotebookInfo, profile: str, params: dict[str, Any], params_dir: Path,
                   saved: dict[str, Any], root: Path) -> tuple[str, str]:
    """A finished run's key and commit, both from the inputs it recorded."""
    inputs = saved.get("inputs")
    paths = runkey.input_paths(info.path, Path(params_dir) / f"{profile}.yaml", profile, inputs, root)
    try:
        return cache_key(info, profile, params, root, inputs), runkey.commit_stamp(root, paths)
    except runkey.StampError as exc:
        raise PublishError(str(exc)) from None


def _warn(message: str) -> None:
    print(f"warning: {message}", file=sys.stderr, flush=True)


@contextlib.contextmanager
def _lock(*directories: Path):
    """Hold the lock of a site and a build folder: one run at a time on them."""
    try:
        with sitefiles.locked(*directories):
            yield
    except sitefiles.LockHeld as exc:
        raise PublishError(str(exc)) from None


def _holding_lock(function):
    """Run ``function`` holding the lock of its ``site`` and ``build`` arguments."""
    signature = inspect.signature(function)

    @functools.wraps(function)
    def locked(*args, **kwargs):
        bound = signature.bind(*args, **kwargs)
        bound.apply_defaults()
        with _lock(Path(bound.arguments["site"]), Path(bound.arguments["build"])):
            return function(*args, **kwargs)

    return locked


def _check_date(info: NotebookInfo, site_config: dict[str, Any]) -> None:
    if not site_config.get("future") and dt.date.fromisoformat(info.date) > dt.date.today():
        _warn(f"{info.path}: date {info.date} is in the future; Jekyll does not show the post until that day "
              "(set 'date:' in its header to today or earlier, or 'future: true' in _config.yml)")


@_holding_lock
def run(*, profile: str = "auto", only: str | None = None, force: bool = False, site: Path = ROOT,
        build: Path = ROOT / "build", notebooks: Path = ROOT / "notebooks", params_dir: Path = ROOT / "params",
        root: Path = ROOT, progress: bool = True, dry_run: bool = False) -> int:
    """Execute (when needed) and publish notebooks. Returns a process exit code."""
    started = time.perf_counter()
    if profile == "auto":
        profile = detect_profile()
        _say(f"profile: {profile} (detected; PROFILE=smoke|cpu|gpu to choose)")
    check_profile(profile)
    everything = discover(notebooks)
    infos = select(everything, only)
    if not infos:
        raise PublishError(f"no notebooks found in {notebooks} (expected NN_topic.py files)")
    params_by_profile = {p: load_params(params_dir, p, everything) for p in PROFILES
                         if (params_dir / f"{p}.yaml").is_file()}
    if profile not in params_by_profile:
        raise PublishError(f"{params_dir / (profile + '.yaml')} is missing")
    for message in recover(site):
        _say(f"recovered {message}")
    decisions = plan(infos, profile, params_by_profile, site, force=force, root=root)
    site_config = _site_config(site, root)
    if not dry_run and any(d.action == "run" for d in decisions):
        _check_before_running(profile, root)
    for n, decision in enumerate(decisions, 1):
        info = decision.info
        label = f"[{n}/{len(decisions)}] {info.slug}"
        if decision.action != "run":
            _say(f"{label}: {decision.action} ({decision.reason})")
            continue
        if dry_run:
            _say(f"{label}: would run ({decision.reason})")
            continue
        _check_date(info, site_config)
        _say(f"{label}: running {info.relpath(root)} with the {profile} profile ({decision.reason}) ...")
        t0 = time.perf_counter()
        _, nb = read_notebook_info(info.path)
        params = params_by_profile[profile][info.slug]
        sitefiles.forget_run(build / "executed" / f"{info.slug}.ipynb")
        executed, saved = execute(info, nb, profile, params, build, root=root, progress=progress)
        key, saved["provenance"]["git_sha"] = _key_and_stamp(info, profile, params, params_dir, saved, root)
        record = complete_record(saved, info, profile, params, key, root)
        sitefiles.write_run_record(executed, record)
        import nbformat

        post, images = render(nbformat.read(executed, as_version=4), record, info, site_config, root=root)
        target = publish(site, info, post, images, record)
        _say(f"{label}: done in {time.perf_counter() - t0:.1f} s -> {target.relative_to(site)} "
             f"(+{len(images)} image{'s' if len(images) != 1 else ''})")
    if not dry_run:
        from sidebyside import scoreboard

        scoreboard.write_freshness(site, infos, params_by_profile, root)
    _say(f"all {len(decisions)} notebook(s) handled in {time.perf_counter() - started:.1f} s")
    return 0


@_holding_lock
def rerender(*, only: str | None = None, site: Path = ROOT, build: Path = ROOT / "build",
             notebooks: Path = ROOT / "notebooks", params_dir: Path = ROOT / "params", root: Path = ROOT) -> int:
    """Render the published runs again from ``build/executed`` (after a
    template change), keeping each published results record.

    Only a completed run is rendered, and only the one that is published:
    the executed copy's run record (:func:`sitefiles.completed_run`) must
    match the published record (profile, commit, key, time). Anything else
    is refused before anything is written, with what to run instead."""
    import nbformat

    site_config = _site_config(site, root)
    for message in recover(site):
        _say(f"recovered {message}")
    jobs, refused = [], []
    for info in select(discover(notebooks), only):
        executed = build / "executed" / f"{info.slug}.ipynb"
        rerun = f"run `make execute ONLY={info.slug}` instead"
        try:
            published = _published_record(site, info.slug)
        except PublishError as exc:
            refused.append(f"{info.slug}: {exc}")
            continue
        if published is None:
            refused.append(f"{info.slug}: nothing is published to render again; {rerun}")
            continue
        ran, why = sitefiles.completed_run(executed)
        if ran is None:
            refused.append(f"{info.slug}: {why}; {rerun}")
            continue
        differ = [name for name, get in (("profile", lambda r: r.get("profile")),
                                         ("commit", lambda r: (r.get("provenance") or {}).get("git_sha")),
                                         ("key", lambda r: r.get("source_hash")),
                                         ("time", lambda r: r.get("executed_at"))) if get(ran) != get(published)]
        if differ:
            refused.append(
                f"{info.slug}: {executed} holds the {ran.get('profile')} run of {ran.get('executed_at')}, but the "
                f"published result is the {published['profile']} run of {published['executed_at']} (they differ in "
                f"{', '.join(differ)}); render only renders the published run again: {rerun} "
                f"(with FORCE=1 to replace a larger profile)")
            continue
        jobs.append((info, executed, published))
    if refused:
        raise PublishError("render refused; nothing was changed:\n  " + "\n  ".join(refused))
    for info, executed, record in jobs:
        _check_date(info, site_config)
        post, images = render(nbformat.read(executed, as_version=4), record, info, site_config, root=root)
        _say(f"{info.slug}: rendered -> {publish(site, info, post, images, record).relative_to(site)}")
    from sidebyside import scoreboard

    everything = discover(notebooks)
    scoreboard.write_freshness(site, select(everything, only), {p: load_params(params_dir, p, everything)
                                                               for p in PROFILES
                                                               if (params_dir / f"{p}.yaml").is_file()}, root)
    return 0


def check_pairs(notebooks: Path = ROOT / "notebooks") -> list[str]:
    """Problems with the .py/.ipynb pairs: missing, out of date, or with outputs."""
    import jupytext

    problems = []
    for py in sorted(Path(notebooks).glob("*.py")):
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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m sidebyside.publish", description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--only", help="comma-separated slugs (default: all)")
    common.add_argument("--site", type=Path, default=ROOT, help="site root holding _posts/, images/, _data/ (default: the repo)")
    common.add_argument("--build", type=Path, default=ROOT / "build", help="where executed notebooks go (default: build/)")
    common.add_argument("--notebooks", type=Path, default=ROOT / "notebooks")
    common.add_argument("--params", type=Path, default=ROOT / "params", help="the folder of {smoke,cpu,gpu}.yaml")
    ex = sub.add_parser("execute", parents=[common], help="run notebooks that need it and publish them")
    ex.add_argument("--profile", default="auto", help="smoke, cpu, gpu or auto (gpu where a CUDA device is seen)")
    ex.add_argument("--force", action="store_true", help="run even if up to date or a larger profile is published")
    ex.add_argument("--dry-run", action="store_true", help="say what would run, run nothing")
    ex.add_argument("--no-progress", action="store_true", help="no per-cell progress bar")
    sub.add_parser("render", parents=[common], help="render published notebooks again from build/executed")
    sub.add_parser("list", parents=[common], help="list notebooks, slugs and what is published")
    sub.add_parser("profile", help="print the profile this machine supports")
    pairs = sub.add_parser("check-pairs", help="fail if a .ipynb pair is missing, stale or holds outputs")
    pairs.add_argument("--notebooks", type=Path, default=ROOT / "notebooks")
    args = parser.parse_args(argv)
    try:
        if args.command == "execute":
            return run(profile=args.profile, only=args.only, force=args.force, site=args.site, build=args.build,
                       notebooks=args.notebooks, params_dir=args.params, progress=not args.no_progress,
                       dry_run=args.dry_run)
        if args.command == "render":
            return rerender(only=args.only, site=args.site, build=args.build, notebooks=args.notebooks,
                            params_dir=args.params)
        if args.command == "profile":
            print(detect_profile())
            return 0
        if args.command == "check-pairs":
            problems = check_pairs(args.notebooks)
            for problem in problems:
                print(problem, file=sys.stderr)
            return 1 if problems else 0
        everything = discover(args.notebooks)
        infos = select(everything, args.only)
        params_by_profile = {p: load_params(args.params, p, everything) for p in PROFILES
                             if (args.params / f"{p}.yaml").is_file()}
        broken = 0
        for info in infos:
            try:
                record = _published_record(args.site, info.slug)
            except PublishError as exc:
                print(f"{info.slug:31} {info.relpath(ROOT):38} BROKEN (see below)")
                print(f"error: {exc}", file=sys.stderr)
                broken += 1
                continue
            state = "not published"
            if record:
                current, _ = freshness(info, record, params_by_profile)
                said = {True: "current", False: "stale: its inputs changed since",
                        None: f"unknown: no {args.params}/{record.get('profile')}.yaml"}[current]
                state = f"{record['profile']} run of {record['executed_at']} ({said})"
            print(f"{info.slug:31} {info.relpath(ROOT):38} {state}")
        return 2 if broken else 0
    except PublishError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted: no post is left half published (a publication under way was rolled back, or the next "
              "run rolls it back or completes it and says which); `make render` will not publish an interrupted run",
              file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
