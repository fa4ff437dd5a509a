"""Training in PyTorch and in Flax is the same computation: same batches, same
learning rates, same optimiser updates. Started from the same weights, both
frameworks follow the same loss curve up to float32 rounding."""

import jax.numpy as jnp
import numpy as np
import pytest
import torch
from flax import nnx

from sidebyside.lab import data, models, training

pytestmark = pytest.mark.usefixtures("float32_on_both_sides")


@pytest.fixture(scope="module")
def arrays():
    return training.prepare(data.load(), num_train=640, num_test=500)


def _pair(kind="mlp"):
    torch.manual_seed(0)
    if kind == "mlp":
        torch_model, flax_model = models.TorchMLP(hidden=32), models.FlaxMLP(hidden=32, rngs=nnx.Rngs(0))
    else:
        torch_model = models.TorchCNN(channels=(4, 8), hidden=16)
        flax_model = models.FlaxCNN(channels=(4, 8), hidden=16, rngs=nnx.Rngs(0))
    return torch_model, models.copy_torch_to_flax(torch_model, flax_model)


CONFIGS = {
    "sgd+wd": training.TrainConfig(num_epochs=2, batch_size=64, lr=0.02, optimizer="sgd", weight_decay=1e-3),
    "adamw+cosine": training.TrainConfig(num_epochs=2, batch_size=64, lr=2e-3, optimizer="adam",
                                         schedule="cosine", warmup_epochs=0.5, weight_decay=1e-2, seed=3),
}


@pytest.mark.slow  # trains in both frameworks
@pytest.mark.parametrize("name", list(CONFIGS))
def test_mlp_training_matches_across_frameworks(arrays, name):
    config = CONFIGS[name]
    torch_model, flax_model = _pair("mlp")
    _, torch_history = training.train_torch(torch_model, arrays, config, progress=False)
    _, flax_history = training.train_flax(flax_model, arrays, config, progress=False)
    assert torch_history.train_loss[1] < torch_history.train_loss[0]  # it learns
    np.testing.assert_allclose(flax_history.train_loss, torch_history.train_loss, rtol=1e-4)
    np.testing.assert_allclose(models.first_layer_weights(flax_model), models.first_layer_weights(torch_model),
                               atol=1e-4)
    assert abs(flax_history.test_accuracy[-1] - torch_history.test_accuracy[-1]) <= 0.004  # <= 2 of 500


@pytest.mark.slow  # trains the CNN in both frameworks
def test_cnn_training_matches_across_frameworks(arrays):
    config = training.TrainConfig(num_epochs=1, batch_size=64, lr=2e-3, optimizer="adam")
    torch_model, flax_model = _pair("cnn")
    _, torch_history = training.train_torch(torch_model, arrays, config, progress=False)
    _, flax_history = training.train_flax(flax_model, arrays, config, loop="device", progress=False)
    np.testing.assert_allclose(flax_history.train_loss, torch_history.train_loss, rtol=1e-4)
    X = arrays.X_test[:50]
    np.testing.assert_allclose(np.asarray(flax_model(jnp.asarray(X))),
                               torch_model(torch.from_numpy(X)).detach().numpy(), atol=1e-3)


@pytest.mark.slow
def test_bf16_training_matches_across_frameworks_and_learns(arrays):
    # The same mixed-precision policy on both sides (bf16 network, float32 loss, master weights and Adam
    # state): two epochs from the same weights stay within four bf16 unit roundoffs (4 * 2**-8, see
    # tests/test_ladder.py) of each other, while each side's rounding differs (accumulation order).
    config = CONFIGS["adamw+cosine"]
    torch_model, flax_model = _pair("mlp")
    _, torch_history = training.train_torch(torch_model, arrays, config, progress=False, precision="bfloat16")
    _, flax_history = training.train_flax(flax_model, arrays, config, progress=False, precision="bfloat16")
    assert torch_history.train_loss[1] < torch_history.train_loss[0]
    np.testing.assert_allclose(flax_history.train_loss, torch_history.train_loss, rtol=4 * 2.0**-8)
    assert abs(flax_history.test_accuracy[-1] - torch_history.test_accuracy[-1]) <= 0.02  # <= 10 of 500
    assert all(p.dtype == torch.float32 for p in torch_model.parameters())


@pytest.mark.slow
def test_loop_styles_compute_the_same_thing(arrays):
    config = CONFIGS["sgd+wd"]
    torch_model, flax_model = _pair("mlp")
    reference = {k: v.clone() for k, v in torch_model.state_dict().items()}
    _, device_history = training.train_torch(torch_model, arrays, config, loop="device", progress=False)
    torch_model.load_state_dict(reference)
    _, loader_history = training.train_torch(torch_model, arrays, config, loop="dataloader", progress=False)
    np.testing.assert_allclose(loader_history.train_loss, device_history.train_loss, rtol=1e-6)
    losses = {}
    for loop in training.FLAX_LOOPS:
        _, fresh = _pair("mlp")
        _, history = training.train_flax(fresh, arrays, config, loop=loop, progress=False)
        losses[loop] = history.train_loss
    for loop in training.FLAX_LOOPS:
        np.testing.assert_allclose(losses[loop], device_history.train_loss, rtol=1e-4)


@pytest.mark.slow
def test_on_epoch_end_sees_initial_and_every_epoch(arrays):
    config = training.TrainConfig(num_epochs=2, batch_size=128, lr=0.05)
    for kind_train in ("torch", "flax"):
        torch_model, flax_model = _pair("mlp")
        snapshots = {}

        def record(epoch, model):
            snapshots[epoch] = models.first_layer_weights(model).copy()

        if kind_train == "torch":
            initial = models.first_layer_weights(torch_model).copy()
            model, history = training.train_torch(torch_model, arrays, config, on_epoch_end=record, progress=False)
        else:
            initial = models.first_layer_weights(flax_model).copy()
            model, history = training.train_flax(flax_model, arrays, config, on_epoch_end=record, progress=False)
        assert sorted(snapshots) == [0, 1, 2]
        np.testing.assert_array_equal(snapshots[0], initial)
        assert not np.allclose(snapshots[1], snapshots[0])
        np.testing.assert_array_equal(snapshots[2], models.first_layer_weights(model))
        assert len(history.train_loss) == len(history.test_accuracy) == len(history.epoch_seconds) == 2
        assert list(history.to_frame().index) == [1, 2]


@pytest.mark.slow
def test_evaluate_agrees_with_predict_and_beats_chance_after_training(arrays):
    config = training.TrainConfig(num_epochs=2, batch_size=32, lr=2e-3, optimizer="adam")
    torch_model, flax_model = _pair("mlp")
    training.train_torch(torch_model, arrays, config, progress=False)
    training.train_flax(flax_model, arrays, config, progress=False)
    for evaluate, predict, model in ((training.evaluate_torch, training.predict_torch, torch_model),
                                     (training.evaluate_flax, training.predict_flax, flax_model)):
        accuracy = evaluate(model, arrays.X_test, arrays.y_test, batch_size=128)  # a ragged last batch
        predictions = predict(model, arrays.X_test)
        assert predictions.shape == (500,)
        assert accuracy == pytest.approx(np.mean(predictions == arrays.y_test))
        assert accuracy > 0.6


def test_learning_rate_schedules():
    config = training.TrainConfig(num_epochs=4, lr=0.1, schedule="cosine", warmup_epochs=1)
    steps = np.arange(40)
    lr_np = np.array([training.learning_rate(s, config, 10) for s in steps])
    lr_jnp = np.array(training.learning_rate(jnp.asarray(steps), config, 10, xp=jnp))
    np.testing.assert_allclose(lr_jnp, lr_np, rtol=1e-5, atol=1e-8)
    assert lr_np[0] == pytest.approx(0.01)  # warm-up from lr/steps
    assert lr_np.argmax() == 9 and lr_np.max() == pytest.approx(0.1)
    assert np.all(np.diff(lr_np[10:]) < 0) and lr_np[-1] < 0.001
    constant = training.TrainConfig(lr=0.3)
    assert training.learning_rate(123, constant, 10) == pytest.approx(0.3)


def test_batches_follow_the_shared_permutation(arrays):
    config = training.TrainConfig(batch_size=64, seed=7)
    n = len(arrays.X_train)
    batches = training.index_batches(n, config, epoch=1)
    assert batches.shape == (n // 64, 64)
    X_batches = list(data.iterate_batches(arrays.X_train, arrays.y_train, 64, seed=7, epoch=1, drop_last=True))
    for index, (xb, _) in zip(batches, X_batches):
        np.testing.assert_array_equal(arrays.X_train[index], xb)
    assert not np.array_equal(batches, training.index_batches(n, config, epoch=2))


def test_prepare_normalisations():
    ds = data.load()
    default = training.prepare(ds, num_train=1000, num_test=100)
    mismatched = training.prepare(ds, num_train=1000, num_test=100, train_norm=(0, 1), test_norm=(0.5, 0.5))
    assert default.X_train.dtype == np.float32 and default.X_train.shape == (1000, 28, 28)
    assert abs(default.X_train.mean()) < 0.1
    assert mismatched.X_train.min() == 0 and mismatched.X_train.max() == 1
    assert mismatched.X_test.min() == -1 and mismatched.X_test.max() == 1


def test_bad_configs_are_refused(arrays):
    with pytest.raises(ValueError):
        training.TrainConfig(optimizer="rmsprop")
    with pytest.raises(ValueError):
        training.TrainConfig(schedule="step")
    with pytest.raises(ValueError):
        training.FlaxTrainer(_pair()[1], arrays, training.TrainConfig(drop_last=False), loop="scan")
