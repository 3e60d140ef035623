"""The output-layer Laplace marginal likelihood: equals dense GGNs, differentiable in eta."""

from __future__ import annotations

import pytest
import torch
from laplace import Laplace
from laplace.curvature import CurvlinopsGGN
from torch.func import functional_call, jacrev
from torch.utils.data import DataLoader, TensorDataset

from laplace_equivariance.invariance.laplace import log_marginal_likelihood, output_jacobians
from laplace_equivariance.invariance.network import InvariantWeightsNet

F64 = torch.float64


def _net() -> InvariantWeightsNet:
    net = InvariantWeightsNet(
        (1, 6, 6), 3, width=5, n_samples=4, eta_init=0.4, deterministic=True, blur_sigma=0.5
    ).to(F64)
    with torch.no_grad():
        net.output.weight.normal_()
        net.output.bias.normal_()
    return net


def _loader(n: int) -> DataLoader:
    x = torch.randn(n, 1, 6, 6, dtype=F64)
    y = torch.arange(n) % 3
    return DataLoader(TensorDataset(x, y), batch_size=4)


def test_analytic_jacobians_equal_autograd():
    net = _net()
    x = torch.randn(3, 1, 6, 6, dtype=F64)
    matrices = net.transformations()
    log_probs, jacobians = output_jacobians(net, x, matrices)
    params = dict(net.output.named_parameters())

    def head(weight, bias):
        return functional_call(
            net.output, {"weight": weight, "bias": bias}, (net.features(x, matrices),)
        )

    def outputs(weight, bias):
        return torch.logsumexp(head(weight, bias).log_softmax(-1), 0) - torch.log(torch.tensor(4.0))

    jac_w, jac_b = jacrev(outputs, argnums=(0, 1))(params["weight"], params["bias"])
    expected = torch.cat([jac_w.flatten(2), jac_b], dim=-1)
    torch.testing.assert_close(log_probs, outputs(params["weight"], params["bias"]))
    torch.testing.assert_close(jacobians, expected, rtol=1e-10, atol=1e-12)


def _autograd_log_marginal_likelihood(net, loader, prior_precision, n_data) -> torch.Tensor:
    """Eq. 9 from a dense GGN whose Jacobians come from torch.func through the whole model."""
    x = torch.cat([batch[0] for batch in loader])
    y = torch.cat([batch[1] for batch in loader])
    matrices = net.transformations()
    head = {k: v.detach() for k, v in net.output.named_parameters()}

    def outputs(weight, bias):
        return functional_call(net, {"output.weight": weight, "output.bias": bias}, (x, matrices))

    jac_w, jac_b = jacrev(outputs, argnums=(0, 1))(head["weight"], head["bias"])
    jacobians = torch.cat([jac_w.flatten(2), jac_b], dim=-1)
    log_probs = outputs(head["weight"], head["bias"])
    probs = log_probs.softmax(-1)
    hessians = torch.diag_embed(probs) - probs[:, :, None] * probs[:, None, :]
    ggn = torch.einsum("nkp,nkl,nlq->pq", jacobians, hessians, jacobians)
    scale, n_params = n_data / len(x), ggn.shape[0]
    theta = torch.cat([head["weight"].flatten(), head["bias"]])
    posterior = scale * ggn + prior_precision * torch.eye(n_params, dtype=F64)
    log_det_ratio = torch.logdet(posterior) - n_params * prior_precision.log()
    data_fit = scale * log_probs[torch.arange(len(y)), y].sum()
    return data_fit - 0.5 * (log_det_ratio + prior_precision * theta @ theta)


SIDES = pytest.mark.parametrize(
    "n_examples", [4, 24], ids=["gram-side(nK<P)", "parameter-side(nK>=P)"]
)


@SIDES
def test_log_marginal_likelihood_equals_a_dense_autograd_ggn(n_examples):
    """P = 3 * 6 = 18: 4 examples use the nK x nK Gram side, 24 the P x P side."""
    net, loader = _net(), _loader(n_examples)
    n_data, prior_precision = 3 * n_examples, torch.tensor(0.7, dtype=F64)
    ours = log_marginal_likelihood(net, loader, prior_precision, n_data)
    expected = _autograd_log_marginal_likelihood(net, loader, prior_precision, n_data)
    torch.testing.assert_close(ours, expected, rtol=1e-12, atol=1e-10)


@SIDES
def test_log_marginal_likelihood_equals_laplace_torch_full_laplace(n_examples):
    """laplace-torch's FullLaplace with CurvlinopsGGN, temperature n / N.

    Its GGN differs from the dense autograd GGN by 6e-8 (of entries up to 5; measured), ours
    by 4e-16, so the two marginal likelihoods agree to a relative 1e-8, not to rounding.
    """
    net, loader = _net(), _loader(n_examples)
    n_data, prior_precision = 3 * n_examples, torch.tensor(0.7, dtype=F64)
    ours = log_marginal_likelihood(net, loader, prior_precision, n_data)
    net.eta.requires_grad_(False)
    la = Laplace(
        net,
        "classification",
        subset_of_weights="all",
        hessian_structure="full",
        backend=CurvlinopsGGN,
        prior_precision=prior_precision,
        temperature=n_examples / n_data,
    )
    la.fit(loader)
    torch.testing.assert_close(ours, la.log_marginal_likelihood(), rtol=1e-8, atol=0)


def test_gradient_in_eta_and_prior_precision_matches_finite_differences():
    net = _net()
    loader = _loader(8)
    log_delta = torch.tensor(-0.3, dtype=F64, requires_grad=True)

    def value() -> torch.Tensor:
        return log_marginal_likelihood(net, loader, log_delta.exp(), 20)

    value().backward()
    gradients = (net.eta.grad.item(), log_delta.grad.item())
    step = 1e-6
    numeric = []
    for tensor in (net.eta, log_delta):
        with torch.no_grad():
            tensor += step
            upper = value().item()
            tensor -= 2 * step
            lower = value().item()
            tensor += step
        numeric.append((upper - lower) / (2 * step))
    assert gradients[0] != 0
    # central differences in float64: error O(step^2) + O(1e-16 * |value| / step) ~ 1e-9
    assert gradients == pytest.approx(tuple(numeric), rel=1e-6, abs=1e-7)


def test_needs_a_point_output_layer_and_finite_values():
    variational = InvariantWeightsNet((1, 6, 6), 3, width=5, variational=True)
    with pytest.raises(TypeError, match="variational=False"):
        output_jacobians(variational, torch.randn(2, 1, 6, 6), variational.transformations())
    net = _net()
    with pytest.raises(FloatingPointError, match="Non-finite"):
        log_marginal_likelihood(net, _loader(4), torch.tensor(float("nan"), dtype=F64))
