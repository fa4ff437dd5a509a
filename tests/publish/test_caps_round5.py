"""Hostile input the publisher takes from a run, class by class: a named refusal or a visible cut.

The classes: files that are not regular files (a FIFO, a symbolic link, a device, a hard link to a
file elsewhere) where the publisher reads a post's files, or where the site serves them; an output
stream far over its cap (cut with a marker before the notebook becomes the download and the page);
an image, a record, a file count or a whole post over its cap (:mod:`sidebyside.publish.caps`);
a record nested deeper than a parser can recurse; a header whose slug, title, description, tags
or date hold a line break or a control character after YAML parsing (a block scalar ``|``, a
quoted ``\\n``). Each refusal names the cap, the size found and the limit, and nothing already
published changes. Benign payloads only; every site is a scratch site under ``tmp_path``.
"""

from __future__ import annotations

import base64
import io
import json
import os
import re

import nbformat
import pytest
from conftest import ROOT, make_site
from nbformat.v4 import new_code_cell, new_notebook, new_output

from sidebyside import publish
from sidebyside.publish import caps, discovery, downloads, records
from sidebyside.publish.common import PublishError

HEAD = "---\nlayout: post\ntitle: T\n---\n\n"
SLUG = "hostile-output"


def _record(**metrics) -> dict:
    return {
        "slug": SLUG,
        "notebook": "n",
        "profile": "smoke",
        "executed_at": "2026-11-22T00:00:00+00:00",
        "source_hash": "k",
        "provenance": {"device": "cpu", "git_sha": "abc"},
        "metrics": metrics,
    }


def _info():
    return publish.notebook_info(ROOT / "tests" / "fixtures" / "hostile" / "00_hostile.py")


def _files(site) -> dict[str, bytes]:
    return {
        p.relative_to(site).as_posix(): p.read_bytes()
        for p in sorted(site.rglob("*"))
        if p.is_file() and not p.is_symlink() and ".sidebyside" not in p.parts
    }


@pytest.fixture
def published(tmp_path):
    """A scratch site with one post published."""
    site = make_site(tmp_path / "site")
    publish.publish(site, _info(), HEAD + "first\n", {"figure-1.png": b"\x89PNG first"}, _record())
    return site


def _refused(site, post: str, images: dict[str, bytes], record: dict | None = None) -> str:
    """The refusal of publishing over ``site``'s post, which must stay as it was."""
    before = _files(site)
    with pytest.raises(PublishError) as err:
        publish.publish(site, _info(), post, images, record or _record())
    assert _files(site) == before
    assert not list((site / ".sidebyside").glob("txn-*"))
    return str(err.value)


# -------------------- files that are not regular files


def _fifo(path, tmp_path):
    os.mkfifo(path)


def _symlink(path, tmp_path):
    outside = tmp_path / "outside.txt"
    outside.write_text("a file outside the site")
    path.symlink_to(outside)


def _hard_link(path, tmp_path):
    outside = tmp_path / "outside.png"
    outside.write_bytes(b"\x89PNG outside")
    os.link(outside, path)


def _folder(path, tmp_path):
    path.mkdir()


SPECIAL = {
    "fifo": (_fifo, "a FIFO"),
    "symlink": (_symlink, "a symbolic link"),
    "hard-link": (_hard_link, "2 hard links"),
    "folder": (_folder, "a folder"),
}


@pytest.mark.parametrize("kind", sorted(SPECIAL))
def test_a_special_file_in_a_posts_folder_is_refused_by_name_never_read(published, tmp_path, kind):
    make, said = SPECIAL[kind]
    make(published / "images" / SLUG / "gpu.figure.png", tmp_path)
    message = _refused(published, HEAD + "second\n", {"figure-1.png": b"\x89PNG second"})
    assert f"images/{SLUG}/gpu.figure.png" in message and said in message, message


def test_read_regular_reads_a_regular_file_and_refuses_a_device_and_a_large_one(tmp_path):
    good = tmp_path / "a.png"
    good.write_bytes(b"12345")
    assert caps.read_regular(good) == b"12345"
    with pytest.raises(PublishError, match=r"is 5 bytes, over the cap of 4 bytes"):
        caps.read_regular(good, cap=4)
    with pytest.raises(PublishError, match=r"/dev/null is a character device, not a regular file"):
        caps.read_regular("/dev/null")


def test_the_site_check_names_every_entry_jekyll_would_block_on_or_serve_from_elsewhere(tmp_path):
    site = make_site(tmp_path / "site")
    (site / "images" / SLUG).mkdir(parents=True)
    os.mkfifo(site / "images" / SLUG / "pipe.png")
    outside = tmp_path / "outside.css"
    outside.write_text("body {}")
    os.link(outside, site / "assets" / "linked.css")
    (site / "_posts").mkdir(exist_ok=True)
    (site / "_posts" / "2026-01-01-x.md").symlink_to(outside)
    assert caps.unservable(site) == [
        "_posts/2026-01-01-x.md: a symbolic link",
        "assets/linked.css: a file with 2 hard links",
        f"images/{SLUG}/pipe.png: a FIFO",
    ]
    assert caps.unservable(make_site(tmp_path / "clean")) == []


def test_make_sites_check_fails_on_a_fifo_in_a_posts_folder(published, capsys):
    os.mkfifo(published / "images" / SLUG / "pipe.png")
    hostile = ROOT / "tests" / "fixtures" / "hostile"
    code = publish.list_notebooks(site=published, notebooks=hostile, params_dir=hostile / "params",
                                  write_freshness=True)
    err = capsys.readouterr().err
    assert code == 2 and f"images/{SLUG}/pipe.png: a FIFO: Jekyll would block on it" in err, err
    assert not (published / "_data" / "freshness.json").exists()


# -------------------- output streams, cut before publishing


def _printing(chunks: int, size: int, *, figure: bytes | None = None):
    outputs = [
        new_output("stream", name="stdout", text=f"{i:06d}" + "x" * (size - 7) + "\n")
        for i in range(chunks)
    ]
    if figure is not None:
        outputs.append(
            new_output(
                "display_data",
                data={"image/png": base64.b64encode(figure).decode(), "text/plain": "<Figure>"},
            )
        )
    nb = new_notebook(
        cells=[new_code_cell("for i in range(n): print(i)", outputs=outputs)],
        metadata={"kernelspec": {"name": "python3", "display_name": "P"}},
    )
    return nbformat.from_dict(nb)


def test_an_over_long_stream_is_cut_with_a_marker_in_the_download(monkeypatch):
    nb = _printing(3_000, 1_000)  # 3 MB printed, in 3,000 chunks of one stream
    text = downloads.scrub_notebook(nb, lambda t: t, slug=SLUG)
    assert len(text) < caps.MAX_STREAM_CHARS + 20_000, len(text)  # a line break is written "\\n"
    stream = nbformat.reads(text, as_version=4).cells[0].outputs
    assert len(stream) == 1 and len(stream[0].text) <= caps.MAX_STREAM_CHARS
    cut = 3_000 * 1_000 - len(stream[0].text.split("\n[...")[0])
    assert stream[0].text.endswith(f"\n[... {cut} characters cut by the publisher ...]\n")
    assert len(nb.cells[0].outputs) == 3_000  # the notebook given is not changed


def test_the_page_and_the_download_are_cut_from_the_same_stream(monkeypatch):
    monkeypatch.setattr(caps, "MAX_STREAM_CHARS", 20_000)
    info = publish.NotebookInfo(
        ROOT / "tests" / "fixtures" / "hostile" / "00_hostile.py", SLUG, "T", "2026-11-01", "D", []
    )
    post, files = publish.render(
        _printing(100, 1_000), _record(), info, {"repository": "o/r"}, root=ROOT
    )
    marker = re.compile(r"\[\.\.\. (\d+) characters cut by the publisher \.\.\.\]")
    on_page, in_download = marker.search(post), marker.search(files[f"{SLUG}.ipynb"].decode())
    assert on_page and in_download and on_page.group(1) == in_download.group(1), (
        on_page,
        in_download,
    )
    assert int(on_page.group(1)) > 79_000 and "000099" not in post


def test_cutting_is_idempotent_and_keeps_what_is_under_the_cap():
    assert caps.cut_text("short", 10) == "short"
    once = caps.cut_text("y" * 500, 100)
    assert len(once) <= 100 and caps.cut_text(once, 100) == once and "400 characters" not in once
    assert once.endswith(" characters cut by the publisher ...]\n")


# -------------------- figures, files, the whole post


def _noise_png(side: int) -> bytes:
    from PIL import Image

    buffer = io.BytesIO()
    Image.frombytes("RGB", (side, side), os.urandom(side * side * 3)).save(buffer, format="PNG")
    return buffer.getvalue()


def test_an_image_over_the_figure_cap_refuses_the_download_naming_the_cap(monkeypatch):
    monkeypatch.setattr(caps, "MAX_FIGURE_FILE_BYTES", 20_000)
    with pytest.raises(
        PublishError,
        match=r"hostile-output: a figure \(image/png\) of its executed notebook, the "
        r"download is \d[\d,]+ bytes, over the cap of 20,000 bytes",
    ):
        downloads.scrub_notebook(_printing(1, 10, figure=_noise_png(128)), lambda t: t, slug=SLUG)
    downloads.scrub_notebook(
        _printing(1, 10, figure=_noise_png(16)), lambda t: t, slug=SLUG
    )  # under it


def test_a_figure_file_over_its_cap_is_refused(published, monkeypatch):
    monkeypatch.setattr(caps, "MAX_FIGURE_FILE_BYTES", 1_000)
    said = _refused(
        published, HEAD + "x\n", {"big.png": b"\x89PNG" + b"0" * 1_500, "tables.csv": b"1" * 5_000}
    )
    assert f"the figure images/{SLUG}/big.png is 2 KB, over the cap of 1 KB" in said, said


def test_ten_thousand_figures_are_refused_by_their_count(published):
    images = {f"figure-{i}.png": b"\x89PNG" for i in range(10_000)}
    said = _refused(published, HEAD + "x\n", images)
    assert (
        f"the file count of images/{SLUG}/ is 10,000 files, over the cap of {caps.MAX_FILES} files"
        in said
    )


def test_a_post_over_its_total_size_is_refused(published, monkeypatch):
    monkeypatch.setattr(caps, "MAX_POST_BYTES", 100_000)
    said = _refused(
        published, HEAD + "x\n", {"figure-1.png": b"\x89PNG", f"{SLUG}.ipynb": b"{}" * 60_000}
    )
    assert (
        "the post with its files (its Markdown, figures and downloads) is 120 KB, "
        "over the cap of 100 KB"
        in said
    )


@pytest.mark.parametrize("name", ["../escape.png", "a b.png", "run.sh", ".hidden.png", "x.png\n"])
def test_a_file_a_post_does_not_hold_is_refused(published, name):
    said = _refused(published, HEAD + "x\n", {name: b"\x89PNG"})
    assert "not a file a post holds" in said, said


# -------------------- records


def _nested(depth: int):
    value: object = 1
    for _ in range(depth):
        value = {"a": value}
    return value


def test_a_record_over_its_size_is_refused_never_published_whole(published):
    record = _record(blob="x" * (caps.MAX_RECORD_BYTES + 1_000))
    said = _refused(published, HEAD + "x\n", {"a.png": b"x"}, record)
    assert "its results record is 5.0 MB, over the cap of 5.0 MB" in said, said


@pytest.mark.parametrize("depth", [caps.MAX_RECORD_DEPTH, 3_000, 100_000])
def test_a_record_nested_deep_is_a_named_refusal_not_a_recursion_error(published, depth):
    said = _refused(published, HEAD + "x\n", {"a.png": b"x"}, _record(deep=_nested(depth)))
    assert (
        "the nesting of its results record is deeper than that, over the cap of 64 levels" in said
    ), said


def test_a_record_just_under_the_depth_cap_is_published(published):
    publish.publish(
        published,
        _info(),
        HEAD + "x\n",
        {"a.png": b"x"},
        _record(deep=_nested(caps.MAX_RECORD_DEPTH - 3)),
    )


@pytest.mark.parametrize("depth", [3_000, 1_000_000])
def test_a_run_record_file_nested_deep_is_counted_before_it_is_parsed(tmp_path, depth):
    path = tmp_path / "r.json"
    path.write_text('{"slug": "s", "x": ' + "[" * depth + "]" * depth + "}")
    with pytest.raises(
        PublishError, match=rf"s: the nesting of its results record is {depth + 1} levels, over"
    ):
        records.load_record(path, "s")
    path.write_text(
        json.dumps({"slug": "s", "x": '"[[[[' * 100})
    )  # brackets in a string do not count
    assert records.load_record(path, "s")["slug"] == "s"


def test_a_run_record_file_over_its_size_or_not_a_file_is_refused(tmp_path, monkeypatch):
    path = tmp_path / "r.json"
    path.write_text(json.dumps({"blob": "x" * 2_000}))
    monkeypatch.setattr(caps, "MAX_RECORD_BYTES", 1_000)
    with pytest.raises(
        PublishError,
        match=r"s: its results record \(r.json\) is 2,\d\d\d bytes, over the cap of "
        r"1,000 bytes",
    ):
        records.load_record(path, "s")
    path.unlink()
    os.mkfifo(path)
    with pytest.raises(PublishError, match="is a FIFO, not a regular file"):
        records.load_record(path, "s")


def test_json_depth_counts_without_recursion():
    assert caps.json_depth("1") == 0 and caps.json_depth('{"a": [1, {"b": "]]]"}]}') == 3
    assert caps.json_depth(b'["\\"[", []]') == 2
    assert caps.value_depth(_nested(10)) == 10 and caps.value_depth(_nested(10_000), limit=5) == 6


# -------------------- headers, matched whole after YAML


def _notebook(tmp_path, field: str, yaml_value: str):
    """The fixture notebook with one field of its header written as ``yaml_value`` (YAML lines)."""
    source = (ROOT / "tests" / "fixtures" / "notebooks" / "00_fixture.py").read_text(
        encoding="utf-8"
    )
    lines = [f"#     {line}" for line in f"{field}: {yaml_value}".split("\n")]
    source, n = re.subn(
        rf"^#     {field}: .*$", lambda _: "\n".join(lines), source, count=1, flags=re.M
    )
    assert n == 1
    path = tmp_path / "notebooks" / "00_fixture.py"
    path.parent.mkdir(exist_ok=True)
    path.write_text(source, encoding="utf-8")
    return path


HOSTILE_HEADERS = {
    "slug-block-scalar": ("slug", "|\n  xla-and-scipy"),
    "slug-trailing-newline": ("slug", '"xla-and-scipy\\n"'),
    "slug-control": ("slug", '"xla-and\\x07-scipy"'),
    "slug-not-text": ("slug", "[a, b]"),
    "title-block-scalar": ("title", "|\n  A title"),
    "title-folded-scalar": ("title", ">\n  A title\n  on two lines"),
    "title-escape": ("title", '"A \\e[31mred\\e[0m title"'),
    "title-bidi": ("title", '"A \\u202etitle"'),
    "title-blank-end": ("title", '"A title "'),
    "description-block-scalar": ("description", "|\n  One sentence."),
    "description-line-separator": ("description", '"One\\u2028sentence."'),
    "description-nul": ("description", '"One\\0 sentence."'),
    "tags-newline": ("tags", '["jax\\n", pytorch]'),
    "tags-control": ("tags", '["ja\\x1bx"]'),
    "tags-not-a-list": ("tags", "jax"),
    "tags-too-many": ("tags", "[" + ", ".join(f"t{i}" for i in range(21)) + "]"),
    "date-block-scalar": ("date", "|\n  2026-11-22"),
    "date-trailing-newline": ("date", '"2026-11-22\\n"'),
    "date-compact": ("date", "'20261122'"),
    "date-week": ("date", "'2026-W47-1'"),
    "date-time": ("date", "2026-11-22 10:00:00"),
    "date-control": ("date", '"2026-11-22\\x00"'),
}


@pytest.mark.parametrize("case", sorted(HOSTILE_HEADERS))
def test_a_header_field_with_a_line_break_or_a_control_is_refused(tmp_path, case):
    field, value = HOSTILE_HEADERS[case]
    with pytest.raises(PublishError) as err:
        publish.notebook_info(_notebook(tmp_path, field, value))
    said = str(err.value)
    assert f"header's {field}" in said or f"{field} " in said.split(": ", 1)[1][:30], said
    assert "00_fixture.py" in said


@pytest.mark.parametrize(
    "field, value",
    [
        ("slug", "xla-and-scipy"),
        ("title", "'A title: with <b>markup</b>'"),
        ("description", ">-\n  One sentence\n  on two lines."),
        ("date", "2026-11-22"),
        ("tags", "[jax, torch.compile, grid_sample]"),
    ],
)
def test_a_header_field_written_well_is_read(tmp_path, field, value):
    info = publish.notebook_info(_notebook(tmp_path, field, value))
    assert info.date == "2026-11-22" and info.description


def test_the_slug_pattern_matches_whole():
    assert discovery.SLUG_RE.fullmatch("xla-and-scipy")
    assert not discovery.SLUG_RE.match("xla-and-scipy\n") and not discovery.SLUG_RE.search(
        "xla-and-scipy\n"
    )
