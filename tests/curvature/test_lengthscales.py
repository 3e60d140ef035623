"""The lengthscale-differentiable marginal likelihood: value and gradients (float64).

Total derivative: the autograd gradient of
:func:`laplace_equivariance.curvature.lengthscales.log_marginal_likelihood` in every hyperparameter
``omega`` must equal central finite differences of laplace-torch's marginal likelihood of a
Laplace approximation refitted at ``omega +- h``. Partial derivative: with ``la`` (hence the
unprojected statistics) fixed, the gradient must equal central finite differences of that
same function. Tolerance: with ``h = 1e-5`` the truncation error is
``h^2 |L'''| / 6 ~ 1e-11`` and rounding
``eps |L| / h ~ 1e-9`` for ``|L| ~ 100``, so ``rtol = 1e-6`` leaves three orders of margin
(measured: about 1e-10).
"""

from __future__ import annotations

import pytest
import torch
from laplace import Laplace
from torch import nn
from torch.nn import functional as F
from torch.utils.data import DataLoader, TensorDataset

from laplace_equivariance import EquivariantKFAC
from laplace_equivariance.curvature.lengthscales import (
    lengthscale_hyperparameters,
    log_marginal_likelihood,
)
from laplace_equivariance.layers import SparseCircularConv2d, SparseFactoredLinear2d
from tests.curvature.reference import fit_kron
from tests.curvature.test_differentiable import every_rule

K = 3
STEP, RTOL = 1e-5, 1e-6
HYPER = {"lengthscale_mode": "hyperparameter", "lengthscale": 0.8}


def s_fc() -> nn.Module:
    return nn.Sequential(
        SparseFactoredLinear2d(2, 3, 4, 2, **HYPER), nn.ReLU(), nn.Flatten(), nn.Linear(12, K)
    )


def s_conv() -> nn.Module:
    return nn.Sequential(
        SparseCircularConv2d(2, 3, 3, size=4, **HYPER), nn.ReLU(), nn.Flatten(), nn.Linear(48, K)
    )


def s_conv_then_s_fc() -> nn.Module:
    return nn.Sequential(
        SparseCircularConv2d(2, 2, 3, size=4, **HYPER),
        nn.ReLU(),
        SparseFactoredLinear2d(2, 3, 4, 2, **HYPER),
        nn.ReLU(),
        nn.Flatten(),
        nn.Linear(12, K),
    )


# case id -> (model, the bases whose omega the case differentiates); the id says what it proves
CASES = {
    # A projected block by block (C blocks of Phi^T S_c Phi)
    "s-fc-input-map": (s_fc, ["0.input_map.basis"]),
    # B projected (Phi^T S Phi over output positions)
    "s-fc-output-map": (s_fc, ["0.output_map.basis"]),
    # A over channels x filter offsets, projected with I_C (x) Phi
    "s-conv": (s_conv, ["0.basis"]),
    # three omegas at once; the data fit reaches the first through the second layer
    "s-conv-then-s-fc": (s_conv_then_s_fc, ["0.basis", "2.input_map.basis", "2.output_map.basis"]),
    # every rule's factors depend on omega of the first layer (P4, F-FC, FC, stock layers)
    "every-rule": (every_rule, ["0.basis", "13.output_map.basis"]),
}


def fit(model, loader, temperature=0.5, **backend_kwargs):
    return fit_kron(model, loader, temperature=temperature, backend_kwargs=backend_kwargs)


def central_difference(omega: torch.Tensor, evaluate) -> torch.Tensor:
    """``(evaluate() at omega + h - evaluate() at omega - h) / 2h``; omega is restored."""
    start = omega.detach().clone()
    values = []
    for sign in (1, -1):
        with torch.no_grad():
            omega.copy_(start + sign * STEP)
        values.append(evaluate().detach())
    with torch.no_grad():
        omega.copy_(start)
    return (values[0] - values[1]) / (2 * STEP)


def fitted(build, device, temperature=0.5):
    torch.manual_seed(0)
    model = build().to(device, torch.float64)
    x = torch.randn(10, 2, 4, 4, dtype=torch.float64, device=device)
    y = torch.randint(0, K, (10,), device=device)
    loader = DataLoader(TensorDataset(x, y), batch_size=4)
    la = fit(model, loader, temperature)
    n_groups = len(list(model.parameters()))
    prior = torch.linspace(0.5, 2.0, n_groups, dtype=torch.float64, device=device)
    return model, loader, la, prior


def differentiated(case: str, device, derivative: str):
    """``case`` fitted, and ``log_marginal_likelihood``'s ``derivative`` in its tested
    lengthscale hyperparameters (``omega.grad``), which it returns by name."""
    build, names = CASES[case]
    model, loader, la, prior = fitted(build, device)
    omegas = lengthscale_hyperparameters(model)
    log_marginal_likelihood(la, loader, prior, derivative=derivative).backward()
    return model, loader, la, prior, {name: omegas[name] for name in names}


@pytest.mark.parametrize("case", list(CASES))
def test_total_derivative_equals_central_differences_of_refitted_approximations(case, device):
    model, loader, _, prior, omegas = differentiated(case, device, "total")
    for omega in omegas.values():
        finite_difference = central_difference(
            omega, lambda: fit(model, loader).log_marginal_likelihood(prior)
        )
        torch.testing.assert_close(omega.grad[0], finite_difference, rtol=RTOL, atol=1e-8)


@pytest.mark.parametrize("case", list(CASES))
def test_partial_derivative_equals_central_differences_of_the_defined_function(case, device):
    model, loader, la, prior, omegas = differentiated(case, device, "partial")
    data_fit = -sum(F.cross_entropy(model(x), y, reduction="sum") for x, y in loader) / 0.5
    data_grads = torch.autograd.grad(data_fit, list(omegas.values()))
    for omega, data_grad in zip(omegas.values(), data_grads, strict=True):
        with torch.no_grad():
            finite_difference = central_difference(
                omega, lambda: log_marginal_likelihood(la, loader, prior, derivative="partial")
            )
        torch.testing.assert_close(omega.grad[0], finite_difference, rtol=RTOL, atol=1e-8)
        # both terms count: the curvature's part is not negligible next to the data fit's
        assert (omega.grad[0] - data_grad[0]).abs() > 1e-3 * omega.grad[0].abs()


@pytest.mark.parametrize("case", ["s-fc-input-map", "s-conv-then-s-fc"])
def test_value_and_prior_gradient_equal_laplace_torch_at_the_fitted_lengthscales(case):
    model, loader, la, prior = fitted(CASES[case][0], torch.device("cpu"))
    ours_prior = prior.clone().requires_grad_(True)
    ours = log_marginal_likelihood(la, loader, ours_prior)
    stock_prior = prior.clone().requires_grad_(True)
    stock = la.log_marginal_likelihood(stock_prior)
    torch.testing.assert_close(ours, stock, rtol=1e-12, atol=0)
    (ours_grad,) = torch.autograd.grad(ours, ours_prior)
    (stock_grad,) = torch.autograd.grad(stock, stock_prior)
    torch.testing.assert_close(ours_grad, stock_grad, rtol=1e-10, atol=1e-12)


def test_without_hyperparameters_it_is_laplace_torchs_value():
    model = nn.Sequential(SparseCircularConv2d(2, 3, 3, size=4), nn.Flatten(), nn.Linear(48, K))
    model, loader, la, prior = fitted(lambda: model, torch.device("cpu"), temperature=1.0)
    assert lengthscale_hyperparameters(model) == {}
    assert log_marginal_likelihood(la, loader, prior) == la.log_marginal_likelihood(prior)


def test_unsupported_laplace_approximations_are_refused():
    model, loader, _, _ = fitted(s_conv, torch.device("cpu"))
    full = Laplace(
        model, "classification", "all", hessian_structure="full", backend=EquivariantKFAC
    )
    full.fit(loader)
    with pytest.raises(ValueError, match="hessian_structure='kron'"):
        log_marginal_likelihood(full, loader)
    unfitted = Laplace(
        model, "classification", "all", hessian_structure="kron", backend=EquivariantKFAC
    )
    with pytest.raises(ValueError, match="Fit"):
        log_marginal_likelihood(unfitted, loader)


def test_total_derivative_refuses_a_stale_or_monte_carlo_fit():
    model, loader, la, prior = fitted(s_conv, torch.device("cpu"))
    omega = lengthscale_hyperparameters(model)["0.basis"]
    with torch.no_grad():
        omega.add_(0.1)
    with pytest.raises(ValueError, match="fitted at the current lengthscales"):
        log_marginal_likelihood(la, loader, prior)
    assert torch.isfinite(log_marginal_likelihood(la, loader, prior, derivative="partial"))
    monte_carlo = fit(model, loader, stochastic=True)
    with pytest.raises(ValueError, match="exact GGN"):
        log_marginal_likelihood(monte_carlo, loader, prior)
    with pytest.raises(ValueError, match="derivative must be one of"):
        log_marginal_likelihood(la, loader, prior, derivative="exact")


def test_fitting_leaves_the_lengthscale_gradient_alone():
    """ASDL's backward passes must not accumulate into a hyperparameter's ``.grad``."""
    model, loader, _, _ = fitted(s_conv, torch.device("cpu"))
    omega = lengthscale_hyperparameters(model)["0.basis"]
    omega.grad = torch.full_like(omega, 3.0)
    fit(model, loader)
    assert omega.requires_grad
    assert omega.grad.item() == 3.0


@pytest.mark.parametrize("case", ["s-fc-input-map", "s-fc-output-map", "s-conv"])
@pytest.mark.parametrize("derivative", ["total", "partial"])
def test_accumulated_fits_equal_one_fit_over_the_concatenated_data(case, derivative):
    """laplace-torch's ``fit(loader_b, override=False)`` adds to the first fit; the projected
    statistics (A side weighted by the data counts, B side summed) must follow, so that value
    and gradients equal one fit over both data sets (4 and 6 examples: unequal weights)."""
    build, _ = CASES[case]
    model, loader, _, prior = fitted(build, "cpu")
    x, y = loader.dataset.tensors
    first = DataLoader(TensorDataset(x[:4], y[:4]), batch_size=4)
    second = DataLoader(TensorDataset(x[4:], y[4:]), batch_size=3)
    results = []
    for fits in ([loader], [first, second]):
        la = fit(model, fits[0])
        for more in fits[1:]:
            la.fit(more, override=False)
        omegas = list(lengthscale_hyperparameters(model).values())
        for omega in omegas:
            omega.grad = None
        value = log_marginal_likelihood(la, loader, prior, derivative)
        value.backward()
        results.append([value.detach(), *(omega.grad.clone() for omega in omegas)])
    for one_fit, accumulated in zip(*results, strict=True):
        torch.testing.assert_close(accumulated, one_fit, rtol=1e-10, atol=1e-12)


def test_accumulated_fits_at_different_lengthscales_are_refused():
    model, loader, la, _ = fitted(s_conv, "cpu")
    omega = lengthscale_hyperparameters(model)["0.basis"]
    with torch.no_grad():
        omega.add_(0.1)
    with pytest.raises(ValueError, match="different lengthscales"):
        la.fit(loader, override=False)
