"""Open in Colab, as Colab runs it. Every notebook's one smoke execution of the test run
(tests/executions.py) runs in a fresh virtual environment that holds what a Colab runtime has (the
project's scientific stack, without this library) plus what the notebook's own first cell installs:
there ``google.colab`` is importable (a stand-in module), there is no Debian dataset, torchvision's
FashionMNIST download is served from the local files, the site's raw files (the published records,
``params/``) are served from this checkout, and the first cell installs this library from a wheel of
this tree in place of the repository it names. Here the cells that differ on Colab (the first, the
profile cell, the last) run again on their own as a reader's runtime runs them. The first cell must
name ``_config.yml``'s repository and branch; the last prints the reader's verdicts beside the
published ones."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from conftest import ROOT

from sidebyside import publish
from sidebyside.lab import data
from sidebyside.publish import running
from sidebyside.publish.preprocess import INSTALL_TAG

NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.py"))
PROFILE_TAG = "colab-profile"
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


def _patch_torchvision(monkeypatch, base: str, md5: dict[str, str]) -> None:
    from torchvision.datasets import FashionMNIST

    monkeypatch.setattr(FashionMNIST, "mirrors", [base])
    monkeypatch.setattr(FashionMNIST, "resources", [(name, md5[name]) for name, _ in FashionMNIST.resources])


# --------------------------------------------------------------------------- the install cell


def _slug(path: Path) -> str:
    return publish.notebook_info(path).slug


def _configured_repository() -> str:
    config = yaml.safe_load((ROOT / "_config.yml").read_text())
    return f'{config["repository"]}@{config.get("branch", "main")}'


def test_the_first_cell_is_shown_names_the_configured_repository_and_the_post():
    expected = f'REPOSITORY = "{_configured_repository()}"'
    sources = {}
    for path in NOTEBOOKS:
        code = [c for c in _cells(path) if c.cell_type == "code"]
        install = _install_cell(path)
        assert INSTALL_TAG in code[0].metadata.get("tags", []), (
            f"{path.name}: the install cell must be the first code cell: nothing runs before it")
        assert not set(install.metadata.get("tags", [])) & HIDDEN, f"{path.name}: the first cell is shown in the post"
        assert LIBRARY_SPEC in install.source, f"{path.name}: the first cell installs the library from REPOSITORY"
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


@pytest.mark.slow  # reads all of FashionMNIST from the mirror (3 s)
def test_load_downloads_on_colab_only(monkeypatch, tmp_path, fashion_mirror):
    base, md5 = fashion_mirror
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

@pytest.mark.slow
@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebook_runs_on_colab_to_its_last_cell(path, tmp_path, executed, colab_runtime, fashion_mirror, raw_site):
    """The notebook's shared execution ran as Colab runs it (tests/executions.py): its first cell installed
    this tree's wheel and it ran to its end. The cells that behave otherwise on Colab than under the
    publisher (the first, the profile cell and the last) run again here on their own, as a reader's
    runtime runs them, against that execution's results."""
    import executions
    import nbformat

    slug = _slug(path)
    run = executed(slug)
    library = f"sidebyside @ git+https://github.com/{_configured_repository()}"
    assert run.pip_calls and library in run.pip_calls[0], run.pip_calls  # installed from the wheel (executions.py)
    assert (run.purelib / "sidebyside").is_dir(), "the first cell did not install the library into the fresh environment"
    nb = nbformat.read(path.with_suffix(".ipynb"), as_version=4)
    code = [c for c in nb.cells if c.cell_type == "code"]
    if any(LOADS_DATA.search(c.source) for c in code):
        assert (run.scratch / "data" / "FashionMNIST" / "raw" / "train-images-idx3-ubyte.gz").is_file()

    first, parameters, profile, last = code[0], code[1], code[2], code[-1]
    results = run.build / "results" / f"{slug}.json"
    saved = nbformat.v4.new_code_cell(f"import json\nrecord = json.loads(open({str(results)!r}).read())")
    nb.cells = [first, parameters, profile, saved, last]
    notebook = tmp_path / path.with_suffix(".ipynb").name
    nbformat.write(nb, notebook)
    base, md5 = fashion_mirror
    spec = executions.write_spec(tmp_path, base, md5, colab_runtime)
    out = tmp_path / "executed.ipynb"
    for _ in range(running.KERNEL_STARTS):  # a kernel that lost a port at its start ran nothing (as the publisher)
        proc = subprocess.run([str(colab_runtime.python), "-m", "papermill", str(notebook), str(out), "-k", "python3",
                               "--cwd", str(tmp_path), "--log-level", "ERROR"], env=executions.colab_env(spec, raw_site),
                              capture_output=True, text=True, timeout=600)
        if proc.returncode == 0 or running.KERNEL_DIED not in proc.stderr:
            break
    assert proc.returncode == 0, f"{path.name}'s Colab cells on Colab:\n{proc.stderr[-6000:]}"
    calls = [json.loads(line) for line in (tmp_path / "pip.jsonl").read_text().splitlines()]
    assert library in calls[0], calls
    record = json.loads((ROOT / "_data" / "results" / f"{slug}.json").read_text())
    ran_with = {k: v for k in ("torch", "jax", "jaxlib", "flax", "optax") if (v := record["provenance"].get(k))}
    import importlib.metadata as metadata

    differ = {f"{k}=={v}" for k, v in ran_with.items() if metadata.version(k) != v}
    assert set(calls[1] if len(calls) > 1 else []) - {"-q", "torchvision"} == differ, (
        f"{path.name}: the first cell must install exactly the post's versions that this runtime lacks", calls)
    executed_nb = nbformat.read(out, as_version=4)
    shown = "".join(o.get("text", "") for o in executed_nb.cells[0].outputs)
    assert "The post ran with " + ", ".join(f"{k} {v}" for k, v in ran_with.items()) in shown, shown
    chosen = "".join(o.get("text", "") for o in executed_nb.cells[2].outputs)
    assert "Profile smoke" in chosen, chosen
    last = "".join(o.get("text", "") for o in executed_nb.cells[-1].outputs)
    # smoke sizes against the post's own profile: compared with nothing, and said plainly
    assert f'nothing is compared: set PROFILE = "{record["profile"]}"' in last, last


def test_the_profile_cell_reads_the_post_s_settings_file(tmp_path, monkeypatch):
    """On a reader's runtime the profile cell takes the chosen profile's entry of the post's own settings file
    (the one the publisher reads), names the profile to the timings, and gives {} for a post without one."""
    import os

    from sidebyside.run import colab, context

    for name in (*context.ENV.values(), colab.RAW_ENV):
        monkeypatch.setenv(name, "")  # recorded, so that the profile the cell names is undone after the test
        monkeypatch.delenv(name)
    (tmp_path / "_config.yml").write_text("repository: o/n\n")
    (tmp_path / "params").mkdir()
    (tmp_path / "params" / "demo.yaml").write_text("smoke: {n: 2}\ncpu: {n: 50, threads: 1}\n")
    monkeypatch.setenv(context.ENV["root"], str(tmp_path))
    assert colab.SETTINGS.format(slug="demo") == "params/demo.yaml"
    assert colab.parameters("demo", "cpu", "o/n@main") == {"n": 50, "threads": 1}
    assert os.environ[context.ENV["profile"]] == "cpu"
    assert colab.parameters("demo", "smoke", "o/n@main") == {"n": 2}
    assert colab.parameters("demo", "gpu", "o/n@main") == {} and colab.parameters("other", "cpu", "o/n@main") == {}
    with pytest.raises(colab.ColabError, match="choose one of smoke, cpu, gpu"):
        colab.parameters("demo", "tiny", "o/n@main")
    monkeypatch.setenv(context.ENV["slug"], "demo")  # under the publisher: papermill gave them
    assert colab.parameters("demo", "cpu", "o/n@main") == {}


def test_the_first_cell_installs_builds_the_runtime_s_driver_runs():
    from sidebyside.run import colab

    differ = {"torch": "2.14.1", "jax": "0.10.2", "flax": "0.12.8"}
    assert colab.install_specs(differ, None) == ["torch==2.14.1", "jax==0.10.2", "flax==0.12.8", "torchvision"]
    assert colab.install_specs(differ, 13) == ["torch==2.14.1", "jax[cuda13]==0.10.2", "flax==0.12.8", "torchvision"]
    # PyPI's torch is a CUDA 13 build, which a CUDA 12 driver cannot run: PyTorch's own CUDA 12 build, JAX's plugin
    assert colab.install_specs(differ, 12) == ["torch==2.14.1+cu128", "jax[cuda12]==0.10.2", "flax==0.12.8",
                                               "torchvision", "--extra-index-url", colab.TORCH_CUDA12_INDEX]
    assert colab.install_specs({"jax": "0.10.2"}, 12) == ["jax[cuda12]==0.10.2"]
    with pytest.raises(colab.ColabError, match="CUDA 11"):
        colab.install_specs(differ, 11)
