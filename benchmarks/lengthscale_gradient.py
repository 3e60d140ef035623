"""How far the lengthscale gradient is from the total derivative of a refitted KFAC marglik.

``laplace_equivariance.lengthscales.log_marginal_likelihood`` differentiates the data fit and
the projected factor ``Phi(omega)^T S Phi(omega)`` with the statistics ``S``, the other
factors and all other blocks held at their fitted values (docs/curvature.md). The total
derivative of laplace-torch's marginal likelihood when the whole Laplace approximation is
refitted at every omega also contains the dependence of all layers' activations, output
gradients and output Hessians on omega. This script prints both, the latter by central
differences of refits, on one-layer S-FC and S-CONV models in float64 (10 examples, 3
classes, seed 0), and the part recovered by refitting only the ``A`` or only the ``B``
factors.

Usage:
    python benchmarks/lengthscale_gradient.py [--out benchmarks/results/lengthscale_gradient.json]
"""

from __future__ import annotations

import argparse
from pathlib import Path

import torch
from laplace import Laplace
from report import environment, write
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from laplace_equivariance import EquivariantKFAC
from laplace_equivariance.curvature.kron import BlockDiagonalKron
from laplace_equivariance.layers import SparseCircularConv2d, SparseFactoredLinear2d
from laplace_equivariance.lengthscales import lengthscale_hyperparameters, log_marginal_likelihood

K, STEP = 3, 1e-5
HYPER = {"lengthscale_mode": "hyperparameter", "lengthscale": 0.8}


def model(kind: str) -> nn.Module:
    if kind == "s-fc":
        layer, features = SparseFactoredLinear2d(2, 3, 4, 2, **HYPER), 12
    else:
        layer, features = SparseCircularConv2d(2, 3, 3, size=4, **HYPER), 48
    return nn.Sequential(layer, nn.ReLU(), nn.Flatten(), nn.Linear(features, K)).double()


def fit(net: nn.Module, loader: DataLoader) -> Laplace:
    la = Laplace(net, "classification", "all", hessian_structure="kron", backend=EquivariantKFAC)
    la.fit(loader)
    return la


def refitted_lml(la0: Laplace, la: Laplace, prior: torch.Tensor, refit: tuple[int, ...]) -> float:
    """Marglik with the Kron factors ``refit`` (0: B, 1: A) from ``la``, the rest from ``la0``."""
    kfacs = [
        [new if side in refit else old for side, (old, new) in enumerate(zip(g0, g, strict=True))]
        if len(g) == 2
        else (g if refit == (0, 1) else g0)
        for g0, g in zip(la0.H_facs.kfacs, la.H_facs.kfacs, strict=True)
    ]
    posterior = BlockDiagonalKron(kfacs).decompose() * (1 / la.temperature) + prior
    la.prior_precision = prior
    scatter_and_prior = la.scatter - la.log_det_prior_precision
    return (la.log_likelihood - 0.5 * (posterior.logdet() + scatter_and_prior)).item()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    rows = []
    for kind in ("s-fc", "s-conv"):
        torch.manual_seed(0)
        net = model(kind)
        x, y = torch.randn(10, 2, 4, 4, dtype=torch.float64), torch.randint(0, K, (10,))
        loader = DataLoader(TensorDataset(x, y), batch_size=4)
        prior = torch.tensor([0.7], dtype=torch.float64)
        omegas = lengthscale_hyperparameters(net)
        la0 = fit(net, loader)
        log_marginal_likelihood(la0, loader, prior).backward()
        for name, omega in omegas.items():
            start = omega.detach().clone()
            values: dict[str, list[float]] = {"total": [], "A refitted": [], "B refitted": []}
            for sign in (1, -1):
                with torch.no_grad():
                    omega.copy_(start + sign * STEP)
                la = fit(net, loader)
                values["total"].append(refitted_lml(la0, la, prior, (0, 1)))
                values["A refitted"].append(refitted_lml(la0, la, prior, (1,)))
                values["B refitted"].append(refitted_lml(la0, la, prior, (0,)))
            with torch.no_grad():
                omega.copy_(start)
            row = {"case": f"{kind} {name}", "defined gradient": omega.grad.item()}
            row.update({k: (v[0] - v[1]) / (2 * STEP) for k, v in values.items()})
            rows.append(row)
            print("  ".join(f"{k}: {v:.4f}" if isinstance(v, float) else v for k, v in row.items()))
    write({"environment": environment(__file__, "cpu"), "rows": rows}, args.out)


if __name__ == "__main__":
    main()
