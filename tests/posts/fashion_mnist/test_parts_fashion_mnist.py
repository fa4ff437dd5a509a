"""fashion-mnist-pytorch-vs-flax made in parts (sidebyside.posts.fashion_mnist.measure through a
sidebyside.run.checkpoints.Checkpoints, as notebooks/01_fashion_mnist.py calls them): at tiny
sizes, a run of the original program, a seed's real training in each framework and two speed
ladders; a second run against the same checkpoint file measures nothing again and gets equal
values back; a budget that a part cannot fit stops the run before that part, and the next run
measures only what is left."""

from __future__ import annotations

import functools
import json

import numpy as np
import pytest

from sidebyside.lab import timing, training
from sidebyside.posts.fashion_mnist import measure, report
from sidebyside.run import checkpoints
from sidebyside.run.checkpoints import Checkpoints

SEEDS = [0]
FRAMEWORKS = ("torch", "flax")
PRECISIONS = ["float32", "bfloat16"]
TOOLS = ["numpy/sum", "numpy/dot", "torch/cuda-graph"]
ORIGINAL = "original/torch_fixed_normalisation"
NAMES = [f"{ORIGINAL}/0", "accuracy/mlp/torch/0", "accuracy/mlp/flax/0", "speed/mlp/float32",
         "speed/mlp/bfloat16"]


@pytest.fixture(scope="module")
def arrays():
    """A tiny FashionMNIST-shaped data set: 64 training and 40 test images, every class in both."""
    rng = np.random.default_rng(0)
    return training.Arrays(X_train=rng.standard_normal((64, 28, 28)).astype(np.float32),
                           y_train=np.arange(64, dtype=np.int64) % 10,
                           X_test=rng.standard_normal((40, 28, 28)).astype(np.float32),
                           y_test=np.arange(40, dtype=np.int64) % 10)


def _tiny_model(fw, seed):
    """A 784-8-10 MLP in PyTorch (seeded) or Flax."""
    if fw == "torch":
        import torch

        torch.manual_seed(seed)
        return torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(784, 8), torch.nn.ReLU(),
                                   torch.nn.Linear(8, 10))
    from flax import nnx

    class Tiny(nnx.Module):
        def __init__(self, rngs):
            self.fc1, self.fc2 = nnx.Linear(784, 8, rngs=rngs), nnx.Linear(8, 10, rngs=rngs)

        def __call__(self, x):
            return self.fc2(nnx.relu(self.fc1(x.reshape(x.shape[0], -1))))

    return Tiny(nnx.Rngs(seed))


class Counted:
    """What each run measured: the original program's runs, the trainings, and every rung built,
    called and counted for graph breaks."""

    def __init__(self, arrays):
        self.arrays = arrays
        self.counts: dict[str, int] = {}

    def count(self, what):
        self.counts[what] = self.counts.get(what, 0) + 1

    def original(self, seed):
        self.count("original")
        return float(np.random.default_rng(seed).uniform(0.5, 0.8))

    def train_seed(self, kind, fw, seed):
        """As the notebook's train_seed: one seed's training in one framework, one tiny epoch."""
        self.count(f"train/{fw}")
        config = training.TrainConfig(batch_size=16, optimizer="adam", schedule="cosine",
                                      warmup_epochs=0.2, seed=seed, num_epochs=1, lr=2e-3)
        trainer = training.train_torch if fw == "torch" else training.train_flax
        loop = "device" if fw == "torch" else "scan"
        train = functools.partial(trainer, _tiny_model(fw, seed), self.arrays, config, loop=loop)
        predict = training.predict_torch if fw == "torch" else training.predict_flax
        return measure.seed_run(train, predict, self.arrays.X_test, self.arrays.y_test)

    def build(self, precision, name):
        """One rung, as the notebook's build_rung: a callable, or why it cannot run here."""
        self.count("build")
        if name == "torch/cuda-graph":
            return timing.NotApplicable.cuda_graphs("cpu")
        x = np.linspace(0.0, 1.0, 256, dtype=np.float32 if precision == "float32" else np.float16)

        def call():
            self.count(f"call/{name}")
            return x.sum() if name == "numpy/sum" else x @ x

        return call

    def breaks(self, mode):
        self.count("breaks")
        return 0


def _run(path, counted, **options):
    """The notebook's part-wrapped calls, in its order: the original program's variants, each
    seed's training per model and framework, then the speed ladders."""
    parts = Checkpoints(path, stamp={"device": "test", "num_train": 64}, commit="abc", **options)
    original = {seed: parts(f"{ORIGINAL}/{seed}", counted.original, seed) for seed in SEEDS}
    runs = {(fw, seed): parts(f"accuracy/mlp/{fw}/{seed}", counted.train_seed, "mlp", fw, seed,
                              decode=measure.SeedRun.saved)
            for seed in SEEDS for fw in FRAMEWORKS}
    speed = {}
    for precision in PRECISIONS:
        build = functools.partial(counted.build, precision)
        measured = functools.partial(measure.ladder, build, counted.breaks)
        speed[precision] = parts(f"speed/mlp/{precision}", measured, TOOLS, needs=report.NEEDS,
                                 repeats=3, steps_per_call=5, steps_per_epoch=50,
                                 precision=precision, processes=1)
    return parts, original, runs, speed


@pytest.fixture(scope="module")
def plain(arrays):
    """A run with no checkpoint file, first: a part's key holds the modules and packages imported
    when its Checkpoints is made, which the notebook makes after its imports; after this run every
    test's runs are made after the same imports. Returns what it measured, its parts and values."""
    counted = Counted(arrays)
    return counted, _run(None, counted)


def _accuracy(runs):
    return report.accuracy_record({("mlp", fw): [runs[fw, 0].history] for fw in FRAMEWORKS}, SEEDS)


def test_a_second_run_reads_every_part_back_with_equal_values(tmp_path, arrays, plain):
    path = tmp_path / "fashion.json"
    first, second = Counted(arrays), Counted(arrays)
    parts, original, runs, speed = _run(path, first)
    assert first.counts["original"] == 1
    assert first.counts["train/torch"] == first.counts["train/flax"] == 1
    assert first.counts["build"] == 2 * len(TOOLS) and first.counts["call/numpy/sum"] > 3
    assert list(parts.log) == NAMES
    assert all(p["measured"] == "this run" for p in parts.log.values())
    assert speed["float32"]["ladder"]["torch/cuda-graph"]["not_applicable"]
    assert speed["float32"]["per_call_ladder"]["numpy/sum"]["median_s"] > 0
    assert len(runs["torch", 0].history.test_accuracy) == 1 and len(runs["flax", 0].per_class) == 10
    assert set(json.loads(path.read_text())) == set(NAMES)

    again, original2, runs2, speed2 = _run(path, second)
    assert second.counts == {}, f"the second run measured {second.counts} again"
    assert all(p["measured"] == "earlier run" and p["commit"] == "abc" for p in again.log.values())
    assert original2 == original and runs2 == runs and speed2 == speed
    assert isinstance(runs2["flax", 0], measure.SeedRun) and _accuracy(runs2) == _accuracy(runs)
    assert "5 of its 5 parts were read back" in checkpoints.describe_parts(again.log)


def test_a_budget_a_part_cannot_fit_stops_before_it_and_the_next_run_resumes(tmp_path, arrays,
                                                                              plain):
    path = tmp_path / "fashion.json"
    stopped = Counted(arrays)
    with pytest.raises(checkpoints.BudgetSpent, match="speed/mlp/float32"):
        _run(path, stopped, budget_s=60, estimates={"speed/*": 1000.0})
    assert "build" not in stopped.counts and stopped.counts["original"] == 1
    assert set(json.loads(path.read_text())) == set(NAMES[:3])
    resumed = Counted(arrays)
    parts, *_ = _run(path, resumed)
    assert "original" not in resumed.counts and "train/torch" not in resumed.counts
    assert resumed.counts["build"] == 2 * len(TOOLS)
    assert [n for n, p in parts.log.items() if p["measured"] == "this run"] == NAMES[3:]


def test_without_a_checkpoint_file_every_part_is_measured_and_none_is_logged(plain):
    counted, (parts, original, runs, speed) = plain
    assert parts.log == {} and checkpoints.describe_parts(parts.log) == ""
    assert counted.counts["original"] == 1 and counted.counts["build"] == 2 * len(TOOLS)
    assert counted.counts["train/torch"] == counted.counts["train/flax"] == 1
    assert isinstance(runs["torch", 0], measure.SeedRun)
    assert set(speed) == set(PRECISIONS) and speed["bfloat16"]["precision"] == "bfloat16"


def test_per_class_accuracy_and_a_ladder_without_tools_say_what_is_wrong():
    assert measure.per_class_accuracy([0, 1, 1, 2], [0, 1, 2, 2], classes=3) == [1.0, 1.0, 0.5]
    with pytest.raises(ValueError, match="one shape"):
        measure.per_class_accuracy([0, 1], [0, 1, 2])
    with pytest.raises(ValueError, match="at least one tool"):
        measure.ladder(lambda name: None, None, [], needs={}, repeats=3, steps_per_call=1,
                       steps_per_epoch=1)
