"""docs/data_size.md: Table 1 against the training-set size, from benchmarks/results/data-size.

The narrative is in the Markdown fragments ``fragments/data_size/`` (its figures placeholders
of :mod:`benchmarks.generated_docs.figures`, its tables marked ``<!-- table: NAME -->``); every
table and verdict is computed here from the committed runs' ``results.json``: the table (mean ±
std over seeds), the learned row against the best MAP row at each size, the runs still missing,
and the structure the learned runs chose per layer.
"""

from __future__ import annotations

import json
import math
import statistics
from pathlib import Path

from benchmarks import data_size, evidence_selection, page_tables
from benchmarks.generated_docs import figures
from benchmarks.generated_docs.common import RESULTS, ROOT
from laplace_equivariance.app import summary

DOCUMENT = ROOT / "docs" / "data_size.md"
FOLDER = RESULTS / "data-size"
FASHION = RESULTS / "data-size-fashion"
"""The same sweep on Fashion-MNIST items (:data:`benchmarks.data_size.FASHION_TASKS`)."""
FRAGMENTS = ROOT / "benchmarks" / "generated_docs" / "fragments" / "data_size"
EVIDENCE_SPLIT_COMMAND = (
    "python -m benchmarks.data_size --out RUNS --tasks quadrant-mnist quadrant-mnist-digit "
    "--sizes 500 --networks learned learned-conv --threads 1; python -m benchmarks.evidence_split "
    "RUNS/quadrant-mnist-n500-*-marglik-seed* --out "
    "benchmarks/results/evidence-split/quadrant-500.json (and RUNS/quadrant-mnist-digit-n500-* "
    "into digit-500.json)"
)
FASHION_EVIDENCE_SPLIT_COMMAND = (
    "python -m benchmarks.data_size --out RUNS --tasks quadrant-fashion --sizes 500 --networks "
    "learned learned-conv --data-dir .data/fashion-mnist --threads 1; python -m "
    "benchmarks.evidence_split RUNS/*-marglik-seed* --out "
    "benchmarks/results/evidence-split/fashion-quadrant-500.json"
)
EVIDENCE_SPLITS = {
    "digit-500": (
        "The digit task at 500 digits: where the evidence goes",
        "evidence-split-about",
        EVIDENCE_SPLIT_COMMAND,
    ),
    "quadrant-500": (
        "The (digit, quadrant) task at 500 images: where the evidence goes",
        "evidence-split-about",
        EVIDENCE_SPLIT_COMMAND,
    ),
    "fashion-quadrant-500": (
        "Fashion-MNIST's (item, quadrant) task at 500 items: where the evidence goes",
        "fashion-evidence-split-about",
        FASHION_EVIDENCE_SPLIT_COMMAND,
    ),
}
"""``benchmarks/results/evidence-split/NAME.json`` files of learned CONV and learned F-FC+CONV
runs of the sweeps' settings, retrained with their ``model.pt``: each one's title, the fragment
that says what it measures and the command; its conclusion is the fragment
``data_size/evidence-split-NAME.md``."""
MNIST_EVIDENCE_SPLITS = ("digit-500", "quadrant-500")
FASHION_EVIDENCE_SPLITS = ("fashion-quadrant-500",)


def _fragment(name: str, **tables: str) -> str:
    """The fragment ``data_size/NAME.md`` with ``tables`` at its markers, figures rendered."""
    return figures.render_fragment(FRAGMENTS / f"{name}.md", **tables)


def _runs(folder: Path = FOLDER) -> list[Path]:
    return sorted(p.parent for p in folder.glob("*/results.json"))


def _learned(runs: list[Path]) -> list[Path]:
    """The learned F-FC+CONV runs among ``runs``, by size and seed."""
    loaded = {run: summary.load_run(run) for run in runs}
    return sorted(
        (
            run
            for run, r in loaded.items()
            if r["settings"]["model"] == "f-fc+conv" and r["settings"]["method"] == "marglik"
        ),
        key=lambda run: (loaded[run]["n_train"], loaded[run]["settings"]["seed"]),
    )


def _fashion_section() -> list[str]:
    """The sweep on Fashion-MNIST: its table, verdicts, missing rows and learned structure."""
    runs = _runs(FASHION)
    if not runs:
        return []
    entries = data_size.sweep_rows(runs)
    return [
        "",
        _fragment("data-size-fashion"),
        _circumstances(runs) + "\n",
        data_size.table(entries) + "\n",
        "The learned row against the best MAP row at each size (the same test as above):\n",
        "\n".join(_verdict_sentences(entries)) or "No size has two seeds of both yet.",
        "",
        "Rows of the planned sweep with fewer than 3 seeds (seeds finished in brackets):\n",
        "\n".join(_missing(entries, data_size.FASHION_TASKS)) or "None.",
        "",
        _structure(_learned(runs)),
        *_fashion_ablation(),
        *_evidence_section(
            runs,
            [e for e in entries if e["network"].startswith("MAP")],
            "fashion-evidence-selection",
        ),
        *_evidence_split_sections(FASHION_EVIDENCE_SPLITS),
    ]


def _fashion_ablation() -> list[str]:
    """What the Fashion sweep's learned networks compute without their FC terms."""
    table = _ablation_by_size("fashion-sweep")
    return ["", _fragment("fashion-ablation", ablation=table)] if table else []


def _circumstances(runs: list[Path]) -> str:
    """The budget, width, device and threads the runs share (or each distinct value)."""
    results = [summary.load_run(run) for run in runs]

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


def _missing(entries: list[dict], tasks: tuple[str, ...] = data_size.TASKS) -> list[str]:
    """Rows of the planned sweep (``tasks`` at the default sizes and networks) with < 3 seeds."""
    have = {(e["task"], e["n"], e["network"]): len(e["seeds"]) for e in entries}
    labels = {
        name: data_size.label({"method": method, "model": model})
        for name, (model, method) in data_size.NETWORKS.items()
        if name in data_size.TABLE
    }
    missing = []
    for task in tasks:
        for n in (500, 1000, 2000, 4000):
            short = [
                f"{label} ({have.get((task, n, label), 0)})"
                for label in labels.values()
                if have.get((task, n, label), 0) < 3
            ]
            if short:
                missing.append(f"- {task}, N = {n:,}: " + ", ".join(short))
    return missing


def _structure(learned: list[Path]) -> str:
    """One row per learned run: accuracy, evidence, the FC path's share in each relaxed layer.

    Two shares: of the relative effective parameters (App. D) and of the layer's output
    energy on training images (``path_outputs``).
    """
    rows = []
    for run in learned:
        r = summary.load_run(run)
        shares = [
            layer["paths"].get("fc", {}).get("relative", 0.0) for layer in r["symmetry"]["layers"]
        ]
        outputs = [layer["paths"].get("fc", 0.0) for layer in r.get("path_outputs", [])]
        rows.append(
            f"| {r['settings']['dataset']} | {r['n_train']:,} | {r['settings']['seed']} | "
            f"{100 * r['test']['accuracy']:.1f} | {100 * r['train']['accuracy']:.1f} | "
            f"{r['neg_log_marglik'][-1] / r['n_train']:.2f} | "
            + " ".join(f"{share:.3f}" for share in shares)
            + f" | {sum(share < 0.01 for share in shares)} of {len(shares)} | "
            + (f"{max(outputs):.3f}" if outputs else "-")
            + " |"
        )
    header = (
        "| task | N | seed | test acc % | train acc % | -log marglik / N "
        "| FC share of effective parameters, per relaxed layer | FC off | largest FC output share |"
    )
    return "\n".join([header, "|---|---|---|---|---|---|---|---|---|", *rows])


VARIANTS = (
    "data-size-lr",
    "data-size-lr-held25",
    "data-size-held50",
    "data-size-restore-best",
    "data-size-temperature2",
    "data-size-temperature05",
    "data-size-path-prior",
    "data-size-fits60",
    "data-size-hypersteps100",
    "data-size-fits60-hypersteps100",
)
"""Variants of the learned rows, each in its own folder (and fragment), judged against the
MAP rows of the digit sweep and of the Fashion-MNIST sweep."""

ABLATION = RESULTS / "path-ablation"


ABLATION_OF_SWEEPS = ("fashion-sweep",)
"""``path-ablation`` files of a whole sweep's learned runs, summarised by task and size
(:func:`_ablation_by_size`) rather than run by run."""


def _variant_tables(folder: str, runs: list[Path]) -> dict[str, str]:
    """The tables a variant's fragment marks: ``drift`` (:func:`_drift_table`) where it asks."""
    if "<!-- table: drift -->" not in (FRAGMENTS / f"{folder}.md").read_text():
        return {}
    return {"drift": _drift_table(runs)}


def _drift_table(variant: list[Path]) -> str:
    """How far the priors still moved at the last fit (:func:`benchmarks.data_size.prior_drift`):
    each learned run of a variant (F-FC+CONV or CONV) beside the sweep's run of the same task,
    size, network and seed."""

    def key(r: dict) -> tuple:
        s = r["settings"]
        return (s["dataset"], r["n_train"], data_size.label(s), s["seed"])

    learned = [summary.load_run(run) for run in variant]
    learned = [r for r in learned if r["settings"]["method"] == "marglik"]
    sweep = {key(r): r for r in map(summary.load_run, _runs() + _runs(FASHION))}
    rows = []
    for r in sorted(learned, key=lambda r: (data_size.ALL_TASKS.index(key(r)[0]), *key(r)[1:])):
        cells = []
        for result in (sweep.get(key(r)), r):
            if result is None:
                cells.append("- | -")
                continue
            drift = data_size.prior_drift(result)
            cells.append(
                f"{100 * (math.exp(drift['median']) - 1):.1f} | {100 * drift['moving']:.0f}"
            )
        task, n, network, seed = key(r)
        rows.append(f"| {task} | {n:,} | {network} | {seed} | " + " | ".join(cells) + " |")
    header = (
        "| task | N | network | seed | sweep: median change at the last fit % | sweep: "
        "precisions moving > 5 % (share %) | variant: median change % | variant: moving > 5 % "
        "(share %) |"
    )
    return "\n".join([header, "|---|---|---|---|---|---|---|---|", *rows])


def _train_test(accuracies: dict[str, float] | None) -> str:
    """``"train / test"`` accuracies in percent, ``"-"`` where not measured."""
    if accuracies is None:
        return "-"
    return f"{100 * accuracies['train']:.1f} / {100 * accuracies['test']:.1f}"


def _ablation_table() -> str:
    """One row per run of every ``path-ablation`` file but the sweeps': accuracies with the FC
    term removed, and with noise of its size added (the control; ``-`` in files measured
    before it existed)."""
    rows = []
    for file in sorted(ABLATION.glob("*.json")):
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
            rows.append(
                f"| {file.stem} | {settings['subset']:,} | {training} | {settings['seed']} | "
                f"{100 * run['accuracy']['train']:.1f} / {100 * run['accuracy']['test']:.1f} | "
                f"{100 * run['removed_everywhere']['train']:.1f} / "
                f"{100 * run['removed_everywhere']['test']:.1f} | "
                f"{_train_test(run.get('noise_of_path_size_everywhere'))} | "
                f"{worst['layer']}: {100 * worst['removed']['train']:.1f} / "
                f"{100 * worst['removed']['test']:.1f} | "
                f"{100 * max(s['train'] for s in shares):.2f} / "
                f"{100 * max(s['test'] for s in shares):.2f} |"
            )
    header = (
        "| file | N | training | seed | train / test acc % | FC removed everywhere | "
        "control: noise of the FC terms' size added everywhere | "
        "FC removed from the layer that costs most test accuracy | largest FC output share %, "
        "train / test images |"
    )
    return "\n".join([header, "|---|---|---|---|---|---|---|---|---|", *rows])


def _ablation_by_size(name: str) -> str:
    """The learned runs of one sweep's ``path-ablation`` file by task and size: test
    accuracy as trained, with the FC terms removed from every layer, and with noise of their
    size added instead (mean ± std over the seeds), and the layer whose FC term alone costs
    most test accuracy (mean over the seeds)."""
    file = ABLATION / f"{name}.json"
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
            f"| {task} | {n:,} | {len(runs)} | {test('accuracy')} | {test('removed_everywhere')} "
            f"| {test('noise_of_path_size_everywhere')} | {layers[worst]}: "
            f"{100 * cost[worst]:.1f} |"
        )
    header = (
        "| task | N | seeds | test acc % | FC removed everywhere | control: noise of the FC "
        "terms' size added everywhere | the layer whose FC term costs most: points lost |"
    )
    return "\n".join([header, "|---|---|---|---|---|---|---|", *rows])


def _conv_effective(networks: dict[str, tuple[str, str]]) -> str:
    """Per relaxed layer, the CONV path's effective parameters, mean over the learned runs of
    each (folder, model) at N = 500 on the digit task."""
    rows = []
    for label, (folder, model) in networks.items():
        runs = [
            r
            for p in sorted((RESULTS / folder).glob("quadrant-mnist-digit-n500-*/results.json"))
            if (r := summary.load_run(p.parent))["settings"]["method"] == "marglik"
            and r["settings"]["model"] == model
        ]
        per_layer = zip(
            *(
                [layer["paths"]["conv"]["effective"] for layer in r["symmetry"]["layers"]]
                for r in runs
            ),
            strict=True,
        )
        rows.append(
            f"| {label} | {len(runs)} | "
            + " ".join(f"{statistics.fmean(v):.0f}" for v in per_layer)
            + " |"
        )
    return "\n".join(
        ["| network | seeds | CONV effective parameters, layers 1-8 |", "|---|---|---|", *rows]
    )


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


def _seed_by_seed() -> str:
    """Test and training accuracy per seed of each :data:`SEED_BY_SEED` network at N = 500."""
    rows = []
    for label, (folder, model, method) in SEED_BY_SEED.items():
        runs = [
            r
            for p in sorted((RESULTS / folder).glob("quadrant-mnist-digit-n500-*/results.json"))
            if (r := summary.load_run(p.parent))["settings"]["model"] == model
            and r["settings"]["method"] == method
        ]
        cells = [
            f"{100 * r['test']['accuracy']:.1f} / {100 * r['train']['accuracy']:.1f}"
            for r in sorted(runs, key=lambda r: r["settings"]["seed"])
        ]
        rows.append(f"| {label} | " + " | ".join(cells) + " |")
    header = "| network | seed 0: test / train acc % | seed 1 | seed 2 |"
    return "\n".join([header, "|---|---|---|---|", *rows])


def _cause_section() -> str:
    """Why the learned row falls behind at N = 500, where the measurements are committed."""
    conv_lr = sorted(p.parent for p in (RESULTS / "data-size-conv-lr").glob("*/results.json"))
    if not list(ABLATION.glob("*.json")) or not conv_lr:
        return ""
    return _fragment(
        "cause",
        ablation=_ablation_table(),
        conv_lr=data_size.table(data_size.sweep_rows(conv_lr)),
        seed_by_seed=_seed_by_seed(),
        effective=_conv_effective(
            {
                "learned F-FC+CONV": ("data-size", "f-fc+conv"),
                "learned F-FC+CONV, half held": ("data-size-held50", "f-fc+conv"),
                "learned CONV": ("data-size", "conv"),
                "learned CONV at 0.003 / sqrt(2)": ("data-size-conv-lr", "conv"),
            }
        ),
    )


def _evidence_section(
    runs: list[Path], fixed: list[dict], fragment: str = "evidence-selection"
) -> list[str]:
    """Learned CONV against learned F-FC+CONV by their evidence, and the chosen runs judged
    against the sweep's MAP rows (``fixed``), in the fragment ``data_size/FRAGMENT.md``."""
    paired = evidence_selection.pairs(runs)
    if not paired:
        return []
    chosen = evidence_selection.selected_rows(paired)
    verdicts = _verdict_sentences(fixed + chosen, evidence_selection.SELECTED, "chosen")
    return [
        "",
        _fragment(
            fragment,
            evidence=evidence_selection.evidence_table(paired),
            verdicts="\n".join(verdicts) or "No size has two seeds of both yet.",
        ),
    ]


def _evidence_split_sections(names: tuple[str, ...]) -> list[str]:
    """Each of the :data:`EVIDENCE_SPLITS` ``names`` whose file is committed: its runs' evidence
    split into the data term and each path's prior and Occam terms."""
    parts = []
    for name in names:
        title, about, command = EVIDENCE_SPLITS[name]
        file = f"evidence-split/{name}.json"
        if not (RESULTS / file).exists():
            continue
        parts += [
            "",
            f"## {title}\n\n{_fragment(about)}\n\n`{command}`\n",
            page_tables.evidence_split_section(file),
            "",
            _fragment(f"evidence-split-{name}"),
        ]
    return parts


def render() -> str:
    """The whole of docs/data_size.md."""
    runs = _runs()
    text = _fragment("intro")
    if not runs:
        return text + "\nNo run has finished yet.\n"
    entries = data_size.sweep_rows(runs)
    learned = _learned(runs)
    parts = [
        text,
        "## Results\n",
        _circumstances(runs) + "\n",
        data_size.table(entries) + "\n",
        _fragment("verdicts-about"),
        "\n".join(_verdict_sentences(entries)) or "No size has two seeds of both yet.",
        "",
        "Rows of the planned sweep with fewer than 3 seeds (seeds finished in brackets):\n",
        "\n".join(_missing(entries)) or "None.",
        "",
        _fragment("structure-about"),
        _structure(learned),
    ]
    fixed = [e for e in entries if e["network"].startswith("MAP")]
    fixed_fashion = [
        e for e in data_size.sweep_rows(_runs(FASHION)) if e["network"].startswith("MAP")
    ]
    for folder in VARIANTS:
        variant_runs = sorted(p.parent for p in (RESULTS / folder).glob("*/results.json"))
        if not variant_runs:
            continue
        variant = data_size.sweep_rows(variant_runs)
        parts += [
            "",
            _fragment(folder, **_variant_tables(folder, variant_runs)),
            data_size.table(variant),
            "",
            "Against the MAP rows of the sweep above (the same test as there):",
            "",
            "\n".join(_verdict_sentences(fixed + fixed_fashion + variant))
            or "No size has two seeds yet.",
            "",
            _structure(_learned(variant_runs)),
        ]
    cause = _cause_section()
    if cause:
        parts += ["", cause]
    parts += _evidence_section(runs, fixed)
    parts += _evidence_split_sections(MNIST_EVIDENCE_SPLITS)
    parts += _fashion_section()
    return "\n".join(parts) + "\n"
