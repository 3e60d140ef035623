"""When :func:`~laplace_equivariance.marglik_training` fits, and the paper's schedule.

:func:`marglik_step_epochs` is laplace-torch's rule for the epochs that end with a
marginal-likelihood fit; :func:`paper_schedule` is App. F.6's training schedule as keyword
arguments of ``marglik_training``.
"""

from __future__ import annotations

from typing import Any

from torch.optim import SGD, Adam
from torch.optim.lr_scheduler import CosineAnnealingLR

__all__ = ["OPTIMIZERS", "marglik_step_epochs", "paper_schedule"]


OPTIMIZERS = ("adam", "sgd")
"""Optimisers of :func:`paper_schedule`: the paper's text (Adam) and its code (SGD)."""


def marglik_step_epochs(n_epochs: int, n_epochs_burnin: int, marglik_frequency: int) -> list[int]:
    """The epochs of :func:`marglik_training` that end with a marginal-likelihood fit.

    Epoch ``e`` (counted from 1) takes hyperparameter steps when ``e >= n_epochs_burnin``
    and ``e % marglik_frequency == 0`` (laplace-torch's rule).

    Args:
        n_epochs: Epochs of training.
        n_epochs_burnin: Epochs before the first fit.
        marglik_frequency: Epochs between fits (at least 1).

    Returns:
        The epochs, ascending; empty when the run learns no hyperparameter.
    """
    first = max(n_epochs_burnin, 1)
    first += (-first) % marglik_frequency
    return list(range(first, n_epochs + 1, marglik_frequency))


def paper_schedule(
    n_epochs: int,
    steps_per_epoch: int,
    lr: float = 0.01,
    optimizer: str = "adam",
    marglik: bool = True,
    n_epochs_burnin: int = 10,
    marglik_frequency: int = 5,
    lr_min: float = 0.0,
) -> dict[str, Any]:
    """The paper's training schedule (App. F.6) as keyword arguments of :func:`marglik_training`.

    Adam with learning rate ``lr`` for the weights (``optimizer="sgd"``: SGD with momentum
    0.9, which the reference code's ``classification_image.py`` uses for every model although
    App. F.6 names Adam), cosine-annealed to 0 over all
    ``n_epochs * steps_per_epoch`` batches (``lr_min`` for another end; the scheduler steps
    after every batch); Adam with
    learning rate 0.1 for the hyperparameters; 10 burn-in epochs; every 5 epochs a Laplace
    fit and 20 hyperparameter steps on it (``n_hypersteps_prior: 20`` of the reference code's
    ``configs/cifar10.yaml``, which its Table 1 scripts use); unit prior variances at the
    start. The command line trains with it.

    The precisions must grow by orders of magnitude for a path to switch off (App. D: FC
    precisions of 1e6-1e7): at learning rate 0.1 in the log precision, one step every 5
    epochs moves a precision by at most a factor ``e`` in 50 epochs, 20 steps by ``e^2`` at
    every fit (docs/learned_structure.md measures both).

    Args:
        n_epochs: Epochs of training.
        steps_per_epoch: Batches per epoch, ``len(train_loader)``.
        lr: Initial learning rate of the weights.
        optimizer: ``"adam"`` or ``"sgd"`` (momentum 0.9).
        marglik: Learn the prior precisions (the paper's method); False: the MAP baseline
            at unit prior variances, the same schedule without a marginal-likelihood step
            (``n_epochs_burnin = n_epochs + 1``).
        n_epochs_burnin: Burn-in epochs of a learning run (the paper's 10).
        marglik_frequency: Epochs between marginal-likelihood fits (the paper's 5).
        lr_min: Learning rate at the end of the cosine schedule (the paper's 0; the reference
            code's ``lr_min``).

    Returns:
        ``optimizer_cls``, ``optimizer_kwargs``, ``scheduler_cls``, ``scheduler_kwargs``,
        ``n_epochs``, ``lr_hyp``, ``n_epochs_burnin``, ``n_hypersteps``,
        ``marglik_frequency`` and ``prior_prec_init``; override any by updating the dict.

    Raises:
        ValueError: For an optimiser other than ``"adam"`` and ``"sgd"``, an ``lr_min`` below
            0 or above ``lr`` (the schedule would step against the gradient or up), or with
            ``marglik=True`` for a run too short for any marginal-likelihood step
            (:func:`marglik_step_epochs`; with the paper's burn-in, fewer than 10 epochs):
            nothing would be learned.
    """
    if optimizer not in OPTIMIZERS:
        raise ValueError(f"optimizer must be one of {OPTIMIZERS}, got {optimizer!r}.")
    if not 0 <= lr_min <= lr:  # also NaN
        raise ValueError(
            f"lr_min must be at least 0 and at most lr ({lr}), got {lr_min}: the cosine "
            "schedule anneals the learning rate from lr down to lr_min."
        )
    burnin, frequency = n_epochs_burnin, marglik_frequency
    if marglik and not marglik_step_epochs(n_epochs, burnin, frequency):
        raise ValueError(
            f"paper_schedule(n_epochs={n_epochs}) takes no marginal-likelihood step (burn-in "
            f"{burnin} epochs, a fit every {frequency}): train longer, give a shorter "
            "n_epochs_burnin, or pass marglik=False for MAP."
        )
    return {
        "optimizer_cls": Adam if optimizer == "adam" else SGD,
        "optimizer_kwargs": {"lr": lr} if optimizer == "adam" else {"lr": lr, "momentum": 0.9},
        "scheduler_cls": CosineAnnealingLR,
        "scheduler_kwargs": {"T_max": max(1, n_epochs * steps_per_epoch), "eta_min": lr_min},
        "n_epochs": n_epochs,
        "lr_hyp": 0.1,
        "n_epochs_burnin": burnin if marglik else n_epochs + 1,
        "n_hypersteps": 20,
        "marglik_frequency": frequency,
        "prior_prec_init": 1.0,
    }
