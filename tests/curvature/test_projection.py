"""Projected factors: the kept statistic, projected on the basis, is the rule's factor (float64).

Cases: S-FC input map (``A``, block-diagonal), S-FC output map (``B``), S-CONV (``A`` over
channels x anchors); for the exact GGN and the Monte-Carlo Fisher, over two batches.
"""

from __future__ import annotations

import pytest
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from laplace_equivariance.curvature.projection import project_factor
from laplace_equivariance.layers import SparseCircularConv2d, SparseFactoredLinear2d
from tests.curvature.reference import fit_kron

K = 3
HYPER = {"lengthscale_mode": "hyperparameter", "lengthscale": 0.8}


def sparse_model(kind: str) -> nn.Module:
    if kind == "s-fc":
        layer, features = SparseFactoredLinear2d(2, 3, 4, 2, **HYPER), 12
    else:
        layer, features = SparseCircularConv2d(2, 3, 3, size=4, **HYPER), 48
    return nn.Sequential(layer, nn.ReLU(), nn.Flatten(), nn.Linear(features, K))


@pytest.mark.parametrize("stochastic", [False, True], ids=["ggn", "mc-fisher"])
@pytest.mark.parametrize("kind", ["s-fc", "s-conv"])
def test_projected_statistic_is_the_rules_factor(kind, stochastic, device):
    model = sparse_model(kind).to(device, torch.float64)
    x = torch.randn(7, 2, 4, 4, dtype=torch.float64, device=device)
    y = torch.randint(0, K, (7,), device=device)
    la = fit_kron(
        model,
        DataLoader(TensorDataset(x, y), batch_size=4),
        backend_kwargs={"stochastic": stochastic},
    )
    records = la.backend.projected_factors
    # parameter group -> (projected side, basis): input map's A, output map's B, S-CONV's A
    if kind == "s-fc":
        expected = {0: (1, model[0].input_map.basis), 2: (0, model[0].output_map.basis)}
    else:
        expected = {0: (1, model[0].basis)}
    assert {i: (r.side, r.basis) for i, r in records.items()} == expected
    for index, record in records.items():
        factor = la.H_facs.kfacs[index][record.side]
        torch.testing.assert_close(record.factor(), factor, rtol=1e-10, atol=1e-12)


def test_other_modes_keep_no_statistic():
    model = nn.Sequential(
        SparseCircularConv2d(1, 2, 3, size=4, lengthscale_mode="fixed"),
        nn.Flatten(),
        nn.Linear(32, K),
    ).double()
    x, y = torch.randn(3, 1, 4, 4, dtype=torch.float64), torch.randint(0, K, (3,))
    la = fit_kron(model, DataLoader(TensorDataset(x, y), batch_size=3))
    assert la.backend.projected_factors == {}


def test_projection_of_grouped_and_block_statistics_is_the_dense_formula():
    phi = torch.rand(4, 2, dtype=torch.float64)
    blocks = torch.randn(3, 4, 4, dtype=torch.float64)
    dense = torch.randn(12, 12, dtype=torch.float64)  # 3 groups of the 4 positions
    torch.testing.assert_close(
        torch.block_diag(*project_factor(blocks, phi)),
        torch.block_diag(phi, phi, phi).T
        @ torch.block_diag(*blocks)
        @ torch.block_diag(phi, phi, phi),
    )
    lifted = torch.kron(torch.eye(3, dtype=torch.float64), phi)
    torch.testing.assert_close(project_factor(dense, phi), lifted.T @ dense @ lifted)
