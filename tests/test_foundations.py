"""Library foundations: data, timing, provenance, progress."""

from __future__ import annotations

import gzip
import json
import shutil
import subprocess
import time

import numpy as np
import pytest
from conftest import Lazy

from sidebyside.lab import data, progress, tables, timing
from sidebyside.run import provenance

# --------------------------------------------------------------------------- data


@pytest.fixture(scope="module")
def fashion():
    return data.load()


def test_real_fashion_mnist_loads_and_is_balanced(fashion):
    assert fashion.X_train.shape == (60000, 28, 28) and fashion.X_train.dtype == np.uint8
    assert fashion.X_test.shape == (10000, 28, 28)
    assert np.bincount(fashion.y_train).tolist() == [6000] * 10
    assert np.bincount(fashion.y_test).tolist() == [1000] * 10
    assert len(fashion.classes) == 10


def test_normalise_uses_training_statistics(fashion):
    X = data.normalise(fashion.X_train)
    assert X.dtype == np.float32
    assert abs(float(X.mean())) < 1e-3 and abs(float(X.std()) - 1) < 1e-3
    plain = data.normalise(fashion.X_test[:5], mean=0.0, std=1.0)
    assert plain.min() >= 0 and plain.max() <= 1


def test_batches_are_identical_for_a_seed_and_differ_between_epochs():
    X, y = np.arange(100).reshape(100, 1), np.arange(100)
    a = [b[1].tolist() for b in data.iterate_batches(X, y, 32, seed=7, epoch=0)]
    b = [b[1].tolist() for b in data.iterate_batches(X, y, 32, seed=7, epoch=0)]
    c = [b[1].tolist() for b in data.iterate_batches(X, y, 32, seed=7, epoch=1)]
    assert a == b and a != c
    assert [len(x) for x in a] == [32, 32, 32, 4]
    assert sorted(sum(a, [])) == list(range(100))
    assert [len(x) for x, _ in data.iterate_batches(X, y, 32, seed=7, drop_last=True)] == [32, 32, 32]
    assert data.num_batches(100, 32) == 4 and data.num_batches(100, 32, drop_last=True) == 3
    with pytest.raises(ValueError, match="batch_size"):
        next(data.iterate_batches(X, y, 0))


def _copy_dataset(tmp_path):
    for name in data.FILES:
        shutil.copy(data.DEBIAN_DIR / name, tmp_path / name)
    return tmp_path


def test_env_dir_is_used_and_a_wrong_one_is_an_error(tmp_path, monkeypatch):
    (tmp_path / "ok").mkdir()
    monkeypatch.setenv("FASHION_MNIST_DIR", str(_copy_dataset(tmp_path / "ok")))
    assert data.load().source == tmp_path / "ok"
    empty = tmp_path / "empty"
    empty.mkdir()
    monkeypatch.setenv("FASHION_MNIST_DIR", str(empty))
    with pytest.raises(data.DataError, match=r"(?s)FASHION_MNIST_DIR=.*missing: train-images.*apt-get install dataset-fashion-mnist"):
        data.load()


def test_corrupt_file_is_detected_with_advice(tmp_path, monkeypatch):
    _copy_dataset(tmp_path)
    labels = tmp_path / "t10k-labels-idx1-ubyte.gz"
    raw = bytearray(gzip.decompress(labels.read_bytes()))
    raw[100] = (raw[100] + 1) % 10  # one wrong label
    labels.write_bytes(gzip.compress(bytes(raw)))
    monkeypatch.setenv("FASHION_MNIST_DIR", str(tmp_path))
    with pytest.raises(data.DataError, match=r"(?s)t10k-labels-idx1-ubyte.gz is corrupt.*Delete it"):
        data.load()
    labels.write_bytes(b"not gzip")
    with pytest.raises(data.DataError, match="not a readable gzip file"):
        data.load()


def test_missing_everywhere_explains_how_to_get_it(tmp_path, monkeypatch):
    monkeypatch.delenv("FASHION_MNIST_DIR", raising=False)
    monkeypatch.setattr(data, "DEBIAN_DIR", tmp_path / "nowhere")
    with pytest.raises(data.DataError, match=r"(?s)not found.*apt-get install dataset-fashion-mnist.*download=True"):
        data.load(tmp_path / "also-nowhere")


def test_torchvision_layout_is_found(tmp_path, monkeypatch):
    raw = tmp_path / "FashionMNIST" / "raw"
    raw.mkdir(parents=True)
    _copy_dataset(raw)
    monkeypatch.delenv("FASHION_MNIST_DIR", raising=False)
    monkeypatch.setattr(data, "DEBIAN_DIR", tmp_path / "nowhere")
    assert data.load(tmp_path).source == raw


# --------------------------------------------------------------------------- timing


def test_time_fn_separates_first_call_and_measures_steady_state():
    calls = []

    def fn():
        calls.append(1)
        time.sleep(0.05 if len(calls) == 1 else 0.002)  # the first call "compiles"

    t = timing.time_fn(fn, repeats=5, number=3, warmup=1)
    assert len(calls) == 1 + 1 + 5 * 3
    assert t.first_s >= 0.05 and t.median_s >= 0.002 and t.median_s < 0.05
    assert t.compile_s >= 0.05 - t.median_s - 1e-9
    assert t.q1_s <= t.median_s <= t.q3_s and t.iqr_s >= 0
    d = t.entry()
    assert d["median_s"] == t.median_s and d["repeats"] == 5 and d["number"] == 3 and d["processes_s"] == [t.median_s]


def test_time_fn_picks_number_to_fill_a_repeat():
    t = timing.time_fn(lambda: None, repeats=3, min_repeat_s=0.01)
    assert t.number > 100


def test_unsynchronised_timing_picks_number_from_synchronised_calls():
    """Dispatch-only calls look free; the repeat count must come from real cost."""

    class Slow:
        def block_until_ready(self):
            time.sleep(0.005)  # the "real work", paid only when waited for
            return self

    t = timing.time_fn(lambda: Slow(), repeats=2, warmup=0, min_repeat_s=0.02, synchronize=False)
    assert t.number <= 8  # ~0.02 s / 0.005 s per synchronised call, not thousands


def test_block_waits_on_nested_results_and_synchronize_false_does_not():
    a, b = Lazy(), Lazy()
    assert timing.block({"x": [a, (b, 3)]}) == {"x": [a, (b, 3)]}
    assert a.blocked == 1 and b.blocked == 1
    lazy = Lazy()
    timing.time_fn(lambda: lazy, repeats=2, number=2, warmup=0, synchronize=False)
    assert lazy.blocked == 1  # only the final drain: no call inside the timed repeats waited
    timing.time_fn(lambda: lazy, repeats=2, number=2, warmup=0)
    assert lazy.blocked == 1 + (1 + 2 * 2)  # the drain above, then first call and every timed call


def test_block_on_real_jax_array():
    import jax.numpy as jnp

    x = jnp.ones((64, 64))
    assert timing.block(x @ x)[0, 0] == 64


def test_compare_interleaves_repeats():
    order = []
    timing.compare({"a": lambda: order.append("a"), "b": lambda: order.append("b")}, repeats=3, warmup=0,
                   min_repeat_s=0.0, max_number=1)
    rounds = [order[i:i + 2] for i in range(len(order) - 6, len(order), 2)]
    assert all(sorted(r) == ["a", "b"] for r in rounds)  # every round times each function once
    assert [r[0] for r in rounds] == ["a", "b", "a"]  # one process: the rounds take turns to open
    shifted = timing.measure_here({"a": lambda: order.append("a"), "b": lambda: order.append("b")}, repeats=2,
                                  warmup=0, min_repeat_s=0.0, max_number=1, shift=1)
    assert set(shifted[0]) == {"a", "b"} and order[-4:] == ["b", "a", "a", "b"]  # another process opens with b


def test_compare_pipelined_waits_once_per_repeat():
    lazies = []

    def fn():
        lazies.append(Lazy())
        return lazies[-1]

    ts = timing.compare({"f": fn}, repeats=3, warmup=0, min_repeat_s=1.0, max_number=4, pipelined=True)
    assert ts["f"].number == 4
    timed = lazies[-3 * ts["f"].number:]
    waited = [lazy.blocked for lazy in timed]
    per_repeat = [waited[i:i + ts["f"].number] for i in range(0, len(waited), ts["f"].number)]
    assert all(r[:-1] == [0] * (len(r) - 1) and r[-1] == 1 for r in per_repeat)  # only each repeat's last call


def test_compare_ratio_and_summary():
    ts = timing.compare({"slow": lambda: time.sleep(0.004), "fast": lambda: time.sleep(0.001)}, repeats=3, min_repeat_s=0.01)
    assert timing.ratio(ts["slow"], ts["fast"]) > 1.5
    table = tables.summarise(ts)
    assert list(table.index) == ["slow", "fast"] and "median (ms)" in table.columns


def test_bad_arguments():
    with pytest.raises(ValueError, match="repeats"):
        timing.time_fn(lambda: None, repeats=0)
    with pytest.raises(ValueError, match="at least one"):
        timing.compare({})


# --------------------------------------------------------------------------- provenance


def test_collect_has_the_contract_keys():
    record = provenance.collect()
    for key in ("device", "device_kind", "python", "torch", "jax", "jaxlib", "flax", "optax", "cuda", "matmul_precision", "git_sha"):
        assert key in record
    assert record["device_kind"] in ("cpu", "gpu")
    assert "core" in provenance.cpu_name()
    assert "torch_float32_matmul_precision" in record["matmul_precision"]
    assert "jax_default_matmul_precision" in record["matmul_precision"]


def test_git_sha_is_dirty_for_sources_not_for_generated_posts(tmp_path):
    def git(*args):
        subprocess.run(["git", "-C", str(tmp_path), *args], check=True, capture_output=True)

    git("init", "-q")
    (tmp_path / "_posts").mkdir()
    (tmp_path / "_posts" / "post.md").write_text("old")
    (tmp_path / "notebook.py").write_text("x = 1")
    git("add", ".")
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "init")
    sha = provenance.git_sha(tmp_path)
    assert sha and not sha.endswith("-dirty")
    (tmp_path / "_posts" / "post.md").write_text("refreshed by an earlier notebook of the same run")
    assert provenance.git_sha(tmp_path) == sha
    (tmp_path / "notebook.py").write_text("x = 2")
    assert provenance.git_sha(tmp_path) == f"{sha}-dirty"


def test_git_sha_from_the_environment_wins(tmp_path, monkeypatch):
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path.parent))
    monkeypatch.delenv("SIDEBYSIDE_GIT_SHA", raising=False)
    assert provenance.git_sha(tmp_path) is None
    assert provenance.git_sha() is not None  # this checkout
    monkeypatch.setenv("SIDEBYSIDE_GIT_SHA", "0123456789ab")
    assert provenance.git_sha(tmp_path) == "0123456789ab"
    assert provenance.git_sha() == "0123456789ab"  # a copy's stale .git does not override it


def test_save_results_writes_plain_json(tmp_path, monkeypatch):
    monkeypatch.setenv("SIDEBYSIDE_RESULTS_DIR", str(tmp_path))
    record = provenance.save_results("demo", {"a": np.float32(0.5), "b": np.arange(3), "c": float("nan"), "d": (1, 2)},
                                     provenance={"device": "x"})
    stored = json.loads((tmp_path / "demo.json").read_text())
    inputs = record.pop("inputs")  # what the run imported and read: see tests/test_gpu_box.py
    assert stored.pop("inputs") == inputs and "src/sidebyside/run/provenance.py" in inputs["modules"]
    assert stored.pop("code") == record.pop("code")  # what the harness timed in this process: tests/run/test_code.py
    assert stored == record == {"slug": "demo", "provenance": {"device": "x"}, "metrics": {"a": 0.5, "b": [0, 1, 2], "c": None, "d": [1, 2]}}
    with pytest.raises(TypeError, match="cannot store object"):
        provenance.to_jsonable(object())


# --------------------------------------------------------------------------- progress


def test_progress_bar_is_plain_text_on_stdout_when_headless(monkeypatch, capsys):
    monkeypatch.setenv("SIDEBYSIDE_HEADLESS", "1")
    assert sum(progress.bar(range(5), desc="work")) == 10
    out = capsys.readouterr().out
    assert "work: 100%" in out and "5/5" in out


# --------------------------------------------------------------------------- set-up


@pytest.mark.parametrize("name", ["torch", "jax", "flax", "scipy"])
def test_the_installed_stack_is_byte_compiled(name):
    """Set-up byte-compiles the stack (the Makefile's venv target). Where PYTHONDONTWRITEBYTECODE is set,
    as on this project's machines, nothing else writes .pyc files, and every process would compile the
    modules again as it imports them."""
    import importlib
    import importlib.util
    from pathlib import Path

    module = importlib.import_module(name)
    cached = Path(importlib.util.cache_from_source(module.__file__))
    assert cached.is_file(), (f"{name} is not byte-compiled ({cached} is missing): the venv was installed without "
                              "its compile step; run `rm .venv/.installed && make setup`")


def test_reading_a_notebook_builds_no_grammar():
    """Every publisher, papermill and nbconvert process imports nbformat, which imports jsonschema. With
    jsonschema's optional format checkers installed (JupyterLab's server asks for them), that import builds
    an IRI grammar with Lark, about a second in every such process; requirements.txt leaves them out."""
    import sys

    code = "import sys, nbformat, jsonschema; print(sorted({'rfc3987_syntax', 'lark'} & set(sys.modules)))"
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert loaded == "[]", (f"importing nbformat loaded {loaded}: a package that asks for jsonschema[format-nongpl] "
                            "(jupyter-events, through JupyterLab or Notebook) is installed; requirements.txt should not "
                            "bring it (pip uninstall rfc3987-syntax restores the speed)")
