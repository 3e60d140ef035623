"""The computed parts of docs/data_size.md (Table 1 against the training-set size): the sweep's
tables, the learned rows' verdicts against the best MAP row at each size, the runs still
missing, the structure each learned run chose, and the measurements of why; its template,
``pages/templates/data_size.md``, calls them (as ``size.NAME``) between its paragraphs.
"""

from __future__ import annotations

import json
import math
import statistics
from collections.abc import Sequence
from pathlib import Path
from types import SimpleNamespace

import pandas as pd

from benchmarks.markdown_table import rows_table
from benchmarks.markdown_table import table as markdown
from laplace_equivariance.app import summary
from studies import data_size, evidence_selection, runs_table

ABLATION_OF_SWEEPS = ("fashion-sweep",)
"""``path-ablation`` files of a whole sweep's learned runs, summarised by task and size
(:func:`_ablation_by_size`) rather than run by run."""


def _runs(folder: str = "data-size") -> list[Path]:
    """The run folders of ``benchmarks/results/FOLDER``."""
    return sorted(p.parent for p in (runs_table.RESULTS / folder).glob("*/results.json"))


def _map_rows(*folders: str) -> list[dict]:
    """The MAP rows of the sweeps in ``folders``."""
    rows = [e for folder in folders for e in data_size.sweep_rows(_runs(folder))]
    return [e for e in rows if e["network"].startswith("MAP")]


def circumstances(folder: str) -> str:
    """The budget, width, device and threads the runs of ``folder`` share (or each distinct
    value)."""
    results = [summary.load_run(run) for run in _runs(folder)]

    def values(get) -> str:
        return ", ".join(sorted({str(get(r)) for r in results}))

    return (
        f"Budget {values(lambda r: r.get('optimiser_steps'))} optimiser steps of "
        f"{values(lambda r: r['settings']['batch_size'])} examples; alpha "
        f"{values(lambda r: r['settings']['alpha'])}; Adam at lr "
        f"{values(lambda r: r['settings']['lr'])}, cosine-annealed; evaluated at the last epoch; "
        f"{values(lambda r: r['device'])}, {values(lambda r: r['threads'])} thread(s) per run; "
        f"version {values(lambda r: r['versions']['laplace_equivariance'])}."
    )


def table(folder: str) -> str:
    """The sweep table of ``folder``'s runs (:func:`studies.data_size.table`)."""
    return markdown(data_size.table(data_size.sweep_rows(_runs(folder))))


def verdicts(folder: str, against: tuple[str, ...] = (), none: str = "") -> str:
    """One sentence per (task, size) of ``folder``'s learned row against the best MAP row
    (of ``folder``, or of the sweeps ``against``); ``none`` where no size has two seeds."""
    entries = data_size.sweep_rows(_runs(folder))
    if against:
        entries = _map_rows(*against) + entries
    return "\n".join(_verdict_sentences(entries)) or none


def missing(folder: str, tasks: tuple[str, ...] = data_size.TASKS) -> str:
    """Rows of the planned sweep of ``folder`` (``tasks`` at the default sizes and networks)
    with fewer than 3 seeds, or ``"None."``."""
    have = {
        (e["task"], e["n"], e["network"]): len(e["seeds"])
        for e in data_size.sweep_rows(_runs(folder))
    }
    labels = [
        data_size.label({"method": method, "model": model})
        for name, (model, method) in data_size.NETWORKS.items()
        if name in data_size.TABLE
    ]
    missing = []
    for task in tasks:
        for n in (500, 1000, 2000, 4000):
            seeds = {label: have.get((task, n, label), 0) for label in labels}
            short = [f"{label} ({k})" for label, k in seeds.items() if k < 3]
            if short:
                missing.append(f"- {task}, N = {n:,}: " + ", ".join(short))
    return "\n".join(missing) or "None."


def evidence(folder: str) -> SimpleNamespace:
    """Learned CONV against learned F-FC+CONV of ``folder`` by their evidence (``table``), and
    the chosen runs against the sweep's MAP rows (``verdicts``)."""
    paired = evidence_selection.pairs(_runs(folder))
    entries = _map_rows(folder) + evidence_selection.selected_rows(paired)
    sentences = _verdict_sentences(entries, evidence_selection.SELECTED, "chosen")
    return SimpleNamespace(
        table=markdown(evidence_selection.evidence_table(paired)),
        verdicts="\n".join(sentences) or "No size has two seeds of both yet.",
    )


def _verdict_sentences(
    entries: list[dict], candidate: str = data_size.LEARNED, name: str = "learned"
) -> list[str]:
    """One sentence per (task, size) with >= 2 seeds of the ``candidate`` and of a MAP row,
    the candidate called ``name``."""
    by_key = {(e["task"], e["n"], e["network"]): e for e in entries}
    sentences = []
    for v in data_size.verdicts(entries, candidate):
        learned = by_key[(v["task"], v["n"], candidate)]
        best = by_key[(v["task"], v["n"], v["best_accuracy"])]
        best_nll = by_key[(v["task"], v["n"], v["best_nll"])]
        gap = statistics.fmean(learned["accuracy"]) - statistics.fmean(best["accuracy"])
        sentences.append(
            f"- {v['task']}, N = {v['n']:,}: {name} {summary.mean_std(learned['accuracy'])} % "
            f"against {v['best_accuracy']} {summary.mean_std(best['accuracy'])} % "
            f"({gap:+.1f} points): accuracy "
            f"{'within the spread or above' if v['accuracy_holds'] else 'below the spread'}; "
            f"NLL {summary.mean_std(learned['nll'], digits=2)} against the best "
            f"({v['best_nll']}) {summary.mean_std(best_nll['nll'], digits=2)}: "
            f"{'no worse' if v['nll_holds'] else 'worse'}"
            + _paired(v["paired"], v["best_accuracy"])
            + _not_compared(entries, v["task"], v["n"])
            + "."
        )
    return sentences


def _paired(paired: dict[str, float] | None, best: str) -> str:
    """``"; seed for seed against MAP CONV -4.1 ± 2.0 points (mean ± standard error, 10 seeds;
    below it in 7)"``, or nothing."""
    if paired is None:
        return ""
    return (
        f"; seed for seed against {best} {paired['mean']:+.1f} ± {paired['se']:.1f} points "
        f"(mean ± standard error, {paired['seeds']} seeds; below it in {paired['below']})"
    )


def _not_compared(entries: list[dict], task: str, n: int) -> str:
    """``"; not compared: MAP FC (not run)"`` for the sweep's MAP rows missing at (task, n)."""
    have = {
        e["network"] for e in entries if e["task"] == task and e["n"] == n and len(e["seeds"]) > 1
    }
    absent = [
        data_size.label({"model": model, "method": method})
        for name, (model, method) in data_size.NETWORKS.items()
        if name in data_size.TABLE and method == "map"
    ]
    absent = [label for label in absent if label not in have]
    return f"; not compared: {', '.join(absent)} (not run)" if absent else ""


def _drifts(folder: str) -> list[tuple[tuple, dict | None, dict]]:
    """``(task, N, network, seed), sweep's drift or None, variant's drift`` for each learned run
    of ``folder`` (:func:`studies.data_size.prior_drift`), in the sweep's order of tasks."""

    def key(r: dict) -> tuple:
        s = r["settings"]
        return (s["dataset"], r["n_train"], data_size.label(s), s["seed"])

    learned = [summary.load_run(run) for run in _runs(folder)]
    learned = [r for r in learned if r["settings"]["method"] == "marglik"]
    sweep = {key(r): r for r in map(summary.load_run, _runs() + _runs("data-size-fashion"))}
    ordered = sorted(learned, key=lambda r: (data_size.ALL_TASKS.index(key(r)[0]), *key(r)[1:]))
    return [
        (
            key(r),
            None if key(r) not in sweep else data_size.prior_drift(sweep[key(r)]),
            data_size.prior_drift(r),
        )
        for r in ordered
    ]


def _percent(log_change: float) -> float:
    """A change of a logarithm as a change in percent."""
    return 100 * (math.exp(log_change) - 1)


def drift(folder: str) -> str:
    """How far the priors still moved at the last fit (:func:`studies.data_size.prior_drift`):
    each learned run of ``folder`` (a variant: F-FC+CONV or CONV) beside the sweeps' run of the
    same task, size, network and seed."""
    rows = []
    for (task, n, network, seed), *moves in _drifts(folder):
        rows.append([task, f"{n:,}", network, str(seed)])
        for moved in moves:
            rows[-1] += (
                ["-", "-"]
                if moved is None
                else [f"{_percent(moved['median']):.1f}", f"{100 * moved['moving']:.0f}"]
            )
    header = ["task", "N", "network", "seed", "sweep: median change at the last fit %"]
    header += ["sweep: precisions moving > 5 % (share %)", "variant: median change %"]
    return rows_table([*header, "variant: moving > 5 % (share %)"], rows)


def drift_changes(
    folder: str,
    network: str,
    side: str,
    task: str = "quadrant-mnist-digit",
    n: int = 500,
    seeds: Sequence[int] | None = None,
) -> list[float]:
    """Per seed, the median change of the prior precisions at the last fit in percent (the
    :func:`drift` table's column), of ``folder``'s learned runs of ``network`` (its label, as
    ``"learned F-FC+CONV"``) on ``task`` at ``n`` examples, of ``seeds`` (None: all); ``side``
    ``"variant"`` (the runs of ``folder``) or ``"sweep"`` (the sweep's runs of the same seeds,
    where it has them)."""
    column = {"sweep": 1, "variant": 2}[side]
    return [
        _percent(row[column]["median"])
        for row in _drifts(folder)
        if row[0][:3] == (task, n, network)
        and (seeds is None or row[0][3] in seeds)
        and row[column] is not None
    ]


def _train_test(fractions: dict[str, float] | None, digits: int = 1) -> str:
    """``"train / test"`` fractions in percent, ``"-"`` where not measured."""
    if fractions is None:
        return "-"
    return f"{100 * fractions['train']:.{digits}f} / {100 * fractions['test']:.{digits}f}"


def ablation() -> str:
    """One row per run of every ``path-ablation`` file but the sweeps': accuracies with the FC
    term removed, and with noise of its size added (the control; ``-`` in files measured
    before it existed)."""
    rows = []
    for file in sorted((runs_table.RESULTS / "path-ablation").glob("*.json")):
        if file.stem in ABLATION_OF_SWEEPS:
            continue
        for run in json.loads(file.read_text())["runs"]:
            settings = run["settings"]
            training = (
                "MAP"
                if settings["method"] == "map"
                else f"learned, held {settings['burnin'] / settings['epochs']:.0%}"
            )
            worst = min(run["layers"], key=lambda layer: layer["removed"]["test"])
            shares = [layer["output_share"] for layer in run["layers"]]
            largest = {split: max(s[split] for s in shares) for split in ("train", "test")}
            rows.append(
                [file.stem, f"{settings['subset']:,}", training, str(settings["seed"])]
                + [_train_test(run[key]) for key in ("accuracy", "removed_everywhere")]
                + [_train_test(run.get("noise_of_path_size_everywhere"))]
                + [f"{worst['layer']}: {_train_test(worst['removed'])}"]
                + [_train_test(largest, digits=2)]
            )
    header = ["file", "N", "training", "seed", "train / test acc %", "FC removed everywhere"]
    header += ["control: noise of the FC terms' size added everywhere"]
    header += ["FC removed from the layer that costs most test accuracy"]
    return rows_table([*header, "largest FC output share %, train / test images"], rows)


def ablation_by_size(name: str) -> str:
    """The learned runs of one sweep's ``path-ablation`` file by task and size: test
    accuracy as trained, with the FC terms removed from every layer, and with noise of their
    size added instead (mean ± std over the seeds), and the layer whose FC term alone costs
    most test accuracy (mean over the seeds)."""
    file = runs_table.RESULTS / "path-ablation" / f"{name}.json"
    if not file.exists():
        return ""
    groups: dict[tuple[str, int], list[dict]] = {}
    for run in json.loads(file.read_text())["runs"]:
        settings = run["settings"]
        groups.setdefault((settings["dataset"], settings["subset"]), []).append(run)
    rows = []
    for (task, n), runs in sorted(groups.items()):
        layers = [layer["layer"] for layer in runs[0]["layers"]]
        cost = [
            statistics.fmean(
                r["accuracy"]["test"] - r["layers"][k]["removed"]["test"] for r in runs
            )
            for k in range(len(layers))
        ]
        worst = max(range(len(layers)), key=cost.__getitem__)

        def test(key: str, runs: list[dict] = runs) -> str:
            return summary.mean_std([r[key]["test"] for r in runs], scale=100)

        rows.append(
            [task, f"{n:,}", str(len(runs)), test("accuracy"), test("removed_everywhere")]
            + [test("noise_of_path_size_everywhere"), f"{layers[worst]}: {100 * cost[worst]:.1f}"]
        )
    header = ["task", "N", "seeds", "test acc %", "FC removed everywhere"]
    header += ["control: noise of the FC terms' size added everywhere"]
    return rows_table([*header, "the layer whose FC term costs most: points lost"], rows)


def ablation_runs(name: str) -> pd.DataFrame:
    """The runs of ``path-ablation/NAME.json``, one row each in the file's order: ``dataset``,
    ``subset``, ``method``, ``seed`` and, in percent, the accuracies as trained (``train``,
    ``test``), with the FC terms removed everywhere (``removed_train``, ``removed_test``) and
    with noise of their size added instead (``control_train``, ``control_test``; NaN where the
    file has no control), so that a page computes what removal and control cost.

    Raises:
        FileNotFoundError: If there is no such file.
    """
    rows = []
    for run in runs_table.report(f"path-ablation/{name}")["runs"]:
        row = {key: run["settings"][key] for key in ("dataset", "subset", "method", "seed")}
        for prefix, key in (("", "accuracy"), ("removed_", "removed_everywhere")):
            row |= {f"{prefix}{split}": 100 * run[key][split] for split in ("train", "test")}
        control = run.get("noise_of_path_size_everywhere") or {}
        row |= {f"control_{s}": 100 * control.get(s, math.nan) for s in ("train", "test")}
        rows.append(row)
    return pd.DataFrame(rows)


def _values(run: pd.Series, family: str) -> list[float]:
    """A run's ``family`` (``fc.relative``, ...) per relaxed layer, first to last."""
    layers = sorted(
        (int(c.rsplit(".", 1)[1]), v)
        for c, v in run.items()
        if str(c).rsplit(".", 1)[0] == family and pd.notna(v)
    )
    return [v for _, v in layers]


def structure(folder: str) -> str:
    """One row per learned F-FC+CONV run of ``folder``, by size and seed: accuracy, evidence,
    the FC path's share of each relaxed layer's relative effective parameters (App. D), the
    layers where it is off, and its largest share of a layer's output energy."""
    runs = runs_table.runs()
    runs = runs[(runs["folder"] == folder) & (runs["model"] == "f-fc+conv")]
    runs = runs[runs["method"] == "marglik"].sort_values(["n_train", "seed"], kind="stable")
    rows = []
    for _, run in runs.iterrows():
        shares, outputs = _values(run, "fc.relative"), _values(run, "fc.output")
        rows.append(
            [run["dataset"], f"{run['n_train']:,}", str(run["seed"]), f"{run['test_acc']:.1f}"]
            + [f"{run['train_acc']:.1f}", f"{run['marglik_per_example']:.2f}"]
            + [" ".join(f"{share:.3f}" for share in shares)]
            + [f"{sum(share < 0.01 for share in shares)} of {len(shares)}"]
            + [f"{max(outputs):.3f}" if outputs else "-"]
        )
    header = ["task", "N", "seed", "test acc %", "train acc %", "-log marglik / N"]
    header += ["FC share of effective parameters, per relaxed layer", "FC off"]
    return rows_table([*header, "largest FC output share"], rows)


def _at_500(folder: str, model: str, method: str) -> pd.DataFrame:
    """The runs of ``model`` and ``method`` on 500 digits of the digit task in ``folder``."""
    runs = runs_table.runs()
    runs = runs[(runs["folder"] == folder) & (runs["dataset"] == "quadrant-mnist-digit")]
    runs = runs[(runs["n_train"] == 500) & (runs["model"] == model)]
    return runs[runs["method"] == method].sort_values("seed", kind="stable")


def conv_effective(networks: dict[str, tuple[str, str]]) -> str:
    """Per relaxed layer, the CONV path's effective parameters, mean over the learned runs of
    each (folder, model) at N = 500 on the digit task."""
    rows = []
    for label, (folder, model) in networks.items():
        runs = _at_500(folder, model, "marglik")
        per_run = [_values(run, "conv.effective") for _, run in runs.iterrows()]
        means = pd.DataFrame(per_run).mean()
        rows.append([label, str(len(runs)), " ".join(f"{mean:.0f}" for mean in means)])
    return rows_table(["network", "seeds", "CONV effective parameters, layers 1-8"], rows)


SEED_BY_SEED = {
    "MAP CONV": ("data-size", "conv", "map"),
    "learned CONV": ("data-size", "conv", "marglik"),
    "learned CONV at 0.003 / sqrt(2)": ("data-size-conv-lr", "conv", "marglik"),
    "learned CONV, priors 2, lr / sqrt(2)": ("data-size-conv-prior2", "conv", "marglik"),
    "relaxed, FC paths frozen off": ("data-size-frozen-fc", "f-fc+conv", "marglik"),
    "learned F-FC+CONV": ("data-size", "f-fc+conv", "marglik"),
    "F-FC+CONV, priors 0.5, lr x sqrt(2)": ("data-size-prior05-lr", "f-fc+conv", "marglik"),
}
"""The networks compared seed by seed at N = 500: label -> (folder, model, method); lr is
Adam's rate against the usual 0.003, priors the learned runs' initial precision."""


def seed_by_seed() -> str:
    """Test and training accuracy per seed of each :data:`SEED_BY_SEED` network at N = 500, a
    column per seed that any of them ran (``-`` where a network has no run of it)."""
    cells = {}
    for label, (folder, model, method) in SEED_BY_SEED.items():
        runs = _at_500(folder, model, method)
        pairs = zip(runs["seed"], runs["test_acc"], runs["train_acc"], strict=True)
        cells[label] = {f"seed {seed}": f"{test:.1f} / {train:.1f}" for seed, test, train in pairs}
    frame = pd.DataFrame.from_dict(cells, orient="index").fillna("-")
    frame = frame[sorted(frame.columns, key=lambda c: int(c.split()[1]))]
    frame = frame.rename(columns={"seed 0": "seed 0: test / train acc %"})
    return markdown(frame.rename_axis("network").reset_index())
