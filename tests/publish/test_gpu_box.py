"""A GPU box: its set-up, the two-sided gpu guard, the commit stamp, and a
key that is exactly a run's inputs. Everything here runs without a GPU: the
frameworks' answers and the driver are faked where a GPU would be needed."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
import types
from pathlib import Path

import pytest
from conftest import ROOT, committed_tree, git, make_site

from sidebyside import publish
from sidebyside.publish import running
from sidebyside.publish.common import PublishError
from sidebyside.publish.running import check_before_running
from sidebyside.run import context, provenance, runkey

FIXTURES = ROOT / "tests" / "fixtures"
H100 = "NVIDIA H100 80GB HBM3"
PINS = {"torch": "2.14.1", "jax": "0.10.2"}


def _fake_nvidia_smi(bin_dir: Path, cuda: str | None = "13.0") -> Path:
    """A stand-in for nvidia-smi: ``-L`` lists one GPU; plain, the header with the driver's CUDA version."""
    bin_dir.mkdir(parents=True, exist_ok=True)
    script = bin_dir / "nvidia-smi"
    header = f"| NVIDIA-SMI 580.00   Driver Version: 580.00   CUDA Version: {cuda}     |" if cuda else "no GPU"
    script.write_text("#!/bin/sh\n"
                      f'if [ "$1" = "-L" ]; then {"echo " + repr("GPU 0: " + H100 + " (UUID: GPU-0)") if cuda else "exit 9"}; '
                      f"else echo {header!r}; fi\n")
    script.chmod(0o755)
    return bin_dir


# --------------------------------------------------------------------------- detection


def test_gpu_present_asks_the_driver_and_honours_hidden_devices(tmp_path, monkeypatch):
    if Path("/proc/driver/nvidia/gpus").is_dir():
        pytest.skip("this machine has an NVIDIA driver; the fake one cannot stand in for it")
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path / "none"))
    assert provenance.gpu_present() is False and publish.detect_profile() == "cpu"
    monkeypatch.setenv("PATH", str(_fake_nvidia_smi(tmp_path / "bin")))
    assert provenance.gpu_present() is True and publish.detect_profile() == "gpu"
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    assert provenance.gpu_present() is False


def test_detecting_the_profile_imports_neither_framework():
    code = ("import sys; from sidebyside import publish; publish.detect_profile(); "
            "print(sorted({'torch', 'jax'} & set(sys.modules)))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={**os.environ, "PYTHONPATH": str(ROOT / "src")}).stdout
    assert out.strip() == "[]"


def _make_setup(tmp_path, path_dirs, *args) -> str:
    """What `make setup` would run (dry run, a scratch venv path), with PATH limited to ``path_dirs``."""
    make, sh = shutil.which("make"), shutil.which("sh")
    env = {**os.environ, "PATH": os.pathsep.join([*map(str, path_dirs), str(Path(sh).parent), str(Path(make).parent)])}
    proc = subprocess.run([make, "-n", "-C", str(ROOT), "setup", f"VENV={tmp_path / 'venv'}", *args],
                          capture_output=True, text=True, env=env, timeout=60)
    return proc.stdout + proc.stderr


def test_make_setup_adds_the_cuda_builds_only_where_a_gpu_is_seen(tmp_path):
    cpu = _make_setup(tmp_path, [tmp_path / "none"])
    assert "requirements.txt" in cpu and "requirements-gpu" not in cpu
    gpu13 = _make_setup(tmp_path, [_fake_nvidia_smi(tmp_path / "bin13")])
    assert "pip install -q -r requirements-gpu-cuda13.txt" in gpu13 and "check_gpu_profile" in gpu13
    gpu12 = _make_setup(tmp_path, [_fake_nvidia_smi(tmp_path / "bin12", "12.4")])
    assert "requirements-gpu-cuda12.txt" in gpu12
    # GPU=0/1 override the detection; on a CPU machine the set-up is what it always was
    assert _make_setup(tmp_path, [tmp_path / "bin13"], "GPU=0") == cpu
    assert "requirements-gpu-cuda13.txt" in _make_setup(tmp_path, [tmp_path / "none"], "GPU=1", "CUDA_MAJOR=13")


def test_gpu_pins_are_the_cpu_pins_with_a_cuda_build():
    cpu = runkey.read_pins([ROOT / "requirements.txt"])
    for path in sorted(ROOT.glob("requirements-gpu-cuda*.txt")):
        major = path.stem.rsplit("cuda", 1)[1]
        gpu = runkey.read_pins([path])
        assert {p: gpu[p] for p in ("torch", "torchvision", "jax", "jaxlib")} == \
            {p: cpu[p] for p in ("torch", "torchvision", "jax", "jaxlib")}, path.name
        assert f"jax[cuda{major}]==" in path.read_text()


# --------------------------------------------------------------------------- the two-sided guard


def _found(torch_gpu: str | None, jax_gpu: str | None) -> dict:
    return {"torch_backend": "cuda" if torch_gpu else "cpu", "torch_device": torch_gpu or "cpu",
            "jax_backend": "gpu" if jax_gpu else "cpu", "jax_device": jax_gpu or "cpu",
            "torch_cuda": "13.0", "torch_cudnn": "9.10.2" if torch_gpu else None,
            "jax_cuda": "13.0" if jax_gpu else None, "jax_cudnn": "9.10.2" if jax_gpu else None}


def test_guard_refuses_torch_on_the_gpu_and_jax_on_the_cpu():
    with pytest.raises(provenance.GPUProfileError) as info:
        provenance.check_gpu_profile(_found(H100, None), PINS)
    message = str(info.value)
    assert f"PyTorch sees {H100} (cuda) and JAX sees no GPU, only the CPU" in message
    assert "make setup GPU=1" in message and 'pip install "jax[cuda13]==0.10.2"' in message
    assert "PyTorch needs" not in message and "make execute PROFILE=cpu" in message


def test_guard_refuses_the_other_side_and_different_gpus():
    with pytest.raises(provenance.GPUProfileError, match=r"PyTorch sees no GPU.*CUDA build of PyTorch.*torch==2\.14\.1"):
        provenance.check_gpu_profile({**_found(None, H100), "torch_cuda": None}, PINS)
    with pytest.raises(provenance.GPUProfileError, match=r"PyTorch is a CUDA 13\.0 build that sees no GPU.*driver"):
        provenance.check_gpu_profile(_found(None, H100), PINS)
    with pytest.raises(provenance.GPUProfileError, match=r"driver shows none here.*PROFILE=cpu"):
        provenance.check_gpu_profile(_found(None, None), PINS, driver_gpu=False)
    with pytest.raises(provenance.GPUProfileError, match="different GPUs.*CUDA_VISIBLE_DEVICES"):
        provenance.check_gpu_profile(_found(H100, "NVIDIA A100-SXM4-40GB"), PINS)
    with pytest.raises(provenance.GPUProfileError, match="JAX is not installed"):
        provenance.check_gpu_profile({**_found(H100, None), "jax_backend": None, "jax_device": None}, PINS)
    assert provenance.check_gpu_profile(_found(H100, H100), PINS) == H100


def test_collect_records_each_side_and_publishing_refuses_a_one_sided_gpu(monkeypatch, tmp_path):
    monkeypatch.setattr(provenance, "devices", lambda: _found(H100, None))
    monkeypatch.setenv(context.ENV["profile"], "gpu")
    record = provenance.collect()  # the kernel records what it found; the publisher judges
    assert record["device_kind"] == "cpu"
    assert record["device"].startswith(f"PyTorch: {H100}; JAX: cpu")
    assert (record["torch_device"], record["jax_device"]) == (H100, "cpu")
    info = publish.NotebookInfo(path=tmp_path / "01_x.py", slug="x", title="x", date="2026-01-01",
                                description="x", tags=[])
    saved = {"slug": "x", "provenance": record, "metrics": {}, "inputs": None}
    with pytest.raises(publish.PublishError, match="JAX sees no GPU"):
        running.complete_record(saved, info, "gpu", {}, "key", tmp_path)
    monkeypatch.setattr(provenance, "devices", lambda: _found(H100, H100))
    record = provenance.collect()
    assert (record["device"], record["device_kind"], record["cuda"]) == (H100, "gpu", "13.0")
    assert (record["torch_cudnn"], record["jax_cuda"], record["jax_cudnn"]) == ("9.10.2", "13.0", "9.10.2")
    published = running.complete_record({**saved, "provenance": record}, info, "gpu", {}, "key", tmp_path)
    assert published["provenance"]["device_kind"] == "gpu"


def test_provenance_records_each_side_threads_and_the_contract_keys():
    record = provenance.collect()
    for key in ("device", "device_kind", "python", "torch", "jax", "jaxlib", "flax", "optax", "cuda",
                "matmul_precision", "git_sha", "torch_device", "jax_device", "torch_backend", "jax_backend",
                "torch_cuda", "torch_cudnn", "jax_cuda", "jax_cudnn", "threads", "differs_from_pins"):
        assert key in record, key
    threads = record["threads"]
    import torch

    assert threads["torch_num_threads"] == torch.get_num_threads()
    assert threads["cpu_affinity"] >= 1 and "XLA_FLAGS" in threads and "OMP_NUM_THREADS" in threads
    assert threads["blas"] is None or all(pool["num_threads"] >= 1 for pool in threads["blas"])
    assert provenance.table(record).loc["differs_from_pins", "value"] == json.dumps(record["differs_from_pins"])


def test_publisher_refuses_a_one_sided_gpu_before_running_anything(tmp_path, monkeypatch):
    monkeypatch.setattr(provenance, "probe_devices", lambda python=None: _found(H100, None))
    monkeypatch.setattr(provenance, "gpu_present", lambda: True)
    with pytest.raises(publish.PublishError, match="needs PyTorch and JAX on the same GPU.*JAX sees no GPU"):
        publish.run(profile="gpu", notebooks=FIXTURES / "notebooks", params_dir=FIXTURES / "params",
                    site=make_site(tmp_path / "site"), build=tmp_path / "build", progress=False)
    # Nothing ran: the build folder holds at most the run lock, no executed notebook.
    assert not (tmp_path / "build" / "executed").exists()


def test_stack_against_the_pins(monkeypatch):
    versions = {"torch": "2.11.0", "jax": "0.10.2", "flax": "0.12.8"}
    monkeypatch.setattr(provenance, "_version", lambda package: versions.get(package))
    pins = {"torch": "2.14.1", "jax": "0.10.2", "flax": "0.12.8", "scipy": "1.17.1", "pytest": "9"}
    assert provenance.differs_from_pins("gpu", pins) == ["torch 2.11.0 (pinned 2.14.1)",
                                                         "scipy not installed (pinned 1.17.1)"]
    versions["torch"], versions["scipy"] = "2.14.1+cu128", "1.17.1"  # a local build label is not a difference
    assert provenance.differs_from_pins("gpu", pins) == []


def test_provenance_include_shows_a_stack_that_differs_from_the_pins():
    include = (ROOT / "_includes" / "provenance.html").read_text()
    assert "differs_from_pins" in include and "site.data.results[page.slug]" in include


# --------------------------------------------------------------------------- the commit stamp


def _library_checkout(root: Path, files: dict[str, str] | None = None, fixtures: bool = False) -> Path:
    """A committed git checkout at ``root`` of this library and its pins, with ``files`` (path: text) and,
    when asked, the publisher's test fixtures."""
    shutil.copytree(ROOT / "src", root / "src", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "requirements.txt", root / "requirements.txt")
    if fixtures:
        shutil.copytree(FIXTURES, root / "tests" / "fixtures")
    committed_tree(root, files)
    return root


@contextlib.contextmanager
def _kernels_import(root: Path):
    """Within: a kernel imports the library of the checkout ``root``, and the commit comes from its git."""
    env = {"PYTHONPATH": str(root / "src"), runkey.GIT_SHA_ENV: None}
    saved = {k: os.environ.get(k) for k in env}
    for k, v in env.items():
        os.environ.pop(k, None) if v is None else os.environ.__setitem__(k, v)
    try:
        yield
    finally:
        for k, v in saved.items():
            os.environ.pop(k, None) if v is None else os.environ.__setitem__(k, v)


@pytest.fixture
def checkout(tmp_path, monkeypatch):
    """A git checkout with a notebook, params, pins, two library modules, a data file and a published post."""
    monkeypatch.delenv(runkey.GIT_SHA_ENV, raising=False)
    root = tmp_path / "repo"
    files = {"notebooks/01_x.py": "x = 1\n", "params/x.yaml": "cpu: {}\n", "requirements.txt": "numpy==2.4.6\n",
             "src/sidebyside/used.py": "A = 1\n", "src/sidebyside/unused.py": "B = 1\n",
             "data/points.csv": "1,2\n", "_posts/2026-01-01-x.md": "old post\n", "_data/results/x.json": "{}\n"}
    committed_tree(root, files)
    return root


def _inputs(root: Path) -> dict:
    module = types.SimpleNamespace(__file__=str(root / "src" / "sidebyside" / "used.py"))
    return {"modules": runkey.recorded(root, {"sidebyside.used": module})["modules"],
            "data": {"data/points.csv": runkey.digest(root / "data" / "points.csv")}}


def _paths(root: Path) -> list[Path]:
    return runkey.input_paths(root / "notebooks" / "01_x.py", root / "params" / "x.yaml", "cpu", _inputs(root), root)


def test_stamp_clean_then_dirty_only_for_the_runs_inputs(checkout):
    root = checkout
    head = git(root, "rev-parse", "--short=12", "HEAD")
    assert runkey.commit_stamp(root, _paths(root)) == head
    # generated files, an unimported module and an untracked scratch file are not the run's inputs
    (root / "_posts" / "2026-01-01-x.md").write_text("refreshed by an earlier notebook of the same run\n")
    (root / "_data" / "results" / "y.json").write_text("{}\n")
    (root / "src" / "sidebyside" / "unused.py").write_text("B = 2\n")
    (root / "notes.txt").write_text("scratch\n")
    assert runkey.commit_stamp(root, _paths(root)) == head
    for name in ("src/sidebyside/used.py", "notebooks/01_x.py", "params/x.yaml", "requirements.txt", "data/points.csv"):
        original = (root / name).read_text()
        (root / name).write_text(original + "# changed\n")
        assert runkey.commit_stamp(root, _paths(root)) == f"{head}-dirty", name
        (root / name).write_text(original)
    assert runkey.commit_stamp(root, _paths(root)) == head


def test_stamp_counts_an_untracked_imported_module(checkout):
    root = checkout
    new = root / "src" / "sidebyside" / "new.py"
    new.write_text("C = 1\n")
    paths = runkey.input_paths(root / "notebooks" / "01_x.py", root / "params" / "x.yaml", "cpu",
                               {"modules": {"src/sidebyside/new.py": runkey.digest(new)}}, root)
    assert runkey.commit_stamp(root, paths).endswith("-dirty")


def test_a_copy_without_git_must_be_given_the_commit(checkout, tmp_path, monkeypatch):
    copy = tmp_path / "copy"
    shutil.copytree(checkout, copy, ignore=shutil.ignore_patterns(".git"))
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path))
    with pytest.raises(runkey.StampError, match=r"not a git checkout.*will not guess.*SIDEBYSIDE_GIT_SHA=<commit>"):
        runkey.commit_stamp(copy, _paths(copy))
    with pytest.raises(publish.PublishError, match="SIDEBYSIDE_GIT_SHA=<commit>"):
        check_before_running("cpu", copy)
    assert provenance.git_sha(copy) is None  # a notebook run by hand (Colab) just has no commit
    monkeypatch.setenv(runkey.GIT_SHA_ENV, "0123456789ab")
    assert runkey.commit_stamp(copy, _paths(copy)) == "0123456789ab"
    monkeypatch.setenv(runkey.GIT_SHA_ENV, "main")
    with pytest.raises(runkey.StampError, match="is not a commit"):
        runkey.commit_stamp(copy, _paths(copy))


def test_a_copy_inside_another_checkout_is_not_that_checkouts_commit(checkout):
    inner = checkout / "vendor" / "copy"
    shutil.copytree(checkout / "src", inner / "src")
    with pytest.raises(runkey.StampError, match="not the top of its own git checkout"):
        runkey.commit_stamp(inner, [])


# --------------------------------------------------------------------------- the key


def _record(root: Path, inputs: dict | None, params=None) -> dict:
    notebook = root / "notebooks" / "01_x.py"
    params = {"n": 1} if params is None else params
    return {"profile": "cpu", "inputs": inputs,
            "source_hash": runkey.run_key(notebook, "cpu", params, inputs, root)}


def _current(root: Path, record: dict, params=None) -> bool:
    return runkey.freshness(root / "notebooks" / "01_x.py", record, {"n": 1} if params is None else params, root)[0]


def test_key_follows_imported_modules_and_data_not_the_rest_of_the_library(checkout):
    root = checkout
    record = _record(root, _inputs(root))
    assert _current(root, record)
    (root / "src" / "sidebyside" / "unused.py").write_text("B = 2\n")  # not imported by the run
    (root / "src" / "sidebyside" / "brand_new.py").write_text("D = 1\n")
    assert _current(root, record)
    edits = {"src/sidebyside/used.py": "A = 2\n", "data/points.csv": "1,3\n", "notebooks/01_x.py": "x = 2\n",
             "requirements.txt": "numpy==2.5.0\n"}
    for name, text in edits.items():
        original = (root / name).read_text()
        (root / name).write_text(text)
        assert not _current(root, record), name
        (root / name).write_text(original)
        assert _current(root, record), name
    assert not _current(root, record, params={"n": 2})
    (root / "src" / "sidebyside" / "used.py").unlink()  # an imported module that is gone
    assert not _current(root, record)


def test_a_data_file_this_machine_lacks_counts_as_recorded(checkout):
    root = checkout
    inputs = _inputs(root)
    inputs["data"]["/nonexistent/fashion-mnist/train.gz"] = "ab" * 32  # read on the box that ran it
    assert _current(root, _record(root, inputs))


def test_a_record_without_inputs_is_stale(checkout):
    root = checkout
    record = _record(root, None)
    assert record["source_hash"] == runkey.run_key(root / "notebooks" / "01_x.py", "cpu", {"n": 1}, None, root)
    assert not _current(root, record)  # its key cannot be told: it runs again


def test_note_input_records_data_files_and_modules(tmp_path, monkeypatch):
    monkeypatch.setattr(runkey, "_noted", [])
    data = tmp_path / "d.bin"
    data.write_bytes(b"123")
    runkey.note_input(data)
    runkey.note_input(data)
    found = runkey.recorded(ROOT)
    assert found["data"] == {str(data): runkey.digest(data)}
    assert "src/sidebyside/run/runkey.py" in found["modules"] and "src/sidebyside/publish/__init__.py" in found["modules"]
    assert not [m for m in found["modules"] if not m.startswith("src/sidebyside/")]


# --------------------------------------------------------------------------- end to end: a real run records its inputs


@pytest.fixture(scope="module")
def recorded_run(tmp_path_factory):
    """The fixture notebook run for real in a scratch checkout whose library the kernel imports."""
    base = tmp_path_factory.mktemp("gpu-box")
    root = _library_checkout(base / "repo", fixtures=True)
    site = make_site(base / "site")
    kw = dict(notebooks=root / "tests" / "fixtures" / "notebooks", params_dir=root / "tests" / "fixtures" / "params",
              site=site, build=base / "build", root=root, progress=False)
    with _kernels_import(root):
        assert publish.run(profile="smoke", **kw) == 0
    return root, site, kw


def _plan(kw):
    infos = publish.discover(kw["notebooks"])
    params = publish.load_all_params(kw["params_dir"], infos)
    return publish.plan(infos, "smoke", params, kw["site"], root=kw["root"])[0]


def test_a_run_records_the_modules_it_imported(recorded_run):
    root, site, _ = recorded_run
    record = json.loads((site / "_data" / "results" / "publisher-fixture.json").read_text())
    modules = set(record["inputs"]["modules"])
    assert {"src/sidebyside/run/provenance.py", "src/sidebyside/lab/viz.py", "src/sidebyside/lab/progress.py"} <= modules
    assert "src/sidebyside/grid_sample/__init__.py" not in modules and not [m for m in modules if m.startswith("src/sidebyside/publish/")]
    assert record["provenance"]["git_sha"] == git(root, "rev-parse", "--short=12", "HEAD")


def test_changing_an_imported_module_reruns_and_an_unimported_one_does_not(recorded_run):
    root, site, kw = recorded_run
    assert _plan(kw).action == "up to date"
    unused, used = root / "src" / "sidebyside" / "grid_sample" / "xla.py", root / "src" / "sidebyside" / "lab" / "viz.py"
    for path, action in ((unused, "up to date"), (used, "run")):
        original = path.read_text()
        path.write_text(original + "\n# an edit\n")
        try:
            assert _plan(kw).action == action, path.name
            # `publish list` (of the scratch checkout's library) gives the same answer through the same function
            out = subprocess.run([sys.executable, "-m", "sidebyside.publish", "list", "--notebooks", str(kw["notebooks"]),
                                  "--params", str(kw["params_dir"]), "--site", str(site)], capture_output=True,
                                 text=True, check=True, env={**os.environ, "PYTHONPATH": str(root / "src")}).stdout
            assert ("(current)" in out) == (action == "up to date"), out
            assert ("(stale: its inputs changed since)" in out) == (action == "run"), out
        finally:
            path.write_text(original)


def test_an_unchanged_execute_imports_neither_framework(recorded_run):
    root, site, kw = recorded_run
    code = ("import sys; from pathlib import Path; from sidebyside import publish; "
            f"publish.detect_profile(); assert publish.run(profile='smoke', notebooks=Path({str(kw['notebooks'])!r}), "
            f"params_dir=Path({str(kw['params_dir'])!r}), site=Path({str(site)!r}), build=Path({str(kw['build'])!r}), "
            f"root=Path({str(root)!r}), progress=False) == 0; print(sorted({{'torch', 'jax'}} & set(sys.modules)))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(root / "src")})
    assert proc.returncode == 0, proc.stderr
    assert "up to date" in proc.stdout and proc.stdout.strip().endswith("[]")


def test_the_library_notes_the_data_and_sources_a_run_reads(monkeypatch):
    from sidebyside.lab import data

    monkeypatch.setattr(runkey, "_noted", [])
    if data.find_dir() is None and not os.environ.get("FASHION_MNIST_DIR"):
        pytest.skip("FashionMNIST is not installed here")
    loaded = data.load()
    from sidebyside.grid_sample import native

    native._library_path()
    noted = runkey.recorded(ROOT)["data"]
    assert {Path(name).name for name in noted} == set(data.FILES) | {"grid_sample_cpu.cc"}
    assert runkey._path(next(n for n in noted if n.endswith("-ubyte.gz")), ROOT).parent == Path(loaded.source).resolve()


PARTS_NOTEBOOK = """# ---
# jupyter:
#   kernelspec: {display_name: Python 3 (ipykernel), language: python, name: python3}
#   sidebyside:
#     slug: parts-fixture
#     title: A run in parts
#     date: '2026-11-26'
#     description: A notebook that counts its runs in its checkpoint file.
#     compared: Nothing raced; a run in parts keeping its checkpoint file.
#     tags: [test]
#     metrics: [runs]
# ---

# %% tags=["parameters"]
checkpoint_file = ""

# %%
import json
from pathlib import Path

from sidebyside.run import provenance

path = Path(checkpoint_file)
runs = json.loads(path.read_text())["runs"] + 1 if path.is_file() else 1
path.write_text(json.dumps({"runs": runs}))
provenance.save_results({"runs": runs})["metrics"]
"""


@pytest.mark.slow
def test_a_run_in_parts_keeps_its_checkpoint_file_in_the_repository(tmp_path):
    """The kernel works in build/scratch/<slug>/, emptied before every run; a checkpoint_file named relative to
    the repository (as the post's settings name it) is written there all the same, where a device call packs
    it and the next run reads it back."""
    params = {"params/parts-fixture.yaml": "".join(f"{profile}: {{checkpoint_file: checkpoints/parts-fixture.json}}\n"
                                                   for profile in publish.PROFILES)}
    root = _library_checkout(tmp_path / "repo", {"notebooks/00_parts.py": PARTS_NOTEBOOK, **params})
    site = make_site(tmp_path / "site")
    kw = dict(notebooks=root / "notebooks", params_dir=root / "params", site=site, build=tmp_path / "build",
              root=root, progress=False, profile="smoke", force=True)
    with _kernels_import(root):
        assert publish.run(**kw) == 0
        assert publish.run(**kw) == 0
    assert json.loads((root / "checkpoints" / "parts-fixture.json").read_text()) == {"runs": 2}
    record = json.loads((site / "_data" / "results" / "parts-fixture.json").read_text())
    assert record["metrics"]["runs"] == 2


def test_a_checkpoint_file_other_than_the_slug_s_is_refused_before_the_run(tmp_path):
    """The name is derived from the slug (tests/publish/test_nothing_runs_later.py has the rest)."""
    for name in ("parts.json", "checkpoints/parts.json"):
        with pytest.raises(PublishError, match=r"checkpoints/parts-fixture\.json"):
            running.checkpoint_name({"checkpoint_file": name}, "parts-fixture")
    assert running.checkpoint_name({"checkpoint_file": ""}, "parts-fixture") is None
    ours = running.checkpoint_name({"checkpoint_file": "checkpoints/parts-fixture.json"}, "parts-fixture")
    assert ours == "checkpoints/parts-fixture.json"
