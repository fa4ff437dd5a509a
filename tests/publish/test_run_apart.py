"""A notebook's run writes only its own post (issue 61, round 4): every other file of the checkout and of
the site is watched (:func:`guard.tree`: content, mode, symbolic links, the git hooks and config, the
site's assets), a run that changed one is refused with the files named, and no process a run started
outlives it, detached ones included (:func:`guard.reaped`)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import committed_tree, make_site

from sidebyside import publish
from sidebyside.publish import guard


def _tree(tmp_path: Path) -> Path:
    root = tmp_path / "root"
    for name, text in {"_includes/head.html": "<head>", "assets/post.js": "ok()", "params/post.yaml": "{}",
                       "src/lib.py": "x = 1", ".git/hooks/pre-commit": "#!/bin/sh\n", ".git/config": "[core]",
                       "build/scratch/out.txt": "a run's own", "checkpoints/post.json": "{}"}.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    return root


@pytest.mark.parametrize("change", ["content", "mode", "link", "created", "removed", "hook", "git-config"])
def test_the_tree_sees_every_kind_of_change(tmp_path, change):
    root = _tree(tmp_path)
    before = guard.tree(root)
    target = {"content": "assets/post.js", "mode": "src/lib.py", "link": "_includes/evil.html",
              "created": "_plugins/run.rb", "removed": "params/post.yaml", "hook": ".git/hooks/post-checkout",
              "git-config": ".git/config"}[change]
    path = root / target
    if change == "mode":
        path.chmod(0o755)
    elif change == "link":
        path.symlink_to("/etc/passwd")
    elif change == "removed":
        path.unlink()
    else:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("payload")
    after = guard.tree(root)
    assert {p for p in set(before) | set(after) if before.get(p) != after.get(p)} == {target}


def test_the_tree_leaves_the_build_folder_caches_and_what_a_run_may_write(tmp_path):
    root = _tree(tmp_path)
    before = guard.tree(root, allowed=["checkpoints/post.json"])
    (root / "build" / "scratch" / "out.txt").write_text("changed")
    (root / "src" / "__pycache__").mkdir()
    (root / "src" / "__pycache__" / "lib.pyc").write_bytes(b"\0")
    (root / "checkpoints" / "post.json").write_text('{"part": 1}')
    assert guard.tree(root, allowed=["checkpoints/post.json"]) == before


def test_the_watch_names_each_file_and_says_how_to_restore(tmp_path):
    root, site = _tree(tmp_path), make_site(tmp_path / "site")
    watch = guard.TreeWatch([root, site], sandboxed=False)
    (root / "assets" / "post.js").write_text("steal()")
    (site / "_config.yml").write_text("plugins: [evil]")
    with pytest.raises(publish.PublishError) as err:
        watch.check("post", "its notebook's run")
    said = str(err.value)
    assert f"{root / 'assets/post.js'} (changed)" in said and f"{site / '_config.yml'} (changed)" in said
    assert "Nothing was published" in said and "git checkout" in said


def test_a_sandboxed_run_s_roots_are_not_watched(tmp_path):
    """Its sandbox shows them read-only or not at all: what changes meanwhile is someone else's."""
    root = _tree(tmp_path)
    watch = guard.TreeWatch([root], sandboxed=True)
    (root / "assets" / "post.js").write_text("edited by hand meanwhile")
    watch.check("post", "its notebook's run")


def _detaching(pid_file: Path, detach: str) -> str:
    """Python code that starts a process which writes its pid to ``pid_file`` and then sleeps for a minute,
    detached from its parent as ``detach`` says (a new session; a double fork)."""
    sleeper = f"import os, pathlib, time; pathlib.Path({str(pid_file)!r}).write_text(str(os.getpid())); time.sleep(60)"
    if detach == "session":
        start = (f"import subprocess, sys; subprocess.Popen([sys.executable, '-c', {sleeper!r}], start_new_session=True, "
                 "stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)")
    else:
        start = (f"import os, sys\nif os.fork() == 0:\n    os.setsid()\n    if os.fork() == 0:\n"
                 f"        os.execv(sys.executable, [sys.executable, '-c', {sleeper!r}])\n    os._exit(0)\nos.wait()")
    return start + f"\nimport pathlib, time\nwhile not pathlib.Path({str(pid_file)!r}).exists():\n    time.sleep(0.05)"


def _alive(pid_file: Path) -> bool:
    pid = int(pid_file.read_text())
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return False
    return state != "Z"


@pytest.mark.parametrize("detach", ["session", "double fork"])
def test_no_process_outlives_a_run(tmp_path, detach):
    pid_file = tmp_path / "pid"
    with guard.reaped():
        subprocess.run([sys.executable, "-c", _detaching(pid_file, detach)], check=True, timeout=30)
        assert _alive(pid_file)  # it outlived its parent
    assert not _alive(pid_file), "a process the run started outlived it"


WRITER = '''# ---
# jupyter:
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
#   sidebyside:
#     slug: apart
#     title: A notebook that writes outside its post
#     date: '2026-11-01'
#     description: It writes what it must not.
#     compared: Nothing.
#     metrics: [done]
# ---

# %% tags=["parameters"]
unused = 0

# %%
import os
from pathlib import Path

from sidebyside.run import context, provenance

root = context.current().project_root()
Path(root, "assets", "post.js").write_text("steal()")
Path(root, "_plugins").mkdir()
Path(root, "_plugins", "run.rb").write_text("system('id')")
os.symlink("/etc/passwd", Path(root, "passwd.txt"))
{late}
provenance.save_results({{"done": 1}})["metrics"]
'''


@pytest.mark.slow  # executes a notebook through papermill
def test_a_run_that_writes_outside_its_post_is_refused_and_leaves_no_process(tmp_path, monkeypatch):
    # The watch and the reaping as a run without a sandbox needs them; in one, these writes fail at once
    # (test_sandbox).
    monkeypatch.setenv("SIDEBYSIDE_SANDBOX", "0")
    root = make_site(tmp_path / "root")
    pid_file = tmp_path / "pid"
    (root / "notebooks" / "params").mkdir(parents=True)
    (root / "notebooks" / "01_apart.py").write_text(WRITER.format(late=_detaching(pid_file, "session")))
    (root / "notebooks" / "params" / "apart.yaml").write_text("smoke: {}\n")
    committed_tree(root)
    with pytest.raises(publish.PublishError) as err:
        publish.run(profile="smoke", site=root, build=tmp_path / "build", notebooks=root / "notebooks",
                    params_dir=root / "notebooks" / "params", root=root, progress=False)
    said = str(err.value)
    for name, how in (("assets/post.js", "changed"), ("_plugins/run.rb", "created"), ("passwd.txt", "created")):
        assert f"{root.resolve() / name} ({how})" in said, said
    assert not list((root / "_posts").glob("*-apart.md")), "nothing of the run is published"
    assert not _alive(pid_file), "a process the notebook detached outlived the run"



def test_the_publisher_is_a_subreaper_only_during_a_run(tmp_path):
    """After a run, an orphan of anything else goes to init as before (the quiet check counts this
    process's children as its own work, so an adopted stranger would hide load)."""
    pid_file = tmp_path / "pid"
    with guard.reaped():
        pass
    subprocess.run([sys.executable, "-c", _detaching(pid_file, "session")], check=True, timeout=30)
    try:
        assert int(pid_file.read_text()) not in guard._children()
    finally:
        os.kill(int(pid_file.read_text()), signal.SIGKILL)
