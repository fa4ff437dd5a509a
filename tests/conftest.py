"""Shared test helpers. Tests never write into the published _posts/, images/
or _data/: the session ends in failure if any of them changed."""

from __future__ import annotations

import functools
import hashlib
import os
import shutil
import subprocess
import tempfile
import zlib
from collections.abc import Iterable
from pathlib import Path

import pytest

from sidebyside.run import context

ROOT = Path(__file__).resolve().parents[1]
PUBLISHED = ("_posts", "images", "_data")
SITE_SKELETON = ("_config.yml", "_layouts", "_includes", "assets", "index.html", "feed.xml")


def _fingerprint() -> str:
    digest = hashlib.sha256()
    for top in PUBLISHED:
        for path in sorted((ROOT / top).rglob("*")):
            if path.is_file():
                digest.update(str(path.relative_to(ROOT)).encode())
                digest.update(path.read_bytes())
    return digest.hexdigest()


#: JAX's persistent compilation cache for what the test processes compile themselves, kept between test runs
#: (in the ignored build folder): PyTorch's Inductor keeps its own between runs already (its default folder).
#: Without it every `make test-fast` compiled the same few hundred small programs again: 94 s against 71 s, back to
#: back. JAX keys an entry by the program, its options and its own version, so a changed test compiles anew.
TEST_JAX_CACHE = ROOT / "build" / "test-cache" / "jax"


def pytest_configure(config):
    """One compilation cache for the whole test run, both frameworks alike (the run's folder of
    :mod:`sidebyside.lab.conditions`): made here, before pytest-xdist starts its workers, which inherit
    it with every notebook kernel and timing process they start; removed at the end. A process that
    has not applied :func:`~sidebyside.lab.conditions.same_conditions` compiles JAX into :data:`TEST_JAX_CACHE`
    (set here through JAX's environment variables, read when JAX is imported)."""
    from sidebyside.lab import conditions

    for name, value in (("JAX_COMPILATION_CACHE_DIR", str(TEST_JAX_CACHE)),
                        ("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "0"),
                        ("JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES", "-1")):
        os.environ.setdefault(name, value)
    if not os.environ.get(conditions.CACHE_ENV):
        folder = tempfile.mkdtemp(prefix="sidebyside-test-compile-")
        os.environ[conditions.CACHE_ENV] = folder
        config._compile_cache = folder


def pytest_unconfigure(config):
    folder = getattr(config, "_compile_cache", None)
    if folder:
        shutil.rmtree(folder, ignore_errors=True)


def pytest_sessionstart(session):
    session.config._published_fingerprint = _fingerprint()


def pytest_sessionfinish(session, exitstatus):
    before = getattr(session.config, "_published_fingerprint", None)
    if before is not None and _fingerprint() != before:
        print("\nERROR: the test run changed _posts/, images/ or _data/ (tests must write only to build/ or tmp)")
        session.exitstatus = 1


# Fixtures that execute a notebook through papermill (the real pipeline) or build a site with Jekyll. A test
# that uses one is marked slow (pyproject's marker: `make test-fast` runs none of them; `make test` and CI run all).
EXECUTING_FIXTURES = {"fixture_site", "hostile_site", "recorded_run", "smoke_site", "executed", "published_site"}
RUN_EVERY_NOTEBOOK = {"test_site.py", "test_colab.py"}


def pytest_collection_modifyitems(config, items):
    for item in items:
        if EXECUTING_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.slow)
    # `make test` hands whole files to its workers in collection order: the two that run every notebook
    # (about 20 minutes each on 2 cores) go first, one to each worker, rather than last and alone.
    items.sort(key=lambda item: item.path.name not in RUN_EVERY_NOTEBOOK)


@pytest.fixture(scope="module")
def float32_on_both_sides():
    """The notebooks' conditions (``conditions.same_conditions``) for a module that compares the frameworks'
    numbers: float32 with TF32 off on both sides. Left to their defaults on an H100, JAX multiplies float32
    matrices in TF32 and PyTorch does not; after 20 SGD steps test_training's first-layer weights parted by
    up to 1e-3 (seen on a GPU run). Use with ``pytestmark = pytest.mark.usefixtures(...)``."""
    import jax  # noqa: F401  (so that JAX's setting is made too)

    from sidebyside.lab import conditions

    with conditions.tf32(False):
        yield


@pytest.fixture(scope="session")
def hostile_site(tmp_path_factory):
    """A scratch site where the hostile fixture notebook (tests/fixtures/hostile/) was run and published
    through the real pipeline; shared by the tests that read it (test_hostile, test_untrusted)."""
    from sidebyside import publish

    hostile = ROOT / "tests" / "fixtures" / "hostile"
    base = tmp_path_factory.mktemp("hostile")
    site = make_site(base / "site")
    assert publish.run(profile="smoke", site=site, build=base / "build", notebooks=hostile,
                       params_dir=hostile / "params", progress=False) == 0
    return site


def make_site(directory: Path, *, with_published: bool = False) -> Path:
    """A scratch Jekyll site: the repo's layouts, config and assets, and
    (optionally) a copy of the published posts, images and results."""
    directory.mkdir(parents=True, exist_ok=True)
    for name in SITE_SKELETON + (PUBLISHED if with_published else ()):
        src = ROOT / name
        if src.is_dir():
            shutil.copytree(src, directory / name, dirs_exist_ok=True)
        elif src.is_file():
            shutil.copy2(src, directory / name)
    return directory


def git(root: Path, *args: str) -> str:
    """Run git in ``root`` as a throwaway author; its standard output, stripped."""
    return subprocess.run(["git", "-C", str(root), "-c", "user.name=t", "-c", "user.email=t@t", *args],
                          check=True, capture_output=True, text=True).stdout.strip()


def committed_tree(root: Path, files: dict[str, str] | None = None) -> str:
    """Write ``files`` (path: text) under ``root``, commit everything there in a new git repository, and
    return the commit as a checkpoint file and a run record keep it (12 hex digits)."""
    for name, text in (files or {}).items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    git(root, "init", "-q")
    git(root, "add", ".")
    git(root, "commit", "-qm", "init")
    return git(root, "rev-parse", "--short=12", "HEAD")


def chromium(playwright):
    """Debian's headless Chromium, as every browser test starts it: no sandbox (root), no GPU, and no
    background connections (this machine's closed network refuses them)."""
    return playwright.chromium.launch(executable_path="/usr/bin/chromium", args=[
        "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
        "--disable-component-update", "--disable-sync"])


SCREENSHOTS_ENV = "SIDEBYSIDE_SCREENSHOTS"


def screenshot(page, path: Path, **kwargs) -> None:
    """A browser test's picture of ``page`` for a person to look at (no test reads it), saved to ``path``
    only when the environment sets SIDEBYSIDE_SCREENSHOTS=1: a full-page picture of a long post costs
    about a second, and a test run takes dozens."""
    if os.environ.get(SCREENSHOTS_ENV) == "1":
        path.parent.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(path), **kwargs)


class Lazy:
    """Stands in for an asynchronous array (a JAX result): counts the waits on it."""

    def __init__(self):
        self.blocked = 0

    def block_until_ready(self):
        self.blocked += 1
        return self


def front_matter(post: str) -> dict:
    """The YAML front matter of a post's text."""
    import yaml

    assert post.startswith("---\n")
    return yaml.safe_load(post.split("---\n")[1])


def run_pairs(notebook: str, pairs: Iterable[str] | None, namespace: dict) -> dict:
    """Run the paired code cells of ``notebooks/<notebook>`` in order, as the notebook writes them, in
    ``namespace`` (the test supplies what the notebook's set-up cell would: imports, devices, configs):
    the cells of the pairs named in ``pairs``, or of every pair when None. Returns the namespace; fails
    when a named pair has no code cell."""
    from sidebyside.publish.discovery import read_header
    from sidebyside.publish.pairs import TAG_RE

    _, cells = read_header(ROOT / "notebooks" / notebook)
    ran = set()
    for cell in cells:
        match = next((m for m in (TAG_RE.match(str(t)) for t in cell["metadata"].get("tags", [])) if m), None)
        if cell["cell_type"] == "code" and match and (pairs is None or match.group(1) in pairs):
            exec(compile(cell["source"], f"<{notebook} pair {match.group(1)}:{match.group(2)}>", "exec"), namespace)
            ran.add(match.group(1))
    missing = set(pairs or ()) - ran
    assert ran and not missing, f"{notebook}: no paired code cell for {sorted(missing) or 'any pair'}"
    return namespace


@pytest.fixture(scope="session")
def root() -> Path:
    return ROOT


@pytest.fixture
def framed_verdicts(monkeypatch) -> list:
    """Every verdict framed while the test runs, as the same objects the post's code holds (every verdict
    constructor, and every post's own verdict, ends in ``framing.frame``), for a test that each verdict a
    post builds names its race (``race``) rather than falling back to its question's words."""
    from sidebyside.lab import framing, ladders, verdict

    seen, real = [], framing.frame

    def recording(v, **kwargs):
        seen.append(v)
        return real(v, **kwargs)
    for module in (framing, verdict, ladders):
        monkeypatch.setattr(module, "frame", recording)
    return seen


@pytest.fixture(autouse=True)
def _no_results_leak(monkeypatch, tmp_path):
    """save_results() in a test process writes to a temporary folder."""
    monkeypatch.setenv(context.ENV["results_dir"], str(tmp_path / "results"))
    monkeypatch.delenv(context.ENV["slug"], raising=False)
    yield


@pytest.fixture(autouse=True)
def _one_process_unless_asked(monkeypatch):
    """A unit test times the in-process loop of sidebyside.lab.timing (its functions may count calls
    or hold state a worker process would not share); a test of the pooling passes ``processes=``."""
    from sidebyside.lab import pool

    monkeypatch.setattr(pool, "BY_HAND", 1)
    yield


def per_process(median: float, spread: float = 0.02, processes: int = 5) -> list[float]:
    """``processes`` per-process medians around ``median``, at most ``spread`` (a fraction) either
    side, in an order set by the value itself, so that two entries of different medians do not
    move together (their per-process ratios spread as a real run's do)."""
    offsets = [-1.0, -0.5, 0.0, 0.5, 1.0, -0.75, 0.75, -0.25, 0.25][:processes]
    k = zlib.crc32(repr(float(median)).encode()) % len(offsets)
    return [median * (1 + spread * o) for o in offsets[k:] + offsets[:k]]


# --------------------------------------------------------------------------- one execution of each notebook per run
# (tests/executions.py): the site, Colab and post tests read the same one.


@pytest.fixture(scope="session")
def shared_folder(tmp_path_factory) -> Path:
    import executions

    return executions.shared_folder(tmp_path_factory)


@pytest.fixture(scope="session")
def fashion_mirror():
    """An HTTP server serving the local FashionMNIST .gz files: stands in for torchvision's mirrors.
    Yields (base URL, {filename: md5 of the served file})."""
    import executions

    files = executions.fashion_files()
    if files is None:
        pytest.skip("no local FashionMNIST files to serve as the simulated download")
    server, url = executions.serve(files)
    try:
        yield url, executions.served_md5(files)
    finally:
        server.shutdown()


@pytest.fixture(scope="session")
def raw_site():
    """This checkout over HTTP, standing in for the repository's raw files (the published records, params/)."""
    import executions

    server, url = executions.serve(ROOT)
    try:
        yield url
    finally:
        server.shutdown()


@pytest.fixture(scope="session")
def colab_runtime(shared_folder):
    """This worker's Colab-like environment (:class:`executions.ColabRuntime`)."""
    import executions

    return executions.colab_runtime(shared_folder, os.environ.get("PYTEST_XDIST_WORKER", "main"))


@pytest.fixture(scope="session")
def published_site(shared_folder) -> Path:
    """The published site, built once per test run (:func:`executions.published_site`): read it, never
    write to it (every worker reads the same folder)."""
    import executions

    site = executions.published_site(shared_folder)
    if not any((site / "_posts").glob("*.md")):
        pytest.skip("nothing published yet")
    return site


@pytest.fixture(scope="session")
def executed(shared_folder, colab_runtime, fashion_mirror, raw_site):
    """``executed(slug)``: the notebook's one smoke execution of this test run (:class:`executions.Execution`),
    made by whichever worker asks first."""
    import executions

    mirror, md5 = fashion_mirror
    return functools.partial(executions.execute, shared=shared_folder, runtime=colab_runtime, mirror=mirror,
                             md5=md5, raw_site=raw_site)
