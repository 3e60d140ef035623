"""laplace-torch's ``state_dict()`` / ``load_state_dict()`` round trip with EquivariantKFAC.

A Kron approximation saved after marginal-likelihood training and loaded into a fresh
``Laplace`` object must give the same predictive and marginal likelihood, for every model
name of :func:`laplace_equivariance.models.build` (block-diagonal F-FC/S-FC factors included).
"""

from __future__ import annotations

import pytest
import torch
from laplace import Laplace
from torch.utils.data import DataLoader, TensorDataset

from laplace_equivariance import EquivariantKFAC, marglik_training, models
from laplace_equivariance.curvature import BlockDiagonalKron

# tiny runs on random labels: at chance by design, so their NotLearningWarning says nothing
pytestmark = pytest.mark.filterwarnings(
    "ignore::laplace_equivariance.marglik.chance.NotLearningWarning"
)


def _kron(model: torch.nn.Module, **backend_kwargs) -> Laplace:
    return Laplace(
        model,
        "classification",
        subset_of_weights="all",
        hessian_structure="kron",
        backend=EquivariantKFAC,
        backend_kwargs=backend_kwargs,
    )


def _small(name: str) -> torch.nn.Module:
    if "gconv" in name:  # group convolutions need room for the rotations
        return models.build(name, (1, 4, 4), 3, alpha=1, widths=(1, 1), subsampling=(1, 2))
    return models.build(name, (1, 4, 4), 3, alpha=1, widths=(1, 2), subsampling=(1, 2))


@pytest.mark.parametrize("name", models.MODEL_NAMES)
def test_reloaded_kron_gives_the_same_predictive_and_marginal_likelihood(name, tmp_path):
    model = _small(name).double()
    x = torch.randn(24, 1, 4, 4, dtype=torch.float64)
    y = torch.randint(0, 3, (24,))
    loader = DataLoader(TensorDataset(x, y), batch_size=8)
    la, model, _, _ = marglik_training(
        model, loader, n_epochs=2, n_epochs_burnin=1, n_hypersteps=2, backend=EquivariantKFAC
    )
    torch.save(la.state_dict(), tmp_path / "la.pt")
    reloaded = _kron(model)
    reloaded.load_state_dict(torch.load(tmp_path / "la.pt", weights_only=False))
    assert isinstance(reloaded.H_facs, BlockDiagonalKron)
    for link_approx in ("probit", "bridge"):
        before = la(x[:5], pred_type="glm", link_approx=link_approx)
        after = reloaded(x[:5], pred_type="glm", link_approx=link_approx)
        torch.testing.assert_close(after, before, rtol=0, atol=1e-12)
    torch.testing.assert_close(
        reloaded.log_marginal_likelihood(), la.log_marginal_likelihood(), rtol=1e-12, atol=0
    )


def test_reloaded_block_factors_keep_their_rows(tmp_path):
    """Fitted on fewer examples than F-FC's block size, the factors' eigenvalues come from
    their rows (exact zeros); the reloaded approximation keeps them."""
    model = models.build("f-fc", (1, 4, 4), 2, alpha=1, widths=(1, 2), subsampling=(1, 2))
    x, y = torch.randn(6, 1, 4, 4), torch.randint(0, 2, (6,))
    la = _kron(model)
    la.fit(DataLoader(TensorDataset(x, y), batch_size=6))
    state = la.state_dict()
    assert any(chunks is not None for group in state["H_rows"] for chunks in group)
    reloaded = _kron(model)
    reloaded.load_state_dict(state)
    torch.testing.assert_close(reloaded.log_det_posterior_precision, la.log_det_posterior_precision)


@pytest.mark.parametrize("host_eigenvalues", [True, False])
def test_fitted_and_reloaded_factors_keep_the_backends_eigenvalue_route(host_eigenvalues):
    model = models.build("f-fc", (1, 4, 4), 2, alpha=1, widths=(1, 2), subsampling=(1, 2))
    x, y = torch.randn(6, 1, 4, 4), torch.randint(0, 2, (6,))
    la = _kron(model, host_eigenvalues=host_eigenvalues)
    la.fit(DataLoader(TensorDataset(x, y), batch_size=3))
    assert la.H_facs.host_eigenvalues is host_eigenvalues
    reloaded = _kron(model, host_eigenvalues=host_eigenvalues)
    reloaded.load_state_dict(la.state_dict())
    assert reloaded.H_facs.host_eigenvalues is host_eigenvalues


def test_the_backend_computes_eigenvalues_on_the_host_by_default():
    model = models.build("f-fc", (1, 4, 4), 2, alpha=1, widths=(1, 2), subsampling=(1, 2))
    assert _kron(model).backend.host_eigenvalues is True
