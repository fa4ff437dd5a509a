"""A post's two runs: its cpu run is the body, a GPU run adds a section and replaces nothing.

Publishes a cpu run then a GPU run (and the reverse) of the pairs fixture into a scratch site with the
publisher's own renderer and transaction, and checks that both survive (record, post, files, manifest);
that a newer run of either kind replaces only its own part; that a run measured under a withdrawn method
is dropped when the other run is published; that records written before a record held two runs still
load; and, built with Jekyll, that the page, the verdict box and the home card show both runs with their
hardware, "GPU run owed" where there is none, and no figure of a withdrawn run."""

from __future__ import annotations

import copy
import dataclasses
import json
import os
import re
import shutil
import subprocess

import nbformat
import pytest
import yaml
from conftest import ROOT, make_site
from nbformat.v4 import new_markdown_cell
from test_pairs import SLUG, fixture_info, fixture_notebook, fixture_record

from sidebyside import publish
from sidebyside.publish import frontpage, gpu_section, records, state
from sidebyside.publish.common import PublishError
from sidebyside.publish.discovery import discover
from sidebyside.publish.rendering import site_config
from sidebyside.publish.site import completed_run, write_run_record
from sidebyside.publish.site import publish as publish_run

CONFIG = {"repository": "owner/name", "branch": "main"}
H100 = "NVIDIA H100 80GB HBM3"


def cpu_record(executed_at="2026-11-26T10:00:00+00:00"):
    record = fixture_record()
    record.update(profile="cpu", executed_at=executed_at, source_hash="c" * 64)
    record["provenance"]["git_sha"] = "cpu0123"
    return record


def gpu_record(executed_at="2026-11-27T10:00:00+00:00", sha="gpu4567"):
    record = fixture_record()
    record.update(profile="gpu", executed_at=executed_at, source_hash="g" * 64)
    record["provenance"].update(device=H100, device_kind="gpu", git_sha=sha, cuda="13.0")
    for v in record["metrics"]["verdicts"]:
        if v.get("scale"):
            v["scale"]["device"] = H100
    return record


def notebook():
    """The pairs fixture with a section of appendix (which a GPU section goes before)."""
    nb = fixture_notebook()
    nb.cells.append(new_markdown_cell("## Notes\n\nAn appendix note.", metadata={"tags": ["appendix"]}))
    return nb


def _publish(site, info, record):
    post, files = publish.render(notebook(), record, info, CONFIG)
    return publish_run(site, info, post, files, record)


def _published(site):
    record = json.loads((site / "_data" / "results" / f"{SLUG}.json").read_text())
    post = next((site / "_posts").glob(f"*-{SLUG}.md")).read_text()
    files = sorted(p.name for p in (site / "images" / SLUG).iterdir())
    return record, post, files


def _check_both(site, cpu, gpu):
    record, post, files = _published(site)
    assert records.split_runs(record) == (cpu, gpu)
    body, section = gpu_section.split(post)
    assert "Prose before the pair." in body and "An appendix note." in body and "Appendix" not in (section or "")
    assert section is not None and gpu_section.heading(gpu) in section
    assert post.index(gpu_section.START) < post.index("## Appendix {#appendix}")  # the section before the appendix
    assert "Prose before the pair." not in section and "torch_model = TorchMLP()" not in section  # no prose, no code
    # its tables, escaped, each closed under the heading it stood under
    assert "value &lt;b&gt;bold&lt;/b&gt;" in section and "<summary>GPU run: A wide table</summary>" in section
    shown = set(re.findall(r"\.\./\.\./images/" + SLUG + r"/([^)\s\"'<>]+)", post))
    assert {n for n in shown if n.startswith("gpu.")} and {n for n in shown if not n.startswith("gpu.")}
    assert shown <= set(files)
    assert f"gpu.{SLUG}.ipynb" in files and f"{SLUG}.ipynb" in files
    assert json.loads((site / "images" / SLUG / "results.json").read_text()) == record
    assert state.incomplete(site, SLUG, record) is None  # the manifest names every file of both runs
    assert front_matter(post)["profile"] == "cpu" and front_matter(post)["hardware"] == cpu["provenance"]["device"]


def front_matter(post):
    return yaml.safe_load(post.split("---\n")[1])


@pytest.mark.parametrize("first", ["cpu", "gpu"])
def test_a_cpu_run_and_a_gpu_run_both_survive_whichever_comes_first(tmp_path, first):
    site, info = make_site(tmp_path / "site"), fixture_info(tmp_path)
    cpu, gpu = cpu_record(), gpu_record()
    for record in ((cpu, gpu) if first == "cpu" else (gpu, cpu)):
        _publish(site, info, record)
    _check_both(site, cpu, gpu)


@pytest.mark.slow  # publishes a site three times (2 s)
def test_a_newer_run_replaces_only_its_own_part(tmp_path):
    site, info = make_site(tmp_path / "site"), fixture_info(tmp_path)
    cpu, gpu = cpu_record(), gpu_record()
    _publish(site, info, cpu)
    _publish(site, info, gpu)
    newer_gpu = gpu_record("2026-11-28T10:00:00+00:00", sha="gpu8899")
    _publish(site, info, newer_gpu)
    _check_both(site, cpu, newer_gpu)
    assert gpu_section.heading(gpu) not in _published(site)[1]  # one GPU section, the newer
    newer_cpu = cpu_record("2026-11-29T10:00:00+00:00")
    _publish(site, info, newer_cpu)
    _check_both(site, newer_cpu, newer_gpu)
    assert _published(site)[1].count(gpu_section.START) == 1


def test_a_gpu_run_alone_is_a_section_under_front_matter(tmp_path):
    site, info = make_site(tmp_path / "site"), fixture_info(tmp_path)
    gpu = gpu_record()
    _publish(site, info, gpu)
    record, post, files = _published(site)
    assert record == gpu and front_matter(post)["profile"] == "gpu"
    body, section = gpu_section.split(post)
    assert section and "Prose before the pair." not in post and f"{SLUG}.ipynb" not in files
    assert state.incomplete(site, SLUG, record) is None


def test_publishing_a_gpu_run_as_a_post_is_refused(tmp_path):
    site, info = make_site(tmp_path / "site"), fixture_info(tmp_path)
    post, files = publish.render(notebook(), cpu_record(), info, CONFIG)
    with pytest.raises(PublishError, match="GPU section"):
        publish_run(site, info, post, files, gpu_record())
    assert not (site / "_data" / "results").exists() or not list((site / "_data" / "results").iterdir())


@pytest.mark.slow  # publishes a site twice and renders the withdrawn run (1.5 s)
def test_a_run_of_a_withdrawn_method_is_dropped_when_the_other_run_is_published(tmp_path):
    site, info = make_site(tmp_path / "site"), fixture_info(tmp_path)
    old_gpu = gpu_record("2026-11-23T04:00:00+00:00")  # before the pooled method (the changelog withdraws it)
    _publish(site, info, old_gpu)
    assert frontpage.superseding(old_gpu, frontpage.load_changelog(site, ROOT)) is not None
    cpu = cpu_record()
    _publish(site, info, cpu)
    record, post, files = _published(site)
    assert record == cpu and gpu_section.START not in post and not [n for n in files if n.startswith("gpu.")]
    # the reverse: a withdrawn cpu run goes when a GPU run is published
    old_cpu = cpu_record("2026-11-23T04:00:00+00:00")
    _publish(site, info, old_cpu)
    gpu = gpu_record()
    _publish(site, info, gpu)
    record, post, files = _published(site)
    assert record == gpu and "Prose before the pair." not in post


def test_records_of_one_run_still_load_and_a_gpu_one_is_the_gpu_run():
    legacy_gpu, legacy_cpu = gpu_record(), cpu_record()
    assert records.split_runs(legacy_gpu) == (None, legacy_gpu)
    assert records.split_runs(legacy_cpu) == (legacy_cpu, None)
    both = records.join_runs(legacy_cpu, legacy_gpu)
    assert records.schema_problems(both) == [] and both[records.GPU_RUN]["profile"] == "gpu"
    wrong = copy.deepcopy(both)
    wrong[records.GPU_RUN]["profile"] = "cpu"
    assert records.schema_problems(wrong) == ['gpu_run.profile: must be "gpu", not \'cpu\'']
    nested = {**legacy_gpu, records.GPU_RUN: legacy_gpu}
    assert any("no second GPU run" in p for p in records.schema_problems(nested))
    del wrong[records.GPU_RUN]["metrics"]
    assert "gpu_run: 'metrics' is missing" in records.schema_problems(wrong)
    for path in sorted((ROOT / "_data" / "results").glob("*.json")):  # every published record
        record = json.loads(path.read_text())
        cpu, gpu = records.split_runs(record)
        assert records.join_runs(cpu, gpu) == record, path.name


def test_each_profile_is_planned_against_its_own_run(tmp_path):
    from sidebyside.publish.cache import plan
    from sidebyside.publish.params import load_all_params

    slug = "jit-and-autograd-timing"
    infos = [i for i in discover(ROOT / "notebooks") if i.slug == slug]
    params = load_all_params(ROOT / "params", discover(ROOT / "notebooks"))
    site = make_site(tmp_path / "site")
    (site / "_posts").mkdir()
    (site / "_data" / "results").mkdir(parents=True)
    (site / "_posts" / f"{infos[0].date}-{slug}.md").write_text("---\ntitle: t\n---\n")
    results = site / "_data" / "results" / f"{slug}.json"

    def decide(record, profile):
        results.write_text(json.dumps(record))
        (decision,) = plan(infos, profile, params, site, root=ROOT)
        return decision.action, decision.reason

    gpu = {**gpu_record(), "slug": slug}
    cpu = {**cpu_record(), "slug": slug}
    assert decide(gpu, "cpu") == ("run", "its cpu run is owed")  # a GPU run is no reason to skip the cpu run
    assert decide(cpu, "gpu") == ("run", "its GPU run is owed")
    assert decide(records.join_runs(cpu, gpu), "gpu") == ("run", "sources or parameters changed")  # its own key
    assert decide(records.join_runs(cpu, gpu), "smoke")[0] == "kept"  # a smoke run never replaces a cpu run


def _files(site):
    return {p.relative_to(site).as_posix(): p.read_bytes() for p in sorted(site.rglob("*"))
            if p.is_file() and p.relative_to(site).parts[0] in ("_posts", "images")
            or p.parent == site / "_data" / "results"}


@pytest.mark.slow  # executes the publisher's fixture notebook
def test_render_renders_each_run_again_from_its_own_executed_copy(tmp_path):
    fixtures = ROOT / "tests" / "fixtures"
    where = {"notebooks": fixtures / "notebooks", "params_dir": fixtures / "params"}
    site, build, slug = make_site(tmp_path / "site"), tmp_path / "build", "publisher-fixture"
    assert publish.run(site=site, build=build, progress=False, profile="smoke", **where) == 0
    executed = build / "executed" / f"{slug}.ipynb"
    smoke, _ = completed_run(executed)
    gpu = {**copy.deepcopy(smoke), "profile": "gpu", "executed_at": "2026-11-27T23:00:00+00:00"}
    gpu["provenance"].update(device=H100, device_kind="gpu", git_sha="gpu4567")
    gpu_copy = build / "executed" / f"{slug}.gpu.ipynb"  # where publish merge keeps a GPU run's
    shutil.copy(executed, gpu_copy)
    write_run_record(gpu_copy, gpu)
    info = next(i for i in discover(where["notebooks"]) if i.slug == slug)
    section, files = publish.render(nbformat.read(gpu_copy, as_version=4), gpu, info, site_config(site, ROOT))
    publish_run(site, info, section, files, gpu)
    both = _files(site)
    record = json.loads((site / "_data" / "results" / f"{slug}.json").read_text())
    assert records.split_runs(record) == (smoke, gpu)
    assert publish.rerender(site=site, build=build, **where) == 0
    assert _files(site) == both  # each run rendered again, from its own copy, to the same files
    gpu_copy.unlink()
    with pytest.raises(PublishError, match=rf"{slug}\.gpu\.ipynb does not exist"):
        publish.rerender(site=site, build=build, **where)
    assert _files(site) == both


# --------------------------------------------------------------------------- the pages, built with Jekyll


def _jekyll(site):
    dest = site / "_site"
    env = {**os.environ, "BUNDLE_GEMFILE": str(ROOT / "Gemfile"), "JEKYLL_ENV": "production"}
    proc = subprocess.run(["bundle", "exec", "jekyll", "build", "-s", str(site), "-d", str(dest)],
                          capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return dest


def _text(html):
    return " ".join(re.sub(r"<[^>]+>", " ", html).split())


def _verdict_box(html):
    return html[html.index('<section class="verdict"'):html.index("</section>", html.index('<section class="verdict"'))]


@pytest.mark.slow
def test_the_page_the_verdict_box_and_the_card_show_both_runs_or_what_is_owed(tmp_path):
    site = make_site(tmp_path / "site")
    both = fixture_info(tmp_path)
    cpu_only, withdrawn = (dataclasses.replace(both, slug=slug) for slug in ("cpu-only", "withdrawn"))
    _publish(site, both, cpu_record())
    _publish(site, both, gpu_record())
    _publish(site, cpu_only, {**cpu_record(), "slug": "cpu-only"})
    _publish(site, withdrawn, {**gpu_record("2026-11-23T04:00:00+00:00"), "slug": "withdrawn"})
    frontpage.write_board(site, {}, {SLUG, "cpu-only", "withdrawn"}, ROOT)
    built = _jekyll(site)
    page = (built / "posts" / SLUG / "index.html").read_text()
    box = _text(_verdict_box(page))
    assert "CPU run: Test CPU (2 cores), Nov 26, 2026, commit cpu0123" in box
    assert f"GPU run: {H100}, Nov 27, 2026, commit gpu4567" in box and "owed" not in box
    text = _text(page)
    assert "Prose before the pair." in text and gpu_section.heading(gpu_record()) in text
    assert "GPU run owed" not in text and "CPU run owed" not in text
    alone = _text((built / "posts" / "cpu-only" / "index.html").read_text())
    assert "GPU run owed" in _text(_verdict_box((built / "posts" / "cpu-only" / "index.html").read_text()))
    assert "Prose before the pair." in alone and alone.count("GPU run owed") == 1  # once, in the page's verdict box
    old = (built / "posts" / "withdrawn" / "index.html").read_text()
    old_text = _text(old)
    assert "GPU run owed" in old_text and "CPU run owed" in old_text and "withdrawn" in old_text
    assert "×" not in old_text and "../../images/withdrawn/gpu." not in old and "<img" not in old.split(
        'class="post-content')[1].split('class="appendix appendix-provenance"')[0]
    assert "download-gpu-executed" not in old and "download-results" not in old  # no download of its figures
    assert "download-gpu-executed" in page and "download-executed" in page
    feed = (built / "feed.xml").read_text()
    entry = feed[feed.index("/posts/withdrawn/"):]
    assert "<content" not in entry[:entry.index("</entry>")] and "<content" in feed
    home = _text((built / "index.html").read_text())
    assert "CPU run: Test CPU (2 cores) · Nov 26, 2026" in home and f"GPU run: {H100} · Nov 27, 2026" in home
    assert home.count("GPU run owed") >= 2 and "CPU run owed" in home
