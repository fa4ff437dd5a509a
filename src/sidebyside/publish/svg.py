"""SVG figures made inert before they are published.

A figure is served as ``images/<slug>/<name>.svg`` and a post links it "full
size": opened on its own, an SVG is a document of the site's origin and would
run any script in it. :func:`sanitise` therefore rebuilds every SVG from an
allow-list, so that opening it is as harmless as showing it in an ``<img>``
(where browsers never run script anyway):

- elements: the drawing elements of SVG 1.1 (shapes, text, paint servers,
  clips, masks, markers, filters); ``<a>`` and ``<switch>`` are replaced by
  their children; everything else (``script``, ``foreignObject``,
  ``iframe``, ``animate``/``set``, which can rewrite a link, ``metadata``)
  goes with its content, as do elements outside the SVG namespace;
- attributes: never an event handler (``on*``), never a namespaced attribute
  but ``xlink:href`` and ``xml:space``;
- references: ``href``/``xlink:href`` only to a fragment of the same document
  (``#id``), or on ``<image>`` an embedded raster (``data:image/png``,
  ``jpeg``, ``gif`` or ``webp``, base64); CSS, read by a tokenizer, only
  with ``url(#id)`` and functions that fetch nothing (:data:`CSS_FUNCTIONS`):
  a ``<style>`` or an attribute with an at-rule (``@import``), another
  ``url()``, ``image-set()`` or any other function is dropped. Nothing
  external is loaded, so nothing can be.

The XML is read by the standard library's parser (expat: it fetches no
external entity or DTD, and bounds entity expansion); a document that declares
entities is refused outright. Graphviz and Matplotlib figures pass unchanged
but for comments and the DOCTYPE: they are drawn from the elements kept here.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from collections.abc import Callable

__all__ = ["sanitise", "SvgError", "ELEMENTS"]

SVG = "http://www.w3.org/2000/svg"
XLINK = "http://www.w3.org/1999/xlink"
XML = "http://www.w3.org/XML/1998/namespace"

#: The elements kept (their local names, in the SVG namespace).
ELEMENTS = frozenset("""
svg g defs title desc symbol use path rect circle ellipse line polyline polygon text tspan textPath
clipPath mask pattern marker linearGradient radialGradient stop image style
filter feBlend feColorMatrix feComponentTransfer feComposite feFlood feGaussianBlur feMerge feMergeNode feOffset
feFuncA feFuncR feFuncG feFuncB feDropShadow
""".split())
#: Replaced by their children (a link, a conditional).
UNWRAPPED = frozenset({"a", "switch"})
_RASTER = re.compile(r"^data:image/(png|jpeg|gif|webp);base64,[A-Za-z0-9+/=\s]*$", re.I)
_INVISIBLE = re.compile("[\x00-\x20\x7f-\x9f\u00ad\u200b-\u200f\u2028-\u202e\u2060-\u206f\ufeff]")
_NAME = re.compile(r"^[A-Za-z_][\w.:-]*$")


class SvgError(ValueError):
    """The document is not an SVG that can be published; the message says why."""


def _local(tag: str) -> tuple[str | None, str]:
    if tag.startswith("{"):
        namespace, _, name = tag[1:].partition("}")
        return namespace, name
    return None, tag


def _compact(value: str) -> str:
    return _INVISIBLE.sub("", value)


#: CSS functions that compute a value and fetch nothing; any other (``url()`` to another
#: document, ``image-set()``, ``image()``, ``cross-fade()``, ``element()``, ``src()``, ``expression()``...) is refused.
CSS_FUNCTIONS = frozenset("""
rgb rgba hsl hsla hwb lab lch oklab oklch color calc min max clamp var
matrix translate translatex translatey rotate scale scalex scaley skewx skewy
""".split())


def _css_is_local(css: str) -> bool:
    """Whether CSS text (a style sheet, a ``style`` attribute or a presentation
    attribute) loads nothing, read by a CSS tokenizer (tinycss2, which decodes
    escapes as a browser does): no at-rule (``@import``, ``@font-face``...), no
    ``url()`` but ``url(#id)``, and no function outside :data:`CSS_FUNCTIONS`."""
    import tinycss2

    def local(tokens) -> bool:
        for token in tokens:
            kind = token.type
            if kind in ("at-keyword", "error"):
                return False
            if kind == "url" and not _compact(token.value).startswith("#"):
                return False
            if kind == "function":
                if token.lower_name == "url":
                    args = [t for t in token.arguments if t.type != "whitespace"]
                    if len(args) != 1 or args[0].type != "string" or not _compact(args[0].value).startswith("#"):
                        return False
                elif token.lower_name not in CSS_FUNCTIONS or not local(token.arguments):
                    return False
            if kind in ("() block", "[] block", "{} block") and not local(token.content):
                return False
        return True

    return local(tinycss2.parse_component_value_list(css))


def _clean_attributes(element: ET.Element, name: str) -> None:
    for key in list(element.attrib):
        namespace, local = _local(key)
        value = element.attrib[key]
        keep = bool(_NAME.match(local)) and not local.lower().startswith("on")
        if namespace not in (None, XLINK, XML) or (namespace == XLINK and local != "href") or \
                (namespace == XML and local != "space"):
            keep = False
        if keep and local == "href":
            target = _compact(value)
            keep = target.startswith("#") or (name == "image" and bool(_RASTER.match(value.strip())))
        if keep and local != "href":  # any attribute may be a presentation attribute, read as CSS
            keep = _css_is_local(value)
        if not keep:
            del element.attrib[key]


def _clean(element: ET.Element) -> tuple[str, list[ET.Element]]:
    """``element`` cleaned in place, as what to put in its place: text (what an
    unwrapped element held before its first child) and elements (itself, its
    cleaned children, or none). Tails are the caller's."""
    namespace, name = _local(element.tag)
    if namespace not in (SVG, None) or (name not in ELEMENTS and name not in UNWRAPPED):
        return "", []
    if name == "style" and not _css_is_local("".join(element.itertext())):
        return "", []
    element.tag = f"{{{SVG}}}{name}"
    _clean_attributes(element, name)
    if name in ("use", "image") and not any(_local(k)[1] == "href" for k in element.attrib):
        return "", []  # its reference was external: nothing left to draw
    children = list(element)
    for child in children:
        element.remove(child)
    for child in children:
        tail, child.tail = child.tail, None
        text, kept = _clean(child)
        _add_text(element, text)
        element.extend(kept)
        _add_text(element, tail)
    if name in UNWRAPPED:
        return element.text or "", list(element)
    return "", [element]


def _add_text(element: ET.Element, text: str | None) -> None:
    """Append character data after the last child of ``element`` (or as its text)."""
    if not text:
        return
    if len(element):
        element[-1].tail = (element[-1].tail or "") + text
    else:
        element.text = (element.text or "") + text


def sanitise(data: bytes | str, scrub: Callable[[str], str] | None = None) -> bytes:
    """The SVG document ``data`` rebuilt from the allow-list of the module
    docstring, as UTF-8 bytes; with ``scrub`` (the post's scrub of local paths
    and the host name), every character data and attribute value but an
    embedded raster passes through it. Raises :class:`SvgError` when it is
    not an SVG (not XML, another root element) or declares entities."""
    text = data.decode("utf-8", errors="replace") if isinstance(data, bytes) else str(data)
    if re.search(r"<!ENTITY", text, re.I):
        raise SvgError("it declares XML entities (refused: they can expand without bound)")
    try:
        root = ET.fromstring(text)
    except ET.ParseError as exc:
        raise SvgError(f"it is not well-formed XML ({exc})") from None
    namespace, name = _local(root.tag)
    if name != "svg" or namespace not in (SVG, None):
        raise SvgError(f"its root element is <{name}>, not <svg>")
    _, [root] = _clean(root)
    if scrub is not None:
        for element in root.iter():
            element.text = scrub(element.text) if element.text else element.text
            element.tail = scrub(element.tail) if element.tail else element.tail
            for key, value in element.attrib.items():
                if not _RASTER.match(value.strip()):
                    element.attrib[key] = scrub(value)
    ET.register_namespace("", SVG)
    ET.register_namespace("xlink", XLINK)
    return ET.tostring(root, encoding="utf-8", xml_declaration=True)
