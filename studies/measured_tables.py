"""The tables of the measurements made on trained runs (:mod:`studies.measured_runs`' form):
shift errors (:mod:`studies.shift_errors`), factor balance (:mod:`studies.factor_balance`), KFAC
against the exact GGN (:mod:`studies.exact_blocks`) and the evidence split
(:mod:`studies.evidence_split`). Each function reads one committed file and returns the sentence
naming the runs, device and threads, then its tables; the results pages' templates call them
(``shift_errors_section(FILE)``, ...).
"""

from __future__ import annotations

from collections.abc import Iterable

import pandas as pd

from benchmarks.markdown_table import table
from laplace_equivariance.app import config, summary
from laplace_equivariance.app.runs import migrated
from studies import runs_table


def _pm(values: Iterable[float], digits: int = 1) -> str:
    """``"mean ± std"`` over the seeds (:func:`~laplace_equivariance.app.summary.mean_std`)."""
    return summary.mean_std(list(values), digits=digits)


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
    return text + "\n\n" + table(pd.DataFrame(rows))


def factor_balance_section(file: str) -> str:
    """``studies.factor_balance``'s runs: the evidence and each layer's FC terms before and
    after the F-FC factor pairs are balanced, mean ± std over the seeds."""
    measured, text = _measured(file)
    runs = measured["runs"]
    pm = _pm
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
    return text + "\n\n" + table(pd.DataFrame(rows))


def exact_blocks_section(file: str, runs_folder: str) -> str:
    """``studies.exact_blocks``'s runs: KFAC against the exact GGN tensor by tensor, then per
    layer KFAC's effective parameters over the exact ones per path and the FC output shares
    (the ``path_outputs.json`` of the runs in ``runs_folder``)."""
    measured, text = _measured(file)
    runs, pm = measured["runs"], _pm
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

    tilt = []
    for layer in dict.fromkeys(_layer(block) for block in runs[0]["blocks"]):
        fc = [_overstatement(run, layer, "fc") for run in runs]
        conv = [_overstatement(run, layer, "conv") for run in runs]
        tilt.append(
            {
                "layer": layer,
                "gamma KFAC / exact: FC path": pm(fc, 2),
                "CONV path": pm(conv, 2),
                "CONV / FC": pm([c / f for c, f in zip(conv, fc, strict=True)], 2),
                "FC output share per seed": " / ".join(f"{s[layer]:.3f}" for s in shares),
            }
        )
    tables = table(pd.DataFrame(blocks)) + "\n\n" + table(pd.DataFrame(tilt))
    return f"{text}; mean ± std over the seeds.\n\n{tables}"


def _layer(block: dict) -> str:
    """The layer of an exact-blocks tensor (``"layer4"`` of ``"layer4.fc.input_map.weight"``)."""
    return block["tensor"].split(".")[0]


def _overstatement(run: dict, layer: str, path: str) -> float:
    """KFAC's ``gamma`` over the exact GGN's, summed over ``path``'s tensors in ``layer``."""
    chosen = [b for b in run["blocks"] if b["tensor"].split(".")[:2] == [layer, path]]
    return sum(b["kfac"]["gamma"] for b in chosen) / sum(b["exact"]["gamma"] for b in chosen)


def overstated(file: str, from_layer: int = 1) -> tuple[list[int], int]:
    """Per seed of ``studies.exact_blocks``' runs in ``file``, how many tensors' Occam terms KFAC
    puts above the exact GGN's (their curvature overstated), and how many tensors there are;
    only the tensors of layers ``from_layer`` on (``layerK``, ``K >= from_layer``)."""
    runs = runs_table.report(file.removesuffix(".json"))["runs"]

    def kept(block: dict) -> bool:
        return int(_layer(block).removeprefix("layer")) >= from_layer

    counts = [
        sum(
            b["kfac"]["log_det_term"] > b["exact"]["log_det_term"] for b in run["blocks"] if kept(b)
        )
        for run in runs
    ]
    return counts, sum(map(kept, runs[0]["blocks"]))


def conv_over_fc(file: str) -> dict[str, list[float]]:
    """Per layer, seed by seed, how much more KFAC overstates the CONV path's ``gamma`` than the
    FC path's: ``(gamma_KFAC / gamma_exact)_CONV / (gamma_KFAC / gamma_exact)_FC`` over
    ``studies.exact_blocks``' runs in ``file`` (below one: KFAC strengthens the FC prior more,
    as the learned precision is ``gamma / ||theta||^2``)."""
    runs = runs_table.report(file.removesuffix(".json"))["runs"]
    return {
        layer: [_overstatement(r, layer, "conv") / _overstatement(r, layer, "fc") for r in runs]
        for layer in dict.fromkeys(_layer(block) for block in runs[0]["blocks"])
    }


def evidence_split_section(file: str) -> str:
    """``studies.evidence_split``'s runs: ``-log marglik`` split into the data term and each
    path type's prior and Occam terms, runs of one training side by side, seed by seed; then
    per layer each path's terms and effective parameters, mean over the seeds."""
    measured = runs_table.report(file.removesuffix(".json"))
    groups: dict[str, list[dict]] = {}
    for run in measured["runs"]:
        s = migrated(run["settings"])
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
        + table(totals)
        + "\n\nPer layer, prior + Occam terms of each path and its effective parameters, mean "
        "over the seeds:\n\n" + table(pd.DataFrame(layers))
    )
