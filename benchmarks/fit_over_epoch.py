"""The Kron fit's cost in training epochs, per model and data set size (issue 20's targets).

For each model and each N, on random 3x32x32 inputs with 10 classes (speed does not depend on
the data) at the paper's width (alpha=10 unless ``--alpha`` says otherwise), in one process:

1. training epochs (forward, backward) over the N examples, after a warm-up batch: the median
   of ``--repeats``;
2. ``Laplace.fit`` with EquivariantKFAC's exact GGN over the same N: one warm-up fit (it pays
   one-time allocations), then the median of ``--repeats`` fits; the decomposition inside the
   last (eigenvalues only) timed apart, then the eigenvectors, which ``fit`` leaves to the
   first use that needs them (the predictive, not the marginal likelihood), timed on their own;
   and, within each fit, the seconds of the factors' statistics (ASDL's operations in the
   forward and backward hooks: ``A``, ``B``, the exact bias blocks and their accumulation);
3. the same with the Monte-Carlo Fisher (one sample);
4. the floor of each fit (issue 20): the forward pass over the N examples and the fit's
   backward passes (classes - 1 for the exact GGN, one for the Monte-Carlo Fisher) through the
   graph the fit records (activations only, from the logits to the first layer's output), with
   no curvature computed: the median of ``--repeats`` after a warm-up.

Where a fit's time goes: its floor (4), its statistics (2) and its eigenvalues (2), each over
an epoch; what is left (``rest_over_epoch``) is the rest of the fit (the model's hooks, the
factors' sums over batches, the checks): the most that work other than the passes, the
statistics' arithmetic and the eigenvalues could still save.

Targets: exact-GGN fit <= 5 epochs, Monte-Carlo Fisher fit <= 2 epochs, at N=512 already.

Usage (from the repository root):
    python -m benchmarks.fit_over_epoch [--device cpu|cuda] [--n 512 2048] [--batch 128]
        [--repeats 3] [--models f-fc+conv f-fc+conv+gconv]
        [--out benchmarks/results/fit_over_epoch-cpu.json]
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Iterator
from contextlib import contextmanager

import torch
from asdl.operations.operation import OperationContext

from benchmarks.kfac_speed import epoch_seconds, fit_seconds
from benchmarks.report import benchmark_parser, environment, write
from benchmarks.timing import loader, synchronise
from laplace_equivariance import EquivariantKFAC, models
from laplace_equivariance.curvature.activation_graph import activation_graph_only

N_CLASSES = 10
"""Classes of the random labels (the paper's data sets have 10)."""

TARGETS = {"exact": 5.0, "mc": 2.0}
"""Fit time over epoch time that issue 20 asks for, per curvature."""


def median_epoch(model, data, device: str, repeats: int) -> float:
    """Median seconds of ``repeats`` training epochs (each after its own warm-up batch)."""
    return statistics.median(epoch_seconds(model, data, device) for _ in range(repeats))


def floor_seconds(model, data, device: str, passes: int) -> float:
    """Seconds of the forward pass and ``passes`` backward passes per batch, no curvature.

    The graph is the one the fit records (``EquivariantKFAC`` runs the model under
    ``activation_graph_only``); each pass back-propagates a random vector from the logits.
    """
    synchronise(device)
    start = time.perf_counter()
    for x, _ in data:
        with activation_graph_only(model):
            logits = model(x)
        for k in range(passes):
            logits.backward(torch.randn_like(logits), retain_graph=k < passes - 1)
    synchronise(device)
    return time.perf_counter() - start


def median_floor(model, data, device: str, repeats: int, passes: int) -> float:
    """Median of ``repeats`` :func:`floor_seconds` after a warm-up."""
    floor_seconds(model, data, device, passes)
    return statistics.median(floor_seconds(model, data, device, passes) for _ in range(repeats))


@contextmanager
def timed_statistics(device: str) -> Iterator[list[float]]:
    """Sum the seconds of ASDL's operations while open, in the one entry of the list it yields.

    The operations are what the fit's forward and backward hooks run per module (the factors'
    statistics ``A`` and ``B``, the exact bias blocks, their accumulation over passes); each
    call is timed between device synchronisations.
    """
    total = [0.0]
    names = ("call_operations_in_forward", "call_operations_in_backward")
    originals = {name: getattr(OperationContext, name) for name in names}

    def timed(original):
        def call(self, *args):
            synchronise(device)
            start = time.perf_counter()
            original(self, *args)
            synchronise(device)
            total[0] += time.perf_counter() - start

        return call

    for name, original in originals.items():
        setattr(OperationContext, name, timed(original))
    try:
        yield total
    finally:
        for name, original in originals.items():
            setattr(OperationContext, name, original)


def median_fit(model, data, device: str, repeats: int, **backend_kwargs) -> dict:
    """Median seconds of ``repeats`` fits after a warm-up fit, with their statistics' seconds;
    the last fit's decomposition (eigenvalues) and the eigenvectors that it leaves for later,
    timed apart."""
    fit_seconds(model, data, EquivariantKFAC, device, **backend_kwargs)
    runs, statistics_seconds = [], []
    for _ in range(repeats):
        with timed_statistics(device) as seconds:
            runs.append(fit_seconds(model, data, EquivariantKFAC, device, **backend_kwargs))
        statistics_seconds.append(seconds[0])
    la = runs[-1][1]
    synchronise(device)
    start = time.perf_counter()
    decomposed = la.H_facs.decompose(damping=la.damping)
    synchronise(device)
    decomposition = time.perf_counter() - start
    start = time.perf_counter()
    for group in range(len(decomposed.eigenvectors)):
        decomposed.eigenvectors[group]
    synchronise(device)
    return {
        "fit_s": statistics.median(seconds for seconds, _ in runs),
        "fit_runs_s": [seconds for seconds, _ in runs],
        "statistics_s": statistics.median(statistics_seconds),
        "eigenvalues_s": decomposition,
        "eigenvectors_s": time.perf_counter() - start,
    }


def main() -> None:
    parser = benchmark_parser(__doc__)
    parser.add_argument("--n", type=int, nargs="+", default=[512, 2048])
    parser.add_argument("--batch", type=int, default=128)
    parser.add_argument("--alpha", type=int, default=10)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--models", nargs="+", default=["f-fc+conv", "f-fc+conv+gconv"])
    args = parser.parse_args()
    report = {**environment("-m benchmarks.fit_over_epoch", args.device), "rows": []}
    report |= {
        "batch": args.batch,
        "alpha": args.alpha,
        "repeats": args.repeats,
        "targets": TARGETS,
    }
    for name in args.models:
        for n in args.n:
            torch.manual_seed(0)
            model = models.build(name, (3, 32, 32), N_CLASSES, args.alpha).to(args.device)
            data = loader(n, args.batch, args.device)
            epoch = median_epoch(model, data, args.device, args.repeats)
            row = {"model": name, "n": n, "epoch_s": epoch}
            curvatures = (("exact", {}, N_CLASSES - 1), ("mc", {"stochastic": True}, 1))
            for curvature, kwargs, passes in curvatures:
                fit = median_fit(model, data, args.device, args.repeats, **kwargs)
                floor = median_floor(model, data, args.device, args.repeats, passes)
                parts = floor + fit["statistics_s"] + fit["eigenvalues_s"]
                row[curvature] = fit | {
                    "fit_over_epoch": fit["fit_s"] / epoch,
                    "backward_passes": passes,
                    "floor_s": floor,
                    "floor_over_epoch": floor / epoch,
                    "statistics_over_epoch": fit["statistics_s"] / epoch,
                    "eigenvalues_over_epoch": fit["eigenvalues_s"] / epoch,
                    "rest_over_epoch": (fit["fit_s"] - parts) / epoch,
                }
            report["rows"].append(row)
            exact, mc = row["exact"], row["mc"]
            print(
                f"{name} N={n}: epoch {row['epoch_s']:.2f} s, exact fit "
                f"{exact['fit_over_epoch']:.1f}x (eigenvalues {exact['eigenvalues_s']:.2f} s; "
                f"eigenvectors later {exact['eigenvectors_s']:.2f} s), MC fit "
                f"{mc['fit_over_epoch']:.1f}x; floors (forward and backward passes only): exact "
                f"{exact['floor_over_epoch']:.1f}x, MC {mc['floor_over_epoch']:.1f}x",
                flush=True,
            )
            write(report, args.out)


if __name__ == "__main__":
    main()
