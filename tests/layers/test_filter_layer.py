"""FilterLayer2d: the geometry, bias order and checks that CONV, S-CONV and p4 layers share."""

import pytest
import torch

from laplace_equivariance.layers import (
    CircularConv2d,
    P4GroupConv2d,
    P4LiftingConv2d,
    P4PointwiseConv2d,
    SparseCircularConv2d,
)

FILTER_LAYERS = [
    CircularConv2d,
    SparseCircularConv2d,
    P4LiftingConv2d,
    P4PointwiseConv2d,
    P4GroupConv2d,
]


@pytest.mark.parametrize("layer_type", FILTER_LAYERS)
def test_the_weight_comes_before_the_bias(layer_type):
    # laplace-torch's layerwise prior precisions and the Kron blocks follow parameters() order
    names = [name for name, _ in layer_type(2, 3, 3, 5).named_parameters(recurse=False)]
    assert names.index("weight") < names.index("bias")


@pytest.mark.parametrize("layer_type", FILTER_LAYERS)
def test_without_bias_there_is_no_bias_parameter(layer_type):
    layer = layer_type(2, 3, 3, 5, bias=False)
    assert layer.bias is None
    assert "bias" not in dict(layer.named_parameters())


@pytest.mark.parametrize("layer_type", FILTER_LAYERS)
def test_an_even_kernel_is_refused_naming_the_layer(layer_type):
    with pytest.raises(ValueError, match=f"{layer_type.__name__} needs an odd kernel_size, got 4"):
        layer_type(2, 3, 4, 5)


@pytest.mark.parametrize("layer_type", FILTER_LAYERS)
def test_a_wrong_grid_is_refused_naming_the_expected_shape(layer_type):
    layer = layer_type(2, 3, 3, (5, 6))
    expected = ", ".join(map(str, layer.in_features_shape))
    with pytest.raises(ValueError, match=rf"expects input of shape \(N, {expected}\)"):
        layer(torch.zeros(1, *layer.in_features_shape[:-1], 5))


def test_the_repr_names_the_geometry():
    assert "2, 3, kernel_size=3, grid=5x6, rotations=4" in repr(P4LiftingConv2d(2, 3, 3, (5, 6)))
    assert "grid=5x5, circular padding=1, bias=False" in repr(CircularConv2d(2, 3, 3, 5, False))
    assert "rotations=4, full" in repr(P4GroupConv2d(2, 3, 3, 5))
