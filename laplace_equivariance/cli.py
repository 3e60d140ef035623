"""The command line: ``laplace-equivariance train | evaluate | paths | report`` (and ``python -m``).

``train`` fits a model of :func:`laplace_equivariance.models.build` on a data set of
:data:`laplace_equivariance.data.DATASETS`, by MAP (unit priors) or with the Laplace marginal
likelihood (one prior per parameter tensor, so per path and per factor; ``--prior-structure
path`` shares one between a path's tensors), and writes to ``--out``: ``results.json``
(configuration, versions, device, test and training accuracy and NLL, marginal likelihood,
learned precisions, effective parameters, timings), ``model.pt``, ``training.png`` and, for
marginal-likelihood runs, ``symmetry.png``; ``run.json`` records the settings and version,
``checkpoint.pt`` is saved every epoch, and the same command again resumes from it (another
run in the same ``--out`` is refused, naming the settings that differ, unless
``--overwrite``). Settings that cannot give a valid run (a count below one, a
marginal-likelihood run too short for any marginal-likelihood step, a device this machine
lacks, an ``--out`` that cannot be written) stop with one line before anything is created;
Ctrl-C prints the epoch the checkpoint holds. ``evaluate RUN [--split train]`` rebuilds
the model from ``model.pt`` and evaluates it on the run's test (or training) set.
``paths RUN`` prints each path's share of its layer's output energy
(:func:`~laplace_equivariance.path_output_shares`) on the run's first 1,000 training images,
which ``results.json`` of a relaxed model also records as ``path_outputs``.
``--config table1|table2|table3`` sets the paper's settings (App. F.1, F.6); every option
overrides them. S-layer lengthscales are MAP-trained weights by default; ``--lengthscale-mode
hyperparameter`` learns them with the marginal likelihood (``--lengthscale-derivative
total|partial``), and ``results.json`` records every basis's final lengthscale.

``--model invariant-weights`` trains the shallow network of "Learning Invariant Weights in
Neural Networks" (:mod:`laplace_equivariance.invariance`) instead, with ``--method elbo``
(the paper's, the default for this model), ``laplace`` (its output layer's Laplace marginal
likelihood, on ``--marglik-subset`` examples, default 500) or ``likelihood``;
``results.json`` then records the learned ``eta`` per epoch (no checkpoint).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from laplace_equivariance import __version__, models, summary
from laplace_equivariance.config import (
    CONFIGS,
    DEFAULTS,
    INVARIANT_MARGLIK_SUBSET,
    INVARIANT_WEIGHTS,
    STARTS,
    _check_applicable,
    default_start,
)
from laplace_equivariance.curvature.lengthscales import DERIVATIVES
from laplace_equivariance.data import DATASETS
from laplace_equivariance.experiment import (
    PATH_OUTPUT_EXAMPLES,
    PREDICTIVES,
    _interrupted,
    evaluate,
    path_outputs,
    report,
    train,
)
from laplace_equivariance.invariance import (
    ACTIVATIONS,
    INVARIANCES,
    OBJECTIVES,
)
from laplace_equivariance.layers import LengthscaleMode
from laplace_equivariance.schedule import OPTIMIZERS


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="laplace-equivariance", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    commands = parser.add_subparsers(dest="command", required=True)
    train = commands.add_parser(
        "train",
        help="train a model (MAP or marginal likelihood)",
        description="Defaults in brackets; --config sets the paper's values of some, and every "
        "option given overrides them.",
    )
    train.add_argument(
        "--config", choices=sorted(CONFIGS), help="the paper's settings for a table (none)"
    )
    train.add_argument(
        "--dataset", choices=list(DATASETS), help=f"the data [{DEFAULTS['dataset']}]"
    )
    train.add_argument(
        "--model",
        choices=[*models.MODEL_NAMES, INVARIANT_WEIGHTS],
        help=f"the network's path types (docs/models.md) [{DEFAULTS['model']}]",
    )
    train.add_argument(
        "--method",
        choices=["map", "marglik", *OBJECTIVES],
        help=f"map: unit priors; marglik: priors learned by the marginal likelihood "
        f"[{DEFAULTS['method']}]; {'/'.join(OBJECTIVES)} for {INVARIANT_WEIGHTS} [elbo]",
    )
    train.add_argument(
        "--alpha", type=int, help=f"width multiplier a of App. F.1 [{DEFAULTS['alpha']}]"
    )
    train.add_argument("--epochs", type=int, help=f"training epochs [{DEFAULTS['epochs']}]")
    train.add_argument(
        "--lr",
        type=float,
        help="learning rate of the weights, cosine-annealed to 0 [0.003; the paper's 0.01 with "
        "Adam leaves even MAP CONV at chance at these data sizes, docs/learned_structure.md]",
    )
    train.add_argument(
        "--lr-min",
        type=float,
        dest="lr_min",
        help="learning rate at the end of the cosine schedule (the reference code's lr_min) [0]",
    )
    train.add_argument(
        "--augment",
        action="store_true",
        default=None,
        help="random horizontal flips and shifts of up to 4 pixels of the training batches "
        "(App. F.6's CIFAR-10 recipe; the marginal likelihood sees unaugmented images) "
        "[off; on with --config table2]",
    )
    train.add_argument(
        "--optimizer",
        choices=list(OPTIMIZERS),
        help="optimiser of the weights: adam (the paper's App. F.6) or sgd (momentum 0.9, the "
        "reference code's) [adam]",
    )
    train.add_argument(
        "--lr-hyp",
        type=float,
        dest="lr_hyp",
        help=f"Adam learning rate of the log prior precisions [{DEFAULTS['lr_hyp']}]",
    )
    train.add_argument(
        "--batch-size", type=int, dest="batch_size", help=f"[{DEFAULTS['batch_size']}]"
    )
    train.add_argument(
        "--burnin",
        type=int,
        help=f"epochs before the first marginal-likelihood step [{DEFAULTS['burnin']}]",
    )
    train.add_argument(
        "--marglik-frequency",
        type=int,
        dest="marglik_frequency",
        help=f"epochs between marginal-likelihood fits [{DEFAULTS['marglik_frequency']}]",
    )
    train.add_argument(
        "--hypersteps",
        type=int,
        help=f"hyperparameter steps on each fit [{DEFAULTS['hypersteps']}]",
    )
    train.add_argument("--subset", type=int, help="training examples to use [all]")
    train.add_argument("--test-subset", type=int, dest="test_subset", help="test examples [all]")
    train.add_argument(
        "--marglik-subset",
        type=int,
        dest="marglik_subset",
        help=f"examples of each marginal-likelihood fit [all; {INVARIANT_MARGLIK_SUBSET} for "
        f"{INVARIANT_WEIGHTS}]",
    )
    train.add_argument(
        "--stochastic",
        action="store_true",
        default=None,
        help="Monte-Carlo Fisher instead of the exact GGN in the KFAC factors [off]",
    )
    train.add_argument(
        "--mc-samples",
        type=int,
        dest="mc_samples",
        help="targets sampled per example for the MC Fisher (with --stochastic) [1]",
    )
    train.add_argument(
        "--restore-best",
        action="store_true",
        default=None,
        dest="restore_best",
        help="evaluate the epoch with the best marginal likelihood (laplace-torch's "
        "marglik_training), not the last one (the paper's code) [off]",
    )
    train.add_argument(
        "--balance-factors",
        action="store_true",
        default=None,
        dest="balance_factors",
        help="balance every F-FC channel pair's two factors under the learned precisions "
        "before each Laplace fit (marglik_training's balance_factors) [off]",
    )
    train.add_argument(
        "--start",
        choices=list(STARTS),
        dest="start",
        help="where a relaxed model's training starts: every path drawn at random (mixed), "
        "its FC-type paths silenced so that it starts as its CONV network (equivariant; "
        "RelaxedNet.start_equivariant_), or silenced and held there until the first "
        "marginal-likelihood fit (held; marglik_training's held_until_fit) [held for --method "
        "marglik on models with an FC-type and an equivariant path, mixed otherwise]",
    )
    train.add_argument(
        "--prior-structure",
        choices=["scalar", "layerwise", "path"],
        dest="prior_structure",
        help="layerwise: one prior precision per parameter tensor, as the reference code; "
        "path: one per layer and path; scalar: one (docs/learned_structure.md compares) "
        "[layerwise]",
    )
    train.add_argument(
        "--lengthscale-mode",
        choices=[mode.value for mode in LengthscaleMode],
        dest="lengthscale_mode",
        help="S-layer lengthscales: MAP-trained weights (learned), fixed, or marginal-"
        "likelihood hyperparameters [learned]",
    )
    train.add_argument(
        "--lengthscale-derivative",
        choices=list(DERIVATIVES),
        dest="lengthscale_derivative",
        help="gradient for hyperparameter lengthscales (docs/curvature.md) [total]",
    )
    train.add_argument(
        "--kfac-approx",
        choices=["expand", "reduce"],
        dest="kfac_approx",
        help="KFAC for weights shared over positions (docs/curvature.md) [expand]",
    )
    train.add_argument("--device", help="cpu, cuda[:N] or mps [cuda if available, else cpu]")
    train.add_argument("--seed", type=int, help="seed of the data subset and the weights [0]")
    train.add_argument(
        "--threads", type=int, help="CPU threads (torch.set_num_threads) [torch's default]"
    )
    train.add_argument(
        "--timeout",
        type=float,
        help="under torchrun: seconds a rank waits for the others before the run stops [600]",
    )
    train.add_argument(
        "--data-dir",
        dest="data_dir",
        help="folder with torchvision's files [none: the offline sources, docs/results.md]",
    )
    train.add_argument(
        "--download",
        action="store_true",
        default=None,
        help="let torchvision download into --data-dir [off]",
    )
    train.add_argument(
        "--invariance",
        choices=list(INVARIANCES),
        help=f"{INVARIANT_WEIGHTS}: the transformations [{DEFAULTS['invariance']}]",
    )
    train.add_argument(
        "--activation",
        choices=list(ACTIVATIONS),
        help=f"{INVARIANT_WEIGHTS}: the hidden units [{DEFAULTS['activation']}]",
    )
    train.add_argument(
        "--width", type=int, help=f"{INVARIANT_WEIGHTS}: hidden units [{DEFAULTS['width']}]"
    )
    train.add_argument(
        "--samples",
        type=int,
        help=f"{INVARIANT_WEIGHTS}: transformations per pass [{DEFAULTS['samples']}]",
    )
    train.add_argument(
        "--eta-init",
        type=float,
        dest="eta_init",
        help=f"{INVARIANT_WEIGHTS}: initial eta [{DEFAULTS['eta_init']}]",
    )
    train.add_argument(
        "--out",
        type=Path,
        required=True,
        help="folder for the run's files; the same command again resumes the run there",
    )
    train.add_argument(
        "--overwrite",
        action="store_true",
        help="delete another run's files in --out and start afresh (a folder holding another "
        "run is otherwise refused) [off]",
    )
    evaluate = commands.add_parser(
        "evaluate",
        help="evaluate a trained run on its test set",
        description="Accuracy and NLL of the trained network's own softmax (the MAP weights, "
        "as results.json reports them), or with --predictive glm of its Laplace predictive.",
    )
    evaluate.add_argument("run", type=Path, help="the --out folder of a train run")
    evaluate.add_argument(
        "--split",
        choices=("test", "train"),
        default="test",
        help="the run's test set (default) or its training set",
    )
    evaluate.add_argument(
        "--predictive",
        choices=PREDICTIVES,
        default="map",
        help="map: the network's own softmax (as results.json) [default]; glm: the GLM "
        "predictive (probit) of its Laplace approximation, refitted at the learned precisions",
    )
    paths = commands.add_parser(
        "paths",
        help="each path's share of its layer's output on a trained run's training images",
    )
    paths.add_argument("run", type=Path, help="the --out folder of a train run")
    paths.add_argument(
        "--examples",
        type=int,
        default=PATH_OUTPUT_EXAMPLES,
        help=f"training images to measure on [{PATH_OUTPUT_EXAMPLES}]",
    )
    report = commands.add_parser("report", help="print a table of runs")
    report.add_argument("runs", type=Path, nargs="+", help="--out folders of train runs")
    report.add_argument(
        "--markdown",
        action="store_true",
        help="a markdown table with one row per experiment: mean ± std over its seeds, the "
        "evaluated epoch, budget, device and threads",
    )
    return parser


def _settings(args: argparse.Namespace) -> dict[str, Any]:
    settings = dict(DEFAULTS)
    if args.config:
        settings.update(CONFIGS[args.config])
    given = {k for k, v in vars(args).items() if k in DEFAULTS and v is not None}
    settings.update({k: getattr(args, k) for k in given})
    invariant = settings["model"] == INVARIANT_WEIGHTS
    if invariant and args.method is None:
        settings["method"] = "elbo"
    if invariant != (settings["method"] in OBJECTIVES):
        raise SystemExit(
            f"--method {settings['method']} does not go with --model {settings['model']}: "
            f"{INVARIANT_WEIGHTS} takes {OBJECTIVES}, the other models map or marglik."
        )
    if settings["mc_samples"] < 1 or (settings["mc_samples"] > 1 and not settings["stochastic"]):
        raise SystemExit(
            f"--mc-samples {settings['mc_samples']}: give a positive number of samples, and "
            "more than one only with --stochastic (the exact GGN draws none)."
        )
    _check_applicable(settings, given)
    settings["start"] = settings["start"] or default_start(settings)
    return settings


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line.

    Args:
        argv: Arguments (default: ``sys.argv[1:]``).

    Returns:
        The exit status.
    """
    args = _parser().parse_args(argv)
    try:
        return _dispatch(args)
    except (FileNotFoundError, ImportError) as error:  # a missing run, data set or package
        raise SystemExit(str(error)) from None


def _dispatch(args: argparse.Namespace) -> int:
    """Run the parsed command; see :func:`main`."""
    if args.command == "train":
        settings = _settings(args)
        try:
            results = train(settings, args.out, overwrite=args.overwrite)
        except KeyboardInterrupt:
            print(_interrupted(settings, args.out), file=sys.stderr)
            return 130
        if results is not None:  # rank 0 (or the only process)
            print(json.dumps(results["test"]))
            print(f"wrote {args.out / 'results.json'}")
    elif args.command == "evaluate":
        print(json.dumps(evaluate(args.run, args.split, args.predictive)))
    elif args.command == "paths":
        if args.examples < 1:
            raise SystemExit(f"--examples must be at least 1, got {args.examples}.")
        print(json.dumps(path_outputs(args.run, args.examples)))
    else:
        try:
            print(summary.markdown(args.runs) if args.markdown else report(args.runs))
        except ValueError as error:  # a corrupt results.json, a run named twice
            raise SystemExit(str(error)) from None
    return 0


if __name__ == "__main__":
    sys.exit(main())
