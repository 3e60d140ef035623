import pytest
import torch
from laplace.utils import expand_prior_precision
from torch import nn
from torch.nn.utils import parameters_to_vector

from laplace_equivariance import models
from laplace_equivariance.layers import CircularConv2d, RelaxedLayer
from laplace_equivariance.marglik.priors import PriorGroups, parameter_paths


def test_paths_come_from_the_relaxed_layers_not_from_names():
    """A relaxed layer under any name declares its paths; look-alike names outside do not."""
    model = nn.Sequential()
    model.add_module(
        "block", RelaxedLayer({"conv": CircularConv2d(1, 2, 3, 5), "wide": nn.Conv2d(1, 2, 1)})
    )
    model.add_module("layer3", nn.Sequential())
    model.layer3.add_module("fc", nn.Linear(4, 3))  # named like a path, but in no relaxed layer
    assert parameter_paths(model) == {
        "block.conv.weight": ("block", "conv"),
        "block.conv.bias": ("block", "conv"),
        "block.wide.weight": ("block", "wide"),
        "block.wide.bias": ("block", "wide"),
        "layer3.fc.weight": None,
        "layer3.fc.bias": None,
    }


def test_frozen_tensors_are_left_out():
    model = models.build("conv", (1, 32, 32), 3, alpha=1)
    model.layer1.conv.weight.requires_grad_(False)
    assert "layer1.conv.weight" not in parameter_paths(model)
    assert len(PriorGroups(model, "layerwise")) == len(list(model.parameters())) - 1


def test_paper_model_has_one_group_per_layer_and_path_and_its_head_per_tensor():
    model = models.build("f-fc+conv", (1, 32, 32), 3, alpha=1)
    groups = PriorGroups(model, "path")
    head = ["layer9.weight", "layer9.bias", "layer10.weight", "layer10.bias"]
    assert groups.names == [f"layer{i}.{p}" for i in range(1, 9) for p in ("fc", "conv")] + head
    assert groups.outside == head


@pytest.mark.parametrize("structure", ["scalar", "layerwise", "diag", "path"])
def test_per_parameter_precision_matches_laplace_torchs_expansion(structure):
    model = models.build("f-fc+conv", (1, 32, 32), 3, alpha=1).double()
    groups = PriorGroups(model, structure)
    values = torch.rand(len(groups), dtype=torch.float64) + 0.5
    expected = expand_prior_precision(groups.to_laplace(values), model)
    torch.testing.assert_close(groups.per_parameter(values), expected, rtol=0, atol=0)
    n_tensors = len(list(model.parameters()))
    n_params = sum(p.numel() for p in model.parameters())
    assert (
        len(groups)
        == {"scalar": 1, "layerwise": n_tensors, "diag": n_params, "path": 20}[structure]
    )


@pytest.mark.parametrize("structure", ["scalar", "layerwise", "diag", "path"])
def test_penalty_is_laplace_torchs_quadratic_form_with_its_gradients(structure):
    """Sums in another order: float64 rounding over 10^5 terms stays far below 1e-10."""
    model = models.build("f-fc+conv", (1, 32, 32), 3, alpha=1).double()
    groups = PriorGroups(model, structure)
    values = (torch.rand(len(groups), dtype=torch.float64) + 0.5).requires_grad_(True)
    parameters = list(model.parameters())
    delta = expand_prior_precision(groups.to_laplace(values), model)
    theta = parameters_to_vector(parameters)
    expected = (delta * theta) @ theta
    ours = groups.penalty(values, parameters)
    torch.testing.assert_close(ours, expected, rtol=1e-10, atol=0)
    grads = torch.autograd.grad(ours, [values, *parameters])
    expected_grads = torch.autograd.grad(expected, [values, *parameters])
    for got, want in zip(grads, expected_grads, strict=True):
        torch.testing.assert_close(got, want, rtol=1e-10, atol=1e-300)


def test_path_groups_share_one_precision_and_pass_gradients():
    model = models.build("f-fc+conv", (1, 32, 32), 3, alpha=1)
    groups = PriorGroups(model, "path")
    values = torch.arange(len(groups), dtype=torch.float64, requires_grad=True)
    per_tensor = groups.to_laplace(values)
    where = parameter_paths(model)
    for name, value in zip(where, per_tensor.tolist(), strict=True):
        expected = name if where[name] is None else ".".join(where[name])
        assert groups.names[int(value)] == expected
    per_tensor.sum().backward()
    assert values.grad is not None


def test_diag_hyperparameters_are_named_by_tensor_and_index():
    model = nn.Sequential(nn.Linear(2, 3))
    groups = PriorGroups(model, "diag")
    assert groups.describe(0) == "0.weight[0]" and groups.describe(6) == "0.bias[0]"
    summary = groups.summary(torch.arange(9, dtype=torch.float64))
    assert summary == {"0.weight": 2.5, "0.bias": 7.0}


def test_unknown_structure_raises_with_the_choices():
    with pytest.raises(ValueError, match="one of .*'path'"):
        PriorGroups(models.build("conv", (1, 32, 32), 3, alpha=1), "per-layer")
