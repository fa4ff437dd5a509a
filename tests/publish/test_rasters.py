"""A raster figure is published as pixels only, and no published file but a post is a page.

The class: whatever a notebook puts in or around a raster output (PNG, JPEG, GIF,
WebP: still or animated) besides its pixels (the format's own metadata, a comment,
text chunks, EXIF, a colour profile, bytes after its end, another format's header in
front of it, front matter) reaches neither the post's ``images/`` nor the executed
notebook among its downloads: each raster is decoded and written again by Pillow
(:func:`sidebyside.publish.figures.reencode`), and one that cannot be decoded whole is
left out. Then the site's side: the publisher refuses any file of a post's folder that
begins with front matter (only a post is a page), ``make site``'s check names one found
in ``images/``, and Jekyll runs in safe mode with the navigation fixed, so that even such
a file runs no Liquid and enters no menu.
"""

from __future__ import annotations

import base64
import io
import json
import zlib

import pytest
import yaml
from conftest import ROOT, make_site
from PIL import Image, PngImagePlugin

from sidebyside import publish
from sidebyside.publish import downloads, figures, records

SECRET = b"SECRET-metadata /home/someone/checkout on build-host-7"
TRAIL = b"\n---\nlayout: default\ntitle: TRAILING\n---\n{{ site.source }}\n"
SIGNATURES = {"image/png": b"\x89PNG\r\n\x1a\n", "image/jpeg": b"\xff\xd8\xff", "image/gif": b"GIF8",
              "image/webp": b"RIFF"}


def _frames(animated: bool) -> list[Image.Image]:
    colours = [(200, 30, 30), (30, 200, 30), (30, 30, 200)]
    frames = []
    for c in colours[:3 if animated else 1]:
        image = Image.new("RGB", (16, 12), c)
        image.paste((250, 250, 250), (4, 3, 12, 9))
        frames.append(image)
    return frames


def _encode(mime: str, *, animated: bool = False) -> bytes:
    """An image of ``mime`` carrying :data:`SECRET` in every place its format keeps metadata."""
    frames = _frames(animated)
    out = io.BytesIO()
    exif = Image.Exif()
    exif[0x010E] = SECRET.decode()  # ImageDescription
    exif[0x0131] = SECRET.decode()  # Software
    icc = b"\x00" * 128 + SECRET  # not a valid profile: bytes the encoder copies as they are
    if mime == "image/png":
        info = PngImagePlugin.PngInfo()
        info.add_text("Comment", SECRET.decode())
        info.add_text("Author", SECRET.decode(), zip=True)
        info.add_itxt("Description", SECRET.decode(), lang="en", tkey="d")
        frames[0].save(out, "PNG", pnginfo=info, exif=exif, icc_profile=icc)
    elif mime == "image/jpeg":
        frames[0].save(out, "JPEG", comment=SECRET, exif=exif, icc_profile=icc)
    elif mime == "image/gif":
        frames[0].save(out, "GIF", save_all=animated, append_images=frames[1:], comment=SECRET, duration=120, loop=0)
    else:
        frames[0].save(out, "WEBP", save_all=animated, append_images=frames[1:], exif=exif, icc_profile=icc,
                       xmp=SECRET, duration=120, lossless=True)
    data = out.getvalue()
    assert SECRET in data  # the format itself holds it
    return data


CASES = [(mime, animated) for mime in figures.RASTERS for animated in (False, True)
         if not animated or mime in ("image/gif", "image/webp")]


def _decoded(data: bytes) -> list[Image.Image]:
    from PIL import ImageSequence

    with Image.open(io.BytesIO(data)) as image:
        return [frame.convert("RGB").copy() for frame in ImageSequence.Iterator(image)]


def _assert_pixels_only(mime: str, out: bytes, source: bytes) -> None:
    assert out.startswith(SIGNATURES[mime]), out[:16]
    assert SECRET not in out and b"TRAILING" not in out and b"---" not in out[:64]
    for text in (SECRET, TRAIL):
        assert zlib.compress(text) not in out
    with Image.open(io.BytesIO(out)) as image:
        assert image.format == figures.RASTERS[mime]
        assert not {"comment", "exif", "icc_profile", "xmp", "Comment", "Author", "Description"} & set(image.info)
    got, want = _decoded(out), _decoded(source)
    assert len(got) == len(want) and all(g.size == w.size for g, w in zip(got, want))
    for g, w in zip(got, want):  # the same picture (JPEG within its loss)
        diff = max(abs(a - b) for a, b in zip(g.tobytes(), w.tobytes()))
        assert diff <= (24 if mime == "image/jpeg" else 0), (mime, diff)


@pytest.mark.parametrize("mime, animated", CASES)
@pytest.mark.parametrize("around", ["as-saved", "trailing-bytes"])
def test_a_raster_is_written_again_from_its_pixels_alone(mime, animated, around):
    source = _encode(mime, animated=animated)
    data = source + (TRAIL + SECRET if around == "trailing-bytes" else b"")
    out = figures.reencode(mime, data)
    _assert_pixels_only(mime, out, source)
    assert figures.reencode(mime, out) == out or mime in ("image/jpeg", "image/webp")  # stable where lossless


@pytest.mark.parametrize("mime", [m for m in figures.RASTERS if m != "image/svg+xml"])
def test_a_figure_output_of_any_raster_type_is_published_as_pixels_only(mime):
    source = _encode(mime)
    out = figures.figure_file(mime, base64.b64encode(source + TRAIL).decode(), lambda text: text)
    _assert_pixels_only(mime, out, source)
    assert not records.begins_with_front_matter(out)


def _other_formats() -> dict[str, bytes]:
    image = Image.new("RGB", (8, 8), (10, 20, 30))
    found = {}
    for fmt in ("BMP", "TIFF", "PPM", "TGA", "ICO", "PCX"):
        out = io.BytesIO()
        image.save(out, fmt, **({"description": SECRET.decode()} if fmt == "TIFF" else {}))
        found[fmt] = out.getvalue()
    return found


@pytest.mark.parametrize("fmt", sorted(_other_formats()))
@pytest.mark.parametrize("mime", list(figures.RASTERS))
def test_another_format_under_a_raster_type_is_refused(fmt, mime):
    data = _other_formats()[fmt]
    with pytest.raises(figures.FigureError):
        figures.reencode(mime, data)


@pytest.mark.parametrize("mime", list(figures.RASTERS))
@pytest.mark.parametrize("spoil", ["front-matter-first", "truncated", "empty", "signature-only"])
def test_a_raster_that_cannot_be_decoded_whole_is_refused(mime, spoil):
    data = _encode(mime)
    data = {"front-matter-first": b"---\ntitle: x\n---\n" + data, "truncated": data[:len(data) * 2 // 3],
            "empty": b"", "signature-only": SIGNATURES[mime] + b"\x00" * 8}[spoil]
    with pytest.raises(figures.FigureError):
        figures.reencode(mime, data)


def test_animation_frames_count_against_the_pixel_limit(monkeypatch):
    data = _encode("image/gif", animated=True)
    monkeypatch.setattr(figures, "MAX_PIXELS", 16 * 12 * 2)  # two frames' worth: the third is over
    with pytest.raises(figures.FigureError, match="frames hold more than"):
        figures.reencode("image/gif", data)


# --------------------------------------------------------------------------- the executed notebook download


def _notebook(outputs: list[dict]):
    import nbformat
    from nbformat.v4 import new_code_cell, new_notebook, new_output

    cells = [new_code_cell(f"show({i})", outputs=[new_output("display_data", data=data)]) for i, data in
             enumerate(outputs)]
    return nbformat.from_dict(new_notebook(cells=cells, metadata={"kernelspec": {"name": "python3",
                                                                                 "display_name": "Python 3"}}))


def test_the_executed_notebook_download_holds_its_rasters_as_pixels_only():
    outputs = [{mime: base64.b64encode(_encode(mime, animated=animated) + TRAIL).decode(), "text/plain": "<Figure>"}
               for mime, animated in CASES]
    outputs.append({"image/png": base64.b64encode(b"---\ntitle: x\n---\n").decode(), "text/plain": "<Figure>"})
    outputs.append({"image/jpeg": "not base64 at all!", "text/plain": "<Figure>"})
    text = downloads.scrub_notebook(_notebook(outputs), lambda t: t)
    assert SECRET.decode() not in text and "TRAILING" not in text
    nb = json.loads(text)
    for (mime, animated), cell in zip(CASES, nb["cells"]):
        data = cell["outputs"][0]["data"]
        payload = data[mime] if isinstance(data[mime], str) else "".join(data[mime])
        _assert_pixels_only(mime, base64.b64decode(payload), _encode(mime, animated=animated))
    for cell in nb["cells"][len(CASES):]:  # left out, saying why
        data = cell["outputs"][0]["data"]
        assert not set(data) & set(figures.RASTERS), data
        assert "was left out of this download" in "".join(data["text/plain"])


# --------------------------------------------------------------------------- only a post is a page


FRONT_MATTER_STARTS = [b"---\n", b"---\r\n", b"--- \n", b"\xef\xbb\xbf---\n", b"\n---\n", b"  ---\n"]


@pytest.mark.parametrize("start", FRONT_MATTER_STARTS, ids=repr)
def test_begins_with_front_matter_reads_at_least_what_jekyll_reads(start):
    assert records.begins_with_front_matter(start + b"title: x\n---\nbody\n")


@pytest.mark.parametrize("data", [b"", b"-- \n", b"x---\n", b"\x89PNG\r\n\x1a\n---\n", b"table,section\n---\n"])
def test_a_file_that_is_not_front_matter_is_not_taken_for_it(data):
    assert not records.begins_with_front_matter(data)


def _record() -> dict:
    return {"slug": "hostile-output", "notebook": "n", "profile": "smoke", "executed_at": "2026-11-22T00:00:00+00:00",
            "source_hash": "k", "provenance": {"device": "cpu"}, "metrics": {}}


NAMES = ["figure-1.jpg", "tables.csv", "notes.html", "hostile-output.ipynb", "figure-2.svg", "results.json"]


@pytest.mark.parametrize("start, name", list(zip(FRONT_MATTER_STARTS, NAMES)), ids=repr)
def test_a_post_folder_file_that_begins_with_front_matter_is_refused_and_nothing_changes(tmp_path, start, name):
    site = make_site(tmp_path / "site")
    info, _ = publish.read_notebook_info(ROOT / "tests" / "fixtures" / "hostile" / "00_hostile.py")
    post = "---\nlayout: post\n---\nfirst\n"
    publish.publish(site, info, post, {"figure-1.png": _encode("image/png")}, _record())
    before = {p.relative_to(site).as_posix(): p.read_bytes() for p in sorted(site.rglob("*"))
              if p.is_file() and ".sidebyside" not in p.parts}
    with pytest.raises(publish.PublishError, match=rf"images/{info.slug}/{name} would begin with front matter"):
        publish.publish(site, info, "---\nlayout: post\n---\nsecond\n",
                        {"figure-1.png": _encode("image/png"), name: start + b"title: x\n---\n{{ site }}\n"}, _record())
    after = {p.relative_to(site).as_posix(): p.read_bytes() for p in sorted(site.rglob("*"))
             if p.is_file() and ".sidebyside" not in p.parts}
    assert after == before
    assert not list((site / ".sidebyside").glob("txn-*"))


def test_make_site_check_names_a_page_among_the_images(tmp_path, capsys):
    site = make_site(tmp_path / "site")
    (site / "images" / "another").mkdir(parents=True)
    (site / "images" / "another" / "figure-1.jpg").write_bytes(b"---\ntitle: x\n---\n{{ site.source }}\n")
    hostile = ROOT / "tests" / "fixtures" / "hostile"
    code = publish.list_notebooks(site=site, notebooks=hostile, params_dir=hostile / "params", write_freshness=True)
    err = capsys.readouterr().err
    assert code == 2 and "images/another/figure-1.jpg begins with front matter" in err, err
    assert not (site / "_data" / "freshness.json").exists()


def test_jekyll_runs_in_safe_mode_with_a_fixed_navigation():
    config = yaml.safe_load((ROOT / "_config.yml").read_text())
    assert config["safe"] is True
    assert set(config["plugins"]) <= set(config["whitelist"])
    pages = {p.name for p in ROOT.glob("*.md")} | {p.name for p in ROOT.glob("*.html")}
    assert set(config["header_pages"]) <= pages
    images = [d for d in config["defaults"] if d["scope"]["path"] == "images"]
    assert images and images[0]["values"]["render_with_liquid"] is False


@pytest.mark.slow
def test_a_built_site_runs_no_plugin_and_no_liquid_from_a_figure_folder(tmp_path):
    import shutil

    from test_site import _jekyll

    site = make_site(tmp_path / "site")
    shutil.copy(ROOT / "how-we-measure.md", site)
    (site / "_plugins").mkdir()
    ran = tmp_path / "plugin-ran"
    (site / "_plugins" / "evil.rb").write_text(f'File.write("{ran}", "ran")\n')
    (site / "images" / "x").mkdir(parents=True)
    (site / "images" / "x" / "figure-1.jpg").write_bytes(
        b"---\ntitle: INJECTED-TITLE\n---\nLIQUID:{{ site.source }}:{% include head.html %}\n")
    built = _jekyll(site)
    assert not ran.exists(), "a plugin of _plugins/ ran"
    served = (built / "images" / "x" / "figure-1.jpg").read_text()
    assert "LIQUID:{{ site.source }}" in served and str(site) not in served  # no Liquid ran in it
    home = (built / "index.html").read_text()
    navigation = home[home.index('<div class="trigger">'):]
    navigation = navigation[:navigation.index("</div>")]
    assert "INJECTED-TITLE" not in navigation and "How we measure" in navigation and "Home" in navigation


def test_a_figure_through_the_whole_render_is_pixels_only():
    """The post's figure file and its download, through publish.render."""
    import nbformat

    png = _encode("image/png")
    nb = _notebook([{"image/png": base64.b64encode(png + TRAIL).decode(), "text/plain": "<Figure>"}])
    info = publish.NotebookInfo(ROOT / "tests" / "fixtures" / "hostile" / "00_hostile.py", "hostile-output", "T",
                                "2026-11-01", "D", [])
    record = {**_record(), "provenance": {"device": "cpu", "git_sha": "abc"}}
    _, files = publish.render(nbformat.from_dict(nb), record, info, {"repository": "o/r"}, root=ROOT)
    figure = files["figure-1.png"]
    assert figure.startswith(SIGNATURES["image/png"]) and figure.endswith(b"IEND\xaeB`\x82")  # nothing after IEND
    assert not any(SECRET in payload or b"TRAILING" in payload for payload in files.values())
    assert not any(records.begins_with_front_matter(payload) for payload in files.values())
