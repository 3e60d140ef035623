"""Marginal-likelihood training time as a ratio to MAP training of the same model (issue 5).

Both runs use :func:`laplace_equivariance.marglik_training` on the same data, model and
schedule; MAP is the same call with the burn-in past the last epoch and no final Laplace fit.
The paper's schedule: marginal likelihood every 5 epochs (here from epoch 5), on the full
training set. Targets: <= 2.2x with the exact GGN, <= 1.5x with the Monte-Carlo Fisher.
Weights train in batches of 128; the Laplace fits use the same batches unless
``--marglik-batch-size`` gives their own (the fit does not depend on it, only its time).

Usage (from the repository root):
    python -m benchmarks.marglik_speed [--model f-fc+conv] [--alpha 4] [--n 2048]
        [--epochs 10] [--classes 10] [--marglik-batch-size 128]
        [--out benchmarks/results/marglik_speed-cpu.json]
"""

from __future__ import annotations

import time

import torch
from torch.utils.data import DataLoader, TensorDataset

from benchmarks.report import benchmark_parser, environment, write
from laplace_equivariance import models
from laplace_equivariance.marglik.training import marglik_training, paper_schedule


def timed(args, learn: bool, stochastic: bool = False) -> float:
    torch.manual_seed(0)
    model = models.build(args.model, (1, 32, 32), args.classes, alpha=args.alpha).to(args.device)
    g = torch.Generator().manual_seed(0)
    x = torch.randn(args.n, 1, 32, 32, generator=g).to(args.device)
    y = torch.randint(0, args.classes, (args.n,), generator=g).to(args.device)
    loader = DataLoader(TensorDataset(x, y), batch_size=128, shuffle=True)
    marglik_loader = DataLoader(TensorDataset(x, y), batch_size=args.marglik_batch_size)
    start = time.perf_counter()
    schedule = paper_schedule(args.epochs, len(loader)) | {
        "n_epochs_burnin": 5 if learn else args.epochs + 1,
        "n_hypersteps": 20,
    }
    marglik_training(
        model,
        loader,
        **schedule,
        stochastic=stochastic,
        marglik_loader=marglik_loader,
        progress_bar=False,
        final_laplace=False,
    )
    if args.device == "cuda":
        torch.cuda.synchronize()
    return time.perf_counter() - start


def main() -> None:
    parser = benchmark_parser(__doc__)
    parser.add_argument("--model", default="f-fc+conv")
    parser.add_argument("--alpha", type=int, default=4)
    parser.add_argument("--n", type=int, default=2048)
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--classes", type=int, default=10)
    parser.add_argument("--marglik-batch-size", type=int, default=128)
    args = parser.parse_args()
    map_s = timed(args, learn=False)
    exact_s = timed(args, learn=True)
    mc_s = timed(args, learn=True, stochastic=True)
    report = {
        **environment("-m benchmarks.marglik_speed", args.device),
        "arguments": vars(args) | {"out": str(args.out)},
        "map_s": map_s,
        "exact_ggn_s": exact_s,
        "mc_fisher_s": mc_s,
        "exact_over_map": exact_s / map_s,
        "mc_over_map": mc_s / map_s,
    }
    print(
        f"MAP {map_s:.1f}s, marglik exact GGN {exact_s:.1f}s ({exact_s / map_s:.2f}x), "
        f"MC Fisher {mc_s:.1f}s ({mc_s / map_s:.2f}x)"
    )
    write(report, args.out)


if __name__ == "__main__":
    main()
