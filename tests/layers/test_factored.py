import pytest
import torch

from laplace_equivariance.layers import FactoredLinear2d, FullyConnected2d, SparseFactoredLinear2d


@pytest.mark.parametrize("layer_type", [FactoredLinear2d, SparseFactoredLinear2d])
@pytest.mark.parametrize(
    "c_in, c_out, in_size, out_size",
    [(1, 1, 2, 2), (3, 2, (4, 2), (2, 1)), (2, 5, 4, 4)],
    ids=["1x1-channels", "rectangular-subsampled", "square"],
)
def test_equals_the_explicit_dense_weight(device, layer_type, c_in, c_out, in_size, out_size):
    """F-FC (Eq. 5), and S-FC through its induced weights, is FC (Eq. 1) with
    w(c', c, x', y', x, y) = theta1(c', c, x', y') theta2(c', c, x, y)."""
    layer = layer_type(c_in, c_out, in_size, out_size).to(device, torch.float64)
    with torch.no_grad():
        layer.output_map.channel_bias.normal_()
        layer.output_map.position_bias.normal_()
    dense = FullyConnected2d(c_in, c_out, in_size, out_size).to(device, torch.float64)
    n_positions = layer.output_map.position_bias.numel()
    with torch.no_grad():
        dense.weight.copy_(layer.dense_weight())
        bias = layer.output_map.channel_bias[:, None] + layer.output_map.position_bias
        dense.bias.copy_(bias.reshape(c_out * n_positions))
    x = torch.randn(7, *((c_in,) + tuple(dense.in_size)), device=device, dtype=torch.float64)
    torch.testing.assert_close(layer(x), dense(x), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("layer_type", [FactoredLinear2d, SparseFactoredLinear2d])
def test_output_is_contiguous(layer_type):
    """The output map's einsum leaves channels innermost; later elementwise ops and
    convolutions (forward and backward) are several times slower on that layout."""
    layer = layer_type(3, 4, 8, 8)
    assert layer(torch.randn(2, 3, 8, 8)).is_contiguous()


def test_dense_weight_entries_are_products_of_the_factors():
    layer = FactoredLinear2d(2, 3, 2, 2).double()
    w = layer.dense_weight().view(3, 4, 2, 4)  # (c', q, c, p)
    theta1, theta2 = layer.output_map.weight, layer.input_map.weight  # (q, c', c), (c', c, p)
    assert w[1, 2, 0, 3] == theta1[2, 1, 0] * theta2[1, 0, 3]


def test_parameter_count_is_2CpCXY_plus_biases():
    layer = FactoredLinear2d(3, 4, in_size=8, out_size=4)
    expected = 4 * 3 * (64 + 16) + 4 + 16
    assert sum(p.numel() for p in layer.parameters()) == expected


def test_wrong_input_shape_names_the_expected_shape():
    with pytest.raises(ValueError, match=r"\(N, 3, 8, 8\)"):
        FactoredLinear2d(3, 4, 8)(torch.randn(2, 3, 4, 4))


def _pair_norms(layer: FactoredLinear2d) -> tuple[torch.Tensor, torch.Tensor]:
    """Squared norms of theta1 and theta2 per channel pair, each (C', C)."""
    return layer.output_map.weight.square().sum(0), layer.input_map.weight.square().sum(-1)


@pytest.mark.parametrize("layer_type", [FactoredLinear2d, SparseFactoredLinear2d])
@pytest.mark.parametrize(
    "c_in, c_out, in_size, out_size",
    [(1, 10, 32, 32), (80, 160, 2, 1), (3, 2, (4, 2), (2, 1))],
    ids=["first-layer-of-F.1", "last-layer-of-F.1", "rectangular"],
)
def test_factors_are_balanced_at_construction(layer_type, c_in, c_out, in_size, out_size):
    """Every channel pair's two factors have equal norms from the start (the MAP of Eq. 9 is
    balanced), while the equivalent FC weight keeps He variance 2 / (C X Y)."""
    torch.manual_seed(0)
    layer = layer_type(c_in, c_out, in_size, out_size).double()
    a, b = _pair_norms(layer)
    # drawn and balanced in float32: each norm is a float32 sum of up to 1,024 squares
    torch.testing.assert_close(a, b, rtol=1e-5, atol=0.0)
    if layer_type is FactoredLinear2d and c_out * c_in >= 1000:
        fan_in = c_in * layer.input_map.weight.shape[-1]
        variance = layer.dense_weight().var().item()
        assert variance == pytest.approx(2.0 / fan_in, rel=0.1)


def test_balance_keeps_the_function_and_minimises_the_prior_term():
    """balance_ rescales theta1 by s and theta2 by 1/s per pair, s^4 = |theta2|^2 / |theta1|^2:
    the layer's output is unchanged and each pair's squared norm drops to 2 sqrt(ab)."""
    torch.manual_seed(1)
    layer = FactoredLinear2d(3, 4, 4, 2).double()
    with torch.no_grad():
        layer.output_map.weight.mul_(torch.rand(4, 3, dtype=torch.float64) * 10 + 0.1)
        layer.output_map.weight[:, 0, 0] = 0.0  # a pair with a zero factor stays as it is
    a, b = _pair_norms(layer)
    x = torch.randn(5, 3, 4, 4, dtype=torch.float64)
    before = layer(x)
    layer.balance_()
    after_a, after_b = _pair_norms(layer)
    torch.testing.assert_close(layer(x), before, rtol=1e-12, atol=1e-12)
    nonzero = a > 0
    torch.testing.assert_close(after_a[nonzero], (a * b).sqrt()[nonzero], rtol=1e-12, atol=0.0)
    torch.testing.assert_close(after_b[nonzero], (a * b).sqrt()[nonzero], rtol=1e-12, atol=0.0)
    assert after_b[0, 0] == b[0, 0] and after_a[0, 0] == 0.0
