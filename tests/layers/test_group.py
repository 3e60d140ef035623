import pytest
import torch

from laplace_equivariance.layers import (
    P4GroupConv2d,
    P4LiftingConv2d,
    P4PointwiseConv2d,
    RotationMaxPool,
    rotate_p4,
)


def test_lifting_commutes_with_rotation(device):
    layer = P4LiftingConv2d(2, 3, 3, size=8).to(device, torch.float64)
    x = torch.randn(4, 2, 8, 8, device=device, dtype=torch.float64)
    for k in range(1, 4):
        torch.testing.assert_close(
            layer(torch.rot90(x, k, dims=(-2, -1))), rotate_p4(layer(x), k), rtol=0, atol=1e-12
        )


@pytest.mark.parametrize("layer_type", [P4PointwiseConv2d, P4GroupConv2d])
def test_group_convs_commute_with_rotation_and_translation(layer_type, device):
    layer = layer_type(2, 3, 3, size=8).to(device, torch.float64)
    x = torch.randn(4, 4 * 2, 8, 8, device=device, dtype=torch.float64)
    for k in range(1, 4):
        torch.testing.assert_close(
            layer(rotate_p4(x, k)), rotate_p4(layer(x), k), rtol=0, atol=1e-12
        )
    torch.testing.assert_close(
        layer(torch.roll(x, (1, 2), dims=(-2, -1))),
        torch.roll(layer(x), (1, 2), dims=(-2, -1)),
        rtol=0,
        atol=1e-12,
    )


def test_pointwise_group_conv_does_not_mix_rotations(device):
    layer = P4PointwiseConv2d(1, 1, 3, size=4, bias=False).to(device, torch.float64)
    x = torch.zeros(1, 4, 4, 4, device=device, dtype=torch.float64)
    x[0, 2] = torch.randn(4, 4, dtype=torch.float64)
    y = layer(x)
    assert y[0, [0, 1, 3]].abs().max() == 0 and y[0, 2].abs().max() > 0


def test_pointwise_group_conv_has_planar_conv_parameter_count():
    layer = P4PointwiseConv2d(5, 7, 3, size=4)
    assert sum(p.numel() for p in layer.parameters()) == 7 * 5 * 9 + 7


def test_full_group_conv_mixes_rotations_and_contains_the_pointwise_one(device):
    full = P4GroupConv2d(2, 3, 3, size=4).to(device, torch.float64)
    x = torch.zeros(1, 4 * 2, 4, 4, device=device, dtype=torch.float64)
    x[0, 2 * 2 : 3 * 2] = torch.randn(2, 4, 4, dtype=torch.float64)
    assert all(block.abs().max() > 0 for block in full(x)[0].view(4, 3, 4, 4))
    pointwise = P4PointwiseConv2d(2, 3, 3, size=4).to(device, torch.float64)
    with torch.no_grad():
        full.weight.zero_()
        full.weight[:, :2] = pointwise.weight  # relative rotation 0 only
        full.bias.copy_(pointwise.bias)
    x = torch.randn(3, 4 * 2, 4, 4, device=device, dtype=torch.float64)
    torch.testing.assert_close(full(x), pointwise(x), rtol=0, atol=1e-12)


def test_full_group_conv_has_four_times_the_pointwise_filter_weights():
    layer = P4GroupConv2d(5, 7, 3, size=4)
    assert sum(p.numel() for p in layer.parameters()) == 4 * 7 * 5 * 9 + 7


def test_rotation_max_pool_is_invariant(device):
    x = torch.randn(3, 4 * 5, 2, 2, device=device, dtype=torch.float64)
    pool = RotationMaxPool()
    torch.testing.assert_close(pool(rotate_p4(x, 1)), torch.rot90(pool(x), 1, dims=(-2, -1)))


def test_group_layers_reject_planar_channel_counts():
    with pytest.raises(ValueError, match=r"\(N, 8, 4, 4\)"):
        P4PointwiseConv2d(2, 3, 3, size=4)(torch.randn(1, 2, 4, 4))
    with pytest.raises(ValueError, match=r"\(N, 8, 4, 4\)"):
        P4GroupConv2d(2, 3, 3, size=4)(torch.randn(1, 2, 4, 4))
    with pytest.raises(ValueError, match="4 \\* C"):
        RotationMaxPool()(torch.randn(1, 6, 1, 1))
