"""A post is capped as a whole: its page, its figures and its share of the feed.

The class: parts that each keep to their own cap (an output under the output cap, a
figure under the pixel limit, a Markdown cell of a few kilobytes) but add up, or that
kramdown writes out many times over (an abbreviation or a link definition is repeated at
every use), to a page, a figures folder or a feed entry far larger than any post. The
publisher measures what Jekyll will make of the post (kramdown's own HTML, escaped as
feed.xml writes it) and the post's figure files (:mod:`sidebyside.publish.caps`), and
refuses a post over any cap, naming each cap, by how much, and keeping everything
already published. A post kramdown cannot read at all is refused the same way. Today's
published posts stand far under every cap.
"""

from __future__ import annotations

import re
import shutil

import pytest
from conftest import ROOT, make_site

from sidebyside import publish
from sidebyside.publish import caps
from sidebyside.publish.common import PublishError
from sidebyside.publish.preprocess import OUTPUT_CAP

needs_kramdown = pytest.mark.skipif(shutil.which("ruby") is None, reason="needs Ruby's kramdown (Jekyll's)")
HEAD = "---\nlayout: post\ntitle: T\n---\n\n"


def _record() -> dict:
    return {"slug": "hostile-output", "notebook": "n", "profile": "smoke", "executed_at": "2026-11-22T00:00:00+00:00",
            "source_hash": "k", "provenance": {"device": "cpu", "git_sha": "abc"}, "metrics": {}}


def _info():
    info, _ = publish.read_notebook_info(ROOT / "tests" / "fixtures" / "hostile" / "00_hostile.py")
    return info


def _files(site) -> dict[str, bytes]:
    return {p.relative_to(site).as_posix(): p.read_bytes() for p in sorted(site.rglob("*"))
            if p.is_file() and ".sidebyside" not in p.parts}


def _refused(tmp_path, post: str, images: dict[str, bytes]) -> str:
    """The refusal of publishing ``post`` with ``images`` over a published post, which must stay as it was."""
    site = make_site(tmp_path / "site")
    publish.publish(site, _info(), HEAD + "first\n", {"figure-1.png": b"\x89PNG first"}, _record())
    before = _files(site)
    with pytest.raises(PublishError) as err:
        publish.publish(site, _info(), post, images, _record())
    assert _files(site) == before
    assert not list((site / ".sidebyside").glob("txn-*"))
    return str(err.value)


# --------------------------------------------------------------------------- the amplifiers


def _abbreviations(n: int) -> str:
    return HEAD + f"*[a]: {'t' * 4000}\n\n" + "a " * n + "\n"


def _references(n: int) -> str:
    return HEAD + f"[r]: https://example.org/{'u' * 4000}\n\n" + "[x][r] " * n + "\n"


def _outputs(n: int, line: str = "x") -> str:
    block = "\n".join([line * (80 // len(line))] * (OUTPUT_CAP // 81))  # an output at the output cap, fenced
    return HEAD + "".join(f"```text\n{block}\n```\n\n" for _ in range(n))


AMPLIFIERS = {
    "abbreviations": (_abbreviations(1_000), {"page", "feed"}),
    "link-definitions": (_references(1_000), {"page", "feed"}),
    "outputs-each-under-their-cap": (_outputs(11), {"page"}),
    "escaped-outputs": (_outputs(2, "<&"), {"feed"}),  # the feed writes each &lt; again as &amp;lt;
}
WHAT = {"page": "its page", "figures": "its figures", "feed": "its share of feed.xml"}


@needs_kramdown
@pytest.mark.parametrize("name", sorted(AMPLIFIERS))
def test_a_post_over_a_cap_is_refused_naming_each_cap_and_by_how_much(tmp_path, name):
    post, over = AMPLIFIERS[name]
    assert len(post.encode()) < 4 * caps.MAX_PAGE_BYTES
    said = _refused(tmp_path, post, {"figure-1.png": b"\x89PNG"})
    assert "the post is over its caps" in said and "Nothing published was changed" in said
    for cap in ("page", "figures", "feed"):
        named = f"\n  {WHAT[cap]} (" in said
        assert named == (cap in over), (cap, said)
    for line in said.splitlines()[1:1 + len(over)]:
        assert re.search(r": \d+\.\d MB, \d+ KB over the cap of \d\.0 MB$|: \d+\.\d MB, \d+\.\d MB over", line), line


def test_many_figures_each_within_their_limits_are_capped_together(tmp_path):
    figure = b"\x89PNG" + b"\x00" * 399_000  # each under the 400 KB a PNG figure may take
    n = caps.MAX_FIGURE_BYTES // len(figure) + 1
    images = {f"figure-{i}.png": figure for i in range(n)}
    images["weights.ipynb"] = b"{}" * 5_000_000  # a download: not a figure
    said = _refused(tmp_path, HEAD + "x\n", images)
    over = n * len(figure) - caps.MAX_FIGURE_BYTES
    assert f"its figures (the figure files of its images folder): {n * len(figure) / 1e6:.1f} MB, " in said
    assert f", {over / 1e3:.0f} KB over the cap of 10.0 MB" in said, said
    assert "its page" not in said


def test_a_post_at_its_caps_is_published(tmp_path, monkeypatch):
    post = HEAD + "x\n"
    sizes = caps.measure(post)
    monkeypatch.setattr(caps, "MAX_PAGE_BYTES", sizes["page"])
    monkeypatch.setattr(caps, "MAX_FEED_BYTES", sizes["feed"])
    monkeypatch.setattr(caps, "MAX_FIGURE_BYTES", 10)
    site = make_site(tmp_path / "site")
    publish.publish(site, _info(), post, {"a.png": b"0123456789", "tables.csv": b"x" * 100}, _record())
    with pytest.raises(PublishError, match=r"its figures .*: 11 bytes, 1 bytes over the cap of 10 bytes"):
        publish.publish(site, _info(), post, {"a.png": b"01234567890"}, _record())
    with pytest.raises(PublishError, match=r"its page .*1 bytes over the cap"):
        publish.publish(site, _info(), post.replace("x", "xy"), {"a.png": b"0"}, _record())


@needs_kramdown
@pytest.mark.parametrize("markup", ["<div>" * 3_000 + "x" + "</div>" * 3_000, "<span>" * 5_000 + "x"],
                         ids=["closed", "unclosed"])
def test_a_post_kramdown_cannot_read_is_refused(tmp_path, markup):
    """The notebook's own Markdown cells reach kramdown as they are, raw HTML included: past about
    1,500 levels its parser overflows Ruby's stack, and Jekyll would stop."""
    said = _refused(tmp_path, HEAD + "text\n\n" + markup + "\n", {"a.png": b"x"})
    assert "kramdown (Jekyll's Markdown reader) fails on the post (SystemStackError" in said, said


def test_without_ruby_the_markdown_is_counted_and_said_so(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(caps.shutil, "which", lambda name: None)
    sizes = caps.measure(HEAD + "a <b> & c\n")
    assert sizes == {"page": len("a <b> & c"), "feed": len("a &lt;b&gt; &amp; c")}
    assert "kramdown is not installed here" in capsys.readouterr().err
    said = _refused(tmp_path, _outputs(11), {"a.png": b"x"})
    assert "its page (" in said


@pytest.mark.slow  # runs kramdown on the three largest published posts (2 s)
@needs_kramdown
def test_the_published_posts_stand_far_under_every_cap():
    posts = sorted((ROOT / "_posts").glob("*.md"), key=lambda p: p.stat().st_size)
    assert posts
    for path in posts:
        slug = path.stem[11:]
        figures = sum(p.stat().st_size for p in (ROOT / "images" / slug).iterdir()
                      if p.name.lower().endswith(caps.FIGURE_SUFFIXES))
        assert 5 * figures < caps.MAX_FIGURE_BYTES, (slug, figures)
    for path in posts[-3:]:  # the three largest (kramdown takes a second each)
        sizes = caps.measure(path.read_text(encoding="utf-8"))
        assert 5 * sizes["page"] < caps.MAX_PAGE_BYTES, (path.name, sizes)
        assert 5 * sizes["feed"] < caps.MAX_FEED_BYTES, (path.name, sizes)


@needs_kramdown
def test_a_rendered_notebook_of_outputs_each_under_the_output_cap_is_refused(tmp_path):
    """The same class through the whole render: twelve outputs, each at the output cap."""
    import nbformat
    from nbformat.v4 import new_code_cell, new_notebook, new_output

    text = "\n".join(["y" * 79] * (OUTPUT_CAP // 80))
    nb = new_notebook(cells=[new_code_cell(f"print({i})", outputs=[new_output("stream", name="stdout", text=text)])
                             for i in range(12)], metadata={"kernelspec": {"name": "python3", "display_name": "P"}})
    info = publish.NotebookInfo(ROOT / "tests" / "fixtures" / "hostile" / "00_hostile.py", "hostile-output", "T",
                                "2026-11-01", "D", [])
    post, files = publish.render(nbformat.from_dict(nb), _record(), info, {"repository": "o/r"}, root=ROOT)
    said = _refused(tmp_path, post, files)
    assert re.search(r"its page \(the HTML its body renders to\): 2\.\d MB, \d+ KB over the cap of 2\.0 MB", said), said
