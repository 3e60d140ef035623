"""The paper's configurations and the checks of a run's settings.

The settings themselves, their defaults and types are
:class:`~laplace_equivariance.app.run_config.RunConfig`'s (:data:`DEFAULTS` is its dict form,
re-exported here). Also the model a configuration names (:func:`build_model`); the checks
refuse settings that cannot give a valid run, one line each.
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import torch
from torch import nn

from laplace_equivariance import models
from laplace_equivariance.app.run_config import (
    DEFAULTS,
    INVARIANT_MARGLIK_SUBSET,
    INVARIANT_WEIGHTS,
    RunConfig,
    SettingError,
    Start,
    add_options,
)
from laplace_equivariance.invariance import OBJECTIVES, InvariantWeightsNet
from laplace_equivariance.marglik.schedule import marglik_step_epochs

__all__ = [
    "CONFIGS",
    "DEFAULTS",
    "INVARIANT_MARGLIK_SUBSET",
    "INVARIANT_ONLY",
    "INVARIANT_WEIGHTS",
    "MARGINAL_LIKELIHOOD_ONLY",
    "add_train_arguments",
    "HELD_STARTS",
    "SILENCED_STARTS",
    "STARTS",
    "build_model",
    "check_run",
    "check_settings",
    "default_start",
    "held_parameters",
    "held_until_epoch",
    "is_relaxed",
    "kept_paths",
    "settings_from_arguments",
]

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
flips and shifts); with :class:`~laplace_equivariance.app.run_config.RunConfig`'s defaults:
hyperparameters lr 0.1, burn-in 10 epochs, marginal likelihood every 5 epochs with 20 steps,
batch 128, unit prior variances, Adam cosine-annealed to 0 at lr 0.003 (the paper's 0.01 leaves
even MAP CONV at chance at these data sizes; ``--optimizer sgd --lr 0.01`` is the reference
code's)."""

INVARIANT_ONLY = ("invariance", "activation", "width", "samples")
"""Options of the invariant-weights network only."""

MARGINAL_LIKELIHOOD_ONLY = (
    "prior_structure",
    "lr_hyp",
    "prior_prec_init",
    "temperature",
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
    relaxed_only = [k for k in ("prior_prec_init", "temperature") if k in given]
    if invariant and relaxed_only:
        raise SystemExit(
            f"{flag(relaxed_only[0])} sets the relaxed networks' priors and fits; the "
            f"{INVARIANT_WEIGHTS} network has its own (its --method): drop it."
        )
    if "lengthscale_mode" in given and not any(
        kind.startswith("s-") for kind in settings["model"].split("+")
    ):
        raise SystemExit(
            f"--lengthscale-mode sets the S-layers' lengthscale; --model {settings['model']} "
            "has none (use s-fc, s-conv or s-fc+s-conv): drop it."
        )


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
            model.start_equivariant_(kept_paths(settings))
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


STARTS = tuple(start.value for start in Start)
"""``--start`` values: paths drawn at random; FC-type paths silenced; silenced and held."""
SILENCED_STARTS = (Start.EQUIVARIANT.value, Start.HELD.value, Start.HELD_GCONV.value)
"""Starts at :meth:`~laplace_equivariance.models.RelaxedNet.start_equivariant_`."""
HELD_STARTS = (Start.HELD.value, Start.HELD_GCONV.value)
"""Starts whose silenced paths are held until the first marginal-likelihood fit."""


def kept_paths(settings: dict[str, Any]) -> tuple[str, ...]:
    """The paths a silenced start keeps: GCONV alone for ``held-gconv``, else CONV and GCONV."""
    if settings.get("start") == Start.HELD_GCONV.value:
        return ("gconv",)
    return models.EQUIVARIANT_PATHS


def held_parameters(model: nn.Module, settings: dict[str, Any]) -> list[nn.Parameter]:
    """The parameters a held start holds until the first fit.

    ``marglik_training``'s ``held_until_fit``: the paths :func:`build_model` silenced; none
    for the other starts.
    """
    if settings.get("start") not in HELD_STARTS:
        return []
    return model.non_equivariant_parameters(kept_paths(settings))


def held_until_epoch(settings: Mapping[str, Any]) -> int | None:
    """The last epoch a held start holds its paths (None for the other starts).

    That of the first fit a learning run of these settings makes, so a MAP run held there
    differs from it in the objective alone (the whole run if it makes none).
    """
    if settings.get("start") not in HELD_STARTS:
        return None
    epochs = marglik_step_epochs(
        settings["epochs"], settings["burnin"], settings["marglik_frequency"]
    )
    return epochs[0] if epochs else settings["epochs"]


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


def check_run(settings: Mapping[str, Any]) -> None:
    """Refuse, before anything is loaded or created, settings that cannot give a valid run.

    The library's check (:func:`laplace_equivariance.app.experiment.train`'s); the command line's
    is :func:`check_settings`.

    Raises:
        SettingError: (a ``ValueError``) Naming the setting, for a setting missing from the
            dict, a value of another type or outside its range or choices (:class:`RunConfig`),
            a marginal-likelihood run that takes no marginal-likelihood step (it would be
            reported as learned at the initial priors), a start the model lacks, or a device
            this machine lacks.
        ValueError: For a key that is no setting.
    """
    missing = [name for name in DEFAULTS if name not in settings]
    if missing:
        raise SettingError(
            missing[0],
            f"The settings lack {missing}: give every key of DEFAULTS (dict(DEFAULTS, ...)), "
            "or pass a RunConfig, which fills in the defaults.",
        )
    RunConfig.from_settings(settings)
    invariant = settings["model"] == INVARIANT_WEIGHTS
    start = settings.get("start")
    if start in SILENCED_STARTS and not _path_kinds(settings["model"]) & set(
        models.EQUIVARIANT_PATHS
    ):
        raise SettingError(
            "start",
            f"--start {start} silences the FC-type paths; --model {settings['model']} has "
            "no equivariant path to start from (use a model with conv or gconv, e.g. f-fc+conv).",
        )
    if start == Start.HELD_GCONV.value and "gconv" not in _path_kinds(settings["model"]):
        raise SettingError(
            "start",
            f"--start held-gconv starts a model as its GCONV network; --model "
            f"{settings['model']} has no GCONV path (use --start held, or f-fc+conv+gconv).",
        )
    if invariant and settings.get("compile_mode"):
        raise SettingError(
            "compile_mode",
            f"--compile-mode compiles marglik_training's MAP steps; --model {INVARIANT_WEIGHTS} "
            "trains with train_invariant_weights, which it does not reach: leave it out.",
        )
    if invariant and settings["lr_min"]:
        raise SettingError(
            "lr_min",
            f"--lr-min sets the end of the relaxed models' cosine schedule; --model "
            f"{INVARIANT_WEIGHTS} anneals to 0 (train_invariant_weights).",
        )
    if settings["method"] in ("marglik", "laplace"):
        # train_invariant_weights steps after epoch ``burnin``, marglik_training from it on
        burnin = settings["burnin"] + 1 if invariant else settings["burnin"]
        if not marglik_step_epochs(settings["epochs"], burnin, settings["marglik_frequency"]):
            raise SettingError(
                "epochs",
                f"--method {settings['method']} with --epochs {settings['epochs']} takes no "
                f"marginal-likelihood step (--burnin {settings['burnin']}, one every "
                f"--marglik-frequency {settings['marglik_frequency']} epochs): nothing would "
                "be learned. Train longer, lower --burnin, or use --method map.",
            )
    _check_device(settings["device"])


def check_settings(settings: Mapping[str, Any]) -> None:
    """The command line's :func:`check_run`: one line naming the option (``--lr-min``).

    Raises:
        SystemExit: With :func:`check_run`'s message, the setting named as its option.
    """
    try:
        check_run(settings)
    except SettingError as error:
        raise SystemExit(error.option_message) from None
    except (TypeError, ValueError) as error:
        raise SystemExit(str(error)) from None


def _check_device(device: str) -> None:
    """Raise :class:`SettingError` unless ``device`` names a device this machine has."""
    try:
        kind = torch.device(device)
    except RuntimeError:  # torch lists every device type it knows, most of them not ours
        raise SettingError("device", f"--device {device}: use cpu, cuda[:N] or mps.") from None
    if kind.type == "cuda" and not torch.cuda.is_available():
        raise SettingError(
            "device",
            f"--device {device}: this machine has no CUDA device (torch.cuda.is_available() is "
            "False); use --device cpu.",
        )
    if kind.type == "cuda" and kind.index is not None and kind.index >= torch.cuda.device_count():
        raise SettingError(
            "device",
            f"--device {device}: this machine has {torch.cuda.device_count()} CUDA device(s).",
        )
    if kind.type == "mps" and not torch.backends.mps.is_available():
        raise SettingError(
            "device", f"--device {device}: MPS is not available here; use --device cpu."
        )
    if kind.type not in ("cpu", "cuda", "mps"):
        raise SettingError("device", f"--device {device}: use cpu, cuda[:N] or mps.")


def add_train_arguments(parser: argparse.ArgumentParser) -> None:
    """``train``'s arguments: ``--config``, one option per setting, ``--out``, ``--overwrite``.

    The settings' options default to None (not given), so that :func:`settings_from_arguments`
    lets ``--config`` and the defaults fill in only what the command line leaves out.
    """
    parser.add_argument(
        "--config", choices=sorted(CONFIGS), help="the paper's settings for a table (none)"
    )
    add_options(parser)
    parser.add_argument(
        "--out",
        type=Path,
        required=True,
        help="folder for the run's files; the same command again resumes the run there",
    )
    parser.add_argument(
        "--overwrite",
        action="store_true",
        help="delete another run's files in --out and start afresh (a folder holding another "
        "run is otherwise refused) [off]",
    )


def settings_from_arguments(args: argparse.Namespace) -> dict[str, Any]:
    """A run's settings from parsed :func:`add_train_arguments`.

    The defaults, then ``--config``'s values, then every option given; the start resolved
    (:func:`default_start`).

    Raises:
        SystemExit: One line, for a method that does not go with the model, a sample count
            the curvature does not draw, or an option the run would not use.
    """
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
