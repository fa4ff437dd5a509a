"""Nothing a notebook emits can run, load, leak or break the site.

Class by class, each with variants of its own: a record Jekyll would refuse
(:mod:`sidebyside.publish.records`), figure files that leak or are too big
(:mod:`sidebyside.publish.figures`), a run that writes other posts
(:mod:`sidebyside.publish.guard`). Then (slow) the hostile fixture notebook
through the real pipeline and a real Jekyll build: every page and figure
opened in Chromium, where each payload changes the page's title if any
script runs (a control page proves the detection works) and no request may
leave the site; the feed parsed as XML; the figure files searched for the
working directory and the host name. Markdown and LaTeX outputs, unit by
unit, are in test_hostile; links in test_urls; SVG (its CSS too) in test_svg.
"""

from __future__ import annotations

import base64
import json
import re
import socket
import struct
import xml.etree.ElementTree as ET
import zlib
from pathlib import Path

import pytest
from conftest import ROOT, make_site

from sidebyside import publish
from sidebyside.publish import figures, guard, records, state
from sidebyside.publish.preprocess import scrub, scrub_rules

SLUG = "hostile-output"
PWNED = "PWNED"
NS = 'xmlns="http://www.w3.org/2000/svg"'


# --------------------------------------------------------------------------- records


def _record(**metrics) -> dict:
    return {"slug": SLUG, "notebook": "n", "profile": "smoke", "executed_at": "2026-11-22T00:00:00+00:00",
            "source_hash": "k", "provenance": {"device": "cpu"}, "metrics": metrics}


ASTRAL = ["🚀 rocket", "𝔘𝔫𝔦𝔠𝔬𝔡𝔢", "🀄 tile", "\U0001F9EA flask", "emoji at the end 🐢"]


@pytest.mark.parametrize("text", ASTRAL)
def test_a_record_is_utf8_and_jekyll_loads_it(tmp_path, text):
    record = _record(verdicts=[{"question": text, "scale": {"device": text}}])
    written = tmp_path / "ok.json"
    written.write_text(records.record_text(record), encoding="utf-8")
    assert text in written.read_text(encoding="utf-8") and "\\ud" not in written.read_text()
    assert records.jekyll_rejects([written]) == []
    # the same record as json.dumps writes it by default: Jekyll's YAML loader refuses the surrogate pair
    escaped = tmp_path / "escaped.json"
    escaped.write_text(json.dumps(record))
    refused = records.jekyll_rejects([escaped])
    assert len(refused) == 1 and str(escaped) in refused[0]


def test_without_ruby_the_check_uses_libyaml_and_agrees(tmp_path, monkeypatch):
    good, bad = tmp_path / "good.json", tmp_path / "bad.json"
    good.write_text(records.record_text(_record(q="🚀")), encoding="utf-8")
    bad.write_text(json.dumps(_record(q="🚀")))
    post = tmp_path / "post.md"
    post.write_text('---\ntitle: "a \\ud83d\\ude80"\n---\nbody\n')
    with_ruby = records.jekyll_rejects([good, bad], [post])
    monkeypatch.setattr(records.shutil, "which", lambda name: None)
    without = records.jekyll_rejects([good, bad], [post])
    assert [line.split(":")[0] for line in with_ruby] == [line.split(":")[0] for line in without] == [str(bad), str(post)]


def test_lone_surrogates_and_noncharacters_never_reach_a_record():
    from sidebyside.publish import escape

    assert escape.drop_controls("a\ud83db\udc00c\ufffed\uffffe🚀") == "abcde🚀"


def test_more_than_50_verdicts_are_refused_and_nothing_is_published(tmp_path):
    site = make_site(tmp_path / "site")
    info, _ = publish.read_notebook_info(ROOT / "tests" / "fixtures" / "hostile" / "00_hostile.py")
    for count in (51, 3000):
        record = _record(verdicts=[{"question": f"q{i}"} for i in range(count)])
        with pytest.raises(publish.PublishError, match=f"{count} verdicts, more than the 50"):
            publish.publish(site, info, "---\nlayout: post\n---\nx\n", {"a.png": b"x"}, record)
    assert not list((site / "_posts").glob("*")) and not (site / "images" / SLUG).exists()
    assert not list((site / ".sidebyside").glob("txn-*"))
    record = _record(verdicts=[{"question": f"q{i}"} for i in range(50)])
    publish.publish(site, info, "---\nlayout: post\n---\nx\n", {"a.png": b"x"}, record)  # 50 are fine


def test_a_post_whose_front_matter_jekyll_refuses_is_not_published(tmp_path):
    site = make_site(tmp_path / "site")
    info, _ = publish.read_notebook_info(ROOT / "tests" / "fixtures" / "hostile" / "00_hostile.py")
    with pytest.raises(publish.PublishError, match="Jekyll would refuse"):
        publish.publish(site, info, '---\nlayout: post\ntitle: "\\ud83d"\n---\nx\n', {"a.png": b"x"}, _record())
    assert not list((site / "_posts").glob("*"))


@pytest.mark.parametrize("spoil", [
    lambda p: p.write_text(json.dumps({"q": "\U0001F680"})),  # a surrogate-pair escape
    lambda p: p.write_text('{"q": "a\ufffeb"}', encoding="utf-8"),  # a raw noncharacter
    lambda p: p.write_bytes(b'{"q": "\xff\xfe"}'),  # not UTF-8
    lambda p: p.write_text('{"q": "\\ud800"}'),  # a lone surrogate escape
], ids=["surrogate-pair", "noncharacter", "not-utf8", "lone-surrogate"])
def test_make_site_check_names_a_data_file_jekyll_would_refuse(tmp_path, capsys, spoil):
    site = make_site(tmp_path / "site")
    (site / "_data" / "results").mkdir(parents=True)
    spoil(site / "_data" / "results" / "another.json")
    code = publish.list_notebooks(site=site, notebooks=ROOT / "tests" / "fixtures" / "hostile",
                                  params_dir=ROOT / "tests" / "fixtures" / "hostile" / "params", write_freshness=True)
    err = capsys.readouterr().err
    assert code == 2 and "another.json" in err and "Jekyll would refuse" in err, err
    assert not (site / "_data" / "freshness.json").exists()


# --------------------------------------------------------------------------- figure files: scrubbed, bounded


def _secrets() -> list[str]:
    import os
    import sys
    import tempfile

    hosts = {socket.gethostname(), socket.gethostname().split(".")[0], socket.getfqdn()} - {"localhost", ""}
    return sorted({str(ROOT), os.path.realpath(ROOT), sys.prefix, str(Path.home()), tempfile.gettempdir()} | hosts)


def _png(width: int, height: int, extra=()) -> bytes:
    def chunk(kind, body):
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))
    rows = zlib.compress(b"".join(b"\x00" + b"\x80" * width for _ in range(min(height, 64))))
    return (figures.PNG_SIGNATURE + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0))
            + b"".join(chunk(k, v) for k, v in extra) + chunk(b"IDAT", rows) + chunk(b"IEND", b""))


def _chunk_types(data: bytes) -> list[bytes]:
    return [kind for kind, _ in figures._png_chunks(data)]


@pytest.mark.parametrize("kind", [b"tEXt", b"zTXt", b"iTXt", b"eXIf", b"tIME", b"iCCP", b"prVt", b"sRGB"])
def test_png_ancillary_chunks_are_dropped_always(kind):
    where = f"{ROOT} {socket.gethostname()}".encode()
    data = _png(1, 1, [(kind, b"Comment\x00" + where), (b"tRNS", b"\x00\x00")])
    out = figures.figure_file("image/png", base64.b64encode(data).decode(), lambda t: t)
    assert set(_chunk_types(out)) <= figures.KEPT_PNG_CHUNKS and where not in out
    assert figures.strip_png(data) == figures.strip_png(figures.strip_png(data))


def test_svg_text_and_attributes_are_scrubbed_like_the_post():
    rules = scrub_rules(ROOT)
    host = socket.gethostname()
    doc = (f"<svg {NS}><title>{ROOT}/x.py</title><text id='t' data-where='{ROOT} on {host}'>{host.upper()}: "
           f"<tspan>{ROOT}/notebooks</tspan> tail {ROOT}</text></svg>")
    out = figures.figure_file("image/svg+xml", doc, lambda text: scrub(text, rules)).decode()
    assert str(ROOT) not in out and host.lower() not in out.lower() and "[host]" in out and "./notebooks" in out


@pytest.mark.parametrize("width, height", [(60_000, 60_000), (40_001, 1_000), (1, 40_000_001)])
def test_a_raster_over_the_pixel_limit_is_refused_before_it_is_decoded(width, height):
    data = base64.b64encode(_png(width, height)).decode()
    with pytest.raises(figures.FigureError, match=f"{width}×{height} pixels, over the limit"):
        figures.figure_file("image/png", data, lambda t: t)


def test_a_jpeg_over_the_pixel_limit_is_refused_too():
    from io import BytesIO

    from PIL import Image

    buffer = BytesIO()
    Image.new("RGB", (8, 8)).save(buffer, format="JPEG")
    data = bytearray(buffer.getvalue())
    sof = data.index(b"\xff\xc0")
    data[sof + 5:sof + 9] = struct.pack(">HH", 65_000, 65_000)  # the frame header claims 65000×65000
    with pytest.raises(figures.FigureError, match="65000×65000 pixels"):
        figures.figure_file("image/jpeg", base64.b64encode(bytes(data)).decode(), lambda t: t)


def test_render_leaves_an_oversized_figure_out_naming_its_cell(capsys):
    import nbformat
    from nbformat.v4 import new_code_cell, new_notebook, new_output

    bomb = base64.b64encode(_png(50_000, 50_000)).decode()
    nb = new_notebook(cells=[new_code_cell("show_the_bomb()", outputs=[new_output("display_data", data={
        "image/png": bomb, "text/plain": "<Figure>"})])],
        metadata={"kernelspec": {"name": "python3", "display_name": "Python 3"}})
    info = publish.NotebookInfo(ROOT / "tests" / "fixtures" / "hostile" / "00_hostile.py", SLUG, "T", "2026-11-01",
                                "D", [])
    record = {"profile": "smoke", "executed_at": "2026-11-22T00:00:00+00:00", "source_hash": "k",
              "provenance": {"device": "cpu", "git_sha": "abc"}, "metrics": {}}
    post, files = publish.render(nbformat.from_dict(nb), record, info, {"repository": "o/r"}, root=ROOT)
    err = capsys.readouterr().err
    assert "cell 0 [show_the_bomb()]" in err and "50000×50000 pixels" in err and "Traceback" not in err
    assert "[a figure (figure-1.png) was left out: it is 50000×50000 pixels" in post
    assert not any(name.endswith(".png") for name in files)


# --------------------------------------------------------------------------- a run touches only its own post


def _published(site: Path) -> dict[str, bytes]:
    return {p.relative_to(site).as_posix(): p.read_bytes() for top in guard.GUARDED
            for p in sorted((site / top).rglob("*")) if p.is_file()}


def _two_posts(tmp_path: Path) -> Path:
    site = make_site(tmp_path / "site")
    for slug in ("other", SLUG):
        (site / "images" / slug).mkdir(parents=True)
        (site / "images" / slug / "tables.csv").write_text(f"a,b\n1,{slug}\n")
        (site / "images" / slug / "figure-1.png").write_bytes(_png(2, 2))
        (site / "_data" / "results").mkdir(parents=True, exist_ok=True)
        (site / "_data" / "results" / f"{slug}.json").write_text(json.dumps({"slug": slug}))
        (site / "_posts").mkdir(exist_ok=True)
        (site / "_posts" / f"2026-11-01-{slug}.md").write_text(f"---\nslug: {slug}\n---\n{slug}\n")
    return site


TAMPERING = {
    "rewrites-a-results-file": lambda s: (s / "_data/results/other.json").write_text('{"slug": "other", "x": 1}'),
    "rewrites-a-csv": lambda s: (s / "images/other/tables.csv").write_text("a,b\n9,9\n"),
    "adds-a-post": lambda s: (s / "_posts/2026-11-02-injected.md").write_text("---\n---\n<script>x</script>\n"),
    "removes-a-figure": lambda s: (s / "images/other/figure-1.png").unlink(),
    "adds-an-image-folder": lambda s: (s / "images/injected").mkdir() or (s / "images/injected/x.svg").write_text("x"),
    "appends-to-a-post": lambda s: (s / "_posts/2026-11-01-other.md").open("a").write("<script>x</script>"),
}


@pytest.mark.parametrize("name", sorted(TAMPERING))
def test_the_guard_names_every_changed_file_and_puts_it_back(tmp_path, name):
    site = _two_posts(tmp_path)
    before = _published(site)
    with guard.Guard(site, SLUG) as watch:
        TAMPERING[name](site)
        changed = watch.changed()
        assert changed
        with pytest.raises(publish.PublishError, match="changed published files that are not its post's own") as err:
            watch.check("its notebook's run")
        for path in changed:
            assert path in str(err.value)
    assert _published(site) == before  # byte for byte, created files gone
    assert not (site / "images" / "injected").exists() or not any((site / "images" / "injected").iterdir())


def test_after_publication_only_the_posts_own_files_may_differ(tmp_path):
    site = _two_posts(tmp_path)
    with guard.Guard(site, SLUG) as watch:
        (site / "images" / SLUG / "figure-2.png").write_bytes(b"new")
        (site / "_data" / "results" / f"{SLUG}.json").write_text("{}")
        watch.check("its publication", own=True)  # its own files: fine
        with pytest.raises(publish.PublishError, match="figure-2.png"):
            watch.check("its notebook's run")  # during the run itself, not even those


WRITER = '''# ---
# jupyter:
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
#   sidebyside:
#     slug: {slug}
#     title: A notebook that writes other posts
#     date: '2026-11-01'
#     description: It rewrites what it must not.
#     compared: Nothing.
#     metrics: [cwd]
# ---

# %% tags=["parameters"]
site = ""

# %%
import os
from pathlib import Path

from sidebyside.run import provenance

Path(site, "_data/results/other.json").write_text('{{"slug": "other", "hacked": true}}')
Path(site, "images/other/tables.csv").write_text("hacked\\n")
Path(site, "_posts/2026-11-03-injected.md").write_text("---\\nlayout: post\\n---\\n<script>x</script>\\n")
Path("left-in-the-working-directory.txt").write_text(os.getcwd())
provenance.save_results("{slug}", {{"cwd": os.getcwd()}})["metrics"]
'''


@pytest.mark.slow
@pytest.mark.parametrize("sandbox", ["0", "1"])
def test_a_run_that_writes_other_posts_fails_names_them_and_restores_them(tmp_path, monkeypatch, sandbox):
    """Unsandboxed (a machine without bubblewrap), the watch names what the run changed and puts it back; in the
    sandbox the run cannot reach the site at all, so it fails at the write and nothing changes."""
    from sidebyside.publish import sandbox as box

    if sandbox == "1" and not box.enabled():
        pytest.skip("bubblewrap cannot run here")
    monkeypatch.setenv("SIDEBYSIDE_SANDBOX", sandbox)
    site = _two_posts(tmp_path)
    slug = "writer"
    notebooks = tmp_path / "notebooks"
    (notebooks / "params").mkdir(parents=True)
    (notebooks / "01_writer.py").write_text(WRITER.format(slug=slug))
    (notebooks / "params" / f"{slug}.yaml").write_text(f"smoke: {{site: {json.dumps(str(site))}}}\n")
    before = _published(site)
    with pytest.raises(publish.PublishError) as err:
        publish.run(profile="smoke", site=site, build=tmp_path / "build", notebooks=notebooks,
                    params_dir=notebooks / "params", progress=False)
    said = str(err.value)
    for path in ("_data/results/other.json (changed)", "images/other/tables.csv (changed)",
                 "_posts/2026-11-03-injected.md (created)"):
        assert sandbox == "1" or path in said, said
    assert sandbox == "0" or "FAILED writer" in said, said
    assert _published(site) == before  # put back, or never changed; and nothing of the run was published
    assert not list((site / "_posts").glob(f"*-{slug}.md"))
    # the kernel worked in its scratch directory, not in the repository or the site
    # (in the sandbox the cell stops at its first write into the site, before it writes there)
    assert sandbox == "1" or (tmp_path / "build" / "scratch" / slug / "left-in-the-working-directory.txt").is_file()
    assert not (ROOT / "left-in-the-working-directory.txt").exists()


# --------------------------------------------------------------------------- the built site, in Chromium


@pytest.fixture(scope="module")
def built(hostile_site):
    from test_site import _jekyll

    return _jekyll(hostile_site)


def _pages(built: Path) -> list[str]:
    """Every page of the built site, and every figure of every post (opened on its own)."""
    pages = sorted("/" + p.relative_to(built).as_posix() for p in built.rglob("*.html"))
    figures_ = sorted("/" + p.relative_to(built).as_posix() for p in (built / "images").rglob("*.svg"))
    return [p[:-len("index.html")] if p.endswith("/index.html") else p for p in pages] + figures_


def _visit(built: Path, paths: list[str]) -> dict[str, dict]:
    """Open each path in Chromium; report its title, whether any payload ran, the requests that tried to
    leave the site (refused), and how wide the page became."""
    from test_site import browsing

    reports = {}
    with browsing(built) as (browser, base):
        context = browser.new_context(viewport={"width": 1100, "height": 900})
        outside: list[str] = []

        def route(r):
            if r.request.url.startswith(base) or r.request.url.startswith("data:"):
                r.continue_()
            else:
                outside.append(r.request.url)
                r.abort()

        context.route("**/*", route)
        for path in paths:
            outside.clear()
            page = context.new_page()
            page.goto(base + path, wait_until="load")
            page.wait_for_timeout(400)  # KaTeX, images that fail (onerror)
            reports[path] = {
                "title": page.title(),
                "pwned": page.evaluate("() => window.__pwned_output !== undefined || window.__pwned_meta !== undefined"),
                "outside": list(outside),
                "width": page.evaluate("() => document.documentElement.scrollWidth"),
            }
            page.close()
        context.close()
    return reports


@pytest.mark.slow
def test_the_detection_sees_a_script_that_runs(tmp_path):
    """The control: a page whose payload does run changes its title, and a fetch from elsewhere is seen."""
    (tmp_path / "control").mkdir()
    (tmp_path / "control" / "index.html").write_text(
        f'<title>control</title><img src=x onerror="document.title=\'{PWNED}\'">'
        '<img src="//example.invalid/x.png">')
    (tmp_path / "quiet").mkdir()
    (tmp_path / "quiet" / "index.html").write_text("<title>quiet</title><p>&lt;img src=x onerror=...&gt;</p>")
    reports = _visit(tmp_path, ["/control/", "/quiet/"])
    assert reports["/control/"]["title"] == PWNED and reports["/control/"]["outside"]
    assert reports["/quiet/"]["title"] == "quiet" and not reports["/quiet/"]["outside"]


@pytest.mark.slow
def test_no_page_of_the_built_site_runs_a_payload_or_loads_from_elsewhere(built):
    paths = _pages(built)
    assert f"/posts/{SLUG}/" in paths and "/" in paths and any(p.endswith(".svg") for p in paths)
    reports = _visit(built, paths)
    ran = {p: r["title"] for p, r in reports.items() if PWNED in r["title"] or r["pwned"]}
    assert not ran, ran
    fetched = {p: r["outside"] for p, r in reports.items() if r["outside"]}
    assert not fetched, fetched
    # bounded: no figure, rule or output widens the post past its column
    assert reports[f"/posts/{SLUG}/"]["width"] <= 1100, reports[f"/posts/{SLUG}/"]


@pytest.mark.slow
def test_the_feed_is_well_formed_xml_whatever_the_title_and_description(built, hostile_site):
    feed = ET.parse(built / "feed.xml").getroot()
    atom = "{http://www.w3.org/2005/Atom}"
    entry = next(e for e in feed.iter(f"{atom}entry") if SLUG in (e.find(f"{atom}id").text or ""))
    assert "]]&gt;" in entry.find(f"{atom}title").text  # type="html": smartify's entity, escaped once more
    assert "]]>" in entry.find(f"{atom}summary").text
    assert "PWNED" in entry.find(f"{atom}content").text  # the post's payloads, as escaped text


@pytest.mark.slow
def test_jekyll_loads_every_record_and_post_of_the_hostile_site(hostile_site):
    assert records.site_rejects(hostile_site) == []
    raw = (hostile_site / "_data" / "results" / f"{SLUG}.json").read_text(encoding="utf-8")
    assert "🚀" in raw and not re.search(r"\\ud[89ab]", raw, re.I)


@pytest.mark.slow
def test_figure_files_hold_neither_the_working_directory_nor_the_host_name(hostile_site):
    folder = hostile_site / "images" / SLUG
    files = [p for p in folder.iterdir() if p.suffix in (".svg", ".png", ".jpg")]
    assert len(files) >= 11, files
    for path in files:
        data = path.read_bytes().lower()
        for secret in _secrets() + [str(hostile_site.parent)]:
            assert secret.lower().encode() not in data, (path.name, secret)
        if path.suffix == ".png":
            assert set(_chunk_types(path.read_bytes())) <= figures.KEPT_PNG_CHUNKS, path.name
    manifest = json.loads((folder / state.MANIFEST).read_text())
    assert "figure-13.png" not in manifest["files"]  # the decompression bomb was left out
