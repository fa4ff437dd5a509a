"""The publisher: rendering, cache with freeze semantics, atomic writes, bad input.

The fixture notebook (tests/fixtures/notebooks/00_fixture.py) exercises every
kind of output: figures, tables, stderr, warnings, ANSI, tqdm, Liquid braces,
hidden cells. It runs through papermill for real (about 10 s a run).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from conftest import ROOT, front_matter, make_site

from sidebyside import publish
from sidebyside.lab import conditions
from sidebyside.publish.preprocess import scrub_rules
from sidebyside.publish.rendering import check_date, site_config

FIXTURES = ROOT / "tests" / "fixtures"
FIXTURE_NB = FIXTURES / "notebooks" / "00_fixture.py"
SLUG = "publisher-fixture"


# --------------------------------------------------------------------------- pure functions


def test_collapse_progress_keeps_final_frame():
    text = "epoch:   0%|   | 0/3\repoch:  33%|#  | 1/3\repoch: 100%|###| 3/3\nnext line\n"
    assert publish.collapse_progress(text) == "epoch: 100%|###| 3/3\nnext line\n"


def test_kramdown_math_rewrites_inline_math_outside_code():
    md = "Loss $L_2$ and $$E=mc^2$$, but `cost $5 and $6` stays.\n```\n$x$\n```"
    out = publish.kramdown_math(md)
    assert "$$L_2$$" in out
    assert "$$E=mc^2$$" in out and "$$$$" not in out
    assert "`cost $5 and $6`" in out
    assert "```\n$x$\n```" in out


def test_scrub_removes_paths_and_host(tmp_path):
    rules = scrub_rules(tmp_path)
    host = socket.gethostname()
    text = f"{tmp_path}/notebooks/x.py on {host} via {sys.prefix}/bin/python; vmap stays"
    out = publish.scrub(text, rules)
    assert str(tmp_path) not in out and sys.prefix not in out
    assert f" {host} " not in out and "[host]" in out
    assert "vmap stays" in out


# --------------------------------------------------------------------------- discovery and bad input


def _write_nb(path: Path, header_extra: str = "", parameters: bool = True, meta: dict | None = None) -> Path:
    meta = {"slug": "tiny", "title": "Tiny", "date": "2026-11-22", "description": "A tiny notebook.",
                "compared": "Nothing: a tiny notebook.", "metrics": ["n"]} if meta is None else meta
    lines = ["# ---", "# jupyter:", "#   kernelspec:", "#     display_name: Python 3", "#     language: python",
             "#     name: python3"]
    if meta:
        lines.append("#   sidebyside:")
        lines += [f"#     {k}: {json.dumps(v)}" for k, v in meta.items()]
    lines += ["# ---", ""]
    if parameters:
        lines += ['# %% tags=["parameters"]', "n = 3", ""]
    lines += ["# %%", "from sidebyside.run import provenance", "provenance.save_results({'n': n})  # the publisher gives the slug", ""]
    path.write_text("\n".join(lines) + header_extra)
    return path


def test_title_heading_dropped_only_when_it_repeats_the_title():
    import nbformat

    def notebook(first):
        return nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell(first),
                                               nbformat.v4.new_markdown_cell("# The title")])

    nb = notebook("# The title\n\nOne-sentence summary.")
    publish.drop_title_heading(nb, "The title")
    assert [c.source for c in nb.cells] == ["One-sentence summary.", "# The title"]
    nb = notebook("# The title")
    publish.drop_title_heading(nb, "The title")
    assert [c.source for c in nb.cells] == ["# The title"]  # the emptied cell is gone; later cells untouched
    nb = notebook("# Another heading\n\ntext")
    publish.drop_title_heading(nb, "The title")
    assert nb.cells[0].source == "# Another heading\n\ntext"


def test_missing_metadata_names_notebook_and_fields(tmp_path):
    path = _write_nb(tmp_path / "01_x.py", meta={"slug": "x"})
    with pytest.raises(publish.PublishError, match=r"01_x\.py.*title, date, description, compared"):
        publish.read_notebook_info(path)


def test_missing_parameters_cell_says_what_to_add(tmp_path):
    path = _write_nb(tmp_path / "01_x.py", parameters=False)
    with pytest.raises(publish.PublishError, match=r"01_x\.py: needs exactly one cell tagged 'parameters'"):
        publish.read_notebook_info(path)


def test_bad_slug_and_date(tmp_path):
    with pytest.raises(publish.PublishError, match="lowercase words"):
        publish.read_notebook_info(_write_nb(tmp_path / "a.py", meta={"slug": "Bad Slug", "title": "t", "date": "2026-01-01", "description": "d", "compared": "c", "metrics": ["n"]}))
    with pytest.raises(publish.PublishError, match="YYYY-MM-DD"):
        publish.read_notebook_info(_write_nb(tmp_path / "b.py", meta={"slug": "ok", "title": "t", "date": "22/11/2026", "description": "d", "compared": "c", "metrics": ["n"]}))


def test_the_header_declares_the_post_once_and_bad_declarations_say_what_to_write(tmp_path):
    info = publish.read_notebook_info(_write_nb(tmp_path / "01_tiny_post.py"))[0]
    assert info.package == "tiny_post" and info.metrics == ["n"] and info.gpu is None
    good = {"slug": "ok", "title": "t", "date": "2026-01-01", "description": "d", "compared": "c", "metrics": ["n"]}
    with pytest.raises(publish.PublishError, match=r"name a notebook NN_<package>\.py"):
        publish.notebook_info(_write_nb(tmp_path / "tiny.py", meta=good))
    with pytest.raises(publish.PublishError, match="metrics must be a list of the keys"):
        publish.notebook_info(_write_nb(tmp_path / "02_x.py", meta={**good, "metrics": "n"}))
    with pytest.raises(publish.PublishError, match="its header gives a gpu budget; .* under gpu_budget"):
        publish.notebook_info(_write_nb(tmp_path / "03_x.py", meta={**good, "gpu": {"budget_s": 9}}))


def test_the_gpu_budget_is_read_from_the_settings_file_and_bad_ones_say_what_to_write(tmp_path):
    good = {"slug": "ok", "title": "t", "date": "2026-01-01", "description": "d", "compared": "c", "metrics": ["n"]}
    (tmp_path / "notebooks").mkdir()
    (tmp_path / "params").mkdir()
    path = _write_nb(tmp_path / "notebooks" / "04_x.py", meta=good)
    settings = tmp_path / "params" / "ok.yaml"

    def budget(entry):
        settings.write_text(yaml.safe_dump({"gpu_budget": entry}))
        return publish.notebook_info(path).gpu

    assert publish.notebook_info(path).gpu is None  # no settings file: no GPU run planned
    with pytest.raises(publish.PublishError, match="gpu_budget must be a mapping with budget_s"):
        budget({"budget_s": "soon"})
    gpu = {"budget_s": 90, "measured": "H100, commit abc1234", "rank": 2}
    assert budget(gpu) == gpu
    # parts keep the order the notebook runs them in: a list, never a mapping
    parts = [{"parity": 120}, {"affine": 37}, {"bench/*": {"count": 2, "each_s": 5}}]
    found = budget({**gpu, "parts": parts})
    assert list(found["parts"]) == ["parity", "affine", "bench/*"] and found["parts"]["affine"] == 37
    with pytest.raises(publish.PublishError, match="gpu_budget.rank must be a whole number from 1"):
        budget({**gpu, "rank": 0})
    with pytest.raises(publish.PublishError, match="gpu_budget.parts must be a list of one-entry mappings"):
        budget({**gpu, "parts": {"parity": 1}})
    with pytest.raises(publish.PublishError, match="gpu_budget.derivation must map a part"):
        budget({**gpu, "derivation": {"parity": ""}})


def test_a_record_without_a_declared_metric_is_refused_and_nothing_is_published(tmp_path):
    from sidebyside.publish import records

    records.check_record({"metrics": {"n": 3, "verdicts": []}}, "tiny", ["n"])
    with pytest.raises(publish.PublishError, match=r"declares the metrics n, total.*lacks total.*Nothing published"):
        records.check_record({"metrics": {"n": 3}}, "tiny", ["n", "total"])


def test_duplicate_slugs_rejected(tmp_path):
    _write_nb(tmp_path / "01_a.py")
    _write_nb(tmp_path / "02_b.py")
    with pytest.raises(publish.PublishError, match="slug 'tiny' is used by both"):
        publish.discover(tmp_path)


def test_unknown_profile_and_slug_list_valid_ones(tmp_path):
    with pytest.raises(publish.PublishError, match="valid profiles: smoke, cpu, gpu"):
        publish.check_profile("huge")
    infos = publish.discover(FIXTURES / "notebooks")
    with pytest.raises(publish.PublishError, match=f"unknown slug nope; valid slugs: {SLUG}"):
        publish.select(infos, "nope")


def test_params_must_name_parameters_cell_variables(tmp_path):
    infos = publish.discover(FIXTURES / "notebooks")
    (tmp_path / f"{SLUG}.yaml").write_text("smoke: {num_pointz: 3}\n")
    with pytest.raises(publish.PublishError, match="smoke sets num_pointz.*valid names: num_points, label"):
        publish.load_params(tmp_path, "cpu", infos)  # any profile: the whole file is checked
    (tmp_path / f"{SLUG}.yaml").write_text("smoke: {num_points: 3}\nsmoek: {num_points: 9}\n")
    with pytest.raises(publish.PublishError, match="'smoek' is not a profile; valid profiles: smoke, cpu, gpu"):
        publish.load_params(tmp_path, "smoke", infos)
    (tmp_path / f"{SLUG}.yaml").write_text("smoke: {num_points: 3}\n")
    assert publish.load_all_params(tmp_path, infos) == {"smoke": {SLUG: {"num_points": 3}}, "cpu": {SLUG: {}},
                                                         "gpu": {SLUG: {}}}  # a profile left out: the cell as written


def test_cli_reports_errors_with_exit_code_2(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "sidebyside.publish", "execute", "--profile", "tiny",
                           "--notebooks", str(FIXTURES / "notebooks"), "--site", str(tmp_path)],
                          capture_output=True, text=True)
    assert proc.returncode == 2
    assert "unknown profile 'tiny'; valid profiles: smoke, cpu, gpu" in proc.stderr


# --------------------------------------------------------------------------- cache key


def test_cache_key_changes_with_each_input(tmp_path):
    root = tmp_path / "repo"
    (root / "src" / "sidebyside").mkdir(parents=True)
    lib = root / "src" / "sidebyside" / "mod.py"
    lib.write_text("x = 1\n")
    (root / "requirements.txt").write_text("numpy==1\n")
    nb = _write_nb(root / "01_tiny.py")
    info, _ = publish.read_notebook_info(nb)
    inputs = {"modules": {"src/sidebyside/mod.py": "recorded"}, "data": {}}

    def key(profile="cpu", params=None):
        return publish.cache_key(info, profile, params or {"n": 3}, root, inputs)

    base = key()
    assert key() == base
    assert key(params={"n": 4}) != base
    assert key("gpu") != base
    lib.write_text("x = 2\n")  # a module the run recorded
    changed_lib = key()
    assert changed_lib != base
    (root / "src" / "sidebyside" / "other.py").write_text("y = 1\n")  # one it did not
    assert key() == changed_lib
    (root / "requirements.txt").write_text("numpy==2\n")
    changed_req = key()
    assert changed_req != changed_lib
    nb.write_text(nb.read_text() + "\n# %%\n1\n")
    assert key() != changed_req


# --------------------------------------------------------------------------- atomic writes


def _info():
    return publish.read_notebook_info(FIXTURE_NB)[0]


def _leftovers(site: Path) -> list[Path]:
    """Hidden files in a site other than the lock (an empty file between runs)."""
    lock = site / ".sidebyside" / "lock"
    return [p for p in site.rglob(".*") if p != lock and p != lock.parent
            and "_site" not in p.parts and ".jekyll-cache" not in p.parts] + [
        p for p in lock.parent.glob("*") if p != lock]


def test_publish_swaps_everything_and_removes_stale_images(tmp_path):
    info = _info()
    publish.publish(tmp_path, info, "---\nv: 1\n---\n", {"a.png": b"1", "old.png": b"x"}, {"v": 1})
    publish.publish(tmp_path, info, "---\nv: 2\n---\n", {"a.png": b"2"}, {"v": 2})
    assert (tmp_path / "_posts" / f"{info.date}-{SLUG}.md").read_text() == "---\nv: 2\n---\n"
    assert sorted(p.name for p in (tmp_path / "images" / SLUG).iterdir()) == ["a.png"]
    assert json.loads((tmp_path / "_data" / "results" / f"{SLUG}.json").read_text()) == {"v": 2}
    assert _leftovers(tmp_path) == []


def test_recover_after_interrupted_swap(tmp_path):
    images = tmp_path / "images"
    (images / f".{SLUG}.old").mkdir(parents=True)
    (images / f".{SLUG}.old" / "keep.png").write_bytes(b"old")
    (images / ".other.new").mkdir()
    (tmp_path / "_posts").mkdir()
    (tmp_path / "_posts" / f".{SLUG}.md.tmp").write_text("half")
    publish.recover(tmp_path)
    assert (images / SLUG / "keep.png").read_bytes() == b"old"
    assert not (images / ".other.new").exists()
    assert not (tmp_path / "_posts" / f".{SLUG}.md.tmp").exists()


# --------------------------------------------------------------------------- the fixture, executed for real


def _run(site: Path, build: Path, notebooks: Path = FIXTURES / "notebooks", **kw) -> int:
    return publish.run(notebooks=notebooks, params_dir=FIXTURES / "params", site=site, build=build,
                       progress=False, **{"profile": "smoke", **kw})


@pytest.fixture(scope="module")
def fixture_site(tmp_path_factory):
    base = tmp_path_factory.mktemp("fixture")
    site = make_site(base / "site")
    assert _run(site, base / "build") == 0
    return site, base / "build"


@pytest.fixture(scope="module")
def post(fixture_site):
    site, _ = fixture_site
    return (site / "_posts" / f"2026-11-22-{SLUG}.md").read_text()


def test_front_matter_contract(post):
    fm = front_matter(post)
    for key in ("layout", "title", "date", "description", "tags", "slug", "notebook", "colab", "profile", "hardware", "versions"):
        assert fm.get(key), key
    assert fm["slug"] == SLUG and fm["profile"] == "smoke"
    assert str(fm["date"]) == fm["executed_at"][:10]  # the post's date is its run's (the file keeps the header's)
    assert fm["notebook"] == "tests/fixtures/notebooks/00_fixture.py"
    config = yaml.safe_load((ROOT / "_config.yml").read_text())
    assert fm["colab"] == (f"https://colab.research.google.com/github/{config['repository']}/blob/"
                           f"{config['branch']}/tests/fixtures/notebooks/00_fixture.ipynb")
    assert {"python", "torch", "jax", "jaxlib", "flax", "optax"} <= set(fm["versions"])
    assert fm["parameters"] == {"num_points": 40}
    assert fm["render_with_liquid"] is False


def test_results_json_contract(fixture_site):
    site, _ = fixture_site
    record = json.loads((site / "_data" / "results" / f"{SLUG}.json").read_text())
    assert set(record) >= {"slug", "notebook", "profile", "executed_at", "source_hash", "provenance", "metrics"}
    prov = record["provenance"]
    assert set(prov) >= {"device", "device_kind", "python", "torch", "jax", "jaxlib", "flax", "optax", "cuda",
                         "matmul_precision", "git_sha"}
    assert prov["device_kind"] in ("cpu", "gpu")
    assert record["metrics"] == {"total": sum(range(40)), "label": "smoke", "num_points": 40}
    import datetime as dt
    dt.datetime.fromisoformat(record["executed_at"])


def test_post_body(post, fixture_site):
    site, _ = fixture_site
    body = post.split("---\n", 2)[2]
    # hidden cells
    assert "SECRET_MARKER" not in body
    assert "HIDDEN_INPUT_OUTPUT_VISIBLE" in body and 'print("HIDDEN_INPUT_OUTPUT_VISIBLE")' not in body
    # parameters shown once in the front matter, not as cells
    assert "num_points = 50" not in body and "injected" not in body.lower()
    # ANSI stripped, Liquid braces kept verbatim (render_with_liquid: false protects them)
    assert "\x1b" not in body
    assert "\nRED plain {{ not_liquid }} {% not_a_tag %}\n" in body  # the output line, codes gone
    # tqdm: only the final frame
    bars = [line for line in body.splitlines() if line.startswith("fixture loop:")]
    assert len(bars) == 1 and "100%" in bars[0] and "40/40" in bars[0]
    # stderr folded away (a library's warning there would be refused: test_front_page's lint cases)
    assert '<details class="stderr" markdown="1"><summary>stderr</summary>' in body
    assert body.index("\nto stderr\n") > body.index('<details class="stderr"')
    # figure with stable name and alt text, written to images/
    assert "![A sine wave drawn with the fixture's colours](../../images/publisher-fixture/sine-wave.png)" in body
    png = site / "images" / SLUG / "sine-wave.png"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # tables as HTML tables
    assert '<table border="1" class="dataframe">' in body
    # no local paths or host names
    for secret in (str(ROOT), sys.prefix, socket.gethostname(), str(Path.home()) + "/"):
        assert secret not in post, secret


def test_unchanged_run_is_up_to_date_and_fast(fixture_site, capsys):
    site, build = fixture_site
    post = site / "_posts" / f"2026-11-22-{SLUG}.md"
    before = post.stat().st_mtime_ns
    start = time.perf_counter()
    assert _run(site, build) == 0
    assert time.perf_counter() - start < 10
    assert "up to date" in capsys.readouterr().out
    assert post.stat().st_mtime_ns == before


def test_smaller_profile_never_replaces_larger(fixture_site, capsys):
    """A smoke run never replaces a published cpu run (the post's run that is not its GPU run)."""
    site, build = fixture_site
    results = site / "_data" / "results" / f"{SLUG}.json"
    record = json.loads(results.read_text())
    original = results.read_text()
    record["profile"] = "cpu"
    results.write_text(json.dumps(record))
    try:
        assert _run(site, build) == 0
        out = capsys.readouterr().out
        assert "published cpu result kept" in out and "FORCE=1" in out
        assert json.loads(results.read_text())["profile"] == "cpu"
    finally:
        results.write_text(original)


def test_a_smoke_run_beside_a_gpu_run_fills_the_other_slot_and_keeps_the_gpu_run(tmp_path, fixture_site, capsys):
    """Where a post's only run is its GPU run, a smaller profile's run is its other run (the cpu run is owed):
    it is published beside the GPU run, which it keeps."""
    site, _ = fixture_site
    work_site, build = tmp_path / "site", tmp_path / "build"
    shutil.copytree(site, work_site)
    results = work_site / "_data" / "results" / f"{SLUG}.json"
    record = json.loads(results.read_text())
    record["profile"] = "gpu"
    results.write_text(json.dumps(record))
    assert _run(work_site, build) == 0
    assert "its cpu run is owed" in capsys.readouterr().out
    published = json.loads(results.read_text())
    assert published["profile"] == "smoke" and published["gpu_run"]["profile"] == "gpu"
    assert published["gpu_run"]["executed_at"] == record["executed_at"]


def test_source_change_reruns(tmp_path, fixture_site, capsys):
    site, build = fixture_site
    notebooks = tmp_path / "notebooks"
    notebooks.mkdir()
    changed = notebooks / FIXTURE_NB.name
    changed.write_text(FIXTURE_NB.read_text().replace('label = "smoke"', 'label = "changed"'))
    # The notebook path differs, so give the copy the published record's key check a fair start:
    assert _run(site, build, notebooks=notebooks) == 0
    out = capsys.readouterr().out
    assert "running" in out and "sources or parameters changed" in out
    record = json.loads((site / "_data" / "results" / f"{SLUG}.json").read_text())
    assert record["metrics"]["label"] == "changed"
    # and back, so other tests see the original
    assert _run(site, build) == 0


def test_failing_notebook_keeps_published_files(tmp_path, fixture_site):
    site, build = fixture_site
    notebooks = tmp_path / "notebooks"
    notebooks.mkdir()
    broken = notebooks / FIXTURE_NB.name
    broken.write_text(FIXTURE_NB.read_text().replace("total = 0\n", "total = 0\nraise ValueError('boom in the loop cell')\n"))
    snapshot = {p: p.read_bytes() for p in site.rglob("*") if p.is_file() and "_site" not in p.parts}
    with pytest.raises(publish.PublishError) as info:
        _run(site, build, notebooks=notebooks)
    message = str(info.value)
    assert f"FAILED {SLUG}" in message and "00_fixture.py" in message
    assert "ValueError: boom in the loop cell" in message and "cell" in message
    assert (build / "executed" / f"{SLUG}.ipynb").is_file()
    assert {p: p.read_bytes() for p in site.rglob("*") if p.is_file() and "_site" not in p.parts} == snapshot


@pytest.mark.slow  # executes the fixture notebook through papermill
def test_cli_failure_exit_code(tmp_path):
    """Also: a run given no compilation cache gets one of its own, in the build's scratch space, removed when
    it ends, even a failed one."""
    notebooks = tmp_path / "notebooks"
    notebooks.mkdir()
    (notebooks / FIXTURE_NB.name).write_text(FIXTURE_NB.read_text().replace(
        "total = 0\n", f"import os\nprint('cache:', os.environ[{conditions.CACHE_ENV!r}])\ntotal = 1 / 0\n"))
    temp = tmp_path / "tmp"
    temp.mkdir()
    env = {k: v for k, v in os.environ.items() if k != conditions.CACHE_ENV} | {"TMPDIR": str(temp)}
    proc = subprocess.run([sys.executable, "-m", "sidebyside.publish", "execute", "--profile", "smoke", "--no-progress",
                           "--notebooks", str(notebooks), "--params", str(FIXTURES / "params"),
                           "--site", str(tmp_path / "site"), "--build", str(tmp_path / "build")],
                          capture_output=True, text=True, timeout=300, env=env)
    assert proc.returncode != 0
    assert "ZeroDivisionError" in proc.stderr and f"FAILED {SLUG}" in proc.stderr
    assert not (tmp_path / "site" / "_posts").exists() or not any((tmp_path / "site" / "_posts").iterdir())
    executed = (tmp_path / "build" / "executed" / f"{SLUG}.ipynb").read_text()
    cache = re.search(r"cache: (\S+?)\\n", executed).group(1)
    assert Path(cache) == (tmp_path / "build" / "scratch" / f"{SLUG}.compile").resolve()
    assert not Path(cache).exists() and not any(temp.iterdir())


@pytest.mark.slow  # executes the fixture notebook through papermill
def test_notebook_without_save_results_is_refused(tmp_path):
    notebooks = tmp_path / "notebooks"
    notebooks.mkdir()
    text = FIXTURE_NB.read_text().replace('provenance.save_results("publisher-fixture", metrics)["metrics"]', "metrics")
    (notebooks / FIXTURE_NB.name).write_text(text)
    with pytest.raises(publish.PublishError, match="saved no results.*save_results"):
        _run(tmp_path / "site", tmp_path / "build", notebooks=notebooks)


# --------------------------------------------------------------------------- pairs


def test_notebook_pairs_are_in_sync():
    assert publish.check_pairs(ROOT / "notebooks") == []


def test_check_pairs_detects_stale_pair(tmp_path):
    import jupytext

    py = tmp_path / "01_x.py"
    shutil.copy(FIXTURE_NB, py)
    nb = jupytext.read(py)
    jupytext.write(nb, tmp_path / "01_x.ipynb")
    assert publish.check_pairs(tmp_path) == []
    py.write_text(py.read_text() + "\n# %%\nprint('new cell')\n")
    assert any("differs" in p for p in publish.check_pairs(tmp_path))


@pytest.mark.parametrize("sandbox", ["0", "1"])
def test_interrupted_run_leaves_published_files_intact_and_next_run_recovers(tmp_path, fixture_site, sandbox):
    """Unsandboxed, the killed run's executed copy stays in build/executed/ and render refuses it; sandboxed, the run's
    outputs are staged apart and never reach build/executed/. Either way nothing published changes."""
    import signal

    from sidebyside.publish import sandbox as box

    if sandbox == "1" and not box.enabled():
        pytest.skip("bubblewrap cannot run here")
    site, _ = fixture_site
    work_site = tmp_path / "site"
    shutil.copytree(site, work_site)
    notebooks = tmp_path / "notebooks"
    notebooks.mkdir()
    started = tmp_path / "build" / "scratch" / SLUG / "slow-cell-started"  # the kernel's working folder
    slow = FIXTURE_NB.read_text().replace(
        "total = 0\n", "import pathlib, time\npathlib.Path('slow-cell-started').touch()\ntime.sleep(60)\ntotal = 0\n")
    (notebooks / FIXTURE_NB.name).write_text(slow)
    lock = work_site / ".sidebyside" / "lock"  # says who last held it: a killed run leaves its line
    files = lambda: {p: p.read_bytes() for p in work_site.rglob("*") if p.is_file() and p != lock}  # noqa: E731
    snapshot = files()
    proc = subprocess.Popen([sys.executable, "-m", "sidebyside.publish", "execute", "--profile", "smoke", "--no-progress",
                             "--notebooks", str(notebooks), "--params", str(FIXTURES / "params"),
                             "--site", str(work_site), "--build", str(tmp_path / "build")],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "SIDEBYSIDE_SANDBOX": sandbox})
    executed = tmp_path / "build" / "executed" / f"{SLUG}.ipynb"
    # Kill the publisher outright once the kernel runs the slow cell: no handler of ours runs, the harder case
    # for the site. (A SIGINT is not ours to test here: during a run nbclient handles it, shutting the kernel
    # down; in two CI runs of the whole suite the run went on to the end after one, though alone it stopped.)
    deadline = time.time() + 120
    while not started.exists() and time.time() < deadline:
        time.sleep(0.2)
    assert started.exists(), "the slow cell never started"
    proc.send_signal(signal.SIGKILL)
    proc.communicate(timeout=120)
    assert proc.returncode == -signal.SIGKILL
    assert files() == snapshot
    # render refuses the interrupted run's executed copy (it would publish partial output).
    if sandbox == "0":
        assert executed.is_file()
        with pytest.raises(publish.PublishError, match="did not complete"):
            publish.rerender(site=work_site, build=tmp_path / "build", notebooks=notebooks)
    else:
        assert not executed.exists()  # staged in the sandbox's own folder, taken back only by a run that ends
    assert files() == snapshot
    # The next run (the original notebook) publishes normally.
    assert _run(work_site, tmp_path / "build") == 0
    assert _leftovers(work_site) == []


def test_site_config_falls_back_to_the_repository_and_requires_a_repository(tmp_path):
    config = site_config(tmp_path)  # no _config.yml here: the repo's
    assert config["repository"] == yaml.safe_load((ROOT / "_config.yml").read_text())["repository"]
    (tmp_path / "_config.yml").write_text("title: x\n")
    with pytest.raises(publish.PublishError, match="set 'repository: owner/name'"):
        site_config(tmp_path)


# --------------------------------------------------------------------------- publication is a transaction

from sidebyside.publish import site as sitefiles  # noqa: E402

NEW_POST = "---\nv: new\n---\n"
NEW_IMAGES = {"a.png": b"new-a", "c.png": b"new-c"}
NEW_RECORD = {"v": "new"}
# Every point of a publication where the process can die, in order.
SWAP_POINTS = [
    "journal",
    f"aside images/{SLUG}", f"in images/{SLUG}",
    f"in _posts/2026-11-22-{SLUG}.md",
    f"aside _posts/2026-01-01-{SLUG}.md",
    f"aside _data/results/{SLUG}.json", f"in _data/results/{SLUG}.json",
    "commit", "cleanup", "forget",
]
COMMITTED_FROM = SWAP_POINTS.index("cleanup")  # a death from here on leaves the journal marked committed


def _snapshot(site: Path) -> dict[str, bytes]:
    return {p.relative_to(site).as_posix(): p.read_bytes() for p in site.rglob("*")
            if p.is_file() and sitefiles.STATE_DIR not in p.parts}


def _published_old(site: Path) -> dict[str, bytes]:
    """A site holding an old publication (under another date, so that the new
    one also deletes a post); returns its files."""
    import dataclasses

    old = dataclasses.replace(_info(), date="2026-01-01")
    publish.publish(site, old, "---\nv: old\n---\n", {"a.png": b"old-a", "b.png": b"old-b"}, {"v": "old"})
    return _snapshot(site)


def _published_new(tmp_path: Path) -> dict[str, bytes]:
    site = tmp_path / "reference"
    _published_old(site)
    publish.publish(site, _info(), NEW_POST, NEW_IMAGES, NEW_RECORD)
    return _snapshot(site)


def test_publication_passes_every_swap_point_in_order(tmp_path, monkeypatch):
    site = tmp_path / "site"
    _published_old(site)
    seen: list[str] = []
    monkeypatch.setattr(sitefiles, "FAULT", seen.append)
    publish.publish(site, _info(), NEW_POST, NEW_IMAGES, NEW_RECORD)
    assert seen == SWAP_POINTS


@pytest.mark.slow  # a fresh process per swap point; test_ctrl_c_at_every_swap_point covers the points in-process
def test_kill_at_every_swap_point_then_next_run_rolls_back_or_completes(tmp_path):
    """The process dies (os._exit: no cleanup of any kind) at each swap point
    in turn; the next run's recovery leaves the old publication or the new
    one, never a mix, says which, and publishing again works."""
    new = _published_new(tmp_path)
    script = (
        "import json, os, sys\n"
        "from pathlib import Path\n"
        "from sidebyside import publish\nfrom sidebyside.publish import site as sitefiles\n"
        "count = [0]\n"
        "def die(label):\n"
        "    if count[0] == int(sys.argv[2]):\n"
        "        os._exit(137)\n"
        "    count[0] += 1\n"
        "sitefiles.FAULT = die\n"
        f"info = publish.read_notebook_info(Path({str(FIXTURE_NB)!r}))[0]\n"
        "post, images, record = json.loads(sys.argv[3])\n"
        "publish.publish(Path(sys.argv[1]), info, post, {k: v.encode() for k, v in images.items()}, record)\n"
    )
    payload = json.dumps([NEW_POST, {k: v.decode() for k, v in NEW_IMAGES.items()}, NEW_RECORD])
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    for point, label in enumerate(SWAP_POINTS):
        site = tmp_path / f"site-{point}"
        old = _published_old(site)
        proc = subprocess.run([sys.executable, "-c", script, str(site), str(point), payload],
                              capture_output=True, text=True, env=env, timeout=120)
        assert proc.returncode == 137, (label, proc.stderr)
        said = publish.recover(site)  # what the next run does first
        expected = new if point >= COMMITTED_FROM else old
        assert _snapshot(site) == expected, f"killed at {label!r}: the site is a mix after recovery"
        if point == 0:
            assert said == [], label  # nothing had been swapped: no publication to speak of
        else:
            assert len(said) == 1 and (("completed" if point >= COMMITTED_FROM else "rolled back") in said[0]), (label, said)
        assert _leftovers(site) == [], label
        publish.publish(site, _info(), NEW_POST, NEW_IMAGES, NEW_RECORD)  # and the next publication works
        assert _snapshot(site) == new, label


@pytest.mark.slow  # publishes two sites at every swap point (4 s)
def test_ctrl_c_at_every_swap_point_leaves_old_or_new(tmp_path, monkeypatch):
    new = _published_new(tmp_path)
    for point, label in enumerate(SWAP_POINTS):
        site = tmp_path / f"site-{point}"
        old = _published_old(site)

        def interrupt(at, target=label):
            if at == target:
                raise KeyboardInterrupt

        monkeypatch.setattr(sitefiles, "FAULT", interrupt)
        with pytest.raises(KeyboardInterrupt):
            publish.publish(site, _info(), NEW_POST, NEW_IMAGES, NEW_RECORD)
        monkeypatch.setattr(sitefiles, "FAULT", None)
        if point < COMMITTED_FROM:
            assert _snapshot(site) == old, f"Ctrl-C at {label!r} was not rolled back at once"
        publish.recover(site)
        assert _snapshot(site) == (new if point >= COMMITTED_FROM else old), label
        assert _leftovers(site) == [], label


def test_run_says_what_recovery_did(tmp_path, monkeypatch, capsys):
    site = make_site(tmp_path / "site")
    old = _published_old(site)

    def die(label):
        if label == f"in images/{SLUG}":
            raise SystemExit("killed")  # not caught by the transaction, like a kill

    monkeypatch.setattr(sitefiles, "FAULT", die)
    with pytest.raises(SystemExit):
        publish.publish(site, _info(), NEW_POST, NEW_IMAGES, NEW_RECORD)
    monkeypatch.setattr(sitefiles, "FAULT", None)
    assert publish.main(["list", "--site", str(site), "--notebooks", str(FIXTURES / "notebooks"),
                         "--params", str(FIXTURES / "params")]) == 2  # the record {"v": "old"} is not a valid one
    capsys.readouterr()
    with pytest.raises(publish.PublishError):  # the (invalid) old record stops the run, after recovery
        _run(site, tmp_path / "build")
    assert f"recovered {SLUG}: an interrupted publication was rolled back" in capsys.readouterr().out
    assert _snapshot(site) == old


# --------------------------------------------------------------------------- render publishes only a completed run


@pytest.mark.slow  # executes the fixture notebook through papermill
def test_render_publishes_only_the_completed_published_run(tmp_path):
    site, build = make_site(tmp_path / "site"), tmp_path / "build"
    assert _run(site, build) == 0
    published = _snapshot(site)
    assert publish.rerender(site=site, build=build, notebooks=FIXTURES / "notebooks",
                            params_dir=FIXTURES / "params") == 0
    assert _snapshot(site) == published  # the same run renders to the same files
    # The published record comes from another run than the executed copy: refused.
    results = site / "_data" / "results" / f"{SLUG}.json"
    original = results.read_bytes()
    results.write_text(json.dumps({**json.loads(original), "executed_at": "2026-01-02T03:04:05+00:00"}))
    with pytest.raises(publish.PublishError, match=r"holds the smoke run of .* published result is the smoke run of "
                                                   r"2026-01-02T03:04:05.*differ in time.*make execute "
                                                   r"ONLY=publisher-fixture"):
        publish.rerender(site=site, build=build, notebooks=FIXTURES / "notebooks",
                         params_dir=FIXTURES / "params")
    results.write_bytes(original)
    # A failing run: its executed copy holds the traceback; render refuses it.
    notebooks = tmp_path / "notebooks"
    notebooks.mkdir()
    (notebooks / FIXTURE_NB.name).write_text(FIXTURE_NB.read_text().replace("total = 0\n", "total = 0\nraise ValueError('boom')\n"))
    with pytest.raises(publish.PublishError, match="boom"):
        _run(site, build, notebooks=notebooks)
    with pytest.raises(publish.PublishError, match=r"did not complete \(it failed or was interrupted\).*"
                                                   r"make execute ONLY=publisher-fixture"):
        publish.rerender(site=site, build=build, notebooks=FIXTURES / "notebooks",
                         params_dir=FIXTURES / "params")
    assert _snapshot(site) == published
    proc = subprocess.run([sys.executable, "-m", "sidebyside.publish", "render", "--site", str(site), "--build", str(build),
                           "--notebooks", str(FIXTURES / "notebooks"), "--params", str(FIXTURES / "params")],
                          capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(ROOT / "src")})
    assert proc.returncode == 2 and "render refused; nothing was changed" in proc.stderr and "Traceback" not in proc.stderr
    assert _snapshot(site) == published


# --------------------------------------------------------------------------- a published record that cannot be trusted

VALID = {"slug": SLUG, "profile": "cpu", "executed_at": "2026-11-22T00:00:00+00:00", "source_hash": "k",
         "provenance": {}, "metrics": {}}


@pytest.mark.parametrize("content, problem", [
    (b'{"slug": "publisher-fixture", "prof', "is not valid JSON"),
    (b"", "is not valid JSON"),
    (b"\xff\xfe\x00garbage", "cannot be read"),
    (b"[]", "holds a JSON list, not an object"),
    (json.dumps({k: v for k, v in VALID.items() if k != "profile"}).encode(), "has profile None"),
    (json.dumps({**VALID, "profile": "huge"}).encode(), "has profile 'huge'"),
    (json.dumps({**VALID, "slug": "other"}).encode(), "names slug 'other'"),
    (json.dumps({**VALID, "source_hash": None}).encode(), "lacks source_hash"),
    (None, "is missing"),
])
def test_untrustworthy_published_record_is_reported_never_replaced(tmp_path, content, problem):
    site = make_site(tmp_path / "site")
    publish.publish(site, _info(), "---\nprofile: cpu\n---\n", {"a.png": b"cpu"}, VALID)
    results = site / "_data" / "results" / f"{SLUG}.json"
    if content is None:
        results.unlink()
    else:
        results.write_bytes(content)
    published = _snapshot(site)
    with pytest.raises(publish.PublishError) as info:
        _run(site, tmp_path / "build")  # a smaller profile, without FORCE
    message = str(info.value)
    assert str(results) in message and problem in message
    assert f"git checkout -- _data/results/{SLUG}.json" in message and "FORCE=1" in message
    assert _snapshot(site) == published
    assert not (tmp_path / "build" / "executed").exists()  # nothing was run
    proc = subprocess.run([sys.executable, "-m", "sidebyside.publish", "list", "--site", str(site),
                           "--notebooks", str(FIXTURES / "notebooks"), "--params", str(FIXTURES / "params")],
                          capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(ROOT / "src")})
    assert proc.returncode == 2 and "BROKEN" in proc.stdout, proc.stdout + proc.stderr
    assert problem in proc.stderr and "Traceback" not in proc.stderr


@pytest.mark.parametrize("value, forced", [("1", True), ("0", False), ("", False)])
def test_make_force_means_exactly_1(value, forced):
    proc = subprocess.run(["make", "-n", "execute", f"FORCE={value}", "SETUP=0", "PYTHON=python3"], cwd=ROOT,
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert ("--force" in proc.stdout) is forced, proc.stdout


def test_make_force_other_values_are_refused():
    proc = subprocess.run(["make", "-n", "execute", "FORCE=yes", "SETUP=0", "PYTHON=python3"], cwd=ROOT,
                          capture_output=True, text=True)
    assert proc.returncode != 0 and "FORCE=yes is neither 1" in proc.stderr


# --------------------------------------------------------------------------- one run at a time


@pytest.mark.slow  # executes the fixture notebook through papermill
def test_two_concurrent_runs_second_exits_naming_the_first(tmp_path):
    site, build = make_site(tmp_path / "site"), tmp_path / "build"
    slow = tmp_path / "slow"
    slow.mkdir()
    release = tmp_path / "release"  # the first run holds the lock until the second has exited
    hold = (f"import pathlib, time\ndeadline = time.time() + 120\nwhile not pathlib.Path({str(release)!r}).exists() "
            f"and time.time() < deadline:\n    time.sleep(0.05)\n")
    (slow / FIXTURE_NB.name).write_text(FIXTURE_NB.read_text().replace("total = 0\n", hold + "total = 0\n"))
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}

    def command(notebooks):
        return [sys.executable, "-m", "sidebyside.publish", "execute", "--profile", "smoke", "--no-progress",
                "--notebooks", str(notebooks), "--params", str(FIXTURES / "params"), "--site", str(site),
                "--build", str(build)]

    first = subprocess.Popen(command(slow), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    lock = site / sitefiles.STATE_DIR / "lock"
    deadline = time.time() + 120
    while time.time() < deadline and f"pid {first.pid}" not in (lock.read_text() if lock.exists() else ""):
        time.sleep(0.2)
    second = subprocess.run(command(FIXTURES / "notebooks"), capture_output=True, text=True, env=env, timeout=120)
    release.touch()
    out, err = first.communicate(timeout=300)
    assert second.returncode == 2, second.stdout + second.stderr
    assert f"pid {first.pid}" in second.stderr and "in use by another run" in second.stderr
    assert first.returncode == 0, out + err
    assert "deadline = time.time() + 120" in next((site / "_posts").glob(f"*-{SLUG}.md")).read_text()  # the first run's post
    assert _leftovers(site) == []
    assert lock.read_text() == ""  # released


# --------------------------------------------------------------------------- clear messages


def test_a_settings_file_of_no_notebook_is_an_error(tmp_path):
    infos = publish.discover(FIXTURES / "notebooks")
    (tmp_path / f"{SLUG}.yaml").write_text("cpu: {num_points: 3}\n")
    (tmp_path / "gpu-calls.yaml").write_text("call_overhead_s: 30\n")  # params/ holds this one too
    (tmp_path / "publisher-fixtur.yaml").write_text("cpu: {num_points: 9}\n")
    with pytest.raises(publish.PublishError, match=r"publisher-fixtur\.yaml is not the settings file of a notebook.*"
                                                   f"valid slugs: {SLUG}"):
        publish.load_params(tmp_path, "cpu", infos)
    (tmp_path / "publisher-fixtur.yaml").unlink()
    (tmp_path / "cpu.yaml").write_text(f"{SLUG}: {{num_points: 3}}\n")  # the layout of before: one file a profile
    with pytest.raises(publish.PublishError, match=r"cpu\.yaml is not the settings file of a notebook \(settings "
                                                   r"live in one file per post, <slug>\.yaml"):
        publish.load_params(tmp_path, "cpu", infos)


def test_only_with_no_slug_says_so():
    infos = publish.discover(FIXTURES / "notebooks")
    for only in (",", " , "):
        with pytest.raises(publish.PublishError, match="names no slug"):
            publish.select(infos, only)


def test_future_post_date_warns(capsys):
    import dataclasses

    info = dataclasses.replace(_info(), date="2999-01-01")
    check_date(info, {})
    assert "date 2999-01-01 is in the future; Jekyll does not show the post" in capsys.readouterr().err
    check_date(info, {"future": True})
    check_date(_info(), {})
    assert capsys.readouterr().err == ""


def test_kernelspec_hint_names_a_command_that_runs(tmp_path):
    path = _write_nb(tmp_path / "01_x.py")
    path.write_text(path.read_text().replace("#   kernelspec:\n#     display_name: Python 3\n#     language: python\n"
                                             "#     name: python3\n", ""))
    with pytest.raises(publish.PublishError, match=re.escape(f"Run: {sys.executable} -m jupytext --set-kernel python3")):
        publish.read_notebook_info(path)


def test_a_runs_time_limit_comes_from_its_published_run_of_the_same_profile(monkeypatch, tmp_path):
    from sidebyside.publish import pipeline, running

    records = {"a": {"profile": "cpu", "provenance": {"run_s": 1000.0}}, "b": {"profile": "gpu", "provenance": {}},
               "c": {"profile": "cpu", "provenance": {"run_s": 5.0}}}
    monkeypatch.setattr(pipeline, "published_record", lambda site, slug: records.get(slug))
    assert pipeline._limit(tmp_path, "a", "cpu") == running.run_limit(1000.0) == 3000.0
    assert pipeline._limit(tmp_path, "a", "smoke") == running.RUN_LIMIT_S  # another profile's time says nothing
    assert pipeline._limit(tmp_path, "b", "gpu") == running.RUN_LIMIT_S  # none recorded
    assert pipeline._limit(tmp_path, "c", "cpu") == running.RUN_LIMIT_FLOOR_S  # never below the floor
    assert pipeline._limit(tmp_path, "none", "cpu") == running.RUN_LIMIT_S
