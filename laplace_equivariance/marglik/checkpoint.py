"""The checkpoint of a :func:`~laplace_equivariance.marglik.training.marglik_training` run.

One file holds the whole training state after an epoch: the weights, both optimisers and the
scheduler, the hyperparameters, the random state, the progress (epoch, losses, the best
epoch), the parameters held until the first fit and the options that change what training
computes (:data:`RESULT_OPTIONS`). A resume continues the saved run and refuses, naming the
difference, one whose settings, model, prior structure, likelihood, schedule or number of
training examples (``N`` weighs the prior in the loss) differ. The
file is written atomically (a crash never leaves half a file), from rank 0 of a process group.

The functions take the run's trainer (``trainer.Trainer``): its ``path``, ``model``,
``optimizer``, ``scheduler``, ``hyper_optimizer``, ``log_prior_prec``, ``log_sigma_noise``,
``progress``, ``held_names``, ``options`` and ``device``.
"""

from __future__ import annotations

import enum
import os
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from laplace_equivariance import distributed

__all__ = ["RESULT_OPTIONS", "CheckpointError", "Progress", "described", "resume", "save"]


@dataclass
class Progress:
    """What a checkpoint keeps besides the optimisers.

    Epochs done, traces, best epoch, and time: in all and of each epoch (its
    marginal-likelihood fit included).
    """

    epoch: int = 0
    margliks: list[float] = field(default_factory=list)
    losses: list[float] = field(default_factory=list)
    best: dict[str, Any] | None = None
    seconds: float = 0.0
    epoch_seconds: list[float] = field(default_factory=list)


class CheckpointError(ValueError):
    """A checkpoint file that cannot be read, or that was written for another run."""


RESULT_OPTIONS = (
    "likelihood",
    "hessian_structure",
    "backend",
    "optimizer_cls",
    "optimizer_kwargs",
    "scheduler_cls",
    "scheduler_kwargs",
    "lr_hyp",
    "prior_structure",
    "n_epochs_burnin",
    "n_hypersteps",
    "marglik_frequency",
    "prior_prec_init",
    "sigma_noise_init",
    "temperature",
    "fix_sigma_noise",
    "enable_backprop",
    "dict_key_x",
    "dict_key_y",
    "stochastic",
    "n_mc_samples",
    "kfac_approx",
    "lengthscale_derivative",
    "balance_factors",
)
"""The options of :func:`marglik_training` that change what training computes: a checkpoint
records them and a resume with any of them changed is refused. Not among them: the loaders
(not recordable), ``n_epochs`` (a run may be extended: without a scheduler the epochs
after the checkpoint's are those of a longer run, and a scheduler's length is in its
``scheduler_kwargs``; a run shorter than the checkpoint's epoch is refused),
``progress_bar``, ``callback``, ``checkpoint``, ``final_laplace`` and
``restore_best`` (which approximation and epoch are returned, not how training goes),
``backend_kwargs`` and ``compile_kwargs`` (how a fit and a step are computed, not their
results) and ``held_until_fit`` (recorded by name on its own)."""


def described(value: Any) -> str:
    """A setting as the checkpoint records it.

    Classes and functions by qualified name (a function's ``repr`` holds its address, which
    differs in every process, so a resume with the same ``lr_lambda`` would read as changed),
    enums by value, dicts and lists item by item, everything else by ``repr``.
    """
    if isinstance(value, type) or callable(value):
        name = getattr(value, "__qualname__", type(value).__qualname__)
        return f"{getattr(value, '__module__', type(value).__module__)}.{name}"
    if isinstance(value, enum.Enum):
        return repr(value.value)
    if isinstance(value, dict):
        return repr(sorted((str(k), described(v)) for k, v in value.items()))
    if isinstance(value, (list, tuple)):
        return repr([described(v) for v in value])
    return repr(value)


def named_few(names: list[str], shown: int = 3) -> str:
    """``names`` for a message: the first ``shown`` of them and how many more, or "nothing"."""
    if not names:
        return "nothing"
    more = f" and {len(names) - shown} more" if len(names) > shown else ""
    return f"{len(names)} parameter(s) ({', '.join(names[:shown])}{more})"


def save_atomically(state: dict[str, Any], path: Path) -> None:
    """Write ``state`` next to ``path`` and rename, so a crash never leaves half a file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_suffix(path.suffix + ".partial")
    torch.save(state, partial)
    os.replace(partial, path)


def save(trainer: Any) -> None:
    """Write the whole training state to the checkpoint file (if any), from rank 0."""
    if trainer.path is None:
        return
    if distributed.rank() != 0:
        distributed.barrier()
        return
    state = {
        "model": trainer.model.state_dict(),
        "optimizer": trainer.optimizer.state_dict(),
        "scheduler": None if trainer.scheduler is None else trainer.scheduler.state_dict(),
        "hyper_optimizer": trainer.hyper_optimizer.state_dict(),
        "log_prior_prec": trainer.log_prior_prec.detach().clone(),
        "log_sigma_noise": None
        if trainer.log_sigma_noise is None
        else trainer.log_sigma_noise.detach().clone(),
        "rng": torch.get_rng_state(),
        "state": vars(trainer.progress),
        "world_size": distributed.world_size(),
        "held_until_fit": trainer.held_names,
        "settings": settings_record(trainer.options),
        "n_data": trainer.n_data,
    }
    save_atomically(state, trainer.path)
    distributed.barrier()


def settings_record(options: Any) -> dict[str, str]:
    """Every option of :data:`RESULT_OPTIONS` in a run's ``options``, as recorded."""
    return {name: described(getattr(options, name)) for name in RESULT_OPTIONS}


def check_settings(trainer: Any, saved: dict[str, Any]) -> None:
    """Refuse a resume whose result-changing options differ from the checkpoint's.

    Raises:
        CheckpointError: Naming every option that differs, with both values, if the
            checkpoint holds an epoch past this run's ``n_epochs``, or if it was written for
            another number of training examples.
    """
    epoch = saved["state"]["epoch"]
    if epoch > trainer.options.n_epochs:
        raise CheckpointError(
            f"Checkpoint {trainer.path} holds epoch {epoch}, past this run's "
            f"n_epochs={trainer.options.n_epochs}: pass n_epochs of at least {epoch} to "
            "resume it, or delete the checkpoint to start afresh."
        )
    recorded = saved.get("settings")
    if recorded is None:
        warnings.warn(
            f"Checkpoint {trainer.path} was written by an older version, which did not record "
            "its settings: this run's settings are taken as the checkpoint's, unchecked.",
            stacklevel=5,
        )
        return
    now = settings_record(trainer.options)
    changed = [
        f"{name}: {recorded.get(name, 'absent')} -> {now[name]}"
        for name in RESULT_OPTIONS
        if recorded.get(name) != now[name]
    ]
    if changed:
        raise CheckpointError(
            f"Checkpoint {trainer.path} was written with other settings ({'; '.join(changed)}): "
            "resuming would continue the saved run as if they applied. Pass the saved "
            "settings to resume, or delete the checkpoint (or pass another path) to start "
            "afresh with these."
        )
    saved_n = saved.get("n_data")
    if saved_n is None:
        warnings.warn(
            f"Checkpoint {trainer.path} was written by an older version, which did not record "
            f"the size of its training set: this run's ({trainer.n_data} examples) is taken as "
            "the checkpoint's, unchecked.",
            stacklevel=5,
        )
    elif saved_n != trainer.n_data:
        raise CheckpointError(
            f"Checkpoint {trainer.path} was written by a run on {saved_n} training examples, "
            f"and this run's train_loader yields {trainer.n_data}: the size weighs the prior "
            "in the training loss, so resuming would continue the saved run with another "
            "objective. Pass the same training data, or delete the checkpoint (or pass another "
            "path) to start afresh."
        )


def resume(trainer: Any) -> Progress | None:
    """Load the checkpoint file into ``trainer``, if it exists.

    Returns:
        The saved progress (epoch, losses, best epoch, wall time), or None without a
        checkpoint file.

    Raises:
        CheckpointError: If it cannot be read (corrupt, empty, truncated), was written
            with other settings (:data:`RESULT_OPTIONS`), or for another model, prior
            structure, likelihood or scheduler.
    """
    if trainer.path is None or not trainer.path.exists():
        return None
    try:
        saved = torch.load(trainer.path, map_location=trainer.device, weights_only=False)
    except Exception as error:  # unpickling errors have no common base class
        raise CheckpointError(
            f"Checkpoint {trainer.path} cannot be read ({type(error).__name__}: {error}): it "
            "is corrupt, empty or truncated. Delete it to start afresh."
        ) from error
    if not isinstance(saved, dict) or not {"model", "optimizer", "state"} <= set(saved):
        raise CheckpointError(
            f"Checkpoint {trainer.path} is not a marglik_training checkpoint. Delete it or "
            "pass another checkpoint path to start afresh."
        )
    check_settings(trainer, saved)
    try:
        if saved["log_prior_prec"].shape != trainer.log_prior_prec.shape:
            raise RuntimeError(
                f"it holds {saved['log_prior_prec'].numel()} prior precision(s), this run "
                f"{trainer.log_prior_prec.numel()} (another prior_structure)"
            )
        trainer.model.load_state_dict(saved["model"])
        if (saved["scheduler"] is None) != (trainer.scheduler is None):
            raise RuntimeError("the run has a scheduler and the checkpoint not, or reverse")
        if (saved.get("log_sigma_noise") is None) != (trainer.log_sigma_noise is None):
            raise RuntimeError("the checkpoint is of another likelihood")
        with torch.no_grad():
            trainer.log_prior_prec.copy_(saved["log_prior_prec"])
            if trainer.log_sigma_noise is not None:
                trainer.log_sigma_noise.copy_(saved["log_sigma_noise"])
    except RuntimeError as error:
        raise CheckpointError(
            f"Checkpoint {trainer.path} does not fit this run: it was written for another "
            "model, prior structure, likelihood or scheduler, or by an older version. "
            f"Delete it or pass another checkpoint path to start afresh. {error}"
        ) from error
    saved_held = saved.get("held_until_fit")
    if saved_held is None and trainer.held_names:
        warnings.warn(
            f"Checkpoint {trainer.path} was written by an older version, which did not record "
            "the parameters held until the first fit: this run's held_until_fit is taken "
            "as the checkpoint's, unchecked.",
            stacklevel=4,
        )
    elif saved_held is not None and saved_held != trainer.held_names:
        raise CheckpointError(
            f"Checkpoint {trainer.path} was written by a run that held "
            f"{named_few(saved_held)} until the first fit, and this run holds "
            f"{named_few(trainer.held_names)}: resuming would mix two schedules. Pass the "
            "same held_until_fit, or delete the checkpoint to start afresh."
        )
    trainer.optimizer.load_state_dict(saved["optimizer"])
    if trainer.scheduler is not None:
        trainer.scheduler.load_state_dict(saved["scheduler"])
    trainer.hyper_optimizer.load_state_dict(saved["hyper_optimizer"])
    torch.set_rng_state(saved["rng"])
    written_by = saved.get("world_size", 1)
    if written_by != distributed.world_size():
        warnings.warn(
            f"Checkpoint {trainer.path} was written by {written_by} process(es) and resumes in "
            f"{distributed.world_size()}: weights, optimisers and hyperparameters carry "
            "over, but the data order (and so the digits) differs from an uninterrupted run.",
            stacklevel=4,
        )
    state = dict(saved["state"])
    if "seconds" not in state:
        warnings.warn(
            f"Checkpoint {trainer.path} has no record of its epochs' wall time (written by "
            "an older version): the reported time counts only the epochs run from now on.",
            stacklevel=4,
        )
        state["seconds"] = 0.0
    return Progress(**state)
