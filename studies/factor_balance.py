"""How a trained run's Laplace evidence depends on how its F-FC products are split.

Every F-FC channel pair computes with the product of its two factors only, so rescaling them
by ``s`` and ``1 / s`` keeps the network's function; at a mode of the posterior (Eq. 9) each
pair's two prior terms are equal (:meth:`FactoredLinear2d.balance_`). This script takes a
trained learned run (its ``model.pt`` and learned precisions), fits the KFAC Laplace
approximation as the run fitted its evidence, and reports per layer and path MacKay's
effective parameters ``gamma``, the prior term ``sum delta ||theta||^2`` and the marginal
likelihood's gradient in each tensor's log precision ``(gamma - delta ||theta||^2) / 2``;
then balances every pair under the learned precisions (the function changes by rounding
only) and reports the same again. Before: where training left the factors; after: where a
mode along these symmetries is.

Usage (from the repository root):
    python -m studies.factor_balance RUN [RUN ...] --out benchmarks/results/factor-balance.json
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import torch
from torch.utils.data import DataLoader

from laplace_equivariance import effective_parameters
from laplace_equivariance.app.runs import load_trained
from laplace_equivariance.layers import FactoredLinear2d
from laplace_equivariance.marglik.priors import parameter_paths
from studies import measured_runs
from studies.measured_runs import evidence_data, fitted_laplace, learned_precisions


def evidence(
    model: torch.nn.Module, loader: DataLoader, precisions: torch.Tensor, temperature: float = 1.0
) -> dict[str, Any]:
    """The log marginal likelihood, and per layer and path gamma and the prior term.

    Also the marginal likelihood's gradient in each of the path's tensors' log precision.
    """
    start = time.perf_counter()
    la = fitted_laplace(model, loader, precisions, temperature)
    gammas = effective_parameters(la)
    squares = [p.detach().square().sum().item() for p in model.parameters()]
    layers: dict[str, dict[str, dict[str, Any]]] = {}
    for k, where in enumerate(parameter_paths(model).values()):
        if where is None:
            continue
        entry = layers.setdefault(where[0], {}).setdefault(
            where[1], {"gamma": 0.0, "prior_term": 0.0, "log_precision_gradient": []}
        )
        term = precisions[k].item() * squares[k]
        entry["gamma"] += gammas[k]
        entry["prior_term"] += term
        entry["log_precision_gradient"].append(0.5 * (gammas[k] - term))
    return {
        "log_marglik": la.log_marginal_likelihood().item(),
        "seconds": time.perf_counter() - start,
        "layers": layers,
    }


def balance(model: torch.nn.Module, precisions: torch.Tensor) -> None:
    """Balance every F-FC channel pair under the given per-tensor precisions."""
    index = {id(p): k for k, p in enumerate(model.parameters())}
    for module in model.modules():
        if isinstance(module, FactoredLinear2d):
            module.balance_(
                precisions[index[id(module.output_map.weight)]],
                precisions[index[id(module.input_map.weight)]],
            )


def measure(run: Path) -> dict[str, Any]:
    """Evidence of one run before and after balancing."""
    model, data = load_trained(run)
    results = json.loads((run / "results.json").read_text())
    precisions = torch.tensor(learned_precisions(model, results))
    loader, temperature = evidence_data(results, data.x_train, data.y_train)
    before = evidence(model, loader, precisions, temperature)
    probe = data.x_train[:256]
    with torch.no_grad():
        outputs = model(probe)
        balance(model, precisions)
        change = (model(probe) - outputs).abs().max().item()
    return {
        "run": run.name,
        "settings": results["settings"],
        "before": before,
        "after": evidence(model, loader, precisions, temperature),
        "max_output_change": change,
    }


def main() -> None:
    """Measure each run and write one JSON file."""
    args = measured_runs.parse(measured_runs.parser(__doc__.split("\n\n")[0]))
    measured = []
    for run in args.runs:
        measured.append(measure(run))
        row = measured[-1]
        print(
            f"{run.name}: log marglik {row['before']['log_marglik']:.1f} -> "
            f"{row['after']['log_marglik']:.1f} at the learned precisions",
            flush=True,
        )
    measured_runs.write(args.out, args.threads, measured)


if __name__ == "__main__":
    main()
