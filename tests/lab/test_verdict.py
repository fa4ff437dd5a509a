"""The verdict module: claims follow the numbers (the sentence flips when they do)."""

import pytest

from sidebyside.lab import framing, ladders, verdict, words

_OFFSETS = (-0.5, -0.25, 0.0, 0.25, 0.5)


def _t(median, iqr=0.0, order=0):
    """A timing entry over five processes whose medians spread by ``iqr`` around ``median``
    (``order`` rotates them, so two sides need not move together)."""
    offsets = _OFFSETS[order:] + _OFFSETS[:order]
    return {"median_s": median, "q1_s": median - iqr / 2, "q3_s": median + iqr / 2,
            "processes_s": [median + iqr * o for o in offsets]}


def test_speed_flips_with_the_numbers():
    fast_torch = verdict.speed(_t(1e-3, 1e-5), _t(2e-3, 1e-5), question="q", subject_tool="compile",
                               other_tool="jit")
    assert fast_torch.label == "faster" and fast_torch.winner == "torch"
    assert fast_torch.sentence.startswith("PyTorch (compile) is 2× faster than JAX (jit)")
    slow_torch = verdict.speed(_t(2e-3, 1e-5), _t(1e-3, 1e-5), question="q")
    assert slow_torch.label == "slower" and slow_torch.winner == "jax"
    assert "JAX is 2× faster than PyTorch" in slow_torch.sentence
    assert fast_torch.sentence != slow_torch.sentence


def test_speed_within_noise_when_the_interval_over_processes_holds_one():
    v = verdict.speed(_t(1.00e-3, 0.2e-3), _t(1.05e-3, 0.2e-3, order=2), question="q")
    assert v.label == "within noise" and v.winner is None
    assert v.interval[0] < 1 < v.interval[1]
    with pytest.raises(ValueError):
        verdict.speed(_t(0.0), _t(1.0), question="q")


def test_seeds_two_standard_errors():
    same = verdict.seeds([90.0, 90.2, 89.9], [90.1, 89.8, 90.0], question="q")
    assert same.label == "within seed noise" and same.winner is None
    apart = verdict.seeds([92.0, 92.1, 91.9], [90.0, 90.1, 89.9], question="q")
    assert apart.winner == "torch" and apart.label == "higher"
    assert "+2 points" in apart.sentence and "3 seeds" in apart.sentence
    lower_better = verdict.seeds([1.0, 1.1, 0.9], [2.0, 2.1, 1.9], question="q", higher_is_better=False,
                                 quantity="loss", unit="")
    assert lower_better.winner == "torch"
    single = verdict.seeds([90.0], [91.0], question="q")
    assert "1 seed" in single.sentence and "single observation" in single.sentence


def test_ladder_best_against_best_and_failures_stay():
    entries = {
        "torch/eager": _t(7.2e-1, 1e-2),
        "torch/compile": ladders.ladder_entry(error=RuntimeError("graph break storm")),
        "torch/cuda-graph": _t(7.7e-2, 1e-3),
        "jax/jit": _t(2.6e-1, 1e-2),
        "jax/jit+scan": _t(1.5e-2, 1e-3),
    }
    chosen = ladders.best(entries)
    assert chosen["torch"] == "cuda-graph" and chosen["jax"] == "jit+scan"
    # the ratio of each best rung's time as the sentences print it: the geometric mean of its per-process medians
    assert chosen["ratio"] == pytest.approx(verdict.typical_s(entries["torch/cuda-graph"])
                                            / verdict.typical_s(entries["jax/jit+scan"]))
    assert chosen["ratio"] == pytest.approx(7.7e-2 / 1.5e-2, rel=1e-3)
    v = ladders.ladder(entries, question="q")
    assert v.winner == "jax"
    assert "RuntimeError: graph break storm" in v.sentence and "eager" in v.sentence
    # The prose is computed: make PyTorch's best faster and the verdict turns.
    entries["torch/cuda-graph"] = _t(1.0e-2, 1e-4)
    assert ladders.ladder(entries, question="q").winner == "torch"
    all_failed = {"torch/eager": ladders.ladder_entry(error="boom"), "jax/jit": _t(1.0)}
    assert ladders.ladder(all_failed, question="q").label == "no comparison"


def test_formatting():
    assert words.fmt_number(101770.0) == "101,770"
    assert words.fmt_number(45803.193) == "45,803"
    assert words.fmt_number(-0.0001, 1) == "-0.0001"
    assert words.fmt_number(-0.0) == "0"
    assert words.fmt_seconds(3.27e-3) == "3.27 ms"
    assert words.fmt_seconds(4.12e-4) == "412 µs"
    assert words.plural(1, "seed") == "1 seed" and words.plural(5, "seed") == "5 seeds"
    with pytest.raises(ValueError, match="framework"):
        ladders.best({"eager": _t(1.0)})


def test_signed_numbers_never_show_minus_zero():
    assert words.fmt_signed(1.6) == "+1.6" and words.fmt_signed(-0.05) == "-0.05"
    assert words.fmt_signed(-0.0) == "0" and words.fmt_signed(-0.0001, 1) == "-0.0001"


def test_ratio_interval_and_sentence_run_in_one_direction():
    """The subject's time over the other's, whoever wins and also within noise
    (the gradient verdict once stored 1.029 and printed 0.972)."""
    for subject, other in ((_t(1e-3, 1e-5), _t(2e-3, 1e-5, 1)), (_t(2e-3, 1e-5), _t(1e-3, 1e-5, 1)),
                           (_t(1.00e-3, 0.2e-3), _t(1.03e-3, 0.2e-3, 2))):
        v = verdict.speed(subject, other, question="q")
        assert v.ratio == pytest.approx(subject["median_s"] / other["median_s"], rel=0.05)
        assert v.interval[0] <= v.ratio <= v.interval[1]
        if v.winner is None:  # the time ratio, subject over other
            assert f"over JAX's {words.fmt_number(v.ratio)}, 95% confidence interval " \
                   f"{words.fmt_number(v.interval[0])}–{words.fmt_number(v.interval[1])}" in v.sentence
        else:  # the winner's speed-up and its interval in the same direction
            low, high = (1 / v.interval[1], 1 / v.interval[0]) if v.winner == "torch" else v.interval
            assert f"{words.fmt_ratio(v.factor)} faster" in v.sentence
            assert f"({words.fmt_number(low)}–{words.fmt_ratio(high)}, 95% confidence interval" in v.sentence
        assert v.factor == pytest.approx(max(v.ratio, 1 / v.ratio)) and v.factor >= 1
        assert v.to_dict()["ratio"] == v.ratio


def _framework_pair():
    return {"torch": framing.contestant("torch", "eager", "ATen's grid_sampler_2d"),
            "jax": framing.contestant("jax", "jit", "jnp gather compiled by XLA")}


def test_contestants_and_scale_travel_with_the_verdict():
    scale = framing.scale_of(parameters=148_000, input="32×32", batch=16, precision="float32", device="1 CPU core")
    v = verdict.speed(_t(2e-3), _t(1e-3), question="q", contestants=_framework_pair(), scale=scale)
    d = v.to_dict()
    assert d["contestants"]["torch"]["implementation"] == "ATen's grid_sampler_2d"
    assert d["contestants"]["jax"]["origin_text"] == "ships with JAX"
    assert d["scale"]["text"] == "148k parameters, input 32×32, batch 16, float32, on 1 CPU core"
    assert d["kind"] == "framework"
    # A ladder names its two best rungs, with what an entry says about itself.
    entries = {"torch/eager": _t(2e-3), "torch/compile": _t(1e-3), "jax/jit": _t(1.5e-3)}
    lv = ladders.ladder(entries, question="q", scale=scale)
    assert lv.contestants["torch"]["tool"] == "compile" and lv.contestants["jax"]["tool"] == "jit"
    assert lv.scale["batch"] == 16


def test_a_custom_implementation_never_heads_a_framework_verdict():
    ours = {"torch": framing.contestant("torch", "eager", "ATen's grid_sampler_2d"),
            "jax": framing.contestant("jax", "jit", "C++ kernel through XLA's FFI", origin="project")}
    with pytest.raises(ValueError, match="this project's code"):
        verdict.speed(_t(2e-3), _t(1e-3), question="q", contestants=ours)
    custom = verdict.speed(_t(2e-3), _t(1e-3), question="q", contestants=ours, kind="custom")
    assert custom.kind == "custom" and custom.contestants["jax"]["origin_text"] == "written by this project"
    entries = {"torch/eager": _t(2e-3), "jax/native": {**_t(1e-3), "implementation": "C++ kernel",
                                                       "origin": "project"}}
    with pytest.raises(ValueError):
        ladders.ladder(entries, question="q")
    framework = verdict.speed(_t(2e-3), _t(1e-3), question="q", contestants=_framework_pair())
    framing.check_headline([framework, custom])
    with pytest.raises(ValueError, match="headline"):
        framing.check_headline([custom.to_dict(), framework.to_dict()])
    with pytest.raises(ValueError):
        framing.contestant("jax", "jit", "x", origin="borrowed")


def test_a_claim_at_another_scale_is_not_answered_yet():
    seed = framing.claim("the seed", "JAX 1.27× faster", framing.scale_of(
        parameters=28_000_000, input="256×256", batch=64, device="V100"))
    toy = framing.scale_of(parameters=148_000, input="32×32", batch=16, device="1 CPU core")
    v = verdict.speed(_t(2e-3), _t(1e-3), question="q", scale=toy, against=seed)
    assert v.claim["answers"] is False and set(v.claim["differs"]) == {"parameters", "input", "batch", "device"}
    assert "does not answer the seed's claim (JAX 1.27× faster) yet" in v.sentence
    assert "does not answer" in v.caveat and "V100" in v.caveat
    same = verdict.speed(_t(2e-3), _t(1e-3), question="q", against=seed, scale=framing.scale_of(
        parameters=28_000_000, input="256×256", batch=64, device="V100"))
    assert same.claim["answers"] is True and "does not answer" not in same.sentence
    unstated = verdict.seeds([1.0, 1.1], [1.0, 1.2], question="q", against=seed)
    assert unstated.claim["answers"] is False and "states no scale" in unstated.sentence


def test_a_precision_row_that_did_not_take_effect_gets_no_verdict():
    import numpy as np

    f64 = np.linspace(0, 1, 50)
    f32 = f64 + 1e-8
    tf32 = f64 + 1e-4
    took = framing.precision_applied(tf32, f32, f64, precision="TF32")
    assert took["applied"] and took["reason"] is None
    assert took["error"] == pytest.approx(1e-4) and took["float32_error"] == pytest.approx(1e-8)
    did_not = framing.precision_applied(f32, f32, f64, precision="TF32")
    assert not did_not["applied"] and "equals the float32 result" in did_not["reason"]
    entries = {"torch/eager": _t(1e-3), "jax/jit": _t(2e-3)}
    v = ladders.ladder(entries, question="q", applied={"torch": None, "jax": did_not["reason"]})
    assert v.label == "not applied" and v.winner is None and v.ratio is None
    assert v.sentence.startswith("not applied: JAX: the TF32 result equals")
    raced = ladders.ladder(entries, question="q", applied={"torch": None, "jax": None})
    assert raced.winner == "torch"


def test_a_compile_rung_slower_than_eager_is_explained():
    entries = {"torch/eager": _t(0.719), "torch/compile": {**_t(0.833), "graph_breaks": 1},
               "jax/jit": _t(0.5)}
    v = ladders.ladder(entries, question="q")
    assert "PyTorch's compile is slower than its eager rung (833 ms against 719 ms)" in v.sentence
    assert "2 graphs (1 graph break" in v.sentence
    entries["torch/compile"] = {**_t(0.833), "why": "the input copy into the static buffer costs 0.1 s"}
    assert "the input copy into the static buffer" in ladders.ladder(entries, question="q").sentence
    entries["torch/compile"] = _t(0.833)
    assert "no measurement in this run explains it yet" in ladders.ladder(entries, question="q").sentence
    entries["torch/compile"] = _t(0.6)  # faster than eager: nothing to explain
    assert "slower than its eager" not in ladders.ladder(entries, question="q").sentence


def test_seed_verdicts_need_enough_seeds():
    few = verdict.seeds([90.0, 90.5, 91.0], [88.0, 88.2, 88.1], question="q", min_seeds=5)
    assert few.label == "too few seeds" and few.winner is None and "fewer than the 5 seeds" in few.sentence
    enough = verdict.seeds([90.0, 90.5, 91.0, 90.2, 90.4], [88.0, 88.2, 88.1, 88.3, 88.0], question="q",
                           min_seeds=5)
    assert enough.winner == "torch"


def test_scales_text_merges_each_field_in_order_and_can_leave_the_device_out():
    a = framing.scale_of(parameters=28_300_000, input="256×256×3", batch=32, precision="float32", device="H")
    b = framing.scale_of(parameters=28_300_000, input="256×256×3", batch=64, precision="bfloat16", device="H")
    assert framing.scales_text([a, b, a]) == \
        "28.3M parameters, input 256×256×3, batch 32 and 64, float32 and bfloat16, on H"
    assert framing.scales_text([b, a], device=False) == "28.3M parameters, input 256×256×3, batch 64 and 32, bfloat16 and float32"
    assert framing.scales_text([{}, framing.scale_of()]) == ""


def test_a_races_spread_between_runs_widens_its_interval_and_only_its_own():
    """The machine kind's spreads between runs travel in the entries, by verdict id; the race they
    name gets the wider interval t(0.975, n - 1) * sqrt(s^2/n + tau^2), and says so; another race
    measured beside it keeps its interval over processes alone."""
    from scipy import stats as scipy_stats

    subject, other = _t(1.00e-3, 0.02e-3), _t(2.00e-3, 0.02e-3, order=2)
    plain = verdict.speed(subject, other, question="q", race="per-call/best")
    between = {framing.verdict_id("per-call/best", None): {"sd": 0.1, "runs": 4}}
    wide = verdict.speed({**subject, "between": between}, {**other, "between": between}, question="q",
                         race="per-call/best")
    other_race = verdict.speed({**subject, "between": between}, {**other, "between": between}, question="q",
                               race="chained")
    assert other_race.interval == plain.interval and other_race.between is None
    assert wide.ratio == plain.ratio and wide.between == {"sd": 0.1, "runs": 4}
    import math
    logs = [math.log(a / b) for a, b in zip(subject["processes_s"], other["processes_s"])]
    mean = sum(logs) / 5
    s2 = sum((x - mean) ** 2 for x in logs) / 4
    half = scipy_stats.t.ppf(0.975, 4) * math.sqrt(s2 / 5 + 0.1 ** 2)
    assert wide.interval == pytest.approx((math.exp(mean - half), math.exp(mean + half)))
    assert wide.interval[0] < plain.interval[0] and wide.interval[1] > plain.interval[1]
    assert "over 5 processes and this race's spread between 4 runs on machines of this fingerprint" in wide.sentence
    assert "widened by the spread between runs (0.1 in the log-ratio)" in wide.test
    assert wide.to_dict()["between"] == {"sd": 0.1, "runs": 4} and plain.to_dict()["between"] is None
    # a spread larger than the difference makes the race undecided
    undecided = {framing.verdict_id("per-call/best", None): {"sd": 0.5, "runs": 4}}
    assert verdict.speed({**subject, "between": undecided}, other, question="q",
                         race="per-call/best").label == verdict.WITHIN
