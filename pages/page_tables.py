"""The tables of the generated pages that are computed, not picked: one function per page,
returning the frames its template writes with ``table()`` (see :mod:`pages.render_pages`).
"""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd
import torch

from laplace_equivariance import models
from laplace_equivariance.app import config, summary
from pages import page_values, runs_table

BEYOND_THE_PAPER = (
    ("table3", "gconv"),
    ("table3", "gconv-full"),
    ("table3", "f-fc+conv+gconv-full"),
)
"""(table, model) counted at the table's setting though the paper prints no count for it."""
PATHS_COUNTED = ("f-fc+conv+gconv", "f-fc+conv+gconv-full")
"""Models whose filter weights per path are listed (how wide each GCONV is beside CONV)."""


def _meta_model(table: str, name: str) -> torch.nn.Module:
    """``name`` built at ``table``'s input, classes and alpha, on the meta device."""
    in_shape, n_classes, alpha, _ = models.PAPER_INPUTS[table]
    with torch.device("meta"):
        return models.build(name, in_shape, n_classes, alpha)


def models_page() -> dict[str, pd.DataFrame]:
    """docs/models.md: every model's parameter count beside the reference code's and the
    paper's (``counts``), and the filter weights per path at Table 3's setting (``weights``)."""
    empty = {"reference": None, "paper": "-"}
    listed = [*models.PAPER_PARAMETER_COUNTS.items(), *((k, empty) for k in BEYOND_THE_PAPER)]
    counts = pd.DataFrame(
        [
            {
                "table": f"{table} ({models.PAPER_INPUTS[table][3]})",
                "model": name,
                "ours": f"{models.count_parameters(_meta_model(table, name)):,}",
                "reference code": f"{c['reference']:,}" if c["reference"] else "-",
                "paper": c["paper"],
            }
            for (table, name), c in listed
        ]
    )
    weights = []
    for name in PATHS_COUNTED:
        row = {"model": name}
        for layer in _meta_model("table3", name).relaxed_layers:
            for path in layer.path_names:
                parameters = layer.path(path).named_parameters()
                count = sum(p.numel() for n, p in parameters if not n.endswith("bias"))
                row[path.upper()] = row.get(path.upper(), 0) + count
        weights.append(row)
    weights = pd.DataFrame(weights)[["model", "FC", "CONV", "GCONV"]]
    return {
        "counts": counts,
        "weights": weights.map(lambda v: f"{v:,}" if isinstance(v, int) else v),
    }


def kept_by_evidence(folders: list[str], model: str) -> pd.DataFrame:
    """Of the learned ``model`` runs in ``folders`` (the same network from several starts), per
    data set and seed the run of the lowest last ``-log p(D)/N``: the start a user who tried
    them all would keep, no test image looked at."""
    runs = runs_table.runs()
    learned = runs[runs["folder"].isin(folders) & (runs["model"] == model)]
    learned = learned[learned["method"] == "marglik"]
    return learned.loc[learned.groupby(["dataset", "seed"])["marglik_per_example"].idxmin()]


CHANGES = (
    (
        "0.2.0",
        lambda model: "f-fc" in model or "s-fc" in model,
        "F-FC/S-FC factors were not balanced at initialisation and learned runs took one "
        "prior per path",
    ),
    (
        "0.3.0",
        lambda model: "+" in model,
        "relaxed layers averaged their paths (now: their sum over sqrt(K))",
    ),
)
"""Changes of behaviour that make older committed runs record another version's: the version,
which models it affects, what runs before it did (docs/learned_structure.md)."""


def evidence_gap(folders: list[str], model: str, dataset: str, seed: int) -> float:
    """How far apart the learned ``model`` runs of ``folders`` (one per start) lie in their last
    ``-log p(D)/N`` on ``dataset`` and ``seed``: the margin of the start the evidence keeps.

    Raises:
        ValueError: Unless there are exactly two such runs.
    """
    runs = runs_table.runs()
    runs = runs[runs["folder"].isin(folders) & (runs["model"] == model)]
    runs = runs[(runs["method"] == "marglik") & (runs["dataset"] == dataset)]
    evidence = runs[runs["seed"] == seed]["marglik_per_example"]
    if len(evidence) != 2:
        raise ValueError(f"{len(evidence)} runs of {dataset} seed {seed}, not two")
    return abs(evidence.iloc[0] - evidence.iloc[1])


def higher_layers(turned: pd.DataFrame, upright: pd.DataFrame, family: str) -> list[int]:
    """Per seed, in how many layers ``family`` (``"gconv.relative"``, ``"gconv.output"``) is
    higher in ``turned``'s run than in ``upright``'s (the runs of one seed paired).

    Raises:
        ValueError: If the two sets of runs are not of the same seeds.
    """
    if list(turned["seed"]) != list(upright["seed"]):
        raise ValueError(f"seeds differ: {list(turned['seed'])} and {list(upright['seed'])}")
    return [
        sum(
            t > u
            for t, u in zip(
                *(page_values.layers(runs.iloc[[i]], family) for runs in (turned, upright)),
                strict=True,
            )
        )
        for i in range(len(turned))
    ]


def higher_in_most(turned: pd.DataFrame, upright: pd.DataFrame, family: str) -> int:
    """In how many seeds :func:`higher_layers` finds ``family`` higher in most layers."""
    layers = len(page_values.layers(upright.iloc[[0]], family))
    return sum(n > layers / 2 for n in higher_layers(turned, upright, family))


FOR_TEMPLATES = (
    "kept_by_evidence",
    "higher_layers",
    "higher_in_most",
    "evidence_gap",
    "structure",
    "fit_trace",
    "shift_errors_section",
    "factor_balance_section",
    "exact_blocks_section",
    "evidence_split_section",
    "rotation_split",
    "group_evidence",
    "invariant_weights",
)
"""The functions of this module that templates call."""

TABLES = {"models.md": models_page}
"""Each templated page's computed tables, by page name."""


def _results(*folders: str) -> list[Path]:
    """The folders of the learned runs of relaxed models (those with a path choice to show)
    under ``folders``, in path order."""
    runs = runs_table.runs()
    runs = runs[runs["folder"].isin(folders)]
    runs = runs[runs["run"].map(learned_relaxed)]
    return [runs_table.RESULTS / run for run in runs["run"]]


def learned_relaxed(run: str) -> bool:
    """Whether the run folder's name is a learned run's of a relaxed model (a path choice)."""
    name = run.rsplit("/", 1)[-1]
    return "-marglik" in name and "+" in name


def structure(*folders: str) -> str:
    """The learned relaxed runs of ``folders`` beside the structure they learned (the
    application's structure table), and, where a data set has runs of both KFAC modes, reduce
    minus expand with the standard errors over the seeds."""
    runs = _results(*folders)
    text = summary.structure_markdown(runs)
    frame = runs_table.runs().set_index("run", drop=False)
    differences = kfac_differences(
        frame.loc[[str(r.relative_to(runs_table.RESULTS)) for r in runs]]
    )
    if differences:
        text += "\n\nReduce minus expand, per task:\n\n" + "\n".join(differences)
    return text


def kfac_differences(runs: pd.DataFrame) -> list[str]:
    """Per data set with runs of both KFAC modes, reduce's mean minus expand's in accuracy, NLL
    and evidence, with standard errors over the seeds."""
    lines = []
    for dataset, modes in runs.groupby("dataset", sort=False):
        if set(modes["kfac_approx"]) != {"expand", "reduce"}:
            continue
        expand, reduce = (modes[modes["kfac_approx"] == m] for m in ("expand", "reduce"))
        if min(len(expand), len(reduce)) < 2:
            lines.append(f"- {dataset}: one seed of a mode: no difference judged")
            continue
        terms = []
        for name, column, digits in (
            ("test accuracy", "test_acc", 1),
            ("test NLL", "test_nll", 3),
            ("-log marglik / N", "marglik_per_example", 2),
        ):
            x, y = reduce[column], expand[column]
            error = math.sqrt(x.var() / len(x) + y.var() / len(y))
            diff = x.mean() - y.mean()
            terms.append(f"{name} {diff:+.{digits}f} (standard error {error:.{digits}f})")
        lines.append(f"- {dataset}: " + "; ".join(terms))
    return lines


def fit_trace(
    folder: str,
    epochs: tuple[int, ...] = (10, 15, 20, 30, 40, 60, 80, 100, 125, 150),
    path: str = "fc",
    dataset: str | None = None,
) -> str:
    """Per layer, ``path``'s share of the output at each fit after ``epochs`` (where every
    learned relaxed run of ``folder`` has one), seed by seed, with ``-log marglik``.

    Raises:
        ValueError: If the folder's runs are of several data sets and ``dataset`` is None.
    """
    runs = runs_table.runs()
    runs = runs[(runs["folder"] == folder) & runs["run"].map(learned_relaxed)]
    if dataset is not None:
        runs = runs[runs["dataset"] == dataset]
    if runs["dataset"].nunique() > 1:
        raise ValueError(f"{folder} holds learned runs of several data sets: name one")
    if runs.empty:
        return "No run yet."
    fits = runs_table.fits()
    fits = fits[fits["run"].isin(runs["run"])]
    columns = sorted(
        (c for c in fits.columns if c.startswith(f"{path}.output.") and fits[c].notna().any()),
        key=lambda c: int(c.rsplit(".", 1)[1]),
    )
    rows = []
    for epoch in epochs:
        at = pd.concat(
            [fits[(fits["run"] == run) & (fits["epoch"] == epoch)] for run in runs["run"]]
        )
        if len(at) < len(runs):
            continue
        cells = {"after epoch": str(epoch)}
        cells |= {
            f"layer{c.rsplit('.', 1)[1]}": " / ".join(f"{v:.2f}" for v in at[c]) for c in columns
        }
        rows.append(cells | {"-log marglik": " / ".join(f"{v:.0f}" for v in at["neg_log_marglik"])})
    seeds = " / ".join(str(seed) for seed in runs["seed"])
    return f"Per seed ({seeds}):\n\n" + page_values.table(pd.DataFrame(rows))


def _measured(file: str) -> tuple[dict, str]:
    """A benchmark's measurements on trained runs, and the sentence naming the runs, the device
    and the threads (without its full stop)."""
    measured = runs_table.report(file.removesuffix(".json"))
    runs, first = measured["runs"], measured["runs"][0]["settings"]
    seeds = ", ".join(str(r["settings"]["seed"]) for r in runs)
    return measured, (
        f"Runs: {first['dataset']}, {first['model']}, {first['epochs']} epochs, seeds {seeds}; "
        f"measured on {measured['device']}, {measured['threads']} thread(s)"
    )


def shift_errors_section(file: str) -> str:
    """``studies.shift_errors``'s runs: per layer the FC path's output share and each path's
    and the layer's distance from equivariance to the quadrant shifts, seed by seed."""
    measured, text = _measured(file)
    runs = measured["runs"]

    def per_seed(values: list) -> str:
        return " / ".join("-" if v is None else f"{v:.3f}" for v in values)

    text += (
        f"; {runs[0]['test_images']} test images; predicted class unchanged by the diagonal "
        f"shift, per seed: {per_seed([r['prediction_unchanged'] for r in runs])}."
    )
    rows = [
        {
            "layer": layer["layer"],
            "FC output share": per_seed([r["layers"][k]["paths"]["fc"]["share"] for r in runs]),
            "FC shift error": per_seed(
                [r["layers"][k]["paths"]["fc"]["shift_error"] for r in runs]
            ),
            "CONV shift error": per_seed(
                [r["layers"][k]["paths"]["conv"]["shift_error"] for r in runs]
            ),
            "layer's shift error": per_seed([r["layers"][k]["shift_error"] for r in runs]),
        }
        for k, layer in enumerate(runs[0]["layers"])
    ]
    return text + "\n\n" + page_values.table(pd.DataFrame(rows))


def factor_balance_section(file: str) -> str:
    """``studies.factor_balance``'s runs: the evidence and each layer's FC terms before and
    after the F-FC factor pairs are balanced, mean ± std over the seeds."""
    measured, text = _measured(file)
    runs = measured["runs"]
    pm = page_values.pm
    text += (
        f". Log marginal likelihood at the learned precisions: before "
        f"{pm(r['before']['log_marglik'] for r in runs)}, after "
        f"{pm(r['after']['log_marglik'] for r in runs)}; largest change of a logit by the "
        f"balancing: {max(r['max_output_change'] for r in runs):.1e}."
    )

    def cell(when: str, layer: str, path: str, key: str, index: int | None = None) -> str:
        values = [r[when]["layers"][layer][path][key] for r in runs]
        return pm(values if index is None else [v[index] for v in values])

    rows = [
        {
            "layer": layer,
            "FC gamma before": cell("before", layer, "fc", "gamma"),
            "FC gamma after": cell("after", layer, "fc", "gamma"),
            "FC prior term before": cell("before", layer, "fc", "prior_term"),
            "FC prior term after": cell("after", layer, "fc", "prior_term"),
            "d log p / d log delta: input map, output map (after)": (
                cell("after", layer, "fc", "log_precision_gradient", 0)
                + "; "
                + cell("after", layer, "fc", "log_precision_gradient", 1)
            ),
            "CONV gamma": cell("before", layer, "conv", "gamma"),
        }
        for layer in runs[0]["before"]["layers"]
    ]
    return text + "\n\n" + page_values.table(pd.DataFrame(rows))


def exact_blocks_section(file: str, runs_folder: str) -> str:
    """``studies.exact_blocks``'s runs: KFAC against the exact GGN tensor by tensor, then per
    layer KFAC's effective parameters over the exact ones per path and the FC output shares
    (the ``path_outputs.json`` of the runs in ``runs_folder``)."""
    measured, text = _measured(file)
    runs, pm = measured["runs"], page_values.pm
    blocks = []
    for k, block in enumerate(runs[0]["blocks"]):
        rows = [r["blocks"][k] for r in runs]
        blocks.append(
            {
                "tensor": block["tensor"],
                "parameters": str(block["parameters"]),
                "gamma KFAC": pm(row["kfac"]["gamma"] for row in rows),
                "gamma exact": pm(row["exact"]["gamma"] for row in rows),
                "Occam term KFAC": pm(row["kfac"]["log_det_term"] for row in rows),
                "Occam term exact": pm(row["exact"]["log_det_term"] for row in rows),
                "KFAC / exact (Occam term)": pm(
                    (row["kfac"]["log_det_term"] / row["exact"]["log_det_term"] for row in rows), 2
                ),
            }
        )
    shares = [
        {
            e["layer"]: e["paths"]["fc"]
            for e in runs_table.report(f"{runs_folder}/{r['run']}/path_outputs")
        }
        for r in runs
    ]

    def ratio(run: dict, layer: str, path: str) -> float:
        chosen = [b for b in run["blocks"] if b["tensor"].split(".")[:2] == [layer, path]]
        return sum(b["kfac"]["gamma"] for b in chosen) / sum(b["exact"]["gamma"] for b in chosen)

    tilt = []
    for layer in dict.fromkeys(b["tensor"].split(".")[0] for b in runs[0]["blocks"]):
        fc = [ratio(run, layer, "fc") for run in runs]
        conv = [ratio(run, layer, "conv") for run in runs]
        tilt.append(
            {
                "layer": layer,
                "gamma KFAC / exact: FC path": pm(fc, 2),
                "CONV path": pm(conv, 2),
                "CONV / FC": pm([c / f for c, f in zip(conv, fc, strict=True)], 2),
                "FC output share per seed": " / ".join(f"{s[layer]:.3f}" for s in shares),
            }
        )
    tables = (
        page_values.table(pd.DataFrame(blocks)) + "\n\n" + page_values.table(pd.DataFrame(tilt))
    )
    return f"{text}; mean ± std over the seeds.\n\n{tables}"


def evidence_split_section(file: str) -> str:
    """``studies.evidence_split``'s runs: ``-log marglik`` split into the data term and each
    path type's prior and Occam terms, runs of one training side by side, seed by seed; then
    per layer each path's terms and effective parameters, mean over the seeds."""
    measured = runs_table.report(file.removesuffix(".json"))
    groups: dict[str, list[dict]] = {}
    for run in measured["runs"]:
        s = runs_table.migrated(run["settings"])
        words = [f"learned {s['model'].upper()}"]
        words += [f"started {s['start']}"] if config.is_relaxed(s["model"]) else []
        words += ["balanced at every fit"] if s["balance_factors"] else []
        words += [f"{path.upper()} frozen" for path in run.get("frozen_paths", ())]
        groups.setdefault(", ".join(words), []).append(run)
    first = measured["runs"][0]["settings"]

    def cost(run: dict, path: str, layer: str | None = None) -> float:
        return sum(
            terms[path]["prior"] + terms[path]["occam"]
            for name, terms in run["layers"].items()
            if path in terms and layer in (None, name)
        )

    def per_seed(runs: list[dict], value) -> str:
        return " / ".join(f"{value(r):,.0f}" for r in runs)

    seeds = ", ".join(
        f"{name}: {' / '.join(str(r['settings']['seed']) for r in runs)}"
        for name, runs in groups.items()
    )
    totals = pd.DataFrame(
        [
            {
                "training": name,
                "-log marglik": per_seed(runs, lambda r: r["neg_log_marglik"]),
                "data": per_seed(runs, lambda r: r["data"]),
                "FC paths (prior + Occam)": per_seed(runs, lambda r: cost(r, "fc")),
                "CONV paths (prior + Occam)": per_seed(runs, lambda r: cost(r, "conv")),
                "head (prior + Occam)": per_seed(
                    runs, lambda r: r["outside"]["prior"] + r["outside"]["occam"]
                ),
            }
            for name, runs in groups.items()
        ]
    )
    layers = []
    for layer in measured["runs"][0]["layers"]:
        row = {"layer": layer}
        for name, runs in groups.items():
            for path in ("fc", "conv"):
                if path in runs[0]["layers"][layer]:
                    mean_cost = sum(cost(r, path, layer) for r in runs) / len(runs)
                    gamma = sum(r["layers"][layer][path]["gamma"] for r in runs) / len(runs)
                    row[f"{name}: {path.upper()} (gamma)"] = f"{mean_cost:,.0f} ({gamma:,.0f})"
        layers.append(row)
    return (
        f"Runs: {first['dataset']}, {first['epochs']} epochs, measured on {measured['device']}, "
        f"{measured['threads']} thread(s). Nats, seed by seed (seeds {seeds}).\n\n"
        + page_values.table(totals)
        + "\n\nPer layer, prior + Occam terms of each path and its effective parameters, mean "
        "over the seeds:\n\n" + page_values.table(pd.DataFrame(layers))
    )


def rotation_split(folder: str, model: str = "f-fc+conv+gconv", rivals: tuple = ()) -> str:
    """GCONV's share per layer on each data set and the rotation target's verdicts
    (:class:`~pages.rotation_section.RotationSplitSection`)."""
    from pages.rotation_section import RotationSplitSection

    return RotationSplitSection(folder, model, tuple(rivals)).render()


def group_evidence(folder: str, beside: tuple = (), gconv: str | None = None) -> str:
    """The single-group networks' evidence against each other and the full network's
    (:class:`~pages.group_evidence_section.GroupEvidenceSection`)."""
    from pages import group_evidence_section as groups

    gconv = gconv or groups.GCONV_NETWORK
    return groups.GroupEvidenceSection(folder, tuple(beside), gconv).render()


def invariant_weights(folder: str) -> str:
    """The invariant-weights network's learned rotation and the paper's claims on it
    (:class:`~pages.invariant_weights_section.InvariantWeightsSection`)."""
    from pages.invariant_weights_section import InvariantWeightsSection

    return InvariantWeightsSection(folder).render()


def older_versions(*folders: str, learned_only: bool = False) -> str:
    """Paragraphs (each after a blank line) naming the runs of ``folders`` (``learned_only``: those
    of learned relaxed models only) made before a change of behaviour that affects them
    (:data:`CHANGES`), or ``""``."""
    frame = runs_table.runs()
    frame = frame[frame["folder"].isin(folders)]
    if learned_only:
        frame = frame[frame["run"].map(learned_relaxed)]
    release = frame["version"].map(lambda v: tuple(int(part) for part in v.split(".")))
    text = ""
    for since, affects, before in CHANGES:
        old = frame[frame["model"].map(affects) & (release < tuple(map(int, since.split("."))))]
        label = old["dataset"] + " " + old["model"] + " " + old["method"]
        named = sorted(set(label + " (" + old["version"] + ")"))
        if named:
            text += (
                f"\n\nMade before version {since}, when {before}: {', '.join(named)}. They "
                "record that version's behaviour, not the current code's."
            )
    return text
