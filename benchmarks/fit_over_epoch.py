"""The Kron fit's cost in training epochs, per model and data set size (issue 20's targets).

For each model and each N, on random 3x32x32 inputs with 10 classes (speed does not depend on
the data) at the paper's width (alpha=10 unless ``--alpha`` says otherwise), in one process:

1. training epochs (forward, backward) over the N examples, after a warm-up batch: the median
   of ``--repeats``;
2. ``Laplace.fit`` with EquivariantKFAC's exact GGN over the same N: one warm-up fit (it pays
   one-time allocations), then the median of ``--repeats`` fits; the decomposition inside the
   last (eigenvalues only) timed apart, then the eigenvectors, which ``fit`` leaves to the
   first use that needs them (the predictive, not the marginal likelihood), timed on their own;
   and the parts of one more fit, each timed within it (:func:`timed_fit_parts`): its forward
   and backward passes, the factors' statistics (ASDL's operations in the hooks: ``A``, ``B``,
   the exact bias blocks, their accumulation), the eigenvalues and the rest;
3. the same with the Monte-Carlo Fisher (one sample);
4. the floor of each fit (issue 20): the forward pass over the N examples and the fit's
   backward passes (classes - 1 for the exact GGN, one for the Monte-Carlo Fisher) through the
   graph the fit records (activations only, from the logits to the first layer's output), with
   no curvature computed: the median of ``--repeats`` after a warm-up.

Where a fit's time goes (``in_fit_over_epoch``): its passes, statistics, eigenvalues and rest
(the factors' sums over batches, the checks, laplace-torch's own work), each over an epoch and
measured within one fit (they sum to ``instrumented_fit_s``), beside the floor (4), what its
passes cost without the hooks.

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
from laplace_equivariance.curvature.kron import BlockDiagonalKron
from laplace_equivariance.curvature.kron_fisher import KronFisherMaker

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


PARTS = {
    "statistics": [
        (OperationContext, "call_operations_in_forward"),
        (OperationContext, "call_operations_in_backward"),
    ],
    "passes_and_statistics": [(KronFisherMaker, "forward_and_backward")],
    "eigenvalues": [(BlockDiagonalKron, "decompose")],
}
"""The methods a fit's parts run in, per part: ASDL's operations (the factors' statistics ``A``
and ``B``, the exact bias blocks, their accumulation over passes, run by the model's hooks), the
forward and backward passes with those statistics, the factors' eigendecomposition."""


@contextmanager
def timed_fit_parts(device: str) -> Iterator[dict[str, float]]:
    """Sum, while open, the seconds spent in each part's methods (:data:`PARTS`).

    Yields a dict, part to seconds, filled as the methods run; each call is timed between
    device synchronisations. The methods are restored on leaving.
    """
    seconds = dict.fromkeys(PARTS, 0.0)
    originals = [
        (owner, name, getattr(owner, name)) for methods in PARTS.values() for owner, name in methods
    ]

    def timed(part: str, original):
        def call(*args, **kwargs):
            synchronise(device)
            start = time.perf_counter()
            result = original(*args, **kwargs)
            synchronise(device)
            seconds[part] += time.perf_counter() - start
            return result

        return call

    for part, methods in PARTS.items():
        for owner, name in methods:
            setattr(owner, name, timed(part, getattr(owner, name)))
    try:
        yield seconds
    finally:
        for owner, name, original in originals:
            setattr(owner, name, original)


def median_fit(model, data, device: str, repeats: int, **backend_kwargs) -> dict:
    """Median seconds of ``repeats`` fits after a warm-up fit; the parts of one more fit, timed
    within it (:func:`timed_fit_parts`: its passes, statistics, eigenvalues and the rest; apart
    from the timed fits, whose figures the timers' synchronisations would change on a GPU); the
    last fit's decomposition (eigenvalues) and the eigenvectors that it leaves for later, timed
    apart."""
    fit_seconds(model, data, EquivariantKFAC, device, **backend_kwargs)
    runs = [
        fit_seconds(model, data, EquivariantKFAC, device, **backend_kwargs) for _ in range(repeats)
    ]
    with timed_fit_parts(device) as part:
        instrumented, _ = fit_seconds(model, data, EquivariantKFAC, device, **backend_kwargs)
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
        "instrumented_fit_s": instrumented,
        "in_fit_s": {
            "passes": part["passes_and_statistics"] - part["statistics"],
            "statistics": part["statistics"],
            "eigenvalues": part["eigenvalues"],
            "rest": instrumented - part["passes_and_statistics"] - part["eigenvalues"],
        },
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
                row[curvature] = fit | {
                    "fit_over_epoch": fit["fit_s"] / epoch,
                    "in_fit_over_epoch": {k: v / epoch for k, v in fit["in_fit_s"].items()},
                    "backward_passes": passes,
                    "floor_s": floor,
                    "floor_over_epoch": floor / epoch,
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
