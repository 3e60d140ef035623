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
import dataclasses
import datetime
import json
import os
import platform
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
from torch.nn import functional as F
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

from laplace_equivariance import __version__, distributed, models, summary
from laplace_equivariance.augment import augmenting_collate
from laplace_equivariance.data import DATASETS, load_dataset
from laplace_equivariance.diagnostics import path_output_shares, plot_symmetry, symmetry_report
from laplace_equivariance.invariance import (
    ACTIVATIONS,
    INVARIANCES,
    OBJECTIVES,
    InvariantWeightsNet,
    train_invariant_weights,
)
from laplace_equivariance.layers import AnchorBasis, LengthscaleMode, RelaxedLayer
from laplace_equivariance.lengthscales import DERIVATIVES
from laplace_equivariance.marglik import (
    OPTIMIZERS,
    CheckpointError,
    marglik_step_epochs,
    marglik_training,
    paper_schedule,
)

__all__ = ["CONFIGS", "INVARIANT_WEIGHTS", "main"]

INVARIANT_WEIGHTS = "invariant-weights"
"""``--model`` name of the invariant-weights network."""

INVARIANT_MARGLIK_SUBSET = 500
"""Default ``--marglik-subset`` of the invariant-weights Laplace method: its full GGN costs
``O(n K P^2)`` with ``P = K (D + 1)``."""

CONFIGS: dict[str, dict[str, Any]] = {
    "table1": {"dataset": "quadrant-mnist", "model": "f-fc+conv", "alpha": 10, "epochs": 1000},
    "table2": {
        "dataset": "cifar10",
        "model": "f-fc+conv",
        "alpha": 10,
        "epochs": 4000,
        "augment": True,
    },
    "table3": {"dataset": "mnist", "model": "f-fc+conv+gconv", "alpha": 2, "epochs": 1000},
}
"""The paper's settings (App. F.6) of data, model, width and epochs (and CIFAR-10's random
flips and shifts); with the defaults below:
hyperparameters lr 0.1, burn-in 10 epochs, marginal likelihood every 5 epochs with 20 steps,
batch 128, unit prior variances, Adam cosine-annealed to 0 at lr 0.003 (the paper's 0.01 leaves
even MAP CONV at chance at these data sizes; ``--optimizer sgd --lr 0.01`` is the reference
code's)."""

DEFAULTS: dict[str, Any] = {
    "dataset": "quadrant-mnist",
    "model": "f-fc+conv",
    "method": "marglik",
    "alpha": 10,
    "epochs": 20,
    "lr": 0.003,
    "lr_min": 0.0,
    "optimizer": "adam",
    "augment": False,
    "lr_hyp": 0.1,
    "batch_size": 128,
    "burnin": 10,
    "marglik_frequency": 5,
    "hypersteps": 20,
    "subset": None,
    "test_subset": None,
    "marglik_subset": None,
    "stochastic": False,
    "mc_samples": 1,
    "kfac_approx": "expand",
    "restore_best": False,
    "balance_factors": False,
    "start": None,
    "prior_structure": "layerwise",
    "lengthscale_mode": "learned",
    "lengthscale_derivative": "total",
    "device": "cuda" if torch.cuda.is_available() else "cpu",
    "seed": 0,
    "threads": None,
    "timeout": 600,
    "data_dir": None,
    "download": False,
    "invariance": "rotation",
    "activation": "rff",
    "width": 1024,
    "samples": 32,
    "eta_init": 0.1,
}


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
        "as results.json reports them), not of a Laplace predictive.",
    )
    evaluate.add_argument("run", type=Path, help="the --out folder of a train run")
    evaluate.add_argument(
        "--split",
        choices=("test", "train"),
        default="test",
        help="the run's test set (default) or its training set",
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


INVARIANT_ONLY = ("invariance", "activation", "width", "samples")
"""Options of the invariant-weights network only."""

MARGINAL_LIKELIHOOD_ONLY = (
    "prior_structure",
    "lr_hyp",
    "marglik_subset",
    "stochastic",
    "mc_samples",
    "kfac_approx",
    "restore_best",
    "lengthscale_derivative",
    "balance_factors",
)
"""Options of the marginal-likelihood fits, refused with ``--method map``. The schedule's
``--burnin``, ``--marglik-frequency`` and ``--hypersteps`` are accepted there (a MAP run's
schedule has no fit at all) so that one set of flags serves the rows of a table."""


def _check_applicable(settings: dict[str, Any], given: set[str]) -> None:
    """Refuse options given on the command line that the run would not use.

    Recorded in ``run.json`` as if they took effect, they would describe a run that did
    not happen (a MAP run "with the Monte-Carlo Fisher", a CONV network "with a fixed
    lengthscale").

    Raises:
        SystemExit: One line naming the first such option and what to do.
    """

    def flag(name: str) -> str:
        return "--" + name.replace("_", "-")

    if settings["method"] == "map":
        unused = [k for k in MARGINAL_LIKELIHOOD_ONLY if k in given]
        if unused:
            raise SystemExit(
                f"{flag(unused[0])} does not apply to --method map (no marginal likelihood is "
                "fitted): drop it, or use --method marglik."
            )
    invariant = settings["model"] == INVARIANT_WEIGHTS
    unused = [k for k in INVARIANT_ONLY if k in given and not invariant]
    if unused:
        raise SystemExit(
            f"{flag(unused[0])} sets the {INVARIANT_WEIGHTS} network; --model "
            f"{settings['model']} does not have it: drop it."
        )
    if "lengthscale_mode" in given and not any(
        kind.startswith("s-") for kind in settings["model"].split("+")
    ):
        raise SystemExit(
            f"--lengthscale-mode sets the S-layers' lengthscale; --model {settings['model']} "
            "has none (use s-fc, s-conv or s-fc+s-conv): drop it."
        )


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


def build_model(
    settings: dict[str, Any], in_shape: Sequence[int], n_classes: int
) -> torch.nn.Module:
    """The model that ``settings`` name.

    Args:
        settings: A run's settings (:data:`DEFAULTS` keys).
        in_shape: ``(C, H, W)``.
        n_classes: Number of classes.

    Returns:
        A relaxed network of :func:`laplace_equivariance.models.build` or an
        :class:`~laplace_equivariance.invariance.InvariantWeightsNet`.
    """
    if settings["model"] != INVARIANT_WEIGHTS:
        model = models.build(
            settings["model"],
            in_shape,
            n_classes,
            settings["alpha"],
            sparse_options={"lengthscale_mode": settings["lengthscale_mode"]},
        )
        if settings.get("start") in SILENCED_STARTS:
            model.start_equivariant_()
        return model
    return InvariantWeightsNet(
        in_shape,
        n_classes,
        width=settings["width"],
        activation=settings["activation"],
        invariance=settings["invariance"],
        eta_init=settings["eta_init"],
        n_samples=settings["samples"],
        variational=settings["method"] == "elbo",
    )


def _metrics(model: torch.nn.Module, x: torch.Tensor, y: torch.Tensor, device: str) -> dict:
    model.eval()
    with torch.no_grad():
        logits = torch.cat([model(b.to(device)).cpu() for b in x.split(512)])
    return {
        "accuracy": (logits.argmax(-1) == y).float().mean().item(),
        "nll": F.cross_entropy(logits, y).item(),
    }


def _plot_training(
    losses: list[float],
    margliks: list[float],
    path: Path,
    labels: tuple[str, str] = ("hyperparameter step", "-log marginal likelihood"),
) -> None:
    import matplotlib

    matplotlib.use("Agg", force=False)
    from matplotlib import pyplot as plt

    figure, axes = plt.subplots(1, 2, figsize=(8, 3))
    axes[0].plot(range(1, len(losses) + 1), losses)
    axes[0].set(xlabel="epoch", ylabel="training loss")
    axes[1].plot(margliks)
    axes[1].set(xlabel=labels[0], ylabel=labels[1])
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    plt.close(figure)


def _plot_eta(eta: list[list[float]], names: Sequence[str], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg", force=False)
    from matplotlib import pyplot as plt

    figure, axis = plt.subplots(figsize=(4, 3))
    for i, name in enumerate(names):
        axis.plot(range(1, len(eta) + 1), [row[i] for row in eta], label=name)
    axis.set(xlabel="epoch", ylabel="eta")
    axis.legend()
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    plt.close(figure)


def device_name(device: str) -> str:
    """The GPU's name for a CUDA device, else the CPU's model name (``/proc/cpuinfo``)."""
    if device.startswith("cuda"):
        return torch.cuda.get_device_name(device)
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.exists():
        for line in cpuinfo.read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or platform.machine() or "cpu"


def _join_process_group(settings: dict[str, Any]) -> int:
    """Under ``torchrun`` (``WORLD_SIZE`` > 1), join its process group; the world size.

    gloo on the CPU, NCCL on GPUs (each rank on the GPU of its ``LOCAL_RANK``); a rank that
    waits longer than ``settings["timeout"]`` seconds for the others raises.
    """
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world > 1 and not dist.is_initialized():
        cuda = settings["device"].startswith("cuda")
        if cuda:
            settings["device"] = f"cuda:{int(os.environ.get('LOCAL_RANK', '0'))}"
            torch.cuda.set_device(settings["device"])
        dist.init_process_group(
            "nccl" if cuda else "gloo",
            timeout=datetime.timedelta(seconds=settings["timeout"]),
        )
    return distributed.world_size()


def _loaders(
    settings: dict[str, Any], train_set: TensorDataset, marglik_set: TensorDataset
) -> tuple[DataLoader, DataLoader]:
    """The training loader (shuffled; augmented with ``--augment``) and the marginal likelihood's.

    The marginal likelihood's loader is in order and never augmented.

    In a process group of ``W`` ranks each rank gets a shard through a ``DistributedSampler``
    and batches of ``batch_size / W`` (the global batch stays ``batch_size``); the marginal
    likelihood's examples must split evenly, since every one is counted once.
    """
    batch_size, world = settings["batch_size"], distributed.world_size()
    collate = augmenting_collate if settings["augment"] else None
    if world == 1:
        return (
            DataLoader(train_set, batch_size=batch_size, shuffle=True, collate_fn=collate),
            DataLoader(marglik_set, batch_size=batch_size),
        )
    if batch_size % world or len(marglik_set) % world:
        raise SystemExit(
            f"With {world} processes the batch size ({batch_size}) and the marginal "
            f"likelihood's examples ({len(marglik_set)}; --marglik-subset) must be multiples "
            f"of {world}."
        )
    per_rank = batch_size // world
    shuffled = DistributedSampler(train_set, shuffle=True, seed=settings["seed"])
    in_order = DistributedSampler(marglik_set, shuffle=False)
    return (
        DataLoader(train_set, batch_size=per_rank, sampler=shuffled, collate_fn=collate),
        DataLoader(marglik_set, batch_size=per_rank, sampler=in_order),
    )


RUN_RECORD = "run.json"
"""File in ``--out`` that records the settings and version a run was started with."""

NOT_RESULT_SETTINGS = ("threads", "timeout", "download")
"""Settings that do not change a run's result: a run may resume with other values of them."""

FIT_TRACE_FILE = "fits.jsonl"
"""File in ``--out`` to which a learned run appends one line per marginal-likelihood fit."""

RUN_FILES = (
    RUN_RECORD,
    "checkpoint.pt",
    "results.json",
    "model.pt",
    summary.PATH_OUTPUTS_FILE,
    FIT_TRACE_FILE,
)
"""Files of a run in its ``--out`` folder (besides the plots); ``--overwrite`` removes them."""

STARTS = ("mixed", "equivariant", "held")
"""``--start`` values: paths drawn at random; FC-type paths silenced; silenced and held."""
SILENCED_STARTS = ("equivariant", "held")
"""Starts at :meth:`~laplace_equivariance.models.RelaxedNet.start_equivariant_`."""

POSITIVE = ("epochs", "alpha", "batch_size", "marglik_frequency", "hypersteps", "mc_samples")
"""Settings that must be at least 1 (``burnin`` at least 0; subsets at least 1 when given)."""


def default_start(settings: dict[str, Any]) -> str:
    """Where training starts when ``--start`` is not given.

    ``"held"`` for marginal-likelihood runs of models with an FC-type path beside an
    equivariant one (F-FC+CONV and the like): the FC-type paths silenced and held until the
    first fit, so that the evidence weighs them before the burn-in grows them. Started
    mixed, the App. F.1 network's middle layers go FC on the translation-invariant digit
    task; started equivariant with the FC paths free, the paths grown in the burn-in cost
    accuracy; held, the evidence switches FC on only where the labels need position
    (docs/learned_structure.md, "Where training starts"). ``"mixed"`` for MAP runs (the
    architecture's baseline, drawn as the reference code draws it) and single-kind models.
    """
    relaxed = is_relaxed(settings["model"])
    return "held" if relaxed and settings["method"] == "marglik" else "mixed"


def is_relaxed(model: str) -> bool:
    """Whether ``model``'s layers hold an FC-type path beside an equivariant one.

    ``--start`` chooses between two starting points only for these models.
    """
    kinds = _path_kinds(model)
    return "fc" in kinds and bool(kinds & set(models.EQUIVARIANT_PATHS))


def _path_kinds(model: str) -> set[str]:
    """The path names in every layer of ``model`` (none for the invariant-weights network)."""
    return {models.PATH_NAME[kind] for kind in models.MODEL_NAMES.get(model, ())}


def check_settings(settings: dict[str, Any]) -> None:
    """Refuse, before anything is loaded or created, settings that cannot give a valid run.

    Raises:
        SystemExit: With one line naming the option, for a count below its minimum, a
            marginal-likelihood run that takes no marginal-likelihood step (it would be
            reported as learned at the initial priors), or a device this machine lacks.
    """
    for key in POSITIVE:
        if settings[key] < 1:
            raise SystemExit(f"--{key.replace('_', '-')} must be at least 1, got {settings[key]}.")
    for key in ("subset", "test_subset", "marglik_subset", "threads"):
        if settings[key] is not None and settings[key] < 1:
            raise SystemExit(f"--{key.replace('_', '-')} must be at least 1, got {settings[key]}.")
    if settings["burnin"] < 0:
        raise SystemExit(f"--burnin must be at least 0, got {settings['burnin']}.")
    for key in ("lr", "lr_hyp"):
        if not settings[key] > 0:  # also NaN
            raise SystemExit(f"--{key.replace('_', '-')} must be above 0, got {settings[key]}.")
    invariant = settings["model"] == INVARIANT_WEIGHTS
    start = settings.get("start")
    if start in SILENCED_STARTS and not _path_kinds(settings["model"]) & set(
        models.EQUIVARIANT_PATHS
    ):
        raise SystemExit(
            f"--start {start} silences the FC-type paths; --model {settings['model']} has "
            "no equivariant path to start from (use a model with conv or gconv, e.g. f-fc+conv)."
        )
    if start == "held" and settings["method"] != "marglik":
        raise SystemExit(
            f"--start held holds the FC-type paths until the first marginal-likelihood fit; "
            f"--method {settings['method']} has none (use --start equivariant)."
        )
    if invariant and settings["lr_min"]:
        raise SystemExit(
            f"--lr-min sets the end of the relaxed models' cosine schedule; --model "
            f"{INVARIANT_WEIGHTS} anneals to 0 (train_invariant_weights)."
        )
    if settings["method"] in ("marglik", "laplace"):
        # train_invariant_weights steps after epoch ``burnin``, marglik_training from it on
        burnin = settings["burnin"] + 1 if invariant else settings["burnin"]
        if not marglik_step_epochs(settings["epochs"], burnin, settings["marglik_frequency"]):
            raise SystemExit(
                f"--method {settings['method']} with --epochs {settings['epochs']} takes no "
                f"marginal-likelihood step (--burnin {settings['burnin']}, one every "
                f"--marglik-frequency {settings['marglik_frequency']} epochs): nothing would "
                "be learned. Train longer, lower --burnin, or use --method map."
            )
    _check_device(settings["device"])


def _check_device(device: str) -> None:
    """Raise SystemExit unless ``device`` names a device this machine has."""
    try:
        kind = torch.device(device)
    except RuntimeError as error:
        raise SystemExit(f"--device {device}: {error}") from None
    if kind.type == "cuda" and not torch.cuda.is_available():
        raise SystemExit(
            f"--device {device}: this machine has no CUDA device (torch.cuda.is_available() is "
            "False); use --device cpu."
        )
    if kind.type == "cuda" and kind.index is not None and kind.index >= torch.cuda.device_count():
        raise SystemExit(
            f"--device {device}: this machine has {torch.cuda.device_count()} CUDA device(s)."
        )
    if kind.type == "mps" and not torch.backends.mps.is_available():
        raise SystemExit(f"--device {device}: MPS is not available here; use --device cpu.")
    if kind.type not in ("cpu", "cuda", "mps"):
        raise SystemExit(f"--device {device}: use cpu, cuda[:N] or mps.")


def _differences(recorded: dict[str, Any], settings: dict[str, Any]) -> list[str]:
    """``"key: old -> new"`` for every result-changing setting that differs.

    A setting the record lacks (a run made before the option existed) reads ``"absent (the
    run predates the option)"``.
    """
    keys = sorted((set(recorded) | set(settings)) - set(NOT_RESULT_SETTINGS))
    absent = "absent (the run predates the option)"
    return [
        f"{key}: {repr(recorded[key]) if key in recorded else absent} -> {settings.get(key)!r}"
        for key in keys
        if key not in recorded or recorded[key] != settings.get(key)
    ]


def prepare_out(settings: dict[str, Any], out: Path, overwrite: bool = False) -> int | None:
    """Make ``out`` ready for the run, resuming only the same run.

    A folder with a run's files resumes (from ``checkpoint.pt``) only if its
    :data:`RUN_RECORD` has the same package version and the same settings, except
    :data:`NOT_RESULT_SETTINGS`; ``overwrite`` deletes the run's files and starts afresh. A
    record alone (a run stopped before its first epoch ended) is replaced.

    Returns:
        The last epoch the checkpoint holds when the run resumes, else None.

    Raises:
        SystemExit: If ``out`` holds another run (naming the settings that differ), files of a
            run without a record, a checkpoint that cannot be read, or cannot be written.
    """
    record_path = out / RUN_RECORD
    present = [name for name in RUN_FILES if (out / name).exists()]
    record = {"package": __version__, "settings": settings, "world_size": distributed.world_size()}
    if present and overwrite and distributed.rank() == 0:
        for name in present:
            (out / name).unlink()
        present = []
    if present and present != [RUN_RECORD] and not overwrite:
        if not record_path.exists():
            raise SystemExit(
                f"--out {out} holds files of a run ({', '.join(present)}) with no record of "
                f"its settings ({RUN_RECORD}): pass --overwrite to start afresh there, or "
                "another --out."
            )
        recorded = json.loads(record_path.read_text())
        differences = _differences(recorded["settings"], settings)
        if recorded.get("package") != __version__:
            differences.insert(0, f"package: {recorded.get('package')!r} -> {__version__!r}")
        if differences:
            raise SystemExit(
                f"--out {out} holds another run; resuming it would mix two runs. Settings "
                f"that differ: {'; '.join(differences)}. Pass --overwrite to start afresh "
                "there, or another --out."
            )
        _check_same_circumstances(recorded, record, out)
    try:
        out.mkdir(parents=True, exist_ok=True)
        if distributed.rank() == 0:
            record_path.write_text(json.dumps(record, indent=2) + "\n")
    except OSError as error:
        raise SystemExit(f"--out {out}: cannot write there ({error.strerror}).") from None
    distributed.barrier()
    return _checkpoint_epoch(out / "checkpoint.pt")


def _check_same_circumstances(recorded: dict[str, Any], record: dict[str, Any], out: Path) -> None:
    """Refuse to resume epochs that ran with other threads or processes than this call's.

    ``results.json`` states the threads and processes of the whole run; a resume under
    others would state circumstances that the epochs before it did not run under.

    Raises:
        SystemExit: Naming both, if ``out`` holds a checkpoint with at least one epoch.
    """
    if _checkpoint_epoch(out / "checkpoint.pt") is None:
        return
    then = (recorded["settings"].get("threads"), recorded.get("world_size", 1))
    now = (record["settings"].get("threads"), record["world_size"])
    if then != now:
        raise SystemExit(
            f"--out {out} holds epochs that ran with --threads {then[0]} in {then[1]} "
            f"process(es); this call has --threads {now[0]} in {now[1]}: the run's record would "
            "state circumstances its epochs did not run under. Resume with the same, or pass "
            "--overwrite to start afresh."
        )


def _checkpoint_epoch(path: Path) -> int | None:
    """The last epoch a checkpoint holds, None without one.

    Raises:
        SystemExit: If it cannot be read.
    """
    if not path.exists():
        return None
    try:
        saved = torch.load(path, map_location="cpu", weights_only=False)
        return int(saved["state"]["epoch"])
    except Exception as error:  # unpickling errors have no common base class
        raise SystemExit(
            f"Checkpoint {path} cannot be read ({type(error).__name__}): it is corrupt, empty "
            "or truncated. Pass --overwrite to start afresh."
        ) from None


def _train_invariant(
    settings: dict[str, Any], model: torch.nn.Module, loader: DataLoader, marglik_loader
) -> tuple[list[float], list[float], dict[str, Any]]:
    """Train the invariant-weights network: losses, objective values, its results entry."""
    history = train_invariant_weights(
        model,
        loader,
        settings["method"],
        n_epochs=settings["epochs"],
        lr=settings["lr"],
        lr_hyp=settings["lr_hyp"],
        marglik_loader=marglik_loader,
        marglik_frequency=settings["marglik_frequency"],
        n_hypersteps=settings["hypersteps"],
        n_epochs_burnin=settings["burnin"],
        progress_bar=True,
    )
    extra = {
        "invariance": dataclasses.asdict(history)
        | {"generators": INVARIANCES[settings["invariance"]]}
    }
    return history.loss, [-v for v in history.objective if v is not None], extra


def _train_relaxed(
    settings: dict[str, Any],
    model: torch.nn.Module,
    loader: DataLoader,
    marglik_loader: DataLoader,
    out: Path,
) -> tuple[Any, torch.nn.Module, list[float], list[float], float, dict[str, Any]]:
    """Train a relaxed network with :func:`marglik_training` (checkpointed in ``out``).

    Returns:
        ``(la, model, losses, margliks, seconds, timing)``: ``seconds`` counts every
        epoch, also those run before a resume (the checkpoint keeps their time), and what
        follows the last epoch (the final Laplace fit); ``timing`` holds
        ``evaluated_epoch`` and ``epoch_seconds`` (each epoch's time, its fit included).
    """
    learns = settings["method"] == "marglik"
    epochs_done: dict[str, Any] = {}
    trace_inputs = loader.dataset.tensors[0][:PATH_OUTPUT_EXAMPLES]

    def record(epoch: int, info: dict[str, Any]) -> None:
        epochs_done.update(
            seconds=info["seconds"],
            epoch_seconds=info["epoch_seconds"],
            at=time.perf_counter(),
            evaluated_epoch=info["best_epoch"] or epoch,
        )
        if info["neg_log_marglik"] is not None and distributed.rank() == 0:
            append_fit(out / FIT_TRACE_FILE, epoch, info, model, trace_inputs)

    schedule = paper_schedule(
        settings["epochs"],
        len(loader),
        lr=settings["lr"],
        optimizer=settings["optimizer"],
        marglik=learns,
        n_epochs_burnin=settings["burnin"],
        marglik_frequency=settings["marglik_frequency"],
        lr_min=settings["lr_min"],
    ) | {"lr_hyp": settings["lr_hyp"], "n_hypersteps": settings["hypersteps"]}
    start = time.perf_counter()
    try:
        la, model, margliks, losses = marglik_training(
            model,
            loader,
            prior_structure=settings["prior_structure"],
            progress_bar=True,
            **schedule,
            marglik_loader=marglik_loader,
            stochastic=settings["stochastic"],
            n_mc_samples=settings["mc_samples"],
            kfac_approx=settings.get("kfac_approx", "expand"),
            checkpoint=out / "checkpoint.pt",
            final_laplace=learns,
            lengthscale_derivative=settings["lengthscale_derivative"],
            restore_best=settings["restore_best"],
            balance_factors=settings.get("balance_factors", False),
            held_until_fit=model.fc_type_parameters() if settings.get("start") == "held" else (),
            callback=record,
        )
    except CheckpointError as error:
        raise SystemExit(f"{error} Or pass --overwrite.") from None
    if epochs_done:
        start = epochs_done["at"] - epochs_done["seconds"]
        timing = {
            "evaluated_epoch": epochs_done["evaluated_epoch"],
            "epoch_seconds": epochs_done["epoch_seconds"],
        }
    else:  # every epoch ran before this call: the checkpoint holds their time
        state = torch.load(out / "checkpoint.pt", map_location="cpu", weights_only=False)["state"]
        start -= state["seconds"]
        best = state["best"] if settings["restore_best"] else None
        timing = {
            "evaluated_epoch": best["epoch"] if best else state["epoch"],
            "epoch_seconds": state.get("epoch_seconds", []),
        }
    return la, model, losses, margliks, time.perf_counter() - start, timing


def append_fit(
    path: Path, epoch: int, info: dict[str, Any], model: torch.nn.Module, x: torch.Tensor
) -> None:
    """Append one marginal-likelihood fit's state to the run's trace (:data:`FIT_TRACE_FILE`).

    One JSON line: the ``epoch``, the fit's last ``neg_log_marglik``, every prior group's
    ``prior_precision``, every parameter tensor's ``squared_norm`` (so ``delta ||theta||^2``,
    MacKay's ``gamma`` at the fixed point of a fit, can be read per tensor) and the relaxed
    layers' ``path_outputs`` (:func:`path_output_shares` on ``x``, the first training images).
    Measuring leaves the model's mode, weights and random state as they were.

    Args:
        path: The trace file (created if missing).
        epoch: The epoch the fit followed.
        info: What :func:`marglik_training` passes its callback after that epoch.
        model: The model being trained.
        x: Inputs for the output shares, shape ``(N, *in_shape)``, on the model's device.
    """
    line: dict[str, Any] = {
        "epoch": epoch,
        "neg_log_marglik": info["neg_log_marglik"],
        "prior_precision": info["prior_precision"],
        "squared_norm": {
            name: weight.detach().double().square().sum().item()
            for name, weight in model.named_parameters()
        },
    }
    if any(isinstance(module, RelaxedLayer) for module in model.modules()):
        training = model.training
        with torch.no_grad():
            line["path_outputs"] = path_output_shares(model.eval(), x)
        model.train(training)
    with path.open("a") as trace:
        trace.write(json.dumps(line) + "\n")


def read_fits(path: Path) -> list[dict[str, Any]]:
    """The fits a run's trace holds, in epoch order, the last line of each epoch kept.

    A run resumed from its checkpoint may repeat an epoch the trace already holds (when it
    stopped between the checkpoint and the trace); its later line describes the state the
    run went on from.

    Args:
        path: A :data:`FIT_TRACE_FILE`; a missing file holds no fits.
    """
    if not path.exists():
        return []
    by_epoch = {}
    for text in path.read_text().splitlines():
        line = json.loads(text)
        by_epoch[line["epoch"]] = line
    return [by_epoch[epoch] for epoch in sorted(by_epoch)]


def _write_files(
    results: dict[str, Any],
    settings: dict[str, Any],
    model: torch.nn.Module,
    la: Any,
    out: Path,
) -> None:
    """``model.pt``, ``symmetry.png`` (learned runs), ``training.png``, ``results.json``."""
    torch.save(model.state_dict(), out / "model.pt")
    if la is not None:
        plot_symmetry(
            results["symmetry"], title=f"{settings['model']} on {settings['dataset']}"
        ).savefig(out / "symmetry.png", dpi=120)
    if "invariance" in results:
        _plot_eta(
            results["invariance"]["eta"], INVARIANCES[settings["invariance"]], out / "eta.png"
        )
        labels = ("epoch", f"-{settings['method']} objective / N")
        _plot_training(results["losses"], results["neg_log_marglik"], out / "training.png", labels)
    else:
        _plot_training(results["losses"], results["neg_log_marglik"], out / "training.png")
    (out / "results.json").write_text(json.dumps(results, indent=2) + "\n")


def train(settings: dict[str, Any], out: Path, overwrite: bool = False) -> dict[str, Any] | None:
    """Train as ``settings`` say and write the run's files to ``out``.

    Steps: check the settings (:func:`check_settings`), load the data (both before anything
    is created), prepare the folder (:func:`prepare_out`: resume only the same run), build
    the model, train, evaluate, write the files. Under ``torchrun --nproc-per-node W`` the ranks
    train one model together (:mod:`laplace_equivariance.distributed`) and rank 0 writes.

    Args:
        settings: The run's settings (:data:`DEFAULTS` keys).
        out: Folder for ``results.json``, ``model.pt``, the plots and the checkpoint.
        overwrite: Delete another run's files in ``out`` and start afresh.

    Returns:
        The results written to ``results.json`` (None on ranks other than 0).

    Raises:
        SystemExit: For settings that cannot give a valid run, or an ``out`` that holds
            another run or cannot be written (one line each, naming what to do).
    """
    settings = dict(settings, start=settings.get("start") or default_start(settings))
    check_settings(settings)
    world = _join_process_group(settings)
    invariant = settings["model"] == INVARIANT_WEIGHTS
    if world > 1 and invariant:
        raise SystemExit(f"--model {INVARIANT_WEIGHTS} trains in one process, not under torchrun.")
    if settings.get("threads"):
        torch.set_num_threads(settings["threads"])
    torch.manual_seed(settings["seed"])
    data = load_dataset(
        settings["dataset"],
        settings["data_dir"],
        settings["download"],
        settings["subset"],
        settings["test_subset"],
        settings["seed"],
    )
    n_train = len(data.x_train)
    if settings["marglik_subset"] is not None and settings["marglik_subset"] > n_train:
        raise SystemExit(
            f"--marglik-subset {settings['marglik_subset']} is more than the {n_train} training "
            f"examples: give at most {n_train}, or leave it out to fit on all of them."
        )
    resumes_from = prepare_out(settings, out, overwrite)
    if resumes_from == settings["epochs"] and (out / "results.json").exists():
        if distributed.rank() != 0:
            return None
        print(f"{out} is finished (epoch {resumes_from} of {settings['epochs']}): nothing to do.")
        return summary.load_run(out)
    if resumes_from is not None and distributed.rank() == 0:
        print(
            f"resuming from epoch {resumes_from} of {settings['epochs']} ({out / 'checkpoint.pt'})"
        )
    device = settings["device"]
    model = build_model(settings, data.in_shape, data.n_classes).to(device)
    x, y = data.x_train.to(device), data.y_train.to(device)
    default_subset = min(len(x), INVARIANT_MARGLIK_SUBSET) if invariant else len(x)
    n_marglik = settings["marglik_subset"] or default_subset
    loader, marglik_loader = _loaders(
        settings, TensorDataset(x, y), TensorDataset(x[:n_marglik], y[:n_marglik])
    )
    la = None
    if invariant:
        start = time.perf_counter()
        losses, margliks, extra = _train_invariant(settings, model, loader, marglik_loader)
        seconds = time.perf_counter() - start
    else:
        # evaluated_epoch: the epoch whose model the test metrics are of
        la, model, losses, margliks, seconds, extra = _train_relaxed(
            settings, model, loader, marglik_loader, out
        )
    if distributed.rank() != 0:
        return None
    results: dict[str, Any] = {
        "settings": settings,
        "versions": {
            "laplace_equivariance": __version__,
            "torch": torch.__version__,
            "python": platform.python_version(),
        },
        "device": device_name(device),
        "threads": torch.get_num_threads(),
        "world_size": world,
        "data_source": data.source,
        "n_train": len(x),
        "n_test": len(data.x_test),
        "parameters": models.count_parameters(model),
        "train_seconds": seconds,
        "losses": losses,
        "neg_log_marglik": margliks,
        "test": _metrics(model, data.x_test, data.y_test, device),
        # the fit to the training data tells underfitting (a strong prior, a short budget)
        # from overfitting
        "train": _metrics(model, data.x_train, data.y_train, device),
        "lengthscales": {
            name: module.lengthscale.item()
            for name, module in model.named_modules()
            if isinstance(module, AnchorBasis)
        },
        **extra,
    }
    if la is not None:
        results["symmetry"] = symmetry_report(la)
        results["fits"] = read_fits(out / FIT_TRACE_FILE)
    if any(isinstance(m, RelaxedLayer) for m in model.modules()):
        results["path_outputs"] = path_output_shares(
            model.eval(), data.x_train[:PATH_OUTPUT_EXAMPLES].to(device)
        )
    _write_files(results, settings, model, la, out)
    return results


def load_trained(run: Path) -> tuple[torch.nn.Module, Any]:
    """Rebuild a trained run's model (on the CPU, evaluation mode) and its data.

    Args:
        run: The ``--out`` folder of a ``train`` run.

    Returns:
        The model with the run's ``model.pt`` loaded, and the run's data set
        (:func:`laplace_equivariance.data.load_dataset`, its ``--subset`` applied).

    Raises:
        SystemExit: If the weights came from a version whose layers computed another function.
    """
    stored = summary.load_run(run)
    settings = stored["settings"]
    data = load_dataset(
        settings["dataset"],
        settings["data_dir"],
        False,
        settings["subset"],
        settings["test_subset"],
        settings["seed"],
    )
    model = build_model(settings, data.in_shape, data.n_classes)
    _check_same_function(run, stored, model)
    try:
        weights = torch.load(run / "model.pt", map_location="cpu")
    except Exception as error:  # unpickling errors have no common base class
        raise SystemExit(
            f"{run / 'model.pt'} cannot be read ({type(error).__name__}): it is corrupt, "
            "truncated or missing; rerun the run's train command with --overwrite."
        ) from None
    model.load_state_dict(weights)
    return model.eval(), data


def evaluate(run: Path, split: str = "test") -> dict[str, float]:
    """Rebuild a trained run's model and data and evaluate it on one of its data splits.

    Args:
        run: The ``--out`` folder of a ``train`` run.
        split: ``"test"`` or ``"train"`` (the run's training set, its ``--subset`` applied).

    Returns:
        Accuracy and NLL on that split.

    Raises:
        ValueError: If ``split`` is neither.
    """
    if split not in ("test", "train"):
        raise ValueError(f"split must be 'test' or 'train', not {split!r}")
    model, data = load_trained(run)
    if split == "train":
        return _metrics(model, data.x_train, data.y_train, "cpu")
    return _metrics(model, data.x_test, data.y_test, "cpu")


PATH_OUTPUT_EXAMPLES = 1000
"""Training examples on which ``train`` and ``paths`` measure each path's output share."""


def path_outputs(run: Path, examples: int = PATH_OUTPUT_EXAMPLES) -> list[dict[str, Any]]:
    """Each path's share of its layer's output energy for a trained run.

    Measured on the first ``examples`` of the run's training images
    (:func:`~laplace_equivariance.path_output_shares`).

    Args:
        run: The ``--out`` folder of a ``train`` run.
        examples: How many training images to measure on.

    Returns:
        ``[{"layer", "paths": {path: share}}, ...]`` per relaxed layer.
    """
    model, data = load_trained(run)
    return path_output_shares(model, data.x_train[:examples])


PATHS_SUMMED_SINCE = (0, 3, 0)
"""Version since which relaxed layers sum their paths over ``sqrt(K)`` (before: the mean)."""


def _check_same_function(run: Path, stored: dict[str, Any], model: torch.nn.Module) -> None:
    """Refuse weights that this version's layers would turn into another function.

    Raises:
        SystemExit: For a model with several paths per layer trained before
            :data:`PATHS_SUMMED_SINCE`.
    """
    made_by = stored.get("versions", {}).get("laplace_equivariance", "0")
    numbers = tuple(int(part) for part in made_by.split(".")[:3] if part.isdigit())
    several_paths = any(
        isinstance(m, RelaxedLayer) and len(m.path_names) > 1 for m in model.modules()
    )
    if several_paths and numbers < PATHS_SUMMED_SINCE:
        raise SystemExit(
            f"{run} was trained by laplace-equivariance {made_by}, whose relaxed layers "
            f"averaged their paths; this version ({__version__}) sums them over sqrt(K), so "
            f"the saved weights would give another function. Evaluate it with version "
            f"{made_by}, or train it again."
        )


def report(runs: Sequence[Path]) -> str:
    """A plain-text table of runs, one line each.

    Each line holds the data set, model, method, test accuracy and NLL, training accuracy
    ("-" for runs written before ``results.json`` held it) and the learned layers.

    Args:
        runs: ``--out`` folders of ``train`` runs.

    Returns:
        The table.
    """
    lines = [
        f"{'dataset':22} {'model':16} {'method':8} {'acc %':>6} {'nll':>6} {'train %':>7}  "
        "learned layers / eta"
    ]
    for run in runs:
        results = summary.load_run(run)
        s, test = results["settings"], results["test"]
        learned = " ".join(
            row["learned"] for row in results.get("symmetry", {}).get("layers", [])[:8]
        )
        if s["method"] == "marglik" and not results.get("neg_log_marglik"):
            learned = "not learned: no marginal-likelihood step"
        if "invariance" in results:
            eta = results["invariance"]["eta"][-1]
            learned = ", ".join(
                f"{name} {value:.2f}"
                for name, value in zip(results["invariance"]["generators"], eta, strict=True)
            )
        # runs written before results.json held the training fit show "-"
        fit = results.get("train")
        train_accuracy = "-" if fit is None else f"{100 * fit['accuracy']:.2f}"
        lines.append(
            f"{s['dataset']:22} {s['model']:16} {s['method']:8} {100 * test['accuracy']:6.2f} "
            f"{test['nll']:6.3f} {train_accuracy:>7}  {learned or '-'}"
        )
    return "\n".join(lines)


def _interrupted(settings: dict[str, Any], out: Path) -> str:
    """The one line printed on Ctrl-C: what the checkpoint holds and how to resume."""
    checkpoint = out / "checkpoint.pt"
    if settings["model"] == INVARIANT_WEIGHTS:
        return (
            f"Interrupted; --model {INVARIANT_WEIGHTS} keeps no checkpoint: run again to retrain."
        )
    try:
        epoch = _checkpoint_epoch(checkpoint)
    except SystemExit:
        epoch = None
    if epoch is None:
        return "Interrupted before the first epoch ended: nothing to resume."
    return (
        f"Interrupted; {checkpoint} holds epoch {epoch} of {settings['epochs']}: run the same "
        "command again to resume."
    )


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
        print(json.dumps(evaluate(args.run, args.split)))
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
