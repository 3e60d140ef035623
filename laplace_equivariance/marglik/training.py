"""Marginal-likelihood training: laplace-torch's ``marglik_training``, plus the paper's extras.

:func:`marglik_training` takes every parameter of :func:`laplace.marglik_training`
(laplace-torch 0.3) in the same order, with the same names and defaults (the default
``backend`` is :class:`~laplace_equivariance.EquivariantKFAC`, which equals ``AsdlGGN`` on
stock layers), and returns the same ``(la, model, margliks, losses)``: a script changes
only its import, and with the same seed the results are laplace-torch's
(``tests/marglik/test_dropin.py`` runs both side by side). Keyword-only extras follow:
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

import os
import time
import warnings
from collections.abc import Callable, Iterable
from typing import Any

import tqdm
from laplace.baselaplace import BaseLaplace
from laplace.curvature.curvature import CurvatureInterface
from torch import nn
from torch.optim import Adam, Optimizer
from torch.optim.lr_scheduler import LRScheduler
from torch.utils.data import DataLoader

from laplace_equivariance import distributed
from laplace_equivariance.curvature import EquivariantKFAC
from laplace_equivariance.marglik.checkpoint import CheckpointError
from laplace_equivariance.marglik.options import MarglikOptions
from laplace_equivariance.marglik.priors import PriorStructure
from laplace_equivariance.marglik.schedule import marglik_step_epochs, paper_schedule
from laplace_equivariance.marglik.trainer import Trainer

__all__ = ["CheckpointError", "marglik_step_epochs", "marglik_training", "paper_schedule"]


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
    checkpoint_every: int = 1,
    final_laplace: bool = True,
    lengthscale_derivative: str = "total",
    restore_best: bool = True,
    balance_factors: bool = False,
    held_until_fit: Iterable[nn.Parameter] = (),
    held_until_epoch: int | None = None,
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
            :mod:`laplace_equivariance.marglik.priors`.
        n_epochs_burnin: Epochs before the first marginal-likelihood step.
        n_hypersteps: Hyperparameter steps per marginal-likelihood epoch.
        marglik_frequency: Epochs between marginal-likelihood steps.
        prior_prec_init: Initial prior precision (multiplied by ``temperature``, as
            laplace-torch does).
        sigma_noise_init: Initial observation noise (regression).
        temperature: laplace-torch's likelihood temperature.
        fix_sigma_noise: Keep the observation noise at ``sigma_noise_init`` (regression).
        progress_bar: Show a tqdm bar with loss, accuracy and the last fit's negative log
            marginal likelihood (none before the first fit).
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
        callback: Called after every epoch (after the checkpoint, if that epoch writes one) as
            ``callback(epoch, info)`` with the epoch's ``loss``, ``accuracy`` (for regression
            the mean squared error), ``neg_log_marglik`` (None in epochs without a step),
            ``prior_precision`` (group name -> value; per tensor, mean, for ``"diag"``),
            ``sigma_noise``, ``lengthscale`` (basis name -> omega), ``seconds`` (wall time of
            all epochs, including those before a resume) and ``best_epoch`` (the epoch that
            would be restored; None before the first step or with ``restore_best=False``).
        checkpoint: File to save the whole training state to after every epoch (or every
            ``checkpoint_every``), and to resume from if it exists (bit for bit on CPU with the
            same seeds).
        checkpoint_every: Write the checkpoint after every ``checkpoint_every``-th epoch, after
            every epoch with a marginal-likelihood fit and after the last epoch (default 1:
            after every epoch). A checkpoint holds the model and the optimiser's state (three
            times the parameters with Adam), so for a large network whose epochs are short
            writing it can take as long as the epoch; a resume then repeats the epochs since
            the last one written, with the same result. Not a setting of the run: a resume
            may use another value.
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
        held_until_epoch: Hold ``held_until_fit`` up to and including this epoch instead of
            the first fit's: a MAP run (no fit) held as a learning run of the same schedule
            holds them (``marglik_step_epochs(...)[0]``), so that the two differ in the
            objective alone. A positive integer; None (default): the first fit's epoch.
        backend_kwargs: The backend's options for every Laplace fit, as laplace-torch's
            ``Laplace(..., backend_kwargs=...)`` (``fit_batch_size``, ``host_eigenvalues``,
            ...); ``stochastic``, ``n_mc_samples``, ``kfac_approx`` and the dict keys (this
            function's own arguments) and ``last_layer`` and ``subnetwork_indices`` (it fits
            every weight) are refused there.
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
        NotLearningWarning: (a ``RuntimeWarning``) A classifier that learns, when its
            training accuracy in the epoch of the first fit (the first of
            :func:`marglik_step_epochs`, checked before the fit) is no better than always
            answering the most frequent class of that epoch's labels
            (:mod:`~laplace_equivariance.marglik.chance`). Training goes on.

    Raises:
        ValueError: Before training, for an unknown likelihood or prior structure, a
            ``prior_prec_init``, ``temperature`` or (regression) ``sigma_noise_init`` that is
            not a finite number above 0, ``prior_structure="diag"`` with
            ``hessian_structure="kron"``, an empty
            loader, lengthscale hyperparameters with another
            structure, backend or likelihood than ``"kron"``, ``EquivariantKFAC`` and
            classification, the total derivative with ``stochastic=True``, or
            ``n_mc_samples`` not a positive integer, or other than one without
            ``stochastic=True`` and ``EquivariantKFAC``, ``backend_kwargs`` naming an option the
            backend does not take or one of
            those own arguments or a subset of the weights, ``held_until_fit`` naming a
            tensor that is not a trainable parameter of the model, or given to a schedule
            without a fit, or ``checkpoint_every`` not a positive integer, or other than 1
            without ``checkpoint``.
        CheckpointError: (a ``ValueError``) Before training, for a checkpoint that cannot be
            read or does not fit the run.
        FloatingPointError: If the training loss, the curvature, the marginal likelihood or a
            hyperparameter's gradient becomes non-finite; the message names the epoch (and
            the parameter, prior group, noise or basis); the last checkpoint written holds a
            good epoch.
    """
    held_until_fit = tuple(held_until_fit)
    options = MarglikOptions(
        **{k: v for k, v in locals().items() if k not in ("model", "train_loader")}
    )
    trainer = Trainer(model, train_loader, options)
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
        trainer.warn_if_at_chance(epoch, accuracy)
        marglik_step = epoch >= n_epochs_burnin and epoch % marglik_frequency == 0
        if marglik_step:
            trainer.hyperparameter_steps(epoch)
        trainer.progress.epoch = epoch
        trainer.progress.epoch_seconds.append(time.perf_counter() - start)
        trainer.progress.seconds += trainer.progress.epoch_seconds[-1]
        info = trainer.info(accuracy, marglik_step)
        # between fits the last fit's value (a resumed run's too), none before the first fit
        last = {"marglik": f"{m[-1]:.1f}"} if (m := trainer.progress.margliks) else {}
        epochs.set_postfix(loss=f"{info['loss']:.3f}", acc=f"{info['accuracy']:.3f}", **last)
        trainer.save(marglik_step)
        if callback is not None:
            callback(epoch, info)
    la = trainer.finish()
    return la, model, trainer.progress.margliks, trainer.progress.losses
