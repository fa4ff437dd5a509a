"""The verdict module: claims follow the numbers (the sentence flips when they do)."""

import pytest

from sidebyside.lab import verdict


def _t(median, iqr=0.0):
    return {"median_s": median, "iqr_s": iqr}


def test_speed_flips_with_the_numbers():
    fast_torch = verdict.speed(_t(1e-3, 1e-5), _t(2e-3, 1e-5), question="q", subject_tool="compile",
                               other_tool="jit")
    assert fast_torch.label == "faster" and fast_torch.winner == "torch"
    assert fast_torch.sentence.startswith("PyTorch (compile) is 2× faster than JAX (jit)")
    slow_torch = verdict.speed(_t(2e-3, 1e-5), _t(1e-3, 1e-5), question="q")
    assert slow_torch.label == "slower" and slow_torch.winner == "jax"
    assert "JAX is 2× faster than PyTorch" in slow_torch.sentence
    assert fast_torch.sentence != slow_torch.sentence


def test_speed_within_noise_when_the_quartile_interval_holds_one():
    v = verdict.speed(_t(1.00e-3, 0.2e-3), _t(1.05e-3, 0.2e-3), question="q")
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
        "torch/compile": verdict.ladder_entry(error=RuntimeError("graph break storm")),
        "torch/cuda-graph": _t(7.7e-2, 1e-3),
        "jax/jit": _t(2.6e-1, 1e-2),
        "jax/jit+scan": _t(1.5e-2, 1e-3),
    }
    chosen = verdict.best(entries)
    assert chosen["torch"] == "cuda-graph" and chosen["jax"] == "jit+scan"
    assert chosen["ratio"] == pytest.approx(7.7e-2 / 1.5e-2)
    v = verdict.ladder(entries, question="q")
    assert v.winner == "jax"
    assert "RuntimeError: graph break storm" in v.sentence and "eager" in v.sentence
    # The prose is computed: make PyTorch's best faster and the verdict turns.
    entries["torch/cuda-graph"] = _t(1.0e-2, 1e-4)
    assert verdict.ladder(entries, question="q").winner == "torch"
    all_failed = {"torch/eager": verdict.ladder_entry(error="boom"), "jax/jit": _t(1.0)}
    assert verdict.ladder(all_failed, question="q").label == "no comparison"


def test_formatting():
    assert verdict.fmt_number(101770.0) == "101,770"
    assert verdict.fmt_number(45803.193) == "45,803"
    assert verdict.fmt_number(-0.0001, 1) == "-0.0001"
    assert verdict.fmt_number(-0.0) == "0"
    assert verdict.fmt_seconds(3.27e-3) == "3.27 ms"
    assert verdict.fmt_seconds(4.12e-4) == "412 µs"
    assert verdict.plural(1, "seed") == "1 seed" and verdict.plural(5, "seed") == "5 seeds"
    with pytest.raises(ValueError, match="framework"):
        verdict.best({"eager": _t(1.0)})


def test_signed_numbers_never_show_minus_zero():
    assert verdict.fmt_signed(1.6) == "+1.6" and verdict.fmt_signed(-0.05) == "-0.05"
    assert verdict.fmt_signed(-0.0) == "0" and verdict.fmt_signed(-0.0001, 1) == "-0.0001"
