"""Guards on the work of :func:`laplace_equivariance.marglik_training`, counted, not timed.

A MAP step's top-level operators and the elements it writes (the step of a two-batch epoch
less that of a one-batch epoch, so what an epoch does once cancels) and the
eigendecompositions of a run with fits.
The operator bounds are the counts measured when the guard was written (torch 2.14.1) plus
about 5 %; host reads per step and per fit are guarded in ``test_marglik.py``.
"""

from __future__ import annotations

import pytest
import torch
from laplace import Laplace
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from laplace_equivariance import EquivariantKFAC, marglik_training, models
from tests.work_counts import (
    Decompositions,
    ElementsWritten,
    factor_matrices,
    top_level_operators,
)

K = 3
STEP_OPERATORS = {"conv": 460, "f-fc+conv": 1160}

pytestmark = pytest.mark.filterwarnings(
    "ignore::laplace_equivariance.marglik.chance.NotLearningWarning"
)


def loader(n: int) -> DataLoader:
    g = torch.Generator().manual_seed(1)
    x, y = torch.randn(n, 1, 32, 32, generator=g), torch.randint(0, K, (n,), generator=g)
    return DataLoader(TensorDataset(x, y), batch_size=4)


def map_epoch(model: nn.Module, n: int, **options) -> None:
    """One MAP epoch (inside the burn-in, no fit) over ``n`` examples in batches of 4."""
    marglik_training(
        model,
        loader(n),
        n_epochs=1,
        n_epochs_burnin=2,
        final_laplace=False,
        optimizer_kwargs={"lr": 1e-3},
        **options,
    )


@pytest.mark.parametrize("name", STEP_OPERATORS)
def test_operators_per_map_step_stay_within_the_measured_bound(name):
    model = models.build(name, (1, 32, 32), K, alpha=1)
    map_epoch(model, 4)  # warm-up
    step = top_level_operators(lambda: map_epoch(model, 8)) - top_level_operators(
        lambda: map_epoch(model, 4)
    )
    assert step <= STEP_OPERATORS[name]


@pytest.mark.parametrize("structure", ["scalar", "layerwise", "path"])
def test_a_map_step_writes_about_ten_elements_per_weight(structure):
    """Adam's update and the gradients, about 10 passes over the weights; no more.

    The prior term ``theta^T diag(delta) theta`` built as laplace-torch builds it (two
    length-``P`` vectors per step, and their backward) writes 17-19 per weight; from the
    tensors' squared norms it adds one (its gradient). Measured 10.05 (torch 2.14.1); the bound
    is 10.5.
    """
    torch.manual_seed(0)
    model = nn.Sequential(nn.Flatten(), nn.Linear(1024, 300), nn.ReLU(), nn.Linear(300, K))
    weights = sum(p.numel() for p in model.parameters())

    def elements(n: int) -> int:
        with ElementsWritten() as counted:
            map_epoch(model, n, prior_structure=structure)
        return counted.elements

    elements(4)  # warm-up
    step = elements(8) - elements(4)
    assert step / weights <= 10.5


def test_a_run_decomposes_each_factor_once_per_fit_for_eigenvalues_alone():
    """Every hyperparameter step of a fit reuses its eigenvalues; no eigenvectors are made."""
    model = models.build("f-fc+conv", (1, 32, 32), K, alpha=1)
    fitted = Laplace(
        model, "classification", "all", hessian_structure="kron", backend=EquivariantKFAC
    )
    fitted.fit(loader(4))
    fits = []
    with Decompositions() as counted:
        marglik_training(
            model,
            loader(8),
            n_epochs=2,
            n_epochs_burnin=1,
            marglik_frequency=1,
            n_hypersteps=3,
            final_laplace=False,
            callback=lambda epoch, info: fits.append(info["neg_log_marglik"] is not None),
        )
    assert counted.vectors == 0
    assert counted.values == sum(fits) * factor_matrices(fitted.H_facs.kfacs)
