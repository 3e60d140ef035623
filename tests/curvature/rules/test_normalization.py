"""Normalisation layers' exact blocks against the exact GGN (float64), and their misuse.

BatchNorm (evaluation mode), GroupNorm and LayerNorm weights and biases get their exact GGN
blocks under both ``kfac_approx`` settings, alone and after relaxed layers: equal to the
torch.func GGN to rounding (``rtol = 1e-10``; both sides sum the same products in another
order). The rules act only inside EquivariantKFAC's fit: ASDL's own operations still serve
laplace-torch's stock backends.
"""

from __future__ import annotations

import pytest
import torch
from laplace import Laplace
from laplace.curvature import AsdlGGN
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from laplace_equivariance import EquivariantKFAC, UnsupportedModuleError, symmetry_report
from laplace_equivariance.layers import CircularConv2d, FullyConnected2d, RelaxedLayer
from tests.curvature.reference import (
    exact_ggn_curvlinops,
    exact_ggn_torch_func,
    fit_kfac,
    parameter_slices,
)
from tests.curvature.test_exactness import kron_blocks

K = 4
NORMALIZATIONS = {
    "batchnorm2d": lambda: nn.BatchNorm2d(3),
    "groupnorm": lambda: nn.GroupNorm(3, 3),
    "groupnorm-one-group": lambda: nn.GroupNorm(1, 3),
    "layernorm-chw": lambda: nn.LayerNorm([3, 4, 4]),
    "layernorm-last-dim": lambda: nn.LayerNorm(4),
}


def with_normalization(norm: nn.Module, relaxed: bool) -> nn.Module:
    """``(N, 2, 4, 4) -> (N, K)``: a convolution (or a relaxed FC+CONV layer), ``norm``, a
    head; ``norm``'s running statistics and affine parameters drawn away from their defaults,
    in evaluation mode."""
    first = (
        RelaxedLayer({"fc": FullyConnected2d(2, 3, 4, 4), "conv": CircularConv2d(2, 3, 3, size=4)})
        if relaxed
        else CircularConv2d(2, 3, 3, size=4)
    )
    model = nn.Sequential(first, norm, nn.Tanh(), nn.Flatten(), nn.Linear(48, K)).double()
    with torch.no_grad():
        norm.weight.normal_()
        norm.bias.normal_()
        if isinstance(norm, nn.BatchNorm2d):
            norm.running_mean.normal_()
            norm.running_var.uniform_(0.5, 2.0)
    return model.eval()


@pytest.mark.parametrize("kfac_approx", ["expand", "reduce"])
@pytest.mark.parametrize("relaxed", [False, True], ids=["after-conv", "after-relaxed-layer"])
@pytest.mark.parametrize("case", list(NORMALIZATIONS))
def test_normalization_blocks_equal_the_exact_ggn(case, relaxed, kfac_approx, device):
    torch.manual_seed(0)
    model = with_normalization(NORMALIZATIONS[case](), relaxed).to(device)
    x = torch.randn(6, 2, 4, 4, dtype=torch.float64, device=device)
    y = torch.randint(0, K, (6,), device=device)
    la = fit_kfac(model, x, y, "classification", backend_kwargs={"kfac_approx": kfac_approx})
    exact = exact_ggn_torch_func(model, x, "classification")
    slices = parameter_slices(model)
    blocks = kron_blocks(model, la)
    for name in ("1.weight", "1.bias"):
        block, reference = blocks[name], exact[slices[name], slices[name]]
        assert block.shape == reference.shape  # one full block per tensor
        torch.testing.assert_close(block, reference, rtol=1e-10, atol=1e-12 * exact.abs().max())


def test_batchnorm1d_blocks_equal_curvlinops_ggn():
    """BatchNorm1d on features, against curvlinops' GGN (the second reference)."""
    torch.manual_seed(1)
    norm = nn.BatchNorm1d(5)
    model = nn.Sequential(nn.Linear(3, 5), norm, nn.Tanh(), nn.Linear(5, K)).double()
    with torch.no_grad():
        norm.running_mean.normal_()
        norm.weight.normal_()
    model.eval()
    x, y = torch.randn(8, 3, dtype=torch.float64), torch.randint(0, K, (8,))
    la = fit_kfac(model, x, y, "classification")
    exact = exact_ggn_curvlinops(model, x, y, "classification")
    slices = parameter_slices(model)
    blocks = kron_blocks(model, la)
    for name in ("1.weight", "1.bias"):
        reference = exact[slices[name], slices[name]]
        torch.testing.assert_close(blocks[name], reference, rtol=1e-10, atol=1e-12)


def test_marginal_likelihood_predictive_and_report_with_normalization():
    """The marginal likelihood is differentiable in the precisions, the GLM predictive is a
    distribution, and the normalisation's tensors sit under "outside" in the report."""
    torch.manual_seed(2)
    model = with_normalization(nn.GroupNorm(1, 3), relaxed=True)
    x, y = torch.randn(6, 2, 4, 4, dtype=torch.float64), torch.randint(0, K, (6,))
    la = fit_kfac(model, x, y, "classification")
    log_prior = torch.zeros(len(la.prior_precision), dtype=torch.float64, requires_grad=True)
    marglik = la.log_marginal_likelihood(prior_precision=log_prior.exp())
    (grad,) = torch.autograd.grad(marglik, log_prior)
    assert torch.isfinite(marglik) and torch.isfinite(grad).all()
    probs = la(x, pred_type="glm", link_approx="probit")
    torch.testing.assert_close(probs.sum(-1), torch.ones(6, dtype=torch.float64))
    report = symmetry_report(la)
    assert {"1.weight", "1.bias"} <= set(report["outside"])
    assert report["outside"]["1.weight"]["parameters"] == 3


def test_monte_carlo_fisher_fits_normalization_blocks():
    torch.manual_seed(3)
    model = with_normalization(nn.LayerNorm(4), relaxed=False)
    x, y = torch.randn(6, 2, 4, 4, dtype=torch.float64), torch.randint(0, K, (6,))
    la = fit_kfac(model, x, y, "classification", backend_kwargs={"stochastic": True})
    block = kron_blocks(model, la)["1.weight"]
    assert block.shape == (4, 4) and torch.linalg.eigvalsh(block).min() > -1e-12


def test_batchnorm_in_training_mode_is_refused_naming_it():
    model = with_normalization(nn.BatchNorm2d(3), relaxed=False).train()
    backend = EquivariantKFAC(model, "classification")
    x, y = torch.randn(4, 2, 4, 4, dtype=torch.float64), torch.randint(0, K, (4,))
    with pytest.raises(ValueError, match=r"BatchNorm2d '1' is in training mode.*model.eval\(\)"):
        backend.kron(x, y, N=4)


def test_batchnorm_without_running_statistics_is_refused_at_construction():
    model = nn.Sequential(nn.BatchNorm2d(2, track_running_stats=False), nn.Flatten())
    with pytest.raises(UnsupportedModuleError, match="track_running_stats=False.*GroupNorm"):
        Laplace(
            model.double(),
            "classification",
            subset_of_weights="all",
            hessian_structure="kron",
            backend=EquivariantKFAC,
        )


def test_stock_backend_keeps_asdl_batchnorm_operation():
    """laplace-torch's AsdlGGN diagonal on a BatchNorm model: ASDL's own operation, equal to
    the exact GGN's diagonal; this package's rules do not leak into it."""
    torch.manual_seed(4)
    norm = nn.BatchNorm1d(5)
    model = nn.Sequential(nn.Linear(3, 5), norm, nn.Tanh(), nn.Linear(5, K)).double().eval()
    x, y = torch.randn(8, 3, dtype=torch.float64), torch.randint(0, K, (8,))
    la = Laplace(
        model, "classification", subset_of_weights="all", hessian_structure="diag", backend=AsdlGGN
    )
    la.fit(DataLoader(TensorDataset(x, y), batch_size=8))
    exact = exact_ggn_torch_func(model, x, "classification")
    torch.testing.assert_close(la.H, exact.diagonal(), rtol=1e-10, atol=1e-12)
