"""``studies/path_ablation.py``: removing a path's term is zeroing its last map, the network
is unchanged outside the block, and a run's measurement counts its predictions right."""

import math

import pytest
import torch

from laplace_equivariance import models
from laplace_equivariance.app.runs import load_trained
from studies import path_ablation


def test_removing_a_path_computes_what_zeroing_its_output_map_does():
    torch.manual_seed(0)
    model = models.build("f-fc+conv", (1, 32, 32), 10, alpha=1).double().eval()
    x = torch.randn(6, 1, 32, 32, dtype=torch.float64)
    before = model(x)
    layer = model.relaxed_layers[2]
    with path_ablation.without_path([layer], "fc"):
        removed = model(x)
    assert torch.equal(model(x), before)  # the hooks are gone after the block
    with torch.no_grad():
        for p in layer.path("fc").output_map.parameters():
            p.zero_()
    torch.testing.assert_close(removed, model(x), rtol=1e-12, atol=1e-12)
    assert not torch.allclose(removed, before)


def test_the_noise_control_adds_noise_as_large_as_the_path_term_at_every_unit():
    """Layer 3's output moves by ``(z * rms_b(fc term)) / sqrt(K)``: over 4,000 images the
    moved output's mean square per unit is the term's (within 10 %: the relative standard
    error of a mean of 4,000 squared Gaussians is sqrt(2 / 4,000) = 2.2 %, 4.5 standard errors);
    the same seed repeats it, and the network is unchanged after the block."""
    torch.manual_seed(0)
    model = models.build("f-fc+conv", (1, 32, 32), 10, alpha=1).double().eval()
    layer = model.relaxed_layers[2]
    x = torch.randn(4000, 1, 32, 32, dtype=torch.float64)
    captured = {}

    def capture(module, inputs, output):
        captured.setdefault("term", module.path_outputs(inputs[0])["fc"])
        captured.setdefault("output", output)

    hook = layer.register_forward_hook(capture)
    with torch.no_grad():
        before = model(x)
    hook.remove()
    outputs = []
    for _ in range(2):
        generator = torch.Generator().manual_seed(0)
        with path_ablation.with_noise_of_path_size([layer], "fc", generator):
            hook = layer.register_forward_hook(lambda m, i, o: outputs.append(o))
            with torch.no_grad():
                model(x)
            hook.remove()
    torch.testing.assert_close(outputs[0], outputs[1], rtol=0, atol=0)
    moved = (outputs[0] - captured["output"]) * math.sqrt(len(layer.path_names))
    ratio = moved.square().mean(0) / captured["term"].square().mean(0)
    assert (ratio - 1).abs().max() < 0.1
    with torch.no_grad():
        assert torch.equal(model(x), before)


def test_an_unknown_path_is_refused_before_any_hook():
    model = models.build("conv", (1, 32, 32), 10, alpha=1)
    with pytest.raises(KeyError):
        with path_ablation.without_path(model.relaxed_layers, "fc"):
            pass
    assert not any(layer._forward_hooks for layer in model.relaxed_layers)


def test_a_runs_accuracies_count_its_predictions_with_and_without_the_path(mixed_quadrant_run):
    measured = path_ablation.measure(mixed_quadrant_run, "fc", test_images=8)
    model, data = load_trained(mixed_quadrant_run)
    x, y = data.x_test[:8], data.y_test[:8]
    assert measured["test_images"] == 8 and len(measured["layers"]) == 8
    assert measured["accuracy"]["test"] == path_ablation.accuracy(model, x, y)
    with path_ablation.without_path(model.relaxed_layers, "fc"):
        expected = path_ablation.accuracy(model, data.x_train, data.y_train)
    assert measured["removed_everywhere"]["train"] == expected
    for layer in measured["layers"]:
        assert 0 <= layer["output_share"]["train"] <= 1
        assert set(layer["removed"]) == {"train", "test"}
        assert set(layer["noise_of_path_size"]) == {"train", "test"}
    assert 0 <= measured["noise_of_path_size_everywhere"]["test"] <= 1
