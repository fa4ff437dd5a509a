"""The states a site can be left in (an unfinished publication, files missing), as ``list``,
``execute`` and what ``make site`` runs report them, and a real publication's manifest."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import ROOT, make_site

from sidebyside import publish
from sidebyside.publish import state

HOSTILE = ROOT / "tests" / "fixtures" / "hostile"
SLUG = "hostile-output"



def _whole_site(tmp_path: Path) -> tuple[Path, publish.NotebookInfo, dict]:
    """A site holding one complete publication of the hostile fixture (its manifest included)."""
    site = make_site(tmp_path / "site")
    info, _ = publish.read_notebook_info(HOSTILE / "00_hostile.py")
    record = {"slug": SLUG, "notebook": "n", "profile": "smoke", "executed_at": "2026-11-22T00:00:00+00:00",
              "source_hash": "k", "provenance": {"device": "cpu"}, "metrics": {}}
    files = {"figure-1.png": b"png" * 10, "figure-2.svg": b"<svg/>", "results.json": b"{}",
             f"{SLUG}.ipynb": b"{}"}
    post_name = f"{info.date}-{SLUG}.md"
    files[state.MANIFEST] = state.manifest(SLUG, post_name, files, record)
    publish.publish(site, info, f"---\nlayout: post\n---\n![a](../../images/{SLUG}/figure-1.png)\n", files, record)
    return site, info, record


def _list(site: Path, capsys, *, freshness: bool = False) -> tuple[int, str, str]:
    code = publish.list_notebooks(site=site, notebooks=HOSTILE, params_dir=HOSTILE / "params",
                                  write_freshness=freshness)
    out = capsys.readouterr()
    return code, out.out, out.err


def _execute(site: Path, tmp_path: Path) -> None:
    publish.run(profile="smoke", site=site, build=tmp_path / "build", notebooks=HOSTILE,
                params_dir=HOSTILE / "params", progress=False, dry_run=True)


def _break_folder(site):
    import shutil

    shutil.rmtree(site / "images" / SLUG)
    return f"images/{SLUG}/ (its figures and downloads) is missing"


def _break_file(site):
    (site / "images" / SLUG / "figure-2.svg").unlink()
    return f"images/{SLUG}/figure-2.svg"


def _break_truncated(site):
    (site / "images" / SLUG / "figure-1.png").write_bytes(b"png")
    return f"images/{SLUG}/figure-1.png (its 3 bytes, not the 30 published"


def _break_download(site):
    (site / "images" / SLUG / f"{SLUG}.ipynb").unlink()
    return f"images/{SLUG}/{SLUG}.ipynb"


def _break_post(site):
    next((site / "_posts").glob(f"*-{SLUG}.md")).unlink()
    return f"_posts/2026-11-01-{SLUG}.md"


def _break_results_of_another_run(site):
    path = site / "_data" / "results" / f"{SLUG}.json"
    record = json.loads(path.read_text())
    path.write_text(json.dumps({**record, "executed_at": "2026-11-23T00:00:00+00:00"}))
    return "they come from two publications"


def _break_legacy(site):
    """A publication from before the manifest: the figures its post links are checked."""
    (site / "images" / SLUG / state.MANIFEST).unlink()
    (site / "images" / SLUG / "figure-1.png").unlink()
    return f"images/{SLUG}/figure-1.png"


BREAKS = [_break_folder, _break_file, _break_truncated, _break_download, _break_post, _break_results_of_another_run,
          _break_legacy]


def test_a_whole_site_lists_cleanly(tmp_path, capsys):
    site, _, _ = _whole_site(tmp_path)
    code, out, err = _list(site, capsys, freshness=True)
    assert code == 0 and "INCOMPLETE" not in out and "smoke run of 2026-11-22" in out and not err
    _execute(site, tmp_path)  # raises nothing


@pytest.mark.parametrize("damage", BREAKS, ids=[b.__name__[7:] for b in BREAKS])
def test_incomplete_post_is_reported_by_list_site_and_execute(tmp_path, capsys, damage):
    site, _, _ = _whole_site(tmp_path)
    said = damage(site)
    code, out, err = _list(site, capsys)
    assert code == 2 and f"{SLUG}" in out and "INCOMPLETE" in out
    assert said in err and "git checkout --" in err and f"make execute ONLY={SLUG} FORCE=1" in err, err
    code, _, err = _list(site, capsys, freshness=True)  # what `make site` runs before Jekyll
    assert code == 2 and said in err and not (site / "_data" / "freshness.json").exists()
    with pytest.raises(publish.PublishError, match="nothing was run") as refused:
        _execute(site, tmp_path)
    assert said in str(refused.value) and not (tmp_path / "build" / "executed").exists()


def _interrupt(site: Path, info, record, monkeypatch, at: str) -> None:
    """Publish again, dying (an exception, no clean-up) at swap point ``at``."""
    from sidebyside.publish import site as sitefiles

    class Died(Exception):
        pass

    def fault(label):
        if label == at:
            raise Died(label)

    record = {**record, "executed_at": "2026-11-23T00:00:00+00:00"}
    files = {"figure-1.png": b"new" * 10}
    files[state.MANIFEST] = state.manifest(SLUG, f"{info.date}-{SLUG}.md", files, record)
    monkeypatch.setattr(sitefiles, "FAULT", fault)
    with pytest.raises(Died):
        publish.publish(site, info, "---\nlayout: post\n---\nnew\n", files, record)
    monkeypatch.setattr(sitefiles, "FAULT", None)


@pytest.mark.parametrize("at, then", [(f"in images/{SLUG}", "rolls it back"), ("cleanup", "completes it")])
def test_unfinished_publication_is_reported_by_list_site_and_execute(tmp_path, capsys, monkeypatch, at, then):
    site, info, record = _whole_site(tmp_path)
    _interrupt(site, info, record, monkeypatch, at)
    journal = site / ".sidebyside" / f"journal-{SLUG}.json"
    assert journal.exists()
    code, _, err = _list(site, capsys)
    assert code == 2 and f"{SLUG}: a publication started at" in err and then in err and "make recover" in err, err
    assert _list(site, capsys, freshness=True)[0] == 2  # make site
    assert journal.exists()  # list changes nothing
    # execute finishes or rolls it back first, and says which; then the site is whole again.
    _execute(site, tmp_path)
    said = capsys.readouterr().out + capsys.readouterr().err
    assert "recovered" in said and not journal.exists()
    assert _list(site, capsys)[0] == 0


def test_recover_command_finishes_what_list_reported(tmp_path, capsys, monkeypatch):
    site, info, record = _whole_site(tmp_path)
    _interrupt(site, info, record, monkeypatch, f"in images/{SLUG}")
    assert publish.main(["recover", "--site", str(site)]) == 0
    assert "rolled back" in capsys.readouterr().out
    assert _list(site, capsys)[0] == 0
    assert (site / "images" / SLUG / "figure-1.png").read_bytes() == b"png" * 10  # the previous publication


def test_make_site_and_serve_check_the_site_before_jekyll():
    import subprocess

    for target in ("site", "serve"):
        proc = subprocess.run(["make", "-n", target, "SETUP=0", "PYTHON=python3"], cwd=ROOT, capture_output=True,
                              text=True, timeout=60)
        lines = proc.stdout.splitlines()
        check = next(i for i, line in enumerate(lines) if "sidebyside.publish list --site ." in line)
        jekyll = next(i for i, line in enumerate(lines) if "jekyll" in line)
        assert check < jekyll, proc.stdout


def test_published_fixture_is_whole(hostile_site, capsys):
    """A real publication writes a manifest that matches what it published."""
    manifest = json.loads((hostile_site / "images" / SLUG / state.MANIFEST).read_text())
    folder = {p.name: p.stat().st_size for p in (hostile_site / "images" / SLUG).iterdir() if p.name != state.MANIFEST}
    assert manifest["files"] == folder and (hostile_site / "_posts" / manifest["post"]).is_file()
    assert _list(hostile_site, capsys)[0] == 0


def test_a_file_the_publisher_replaces_is_old_or_new_never_half(tmp_path, monkeypatch):
    """``write_atomic`` leaves the old file whole when the rename fails, and no temporary file once it succeeds."""
    import os

    from sidebyside.publish.common import write_atomic

    target = tmp_path / "board.json"
    target.write_text("old\n")

    def refuse(src, dst):
        raise OSError("disk full")

    with monkeypatch.context() as patched:
        patched.setattr(os, "replace", refuse)
        with pytest.raises(OSError, match="disk full"):
            write_atomic(target, "néw\n")
    assert target.read_text() == "old\n"
    write_atomic(target, "néw\n")
    assert target.read_bytes() == "néw\n".encode()
    write_atomic(target, b"\x00bytes")
    assert target.read_bytes() == b"\x00bytes"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["board.json"]
