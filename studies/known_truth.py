"""What the marginal likelihood learns on tasks whose right structure is known by construction.

Trains a four-layer F-FC+CONV network (16x16 -> 1x1, widths ``a, 2a, 2a, 4a``) with
:func:`laplace_equivariance.marglik_training` on the tasks of
:func:`laplace_equivariance.data.known_truth_tasks.known_truth_task` and writes, per run, the
per-layer FC and CONV prior precisions, squared norms and relative effective parameters, the
test accuracy and NLL, the fraction of test predictions unchanged by circular shifts, and every
setting::

    python -m studies.known_truth --seeds 0 1 2 --out studies/results/known-truth

``--f-fc-init unbalanced`` redraws the F-FC factors as they were drawn before
:meth:`~laplace_equivariance.layers.FactoredLinear2d.balance_` (``theta1`` with He variance
``2 / C``, ``theta2`` with ``1 / XY``, per channel pair ``2 X'Y' / C`` times apart in squared
norm); ``--start equivariant`` silences the FC paths at the start
(:meth:`~laplace_equivariance.models.RelaxedNet.start_equivariant_`), ``--start held`` also
holds them until the first marginal-likelihood fit (``marglik_training``'s
``held_until_fit``); ``--model conv --method map`` and ``--model f-fc --method map`` are the
baselines.

The rotation tasks (``--tasks turned-digits turn-of-digit``) ask the same of rotations:
``--model f-fc+conv+gconv`` learns whether its CONV paths (which relax the quarter turns of
its GCONV paths) are needed. Its starts silence the paths outside ``--kept-paths`` (default
CONV and GCONV, the command line's ``--start held``); ``--kept-paths gconv`` starts it as its
GCONV network (``train --start held-gconv``). Each run also records the fraction of test
predictions unchanged by quarter turns and, for a relaxed model, each path's share of its
layer's output on the test images::

    python -m studies.known_truth --tasks turned-digits turn-of-digit \
        --model f-fc+conv+gconv --prior-structure layerwise --start held --seeds 0 1 2 \
        --out studies/results/known-truth-rotation/held

``--table`` prints docs/learned_structure.md's tables of the committed runs instead
(:mod:`studies.known_truth_tables`; the page's template renders them).
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
from laplace import FullLaplace, Laplace
from laplace.curvature.curvature import GGNInterface
from torch.nn import functional as F
from torch.utils.data import DataLoader, TensorDataset

from laplace_equivariance import EquivariantKFAC, __version__, marglik_training, models
from laplace_equivariance.app.summary import mean_std
from laplace_equivariance.data.known_truth_tasks import (
    KNOWN_TRUTH_SIDE,
    KNOWN_TRUTH_TASKS,
    known_truth_task,
)
from laplace_equivariance.diagnostics import path_output_shares, symmetry_report
from laplace_equivariance.layers import FactoredLinear2d
from laplace_equivariance.layers.init import he_uniform_, unit_uniform_
from laplace_equivariance.marglik.priors import PriorGroups, parameter_paths
from laplace_equivariance.models import EQUIVARIANT_PATHS
from studies.known_truth_tables import (
    rotation_tables,
    tables,
    task_runs,
)

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


class ExactGGN(GGNInterface):
    """laplace-torch's GGN backend with per-example Jacobians (``vmap`` of ``jacrev``).

    The stock ``jacobians`` differentiates the whole batch's outputs at once, ``N K``
    backward passes through ``N`` examples; per example it is ``N K`` passes through one. The
    exact GGN (``hessian_structure="full"``) of the small known-truth networks (about 1,100
    parameters at ``--alpha 1``) then takes seconds per fit.
    """

    @staticmethod
    def vet_laplace(la: Any, model: torch.nn.Module, backend_kwargs: dict) -> None:
        """Accept every module: torch.func differentiates this package's layers too."""

    def jacobians(self, x: torch.Tensor, enable_backprop: bool = False):
        """``(N, K, P)`` Jacobians and ``(N, K)`` outputs."""

        def output(params, xi):
            return torch.func.functional_call(self.model, params, (xi[None],))[0]

        jacobians = torch.func.vmap(torch.func.jacrev(output), (None, 0))(self.params_dict, x)
        flat = torch.cat([j.flatten(start_dim=2) for j in jacobians.values()], dim=2)
        with torch.no_grad():
            f = self.model(x)
        return flat.detach(), f


def full_path_shares(la: FullLaplace) -> list[dict[str, Any]]:
    """Per relaxed layer, each path's precision and relative effective parameters (exact GGN).

    A tensor's effective parameters under the full posterior covariance ``Sigma`` are
    ``gamma_t = P_t - delta_t tr(Sigma_tt)`` (the diagonal of ``H (H + D)^-1`` summed over
    the tensor); they equal :func:`~laplace_equivariance.diagnostics.effective_parameters`
    where the GGN is block-diagonal. Paths' shares as in ``symmetry_report``.
    """
    covariance = la.posterior_covariance.diagonal()
    precision = la.prior_precision_diag
    where = parameter_paths(la.model)
    layers: dict[str, dict[str, dict[str, float]]] = {}
    start = 0
    for name, param in la.model.named_parameters():
        if not param.requires_grad:
            continue
        stop = start + param.numel()
        gamma = param.numel() - (precision[start:stop] * covariance[start:stop]).sum().item()
        if where[name] is not None:
            layer, path = where[name]
            entry = layers.setdefault(layer, {}).setdefault(
                path, {"effective": 0.0, "parameters": 0, "precision": []}
            )
            entry["effective"] += gamma
            entry["parameters"] += param.numel()
            entry["precision"].append(precision[start].item())
        start = stop
    rows = []
    for layer, paths in layers.items():
        normalised = {p: e["effective"] / e["parameters"] for p, e in paths.items()}
        total = sum(normalised.values())
        row: dict[str, Any] = {"layer": layer}
        for path, entry in paths.items():
            row[f"{path}_prior_precision"] = entry["precision"]
            row[f"{path}_relative"] = normalised[path] / total if total > 0 else 0.0
            row[f"{path}_parameters"] = entry["parameters"]
        row["learned"] = max(normalised, key=normalised.get)
        rows.append(row)
    return rows


FIXED_WEIGHT_STEPS = 300
"""Adam steps (lr 0.1) on the precisions alone in :func:`fixed_weight_shares`."""


def fixed_weight_shares(
    model: torch.nn.Module, loader: DataLoader, curvature: str, prior_structure: str
) -> list[float]:
    """Per relaxed layer, the FC share learned at fixed weights under one curvature.

    Fits a Laplace approximation of the trained ``model`` with the exact GGN
    (``curvature="exact"``) or EquivariantKFAC (``"expand"``, ``"reduce"``), then takes
    :data:`FIXED_WEIGHT_STEPS` Adam steps (lr 0.1) on the log precisions from unit
    precisions, the weights held: the structure each curvature alone learns from one start.
    """
    exact = curvature == "exact"
    la = Laplace(
        model,
        "classification",
        subset_of_weights="all",
        hessian_structure="full" if exact else "kron",
        backend=ExactGGN if exact else EquivariantKFAC,
        backend_kwargs=None if exact else {"kfac_approx": curvature},
    )
    la.fit(loader)
    groups = PriorGroups(model, prior_structure)
    log_precision = torch.zeros(len(groups), dtype=torch.float64, requires_grad=True)
    optimizer = torch.optim.Adam([log_precision], lr=0.1)
    for _ in range(FIXED_WEIGHT_STEPS):
        optimizer.zero_grad()
        (-la.log_marginal_likelihood(groups.to_laplace(log_precision.exp()))).backward()
        optimizer.step()
    la.prior_precision = groups.to_laplace(log_precision.detach().exp())
    rows = full_path_shares(la) if exact else _kron_shares(la)
    return [row["fc_relative"] for row in rows]


def _kron_shares(la: Any) -> list[dict[str, Any]]:
    """``symmetry_report``'s layers as flat rows (``fc_relative`` and the like)."""
    return [
        {
            "layer": row["layer"],
            "learned": row["learned"],
            **{
                f"{path}_{key}": entry[key]
                for path, entry in row["paths"].items()
                for key in ("prior_precision", "squared_norm", "relative", "parameters")
            },
        }
        for row in symmetry_report(la)["layers"]
    ]


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


def turn_consistency(model: torch.nn.Module, x: torch.Tensor) -> float:
    """Fraction of (image, quarter turn by 90, 180 or 270 degrees) pairs whose predicted class
    is unchanged: 1 for a network invariant to quarter turns."""
    with torch.no_grad():
        reference = model(x).argmax(-1)
        same = sum(
            (model(torch.rot90(x, k, dims=(-2, -1))).argmax(-1) == reference).sum()
            for k in (1, 2, 3)
        )
    return float(same) / (3 * len(x))


def network(model: str, in_shape: tuple[int, int, int], n_classes: int, alpha: int):
    """The suite's four-layer network ``model`` (:data:`WIDTHS`, :data:`SUBSAMPLING`)."""
    return models.build(
        model, in_shape, n_classes, alpha=alpha, widths=WIDTHS, subsampling=SUBSAMPLING
    )


def parameters(folder: Path, task: str) -> int:
    """How many parameters the network of the committed runs of ``task`` under ``folder`` has
    (the model and ``alpha`` of its first run's settings), built on the meta device.

    Raises:
        ValueError: If there is no such run.
    """
    runs = task_runs(folder, task)
    if not runs:
        raise ValueError(f"no run of {task} under {folder}")
    settings, side = runs[0]["settings"], KNOWN_TRUTH_SIDE
    with torch.device("meta"):
        built = network(
            settings["model"], (1, side, side), KNOWN_TRUTH_TASKS[task][0], settings["alpha"]
        )
    return models.count_parameters(built)


def run(args: argparse.Namespace, task: str, seed: int) -> dict[str, Any]:
    """Train one model on one task with one seed; return its results."""
    torch.manual_seed(seed)
    data = known_truth_task(task, n_train=args.n_train, seed=seed)
    model = network(args.model, data.in_shape, data.n_classes, args.alpha)
    if args.f_fc_init == "unbalanced":
        unbalance_(model)
    kept_paths = None
    if args.start in ("equivariant", "held"):
        paths = {models.PATH_NAME[kind] for kind in model.layer_types}
        kept_paths = [p for p in args.kept_paths or EQUIVARIANT_PATHS if p in paths]
        model.start_equivariant_(kept_paths)
    loader = DataLoader(
        TensorDataset(data.x_train, data.y_train), batch_size=args.batch_size, shuffle=True
    )
    if args.optimizer == "sgd":
        optimizer, optimizer_kwargs = torch.optim.SGD, {"lr": args.lr, "momentum": 0.9}
    else:
        optimizer, optimizer_kwargs = torch.optim.Adam, {"lr": args.lr}
    learned = args.method == "marglik"
    exact = args.curvature == "exact"
    if exact:
        model = model.double()
        loader = DataLoader(
            TensorDataset(data.x_train.double(), data.y_train),
            batch_size=args.batch_size,
            shuffle=True,
        )
    start = time.perf_counter()
    la, model, margliks, losses = marglik_training(
        model,
        loader,
        hessian_structure="full" if exact else "kron",
        backend=ExactGGN if exact else EquivariantKFAC,
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
        kfac_approx="expand" if exact else args.kfac_approx,
        restore_best=False,
        held_until_fit=model.non_equivariant_parameters(kept_paths) if args.start == "held" else (),
    )
    seconds = time.perf_counter() - start
    model.eval()
    x_test = data.x_test.double() if exact else data.x_test
    with torch.no_grad():
        logits = model(x_test)
    result: dict[str, Any] = {
        "task": task,
        "truth": KNOWN_TRUTH_TASKS[task][1],
        "seed": seed,
        "settings": {
            k: v
            for k, v in vars(args).items()
            if k not in ("seeds", "tasks", "out", "table", "compare")
        }
        | {"kept_paths": kept_paths},
        "evaluated_epoch": args.epochs,
        "test_accuracy": (logits.argmax(-1) == data.y_test).float().mean().item(),
        "test_nll": F.cross_entropy(logits, data.y_test).item(),
        "shift_consistency": shift_consistency(model, x_test, seed),
        "turn_consistency": turn_consistency(model, x_test),
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
    if len(model.layer_types) > 1:
        with torch.no_grad():
            result["output_shares"] = path_output_shares(model, x_test)
    if learned and exact:
        result["layers"] = full_path_shares(la)
        result["fixed_weight_fc_shares"] = {
            curvature: fixed_weight_shares(model, loader, curvature, args.prior_structure)
            for curvature in ("exact", "expand", "reduce")
        }
    elif learned:
        result["layers"] = _kron_shares(la)
    return result


TRUTH_TESTS = {
    "shifted-digits": (
        "fc",
        "FC off where the input is larger than the filter (layers 1-3 under 0.1)",
        lambda shares: max(shares[:3]) < 0.1,
    ),
    "quadrant-of-digit": (
        "fc",
        "FC kept where position matters (some layer above 0.5)",
        lambda shares: max(shares) > 0.5,
    ),
    "turned-digits": (
        "conv",
        "CONV off in every layer (under 0.1)",
        lambda shares: max(shares) < 0.1,
    ),
    "turn-of-digit": (
        "conv",
        "CONV kept where the turn matters (some layer above 0.1)",
        lambda shares: max(shares) > 0.1,
    ),
}
"""Task -> (the path whose relative effective parameters are tested, the structure the
task's truth asks for, its test). The digit tasks' tests are the slow tests' defaults; the
rotation tasks' take the suite's boundary between off and on (0.1) for the CONV paths."""
TRUTH_PAIRS = (("shifted-digits", "quadrant-of-digit"), ("turned-digits", "turn-of-digit"))
"""Pairs of tasks whose truths differ in one path: a structure follows the truth when it
passes both tests."""


def compare(results: list[dict[str, Any]], reference: Path) -> str:
    """Each run's shares per layer beside the committed seeds', and whether it is the truth.

    Args:
        results: Runs of this script (``run``'s results).
        reference: A folder of committed runs of the same settings (one JSON per task and
            seed), e.g. ``studies/results/known-truth/balanced-adam``.

    Returns:
        Lines for the console: per run, the tested path's shares, the committed mean ± std per
        layer and the task's test; last, for each pair of :data:`TRUTH_PAIRS` run, whether
        the learned structure differs by task as the truth does.
    """
    lines, verdicts = [], {}
    for result in results:
        task = result["task"]
        path, what, test = TRUTH_TESTS.get(task, ("fc", "(no known structure)", lambda _: True))
        shares = [row[f"{path}_relative"] for row in result["layers"]]
        committed = task_runs(reference, task)
        spread = [
            mean_std([r["layers"][i][f"{path}_relative"] for r in committed], digits=3)
            for i in range(len(shares))
        ]
        verdicts[task] = test(shares)
        lines.append(f"{task}, seed {result['seed']}: test accuracy {result['test_accuracy']:.3f}")
        for i, (share, band) in enumerate(zip(shares, spread, strict=True)):
            lines.append(f"  layer {i + 1}: {path.upper()} share {share:.3f}   committed {band}")
        lines.append(f"  {what}: {'yes' if verdicts[task] else 'NO'}")
    for pair in TRUTH_PAIRS:
        if set(pair) <= set(verdicts):
            lines.append(
                "The learned structure differs by task as the truth does: "
                + ("yes" if all(verdicts[t] for t in pair) else "NO")
            )
    return "\n".join(lines)


def build_parser() -> argparse.ArgumentParser:
    """The command line (its defaults are the committed runs' settings)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--table",
        action="store_true",
        help="print the tables of studies/results/known-truth*/ that "
        "docs/learned_structure.md shows, instead of training",
    )
    parser.add_argument(
        "--tasks",
        nargs="+",
        choices=list(KNOWN_TRUTH_TASKS),
        default=["shifted-digits", "quadrant-of-digit"],
        help="(the two digit tasks; the *-fashion ones need dataset-fashion-mnist)",
    )
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
    parser.add_argument("--kfac-approx", default="expand", dest="kfac_approx", help="(expand)")
    parser.add_argument(
        "--curvature",
        choices=["kfac", "exact"],
        default="kfac",
        help="kfac: EquivariantKFAC (kron); exact: the full GGN in float64 (small --alpha only)",
    )
    parser.add_argument(
        "--f-fc-init", choices=["balanced", "unbalanced"], default="balanced", dest="f_fc_init"
    )
    parser.add_argument(
        "--start",
        choices=["mixed", "equivariant", "held"],
        default="mixed",
        help="equivariant: FC paths silenced at the start (RelaxedNet.start_equivariant_); "
        "held: silenced and held until the first marginal-likelihood fit",
    )
    parser.add_argument(
        "--kept-paths",
        nargs="+",
        choices=["conv", "gconv"],
        dest="kept_paths",
        help="the paths the equivariant and held starts keep (default: conv and gconv, those "
        "the model has; gconv: an F-FC+CONV+GCONV network started as its GCONV network, as "
        "train --start held-gconv)",
    )
    parser.add_argument("--threads", type=int, default=1, help="(1)")
    parser.add_argument("--out", type=Path, help="folder for one JSON per run")
    parser.add_argument(
        "--compare",
        type=Path,
        help="after training, print each run's FC share per layer beside the committed runs "
        "under this folder, and whether the structure is the task's truth",
    )
    return parser


def main(argv: list[str] | None = None) -> None:
    """Run every (task, seed) and write one JSON per run, or write the docs' table."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.table:
        frames = [*tables(), rotation_tables()]
        print("\n\n".join(frame.to_markdown(index=False) for frame in frames))
        return
    if args.out is None:
        parser.error("--out is required to train")
    if args.kept_paths and args.start == "mixed":
        parser.error(
            "--kept-paths chooses what --start equivariant or held keeps; --start mixed "
            "silences no path (give --start held, or leave --kept-paths out)"
        )
    torch.set_num_threads(args.threads)
    args.out.mkdir(parents=True, exist_ok=True)
    results = []
    for task in args.tasks:
        for seed in args.seeds:
            result = run(args, task, seed)
            results.append(result)
            path = args.out / f"{task}-seed{seed}.json"
            path.write_text(json.dumps(result, indent=1))
            shares = " ".join(
                f"{row['layer']}:{row.get('fc_relative', math.nan):.3f}"
                + (f"/{row['conv_relative']:.3f}" if "gconv_relative" in row else "")
                for row in result["layers"]
            )
            print(
                f"{task} seed {seed}: test {result['test_accuracy']:.3f}, shift-consistent "
                f"{result['shift_consistency']:.3f}, turn-consistent "
                f"{result['turn_consistency']:.3f}, FC(/CONV) shares {shares} "
                f"({result['seconds']:.0f} s)",
                flush=True,
            )
    if args.compare is not None:
        print(compare(results, args.compare))


if __name__ == "__main__":
    main()
