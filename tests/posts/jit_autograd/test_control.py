"""The control race of jit-and-autograd-timing (sidebyside.posts.jit_autograd.control and the
notebook's control pair): g, f without sin and cos, has no transcendental primitive in its jaxpr
while f has sin and cos; its ladder, built as the notebook builds it, runs at tiny sizes and gives
g's values; the answer's sentence is made of the headline's and the control's factors."""

from __future__ import annotations

import copy
import math

import numpy as np
import pytest
from conftest import per_process, run_pairs

from sidebyside.lab import ladders, timing
from sidebyside.lab.words import fmt_number, fmt_ratio
from sidebyside.posts.jit_autograd import control, sweeps
from sidebyside.posts.jit_autograd import report as rep

FAST = {"repeats": 3, "min_repeat_s": 0.001, "processes": 1}


@pytest.fixture(scope="module")
def paired():
    """The namespace left by the notebook's paired cells f, jit, grad and control, nothing else."""
    pytest.importorskip("torch")
    pytest.importorskip("jax")
    return run_pairs("04_jit_autograd.py", ["f", "jit", "grad", "control"], {})


def _np(value):
    return value.detach().cpu().numpy() if hasattr(value, "detach") else np.asarray(value)


def test_the_controls_jaxpr_has_no_sin_or_cos_and_fs_has(paired):
    import jax.numpy as jnp

    x = jnp.linspace(0.0, 4 * np.pi, 8, dtype=jnp.float32)
    assert control.transcendentals(paired["f_jax"], x) == {"sin", "cos"}
    assert control.transcendentals(paired["vmap_grad_jax"], x) == {"sin", "cos"}
    for name in ("g_jax", "g_jit", "vmap_grad_g_jax", "vmap_grad_g_jax_jit", "grad_sum_g_jax_jit"):
        primitives = control.primitives(paired[name], x)
        assert "mul" in primitives and not primitives & control.TRANSCENDENTAL, (name, primitives)


def test_the_controls_values_and_gradients_are_gs(paired):
    import jax.numpy as jnp
    import torch

    x = np.linspace(0.0, 4 * np.pi, 33)
    top = np.max(np.abs(control.exact(x)))
    for value in (paired["g_torch"](torch.from_numpy(x)), paired["g_numpy"](x)):
        np.testing.assert_allclose(_np(value), control.exact(x), atol=1e-12 * top)
    x32 = x.astype(np.float32)
    np.testing.assert_allclose(
        _np(paired["g_jax"](jnp.asarray(x32))), control.exact(x32), atol=1e-6 * top
    )
    h = 1e-6  # the exact gradient is the derivative of the exact g
    np.testing.assert_allclose(
        control.exact_grad(x),
        (control.exact(x + h) - control.exact(x - h)) / (2 * h),
        rtol=1e-6,
        atol=1e-4,
    )
    grad_top = np.max(np.abs(control.exact_grad(x)))
    for name, value in {
        "vmap_grad_g_torch": paired["vmap_grad_g_torch"](torch.from_numpy(x32)),
        "grad_sum_g_torch": paired["grad_sum_g_torch"](torch.from_numpy(x32)),
        "vmap_grad_g_jax": paired["vmap_grad_g_jax"](jnp.asarray(x32)),
        "grad_sum_g_jax_jit": paired["grad_sum_g_jax_jit"](jnp.asarray(x32)),
    }.items():
        np.testing.assert_allclose(
            _np(value), control.exact_grad(x32), atol=1e-6 * grad_top, err_msg=name
        )


def test_the_controls_ladder_runs_at_tiny_sizes(paired):
    """The ladder as the notebook's candidates(device, n, G_RUNGS) binds it on the CPU (the compiled
    PyTorch rungs apart: they compile, see the slow test), timed and checked as its part is."""
    rungs = {
        "torch/eager": paired["g_torch"],
        "torch/compile-cudagraphs": timing.NotApplicable.cuda_graphs("cpu"),
        "jax/eager": paired["g_jax"],
        "jax/jit": paired["g_jit"],
        "numpy/numpy": paired["g_numpy"],
    }
    for n in (10, 100):
        x = np.random.default_rng(n).uniform(0, 4 * np.pi, n).astype(np.float32)
        fns = control.bind(rungs, x, static=["torch/compile-cudagraphs"])
        assert isinstance(fns["torch/compile-cudagraphs"], timing.NotApplicable)
        assert type(fns["torch/eager"].args[0]).__module__.startswith("torch")
        assert fns["numpy/numpy"].args[0] is x
        ladder = sweeps.checked(fns, control.exact(x), **FAST)
        assert set(ladder.timings) == {"torch/eager", "jax/eager", "jax/jit", "numpy/numpy"}
        assert ladder.entries["torch/compile-cudagraphs"]["not_applicable"]
        assert max(ladder.errors.values()) < 1e-6 * np.max(np.abs(control.exact(x)))


@pytest.mark.slow  # compiles g and its gradient with torch.compile: tens of seconds on a 2-core CPU
def test_the_controls_compiled_rungs_run_at_a_tiny_size(paired):
    x = np.linspace(0.1, 12.0, 64, dtype=np.float32)
    rungs = {
        m: paired[k]
        for m, k in (
            ("torch/compile", "g_torch_static"),
            ("torch/compile-dynamic", "g_torch_dynamic"),
            ("jax/jit", "g_jit"),
        )
    }
    ladder = sweeps.checked(control.bind(rungs, x), control.exact(x), **FAST)
    assert set(ladder.timings) == set(rungs) and max(ladder.errors.values()) < 1e-6 * 4e5
    grads = {
        "torch/func+compile": paired["vmap_grad_g_torch_compiled"],
        "jax/jit": paired["vmap_grad_g_jax_jit"],
    }
    checked = sweeps.checked(control.bind(grads, x), control.exact_grad(x), **FAST)
    assert set(checked.timings) == set(grads) and max(checked.errors.values()) < 1e-6 * 2e5


def _e(median_s):
    return ladders.ladder_entry(
        {
            "median_s": median_s,
            "iqr_s": median_s * 0.02,
            "compile_s": 0.1,
            "processes_s": per_process(median_s, 0.01),
        }
    )


def _ladder(torch_s, jax_s):
    return {
        "torch/eager": _e(torch_s * 3),
        "torch/compile": _e(torch_s),
        "jax/eager": _e(jax_s * 5),
        "jax/jit": _e(jax_s),
        "numpy/numpy": _e(jax_s / 2),
    }


def _record(control_jit=(20e-3, 24e-3), control_grad=(1e-3, 1.5e-3)):
    """A record whose headline (PyTorch 8.6× faster at 10⁷ floats) has a control beside it."""
    n, m = 10_000_000, 1_000_000
    jit = {
        str(k): {
            "ladder": _ladder(t, j),
            "best": ladders.best(rep.ladder_only(_ladder(t, j))),
            "memory_floor_s": 8 * k / 20e9,
        }
        for k, t, j in ((10, 14e-6, 9e-6), (n, 24.9e-3, 214e-3))
    }
    grad = {
        "torch/autograd": _e(3e-3),
        "torch/func+compile": _e(1.06e-3),
        "jax/jit-grad-sum": _e(23e-3),
    }
    hvp = {"torch/func+compile": _e(1e-3), "jax/jit": _e(21e-3)}
    return {
        "jit": {"cpu": jit},
        "autograd": {str(m): {"ladder": grad}},
        "hvp": {str(m): {"ladder": hvp}},
        "autograd_device": "cpu",
        "bandwidth": {"cpu": {"floor uses": "measured copy"}},
        "startup_s": {"torch_compile_startup_s": 12.0, "jax_jit_startup_s": 0.03},
        "compile_s": {"cpu": {"jax_jit": 0.04, "torch_compile": 0.9, "torch_compile_dynamic": 1.0}},
        "pitfall": {},
        "control": {
            "jit": {"device": "cpu", "size": n, "ladder": _ladder(*control_jit)},
            "autograd": {
                "device": "cpu",
                "size": m,
                "ladder": {
                    "torch/func+compile": _e(control_grad[0]),
                    "jax/jit-grad-sum": _e(control_grad[1]),
                },
            },
            "xla_flags": [
                {"flags": "", "per_element_s": 2e-8, "max_abs_diff": 0.0, "error": None},
                {
                    "flags": "--xla_cpu_enable_fast_math=true",
                    "per_element_s": 1.9e-8,
                    "max_abs_diff": 0.0,
                    "error": None,
                },
            ],
            "xla_options": {
                "all": ["xla_cpu_enable_fast_math", "xla_cpu_use_thunk_runtime"],
                "vector_math": [],
            },
            "jaxlib": "0.10.2",
        },
    }


def _by_race(metrics):
    return {v.race: v for v in rep.verdicts(metrics)}


def test_the_control_has_its_own_labelled_verdicts_with_contestants_and_scale():
    found = _by_race(_record())
    for race in ("control-no-sin-cos/jit/cpu", "control-no-sin-cos/autograd/cpu"):
        v = found[race]
        assert v.question.startswith("Control: no sin/cos.") and v.scale["device"] == "CPU"
        assert set(v.contestants) == {"torch", "jax"} and v.scale["precision"] == "float32"
    assert "10,000,000" in found["control-no-sin-cos/jit/cpu"].scale["text"]
    assert rep.verdicts(_record())[0].race == "jit/cpu/largest"  # the headline stays first
    without = {v.to_dict()["id"] for v in rep.verdicts({**_record(), "control": {}})}
    assert set(found) - {v.race for v in rep.verdicts({**_record(), "control": {}})} == {
        "control-no-sin-cos/jit/cpu",
        "control-no-sin-cos/autograd/cpu",
    }
    assert {found[r].to_dict()["id"] for r in found if r.startswith("control-")}.isdisjoint(without)


def test_the_answers_sentence_is_made_of_the_two_records_factors():
    metrics = _record()
    found = _by_race(metrics)
    head, ctrl = found["jit/cpu/largest"], found["control-no-sin-cos/jit/cpu"]
    sentence = rep.control_sentence(head, ctrl)
    assert sentence.startswith("Without sin and cos the same race gives PyTorch's best")
    for factor in (head.factor, ctrl.factor, head.factor / ctrl.factor):
        assert fmt_ratio(factor) in sentence
    for low, high in (head.interval, ctrl.interval):
        assert f"{fmt_number(1 / high)}–{fmt_ratio(1 / low)}" in sentence
    removed = 100 * (1 - math.log(ctrl.factor) / math.log(head.factor))
    assert f"removes {fmt_number(removed)}% of the headline's factor" in sentence
    claim = rep.control_claim(metrics)
    assert (
        sentence in claim
        and rep.control_sentence(
            found["gradient/cpu"], found["control-no-sin-cos/autograd/cpu"], "f's gradient"
        )
        in claim
    )
    assert (
        "with `--xla_cpu_enable_fast_math=true` it takes 19 ns an element, "
        "the same values bit for bit"
        in claim
    )
    assert "none names sin, cos" in claim and claim in rep.conclusion(metrics)
    slower = copy.deepcopy(metrics)  # a control that keeps the whole gap says so
    slower["control"]["jit"]["ladder"] = _ladder(20e-3, 300e-3)
    found = _by_race(slower)
    assert "removes none of the headline's factor" in rep.control_sentence(
        head, found["control-no-sin-cos/jit/cpu"]
    )
    tied = copy.deepcopy(
        head
    )  # a headline without a winner has no gap to explain: no share is claimed
    tied.winner, tied.label = None, "within noise"
    plain = rep.control_sentence(tied, ctrl)
    assert "removes" not in plain and plain.endswith(
        f"{fmt_ratio(1 / head.interval[0])}, within noise)."
    )


def test_xla_options_are_tried_in_child_processes():
    pytest.importorskip("jax")
    import jax.numpy as jnp

    x = np.linspace(0.0, 4 * np.pi, 1000, dtype=np.float32)
    rows = control.flag_trials(
        lambda v: jnp.sin(v) + 1,
        x,
        ["", "--xla_cpu_enable_fast_math=true", "--xla_no_such_option=1"],
        repeats=3,
        min_repeat_s=0.001,
    )
    assert (
        rows[0]["max_abs_diff"] == 0 and rows[0]["per_element_s"] > 0 and rows[1]["error"] is None
    )
    assert "xla_no_such_option" in rows[2]["error"]
    options = control.cpu_options()
    assert "xla_cpu_enable_fast_math" in options["all"] and set(options["vector_math"]) <= set(
        options["all"]
    )
