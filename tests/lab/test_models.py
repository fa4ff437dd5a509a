"""The PyTorch and Flax models compute the same functions with the same parameter counts."""

import jax.numpy as jnp
import numpy as np
import pytest
import torch
from flax import nnx

from sidebyside.lab import models

pytestmark = pytest.mark.usefixtures("float32_on_both_sides")


def _images(n=6, seed=0):
    return np.random.default_rng(seed).normal(size=(n, 28, 28)).astype(np.float32)


def _pair(kind, seed=0, **kwargs):
    torch.manual_seed(seed)
    if kind == "mlp":
        return models.TorchMLP(**kwargs), models.FlaxMLP(**kwargs, rngs=nnx.Rngs(seed))
    return models.TorchCNN(**kwargs), models.FlaxCNN(**kwargs, rngs=nnx.Rngs(seed))


def test_mlp_param_count_is_784_128_10():
    torch_model, flax_model = _pair("mlp")
    expected = 784 * 128 + 128 + 128 * 10 + 10
    assert models.param_count(torch_model) == expected
    assert models.param_count(flax_model) == expected


@pytest.mark.slow  # builds the CNN at two widths in both frameworks
@pytest.mark.parametrize("channels,hidden", [((16, 32), 64), ((8, 16), 32)])
def test_cnn_param_counts_match(channels, hidden):
    torch_model, flax_model = _pair("cnn", channels=channels, hidden=hidden)
    c1, c2 = channels
    expected = (9 * c1 + c1) + (9 * c1 * c2 + c2) + (49 * c2 * hidden + hidden) + (hidden * 10 + 10)
    assert models.param_count(torch_model) == expected
    assert models.param_count(flax_model) == expected


@pytest.mark.slow  # builds every model in both frameworks
@pytest.mark.parametrize("kind", ["mlp", "cnn"])
def test_copied_weights_give_the_same_logits(kind):
    torch_model, flax_model = _pair(kind)
    X = _images()
    before = np.asarray(flax_model(jnp.asarray(X)))
    models.copy_torch_to_flax(torch_model, flax_model)
    torch_logits = torch_model(torch.from_numpy(X)).detach().numpy()
    flax_logits = np.asarray(flax_model(jnp.asarray(X)))
    assert torch_logits.shape == (6, 10)
    assert not np.allclose(before, torch_logits, atol=1e-3)  # the copy did something
    np.testing.assert_allclose(flax_logits, torch_logits, atol=2e-5, rtol=1e-5)


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["mlp", "cnn"])
def test_every_input_layout_gives_the_same_logits(kind):
    torch_model, flax_model = _pair(kind)
    X = _images(3)
    t = torch.from_numpy(X)
    ref_t = torch_model(t).detach().numpy()
    for variant in (t.reshape(3, 784), t.unsqueeze(1)):
        np.testing.assert_allclose(torch_model(variant).detach().numpy(), ref_t, atol=1e-6)
    j = jnp.asarray(X)
    ref_f = np.asarray(flax_model(j))
    for variant in (j.reshape(3, 784), j[..., None]):
        np.testing.assert_allclose(np.asarray(flax_model(variant)), ref_f, atol=1e-6)


def test_first_layer_weights_same_orientation_and_meaning():
    torch_model, flax_model = _pair("mlp")
    models.copy_torch_to_flax(torch_model, flax_model)
    W_t = models.first_layer_weights(torch_model)
    W_f = models.first_layer_weights(flax_model)
    assert W_t.shape == W_f.shape == (128, 784)
    np.testing.assert_array_equal(W_t, W_f)
    # Row i is unit i's template over the row-major flattened image.
    X = _images(4)
    b = torch_model.fc1.bias.detach().numpy()
    expected = np.maximum(X.reshape(4, 784) @ W_t.T + b, 0)
    for model in (torch_model, flax_model):
        np.testing.assert_allclose(models.hidden_activations(model, X), expected, atol=1e-5)


def test_hidden_activations_shape_and_relu():
    _, flax_model = _pair("mlp", hidden=32)
    H = models.hidden_activations(flax_model, _images(5))
    assert H.shape == (5, 32)
    assert (H >= 0).all() and (H > 0).any()


def test_first_layer_weights_refuses_a_cnn():
    torch.manual_seed(0)
    torch_model = models.TorchCNN()  # as _pair("cnn") builds it, without the Flax twin this test does not use
    with pytest.raises(ValueError):
        models.first_layer_weights(torch_model)


def test_initialisations_differ_as_documented():
    torch_model = models.TorchMLP()
    flax_default = models.FlaxMLP(rngs=nnx.Rngs(1))
    flax_torch = models.FlaxMLP(rngs=nnx.Rngs(1), torch_init=True)
    bound = 1 / np.sqrt(784)
    # Flax default: zero bias, lecun_normal (truncated normal, std 1/sqrt(fan_in)).
    assert np.all(np.asarray(flax_default.fc1.bias[...]) == 0)
    assert np.std(models.first_layer_weights(flax_default)) == pytest.approx(bound, rel=0.03)
    # PyTorch and Flax(torch_init): U(-bound, bound) weights and biases, std bound/sqrt(3).
    for model in (torch_model, flax_torch):
        W = models.first_layer_weights(model)
        assert np.abs(W).max() <= bound
        assert np.std(W) == pytest.approx(bound / np.sqrt(3), rel=0.03)
    b = np.asarray(flax_torch.fc1.bias[...])
    assert np.abs(b).max() <= bound and np.any(b != 0)
    fc2 = np.asarray(flax_torch.fc2.kernel[...])
    assert np.abs(fc2).max() <= 1 / np.sqrt(128) and np.abs(fc2).max() > 0.9 / np.sqrt(128)
