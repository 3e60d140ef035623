"""What the marginal likelihood learns on tasks whose right structure is known by construction.

Trains a four-layer F-FC+CONV network (16x16 -> 1x1, widths ``a, 2a, 2a, 4a``) with
:func:`laplace_equivariance.marglik_training` on the tasks of
:func:`laplace_equivariance.data.known_truth_task` and writes, per run, the per-layer FC and
CONV prior precisions, squared norms and relative effective parameters, the test accuracy and
NLL, the fraction of test predictions unchanged by circular shifts, and every setting::

    python benchmarks/known_truth.py --seeds 0 1 2 --out benchmarks/results/known-truth

``--f-fc-init unbalanced`` redraws the F-FC factors as they were drawn before
:meth:`~laplace_equivariance.layers.FactoredLinear2d.balance_` (``theta1`` with He variance
``2 / C``, ``theta2`` with ``1 / XY``, per channel pair ``2 X'Y' / C`` times apart in squared
norm); ``--model conv --method map`` and ``--model f-fc --method map`` are the baselines.
"""

from __future__ import annotations

import argparse
import json
import math
import platform
import time
from pathlib import Path
from typing import Any

import torch
from torch.nn import functional as F
from torch.utils.data import DataLoader, TensorDataset

from laplace_equivariance import __version__, marglik_training, models
from laplace_equivariance.data import KNOWN_TRUTH_TASKS, known_truth_task
from laplace_equivariance.diagnostics import symmetry_report
from laplace_equivariance.layers import FactoredLinear2d
from laplace_equivariance.layers.init import he_uniform_, unit_uniform_

WIDTHS = (1, 2, 2, 4)
SUBSAMPLING = (1, 2, 3, 4)
INVARIANCE_SHIFTS = 8
"""Random circular shifts per test image for the invariance measure."""


def unbalance_(model: torch.nn.Module) -> None:
    """Redraw every F-FC layer's factors without balancing (the package's former init)."""
    for module in model.modules():
        if isinstance(module, FactoredLinear2d):
            theta1, theta2 = module.output_map.weight, module.input_map.weight
            with torch.no_grad():
                he_uniform_(theta1, module.input_map.in_channels)
                unit_uniform_(theta2, theta2.shape[-1])


def shift_consistency(model: torch.nn.Module, x: torch.Tensor, seed: int) -> float:
    """Fraction of (image, random circular shift) pairs whose predicted class is unchanged."""
    generator = torch.Generator().manual_seed(seed)
    side = x.shape[-1]
    with torch.no_grad():
        reference = model(x).argmax(-1)
        same = 0
        for _ in range(INVARIANCE_SHIFTS):
            dx, dy = torch.randint(0, side, (2,), generator=generator).tolist()
            same += (model(torch.roll(x, (dx, dy), dims=(-2, -1))).argmax(-1) == reference).sum()
    return float(same) / (INVARIANCE_SHIFTS * len(x))


def run(args: argparse.Namespace, task: str, seed: int) -> dict[str, Any]:
    """Train one model on one task with one seed; return its results."""
    torch.manual_seed(seed)
    data = known_truth_task(task, n_train=args.n_train, seed=seed)
    model = models.build(
        args.model,
        data.in_shape,
        data.n_classes,
        alpha=args.alpha,
        widths=WIDTHS,
        subsampling=SUBSAMPLING,
    )
    if args.f_fc_init == "unbalanced":
        unbalance_(model)
    loader = DataLoader(
        TensorDataset(data.x_train, data.y_train), batch_size=args.batch_size, shuffle=True
    )
    if args.optimizer == "sgd":
        optimizer, optimizer_kwargs = torch.optim.SGD, {"lr": args.lr, "momentum": 0.9}
    else:
        optimizer, optimizer_kwargs = torch.optim.Adam, {"lr": args.lr}
    learned = args.method == "marglik"
    start = time.perf_counter()
    la, model, margliks, losses = marglik_training(
        model,
        loader,
        optimizer_cls=optimizer,
        optimizer_kwargs=optimizer_kwargs,
        scheduler_cls=torch.optim.lr_scheduler.CosineAnnealingLR,
        scheduler_kwargs={"T_max": args.epochs * len(loader)},
        n_epochs=args.epochs,
        lr_hyp=args.lr_hyp,
        prior_structure=args.prior_structure,
        n_epochs_burnin=args.burnin if learned else args.epochs + 1,
        n_hypersteps=args.hypersteps,
        marglik_frequency=args.marglik_frequency,
        kfac_approx=args.kfac_approx,
        restore_best=False,
    )
    seconds = time.perf_counter() - start
    model.eval()
    with torch.no_grad():
        logits = model(data.x_test)
    result: dict[str, Any] = {
        "task": task,
        "truth": KNOWN_TRUTH_TASKS[task][1],
        "seed": seed,
        "settings": {k: v for k, v in vars(args).items() if k not in ("seeds", "tasks", "out")},
        "evaluated_epoch": args.epochs,
        "test_accuracy": (logits.argmax(-1) == data.y_test).float().mean().item(),
        "test_nll": F.cross_entropy(logits, data.y_test).item(),
        "shift_consistency": shift_consistency(model, data.x_test, seed),
        "n_train": len(data.y_train),
        "n_test": len(data.y_test),
        "final_neg_log_marglik": margliks[-1] if margliks else None,
        "final_loss": losses[-1],
        "seconds": seconds,
        "device": platform.processor() or platform.machine(),
        "threads": torch.get_num_threads(),
        "torch": torch.__version__,
        "package": __version__,
        "layers": [],
    }
    if learned:
        for row in symmetry_report(la)["layers"]:
            result["layers"].append(
                {
                    "layer": row["layer"],
                    "learned": row["learned"],
                    **{
                        f"{path}_{key}": entry[key]
                        for path, entry in row["paths"].items()
                        for key in ("prior_precision", "squared_norm", "relative", "parameters")
                    },
                }
            )
    return result


def main() -> None:
    """Run every (task, seed) and write one JSON per run."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", nargs="+", default=list(KNOWN_TRUTH_TASKS))
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    parser.add_argument("--model", default="f-fc+conv", help="models.build name (f-fc+conv)")
    parser.add_argument("--method", choices=["marglik", "map"], default="marglik")
    parser.add_argument("--alpha", type=int, default=4, help="width a (4)")
    parser.add_argument("--n-train", type=int, default=1000, dest="n_train", help="(1000)")
    parser.add_argument("--epochs", type=int, default=200, help="(200)")
    parser.add_argument("--batch-size", type=int, default=128, dest="batch_size", help="(128)")
    parser.add_argument("--optimizer", choices=["adam", "sgd"], default="adam", help="(adam)")
    parser.add_argument("--lr", type=float, default=0.003, help="weights' learning rate (0.003)")
    parser.add_argument("--lr-hyp", type=float, default=0.1, dest="lr_hyp", help="(0.1)")
    parser.add_argument("--burnin", type=int, default=10, help="(10)")
    parser.add_argument("--hypersteps", type=int, default=20, help="(20)")
    parser.add_argument("--marglik-frequency", type=int, default=5, dest="marglik_frequency")
    parser.add_argument("--prior-structure", default="path", dest="prior_structure")
    parser.add_argument("--kfac-approx", default="expand", dest="kfac_approx")
    parser.add_argument(
        "--f-fc-init", choices=["balanced", "unbalanced"], default="balanced", dest="f_fc_init"
    )
    parser.add_argument("--threads", type=int, default=1, help="(1)")
    parser.add_argument("--out", type=Path, required=True, help="folder for one JSON per run")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    args.out.mkdir(parents=True, exist_ok=True)
    for task in args.tasks:
        for seed in args.seeds:
            result = run(args, task, seed)
            path = args.out / f"{task}-seed{seed}.json"
            path.write_text(json.dumps(result, indent=1))
            shares = " ".join(
                f"{row['layer']}:{row.get('fc_relative', math.nan):.3f}" for row in result["layers"]
            )
            print(
                f"{task} seed {seed}: test {result['test_accuracy']:.3f}, shift-consistent "
                f"{result['shift_consistency']:.3f}, FC shares {shares} ({result['seconds']:.0f} s)",
                flush=True,
            )


if __name__ == "__main__":
    main()
