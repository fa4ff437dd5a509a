"""SVG figures are rebuilt inert: nothing in them runs, and nothing loads from elsewhere.

Each hostile document (scripts, handlers, foreign content, links, external
references, CSS that fetches: ``url()``, ``image-set()``, ``@import``, any
other) is sanitised by :func:`sidebyside.publish.svg.sanitise` and checked
element by element; the project's own graphs and a Matplotlib figure keep
everything they draw.
"""

from __future__ import annotations

import re

import pytest
from conftest import ROOT

from sidebyside.publish import svg

SVG_NS = 'xmlns="http://www.w3.org/2000/svg"'


def _svg_elements(data: bytes) -> list:
    import xml.etree.ElementTree as ET

    return list(ET.fromstring(data).iter())


def _assert_inert(data: bytes) -> None:
    """No script, handler, foreign content, animation, or reference outside the document."""
    for element in _svg_elements(data):
        namespace, _, name = element.tag[1:].partition("}")
        assert namespace == svg.SVG and name in svg.ELEMENTS, element.tag
        for key, value in element.attrib.items():
            local = key.rpartition("}")[2]
            assert not local.lower().startswith("on"), (name, key)
            if local == "href":
                assert value.startswith("#") or re.match(r"data:image/(png|jpeg|gif|webp);base64,", value), value
            for target in re.findall(r"url\(\s*['\"]?([^)'\"]*)", value):
                assert target.strip().startswith("#"), value
        if name == "style":
            assert "@import" not in (element.text or "") and not re.search(r"url\(\s*['\"]?[^#]", element.text or "")


NS = 'xmlns="http://www.w3.org/2000/svg" xmlns:xlink="http://www.w3.org/1999/xlink"'
HOSTILE_SVGS = {
    "script": f"<svg {NS}><script>alert(1)</script><g><script href='x.js'/></g><text>kept</text></svg>",
    "handlers": f"<svg {NS} onload='alert(1)'><rect ONCLICK='alert(1)' onbegin='x' width='1'/><text>kept</text></svg>",
    "foreignObject": f"<svg {NS}><foreignObject><body xmlns='http://www.w3.org/1999/xhtml'><script>alert(1)"
                     "</script></body></foreignObject><text>kept</text></svg>",
    "link": f"<svg {NS}><a href='javascript:alert(1)'><text>kept</text></a><a xlink:href='&#106;avascript:x'>"
            "<rect width='1'/></a></svg>",
    "use-external": f"<svg {NS}><use href='https://example.invalid/a.svg#x'/><use xlink:href=' //x/b.svg#y'/>"
                    "<text>kept</text></svg>",
    "image-external": f"<svg {NS}><image href='https://example.invalid/a.png'/><image xlink:href='data:image/svg+xml;"
                      "base64,PHN2Zz4='/><image href='file:///etc/passwd'/><text>kept</text></svg>",
    "css": f"<svg {NS}><style>@import url(https://x/y.css);</style><style>rect {{ fill: url(https://x/p) }}</style>"
           "<style>a { b: \\75rl(x) }</style><rect style='fill:url( https://x/q )' filter='url(https://x/f)' "
           "width='1'/><text>kept</text></svg>",
    "animation": f"<svg {NS}><a href='#'><set attributeName='href' to='javascript:alert(1)'/><animate "
                 "attributeName='href' values='javascript:alert(1)'/><text>kept</text></a></svg>",
    "namespaces": f"<svg {NS} xmlns:x='http://www.w3.org/2000/svg' xmlns:h='http://www.w3.org/1999/xhtml'>"
                  "<x:script>alert(1)</x:script><h:script>alert(1)</h:script><h:iframe src='javascript:x'/>"
                  "<handler xmlns:ev='http://www.w3.org/2001/xml-events' ev:event='load'>alert(1)</handler>"
                  "<text h:onclick='x' x:onclick='y'>kept</text></svg>",
    "no-namespace": "<svg onload='alert(1)'><script>alert(1)</script><text>kept</text></svg>",
}


@pytest.mark.parametrize("name", sorted(HOSTILE_SVGS))
def test_svg_is_rebuilt_inert_and_keeps_its_drawing(name):
    out = svg.sanitise(HOSTILE_SVGS[name].encode())
    _assert_inert(out)
    assert b"alert" not in out and b"javascript" not in out and b"example.invalid" not in out
    assert "kept" in [e.text for e in _svg_elements(out)]


@pytest.mark.parametrize("doc, why", [
    ('<?xml version="1.0"?><!DOCTYPE svg [<!ENTITY a "alert(1)">]><svg xmlns="http://www.w3.org/2000/svg">&a;</svg>',
     "declares XML entities"),
    ("<svg xmlns='http://www.w3.org/2000/svg'><text>unclosed</svg>", "not well-formed"),
    ("<html><script>alert(1)</script></html>", "root element is <html>"),
    ("<h:svg xmlns:h='http://www.w3.org/1999/xhtml'/>", "root element"),
])
def test_svg_that_cannot_be_read_safely_is_refused(doc, why):
    with pytest.raises(svg.SvgError, match=why):
        svg.sanitise(doc)


@pytest.mark.parametrize("figure", sorted((ROOT / "images" / "weight-visualisation").glob("*.svg")), ids=lambda p: p.name)
def test_svg_graphs_keep_every_element_and_label(figure):
    """The weight-visualisation graphs (graphviz) lose nothing they draw."""
    import xml.etree.ElementTree as ET

    raw = figure.read_bytes()
    out = svg.sanitise(raw)
    before, after = list(ET.fromstring(raw).iter()), _svg_elements(out)
    assert [(e.tag, e.attrib, (e.text or "").strip()) for e in before] == \
        [(e.tag, e.attrib, (e.text or "").strip()) for e in after]
    assert svg.sanitise(out) == out  # sanitising is idempotent


def test_svg_from_matplotlib_keeps_its_drawing():
    """Clip paths (url(#id)), glyphs by <use xlink:href="#id">, an embedded PNG and its style sheet stay;
    only the RDF metadata goes."""
    import io
    import xml.etree.ElementTree as ET

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots()
    ax.imshow([[0, 1], [1, 0]])
    ax.plot([0, 1], [1, 0])
    ax.set_title("T <x> & y")
    buffer = io.BytesIO()
    fig.savefig(buffer, format="svg")
    plt.close(fig)
    raw = buffer.getvalue()
    out = svg.sanitise(raw)
    _assert_inert(out)
    # Every SVG element but <metadata> (whose content is RDF, in other namespaces).
    before = [(e.tag, e.attrib) for e in ET.fromstring(raw).iter()
              if e.tag.startswith(f"{{{svg.SVG}}}") and e.tag != f"{{{svg.SVG}}}metadata"]
    assert before == [(e.tag, e.attrib) for e in _svg_elements(out)]
    assert b"data:image/png;base64," in out and b"url(#" in out and b"xlink:href=\"#" in out


# --------------------------------------------------------------------------- CSS that fetches

FETCHING_CSS = {
    "image-set": 'rect { fill: image-set("//x.invalid/a.png" 1x) }',
    "webkit-image-set": "rect { fill: -webkit-image-set(url(https://x.invalid/b.png) 1x) }",
    "escaped-function": 'rect { fill: \\69 mage-set("//x.invalid/c.png" 1x) }',
    "escaped-url": "rect { fill: \\75 rl(//x.invalid/d.png) }",
    "font-face": "@font-face { font-family: f; src: url(//x.invalid/f.woff) }",
    "import-string": '@import "//x.invalid/g.css";',
    "cross-fade": "rect { fill: cross-fade(url(//x.invalid/h.png), red) }",
    "image": 'rect { fill: image("//x.invalid/i.png") }',
    "protocol-relative-url": "rect { fill: url(//x.invalid/j.svg#p) }",
    "url-string": 'rect { fill: url("https://x.invalid/k.svg#p") }',
}


@pytest.mark.parametrize("name", sorted(FETCHING_CSS))
def test_svg_css_that_fetches_is_dropped_wherever_it_is(name):
    css = FETCHING_CSS[name]
    declaration = css[css.index("{") + 1:css.rindex("}")] if "{" in css and not css.startswith("@") else css
    doc = (f"<svg {SVG_NS}><style>{css}</style><rect width='5' height='5' style='{declaration}'/>"
           f"<rect width='5' height='5' fill='{declaration.split(':', 1)[-1].strip()}'/><text>kept</text></svg>")
    out = svg.sanitise(doc)
    assert b"x.invalid" not in out, out
    assert b"kept" in out


def test_svg_css_that_fetches_nothing_is_kept():
    doc = (f"<svg {SVG_NS}><style>*{{stroke-linejoin: round}} rect {{ fill: rgb(1 2 3); clip-path: url(#c) }}</style>"
           "<rect width='5' height='5' transform='translate(1 2) rotate(3)' clip-path='url(#c)' "
           "style='fill: hsl(10 20% 30%)'/></svg>")
    out = svg.sanitise(doc)
    assert b"rotate(3)" in out and b"url(#c)" in out and b"hsl(10 20% 30%)" in out and b"stroke-linejoin" in out


