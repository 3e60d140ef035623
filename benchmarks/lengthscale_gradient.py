"""The lengthscale gradients of the marginal likelihood: accuracy and cost.

``laplace_equivariance.curvature.lengthscales.log_marginal_likelihood`` offers the total derivative
(every Kronecker factor recomputed under autograd) and a partial one (data fit and the
projected factor ``Phi(omega)^T S Phi(omega)`` only). This script prints, in float64 on
one-layer S-FC and S-CONV models (10 examples, 3 classes, seed 0), both gradients beside the
central difference (step 1e-5) of laplace-torch's marginal likelihood of Laplace
approximations refitted at ``omega +- h``; then, in float32 on the paper's network
(``--model``, alpha ``--alpha``, ``--examples`` random 32x32 images, 10 classes), the time of
one ``la.fit`` and of one marginal likelihood with its backward pass under each derivative.

Usage (from the repository root):
    python -m benchmarks.lengthscale_gradient \
        --out benchmarks/results/lengthscale_gradient-cpu.json
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import torch
from laplace import Laplace
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from benchmarks.report import environment, write
from laplace_equivariance import EquivariantKFAC, models
from laplace_equivariance.curvature.lengthscales import (
    lengthscale_hyperparameters,
    log_marginal_likelihood,
)
from laplace_equivariance.layers import SparseCircularConv2d, SparseFactoredLinear2d

K, STEP = 3, 1e-5
HYPER = {"lengthscale_mode": "hyperparameter", "lengthscale": 0.8}


def small_model(kind: str) -> nn.Module:
    if kind == "s-fc":
        layer, features = SparseFactoredLinear2d(2, 3, 4, 2, **HYPER), 12
    else:
        layer, features = SparseCircularConv2d(2, 3, 3, size=4, **HYPER), 48
    return nn.Sequential(layer, nn.ReLU(), nn.Flatten(), nn.Linear(features, K)).double()


def fit(net: nn.Module, loader: DataLoader) -> Laplace:
    la = Laplace(net, "classification", "all", hessian_structure="kron", backend=EquivariantKFAC)
    la.fit(loader)
    return la


def gradient(la: Laplace, loader: DataLoader, prior: torch.Tensor, derivative: str) -> dict:
    """Every omega's gradient of the marginal likelihood under ``derivative``."""
    omegas = lengthscale_hyperparameters(la.model)
    lml = log_marginal_likelihood(la, loader, prior, derivative=derivative)
    grads = torch.autograd.grad(lml, list(omegas.values()))
    return {name: g.item() for name, g in zip(omegas, grads, strict=True)}


def accuracy_rows() -> list[dict]:
    rows = []
    for kind in ("s-fc", "s-conv"):
        torch.manual_seed(0)
        net = small_model(kind)
        x, y = torch.randn(10, 2, 4, 4, dtype=torch.float64), torch.randint(0, K, (10,))
        loader = DataLoader(TensorDataset(x, y), batch_size=4)
        prior = torch.tensor([0.7], dtype=torch.float64)
        la = fit(net, loader)
        total, partial = (
            gradient(la, loader, prior, "total"),
            gradient(la, loader, prior, "partial"),
        )
        for name, omega in lengthscale_hyperparameters(net).items():
            start = omega.detach().clone()
            values = []
            for sign in (1, -1):
                with torch.no_grad():
                    omega.copy_(start + sign * STEP)
                values.append(fit(net, loader).log_marginal_likelihood(prior).item())
            with torch.no_grad():
                omega.copy_(start)
            row = {
                "case": f"{kind} {name}",
                "refit central difference": (values[0] - values[1]) / (2 * STEP),
                "total (autograd)": total[name],
                "partial": partial[name],
            }
            rows.append(row)
            print("  ".join(f"{k}: {v:.4f}" if isinstance(v, float) else v for k, v in row.items()))
    return rows


def seconds(function) -> float:
    start = time.perf_counter()
    function()
    return time.perf_counter() - start


def cost_row(name: str, alpha: int, examples: int) -> dict:
    torch.manual_seed(0)
    net = models.build(name, (1, 32, 32), 10, alpha=alpha, sparse_options=HYPER)
    x, y = torch.randn(examples, 1, 32, 32), torch.randint(0, 10, (examples,))
    loader = DataLoader(TensorDataset(x, y), batch_size=min(examples, 128))
    prior = torch.ones(len(list(net.parameters())))
    lengthscale_hyperparameters(net)
    row = {"model": name, "alpha": alpha, "examples": examples}
    row["la.fit seconds"] = seconds(lambda: fit(net, loader))
    la = fit(net, loader)
    for derivative in ("partial", "total"):
        row[f"{derivative} lml + gradient seconds"] = seconds(
            lambda d=derivative: gradient(la, loader, prior, d)
        )
    print(
        "  ".join(f"{k}: {v:.2f}" if isinstance(v, float) else f"{k}: {v}" for k, v in row.items())
    )
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--model", nargs="+", default=["s-conv", "s-fc+s-conv"])
    parser.add_argument("--alpha", type=int, default=2)
    parser.add_argument("--examples", type=int, default=256)
    args = parser.parse_args()
    rows = accuracy_rows()
    costs = [cost_row(name, args.alpha, args.examples) for name in args.model]
    write(
        {
            "environment": environment("-m benchmarks.lengthscale_gradient", "cpu"),
            "rows": rows,
            "cost": costs,
        },
        args.out,
    )


if __name__ == "__main__":
    main()
