"""A run end to end: loaders, training, evaluation, plots and the report table.

Training is MAP, marginal likelihood or the invariant-weights objectives, in one process
or under ``torchrun``; evaluation and the path measures rebuild a trained run.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime
import json
import os
import platform
import time
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, cast

import torch
import torch.distributed as dist
from torch.utils.data import DataLoader, DistributedSampler

from laplace_equivariance import __version__, distributed, models
from laplace_equivariance.app import summary
from laplace_equivariance.app.config import (
    INVARIANT_MARGLIK_SUBSET,
    INVARIANT_WEIGHTS,
    build_model,
    check_run,
    held_parameters,
    held_until_epoch,
)
from laplace_equivariance.app.device_speed import matmul_gflops
from laplace_equivariance.app.evaluation import (  # evaluate's: re-exported as they were here
    PATH_OUTPUT_EXAMPLES as PATH_OUTPUT_EXAMPLES,
)
from laplace_equivariance.app.evaluation import PREDICTIVES as PREDICTIVES
from laplace_equivariance.app.evaluation import _metrics
from laplace_equivariance.app.evaluation import evaluate as evaluate
from laplace_equivariance.app.evaluation import path_outputs as path_outputs
from laplace_equivariance.app.run_config import RunConfig, SettingError
from laplace_equivariance.app.run_lock import run_lock
from laplace_equivariance.app.run_plots import write_run_plots
from laplace_equivariance.app.runs import (
    FIT_TRACE_FILE,
    _checkpoint_epoch,
    append_fit,
    load_run,
    prepare_out,
    read_fits,
)
from laplace_equivariance.app.subnormals import flush_subnormals
from laplace_equivariance.data.datasets import ImageData, load_dataset
from laplace_equivariance.data.tensor_batches import BatchedTensorDataset, batch_loader
from laplace_equivariance.diagnostics import path_output_shares, symmetry_report
from laplace_equivariance.invariance import (
    INVARIANCES,
    InvariantWeightsNet,
    train_invariant_weights,
)
from laplace_equivariance.layers import AnchorBasis, RelaxedLayer
from laplace_equivariance.marglik.chance import (
    NotLearningWarning,
    at_chance,
    class_counts,
    not_learning_message,
)
from laplace_equivariance.marglik.training import (
    CheckpointError,
    marglik_training,
    paper_schedule,
)
from laplace_equivariance.models import RelaxedNet


def device_name(device: str) -> str:
    """The GPU's name for a CUDA device, else the CPU's model name (``/proc/cpuinfo``)."""
    if device.startswith("cuda"):
        return torch.cuda.get_device_name(device)
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.exists():
        for line in cpuinfo.read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or platform.machine() or "cpu"


def _join_process_group(config: RunConfig) -> tuple[RunConfig, int]:
    """Under ``torchrun`` (``WORLD_SIZE`` > 1), join its process group.

    gloo on the CPU, NCCL on GPUs (each rank on the GPU of its ``LOCAL_RANK``); a rank that
    waits longer than ``config.timeout`` seconds for the others raises.

    Returns:
        The configuration (its device this rank's GPU under NCCL) and the world size.
    """
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world > 1 and not dist.is_initialized():
        cuda = config.device.startswith("cuda")
        if cuda:
            config = dataclasses.replace(
                config, device=f"cuda:{int(os.environ.get('LOCAL_RANK', '0'))}"
            )
            torch.cuda.set_device(config.device)
        dist.init_process_group(
            "nccl" if cuda else "gloo", timeout=datetime.timedelta(seconds=config.timeout)
        )
    return config, distributed.world_size()


def _loaders(
    config: RunConfig, train_set: BatchedTensorDataset, marglik_set: BatchedTensorDataset
) -> tuple[DataLoader, DataLoader]:
    """The training loader (shuffled; augmented with ``--augment``) and the marginal likelihood's.

    The marginal likelihood's loader is in order and never augmented. Both fetch a batch at a
    time (:func:`~laplace_equivariance.data.tensor_batches.batch_loader`).

    In a process group of ``W`` ranks each rank gets a shard through a ``DistributedSampler``
    and batches of ``batch_size / W`` (the global batch stays ``batch_size``); the marginal
    likelihood's examples must split evenly, since every one is counted once.
    """
    batch_size, world = config.batch_size, distributed.world_size()
    augment = config.augment
    if world == 1:
        return (
            batch_loader(train_set, batch_size, shuffle=True, augment=augment),
            batch_loader(marglik_set, batch_size),
        )
    if batch_size % world or len(marglik_set) % world:
        raise SystemExit(
            f"With {world} processes the batch size ({batch_size}) and the marginal "
            f"likelihood's examples ({len(marglik_set)}; --marglik-subset) must be multiples "
            f"of {world}."
        )
    per_rank = batch_size // world
    shuffled: DistributedSampler = DistributedSampler(train_set, shuffle=True, seed=config.seed)
    in_order: DistributedSampler = DistributedSampler(marglik_set, shuffle=False)
    return (
        batch_loader(train_set, per_rank, sampler=shuffled, augment=augment),
        batch_loader(marglik_set, per_rank, sampler=in_order),
    )


def _train_invariant(
    config: RunConfig, model: InvariantWeightsNet, loader: DataLoader, marglik_loader: DataLoader
) -> tuple[list[float], list[float], dict[str, Any]]:
    """Train the invariant-weights network: losses, objective values, its results entry."""
    history = train_invariant_weights(
        model,
        loader,
        config.method.value,
        n_epochs=config.epochs,
        lr=config.lr,
        lr_hyp=config.lr_hyp,
        marglik_loader=marglik_loader,
        marglik_frequency=config.marglik_frequency,
        n_hypersteps=config.hypersteps,
        n_epochs_burnin=config.burnin,
        progress_bar=True,
    )
    extra = {
        "invariance": dataclasses.asdict(history) | {"generators": INVARIANCES[config.invariance]}
    }
    return history.loss, [-v for v in history.objective if v is not None], extra


def _train_relaxed(
    config: RunConfig,
    model: RelaxedNet,
    loader: DataLoader,
    marglik_loader: DataLoader,
    out: Path,
) -> tuple[Any, torch.nn.Module, list[float], list[float], float, dict[str, Any]]:
    """Train a relaxed network with :func:`marglik_training` (checkpointed in ``out``).

    ``loader`` is :func:`_loaders`' training loader (its data set a
    :class:`~laplace_equivariance.data.tensor_batches.BatchedTensorDataset`).

    Returns:
        ``(la, model, losses, margliks, seconds, timing)``: ``seconds`` counts every
        epoch, also those run before a resume (the checkpoint keeps their time), and what
        follows the last epoch (the final Laplace fit); ``timing`` holds
        ``evaluated_epoch`` and ``epoch_seconds`` (each epoch's time, its fit included).
    """
    learns = config.learns
    epochs_done: dict[str, Any] = {}
    trace_inputs, labels = cast(BatchedTensorDataset, loader.dataset).tensors
    trace_inputs = trace_inputs[:PATH_OUTPUT_EXAMPLES]
    # where the burn-in ends a run that is not learning is told: a learning run by
    # marglik_training, before its fits; a MAP run here, in the epoch its burn-in names
    check_epoch = min(max(config.burnin, 1), config.epochs)
    counts = class_counts(labels)

    def record(epoch: int, info: dict[str, Any]) -> None:
        if not learns and epoch == check_epoch and at_chance(info["accuracy"], counts):
            message = not_learning_message(info["accuracy"], counts, f"in epoch {epoch}")
            warnings.warn(message, NotLearningWarning, stacklevel=2)
        epochs_done.update(
            seconds=info["seconds"],
            epoch_seconds=info["epoch_seconds"],
            at=time.perf_counter(),
            evaluated_epoch=info["best_epoch"] or epoch,
        )
        if info["neg_log_marglik"] is not None and distributed.rank() == 0:
            append_fit(out / FIT_TRACE_FILE, epoch, info, model, trace_inputs)

    schedule = paper_schedule(
        config.epochs,
        len(loader),
        lr=config.lr,
        optimizer=config.optimizer.value,
        marglik=learns,
        n_epochs_burnin=config.burnin,
        marglik_frequency=config.marglik_frequency,
        lr_min=config.lr_min,
    ) | {
        "lr_hyp": config.lr_hyp,
        "n_hypersteps": config.hypersteps,
        "prior_prec_init": config.prior_prec_init,
        "temperature": config.temperature,
    }
    start = time.perf_counter()
    try:
        la, trained, margliks, losses = marglik_training(
            model,
            loader,
            prior_structure=config.prior_structure,
            progress_bar=True,
            **schedule,
            marglik_loader=marglik_loader,
            stochastic=config.stochastic,
            n_mc_samples=config.mc_samples,
            kfac_approx=config.kfac_approx.value,
            checkpoint=out / "checkpoint.pt",
            checkpoint_every=config.checkpoint_every,
            final_laplace=learns,
            lengthscale_derivative=config.lengthscale_derivative,
            restore_best=config.restore_best,
            balance_factors=config.balance_factors,
            held_until_fit=held_parameters(model, config),
            held_until_epoch=None if learns else held_until_epoch(config),
            compile_kwargs={"mode": config.compile_mode} if config.compile_mode else None,
            backend_kwargs=(
                {"fit_batch_size": config.fit_batch_size} if config.fit_batch_size else None
            ),
            callback=record,
        )
    except CheckpointError as error:
        raise SystemExit(f"{error} Or pass --overwrite.") from None
    if epochs_done:
        start = epochs_done["at"] - epochs_done["seconds"]
        timing = {
            "evaluated_epoch": epochs_done["evaluated_epoch"],
            "epoch_seconds": epochs_done["epoch_seconds"],
        }
    else:  # every epoch ran before this call: the checkpoint holds their time
        state = torch.load(out / "checkpoint.pt", map_location="cpu", weights_only=False)["state"]
        start -= state["seconds"]
        best = state["best"] if config.restore_best else None
        timing = {
            "evaluated_epoch": best["epoch"] if best else state["epoch"],
            "epoch_seconds": state.get("epoch_seconds", []),
        }
    return la, trained, losses, margliks, time.perf_counter() - start, timing


def _write_files(
    results: dict[str, Any], config: RunConfig, model: torch.nn.Module, la: Any, out: Path
) -> None:
    """``model.pt``, the plots (:mod:`~laplace_equivariance.app.run_plots`), ``results.json``."""
    torch.save(model.state_dict(), out / "model.pt")
    write_run_plots(results, config, out, learned_structure=la is not None)
    (out / "results.json").write_text(json.dumps(results, indent=2) + "\n")


def train(
    settings: RunConfig | Mapping[str, Any], out: Path, overwrite: bool = False
) -> dict[str, Any] | None:
    """Train as ``settings`` say and write the run's files to ``out``.

    Steps: check the settings (:func:`check_run`), load the data (both before anything
    is created), lock the folder (:func:`~laplace_equivariance.app.run_lock.run_lock`: one
    writer per folder), prepare it (:func:`prepare_out`: resume only the same run), build the
    model, train, evaluate, write the files, unlock. Under ``torchrun --nproc-per-node W`` the
    ranks train one model together (:mod:`laplace_equivariance.distributed`) and rank 0
    locks and writes. ``threads`` sets torch's CPU threads for the run only: the caller's
    count is restored when it ends, also when it raises; so is the CPU's mode that flushes
    subnormal floats to zero, which the run turns on (:mod:`~laplace_equivariance.app.subnormals`;
    ``results.json`` records ``flush_subnormals``).

    Args:
        settings: The run's :class:`~laplace_equivariance.app.run_config.RunConfig`, or its dict
            form (:data:`~laplace_equivariance.app.run_config.DEFAULTS` keys).
        out: Folder for ``results.json``, ``model.pt``, the plots and the checkpoint.
        overwrite: Delete another run's files in ``out`` and start afresh.

    Returns:
        The results written to ``results.json`` (None on ranks other than 0).

    Warns:
        NotLearningWarning: Where the burn-in ends and after training, when the training
            accuracy is at chance (:mod:`~laplace_equivariance.marglik.chance`); the run goes on and
            ``results.json`` records ``train_at_chance``.

    Raises:
        SettingError: (a ``ValueError``) For settings that cannot give a valid run, naming the
            setting (:func:`check_run`; a ``dict`` must hold every setting), also a
            ``subset``, ``test_subset`` or ``marglik_subset`` above the training (test)
            examples the data set has.
        SystemExit: For an ``out`` that holds another run, is in use by another process or
            cannot be written (one line each, naming what to do).
    """
    config = check_run(settings)
    config, world = _join_process_group(config)
    if world > 1 and config.invariant:
        raise SystemExit(f"--model {INVARIANT_WEIGHTS} trains in one process, not under torchrun.")
    threads = torch.get_num_threads()  # the caller's, restored after the run
    if config.threads:
        torch.set_num_threads(config.threads)
    try:
        torch.manual_seed(config.seed)
        data = load_dataset(
            config.dataset,
            config.data_dir,
            config.download,
            config.subset,
            config.test_subset,
            config.seed,
        )
        n_train = len(data.x_train)
        # a run records the data size it asked for: one larger than the data would label the run
        # with a size it never had
        for name, kind, available in (
            ("subset", "training", n_train),
            ("test_subset", "test", len(data.x_test)),
            ("marglik_subset", "training", n_train),
        ):
            asked = getattr(config, name)
            if asked is not None and asked > available:
                raise SettingError.of_field(
                    name,
                    f"{asked} is more than the {available} {kind} examples of {config.dataset}: "
                    f"give at most {available}, or leave it out to use all of them.",
                )
        # one writer per folder: rank 0 writes the run's files
        lock = run_lock(out) if distributed.rank() == 0 else contextlib.nullcontext()
        # subnormals flushed for the run: a weight its prior drives to zero would pass through
        # them at a hundredth of the CPU's speed (app.subnormals)
        with lock, flush_subnormals() as flushed:
            return _train_in(config, data, out, overwrite, world, flushed)
    finally:
        torch.set_num_threads(threads)


def _train_in(
    config: RunConfig,
    data: ImageData,
    out: Path,
    overwrite: bool,
    world: int,
    flushed: bool,
) -> dict[str, Any] | None:
    """:func:`train`'s steps from preparing ``out`` on, while this process holds its lock.

    ``flushed``: whether the CPU flushes subnormal floats to zero in this run (recorded).
    """
    resumes_from = prepare_out(config, out, overwrite)
    if resumes_from == config.epochs and (out / "results.json").exists():
        if distributed.rank() != 0:
            return None
        print(f"{out} is finished (epoch {resumes_from} of {config.epochs}): nothing to do.")
        return load_run(out)
    if resumes_from is not None and distributed.rank() == 0:
        print(f"resuming from epoch {resumes_from} of {config.epochs} ({out / 'checkpoint.pt'})")
    device = config.device
    built = build_model(config, data.in_shape, data.n_classes).to(device)
    x, y = data.x_train.to(device), data.y_train.to(device)
    default_subset = min(len(x), INVARIANT_MARGLIK_SUBSET) if config.invariant else len(x)
    n_marglik = config.marglik_subset or default_subset
    loader, marglik_loader = _loaders(
        config,
        BatchedTensorDataset(x, y),
        BatchedTensorDataset(x[:n_marglik], y[:n_marglik]),
    )
    la = None
    model: torch.nn.Module = built
    if isinstance(built, InvariantWeightsNet):
        start = time.perf_counter()
        losses, margliks, extra = _train_invariant(config, built, loader, marglik_loader)
        seconds = time.perf_counter() - start
    else:
        # evaluated_epoch: the epoch whose model the test metrics are of
        la, model, losses, margliks, seconds, extra = _train_relaxed(
            config, built, loader, marglik_loader, out
        )
    if distributed.rank() != 0:
        return None
    results: dict[str, Any] = {
        "settings": config.settings(),
        "versions": {
            "laplace_equivariance": __version__,
            "torch": torch.__version__,
            "python": platform.python_version(),
        },
        "device": device_name(device),
        # the name does not tell machines apart; their speed does (timed after training, so
        # the run itself is unchanged)
        "device_gflops": matmul_gflops(device),
        "threads": torch.get_num_threads(),
        "flush_subnormals": flushed,
        "world_size": world,
        "data_source": data.source,
        "n_train": len(x),
        "optimiser_steps": config.epochs * len(loader),
        "n_test": len(data.x_test),
        "parameters": models.count_parameters(model),
        "train_seconds": seconds,
        "losses": losses,
        "neg_log_marglik": margliks,
        "test": _metrics(model, data.x_test, data.y_test, device),
        # the fit to the training data tells underfitting (a strong prior, a short budget)
        # from overfitting
        "train": _metrics(model, data.x_train, data.y_train, device),
        "lengthscales": {
            name: module.lengthscale.item()
            for name, module in model.named_modules()
            if isinstance(module, AnchorBasis)
        },
        **extra,
    }
    counts = class_counts(y)
    results["train_at_chance"] = at_chance(results["train"]["accuracy"], counts)
    if results["train_at_chance"]:
        message = not_learning_message(results["train"]["accuracy"], counts, "after training")
        message += " results.json records it as train_at_chance."
        warnings.warn(message, NotLearningWarning, stacklevel=2)
    if la is not None:
        results["symmetry"] = symmetry_report(la)
        results["fits"] = read_fits(out / FIT_TRACE_FILE)
        results["laplace"] = {  # what evaluate --predictive glm refits the approximation with
            "prior_precision": la.prior_precision.detach().cpu().flatten().tolist(),
            "temperature": float(la.temperature),
        }
    if any(isinstance(m, RelaxedLayer) for m in model.modules()):
        results["path_outputs"] = path_output_shares(
            model.eval(), data.x_train[:PATH_OUTPUT_EXAMPLES].to(device)
        )
    _write_files(results, config, model, la, out)
    return results


def report(runs: Sequence[Path]) -> str:
    """A plain-text table of runs, one line each.

    Each line holds the data set, model, method, test accuracy and NLL, training accuracy
    ("-" for runs written before ``results.json`` held it) and the learned layers, or why
    there are none (no marginal-likelihood step; a training accuracy at chance). Runs of
    the same data set, model and method name the settings that tell them apart after the
    method (:func:`~laplace_equivariance.app.summary.named_settings`, their seed included).

    Args:
        runs: ``--out`` folders of ``train`` runs.

    Returns:
        The table.

    Raises:
        ValueError: If a folder is named twice (as ``report --markdown``), or a
            ``results.json`` is corrupt.
    """
    lines = [
        f"{'dataset':22} {'model':16} {'method':8} {'acc %':>6} {'nll':>6} {'train %':>7}  "
        "learned layers / eta"
    ]
    summary.check_named_once(runs)
    loaded = [summary.load_run(run) for run in runs]
    named = summary.named_settings(
        [r["settings"] for r in loaded],
        [
            (r["settings"]["dataset"], r["settings"]["model"], r["settings"]["method"])
            for r in loaded
        ],
        seed=True,
    )
    for results, words in zip(loaded, named, strict=True):
        s, test = results["settings"], results["test"]
        method = s["method"] + (f" ({', '.join(words)})" if words else "")
        learned = " ".join(
            row["learned"] for row in results.get("symmetry", {}).get("layers", [])[:8]
        )
        if s["method"] == "marglik" and not results.get("neg_log_marglik"):
            learned = "not learned: no marginal-likelihood step"
        if "invariance" in results:
            eta = results["invariance"]["eta"][-1]
            learned = ", ".join(
                f"{name} {value:.2f}"
                for name, value in zip(results["invariance"]["generators"], eta, strict=True)
            )
        if results.get("train_at_chance"):  # first, so no learned structure or eta hides it
            verdict = "not learning: training accuracy at chance"
            learned = f"{verdict}; {learned}" if learned else verdict
        # runs written before results.json held the training fit show "-"
        fit = results.get("train")
        train_accuracy = "-" if fit is None else f"{100 * fit['accuracy']:.2f}"
        lines.append(
            f"{s['dataset']:22} {s['model']:16} {method:8} {100 * test['accuracy']:6.2f} "
            f"{test['nll']:6.3f} {train_accuracy:>7}  {learned or '-'}"
        )
    return "\n".join(lines)


def _interrupted(config: RunConfig, out: Path) -> str:
    """The one line printed on Ctrl-C: what the checkpoint holds and how to resume."""
    checkpoint = out / "checkpoint.pt"
    if config.invariant:
        return (
            f"Interrupted; --model {INVARIANT_WEIGHTS} keeps no checkpoint: run again to retrain."
        )
    try:
        epoch = _checkpoint_epoch(checkpoint)
    except SystemExit:
        epoch = None
    if epoch is None:
        return "Interrupted before the first epoch ended: nothing to resume."
    return (
        f"Interrupted; {checkpoint} holds epoch {epoch} of {config.epochs}: run the same "
        "command again to resume."
    )
