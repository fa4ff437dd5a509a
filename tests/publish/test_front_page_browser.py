"""The front page and the posts as a reader sees them in headless Chromium, at 1280 and 360 px: the
cards on the first screen, no page scrolling sideways, the stale banner, a withdrawn run without
its figures, the verdict box of each run, figure text sizes, and the scoreboard's filter without JavaScript. The site is the test run's
one build of the published site (conftest's ``published_site``), its board written by the publisher
(scoreboard.write_freshness)."""

from __future__ import annotations

import json
import re

import pytest
from conftest import ROOT
from test_reader_page import LAYOUT_PROBLEMS
from test_site import browsing

pytestmark = pytest.mark.slow

#: The viewport whose content column is 768 px (minima's wrapper pads 30 px each side).
COLUMN_768 = 828
#: viz.style's text (10 pt at 110 dpi) in a PNG figure's own pixels; the post's figures keep at least 11 CSS px.
PNG_TEXT_PX = 10 * 110 / 72
MIN_TEXT_PX = 11
#: A measured figure in a verdict's text: a ratio, a time, an interval.
FIGURE = re.compile(r"\d\s*(×|ms\b|µs\b|s\b|–)")

# Runs in the page: per figure, its smallest text in CSS px as drawn (an SVG's font sizes read from the file,
# a PNG's from viz.style's), and whether its box lets it scroll.
FIGURE_TEXT = r"""async (pngText) => {
  const out = [];
  for (const img of document.querySelectorAll('.post-content img')) {
    const src = img.getAttribute('src') || '';
    if (!/\.(png|svg)$/.test(src) || src.includes('colab-badge')) continue;
    const shown = img.getBoundingClientRect().width;
    let smallest;
    if (src.endsWith('.svg')) {
      const doc = new DOMParser().parseFromString(await (await fetch(img.src)).text(), 'image/svg+xml');
      const svg = doc.documentElement, box = (svg.getAttribute('viewBox') || '').split(/[ ,]+/).map(Number);
      const width = box.length === 4 ? box[2] : parseFloat(svg.getAttribute('width'));
      const sizes = Array.from(doc.querySelectorAll('text')).map(t => parseFloat(t.getAttribute('font-size')
        || (t.getAttribute('style') || '').replace(/.*font-size:\s*([\d.]+).*/, '$1'))).filter(x => x > 0);
      smallest = sizes.length ? Math.min(...sizes) * shown / width : null;
    } else {
      smallest = pngText * shown / img.naturalWidth;
    }
    out.push({src, shown: Math.round(shown), natural: img.naturalWidth, smallest});
  }
  return out;
}"""


@pytest.fixture(scope="module")
def built(published_site):
    return published_site / "_site", json.loads((published_site / "_data" / "board.json").read_text())


def _paths(board) -> list[str]:
    return ["/", "/how-we-measure/"] + [f"/posts/{slug}/" for slug in board["order"]]


def test_the_first_screen_holds_every_posts_card(built):
    site, board = built
    with browsing(site) as (browser, base):
        page = browser.new_page(viewport={"width": 1280, "height": 800})
        page.goto(base + "/", wait_until="load")
        cards = page.evaluate("""() => Array.from(document.querySelectorAll('.card')).map(c => ({
            bottom: c.getBoundingClientRect().bottom, text: c.innerText, href: c.querySelector('a').getAttribute('href')}))""")
    assert len(cards) == len(board["order"]) == len(list((ROOT / "_posts").glob("*.md")))
    assert max(c["bottom"] for c in cards) <= 800, [round(c["bottom"]) for c in cards]
    for slug, card in zip(board["order"], cards):
        post = board["posts"][slug]
        assert card["href"].endswith(f"/posts/{slug}/")
        for part in (post["question"], post["answer"], post["state"]):
            assert part in card["text"], (slug, part)
        assert "ahead" not in card["text"] and "superseded: re-run owed" not in card["text"]


@pytest.mark.parametrize("width", [1280, 360])
def test_no_page_scrolls_sideways(built, width):
    site, board = built
    problems = []
    with browsing(site) as (browser, base):
        for path in _paths(board):
            page = browser.new_page(viewport={"width": width, "height": 800})
            page.goto(base + path, wait_until="load")
            page.wait_for_timeout(300)  # post.js sizes the figures
            problems += [f"{path}: {p}" for p in page.evaluate(LAYOUT_PROBLEMS)["problems"]]
            page.close()
    assert not problems, "\n".join(problems[:30])


def test_a_stale_post_shows_the_changelog_entries_after_its_run(built):
    """Every post that shows a run older than a changelog entry shows the banner with the entries after that
    run; a post whose runs ran after every entry, or whose runs are all withdrawn (it shows none), shows none."""
    site, board = built
    changelog = board["changelog"]

    def owed(entry, slug):  # an entry names its posts, or concerns them all
        ran = board["posts"][slug]["executed_at"].replace("Z", "+00:00")
        return entry["date"] > ran and (not entry.get("posts") or slug in entry["posts"])

    def stale(slug):
        shows = any(not r["owed"] for r in board["posts"][slug]["runs"])
        return shows and any(owed(e, slug) for e in changelog)

    slugs = sorted(board["posts"])
    with browsing(site) as (browser, base):
        page = browser.new_page(viewport={"width": 1280, "height": 800})
        banners = {}
        for slug in slugs:
            page.goto(f"{base}/posts/{slug}/", wait_until="load")
            banners[slug] = page.evaluate("""() => { const b = document.querySelector('.stale-banner');
                return b ? {text: b.textContent, top: b.getBoundingClientRect().top,
                            verdict: document.querySelector('.verdict').getBoundingClientRect().top} : null; }""")
    for slug, banner in banners.items():
        post = board["posts"][slug]
        if not stale(slug):
            assert banner is None, f"{slug} shows no run older than a changelog entry, yet shows a stale banner"
            continue
        assert banner and banner["top"] < banner["verdict"], slug  # at the top, above the verdict
        assert post["hardware"] in banner["text"] and post["commit"] in banner["text"] and "Re-run owed" in banner["text"]
        for entry in changelog:
            assert (entry["title"] in banner["text"]) == owed(entry, slug), (slug, entry["title"])


def test_a_withdrawn_run_shows_no_figure(built):
    """A run measured under a method since withdrawn shows no figure: its verdicts say it is owed, the page
    says so where its body or GPU section would be, and the home page lists none of its verdicts."""
    site, board = built
    withdrawn = {slug: [r for r in post["runs"] if r["superseded"]] for slug, post in board["posts"].items()}
    with browsing(site) as (browser, base):
        page = browser.new_page(viewport={"width": 1280, "height": 800})
        for slug, runs in withdrawn.items():
            if not runs:
                continue
            page.goto(f"{base}/posts/{slug}/", wait_until="load")
            for run in runs:
                box = page.evaluate(f"() => document.querySelector('.verdict-run.run-{run['role']}').textContent")
                assert f"{run['label']} owed" in box and not FIGURE.search(box), (slug, box)
                aside = page.evaluate(f"() => document.querySelector('.{run['role']}-run-owed').textContent")
                assert "withdrawn" in aside and not FIGURE.search(aside), (slug, aside)
            if all(r["owed"] for r in board["posts"][slug]["runs"]):
                figures = page.evaluate("() => document.querySelectorAll('.post-content img[src*=\"/images/\"]').length")
                assert figures == 0, slug
        page.goto(base + "/", wait_until="load")
        for slug in [s for s, runs in withdrawn.items() if runs]:
            rows = page.evaluate(f"() => Array.from(document.querySelectorAll('#post-{slug} tbody tr[class*=kind-]'))"
                                 ".map(r => r.textContent)")
            shown = [v for r in board["posts"][slug]["runs"] if not r["owed"] for v in r["verdicts"]]
            assert len(rows) == min(len(shown), 5) and not any("owed" in r for r in rows), slug


def test_the_verdict_box_opens_with_the_configured_number_and_folds_the_rest(built):
    """Each run the post shows opens with verdict_box_open verdicts and folds the rest."""
    site, board = built
    config = (ROOT / "_config.yml").read_text()
    shown = int(re.search(r"^verdict_box_open: (\d+)$", config, re.M).group(1))
    boxes = {}
    with browsing(site) as (browser, base):
        page = browser.new_page(viewport={"width": 1280, "height": 800})
        for slug in board["order"]:
            page.goto(f"{base}/posts/{slug}/", wait_until="load")
            boxes[slug] = page.evaluate("""() => Object.fromEntries(Array.from(document.querySelectorAll(
                '.verdict .verdict-run')).map(box => { const more = box.querySelector('details.verdict-more');
                return [box.classList.contains('run-gpu') ? 'gpu' : 'cpu',
                        {items: box.querySelectorAll('.verdict-item').length,
                         folded: more ? more.querySelectorAll('.verdict-item').length : 0,
                         open: more ? more.open : false, summary: more ? more.querySelector('summary').textContent : '',
                         visible: Array.from(box.querySelectorAll('.verdict-item')).filter(i => i.checkVisibility()).length}]; }))""")
    long_boxes = 0
    for slug, runs in boxes.items():
        for run in board["posts"][slug]["runs"]:
            box, verdicts = runs[run["role"]], run["verdicts"]
            if run["owed"]:
                assert box["items"] == 0, (slug, run["role"])
                continue
            assert box["items"] == len(verdicts), slug  # every verdict is in the box, folded or not
            assert box["visible"] == min(shown, len(verdicts)) and not box["open"], (slug, box)
            assert box["folded"] == max(0, len(verdicts) - shown), (slug, box)
            if box["folded"]:
                long_boxes += 1
                said = f"{box['folded']} more verdict{'s' if box['folded'] != 1 else ''}"  # "1 more verdict"
                assert box["summary"].strip() == said, box["summary"]
    assert long_boxes, f"no published run has more than {shown} verdicts, so the fold was not exercised"


@pytest.mark.parametrize("width", [COLUMN_768, 360])
def test_figure_text_is_at_least_11_px(built, width):
    site, board = built
    small = []
    with browsing(site) as (browser, base):
        page = browser.new_page(viewport={"width": width, "height": 800})
        for slug in board["order"]:
            page.goto(f"{base}/posts/{slug}/", wait_until="load")
            page.wait_for_timeout(300)
            if width == COLUMN_768:
                column = page.evaluate("() => document.querySelector('.post-content').clientWidth")
                assert abs(column - 768) <= 2, column
            figures = page.evaluate(FIGURE_TEXT, PNG_TEXT_PX)
            hidden = all(r["owed"] for r in board["posts"][slug]["runs"] if r["present"])  # a withdrawn body
            assert figures or hidden or slug not in ("xla-and-scipy", "weight-visualisation"), slug
            small += [f"{slug}: {f}" for f in figures if f["smallest"] is not None and f["smallest"] < MIN_TEXT_PX - 0.05]
    assert not small, "\n".join(small)


def test_the_scoreboard_filters_without_javascript(built):
    site, board = built
    with browsing(site) as (browser, base):
        context = browser.new_context(java_script_enabled=False, viewport={"width": 1280, "height": 800})
        page = context.new_page()
        page.goto(base + "/", wait_until="load")
        for summary in page.locator(".board-post > summary").all():
            summary.click()

        def shown():
            return [(row.get_attribute("class") or "") for row in page.locator(".scoreboard tbody tr").all()
                    if row.is_visible()]

        everything = shown()
        assert {"kind-speed", "kind-accuracy"} <= {c.split()[0] for c in everything}
        page.click("label[for='kind-speed']")
        assert shown() and all("kind-speed" in c for c in shown())
        page.click("label[for='device-cpu']")
        assert shown() and all("kind-speed" in c and "device-cpu" in c for c in shown())
        page.click("label[for='kind-all']")
        page.click("label[for='device-all']")
        assert len(shown()) == len(everything)
        context.close()
