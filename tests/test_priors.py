import pytest
import torch

from laplace_equivariance import models
from laplace_equivariance.priors import PriorGroups, layer_and_path


def test_layer_and_path_from_names():
    assert layer_and_path("layer3.fc.input_map.weight") == ("layer3", "fc")
    assert layer_and_path("layer3.conv.bias") == ("layer3", "conv")
    assert layer_and_path("layer1.gconv.weight") == ("layer1", "gconv")
    assert layer_and_path("layer9.weight") == ("layer9", "fc")


@pytest.mark.parametrize(
    "structure, count",
    [("scalar", 1), ("path", 8 * 2 + 2), ("layerwise", None)],
)
def test_group_counts(structure, count):
    model = models.build("f-fc+conv", (1, 32, 32), 3, alpha=1)
    groups = PriorGroups(model, structure)
    n_tensors = len(list(model.parameters()))
    assert len(groups) == (count if count is not None else n_tensors)
    assert groups.index.shape == (n_tensors,)


def test_path_groups_share_one_precision_per_layer_and_path():
    model = models.build("f-fc+conv", (1, 32, 32), 3, alpha=1)
    groups = PriorGroups(model, "path")
    assert groups.names[:2] == ["layer1.fc", "layer1.conv"]
    values = torch.arange(len(groups), dtype=torch.float64, requires_grad=True)
    per_tensor = groups.expand(values)
    names = [n for n, _ in model.named_parameters()]
    for name, value in zip(names, per_tensor.tolist(), strict=True):
        assert groups.names[int(value)] == ".".join(layer_and_path(name))
    per_tensor.sum().backward()
    assert values.grad is not None


def test_unknown_structure_raises():
    with pytest.raises(ValueError):
        PriorGroups(models.build("conv", (1, 32, 32), 3, alpha=1), "diag")
