"""The options of one :func:`~laplace_equivariance.marglik.training.marglik_training` run, checked.

Every argument but the model and the training loader, in one record, with the checks that
refuse (before anything trains) options that cannot work together, and the backend options
they imply.
"""

from __future__ import annotations

import inspect
import math
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from laplace.curvature.curvature import CurvatureInterface
from torch import nn
from torch.optim import Optimizer
from torch.optim.lr_scheduler import LRScheduler
from torch.utils.data import DataLoader

from laplace_equivariance import distributed
from laplace_equivariance.curvature import EquivariantKFAC
from laplace_equivariance.curvature.lengthscales import DERIVATIVES
from laplace_equivariance.curvature.monte_carlo import check_sample_count
from laplace_equivariance.curvature.rules import KFAC_APPROXIMATIONS
from laplace_equivariance.data.loader_size import dataset_length
from laplace_equivariance.marglik.priors import PriorStructure

__all__ = ["LIKELIHOODS", "OWN_BACKEND_OPTIONS", "MarglikOptions"]

LIKELIHOODS = ("classification", "regression")

OWN_BACKEND_OPTIONS = ("stochastic", "n_mc_samples", "kfac_approx")
"""Backend options that are arguments of :func:`marglik_training` itself (refused in its
``backend_kwargs``: two places to set one option would be one too many)."""

_PASSED_BY_LAPLACE = ("model", "likelihood", "dict_key_x", "dict_key_y")
"""Backend arguments that laplace-torch's ``Laplace`` passes itself (the dict keys are
:func:`marglik_training`'s own arguments ``dict_key_x`` and ``dict_key_y``)."""

_WEIGHT_SUBSETS = ("last_layer", "subnetwork_indices")
"""Backend options that pick a subset of the weights: :func:`marglik_training` fits all of
them (laplace-torch's ``subset_of_weights="all"``)."""


def _as_float(value: Any) -> float:
    """``value`` as a float; NaN for what is no number (so that every check refuses it)."""
    try:
        return float(value)
    except (TypeError, ValueError):
        return math.nan


@dataclass
class MarglikOptions:
    """Every argument of :func:`marglik_training` but the model and the loader."""

    likelihood: str
    hessian_structure: str
    backend: type[CurvatureInterface]
    optimizer_cls: type[Optimizer]
    optimizer_kwargs: dict | None
    scheduler_cls: type[LRScheduler] | None
    scheduler_kwargs: dict | None
    n_epochs: int
    lr_hyp: float
    prior_structure: PriorStructure | str
    n_epochs_burnin: int
    n_hypersteps: int
    marglik_frequency: int
    prior_prec_init: float
    sigma_noise_init: float
    temperature: float
    fix_sigma_noise: bool
    progress_bar: bool
    enable_backprop: bool
    dict_key_x: str
    dict_key_y: str
    marglik_loader: DataLoader | None
    stochastic: bool
    n_mc_samples: int
    kfac_approx: str
    callback: Callable[[int, dict[str, Any]], None] | None
    checkpoint: str | os.PathLike | None
    checkpoint_every: int
    final_laplace: bool
    lengthscale_derivative: str
    restore_best: bool
    balance_factors: bool
    held_until_fit: tuple[nn.Parameter, ...]
    held_until_epoch: int | None
    backend_kwargs: dict[str, Any] | None = None
    compile_kwargs: dict[str, Any] | None = None

    def check(self, lengthscales: dict[str, torch.Tensor]) -> None:
        """Raise ValueError, before any training, for options that cannot work together."""
        if self.likelihood not in LIKELIHOODS:
            raise ValueError(f"likelihood must be one of {LIKELIHOODS}, got {self.likelihood!r}.")
        positive: tuple[str, ...] = ("prior_prec_init", "temperature")
        if self.likelihood == "regression":
            positive += ("sigma_noise_init",)
        for name in positive:
            value = getattr(self, name)
            if not 0 < _as_float(value) < math.inf:  # also NaN
                raise ValueError(
                    f"{name} must be a finite number above 0, got {value!r} (the training "
                    "starts from its logarithm)."
                )
        if self.prior_structure == "diag" and self.hessian_structure == "kron":
            raise ValueError(
                "prior_structure='diag' (one precision per parameter) does not go with "
                "hessian_structure='kron': laplace-torch's Kronecker approximation takes one "
                "precision per network or per tensor. Use prior_structure='layerwise', "
                "'scalar' or 'path', or hessian_structure='diag' or 'full'."
            )
        every = self.checkpoint_every
        if isinstance(every, bool) or not isinstance(every, int) or every < 1:
            raise ValueError(
                f"checkpoint_every must be a whole number of epochs, at least 1, got {every!r} "
                "(to train without a checkpoint, leave checkpoint=None)."
            )
        if every != 1 and self.checkpoint is None:
            raise ValueError(
                f"checkpoint_every={every} spaces the writes of the checkpoint file, and no "
                "checkpoint is given: pass checkpoint=PATH too, or leave checkpoint_every at 1."
            )
        if self.n_hypersteps < 1 or self.marglik_frequency < 1:
            raise ValueError(
                f"n_hypersteps ({self.n_hypersteps}) and marglik_frequency "
                f"({self.marglik_frequency}) must be at least 1; to train without "
                "marginal-likelihood steps, set n_epochs_burnin above n_epochs."
            )
        is_equivariant = issubclass(self.backend, EquivariantKFAC)
        if lengthscales and (self.hessian_structure != "kron" or not is_equivariant):
            raise ValueError(
                f"Lengthscale hyperparameters ({list(lengthscales)}) are learned through the "
                "KFAC curvature only: use hessian_structure='kron' and backend=EquivariantKFAC."
            )
        if distributed.world_size() > 1 and (
            self.hessian_structure != "kron" or not is_equivariant
        ):
            raise ValueError(
                "In a process group only the 'kron' fits of EquivariantKFAC are summed over the "
                f"ranks; with hessian_structure={self.hessian_structure!r} and "
                f"backend={self.backend.__name__} each rank would learn its own "
                "hyperparameters: use hessian_structure='kron' and backend=EquivariantKFAC (on "
                "stock layers it gives AsdlGGN's factors), or train in one process."
            )
        if lengthscales and self.likelihood != "classification":
            raise ValueError("Lengthscale hyperparameters are implemented for classification only.")
        if self.lengthscale_derivative not in DERIVATIVES:
            raise ValueError(
                f"lengthscale_derivative must be one of {DERIVATIVES}, got "
                f"{self.lengthscale_derivative!r}."
            )
        if lengthscales and self.lengthscale_derivative == "total" and self.stochastic:
            raise ValueError(
                "The total lengthscale derivative needs the exact GGN: pass stochastic=False "
                "or lengthscale_derivative='partial'."
            )
        if self.n_mc_samples != 1 and not (self.stochastic and is_equivariant):
            raise ValueError(
                f"n_mc_samples={self.n_mc_samples} sets the samples of EquivariantKFAC's "
                "Monte-Carlo Fisher: pass stochastic=True and backend=EquivariantKFAC."
            )
        check_sample_count(self.n_mc_samples, self.stochastic)
        if self.kfac_approx not in KFAC_APPROXIMATIONS:
            raise ValueError(
                f"kfac_approx must be one of {KFAC_APPROXIMATIONS}, got {self.kfac_approx!r}."
            )
        if self.kfac_approx != "expand" and not is_equivariant:
            raise ValueError(
                f"kfac_approx={self.kfac_approx!r} is an option of EquivariantKFAC: pass "
                "backend=EquivariantKFAC."
            )
        self._check_backend_kwargs()

    def _check_backend_kwargs(self) -> None:
        """Refuse ``backend_kwargs`` that the backend cannot take, before any training.

        Names :func:`marglik_training` sets itself, and names the backend's ``__init__`` does
        not take (otherwise the first fit, after the burn-in, would raise).
        """
        given = set(self.backend_kwargs or {})
        own = sorted(given & {*OWN_BACKEND_OPTIONS, *_PASSED_BY_LAPLACE})
        if own:
            raise ValueError(
                f"backend_kwargs sets {own}, which marglik_training sets itself: pass them as "
                f"its own arguments ({', '.join(f'{name}=...' for name in own)})."
            )
        subset = sorted(given & set(_WEIGHT_SUBSETS))
        if subset:
            raise ValueError(
                f"backend_kwargs sets {subset}, which would pick a subset of the weights; "
                "marglik_training fits all of them (laplace-torch's subset_of_weights='all'): "
                "drop it (for a last-layer approximation, fit Laplace(model, ..., "
                "subset_of_weights='last_layer') on the returned model)."
            )
        parameters = inspect.signature(self.backend).parameters
        if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters.values()):
            return
        taken = {*OWN_BACKEND_OPTIONS, *_PASSED_BY_LAPLACE, *_WEIGHT_SUBSETS}
        options = [name for name in parameters if name not in taken]
        unknown = sorted(given - set(options))
        if unknown:
            raise ValueError(
                f"backend_kwargs sets {unknown}, which {self.backend.__name__} does not take; "
                f"its options: {options or 'none'}."
            )

    def laplace_backend_kwargs(self) -> dict[str, Any] | None:
        """The Laplace backend's options (None: the backend's defaults, as laplace-torch).

        ``backend_kwargs`` and the options :func:`marglik_training` passes on itself
        (:data:`OWN_BACKEND_OPTIONS`).
        """
        kwargs: dict[str, Any] = dict(self.backend_kwargs or {})
        if self.stochastic:
            kwargs["stochastic"] = True
        if self.n_mc_samples != 1:
            kwargs["n_mc_samples"] = self.n_mc_samples
        if self.kfac_approx != "expand":
            kwargs["kfac_approx"] = self.kfac_approx
        return kwargs or None

    def check_loaders(self, train_loader: DataLoader) -> None:
        """Raise ValueError for an empty training or marginal-likelihood loader."""
        for name, loader in (
            ("train_loader", train_loader),
            ("marglik_loader", self.marglik_loader),
        ):
            if loader is not None and (dataset_length(loader.dataset) == 0 or len(loader) == 0):
                raise ValueError(
                    f"{name} is empty ({dataset_length(loader.dataset)} examples, "
                    f"{len(loader)} batches): "
                    "give it data (check the data set, the subset size, and drop_last with a "
                    "batch larger than the data)."
                )

    def checked_held(self, model: nn.Module, first_fit: int | None) -> tuple[nn.Parameter, ...]:
        """``held_until_fit``, checked against the model and the schedule's first fit.

        Raises:
            ValueError: For a tensor that is not a trainable parameter of ``model``, or a
                schedule without a fit (the parameters would never be released).
        """
        held = self.held_until_fit
        if not held:
            return held
        own = {id(p) for p in model.parameters() if p.requires_grad}
        foreign = sum(id(p) not in own for p in held)
        if foreign:
            raise ValueError(
                f"held_until_fit has {foreign} tensor(s) that are not trainable parameters of "
                "the model (a parameter of another module, or one with requires_grad=False)."
            )
        until = self.held_until_epoch
        if until is not None and (
            isinstance(until, bool) or not isinstance(until, int) or until < 1
        ):
            raise ValueError(f"held_until_epoch must be a positive epoch, got {until!r}.")
        if first_fit is None and until is None:
            raise ValueError(
                "held_until_fit holds parameters until the first marginal-likelihood fit, and "
                "this schedule has none: they would be frozen for the whole run. Freeze them "
                "(requires_grad_(False)), give a schedule with a fit, or say until when with "
                "held_until_epoch."
            )
        return held
