"""Table 1 on 1,000 digits at the paper's schedule: does App. D's switched-off FC regime appear?

The paper (App. F.6) trains 1,000 epochs with a marginal-likelihood fit every 5 epochs after 10
of burn-in, and reports (App. D, Table 4) FC prior precisions above 1e6 and FC relative effective
parameters of 1e-8 to 3e-5 in the layers that became convolutional. The runs here are that
schedule on 1,000 training digits of each Table 1 task, learned F-FC+CONV from the held start,
one ``laplace-equivariance train`` run each (their commands: the results folder's README). Each
``results.json`` holds every fit (``fits``): per parameter tensor its prior precision
:math:`\\delta` and squared norm :math:`\\|\\theta\\|^2`, so at each fit, per layer:

- a path's *precision*: the largest :math:`\\delta` of its weight tensors (F-FC has two, its
  input and output maps; the path is switched off when either is);
- a path's *effective parameters*: MacKay's :math:`\\gamma = \\sum_t \\delta_t \\|\\theta_t\\|^2`
  over its tensors (the value at a fit's fixed point, as the run's own symmetry report computes
  it), and its *relative* effective parameters that over the layer's sum over paths (App. D).

``python -m studies.long_schedule --figure docs/figures/table1-1000-1000ep-fits.png`` draws, per
task, the FC path's precision and relative effective parameters of every layer fit by fit (log
scale, one line per layer and seed); the results page renders :func:`last_fit_table`,
:func:`precision_stall`, :func:`collapsed_pairs` and :func:`target_lines`.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "studies" / "results" / "table1-1000-1000ep"
TASKS = {"quadrant-mnist-digit": "digit task", "quadrant-mnist": "(digit, quadrant) task"}
PRECISION_TARGET = 1e6
"""App. D's FC prior precisions in the layers that became convolutional: above this."""
RELATIVE_TARGET = 1e-4
"""App. D's FC relative effective parameters there: below this (1e-8 to 3e-5 in Table 4)."""
OFF = 0.01
"""A path is off under this relative effective parameters (as the results pages count)."""


def learned_runs(task: str) -> list[dict]:
    """The learned runs of ``task`` (a data set name) under :data:`RESULTS`, in seed order."""
    found = [json.loads(p.read_text()) for p in sorted(RESULTS.glob("*/results.json"))]
    runs = [
        r
        for r in found
        if r["settings"]["dataset"] == task and r["settings"]["method"] == "marglik"
    ]
    return sorted(runs, key=lambda r: r["settings"]["seed"])


def fit_trace(run: dict) -> pd.DataFrame:
    """One row per fit and layer: ``seed``, ``epoch``, ``layer`` (1-based), and per path
    (``fc``, ``conv``) its ``precision``, ``effective`` and ``norm`` (the squared norm of its
    weight tensors together); ``fc_relative`` the FC share of the
    layer's effective parameters per parameter (normalised by the paths' parameter counts, as
    :func:`laplace_equivariance.symmetry_report` does)."""
    counts = {
        (number, path): entry["parameters"]
        for number, layer in enumerate(run["symmetry"]["layers"], 1)
        for path, entry in layer["paths"].items()
    }
    rows = []
    for fit in run["fits"]:
        paths: dict[tuple[int, str], dict[str, float]] = {}
        for name, precision in fit["prior_precision"].items():
            layer, path = (name.split(".") + [""])[:2]
            if not layer.startswith("layer") or not layer.removeprefix("layer").isdigit():
                continue  # the classifier head
            entry = paths.setdefault((int(layer.removeprefix("layer")), path), {})
            entry["effective"] = entry.get("effective", 0.0) + precision * fit["squared_norm"][name]
            if name.endswith("weight"):
                entry["precision"] = max(entry.get("precision", 0.0), precision)
                entry["norm"] = entry.get("norm", 0.0) + fit["squared_norm"][name]
        with_fc = {n for n, path in paths if path == "fc"}
        relaxed = with_fc & {n for n, path in paths if path == "conv"}
        for number in sorted(relaxed):
            row = {"seed": run["settings"]["seed"], "epoch": fit["epoch"], "layer": number}
            for path in ("fc", "conv"):
                row[f"{path}_precision"] = paths[number, path]["precision"]
                row[f"{path}_effective"] = paths[number, path]["effective"]
                row[f"{path}_norm"] = paths[number, path]["norm"]
            fc, conv = (row[f"{p}_effective"] / counts[number, p] for p in ("fc", "conv"))
            row["fc_relative"] = fc / (fc + conv)
            rows.append(row)
    return pd.DataFrame(rows)


def trace(task: str) -> pd.DataFrame:
    """:func:`fit_trace` of every learned run of ``task``."""
    runs = learned_runs(task)
    if not runs:
        raise FileNotFoundError(f"no learned run of {task} under {RESULTS}")
    return pd.concat([fit_trace(run) for run in runs], ignore_index=True)


STALLED = 0.01
"""An FC precision that moved by less than this fraction over the last 100 epochs has stopped."""


def _last_and_before(task: str, earlier: int) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The rows of every seed's last fit and of its fit ``earlier`` epochs before, indexed by
    ``(seed, layer)``."""
    frame = trace(task)
    final = frame.groupby("seed")["epoch"].transform("max")
    last = frame[frame["epoch"] == final].set_index(["seed", "layer"])
    return last, frame[frame["epoch"] == final - earlier].set_index(["seed", "layer"])


def _spread(values: pd.Series) -> str:
    """``"low - high"`` of ``values`` in scientific notation (one value where they agree)."""
    low, high = values.min(), values.max()
    return f"{low:.1e}" if low == high else f"{low:.1e} - {high:.1e}"


def last_fit_table(task: str, earlier: int = 100) -> pd.DataFrame:
    """Per layer at the last fit, over the seeds (ranges ``low - high``): the FC and CONV
    precisions, the FC weights' squared norm and relative effective parameters, and the factors
    of change of the FC precision and relative effective parameters over the last ``earlier``
    epochs (1: no longer moving)."""
    last, before = _last_and_before(task, earlier)

    precision_change = last["fc_precision"] / before["fc_precision"]
    relative_change = last["fc_relative"] / before["fc_relative"]
    rows = []
    for layer, group in last.groupby(level="layer"):
        rows.append(
            {
                "layer": layer,
                "FC precision": _spread(group["fc_precision"]),
                f"FC precision: last / {earlier} epochs earlier": _spread(
                    precision_change.xs(layer, level="layer")
                ),
                "CONV precision": _spread(group["conv_precision"]),
                "FC weights' squared norm": _spread(group["fc_norm"]),
                "FC relative eff. params": _spread(group["fc_relative"]),
                f"FC relative: last / {earlier} epochs earlier": _spread(
                    relative_change.xs(layer, level="layer")
                ),
            }
        )
    return pd.DataFrame(rows)


def precision_stall(task: str, earlier: int = 100) -> dict[str, dict[str, tuple[float, float]]]:
    """Where the FC precisions stopped: the (seed, layer) pairs whose FC precision moved by less
    than :data:`STALLED` over the last ``earlier`` epochs (``stalled``) and the others
    (``moving``), each with ``count`` (as a pair ``(n, n)``) and the ranges of its FC precisions,
    their factors of change and the FC weights' squared norms at the last fit."""
    last, before = _last_and_before(task, earlier)
    change = last["fc_precision"] / before["fc_precision"]
    stalled = (change - 1).abs() < STALLED
    summary = {}
    for name, chosen in (("stalled", stalled), ("moving", ~stalled)):
        summary[name] = {
            "count": (int(chosen.sum()), len(chosen)),
            "precision": (last["fc_precision"][chosen].min(), last["fc_precision"][chosen].max()),
            "change": (change[chosen].min(), change[chosen].max()),
            "norm": (last["fc_norm"][chosen].min(), last["fc_norm"][chosen].max()),
        }
    return summary


def collapsed_pairs(task: str, norm: float = 1e-6) -> tuple[int, int]:
    """Of the (seed, layer) pairs whose FC weights (both maps) have a squared norm under
    ``norm`` at the last fit, how many have FC relative effective parameters under
    :data:`RELATIVE_TARGET`, and how many there are."""
    last = _last_and_before(task, 0)[0]
    collapsed = last[last["fc_norm"] < norm]
    return int((collapsed["fc_relative"] < RELATIVE_TARGET).sum()), len(collapsed)


def target_lines(task: str) -> str:
    """App. D's two targets as verdict lines, in the layers whose FC path is off at the last fit
    (relative effective parameters under :data:`OFF`) in every seed."""
    last = _last_and_before(task, 0)[0].reset_index()
    layers = _converted_layers(task)
    name, seeds = TASKS[task], last["seed"].nunique()
    if not layers:
        return f"- {name}: no layer's FC path is off in every seed ({seeds}): fails"
    chosen = last[last["layer"].isin(layers)]
    high = int((chosen.groupby("layer")["fc_precision"].min() > PRECISION_TARGET).sum())
    low = int((chosen.groupby("layer")["fc_relative"].max() < RELATIVE_TARGET).sum())
    where = f"layers {', '.join(map(str, layers))} ({seeds} seed{'s' * (seeds > 1)})"
    return (
        f"- {name}, FC prior precision above 1e6 in the layers that became convolutional, "
        f"{where}: {'holds' if high == len(layers) else 'fails'} ({high} of {len(layers)})\n"
        f"- {name}, FC relative effective parameters below 1e-4 there: "
        f"{'holds' if low == len(layers) else 'fails'} ({low} of {len(layers)})"
    )


FITTED = ROOT / "studies" / "results" / "evidence-split" / "table1-1000-1000ep.json"
"""``studies.evidence_split`` of the learned runs: MacKay's ``gamma`` of every tensor from the
KFAC Laplace approximation fitted at the last fit's precisions and the final weights."""


def fitted_relative(task: str) -> pd.DataFrame:
    """Per seed and layer, the FC relative effective parameters at the end of the learned runs
    of ``task`` from the fitted approximation (:data:`FITTED`): ``all``, over every tensor of
    the paths (as :func:`fit_trace`, which estimates ``gamma`` by ``delta ||theta||^2``), and
    ``weights``, over the tensors named ``*weight`` alone (F-FC's channel and position biases
    and CONV's bias left out). Indexed by ``(seed, layer)``.

    Raises:
        FileNotFoundError: If :data:`FITTED` holds no run of ``task``.
    """
    runs = [r for r in json.loads(FITTED.read_text())["runs"] if r["settings"]["dataset"] == task]
    if not runs:
        raise FileNotFoundError(f"no run of {task} in {FITTED}: run studies.evidence_split")
    rows = []
    for run in runs:
        for name, paths in run["layers"].items():
            if not {"fc", "conv"} <= set(paths):
                continue
            row = {"seed": run["settings"]["seed"], "layer": int(name.removeprefix("layer"))}
            for kind, gamma, count in (
                ("all", "gamma", "parameters"),
                ("weights", "weight_gamma", "weight_parameters"),
            ):
                fc, conv = (paths[p][gamma] / paths[p][count] for p in ("fc", "conv"))
                row[kind] = fc / (fc + conv)
            rows.append(row)
    return pd.DataFrame(rows).set_index(["seed", "layer"]).sort_index()


def bias_parameters(task: str, layer: int) -> int:
    """How many of the FC path's parameters in ``layer`` (1-based) are biases, not weights, in
    the first run of ``task`` in :data:`FITTED`."""
    run = next(
        r for r in json.loads(FITTED.read_text())["runs"] if r["settings"]["dataset"] == task
    )
    fc = run["layers"][f"layer{layer}"]["fc"]
    return fc["parameters"] - fc["weight_parameters"]


def fitted_table(task: str) -> pd.DataFrame:
    """Per layer, over the seeds (ranges ``low - high``): the FC relative effective parameters
    at the last fit estimated by ``delta ||theta||^2`` (:func:`last_fit_table`'s column) and
    from the fitted approximation, all tensors and weights alone (:func:`fitted_relative`)."""
    estimated = _last_and_before(task, 0)[0]["fc_relative"]
    fitted = fitted_relative(task)

    return pd.DataFrame(
        [
            {
                "layer": layer,
                "estimated (delta ||theta||^2)": _spread(estimated.xs(layer, level="layer")),
                "fitted: all tensors": _spread(group["all"]),
                "fitted: weights alone": _spread(group["weights"]),
            }
            for layer, group in fitted.groupby(level="layer")
        ]
    )


def fitted_target_lines(task: str) -> str:
    """App. D's second target (FC relative effective parameters below 1e-4 in the layers whose
    FC path is off at the last fit in every seed, as :func:`target_lines` picks them) by the
    fitted approximation, with all tensors and with the weights alone: verdict lines."""
    layers, name = _converted_layers(task), TASKS[task]
    if not layers:
        return f"- {name}: no layer's FC path is off in every seed: fails"
    chosen = fitted_relative(task).loc[(slice(None), layers), :]
    highest = chosen.groupby(level="layer").max()
    lines = []
    for kind, words in (("all", "all tensors"), ("weights", "weights alone")):
        low = int((highest[kind] < RELATIVE_TARGET).sum())
        pairs = int((chosen[kind] < RELATIVE_TARGET).sum())
        verdict = "holds" if low == len(layers) else "fails"
        lines.append(
            f"- {name}, FC relative effective parameters below 1e-4 in layers "
            f"{', '.join(map(str, layers))}, fitted, {words}: {verdict} ({low} of {len(layers)}; "
            f"{pairs} of the {len(chosen)} (seed, layer) pairs)"
        )
    return "\n".join(lines)


def _converted_layers(task: str) -> list[int]:
    """The layers whose FC path is off (estimated relative effective parameters under
    :data:`OFF`) at the last fit in every seed: those App. D's targets concern."""
    last = _last_and_before(task, 0)[0].reset_index()
    off = last.groupby("layer")["fc_relative"].max() < OFF
    return [int(n) for n in off.index[off]]


def missing_layers(task: str, kind: str) -> list[int]:
    """Of :func:`_converted_layers`, those where some seed's FC relative effective parameters
    are not under :data:`RELATIVE_TARGET`: ``kind`` ``"estimated"`` (``delta ||theta||^2``,
    :func:`fit_trace`), ``"all"`` or ``"weights"`` (fitted, :func:`fitted_relative`)."""
    layers = _converted_layers(task)
    if kind == "estimated":
        values = _last_and_before(task, 0)[0]["fc_relative"]
    else:
        values = fitted_relative(task)[kind]
    highest = values.groupby(level="layer").max()
    return [n for n in layers if highest[n] >= RELATIVE_TARGET]


def missing_pairs(task: str, earlier: int = 100) -> dict[str, Any]:
    """The (seed, layer) pairs of :func:`_converted_layers` whose fitted FC relative effective
    parameters of the weights alone are not under :data:`RELATIVE_TARGET`: ``pairs`` (how
    many), the range of their FC weights' squared norms at the last fit (``norm``), the range of
    the factor by which their (estimated) relative effective parameters changed over the last
    ``earlier`` epochs (``change``), and how many of them fell by more than :data:`STALLED`
    there (``falling``)."""
    last, before = _last_and_before(task, earlier)
    fitted = fitted_relative(task)
    layers = _converted_layers(task)
    missed = [
        pair
        for pair in fitted.index
        if pair[1] in layers and fitted.loc[pair, "weights"] >= RELATIVE_TARGET
    ]
    change = (last["fc_relative"] / before["fc_relative"]).loc[missed]
    norm = last["fc_norm"].loc[missed]
    return {
        "pairs": len(missed),
        "norm": (norm.min(), norm.max()),
        "change": (change.min(), change.max()),
        "falling": int((change < 1 - STALLED).sum()),
    }


def collapsed_fitted(task: str, norm: float = 1e-6) -> dict[str, int]:
    """Of the (seed, layer) pairs whose FC weights (both maps) have a squared norm under ``norm``
    at the last fit (:func:`collapsed_pairs`), how many have fitted FC relative effective
    parameters (:func:`fitted_relative`) under :data:`RELATIVE_TARGET`, counting ``all`` tensors
    or the ``weights`` alone; ``pairs``: how many there are."""
    last = _last_and_before(task, 0)[0]
    collapsed = fitted_relative(task).loc[last.index[last["fc_norm"] < norm]]
    below = {kind: int((collapsed[kind] < RELATIVE_TARGET).sum()) for kind in ("all", "weights")}
    return below | {"pairs": len(collapsed)}


def figure(out: Path) -> None:
    """Per task (columns), the FC precision and the FC relative effective parameters (rows) of
    every layer fit by fit, log scale; one colour per layer, one line per seed."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    tasks = [t for t in TASKS if learned_runs(t)]
    fig, axes = plt.subplots(2, len(tasks), figsize=(6 * len(tasks), 7), squeeze=False)
    colours = plt.get_cmap("viridis")
    for column, task in enumerate(tasks):
        frame = trace(task)
        for (layer, _seed), group in frame.groupby(["layer", "seed"]):
            colour = colours((layer - 1) / 7)
            label = f"layer {layer}" if _seed == frame["seed"].min() else None
            axes[0, column].plot(group["epoch"], group["fc_precision"], color=colour, label=label)
            axes[1, column].plot(group["epoch"], group["fc_relative"], color=colour)
        axes[0, column].axhline(PRECISION_TARGET, color="grey", linestyle="--")
        axes[1, column].axhline(RELATIVE_TARGET, color="grey", linestyle="--")
        seeds = frame["seed"].nunique()
        axes[0, column].set_title(f"{TASKS[task]} ({seeds} seed{'s' * (seeds > 1)})")
        axes[0, column].set_ylabel("FC prior precision")
        axes[1, column].set_ylabel("FC relative effective parameters")
        axes[1, column].set_xlabel("epoch")
        for row in range(2):
            axes[row, column].set_yscale("log")
    axes[0, 0].legend(fontsize=7, ncol=2)
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=110)
    print(f"wrote {out}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--figure", type=Path, required=True, help="PNG file to write")
    figure(parser.parse_args().figure)


if __name__ == "__main__":
    main()
