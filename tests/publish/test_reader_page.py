"""The post as a reader sees it, at 1280 px and at 360 px, in headless Chromium.

The site is a scratch copy of the published one, plus the pairs fixture of
tests/test_pairs.py (a pair with hostile outputs, a wide table, real verdicts
and hostile metadata), built with Jekyll. On every page, at both widths, it
fails on anything wider than the content column that does not scroll inside
its own box, on a table cut off (clipped without a scroll bar), and on the
page scrolling sideways; a separate test fails on table cells truncated
by pandas ("..."). Screenshots go to
build/reader/ (the top of each page, and the whole page).
"""

from __future__ import annotations

import json

import pytest
from conftest import ROOT, make_site, screenshot
from test_pairs import SLUG as FIXTURE
from test_pairs import render_fixture
from test_site import _jekyll, browsing

from sidebyside import publish
from sidebyside.lab import words
from sidebyside.publish import frontpage, scoreboard

pytestmark = pytest.mark.slow

WIDTHS = {"wide": 1280, "narrow": 360}
SHOTS = ROOT / "build" / "reader"

# Runs in the page: everything in the main column that sticks out of it without a scroll box of
# its own, every clipped or truncated table, and a page that scrolls sideways.
LAYOUT_PROBLEMS = r"""() => {
  const problems = [];
  const column = document.querySelector('main .wrapper');
  const style = getComputedStyle(column);
  const box = column.getBoundingClientRect();
  const left = box.left + parseFloat(style.paddingLeft) - 1, right = box.right - parseFloat(style.paddingRight) + 1;
  const name = el => el.tagName.toLowerCase() + (el.className && typeof el.className === 'string' ? '.' + el.className.trim().split(/\s+/).join('.') : '')
    + ' "' + (el.textContent || '').trim().slice(0, 40) + '"';
  const scroller = el => {  // the nearest ancestor (below the column) that does not let content overflow
    for (let a = el.parentElement; a && a !== column; a = a.parentElement) {
      if (getComputedStyle(a).overflowX !== 'visible') return a;
    }
    return null;
  };
  if (document.documentElement.scrollWidth > window.innerWidth + 1)
    problems.push(`the page scrolls sideways: ${document.documentElement.scrollWidth} px wide in a ${window.innerWidth} px window`);
  for (const el of column.querySelectorAll('*')) {
    const r = el.getBoundingClientRect();
    if (r.width === 0 || r.height === 0 || getComputedStyle(el).position === 'fixed') continue;
    if (el.closest('.katex-mathml')) continue;  // KaTeX's hidden MathML copy, clipped to 1 px by design
    if (el.closest('svg') && el.tagName.toLowerCase() !== 'svg') continue;  // an SVG clips its own drawing
    const s = scroller(el);
    if (s) {
      const o = getComputedStyle(s).overflowX;
      const sr = s.getBoundingClientRect();
      if ((o === 'hidden' || o === 'clip') && (r.right > sr.right + 1 || r.left < sr.left - 1))
        problems.push(`cut off by ${name(s)}: ${name(el)}`);
      continue;
    }
    if (r.right > right || r.left < left)
      problems.push(`wider than its column (${Math.round(r.left)}..${Math.round(r.right)} px, column ${Math.round(left)}..${Math.round(right)}): ${name(el)}`);
  }
  for (const table of column.querySelectorAll('table')) {
    let scrolls = false;
    for (let a = table; a && a !== column; a = a.parentElement) {
      const o = getComputedStyle(a).overflowX;
      if (o === 'auto' || o === 'scroll') { scrolls = true; break; }
    }
    if (table.scrollWidth > table.clientWidth + 1 && !scrolls) problems.push(`table cut without a scroll bar: ${name(table)}`);
  }
  const truncated = [];
  for (const cell of column.querySelectorAll('td, th'))
    if (/(\.\.\.|…)$/.test(cell.textContent.trim())) truncated.push(name(cell));
  return {problems, truncated};
}"""


@pytest.fixture(scope="module")
def reader_site(tmp_path_factory):
    base = tmp_path_factory.mktemp("reader")
    site = make_site(base / "site", with_published=True)
    post, files, record, info = render_fixture(base)
    publish.publish(site, info, post, files, record)
    infos = publish.discover(ROOT / "notebooks")
    params = publish.load_all_params(ROOT / "params", infos)
    scoreboard.write_freshness(site, infos, params, ROOT)
    slugs = sorted(p.name[11:-3] for p in (site / "_posts").glob("*.md"))
    return site, _jekyll(site), slugs, record


@pytest.fixture(scope="module")
def pages(reader_site):
    """What each page reported, per (name, width)."""
    site, built, slugs, _ = reader_site
    reports = {}
    with browsing(built) as (browser, base):
        for width_name, width in WIDTHS.items():
            for name, path in [("index", "/")] + [(s, f"/posts/{s}/") for s in slugs]:
                page = browser.new_page(viewport={"width": width, "height": 900})
                errors: list[str] = []
                page.on("pageerror", lambda e, errors=errors: errors.append(str(e)))
                page.on("requestfailed", lambda r, errors=errors: errors.append(f"failed: {r.url}"))
                page.on("dialog", lambda d, errors=errors: (errors.append(f"dialog: {d.message}"), d.dismiss()))
                response = page.goto(base + path, wait_until="load")
                page.wait_for_timeout(300)  # KaTeX, pairs.js
                report = {
                    "status": response.status if response else None,
                    "errors": errors,
                    **page.evaluate(LAYOUT_PROBLEMS),
                    "verdict": page.evaluate("() => (document.querySelector('.verdict') || {}).innerText || null"),
                    # the whole box, its closed sections included (a further verdict's figures fold away)
                    "verdict_all": page.evaluate("() => (document.querySelector('.verdict') || {}).textContent || null"),
                    "provenance": page.evaluate("() => (document.querySelector('.provenance') || {}).textContent || ''"),  # in the closed appendix
                    "title": page.evaluate("() => (document.querySelector('.post-title') || {}).textContent || ''"),
                    "downloads": page.evaluate("() => Array.from(document.querySelectorAll('.downloads a')).map(a => a.href)"),
                    "scoreboard": page.evaluate("""() => Array.from(document.querySelectorAll('.board-post')).map(d => ({
                        summary: d.querySelector('summary').textContent.replace(/\\s+/g, ' '),
                        rows: Array.from(d.querySelectorAll('.scoreboard tbody tr')).map(r => r.textContent.replace(/\\s+/g, ' '))}))"""),
                }
                screenshot(page, SHOTS / f"{name}-{width_name}-top.png")
                screenshot(page, SHOTS / f"{name}-{width_name}.png", full_page=True)
                if name == FIXTURE:
                    report["pair_columns"] = page.evaluate(
                        "() => ['torch', 'jax'].map(s => document.querySelector('.pair-code.' + s).getBoundingClientRect().left)")
                    page.click(".pair-toggle button[data-show='jax']")
                    report["after_jax_only"] = page.evaluate("""() => ['torch', 'jax'].map(s =>
                        getComputedStyle(document.querySelector('.pair-code.' + s)).display)""")
                    report["download_status"] = [page.request.get(url).status for url in report["downloads"]]
                reports[name, width_name] = report
                page.close()
    return reports


def test_every_page_fits_its_column_at_both_widths(reader_site, pages):
    _, _, slugs, _ = reader_site
    failures = []
    for (name, width), report in pages.items():
        assert report["status"] == 200, (name, width)
        failures += [f"{name} at {WIDTHS[width]} px: {p}" for p in report["errors"] + report["problems"]]
    assert not failures, "\n".join(failures[:40]) + (f"\n... and {len(failures) - 40} more" if len(failures) > 40 else "")
    assert {n for n, _ in pages} == {"index", *slugs}


def test_no_table_cell_is_truncated(pages):
    """pandas' notebook display cuts long cells to "..."; tables.table() (and to_html) do not. A post
    executed before its notebook showed its tables through them fails here until it runs again."""
    truncated = [f"{name}: {cell}" for (name, width), report in pages.items() if width == "wide"
                 for cell in report["truncated"]]
    assert not truncated, "cells cut short by pandas (show the table with sidebyside.lab.tables.table):\n" + "\n".join(truncated)


def test_every_post_keeps_its_provenance_and_shows_a_verdict_only_from_its_results(reader_site, pages):
    site, _, slugs, _ = reader_site
    for slug in slugs:
        report = pages[slug, "wide"]
        assert "Device" in report["provenance"] and "Profile" in report["provenance"], slug
        record = json.loads((site / "_data" / "results" / f"{slug}.json").read_text())
        verdicts = record["metrics"].get("verdicts") or []
        owed = any(r["owed"] for r in json.loads((site / "_data" / "board.json").read_text())["posts"][slug]["runs"])
        assert (report["verdict"] is not None) == (bool(verdicts) or owed), \
            f"{slug}: a verdict box without verdicts or a run owed, or none with"


def test_verdict_box_shows_the_results_figures(reader_site, pages):
    _, _, _, record = reader_site
    box = pages[FIXTURE, "wide"]["verdict"]
    headline, accuracy = record["metrics"]["verdicts"]
    assert headline["question"] in box and accuracy["question"] in box
    assert f"JAX {frontpage.fmt_factor(headline['factor'])}× faster" in box  # the publisher's one notation
    # Who raced and at what size, and that a claim made on a V100 is not answered by a CPU run.
    for c in headline["contestants"].values():
        assert c["implementation"] in box and c["origin_text"] in box
    assert headline["scale"]["text"] in box and "Does not answer the seed's claim (JAX 3× faster) yet" in box
    for side in headline["sides"].values():
        assert words.fmt_seconds(side["median_s"]) in box and side["tool"] in box
    # The headline shows everything; a further verdict shows its question, answer and scale, the rest folded.
    whole = pages[FIXTURE, "wide"]["verdict_all"]
    assert "Who raced, their figures, the caveat and how this was decided" in box and "seeds" not in box[box.index(accuracy["question"]):]
    # Each table's header names its columns: tools and medians for speed, means and seeds for accuracy.
    speed_table, seeds_table = box[:box.index(accuracy["question"])], whole[whole.index(accuracy["question"]):]
    assert "best tool" in speed_table and "median" in speed_table and "seeds" not in speed_table
    assert "mean" in seeds_table and "seeds" in seeds_table and "best tool" not in seeds_table
    assert "Caveat: A smoke-sized batch; <b>not</b> a GPU figure." in box  # escaped: shown as text
    assert record["provenance"]["device"] in box and "torch_float32_matmul_precision=highest" in box
    assert box.index(headline["question"]) < box.index(accuracy["question"])


def test_scoreboard_is_grouped_by_post_with_at_most_five_rows_each(reader_site, pages):
    site, _, slugs, record = reader_site
    groups = pages["index", "wide"]["scoreboard"]
    board = json.loads((site / "_data" / "board.json").read_text())
    assert len(groups) == len(slugs) == len(board["order"])
    for slug, group in zip(board["order"], groups):
        post = board["posts"][slug]
        assert len(group["rows"]) == max(1, min(frontpage.HOME_VERDICTS, len(post["verdicts"]))), slug
        assert ", ".join(post["states"]) in group["summary"], slug
        for view, row in zip(post["home"], group["rows"]):
            assert view["question"] in row and view["answer"] in row and view["device"] in row, (slug, row)
    fixture = groups[board["order"].index(FIXTURE)]
    headline = record["metrics"]["verdicts"][0]
    assert headline["question"] in fixture["rows"][0] and headline["scale"]["device"] in fixture["rows"][0]
    assert f"JAX {frontpage.fmt_factor(headline['factor'])}× faster" in fixture["rows"][0]
    states = json.loads((site / "_data" / "freshness.json").read_text())
    assert FIXTURE not in states and board["posts"][FIXTURE]["freshness"] == "unknown"  # no notebook: no key


def test_pair_columns_toggle_and_stack(pages):
    wide, narrow = pages[FIXTURE, "wide"], pages[FIXTURE, "narrow"]
    assert wide["pair_columns"][0] < wide["pair_columns"][1], "PyTorch left, JAX right"
    assert narrow["pair_columns"][0] == narrow["pair_columns"][1], "stacked on a narrow screen"
    assert wide["after_jax_only"] == ["none", "block"]


def test_hostile_metadata_is_shown_as_text_and_downloads_resolve(pages):
    report = pages[FIXTURE, "wide"]
    assert report["title"] == 'Pairs fixture: <side> & "side"'
    assert len(report["downloads"]) == 3 and report["download_status"] == [200, 200, 200]
    assert not any("dialog" in e for e in report["errors"])
