"""Nothing a notebook's run writes is read later as code, configuration or input (issue "Nothing
runs", round 5), and a run that fails leaves the checkout as it was.

Benign payloads only: marker files (a comment, or a name nothing loads), appended comments where a
file exists, a link to ``/etc/hostname``, sleeping processes. The sandboxed probe run tries, in one
run, each write a hostile notebook would (the venv's ``.pth`` and ``sitecustomize.py``, a byte-code
cache in the checkout, the home's ``.gitconfig``, ``.ipython`` and ``matplotlibrc``,
``.bundle/config``, an ``.egg-info``, ``.offline/``, ``.git/``, the build's executed copies and the
publisher's journal, another post's checkpoint, the built native kernel, a link in ``images/``) and
leaves 30 nested waiting processes; each write is refused or gone after the run, and so are the
processes. Without a sandbox, the watch puts back what a failed run changed
(:class:`sidebyside.publish.guard.TreeWatch`).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sysconfig
import uuid
from pathlib import Path

import pytest
from conftest import ROOT, committed_tree, make_site

from sidebyside import publish
from sidebyside.publish import guard, running, sandbox
from sidebyside.publish.common import PublishError

HEADER = ["# ---", "# jupyter:", "#   kernelspec:", "#     display_name: Python 3",
          "#     language: python", "#     name: python3", "#   sidebyside:", "#     slug: {slug}",
          "#     title: Later", "#     date: '2026-11-30'",
          "#     description: Tries what a later step would read.", "#     compared: Nothing.",
          "#     metrics: [{metrics}]", "# ---", ""]

PROBE_CELLS = r'''
# %% tags=["parameters"]
targets = {}
sleeper = "300"
native_name = ""

# %%
import os, subprocess, time
MARK = "# written by a test run: a benign marker\n"
tried = {}
for name, (path, mode) in targets.items():
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, mode) as f:
            f.write(MARK)
        tried[name] = "written"
    except OSError as exc:
        tried[name] = f"{type(exc).__name__}: {exc.strerror}"
try:
    os.symlink("/etc/hostname", targets["executed_ro"][0].replace("build/executed", "images"))
    tried["images_link"] = "written"
except OSError as exc:
    tried["images_link"] = f"{type(exc).__name__}: {exc.strerror}"
native = os.environ["SIDEBYSIDE_NATIVE_CACHE"]
planted = os.path.join(native, "grid_sample_cpu-planted.so")
for name, path, mode in (("native_built", os.path.join(native, native_name), "a"),
                         ("native_planted", planted, "w")):
    try:
        with open(path, mode) as f:
            f.write(MARK)
        tried[name] = "written"
    except OSError as exc:
        tried[name] = f"{type(exc).__name__}: {exc.strerror}"
with open("/tmp/chain.sh", "w") as f:  # each level starts the next, detached, and becomes a sleeper
    f.write('if [ "$1" -gt 1 ]; then setsid sh /tmp/chain.sh $(($1 - 1)) & fi\n'
            f"exec sleep {sleeper}\n")
subprocess.Popen(["sh", "/tmp/chain.sh", "30"], start_new_session=True,
                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def sleepers():
    found = 0
    for entry in os.listdir("/proc"):
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                found += f.read().split(b"\0")[:2] == [b"sleep", sleeper.encode()]
        except OSError:
            pass
    return found


waited = time.monotonic()
while sleepers() < 30 and time.monotonic() - waited < 20:
    time.sleep(0.1)

# %%
from sidebyside.run import provenance
provenance.save_results({"tried": tried, "sleepers": sleepers(), "native": native,
                         "home": os.environ["HOME"]})
'''

BWRAP = shutil.which("bwrap")
needs_sandbox = pytest.mark.skipif(
    not BWRAP or sandbox.probe(BWRAP) is not None,
    reason="bubblewrap cannot run here (apt-get install bubblewrap): no sandboxed run is tried")


def _notebook(folder: Path, slug: str, metrics: str, cells: str):
    path = folder / f"01_{slug.replace('-', '_')}.py"
    path.write_text("\n".join(HEADER).format(slug=slug, metrics=metrics) + cells)
    return publish.read_notebook_info(path)


def _state(path: Path) -> str | None:
    """What is at ``path`` now: None (nothing), a link's target, or a file's SHA-256."""
    if path.is_symlink():
        return "link:" + os.readlink(path)
    return hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else None


def _sleepers(mark: str) -> list[int]:
    found = []
    for entry in Path("/proc").glob("[0-9]*"):
        try:
            if (entry / "cmdline").read_bytes().split(b"\0")[:2] == [b"sleep", mark.encode()]:
                found.append(int(entry.name))
        except OSError:
            pass
    return found


def _targets(tag: str, build: Path) -> dict[str, Path]:
    """Each path the probe writes, by what a later step would make of it."""
    home, purelib = Path.home(), Path(sysconfig.get_paths()["purelib"])
    startup, private = Path(".ipython") / "profile_default" / "startup", Path(sandbox.HOME)
    pyc = ROOT / "src" / "sidebyside" / "__pycache__" / f"zz_marker_{tag}.cpython-312.pyc"
    return {"venv_pth": purelib / f"zz_sidebyside_marker_{tag}.pth",
            "venv_sitecustomize": purelib / "sitecustomize.py",
            "checkout_pyc": pyc,
            "home_gitconfig": home / ".gitconfig",
            "home_ipython": home / startup / f"zz-marker-{tag}.py",
            "home_matplotlibrc": home / ".config" / "matplotlib" / "matplotlibrc",
            "bundle_config": ROOT / ".bundle" / "config",
            "egg_info": ROOT / f"zz_marker_{tag}.egg-info" / "PKG-INFO",
            "offline": ROOT / ".offline" / f"zz-marker-{tag}",
            "git": ROOT / ".git" / "hooks" / f"zz-marker-{tag}",
            "executed_ro": ROOT / "build" / "executed" / f"zz-marker-{tag}.ipynb",
            "journal": ROOT / ".sidebyside" / f"zz-marker-{tag}",
            "checkpoint_other": ROOT / "checkpoints" / f"zz-marker-{tag}.json",
            "staged_executed": build / "executed" / f"zz-marker-{tag}.ipynb",
            "staged_results": build / "results" / f"zz-marker-{tag}.json",
            "private_gitconfig": private / ".gitconfig",
            "private_ipython": private / startup / "00-x.py",
            "private_matplotlibrc": private / ".config" / "matplotlib" / "matplotlibrc"}


@pytest.fixture(scope="module")
def probed(tmp_path_factory):
    """The probe notebook's run, sandboxed, with a native-kernel cache of this test's own."""
    tmp_path = tmp_path_factory.mktemp("later")
    tag, build = uuid.uuid4().hex[:8], tmp_path / "build"
    native = tmp_path / "native"
    native.mkdir()
    (native / "grid_sample_cpu-0000.so").write_bytes(b"\x7fELF built by make native")
    (native / "grid_sample_cpu-0000.so.sha256").write_text("25 0000\n")
    targets = _targets(tag, build)
    link = ROOT / "images" / f"zz-marker-{tag}.ipynb"
    before = {name: _state(path) for name, path in targets.items()} | {"images_link": _state(link)}
    native_before = {p.name: _state(p) for p in native.iterdir()}
    params = {"targets": {n: [str(p), "a" if p.exists() else "x"] for n, p in targets.items()},
              "sleeper": f"{400 + int(tag, 16) % 1000}.{os.getpid()}",
              "native_name": "grid_sample_cpu-0000.so"}
    info, nb = _notebook(tmp_path, "later-probe", "tried, sleepers, native, home", PROBE_CELLS)
    saved_env = dict(os.environ)
    os.environ.update({sandbox.MODE_ENV: "1", running.NATIVE_ENV: str(native)})
    try:
        _, saved = running.execute(info, nb, "smoke", params, build, root=ROOT, progress=False,
                                   limit=120)
    finally:
        os.environ.clear()
        os.environ.update(saved_env)
    after = {name: _state(path) for name, path in targets.items()} | {"images_link": _state(link)}
    return {"metrics": saved["metrics"], "before": before, "after": after,
            "sleeper": params["sleeper"], "native": native, "native_before": native_before,
            "native_after": {p.name: _state(p) for p in native.iterdir()}}


CHECKOUT = ("venv_pth", "venv_sitecustomize", "checkout_pyc", "bundle_config", "egg_info",
            "offline", "git", "executed_ro", "journal", "checkpoint_other", "images_link")


@needs_sandbox
@pytest.mark.slow  # starts a kernel
@pytest.mark.parametrize("name", CHECKOUT)
def test_a_write_that_a_later_step_would_read_is_refused(probed, name):
    said = probed["metrics"]["tried"][name]
    assert said.startswith(("OSError: Read-only file system", "PermissionError")), said
    assert probed["after"][name] == probed["before"][name], name


@needs_sandbox
@pytest.mark.slow  # starts a kernel
@pytest.mark.parametrize("name", ["home_gitconfig", "home_ipython", "home_matplotlibrc"])
def test_the_user_s_home_is_not_the_run_s(probed, name):
    """The run's own home takes the writes (below); the user's is out of its reach."""
    assert probed["metrics"]["tried"][name] != "written"
    assert probed["after"][name] == probed["before"][name]


@needs_sandbox
@pytest.mark.slow  # starts a kernel
def test_what_the_run_writes_in_its_own_home_and_outputs_is_gone_after_it(probed):
    tried, after = probed["metrics"]["tried"], probed["after"]
    assert probed["metrics"]["home"] == sandbox.HOME
    for name in ("private_gitconfig", "private_ipython", "private_matplotlibrc", "staged_executed",
                 "staged_results", "native_planted"):
        assert tried[name] == "written", (name, tried[name])  # its own, private and dropped
    for name in ("private_gitconfig", "private_ipython", "private_matplotlibrc", "staged_executed",
                 "staged_results"):
        assert after[name] is None, name  # only the slug's executed copy and results are taken back


@needs_sandbox
@pytest.mark.slow  # starts a kernel
def test_the_built_native_kernel_is_read_only_and_a_planted_one_is_not_kept(probed):
    assert probed["metrics"]["tried"]["native_built"].startswith("OSError: Read-only file system")
    # the run's own folder, its links to the built kernel dropped with it
    assert Path(probed["metrics"]["native"]).resolve() != probed["native"].resolve()
    assert probed["native_after"] == probed["native_before"]  # nothing planted, nothing changed


@needs_sandbox
@pytest.mark.slow  # starts a kernel
def test_thirty_nested_waiting_processes_end_with_the_run(probed):
    assert probed["metrics"]["sleepers"] == 30
    assert not _sleepers(probed["sleeper"])


@pytest.mark.parametrize("name", ["parts.json", "checkpoints/other.json", "../checkpoints/s.json",
                                  "/tmp/checkpoints/s.json", "checkpoints/sub/s.json",
                                  "./checkpoints/s.json", "params/s.yaml", 7])
def test_a_checkpoint_file_other_than_the_slug_s_is_refused(name):
    with pytest.raises(PublishError, match=r"checkpoints/s\.json.*nothing was run"):
        running.checkpoint_name({"checkpoint_file": name}, "s")


def test_the_checkpoint_file_is_the_slug_s_or_none():
    assert running.checkpoint_name({}, "s") is None
    assert running.checkpoint_name({"checkpoint_file": ""}, "s") is None
    assert running.checkpoint_name({"checkpoint_file": None}, "s") is None
    own = {"checkpoint_file": "checkpoints/s.json"}
    assert running.checkpoint_name(own, "s") == "checkpoints/s.json"


def test_only_the_slug_s_checkpoint_file_is_taken_back(tmp_path):
    root, scratch = tmp_path / "root", tmp_path / "scratch"
    (root / "checkpoints").mkdir(parents=True)
    scratch.mkdir()
    (root / "checkpoints" / "s.json").write_text('{"runs": 1}')
    (root / "checkpoints" / "other.json").write_text('{"theirs": 1}')
    running.stage_checkpoint("checkpoints/s.json", scratch, root)
    assert not (scratch / "checkpoints").is_symlink()
    assert sorted(p.name for p in (scratch / "checkpoints").iterdir()) == ["s.json"]
    (scratch / "checkpoints" / "s.json").write_text('{"runs": 2}')
    (scratch / "checkpoints" / "other.json").write_text('{"forged": 1}')
    assert running.keep_checkpoint("checkpoints/s.json", scratch, root)
    assert (root / "checkpoints" / "s.json").read_text() == '{"runs": 2}'
    assert (root / "checkpoints" / "other.json").read_text() == '{"theirs": 1}'


@pytest.mark.parametrize("how", ["file link", "folder link"])
def test_a_checkpoint_left_as_a_link_is_not_taken_back(tmp_path, how, capsys):
    root, scratch = tmp_path / "root", tmp_path / "scratch"
    (root / "checkpoints").mkdir(parents=True)
    (root / "checkpoints" / "s.json").write_text('{"runs": 1}')
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "s.json").write_text('{"read": "from elsewhere"}')
    if how == "file link":
        (scratch / "checkpoints").mkdir(parents=True)
        (scratch / "checkpoints" / "s.json").symlink_to(elsewhere / "s.json")
    else:
        scratch.mkdir()
        (scratch / "checkpoints").symlink_to(elsewhere, target_is_directory=True)
    assert not running.keep_checkpoint("checkpoints/s.json", scratch, root)
    assert (root / "checkpoints" / "s.json").read_text() == '{"runs": 1}'
    assert "not taken back" in capsys.readouterr().err


def test_the_run_s_native_folder_links_the_built_kernel_and_keeps_nothing_back(tmp_path):
    source, folder = tmp_path / "built", tmp_path / "run" / "native"
    source.mkdir()
    (source / "k.so").write_bytes(b"built")
    (source / "k.so.sha256").write_text("5 x\n")
    (source / "sub").mkdir()
    running.native_folder(source, folder)
    assert sorted(p.name for p in folder.iterdir()) == ["k.so", "k.so.sha256"]
    assert all(p.is_symlink() and p.resolve().parent == source.resolve() for p in folder.iterdir())
    (folder / "planted.so").write_bytes(b"planted")
    running.native_folder(source, folder)  # the next run's
    assert not (folder / "planted.so").exists() and not (source / "planted.so").exists()


def _tree(tmp_path: Path) -> Path:
    root = tmp_path / "root"
    for name, text in {"assets/post.js": "ok()", "assets/vendor/katex/katex.js": "katex",
                       "_includes/head.html": "<head>", "src/lib.py": "x = 1"}.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    return root


@pytest.mark.parametrize("change", ["content", "mode", "removed", "created", "link",
                                    "folder replaced"])
def test_without_a_sandbox_the_watch_puts_back_a_file_of_assets(tmp_path, change):
    root = _tree(tmp_path)
    before = {p.relative_to(root).as_posix(): _state(p) for p in sorted(root.rglob("*"))}
    modes = {p: p.stat().st_mode for p in root.rglob("*") if p.is_file()}
    watch = guard.TreeWatch([root], sandboxed=False)
    post = root / "assets" / "post.js"
    if change == "content":
        post.write_text("steal()")
    elif change == "mode":
        post.chmod(0o755)
    elif change == "removed":
        post.unlink()
    elif change == "created":
        (root / "assets" / "new" / "deep").mkdir(parents=True)
        (root / "assets" / "new" / "deep" / "evil.js").write_text("steal()")
    elif change == "link":
        post.unlink()
        post.symlink_to("/etc/hostname")
    else:
        shutil.rmtree(root / "assets")
        (root / "assets").symlink_to(tmp_path, target_is_directory=True)
    said = watch.restore("post")
    assert said and all("assets" in s for s in said), said
    assert {p.relative_to(root).as_posix(): _state(p) for p in sorted(root.rglob("*"))} == before
    assert {p: p.stat().st_mode for p in root.rglob("*") if p.is_file()} == modes
    assert watch.copies is None  # the copies are removed with the restoring


FAILING = r'''
# %% tags=["parameters"]
checkpoint_file = ""

# %%
import json
from pathlib import Path

from sidebyside.run import context

root = context.current().project_root()
Path(root, "assets", "post.js").write_text("steal()")
Path(root, "assets", "planted").mkdir()
Path(root, "assets", "planted", "evil.js").write_text("steal()")
Path(checkpoint_file).write_text(json.dumps({"parts": 1}))
Path(checkpoint_file).with_name("other.json").write_text(json.dumps({"forged": 1}))
1 / 0
'''


@pytest.mark.slow  # executes a notebook through papermill
def test_a_failed_run_without_a_sandbox_leaves_the_checkout_as_it_was(tmp_path, monkeypatch,
                                                                      capsys):
    """Its own checkpoint file aside (a run in parts that stops keeps what it measured)."""
    monkeypatch.setenv(sandbox.MODE_ENV, "0")
    root = make_site(tmp_path / "root")
    (root / "assets" / "post.js").write_text("ok()")
    (root / "notebooks" / "params").mkdir(parents=True)
    _notebook(root / "notebooks", "fails-apart", "done", FAILING)
    (root / "notebooks" / "params" / "fails-apart.yaml").write_text(
        "smoke: {checkpoint_file: checkpoints/fails-apart.json}\n")
    committed_tree(root)
    before = guard.tree(root)
    with pytest.raises(PublishError, match="ZeroDivisionError"):
        publish.run(profile="smoke", site=root, build=tmp_path / "build",
                    notebooks=root / "notebooks", params_dir=root / "notebooks" / "params",
                    root=root, progress=False)
    assert guard.tree(root, allowed=["checkpoints/fails-apart.json"]) == before
    assert not (root / "assets" / "planted").exists()
    assert json.loads((root / "checkpoints" / "fails-apart.json").read_text()) == {"parts": 1}
    assert not (root / "checkpoints" / "other.json").exists()
    said = capsys.readouterr().err
    assert "put back" in said and "assets/post.js (changed)" in said, said
