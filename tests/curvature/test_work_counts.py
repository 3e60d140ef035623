"""Guards that fail when a fit, a prior optimisation or a predictive does more work than it must.

Each test counts work (eigendecompositions, backward passes, top-level operators; host reads
are counted in ``test_backend.py`` and ``test_marglik.py``) instead of timing it, so that a
change that doubles the work fails ``make test`` on any machine. The bounds on operator
counts are the counts measured when the guard was written (torch 2.14.1) plus about 5 %:
lower them when a change removes work; a change that adds work must justify a new bound.
"""

from __future__ import annotations

import pytest
import torch
from laplace import Laplace
from torch.utils.data import DataLoader, TensorDataset

from laplace_equivariance import models
from tests.curvature.test_backend import kron_laplace as laplace_of
from tests.work_counts import (
    BackwardPasses,
    Decompositions,
    factor_matrices,
    top_level_operators,
)

K = 3
IN_SHAPE = (1, 32, 32)

# top-level aten operators of a fit over two batches of four (alpha 1), measured + ~5 %
FIT_OPERATORS = {
    ("conv", "exact"): 1700,
    ("conv", "mc"): 1380,
    ("f-fc+conv", "exact"): 4200,
    ("f-fc+conv", "mc"): 3250,
}
FIT_OPTIONS = {"exact": {}, "mc": {"stochastic": True}}


@pytest.fixture
def loader() -> DataLoader:
    x, y = torch.randn(8, *IN_SHAPE), torch.randint(0, K, (8,))
    return DataLoader(TensorDataset(x, y), batch_size=4)


def kron_laplace(name: str, **backend_kwargs) -> Laplace:
    """An unfitted Kron approximation of the paper's network ``name`` at width 1."""
    model = models.build(name, IN_SHAPE, K, alpha=1)
    return laplace_of(model, backend_kwargs=backend_kwargs)


@pytest.mark.parametrize("fit", FIT_OPTIONS)
def test_a_block_diagonal_fit_decomposes_each_factor_once_for_eigenvalues_alone(loader, fit):
    la = kron_laplace("f-fc+conv", **FIT_OPTIONS[fit])
    with Decompositions() as counted:
        la.fit(loader)
    assert counted.vectors == 0
    assert counted.values == factor_matrices(la.H_facs.kfacs)


def test_a_dense_fit_is_laplace_torchs_one_eigh_per_factor(loader):
    la = kron_laplace("conv")
    with Decompositions() as counted:
        la.fit(loader)
    assert (counted.vectors, counted.values) == (factor_matrices(la.H_facs.kfacs), 0)


@pytest.mark.parametrize("name", ["conv", "f-fc+conv"])
def test_prior_optimisation_decomposes_nothing(loader, name):
    la = kron_laplace(name)
    la.fit(loader)
    with Decompositions() as counted:
        la.optimize_prior_precision(method="marglik", n_steps=3, prior_structure="layerwise")
        la.log_marginal_likelihood(torch.full_like(la.prior_precision, 2.0))
    assert (counted.vectors, counted.values) == (0, 0)


def test_the_predictive_decomposes_each_factor_once_per_fit(loader):
    """The eigenvectors of a fit are computed at the first predictive and reused by every later
    call, at any prior precision, until the next fit; none of it recomputes eigenvalues."""
    la = kron_laplace("f-fc+conv")
    la.fit(loader)
    x = next(iter(loader))[0][:2]
    n_factors = factor_matrices(la.H_facs.kfacs)
    counts = []
    for prior_precision in (1.0, 1.0, 3.0):
        la.prior_precision = prior_precision
        with Decompositions() as counted:
            la(x, pred_type="glm", link_approx="probit")
        counts.append((counted.vectors, counted.values))
    assert counts == [(n_factors, 0), (0, 0), (0, 0)]
    la.fit(loader)
    with Decompositions() as counted:
        la(x, pred_type="glm", link_approx="probit")
        la(x, pred_type="glm", link_approx="probit")
    assert (counted.vectors, counted.values) == (n_factors, 0)


def test_a_reloaded_approximation_decomposes_once(loader):
    la = kron_laplace("f-fc+conv")
    la.fit(loader)
    reloaded = kron_laplace("f-fc+conv")
    with Decompositions() as counted:
        reloaded.load_state_dict(la.state_dict())
        x = next(iter(loader))[0][:2]
        reloaded(x, pred_type="glm", link_approx="probit")
        reloaded(x, pred_type="glm", link_approx="probit")
    n_factors = factor_matrices(la.H_facs.kfacs)
    assert (counted.vectors, counted.values) == (n_factors, n_factors)


@pytest.mark.parametrize(
    ("backend_kwargs", "passes_per_batch"),
    [
        ({}, K - 1),  # the exact GGN: one pass per class but the last
        ({"batched_classes": True}, 1),  # the K - 1 columns in one pass over K - 1 copies
        ({"stochastic": True}, 1),
        ({"stochastic": True, "n_mc_samples": 3}, 3),
    ],
)
def test_class_passes_per_fitted_batch(loader, backend_kwargs, passes_per_batch):
    la = kron_laplace("f-fc+conv", **backend_kwargs)
    with BackwardPasses() as counted:
        la.fit(loader)
    assert counted.passes == len(loader) * passes_per_batch


@pytest.mark.parametrize(("name", "fit"), list(FIT_OPERATORS))
def test_operators_per_fit_stay_within_the_measured_bound(loader, name, fit):
    la = kron_laplace(name, **FIT_OPTIONS[fit])
    la.fit(loader)  # warm-up: one-time initialisation stays out of the count
    assert top_level_operators(lambda: la.fit(loader)) <= FIT_OPERATORS[name, fit]
