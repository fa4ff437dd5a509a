"""A results record as the site publishes it, and the check that Jekyll will load it.

Jekyll reads ``_data/results/<slug>.json`` (and every other data file, and
each post's front matter) with Ruby's YAML loader (Psych, through
``Jekyll::Utils.safe_load_yaml``), not with a JSON parser: what JSON allows
but YAML refuses (a ``\\ud83d\\ude00`` surrogate-pair escape, a raw
noncharacter) stops the build of the whole site. So:

- :func:`record_text` writes a record as UTF-8 JSON (``ensure_ascii=False``:
  a character outside the Basic Multilingual Plane is written as itself,
  never as a surrogate-pair escape);
- :func:`check_record` refuses a record the site cannot show (more than
  :data:`MAX_VERDICTS` verdicts) or that lacks a metric its notebook declares;
- :func:`begins_with_front_matter` says whether Jekyll would read a file
  as a page (front matter, ``---``, at its start): only a post may; a figure
  or download that did would be built as a page of the site, its Liquid
  run, its title in the navigation. :func:`site_pages_outside_posts` finds
  such files among a site's ``images/``;
- :func:`jekyll_rejects` loads files exactly as Jekyll will, with the call
  Jekyll makes (``Psych.safe_load``, Date and Time permitted, aliases on) in
  a ``ruby`` process, and returns what it refused. Where Ruby or
  Jekyll is missing (an air-gapped GPU box), it loads them with PyYAML's
  ``CSafeLoader``, built on libyaml, the parser Psych wraps.

The publisher runs both before a publication is committed
(:func:`sidebyside.publish.site.publish`), and ``list`` (``make site``'s check)
runs :func:`jekyll_rejects` on every data file and post of the site.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from sidebyside.publish.common import PublishError

__all__ = ["MAX_VERDICTS", "record_text", "check_record", "jekyll_rejects", "site_rejects", "require_loadable",
           "begins_with_front_matter", "site_pages_outside_posts"]

#: The most verdicts one record may hold (a post's verdict box shows each one).
MAX_VERDICTS = 50

# Loads each file named on the command line ("data:<path>" or "post:<path>") as Jekyll 4 does
# (Jekyll::Utils.safe_load_yaml, and for a post the front matter that Jekyll::Document's
# YAML_FRONT_MATTER_REGEXP finds); prints "path<TAB>why" for each it refuses. Psych alone: loading
# all of Jekyll would take seconds.
_RUBY = r"""
require "psych"
require "date"
FRONT_MATTER = %r!\A(---\s*\n.*?\n?)^((---|\.\.\.)\s*$\n?)!m
ARGV.each do |arg|
  kind, path = arg.split(":", 2)
  begin
    text = File.read(path, encoding: "utf-8")
    raise "not valid UTF-8" unless text.valid_encoding?
    if kind == "post"
      match = text.match(FRONT_MATTER)
      raise "no front matter between --- lines" unless match
      text = match[1]
    end
    Psych.safe_load(text, permitted_classes: [Date, Time], aliases: true)
  rescue StandardError => e
    puts "#{path}\t#{e.class}: #{e.message.lines.first.to_s.strip}"
  end
end
"""


def record_text(record: dict[str, Any]) -> str:
    """The text of a published results file: JSON, UTF-8, sorted keys."""
    return json.dumps(record, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def check_record(record: dict[str, Any], slug: str, metrics: Sequence[str] = ()) -> None:
    """Raise :class:`PublishError` for a record the site cannot show: more verdicts than
    :data:`MAX_VERDICTS`, or without one of ``metrics`` (the keys its notebook's header declares)."""
    missing = [m for m in metrics if m not in (record.get("metrics") or {})]
    if missing:
        raise PublishError(f"{slug}: its notebook's header declares the metrics {', '.join(metrics)}, and the run's "
                           f"record lacks {', '.join(missing)}; save them (provenance.save_results) or drop them "
                           "from the header's metrics. Nothing published was changed.")
    verdicts = (record.get("metrics") or {}).get("verdicts") or []
    if len(verdicts) > MAX_VERDICTS:
        raise PublishError(f"{slug}: the record holds {len(verdicts)} verdicts, more than the {MAX_VERDICTS} a post "
                           "shows; keep the verdicts that answer the post's questions (save the rest as tables, "
                           "which the CSV download carries). Nothing published was changed.")


# Jekyll::Utils.has_yaml_header? reads a file as a page when it starts with /\A---\s*\r?\n/; a byte-order
# mark or blank space before the dashes is refused too (never fewer files than Jekyll reads as pages).
_PAGE_START = re.compile(rb"\A(\xef\xbb\xbf)?\s*---")


def begins_with_front_matter(data: bytes) -> bool:
    """Whether ``data`` begins as a Jekyll page does (``---``, after an optional byte-order mark and
    blank space): no published file but a post may."""
    return bool(_PAGE_START.match(data))


def site_pages_outside_posts(site: Path) -> list[str]:
    """Every file under ``site/images/`` that :func:`begins_with_front_matter` (relative to ``site``):
    Jekyll would build it as a page."""
    folder = Path(site) / "images"
    found = []
    for path in sorted(folder.rglob("*")) if folder.is_dir() else []:
        if path.is_file():
            with open(path, "rb") as f:
                if begins_with_front_matter(f.read(4096)):
                    found.append(path.relative_to(site).as_posix())
    return found


def _front_matter(text: str) -> str | None:
    lines = text.split("\n")
    if not lines or lines[0].rstrip() != "---":
        return None
    end = next((i for i, line in enumerate(lines[1:], 1) if line.rstrip() in ("---", "...")), None)
    return None if end is None else "\n".join(lines[1:end])


def _python_rejects(files: list[tuple[str, Path]]) -> list[str]:
    import yaml

    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    refused = []
    for kind, path in files:
        try:
            text = Path(path).read_bytes().decode("utf-8")
            if kind == "post":
                text = _front_matter(text)
                if text is None:
                    raise ValueError("no front matter between --- lines")
            yaml.load(text, Loader=loader)  # noqa: S506 (a safe loader)
        except (ValueError, yaml.YAMLError) as exc:
            refused.append(f"{path}: {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}")
    return refused


def jekyll_rejects(data: list[Path], posts: list[Path] = ()) -> list[str]:
    """``"<path>: why"`` for each file that Jekyll's loader refuses: ``data``
    (JSON or YAML data files, read whole) and ``posts`` (their front matter);
    empty when it takes them all."""
    files = [("data", Path(p)) for p in data] + [("post", Path(p)) for p in posts]
    if not files:
        return []
    ruby = shutil.which("ruby")
    if ruby:
        proc = subprocess.run([ruby, "-e", _RUBY, *(f"{kind}:{path}" for kind, path in files)],
                              capture_output=True, text=True, timeout=300)
        if proc.returncode == 0:
            return [line.replace("\t", ": ", 1) for line in proc.stdout.splitlines() if line.strip()]
    return _python_rejects(files)


def site_rejects(site: Path) -> list[str]:
    """:func:`jekyll_rejects` for every data file and post of ``site``."""
    site = Path(site)
    data = [p for p in sorted((site / "_data").rglob("*")) if p.suffix.lower() in (".json", ".yml", ".yaml")
            and not p.name.startswith(".")] if (site / "_data").is_dir() else []
    posts = sorted((site / "_posts").glob("*.md")) if (site / "_posts").is_dir() else []
    return jekyll_rejects(data, posts)


def require_loadable(data: list[Path], posts: list[Path], what: str) -> None:
    """Raise :class:`PublishError` naming every file that Jekyll would refuse (see :func:`jekyll_rejects`)."""
    refused = jekyll_rejects(data, posts)
    if refused:
        raise PublishError(f"{what}: Jekyll would refuse to load it, and the whole site would fail to build:\n  "
                           + "\n  ".join(refused) + "\n  (nothing published was changed)")
