"""The site's math engine, as a reader's browser runs it: the pinned KaTeX release (the Makefile's
KATEX_VERSION, fetched by `make assets`), and assets/math.js's bounds. A formula that expands a macro
without end, or exponentially through \\edef, stops at the expansion limit within a fraction of a second
and is shown as an error, and the formulas after it still render; so does one that stays within the
expansion limit but makes hundreds of thousands of tokens (a 1,000-token body expanded 200 times, an
argument doubled at each expansion), at math.js's token budget: the page's math takes under a second
and a half where KaTeX alone takes seconds a formula."""

from __future__ import annotations

import re
import time

import pytest
from conftest import ROOT, chromium
from executions import serve

pytestmark = pytest.mark.slow  # starts a browser

GOOD = r"\(x^2 + y_1\)"
HOSTILE = {
    "recursive macro": r"\(\def\r{\r}\r\)",
    "exploding edef": (r"\(\def\a{xxxxxxxxxx}\edef\b{\a\a\a\a\a\a\a\a\a\a}\edef\c{\b\b\b\b\b\b\b\b\b\b}"
                       r"\edef\d{\c\c\c\c\c\c\c\c\c\c}\edef\e{\d\d\d\d\d\d\d\d\d\d}\edef\f{\e\e\e\e\e\e\e\e\e\e}\f\)"),
    "unknown command": r"\(\notacommand{1}\)",
    "long body expanded 200 times": r"\(\def\a{" + "x " * 1000 + "}" + r"\a" * 200 + r"\)",
    "argument doubled": r"\(\def\f#1#2{#2{#1#1}}\def\s#1{#1}\f{x}" + r"\f" * 14 + r"\s\)",
}
#: The most the page's math may take (milliseconds, as math.js measures it): without the token budget,
#: KaTeX takes seconds for each of the long body's and the doubled argument's formulas.
MATH_MS = 1500


def _pinned_version() -> str:
    return re.search(r"^KATEX_VERSION := (\S+)$", (ROOT / "Makefile").read_text(), re.M).group(1)


def test_the_served_katex_is_the_pinned_release():
    stamp = ROOT / "assets" / "vendor" / "katex" / "VERSION"
    assert stamp.is_file() and stamp.read_text().strip() == _pinned_version(), (
        "run make assets: assets/vendor/katex is not the pinned KaTeX release")


@pytest.mark.parametrize("kind", sorted(HOSTILE))
def test_a_hostile_formula_stops_fast_and_the_rest_render(kind, tmp_path):
    from playwright.sync_api import sync_playwright

    (tmp_path / "assets").symlink_to(ROOT / "assets")
    paragraphs = [GOOD, HOSTILE[kind], GOOD, HOSTILE[kind], GOOD]
    (tmp_path / "index.html").write_text(
        '<!doctype html><html><head><meta charset="utf-8">'
        '<link rel="stylesheet" href="assets/vendor/katex/katex.min.css">'
        '<script defer src="assets/vendor/katex/katex.min.js"></script>'
        '<script defer src="assets/vendor/katex/contrib/auto-render.js"></script>'
        '<script defer src="assets/math.js"></script></head><body>'
        + "".join(f"<p>{p}</p>" for p in paragraphs) + "</body></html>")
    server, url = serve(tmp_path)
    try:
        with sync_playwright() as p:
            browser = chromium(p)
            try:
                page = browser.new_page()
                errors: list[str] = []
                page.on("pageerror", lambda e: errors.append(str(e)))
                started = time.perf_counter()
                page.goto(url, wait_until="load")
                page.wait_for_function("() => document.body.hasAttribute('data-math-ms')", timeout=20_000)
                took = time.perf_counter() - started
                math_ms = int(page.evaluate("() => document.body.getAttribute('data-math-ms')"))
                unrendered = page.evaluate("() => document.body.getAttribute('data-math-unrendered')")
                assert page.evaluate("() => katex.version") == _pinned_version()
                rendered = page.evaluate("() => Array.from(document.querySelectorAll('p')).map(p => "
                                         "p.querySelector('.katex-error') ? 'error' : p.querySelector('.katex') ? 'math' "
                                         ": 'tex')")
            finally:
                browser.close()
    finally:
        server.shutdown()
    assert not errors, errors
    assert rendered[0::2] == ["math"] * 3, rendered  # every good formula, before and after the hostile ones
    # shown as KaTeX's error (an unknown command: in KaTeX's error colour inside the formula), never left hanging
    assert rendered[1::2] == ["math" if kind == "unknown command" else "error"] * 2, rendered
    assert took < 5, f"the page took {took:.1f} s to render its math"
    assert math_ms < MATH_MS and unrendered is None, (math_ms, unrendered)
