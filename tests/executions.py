"""One execution of each notebook per test run, shared by every test that reads one.

Each notebook is executed once, with the smoke profile, through the real publisher
(:func:`sidebyside.publish.run`: papermill, the record's checks, rendering, publication into a
scratch site of its own), by a kernel that runs as Colab runs it: a fresh virtual environment
holding the project's scientific stack without this library, where ``google.colab`` is importable
(a stand-in module), there is no Debian dataset, torchvision's FashionMNIST download is served from
the local files, and the notebook's first cell installs this library from a wheel of this tree. So
the one run proves the wheel, the first cells, the notebook end to end and its publication.

The executions live in a folder that every pytest-xdist worker of the run shares; a file lock per
notebook makes the first worker that asks run it and every later one read it (or its failure).
Files that take notebooks in opposite orders (``test_colab.py`` forwards, ``test_site.py``
backwards) therefore split the executions between the two workers.
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import hashlib
import http.server
import io
import json
import os
import shutil
import subprocess
import sys
import textwrap
import threading
import time
import traceback
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

#: Written into the Colab-like environment's site-packages: what makes it a Colab runtime, as far as a
#: notebook can tell. Every Python process there (kernel, pool workers, pip) runs it at start.
SITECUSTOMIZE = textwrap.dedent('''
    import fcntl, importlib.abc, importlib.util, json, os, subprocess, sys, types

    spec = json.load(open(os.environ["COLAB_TEST_SPEC"]))
    colab = sys.modules["google.colab"] = types.ModuleType("google.colab")
    # JAX imports google.colab.output when it sees Colab (for its debugger's widgets).
    colab.output = sys.modules["google.colab.output"] = types.ModuleType("google.colab.output")


    def _torchvision(module):  # torchvision's FashionMNIST download, served by the test's local server
        module.FashionMNIST.mirrors = [spec["mirror"]]
        module.FashionMNIST.resources = [(n, spec["md5"][n]) for n, _ in module.FashionMNIST.resources]


    def _data(module):  # no Debian dataset on Colab
        module.DEBIAN_DIR = module.Path(spec["no_debian"])


    PATCHES = {"torchvision.datasets.mnist": _torchvision, "sidebyside.lab.data": _data}


    class AfterImport(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path, target=None):
            if name not in PATCHES:
                return None
            sys.meta_path.remove(self)
            try:
                found = importlib.util.find_spec(name)
            finally:
                sys.meta_path.insert(0, self)
            real = found.loader.exec_module

            def exec_module(module):
                real(module)
                PATCHES[name](module)

            found.loader.exec_module = exec_module
            return found


    sys.meta_path.insert(0, AfterImport())
    real_run = subprocess.run


    def run(args, *a, **k):
        """pip, as the notebook asks for it: every call logged; the one that installs this library from
        its repository runs, from the test's wheel of this tree (one install at a time in this
        environment); the post's version pins are not downloaded (no network here)."""
        args = [str(x) for x in args] if isinstance(args, (list, tuple)) else args
        if isinstance(args, list) and args[1:4] == ["-m", "pip", "install"]:
            with open(spec["pip_log"], "a") as log:
                log.write(json.dumps(args[4:]) + "\\n")
            if not any(x.startswith("sidebyside @ git+https://github.com/") for x in args):
                return subprocess.CompletedProcess(args, 0)
            args = [spec["wheel"] if x.startswith("sidebyside @ ") else x for x in args]
            with open(spec["pip_lock"], "w") as lock:
                fcntl.flock(lock, fcntl.LOCK_EX)
                return real_run(args, *a, **k)
        return real_run(args, *a, **k)


    subprocess.run = run
''')

#: Variables of this process that a Colab runtime would not have.
NOT_ON_COLAB = ("SIDEBYSIDE_", "FASHION_MNIST", "PYTHONPATH", "VIRTUAL_ENV")


def shared_folder(tmp_path_factory) -> Path:
    """A folder every pytest-xdist worker of this test run shares (the parent of the workers' own
    base folders), or this process's base folder when it runs alone."""
    base = tmp_path_factory.getbasetemp()
    shared = (base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base) / "shared"
    shared.mkdir(exist_ok=True)
    return shared


@contextlib.contextmanager
def locked(path: Path):
    """Hold an exclusive lock on ``path`` (made if missing) across processes."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        yield


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


def serve(directory: Path) -> tuple[http.server.ThreadingHTTPServer, str]:
    """An HTTP server on loopback serving ``directory``, and its base URL (ends in a slash)."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_QuietHandler, directory=str(directory)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}/"


def fashion_files() -> Path | None:
    """A folder holding the four FashionMNIST .gz files (the Debian copy, or $FASHION_MNIST_DIR)."""
    from sidebyside.lab import data

    configured = os.environ.get("FASHION_MNIST_DIR")
    return data.find_dir(configured) if configured else data.find_dir()


def served_md5(files: Path) -> dict[str, str]:
    """The digests the simulated mirror announces: Debian recompresses the archives, so their .gz digests
    differ from upstream's (the content is the same, and data.load checks the content)."""
    from sidebyside.lab import data

    return {name: hashlib.md5((files / name).read_bytes()).hexdigest() for name in data.FILES}


@dataclass(frozen=True)
class ColabRuntime:
    """A Colab-like environment: its interpreter, the wheel of this tree its notebooks install, its
    site-packages, and a Jupyter folder whose ``python3`` kernel runs that interpreter."""

    python: Path
    wheel: Path
    purelib: Path
    jupyter_path: Path


def wheel(shared: Path) -> Path:
    """A wheel of this tree, built once per test run."""
    folder = shared / "wheel"
    with locked(shared / "wheel.lock"):
        found = sorted(folder.glob("sidebyside-*.whl"))
        if not found:
            subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w",
                            str(folder), str(ROOT)], check=True, capture_output=True, text=True, timeout=300)
            found = sorted(folder.glob("sidebyside-*.whl"))
    (built,) = found
    return built


def colab_runtime(shared: Path, name: str) -> ColabRuntime:
    """The Colab-like environment ``name`` (one per worker, so that no two kernels install into the same
    one at once): each entry of this venv's site-packages, less this library, linked into one folder
    that a .pth file adds (a package installed there later, as the first cell's install of this
    library, goes to the fresh environment's own site-packages)."""
    import site
    import sysconfig

    built = wheel(shared)
    base = shared / f"colab-{name}"
    python = base / "venv" / "bin" / "python"
    jupyter = base / "jupyter"
    if not python.exists():
        subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(base / "venv")], check=True, timeout=120)
    purelib = Path(subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                                  capture_output=True, text=True, check=True).stdout.strip())
    stack = base / "stack"
    if not stack.exists():
        stack.mkdir()
        ours = Path(sysconfig.get_paths()["purelib"])
        assert ours in map(Path, site.getsitepackages()), ours
        for entry in ours.iterdir():
            if entry.name.startswith(("sidebyside", "__editable__", "_sidebyside")) or entry.suffix == ".pth":
                continue  # this library (its editable install) stays out: the notebook installs it
            (stack / entry.name).symlink_to(entry)
        (purelib / "colab-stack.pth").write_text(f"{stack}\n")
        (purelib / "sitecustomize.py").write_text(SITECUSTOMIZE)
        kernel = jupyter / "kernels" / "python3"
        kernel.mkdir(parents=True)
        (kernel / "kernel.json").write_text(json.dumps({
            "argv": [str(python), "-m", "ipykernel_launcher", "-f", "{connection_file}"],
            "display_name": "Python 3 (Colab-like)", "language": "python"}))
    return ColabRuntime(python, built, purelib, jupyter)


def colab_env(spec: Path, raw_site: str) -> dict[str, str]:
    """This process's environment as a Colab runtime's kernel sees it: none of the project's variables,
    the stand-ins' spec, the site's raw files at ``raw_site``, no package index, no GPU."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(NOT_ON_COLAB)}
    env.update({"COLAB_TEST_SPEC": str(spec), "SIDEBYSIDE_RAW": raw_site, "PIP_NO_INDEX": "1",
                "PIP_DISABLE_PIP_VERSION_CHECK": "1", "CUDA_VISIBLE_DEVICES": "", "MPLBACKEND": "Agg"})
    cache = os.environ.get("SIDEBYSIDE_COMPILE_CACHE")
    if cache:  # the test run's compilation cache (not a Colab setting: the cost of compiling, once)
        env["SIDEBYSIDE_COMPILE_CACHE"] = cache
    return env


def write_spec(folder: Path, mirror: str, md5: dict[str, str], runtime: ColabRuntime) -> Path:
    """The stand-ins' settings for one Colab-like run in ``folder``; its pip calls are logged to
    ``folder/pip.jsonl`` (as the notebook made them: the library named by its repository)."""
    spec = folder / "spec.json"
    spec.write_text(json.dumps({"mirror": mirror, "md5": md5, "no_debian": str(folder / "no-debian-dataset"),
                                "pip_log": str(folder / "pip.jsonl"), "wheel": str(runtime.wheel),
                                "pip_lock": str(runtime.purelib.parent / "pip.lock")}))
    return spec


@dataclass(frozen=True)
class Execution:
    """One notebook's shared execution: the scratch site it was published into, its build folder
    (``executed/``, ``results/``, and ``scratch/<slug>/``, the kernel's working folder), the pip calls
    its kernel made, the site-packages of the Colab-like environment that ran it, and how long it took."""

    slug: str
    site: Path
    build: Path
    pip_calls: list
    purelib: Path
    seconds: float

    @property
    def record(self) -> dict:
        return json.loads((self.site / "_data" / "results" / f"{self.slug}.json").read_text())

    @property
    def post(self) -> Path:
        return next((self.site / "_posts").glob(f"*-{self.slug}.md"))

    @property
    def scratch(self) -> Path:
        return self.build / "scratch" / self.slug


def execute(slug: str, shared: Path, runtime: ColabRuntime, mirror: str, md5: dict[str, str],
            raw_site: str) -> Execution:
    """The shared execution of notebook ``slug`` (see the module): run here if no worker ran it yet,
    else read; a failure is kept and raised again, with the publisher's message, to every reader."""
    folder = shared / "runs" / slug
    done = folder / "outcome.json"
    with locked(shared / "runs" / f"{slug}.lock"):
        if not done.is_file():
            done.parent.mkdir(parents=True, exist_ok=True)
            done.write_text(json.dumps(_run(slug, folder, runtime, mirror, md5, raw_site)))
    outcome = json.loads(done.read_text())
    if outcome["error"]:
        raise AssertionError(f"{slug}: its shared smoke execution failed:\n{outcome['error']}")
    log = folder / "pip.jsonl"
    calls = [json.loads(line) for line in log.read_text().splitlines()] if log.is_file() else []
    return Execution(slug, folder / "site", folder / "build", calls, Path(outcome["purelib"]), outcome["seconds"])


def _run(slug: str, folder: Path, runtime: ColabRuntime, mirror: str, md5: dict[str, str], raw_site: str) -> dict:
    from conftest import make_site

    from sidebyside import publish

    site = make_site(folder / "site")
    spec = write_spec(folder, mirror, md5, runtime)
    env = colab_env(spec, raw_site)
    env["JUPYTER_PATH"] = str(runtime.jupyter_path)  # papermill's python3 kernel: the Colab-like interpreter
    (folder / "pip.jsonl").touch()
    # What a Colab runtime has beyond a publisher's sandboxed run (sidebyside.publish.sandbox): its
    # environment, installed into; its wheel and settings; its pip log; the servers on this loopback.
    env["SIDEBYSIDE_SANDBOX_ALLOW"] = json.dumps({
        "read": [str(runtime.jupyter_path.parent), str(runtime.wheel.parent), str(spec)],
        "write": [str(runtime.python.parent.parent), str(folder / "pip.jsonl")],
        "env": ["COLAB_TEST_SPEC", "PIP_NO_INDEX", "PIP_DISABLE_PIP_VERSION_CHECK"], "share_net": True})
    saved = dict(os.environ)
    said = io.StringIO()
    started = time.perf_counter()
    try:
        os.environ.clear()
        os.environ.update(env)
        with contextlib.redirect_stdout(said), contextlib.redirect_stderr(said):
            code = publish.run(profile="smoke", only=slug, force=True, site=site, build=folder / "build",
                               progress=False)
        error = None if code == 0 else f"the publisher exited {code}:\n{said.getvalue()[-6000:]}"
    except Exception:  # the publisher's own message, kept for every reader of this execution
        error = said.getvalue()[-3000:] + traceback.format_exc()[-6000:]
    finally:
        os.environ.clear()
        os.environ.update(saved)
    return {"error": error, "seconds": round(time.perf_counter() - started, 1), "purelib": str(runtime.purelib)}


def published_site(shared: Path) -> Path:
    """The published site as a reader gets it, built once per test run and read by every test that only
    looks at it (the browser tests of test_site, test_post_shape and test_front_page_browser): a scratch
    copy of the published posts, images and results, with the How we measure page and the board the
    publisher writes (:func:`sidebyside.publish.scoreboard.write_freshness`, for this tree), built by
    Jekyll. Returns the site's folder (its build is ``_site`` in it); made by whichever worker asks first."""
    from conftest import make_site
    from test_site import _jekyll

    from sidebyside import publish
    from sidebyside.publish import scoreboard

    site, built = shared / "published" / "site", shared / "published" / "built"
    with locked(shared / "published.lock"):
        if not built.is_file():  # not yet, or a worker's attempt failed (its error was its tests')
            shutil.rmtree(site, ignore_errors=True)
            make_site(site, with_published=True)
            shutil.copy2(ROOT / "how-we-measure.md", site / "how-we-measure.md")
            infos = publish.discover(ROOT / "notebooks")
            params = publish.load_all_params(ROOT / "params", infos)
            scoreboard.write_freshness(site, infos, params, ROOT)
            _jekyll(site)
            built.touch()
    return site
