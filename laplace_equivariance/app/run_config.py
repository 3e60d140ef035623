"""One ``train`` run's configuration: a frozen dataclass, its enums, and its command-line options.

:class:`RunConfig` is the one place where every option of ``laplace-equivariance train`` is
declared: its default, its type or choices, and its help text. The command line builds its
``train`` options from the fields (:func:`add_options`); :data:`DEFAULTS` is its dict form;
:func:`laplace_equivariance.app.experiment.train` takes either. A run's ``run.json`` and
``results.json`` record the dict form (enums as their values), which is what older runs hold.

Example::

    from laplace_equivariance.app.run_config import Method, RunConfig
    from laplace_equivariance.app.experiment import train

    config = RunConfig(model="conv", method=Method.MAP, epochs=5, subset=500)
    train(config, Path("runs/conv"))
"""

from __future__ import annotations

import argparse
import dataclasses
import enum
import math
from collections.abc import Mapping
from typing import Any

import torch

from laplace_equivariance import models
from laplace_equivariance.curvature.lengthscales import DERIVATIVES
from laplace_equivariance.curvature.rules import KFAC_APPROXIMATIONS
from laplace_equivariance.data.datasets import DATASETS
from laplace_equivariance.invariance import ACTIVATIONS, INVARIANCES, OBJECTIVES
from laplace_equivariance.layers import LengthscaleMode
from laplace_equivariance.marglik.priors import PriorStructure
from laplace_equivariance.marglik.schedule import OPTIMIZERS

__all__ = [
    "DEFAULTS",
    "INVARIANT_MARGLIK_SUBSET",
    "INVARIANT_WEIGHTS",
    "KfacApprox",
    "Method",
    "Optimizer",
    "RunConfig",
    "SettingError",
    "Start",
    "add_options",
]

REPOSITORY_URL = "https://github.com/laplace-equivariance/laplace-equivariance"
"""The project's repository, as pyproject.toml's ``[project.urls]`` name it: the help links
its documentation pages (:func:`_page`), which an installed package does not hold."""

INVARIANT_WEIGHTS = "invariant-weights"
"""``--model`` name of the invariant-weights network."""

INVARIANT_MARGLIK_SUBSET = 500
"""Default ``--marglik-subset`` of the invariant-weights Laplace method: its full GGN costs
``O(n K P^2)`` with ``P = K (D + 1)``."""


class Method(str, enum.Enum):
    """How a run learns: MAP at unit priors, or priors learned by the marginal likelihood.

    The last three train the invariant-weights network (its ``OBJECTIVES``).
    """

    MAP = "map"
    MARGLIK = "marglik"
    ELBO = "elbo"
    LAPLACE = "laplace"
    LIKELIHOOD = "likelihood"


class Start(str, enum.Enum):
    """Where a relaxed model's training starts (:func:`.config.default_start`)."""

    MIXED = "mixed"
    """Every path drawn at random."""
    EQUIVARIANT = "equivariant"
    """FC-type paths silenced: the model starts as its CONV (or CONV+GCONV) network."""
    HELD = "held"
    """Silenced and held there until the first marginal-likelihood fit."""
    HELD_GCONV = "held-gconv"
    """FC-type and CONV paths silenced and held until the first fit: a model with GCONV paths
    starts as its GCONV network."""


Optimizer = enum.Enum("Optimizer", {name.upper(): name for name in OPTIMIZERS}, type=str)
"""The weights' optimiser: ``ADAM`` (the paper's App. F.6) or ``SGD`` (momentum 0.9)."""

KfacApprox = enum.Enum("KfacApprox", {name.upper(): name for name in KFAC_APPROXIMATIONS}, type=str)
"""KFAC of weights shared over positions: ``EXPAND`` or ``REDUCE`` (docs/curvature.md)."""


class SettingError(ValueError):
    """A setting that cannot give a valid run.

    Its message names the setting as Python does (``lr_min``); :attr:`option_message` names it
    as the command line does (``--lr-min``).

    Args:
        field: The setting (a :class:`RunConfig` field).
        message: The message (for Python).
        option_message: The command line's message (default: ``message``).
    """

    def __init__(self, field: str, message: str, option_message: str | None = None) -> None:
        super().__init__(message)
        self.field = field
        self.option_message = message if option_message is None else option_message

    @classmethod
    def of_field(cls, field: str, problem: str) -> SettingError:
        """``"FIELD PROBLEM"``, on the command line ``"--FIELD PROBLEM"``."""
        return cls(field, f"{field} {problem}", f"--{field.replace('_', '-')} {problem}")


COUNTS = (
    "alpha",
    "epochs",
    "batch_size",
    "marglik_frequency",
    "hypersteps",
    "mc_samples",
    "width",
    "samples",
)
"""Settings that must be at least 1 (``burnin`` at least 0)."""
OPTIONAL_COUNTS = ("subset", "test_subset", "marglik_subset", "threads")
"""Settings that must be at least 1 when given (None: all, or the default)."""
RATES = ("lr", "lr_hyp", "prior_prec_init", "temperature")
"""Settings that must be finite and above 0."""


def _option(default: Any, help: str, shown: str | None = None, **argparse: Any) -> Any:
    """A field of :class:`RunConfig`: its default and how the command line offers it.

    Args:
        default: The default value (a callable: computed when a config is made).
        help: The option's help text.
        shown: The default as the help shows it, in brackets (default: the value).
        **argparse: ``type``, ``choices`` or ``action`` of ``add_argument``.
    """
    metadata = {"help": help, "shown": shown, "argparse": argparse}
    if callable(default):
        return dataclasses.field(default_factory=default, metadata=metadata)
    return dataclasses.field(default=default, metadata=metadata)


def _page(name: str) -> str:
    """The URL of the documentation page ``docs/NAME`` in the repository."""
    return f"{REPOSITORY_URL}/blob/main/docs/{name}"


def _default_device() -> str:
    return "cuda" if torch.cuda.is_available() else "cpu"


_FLAG = {"action": "store_true"}
_SWITCH = {"action": argparse.BooleanOptionalAction}
"""A flag a ``--config`` preset may turn on: ``--no-FLAG`` turns it off again."""
_FLAGS = ("store_true", argparse.BooleanOptionalAction)
_WEIGHTS_ONLY = f"{INVARIANT_WEIGHTS}: "


@dataclasses.dataclass(frozen=True)
class RunConfig:
    """Every setting of one ``train`` run (App. F.1, F.6 where the paper gives one).

    Enum fields accept their values as strings (``method="map"``); a value outside a field's
    choices raises ``ValueError`` naming the choices, and a value of another type, a count
    below one (``burnin`` below zero), a learning rate, prior precision or temperature that is
    not finite and above 0, or an ``lr_min`` below 0 or above ``lr`` raises
    :class:`SettingError` (a ``ValueError``) naming the field. The checks that involve the
    model and the schedule (a schedule with no fit, a start the model lacks, a device this
    machine lacks) are :func:`laplace_equivariance.app.config.check_run`'s.
    """

    dataset: str = _option("quadrant-mnist", "the data", choices=list(DATASETS))
    model: str = _option(
        "f-fc+conv",
        f"the network's path types ({_page('models.md')})",
        choices=[*models.MODEL_NAMES, INVARIANT_WEIGHTS],
    )
    method: Method = _option(
        Method.MARGLIK,
        "map: unit priors; marglik: priors learned by the marginal likelihood; "
        f"{'/'.join(OBJECTIVES)} for {INVARIANT_WEIGHTS}",
        shown=f"marglik; elbo for {INVARIANT_WEIGHTS}",
        choices=list(Method),
    )
    alpha: int = _option(10, "width multiplier a of App. F.1", type=int)
    epochs: int = _option(20, "training epochs", type=int)
    lr: float = _option(
        0.003,
        "learning rate of the weights, cosine-annealed (the paper's 0.01 with Adam leaves even "
        f"MAP CONV at chance at these data sizes, {_page('learned_structure.md')})",
        type=float,
    )
    lr_min: float = _option(
        0.0,
        "learning rate at the end of the cosine schedule (the reference code's lr_min)",
        type=float,
    )
    optimizer: Optimizer = _option(
        Optimizer.ADAM,
        "optimiser of the weights: adam (the paper's App. F.6) or sgd (momentum 0.9, the "
        "reference code's)",
        choices=list(Optimizer),
    )
    augment: bool = _option(
        False,
        "random horizontal flips and shifts of up to 4 pixels of the training batches (App. "
        "F.6's CIFAR-10 recipe; the marginal likelihood sees unaugmented images)",
        shown="off; on with --config table2",
        **_SWITCH,
    )
    lr_hyp: float = _option(0.1, "Adam learning rate of the log prior precisions", type=float)
    prior_prec_init: float = _option(
        1.0,
        "every prior precision before the first marginal-likelihood fit, also the burn-in's "
        "(marglik_training's prior_prec_init)",
        type=float,
    )
    temperature: float = _option(
        1.0,
        "likelihood temperature T of the marginal-likelihood fits and of the training loss's "
        "prior term (marglik_training's temperature: the data count 1/T times; above 1 weighs "
        "the prior more)",
        type=float,
    )
    batch_size: int = _option(128, "examples per step", type=int)
    burnin: int = _option(10, "epochs before the first marginal-likelihood step", type=int)
    marglik_frequency: int = _option(5, "epochs between marginal-likelihood fits", type=int)
    hypersteps: int = _option(20, "hyperparameter steps on each fit", type=int)
    subset: int | None = _option(None, "training examples to use", shown="all", type=int)
    test_subset: int | None = _option(None, "test examples", shown="all", type=int)
    marglik_subset: int | None = _option(
        None,
        "examples of each marginal-likelihood fit",
        shown=f"all; {INVARIANT_MARGLIK_SUBSET} for {INVARIANT_WEIGHTS}",
        type=int,
    )
    stochastic: bool = _option(
        False, "Monte-Carlo Fisher instead of the exact GGN in the KFAC factors", **_FLAG
    )
    mc_samples: int = _option(
        1, "targets sampled per example for the MC Fisher (with --stochastic)", type=int
    )
    kfac_approx: KfacApprox = _option(
        KfacApprox.EXPAND,
        f"KFAC for weights shared over positions ({_page('curvature.md')})",
        choices=list(KfacApprox),
    )
    restore_best: bool = _option(
        False,
        "evaluate the epoch with the best marginal likelihood (laplace-torch's "
        "marglik_training), not the last one (the paper's code)",
        **_FLAG,
    )
    balance_factors: bool = _option(
        False,
        "balance every F-FC channel pair's two factors under the learned precisions before "
        "each Laplace fit (marglik_training's balance_factors)",
        **_FLAG,
    )
    start: Start | None = _option(
        None,
        "where a relaxed model's training starts: every path drawn at random (mixed), its "
        "FC-type paths silenced so that it starts as its CONV network (equivariant; "
        "RelaxedNet.start_equivariant_), or silenced and held there until the first "
        "marginal-likelihood fit (held; marglik_training's held_until_fit; a MAP run holds them "
        "until the epoch of the first fit a learned run of its schedule makes); held-gconv also "
        "silences and holds the CONV paths of a model with GCONV paths, which starts as its "
        "GCONV network",
        shown="held for --method marglik on models with an FC-type and an equivariant path, "
        "mixed otherwise",
        choices=list(Start),
    )
    prior_structure: PriorStructure = _option(
        PriorStructure.LAYERWISE,
        "layerwise: one prior precision per parameter tensor, as the reference code; path: "
        f"one per layer and path; scalar: one ({_page('learned_structure.md')} compares)",
        choices=[PriorStructure.SCALAR, PriorStructure.LAYERWISE, PriorStructure.PATH],
    )
    lengthscale_mode: LengthscaleMode = _option(
        LengthscaleMode.LEARNED,
        "S-layer lengthscales: MAP-trained weights (learned), fixed, or marginal-likelihood "
        "hyperparameters",
        choices=[mode.value for mode in LengthscaleMode],
    )
    lengthscale_derivative: str = _option(
        "total",
        f"gradient for hyperparameter lengthscales ({_page('curvature.md')})",
        choices=list(DERIVATIVES),
    )
    device: str = _option(
        _default_device, "cpu, cuda[:N] or mps", shown="cuda if available, else cpu"
    )
    seed: int = _option(0, "seed of the data subset and the weights", type=int)
    threads: int | None = _option(
        None, "CPU threads (torch.set_num_threads)", shown="torch's default", type=int
    )
    compile_mode: str | None = _option(
        None,
        "run the MAP steps through torch.compile in this mode (marglik_training's "
        "compile_kwargs; reduce-overhead: CUDA graphs on a GPU); not a setting of the "
        "experiment (the result is the eager run's up to rounding); a run resumes with the "
        "mode it started with",
        shown="eager",
        choices=["default", "reduce-overhead", "max-autotune-no-cudagraphs"],
    )
    timeout: float = _option(
        600,
        "under torchrun: seconds a rank waits for the others before the run stops",
        type=float,
    )
    data_dir: str | None = _option(
        None,
        "folder with torchvision's files",
        shown=f"none: the offline sources, {_page('results.md')}",
    )
    download: bool = _option(False, "let torchvision download into --data-dir", **_FLAG)
    invariance: str = _option(
        "rotation", _WEIGHTS_ONLY + "the transformations", choices=list(INVARIANCES)
    )
    activation: str = _option("rff", _WEIGHTS_ONLY + "the hidden units", choices=list(ACTIVATIONS))
    width: int = _option(1024, _WEIGHTS_ONLY + "hidden units", type=int)
    samples: int = _option(32, _WEIGHTS_ONLY + "transformations per pass", type=int)
    eta_init: float = _option(0.1, _WEIGHTS_ONLY + "initial eta", type=float)

    def __post_init__(self) -> None:
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            choices = f.metadata["argparse"].get("choices")
            if value is None or choices is None:
                continue
            if value not in choices:
                raise ValueError(f"{f.name}={value!r} is not one of {_values(choices)}.")
            kind = _ENUMS.get(f.name)
            if kind is not None:
                object.__setattr__(self, f.name, kind(value))
        self._check_values()

    def _check_values(self) -> None:
        """Raise :class:`SettingError` for a value of another type or outside its range."""
        for f in dataclasses.fields(self):
            value, kind = getattr(self, f.name), f.metadata["argparse"].get("type")
            if value is None and f.name in OPTIONAL_COUNTS:
                continue
            number = isinstance(value, (int, float)) and not isinstance(value, bool)
            if kind is int and not (number and isinstance(value, int)):
                raise SettingError.of_field(f.name, f"must be an integer, got {value!r}.")
            if kind is float and not number:
                raise SettingError.of_field(f.name, f"must be a number, got {value!r}.")
            if f.metadata["argparse"].get("action") in _FLAGS and not isinstance(value, bool):
                raise SettingError.of_field(f.name, f"must be True or False, got {value!r}.")
        for name in (*COUNTS, *OPTIONAL_COUNTS):
            value = getattr(self, name)
            if value is not None and value < 1:
                raise SettingError.of_field(name, f"must be at least 1, got {value}.")
        if self.burnin < 0:
            raise SettingError.of_field("burnin", f"must be at least 0, got {self.burnin}.")
        for name in RATES:
            value = getattr(self, name)
            if not value > 0:  # also NaN
                raise SettingError.of_field(name, f"must be above 0, got {value}.")
            if not math.isfinite(value):
                raise SettingError.of_field(name, f"must be finite, got {value}.")
        if not 0 <= self.lr_min <= self.lr:  # also NaN
            problem = (
                f"must be at least 0 and at most the learning rate {{}} ({self.lr}), got "
                f"{self.lr_min}: the cosine schedule anneals the learning rate from {{}} down "
                "to it."
            )
            raise SettingError(
                "lr_min",
                "lr_min " + problem.format("lr", "lr"),
                "--lr-min " + problem.format("--lr", "--lr"),
            )

    @classmethod
    def from_settings(cls, settings: Mapping[str, Any]) -> RunConfig:
        """The configuration of a settings dict (a run's ``run.json``, :data:`DEFAULTS` keys).

        Raises:
            ValueError: For a key that is no setting (naming it and the nearest ones), or a
                value outside its choices.
        """
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(settings) - names)
        if unknown:
            raise ValueError(
                f"{unknown} {'is not a setting' if len(unknown) == 1 else 'are not settings'} "
                f"of a run; the settings are {sorted(names)}."
            )
        return cls(**settings)

    def settings(self) -> dict[str, Any]:
        """The dict form (enums as their values), as ``run.json`` records it."""
        return {
            f.name: getattr(self, f.name).value
            if isinstance(getattr(self, f.name), enum.Enum)
            else getattr(self, f.name)
            for f in dataclasses.fields(self)
        }


def _values(choices: list[Any]) -> list[Any]:
    """``choices`` with enum members as their values."""
    return [getattr(choice, "value", choice) for choice in choices]


_ENUMS: dict[str, type[enum.Enum]] = {
    "method": Method,
    "optimizer": Optimizer,
    "kfac_approx": KfacApprox,
    "start": Start,
    "prior_structure": PriorStructure,
    "lengthscale_mode": LengthscaleMode,
}
"""Fields whose values become enum members."""

DEFAULTS: dict[str, Any] = RunConfig().settings()
"""Every setting's default, in dict form (:meth:`RunConfig.settings`)."""


def add_options(parser: argparse.ArgumentParser) -> None:
    """Add one ``--option`` per :class:`RunConfig` field to ``parser``, default None.

    None marks an option not given, so that ``--config`` values and the defaults fill in
    only what the command line leaves out.
    """
    for f in dataclasses.fields(RunConfig):
        meta = f.metadata
        shown = meta["shown"]
        if shown is None:
            default = DEFAULTS[f.name]
            shown = "off" if default is False else str(getattr(default, "value", default))
        kwargs = dict(meta["argparse"])
        if "choices" in kwargs:
            kwargs["choices"] = _values(kwargs["choices"])
        if kwargs.get("action") in _FLAGS:
            kwargs["default"] = None
        parser.add_argument(
            "--" + f.name.replace("_", "-"),
            dest=f.name,
            help=f"{meta['help']} [{shown}]",
            **kwargs,
        )
