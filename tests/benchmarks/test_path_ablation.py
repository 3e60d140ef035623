"""``benchmarks/path_ablation.py``: removing a path's term is zeroing its last map, the network
is unchanged outside the block, and a run's measurement counts its predictions right."""

import pytest
import torch

from benchmarks import path_ablation
from laplace_equivariance import models
from laplace_equivariance.runs import load_trained


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
