"""batch_factors recomputes EquivariantKFAC's factors under autograd (float64).

Summed over batches (``A`` divided by ``N``), they must equal the factors of ``la.fit`` for
every rule: our layers, hyperparameter and learned S-layer bases, stock ``nn.Conv2d`` and
``nn.Linear``. Both sides sum the same products in a different order, so agreement is to
rounding (``rtol = 1e-10``).
"""

from __future__ import annotations

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from laplace_equivariance.curvature.differentiable import batch_factors
from laplace_equivariance.curvature.kron import densify
from laplace_equivariance.curvature.lengthscales import lengthscale_hyperparameters
from laplace_equivariance.layers import (
    FactoredLinear2d,
    FullyConnected2d,
    P4GroupConv2d,
    P4LiftingConv2d,
    P4PointwiseConv2d,
    SparseCircularConv2d,
    SparseFactoredLinear2d,
)
from laplace_equivariance.layers.conv import CircularConv2d
from tests.curvature.reference import fit_kron

K = 3
HYPER = {"lengthscale_mode": "hyperparameter", "lengthscale": 0.8}


def every_rule() -> nn.Module:
    """(N, 2, 4, 4) -> (N, K) through every rule, two bases with a hyperparameter omega.

    Tanh activations: with ReLUs some initialisations leave a layer dead for every example,
    and then no derivative reaches the layers before it. In evaluation mode (BatchNorm's
    per-example curvature needs its running statistics).
    """
    return nn.Sequential(
        SparseCircularConv2d(2, 2, 3, size=4, **HYPER),
        nn.GroupNorm(1, 2),
        nn.Tanh(),
        CircularConv2d(2, 2, 3, size=4),
        nn.Tanh(),
        P4LiftingConv2d(2, 1, 3, size=4),
        nn.Tanh(),
        P4PointwiseConv2d(1, 1, 3, size=4),
        nn.Tanh(),
        P4GroupConv2d(1, 1, 3, size=4),
        nn.Tanh(),
        FactoredLinear2d(4, 2, 4, 2),
        nn.Tanh(),
        SparseFactoredLinear2d(2, 2, 2, 2, **HYPER),
        nn.Tanh(),
        SparseFactoredLinear2d(2, 2, 2, 2),
        nn.Tanh(),
        FullyConnected2d(2, 2, 2, 2),
        nn.BatchNorm2d(2),
        nn.Tanh(),
        nn.Conv2d(2, 2, 3, padding=1),
        nn.Tanh(),
        nn.Flatten(),
        nn.LayerNorm(8),
        nn.Linear(8, K),
    ).eval()


def test_batch_factors_sum_to_the_fitted_factors(device):
    torch.manual_seed(0)
    model = every_rule().to(device, torch.float64)
    for omega in lengthscale_hyperparameters(model).values():
        omega.requires_grad_(True)
    x = torch.randn(7, 2, 4, 4, dtype=torch.float64, device=device)
    y = torch.randint(0, K, (7,), device=device)
    loader = DataLoader(TensorDataset(x, y), batch_size=3)
    la = fit_kron(model, loader)
    summed = None
    for xb, _ in loader:
        factors = batch_factors(la.backend, xb, len(x))
        summed = (
            factors
            if summed is None
            else [
                [s + f for s, f in zip(gs, gf, strict=True)]
                for gs, gf in zip(summed, factors, strict=True)
            ]
        )
    names = [n for n, p in model.named_parameters() if p.requires_grad]
    assert len(summed) == len(la.H_facs.kfacs) == len(names)
    for name, ours, fitted in zip(names, summed, la.H_facs.kfacs, strict=True):
        assert len(ours) == len(fitted), name
        for side, (a, b) in enumerate(zip(ours, fitted, strict=True)):
            scale = b.abs().max().item()
            torch.testing.assert_close(
                densify(a.detach()),
                densify(b),
                rtol=1e-10,
                atol=1e-12 * scale,
                msg=f"{name}[{side}]",
            )
    # the graph reaches both hyperparameters (through the projected factors and the network)
    omegas = list(lengthscale_hyperparameters(model).values())
    total = sum(f.sum() for group in factors for f in group)
    assert all(g is not None and g.abs() > 0 for g in torch.autograd.grad(total, omegas))
