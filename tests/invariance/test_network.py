"""The invariant-weights network: the MLP at eta = 0, rotation invariant at eta = pi."""

from __future__ import annotations

import math

import pytest
import torch
from torch.nn import functional as F

from laplace_equivariance.invariance.network import InvariantWeightsNet

F64 = torch.float64


def _net(**kwargs) -> InvariantWeightsNet:
    options = {"width": 16, "n_samples": 8, "blur_sigma": 0.0} | kwargs
    net = InvariantWeightsNet((1, 8, 8), 3, **options).to(F64)
    if isinstance(net.output, torch.nn.Linear):
        torch.nn.init.normal_(net.output.weight)
    return net


@pytest.mark.parametrize("activation", ["rff", "relu"])
def test_output_is_log_probabilities_of_shape_n_by_k(activation):
    net = _net(activation=activation)
    out = net(torch.randn(5, 1, 8, 8, dtype=F64))
    assert out.shape == (5, 3)
    torch.testing.assert_close(out.logsumexp(-1), torch.zeros(5, dtype=F64))


@pytest.mark.parametrize("activation", ["rff", "relu"])
def test_eta_zero_is_the_plain_shallow_network(activation):
    net = _net(activation=activation, eta_init=0.0)
    x = torch.randn(4, 1, 8, 8, dtype=F64)
    pre = x.flatten(1) @ net.first_weight.T + net.first_bias
    hidden = math.sqrt(2 / 16) * torch.cos(pre) if activation == "rff" else torch.relu(pre)
    expected = F.log_softmax(net.output(hidden), -1)
    torch.testing.assert_close(net(x), expected, rtol=0, atol=1e-12)


def test_only_the_relu_flavour_learns_its_first_layer():
    rff, relu = _net(activation="rff"), _net(activation="relu")
    assert {n for n, _ in rff.named_parameters()} == {"eta", "output.weight", "output.bias"}
    assert {"first_weight", "first_bias"} <= {n for n, _ in relu.named_parameters()}
    assert all(p is not relu.eta for p in relu.weight_parameters())


def test_full_rotation_with_grid_samples_is_exactly_invariant_to_quarter_turns():
    """Midpoint samples with S divisible by 4 form a set closed under quarter turns.

    With exact rotation matrices the network is invariant to rounding (1e-12). Through
    ``torch.linalg.matrix_exp`` it is invariant to 1e-6: in torch 2.14 on CPU that routine is
    accurate to only ~2e-7 in float64 for rotation angles near pi (measured).
    """
    net = _net(eta_init=math.pi, deterministic=True, n_samples=8)
    x = torch.randn(6, 1, 8, 8, dtype=F64)
    rotated = torch.rot90(x, 1, dims=(2, 3))
    angles = math.pi * ((2 * torch.arange(8, dtype=F64) + 1) / 8 - 1)
    exact = torch.zeros(8, 3, 3, dtype=F64)
    exact[:, 0, 0], exact[:, 0, 1] = angles.cos(), -angles.sin()
    exact[:, 1, 0], exact[:, 1, 1], exact[:, 2, 2] = angles.sin(), angles.cos(), 1.0
    torch.testing.assert_close(net(rotated, exact), net(x, exact), rtol=0, atol=1e-12)
    torch.testing.assert_close(net(rotated), net(x), rtol=0, atol=1e-6)


def test_no_rotation_is_not_invariant_to_quarter_turns():
    net = _net(eta_init=0.0)
    x = torch.randn(6, 1, 8, 8, dtype=F64)
    assert (net(torch.rot90(x, 1, dims=(2, 3))) - net(x)).abs().max() > 1e-2


def test_stochastic_invariance_error_shrinks_with_the_number_of_samples():
    """With random angles the invariance error is Monte-Carlo error, O(1/sqrt(S)): 64x the
    samples should shrink it about 8x; we require 3x over 20 repetitions."""
    x = torch.randn(6, 1, 8, 8, dtype=F64)
    errors = {}
    for n_samples in (4, 256):
        net = _net(eta_init=math.pi, n_samples=n_samples)
        errors[n_samples] = torch.stack(
            [(net(torch.rot90(x, 1, dims=(2, 3))) - net(x)).abs().mean() for _ in range(20)]
        ).mean()
    assert errors[256] < errors[4] / 3


def test_gradient_reaches_eta_and_matches_finite_differences():
    net = _net(eta_init=0.3, deterministic=True, blur_sigma=0.5)
    x, y = torch.randn(5, 1, 8, 8, dtype=F64), torch.tensor([0, 1, 2, 0, 1])

    def loss() -> torch.Tensor:
        return F.nll_loss(net(x), y)

    loss().backward()
    gradient = net.eta.grad.item()
    step = 1e-6
    with torch.no_grad():
        net.eta += step
        upper = loss().item()
        net.eta -= 2 * step
        lower = loss().item()
    assert gradient != 0
    # central differences: truncation O(step^2), rounding O(1e-16 / step) = 1e-10
    assert gradient == pytest.approx((upper - lower) / (2 * step), rel=1e-6, abs=1e-9)


def test_bad_arguments_raise_clear_errors():
    with pytest.raises(ValueError, match="activation"):
        _net(activation="tanh")
    with pytest.raises(ValueError, match="invariance"):
        _net(invariance="reflection")
    with pytest.raises(ValueError, match="m \\*\\* 1|n_samples"):
        _net(invariance="translation", deterministic=True, n_samples=8)
    with pytest.raises(ValueError, match="Expected inputs"):
        _net()(torch.randn(2, 1, 9, 9, dtype=F64))
