"""The paper's configurations and the checks of a run's settings.

The settings themselves, their defaults and types are
:class:`~laplace_equivariance.app.run_config.RunConfig`'s (:data:`DEFAULTS` is its dict form,
re-exported here). Also the model a configuration names (:func:`build_model`), where its
training starts, and :func:`check_run`, which refuses settings that cannot give a valid run.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

import torch
from torch import nn

from laplace_equivariance import models
from laplace_equivariance.app.run_config import (
    DEFAULTS,
    INVARIANT_MARGLIK_SUBSET,
    INVARIANT_WEIGHTS,
    Method,
    RunConfig,
    SettingError,
    Start,
    settings_where,
)
from laplace_equivariance.invariance import InvariantWeightsNet
from laplace_equivariance.marglik.schedule import marglik_step_epochs

__all__ = [
    "CONFIGS",
    "DEFAULTS",
    "INVARIANT_MARGLIK_SUBSET",
    "INVARIANT_ONLY",
    "INVARIANT_WEIGHTS",
    "MARGINAL_LIKELIHOOD_ONLY",
    "HELD_STARTS",
    "SILENCED_STARTS",
    "STARTS",
    "build_model",
    "check_run",
    "default_start",
    "held_parameters",
    "held_until_epoch",
    "is_relaxed",
    "kept_paths",
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

INVARIANT_ONLY = settings_where(lambda f: f.metadata["network"] == INVARIANT_WEIGHTS)
"""Options of the invariant-weights network only."""

MARGINAL_LIKELIHOOD_ONLY = settings_where(lambda f: f.metadata["fits_only"])
"""Options of the marginal-likelihood fits, refused with ``--method map``. The schedule's
``--burnin``, ``--marglik-frequency`` and ``--hypersteps`` are accepted there (a MAP run's
schedule has no fit at all) so that one set of flags serves the rows of a table."""


def build_model(
    config: RunConfig, in_shape: Sequence[int], n_classes: int
) -> models.RelaxedNet | InvariantWeightsNet:
    """The model that ``config`` names.

    Args:
        config: A run's configuration (its start resolved: :func:`check_run`).
        in_shape: ``(C, H, W)``.
        n_classes: Number of classes.

    Returns:
        A relaxed network of :func:`laplace_equivariance.models.build` (its FC-type paths
        silenced for a silenced start) or an
        :class:`~laplace_equivariance.invariance.InvariantWeightsNet`.
    """
    if not config.invariant:
        model = models.build(
            config.model,
            in_shape,
            n_classes,
            config.alpha,
            sparse_options={"lengthscale_mode": config.lengthscale_mode},
        )
        if config.start in SILENCED_STARTS:
            model.start_equivariant_(kept_paths(config))
        return model
    return InvariantWeightsNet(
        in_shape,
        n_classes,
        width=config.width,
        activation=config.activation,
        invariance=config.invariance,
        eta_init=config.eta_init,
        n_samples=config.samples,
        variational=config.method is Method.ELBO,
    )


STARTS = tuple(start.value for start in Start)
"""``--start`` values: paths drawn at random; FC-type paths silenced; silenced and held."""
SILENCED_STARTS = (Start.EQUIVARIANT, Start.HELD, Start.HELD_GCONV)
"""Starts at :meth:`~laplace_equivariance.models.RelaxedNet.start_equivariant_`."""
HELD_STARTS = (Start.HELD, Start.HELD_GCONV)
"""Starts whose silenced paths are held until the first marginal-likelihood fit."""


def kept_paths(config: RunConfig) -> tuple[str, ...]:
    """The paths a silenced start keeps: GCONV alone for ``held-gconv``, else CONV and GCONV."""
    if config.start is Start.HELD_GCONV:
        return ("gconv",)
    return models.EQUIVARIANT_PATHS


def held_parameters(model: models.RelaxedNet, config: RunConfig) -> list[nn.Parameter]:
    """The parameters a held start holds until the first fit.

    ``marglik_training``'s ``held_until_fit``: the paths :func:`build_model` silenced; none
    for the other starts.
    """
    if config.start not in HELD_STARTS:
        return []
    return model.non_equivariant_parameters(kept_paths(config))


def held_until_epoch(config: RunConfig) -> int | None:
    """The last epoch a held start holds its paths (None for the other starts).

    That of the first fit a learning run of these settings makes, so a MAP run held there
    differs from it in the objective alone (the whole run if it makes none).
    """
    if config.start not in HELD_STARTS:
        return None
    epochs = marglik_step_epochs(config.epochs, config.burnin, config.marglik_frequency)
    return epochs[0] if epochs else config.epochs


def default_start(config: RunConfig) -> Start:
    """Where training starts when ``start`` is not given.

    ``held`` for marginal-likelihood runs of models with an FC-type path beside an
    equivariant one (F-FC+CONV and the like): the FC-type paths silenced and held until the
    first fit, so that the evidence weighs them before the burn-in grows them. Started
    mixed, the App. F.1 network's middle layers go FC on the translation-invariant digit
    task; started equivariant with the FC paths free, the paths grown in the burn-in cost
    accuracy; held, the evidence switches FC on only where the labels need position
    (docs/learned_structure.md, "Where training starts"). ``mixed`` for MAP runs (the
    architecture's baseline, drawn as the reference code draws it) and single-kind models.
    """
    return Start.HELD if is_relaxed(config.model) and config.learns else Start.MIXED


def is_relaxed(model: str) -> bool:
    """Whether ``model``'s layers hold an FC-type path beside an equivariant one.

    ``--start`` chooses between two starting points only for these models.
    """
    kinds = _path_kinds(model)
    return "fc" in kinds and bool(kinds & set(models.EQUIVARIANT_PATHS))


def _path_kinds(model: str) -> set[str]:
    """The path names in every layer of ``model`` (none for the invariant-weights network)."""
    return {models.PATH_NAME[kind] for kind in models.MODEL_NAMES.get(model, ())}


def check_run(settings: RunConfig | Mapping[str, Any]) -> RunConfig:
    """Refuse, before anything is loaded or created, settings that cannot give a valid run.

    The library's check (:func:`laplace_equivariance.app.experiment.train`'s); on the command
    line :class:`SettingError` names the option (its ``option_message``).

    Args:
        settings: A configuration, or its dict form (every key of :data:`DEFAULTS`).

    Returns:
        The configuration, its ``start`` resolved (:func:`default_start` where None).

    Raises:
        SettingError: (a ``ValueError``) Naming the setting, for a setting missing from the
            dict, a value of another type or outside its range or choices (:class:`RunConfig`),
            a marginal-likelihood run that takes no marginal-likelihood step (it would be
            reported as learned at the initial priors), a start the model lacks, or a device
            this machine lacks.
        ValueError: For a key that is no setting.
    """
    if not isinstance(settings, RunConfig):
        missing = [name for name in DEFAULTS if name not in settings]
        if missing:
            raise SettingError(
                missing[0],
                f"The settings lack {missing}: give every key of DEFAULTS (dict(DEFAULTS, ...)), "
                "or pass a RunConfig, which fills in the defaults.",
            )
        settings = RunConfig.from_settings(settings)
    config = dataclasses.replace(settings, start=settings.start or default_start(settings))
    start, kinds = config.start, _path_kinds(config.model)
    if start in SILENCED_STARTS and not kinds & set(models.EQUIVARIANT_PATHS):
        raise SettingError(
            "start",
            f"start={start.value!r} silences the FC-type paths; model={config.model!r} has "
            "no equivariant path to start from (use a model with conv or gconv, e.g. f-fc+conv).",
            f"--start {start.value} silences the FC-type paths; --model {config.model} has "
            "no equivariant path to start from (use a model with conv or gconv, e.g. f-fc+conv).",
        )
    if start is Start.HELD_GCONV and "gconv" not in kinds:
        raise SettingError(
            "start",
            f"start='held-gconv' starts a model as its GCONV network; model={config.model!r} "
            "has no GCONV path (use start='held', or f-fc+conv+gconv).",
            f"--start held-gconv starts a model as its GCONV network; --model {config.model} "
            "has no GCONV path (use --start held, or f-fc+conv+gconv).",
        )
    if config.invariant and config.compile_mode:
        raise SettingError.of_field(
            "compile_mode",
            f"compiles marglik_training's MAP steps; the {INVARIANT_WEIGHTS} model trains with "
            "train_invariant_weights, which it does not reach: leave it out.",
        )
    if config.invariant and config.checkpoint_every != 1:
        raise SettingError.of_field(
            "checkpoint_every",
            f"spaces marglik_training's checkpoints; the {INVARIANT_WEIGHTS} model keeps no "
            "checkpoint (train_invariant_weights): leave it out.",
        )
    if config.invariant and config.lr_min:
        raise SettingError.of_field(
            "lr_min",
            f"sets the end of the relaxed models' cosine schedule; the {INVARIANT_WEIGHTS} "
            "model anneals to 0 (train_invariant_weights).",
        )
    if config.method in (Method.MARGLIK, Method.LAPLACE):
        # train_invariant_weights steps after epoch ``burnin``, marglik_training from it on
        burnin = config.burnin + 1 if config.invariant else config.burnin
        if not marglik_step_epochs(config.epochs, burnin, config.marglik_frequency):
            problem = (
                f"{{}}{config.method.value} with {{}}{config.epochs} takes no "
                f"marginal-likelihood step ({{}}{config.burnin}, one every "
                f"{{}}{config.marglik_frequency} epochs): nothing would be learned. Train "
                "longer, lower the burn-in, or use MAP."
            )
            raise SettingError(
                "epochs",
                problem.format("method=", "epochs=", "burnin=", "marglik_frequency="),
                problem.format("--method ", "--epochs ", "--burnin ", "--marglik-frequency "),
            )
    _check_device(config.device)
    return config


def _check_device(device: str) -> None:
    """Raise :class:`SettingError` unless ``device`` names a device this machine has."""
    try:
        kind = torch.device(device)
    except RuntimeError:  # torch lists every device type it knows, most of them not ours
        raise SettingError.of_field("device", f"{device}: use cpu, cuda[:N] or mps.") from None
    if kind.type == "cuda" and not torch.cuda.is_available():
        problem = "this machine has no CUDA device (torch.cuda.is_available() is False); use"
        raise SettingError(
            "device",
            f"device={device!r}: {problem} device='cpu'.",
            f"--device {device}: {problem} --device cpu.",
        )
    if kind.type == "cuda" and kind.index is not None and kind.index >= torch.cuda.device_count():
        raise SettingError.of_field(
            "device", f"{device}: this machine has {torch.cuda.device_count()} CUDA device(s)."
        )
    if kind.type == "mps" and not torch.backends.mps.is_available():
        raise SettingError(
            "device",
            f"device={device!r}: MPS is not available here; use device='cpu'.",
            f"--device {device}: MPS is not available here; use --device cpu.",
        )
    if kind.type not in ("cpu", "cuda", "mps"):
        raise SettingError.of_field("device", f"{device}: use cpu, cuda[:N] or mps.")
