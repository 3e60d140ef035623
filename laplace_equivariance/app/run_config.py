"""One ``train`` run's configuration: a frozen, typed dataclass and its enums.

:class:`RunConfig` is the one place where every option of ``laplace-equivariance train`` is
declared: its type (the annotation), default, choices, help text, which runs use it and the
value runs recorded before it existed. The command line builds its ``train`` options from the
fields (:func:`laplace_equivariance.app.cli.add_train_arguments`); the run folder migrates older
records with the ``older_runs`` values (:func:`laplace_equivariance.app.runs.migrated`);
:func:`laplace_equivariance.app.experiment.train` receives a :class:`RunConfig` and
``results.json`` records its dict form (:meth:`RunConfig.settings`, enums as their values).

Adding an option: one field here, and where the library takes it (for a
``marglik_training`` argument, :func:`laplace_equivariance.app.experiment.train`'s call).

Example::

    from laplace_equivariance.app.run_config import Method, RunConfig
    from laplace_equivariance.app.experiment import train

    config = RunConfig(model="conv", method=Method.MAP, epochs=5, subset=500)
    train(config, Path("runs/conv"))
"""

from __future__ import annotations

import dataclasses
import enum
import functools
import math
import types
import typing
from collections.abc import Callable, Mapping
from typing import Any

import torch

from laplace_equivariance import models
from laplace_equivariance.curvature.lengthscales import DERIVATIVES
from laplace_equivariance.data.datasets import DATASETS
from laplace_equivariance.invariance import ACTIVATIONS, INVARIANCES, OBJECTIVES
from laplace_equivariance.layers import LengthscaleMode
from laplace_equivariance.marglik.priors import PriorStructure

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
    "field_type",
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
    """Unit prior precisions, never fitted: the architecture's baseline."""
    MARGLIK = "marglik"
    """Prior precisions learned by the KFAC Laplace marginal likelihood (Eq. 6)."""
    ELBO = "elbo"
    """Invariant weights: the variational lower bound of "Learning Invariant Weights"."""
    LAPLACE = "laplace"
    """Invariant weights: its output layer's Laplace marginal likelihood."""
    LIKELIHOOD = "likelihood"
    """Invariant weights: maximum likelihood with eta trained like a weight (Sec. 4.3's
    control, which does not learn invariance)."""


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


class Optimizer(str, enum.Enum):
    """The weights' optimiser (:func:`~laplace_equivariance.marglik.schedule.paper_schedule`)."""

    ADAM = "adam"
    """Adam, as the paper's App. F.6."""
    SGD = "sgd"
    """SGD with momentum 0.9, as the paper's reference code."""


class KfacApprox(str, enum.Enum):
    """KFAC of weights shared over positions (docs/curvature.md)."""

    EXPAND = "expand"
    """Each of a shared weight's T places counted as an example of its own (the paper's)."""
    REDUCE = "reduce"
    """Gradients summed and inputs averaged over the T places before the outer products
    (Eschenhagen et al., NeurIPS 2023)."""


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
    "checkpoint_every",
    "mc_samples",
    "width",
    "samples",
)
"""Settings that must be at least 1 (``burnin`` at least 0)."""
OPTIONAL_COUNTS = ("subset", "test_subset", "marglik_subset", "fit_batch_size", "threads")
"""Settings that must be at least 1 when given (None: all, or the default)."""
RATES = ("lr", "lr_hyp", "prior_prec_init", "temperature")
"""Settings that must be finite and above 0."""

NEVER_ABSENT = object()
"""``older_runs`` of a setting every recorded run holds."""


def _setting(
    default: Any,
    help: str,
    *,
    shown: str | None = None,
    choices: list[Any] | None = None,
    switch: bool = False,
    fits_only: bool = False,
    network: str | None = None,
    circumstance: bool = False,
    older_runs: Any = NEVER_ABSENT,
) -> Any:
    """A field of :class:`RunConfig`: its default and what the command line and records need.

    The field's annotation is its type; an enum's members are its choices.

    Args:
        default: The default value (a callable: computed when a config is made).
        help: The option's help text.
        shown: The default as the help shows it, in brackets (default: the value).
        choices: The values a ``str`` (or a subset of an enum's members) may take.
        switch: A flag that ``--config`` may turn on: ``--no-FLAG`` turns it off again.
        fits_only: A setting of the marginal-likelihood fits: refused with ``--method map``, and
            MAP runs that differ only in it are seeds of one experiment.
        network: The only ``--model`` that uses it (refused with the others).
        circumstance: How the run ran, not what it computes (up to rounding): runs that differ
            only in it are seeds of one experiment, and a run resumes with another value.
        older_runs: The value of runs recorded before the setting existed.
    """
    metadata = {
        "help": help,
        "shown": shown,
        "choices": choices,
        "switch": switch,
        "fits_only": fits_only,
        "network": network,
        "circumstance": circumstance,
        "older_runs": older_runs,
    }
    if callable(default):
        return dataclasses.field(default_factory=default, metadata=metadata)
    return dataclasses.field(default=default, metadata=metadata)


def _page(name: str) -> str:
    """The URL of the documentation page ``docs/NAME`` in the repository."""
    return f"{REPOSITORY_URL}/blob/main/docs/{name}"


def _default_device() -> str:
    return "cuda" if torch.cuda.is_available() else "cpu"


@dataclasses.dataclass(frozen=True)
class RunConfig:
    """Every setting of one ``train`` run (App. F.1, F.6 where the paper gives one).

    Enum fields accept their values as strings (``method="map"``); a value outside a field's
    choices raises ``ValueError`` naming the choices, and a value of another type, a count
    below one (``burnin`` below zero), a learning rate, prior precision or temperature that is
    not finite and above 0, an ``lr_min`` below 0 or above ``lr``, or ``mc_samples`` above 1
    without ``stochastic`` raises :class:`SettingError` (a ``ValueError``) naming the field. The
    checks that involve the model and the schedule (a schedule with no fit, a start the model
    lacks, a device this machine lacks) are :func:`laplace_equivariance.app.config.check_run`'s.
    """

    dataset: str = _setting("quadrant-mnist", "the data", choices=list(DATASETS))
    model: str = _setting(
        "f-fc+conv",
        f"the network's path types ({_page('models.md')})",
        choices=[*models.MODEL_NAMES, INVARIANT_WEIGHTS],
    )
    method: Method = _setting(
        Method.MARGLIK,
        "map: unit priors; marglik: priors learned by the marginal likelihood; "
        f"{'/'.join(OBJECTIVES)} for {INVARIANT_WEIGHTS}",
        shown=f"marglik; elbo for {INVARIANT_WEIGHTS}",
    )
    alpha: int = _setting(10, "width multiplier a of App. F.1")
    epochs: int = _setting(20, "training epochs")
    lr: float = _setting(
        0.003,
        "learning rate of the weights, cosine-annealed (the paper's 0.01 with Adam leaves even "
        f"MAP CONV at chance at these data sizes, {_page('learned_structure.md')})",
    )
    lr_min: float = _setting(
        0.0,
        "learning rate at the end of the cosine schedule (the reference code's lr_min)",
        older_runs=0.0,
    )
    optimizer: Optimizer = _setting(
        Optimizer.ADAM,
        "optimiser of the weights: adam (the paper's App. F.6) or sgd (momentum 0.9, the "
        "reference code's)",
        older_runs="adam",
    )
    augment: bool = _setting(
        False,
        "random horizontal flips and shifts of up to 4 pixels of the training batches (App. "
        "F.6's CIFAR-10 recipe; the marginal likelihood sees unaugmented images)",
        shown="off; on with --config table2",
        switch=True,
        older_runs=False,
    )
    lr_hyp: float = _setting(0.1, "Adam learning rate of the log prior precisions", fits_only=True)
    prior_prec_init: float = _setting(
        1.0,
        "every prior precision before the first marginal-likelihood fit, also the burn-in's "
        "(marglik_training's prior_prec_init)",
        fits_only=True,
        older_runs=1.0,
    )
    temperature: float = _setting(
        1.0,
        "likelihood temperature T of the marginal-likelihood fits and of the training loss's "
        "prior term (marglik_training's temperature: the data count 1/T times; above 1 weighs "
        "the prior more)",
        fits_only=True,
        older_runs=1.0,
    )
    batch_size: int = _setting(128, "examples per step")
    burnin: int = _setting(10, "epochs before the first marginal-likelihood step")
    marglik_frequency: int = _setting(5, "epochs between marginal-likelihood fits")
    hypersteps: int = _setting(20, "hyperparameter steps on each fit")
    subset: int | None = _setting(None, "training examples to use", shown="all")
    test_subset: int | None = _setting(None, "test examples", shown="all")
    marglik_subset: int | None = _setting(
        None,
        "examples of each marginal-likelihood fit",
        shown=f"all; {INVARIANT_MARGLIK_SUBSET} for {INVARIANT_WEIGHTS}",
        fits_only=True,
    )
    fit_batch_size: int | None = _setting(
        None,
        "examples per curvature pass of a marginal-likelihood fit: the loader's consecutive "
        "batches concatenated up to this many (EquivariantKFAC's fit_batch_size; the factors "
        "are the same, only the speed and memory differ)",
        shown="the batches on the CPU; on a GPU as many as its memory allows",
        fits_only=True,
        circumstance=True,
        older_runs=None,
    )
    stochastic: bool = _setting(
        False,
        "Monte-Carlo Fisher instead of the exact GGN in the KFAC factors",
        fits_only=True,
    )
    mc_samples: int = _setting(
        1,
        "targets sampled per example for the MC Fisher (with --stochastic)",
        fits_only=True,
    )
    kfac_approx: KfacApprox = _setting(
        KfacApprox.EXPAND,
        f"KFAC for weights shared over positions ({_page('curvature.md')})",
        fits_only=True,
        older_runs="expand",
    )
    restore_best: bool = _setting(
        False,
        "evaluate the epoch with the best marginal likelihood (laplace-torch's "
        "marglik_training), not the last one (the paper's code)",
        fits_only=True,
    )
    balance_factors: bool = _setting(
        False,
        "balance every F-FC channel pair's two factors under the learned precisions before "
        "each Laplace fit (marglik_training's balance_factors)",
        fits_only=True,
        older_runs=False,
    )
    start: Start | None = _setting(
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
        older_runs="mixed",
    )
    prior_structure: PriorStructure = _setting(
        PriorStructure.LAYERWISE,
        "layerwise: one prior precision per parameter tensor, as the reference code; path: "
        f"one per layer and path; scalar: one ({_page('learned_structure.md')} compares)",
        choices=[PriorStructure.SCALAR, PriorStructure.LAYERWISE, PriorStructure.PATH],
        fits_only=True,
    )
    lengthscale_mode: LengthscaleMode = _setting(
        LengthscaleMode.LEARNED,
        "S-layer lengthscales: MAP-trained weights (learned), fixed, or marginal-likelihood "
        "hyperparameters",
    )
    lengthscale_derivative: str = _setting(
        "total",
        f"gradient for hyperparameter lengthscales ({_page('curvature.md')})",
        choices=list(DERIVATIVES),
        fits_only=True,
    )
    device: str = _setting(
        _default_device, "cpu, cuda[:N] or mps", shown="cuda if available, else cpu"
    )
    seed: int = _setting(0, "seed of the data subset and the weights")
    threads: int | None = _setting(
        None,
        "CPU threads (torch.set_num_threads); at most the cores that no other work keeps busy "
        f"({_page('cli.md')}, 'Threads')",
        shown="torch's default",
        older_runs=None,
        circumstance=True,
    )
    compile_mode: str | None = _setting(
        None,
        "run the MAP steps through torch.compile in this mode (marglik_training's "
        "compile_kwargs; reduce-overhead: CUDA graphs on a GPU); not a setting of the "
        "experiment (the result is the eager run's up to rounding); a run resumes with the "
        "mode it started with",
        shown="eager",
        choices=["default", "reduce-overhead", "max-autotune-no-cudagraphs"],
        older_runs=None,
        circumstance=True,
    )
    checkpoint_every: int = _setting(
        1,
        "write checkpoint.pt after every this many epochs, every fit and the last epoch (a "
        "large network's checkpoint can take as long as a short epoch to write); a resume "
        "repeats the epochs since the last one written, with the same result",
        older_runs=1,
        circumstance=True,
    )
    timeout: float = _setting(
        600,
        "under torchrun: seconds a rank waits for the others before the run stops",
        older_runs=600,
        circumstance=True,
    )
    data_dir: str | None = _setting(
        None,
        "folder with torchvision's files",
        shown=f"none: the offline sources, {_page('results.md')}",
    )
    download: bool = _setting(False, "let torchvision download into --data-dir", circumstance=True)
    invariance: str = _setting(
        "rotation",
        "the transformations",
        choices=list(INVARIANCES),
        network=INVARIANT_WEIGHTS,
    )
    activation: str = _setting(
        "rff", "the hidden units", choices=list(ACTIVATIONS), network=INVARIANT_WEIGHTS
    )
    width: int = _setting(1024, "hidden units", network=INVARIANT_WEIGHTS)
    samples: int = _setting(32, "transformations per pass", network=INVARIANT_WEIGHTS)
    eta_init: float = _setting(0.1, "initial eta", network=INVARIANT_WEIGHTS)

    def __post_init__(self) -> None:
        for f in dataclasses.fields(self):
            value, kind = getattr(self, f.name), field_type(f.name)
            if value is None:
                continue
            choices = f.metadata["choices"] or (list(kind) if issubclass(kind, enum.Enum) else None)
            if choices is not None and value not in choices:
                raise ValueError(f"{f.name}={value!r} is not one of {_values(choices)}.")
            if issubclass(kind, enum.Enum):
                object.__setattr__(self, f.name, kind(value))
        self._check_values()

    def _check_values(self) -> None:
        """Raise :class:`SettingError` for a value of another type or outside its range."""
        for f in dataclasses.fields(self):
            value, kind = getattr(self, f.name), field_type(f.name)
            if value is None and _optional(f.name):
                continue
            number = isinstance(value, (int, float)) and not isinstance(value, bool)
            if kind is int and not (number and isinstance(value, int)):
                raise SettingError.of_field(f.name, f"must be an integer, got {value!r}.")
            if kind is float and not number:
                raise SettingError.of_field(f.name, f"must be a number, got {value!r}.")
            if kind is bool and not isinstance(value, bool):
                raise SettingError.of_field(f.name, f"must be True or False, got {value!r}.")
            if kind is str and not isinstance(value, str):
                raise SettingError.of_field(f.name, f"must be a string, got {value!r}.")
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
        if self.mc_samples > 1 and not self.stochastic:
            raise SettingError(
                "mc_samples",
                f"mc_samples={self.mc_samples} draws samples for the Monte-Carlo Fisher: set "
                "stochastic=True, or leave mc_samples at 1 (the exact GGN draws none).",
                f"--mc-samples {self.mc_samples}: give more than one sample only with "
                "--stochastic (the exact GGN draws none).",
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

    @property
    def invariant(self) -> bool:
        """Whether the run trains the invariant-weights network (not a relaxed one)."""
        return self.model == INVARIANT_WEIGHTS

    @property
    def learns(self) -> bool:
        """Whether a relaxed network's priors are learned (``method`` marglik)."""
        return self.method is Method.MARGLIK


@functools.cache
def field_type(name: str) -> type:
    """The type of :class:`RunConfig`'s field ``name``, without its ``None``.

    ``int`` for ``subset: int | None``; an enum class for ``method``.
    """
    hint = typing.get_type_hints(RunConfig)[name]
    if isinstance(hint, types.UnionType):
        (hint,) = (arg for arg in typing.get_args(hint) if arg is not type(None))
    return typing.cast(type, hint)


def _optional(name: str) -> bool:
    """Whether :class:`RunConfig`'s field ``name`` may be None."""
    hint = typing.get_type_hints(RunConfig)[name]
    return isinstance(hint, types.UnionType) and type(None) in typing.get_args(hint)


def _values(choices: list[Any]) -> list[Any]:
    """``choices`` with enum members as their values."""
    return [getattr(choice, "value", choice) for choice in choices]


def settings_where(test: Callable[[dataclasses.Field], bool]) -> tuple[str, ...]:
    """The names of :class:`RunConfig`'s fields for which ``test(field)`` holds, in order."""
    return tuple(f.name for f in dataclasses.fields(RunConfig) if test(f))


DEFAULTS: dict[str, Any] = RunConfig().settings()
"""Every setting's default, in dict form (:meth:`RunConfig.settings`)."""
