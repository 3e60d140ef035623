"""Marginal-likelihood training with the paper's schedule (paper Sec. 4, Eq. 9, App. F.6).

:func:`marglik_training` takes the arguments of :func:`laplace.marglik_training` that the
two share and returns the same ``(la, model, margliks, losses)``. On top it has what the
paper's experiments need: a cosine-annealed learning rate for the weights, a burn-in, the
marginal likelihood every ``marglik_frequency`` epochs on its own (unaugmented, possibly
smaller) loader, priors per layer and path, a Monte-Carlo Fisher, a progress bar, a
per-epoch callback, and checkpoints that resume to the same state.

S-layer lengthscales in ``"hyperparameter"`` mode are learned with the prior precisions, by
the gradient of :func:`laplace_equivariance.lengthscales.log_marginal_likelihood`: by default
its total derivative, which refits the Laplace approximation before every hyperparameter
step; ``lengthscale_derivative="partial"`` is the cheaper approximation that module
describes.
"""

from __future__ import annotations

import math
import os
import time
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import torch
import tqdm
from laplace import Laplace
from laplace.baselaplace import BaseLaplace
from torch import nn
from torch.nn.utils import parameters_to_vector
from torch.optim import Adam, Optimizer
from torch.optim.lr_scheduler import CosineAnnealingLR
from torch.utils.data import DataLoader

from laplace_equivariance.curvature import EquivariantKFAC
from laplace_equivariance.curvature.monte_carlo import check_sample_count
from laplace_equivariance.lengthscales import (
    DERIVATIVES,
    lengthscale_hyperparameters,
    log_marginal_likelihood,
)
from laplace_equivariance.priors import PriorGroups, PriorStructure

__all__ = ["marglik_training"]


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


def _save_atomically(state: dict[str, Any], path: Path) -> None:
    """Write ``state`` next to ``path`` and rename, so a crash never leaves half a file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_suffix(path.suffix + ".partial")
    torch.save(state, partial)
    os.replace(partial, path)


def _check_hyperparameter_step(
    epoch: int,
    step: int,
    marglik: torch.Tensor,
    log_prior_precision_grads: dict[str, torch.Tensor],
    lengthscale_grads: dict[str, torch.Tensor | None],
) -> None:
    """Raise before a non-finite value reaches the hyperparameter optimiser.

    Args:
        epoch: The epoch, for the message.
        step: The hyperparameter step within the epoch.
        marglik: The negative log marginal likelihood of the step.
        log_prior_precision_grads: Prior group name -> gradient of its log precision.
        lengthscale_grads: Basis name -> gradient of its lengthscale (None where the
            marginal likelihood does not depend on it).

    Raises:
        FloatingPointError: Naming the epoch, the step and the first hyperparameter whose
            gradient is not finite.
    """
    where = f"Epoch {epoch}, hyperparameter step {step + 1}"
    if not torch.isfinite(marglik):
        raise FloatingPointError(f"{where}: the log marginal likelihood is {marglik.item()}.")
    named = [(f"log prior precision of {n!r}", g) for n, g in log_prior_precision_grads.items()]
    named += [(f"lengthscale of {n!r}", g) for n, g in lengthscale_grads.items()]
    for name, grad in named:
        if grad is not None and not torch.isfinite(grad).all():
            raise FloatingPointError(
                f"{where}: non-finite gradient of the {name}; check that layer's lengthscale "
                "and weights, or lower lr_hyp."
            )


def marglik_training(
    model: nn.Module,
    train_loader: DataLoader,
    likelihood: str = "classification",
    hessian_structure: str = "kron",
    backend: type = EquivariantKFAC,
    optimizer_cls: type[Optimizer] = Adam,
    optimizer_kwargs: dict | None = None,
    n_epochs: int = 300,
    lr: float = 0.01,
    lr_hyp: float = 0.1,
    prior_structure: PriorStructure | str = PriorStructure.LAYERWISE,
    n_epochs_burnin: int = 10,
    n_hypersteps: int = 1,
    marglik_frequency: int = 5,
    prior_prec_init: float = 1.0,
    marglik_loader: DataLoader | None = None,
    stochastic: bool = False,
    n_mc_samples: int = 1,
    progress_bar: bool = True,
    callback: Callable[[int, dict[str, Any]], None] | None = None,
    checkpoint: str | os.PathLike | None = None,
    final_laplace: bool = True,
    lengthscale_derivative: str = "total",
    restore_best: bool = True,
) -> tuple[BaseLaplace | None, nn.Module, list[float], list[float]]:
    """Train weights by MAP and prior precisions by the Laplace marginal likelihood.

    Every epoch minimises ``mean cross-entropy + 0.5 * sum(delta * theta^2) / N`` over
    ``train_loader`` with ``optimizer_cls`` (cosine-annealed to 0 over all steps). From
    epoch ``n_epochs_burnin`` on, every ``marglik_frequency`` epochs, a Laplace
    approximation is fitted on ``marglik_loader`` and the log prior precisions take
    ``n_hypersteps`` Adam steps (lr ``lr_hyp``) on the negative log marginal likelihood
    (Eq. 9). S-layer lengthscales built with ``lengthscale_mode="hyperparameter"`` take the
    same steps (Adam, lr ``lr_hyp``, on omega itself) on the gradient of
    :func:`laplace_equivariance.lengthscales.log_marginal_likelihood` chosen by
    ``lengthscale_derivative`` (for ``"total"`` the approximation is refitted before every
    step after the first); they are buffers of the model, so checkpoints and the best state
    include them. As laplace-torch's version, the
    model and precisions with the best marginal likelihood are restored at the end (unless
    ``restore_best=False``) and a final Laplace approximation is fitted.

    Args:
        model: The network (classification only for now).
        train_loader: Batches for the weights (may augment).
        likelihood: ``"classification"``.
        hessian_structure: laplace-torch's Hessian structure, ``"kron"`` by default.
        backend: Curvature backend, :class:`~laplace_equivariance.EquivariantKFAC`.
        optimizer_cls: Optimiser of the weights.
        optimizer_kwargs: Its options besides ``lr`` (no weight decay: the prior is it).
        n_epochs: Epochs of training.
        lr: Initial learning rate of the weights (App. F.6: 0.01).
        lr_hyp: Learning rate of the log prior precisions and lengthscale hyperparameters
            (App. F.6: 0.1).
        prior_structure: ``"scalar"``, ``"layerwise"`` (per tensor) or ``"path"`` (per
            layer and path), see :mod:`laplace_equivariance.priors`.
        n_epochs_burnin: Epochs before the first marginal-likelihood step (App. F.6: 10).
        n_hypersteps: Hyperparameter steps per marginal-likelihood epoch.
        marglik_frequency: Epochs between marginal-likelihood steps (App. F.6: 5).
        prior_prec_init: Initial prior precision (App. F.6: 1, unit variances).
        marglik_loader: Batches for the Laplace fit; defaults to ``train_loader``. Pass an
            unaugmented loader (App. F.6), or one over a subset of ``n`` examples to save
            time: its curvature and log likelihood are scaled by ``N / n`` (laplace-torch's
            ``temperature = n / N``) so that the estimate is for the whole training set.
            The Kronecker factors are sums over the examples, so the fit does not depend on
            this loader's batch size (tested), only its time and memory do: on a 2-core CPU
            batches of 256 made the exact fit of the benchmark network about 10% faster
            than batches of 128 (README, speed of marginal-likelihood training).
        stochastic: Estimate the GGN with a Monte-Carlo Fisher (one backward pass per batch
            and sample).
        n_mc_samples: Targets sampled per example for the Monte-Carlo Fisher, which averages
            them (:class:`~laplace_equivariance.EquivariantKFAC`'s option); needs
            ``stochastic=True`` when above one.
        progress_bar: Show a tqdm bar with loss, accuracy and marginal likelihood.
        callback: Called after every epoch (after its checkpoint is written) as
            ``callback(epoch, info)`` with the epoch's loss, accuracy, negative log marginal
            likelihood (or None), prior precisions, lengthscale hyperparameters (by basis
            name, empty without them), ``seconds``, the wall time of all epochs so far,
            including those before a resume (it is kept in the checkpoint), and
            ``best_epoch``, the epoch whose model would be restored at the end (None before
            the first marginal-likelihood step or with ``restore_best=False``).
        checkpoint: File to save the full training state to after every epoch, and to resume
            from if it exists. Resuming gives the same result as an uninterrupted run (on CPU
            with the same seeds, bit for bit).
        final_laplace: Fit the returned Laplace approximation (set False for plain MAP runs,
            which then return ``la=None``).
        lengthscale_derivative: ``"total"`` (exact GGN only) or ``"partial"``, see
            :mod:`laplace_equivariance.lengthscales`; unused without lengthscale
            hyperparameters.
        restore_best: Return the model and precisions of the epoch with the best marginal
            likelihood (laplace-torch's behaviour), not those of the last epoch. With few
            marginal-likelihood steps an early, barely trained model can have the best
            estimate (README, Table 1 at the CPU budget).

    Returns:
        ``(la, model, margliks, losses)`` as :func:`laplace.marglik_training`: the final
        Laplace approximation, the model, the negative log marginal likelihoods of every
        hyperparameter step and the mean training loss of every epoch.

    Raises:
        ValueError: For a checkpoint that does not fit ``model``, an unsupported
            likelihood or structure, or lengthscale
            hyperparameters with a Hessian structure other than ``"kron"``, a backend other
            than :class:`~laplace_equivariance.EquivariantKFAC`, the total derivative with
            ``stochastic=True``, or ``n_mc_samples`` not a positive integer, or other than one
            without ``stochastic=True`` or with another backend (raised before training).
        FloatingPointError: If the training loss, the curvature, the marginal likelihood or
            the gradient of a hyperparameter (log prior precision or lengthscale) becomes
            non-finite; the message names the epoch (and the parameter, the layer's prior
            group or the basis), and the last checkpoint is the last good epoch.
    """
    if likelihood != "classification":
        raise ValueError("laplace_equivariance.marglik_training supports classification only.")
    lengthscales = lengthscale_hyperparameters(model)
    if lengthscales and (hessian_structure != "kron" or not issubclass(backend, EquivariantKFAC)):
        raise ValueError(
            f"Lengthscale hyperparameters ({list(lengthscales)}) are learned through the KFAC "
            "curvature only: use hessian_structure='kron' and backend=EquivariantKFAC."
        )
    if lengthscale_derivative not in DERIVATIVES:
        raise ValueError(
            f"lengthscale_derivative must be one of {DERIVATIVES}, got {lengthscale_derivative!r}."
        )
    refit_every_step = bool(lengthscales) and lengthscale_derivative == "total"
    if refit_every_step and stochastic:
        raise ValueError(
            "The total lengthscale derivative needs the exact GGN: pass stochastic=False or "
            "lengthscale_derivative='partial'."
        )
    optimizer_kwargs = dict(optimizer_kwargs or {})
    if optimizer_kwargs.pop("weight_decay", 0.0):
        raise ValueError("Do not pass weight_decay: the learned prior precisions are the decay.")
    marglik_loader = marglik_loader or train_loader
    p = next(model.parameters())
    device, dtype = p.device, p.dtype
    n_data = len(train_loader.dataset)
    groups = PriorGroups(model, prior_structure)
    log_prior_prec = torch.full(
        (len(groups),), math.log(prior_prec_init), device=device, dtype=dtype, requires_grad=True
    )
    optimizer = optimizer_cls(model.parameters(), lr=lr, **optimizer_kwargs)
    scheduler = CosineAnnealingLR(optimizer, T_max=max(1, n_epochs * len(train_loader)))
    hyper_optimizer = Adam([log_prior_prec, *lengthscales.values()], lr=lr_hyp)
    tracked = list(lengthscales.values())  # gradients only in hyperparameter steps
    for omega in tracked:
        omega.requires_grad_(False)
    criterion = nn.CrossEntropyLoss()
    if n_mc_samples != 1 and not (stochastic and issubclass(backend, EquivariantKFAC)):
        raise ValueError(
            f"n_mc_samples={n_mc_samples} sets the samples of EquivariantKFAC's Monte-Carlo "
            "Fisher: pass stochastic=True and backend=EquivariantKFAC."
        )
    check_sample_count(n_mc_samples, stochastic)  # before training, not at the first fit
    backend_kwargs = None
    if stochastic:
        backend_kwargs = {"stochastic": True}
        if n_mc_samples != 1:
            backend_kwargs["n_mc_samples"] = n_mc_samples
    state: dict[str, Any] = {"epoch": 0, "margliks": [], "losses": [], "best": None, "seconds": 0.0}
    path = Path(checkpoint) if checkpoint is not None else None
    if path is not None and path.exists():
        saved = torch.load(path, map_location=device, weights_only=False)
        try:
            model.load_state_dict(saved["model"])
        except RuntimeError as error:
            raise ValueError(
                f"Checkpoint {path} does not fit this model: it was written for another "
                "model or by an older version (CONV paths' parameters were renamed from "
                "'conv.conv2d.*' to 'conv.*'). Delete it or pass another checkpoint path to "
                f"start afresh. {error}"
            ) from error
        optimizer.load_state_dict(saved["optimizer"])
        scheduler.load_state_dict(saved["scheduler"])
        hyper_optimizer.load_state_dict(saved["hyper_optimizer"])
        with torch.no_grad():
            log_prior_prec.copy_(saved["log_prior_prec"])
        torch.set_rng_state(saved["rng"])
        state = saved["state"]
        if "seconds" not in state:
            warnings.warn(
                f"Checkpoint {path} has no record of its epochs' wall time (written by an "
                "older version): the reported time counts only the epochs run from now on.",
                stacklevel=2,
            )
            state["seconds"] = 0.0

    def laplace(prior_precision: torch.Tensor, loader: DataLoader) -> BaseLaplace:
        la = Laplace(
            model,
            likelihood,
            subset_of_weights="all",
            hessian_structure=hessian_structure,
            prior_precision=prior_precision,
            temperature=len(loader.dataset) / n_data,
            backend=backend,
            backend_kwargs=backend_kwargs,
        )
        la.fit(loader)
        return la

    epochs = tqdm.trange(
        state["epoch"] + 1, n_epochs + 1, disable=not progress_bar, desc="marglik training"
    )
    for epoch in epochs:
        epoch_start = time.perf_counter()
        model.train()
        total_loss, correct = 0.0, 0
        delta = groups.expand(log_prior_prec.detach().exp())
        sizes = torch.tensor([q.numel() for q in model.parameters() if q.requires_grad])
        delta = delta.repeat_interleave(sizes.to(delta.device))
        for x, y in train_loader:
            x, y = x.to(device), y.to(device)
            optimizer.zero_grad()
            f = model(x)
            theta = parameters_to_vector(q for q in model.parameters() if q.requires_grad)
            loss = criterion(f, y) + 0.5 * (delta * theta) @ theta / n_data
            if not torch.isfinite(loss):
                raise FloatingPointError(
                    f"Non-finite training loss in epoch {epoch}; the checkpoint (if any) holds "
                    f"epoch {state['epoch']}."
                )
            loss.backward()
            optimizer.step()
            scheduler.step()
            total_loss += loss.item() * len(y)
            correct += (f.argmax(-1) == y).sum().item()
        state["losses"].append(total_loss / n_data)
        marglik = None
        if epoch >= n_epochs_burnin and epoch % marglik_frequency == 0:
            try:
                la = laplace(groups.expand(log_prior_prec.exp()), marglik_loader)
            except FloatingPointError as error:
                raise FloatingPointError(f"Epoch {epoch}: {error}") from error
            for step in range(n_hypersteps):
                if step and refit_every_step:
                    la = laplace(groups.expand(log_prior_prec.detach().exp()), marglik_loader)
                hyper_optimizer.zero_grad()
                with _requiring_grad(tracked):
                    prior_precision = groups.expand(log_prior_prec.exp())
                    marglik = -log_marginal_likelihood(
                        la, marglik_loader, prior_precision, lengthscale_derivative
                    )
                    marglik.backward()
                _check_hyperparameter_step(
                    epoch,
                    step,
                    marglik,
                    dict(zip(groups.names, log_prior_prec.grad, strict=True)),
                    {name: omega.grad for name, omega in lengthscales.items()},
                )
                hyper_optimizer.step()
                state["margliks"].append(marglik.item())
            improved = state["best"] is None or state["margliks"][-1] < state["best"]["marglik"]
            if restore_best and improved:
                state["best"] = {
                    "epoch": epoch,
                    "marglik": state["margliks"][-1],
                    "model": {k: v.detach().clone() for k, v in model.state_dict().items()},
                    "log_prior_prec": log_prior_prec.detach().clone(),
                }
        state["epoch"] = epoch
        state["seconds"] += time.perf_counter() - epoch_start
        info = {
            "loss": state["losses"][-1],
            "accuracy": correct / n_data,
            "neg_log_marglik": None if marglik is None else state["margliks"][-1],
            "prior_precision": dict(
                zip(groups.names, log_prior_prec.detach().exp().tolist(), strict=True)
            ),
            "lengthscale": {name: omega.item() for name, omega in lengthscales.items()},
            "seconds": state["seconds"],
            "best_epoch": state["best"].get("epoch") if restore_best and state["best"] else None,
        }
        epochs.set_postfix(
            loss=f"{info['loss']:.3f}",
            acc=f"{info['accuracy']:.3f}",
            marglik="-" if marglik is None else f"{info['neg_log_marglik']:.1f}",
        )
        if path is not None:
            _save_atomically(
                {
                    "model": model.state_dict(),
                    "optimizer": optimizer.state_dict(),
                    "scheduler": scheduler.state_dict(),
                    "hyper_optimizer": hyper_optimizer.state_dict(),
                    "log_prior_prec": log_prior_prec.detach().clone(),
                    "rng": torch.get_rng_state(),
                    "state": state,
                },
                path,
            )
        if callback is not None:
            callback(epoch, info)
    best = state["best"] if restore_best else None  # a resumed run may carry one
    if best is not None:
        model.load_state_dict(best["model"])
        with torch.no_grad():
            log_prior_prec.copy_(best["log_prior_prec"])
    la = (
        laplace(groups.expand(log_prior_prec.detach().exp()), marglik_loader)
        if final_laplace
        else None
    )
    return la, model, state["margliks"], state["losses"]
