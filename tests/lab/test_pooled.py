"""One process is one observation: the pooled timing harness and the verdicts it feeds.

A simulation of the speed verdict's error rates over seeded populations (no framework runs),
the refusals (a bare number, an entry without its median, one process), the noise floor, Welch's
test over seeds against SciPy, an A/A race through real worker processes, reproduction under
synthetic load, and the per-process figures a published record keeps."""

from __future__ import annotations

import functools
import json
import math
import warnings

import numpy as np
import pytest
from scipy import stats as scipy_stats

from sidebyside.lab import ladders, pool, stats, timing, verdict, words
from sidebyside.lab.entry import ENTRY_KEYS, Timing, read
from sidebyside.publish import reproduce, running
from sidebyside.run import context

# ----------------------------------------------------------------------------- simulation

#: The cpu profile's processes: each one is one observation of a speed verdict.
PROCESSES = pool.PROCESSES["cpu"]
TRIALS = 1000
#: Realistic noise, in natural-log units of a per-call time:
#: - PROCESS_SD: what changes between processes (address-space layout, page placement, which cores the
#:   threads land on) moves both contestants of a process together; sd 0.1 (about ±10%);
#: - OWN_SD: what each contestant meets on its own in a process (its own alignment, interleaving);
#:   sd 0.03 (about ±3%), smaller.
PROCESS_SD, OWN_SD = 0.1, 0.03
#: A noise floor of 3%, the size an A/A race measures on a quiet CPU.
FLOOR = 0.03
BASE_S = 1e-3


def _entry(times: np.ndarray, floor: float | None = FLOOR) -> dict:
    return {"median_s": float(np.median(times)), "processes_s": [float(t) for t in times], "floor": floor}


def _population(rng: np.random.Generator, n: int, true_ratio: float, process_sd: float = PROCESS_SD,
                own_sd: float = OWN_SD) -> tuple[np.ndarray, np.ndarray]:
    """Per-process median times of the subject and the other over ``n`` processes: a log-normal
    process effect shared by both, and a smaller independent effect per contestant and process.
    The subject's true time is ``true_ratio`` times the other's."""
    shared = rng.normal(0.0, process_sd, n)
    subject = BASE_S * true_ratio * np.exp(shared + rng.normal(0.0, own_sd, n))
    other = BASE_S * np.exp(shared + rng.normal(0.0, own_sd, n))
    return subject, other


def _labels(true_ratio: float, n: int = PROCESSES, process_sd: float = PROCESS_SD) -> list[verdict.Verdict]:
    out = []
    for seed in range(TRIALS):
        subject, other = _population(np.random.default_rng(seed), n, true_ratio, process_sd)
        out.append(verdict.speed(_entry(subject), _entry(other), question="simulated"))
    return out


@pytest.mark.parametrize("process_sd", [PROCESS_SD, 0.3])
def test_no_true_difference_names_a_winner_in_at_most_5_percent_of_trials(process_sd):
    found = _labels(1.0, process_sd=process_sd)
    winners = [v for v in found if v.winner is not None]
    assert all(v.label in (verdict.FASTER, verdict.SLOWER, verdict.SMALL) for v in winners)
    assert all(v.label in (verdict.WITHIN, verdict.TIED) for v in found if v.winner is None)
    # practically tied only where the interval holds 1 and lies inside the floor
    assert all(v.interval[0] <= 1 <= v.interval[1] for v in found if v.winner is None)
    assert all(1 / (1 + FLOOR) < v.interval[0] and v.interval[1] < 1 + FLOOR for v in found if v.label == verdict.TIED)
    assert len(winners) / TRIALS <= 0.05, f"{len(winners)} false winners in {TRIALS} trials"
    # the process effect is shared, so it cancels in the ratio: a large one changes nothing
    assert all(v.processes == PROCESSES for v in found)


@pytest.mark.parametrize("true_ratio, label, winner", [(1.2, verdict.SLOWER, "jax"),
                                                       (1 / 1.2, verdict.FASTER, "torch")])
def test_a_true_20_percent_difference_finds_the_right_winner_in_at_least_95_percent(true_ratio, label, winner):
    found = _labels(true_ratio)
    right = [v for v in found if v.winner == winner and v.label == label]
    assert not [v for v in found if v.winner not in (None, winner)], "the wrong side was named the winner"
    assert len(right) / TRIALS >= 0.95, f"power {len(right) / TRIALS:.3f}"
    # the interval covers the true ratio in about 95% of trials
    covered = sum(v.interval[0] <= true_ratio <= v.interval[1] for v in found)
    assert 0.92 <= covered / TRIALS <= 0.98
    assert all(math.isclose(v.factor, max(v.ratio, 1 / v.ratio)) for v in right)


def test_the_interval_narrows_as_processes_are_added():
    counts = (3, 5, 10, 20)
    widths: dict[int, list[float]] = {n: [] for n in counts}
    for seed in range(300):
        subject, other = _population(np.random.default_rng(seed), max(counts), 1.0)
        for n in counts:  # the first n processes of the same simulated population
            lo, hi = stats.ratio_interval(list(subject[:n]), list(other[:n]))["interval"]
            widths[n].append(math.log(hi / lo))
    means = [float(np.mean(widths[n])) for n in counts]
    assert all(a > b for a, b in zip(means, means[1:])), means
    # the 1/sqrt(n) with a shrinking t quantile: 20 processes are well under half as wide as 3
    assert means[-1] < 0.4 * means[0]


def test_the_ratio_interval_is_the_one_sample_t_interval_on_log_ratios():
    subject, other = _population(np.random.default_rng(7), PROCESSES, 1.1)
    found = stats.ratio_interval(list(subject), list(other))
    logs = np.log(subject / other)
    lo, hi = scipy_stats.ttest_1samp(logs, 0.0).confidence_interval(0.95)
    assert found["processes"] == PROCESSES
    assert math.isclose(found["ratio"], math.exp(logs.mean()), rel_tol=1e-12)
    assert np.allclose(found["interval"], (math.exp(lo), math.exp(hi)), rtol=1e-10)
    v = verdict.speed(_entry(subject, None), _entry(other, None), question="q")
    assert v.ratio == pytest.approx(found["ratio"]) and v.interval == pytest.approx(found["interval"])


# ----------------------------------------------------------------------------- refusals


def test_a_bare_number_is_refused_with_what_to_do():
    with pytest.raises(TypeError, match=r"timing\.compare or ladder"):
        verdict.speed(1.0, 2.0, question="bare numbers")
    with pytest.raises(TypeError, match="median_s"):
        verdict.speed({"median_s": 1.0, "processes_s": [1.0, 1.0]}, 2.0, question="one bare number")


def test_an_entry_without_its_median_is_refused():
    with pytest.raises(ValueError, match="median_s"):
        verdict.speed({"processes_s": [1.0, 1.1]}, {"median_s": 1.0, "processes_s": [1.0, 1.1]}, question="q")
    with pytest.raises(ValueError, match="median_s"):
        read({"median_s": None, "processes_s": [1.0]})


@pytest.mark.parametrize("processes_s", [[1e-3], []])
def test_one_process_draws_no_verdict(processes_s):
    slow = {"median_s": 1e-2, "processes_s": [10 * t for t in processes_s], "floor": FLOOR}
    fast = {"median_s": 1e-3, "processes_s": processes_s, "floor": FLOOR}
    v = verdict.speed(slow, fast, question="one process")
    assert v.label == verdict.TOO_FEW == "too few processes"
    assert v.winner is None and v.interval is None and v.processes == len(processes_s)
    assert "one process is one observation" in v.sentence and "no verdict is drawn" in v.sentence
    assert v.factor == pytest.approx(10.0)


# ----------------------------------------------------------------------------- the noise floor


def _about_98_percent() -> tuple[dict, dict]:
    other = np.array([1.00, 1.10, 0.95, 1.05, 1.02]) * BASE_S
    subject = other * 0.98 * np.array([1.000, 1.001, 0.999, 1.0005, 0.9995])  # per-process ratios 0.98 ± 0.1%
    return {"median_s": float(np.median(subject)), "processes_s": list(subject)}, \
        {"median_s": float(np.median(other)), "processes_s": list(other)}


def test_a_ratio_inside_the_noise_floor_whose_interval_excludes_1_is_a_small_real_difference():
    subject, other = _about_98_percent()
    v = verdict.speed({**subject, "floor": 0.05}, {**other, "floor": 0.05}, question="small")
    lo, hi = v.interval
    assert hi < 1.0 and lo > 1 / 1.05  # the interval excludes 1, the ratio lies inside the floor
    assert v.label == verdict.SMALL == "small difference" and v.winner == "torch"
    assert v.factor == pytest.approx(1 / v.ratio)
    assert "a small, real difference" in v.sentence and "which excludes 1" in v.sentence
    assert "noise floor of ±5%" in v.sentence and v.floor == 0.05
    assert not v.sentence.startswith("PyTorch and JAX are practically tied")
    # the floor carried by either side counts
    assert verdict.speed(subject, {**other, "floor": 0.05}, question="small").label == verdict.SMALL


def _around_1(spread: float) -> tuple[dict, dict]:
    """Per-process ratios around 1, from ``1 - spread`` to ``1 + spread``: an interval that holds 1."""
    other = np.array([1.00, 1.10, 0.95, 1.05, 1.02]) * BASE_S
    subject = other * (1 + spread * np.array([-1.0, 0.5, 1.0, -0.5, 0.0]))
    return {"median_s": float(np.median(subject)), "processes_s": list(subject)}, \
        {"median_s": float(np.median(other)), "processes_s": list(other)}


def test_practically_tied_only_when_the_whole_interval_lies_inside_the_floor():
    subject, other = _around_1(0.005)
    v = verdict.speed({**subject, "floor": 0.05}, other, question="tied")
    lo, hi = v.interval
    assert 1 / 1.05 < lo <= 1 <= hi < 1.05
    assert v.label == verdict.TIED == "practically tied" and v.winner is None
    assert "practically tied" in v.sentence and "which lies inside this machine kind's noise floor of ±5%" in v.sentence
    # the same interval reaches past a narrower floor: then it cannot tell them apart, and says so
    narrow = verdict.speed({**subject, "floor": (hi - 1) / 2}, other, question="q")
    assert narrow.label == verdict.WITHIN and narrow.winner is None and "which holds 1" in narrow.sentence
    # a wide interval that holds 1 is within noise, floor or not
    wide_subject, wide_other = _around_1(0.2)
    assert verdict.speed({**wide_subject, "floor": 0.05}, wide_other, question="q").label == verdict.WITHIN


def test_without_a_floor_the_same_numbers_name_a_winner():
    subject, other = _about_98_percent()
    v = verdict.speed({**subject, "floor": None}, {**other, "floor": None}, question="no floor")
    assert v.label == verdict.FASTER and v.winner == "torch"
    assert v.ratio == pytest.approx(0.98, abs=1e-3) and v.factor == pytest.approx(1 / 0.98, abs=1e-3)
    assert "no noise floor measured" in v.test
    # a floor narrower than the difference does not tie it either
    assert verdict.speed({**subject, "floor": 0.01}, other, question="narrow floor").winner == "torch"


# ----------------------------------------------------------------------------- seeds: Welch's test


SEPARATED = ([90.1, 90.3, 89.9, 90.2, 90.0], [85.0, 85.4, 84.8, 85.2, 85.1, 84.9])
OVERLAPPING = ([88.0, 90.5, 89.1, 87.6, 90.2], [88.9, 89.8, 87.9, 90.1, 88.4])


def test_welch_finds_a_winner_and_states_what_the_seeds_could_detect():
    v = verdict.seeds(*SEPARATED, question="accuracy")
    assert v.label == "higher" and v.winner == "torch"
    assert v.detectable is not None and 0 < v.detectable < 5
    assert f"could detect a difference of {words.fmt_number(v.detectable)} points or more" in v.sentence
    assert "which excludes 0" in v.sentence
    # lower is better (a loss): the side with the lower mean wins
    loss = verdict.seeds(*SEPARATED, question="loss", quantity="loss", unit="", higher_is_better=False)
    assert loss.winner == "jax" and loss.label == "higher"


def test_overlapping_seeds_are_within_seed_noise():
    v = verdict.seeds(*OVERLAPPING, question="accuracy")
    assert v.label == "within seed noise" and v.winner is None
    assert v.interval[0] <= 0 <= v.interval[1] and "which holds 0" in v.sentence


@pytest.mark.parametrize("a, b", [SEPARATED, OVERLAPPING, ([1.0, 2.0, 4.0], [3.0, 3.5, 3.1, 2.9, 3.3, 3.05])])
def test_welch_matches_scipy(a, b):
    found = stats.welch(a, b)
    test = scipy_stats.ttest_ind(a, b, equal_var=False)
    lo, hi = test.confidence_interval(0.95)
    assert found["interval"] == pytest.approx((lo, hi), rel=1e-10)
    assert found["df"] == pytest.approx(float(test.df)) and found["pvalue"] == pytest.approx(float(test.pvalue))
    se = math.sqrt(np.var(a, ddof=1) / len(a) + np.var(b, ddof=1) / len(b))
    assert found["se"] == pytest.approx(se)
    df = float(test.df)
    assert found["detectable"] == pytest.approx((scipy_stats.t.ppf(0.975, df) + scipy_stats.t.ppf(0.8, df)) * se)
    assert found["significant"] == (not lo <= 0 <= hi)


def test_seeds_that_agree_to_rounding_have_no_spread_and_raise_no_warning():
    """Accuracies that differ by a float's last bits (0.1 summed in two orders): scipy's t-test would warn of
    precision loss and return noise; welch reports no spread, and a difference only beyond rounding."""
    same = [0.1 + 0.2, 0.3, 0.1 + 0.2]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        tied = stats.welch(same, [0.3, 0.3, 0.3])
        apart = stats.welch(same, [0.4, 0.4, 0.4])
        spread = [0.25, 0.3, 0.35, 0.32]
        one_side = stats.welch(same, spread)
    assert tied["interval"] is None and not tied["significant"]
    assert apart["interval"] is None and apart["significant"]
    # against a constant, Welch's test is the one-sample t-test of the side with spread
    test = scipy_stats.ttest_1samp(spread, 0.3)
    lo, hi = test.confidence_interval(0.95)
    assert one_side["interval"] == pytest.approx((0.3 - hi, 0.3 - lo)) and one_side["df"] == len(spread) - 1
    assert one_side["pvalue"] == pytest.approx(float(test.pvalue)) and not one_side["significant"]
    assert stats.welch(spread, same)["interval"] == pytest.approx((lo - 0.3, hi - 0.3))


# ----------------------------------------------------------------------------- A/A through real processes


@pytest.fixture
def fresh_pool():
    """Workers started inside the test (so they inherit its environment), ended after it."""
    pool.close()
    yield
    pool.close()


def _cheap_and_dear():
    x = np.random.default_rng(0).standard_normal(256)
    y = np.random.default_rng(1).standard_normal(200_000)
    return {"A": functools.partial(np.sum, x), "B": functools.partial(np.sort, y)}  # B: ~1000x A


OPTIONS = dict(repeats=4, warmup=1, min_repeat_s=0.005, processes=2)


def _check_pooled(t: dict[str, Timing]) -> None:
    assert list(t) == ["A", "B"]
    for entry in t.values():
        assert len(entry.processes_s) == OPTIONS["processes"] == len(entry.first_per_process_s)
        assert all(s > 0 for s in entry.processes_s + entry.first_per_process_s)
        assert entry.repeats >= timing.MIN_REPEATS * OPTIONS["processes"]
        assert isinstance(entry.busy, list)


def test_compare_pools_one_observation_per_process_and_aa_races_the_first_function(fresh_pool, monkeypatch):
    def build():  # a builder, built again in each worker (a nested function travels by value)
        import functools

        import numpy as np

        x = np.random.default_rng(0).standard_normal(256)
        y = np.random.default_rng(1).standard_normal(200_000)
        return {"A": functools.partial(np.sum, x), "B": functools.partial(np.sort, y)}

    monkeypatch.delenv(context.ENV["aa"], raising=False)
    plain = timing.compare(build, **OPTIONS)
    _check_pooled(plain)
    assert all(b / a > 20 for a, b in zip(plain["A"].processes_s, plain["B"].processes_s)), plain

    pool.close()  # A/A is read from the environment when a worker starts
    monkeypatch.setenv(context.ENV["aa"], "1")
    assert context.current().aa
    fns = _cheap_and_dear()
    swapped = pool.aa(fns)
    assert list(swapped) == ["A", "B"] and swapped["A"] is fns["A"] and swapped["B"] is fns["A"]
    aa = timing.compare(fns, **OPTIONS)
    _check_pooled(aa)
    # in every process, including the worker, B ran A's function: nothing like the 20x of B's own
    assert all(0.2 < b / a < 5 for a, b in zip(aa["A"].processes_s, aa["B"].processes_s)), aa
    monkeypatch.setenv(context.ENV["aa"], "0")
    assert pool.aa(fns) == fns


# ----------------------------------------------------------------------------- reproduce under load


BUSY = "other processes used 64% of the CPU during 'torch vs jax' (quiet: under 10%)"


def _record(device: str, subject_s, other_s, busy: list[str] | None = None) -> dict:
    v = verdict.speed({"median_s": float(np.median(subject_s)), "processes_s": list(subject_s), "busy": busy or []},
                      {"median_s": float(np.median(other_s)), "processes_s": list(other_s), "busy": busy or []},
                      question="Which is faster at the step?", subject_tool="eager", other_tool="jit")
    return {"profile": "cpu", "provenance": {"device": device, "machine": {"findings": list(busy or [])}},
            "metrics": {"verdicts": [v.to_dict()]}}


def _width(record: dict) -> float:
    lo, hi = record["metrics"]["verdicts"][0]["interval"]
    return math.log(hi / lo)


def test_a_loaded_readers_wider_interval_still_reproduces_the_same_winner():
    other = np.array([1.00, 1.04, 0.97, 1.02, 0.99]) * BASE_S
    published = _record("X", other * 0.80 * np.array([1.00, 1.01, 0.99, 1.005, 0.995]), other)
    # the reader's machine was busy: the same winner, by a noisier margin
    loaded = _record("X", other * 0.85 * np.array([1.00, 1.12, 0.90, 1.08, 0.93]), other, busy=[BUSY])
    assert published["metrics"]["verdicts"][0]["winner"] == loaded["metrics"]["verdicts"][0]["winner"] == "torch"
    assert _width(loaded) > 3 * _width(published)
    assert "machine was busy" in loaded["metrics"]["verdicts"][0]["sentence"]
    (row,) = reproduce.compare(published, loaded)
    assert row.outcome == reproduce.REPRODUCES and row.reproduces and not row.fails and row.same_hardware
    lo, hi = row.combined
    assert lo <= hi and lo >= loaded["metrics"]["verdicts"][0]["interval"][0]
    assert "1 of 1 speed verdicts reproduce" in reproduce.summary("post", [row])


def test_another_winner_does_not_reproduce_and_fails_only_on_the_same_hardware():
    other = np.array([1.00, 1.04, 0.97, 1.02, 0.99]) * BASE_S
    published = _record("X", other * 0.80 * np.array([1.00, 1.01, 0.99, 1.005, 0.995]), other)
    turned = other * 1.25 * np.array([1.00, 1.02, 0.98, 1.01, 0.99])
    (row,) = reproduce.compare(published, _record("X", turned, other, busy=[BUSY]))
    assert row.outcome == reproduce.OTHER_WINNER and row.fails
    assert "FAILED" in reproduce.summary("post", [row])
    (elsewhere,) = reproduce.compare(published, _record("Y", turned, other))
    assert elsewhere.outcome == reproduce.OTHER_WINNER and not elsewhere.fails
    assert "reported, not failed" in reproduce.table([elsewhere])


def test_an_aa_record_counts_its_winners():
    other = np.array([1.00, 1.04, 0.97, 1.02, 0.99]) * BASE_S
    tied = _record("X", other * np.array([1.01, 0.98, 1.02, 0.99, 1.00]), other)
    won = _record("X", other * 0.80, other * np.array([1.0, 1.001, 0.999, 1.0, 1.0]))
    both = {**tied, "metrics": {"verdicts": tied["metrics"]["verdicts"] + won["metrics"]["verdicts"]}}
    text, winners, count = reproduce.aa_table(both)
    assert (winners, count) == (1, 2) and len(text.splitlines()) == 2


def test_check_machine_reports_a_busy_record_and_never_refuses(capsys):
    other = np.array([1.00, 1.04, 0.97, 1.02, 0.99]) * BASE_S
    busy = _record("X", other * 0.85, other, busy=[BUSY, "load average 3.1 on 2 cores"])
    assert running.check_machine(busy, "post") == [BUSY, "load average 3.1 on 2 cores"]
    assert "busy" in capsys.readouterr().out
    assert running.check_machine(_record("X", other * 0.85, other), "post") == []


# ----------------------------------------------------------------------------- the published record


def _timing(name: str, processes_s: list[float]) -> Timing:
    return Timing(name, times_s=[t * f for t in processes_s for f in (0.99, 1.0, 1.01)], number=10,
                         first_s=0.5, processes_s=processes_s, first_per_process_s=[0.5, 0.01, 0.011],
                         floor=0.02, busy=[BUSY])


def test_a_ladder_entry_keeps_every_processs_figure_and_scaled_scales_them():
    t = _timing("torch/eager", [1e-3, 1.1e-3, 0.9e-3])
    entry = ladders.ladder_entry(t)
    assert set(ENTRY_KEYS) <= set(entry) and entry["error"] is None and entry["not_applicable"] is None
    assert entry["processes_s"] == [1e-3, 1.1e-3, 0.9e-3] and entry["first_per_process_s"] == [0.5, 0.01, 0.011]
    assert entry["floor"] == 0.02 and entry["busy"] == [BUSY]
    assert json.loads(json.dumps(entry))["processes_s"] == entry["processes_s"]
    out = ladders.scaled({"torch/eager": entry}, 10.0)["torch/eager"]
    assert out["processes_s"] == pytest.approx([1e-2, 1.1e-2, 0.9e-2])
    assert out["median_s"] == pytest.approx(10 * entry["median_s"])
    assert out["first_per_process_s"] == entry["first_per_process_s"] and out["first_s"] == entry["first_s"]
    assert entry["processes_s"] == [1e-3, 1.1e-3, 0.9e-3]  # the original is left as it was
    # a verdict drawn again from the published entries is the verdict of the timings
    j = _timing("jax/jit", [2e-3, 2.3e-3, 1.7e-3])
    again = verdict.speed(entry, ladders.ladder_entry(j), question="q")
    direct = verdict.speed(t, j, question="q")
    assert (again.label, again.winner) == (direct.label, direct.winner) == (verdict.FASTER, "torch")
    assert again.ratio == pytest.approx(direct.ratio) and again.interval == pytest.approx(direct.interval)
    assert again.sides["torch"]["processes_s"] == t.processes_s
    assert again.sides["jax"]["first_per_process_s"] == j.first_per_process_s
    assert ladders.ladder_entry(error="boom")["processes_s"] is None
