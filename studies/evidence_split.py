"""Where a trained run's Laplace evidence goes: the data term and each path's prior and Occam terms.

The negative log marginal likelihood of Eq. 9 at a run's weights and learned precisions splits
exactly into

    -log p(D) = -log p(D | theta) + sum_t (delta_t ||theta_t||^2 / 2 + o_t),

one prior term and one Occam term ``o_t`` (:func:`laplace_equivariance.occam_terms`) per
parameter tensor ``t``. This script fits the KFAC Laplace approximation of each run as the
run fitted its marginal likelihood (on its ``--marglik-subset`` examples, at its temperature
times the subset's share), and writes the data term and, per layer and path, the sums of the
prior terms, the Occam terms and MacKay's ``gamma``; tensors outside every relaxed layer
(the head) are summed under ``outside``. Comparing two runs of the same data (learned CONV
against learned F-FC+CONV, say) says which part of the network pays for a gap in evidence: a
path that is off in the evidence pays neither term.

Usage (from the repository root):
    python -m studies.evidence_split RUN [RUN ...] \
        --out studies/results/evidence-split/NAME.json
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import torch
from torch.utils.data import DataLoader

from laplace_equivariance import effective_parameters, occam_terms
from laplace_equivariance.app.runs import load_trained
from laplace_equivariance.layers import RelaxedLayer
from laplace_equivariance.marglik.priors import parameter_paths
from studies import measured_runs
from studies.measured_runs import evidence_data, fitted_laplace, learned_precisions


def split(
    model: torch.nn.Module, loader: DataLoader, precisions: torch.Tensor, temperature: float = 1.0
) -> dict[str, Any]:
    """The evidence of ``model`` at ``precisions`` (one per tensor), split by layer and path.

    Returns:
        ``{"neg_log_marglik", "data", "layers": {layer: {path: {"prior", "occam", "gamma",
        "parameters", "weight_gamma", "weight_parameters"}}}, "outside": {the same},
        "seconds"}``; ``data`` plus every ``prior`` and ``occam`` equals ``neg_log_marglik``;
        ``weight_gamma`` and ``weight_parameters`` count the tensors named ``*weight`` alone
        (biases left out).
    """
    start = time.perf_counter()
    la = fitted_laplace(model, loader, precisions, temperature)
    gammas, occams = effective_parameters(la), occam_terms(la)
    layers: dict[str, dict[str, dict[str, float]]] = {}

    def empty() -> dict[str, float]:
        terms = {"prior": 0.0, "occam": 0.0, "gamma": 0.0, "weight_gamma": 0.0}
        return terms | {"parameters": 0, "weight_parameters": 0}

    outside = empty()
    trainable = [p for p in model.parameters() if p.requires_grad]
    places = parameter_paths(model).items()
    for k, ((name, where), p) in enumerate(zip(places, trainable, strict=True)):
        entry = (
            outside
            if where is None
            else layers.setdefault(where[0], {}).setdefault(where[1], empty())
        )
        entry["prior"] += 0.5 * precisions[k].item() * p.detach().square().sum().item()
        entry["occam"] += occams[k]
        entry["gamma"] += gammas[k]
        entry["parameters"] += p.numel()
        if name.endswith("weight"):  # the path's weights, its biases left out
            entry["weight_gamma"] += gammas[k]
            entry["weight_parameters"] += p.numel()
    return {
        "neg_log_marglik": -la.log_marginal_likelihood().item(),
        "data": -la.log_likelihood.item(),
        "layers": layers,
        "outside": outside,
        "seconds": time.perf_counter() - start,
    }


def measure(run: Path) -> dict[str, Any]:
    """The evidence split of one trained run at its learned precisions, fitted as the run's
    marginal likelihood was: on its first ``marglik_subset`` training examples (all without
    one; ``examples`` says how many) at its temperature times ``examples / N`` (the estimate
    for all ``N``), without the paths it kept frozen."""
    model, data = load_trained(run)
    results = json.loads((run / "results.json").read_text())
    for module in model.modules():  # paths a run kept frozen stay outside its Laplace fit
        if isinstance(module, RelaxedLayer):
            for name in set(results.get("frozen_paths", ())) & set(module.path_names):
                module.path(name).requires_grad_(False)
    precisions = torch.tensor(learned_precisions(model, results))
    loader, temperature = evidence_data(results, data.x_train, data.y_train)
    return {
        "run": str(run),
        "settings": results["settings"],
        "frozen_paths": results.get("frozen_paths", []),
        "examples": len(loader.dataset),
        **split(model, loader, precisions, temperature),
    }


def main() -> None:
    """Measure each run and write one JSON file."""
    args = measured_runs.parse(measured_runs.parser(__doc__.split("\n\n")[0]))
    measured = []
    for run in args.runs:
        row = measure(run)
        measured.append(row)
        paths = {
            f"{layer}.{path}": round(terms["prior"] + terms["occam"])
            for layer, by_path in row["layers"].items()
            for path, terms in by_path.items()
        }
        print(
            f"{run}: -log marglik {row['neg_log_marglik']:.0f} = data {row['data']:.0f} "
            f"+ prior and Occam per path {paths} + head "
            f"{row['outside']['prior'] + row['outside']['occam']:.0f}",
            flush=True,
        )
    measured_runs.write(args.out, args.threads, measured)


if __name__ == "__main__":
    main()
