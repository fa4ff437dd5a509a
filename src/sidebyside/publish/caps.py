"""A post's share of the site, capped: its page, its figures, and what it adds to the feed.

Each output, figure and record keeps to a cap of its own (:data:`sidebyside.publish.preprocess.OUTPUT_CAP`,
:data:`sidebyside.publish.figures.MAX_PIXELS`, the HTML bounds of :mod:`.escape`, ...); many of them
together could still make a page of many megabytes, and the feed, which holds the whole content of
the ten newest posts, several times that. :func:`check` caps the sum, for one post:

- ``page``: the post's body as Jekyll renders it to HTML (kramdown, with the options of
  ``_config.yml``), at most :data:`MAX_PAGE_BYTES`;
- ``figures``: the figure files of ``images/<slug>/`` (:data:`FIGURE_SUFFIXES`; the downloads are not
  figures), at most :data:`MAX_FIGURE_BYTES` together;
- ``feed``: what the post adds to ``feed.xml``: that HTML written as the feed's template writes it
  (``xml_escape``, which turns ``<`` into ``&lt;``), at most :data:`MAX_FEED_BYTES`.

The caps stand well above today's largest post (measured on the published site of 2026-11-27:
grid-sample-parity's body renders to 214 KB of HTML and adds 348 KB to the feed;
weight-visualisation's figures take 827 KB), about ten times over, so that only a post that
stopped being a post meets them.

The HTML is rendered by kramdown itself, in a ``ruby`` process (what the Markdown becomes is
kramdown's to say: an abbreviation or a link definition is written out again at every use, so the
Markdown's own size says little); a post that kramdown cannot read at all (its parser overflowing
Ruby's stack, say) or not within :data:`KRAMDOWN_SECONDS` is refused as well, since Jekyll could not
build the site with it. Where Ruby or kramdown is missing (an air-gapped GPU box), the page is
counted as the Markdown's own bytes and the feed as their XML escape: a lower count, said on stderr.
"""

from __future__ import annotations

import html
import re
import shutil
import subprocess
from collections.abc import Mapping

from sidebyside.publish.common import PublishError, warn

__all__ = ["MAX_PAGE_BYTES", "MAX_FIGURE_BYTES", "MAX_FEED_BYTES", "FIGURE_SUFFIXES", "KRAMDOWN_SECONDS", "measure",
           "check"]

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


def check(slug: str, post: str, images: Mapping[str, bytes]) -> None:
    """Raise :class:`PublishError` when the post ``post`` with the files ``images`` (``images/<slug>/``)
    is over any cap, naming every cap it is over, by how much, and what to do; also when kramdown
    cannot read it (:func:`measure`)."""
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
