"""Reproductions from readers' hardware: the file every `make reproduce` writes, the one reader that
checks them (size, nesting, types, outcomes, finite numbers, string lengths, name), the summary the
pages read (never a refused file), and a real Jekyll build that escapes what a file says."""

from __future__ import annotations

import json
import os

import pytest
from conftest import make_site
from test_reproduce import EPYC, OTHER, PUBLISHED, READER, SLUG, ZEN2, _record

from sidebyside.publish import frontpage
from sidebyside.publish import reproduce as rep
from sidebyside.publish import reproductions as rp
from sidebyside.publish.common import PublishError
from sidebyside.publish.reproductions import ReproductionRefused


def _value(device=OTHER, cpu=None):
    """The reproduction file of the reader's run on ``device`` against :data:`PUBLISHED`."""
    mine = _record(device, READER, cpu=cpu)
    return rp.build(SLUG, PUBLISHED, mine, rep.compare(PUBLISHED, mine))


def _site(tmp_path):
    """A site with the post published (its results record) and no reproduction yet."""
    site = tmp_path / "site"
    (site / "_data" / "results").mkdir(parents=True)
    (site / "_data" / "results" / f"{SLUG}.json").write_text(json.dumps(PUBLISHED))
    return site


def test_the_file_states_the_machine_versions_profile_and_each_verdict(tmp_path):
    value = _value()
    path = rp.write(tmp_path, value)
    short = rp.short_fingerprint({"cpu": ZEN2, "gpu": None})
    assert path == tmp_path / "reproductions" / SLUG / f"2026-11-24-{short}.json"
    back = rp.read(path, SLUG)
    assert back == value and back["profile"] == "cpu" and back["hardware"] == OTHER
    assert set(back["versions"]) == set(rp.VERSIONS) and back["fingerprint"]["cpu"]["family"] == 23
    outcomes = {v["question"]: v["outcome"] for v in back["verdicts"]}
    assert outcomes == {"held": "reproduces", "turned": "contradicts", "shrank": "contradicts",
                        "gone": "not measured"}
    held = back["verdicts"][0]
    assert held["published"]["ratio"] == pytest.approx(3.0)
    assert len(held["measured"]["interval"]) == 2 and back["verdicts"][3]["measured"] is None
    assert held["id"] == PUBLISHED["metrics"]["verdicts"][1]["id"]


def test_a_second_file_of_the_same_day_and_machine_takes_a_suffix_and_replaces_nothing(tmp_path):
    first = rp.write(tmp_path, _value())
    before = first.read_bytes()
    second, third = rp.write(tmp_path, _value()), rp.write(tmp_path, _value())
    assert second.name == first.name[:-5] + "-2.json" and third.name == first.name[:-5] + "-3.json"
    assert first.read_bytes() == before and rp.read(third, SLUG)["slug"] == SLUG


def test_make_reproduce_writes_the_file_on_any_hardware_and_prints_its_path(tmp_path, monkeypatch,
                                                                            capsys):
    site = _site(tmp_path)

    def fake_run(**kwargs):
        out = kwargs["site"] / "_data" / "results" / f"{SLUG}.json"
        out.parent.mkdir(parents=True)
        out.write_text(json.dumps(_record(OTHER, READER)))
        return 0

    monkeypatch.setattr("sidebyside.publish.pipeline.run", fake_run)
    # other hardware: reported, not failed
    assert rep.reproduce(only=SLUG, site=site, scratch=tmp_path / "scratch") == 0
    (written,) = (site / "reproductions" / SLUG).iterdir()
    assert f"this comparison is written to {written}" in capsys.readouterr().out
    assert rp.read(written, SLUG)["verdicts"][1]["outcome"] == "contradicts"


def _put(site, name, text):
    folder = site / "reproductions" / SLUG
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_text(text, encoding="utf-8")
    return folder / name


NAME = "2026-11-24-unknown.json"


def _as(change):
    """A valid file's text after ``change(value)`` (fingerprint unknown: its name is fixed)."""
    value = _value(cpu="unknown")
    change(value)
    return json.dumps(value)


def _marked():
    """A valid file's text with one ratio 12345.5, for a test to replace."""
    return _as(lambda v: v["verdicts"][0]["published"].update(ratio=12345.5))


BAD = {
    "oversized": ("over the cap", lambda: _as(lambda v: None) + " " * rp.MAX_BYTES),
    "a ratio as text": ("ratio", lambda: _as(
        lambda v: v["verdicts"][0]["published"].update(ratio="3.0"))),
    "an unknown outcome": ("outcome", lambda: _as(
        lambda v: v["verdicts"][0].update(outcome="proves us wrong"))),
    "a field more": ("Additional properties", lambda: _as(lambda v: v.update(note="hi"))),
    "a long string": ("is too long", lambda: _as(lambda v: v.update(hardware="x" * 201))),
    "a control character": ("control character", lambda: _as(
        lambda v: v.update(hardware="a\x1b[2Jb"))),
    "no number": ("finite numbers", lambda: _marked().replace("12345.5", "NaN")),
    "an infinite number": ("not finite", lambda: _marked().replace("12345.5", "1e999")),
    "deeply nested": ("nests", lambda: _as(lambda v: None)[:-1] + ', "x": ' + "[" * 5000
                      + "]" * 5000 + "}"),
    "another post's": ("says slug", lambda: _as(lambda v: v.update(slug="swin-transformer-v2"))),
    "a list": (r'\$: is not of type "object"', lambda: "[]"),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_the_reader_refuses_by_name_and_never_with_a_traceback(tmp_path, case):
    why, text = BAD[case]
    path = _put(tmp_path, NAME, text())
    with pytest.raises(ReproductionRefused, match=why) as refused:
        rp.read(path, SLUG)
    assert str(refused.value).startswith(f"reproductions/{SLUG}/'{NAME}' is refused: ")


def test_a_file_misnamed_linked_or_of_a_forged_fingerprint_is_refused(tmp_path):
    good = _put(tmp_path, NAME, _as(lambda v: None))
    assert rp.read(good, SLUG)["short_fingerprint"] == "unknown"
    with pytest.raises(ReproductionRefused, match="its name is not"):
        rp.read(_put(tmp_path, "../../evil.json", "{}"), SLUG)
    os.symlink(good, good.with_name("2026-11-25-unknown.json"))
    with pytest.raises(ReproductionRefused, match="symbolic link"):
        rp.read(good.with_name("2026-11-25-unknown.json"), SLUG)
    forged = _value()
    forged["short_fingerprint"] = "0123456789ab"
    with pytest.raises(ReproductionRefused, match="not the digest"):
        rp.read(_put(tmp_path, "2026-11-24-0123456789ab.json", json.dumps(forged)), SLUG)
    with pytest.raises(PublishError, match="would be refused"):  # make reproduce writes none
        rp.write(tmp_path, forged)


def test_the_summary_holds_only_accepted_files_of_other_hardware_and_counts_the_rest(tmp_path,
                                                                                     capsys):
    site = _site(tmp_path)
    accepted = rp.write(site, _value())
    rp.write(site, _value(device=EPYC))  # the published run's own fingerprint
    for n, case in enumerate(sorted(BAD)):
        _put(site, f"2026-11-{n + 1:02d}-unknown-9.json", BAD[case][1]())
    (site / "reproductions" / "no-such-post").mkdir()
    path = rp.write_summary(site)
    found = json.loads(path.read_text(encoding="utf-8"))["posts"][SLUG]
    assert [r["file"] for r in found["rows"]] == [f"reproductions/{SLUG}/{accepted.name}"]
    assert found["other_hardware"] == 1 and found["same_fingerprint"] == 1
    assert found["refused"] == len(BAD)
    row = found["rows"][0]
    assert (row["reproduces"], row["contradicts"], row["not_measured"]) == (1, 2, 1)
    assert row["same_version"]
    assert row["versions"] == "" and row["hardware"] == OTHER and row["same_fingerprint"] is False
    err = capsys.readouterr().err
    assert err.count("is refused") == len(BAD) + 1 and "no published post has that slug" in err
    assert "Traceback" not in err


def test_a_post_s_files_are_read_up_to_the_cap(tmp_path, monkeypatch):
    site = _site(tmp_path)
    for _ in range(3):
        rp.write(site, _value())
    monkeypatch.setattr(rp, "MAX_PER_POST", 2)
    found, refused = rp.summary(site)
    assert found["posts"][SLUG]["other_hardware"] == 2 and refused == [
        f"reproductions/{SLUG}/ holds 3 files, over the cap of 2: the 1 last by name are refused"]


def test_the_page_escapes_what_a_file_says_and_the_home_page_counts_it(tmp_path):
    """A real Jekyll build of a post with one reproduction whose hardware is a script: escaped."""
    from test_site import _jekyll

    site = make_site(tmp_path / "site")
    (site / "_data" / "results").mkdir(parents=True)
    (site / "_data" / "results" / f"{SLUG}.json").write_text(json.dumps(PUBLISHED))
    value = _value()
    value["hardware"] = '<script>document.title="PWNED"</script>'
    rp.write(site, value)
    (site / "_posts").mkdir()
    (site / "_posts" / f"2026-11-24-{SLUG}.md").write_text(
        f"---\nlayout: post\ntitle: t\nslug: {SLUG}\ndate: 2026-11-24\n---\nbody\n")
    rp.write_summary(site)
    frontpage.write_board(site, {SLUG: "current"}, set())
    built = _jekyll(site)
    page = (built / "posts" / SLUG / "index.html").read_text()
    assert "&lt;script&gt;document.title=&quot;PWNED&quot;&lt;/script&gt;" in page
    home = (built / "index.html").read_text()
    assert "<script>document.title" not in page and "PWNED" not in home
    assert ("Reproductions from other hardware: 1 (1 verdicts reproduce, 0 consistent, "
            "2 contradicted)") in page
    assert f"/blob/main/reproductions/{SLUG}/" in page
    assert "1 reproduction from other hardware" in home
    assert not (built / "reproductions").exists()  # the raw files are never served
    (site / "_data" / "reproductions_summary.json").write_text('{"posts": {}}')
    page = (_jekyll(site) / "posts" / SLUG / "index.html").read_text()
    assert "No reproductions from other hardware yet." in page
    assert f"make reproduce ONLY={SLUG}" in page
