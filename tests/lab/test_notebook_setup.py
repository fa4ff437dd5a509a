"""The one set-up of every notebook (``sidebyside.lab.notebook``): the conditions are exactly
``same_conditions``', the devices and the warm start follow the provenance record, the log filters
hold, and a run in parts keys its parts by the provenance and the notebook's stamp."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import warnings

import pytest
from conftest import ROOT

from sidebyside.lab import notebook
from sidebyside.run import checkpoints


@pytest.fixture(autouse=True)
def _house_style_undone():
    """setup() sets pandas' display options and matplotlib's style for the whole process (a notebook's kernel):
    put them back, so that later tests in this worker see the libraries' defaults."""
    import matplotlib
    import pandas as pd

    options = {name: pd.get_option(name) for name in ("display.max_colwidth", "display.max_columns",
                                                      "display.max_rows", "display.width", "display.float_format")}
    style = matplotlib.rcParams.copy()
    yield
    for name, value in options.items():
        pd.set_option(name, value)
    matplotlib.rcParams.update(style)


@pytest.fixture
def no_gpu_here(monkeypatch):
    """A provenance record that computes on the CPU, collected instantly; warm starts recorded, not run."""
    calls = []
    monkeypatch.setattr(notebook.provenance, "collect", lambda: {"device_kind": "cpu", "device": "a CPU",
                                                               "git_sha": "abc123"})
    monkeypatch.setattr(notebook.timing, "warm_start", lambda device, frameworks: calls.append((device, frameworks))
                        or {"first_s": len(calls)})
    for name in ("TF_CPP_MIN_LOG_LEVEL", "XLA_PYTHON_CLIENT_PREALLOCATE"):
        monkeypatch.delenv(name, raising=False)
    return calls


@pytest.fixture
def one_gpu_here(monkeypatch, no_gpu_here):
    """As ``no_gpu_here``, where both frameworks see one GPU."""
    import jax

    monkeypatch.setattr(notebook.provenance, "collect", lambda: {"device_kind": "gpu", "device": "a GPU", "git_sha": "x"})
    monkeypatch.setattr(jax, "devices", lambda kind=None: [f"{kind} device 0"])
    return no_gpu_here


def test_a_post_without_conditions_gets_its_devices_and_nothing_warmed(no_gpu_here):
    setup = notebook.setup(same_conditions=False, warm=None)
    assert setup.conditions is None and setup.startup == {} and no_gpu_here == []
    assert (setup.on_gpu, setup.devices, setup.main_device, str(setup.torch_device)) == (False, ["cpu"], "cpu", "cpu")
    assert set(setup.jax_devices) == {"cpu"} and setup.jax_devices["cpu"].platform == "cpu"


def test_warm_starts_the_main_device_or_every_device_cpu_first(one_gpu_here):
    main = notebook.setup(same_conditions=False, compilers=("jax",))
    assert one_gpu_here == [("cuda", ("jax",))] and main.startup == {"first_s": 1}
    assert (main.devices, main.main_device, str(main.torch_device)) == (["cpu", "gpu"], "gpu", "cuda")
    assert main.jax_devices == {"cpu": "cpu device 0", "gpu": "gpu device 0"}
    one_gpu_here.clear()
    every = notebook.setup(same_conditions=False, warm="every")
    assert one_gpu_here == [("cpu", ("torch", "jax")), ("cuda", ("torch", "jax"))]
    assert every.startup == {"first_s": 1}, "the CPU's start-up, the process's first, is the one reported"


def test_library_log_lines_are_held_back_and_jax_told_not_to_preallocate(no_gpu_here):
    notebook.setup(same_conditions=False, warm=None, jax_preallocate=False)
    assert os.environ["TF_CPP_MIN_LOG_LEVEL"] == "2" and os.environ["XLA_PYTHON_CLIENT_PREALLOCATE"] == "false"
    assert all(logging.getLogger(name).level == logging.ERROR for name in notebook.LOG_FILTERS)
    with warnings.catch_warnings(record=True) as caught:
        warnings.warn("TensorFloat32 tensor cores for float32 matrix multiplication available", UserWarning,
                      stacklevel=1)
        warnings.warn("a warning of the post's own", UserWarning, stacklevel=1)
    assert [str(w.message) for w in caught] == ["a warning of the post's own"]


@pytest.mark.parametrize("kwargs, says", [
    ({"warm": "gpu"}, "warm must be one of"),
    ({"compilers": ("torch", "tf")}, "compilers must name"),
    ({"compilers": ()}, "compilers must name"),
    ({"same_conditions": False, "threads": 2}, "threads and tf32 are conditions"),
    ({"same_conditions": False, "tf32": True}, "threads and tf32 are conditions"),
])
def test_bad_arguments_say_what_to_pass(no_gpu_here, kwargs, says):
    with pytest.raises(ValueError, match=says):
        notebook.setup(**kwargs)
    assert no_gpu_here == []


def test_a_run_in_parts_is_keyed_by_the_provenance_and_the_stamp(tmp_path, monkeypatch):
    setup = notebook.Setup(conditions=None, provenance={"device": "GPU A", "git_sha": "c0ffee", "torch": "2.9"},
                        on_gpu=True, devices=["cpu", "gpu"], torch_devices={}, jax_devices={}, startup={})
    monkeypatch.setattr(checkpoints, "run_inputs", lambda commit=None: {"recorded": {}})
    parts = setup.parts(tmp_path / "parts.json", 120, specs={"n": 1})
    assert parts.budget_s == 120 and parts.commit == "c0ffee"
    assert parts.stamp == {"provenance": {"device": "GPU A", "torch": "2.9"}, "specs": {"n": 1},
                           "inputs": {"recorded": {}}}
    assert parts("one", lambda: 3) == 3 and parts.log["one"]["commit"] == "c0ffee"
    assert setup.parts(tmp_path / "parts.json", 0, specs={"n": 1})("one", lambda: 4) == 3, "read back"
    other = notebook.Setup(**{**setup.__dict__, "provenance": {**setup.provenance, "device": "GPU B"}})
    assert other.parts(tmp_path / "parts.json", 0, specs={"n": 1})("one", lambda: 4) == 4, \
        "a part measured on another device is measured again"
    assert notebook.Setup(**setup.__dict__).parts("", 0).path is None


_FRESH = ("import json, sys; sys.path.insert(0, {src!r}); from sidebyside.lab import conditions, notebook; "
          "c = {call}; print(json.dumps(c))")


def _fresh(call: str) -> dict:
    code = _FRESH.format(src=str(ROOT / "src"), call=call)
    env = {k: v for k, v in os.environ.items() if k != "SIDEBYSIDE_COMPILE_CACHE"}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600, env=env,
                          check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.slow  # two fresh processes, each importing both frameworks
def test_the_conditions_are_same_conditions_own():
    """The notebooks' conditions (and so the post's conditions sentence) are what ``same_conditions``
    sets with the same arguments, in a process of their own."""
    setup = _fresh("notebook.setup(threads=1, tf32=False, warm=None).conditions")
    alone = _fresh("conditions.same_conditions(threads=1, tf32=False)")
    assert setup == alone
    assert setup["threads"] == setup["torch_threads"] == 1 and setup["tf32"] is False
