"""Figures of benchmarks' measurements under benchmarks/results.

Shift errors (:data:`MEASURED`), and the known-truth runs, the evidence split and any other
committed JSON (:data:`OTHER_FILES`); the package's docstring lists the kinds.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from benchmarks.generated_docs.common import RESULTS
from benchmarks.generated_docs.figures.common import layer_slice, parse_options, results_file, span
from laplace_equivariance.app import summary
from laplace_equivariance.data.known_truth_tasks import KNOWN_TRUTH_ROTATION_TASKS

MEASURED_OPTIONS = ("path", "layers", "digits", "of", "run", "percent")
"""Keys of a measurement family's placeholder."""


def _shift_values(measured: dict, options: dict[str, str]) -> list[float]:
    """Shift errors (or output shares) of a layer or path, every run and chosen layer.

    Raises:
        ValueError: If the layers choose none, or none has a value (a path with no output).
    """
    path, of = options.get("path"), options.get("of", "shift_error")
    runs = measured["runs"]
    if "run" in options:
        runs = [runs[int(options["run"])]]
    values = []
    for run in runs:
        for layer in run["layers"][layer_slice(options.get("layers"))]:
            value = layer[of] if path is None else layer["paths"][path][of]
            if value is not None:
                values.append(value)
    if not values:
        raise ValueError(f"no {of} in layers={options.get('layers')} (path={path}).")
    return [100 * v for v in values] if options.get("percent") == "yes" else values


MEASURED: dict[str, Callable[[dict, dict[str, str]], str]] = {
    "shift_range": lambda m, o: span(_shift_values(m, o), int(o.get("digits", 2))),
    "shift_max": lambda m, o: f"{max(_shift_values(m, o)):.{int(o.get('digits', 2))}f}",
    "unchanged_range": lambda m, o: span(
        [100 * run["prediction_unchanged"] for run in m["runs"]], int(o.get("digits", 0))
    ),
}
"""Families over a measurement file's runs, with their :data:`MEASURED_OPTIONS`."""


def measured_figure(kind: str, spec: str) -> str:
    """A measurement family's figure from ``FILE [key=value ...]``.

    Raises:
        ValueError: For a missing file, an unknown key, or no value to render.
    """
    name, *words = spec.split()
    options = parse_options(words, MEASURED_OPTIONS)
    return MEASURED[kind](results_file(name), options)


def _known_truth(spec: str) -> tuple[list[dict], dict[str, str]]:
    """The seeds of ``SETTING TASK`` under benchmarks/results/known-truth, and the options.

    Raises:
        ValueError: If the folder holds no seed of the task, or an option is unknown.
    """
    setting, task, *words = spec.split()
    options = parse_options(words, ("layers", "digits"))
    suite = "known-truth-rotation" if task in KNOWN_TRUTH_ROTATION_TASKS else "known-truth"
    runs = [
        json.loads(p.read_text())
        for p in sorted((RESULTS / suite / setting).glob(f"{task}-seed*.json"))
    ]
    if not runs:
        raise ValueError(f"benchmarks/results/{suite}/{setting} has no {task} run.")
    return runs, options


def _known_max(path: str) -> Callable[[str], str]:
    """A family rendering the largest relative effective parameters of ``path`` over the
    seeds and ``layers=``."""

    def render(spec: str) -> str:
        runs, options = _known_truth(spec)
        layers = layer_slice(options.get("layers"))
        largest = max(row[f"{path}_relative"] for run in runs for row in run["layers"][layers])
        return f"{largest:.{int(options.get('digits', 3))}f}"

    return render


def _known_percent(field: str) -> Callable[[str], str]:
    """A family rendering a run's ``field`` (a fraction) in %, mean ± std over the seeds."""

    def render(spec: str) -> str:
        runs, options = _known_truth(spec)
        return summary.mean_std(
            [run[field] for run in runs], scale=100, digits=int(options.get("digits", 1))
        )

    return render


VALUE_OPTIONS = ("digits", "percent")
"""Keys of a ``value`` placeholder: decimals (default 2) and ``percent=yes`` (times 100)."""


def _step(node: Any, step: str, where: str) -> Any:
    """One step down a JSON tree: a key, a list index, or ``field=value`` (the one element of
    a list whose ``field`` is ``value``).

    Raises:
        ValueError: If the step names nothing, or several list elements.
    """
    if isinstance(node, list) and "=" in step:
        field, wanted = step.split("=", 1)
        found = [item for item in node if str(item.get(field)) == wanted]
        if len(found) != 1:
            raise ValueError(f"{where}: {step!r} picks {len(found)} elements, not one.")
        return found[0]
    if isinstance(node, list) and step.isdigit() and int(step) < len(node):
        return node[int(step)]
    if isinstance(node, dict) and step in node:
        return node[step]
    raise ValueError(f"{where}: no {step!r} there.")


def _value(spec: str) -> str:
    """A ``value`` placeholder's figure from ``FILE KEY/KEY/... [digits=N] [percent=yes]``:
    the number at that path of ``benchmarks/results/FILE.json``, thousands separated.

    Raises:
        ValueError: For a missing file, a path that names nothing, or a value not a number.
    """
    name, path, *words = spec.split()
    options = parse_options(words, VALUE_OPTIONS)
    node = results_file(name)
    for step in path.split("/"):
        node = _step(node, step, f"benchmarks/results/{name}.json {path}")
    if isinstance(node, bool) or not isinstance(node, (int, float)):
        raise ValueError(f"benchmarks/results/{name}.json {path} is {node!r}, not a number.")
    scale = 100 if options.get("percent") == "yes" else 1
    return f"{node * scale:,.{int(options.get('digits', 2))}f}"


SPLIT_OPTIONS = ("part", "path", "layers", "digits")
"""Keys of an evidence-split placeholder that choose what it takes, not which runs."""


def _split_runs(spec: str) -> tuple[list[dict[str, Any]], dict[str, str]]:
    """The runs of an evidence-split file ``FILE [filters] [options]``, one per seed in seed
    order: filters compare with each run's settings (``frozen=fc``, or ``none``, with the paths
    it froze).

    Raises:
        ValueError: For a missing file, no run, or several runs of one seed (filter further).
    """
    name, *words = spec.split()
    pairs = dict(w.split("=", 1) for w in words)
    options = {k: v for k, v in pairs.items() if k in SPLIT_OPTIONS}
    filters = {k: v for k, v in pairs.items() if k not in SPLIT_OPTIONS}
    measured = results_file(name)

    def value(run: dict[str, Any], key: str) -> str:
        if key == "frozen":
            return ",".join(run.get("frozen_paths") or []) or "none"
        return str((summary.LATER_OPTIONS | run["settings"]).get(key))

    runs = [run for run in measured["runs"] if all(value(run, k) == v for k, v in filters.items())]
    seeds = [run["settings"]["seed"] for run in runs]
    if not runs or len(set(seeds)) != len(seeds):
        raise ValueError(
            f"{filters} picks {len(runs)} runs of seeds {sorted(seeds)} in "
            f"benchmarks/results/{name}.json, not one a seed: filter by model=, start=, lr=, "
            "balance_factors=, frozen=, ..."
        )
    return sorted(runs, key=lambda run: run["settings"]["seed"]), options


def _split_part(run: dict[str, Any], options: dict[str, str]) -> float:
    """A run's nats in ``part``: a path type's prior and Occam terms over ``layers=``, the data
    term, the head's terms, or the whole ``-log marglik``."""
    part = options.get("part", "total")
    if part == "total":
        return run["neg_log_marglik"]
    if part == "data":
        return run["data"]
    if part == "head":
        return run["outside"]["prior"] + run["outside"]["occam"]
    names = list(run["layers"])[layer_slice(options.get("layers"))]
    return sum(
        run["layers"][n][part]["prior"] + run["layers"][n][part]["occam"]
        for n in names
        if part in run["layers"][n]
    )


def _split_seeds(spec: str) -> str:
    """Per seed, ``a / b / c`` nats of an evidence split (``part=``, ``layers=``)."""
    runs, options = _split_runs(spec)
    digits = int(options.get("digits", 0))
    return " / ".join(f"{_split_part(run, options):,.{digits}f}" for run in runs)


def _split_gamma_range(spec: str) -> str:
    """A path's effective parameters (``gamma``) over the seeds and ``layers=``, ``lo-hi``."""
    runs, options = _split_runs(spec)
    path = options.get("path", "conv")
    values = [
        run["layers"][n][path]["gamma"]
        for run in runs
        for n in list(run["layers"])[layer_slice(options.get("layers"))]
    ]
    return span(values, int(options.get("digits", 0)))


OTHER_FILES: dict[str, Callable[[str], str]] = {
    "known_fc_max": _known_max("fc"),
    "known_conv_max": _known_max("conv"),
    "known_acc": _known_percent("test_accuracy"),
    "known_shift": _known_percent("shift_consistency"),
    "known_turn": _known_percent("turn_consistency"),
    "value": _value,
    "split_seeds": _split_seeds,
    "split_gamma_range": _split_gamma_range,
}
"""Families over other committed JSON: ``{{known_fc_max SETTING TASK [layers=] [digits=]}}``,
``known_conv_max``, ``{{known_acc SETTING TASK}}``, ``known_shift`` and ``known_turn`` over a
``benchmarks.known_truth`` row's seeds, and
``{{value FILE PATH ...}}``."""
