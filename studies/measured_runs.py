"""What the scripts that measure trained runs share: the command line, the output file, and
a run's learned precisions and Laplace approximation fitted as the run fitted its evidence.

``factor_balance.py``, ``shift_errors.py`` and ``evidence_split.py`` each take ``--out``
folders of ``train`` runs and write one JSON file ``{"device", "threads", "runs": [...]}``
(the form ``studies/measured_tables.py`` renders).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import torch
from laplace import Laplace
from torch.utils.data import DataLoader, TensorDataset

from laplace_equivariance import EquivariantKFAC
from laplace_equivariance.app.experiment import device_name
from laplace_equivariance.marglik.priors import parameter_paths


def parser(description: str) -> argparse.ArgumentParser:
    """A parser taking the runs, ``--out`` and ``--threads`` (add a script's own options)."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("runs", type=Path, nargs="+", help="--out folders of learned runs")
    parser.add_argument("--out", type=Path, required=True, help="JSON file to write")
    parser.add_argument("--threads", type=int, default=1)
    return parser


def parse(parser: argparse.ArgumentParser) -> argparse.Namespace:
    """The parsed arguments, with torch's CPU threads set to ``--threads``."""
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    return args


def write(out: Path, threads: int, measured: list[dict[str, Any]]) -> None:
    """Write the measurements of every run, with the CPU and thread count, to ``out``."""
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(
        json.dumps({"device": device_name("cpu"), "threads": threads, "runs": measured}, indent=1)
    )


def learned_precisions(model: torch.nn.Module, results: dict[str, Any]) -> list[float]:
    """One prior precision per trainable tensor, from a run's symmetry report.

    In ``model.parameters()`` order.
    """
    layers = {row["layer"]: row["paths"] for row in results["symmetry"]["layers"]}
    seen: dict[tuple[str, str], int] = {}
    precisions = []
    for name, where in parameter_paths(model).items():
        if where is None:
            precisions.append(results["symmetry"]["outside"][name]["prior_precision"])
            continue
        index = seen.get(where, 0)
        seen[where] = index + 1
        precisions.append(layers[where[0]][where[1]]["prior_precision"][index])
    return precisions


def fitted_laplace(
    model: torch.nn.Module, loader: DataLoader, precisions: torch.Tensor, temperature: float = 1.0
) -> Laplace:
    """The KFAC Laplace approximation of a learned run (one precision per tensor), fitted.

    ``temperature``: laplace-torch's; a run whose evidence was fitted on ``n`` of its ``N``
    examples used its own temperature times ``n / N``
    (:mod:`~laplace_equivariance.marglik.training`).
    """
    la = Laplace(
        model,
        "classification",
        subset_of_weights="all",
        hessian_structure="kron",
        backend=EquivariantKFAC,
        prior_precision=precisions.clone(),
        temperature=temperature,
    )
    la.fit(loader)
    return la


def evidence_data(
    results: dict[str, Any], x: torch.Tensor, y: torch.Tensor
) -> tuple[DataLoader, float]:
    """What a run's own evidence was fitted on: the first ``marglik_subset`` of its ``N``
    training examples ``x, y`` (all without one), batched, and the temperature, its own times
    ``n / N`` (the estimate for all ``N``, as
    :mod:`laplace_equivariance.marglik.training` fits it)."""
    settings = results["settings"]
    n = settings.get("marglik_subset") or len(x)
    temperature = settings.get("temperature", 1.0) * n / len(x)
    return DataLoader(TensorDataset(x[:n], y[:n]), batch_size=128), temperature
