"""Open in Colab, as Colab runs it: every notebook's ``.ipynb`` executed to its last cell, with the smoke
profile, in a fresh virtual environment that holds what a Colab runtime has (the project's scientific
stack, without this library) plus what the notebook's own first cell installs. There, ``google.colab``
is importable (a stand-in module), there is no Debian dataset, torchvision's FashionMNIST download is
served from the local files, the site's raw files (the published records, ``params/``) are served from
this checkout, and the first cell installs this library from a wheel of this tree in place of the
repository it names. The first cell must name ``_config.yml``'s repository and branch; the last prints
the reader's verdicts beside the published ones."""

from __future__ import annotations

import functools
import hashlib
import http.server
import json
import os
import re
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest
import yaml
from conftest import ROOT

from sidebyside import publish
from sidebyside.lab import data

NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.py"))
INSTALL_TAG, PROFILE_TAG = "colab-install", "colab-profile"
HIDDEN = {"remove_cell", "remove_input", "appendix", "appendix-input"}
LOADS_DATA = re.compile(r"^[^#\n]*\bdata\.load\(", re.M)  # a call, not a mention in a comment
LIBRARY_SPEC = 'f"sidebyside @ git+https://github.com/{REPOSITORY}"'  # the first cell's pip argument for the library


def _cells(path: Path):
    import jupytext

    return jupytext.read(path).cells


def _install_cell(path: Path):
    cells = [c for c in _cells(path) if INSTALL_TAG in c.metadata.get("tags", [])]
    assert len(cells) == 1, f"{path.name}: needs exactly one cell tagged {INSTALL_TAG!r} (found {len(cells)})"
    return cells[0]


def _local_files() -> Path:
    """A folder holding the four FashionMNIST .gz files (the Debian copy, or $FASHION_MNIST_DIR)."""
    configured = os.environ.get("FASHION_MNIST_DIR")
    found = data.find_dir(configured) if configured else data.find_dir()
    if found is None:
        pytest.skip("no local FashionMNIST files to serve as the simulated download")
    return found


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


@pytest.fixture
def mirror():
    """An HTTP server serving the local .gz files: stands in for torchvision's mirrors.
    Yields (base URL, {filename: md5 of the served file})."""
    files = _local_files()
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_QuietHandler, directory=str(files)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    # Debian recompresses the archives: their .gz digests differ from upstream's (the content is the
    # same, and data.load checks the content), so the simulated mirror announces its own digests.
    md5 = {name: hashlib.md5((files / name).read_bytes()).hexdigest() for name in data.FILES}
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/", md5
    finally:
        server.shutdown()


def _patch_torchvision(monkeypatch, base: str, md5: dict[str, str]) -> None:
    from torchvision.datasets import FashionMNIST

    monkeypatch.setattr(FashionMNIST, "mirrors", [base])
    monkeypatch.setattr(FashionMNIST, "resources", [(name, md5[name]) for name, _ in FashionMNIST.resources])


# --------------------------------------------------------------------------- the install cell


def _slug(path: Path) -> str:
    return publish.notebook_info(path).slug


def test_the_first_cell_is_shown_names_the_configured_repository_and_the_post():
    config = yaml.safe_load((ROOT / "_config.yml").read_text())
    expected = f'REPOSITORY = "{config["repository"]}@{config.get("branch", "main")}"'
    sources = {}
    for path in NOTEBOOKS:
        code = [c for c in _cells(path) if c.cell_type == "code"]
        install = _install_cell(path)
        assert INSTALL_TAG in code[0].metadata.get("tags", []), (
            f"{path.name}: the install cell must be the first code cell: nothing runs before it")
        assert not set(install.metadata.get("tags", [])) & HIDDEN, f"{path.name}: the first cell is shown in the post"
        assert expected in install.source, (f"{path.name}: the first cell must read {expected} (repository and branch "
                                            "of _config.yml); change that line in every notebook, then make sync")
        assert "parameters" in code[1].metadata.get("tags", []), f"{path.name}: the parameters cell comes second"
        profile = code[2]
        assert PROFILE_TAG in profile.metadata.get("tags", []), f"{path.name}: the profile cell follows the parameters"
        assert f'colab.parameters("{_slug(path)}", PROFILE, REPOSITORY)' in profile.source, path.name
        assert f'reproduce.in_notebook("{_slug(path)}", record, REPOSITORY)' in code[-1].source, (
            f"{path.name}: the last cell compares the reader's figures with the post's")
        sources[path.name] = install.source.replace(_slug(path), "<slug>")
    assert len(set(sources.values())) == 1, f"the first cell differs between notebooks beyond the slug: {sorted(sources)}"


# --------------------------------------------------------------------------- data.load on Colab


def test_load_downloads_on_colab_only(monkeypatch, tmp_path, mirror):
    base, md5 = mirror
    _patch_torchvision(monkeypatch, base, md5)
    monkeypatch.delenv("FASHION_MNIST_DIR", raising=False)
    monkeypatch.setattr(data, "DEBIAN_DIR", tmp_path / "no-debian-dataset")
    monkeypatch.chdir(tmp_path)
    monkeypatch.delitem(sys.modules, "google.colab", raising=False)
    with pytest.raises(data.DataError, match="FashionMNIST not found"):
        data.load()  # elsewhere: no silent download
    assert not (tmp_path / "data").exists()

    monkeypatch.setitem(sys.modules, "google.colab", type(sys)("google.colab"))
    ds = data.load()
    assert ds.source == Path("data") / "FashionMNIST" / "raw"
    assert ds.X_train.shape == (60000, 28, 28) and ds.y_test.shape == (10000,)
    with pytest.raises(data.DataError, match="not found"):
        data.load(tmp_path / "elsewhere", download=False)  # an explicit False still wins


# --------------------------------------------------------------------------- the notebooks, as Colab runs them

# Written into the fresh environment's site-packages: what makes it a Colab runtime, as far as a notebook
# can tell. Every Python process there (kernel, pool workers, pip) runs it at start.
SITECUSTOMIZE = textwrap.dedent('''
    import importlib.abc, importlib.util, json, os, subprocess, sys, types

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
        """pip, as the notebook asks for it: every call logged; the one that installs this library runs
        (from the test's wheel), the post's version pins are not downloaded (no network here)."""
        args = [str(x) for x in args] if isinstance(args, (list, tuple)) else args
        if isinstance(args, list) and args[1:4] == ["-m", "pip", "install"]:
            with open(spec["pip_log"], "a") as log:
                log.write(json.dumps(args[4:]) + "\\n")
            if not any(x.endswith(".whl") for x in args):
                return subprocess.CompletedProcess(args, 0)
        return real_run(args, *a, **k)


    subprocess.run = run
''')


@pytest.fixture(scope="module")
def colab_runtime(tmp_path_factory):
    """A fresh virtual environment holding the project's stack, less this library: each entry of this
    venv's site-packages linked into one folder that a .pth file adds (a package installed there later, as
    the first cell's install of this library, goes to the fresh environment's own site-packages); and a
    wheel of this tree. Yields (python, wheel, site-packages of the fresh environment)."""
    import site
    import sysconfig

    base = tmp_path_factory.mktemp("colab")
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w",
                    str(base / "wheel"), str(ROOT)], check=True, capture_output=True, text=True, timeout=300)
    (wheel,) = (base / "wheel").glob("sidebyside-*.whl")
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(base / "venv")], check=True, timeout=120)
    python = base / "venv" / "bin" / "python"
    purelib = Path(subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                                  capture_output=True, text=True, check=True).stdout.strip())
    stack = base / "stack"
    stack.mkdir()
    ours = Path(sysconfig.get_paths()["purelib"])
    assert ours in map(Path, site.getsitepackages()), ours
    for entry in ours.iterdir():
        if entry.name.startswith(("sidebyside", "__editable__", "_sidebyside")) or entry.suffix == ".pth":
            continue  # this library (its editable install) stays out: the notebook installs it
        (stack / entry.name).symlink_to(entry)
    (purelib / "colab-stack.pth").write_text(f"{stack}\n")
    (purelib / "sitecustomize.py").write_text(SITECUSTOMIZE)
    return python, wheel, purelib


@pytest.fixture(scope="module")
def raw_site():
    """This checkout over HTTP, standing in for the repository's raw files (the published records, params/)."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_QuietHandler, directory=str(ROOT)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()


@pytest.mark.slow
@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebook_runs_on_colab_to_its_last_cell(path, tmp_path, colab_runtime, raw_site, mirror):
    import nbformat

    python, wheel, purelib = colab_runtime
    base, md5 = mirror
    slug = _slug(path)
    nb = nbformat.read(path.with_suffix(".ipynb"), as_version=4)
    first = next(c for c in nb.cells if c.cell_type == "code")
    assert LIBRARY_SPEC in first.source
    first.source = first.source.replace(LIBRARY_SPEC, repr(str(wheel)))  # this tree's wheel, not GitHub's main
    notebook = tmp_path / path.with_suffix(".ipynb").name
    nbformat.write(nb, notebook)
    spec = tmp_path / "spec.json"
    pip_log = tmp_path / "pip.jsonl"
    spec.write_text(json.dumps({"mirror": base, "md5": md5, "no_debian": str(tmp_path / "no-debian-dataset"),
                                "pip_log": str(pip_log)}))
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("SIDEBYSIDE_", "FASHION_MNIST", "PYTHONPATH", "VIRTUAL_ENV"))}
    env.update({"COLAB_TEST_SPEC": str(spec), "SIDEBYSIDE_RAW": raw_site, "PIP_NO_INDEX": "1", "MPLBACKEND": "Agg",
                "PIP_DISABLE_PIP_VERSION_CHECK": "1", "CUDA_VISIBLE_DEVICES": ""})
    out = tmp_path / "executed.ipynb"
    proc = subprocess.run([str(python), "-m", "papermill", str(notebook), str(out), "-k", "python3", "--cwd",
                           str(tmp_path), "--log-level", "ERROR"], env=env, capture_output=True, text=True,
                          timeout=1500)
    assert proc.returncode == 0, f"{path.name} on Colab:\n{proc.stderr[-6000:]}"
    assert (purelib / "sidebyside").is_dir(), "the first cell did not install the library into the fresh environment"
    calls = [json.loads(line) for line in pip_log.read_text().splitlines()]
    assert str(wheel) in calls[0], calls
    record = json.loads((ROOT / "_data" / "results" / f"{slug}.json").read_text())
    ran_with = {k: v for k in ("torch", "jax", "jaxlib", "flax", "optax") if (v := record["provenance"].get(k))}
    import importlib.metadata as metadata

    differ = {f"{k}=={v}" for k, v in ran_with.items() if metadata.version(k) != v}
    assert set(calls[1] if len(calls) > 1 else []) - {"-q", "torchvision"} == differ, (
        f"{path.name}: the first cell must install exactly the post's versions that this runtime lacks", calls)
    executed = nbformat.read(out, as_version=4)
    shown = "".join(o.get("text", "") for o in next(c for c in executed.cells if c.cell_type == "code").outputs)
    assert "The post ran with " + ", ".join(f"{k} {v}" for k, v in ran_with.items()) in shown, shown
    if any(LOADS_DATA.search(c.source) for c in executed.cells if c.cell_type == "code"):
        assert (tmp_path / "data" / "FashionMNIST" / "raw" / "train-images-idx3-ubyte.gz").is_file()
    last = "".join(o.get("text", "") for o in [c for c in executed.cells if c.cell_type == "code"][-1].outputs)
    assert (f"{slug}: " in last and "speed verdicts reproduce" in last) or f"{slug}: no speed verdict" in last, last
    from sidebyside.publish import reproduce

    for question in [v["question"] for v in reproduce.speed_verdicts(record)][:3]:
        assert question in last, f"{path.name}: the last cell's table lacks the published verdict {question!r}"
