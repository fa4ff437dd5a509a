"""End to end: every notebook executed with the smoke profile (papermill, for
real, once per test run: tests/executions.py) into a scratch site, a strict Jekyll
build of it, and headless Chromium opening each built post. The published site (the committed posts) is built
and opened the same way. Nothing here writes into the repo's _posts/, images/
or _data/ (conftest checks)."""

from __future__ import annotations

import contextlib
import functools
import http.server
import json
import os
import shutil
import subprocess
import threading
from pathlib import Path

import pytest
import yaml
from conftest import ROOT, chromium, front_matter, make_site, screenshot

from sidebyside import publish
from sidebyside.publish.discovery import read_header
from sidebyside.publish.pairs import timed_problems

pytestmark = pytest.mark.slow

NOTEBOOKS = publish.discover(ROOT / "notebooks")
SLUGS = [info.slug for info in NOTEBOOKS]
NOTEBOOK_PATHS = {info.slug: info.path for info in NOTEBOOKS}
# The metrics each results record must carry: its notebook's header declares them.
REQUIRED_METRICS = {info.slug: set(info.metrics)
                    for info in NOTEBOOKS + publish.discover(ROOT / "tests" / "fixtures" / "notebooks")}
SCREENSHOTS = ROOT / "build" / "screenshots"


@pytest.fixture(scope="module")
def smoke_site(tmp_path_factory, executed):
    """One scratch site holding every notebook's post from its shared execution (tests/executions.py)."""
    base = tmp_path_factory.mktemp("smoke")
    site = make_site(base / "site")
    for slug in SLUGS:
        shutil.copytree(executed(slug).site, site, dirs_exist_ok=True)
    return site, base / "build"


def test_each_post_has_one_settings_file_naming_only_its_profiles_and_parameters():
    """Its profiles' parameters, and beside them its GPU budget where it plans a GPU run."""
    for slug in SLUGS:
        table = yaml.safe_load((ROOT / "params" / f"{slug}.yaml").read_text()) or {}
        assert set(table) <= {*publish.PROFILES, "gpu_budget"} and "smoke" in table, (slug, set(table))
    for profile in publish.PROFILES:
        publish.load_params(ROOT / "params", profile, NOTEBOOKS)  # raises on unknown names and stray files




# Backwards: test_colab.py takes the notebooks forwards, so the two workers split the executions.
@pytest.mark.parametrize("slug", SLUGS[::-1])
def test_notebook_executes_with_smoke_profile(slug, executed):
    run = executed(slug)
    record = run.record
    assert record["profile"] == "smoke" and record["slug"] == slug
    missing = REQUIRED_METRICS[slug] - set(record["metrics"])
    assert not missing, f"{slug} metrics lack {missing}"
    post = run.post.read_text()
    assert "Traceback" not in post, f"{slug}: an error output reached the post"
    # The code shown is the code timed: every contestant was defined (or shown) in a paired cell.
    _, cells = read_header(NOTEBOOK_PATHS[slug])
    assert not timed_problems(cells, record.get("code"), name=slug)


def test_fixture_executes_into_the_same_site(smoke_site):
    site, build = smoke_site
    fixtures = ROOT / "tests" / "fixtures"
    assert publish.run(profile="smoke", site=site, build=build, notebooks=fixtures / "notebooks",
                       params_dir=fixtures / "params", progress=False) == 0


def _jekyll(site: Path) -> Path:
    dest = site / "_site"
    env = {**os.environ, "BUNDLE_GEMFILE": str(ROOT / "Gemfile"), "JEKYLL_ENV": "production"}
    proc = subprocess.run(["bundle", "exec", "jekyll", "build", "--strict_front_matter", "-s", str(site), "-d", str(dest)],
                          capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return dest


def _posts_in(site: Path) -> list[str]:
    return sorted(p.name[11:-3] for p in (site / "_posts").glob("*.md"))


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


def _serve(directory: Path):
    handler = functools.partial(_QuietHandler, directory=str(directory))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


@contextlib.contextmanager
def browsing(built: Path):
    """Serve ``built`` on loopback and yield (headless Chromium, the base URL); close both after."""
    from playwright.sync_api import sync_playwright

    server = _serve(built)
    try:
        with sync_playwright() as p:
            browser = chromium(p)
            try:
                yield browser, f"http://127.0.0.1:{server.server_address[1]}"
            finally:
                browser.close()
    finally:
        server.shutdown()


def _browse(built: Path, slugs: list[str], prefix: str) -> dict[str, dict]:
    """Open the index and each post in headless Chromium; return what each page reported."""
    reports = {}
    with browsing(built) as (browser, base):
        for name, path in [("index", "/")] + [(s, f"/posts/{s}/") for s in slugs]:
            page = browser.new_page(viewport={"width": 1100, "height": 900})
            errors: list[str] = []
            page.on("console", lambda m, errors=errors: errors.append(m.text) if m.type == "error" else None)
            page.on("pageerror", lambda e, errors=errors: errors.append(str(e)))
            page.on("requestfailed", lambda r, errors=errors: errors.append(f"failed: {r.url}"))
            response = page.goto(base + path, wait_until="load")
            page.wait_for_timeout(300)  # let KaTeX render
            images = page.evaluate("""() => Array.from(document.images).map(i => ({
                src: i.getAttribute('src'), ok: i.complete && i.naturalWidth > 0}))""")
            reports[name] = {
                "status": response.status if response else None,
                "errors": errors,
                "images": images,
                "katex": page.evaluate("() => document.querySelectorAll('.katex').length"),
                "provenance": page.evaluate("() => (document.querySelector('.provenance') || {}).textContent || ''"),  # in the closed appendix
                "colab": page.evaluate("() => (document.querySelector('a.colab') || {}).href || ''"),
                "verdict": page.evaluate("() => !!document.querySelector('.verdict')"),
                "text": page.evaluate("() => document.body.innerText"),
            }
            screenshot(page, SCREENSHOTS / f"{prefix}-{name}.png", full_page=name != "index")
            page.close()
    return reports


def _check(reports: dict[str, dict], slugs: list[str], site: Path) -> None:
    assert reports["index"]["status"] == 200 and not reports["index"]["errors"], reports["index"]["errors"]
    for slug in slugs:
        report = reports[slug]
        assert report["status"] == 200, slug
        assert not report["errors"], f"{slug}: console errors {report['errors']}"
        broken = [i["src"] for i in report["images"] if not i["ok"]]
        assert not broken, f"{slug}: images that did not load: {broken}"
        assert "Device" in report["provenance"] and "Profile" in report["provenance"], slug
        assert report["colab"].startswith("https://colab.research.google.com/github/"), slug
        # The verdict box comes from the results file: shown when it holds verdicts or the post owes a run
        # (it says "GPU run owed"), absent otherwise.
        record = json.loads((site / "_data" / "results" / f"{slug}.json").read_text())
        board = json.loads((site / "_data" / "board.json").read_text()) if (site / "_data" / "board.json").is_file() else {}
        owed = any(r["owed"] for r in ((board.get("posts") or {}).get(slug) or {}).get("runs", []))
        assert report["verdict"] == (bool(record["metrics"].get("verdicts")) or owed), slug


def test_smoke_site_builds_and_every_post_renders_in_a_browser(smoke_site):
    site, _ = smoke_site
    slugs = _posts_in(site)
    assert set(SLUGS) <= set(slugs), "every notebook must have produced a post (run the whole module)"
    built = _jekyll(site)
    reports = _browse(built, slugs, "smoke")
    _check(reports, slugs, site)
    # every post reaches the index, with its description
    for slug in slugs:
        fm = front_matter(next((site / "_posts").glob(f"*-{slug}.md")).read_text())
        assert fm["title"] in reports["index"]["text"]
    fixture = reports["publisher-fixture"]
    assert fixture["katex"] >= 1, "math was not rendered"
    assert any(i["src"].endswith("sine-wave.png") and i["ok"] for i in fixture["images"]), fixture["images"]
    assert "Traceback" not in fixture["text"] and "</details>" not in fixture["text"]
    assert "RED plain {{ not_liquid }} {% not_a_tag %}" in fixture["text"]


def test_published_site_builds_and_renders(published_site):
    site = published_site
    slugs = _posts_in(site)
    reports = _browse(site / "_site", slugs, "published")
    _check(reports, slugs, site)
    for slug in slugs:
        fm = front_matter(next((site / "_posts").glob(f"*-{slug}.md")).read_text())
        assert fm["title"] not in reports[slug]["text"].split(fm["title"], 1)[1], f"{slug}: title shown twice"
        for name, value in (fm.get("parameters") or {}).items():
            shown = json.dumps(value, separators=(",", ":"))  # as Liquid's jsonify writes it
            assert f"{name}={shown}" in reports[slug]["provenance"], (slug, name, reports[slug]["provenance"])


def test_published_results_follow_the_contract():
    for path in sorted((ROOT / "_data" / "results").glob("*.json")):
        record = json.loads(path.read_text())
        slug = path.stem
        assert record["slug"] == slug and slug in SLUGS
        assert record["profile"] in publish.PROFILES
        assert REQUIRED_METRICS[slug] <= set(record["metrics"]), slug
        prov = record["provenance"]
        assert prov["device_kind"] in ("cpu", "gpu") and prov["device"]
        assert (ROOT / record["notebook"]).is_file()
        assert list((ROOT / "_posts").glob(f"*-{slug}.md")), f"{slug} has results but no post"
