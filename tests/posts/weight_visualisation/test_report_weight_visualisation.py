"""Tests of sidebyside.posts.weight_visualisation.report: the record built from synthetic
runs, and the conclusion's claims, each changing when the numbers behind it do.

The synthetic networks are small (16 first-layer units): initial noise (wider for
Flax's default initialiser) plus a smooth learned pattern, so the roughness claims
have something real to measure. No training, no notebook."""

from __future__ import annotations

import copy
import json

import numpy as np
import pytest

from sidebyside.lab import analysis, words
from sidebyside.posts.weight_visualisation import report as wv

SCALES = {"torch": 0.036, "flax": 0.062, "flax_torch_init": 0.036, "flax_same_init": 0.036}  # initial noise
ACCURACY = {"torch": 0.876, "flax": 0.879, "flax_torch_init": 0.8768, "flax_same_init": 0.877}


def smooth(rng, units):
    y, x = np.mgrid[0:28, 0:28] / 27
    freqs = rng.uniform(1, 3, size=(units, 2))
    return np.stack([np.sin(np.pi * a * x) * np.cos(np.pi * b * y) for a, b in freqs]).reshape(units, 784)


def make_runs(num_seeds=3, units=16):
    runs = {}
    for index, (variant, scale) in enumerate(SCALES.items()):
        runs[variant] = []
        for seed in range(1 if variant == "flax_same_init" else num_seeds):
            rng = np.random.default_rng([seed, index])
            W0 = scale * rng.standard_normal((units, 784))
            V0 = 0.1 * rng.standard_normal((10, units))
            runs[variant].append({"seed": seed, "accuracy": ACCURACY[variant] + 0.001 * (seed - 1), "weights": {
                0: {"fc1": W0, "fc2": V0}, 2: {"fc1": W0 + 0.05 * smooth(rng, units), "fc2": V0 + 0.01}}})
    return runs


def make_cka(networks, trained=0.98, spread=0.005, untrained=0.86):
    rng = np.random.default_rng(7)
    k = len(networks)
    end, start = np.eye(k), np.eye(k)
    for i in range(k):
        for j in range(i + 1, k):
            end[i, j] = end[j, i] = trained + spread * rng.uniform(-1, 1)
            start[i, j] = start[j, i] = untrained
    return end, start


def summarise(num_seeds=3):
    runs = make_runs(num_seeds)
    networks = [(variant, r["seed"]) for variant, rs in runs.items() for r in rs]
    cka = wv.cka_values(*make_cka(networks), networks)
    return wv.summarise(runs, cka, param_counts={"torch": 101770, "flax": 101770},
                        graph_equations={"forward": 8, "gradient": 51}, num_images=1000, num_epochs=2,
                        num_train=6000, num_steps=94, device="a test CPU")


@pytest.fixture(scope="module")
def base():
    return summarise()


@pytest.fixture
def record(base):
    return copy.deepcopy(base)


def set_tv(record, variant, values):
    """Move one variant's final-template roughness, keeping the record consistent."""
    record["per_seed"]["total_variation"][variant] = list(values)
    spread = {"mean": float(np.mean(values)), "std": float(np.std(values, ddof=1))}
    if variant in record["total_variation"]:
        record["total_variation"][variant] = spread
    else:
        record["total_variation_details"][variant] = spread


def set_cka(record, key, values):
    record["cka_pairs"]["trained"][key] = list(values)
    group = "cka" if key in record["cka"] else "cka_controls"
    record[group][key] = float(np.mean(values))


# ----------------------------------------------------------------------------- the record


def test_record_keeps_the_keys_the_site_reads_and_is_json(base):
    assert {"cka", "cka_controls", "total_variation", "total_variation_details", "param_counts", "accuracy",
            "num_seeds", "num_epochs", "num_train", "verdicts"} <= set(base)
    assert set(base["cka"]) == {"torch_vs_flax", "torch_vs_torch", "flax_vs_flax"}
    assert set(base["total_variation"]) == {"torch", "flax"} and set(base["total_variation"]["torch"]) == {"mean", "std"}
    assert base["cka_controls"]["num_images"] == 1000 and base["num_seeds"] == 3
    json.dumps(base, allow_nan=False)  # what save_results writes


def test_record_numbers_come_from_the_runs(base):
    runs = make_runs()
    tv = [analysis.weight_change(r["weights"][0]["fc1"], r["weights"][2]["fc1"], (28, 28))["tv_end"]
          for r in runs["flax"]]
    assert base["per_seed"]["total_variation"]["flax"] == pytest.approx(tv)
    assert base["total_variation"]["flax"]["mean"] == pytest.approx(np.mean(tv))
    assert base["total_variation"]["flax"]["std"] == pytest.approx(np.std(tv, ddof=1))
    assert base["accuracy"]["flax"] == pytest.approx(ACCURACY["flax"])
    assert base["init_std_ratio"] == pytest.approx(SCALES["flax"] / SCALES["torch"], rel=0.05)
    assert base["cka"]["torch_vs_torch"] == pytest.approx(np.mean(base["cka_pairs"]["trained"]["torch_vs_torch"]))
    assert len(base["cka_pairs"]["trained"]["torch_vs_flax"]) == 6  # 3 x 3 pairs, seeds differ
    assert base["cka_controls"]["untrained_torch_vs_flax"] == pytest.approx(0.86)


def test_the_verdict_box_uses_the_same_test_as_the_prose():
    five = summarise(num_seeds=5)
    headline, control, acc_box = five["verdicts"]
    # The seed's claim (default initialisers) heads the box; the same-initialiser control follows.
    assert headline["question"].startswith("With their default initialisers, are Flax's final first-layer")
    assert headline["label"] == wv.roughness(five, "flax").label
    assert control["test"].startswith("Welch's t-test")
    assert control["label"] == wv.roughness(five, "flax_torch_init").label == "within seed noise"
    assert acc_box["label"] == wv.accuracy(five, "flax").label
    assert headline["scale"]["device"] == five["device"] and headline["scale"]["precision"] == "float32"


def test_the_verdict_box_draws_no_seed_verdict_from_fewer_than_five_seeds(base):
    assert base["num_seeds"] == 3
    assert {v["label"] for v in base["verdicts"]} == {"too few seeds"}
    assert all(v["winner"] is None and "fewer than the 5 seeds" in v["sentence"] for v in base["verdicts"])


def test_summarise_names_a_missing_variant():
    runs = make_runs()
    del runs["flax_same_init"]
    with pytest.raises(ValueError, match="flax_same_init"):
        wv.summarise(runs, {"trained": {}, "untrained": {}}, param_counts={}, graph_equations={}, num_images=1,
                     num_epochs=2, num_train=1, num_steps=1, device="x")


def test_tables(base):
    results = wv.results_table(base)
    assert list(results.index) == list(wv.VARIANTS.values())
    assert results.loc["Flax (default init)", "TV of final templates"].startswith(
        f"{base['total_variation']['flax']['mean']:.3f} ± ")
    assert results.loc["Flax (PyTorch's initial weights)", "TV of final templates"] == ""  # one seed: not compared
    cka = wv.cka_table(base["cka_pairs"])
    assert cka.loc["PyTorch vs PyTorch (seeds)", "pairs"] == 3
    runs = make_runs()
    table = wv.weight_table(wv.weight_statistics(runs, 2))
    assert table.loc[("Flax (default init)", "fc1"), "seeds"] == 3
    assert table.loc[("Flax (default init)", "fc2"), "TV at end"] == ""  # fc2 is no image


# ----------------------------------------------------------------------------- the claims


def test_base_conclusion_answers_seed_and_initialiser(base):
    text = wv.conclusion(base)
    assert "The seed and the initialiser; not the framework." in text
    assert "Flax's final templates are rougher than PyTorch's" in text
    assert "so the original post saw a real difference" in text
    assert "Give Flax PyTorch's initialiser" in text and "within seed noise" in text
    assert "`lecun_normal` starts with 1.7" in text
    assert f"linear CKA {base['cka']['torch_vs_flax']:.3f} on 1000 held-out images" in text
    assert "8 equations for the forward pass, 51 for the gradient" in text
    assert "3 seeds per variant, 6000 training images and 2 epochs, on a test CPU" in text
    assert "z-score" not in text and "seed standard deviations" not in text  # one seed-noise rule


def test_roughness_flips_with_the_numbers(record):
    torch_tv = record["per_seed"]["total_variation"]["torch"]
    # Flax's templates (default init) as smooth as PyTorch's: "no rougher", and no initial-noise explanation.
    set_tv(record, "flax", [t + 0.001 for t in torch_tv])
    text = wv.look_of_the_weights(record)
    assert "no rougher than PyTorch's" in text and "did not wash out" not in text
    # Smoother than PyTorch's: the opposite of the original's impression.
    set_tv(record, "flax", [t - 0.2 for t in torch_tv])
    assert "smoother than PyTorch's" in wv.look_of_the_weights(record)
    assert "the opposite of the original post's impression" in wv.look_of_the_weights(record)


def test_initialiser_no_longer_explains_when_the_control_differs(record):
    assert wv.headline(record).startswith("The seed and the initialiser")
    torch_tv = record["per_seed"]["total_variation"]["torch"]
    set_tv(record, "flax_torch_init", [t + 0.1 for t in torch_tv])
    v = wv.roughness(record, "flax_torch_init")
    assert v.label != "within seed noise"
    assert wv.headline(record).startswith("For what the networks compute, the seed")
    text = wv.look_of_the_weights(record)
    assert f"becomes {words.fmt_signed(0.1)}, beyond two standard errors" in text
    assert "did not wash out" not in text


def test_seed_noise_is_welchs_interval_with_the_t_quantile(record):
    # Just inside and just outside Welch's 95% interval: the t quantile for its degrees of freedom
    # (a shifted copy has the same variance: 2(n - 1) of them), not two standard errors.
    from scipy import stats

    torch_tv = np.array(record["per_seed"]["total_variation"]["torch"])
    se = np.sqrt(2 * torch_tv.var(ddof=1) / len(torch_tv))
    half = stats.t.ppf(0.975, 2 * (len(torch_tv) - 1)) * se
    assert half > 2 * se  # the t quantile is wider than the normal's at a handful of seeds
    set_tv(record, "flax_torch_init", torch_tv + 0.95 * half)
    assert wv.roughness(record, "flax_torch_init").label == "within seed noise"
    set_tv(record, "flax_torch_init", torch_tv + 1.05 * half)
    assert wv.roughness(record, "flax_torch_init").label != "within seed noise"


def test_cka_like_within_and_the_headline(record):
    assert wv.cka_like_within(record)
    within = record["cka_pairs"]["trained"]["torch_vs_torch"] + record["cka_pairs"]["trained"]["flax_vs_flax"]
    set_cka(record, "torch_vs_flax", [min(within) - 2 * wv.CKA_MARGIN] * 6)
    assert not wv.cka_like_within(record)
    assert wv.headline(record) == "Here the framework seems to matter; see the details below."
    assert "unlike two networks of one framework" in wv.what_the_networks_compute(record)
    set_cka(record, "torch_vs_flax", [min(within) - 0.5 * wv.CKA_MARGIN] * 6)  # inside the margin
    assert wv.cka_like_within(record)


def test_closer_than_any_two_seeds(record):
    highest = max(max(v) for k, v in record["cka_pairs"]["trained"].items() if k != "torch_vs_flax_same_init")
    set_cka(record, "torch_vs_flax_same_init", [highest + 0.001])
    assert wv.closer_than_any_two_seeds(record)
    assert "end closer than any two seeds" in wv.what_the_networks_compute(record)
    set_cka(record, "torch_vs_flax_same_init", [highest - 0.001])
    assert not wv.closer_than_any_two_seeds(record)
    assert "end about as close as two seeds" in wv.what_the_networks_compute(record)


def test_batches_matter(record):
    different = record["cka_pairs"]["trained"]["torch_vs_flax_torch_init"]
    set_cka(record, "torch_vs_flax_torch_init_same_batches", [max(different) + 0.002] * 3)
    assert wv.batches_matter(record)
    assert "part of what \"the seed\" decides is the order of the batches" in wv.what_the_networks_compute(record)
    set_cka(record, "torch_vs_flax_torch_init_same_batches", [min(different)] * 3)
    assert not wv.batches_matter(record)
    assert "Sharing the batch order (not the initial draw) changes little" in wv.what_the_networks_compute(record)


def test_accuracy_claim_follows_the_seed_verdict(record):
    text = wv.accuracy_claim(record)
    assert "Flax's default networks score 87.90% against PyTorch's 87.60%" in text
    assert "a difference of +0.3 points, beyond two standard errors" in text
    record["per_seed"]["accuracy"]["flax"] = [a + 0.0001 for a in record["per_seed"]["accuracy"]["torch"]]
    record["accuracy"]["flax"] = float(np.mean(record["per_seed"]["accuracy"]["flax"]))
    text = wv.accuracy_claim(record)
    assert "Flax's default networks score 87.61% against PyTorch's 87.60%" in text
    assert "a difference of +0.01 points, inside two standard errors" in text and "within seed noise" in text


def test_one_seed_is_a_single_observation():
    record = summarise(num_seeds=1)
    text = wv.conclusion(record)
    assert "1 seed per variant" in text and "single observation" in text
    assert "no two networks of one framework to compare" in text
    assert not wv.cka_like_within(record)
    json.dumps(record, allow_nan=False)


def test_every_verdict_the_post_builds_names_its_race(framed_verdicts):
    """Each verdict names its race (roughness or accuracy, and which Flax variant), never its question's
    words, so that a reader's run is matched with the published one by id; the races differ within a run."""
    metrics = summarise(num_seeds=5)
    wv.conclusion(metrics)
    assert framed_verdicts and not [v.question for v in framed_verdicts if not v.race]
    assert [v["race"] for v in metrics["verdicts"]] == ["roughness/flax", "roughness/flax_torch_init", "accuracy/flax"]
