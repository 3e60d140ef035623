"""The variational layer's KL and the ELBO estimate equal direct computations (Eqs. 9-10)."""

from __future__ import annotations

import math

import pytest
import torch
from torch.distributions import MultivariateNormal, kl_divergence

from laplace_equivariance.invariance.affine import affine_matrices, sample_noise
from laplace_equivariance.invariance.elbo import elbo
from laplace_equivariance.invariance.network import InvariantWeightsNet
from laplace_equivariance.invariance.variational import VariationalLinear

F64 = torch.float64


def _randomised_layer(prior_variance: float = 2.0) -> VariationalLinear:
    layer = VariationalLinear(4, 3, prior_variance=prior_variance).to(F64)
    with torch.no_grad():
        layer.mean.normal_()
        layer.scale_tril.mul_(0.5).add_(0.1 * torch.randn_like(layer.scale_tril))
    return layer


def test_kl_equals_torch_distributions_summed_over_class_blocks():
    layer = _randomised_layer()
    q = MultivariateNormal(layer.mean, scale_tril=layer.cholesky())
    p = MultivariateNormal(torch.zeros(3, 5, dtype=F64), 2.0 * torch.eye(5, dtype=F64))
    torch.testing.assert_close(layer.kl_divergence(), kl_divergence(q, p).sum())


def test_kl_is_zero_at_the_paper_initialisation():
    layer = VariationalLinear(4, 3).to(F64)
    torch.testing.assert_close(layer.kl_divergence(), torch.zeros((), dtype=F64))


def test_samples_are_mean_plus_cholesky_times_noise_and_eval_uses_the_mean():
    layer = _randomised_layer()
    features = torch.randn(7, 4, dtype=F64)
    generator = torch.Generator().manual_seed(3)
    weights = layer.sample(generator)
    noise = torch.randn(3, 5, generator=torch.Generator().manual_seed(3), dtype=F64)
    expected = layer.mean + (layer.cholesky() @ noise[..., None])[..., 0]
    torch.testing.assert_close(weights, expected)
    layer.eval()
    torch.testing.assert_close(layer(features), features @ layer.mean[:, :4].T + layer.mean[:, 4])


def test_elbo_equals_a_direct_monte_carlo_computation():
    """Same random draws, computed by hand: N/M * sum log mean_s softmax - KL."""
    net = InvariantWeightsNet((1, 6, 6), 3, width=4, n_samples=5, variational=True).to(F64)
    with torch.no_grad():
        net.output.mean.normal_()
    x, y, n_data = torch.randn(8, 1, 6, 6, dtype=F64), torch.tensor([0, 1, 2, 0, 1, 2, 0, 1]), 40
    torch.manual_seed(11)
    estimate = elbo(net, x, y, n_data)

    torch.manual_seed(11)
    noise = sample_noise(5, 1, dtype=F64)
    weights = net.output.sample()
    matrices = affine_matrices(net.eta, noise, net.generators.to(F64))
    features = net.features(x, matrices)
    probs = torch.softmax(features @ weights[:, :4].T + weights[:, 4], -1).mean(0)
    log_likelihood = probs[torch.arange(8), y].log().sum() * n_data / 8
    q = MultivariateNormal(net.output.mean, scale_tril=net.output.cholesky())
    p = MultivariateNormal(torch.zeros(3, 5, dtype=F64), torch.eye(5, dtype=F64))
    torch.testing.assert_close(estimate, log_likelihood - kl_divergence(q, p).sum())


def test_elbo_gradient_reaches_eta():
    net = InvariantWeightsNet((1, 6, 6), 3, width=4, n_samples=5, variational=True).to(F64)
    with torch.no_grad():
        net.output.mean.normal_()
    elbo(net, torch.randn(8, 1, 6, 6, dtype=F64), torch.zeros(8, dtype=torch.long), 8).backward()
    assert net.eta.grad is not None and math.isfinite(net.eta.grad.item())
    assert net.eta.grad.abs().item() > 0


def test_elbo_needs_a_variational_output_layer():
    net = InvariantWeightsNet((1, 6, 6), 3, width=4)
    with pytest.raises(TypeError, match="variational=True"):
        elbo(net, torch.randn(2, 1, 6, 6), torch.zeros(2, dtype=torch.long), 2)
