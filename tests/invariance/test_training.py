"""The invariant-weights trainer: every objective runs, records, and moves eta as it should."""

from __future__ import annotations

import pytest
import torch
from torch.utils.data import DataLoader, TensorDataset

from laplace_equivariance.invariance.network import InvariantWeightsNet
from laplace_equivariance.invariance.training import train_invariant_weights


def _loader() -> DataLoader:
    x = torch.randn(32, 1, 6, 6)
    return DataLoader(TensorDataset(x, torch.arange(32) % 3), batch_size=16)


def _net(objective: str) -> InvariantWeightsNet:
    return InvariantWeightsNet((1, 6, 6), 3, width=8, n_samples=4, variational=objective == "elbo")


@pytest.mark.parametrize("objective", ["elbo", "laplace", "likelihood"])
def test_each_objective_trains_and_records_every_epoch(objective):
    net, seen = _net(objective), []
    history = train_invariant_weights(
        net, _loader(), objective, n_epochs=3, lr=0.01, callback=lambda e, i: seen.append(e)
    )
    assert seen == [1, 2, 3]
    assert len(history.eta) == len(history.loss) == len(history.objective) == 3
    assert all(v is not None for v in history.objective)
    assert history.eta[-1] != pytest.approx([0.1])
    assert (history.prior_precision[-1] is not None) == (objective == "laplace")


def test_laplace_keeps_eta_out_of_the_weight_steps_until_burn_in_ends():
    net = _net("laplace")
    history = train_invariant_weights(
        net, _loader(), "laplace", n_epochs=3, n_epochs_burnin=2, lr=0.05
    )
    assert history.eta[0] == history.eta[1] == pytest.approx([0.1])
    assert history.objective[:2] == [None, None]
    assert history.eta[2] != pytest.approx([0.1])
    assert history.prior_precision[2] != pytest.approx(1.0)


def test_unknown_objective_raises():
    with pytest.raises(ValueError, match="objective"):
        train_invariant_weights(_net("elbo"), _loader(), "evidence")
