"""xla-and-scipy made in parts (sidebyside.posts.xla_and_scipy.measure through a
sidebyside.run.checkpoints.Checkpoints, as notebooks/05_xla_and_scipy.py calls them): at tiny
sizes, a second run against the same checkpoint file measures nothing again and gets equal values
back (a linear-algebra case, the precision rows, a fit, a retracing strategy with its traces, a
static-argument approach); a budget that a part cannot fit stops the run before that part."""

from __future__ import annotations

import functools

import numpy as np
import pytest
import scipy.optimize

from sidebyside.lab import functions, timing
from sidebyside.posts.xla_and_scipy import measure
from sidebyside.run import checkpoints
from sidebyside.run.checkpoints import Checkpoints

FAST = {"repeats": 3, "min_repeat_s": 0.001}


class Notebook:
    """The notebook's part functions at tiny sizes, in NumPy and SciPy, counting every call that
    would measure something; the linear-algebra cases draw their data from the notebook's
    generator, the precision rows take theirs drawn before."""

    def __init__(self):
        self.calls = 0
        self.traces: dict[str, int] = {}
        self.seen: set[tuple[str, int]] = set()
        self.data = functions.calibration_data(0, 64)
        self.truth = np.array([self.data.slope, self.data.offset])
        self.best = functions.calibration_lstsq(self.data.raw, self.data.reference)
        self.rng = np.random.default_rng(0)

    def counted(self, fn):
        def call(*args, **kwargs):
            self.calls += 1
            return fn(*args, **kwargs)

        return call

    def linalg_ladder(self, op, n):  # one case's ladder, its candidates drawn inside the part
        a, b = self.rng.standard_normal((n, n)), self.rng.standard_normal((n, n))
        fns = (
            {"numpy/numpy": functools.partial(self.counted(np.matmul), a, b)}
            if op == "matmul"
            else {"numpy/numpy": functools.partial(self.counted(np.linalg.inv), a)}
        )
        fns["torch/eager"] = timing.NotApplicable("not in this test")
        return measure.ladder_entries(fns, processes=1, **FAST)

    def precision_on(self, device):
        a, b = self.a, self.b
        variants = {
            ("NumPy", "float64"): functools.partial(self.counted(np.matmul), a, b),
            ("NumPy", "float32"): functools.partial(
                self.counted(np.matmul), a.astype(np.float32), b.astype(np.float32)
            ),
        }
        return measure.precision_rows(variants, a @ b, device=device, processes=1, **FAST)

    def rmse(self, p, n=None):  # the calibration loss on the first n measurements (all: None)
        raw, reference = self.data.raw[:n], self.data.reference[:n]
        return float(np.sqrt(np.mean((p[0] * raw + p[1] - reference) ** 2)))

    def scipy_fd(self):
        self.calls += 1
        r = scipy.optimize.minimize(self.rmse, np.zeros(2), method="BFGS", options={"gtol": 1e-6})
        return r.x, r.nit, r.nfev, bool(r.success), int(r.status)

    def fitted(self, **kwargs):
        return measure.fit(
            self.scipy_fd,
            loss=self.rmse,
            truth=self.truth,
            optimum=self.best,
            gradient=lambda p: scipy.optimize.approx_fprime(p, self.rmse),
            **kwargs,
        )

    def loss_at(self, strategy, n):  # as a jitted loss: one trace at each new length
        if (strategy, n) not in self.seen:
            self.seen.add((strategy, n))
            self.traces[strategy] = self.traces.get(strategy, 0) + 1
        self.calls += 1
        return self.rmse(self.truth, n)

    def retraced(self, strategy):
        return measure.first_calls(
            functools.partial(self.loss_at, strategy),
            [16, 32, 64],
            strategy=strategy,
            expected=functools.partial(self.rmse, self.truth),
            traces=self.traces,
            min_repeat_s=0.001,
        )

    def one_pass(self):
        self.calls += 1
        self.traces["static argument"] = self.traces.get("static argument", 0) + 1


def _run(path, nb, **options):
    """The notebook's part-wrapped calls, in its order and under its names."""
    parts = Checkpoints(path, stamp={"device": "test"}, commit="abc", **options)
    linalg = {(op, n): parts.drawn(nb.rng, f"linalg/{op}/cpu/{n}/float64",
                                     nb.linalg_ladder, op, n)
              for op in ("matmul", "inverse") for n in (8, 16)}
    nb.a, nb.b = nb.rng.standard_normal((8, 8)), nb.rng.standard_normal((8, 8))  # outside a part
    precision = parts("precision/cpu/8", nb.precision_on, "cpu")
    fitted = functools.partial(nb.fitted, name="scipy_bfgs_finite_diff")  # as the notebook binds it
    fit = parts("optimise/scipy_bfgs_finite_diff", fitted, **FAST)
    retrace = parts(
        f"retrace/{measure.slug('padding, length static')}", nb.retraced, "padding, length static"
    )
    passes = functools.partial(measure.two_passes, nb.one_pass, traces=nb.traces)
    static = parts(
        f"static/{measure.slug('static argument')}", passes, approach="static argument", calls=4
    )
    return parts, {
        "linalg": linalg,
        "precision": precision,
        "fit": fit,
        "retrace": retrace,
        "static": static,
        "a": nb.a.tolist(),
    }


def test_a_second_run_reads_every_part_back_and_measures_nothing(tmp_path):
    _, straight = _run("", Notebook())  # off: also imports every module a part's key counts
    path = tmp_path / "checkpoints" / "xla.json"
    first = Notebook()
    parts, values = _run(path, first)
    assert list(parts.log)[-4:] == ["precision/cpu/8", "optimise/scipy_bfgs_finite_diff",
                                    "retrace/padding-length-static", "static/static-argument"]
    assert first.calls > 0 and all(p["measured"] == "this run" for p in parts.log.values())
    entries = values["linalg"]["inverse", 16]
    assert entries["numpy/numpy"]["median_s"] > 0
    assert entries["torch/eager"]["not_applicable"] == "not in this test"
    rows = values["precision"]
    assert [r["setting"] for r in rows] == ["float64", "float32"]
    assert rows[0]["relative error"] == 0.0 and 0 < rows[1]["relative error"] < 1e-5
    assert values["fit"]["success"] is True and values["fit"]["error_vs_optimum"] < 1e-3
    assert values["retrace"]["traces"] == 3
    assert [r["length"] for r in values["retrace"]["rows"]] == [16, 32, 64]
    assert values["static"]["traces in both passes"] == 2  # two passes: alone, then one repeat
    assert values["a"] == straight["a"]  # a run in parts draws as a run without parts

    again = Notebook()
    parts2, values2 = _run(path, again)
    assert again.calls == 0 and again.traces == {}  # nothing measured, nothing traced
    assert all(p["measured"] == "earlier run" and p["commit"] == "abc" for p in parts2.log.values())
    assert values2 == values  # the values, and the data drawn after the parts read back
    assert "8 of its 8 parts were read back" in checkpoints.describe_parts(parts2.log)


class _Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


def test_a_budget_stops_before_the_case_that_would_not_fit(tmp_path):
    _run("", Notebook())
    clock, nb = _Clock(), Notebook()

    def slow_case(op, n):  # each case takes 40 s of the run's clock
        clock.now += 40
        return nb.linalg_ladder(op, n)

    parts = Checkpoints(
        tmp_path / "xla.json",
        budget_s=100,
        clock=clock,
        started_at=0.0,
        deadline_s=0.0,
        estimates={"linalg/*": 40},
    )
    parts("linalg/matmul/gpu/8/float32", slow_case, "matmul", 8)
    parts("linalg/matmul/gpu/8/tf32", slow_case, "matmul", 8)  # 80 s have passed
    calls = nb.calls
    with pytest.raises(
        checkpoints.BudgetSpent, match="'linalg/matmul/gpu/16/float32', is expected to take 40 s"
    ):
        parts("linalg/matmul/gpu/16/float32", slow_case, "matmul", 16)
    assert nb.calls == calls and clock.now == 80  # stopped before the case: nothing of it ran
    resumed = Checkpoints(
        tmp_path / "xla.json", budget_s=100, clock=clock, started_at=0.0, deadline_s=0.0
    )
    assert resumed.predicted_s("linalg/matmul/gpu/16/float32") == 40
    resumed("linalg/matmul/gpu/8/float32", slow_case, "matmul", 8)
    assert nb.calls == calls  # read back


def test_slug_names_a_part_by_its_label():
    assert measure.slug("padding, length static") == "padding-length-static"
    assert measure.slug("new jit per call") == "new-jit-per-call"
    with pytest.raises(ValueError, match="no letter or digit"):
        measure.slug(", ")
