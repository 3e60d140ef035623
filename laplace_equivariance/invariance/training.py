r"""Training the invariant-weights network: ELBO, Laplace marginal likelihood, or likelihood.

Three objectives learn the invariance parameters ``eta`` (invariant-weights Sec. 3.6-4.3):

- ``"elbo"``, the paper's method: every step maximises the SGVB estimate of the ELBO
  (:func:`~laplace_equivariance.invariance.elbo.elbo`) in the variational output layer, the
  first-layer weights (ReLU flavour) and ``eta`` together.
- ``"laplace"``, this package's alternative: the weights are trained by MAP under a Gaussian
  prior of precision :math:`\delta` on the output layer; after ``n_epochs_burnin`` epochs,
  every ``marglik_frequency`` epochs, ``n_hypersteps`` Adam steps on the Laplace log marginal
  likelihood (:func:`~laplace_equivariance.invariance.laplace.log_marginal_likelihood`)
  update ``eta`` and :math:`\log\delta` (the layer-wise paper's schedule, App. F.6).
- ``"likelihood"``: plain maximum likelihood with ``eta`` trained like a weight, the
  paper's Sec. 4.3 control, which does not learn invariance.

Weights use Adam with a cosine-annealed learning rate (the paper: 0.001 to 0, batch 128).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch
import tqdm
from torch.nn import functional as F
from torch.optim import Adam
from torch.optim.lr_scheduler import CosineAnnealingLR
from torch.utils.data import DataLoader

from laplace_equivariance.data.loader_size import dataset_length
from laplace_equivariance.invariance.elbo import elbo
from laplace_equivariance.invariance.laplace import log_marginal_likelihood, point_output
from laplace_equivariance.invariance.network import InvariantWeightsNet

__all__ = ["OBJECTIVES", "InvarianceHistory", "train_invariant_weights"]

OBJECTIVES: tuple[str, ...] = ("elbo", "laplace", "likelihood")


@dataclass
class InvarianceHistory:
    r"""What :func:`train_invariant_weights` records, one entry per epoch.

    Attributes:
        eta: ``eta`` at the end of each epoch.
        loss: Mean training loss (negative ELBO / N, MAP loss, or cross-entropy).
        objective: The objective per example at the end of the epoch: mean ELBO estimate,
            last Laplace log marginal likelihood (None before the first hyperparameter step),
            or mean log likelihood.
        prior_precision: :math:`\delta` (Laplace objective; None otherwise).
    """

    eta: list[list[float]] = field(default_factory=list)
    loss: list[float] = field(default_factory=list)
    objective: list[float | None] = field(default_factory=list)
    prior_precision: list[float | None] = field(default_factory=list)


def train_invariant_weights(
    model: InvariantWeightsNet,
    train_loader: DataLoader,
    objective: str = "elbo",
    n_epochs: int = 20,
    lr: float = 1e-3,
    lr_hyp: float = 0.01,
    lr_covariance_factor: float = 0.1,
    prior_precision_init: float = 1.0,
    marglik_loader: DataLoader | None = None,
    marglik_frequency: int = 1,
    n_hypersteps: int = 10,
    n_epochs_burnin: int = 0,
    progress_bar: bool = False,
    callback: Callable[[int, dict[str, Any]], None] | None = None,
) -> InvarianceHistory:
    r"""Train ``model`` and its invariance parameters ``eta`` with one of :data:`OBJECTIVES`.

    Args:
        model: The network; ``variational=True`` for ``"elbo"``, False otherwise.
        train_loader: Training batches ``(x, y)``.
        objective: ``"elbo"``, ``"laplace"`` or ``"likelihood"`` (module docstring).
        n_epochs: Epochs.
        lr: Adam learning rate of the weights (and of ``eta`` unless ``"laplace"``),
            cosine-annealed to 0.
        lr_covariance_factor: The variational Cholesky factors' learning rate is ``lr``
            times this. Adam gives each of their ``K (D + 1)^2 / 2`` entries a step of about
            the learning rate whatever its gradient, and with the paper's rate the
            off-diagonal entries random-walk to a covariance made of optimiser noise.
        lr_hyp: Adam learning rate of ``eta`` and ``log delta`` for ``"laplace"``.
        prior_precision_init: Initial :math:`\delta` for ``"laplace"``.
        marglik_loader: Batches for the marginal likelihood (default ``train_loader``);
            a subset is rescaled to the whole training set.
        marglik_frequency: Epochs between hyperparameter updates (``"laplace"``).
        n_hypersteps: Hyperparameter steps per update (``"laplace"``).
        n_epochs_burnin: Epochs before the first hyperparameter update (``"laplace"``).
        progress_bar: Show a tqdm bar.
        callback: Called after every epoch with the epoch (from 1) and a dict of its
            numbers.

    Returns:
        The history.

    Raises:
        ValueError: For an unknown objective.
        FloatingPointError: If a loss is not finite, naming the epoch.
    """
    if objective not in OBJECTIVES:
        raise ValueError(f"objective must be one of {OBJECTIVES}, got {objective!r}.")
    device = model.eta.device
    n_data = dataset_length(train_loader.dataset)
    learns_eta_with_weights = objective != "laplace"
    parameters = list(model.parameters()) if learns_eta_with_weights else model.weight_parameters()
    covariance = [p for p in parameters if p is getattr(model.output, "scale_tril", None)]
    others = [p for p in parameters if all(p is not q for q in covariance)]
    groups: list[dict[str, Any]] = [
        {"params": others},
        {"params": covariance, "lr": lr * lr_covariance_factor},
    ]
    optimizer = Adam(groups, lr=lr)
    scheduler = CosineAnnealingLR(optimizer, T_max=max(1, n_epochs * len(train_loader)))
    log_prior_prec = torch.tensor(
        math.log(prior_precision_init), device=device, dtype=model.eta.dtype, requires_grad=True
    )
    hyper_optimizer = Adam([model.eta, log_prior_prec], lr=lr_hyp)
    history = InvarianceHistory()
    marglik = None
    for epoch in tqdm.trange(1, n_epochs + 1, disable=not progress_bar, desc=objective):
        model.train()
        total = 0.0
        for x, y in train_loader:
            x, y = x.to(device), y.to(device)
            optimizer.zero_grad()
            if objective == "elbo":
                loss = -elbo(model, x, y, n_data) / n_data
            elif objective == "likelihood":
                loss = F.cross_entropy(model(x), y)
            else:
                output = point_output(model)
                theta = torch.cat([output.weight.flatten(), output.bias])
                decay = 0.5 * log_prior_prec.detach().exp() * theta.pow(2).sum() / n_data
                loss = F.cross_entropy(model(x), y) + decay
            if not torch.isfinite(loss):
                raise FloatingPointError(f"Non-finite training loss in epoch {epoch}.")
            loss.backward()
            optimizer.step()
            scheduler.step()
            total += loss.item() * len(y)
        history.loss.append(total / n_data)
        if objective == "laplace" and epoch > n_epochs_burnin and epoch % marglik_frequency == 0:
            for _ in range(n_hypersteps):
                hyper_optimizer.zero_grad()
                marglik = log_marginal_likelihood(
                    model, marglik_loader or train_loader, log_prior_prec.exp(), n_data
                )
                (-marglik / n_data).backward()
                hyper_optimizer.step()
            optimizer.zero_grad()
        value = {
            "elbo": -history.loss[-1],
            "likelihood": -history.loss[-1],
            "laplace": None if marglik is None else marglik.item() / n_data,
        }[objective]
        history.objective.append(value)
        history.eta.append(model.eta.detach().cpu().tolist())
        history.prior_precision.append(
            log_prior_prec.exp().item() if objective == "laplace" else None
        )
        if callback is not None:
            callback(
                epoch,
                {
                    "loss": history.loss[-1],
                    "objective": value,
                    "eta": history.eta[-1],
                    "prior_precision": history.prior_precision[-1],
                },
            )
    return history
