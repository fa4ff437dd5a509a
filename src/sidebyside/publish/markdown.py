"""A cell's ``text/markdown`` and ``text/latex`` outputs as HTML that a post can hold.

What a notebook prints is untrusted, so it is never handed to kramdown as
Markdown (kramdown would decide what is code, math or raw HTML, and a
pattern can only guess how). Instead :func:`to_html` parses it with
markdown-it-py (CommonMark, pinned in requirements.txt) and the
``dollarmath`` and ``amsmath`` plugins of mdit-py-plugins, renders the tree to
HTML, and passes that HTML through :func:`sidebyside.publish.escape.sanitise`
(nh3, the allow-list). The post template wraps the result in
``<div class="output-markdown" markdown="0">``: kramdown passes it through as
it is.

- Raw HTML in the output is text (the parser's ``html`` option is off).
- Math (``$x$``, ``$$x$$``, ``\\begin{align}``...) is kept as TeX, HTML-escaped,
  between the ``\\(``/``\\)`` or ``\\[``/``\\]`` delimiters that the site's KaTeX
  (``assets/math.js``) renders, so it is never read as HTML or Markdown.
- Links keep their URL only where :func:`sidebyside.publish.escape.safe_url`
  passes it (a removed one is noted visibly).
- Images load only from the post's own folder, ``../../images/<slug>/``
  (:func:`own_image`); any other image becomes a visible link
  ("external image not loaded"), never an ``<img>``.
- The result is one line (newlines as ``&#10;``): no blank line can end
  kramdown's HTML block early.
"""

from __future__ import annotations

import functools
import html
import posixpath
from urllib.parse import unquote

from sidebyside.publish import escape

__all__ = ["to_html", "safe_markdown", "own_image", "EXTERNAL_IMAGE_NOTE", "FILTERS"]

#: Shown in place of an image that would load from outside the post's own folder.
EXTERNAL_IMAGE_NOTE = "external image not loaded"


def own_image(src: str, slug: str) -> bool:
    """Whether an image URL loads from the post's own folder: a relative path
    (no scheme, no leading ``/`` or ``\\``, so no protocol-relative ``//host``)
    that, resolved from the post's page ``/posts/<slug>/`` after
    percent-decoding, lies in ``/images/<slug>/``."""
    src = escape.drop_controls(html.unescape(str(src))).strip()
    if not slug or not src or escape.url_scheme(src) is not None or "\\" in src or src.startswith("/"):
        return False
    path = unquote(src.split("#", 1)[0].split("?", 1)[0])
    if "\\" in path:
        return False
    resolved = posixpath.normpath(posixpath.join("/posts", slug, path))
    return resolved.startswith(f"/images/{slug}/") and resolved.count("/") == 3


def _tex(content: str, config: dict) -> str:
    """TeX as escaped text between KaTeX's delimiters, display or inline (the
    plugins wrap it in their element)."""
    tex = html.escape(content.strip(), quote=False)
    return f"\\[{tex}\\]" if config.get("display_mode") else f"\\({tex}\\)"


def _environment(content: str) -> str:
    """An amsmath environment (``\\begin{align}...``), kept whole as display math."""
    return _tex(content, {"display_mode": True})


def _inline_display(self, tokens, idx, options, env) -> str:
    """``$$x$$`` inside a paragraph: display math in a ``<span>`` (a ``<div>`` cannot sit in a ``<p>``)."""
    return f'<span class="math display">{_tex(tokens[idx].content, {"display_mode": True})}</span>'


def _image(self, tokens, idx, options, env) -> str:
    """An image of the post's own folder as ``<img>``; any other as a visible link."""
    token = tokens[idx]
    src = str(token.attrGet("src") or "")
    alt = self.renderInlineAsText(token.children or [], options, env)
    if own_image(src, env.get("slug", "")):
        return f'<img src="{html.escape(src)}" alt="{html.escape(alt)}">'
    label = f"[{EXTERNAL_IMAGE_NOTE}{': ' + alt if alt else ''}]"
    return f'<a class="external-image" href="{html.escape(src)}">{html.escape(label, quote=False)}</a>'


@functools.lru_cache(maxsize=1)
def _parser():
    from markdown_it import MarkdownIt
    from mdit_py_plugins.amsmath import amsmath_plugin
    from mdit_py_plugins.dollarmath import dollarmath_plugin

    md = MarkdownIt("commonmark", {"html": False, "linkify": False, "typographer": False})
    md.enable(["table", "strikethrough"])
    md.use(dollarmath_plugin, allow_labels=False, allow_space=True, allow_digits=True, double_inline=True,
           renderer=_tex)
    md.use(amsmath_plugin, renderer=_environment)
    md.add_render_rule("math_inline_double", _inline_display)
    md.add_render_rule("image", _image)
    return md


def to_html(text: str, slug: str = "") -> str:
    """Markdown (or LaTeX) output ``text`` as sanitised HTML on one line, as
    the module docstring says; ``slug`` names the post whose folder its images
    may load from (none without one)."""
    rendered = _parser().render(escape.drop_controls(str(text)), {"slug": slug})
    return escape.sanitise(rendered, image=lambda src: own_image(src, slug))


def safe_markdown(text: str, slug: str = "") -> str:
    """``text/markdown`` or ``text/latex`` output as sanitised HTML
    (:func:`to_html`: parsed, then sanitised); ``slug`` names the post whose
    own folder its images may load from."""
    return to_html(text, slug)


#: Jinja filters of the post template (src/sidebyside/templates/sidebyside): the escapes of
#: :mod:`sidebyside.publish.escape`, and :func:`safe_markdown`.
FILTERS = {"fenced": escape.fenced, "safe_html": escape.safe_html, "safe_markdown": safe_markdown,
           "image_alt": escape.image_alt}
