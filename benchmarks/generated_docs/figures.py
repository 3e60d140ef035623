"""Measured figures in the docs' prose, rendered from the committed runs.

A sentence names its figure by what it measures, not by its value::

    "at {{acc table1-digit-4000-150ep-held f-fc+conv marglik}} % test"

becomes ``"at 93.8 ± 1.0 % test"``, computed from the ``results.json`` of the runs under
``benchmarks/results/table1-digit-4000-150ep-held`` whose model and method are those named.
A placeholder is ``{{KIND FOLDER MODEL METHOD [key=value ...]}}``; the keys filter the row
further (``dataset``, ``start``, ``kfac_approx``, ``burnin``, and any other setting; ``frozen=``
for the paths ``benchmarks.frozen_paths`` froze, ``conv,fc`` or ``none``), and the row they
pick must be unique. Kinds:

- ``acc``: test accuracy in %, mean ± std over seeds; ``acc_seeds``: per seed, ``a / b / c``;
  ``acc_range``: lowest-highest over the seeds, whole percents; ``run_minutes``: a run's
  training time (``train_seconds``) in minutes, lowest-highest over the seeds;
- ``nll``: test NLL, mean ± std; ``train_acc``: training accuracy in %, mean ± std;
- ``marglik_seeds``: the last ``-log marglik`` per seed, whole numbers;
  ``marglik_per_example``: ``-log marglik / N``, mean ± std;
- per seed as ``a, b and c``: ``paths_off`` (paths under 1 % of their layer's relative
  effective parameters), ``fc_off_first_six`` (of layers 1-6, those whose FC path is under 1 %
  of them), ``fc_output_off`` (layers whose FC path carries under 1 % of the output);
- over every seed and the layers chosen, as ``lo-hi`` (one value once): ``share_range`` (a
  path's relative effective parameters, App. D) and ``output_range`` (its share of its
  layer's output energy, in %); ``share_max`` and ``output_max``, the largest of them.
  Options, not filters: ``path=`` (default ``fc``), ``layers=7`` or ``layers=1-6`` (numbered
  from 1 over the relaxed layers; default all), ``digits=`` (decimals; default 2 for
  shares, 1 for outputs) and ``percent=yes`` (shares in %); ``effective_range``, the path's
  number of effective parameters (digits default 0), and ``effective_means``, their mean over
  the seeds per layer chosen, ``a / b / c``;
- over the fits that ``train`` records (a run's ``fits``, one per marginal-likelihood fit):
  ``fit_output_range`` and ``fit_output_max``, a path's output share in % at the fit after
  epoch ``epoch=E``, or at every fit from ``from=E`` on, over seeds and ``layers=``;
  ``fit_output_seeds``, the largest per seed, ``a / b / c`` (``digits=``, default 0).
  ``fit_output_changes``, how many (layer, seed) pairs' output share went ``change=up``,
  ``down`` or stayed ``level`` (within ``level=`` points, default 5) from the first fit to
  the last. Every range family takes ``seed=N`` to render that seed's run alone;
- ``output_seeds``: per seed ``a / b / c``, a path's largest output share in % over the
  layers chosen (``pick=least``: the smallest; ``digits=``, default 1);
- ``precision_range`` and ``norm_range``: ``lo-hi`` of the prior precisions (the squared
  norms) at every seed's last fit (``epoch=E``: the fit after epoch E) of the tensors whose
  names end in ``tensor=`` (default ``fc.input_map.weight``) in the layers chosen, written
  ``1e2-4e4``.

Measurements of trained runs made afterwards (``benchmarks/shift_errors.py``) are named by
their file under benchmarks/results, ``{{KIND FILE [key=value ...]}}`` with ``FILE`` without
``.json``: ``shift_range`` and ``shift_max`` over every run and the layers chosen, of the
layer's distance from equivariance to the quadrant shifts, or with ``path=fc`` (or ``conv``)
that path's (``of=share``: the path's output share instead, a fraction); ``layers=`` and
``digits=`` (default 2) as above; ``unchanged_range``: the predictions unchanged by the
diagonal shift, in %, over the runs (``digits=``, default 0). ``run=N`` takes the N-th run
alone (runs in seed order), ``percent=yes`` gives shares in %.

The runs of ``benchmarks/known_truth.py`` (``benchmarks/results/known-truth/SETTING``, for
the rotation tasks ``known-truth-rotation/SETTING``) are named
``{{KIND SETTING TASK [layers=A-B] [digits=N]}}``: ``known_acc``, test accuracy in %,
``known_shift`` and ``known_turn``, the test predictions unchanged by circular shifts or by
quarter turns in %, mean ± std over the seeds (digits default 1); ``known_fc_max`` and
``known_conv_max``, the largest FC or CONV share (relative effective parameters) over the
seeds and the layers chosen (default all; digits default 3).

``benchmarks/evidence_split.py``'s files are named ``{{KIND FILE [filters] [options]}}``
(filters: settings such as ``model=``, ``start=``, ``lr=``, and ``frozen=fc`` or ``none``; one
run a seed must remain): ``split_seeds``, per seed ``a / b / c`` nats of ``part=`` ``fc`` or
``conv`` (a path type's prior and Occam terms over ``layers=``), ``data``, ``head`` or
``total`` (the default); ``split_gamma_range``, a ``path=``'s effective parameters over the
seeds and ``layers=``, ``lo-hi``.

Two rows compare as ``{{acc_diff ROW vs ROW}}`` (each ``FOLDER MODEL METHOD [filters]``): the
first's mean test accuracy less the second's, in points with its sign; ``{{acc_span ROW ;
ROW ; ...}}``, the lowest and highest of several rows' mean test accuracies;
``{{acc_seed_diff ROW vs ROW}}`` and ``{{marglik_seed_diff ROW vs ROW}}``, per seed the first
row's test accuracy (points) or last ``-log marglik`` (nats) less the second's, ``lo to hi``.

Any other committed JSON under benchmarks/results (timings, tables of benchmark scripts) is
read by ``{{value FILE KEY/KEY/... [digits=N] [percent=yes]}}``: the number at that path,
where a step is a key, a list index, or ``field=value`` (the one element of a list whose
``field`` is ``value``), e.g. ``{{value fit_over_epoch-cpu rows/model=f-fc+conv/exact/
fit_over_epoch digits=1}}`` (without the line break).

So a figure is stated where it is measured: when runs change, the rendered page changes with
them (and the staleness test fails until it is regenerated), and a figure whose runs are gone
cannot be rendered at all.
"""

from __future__ import annotations

import json
import re
import statistics
from collections.abc import Callable
from pathlib import Path
from typing import Any

from benchmarks.generated_docs.common import RESULTS
from laplace_equivariance import summary
from laplace_equivariance.known_truth_tasks import KNOWN_TRUTH_ROTATION_TASKS

PLACEHOLDER = re.compile(r"\{\{(\w+)\s+([^{}]+)\}\}")


def _seeds(values: list[float], digits: int = 1) -> str:
    return " / ".join(f"{v:,.{digits}f}" for v in values)


def _counts(values: list[int]) -> str:
    """Per-seed counts as prose: ``"5, 6 and 6"``."""
    words = [str(v) for v in values]
    return ", ".join(words[:-1]) + " and " + words[-1] if len(words) > 1 else "".join(words)


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


def _layers(spec: str | None) -> slice:
    """``"7"`` -> layer 7 alone, ``"1-6"`` -> layers 1 to 6 (numbered from 1), None -> all."""
    if spec is None:
        return slice(None)
    first, _, last = spec.partition("-")
    return slice(int(first) - 1, int(last or first))


def _path_values(
    row: summary.Row, options: dict[str, str], output: bool, field: str = "relative"
) -> list[float]:
    """A path's output shares (in %) or its ``field`` of the symmetry report (relative effective
    parameters; ``"effective"``, their number), every seed and layer.

    Raises:
        ValueError: If a run lacks the path in a chosen layer, or the layers choose none.
    """
    path, layers = options.get("path", "fc"), _layers(options.get("layers"))
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


def _span(values: list[float], digits: int) -> str:
    """``"lo-hi"`` at ``digits`` decimals, one value where both round alike."""
    low, high = f"{min(values):,.{digits}f}", f"{max(values):,.{digits}f}"
    return low if low == high else f"{low}-{high}"


def _fit_values(result: dict, options: dict[str, str]) -> list[float]:
    """A path's output share in % at the fits of one run that ``epoch=`` or ``from=`` choose.

    Raises:
        ValueError: If the run recorded no fit at those epochs.
    """
    path, layers = options.get("path", "fc"), _layers(options.get("layers"))
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


def _scientific(value: float) -> str:
    """``2.8e5``, ``164``, ``6.5``, ``5e-5``: two significant digits below 100 (whole numbers
    from 100), with an exponent outside ``[0.01, 1e4)``."""
    if 100 <= value < 1e4:
        return f"{value:,.0f}"
    if 0.01 <= value < 100:
        return f"{value:.2g}"
    mantissa, exponent = f"{value:.1e}".split("e")
    return f"{mantissa.rstrip('0').rstrip('.')}e{int(exponent)}"


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
        layers = range(1, 100)[_layers(options.get("layers"))]
        values = [
            value
            for result in row.results
            for name, value in _fit_at(result, options.get("epoch"))[field].items()
            if name.endswith(suffix) and int(name.split(".")[0].removeprefix("layer")) in layers
        ]
        if not values:
            raise ValueError(f"no {label} of a tensor ending in {suffix!r} in those layers.")
        low, high = _scientific(min(values)), _scientific(max(values))
        return low if low == high else f"{low}-{high}"

    return render


def _effective_means(row: summary.Row, options: dict[str, str]) -> str:
    """Per layer chosen, ``a / b / c``, a path's effective parameters, mean over the seeds."""
    layers = _layers(options.get("layers"))
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
    path, layers = options.get("path", "fc"), _layers(options.get("layers"))
    count = 0
    for result in row.results:
        first, last = result["fits"][0]["path_outputs"], result["fits"][-1]["path_outputs"]
        for before, after in zip(first[layers], last[layers], strict=True):
            delta = 100 * (after["paths"][path] - before["paths"][path])
            kind = "level" if abs(delta) < level else "up" if delta > 0 else "down"
            count += kind == change
    return str(count)


RANGES: dict[str, Callable[[summary.Row, dict[str, str]], str]] = {
    "share_range": lambda row, o: _span(_path_values(row, o, False), int(o.get("digits", 2))),
    "share_max": lambda row, o: f"{max(_path_values(row, o, False)):.{int(o.get('digits', 2))}f}",
    "output_range": lambda row, o: _span(_path_values(row, o, True), int(o.get("digits", 1))),
    "output_max": lambda row, o: f"{max(_path_values(row, o, True)):.{int(o.get('digits', 1))}f}",
    "effective_range": lambda row, o: _span(
        _path_values(row, o, False, "effective"), int(o.get("digits", 0))
    ),
    "fit_output_range": lambda row, o: _span(_fit_range(row, o), int(o.get("digits", 0))),
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
        for layer in run["layers"][_layers(options.get("layers"))]:
            value = layer[of] if path is None else layer["paths"][path][of]
            if value is not None:
                values.append(value)
    if not values:
        raise ValueError(f"no {of} in layers={options.get('layers')} (path={path}).")
    return [100 * v for v in values] if options.get("percent") == "yes" else values


MEASURED: dict[str, Callable[[dict, dict[str, str]], str]] = {
    "shift_range": lambda m, o: _span(_shift_values(m, o), int(o.get("digits", 2))),
    "shift_max": lambda m, o: f"{max(_shift_values(m, o)):.{int(o.get('digits', 2))}f}",
    "unchanged_range": lambda m, o: _span(
        [100 * run["prediction_unchanged"] for run in m["runs"]], int(o.get("digits", 0))
    ),
}
"""Families over a measurement file's runs, with their :data:`MEASURED_OPTIONS`."""


def _options(words: list[str], allowed: tuple[str, ...]) -> dict[str, str]:
    """``key=value`` words as a dict.

    Raises:
        ValueError: If a key is not one of ``allowed``.
    """
    options = dict(w.split("=", 1) for w in words)
    unknown = sorted(set(options) - set(allowed))
    if unknown:
        raise ValueError(f"unknown keys {unknown}; keys: {list(allowed)}.")
    return options


def _results_file(name: str) -> Any:
    """The JSON of ``benchmarks/results/NAME.json``.

    Raises:
        ValueError: If there is no such file.
    """
    path = RESULTS / f"{name}.json"
    if not path.exists():
        raise ValueError(f"benchmarks/results/{name}.json does not exist.")
    return json.loads(path.read_text())


def _measured(kind: str, spec: str) -> str:
    """A measurement family's figure from ``FILE [key=value ...]``.

    Raises:
        ValueError: For a missing file, an unknown key, or no value to render.
    """
    name, *words = spec.split()
    options = _options(words, MEASURED_OPTIONS)
    return MEASURED[kind](_results_file(name), options)


def _known_truth(spec: str) -> tuple[list[dict], dict[str, str]]:
    """The seeds of ``SETTING TASK`` under benchmarks/results/known-truth, and the options.

    Raises:
        ValueError: If the folder holds no seed of the task, or an option is unknown.
    """
    setting, task, *words = spec.split()
    options = _options(words, ("layers", "digits"))
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
        layers = _layers(options.get("layers"))
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
    options = _options(words, VALUE_OPTIONS)
    node = _results_file(name)
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
    measured = _results_file(name)

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
    names = list(run["layers"])[_layers(options.get("layers"))]
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
        for n in list(run["layers"])[_layers(options.get("layers"))]
    ]
    return _span(values, int(options.get("digits", 0)))


def _signed(value: float, digits: int) -> str:
    """``+1.4`` or ``\u22121.4`` (a minus sign, not a hyphen), thousands separated."""
    return f"{value:+,.{digits}f}".replace("-", "\u2212")


def _acc_diff(spec: str) -> str:
    """``ROW vs ROW``: the first row's mean test accuracy less the second's, in points, signed.

    Raises:
        ValueError: Unless the spec is two row specs joined by ``vs``.
    """
    specs = " ".join(spec.split()).split(" vs ")
    if len(specs) != 2:
        raise ValueError("name two rows: {{acc_diff FOLDER MODEL METHOD ... vs FOLDER ...}}.")
    first, second = (statistics.mean(_row(s).accuracy()) for s in specs)
    return _signed(first - second, 1)


def _seed_differences(field: Callable[[summary.Row], list[float]], digits: int):
    """A family ``ROW vs ROW``: per seed the first row's ``field`` less the second's, ``lo-hi``
    with signs (the rows' runs paired in seed order).

    Raises:
        ValueError: Unless the spec is two rows of the same seeds.
    """

    def render(spec: str) -> str:
        specs = " ".join(spec.split()).split(" vs ")
        if len(specs) != 2:
            raise ValueError("name two rows: {{... FOLDER MODEL METHOD ... vs FOLDER ...}}.")
        rows = [_row(s) for s in specs]
        seeds = [[r["settings"]["seed"] for r in row.results] for row in rows]
        if seeds[0] != seeds[1]:
            raise ValueError(f"the rows' seeds differ: {seeds[0]} and {seeds[1]}.")
        differences = [a - b for a, b in zip(field(rows[0]), field(rows[1]), strict=True)]
        low, high = (_signed(v, digits) for v in (min(differences), max(differences)))
        return low if low == high else f"{low} to {high}"

    return render


def _acc_span(spec: str) -> str:
    """``ROW ; ROW ; ...``: the lowest and highest of the rows' mean test accuracies, ``lo-hi``.

    Raises:
        ValueError: Unless the spec names at least two rows.
    """
    specs = " ".join(spec.split()).split(" ; ")
    if len(specs) < 2:
        raise ValueError("name two rows or more: {{acc_span FOLDER MODEL METHOD ... ; ...}}.")
    return _span([statistics.mean(_row(s).accuracy()) for s in specs], 1)


OTHER_FILES: dict[str, Callable[[str], str]] = {
    "known_fc_max": _known_max("fc"),
    "known_conv_max": _known_max("conv"),
    "known_acc": _known_percent("test_accuracy"),
    "known_shift": _known_percent("shift_consistency"),
    "known_turn": _known_percent("turn_consistency"),
    "value": _value,
    "acc_diff": _acc_diff,
    "acc_span": _acc_span,
    "acc_seed_diff": _seed_differences(lambda row: row.accuracy(), 1),
    "marglik_seed_diff": _seed_differences(
        lambda row: [r["neg_log_marglik"][-1] for r in row.results], 0
    ),
    "split_seeds": _split_seeds,
    "split_gamma_range": _split_gamma_range,
}
"""Families over other committed JSON: ``{{known_fc_max SETTING TASK [layers=] [digits=]}}``,
``known_conv_max``, ``{{known_acc SETTING TASK}}``, ``known_shift`` and ``known_turn`` over a
``benchmarks.known_truth`` row's seeds, and
``{{value FILE PATH ...}}``."""


def _fc_shares(result: dict, layers: slice = slice(None)) -> list[float]:
    """The FC path's relative effective parameters per relaxed layer (App. D)."""
    rows = result["symmetry"]["layers"][layers]
    return [row["paths"].get("fc", {}).get("relative", 0.0) for row in rows]


KINDS: dict[str, Callable[[summary.Row], str]] = {
    "acc": lambda row: summary.mean_std(row.accuracy()),
    "acc_seeds": lambda row: _seeds(row.accuracy()),
    "acc_range": lambda row: _span(row.accuracy(), 0),
    "run_minutes": lambda row: _span([r["train_seconds"] / 60 for r in row.results], 0),
    "nll": lambda row: summary.mean_std(row.nll(), digits=2),
    "train_acc": lambda row: summary.mean_std(row.accuracy("train")),
    "marglik_seeds": lambda row: _seeds([r["neg_log_marglik"][-1] for r in row.results], 0),
    "marglik_per_example": lambda row: summary.mean_std(
        row.neg_log_marglik_per_example(), digits=2
    ),
    "paths_off": lambda row: _counts(row.paths_off()),
    "fc_off_first_six": lambda row: _counts(
        [sum(share < 0.01 for share in _fc_shares(r, slice(0, 6))) for r in row.results]
    ),
    "fc_output_off": lambda row: _counts(
        [sum(layer["paths"]["fc"] < 0.01 for layer in r["path_outputs"]) for r in row.results]
    ),
}
"""What each kind of placeholder renders from its row."""


def _row(spec: str) -> summary.Row:
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


def _seed_row(row: summary.Row, seed: str | None) -> summary.Row:
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


TABLE_MARKER = re.compile(r"^<!-- table: (\w+) -->$", re.M)
"""A line of a fragment that the generator fills with a computed table or sentence."""


def render_fragment(path: Path, **tables: str) -> str:
    """A Markdown fragment, its ``<!-- table: KEY -->`` lines replaced by ``tables[KEY]`` and its
    figures rendered.

    Raises:
        ValueError: For a table marker that ``tables`` does not fill, or a figure that cannot
            be rendered.
    """
    text = path.read_text()
    missing = sorted(set(TABLE_MARKER.findall(text)) - set(tables))
    if missing:
        raise ValueError(f"{path.name}: no content for its table markers {missing}.")
    return render(TABLE_MARKER.sub(lambda m: tables[m.group(1)], text))


def render(text: str) -> str:
    """``text`` with every placeholder replaced by its figure.

    Raises:
        ValueError: For an unknown kind, or a placeholder that picks no row or several.
    """

    def figure(match: re.Match) -> str:
        kind, spec = match.group(1), match.group(2)
        if kind in MEASURED:
            try:
                return _measured(kind, spec)
            except ValueError as error:
                raise ValueError(f"{match.group(0)}: {error}") from error
        if kind in OTHER_FILES:
            try:
                return OTHER_FILES[kind](spec)
            except ValueError as error:
                raise ValueError(f"{match.group(0)}: {error}") from error
        if kind in RANGES:
            words = spec.split()
            options = dict(w.split("=", 1) for w in words if w.split("=")[0] in RANGE_OPTIONS)
            rest = " ".join(w for w in words if w.split("=")[0] not in RANGE_OPTIONS)
            try:
                return RANGES[kind](_seed_row(_row(rest), options.get("seed")), options)
            except ValueError as error:
                raise ValueError(f"{match.group(0)}: {error}") from error
        if kind not in KINDS:
            kinds = sorted([*KINDS, *RANGES, *MEASURED, *OTHER_FILES])
            raise ValueError(f"{match.group(0)}: unknown kind {kind!r}; kinds: {kinds}.")
        return KINDS[kind](_row(spec))

    return PLACEHOLDER.sub(figure, text)
