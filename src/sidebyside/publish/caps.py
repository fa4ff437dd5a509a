"""A post's share of the site, capped, every cap here: its page, files, record and outputs.

:func:`check` caps one post as the publisher is about to write it, and refuses it (a
:class:`PublishError` naming each cap, the size found and the limit) when it is over any:

- ``page``: its body as Jekyll renders it to HTML (kramdown, with ``_config.yml``'s options, in a
  ``ruby`` process; without Ruby, the Markdown's own bytes, said on stderr), :data:`MAX_PAGE_BYTES`;
  ``feed``: that HTML as ``feed.xml`` writes it (``xml_escape``), :data:`MAX_FEED_BYTES`; a post
  kramdown cannot read, or not within :data:`KRAMDOWN_SECONDS`, is refused too;
- ``figures``: its figure files together (:data:`FIGURE_SUFFIXES`), :data:`MAX_FIGURE_BYTES`; one
  figure file, :data:`MAX_FIGURE_FILE_BYTES`; ``files``: the files of ``images/<slug>/``,
  :data:`MAX_FILES`, each named as the publisher names them (:data:`FILE_NAME`); ``post``: its
  Markdown and every file together, downloads included, :data:`MAX_POST_BYTES`.

A results record keeps to :data:`MAX_RECORD_BYTES` and :data:`MAX_RECORD_DEPTH`
(:func:`check_record_caps`, :func:`json_depth`: counted without recursion, before a parser could
overflow); an output's text in an executed notebook to :data:`MAX_STREAM_CHARS`, the rest cut with a
visible marker (:func:`cut_outputs`) before the notebook becomes a page or a download. The publisher
reads files only through :func:`read_regular` and :func:`read_folder`: regular files alone, never
through a link, a file linked twice (``st_nlink > 1``) refused; :func:`unservable` lists what the
site would serve that is not one. Each cap stands about ten times over today's largest post, so
that only a post that stopped being a post meets it.
"""

from __future__ import annotations

import copy
import html
import os
import re
import shutil
import stat
import subprocess
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from sidebyside.publish.common import PublishError, warn

__all__ = ["MAX_PAGE_BYTES", "MAX_FIGURE_BYTES", "MAX_FEED_BYTES", "FIGURE_SUFFIXES",
           "KRAMDOWN_SECONDS", "MAX_FIGURE_FILE_BYTES", "MAX_FILES", "MAX_POST_BYTES",
           "MAX_RECORD_BYTES", "MAX_RECORD_DEPTH", "MAX_STREAM_CHARS", "FILE_NAME", "CUT_MARKER",
           "measure", "check", "refusal", "json_depth", "value_depth", "check_record_caps",
           "cut_text", "cut_outputs", "read_regular", "read_folder", "unservable"]

#: The most bytes of HTML a post's body may render to (today's largest: 214 KB).
MAX_PAGE_BYTES = 2_000_000
#: The most bytes a post's figure files may take together (today's largest: 827 KB).
MAX_FIGURE_BYTES = 10_000_000
#: The most bytes a post may add to feed.xml (today's largest: 348 KB).
MAX_FEED_BYTES = 3_000_000
#: The files of ``images/<slug>/`` that are figures (the rest are the downloads and the manifest).
FIGURE_SUFFIXES = (".png", ".jpg", ".jpeg", ".gif", ".webp", ".svg")
#: The longest kramdown may take to read one post (today's largest takes under a second).
KRAMDOWN_SECONDS = 120
#: The most bytes one figure file may take (today's largest: 353 KB).
MAX_FIGURE_FILE_BYTES = 5_000_000
#: The most files ``images/<slug>/`` may hold: figures, downloads, manifest (today's most: 12).
MAX_FILES = 200
#: The most bytes a post may publish in all: its Markdown and every file of its images folder,
#: downloads included (today's largest: 5.8 MB).
MAX_POST_BYTES = 50_000_000
#: The most bytes of a results record, as JSON text (today's largest: 322 KB).
MAX_RECORD_BYTES = 5_000_000
#: The deepest a results record may nest, the top-level object being 1 (today's deepest: 11).
MAX_RECORD_DEPTH = 64
#: The most characters one output's text may keep in an executed notebook before it becomes a
#: page or a download (a stream's chunks, a value's text, a traceback; today's longest: 47 K).
MAX_STREAM_CHARS = 1_000_000
#: The marker that ends a cut output: ``{n}`` is the number of characters cut.
CUT_MARKER = "\n[... {n} characters cut by the publisher ...]\n"
#: The name of a file of ``images/<slug>/``: letters, digits, ``.``, ``_``, ``-``, one of the
#: kinds a post holds (figures, the notebook, the record and manifest, the tables).
FILE_NAME = re.compile(r"\A[A-Za-z0-9][A-Za-z0-9._-]{0,150}"
                       r"\.(png|jpe?g|gif|webp|svg|ipynb|json|csv)\Z")

# The post's body (its front matter cut as Jekyll cuts it), rendered with the kramdown options of
# _config.yml and those Jekyll sets itself (hard_wrap off for GFM, auto_ids on); prints the bytes of the
# HTML and of its XML escape as feed.xml writes it (Jekyll's xml_escape: encode(xml: :attr) less the quotes),
# or "error<TAB>why".
_RUBY = r"""
require "kramdown"
require "kramdown-parser-gfm"
text = STDIN.read.force_encoding("utf-8")
body = text.sub(%r!\A---\s*\n.*?\n?^((---|\.\.\.)\s*$\n?)!m, "")
begin
  out = Kramdown::Document.new(body, input: "GFM", hard_wrap: false, auto_ids: true, syntax_highlighter: "rouge",
                               math_engine: "mathjax").to_html.strip
  puts out.bytesize
  puts out.encode(xml: :attr).bytesize - 2
rescue SystemStackError, StandardError => e
  puts "error\t#{e.class}: #{e.message.lines.first.to_s.strip[0, 200]}"
end
"""
_FRONT_MATTER = re.compile(r"\A---\s*\n.*?\n?^(---|\.\.\.)\s*$\n?", re.S | re.M)


def _size(n: int) -> str:
    return f"{n / 1e6:.1f} MB" if n >= 1e6 else f"{n / 1e3:.0f} KB" if n >= 1e3 else f"{n} bytes"


def measure(post: str) -> dict[str, int]:
    """``{"page": bytes, "feed": bytes}`` of the post text ``post`` (front matter and Markdown), as the
    module docstring says. Raises :class:`PublishError` when kramdown fails on it or takes longer
    than :data:`KRAMDOWN_SECONDS`."""
    ruby = shutil.which("ruby")
    if ruby:
        try:
            proc = subprocess.run([ruby, "-e", _RUBY], input=post.encode("utf-8"), capture_output=True,
                                  timeout=KRAMDOWN_SECONDS)
        except subprocess.TimeoutExpired:
            raise PublishError(f"kramdown (Jekyll's Markdown reader) did not finish reading the post in "
                               f"{KRAMDOWN_SECONDS} s, so Jekyll could not build the site with it") from None
        lines = proc.stdout.decode("utf-8", "replace").splitlines()
        if proc.returncode == 0 and lines and lines[0].startswith("error\t"):
            raise PublishError(f"kramdown (Jekyll's Markdown reader) fails on the post ({lines[0][6:]}), so Jekyll "
                               "could not build the site with it")
        if proc.returncode == 0 and len(lines) == 2:
            return {"page": int(lines[0]), "feed": int(lines[1])}
    warn("Ruby's kramdown is not installed here: a post's page and feed share are counted as its Markdown's own "
         "bytes, which kramdown's HTML may exceed")
    body = _FRONT_MATTER.sub("", post, count=1).strip()
    return {"page": len(body.encode("utf-8")), "feed": len(html.escape(body).encode("utf-8"))}


def refusal(slug: str, what: str, found: str, limit: str, advice: str) -> PublishError:
    """The :class:`PublishError` of a post over one cap: which (``what``), the size ``found``, the
    ``limit``, and what to do (``advice``)."""
    return PublishError(f"{slug}: {what} is {found}, over the cap of {limit}; {advice}. "
                        "Nothing published was changed.")


def _check_files(slug: str, post: str, images: Mapping[str, bytes]) -> None:
    """The caps on a post's files: their names, their count, each figure, the whole post."""
    named = sorted(name for name in images if not FILE_NAME.fullmatch(name))
    if named:
        shown = ", ".join(repr(n[:80]) for n in named[:5])
        raise PublishError(f"{slug}: images/{slug}/ would hold {shown}: not a file a post holds "
                           "(a figure, the notebook, the record, the manifest or the tables, named "
                           "with letters, digits, '.', '_' and '-'). Nothing published was "
                           "changed.")
    if len(images) > MAX_FILES:
        raise refusal(slug, f"the file count of images/{slug}/", f"{len(images):,} files",
                      f"{MAX_FILES} files", "save fewer figures (a figure per output of a loop is "
                      "many figures: draw them on one)")
    for name, data in sorted(images.items()):
        if name.lower().endswith(FIGURE_SUFFIXES) and len(data) > MAX_FIGURE_FILE_BYTES:
            raise refusal(slug, f"the figure images/{slug}/{name}", _size(len(data)),
                          _size(MAX_FIGURE_FILE_BYTES),
                          "draw it smaller (a smaller figsize or dpi, fewer points)")
    total = len(post.encode("utf-8")) + sum(len(data) for data in images.values())
    if total > MAX_POST_BYTES:
        raise refusal(slug, "the post with its files (its Markdown, figures and downloads)",
                      _size(total), _size(MAX_POST_BYTES),
                      "print less, show fewer or smaller figures")


def check(slug: str, post: str, images: Mapping[str, bytes]) -> None:
    """Raise :class:`PublishError` when the post ``post`` with the files ``images`` (``images/<slug>/``)
    is over any cap of the module docstring: first the caps on its files (naming the first one it is
    over), then page, figures and feed (naming every one it is over, by how much, and what to do);
    also when kramdown cannot read it (:func:`measure`)."""
    _check_files(slug, post, images)
    try:
        sizes = measure(post)
    except PublishError as exc:
        raise PublishError(f"{slug}: {exc}. Nothing published was changed.") from None
    sizes["figures"] = sum(len(data) for name, data in images.items() if name.lower().endswith(FIGURE_SUFFIXES))
    caps = {"page": (MAX_PAGE_BYTES, "its page (the HTML its body renders to)"),
            "figures": (MAX_FIGURE_BYTES, "its figures (the figure files of its images folder)"),
            "feed": (MAX_FEED_BYTES, "its share of feed.xml (that HTML, escaped as the feed writes it)")}
    over = [f"{what}: {_size(sizes[name])}, {_size(sizes[name] - cap)} over the cap of {_size(cap)}"
            for name, (cap, what) in caps.items() if sizes[name] > cap]
    if over:
        raise PublishError(f"{slug}: the post is over its caps:\n  " + "\n  ".join(over) + "\nShow less of it: "
                           "fold long outputs into the appendix or the downloads (a table's rows are all in the CSV "
                           "download), save fewer or smaller figures. Nothing published was changed.")


# --------------------------------------------------------------------------- records


def json_depth(text: str | bytes) -> int:
    """The deepest nesting of arrays and objects in the JSON ``text`` (0 for a scalar), counted
    in one pass without recursion and without parsing, so that it can run before a parser that
    would overflow; brackets inside strings are not counted. Malformed JSON gets a number too
    (the parser then refuses it)."""
    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    depth = deepest = 0
    for match in _BRACKETS.finditer(text):
        token = match.group()
        if token in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif token in "]}":
            depth -= 1
    return deepest


_BRACKETS = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"|[\[\]{}]', re.S)


def value_depth(value: Any, limit: int | None = None) -> int:
    """The nesting of lists, tuples and dicts in ``value`` (0 for a scalar), counted without
    recursion; counting stops at ``limit + 1`` (a deeper value answers ``limit + 1``; ``limit``:
    :data:`MAX_RECORD_DEPTH` when None)."""
    limit = MAX_RECORD_DEPTH if limit is None else limit
    deepest, stack = 0, [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            children = item.values()
        elif isinstance(item, (list, tuple)):
            children = item
        else:
            continue
        deepest = max(deepest, depth)
        if deepest > limit:
            return limit + 1
        stack.extend((child, depth + 1) for child in children)
    return deepest


def check_record_caps(record: Any, slug: str, text: str | None = None) -> None:
    """Raise :class:`PublishError` for a results record deeper than :data:`MAX_RECORD_DEPTH`
    (checked first, without recursion) or whose JSON ``text`` (written here as the site writes it
    when not given) is longer than :data:`MAX_RECORD_BYTES`."""
    depth = value_depth(record) if text is None else json_depth(text)
    if depth > MAX_RECORD_DEPTH:
        deeper = depth == MAX_RECORD_DEPTH + 1 and text is None
        raise refusal(slug, "the nesting of its results record",
                      "deeper than that" if deeper else f"{depth} levels",
                      f"{MAX_RECORD_DEPTH} levels",
                      "save flat tables (a list of rows) rather than values nested in values")
    if text is None:
        import json

        text = json.dumps(record, indent=2, sort_keys=True, ensure_ascii=False) + "\n"
    size = len(text.encode("utf-8")) if isinstance(text, str) else len(text)
    if size > MAX_RECORD_BYTES:
        raise refusal(slug, "its results record", _size(size), _size(MAX_RECORD_BYTES),
                      "keep the record to the figures the post shows (show a large table, and "
                      "its rows are in the post's CSV download, or leave it out)")


# --------------------------------------------------------------------------- outputs


def cut_text(text: str, limit: int | None = None) -> str:
    """``text`` when it holds at most ``limit`` characters (:data:`MAX_STREAM_CHARS` when None);
    else its start and :data:`CUT_MARKER`, ``limit`` characters in all (so that cutting again
    changes nothing)."""
    limit = MAX_STREAM_CHARS if limit is None else limit
    if len(text) <= limit:
        return text
    keep = max(0, limit - len(CUT_MARKER.format(n=len(text))))
    return text[:keep] + CUT_MARKER.format(n=len(text) - keep)


def _joined(value: Any) -> str:
    return value if isinstance(value, str) else "".join(str(v) for v in value or [])


def _cut_output(output: Any, limit: int) -> None:
    """Cut one output's texts in place: every ``text/*`` or JSON value and its traceback."""
    data = output.get("data") or {}
    for mime in [m for m in data if m.startswith("text/") or m.endswith(("+json", "/json"))]:
        if isinstance(data[mime], (str, list)):
            data[mime] = cut_text(_joined(data[mime]), limit)
    if isinstance(output.get("traceback"), list):
        joined = cut_text("\n".join(str(line) for line in output["traceback"]), limit)
        output["traceback"] = joined.split("\n")


def _same_stream(last: Any, output: Any) -> bool:
    return (last is not None and last.get("output_type") == "stream"
            and last.get("name") == output.get("name"))


def cut_outputs(nb: Any, limit: int | None = None) -> Any:
    """A copy of the notebook ``nb`` whose every output text keeps to ``limit`` characters
    (:data:`MAX_STREAM_CHARS` when None): a stream (the consecutive chunks of one stream of a
    cell joined into one output, then cut: :data:`CUT_MARKER` says how much), a value's or
    display's text and a traceback; figures and the rest are kept."""
    limit = MAX_STREAM_CHARS if limit is None else limit
    nb = copy.deepcopy(nb)
    for cell in nb.get("cells", []):
        if not cell.get("outputs"):
            continue
        kept, texts = [], {}  # texts: id of a stream output kept -> the texts of its chunks
        for output in cell["outputs"]:
            if output.get("output_type") != "stream":
                _cut_output(output, limit)
                kept.append(output)
            elif _same_stream(kept[-1] if kept else None, output):
                texts[id(kept[-1])].append(_joined(output.get("text")))
            else:
                kept.append(output)
                texts[id(output)] = [_joined(output.get("text"))]
        for output in kept:
            if id(output) in texts:
                output["text"] = cut_text("".join(texts[id(output)]), limit)
        cell["outputs"] = kept
    return nb


# --------------------------------------------------------------------------- files

_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)


def read_regular(path: Path, *, cap: int | None = None, from_run: bool = True) -> bytes:
    """The bytes of ``path``, a regular file of at most ``cap`` bytes (:data:`MAX_POST_BYTES`
    when None), opened without following a link and without waiting on a FIFO;
    :class:`PublishError` naming it and what it is otherwise (a link, a FIFO, a device, a socket,
    a folder; with ``from_run``, a file with more than one hard link, which could be any file of
    the machine)."""
    path, cap = Path(path), MAX_POST_BYTES if cap is None else cap
    not_regular = "not a regular file: the publisher reads only regular files; remove it"
    try:
        fd = os.open(path, _FLAGS)
    except OSError as exc:
        kind = _kind(path)
        why = f" ({exc.strerror})" if kind == "missing" else ""
        raise PublishError(f"{path} is {kind}, {not_regular}{why}") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise PublishError(f"{path} is {_kind(path)}, {not_regular}")
        if from_run and info.st_nlink > 1:
            raise PublishError(f"{path} has {info.st_nlink} hard links: it may be any file of this "
                               "machine, so the publisher refuses it; remove it and run the post "
                               "again")
        if info.st_size > cap:
            raise PublishError(f"{path} is {_size(info.st_size)}, over the cap of {_size(cap)} "
                               "for it")
    except BaseException:
        os.close(fd)
        raise
    with os.fdopen(fd, "rb") as handle:
        data = handle.read(cap + 1)
    if len(data) > cap:
        raise PublishError(f"{path} grew past the cap of {_size(cap)} while it was read")
    return data


_KINDS = ((stat.S_ISLNK, "a symbolic link"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket"),
          (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
          (stat.S_ISDIR, "a folder"), (stat.S_ISREG, "a regular file"))


def _kind(path: Path) -> str:
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        return "missing"
    return next((kind for test, kind in _KINDS if test(mode)), "of an unknown kind")


def read_folder(folder: Path, *, from_run: bool = True) -> dict[str, bytes]:
    """``{name: bytes}`` of the files of ``folder`` (none when it does not exist), each read by
    :func:`read_regular`; more than :data:`MAX_FILES` entries, or more than
    :data:`MAX_POST_BYTES` together, is refused as well."""
    folder = Path(folder)
    if folder.is_symlink():
        raise PublishError(f"{folder} is a symbolic link, not a folder: remove it")
    if not folder.is_dir():
        return {}
    names = sorted(os.listdir(folder))
    if len(names) > MAX_FILES:
        raise PublishError(f"{folder} holds {len(names):,} entries, over the cap of {MAX_FILES} "
                           "files; remove it and run its post again")
    files, left = {}, MAX_POST_BYTES
    for name in names:
        files[name] = read_regular(folder / name, cap=left, from_run=from_run)
        left -= len(files[name])
    return files


#: The folders of a site whose files Jekyll serves as they are.
_SERVED = ("images", "assets", "_posts", "_data")


def unservable(site: Path) -> list[str]:
    """``"<path>: what it is"`` for every entry of the site's served folders (:data:`_SERVED`)
    that is not a regular file or a folder (a link, a FIFO, a device, a socket) or is a file with
    more than one hard link (it may be any file of the machine): Jekyll would block on a FIFO, or
    serve what a link points to. Listed without recursion, links never followed."""
    site, found = Path(site), []
    stack = [site / name for name in _SERVED
             if (site / name).is_dir() and not (site / name).is_symlink()]
    while stack:
        folder = stack.pop()
        with os.scandir(folder) as entries:
            for entry in entries:
                info = entry.stat(follow_symlinks=False)
                where = Path(entry.path).relative_to(site).as_posix()
                if stat.S_ISDIR(info.st_mode):
                    stack.append(Path(entry.path))
                elif not stat.S_ISREG(info.st_mode):
                    found.append(f"{where}: {_kind(Path(entry.path))}")
                elif info.st_nlink > 1:
                    found.append(f"{where}: a file with {info.st_nlink} hard links")
    return sorted(found)
