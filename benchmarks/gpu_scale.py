"""Table 1 at 60,000 images: seconds per epoch and per marginal-likelihood fit, extrapolated.

Issue 41's last target: a learned F-FC+CONV run of 100 epochs on 60,000 quadrant
Fashion-MNIST images in at most 10 minutes on one H100 or H200, the paper's 1,000-epoch
schedule in at most 1.5 hours. Speed does not depend on the pixel values, so the inputs are
random, of Table 1's shape (the 56x56 canvas resized to 1x32x32, App. F.5), held on the device
as the command line holds them (245 MB in float32).

Each run is :func:`laplace_equivariance.marglik_training` with the paper's schedule
(:func:`~laplace_equivariance.marglik.schedule.paper_schedule`: Adam, cosine learning rate, 20
hyperparameter steps per fit) for ``--epochs`` epochs, the shuffled training loader of the
command line (:func:`~laplace_equivariance.data.tensor_batches.batch_loader`), timed epoch by
epoch through its callback:

- MAP runs (the stock CNN of :mod:`benchmarks.gpu_speed`, CONV, F-FC+CONV): an epoch is
  the last epoch's seconds (the first also holds one-time costs: kernel selection, caches);
- learned F-FC+CONV, on the (item, quadrant) task (40 classes, Monte-Carlo Fisher, as
  Table 1's command line runs it) and on the item task (10 classes, exact GGN): one fit
  (on all N examples, then 20 hyperparameter steps) at the last epoch; the fit's seconds are
  that epoch's less the epoch before.

A learned run of E epochs with the paper's schedule (burn-in 10, a fit every 5) costs
``E * epoch + fits(E) * fit`` (:func:`~laplace_equivariance.marglik.schedule.marglik_step_epochs`):
extrapolated, not run, to E = 100 and 1,000. With ``--compile-mode`` the MAP steps run
through ``torch.compile`` (:func:`marglik_training`'s ``compile_kwargs``): the first epoch
then also compiles, and the epochs measured come after it. The time of one pass of the
training loader alone (a batch at a time, :mod:`laplace_equivariance.data.tensor_batches`) is
measured beside it, and that of ``DataLoader``'s example-by-example fetch and collation over
the same tensors.

Usage (from the repository root):
    python -m benchmarks.gpu_scale [--device cuda] [--n 60000] [--epochs 3]
        [--runs stock-cnn conv f-fc+conv-mc f-fc+conv-exact]
        [--compile-mode reduce-overhead] [--out FILE.json]
"""

from __future__ import annotations

import time

import torch
from torch.utils.data import DataLoader, TensorDataset

from benchmarks.gpu_speed import STOCK, stock_cnn
from benchmarks.report import benchmark_parser, environment, write
from benchmarks.timing import synchronise
from laplace_equivariance import marglik_training, models
from laplace_equivariance.data.tensor_batches import BatchedTensorDataset, batch_loader
from laplace_equivariance.marglik.schedule import marglik_step_epochs, paper_schedule

SHAPE = (1, 32, 32)
"""Quadrant (Fashion-)MNIST's input: a 28x28 image in one quadrant of a 56x56 canvas, resized."""

RUNS = {
    STOCK: (STOCK, 40, False, False),
    "conv": ("conv", 40, False, False),
    "f-fc+conv-map": ("f-fc+conv", 40, False, False),
    "f-fc+conv-mc": ("f-fc+conv", 40, True, True),
    "f-fc+conv-exact": ("f-fc+conv", 10, True, False),
}
"""Run name: (model, classes, learned, Monte-Carlo Fisher)."""

PAPER_BURNIN, PAPER_FREQUENCY = 10, 5
"""The paper's schedule (App. F.6): the first fit after 10 epochs, then one every 5."""


def loader(n: int, classes: int, batch: int, device: str) -> DataLoader:
    """``n`` random images of Table 1's shape and labels on ``device``, shuffled batches
    fetched a batch at a time, as the command line's
    (:func:`~laplace_equivariance.data.tensor_batches.batch_loader`)."""
    g = torch.Generator().manual_seed(0)
    x = torch.randn(n, *SHAPE, generator=g).to(device)
    y = torch.randint(0, classes, (n,), generator=g).to(device)
    return batch_loader(BatchedTensorDataset(x, y), batch, shuffle=True)


def loader_pass_s(data: DataLoader, device: str) -> float:
    """Seconds of one pass over ``data`` that only touches each batch."""
    synchronise(device)
    start = time.perf_counter()
    for x, _ in data:
        x.sum()
    synchronise(device)
    return time.perf_counter() - start


def run(name: str, args, device: str) -> dict:
    """One run's epoch seconds, its epoch and fit, and the extrapolated 100 and 1,000 epochs."""
    model_name, classes, learned, stochastic = RUNS[name]
    torch.manual_seed(0)
    if model_name == STOCK:
        model = stock_cnn(SHAPE[0], classes, args.alpha)
    else:
        model = models.build(model_name, SHAPE, classes, alpha=args.alpha)
    model = model.to(device)
    data = loader(args.n, classes, args.batch, device)
    schedule = paper_schedule(
        args.epochs,
        len(data),
        marglik=learned,
        n_epochs_burnin=args.epochs,
        marglik_frequency=args.epochs,
    )
    ends: list[float] = []

    def stamp(epoch: int, info: dict) -> None:
        synchronise(device)
        ends.append(time.perf_counter())

    synchronise(device)
    start = time.perf_counter()
    marglik_training(
        model,
        data,
        **schedule,
        stochastic=stochastic,
        callback=stamp,
        final_laplace=False,
        compile_kwargs=None if args.compile_mode is None else {"mode": args.compile_mode},
    )
    epochs_s = [b - a for a, b in zip([start, *ends[:-1]], ends, strict=True)]
    row = {
        "run": name,
        "model": model_name,
        "classes": classes,
        "learned": learned,
        "stochastic": stochastic,
        "epochs_s": epochs_s,
    }
    if learned:
        row["epoch_s"] = epochs_s[-2]
        row["fit_s"] = epochs_s[-1] - epochs_s[-2]
        for total in (100, 1000):
            fits = len(marglik_step_epochs(total, PAPER_BURNIN, PAPER_FREQUENCY))
            row[f"epochs_{total}_min"] = (total * row["epoch_s"] + fits * row["fit_s"]) / 60
    else:
        row["epoch_s"] = epochs_s[-1]
        row["epochs_100_min"] = 100 * row["epoch_s"] / 60
    return row


def main() -> None:
    parser = benchmark_parser(__doc__)
    parser.add_argument("--n", type=int, default=60000)
    parser.add_argument("--batch", type=int, default=128)
    parser.add_argument("--alpha", type=int, default=10)
    parser.add_argument("--epochs", type=int, default=3, help="the fit ends the last one")
    parser.add_argument("--runs", nargs="+", choices=list(RUNS), default=list(RUNS))
    parser.add_argument(
        "--compile-mode",
        dest="compile_mode",
        choices=["default", "reduce-overhead", "max-autotune-no-cudagraphs"],
        help="MAP steps through torch.compile in this mode (marglik_training's compile_kwargs)",
    )
    args = parser.parse_args()
    if args.epochs < 2:
        parser.error("--epochs must be at least 2: the fit's seconds are its epoch's less one")
    report = {
        **environment("-m benchmarks.gpu_scale", args.device),
        "n": args.n,
        "shape": list(SHAPE),
        "batch": args.batch,
        "alpha": args.alpha,
        "epochs": args.epochs,
        "compile_mode": args.compile_mode,
        "paper_schedule": {"burnin": PAPER_BURNIN, "frequency": PAPER_FREQUENCY},
        "rows": [],
    }
    data = loader(args.n, 40, args.batch, args.device)
    per_example = DataLoader(TensorDataset(*data.dataset.tensors), args.batch, shuffle=True)
    loader_pass_s(data, args.device)
    report["loader_pass_s"] = loader_pass_s(data, args.device)
    report["per_example_loader_pass_s"] = loader_pass_s(per_example, args.device)
    print(
        f"one pass of the loader alone: {report['loader_pass_s']:.2f} s (example by example "
        f"{report['per_example_loader_pass_s']:.2f} s)",
        flush=True,
    )
    del data, per_example
    for name in args.runs:
        row = run(name, args, args.device)
        report["rows"].append(row)
        print(
            name,
            {k: (round(v, 2) if isinstance(v, float) else v) for k, v in row.items()},
            flush=True,
        )
        write(report, args.out)


if __name__ == "__main__":
    main()
