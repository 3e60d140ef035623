"""Every committed training run as one tidy pandas table, the input of the generated pages.

:func:`runs` reads each ``train`` run's ``results.json`` under ``benchmarks/results/`` once (a
file of that name that names no model is another script's, not a run) and returns one row per
run: where it lies (``folder``, the first folder under ``benchmarks/results``, and
``run``, its path there), its settings (options added after older runs were committed take the
value those runs had), ``frozen`` (the
paths ``studies.frozen_paths`` froze, ``"conv,fc"`` or ``"none"``), ``experiment`` (runs equal
in it are seeds of one experiment, as the results tables group them), its metrics (``test_acc``
and ``train_acc`` in %, ``test_nll``, ``marglik`` the last ``-log marglik``,
``marglik_per_example`` divided by ``N``, ``train_seconds``, ``n_train``, ``device_name``,
``version``, the package's) and its
symmetry per layer and path: ``PATH.relative.L``, ``PATH.effective.L`` (App. D) and
``PATH.output.L`` (the path's share of layer ``L``'s output), layers numbered from 1.

Other committed JSON (timing reports, benchmark scripts' tables) is read by :func:`report`; the
known-truth suite's runs are their own small table, :func:`known_truth`.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

import pandas as pd

from benchmarks.report import RESULTS as SPEED_RESULTS
from laplace_equivariance.app import summary
from laplace_equivariance.app.runs import migrated

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "studies" / "results"
"""The studies' results: every training run, and the files of the scripts that measure them."""


@functools.cache
def _train_runs() -> tuple[tuple[Path, dict[str, Any]], ...]:
    """Every ``train`` run under :data:`RESULTS` (a ``results.json`` whose settings name a
    model; other scripts' files of that name are not runs), in path order, with its results."""
    found = []
    for path in sorted(RESULTS.rglob("results.json")):
        result = summary.load_run(path.parent)
        if "model" in result.get("settings", {}):
            found.append((path, result))
    return tuple(found)


def _row(path: Path, result: dict[str, Any]) -> dict[str, Any]:
    """One run's row of :func:`runs`."""
    settings = migrated(result["settings"])
    run = path.parent.relative_to(RESULTS)
    row: dict[str, Any] = {"folder": run.parts[0], "run": str(run), **settings}
    frozen = result.get("frozen_paths") or []
    row["frozen"] = ",".join(frozen) or "none"
    row["experiment"] = repr((*summary.experiment_key(result["settings"]), *frozen))
    evidence = summary.Row([result]).neg_log_marglik_per_example()
    row |= {
        "test_acc": 100 * result["test"]["accuracy"],
        "test_nll": result["test"]["nll"],
        "train_acc": 100 * result["train"]["accuracy"] if "train" in result else float("nan"),
        "marglik": (result["neg_log_marglik"] or [float("nan")])[-1],
        "marglik_per_example": evidence[0] if evidence else float("nan"),
        "train_seconds": result.get("train_seconds", float("nan")),
        "n_train": result.get("n_train"),
        "device_name": result.get("device"),
        "version": result["versions"]["laplace_equivariance"],
        "train_at_chance": bool(result.get("train_at_chance", False)),
    }
    for number, layer in enumerate(result.get("symmetry", {}).get("layers", []), 1):
        for name, path_report in layer["paths"].items():
            row[f"{name}.relative.{number}"] = path_report["relative"]
            row[f"{name}.effective.{number}"] = path_report["effective"]
    for number, layer in enumerate(result.get("path_outputs") or [], 1):
        for name, share in layer["paths"].items():
            row[f"{name}.output.{number}"] = share
    return row


@functools.cache
def runs() -> pd.DataFrame:
    """Every committed run, one row each, sorted by ``run`` (see the module docstring)."""
    return _frame([_row(path, result) for path, result in _train_runs()])


MEASURED = ("test_acc", "test_nll", "train_acc", "marglik", "marglik_per_example", "train_seconds")
"""The columns of :func:`runs` that are measurements (float), besides the per-layer ones."""


def _frame(rows: list[dict[str, Any]]) -> pd.DataFrame:
    """``rows`` as a frame whose settings keep their values as recorded (an integer setting
    stays one where other runs lack it) and whose measurements are floats."""
    frame = pd.DataFrame(rows, dtype=object)
    measured = [c for c in frame.columns if c in MEASURED or c.count(".") == 2]
    return frame.astype(dict.fromkeys(measured, float))


@functools.cache
def report(name: str) -> Any:
    """The JSON of ``NAME.json`` under ``studies/results`` or else ``benchmarks/results``
    (``NAME`` may name a subfolder).

    Raises:
        FileNotFoundError: If there is no such file.
    """
    for folder in (RESULTS, SPEED_RESULTS):
        path = folder / f"{name}.json"
        if path.exists():
            return json.loads(path.read_text())
    raise FileNotFoundError(f"{name}.json is in neither studies/results nor benchmarks/results.")


@functools.cache
def known_truth() -> pd.DataFrame:
    """The runs of ``studies.known_truth``, one row each: ``suite`` (``known-truth`` or
    ``known-truth-rotation``), ``setting``, ``task``, ``seed``, the fractions ``test_accuracy``,
    ``shift_consistency`` and ``turn_consistency``, and per layer ``PATH.relative.L`` and, where
    measured, ``PATH.output.L``."""
    rows = []
    for suite in ("known-truth", "known-truth-rotation"):
        for path in sorted((RESULTS / suite).glob("*/*-seed*.json")):
            result = json.loads(path.read_text())
            task, _, seed = path.stem.rpartition("-seed")
            row = {"suite": suite, "setting": path.parent.name, "task": task, "seed": int(seed)}
            for key in ("test_accuracy", "shift_consistency", "turn_consistency"):
                row[key] = result.get(key, float("nan"))
            for number, layer in enumerate(result["layers"], 1):
                for key, value in layer.items():
                    if key.endswith("_relative"):
                        row[f"{key.removesuffix('_relative')}.relative.{number}"] = value
            for number, layer in enumerate(result.get("output_shares", []), 1):
                for path, share in layer["paths"].items():
                    row[f"{path}.output.{number}"] = share
            rows.append(row)
    return _frame(rows)


@functools.cache
def evidence_split(name: str) -> pd.DataFrame:
    """The runs of a ``studies.evidence_split`` file (``benchmarks/results/NAME.json``), one
    row each: the run's settings, ``frozen``, ``total`` (``-log marglik``), ``data``, ``head``
    (the terms outside the relaxed layers) and per layer ``L`` and path type,
    ``PATH.nats.L`` (its prior and Occam terms) and ``PATH.gamma.L`` (effective parameters)."""
    rows = []
    for run in report(name)["runs"]:
        row = migrated(run["settings"]) | {"frozen": ",".join(run.get("frozen_paths") or [])}
        row["frozen"] = row["frozen"] or "none"
        row |= {"total": run["neg_log_marglik"], "data": run["data"]}
        row["head"] = run["outside"]["prior"] + run["outside"]["occam"]
        for number, paths in enumerate(run["layers"].values(), 1):
            for path, terms in paths.items():
                row[f"{path}.nats.{number}"] = terms["prior"] + terms["occam"]
                row[f"{path}.gamma.{number}"] = terms["gamma"]
        rows.append(row)
    return _frame(rows)


@functools.cache
def fits() -> pd.DataFrame:
    """Every marginal-likelihood fit that a committed run recorded (its ``fits``), one row
    each: the run's ``run`` and ``seed``, the fit's ``epoch`` and ``neg_log_marglik``, per
    layer ``L`` and path ``PATH.output.L`` (the path's share of the output at that fit), and per
    tensor ``precision:NAME`` and ``norm:NAME`` (its prior precision and squared norm)."""
    rows = []
    for path, result in _train_runs():
        for fit in result.get("fits", []):
            row = {"run": str(path.parent.relative_to(RESULTS)), "seed": result["settings"]["seed"]}
            row |= {"epoch": fit["epoch"], "neg_log_marglik": fit["neg_log_marglik"]}
            for number, layer in enumerate(fit.get("path_outputs") or [], 1):
                for name, share in layer["paths"].items():
                    row[f"{name}.output.{number}"] = share
            for name, value in fit.get("prior_precision", {}).items():
                row[f"precision:{name}"] = value
            for name, value in fit.get("squared_norm", {}).items():
                row[f"norm:{name}"] = value
            rows.append(row)
    return _frame(rows)


@functools.cache
def shift_errors(name: str) -> pd.DataFrame:
    """The runs measured by ``studies.shift_errors`` (``benchmarks/results/NAME.json``), one
    row each in seed order: ``prediction_unchanged`` (a fraction), per layer ``L``
    ``shift_error.L`` (the layer's distance from equivariance) and per path
    ``PATH.shift_error.L`` and ``PATH.share.L`` (missing where the path has none)."""
    rows = []
    for run in report(name)["runs"]:
        row = {"run": run["run"], "prediction_unchanged": run["prediction_unchanged"]}
        for number, layer in enumerate(run["layers"], 1):
            row[f"shift_error.{number}"] = layer["shift_error"]
            for path, measured in layer["paths"].items():
                row[f"{path}.shift_error.{number}"] = measured["shift_error"]
                row[f"{path}.share.{number}"] = measured["share"]
        rows.append(row)
    frame = _frame(rows)
    return frame.astype(dict.fromkeys([c for c in frame.columns if "." in c], float))


def clear_caches() -> None:
    """Forget every table read so far (after the files under :data:`RESULTS` changed)."""
    for table in (_train_runs, runs, report, known_truth, evidence_split, fits, shift_errors):
        table.cache_clear()
