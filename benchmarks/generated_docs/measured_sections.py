"""Sections rendered from a benchmark's JSON file of measurements on trained runs: factor
balance, the evidence split into its terms, exact GGN blocks, shift errors."""

from __future__ import annotations

import json
import statistics
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from benchmarks.generated_docs.common import RESULTS
from benchmarks.generated_docs.results_sections import heading
from laplace_equivariance.app import config, summary


@dataclass(frozen=True)
class MeasuredRunsSection:
    """A benchmark's JSON file of measurements on trained runs (``{"device", "threads",
    "runs": [{"settings", ...}, ...]}``), with its command and conclusion."""

    title: str
    file: str
    command: str
    about: str
    conclusion: str

    def opening(self) -> tuple[dict[str, Any], list[str]]:
        """The measurements, and the section's heading lines up to the sentence naming the
        runs, the device and the threads (without its full stop)."""
        measured = json.loads((RESULTS / self.file).read_text())
        runs = measured["runs"]
        seeds = ", ".join(str(r["settings"]["seed"]) for r in runs)
        first = runs[0]["settings"]
        return measured, [
            *heading(self.title, self.about, self.command),
            f"Runs: {first['dataset']}, {first['model']}, {first['epochs']} epochs, seeds "
            f"{seeds}; measured on {measured['device']}, {measured['threads']} thread(s)",
        ]


@dataclass(frozen=True)
class FactorBalanceSection(MeasuredRunsSection):
    """``benchmarks/factor_balance.py``'s measurements: the Laplace evidence of trained runs
    before and after their F-FC factor pairs are balanced."""

    def render(self) -> str:
        measured, lines = self.opening()
        runs = measured["runs"]
        lines[-1] += (
            ". Log marginal likelihood at the learned precisions: before "
            + summary.mean_std([r["before"]["log_marglik"] for r in runs])
            + ", after "
            + summary.mean_std([r["after"]["log_marglik"] for r in runs])
            + "; largest change of a logit by the balancing: "
            + f"{max(r['max_output_change'] for r in runs):.1e}."
        )
        header = [
            "layer",
            "FC gamma before",
            "FC gamma after",
            "FC prior term before",
            "FC prior term after",
            "d log p / d log delta: input map, output map (after)",
            "CONV gamma",
        ]
        lines += ["", "| " + " | ".join(header) + " |", "|" + "---|" * len(header)]

        def cell(when: str, layer: str, path: str, key: str, index: int | None = None) -> str:
            values = [r[when]["layers"][layer][path][key] for r in runs]
            if index is not None:
                values = [v[index] for v in values]
            return summary.mean_std(values)

        for layer in runs[0]["before"]["layers"]:
            lines.append(
                "| "
                + " | ".join(
                    [
                        layer,
                        cell("before", layer, "fc", "gamma"),
                        cell("after", layer, "fc", "gamma"),
                        cell("before", layer, "fc", "prior_term"),
                        cell("after", layer, "fc", "prior_term"),
                        cell("after", layer, "fc", "log_precision_gradient", 0)
                        + "; "
                        + cell("after", layer, "fc", "log_precision_gradient", 1),
                        cell("before", layer, "conv", "gamma"),
                    ]
                )
                + " |"
            )
        return "\n".join([*lines, "", self.conclusion])


@dataclass(frozen=True)
class EvidenceSplitSection:
    """``benchmarks/evidence_split.py``'s measurements: trained runs' negative log marginal
    likelihood split into the data term and each path's prior and Occam terms, runs of one
    training (model, start, balancing) grouped, seeds side by side."""

    title: str
    file: str
    command: str
    about: str
    conclusion: str

    @staticmethod
    def training(run: dict[str, Any]) -> str:
        """A run's training in words: "learned F-FC+CONV, started equivariant"."""
        s = summary.LATER_OPTIONS | run["settings"]
        words = [f"learned {s['model'].upper()}"]
        if config.is_relaxed(s["model"]):
            words.append(f"started {s['start']}")
        if s["balance_factors"]:
            words.append("balanced at every fit")
        words += [f"{path.upper()} frozen" for path in run.get("frozen_paths", ())]
        return ", ".join(words)

    def render(self) -> str:
        measured = json.loads((RESULTS / self.file).read_text())
        groups: dict[str, list[dict[str, Any]]] = {}
        for run in measured["runs"]:
            groups.setdefault(self.training(run), []).append(run)
        first = measured["runs"][0]["settings"]

        def per_seed(runs: list[dict[str, Any]], value: Callable[[dict[str, Any]], float]) -> str:
            return " / ".join(f"{value(r):,.0f}" for r in runs)

        def paths_cost(run: dict[str, Any], path: str, layer: str | None = None) -> float:
            return sum(
                terms[path]["prior"] + terms[path]["occam"]
                for name, terms in run["layers"].items()
                if path in terms and layer in (None, name)
            )

        lines = [
            *heading(self.title, self.about, self.command),
            f"Runs: {first['dataset']}, {first['epochs']} epochs, measured on "
            f"{measured['device']}, {measured['threads']} thread(s). Nats, seed by seed "
            "(seeds "
            + ", ".join(
                f"{name}: {' / '.join(str(r['settings']['seed']) for r in runs)}"
                for name, runs in groups.items()
            )
            + ").",
            "",
            "| training | -log marglik | data | FC paths (prior + Occam) | CONV paths "
            "(prior + Occam) | head (prior + Occam) |",
            "|---|---|---|---|---|---|",
        ]
        for name, runs in groups.items():
            cells = [
                name,
                per_seed(runs, lambda r: r["neg_log_marglik"]),
                per_seed(runs, lambda r: r["data"]),
                per_seed(runs, lambda r: paths_cost(r, "fc")),
                per_seed(runs, lambda r: paths_cost(r, "conv")),
                per_seed(runs, lambda r: r["outside"]["prior"] + r["outside"]["occam"]),
            ]
            lines.append("| " + " | ".join(cells) + " |")
        layers = list(measured["runs"][0]["layers"])
        header = ["layer"] + [
            f"{name}: {path.upper()} (gamma)"
            for name, runs in groups.items()
            for path in ("fc", "conv")
            if path in runs[0]["layers"][layers[0]]
        ]
        lines += [
            "",
            "Per layer, prior + Occam terms of each path and its effective parameters, mean "
            "over the seeds:",
            "",
            "| " + " | ".join(header) + " |",
            "|" + "---|" * len(header),
        ]
        for layer in layers:
            cells = [layer]
            for runs in groups.values():
                for path in ("fc", "conv"):
                    if path not in runs[0]["layers"][layer]:
                        continue
                    cost = statistics.fmean(paths_cost(r, path, layer) for r in runs)
                    gamma = statistics.fmean(r["layers"][layer][path]["gamma"] for r in runs)
                    cells.append(f"{cost:,.0f} ({gamma:,.0f})")
            lines.append("| " + " | ".join(cells) + " |")
        return "\n".join([*lines, "", self.conclusion])


@dataclass(frozen=True)
class ExactBlocksSection(MeasuredRunsSection):
    """``benchmarks/exact_blocks.py``'s measurements: KFAC against the exact GGN, tensor by
    tensor, for trained runs at their learned precisions; then per layer the tilt: KFAC's
    gamma over the exact one for each path (summed over the path's tensors), their quotient,
    and what the FC path computes (``path_outputs.json`` of the runs in ``runs_folder``)."""

    runs_folder: str = ""

    def render(self) -> str:
        measured, lines = self.opening()
        runs = measured["runs"]
        lines[-1] += "; mean ± std over the seeds."
        header = ["tensor", "parameters", "gamma KFAC", "gamma exact", "Occam term KFAC"]
        header += ["Occam term exact", "KFAC / exact (Occam term)"]
        lines += ["", "| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
        for k, block in enumerate(runs[0]["blocks"]):
            rows = [r["blocks"][k] for r in runs]

            def values(kind: str, key: str, rows: list[dict] = rows) -> list[float]:
                return [row[kind][key] for row in rows]

            ratios = [row["kfac"]["log_det_term"] / row["exact"]["log_det_term"] for row in rows]
            cells = [
                block["tensor"],
                str(block["parameters"]),
                summary.mean_std(values("kfac", "gamma")),
                summary.mean_std(values("exact", "gamma")),
                summary.mean_std(values("kfac", "log_det_term")),
                summary.mean_std(values("exact", "log_det_term")),
                summary.mean_std(ratios, digits=2),
            ]
            lines.append("| " + " | ".join(cells) + " |")
        return "\n".join([*lines, *self.tilt(runs), "", self.conclusion])

    def tilt(self, runs: list[dict[str, Any]]) -> list[str]:
        """The per-layer table of the paths' overstatement and the FC output shares."""
        header = ["layer", "gamma KFAC / exact: FC path", "CONV path", "CONV / FC"]
        header += ["FC output share per seed"]
        lines = ["", "| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
        shares = [
            {
                entry["layer"]: entry["paths"]["fc"]
                for entry in json.loads(
                    (RESULTS / self.runs_folder / run["run"] / "path_outputs.json").read_text()
                )
            }
            for run in runs
        ]
        for layer in dict.fromkeys(b["tensor"].split(".")[0] for b in runs[0]["blocks"]):
            fc, conv = [], []
            for run in runs:
                blocks = [b for b in run["blocks"] if b["tensor"].startswith(layer + ".")]

                def ratio(path: str, blocks: list[dict] = blocks) -> float:
                    chosen = [b for b in blocks if b["tensor"].split(".")[1] == path]
                    kfac = sum(b["kfac"]["gamma"] for b in chosen)
                    return kfac / sum(b["exact"]["gamma"] for b in chosen)

                fc.append(ratio("fc"))
                conv.append(ratio("conv"))
            cells = [
                layer,
                summary.mean_std(fc, digits=2),
                summary.mean_std(conv, digits=2),
                summary.mean_std([c / f for c, f in zip(conv, fc, strict=True)], digits=2),
                " / ".join(f"{share[layer]:.3f}" for share in shares),
            ]
            lines.append("| " + " | ".join(cells) + " |")
        return lines


@dataclass(frozen=True)
class ShiftErrorsSection(MeasuredRunsSection):
    """``benchmarks/shift_errors.py``'s measurements: per layer, what the FC path carries and
    how far it and the layer are from equivariant to the quadrant shifts."""

    def render(self) -> str:
        measured, lines = self.opening()
        runs = measured["runs"]

        def per_seed(values: list[float | None]) -> str:
            return " / ".join("-" if v is None else f"{v:.3f}" for v in values)

        lines[-1] += (
            f"; {runs[0]['test_images']} test images; predicted class unchanged by the "
            f"diagonal shift, per seed: {per_seed([r['prediction_unchanged'] for r in runs])}."
        )
        header = ["layer", "FC output share", "FC shift error", "CONV shift error"]
        header += ["layer's shift error"]
        lines += ["", "| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
        for k, layer in enumerate(runs[0]["layers"]):
            rows = [r["layers"][k] for r in runs]
            cells = [
                layer["layer"],
                per_seed([row["paths"]["fc"]["share"] for row in rows]),
                per_seed([row["paths"]["fc"]["shift_error"] for row in rows]),
                per_seed([row["paths"]["conv"]["shift_error"] for row in rows]),
                per_seed([row["shift_error"] for row in rows]),
            ]
            lines.append("| " + " | ".join(cells) + " |")
        return "\n".join([*lines, "", self.conclusion])
