"""The run folder of ``train``: its record and the record's schema, resumes, fit trace, model.

``run.json`` records the settings (:meth:`RunConfig.settings
<laplace_equivariance.app.run_config.RunConfig.settings>`), as ``results.json`` does; a record
made before an option existed lacks it and :func:`migrated` fills in the value such runs had
(each field's ``older_runs``); a folder resumes only the same run under the same circumstances;
``fits.jsonl`` traces every marginal-likelihood fit; :func:`load_trained` rebuilds a trained
run.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch

from laplace_equivariance import __version__, distributed
from laplace_equivariance.app.config import build_model
from laplace_equivariance.app.parsed_json import read_json
from laplace_equivariance.app.run_config import NEVER_ABSENT, RunConfig, settings_where
from laplace_equivariance.data.datasets import load_dataset
from laplace_equivariance.diagnostics import path_output_shares
from laplace_equivariance.layers import RelaxedLayer

RUN_RECORD = "run.json"
"""File in ``--out`` that records the settings and version a run was started with."""

NOT_RESULT_SETTINGS = settings_where(lambda f: f.metadata["circumstance"])
"""Settings that do not change a run's result: a run may resume with other values of them."""

FIT_TRACE_FILE = "fits.jsonl"
"""File in ``--out`` to which a learned run appends one line per marginal-likelihood fit."""

PATH_OUTPUTS_FILE = "path_outputs.json"
"""A run's path output shares measured after training (``laplace-equivariance paths RUN >
RUN/path_outputs.json``), for runs whose ``results.json`` predates its ``path_outputs``."""

RUN_FILES = (
    RUN_RECORD,
    "checkpoint.pt",
    "results.json",
    "model.pt",
    PATH_OUTPUTS_FILE,
    FIT_TRACE_FILE,
)
"""Files of a run in its ``--out`` folder (besides the plots); ``--overwrite`` removes them."""

LATER_OPTIONS: dict[str, Any] = {
    f.name: f.metadata["older_runs"]
    for f in dataclasses.fields(RunConfig)
    if f.metadata["older_runs"] is not NEVER_ABSENT
}
"""Options added after runs were recorded, with the value those runs had (each
:class:`~laplace_equivariance.app.run_config.RunConfig` field's ``older_runs``)."""


def migrated(settings: Mapping[str, Any]) -> dict[str, Any]:
    """A recorded run's settings with the options it predates at the value it had."""
    return LATER_OPTIONS | dict(settings)


def config_of_record(settings: Mapping[str, Any]) -> RunConfig:
    """The configuration of a recorded run's settings (``run.json``'s, ``results.json``'s).

    Raises:
        ValueError: For a key that is no setting or a value outside its choices.
    """
    return RunConfig.from_settings(migrated(settings))


PATH_OUTPUTS_FILE = "path_outputs.json"
"""A run's path output shares measured after training (``laplace-equivariance paths RUN >
RUN/path_outputs.json``), for runs whose ``results.json`` predates its ``path_outputs``."""


def load_run(run: Path) -> dict[str, Any]:
    """The ``results.json`` of a run.

    Its ``path_outputs`` come from :data:`PATH_OUTPUTS_FILE` where ``results.json`` has none
    and that file exists. Both are parsed once while their bytes are unchanged
    (:func:`~laplace_equivariance.app.parsed_json.read_json`); every call returns new objects.

    Raises:
        FileNotFoundError: If ``run`` has no ``results.json`` (saying whether it is an
            unfinished run, which the train command resumes).
        ValueError: If ``results.json`` is not valid JSON.
    """
    path = Path(run) / "results.json"
    if not path.exists():
        if (Path(run) / "run.json").exists():
            raise FileNotFoundError(
                f"{run} is an unfinished run (no results.json yet): rerun its train command "
                "to resume it."
            )
        raise FileNotFoundError(f"{path} does not exist: is {run} the --out folder of a train run?")
    try:
        results = read_json(path)
    except json.JSONDecodeError as error:
        raise ValueError(
            f"{path} cannot be read ({error}): it is corrupt or truncated; rerun the run's "
            "train command with --overwrite to write it again."
        ) from None
    measured_later = Path(run) / PATH_OUTPUTS_FILE
    if "path_outputs" not in results and measured_later.exists():
        results["path_outputs"] = read_json(measured_later)
    return results


def _differences(recorded: dict[str, Any], settings: dict[str, Any]) -> list[str]:
    """``"key: old -> new"`` for every result-changing setting that differs.

    A setting the record lacks (a run made before the option existed) had the value that
    :data:`LATER_OPTIONS` names: the same as that value, it does not differ; otherwise (or not
    named there) it reads ``"absent (the run predates the option)"``.
    """
    keys = sorted((set(recorded) | set(settings)) - set(NOT_RESULT_SETTINGS))
    absent = "absent (the run predates the option)"
    missing = object()
    had = {key: recorded.get(key, LATER_OPTIONS.get(key, missing)) for key in keys}
    return [
        f"{key}: {repr(recorded[key]) if key in recorded else absent} -> {settings.get(key)!r}"
        for key in keys
        if had[key] is missing or had[key] != settings.get(key)
    ]


def prepare_out(config: RunConfig, out: Path, overwrite: bool = False) -> int | None:
    """Make ``out`` ready for the run of ``config``, resuming only the same run.

    A folder with a run's files resumes (from ``checkpoint.pt``) only if its
    :data:`RUN_RECORD` has the same package version and the same settings, except
    :data:`NOT_RESULT_SETTINGS`; ``overwrite`` deletes the run's files and starts afresh. A
    record alone (a run stopped before its first epoch ended) is replaced. A ``results.json``
    without a checkpoint is a finished run (``results.json`` is written last; the repository
    commits it without the record and checkpoint, and ``invariant-weights`` runs keep no
    checkpoint); without a record it is checked against the settings ``results.json`` records.

    Returns:
        The last epoch the checkpoint holds when the run resumes (the run's ``epochs`` for a
        finished run without a checkpoint), else None.

    Raises:
        SystemExit: If ``out`` holds another run (naming the settings that differ), files of a
            run without a record, a checkpoint that cannot be read, or cannot be written.
    """
    record_path = out / RUN_RECORD
    settings = config.settings()
    present = [name for name in RUN_FILES if (out / name).exists()]
    record = {"package": __version__, "settings": settings, "world_size": distributed.world_size()}
    if present and overwrite and distributed.rank() == 0:
        for name in present:
            (out / name).unlink()
        present = []
    if present and present != [RUN_RECORD] and not overwrite:
        if record_path.exists():
            recorded = json.loads(record_path.read_text())
        else:
            recorded = _record_of_finished_run(out, present)
            if recorded is None:
                raise SystemExit(
                    f"--out {out} holds files of a run ({', '.join(present)}) with no record of "
                    f"its settings ({RUN_RECORD}): pass --overwrite to start afresh there, or "
                    "another --out."
                )
        differences = _differences(recorded["settings"], settings)
        if recorded.get("package") != __version__:
            differences.insert(0, f"package: {recorded.get('package')!r} -> {__version__!r}")
        if differences:
            raise SystemExit(
                f"--out {out} holds another run; resuming it would mix two runs. Settings "
                f"that differ: {'; '.join(differences)}. Pass --overwrite to start afresh "
                "there, or another --out."
            )
        _check_same_circumstances(recorded, record, out)
    try:
        out.mkdir(parents=True, exist_ok=True)
        if distributed.rank() == 0:
            record_path.write_text(json.dumps(record, indent=2) + "\n")
    except OSError as error:
        raise SystemExit(f"--out {out}: cannot write there ({error.strerror}).") from None
    distributed.barrier()
    if (out / "results.json").exists() and not (out / "checkpoint.pt").exists():
        return config.epochs
    return _checkpoint_epoch(out / "checkpoint.pt")


def _record_of_finished_run(out: Path, present: list[str]) -> dict[str, Any] | None:
    """The :data:`RUN_RECORD` of a finished run that ``out`` keeps as its ``results.json``.

    The repository commits a run's ``results.json`` (with its fit trace and path outputs) but
    not its record or checkpoint, so a sweep resumed on a fresh clone meets its finished runs in
    that form. ``results.json`` records the settings, package version and processes the record
    would hold.

    Returns:
        The record read from ``results.json``, or None if ``out`` holds a checkpoint, a model
        or no ``results.json``, or its ``results.json`` records no settings or version.
    """
    if "results.json" not in present or {RUN_RECORD, "checkpoint.pt", "model.pt"} & set(present):
        return None
    results = json.loads((out / "results.json").read_text())
    if "settings" not in results or "laplace_equivariance" not in results.get("versions", {}):
        return None
    return {
        "package": results["versions"]["laplace_equivariance"],
        "settings": results["settings"],
        "world_size": results.get("world_size", 1),
    }


def _check_same_circumstances(recorded: dict[str, Any], record: dict[str, Any], out: Path) -> None:
    """Refuse to resume epochs that ran with other threads, processes or compile mode.

    ``results.json`` states the threads, processes and ``--compile-mode`` of the whole run; a
    resume under others would state circumstances that the epochs before it did not run under.
    A record made before ``--compile-mode`` existed ran eagerly.

    Raises:
        SystemExit: Naming both, if ``out`` holds a checkpoint with at least one epoch.
    """
    if _checkpoint_epoch(out / "checkpoint.pt") is None:
        return
    then = (recorded["settings"].get("threads"), recorded.get("world_size", 1))
    now = (record["settings"].get("threads"), record["world_size"])
    if then != now:
        raise SystemExit(
            f"--out {out} holds epochs that ran with --threads {then[0]} in {then[1]} "
            f"process(es); this call has --threads {now[0]} in {now[1]}: the run's record would "
            "state circumstances its epochs did not run under. Resume with the same, or pass "
            "--overwrite to start afresh."
        )
    then_mode, now_mode = (r["settings"].get("compile_mode") for r in (recorded, record))
    if then_mode != now_mode:
        raise SystemExit(
            f"--out {out} holds epochs that ran with --compile-mode {then_mode or '(eager)'}; "
            f"this call has {now_mode or '(eager)'}: resume with the same, or pass --overwrite "
            "to start afresh."
        )


def _checkpoint_epoch(path: Path) -> int | None:
    """The last epoch a checkpoint holds, None without one.

    Raises:
        SystemExit: If it cannot be read.
    """
    if not path.exists():
        return None
    try:
        saved = torch.load(path, map_location="cpu", weights_only=False)
        return int(saved["state"]["epoch"])
    except Exception as error:  # unpickling errors have no common base class
        raise SystemExit(
            f"Checkpoint {path} cannot be read ({type(error).__name__}): it is corrupt, empty "
            "or truncated. Pass --overwrite to start afresh."
        ) from None


def append_fit(
    path: Path, epoch: int, info: dict[str, Any], model: torch.nn.Module, x: torch.Tensor
) -> None:
    """Append one marginal-likelihood fit's state to the run's trace (:data:`FIT_TRACE_FILE`).

    One JSON line: the ``epoch``, the fit's last ``neg_log_marglik``, every prior group's
    ``prior_precision``, every parameter tensor's ``squared_norm`` (so ``delta ||theta||^2``,
    MacKay's ``gamma`` at the fixed point of a fit, can be read per tensor) and the relaxed
    layers' ``path_outputs`` (:func:`path_output_shares` on ``x``, the first training images).
    Measuring leaves the model's mode, weights and random state as they were.

    Args:
        path: The trace file (created if missing).
        epoch: The epoch the fit followed.
        info: What :func:`marglik_training` passes its callback after that epoch.
        model: The model being trained.
        x: Inputs for the output shares, shape ``(N, *in_shape)``, on the model's device.
    """
    line: dict[str, Any] = {
        "epoch": epoch,
        "neg_log_marglik": info["neg_log_marglik"],
        "prior_precision": info["prior_precision"],
        "squared_norm": {
            name: weight.detach().double().square().sum().item()
            for name, weight in model.named_parameters()
        },
    }
    if any(isinstance(module, RelaxedLayer) for module in model.modules()):
        training = model.training
        with torch.no_grad():
            line["path_outputs"] = path_output_shares(model.eval(), x)
        model.train(training)
    with path.open("a") as trace:
        trace.write(json.dumps(line) + "\n")


def read_fits(path: Path) -> list[dict[str, Any]]:
    """The fits a run's trace holds, in epoch order, the last line of each epoch kept.

    A run resumed from its checkpoint may repeat an epoch the trace already holds (when it
    stopped between the checkpoint and the trace); its later line describes the state the
    run went on from.

    Args:
        path: A :data:`FIT_TRACE_FILE`; a missing file holds no fits.
    """
    if not path.exists():
        return []
    by_epoch = {}
    for text in path.read_text().splitlines():
        line = json.loads(text)
        by_epoch[line["epoch"]] = line
    return [by_epoch[epoch] for epoch in sorted(by_epoch)]


def load_trained(run: Path) -> tuple[torch.nn.Module, Any]:
    """Rebuild a trained run's model (on the CPU, evaluation mode) and its data.

    Args:
        run: The ``--out`` folder of a ``train`` run.

    Returns:
        The model with the run's ``model.pt`` loaded, and the run's data set
        (:func:`laplace_equivariance.data.datasets.load_dataset`, its ``--subset`` applied).

    Raises:
        SystemExit: If the weights came from a version whose layers computed another function.
    """
    stored = load_run(run)
    config = config_of_record(stored["settings"])
    data = load_dataset(
        config.dataset, config.data_dir, False, config.subset, config.test_subset, config.seed
    )
    model = build_model(config, data.in_shape, data.n_classes)
    _check_same_function(run, stored, model)
    try:
        weights = torch.load(run / "model.pt", map_location="cpu")
    except Exception as error:  # unpickling errors have no common base class
        raise SystemExit(
            f"{run / 'model.pt'} cannot be read ({type(error).__name__}): it is corrupt, "
            "truncated or missing; rerun the run's train command with --overwrite."
        ) from None
    model.load_state_dict(weights)
    return model.eval(), data


PATHS_SUMMED_SINCE = (0, 3, 0)
"""Version since which relaxed layers sum their paths over ``sqrt(K)`` (before: the mean)."""


def _check_same_function(run: Path, stored: dict[str, Any], model: torch.nn.Module) -> None:
    """Refuse weights that this version's layers would turn into another function.

    Raises:
        SystemExit: For a model with several paths per layer trained before
            :data:`PATHS_SUMMED_SINCE`.
    """
    made_by = stored.get("versions", {}).get("laplace_equivariance", "0")
    numbers = tuple(int(part) for part in made_by.split(".")[:3] if part.isdigit())
    several_paths = any(
        isinstance(m, RelaxedLayer) and len(m.path_names) > 1 for m in model.modules()
    )
    if several_paths and numbers < PATHS_SUMMED_SINCE:
        raise SystemExit(
            f"{run} was trained by laplace-equivariance {made_by}, whose relaxed layers "
            f"averaged their paths; this version ({__version__}) sums them over sqrt(K), so "
            f"the saved weights would give another function. Evaluate it with version "
            f"{made_by}, or train it again."
        )
