"""Marginal-likelihood training: laplace-torch's ``marglik_training``, plus the paper's extras.

:func:`marglik_training` takes every parameter of :func:`laplace.marglik_training`
(laplace-torch 0.3) in the same order, with the same names and defaults (the default
``backend`` is :class:`~laplace_equivariance.EquivariantKFAC`, which equals ``AsdlGGN`` on
stock layers), and returns the same ``(la, model, margliks, losses)``: a script changes
only its import, and with the same seed the results are laplace-torch's
(``tests/test_marglik_dropin.py`` runs both side by side). Keyword-only extras follow:
priors per layer and path (``prior_structure="path"``), a separate (unaugmented, smaller)
``marglik_loader``, the Monte-Carlo Fisher with several samples, checkpoints that resume to
the same state, a per-epoch callback, S-layer lengthscales as hyperparameters (Eq. 9 in
both), and the choice of the returned epoch (``restore_best``).

In a ``torch.distributed`` process group with a sharded loader (``DistributedSampler``) the
weights train through ``DistributedDataParallel`` and every Laplace fit is summed over the
ranks (:mod:`laplace_equivariance.distributed`).

The paper's schedule (App. F.6: Adam lr 0.01 cosine-annealed to 0, hyperparameters lr 0.1,
10 burn-in epochs, marginal likelihood every 5 epochs) is :func:`paper_schedule`, a set of
keyword arguments, not a change of defaults::

    marglik_training(model, loader, prior_structure="path",
                     **paper_schedule(n_epochs=100, steps_per_epoch=len(loader)))
"""

from __future__ import annotations

import copy
import math
import os
import time
import warnings
from collections.abc import Callable, Iterable, Iterator, MutableMapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import torch
import tqdm
from laplace import Laplace
from laplace.baselaplace import BaseLaplace
from laplace.curvature.curvature import CurvatureInterface
from torch import nn
from torch.nn.parallel import DistributedDataParallel
from torch.nn.utils import parameters_to_vector
from torch.optim import Adam, Optimizer
from torch.optim.lr_scheduler import LRScheduler
from torch.utils.data import DataLoader

from laplace_equivariance import checkpoint, distributed
from laplace_equivariance.checkpoint import CheckpointError, Progress
from laplace_equivariance.curvature import EquivariantKFAC
from laplace_equivariance.curvature.lengthscales import (
    lengthscale_hyperparameters,
    log_marginal_likelihood,
)
from laplace_equivariance.factor_balance import balance
from laplace_equivariance.loader_size import counted, examples_in
from laplace_equivariance.marglik_options import MarglikOptions
from laplace_equivariance.priors import PriorGroups, PriorStructure
from laplace_equivariance.schedule import marglik_step_epochs, paper_schedule

__all__ = ["CheckpointError", "marglik_step_epochs", "marglik_training", "paper_schedule"]


@contextmanager
def _requiring_grad(tensors: list[torch.Tensor]) -> Iterator[None]:
    """Let ``tensors`` (leaves) record gradients inside the block only."""
    for tensor in tensors:
        tensor.requires_grad_(True)
    try:
        yield
    finally:
        for tensor in tensors:
            tensor.requires_grad_(False)


def _split_batch(batch: Any, key_y: str, device: torch.device) -> tuple[Any, torch.Tensor]:
    """``(inputs, targets)`` of a batch, as laplace-torch: a dict batch is the model's input."""
    if isinstance(batch, MutableMapping):
        return batch, batch[key_y].to(device, non_blocking=True)
    x, y = batch
    return x.to(device, non_blocking=True), y.to(device, non_blocking=True)


class _Trainer:
    """The state of one :func:`marglik_training` run and its steps.

    Hyperparameters are laplace-torch's: the log prior precisions (one per group of
    :class:`~laplace_equivariance.priors.PriorGroups`), for regression the log observation
    noise (unless fixed), plus the lengthscale hyperparameters of S-layers.
    """

    def __init__(self, model: nn.Module, train_loader: DataLoader, options: MarglikOptions) -> None:
        self.model, self.train_loader, self.options = model, train_loader, options
        options.check_loaders(train_loader)
        self.lengthscales = lengthscale_hyperparameters(model)
        options.check(self.lengthscales)
        self.marglik_loader = options.marglik_loader or train_loader
        p = next(model.parameters())
        self.device, dtype = p.device, p.dtype
        self.n_data = examples_in(train_loader)
        self.groups = PriorGroups(model, options.prior_structure)
        init = math.log(options.temperature * options.prior_prec_init)
        self.log_prior_prec = torch.full((len(self.groups),), init, device=self.device, dtype=dtype)
        self.log_prior_prec.requires_grad_(True)
        hyperparameters = [self.log_prior_prec]
        self.log_sigma_noise = None
        if options.likelihood == "regression":
            self.log_sigma_noise = torch.full(
                (1,), math.log(options.sigma_noise_init), device=self.device, dtype=dtype
            ).requires_grad_(True)
            hyperparameters.append(self.log_sigma_noise)
        optimizer_kwargs = dict(options.optimizer_kwargs or {})
        if optimizer_kwargs.get("weight_decay"):
            warnings.warn(
                "Weight decay is handled by the learned prior precisions; it is set to 0.",
                stacklevel=3,
            )
            optimizer_kwargs["weight_decay"] = 0.0
        self.optimizer = options.optimizer_cls(model.parameters(), **optimizer_kwargs)
        self.scheduler = None
        if options.scheduler_cls is not None:
            self.scheduler = options.scheduler_cls(
                self.optimizer, **(options.scheduler_kwargs or {})
            )
        self.hyper_optimizer = Adam(
            [*hyperparameters, *self.lengthscales.values()], lr=options.lr_hyp
        )
        for omega in self.lengthscales.values():  # gradients only in hyperparameter steps
            omega.requires_grad_(False)
        if options.likelihood == "classification":
            self.criterion: nn.Module = nn.CrossEntropyLoss(reduction="mean")
        else:
            self.criterion = nn.MSELoss(reduction="mean")
        fits = marglik_step_epochs(
            options.n_epochs, options.n_epochs_burnin, options.marglik_frequency
        )
        self.first_fit = fits[0] if fits else None
        self.held = options.checked_held(model, self.first_fit)
        held_ids = {id(p) for p in self.held}
        self.held_names = sorted(n for n, p in model.named_parameters() if id(p) in held_ids)
        self.progress = Progress()
        self.path = Path(options.checkpoint) if options.checkpoint is not None else None
        # in a process group the weights train through DDP (gradients averaged over ranks);
        # the Laplace fits use the model itself on each rank's shard and sum over the ranks
        self.network = DistributedDataParallel(model) if distributed.world_size() > 1 else model
        if options.compile_kwargs is not None:  # the MAP steps only: fits need ASDL's hooks
            self.network = torch.compile(self.network, **options.compile_kwargs)

    def sigma_noise(self) -> float | torch.Tensor:
        """The observation noise (1 for classification; differentiable when learned)."""
        if self.options.likelihood == "classification":
            return 1.0
        if self.options.fix_sigma_noise:
            return self.options.sigma_noise_init
        return self.log_sigma_noise.exp()

    def prior_precision(self) -> torch.Tensor:
        """laplace-torch's ``prior_precision`` (differentiable in the log precisions)."""
        return self.groups.to_laplace(self.log_prior_prec.exp())

    def laplace(self, prior_precision, sigma_noise, enable_backprop: bool = False) -> BaseLaplace:
        """A Laplace approximation fitted on the marginal-likelihood loader.

        A loader over ``n`` of the ``N`` training examples gets laplace-torch's temperature
        times ``n / N``, so that the estimate is for the whole training set.
        """
        o = self.options
        la = Laplace(
            self.model,
            o.likelihood,
            hessian_structure=o.hessian_structure,
            sigma_noise=sigma_noise,
            prior_precision=prior_precision,
            temperature=o.temperature * examples_in(self.marglik_loader) / self.n_data,
            backend=o.backend,
            subset_of_weights="all",
            enable_backprop=enable_backprop,
            dict_key_x=o.dict_key_x,
            dict_key_y=o.dict_key_y,
            backend_kwargs=o.laplace_backend_kwargs(),
        )
        la.fit(counted(self.marglik_loader))
        return la

    def balance_factors(self) -> None:
        """Balance every factored layer's channel pairs (:func:`.factor_balance.balance`)."""
        balance(
            self.model,
            self.optimizer,
            self.groups.per_parameter(self.log_prior_prec.detach().exp()),
        )

    def map_epoch(self, epoch: int) -> float:
        """One epoch of MAP training (laplace-torch's loss); returns accuracy or mean error."""
        o = self.options
        self.model.train()
        # loss sum and accuracy count (or squared error) stay on the device: reading them
        # every step would make the host wait for the device (checked once per epoch below)
        totals = torch.zeros(2, dtype=torch.float64, device=self.device)
        trainable = [p for p in self.model.parameters() if p.requires_grad]
        if hasattr(self.train_loader.sampler, "set_epoch"):  # DistributedSampler's shuffle
            self.train_loader.sampler.set_epoch(epoch)
        for batch in self.train_loader:
            x, y = _split_batch(batch, o.dict_key_y, self.device)
            self.optimizer.zero_grad()
            scale = o.temperature
            if o.likelihood == "regression":
                sigma_noise = self.sigma_noise()
                sigma_noise = sigma_noise.detach() if torch.is_tensor(sigma_noise) else sigma_noise
                scale = o.temperature / (2 * sigma_noise**2)
            delta = self.groups.per_parameter(self.log_prior_prec.detach().exp())
            theta = parameters_to_vector(trainable)
            f = self.network(x)
            loss = self.criterion(f, y) + (0.5 * (delta * theta) @ theta) / self.n_data / scale
            loss.backward()
            if self.first_fit is not None and epoch <= self.first_fit:
                for p in self.held:  # no gradient: the optimiser leaves them (and its state)
                    p.grad = None
            self.optimizer.step()
            with torch.no_grad():
                if o.likelihood == "regression":
                    performance = (f - y).square().sum()
                else:
                    performance = (f.argmax(-1) == y).sum()
                # in float64 before the product, as laplace-torch's loss.item() * len(y)
                totals += torch.stack([loss.double().sum() * len(y), performance.double()])
            if self.scheduler is not None:
                self.scheduler.step()
        distributed.all_reduce_sum([totals])  # a sharded loader: sum over the ranks
        total_loss, performance = totals.tolist()
        # the loss is a sum of non-negative terms: a NaN or inf in any step stays in the sum
        if not math.isfinite(total_loss):
            raise FloatingPointError(
                f"Non-finite training loss in epoch {epoch}; the checkpoint (if any) holds "
                f"epoch {self.progress.epoch}."
            )
        self.progress.losses.append(total_loss / self.n_data)
        return performance / self.n_data

    def hyperparameter_steps(self, epoch: int) -> None:
        """Fit a Laplace approximation, take ``n_hypersteps`` steps, track the best epoch."""
        o = self.options
        refit = bool(self.lengthscales) and o.lengthscale_derivative == "total"
        if o.balance_factors:
            self.balance_factors()
        try:
            la = self.laplace(self.prior_precision(), self.sigma_noise())
        except FloatingPointError as error:
            raise FloatingPointError(f"Epoch {epoch}: {error}") from error
        for step in range(o.n_hypersteps):
            if step and refit:
                la = self.laplace(self.prior_precision().detach(), self.sigma_noise())
            self.hyper_optimizer.zero_grad()
            tracked = list(self.lengthscales.values())
            with _requiring_grad(tracked):
                prior_precision = self.prior_precision()
                sigma_noise = self.sigma_noise() if o.likelihood == "regression" else None
                if self.lengthscales:
                    marglik = -log_marginal_likelihood(
                        la, self.marglik_loader, prior_precision, o.lengthscale_derivative
                    )
                else:
                    marglik = -la.log_marginal_likelihood(prior_precision, sigma_noise)
                marglik.backward()
            value = self._check_step(epoch, step, marglik)
            evaluated = self._hyperparameter_values()
            self.hyper_optimizer.step()
            self.progress.margliks.append(value)
        best = self.progress.best
        if o.restore_best and (best is None or self.progress.margliks[-1] < best["marglik"]):
            self.progress.best = {"epoch": epoch, "marglik": self.progress.margliks[-1]}
            self.progress.best.update(self._state_at(evaluated))

    def _hyperparameter_values(self) -> list[torch.Tensor]:
        """Copies of every hyperparameter, in the hyperparameter optimiser's order."""
        return [t.detach().clone() for t in self.hyper_optimizer.param_groups[0]["params"]]

    def _state_at(self, values: list[torch.Tensor]) -> dict[str, Any]:
        """Model state and hyperparameters with the hyperparameters set to ``values``.

        laplace-torch restores the precisions at which the best marginal likelihood was
        evaluated, i.e. before that step's update; the lengthscales live in the model's
        state, so they are set back for the copy.
        """
        current = self._hyperparameter_values()
        params = self.hyper_optimizer.param_groups[0]["params"]
        with torch.no_grad():
            for param, value in zip(params, values, strict=True):
                param.copy_(value)
            state = {
                "model": copy.deepcopy(self.model.state_dict()),
                "log_prior_prec": self.log_prior_prec.detach().clone(),
                "log_sigma_noise": None
                if self.log_sigma_noise is None
                else self.log_sigma_noise.detach().clone(),
            }
            for param, value in zip(params, current, strict=True):
                param.copy_(value)
        return state

    def _check_step(self, epoch: int, step: int, marglik: torch.Tensor) -> float:
        """Raise before a non-finite value reaches the hyperparameter optimiser.

        One host read per step takes the value and whether it and every hyperparameter's
        gradient are finite; the names are looked up only when one is not.

        Returns:
            The value of ``marglik``.

        Raises:
            FloatingPointError: Naming the epoch, the step and the first hyperparameter whose
                gradient is not finite.
        """
        grads = [self.log_prior_prec.grad, *(omega.grad for omega in self.lengthscales.values())]
        if self.log_sigma_noise is not None:
            grads.append(self.log_sigma_noise.grad)
        checked = torch.cat(
            [marglik.detach().reshape(1), *(g.reshape(-1) for g in grads if g is not None)]
        )
        value, finite = torch.stack(
            [marglik.detach().double(), torch.isfinite(checked).all().double()]
        ).tolist()
        if finite:
            return value
        where = f"Epoch {epoch}, hyperparameter step {step + 1}"
        if not math.isfinite(value):
            raise FloatingPointError(f"{where}: the log marginal likelihood is {value}.")
        named = []
        grad = self.log_prior_prec.grad
        if grad is not None and not torch.isfinite(grad).all():
            first = int((~torch.isfinite(grad)).nonzero()[0])
            named.append(f"log prior precision of {self.groups.describe(first)!r}")
        if self.log_sigma_noise is not None and self.log_sigma_noise.grad is not None:
            if not torch.isfinite(self.log_sigma_noise.grad).all():
                named.append("log observation noise")
        for name, omega in self.lengthscales.items():
            if omega.grad is not None and not torch.isfinite(omega.grad).all():
                named.append(f"lengthscale of {name!r}")
        raise FloatingPointError(  # the read above found one of these non-finite
            f"{where}: non-finite gradient of the {named[0]}; check that layer's lengthscale "
            "and weights, or lower lr_hyp."
        )

    def info(self, accuracy: float, marglik_step: bool) -> dict[str, Any]:
        """What the callback gets after an epoch."""
        best = self.progress.best
        return {
            "loss": self.progress.losses[-1],
            "accuracy": accuracy,
            "neg_log_marglik": self.progress.margliks[-1] if marglik_step else None,
            "prior_precision": self.groups.summary(self.log_prior_prec.exp()),
            "sigma_noise": float(self.sigma_noise()),
            "lengthscale": {name: omega.item() for name, omega in self.lengthscales.items()},
            "seconds": self.progress.seconds,
            "epoch_seconds": list(self.progress.epoch_seconds),
            "best_epoch": best.get("epoch") if self.options.restore_best and best else None,
        }

    def save(self) -> None:
        """Write the whole training state to the checkpoint file (if any), from rank 0."""
        checkpoint.save(self)

    def resume(self) -> None:
        """Load the checkpoint file, if it exists (:func:`.checkpoint.resume`)."""
        progress = checkpoint.resume(self)
        if progress is not None:
            self.progress = progress

    def finish(self) -> BaseLaplace | None:
        """Restore the best epoch (if tracked) and fit the returned Laplace approximation."""
        best = self.progress.best if self.options.restore_best else None
        if best is not None:
            self.model.load_state_dict(best["model"])
            with torch.no_grad():
                self.log_prior_prec.copy_(best["log_prior_prec"])
                if self.log_sigma_noise is not None:
                    self.log_sigma_noise.copy_(best["log_sigma_noise"])
        if not self.options.final_laplace:
            return None
        if self.options.balance_factors:
            self.balance_factors()
        sigma_noise = self.sigma_noise()
        if torch.is_tensor(sigma_noise):
            sigma_noise = sigma_noise.detach()
        return self.laplace(
            self.prior_precision().detach(), sigma_noise, self.options.enable_backprop
        )


def marglik_training(
    model: nn.Module,
    train_loader: DataLoader,
    likelihood: str = "classification",
    hessian_structure: str = "kron",
    backend: type[CurvatureInterface] = EquivariantKFAC,
    optimizer_cls: type[Optimizer] = Adam,
    optimizer_kwargs: dict | None = None,
    scheduler_cls: type[LRScheduler] | None = None,
    scheduler_kwargs: dict | None = None,
    n_epochs: int = 300,
    lr_hyp: float = 1e-1,
    prior_structure: PriorStructure | str = PriorStructure.LAYERWISE,
    n_epochs_burnin: int = 0,
    n_hypersteps: int = 10,
    marglik_frequency: int = 1,
    prior_prec_init: float = 1.0,
    sigma_noise_init: float = 1.0,
    temperature: float = 1.0,
    fix_sigma_noise: bool = False,
    progress_bar: bool = False,
    enable_backprop: bool = False,
    dict_key_x: str = "input_ids",
    dict_key_y: str = "labels",
    *,
    marglik_loader: DataLoader | None = None,
    stochastic: bool = False,
    n_mc_samples: int = 1,
    kfac_approx: str = "expand",
    callback: Callable[[int, dict[str, Any]], None] | None = None,
    checkpoint: str | os.PathLike | None = None,
    final_laplace: bool = True,
    lengthscale_derivative: str = "total",
    restore_best: bool = True,
    balance_factors: bool = False,
    held_until_fit: Iterable[nn.Parameter] = (),
    backend_kwargs: dict[str, Any] | None = None,
    compile_kwargs: dict[str, Any] | None = None,
) -> tuple[BaseLaplace | None, nn.Module, list[float], list[float]]:
    """Train weights by MAP and hyperparameters by the Laplace marginal likelihood (Eq. 9).

    As :func:`laplace.marglik_training`: every epoch minimises ``loss(f, y) + 0.5 *
    sum(delta * theta^2) / N / c`` over ``train_loader`` (``N`` the examples it yields,
    which is laplace-torch's ``len(train_loader.dataset)`` unless a sampler picks some of
    them or ``drop_last`` drops some; ``c`` the temperature, divided by ``2 sigma^2`` for
    regression) with ``optimizer_cls`` (and ``scheduler_cls``, stepped
    after every batch). From epoch ``n_epochs_burnin`` on, every ``marglik_frequency``
    epochs, a Laplace approximation is fitted and the log prior precisions (and, for
    regression, the log observation noise unless ``fix_sigma_noise``) take ``n_hypersteps``
    Adam steps (lr ``lr_hyp``) on the negative log marginal likelihood. S-layer lengthscales
    built with ``lengthscale_mode="hyperparameter"`` take the same steps (on omega itself) on
    the gradient of :func:`.curvature.lengthscales.log_marginal_likelihood` chosen
    by ``lengthscale_derivative`` (``"total"`` refits before every step after the first).
    At the end the model and hyperparameters at which the best marginal likelihood was
    evaluated are restored (unless ``restore_best=False``) and a Laplace approximation is fitted.
    One difference from laplace-torch 0.3: every epoch trains in ``model.train()`` mode, where
    laplace-torch keeps training in the eval mode its first Laplace fit leaves behind; the two
    differ only for modules such as dropout and batch norm.

    Args:
        model: The network (logits for classification).
        train_loader: Batches for the weights (may augment); ``(x, y)`` or dicts.
        likelihood: ``"classification"`` or ``"regression"``.
        hessian_structure: laplace-torch's ``"kron"``, ``"diag"`` or ``"full"``.
        backend: Curvature backend (default :class:`~laplace_equivariance.EquivariantKFAC`).
        optimizer_cls: Optimiser of the weights.
        optimizer_kwargs: Its options (``{"lr": 1e-2}``); a weight decay is set to 0 with a
            warning (the learned prior precisions are the decay).
        scheduler_cls: Optional learning-rate scheduler, stepped after every batch.
        scheduler_kwargs: Its options.
        n_epochs: Epochs of training.
        lr_hyp: Adam learning rate of the hyperparameters.
        prior_structure: ``"scalar"``, ``"layerwise"`` (per tensor), ``"diag"`` (per
            parameter) or ``"path"`` (per layer and path), see
            :mod:`laplace_equivariance.priors`.
        n_epochs_burnin: Epochs before the first marginal-likelihood step.
        n_hypersteps: Hyperparameter steps per marginal-likelihood epoch.
        marglik_frequency: Epochs between marginal-likelihood steps.
        prior_prec_init: Initial prior precision (multiplied by ``temperature``, as
            laplace-torch does).
        sigma_noise_init: Initial observation noise (regression).
        temperature: laplace-torch's likelihood temperature.
        fix_sigma_noise: Keep the observation noise at ``sigma_noise_init`` (regression).
        progress_bar: Show a tqdm bar with loss, accuracy and marginal likelihood.
        enable_backprop: Make the returned Laplace approximation differentiable.
        dict_key_x: Input key of dict batches.
        dict_key_y: Target key of dict batches.
        marglik_loader: Batches for the Laplace fits; defaults to ``train_loader``. Pass an
            unaugmented loader (App. F.6), or one over a subset of ``n`` examples (a
            ``Subset``, or a sampler such as ``SubsetRandomSampler``: ``n`` counts what the
            loader yields, not ``len(loader.dataset)``): the fits then use temperature
            ``temperature * n / N``, so that the estimate is for the whole training set. A
            loader whose example count cannot be known without iterating it (a custom
            ``batch_sampler``, an ``IterableDataset``) is refused with a ``TypeError``. The
            Kronecker factors are sums over the examples, so the fit does not depend on this
            loader's batch size, only its time and memory do.
        stochastic: Estimate the GGN with a Monte-Carlo Fisher.
        n_mc_samples: Targets sampled per example for the Monte-Carlo Fisher, which averages
            them (:class:`~laplace_equivariance.EquivariantKFAC`'s option).
        kfac_approx: ``"expand"`` or ``"reduce"`` for the weights shared over positions
            (:class:`~laplace_equivariance.EquivariantKFAC`'s option, docs/curvature.md).
        callback: Called after every epoch (after its checkpoint is written) as
            ``callback(epoch, info)`` with the epoch's ``loss``, ``accuracy`` (for regression
            the mean squared error), ``neg_log_marglik`` (None in epochs without a step),
            ``prior_precision`` (group name -> value; per tensor, mean, for ``"diag"``),
            ``sigma_noise``, ``lengthscale`` (basis name -> omega), ``seconds`` (wall time of
            all epochs, including those before a resume) and ``best_epoch`` (the epoch that
            would be restored; None before the first step or with ``restore_best=False``).
        checkpoint: File to save the whole training state to after every epoch, and to
            resume from if it exists (bit for bit on CPU with the same seeds).
        final_laplace: Fit the returned Laplace approximation (False returns ``la=None``).
        lengthscale_derivative: ``"total"`` (exact GGN only) or ``"partial"``, see
            :mod:`laplace_equivariance.curvature.lengthscales`.
        restore_best: Return the model and hyperparameters of the best marginal likelihood
            (laplace-torch's behaviour), not those of the last epoch (the paper's code).
        balance_factors: Before every Laplace fit, rescale the two factors of every channel
            pair of each :class:`~laplace_equivariance.layers.FactoredLinear2d` (F-FC, S-FC)
            to equal prior terms under the current precisions
            (:meth:`~laplace_equivariance.layers.FactoredLinear2d.balance_`; the optimiser's
            moment estimates are rescaled with them). The network's function is unchanged
            and the Laplace approximation is taken at the posterior's mode along these
            symmetries; no effect on models without factored layers.
        held_until_fit: Parameters the optimiser leaves at their values until the first
            marginal-likelihood fit (their gradients are dropped up to and including the
            epoch that ends with it); from then on they train as the others. They are in the
            prior and in every Laplace approximation throughout. Given the silenced paths
            (:meth:`~laplace_equivariance.models.RelaxedNet.non_equivariant_parameters`) of a
            network started by
            :meth:`~laplace_equivariance.models.RelaxedNet.start_equivariant_`, the first fit
            weighs those paths while they are silent, before the burn-in grows them
            (docs/learned_structure.md, "Where training starts"). The checkpoint records
            their names; a resume with another set is refused.
        backend_kwargs: The backend's options for every Laplace fit, as laplace-torch's
            ``Laplace(..., backend_kwargs=...)`` (``fit_batch_size``, ``host_eigenvalues``,
            ...); ``stochastic``, ``n_mc_samples`` and ``kfac_approx`` are refused there.
        compile_kwargs: The MAP steps run ``torch.compile(model, **compile_kwargs)``
            (``{"mode": "reduce-overhead"}``: CUDA graphs); fits, hyperparameter steps and
            the returned model stay eager (docs/usage.md).

    Returns:
        ``(la, model, margliks, losses)``: the final Laplace approximation, the model, the
        negative log marginal likelihood of every hyperparameter step and the mean training
        loss of every epoch.

    Warns:
        UserWarning: If ``n_epochs_burnin <= n_epochs`` asks for learning but no epoch is a
            marginal-likelihood epoch (:func:`marglik_step_epochs`): the result is then the
            MAP model at the initial prior, as laplace-torch's would be.

    Raises:
        ValueError: Before training, for an unknown likelihood or prior structure, an empty
            loader, lengthscale hyperparameters with another
            structure, backend or likelihood than ``"kron"``, ``EquivariantKFAC`` and
            classification, the total derivative with ``stochastic=True``, or
            ``n_mc_samples`` not a positive integer, or other than one without
            ``stochastic=True`` and ``EquivariantKFAC``, ``backend_kwargs`` naming an option the
            backend does not take or one of
            those own arguments, or ``held_until_fit`` naming a
            tensor that is not a trainable parameter of the model, or given to a schedule
            without a fit.
        CheckpointError: (a ``ValueError``) Before training, for a checkpoint that cannot be
            read or does not fit the run.
        FloatingPointError: If the training loss, the curvature, the marginal likelihood or a
            hyperparameter's gradient becomes non-finite; the message names the epoch (and
            the parameter, prior group, noise or basis); the last checkpoint is the last good
            epoch.
    """
    held_until_fit = tuple(held_until_fit)
    options = MarglikOptions(
        **{k: v for k, v in locals().items() if k not in ("model", "train_loader")}
    )
    trainer = _Trainer(model, train_loader, options)
    trainer.resume()
    learns = n_epochs_burnin <= n_epochs
    if learns and not marglik_step_epochs(n_epochs, n_epochs_burnin, marglik_frequency):
        warnings.warn(
            f"No epoch of {n_epochs} takes a marginal-likelihood step (burn-in "
            f"{n_epochs_burnin}, one every {marglik_frequency} epochs): the prior precisions "
            "stay at their initial values and nothing is learned. Train longer or lower "
            "n_epochs_burnin.",
            stacklevel=2,
        )
    epochs = tqdm.tqdm(  # counts the run's epochs: a resume from epoch 3 of 10 shows 3/10
        range(trainer.progress.epoch + 1, n_epochs + 1),
        initial=trainer.progress.epoch,
        total=n_epochs,
        disable=not progress_bar or distributed.rank() != 0,
        desc="marglik training" if learns else "MAP training",
    )
    for epoch in epochs:
        start = time.perf_counter()
        accuracy = trainer.map_epoch(epoch)
        marglik_step = epoch >= n_epochs_burnin and epoch % marglik_frequency == 0
        if marglik_step:
            trainer.hyperparameter_steps(epoch)
        trainer.progress.epoch = epoch
        trainer.progress.epoch_seconds.append(time.perf_counter() - start)
        trainer.progress.seconds += trainer.progress.epoch_seconds[-1]
        info = trainer.info(accuracy, marglik_step)
        epochs.set_postfix(
            loss=f"{info['loss']:.3f}",
            acc=f"{info['accuracy']:.3f}",
            marglik="-" if not marglik_step else f"{info['neg_log_marglik']:.1f}",
        )
        trainer.save()
        if callback is not None:
            callback(epoch, info)
    la = trainer.finish()
    return la, model, trainer.progress.margliks, trainer.progress.losses
