"""A notebook's run happens in a sandbox (:mod:`sidebyside.publish.sandbox`), within a time limit.

Benign payloads only: the probe notebook tries to write marker files into the checkout, the venv's
site-packages and the home's ``.ipython``, reads the environment, starts a detached grandchild and
opens a connection to a documentation address (192.0.2.1, never routed), and saves what happened as
its metrics; the endless notebook sleeps until its run's limit ends it. Both run through
:func:`sidebyside.publish.running.execute`, as the publisher runs every notebook.
"""

from __future__ import annotations

import os
import shutil
import sys
import sysconfig
import time
import uuid
from pathlib import Path

import pytest
from conftest import ROOT

from sidebyside import publish
from sidebyside.publish import running, sandbox
from sidebyside.publish.common import PublishError

HEADER = ["# ---", "# jupyter:", "#   kernelspec:", "#     display_name: Python 3",
          "#     language: python", "#     name: python3", "#   sidebyside:", "#     slug: {slug}",
          "#     title: Sandbox", "#     date: '2026-11-30'",
          "#     description: Tries the sandbox.", "#     compared: Nothing.",
          "#     metrics: [{metrics}]", "# ---", ""]

PROBE_CELLS = '''
# %% tags=["parameters"]
targets = {}
sleeper = "300"

# %%
import json, os, socket, subprocess
tried = {}
for name, path in targets.items():
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as f:
            f.write("written by a sandboxed cell")
        tried[name] = "written"
    except OSError as exc:
        tried[name] = f"{type(exc).__name__}: {exc.strerror}"
seen = sorted(k for k in os.environ if k in ("SIDEBYSIDE_TEST_TOKEN", "AWS_SECRET_ACCESS_KEY"))
subprocess.run(f"setsid sleep {sleeper} >/dev/null 2>&1 &", shell=True, check=True)
connection = socket.socket()
connection.settimeout(1)
try:
    connection.connect(("192.0.2.1", 9))
    network = "connected"
except OSError as exc:
    network = f"{type(exc).__name__}: {exc.strerror or exc}"
with open("scratch-marker.txt", "w") as f:
    f.write("the run's own folder")
print(json.dumps(tried))

# %%
from sidebyside.run import provenance
provenance.save_results({"tried": tried, "seen": seen, "network": network,
                         "home": os.environ["HOME"]})
'''

ENDLESS_CELLS = '''
# %% tags=["parameters"]
n = 1

# %%
import time
while True:  # never ends
    time.sleep(0.2)
'''

BWRAP = shutil.which("bwrap")
needs_sandbox = pytest.mark.skipif(
    not BWRAP or sandbox.probe(BWRAP) is not None,
    reason="bubblewrap cannot run here (apt-get install bubblewrap): no sandboxed run is tried")


def _notebook(tmp_path: Path, slug: str, metrics: str, cells: str):
    path = tmp_path / f"01_{slug.replace('-', '_')}.py"
    path.write_text("\n".join(HEADER).format(slug=slug, metrics=metrics) + cells)
    return publish.read_notebook_info(path)


def _sleepers(mark: str) -> list[int]:
    found = []
    for entry in Path("/proc").glob("[0-9]*"):
        try:
            if (entry / "cmdline").read_bytes().split(b"\0")[:2] == [b"sleep", mark.encode()]:
                found.append(int(entry.name))
        except OSError:
            pass
    return found


@pytest.fixture(scope="module")
def probed(tmp_path_factory):
    """The probe notebook's run, sandboxed, with secrets in this process's environment."""
    tmp_path = tmp_path_factory.mktemp("sandbox")
    tag = uuid.uuid4().hex[:8]
    targets = {"checkout": str(ROOT / f"sandbox-marker-{tag}.txt"),
               "venv": str(Path(sysconfig.get_paths()["purelib"]) / f"sandbox-marker-{tag}.txt"),
               "home": str(Path.home() / ".ipython" / f"sandbox-marker-{tag}.txt"),
               "private_home": f"$HOME/.ipython/sandbox-marker-{tag}.txt"}
    sleeper = f"{300 + int(tag, 16) % 1000}.{os.getpid()}"
    info, nb = _notebook(tmp_path, "sandbox-probe", "tried, seen, network, home", PROBE_CELLS)
    saved_env = dict(os.environ)
    os.environ.update({"SIDEBYSIDE_TEST_TOKEN": "xyz", "AWS_SECRET_ACCESS_KEY": "abc",
                       sandbox.MODE_ENV: "1"})
    targets["private_home"] = targets["private_home"].replace("$HOME", sandbox.HOME)
    try:
        _, saved = running.execute(info, nb, "smoke", {"targets": targets, "sleeper": sleeper},
                                   tmp_path / "build", root=ROOT, progress=False, limit=120)
    finally:
        os.environ.clear()
        os.environ.update(saved_env)
    return {"saved": saved, "targets": targets, "sleeper": sleeper, "build": tmp_path / "build"}


@needs_sandbox
@pytest.mark.slow  # starts a kernel
def test_a_cell_cannot_write_the_checkout_the_venv_or_the_home(probed):
    tried, targets = probed["saved"]["metrics"]["tried"], probed["targets"]
    for name in ("checkout", "venv", "home"):
        assert tried[name].startswith("OSError: Read-only file system"), (name, tried[name])
        assert not Path(targets[name]).exists(), targets[name]
    assert tried["private_home"] == "written"  # its own home, private and gone with it
    assert probed["saved"]["metrics"]["home"] == sandbox.HOME
    assert (probed["build"] / "scratch" / "sandbox-probe" / "scratch-marker.txt").is_file()


@needs_sandbox
@pytest.mark.slow  # starts a kernel
def test_secrets_of_the_environment_are_not_seen(probed):
    assert probed["saved"]["metrics"]["seen"] == []


@needs_sandbox
@pytest.mark.slow  # starts a kernel
def test_a_detached_grandchild_ends_with_the_run(probed):
    assert not _sleepers(probed["sleeper"])


@needs_sandbox
@pytest.mark.slow  # starts a kernel
def test_nothing_beyond_loopback_is_reachable(probed):
    assert probed["saved"]["metrics"]["network"] == "OSError: Network is unreachable"


@needs_sandbox
@pytest.mark.slow  # starts a kernel
def test_a_run_past_its_limit_is_stopped_naming_its_cell(tmp_path, monkeypatch):
    monkeypatch.setenv(sandbox.MODE_ENV, "1")
    info, nb = _notebook(tmp_path, "sandbox-endless", "n", ENDLESS_CELLS)
    started = time.monotonic()
    said = r"time limit of 25 s while cell \d+ \[import time\] ran"
    with pytest.raises(PublishError, match=said) as failed:
        running.execute(info, nb, "smoke", {"n": 2}, tmp_path / "build", root=ROOT, progress=False,
                        limit=25)
    assert time.monotonic() - started < 60
    assert "nothing published was changed" in str(failed.value)
    assert not (tmp_path / "build" / "results" / "sandbox-endless.json").exists()


def test_a_plain_child_past_its_limit_is_killed_with_its_group():
    started = time.monotonic()
    command = [sys.executable, "-c", "import time; time.sleep(60)"]
    finished = sandbox.run(command, dict(os.environ), 1.0)
    assert finished.timed_out and finished.returncode != 0
    assert time.monotonic() - started < 10


def test_the_environment_keeps_only_its_allowlist():
    source = {"PATH": "/usr/bin", "LC_ALL": "C", "SIDEBYSIDE_SLUG": "s",
              "SIDEBYSIDE_TEST_TOKEN": "xyz", "AWS_SECRET_ACCESS_KEY": "k", "OMP_NUM_THREADS": "2",
              "JAX_PLATFORMS": "cpu", "GITHUB_TOKEN": "t", "HOME": "/root", "TORCH_API_KEY": "k",
              "SSH_AUTH_SOCK": "/s", "SOMETHING": "x"}
    kept = sandbox.environment(source, extra_names=["SOMETHING"])
    assert kept == {"PATH": "/usr/bin", "LC_ALL": "C", "SIDEBYSIDE_SLUG": "s",
                    "OMP_NUM_THREADS": "2", "JAX_PLATFORMS": "cpu", "SOMETHING": "x",
                    "HOME": sandbox.HOME, "TMPDIR": "/tmp",
                    "JUPYTER_RUNTIME_DIR": sandbox.RUNTIME_DIR}


def test_mounts_go_shallowest_first_and_a_folder_named_both_ways_is_writable(tmp_path):
    checkout, both = tmp_path / "checkout", tmp_path / "b"
    scratch = checkout / "build" / "s"
    for folder in (scratch, both):
        folder.mkdir(parents=True)
    box = sandbox.Box(cwd=scratch, read=[scratch.parent.parent, both, tmp_path / "missing"],
                      write=[scratch, both], moved={tmp_path / "inside": tmp_path / "outside"})
    line = sandbox.bwrap_argv("bwrap", box, ["true"])
    mounts = [(line[i], line[i + 2]) for i, a in enumerate(line) if a in ("--ro-bind", "--bind")
              and line[i + 2].startswith(str(tmp_path))]
    assert mounts == [("--ro-bind", str(both)), ("--ro-bind", str(checkout)), ("--bind", str(both)),
                      ("--bind", str(tmp_path / "inside")), ("--bind", str(scratch))]
    assert "--unshare-net" in line and line[-4:] == ["--chdir", str(scratch), "--", "true"]
    assert line[line.index("--cap-drop") + 1] == "ALL"


def test_without_bubblewrap_auto_warns_once_and_1_refuses(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("PATH", str(tmp_path))  # no bwrap on it
    sandbox._warn_unsandboxed.cache_clear()
    monkeypatch.setenv(sandbox.MODE_ENV, "auto")
    assert sandbox.enabled() is False and sandbox.enabled() is False
    said = capsys.readouterr().err
    assert said.count("NOT sandboxed") == 1 and "apt-get install bubblewrap" in said, said
    monkeypatch.setenv(sandbox.MODE_ENV, "1")
    with pytest.raises(ValueError, match="apt-get install bubblewrap"):
        sandbox.enabled()
    monkeypatch.setenv(sandbox.MODE_ENV, "0")
    assert sandbox.enabled() is False and capsys.readouterr().err == ""
    monkeypatch.setenv(sandbox.MODE_ENV, "yes")
    with pytest.raises(ValueError, match="give 0"):
        sandbox.enabled()


def test_a_bad_allowance_says_what_to_give(monkeypatch):
    monkeypatch.setenv(sandbox.ALLOW_ENV, '{"write": ["/x"], "everything": true}')
    with pytest.raises(ValueError, match="only read, write, env and share_net"):
        sandbox.allowance()
    monkeypatch.setenv(sandbox.ALLOW_ENV, '{"write": ["/x"], "share_net": true}')
    assert sandbox.allowance() == {"read": [], "write": [Path("/x")], "env": [], "share_net": True}


def test_the_limit_follows_the_recorded_run_time():
    assert running.run_limit() == running.RUN_LIMIT_S
    assert running.run_limit(1000) == running.RUN_LIMIT_MARGIN * 1000
    assert running.run_limit(1) == running.RUN_LIMIT_FLOOR_S
