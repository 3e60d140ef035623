"""The state of one :func:`~laplace_equivariance.marglik_training` run and its steps.

:class:`Trainer` holds the model, the optimisers, the log hyperparameters and the run's
progress; its methods are the run's steps: a MAP epoch over the training loader (laplace-torch's
loss, Eq. 9's data term plus the prior), the hyperparameter steps on the Laplace marginal
likelihood, the check of the burn-in's accuracy against chance, the checkpoint, and the final
restore and Laplace fit. :func:`~laplace_equivariance.marglik.training.marglik_training` is the loop
over epochs that calls them.
"""

from __future__ import annotations

import copy
import math
import warnings
from collections.abc import Callable, Iterator, MutableMapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any, cast

import torch
from laplace import Laplace
from laplace.baselaplace import BaseLaplace
from torch import nn
from torch.nn.parallel import DistributedDataParallel
from torch.optim import Adam
from torch.utils.data import DataLoader

from laplace_equivariance import distributed
from laplace_equivariance.curvature.lengthscales import (
    lengthscale_hyperparameters,
    log_marginal_likelihood,
)
from laplace_equivariance.data.loader_size import counted, examples_in
from laplace_equivariance.marglik import checkpoint
from laplace_equivariance.marglik.chance import NotLearningWarning, at_chance, not_learning_message
from laplace_equivariance.marglik.checkpoint import Progress
from laplace_equivariance.marglik.factor_balance import balance
from laplace_equivariance.marglik.options import MarglikOptions
from laplace_equivariance.marglik.priors import PriorGroups
from laplace_equivariance.marglik.schedule import marglik_step_epochs


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


class Trainer:
    """The state of one :func:`marglik_training` run and its steps.

    Hyperparameters are laplace-torch's: the log prior precisions (one per group of
    :class:`~laplace_equivariance.marglik.priors.PriorGroups`), for regression the log observation
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
        # in the epoch of the first fit, before it, a classifier's training accuracy is checked
        # against chance: a network not learning is told before the evidence is taken of it
        # (a MAP run has no fit and is not checked)
        self.chance_epoch = None
        if options.likelihood == "classification":
            self.chance_epoch = self.first_fit
        self.class_counts: torch.Tensor | None = None
        self.held = options.checked_held(model, self.first_fit)
        # the last epoch in which the held parameters keep their values
        self.release_epoch = options.held_until_epoch or self.first_fit
        held_ids = {id(p) for p in self.held}
        self.held_names = sorted(n for n, p in model.named_parameters() if id(p) in held_ids)
        self.progress = Progress()
        self.path = Path(options.checkpoint) if options.checkpoint is not None else None
        self.saved_epoch = 0
        """The epoch the checkpoint file holds (0: none written or resumed yet)."""
        # in a process group the weights train through DDP (gradients averaged over ranks);
        # the Laplace fits use the model itself on each rank's shard and sum over the ranks
        self.network: Callable[..., Any] = (
            DistributedDataParallel(model) if distributed.world_size() > 1 else model
        )
        if options.compile_kwargs is not None:  # the MAP steps only: fits need ASDL's hooks
            self.network = torch.compile(self.network, **options.compile_kwargs)

    def sigma_noise(self) -> float | torch.Tensor:
        """The observation noise (1 for classification; differentiable when learned)."""
        if self.options.likelihood == "classification":
            return 1.0
        if self.options.fix_sigma_noise:
            return self.options.sigma_noise_init
        if self.log_sigma_noise is None:
            raise RuntimeError("A regression Trainer has no log_sigma_noise: it was not set up.")
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
        # the counted view stands in for the DataLoader: laplace-torch iterates it and reads
        # len(loader.dataset)
        la.fit(cast(DataLoader, counted(self.marglik_loader)))
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
        counting = epoch == self.chance_epoch
        for batch in self.train_loader:
            x, y = _split_batch(batch, o.dict_key_y, self.device)
            self.optimizer.zero_grad()
            scale: float | torch.Tensor = o.temperature
            if o.likelihood == "regression":
                sigma_noise = self.sigma_noise()
                sigma_noise = sigma_noise.detach() if torch.is_tensor(sigma_noise) else sigma_noise
                scale = o.temperature / (2 * sigma_noise**2)
            penalty = self.groups.penalty(self.log_prior_prec.detach().exp(), trainable)
            f = self.network(x)
            loss = self.criterion(f, y) + 0.5 * penalty / self.n_data / scale
            loss.backward()
            if self.release_epoch is not None and epoch <= self.release_epoch:
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
                if counting:  # index_add_, unlike bincount, needs no read of the host
                    if self.class_counts is None:
                        self.class_counts = torch.zeros(
                            f.shape[-1], dtype=torch.float64, device=self.device
                        )
                    self.class_counts.index_add_(0, y, torch.ones_like(y, dtype=torch.float64))
            if self.scheduler is not None:
                self.scheduler.step()
        distributed.all_reduce_sum([totals])  # a sharded loader: sum over the ranks
        if counting:
            distributed.all_reduce_sum([self._class_counts()])
        total_loss, performance = totals.tolist()
        # the loss is a sum of non-negative terms: a NaN or inf in any step stays in the sum
        if not math.isfinite(total_loss):
            raise FloatingPointError(
                f"Non-finite training loss in epoch {epoch}; the checkpoint (if any) holds "
                f"epoch {self.saved_epoch}."
            )
        self.progress.losses.append(total_loss / self.n_data)
        return performance / self.n_data

    def warn_if_at_chance(self, epoch: int, accuracy: float) -> None:
        """Warn if the first fit's epoch is at chance on the labels it saw (rank 0).

        The warning is a :class:`~laplace_equivariance.marglik.chance.NotLearningWarning`.
        """
        if epoch != self.chance_epoch or distributed.rank() != 0:
            return
        counts = self._class_counts().cpu().round().long()
        if at_chance(accuracy, counts):
            message = not_learning_message(accuracy, counts, f"in epoch {epoch}")
            warnings.warn(message, NotLearningWarning, stacklevel=3)

    def _class_counts(self) -> torch.Tensor:
        """:attr:`class_counts`, which the epoch of the first fit counts (from its batches)."""
        if self.class_counts is None:
            raise RuntimeError("No class counts: the epoch that counts them saw no batch.")
        return self.class_counts

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
                    # laplace-torch 0.3 annotates sigma_noise as Tensor | None; its setter
                    # takes a float too (a fixed noise)
                    marglik = -la.log_marginal_likelihood(
                        prior_precision,
                        sigma_noise,  # type: ignore[arg-type]
                    )
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
            "sigma_noise": float(torch.as_tensor(self.sigma_noise()).detach()),
            "lengthscale": {name: omega.item() for name, omega in self.lengthscales.items()},
            "seconds": self.progress.seconds,
            "epoch_seconds": list(self.progress.epoch_seconds),
            "best_epoch": best.get("epoch") if self.options.restore_best and best else None,
        }

    def save(self, marglik_step: bool) -> None:
        """Write the whole training state to the checkpoint file (if any), from rank 0, if due.

        Due after every ``checkpoint_every``-th epoch, an epoch with a marginal-likelihood step
        (``marglik_step``) and the last epoch.
        """
        epoch, options = self.progress.epoch, self.options
        if epoch % options.checkpoint_every and not marglik_step and epoch != options.n_epochs:
            return
        checkpoint.save(self)
        self.saved_epoch = epoch

    def resume(self) -> None:
        """Load the checkpoint file, if it exists (:func:`.checkpoint.resume`)."""
        progress = checkpoint.resume(self)
        if progress is not None:
            self.progress = progress
            self.saved_epoch = progress.epoch

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
