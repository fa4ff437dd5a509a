"""Open in Colab, simulated: a fake ``google.colab`` module, no Debian dataset,
and torchvision's FashionMNIST download served by a local HTTP server from
local files. Every notebook's first cells run as Colab would run them, up to
and through its data load; the install cell must ask pip for this library
from the repository and branch that ``_config.yml`` names."""

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

from sidebyside.lab import data

NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.py"))
INSTALL_TAG = "colab-install"
LOADS_DATA = re.compile(r"^[^#\n]*\bdata\.load\(", re.M)  # a call, not a mention in a comment


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


def test_install_cell_is_identical_everywhere_and_names_the_configured_repository():
    config = yaml.safe_load((ROOT / "_config.yml").read_text())
    sources = {path.name: _install_cell(path).source for path in NOTEBOOKS}
    assert len(set(sources.values())) == 1, f"the Colab install cell differs between notebooks: {sorted(sources)}"
    source = next(iter(sources.values()))
    expected = f'LIBRARY = "sidebyside @ git+https://github.com/{config["repository"]}@{config.get("branch", "main")}"'
    assert expected in source, (f"the install cell must read: {expected} (repository and branch of _config.yml); "
                                "change that line in the first cell of every notebook, then make sync")
    for path in NOTEBOOKS:  # the first code cell after the parameters cell: nothing runs before the install
        code = [c for c in _cells(path) if c.cell_type == "code"]
        assert "parameters" in code[0].metadata.get("tags", []) and INSTALL_TAG in code[1].metadata.get("tags", []), path.name


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


# --------------------------------------------------------------------------- the notebooks' first cells

# Runs in a fresh interpreter (the notebooks set global framework options): fake google.colab,
# pip intercepted and recorded, no Debian dataset, torchvision's mirror pointed at the local server.
DRIVER = textwrap.dedent('''
    import json, subprocess, sys, types
    spec = json.load(open(sys.argv[1]))
    colab = sys.modules["google.colab"] = types.ModuleType("google.colab")
    # JAX imports google.colab.output when it sees Colab (for its debugger's widgets).
    colab.output = sys.modules["google.colab.output"] = types.ModuleType("google.colab.output")
    from sidebyside.lab import data
    from torchvision.datasets import FashionMNIST
    data.DEBIAN_DIR = data.Path(spec["no_debian"])
    FashionMNIST.mirrors = [spec["mirror"]]
    FashionMNIST.resources = [(name, spec["md5"][name]) for name, _ in FashionMNIST.resources]
    real_run, pip_calls = subprocess.run, []

    def fake_run(args, *a, **k):
        if list(args[1:4]) == ["-m", "pip", "install"]:
            pip_calls.append(list(args[4:]))
            return subprocess.CompletedProcess(args, 0)
        return real_run(args, *a, **k)

    subprocess.run = fake_run
    namespace = {"__name__": "__main__"}
    for n, source in enumerate(spec["cells"]):
        exec(compile(source, f"cell {n}", "exec"), namespace)
    loaded = [v for v in namespace.values() if isinstance(v, data.FashionMNIST)]
    json.dump({"pip": pip_calls, "loaded": [repr(v) for v in loaded],
               "sources": [str(v.source) for v in loaded]}, open(spec["report"], "w"))
''')


def _first_cells(path: Path) -> list[str]:
    """Code sources from the top through the first cell that calls data.load (the install cell
    alone for a notebook that loads no FashionMNIST)."""
    code = [c.source for c in _cells(path) if c.cell_type == "code"]
    loads = [i for i, s in enumerate(code) if LOADS_DATA.search(s)]
    install = next(i for i, c in enumerate(c for c in _cells(path) if c.cell_type == "code")
                   if INSTALL_TAG in c.metadata.get("tags", []))
    return code[:(loads[0] if loads else install) + 1]


@pytest.mark.slow
@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebook_first_cells_run_on_simulated_colab(path, tmp_path, mirror):
    base, md5 = mirror
    config = yaml.safe_load((ROOT / "_config.yml").read_text())
    cells = _first_cells(path)
    spec = tmp_path / "spec.json"
    report = tmp_path / "report.json"
    spec.write_text(json.dumps({"cells": cells, "mirror": base, "md5": md5, "report": str(report),
                                "no_debian": str(tmp_path / "no-debian-dataset")}))
    (tmp_path / "driver.py").write_text(DRIVER)
    env = {k: v for k, v in os.environ.items() if k != "FASHION_MNIST_DIR"}
    env.update({"PYTHONPATH": str(ROOT / "src"), "MPLBACKEND": "Agg"})
    proc = subprocess.run([sys.executable, str(tmp_path / "driver.py"), str(spec)], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, f"{path.name} on simulated Colab:\n{proc.stdout[-3000:]}\n{proc.stderr[-5000:]}"
    result = json.loads(report.read_text())
    assert len(result["pip"]) == 1, result["pip"]
    wanted = f"sidebyside @ git+https://github.com/{config['repository']}@{config.get('branch', 'main')}"
    assert wanted in result["pip"][0], result["pip"][0]
    if any(LOADS_DATA.search(c) for c in cells):
        assert result["loaded"], f"{path.name}: its data load left no FashionMNIST in the namespace"
        assert all(s.endswith("FashionMNIST/raw") for s in result["sources"]), result["sources"]
        assert (tmp_path / "data" / "FashionMNIST" / "raw" / "train-images-idx3-ubyte.gz").is_file()
