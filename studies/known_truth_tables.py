"""The tables of docs/learned_structure.md, from the runs of :mod:`studies.known_truth`.

One JSON per (task, seed) under a folder per setting (:data:`TABLE_ORDER` for the digit and
Fashion-MNIST tasks, :data:`ROTATION_ORDER` for the rotation tasks); the tables pool the
seeds of each (setting, task). Each table is a pandas frame of the cells as shown; the page's
template writes :func:`tables` and :func:`rotation_tables` with ``table``
(:mod:`benchmarks.markdown_table`; ``python -m studies.known_truth --table`` prints them with
``DataFrame.to_markdown``).
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pandas as pd

from laplace_equivariance.app.summary import mean_std
from laplace_equivariance.data.known_truth_tasks import (
    KNOWN_TRUTH_ROTATION_TASKS,
    KNOWN_TRUTH_TASKS,
)

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "studies" / "results" / "known-truth"
ROTATION_RESULTS = ROOT / "studies" / "results" / "known-truth-rotation"
"""Runs of the rotation tasks, one folder per setting (:data:`ROTATION_ORDER`)."""
ROTATION_ORDER = ("map-conv", "map-gconv", "map-f-fc+conv+gconv", "held", "held-gconv")
"""Rotation result folders, in the table's order (settings in each run's JSON)."""
LONG_SCHEDULE_RESULTS = ROOT / "studies" / "results" / "known-truth-1000ep"
"""Runs at the paper's schedule (1,000 epochs), one folder per model (:data:`WEIGHT_TENSORS`)."""
FIXED = ROOT / "studies" / "results" / "known-truth-fixed-weights"
"""Exact-GGN runs whose fixed-weight comparison of the curvatures the docs tabulate."""
TABLE_ORDER = (
    "map-conv",
    "map-f-fc",
    "unbalanced-adam",
    "balanced-adam-mean-of-paths",
    "balanced-adam",
    "balanced-adam-hypersteps-1",
    "balanced-adam-layerwise-mean-of-paths",
    "balanced-adam-layerwise",
    "equivariant-start-layerwise",
    "held-start-layerwise",
    "balanced-adam-reduce",
    "balanced-sgd",
    "map-conv-n300",
    "balanced-adam-n300",
    "map-conv-n1700",
    "balanced-adam-n1700",
    "map-conv-fashion-n1000",
    "fashion-n1000",
    "map-conv-fashion-n4000",
    "fashion-n4000",
    "alpha1-kfac",
    "alpha1-exact",
)
"""Result folders, in the table's order (settings in each run's JSON)."""


def task_runs(folder: Path, task: str) -> list[dict[str, Any]]:
    """The results of every seed of ``task`` under ``folder``, in seed-file order."""
    return [json.loads(p.read_text()) for p in sorted(folder.glob(f"{task}-seed*.json"))]


def _folder_task_runs(
    folders: list[Path], tasks: Any
) -> Iterator[tuple[Path, str, list[dict[str, Any]]]]:
    """``(folder, task, runs)`` for every folder and task that has runs, in that order."""
    for folder in folders:
        for task in tasks:
            if runs := task_runs(folder, task):
                yield folder, task, runs


def table(folders: list[Path]) -> pd.DataFrame:
    """The table of every run folder: one row per (folder, task), seeds pooled.

    Columns: the setting (the folder's name), the package version that made the runs (before
    0.3.0 a relaxed layer averaged its paths, docs/learned_structure.md), the task, seeds,
    test accuracy and shift-consistent predictions (%), and per relaxed layer the FC path's
    relative effective parameters as the largest value over the seeds (a share is "off"
    below 0.01).
    """
    rows = []
    for folder, task, runs in _folder_task_runs(folders, KNOWN_TRUTH_TASKS):
        n_layers = len(runs[0]["layers"])
        shares = [
            f"{max(run['layers'][i]['fc_relative'] for run in runs):.3f}" for i in range(n_layers)
        ]
        versions = ", ".join(sorted({run["package"] for run in runs}))
        rows.append(
            [folder.name, versions, task, str(len(runs)), str(runs[0]["n_train"])]
            + [str(runs[0]["evaluated_epoch"])]
            + [mean_std([r["test_accuracy"] for r in runs], 100)]
            + [mean_std([r["shift_consistency"] for r in runs], 100)]
            + [" / ".join(shares) if shares else "(MAP)"]
        )
    header = "setting | version | task | seeds | train images | epochs | test accuracy (%)"
    header += " | shift-consistent (%) | FC share per layer, largest over seeds"
    return pd.DataFrame(rows, columns=header.split(" | "))


PRECISION_ROWS = (
    "unbalanced-adam",
    "balanced-adam",
    "balanced-adam-layerwise",
    "equivariant-start-layerwise",
    "held-start-layerwise",
    "alpha1-exact",
)
"""Folders whose learned precisions the second table lists (the mean-of-paths rows' are in
their JSONs)."""


def precision_table(folders: list[Path]) -> pd.DataFrame:
    """Per layer, the median over seeds of the FC and CONV paths' weight precisions.

    An F-FC path has two weight tensors, ``theta2`` (input map) and ``theta1`` (output map),
    listed in that order; under ``prior_structure="path"`` they share one precision.
    """
    rows = []
    for folder in folders:
        if folder.name not in PRECISION_ROWS:
            continue
        for task in KNOWN_TRUTH_TASKS:
            runs = task_runs(folder, task)
            if not runs:
                continue
            cells = []
            for i in range(len(runs[0]["layers"])):
                fc = [
                    statistics.median(r["layers"][i]["fc_prior_precision"][k] for r in runs)
                    for k in range(2)
                ]
                conv = statistics.median(r["layers"][i]["conv_prior_precision"][0] for r in runs)
                cells.append(f"{fc[0]:.2g}, {fc[1]:.2g} ; {conv:.2g}")
            rows.append([folder.name, task, " / ".join(cells)])
    header = ["setting", "task", "per layer: FC precision (theta2, theta1) ; CONV precision"]
    return pd.DataFrame(rows, columns=header)


WEIGHT_TENSORS = {"f-fc+conv": 2, "fc+conv": 1}
"""How many weight tensors lead an FC path's tensors in a run's JSON, per model: F-FC's
input and output maps (``theta2``, ``theta1``), FC's one weight; biases follow them."""


def weight_precision_table(folders: list[Path], task: str = "shifted-digits") -> pd.DataFrame:
    """Per layer and folder, ranges over the seeds of: the FC path's weight precisions (every
    weight tensor's), their squared norms, and the FC relative effective parameters; after
    them each folder's test accuracy. For telling an F-FC path's bounded precisions from an
    unfactored FC path's growing ones (docs/learned_structure.md).

    Raises:
        ValueError: If a folder has no run of ``task`` or a model without an entry in
            :data:`WEIGHT_TENSORS`.
    """

    def spread(values: list[float]) -> str:
        low, high = min(values), max(values)
        return f"{low:.1e}" if f"{low:.1e}" == f"{high:.1e}" else f"{low:.1e} - {high:.1e}"

    table_rows = []
    for folder in folders:
        runs = task_runs(folder, task)
        if not runs:
            raise ValueError(f"no run of {task} under {folder}")
        model = runs[0]["settings"]["model"]
        if model not in WEIGHT_TENSORS:
            raise ValueError(f"{folder}: no weight tensors known for model {model!r}")
        weights = WEIGHT_TENSORS[model]
        label = model if folder.name == model else f"{folder.name} ({model})"
        accuracy = mean_std([r["test_accuracy"] for r in runs], 100)
        for i, layer in enumerate(runs[0]["layers"]):
            rows = [r["layers"][i] for r in runs]
            precision = [p for row in rows for p in row["fc_prior_precision"][:weights]]
            norm = [sum(row["fc_squared_norm"][:weights]) for row in rows]
            relative = [row["fc_relative"] for row in rows]
            table_rows.append(
                [label, accuracy, layer["layer"], spread(precision), spread(norm), spread(relative)]
            )
    header = "runs | test accuracy % | layer | FC weight precision | FC weights' squared norm"
    return pd.DataFrame(table_rows, columns=[*header.split(" | "), "FC relative eff. params"])


def precisions_above(
    folder: Path, threshold: float = 1e6, task: str = "shifted-digits"
) -> tuple[int, int]:
    """How many (seed, layer) pairs under ``folder`` have an FC weight precision (the largest of
    the path's weight tensors') above ``threshold``, and how many pairs there are."""
    runs = task_runs(folder, task)
    weights = WEIGHT_TENSORS[runs[0]["settings"]["model"]]
    largest = [max(layer["fc_prior_precision"][:weights]) for r in runs for layer in r["layers"]]
    return sum(p > threshold for p in largest), len(largest)


def long_schedule_table() -> pd.DataFrame:
    """:func:`weight_precision_table` of the runs at the paper's schedule, F-FC+CONV first."""
    return weight_precision_table([LONG_SCHEDULE_RESULTS / m for m in WEIGHT_TENSORS])


def fixed_weight_table(folders: list[Path]) -> pd.DataFrame:
    """The exact-GGN runs' FC shares at fixed weights under each curvature (largest over seeds);
    no row where no run compared them."""
    rows = []
    for folder in folders:
        for task in KNOWN_TRUTH_TASKS:
            runs = task_runs(folder, task)
            runs = [r for r in runs if "fixed_weight_fc_shares" in r]
            if not runs:
                continue
            for curvature in runs[0]["fixed_weight_fc_shares"]:
                shares = zip(*(r["fixed_weight_fc_shares"][curvature] for r in runs), strict=True)
                cells = " / ".join(f"{max(layer):.3f}" for layer in shares)
                rows.append(
                    [folder.name, task, str(len(runs)), str(runs[0]["evaluated_epoch"])]
                    + [curvature, cells]
                )
    header = "weights from | task | seeds | epochs | curvature at fixed weights"
    return pd.DataFrame(
        rows, columns=[*header.split(" | "), "FC share per layer, largest over seeds"]
    )


def _seed_by_seed(runs: list[dict[str, Any]], largest: Any) -> str:
    """``largest(run)`` of each run (seed order), three decimals, joined by " / "."""
    return " / ".join(f"{largest(run):.3f}" for run in runs)


def rotation_table(folders: list[Path]) -> pd.DataFrame:
    """The rotation tasks' table: one row per (folder, task), seeds pooled.

    Columns: the setting (the folder's name), the paths its start kept, the task, seeds, test
    accuracy and turn-consistent predictions (%, mean ± std), and seed by seed the CONV
    paths' largest relative effective parameters over the layers (learned runs) and their
    largest share of a layer's output energy on the test images (relaxed runs); last the
    largest FC relative effective parameters of any layer and seed.
    """
    rows = []
    for folder, task, runs in _folder_task_runs(folders, KNOWN_TRUTH_ROTATION_TASKS):
        kept = runs[0]["settings"].get("kept_paths")
        conv, output, fc = "(MAP)", "-", "-"
        if runs[0]["layers"]:
            conv = _seed_by_seed(runs, lambda r: max(x["conv_relative"] for x in r["layers"]))
            fc = f"{max(x['fc_relative'] for r in runs for x in r['layers']):.3f}"
        if "output_shares" in runs[0]:
            output = _seed_by_seed(
                runs, lambda r: max(x["paths"]["conv"] for x in r["output_shares"])
            )
        rows.append(
            [folder.name, " + ".join(kept) if kept else "-", task, str(len(runs))]
            + [mean_std([r["test_accuracy"] for r in runs], 100)]
            + [mean_std([r["turn_consistency"] for r in runs], 100), conv, output, fc]
        )
    header = "setting | start keeps | task | seeds | test accuracy (%) | turn-consistent (%)"
    header += " | CONV share, largest over layers, seed by seed | CONV output share, largest"
    header += " over layers, seed by seed | FC share, largest"
    return pd.DataFrame(rows, columns=header.split(" | "))


def tables() -> list[pd.DataFrame]:
    """The tables of the digit and Fashion-MNIST tasks (:data:`TABLE_ORDER`), of their
    precisions and of the fixed weights (where any run compared them), as
    docs/learned_structure.md shows them."""
    folders = [RESULTS / name for name in TABLE_ORDER if (RESULTS / name).is_dir()]
    parts = (table(folders), precision_table(folders), fixed_weight_table([FIXED]))
    return [part for part in parts if not part.empty]


def rotation_tables() -> pd.DataFrame:
    """The rotation tasks' table (:data:`ROTATION_ORDER` under :data:`ROTATION_RESULTS`)."""
    return rotation_table(
        [ROTATION_RESULTS / n for n in ROTATION_ORDER if (ROTATION_RESULTS / n).is_dir()]
    )
