"""Figures of a row of training runs: ``{{KIND FOLDER MODEL METHOD [filters]}}``.

:data:`KINDS` are over the row's seeds, :data:`RANGES` over seeds and layers; the package's
docstring lists them.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable

from benchmarks.generated_docs.common import RESULTS
from benchmarks.generated_docs.figures.common import (
    count_list,
    layer_slice,
    scientific,
    seed_list,
    span,
)
from laplace_equivariance.app import summary

RANGE_OPTIONS = (
    "path",
    "layers",
    "digits",
    "percent",
    "epoch",
    "from",
    "seed",
    "change",
    "level",
    "pick",
    "tensor",
)
"""Keys of a placeholder that choose what a range family takes, not which runs (``seed=N``:
that seed's run alone)."""


def _path_values(
    row: summary.Row, options: dict[str, str], output: bool, field: str = "relative"
) -> list[float]:
    """A path's output shares (in %) or its ``field`` of the symmetry report (relative effective
    parameters; ``"effective"``, their number), every seed and layer.

    Raises:
        ValueError: If a run lacks the path in a chosen layer, or the layers choose none.
    """
    path, layers = options.get("path", "fc"), layer_slice(options.get("layers"))
    values = []
    for result in row.results:
        chosen = (result["path_outputs"] if output else result["symmetry"]["layers"])[layers]
        for layer in chosen:
            if path not in layer["paths"]:
                raise ValueError(f"{layer['layer']} has no path {path!r}: {sorted(layer['paths'])}")
            value = layer["paths"][path]
            values.append(100 * value if output else value[field])
    if options.get("percent") == "yes" and not output:
        values = [100 * value for value in values]
    if not values:
        raise ValueError(f"layers={options.get('layers')} chooses no layer.")
    return values


def _fit_values(result: dict, options: dict[str, str]) -> list[float]:
    """A path's output share in % at the fits of one run that ``epoch=`` or ``from=`` choose.

    Raises:
        ValueError: If the run recorded no fit at those epochs.
    """
    path, layers = options.get("path", "fc"), layer_slice(options.get("layers"))
    if "epoch" in options:
        chosen = [f for f in result["fits"] if f["epoch"] == int(options["epoch"])]
    else:
        chosen = [f for f in result["fits"] if f["epoch"] >= int(options.get("from", 0))]
    if not chosen:
        raise ValueError(f"no fit at epoch={options.get('epoch')} from={options.get('from')}.")
    return [100 * layer["paths"][path] for f in chosen for layer in f["path_outputs"][layers]]


def _fit_range(row: summary.Row, options: dict[str, str]) -> list[float]:
    """:func:`_fit_values` of every seed."""
    return [value for result in row.results for value in _fit_values(result, options)]


def _output_seeds(row: summary.Row, options: dict[str, str]) -> str:
    """Per seed, ``a / b / c``, the largest (``pick=least``: the smallest) output share in %
    of a path over the layers chosen."""
    pick = min if options.get("pick") == "least" else max
    digits = int(options.get("digits", 1))
    return " / ".join(
        f"{pick(_path_values(summary.Row([result]), options, True)):.{digits}f}"
        for result in row.results
    )


def _fit_at(result: dict, epoch: str | None) -> dict:
    """The run's fit after epoch ``epoch``, or its last.

    Raises:
        ValueError: If the run recorded no fit at that epoch.
    """
    if epoch is None:
        return result["fits"][-1]
    for fit in result["fits"]:
        if fit["epoch"] == int(epoch):
            return fit
    raise ValueError(f"no fit at epoch={epoch}: {[f['epoch'] for f in result['fits']]}.")


def _last_fit_range(field: str, label: str) -> Callable[[summary.Row, dict[str, str]], str]:
    """A family: ``lo-hi`` of ``field`` (``prior_precision``, ``squared_norm``) at every seed's
    last fit (or the fit after ``epoch=``), of the tensors whose names end in ``tensor=``
    (default ``fc.input_map.weight``) in the layers chosen, written ``1e2-4e4``."""

    def render(row: summary.Row, options: dict[str, str]) -> str:
        suffix = options.get("tensor", "fc.input_map.weight")
        layers = range(1, 100)[layer_slice(options.get("layers"))]
        values = [
            value
            for result in row.results
            for name, value in _fit_at(result, options.get("epoch"))[field].items()
            if name.endswith(suffix) and int(name.split(".")[0].removeprefix("layer")) in layers
        ]
        if not values:
            raise ValueError(f"no {label} of a tensor ending in {suffix!r} in those layers.")
        low, high = scientific(min(values)), scientific(max(values))
        return low if low == high else f"{low}-{high}"

    return render


def _effective_means(row: summary.Row, options: dict[str, str]) -> str:
    """Per layer chosen, ``a / b / c``, a path's effective parameters, mean over the seeds."""
    layers = layer_slice(options.get("layers"))
    path, digits = options.get("path", "fc"), int(options.get("digits", 0))
    per_seed = [
        [layer["paths"][path]["effective"] for layer in result["symmetry"]["layers"][layers]]
        for result in row.results
    ]
    means = (statistics.mean(values) for values in zip(*per_seed, strict=True))
    return " / ".join(f"{mean:,.{digits}f}" for mean in means)


def _fit_changes(row: summary.Row, options: dict[str, str]) -> str:
    """How many (layer, seed) pairs' path output share went ``change=`` ``up``, ``down`` or
    stayed ``level`` (within ``level=`` points, default 5) from the first fit to the last.

    Raises:
        ValueError: If ``change=`` is none of the three.
    """
    change, level = options.get("change"), float(options.get("level", 5))
    if change not in ("up", "down", "level"):
        raise ValueError(f"change={change!r}: say change=up, change=down or change=level.")
    path, layers = options.get("path", "fc"), layer_slice(options.get("layers"))
    count = 0
    for result in row.results:
        first, last = result["fits"][0]["path_outputs"], result["fits"][-1]["path_outputs"]
        for before, after in zip(first[layers], last[layers], strict=True):
            delta = 100 * (after["paths"][path] - before["paths"][path])
            kind = "level" if abs(delta) < level else "up" if delta > 0 else "down"
            count += kind == change
    return str(count)


RANGES: dict[str, Callable[[summary.Row, dict[str, str]], str]] = {
    "share_range": lambda row, o: span(_path_values(row, o, False), int(o.get("digits", 2))),
    "share_max": lambda row, o: f"{max(_path_values(row, o, False)):.{int(o.get('digits', 2))}f}",
    "output_range": lambda row, o: span(_path_values(row, o, True), int(o.get("digits", 1))),
    "output_max": lambda row, o: f"{max(_path_values(row, o, True)):.{int(o.get('digits', 1))}f}",
    "effective_range": lambda row, o: span(
        _path_values(row, o, False, "effective"), int(o.get("digits", 0))
    ),
    "fit_output_range": lambda row, o: span(_fit_range(row, o), int(o.get("digits", 0))),
    "fit_output_max": lambda row, o: f"{max(_fit_range(row, o)):.{int(o.get('digits', 0))}f}",
    "fit_output_changes": _fit_changes,
    "output_seeds": _output_seeds,
    "effective_means": _effective_means,
    "precision_range": _last_fit_range("prior_precision", "prior precision"),
    "norm_range": _last_fit_range("squared_norm", "squared norm"),
    "fit_output_seeds": lambda row, o: " / ".join(
        f"{max(_fit_values(result, o)):.{int(o.get('digits', 0))}f}" for result in row.results
    ),
}
"""Families over seeds and layers, with their :data:`RANGE_OPTIONS`."""


def _fc_shares(result: dict, layers: slice = slice(None)) -> list[float]:
    """The FC path's relative effective parameters per relaxed layer (App. D)."""
    rows = result["symmetry"]["layers"][layers]
    return [row["paths"].get("fc", {}).get("relative", 0.0) for row in rows]


KINDS: dict[str, Callable[[summary.Row], str]] = {
    "acc": lambda row: summary.mean_std(row.accuracy()),
    "acc_seeds": lambda row: seed_list(row.accuracy()),
    "acc_range": lambda row: span(row.accuracy(), 0),
    "run_minutes": lambda row: span([r["train_seconds"] / 60 for r in row.results], 0),
    "nll": lambda row: summary.mean_std(row.nll(), digits=2),
    "train_acc": lambda row: summary.mean_std(row.accuracy("train")),
    "marglik_seeds": lambda row: seed_list([r["neg_log_marglik"][-1] for r in row.results], 0),
    "marglik_per_example": lambda row: summary.mean_std(
        row.neg_log_marglik_per_example(), digits=2
    ),
    "paths_off": lambda row: count_list(row.paths_off()),
    "fc_off_first_six": lambda row: count_list(
        [sum(share < 0.01 for share in _fc_shares(r, slice(0, 6))) for r in row.results]
    ),
    "fc_output_off": lambda row: count_list(
        [sum(layer["paths"]["fc"] < 0.01 for layer in r["path_outputs"]) for r in row.results]
    ),
}
"""What each kind of placeholder renders from its row."""


def named_row(spec: str) -> summary.Row:
    """The one row of runs a placeholder's ``FOLDER MODEL METHOD [key=value ...]`` names;
    ``seeds=0,1,2`` keeps those seeds' runs of it (to set it beside rows of those seeds);
    ``frozen=conv,fc`` (or ``none``) picks the runs of ``benchmarks.frozen_paths`` with those
    paths frozen (in sorted order).

    Raises:
        ValueError: If the folder has no runs, the spec picks no row or several, or the row
            lacks a seed that ``seeds=`` names.
    """
    folder, model, method, *filters = spec.split()
    runs = sorted(p.parent for p in (RESULTS / folder).rglob("results.json"))
    if not runs:
        raise ValueError(f"{{{{... {spec}}}}}: benchmarks/results/{folder} holds no run.")
    wanted = dict(f.split("=", 1) for f in filters) | {"model": model, "method": method}
    seeds = wanted.pop("seeds", None)
    frozen = wanted.pop("frozen", None)
    found = [
        row
        for row in summary.rows(runs)
        if all(str((summary.LATER_OPTIONS | row.settings).get(k)) == v for k, v in wanted.items())
        and frozen in (None, ",".join(row.results[0].get("frozen_paths") or []) or "none")
    ]
    if len(found) != 1:
        raise ValueError(
            f"{{{{... {spec}}}}} picks {len(found)} rows of benchmarks/results/{folder}, not "
            "one: name the row with key=value filters (dataset=, start=, ...)."
        )
    if seeds is None:
        return found[0]
    kept = [int(seed) for seed in seeds.split(",")]
    by_seed = {r["settings"]["seed"]: r for r in found[0].results}
    missing = sorted(set(kept) - set(by_seed))
    if missing:
        raise ValueError(
            f"{{{{... {spec}}}}}: the row has no run of seed(s) {missing}; it has "
            f"{sorted(by_seed)}."
        )
    return summary.Row([by_seed[seed] for seed in kept])


def seed_row(row: summary.Row, seed: str | None) -> summary.Row:
    """``row`` itself, or its run of ``seed`` alone.

    Raises:
        ValueError: If the row has no run of that seed.
    """
    if seed is None:
        return row
    runs = [r for r in row.results if str(r["settings"]["seed"]) == seed]
    if not runs:
        seeds = [r["settings"]["seed"] for r in row.results]
        raise ValueError(f"seed={seed} is not among the row's seeds {seeds}.")
    return summary.Row(runs)
