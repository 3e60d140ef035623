"""The kinds of section of docs/results.md and how each renders its runs.

Each section is one folder of runs under benchmarks/results/ (``benchmarks/paper_tables.py``
writes them; the command is in the section), rendered by
:func:`laplace_equivariance.summary.markdown`, followed by the paper's claims for that table
checked on the rows: a claim "A above B" holds where the mean difference exceeds twice its
standard error over seeds, is "not distinguishable" within it and "reversed" below it; a
claim "A not below B" is "consistent" within two standard errors (which a large seed spread
makes a weak statement: the standard error is printed beside it); with one seed no verdict is
possible. The figures in the sections' prose are placeholders rendered from the runs
(:mod:`benchmarks.generated_docs.figures`).
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from benchmarks.generated_docs.common import (
    RESULTS,
    ROOT,
    difference,
    markdown_table,
    release,
)
from laplace_equivariance import config, summary

DOCUMENT = ROOT / "docs" / "results.md"
FRAGMENTS = Path(__file__).parent / "fragments" / "results"
"""The sections' narrative: one Markdown file per passage, figures as placeholders."""


def fragment(name: str) -> str:
    """The narrative passage ``fragments/results/<name>.md`` (without its last newline)."""
    return (FRAGMENTS / f"{name}.md").read_text().removesuffix("\n")


@dataclass(frozen=True)
class Claim:
    """``better`` (trained from ``better_start``) is above ``worse`` (trained from
    ``worse_start``) in test accuracy on ``dataset`` (or, with ``not_below``, at least not
    below it)."""

    text: str
    dataset: str
    better: tuple[str, str]
    worse: tuple[str, str]
    not_below: bool = False
    better_start: str = "mixed"
    worse_start: str = "mixed"
    burnin: int | None = None
    """The learned rows' burn-in, where a section holds rows of several."""
    better_variants: tuple[str, ...] = ()
    """The ``better`` row's variants besides its start (``summary.Row.variants``, e.g.
    ``("temperature 2",)``); the ``worse`` row has none."""

    def verdict(self, rows: list[summary.Row]) -> str:
        """The claim checked on ``rows``."""
        a = self.row(rows, self.better, self.better_start, self.better_variants)
        b = self.row(rows, self.worse, self.worse_start)
        if a is None or b is None:
            return "not run"
        return judge(a.accuracy(), b.accuracy(), "points", self.not_below)

    def row(
        self,
        rows: list[summary.Row],
        model_method: tuple[str, str],
        start: str,
        variants: tuple[str, ...] = (),
    ) -> summary.Row | None:
        """The row of ``model_method`` trained from ``start`` with ``variants`` and no other.

        Raises:
            ValueError: If several rows fit (give ``burnin``).
        """
        found = []
        for r in rows:
            s = summary.LATER_OPTIONS | r.settings
            plain = r.variants() == [*summary.start_words(s | {"start": start}), *variants]
            learned = s["method"] == "marglik"
            if (
                (s["dataset"], s["model"], s["method"], s["start"])
                == (self.dataset, *model_method, start)
                and plain
                and (self.burnin is None or not learned or s["burnin"] == self.burnin)
            ):
                found.append(r)
        if len(found) > 1:
            raise ValueError(
                f"Claim {self.text!r}: {len(found)} rows of {model_method} started {start}; "
                "give the claim a burnin."
            )
        return found[0] if found else None


def judge(
    x: list[float], y: list[float], unit: str, not_below: bool = False, digits: int = 1
) -> str:
    """Verdict on "``x`` above ``y``" (or "not below" with ``not_below``) by the seed spread."""
    if not x or not y:
        return "not run"
    if len(x) < 2 or len(y) < 2:
        return "one seed: no verdict"
    diff, error = difference(x, y)
    figures = f"difference {diff:+.{digits}f} {unit}, standard error {error:.{digits}f}"
    if diff > 2 * error:
        return f"reproduced ({figures})"
    if diff >= -2 * error:
        status = "consistent (within two standard errors)" if not_below else "not distinguishable"
        return f"{status} ({figures})"
    return f"**not reproduced: reversed** ({figures})"


def started(claims: list[Claim], start: str, burnin: int | None = None) -> list[Claim]:
    """The learned-model claims of ``claims`` checked on the rows trained from ``start`` (with
    ``burnin``, where a section holds several)."""
    return [
        replace(
            c,
            text=c.text.replace("learned F-FC+CONV", f"learned F-FC+CONV (started {start})"),
            better_start=start,
            burnin=burnin,
        )
        for c in claims
        if c.better[1] == "marglik"
    ]


def started_equivariant(claims: list[Claim], burnin: int | None = None) -> list[Claim]:
    """The learned-model claims of ``claims`` checked on the rows started equivariant."""
    return started(claims, "equivariant", burnin)


@dataclass(frozen=True)
class BehaviourChange:
    """A package version from which runs of some models behave differently."""

    since: str
    affects: Callable[[dict[str, Any]], bool]
    """Whether a run of these settings (its ``results.json``'s ``settings``) is affected."""
    before: str
    """What runs made before ``since`` did, for the note."""


CHANGES = (
    BehaviourChange(
        "0.2.0",
        lambda settings: "f-fc" in settings["model"] or "s-fc" in settings["model"],
        "F-FC/S-FC factors were not balanced at initialisation and learned runs took one "
        "prior per path",
    ),
    BehaviourChange(
        "0.3.0",
        lambda settings: "+" in settings["model"],
        "relaxed layers averaged their paths (now: their sum over sqrt(K))",
    ),
)
"""Behaviour changes that make older committed runs record another version's behaviour
(docs/learned_structure.md)."""


def older_versions(runs: list[Path]) -> list[str]:
    """A note naming the runs made before a :data:`CHANGES` entry that affects their settings.

    Returns:
        No line, or a blank line and one paragraph per change.
    """
    loaded = [summary.load_run(run) for run in runs]
    lines = []
    for change in CHANGES:
        old = sorted(
            {
                f"{r['settings']['dataset']} {r['settings']['model']} {r['settings']['method']} "
                f"({r['versions']['laplace_equivariance']})"
                for r in loaded
                if change.affects(r["settings"])
                and release(r["versions"]["laplace_equivariance"]) < release(change.since)
            }
        )
        if old:
            lines += [
                "",
                f"Made before version {change.since}, when {change.before}: {', '.join(old)}. "
                "They record that version's behaviour, not the current code's.",
            ]
    return lines


def heading(title: str, about: str, command: str) -> list[str]:
    """A section's first lines: its title, what it shows and the command that made it."""
    return [f"## {title}", "", about, "", f"`{command}`", ""]


@dataclass(frozen=True)
class Section:
    """One folder of runs, its command and what it shows."""

    title: str
    folder: str
    command: str
    about: str
    claims: list[Claim] = field(default_factory=list)
    beside: tuple[str, ...] = ()
    """Folders of committed runs shown beside this folder's (compared in the claims)."""
    claims_heading: str = "The paper's claims at this budget:"
    """The line above the claims' verdicts (another where they are not the paper's)."""

    def render(self) -> str:
        runs = sorted(
            p.parent
            for folder in (*self.beside, self.folder)
            for p in (RESULTS / folder).rglob("results.json")
        )
        rows = summary.rows(runs)
        lines = [f"## {self.title}", "", self.about, "", f"`{self.command}`", ""]
        lines.append(summary.markdown(runs))
        if self.claims:
            lines += ["", self.claims_heading, ""]
            lines += [f"- {c.text}: {c.verdict(rows)}" for c in self.claims]
        return "\n".join(lines + older_versions(runs))


@dataclass(frozen=True)
class StructureSection:
    """Learned runs of relaxed models (F-FC+CONV and the like) from several folders, with the
    structure they learned."""

    title: str
    folders: tuple[str, ...]
    command: str
    about: str
    conclusion: str

    def render(self) -> str:
        runs = sorted(
            p.parent
            for folder in self.folders
            for p in (RESULTS / folder).rglob("results.json")
            if "-marglik" in p.parent.name and "+" in p.parent.name  # a path choice to show
        )
        lines = [f"## {self.title}", "", self.about, "", f"`{self.command}`", ""]
        lines.append(summary.structure_markdown(runs))
        differences = kfac_differences(summary.rows(runs))
        if differences:
            lines += ["", "Reduce minus expand, per task:", "", *differences]
        lines += ["", self.conclusion]
        return "\n".join(lines + older_versions(runs))


@dataclass(frozen=True)
class FitTraceSection:
    """Learned runs' ``fits`` (one entry per marginal-likelihood fit, ``train`` writes them):
    per layer, how one path's share of the output moves from fit to fit.

    ``path`` is the path traced (FC by default); ``dataset``, where given, keeps the runs of
    that data set only (a folder holding several data sets, Table 3's); ``epochs`` are the
    fits shown, where every run has one.
    """

    title: str
    folder: str
    command: str
    about: str
    conclusion: str
    epochs: tuple[int, ...] = (10, 15, 20, 30, 40, 60, 80, 100, 125, 150)
    path: str = "fc"
    dataset: str | None = None

    def render(self) -> str:
        runs = [
            json.loads(p.read_text())
            for p in sorted((RESULTS / self.folder).rglob("results.json"))
            if "-marglik" in p.parent.name and "+" in p.parent.name  # learned relaxed runs
        ]
        if self.dataset is not None:
            runs = [r for r in runs if r["settings"]["dataset"] == self.dataset]
        datasets = sorted({r["settings"]["dataset"] for r in runs})
        if len(datasets) > 1:
            raise ValueError(
                f"{self.folder} holds learned runs of {', '.join(datasets)}; name one with "
                "FitTraceSection(dataset=...) so that one trace does not mix data sets."
            )
        lines = [f"## {self.title}", "", self.about, "", f"`{self.command}`", ""]
        if not runs:
            return "\n".join([*lines, "No run yet.", "", self.conclusion])
        seeds = " / ".join(str(r["settings"]["seed"]) for r in runs)
        fits = [{fit["epoch"]: fit for fit in r["fits"]} for r in runs]
        layers = [row["layer"] for row in runs[0]["fits"][0]["path_outputs"]]
        header = ["after epoch", *layers, "-log marglik"]
        lines += [f"Per seed ({seeds}):", ""]
        lines += ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
        for epoch in self.epochs:
            at = [by_epoch[epoch] for by_epoch in fits if epoch in by_epoch]
            if len(at) < len(runs):
                continue
            cells = [str(epoch)]
            for k in range(len(layers)):
                cells.append(
                    " / ".join(f"{fit['path_outputs'][k]['paths'][self.path]:.2f}" for fit in at)
                )
            cells.append(" / ".join(f"{fit['neg_log_marglik']:.0f}" for fit in at))
            lines.append("| " + " | ".join(cells) + " |")
        return "\n".join([*lines, "", self.conclusion])


def kfac_differences(rows: list[summary.Row]) -> list[str]:
    """Per data set, reduce's mean minus expand's, with standard errors over the seeds."""
    by_mode: dict[str, dict[str, summary.Row]] = {}
    for row in rows:
        settings = summary.LATER_OPTIONS | row.settings
        by_mode.setdefault(settings["dataset"], {})[settings["kfac_approx"]] = row
    lines = []
    for dataset, modes in by_mode.items():
        if set(modes) != {"expand", "reduce"}:
            continue
        expand, reduce = modes["expand"], modes["reduce"]
        if len(expand.accuracy()) < 2 or len(reduce.accuracy()) < 2:
            lines.append(f"- {dataset}: one seed of a mode: no difference judged")
            continue
        terms = []
        for name, values, digits in (
            ("test accuracy", lambda r: r.accuracy(), 1),
            ("test NLL", lambda r: r.nll(), 3),
            ("-log marglik / N", lambda r: r.neg_log_marglik_per_example(), 2),
        ):
            diff, error = difference(values(reduce), values(expand))
            terms.append(f"{name} {diff:+.{digits}f} (standard error {error:.{digits}f})")
        lines.append(f"- {dataset}: " + "; ".join(terms))
    return lines


INVARIANT_WEIGHTS_DATA = {
    "rotated-mnist": "fully rotated (±180°)",
    "partially-rotated-mnist": "partially rotated (±90°)",
    "mnist": "plain",
}
"""The invariant-weights benchmark's data sets, most rotated first."""


OWN_FIXED_ANGLE = {"rotated-mnist": 175.0, "partially-rotated-mnist": 90.0, "mnist": 5.0}
"""Per data set, the benchmark's fixed angle (degrees) nearest to the data's own rotation."""


def _eta_label(fixed: float | None) -> str:
    return "learned" if fixed is None else f"fixed {fixed:.0f}°"


@dataclass(frozen=True)
class InvariantWeightsSection:
    """The invariant-weights network's learned rotation, one ``rotation-seed<S>.json`` a seed."""

    title: str
    folder: str
    command: str
    about: str

    def experiments(self) -> dict[tuple[str, str, float | None], list[dict]]:
        """(data set, objective, fixed angle in degrees or None if learned) -> every seed's row."""
        found: dict[tuple[str, str, float | None], list[dict]] = {}
        for path in sorted((RESULTS / self.folder).glob("rotation-seed*.json")):
            for row in json.loads(path.read_text())["rows"]:
                # a fixed angle is held in float32 radians: 175 comes back as 175.000006
                fixed = None if row["eta"] == "learned" else round(row["eta_degrees"], 1)
                found.setdefault((row["dataset"], row["objective"], fixed), []).append(row)
        return found

    def render(self) -> str:
        experiments = self.experiments()
        header = ["data", "objective", "eta", "abs(eta) (deg)", "test acc %", "test NLL"]
        header += ["ELBO or log marglik / N", "seeds"]
        table = []
        for (dataset, objective, fixed), runs in experiments.items():
            objectives = [r["final_objective_per_example"] for r in runs]
            table.append(
                [
                    INVARIANT_WEIGHTS_DATA[dataset],
                    objective,
                    _eta_label(fixed),
                    summary.mean_std([abs(r["eta_degrees"]) for r in runs]),
                    summary.mean_std([r["test_accuracy"] for r in runs], scale=100),
                    summary.mean_std([r["test_nll"] for r in runs], digits=2),
                    "-" if None in objectives else summary.mean_std(objectives, digits=2),
                    str(len(runs)),
                ]
            )
        lines = [f"## {self.title}", "", self.about, "", f"`{self.command}`", ""]
        lines += [markdown_table(header, table), "", "The paper's claims at this budget:", ""]
        return "\n".join(lines + self.claims(experiments))

    @staticmethod
    def claims(experiments: dict[tuple[str, str, float | None], list[dict]]) -> list[str]:
        """More rotation learned on more rotated data; among fixed angles the ELBO is highest at
        the data's own rotation; maximum likelihood learns less rotation than the ELBO."""

        def angles(dataset: str, objective: str) -> list[float]:
            return [abs(r["eta_degrees"]) for r in experiments.get((dataset, objective, None), [])]

        lines = []
        ordered = list(INVARIANT_WEIGHTS_DATA)
        for objective in ("elbo", "laplace"):
            for more, less in zip(ordered, ordered[1:], strict=False):
                lines.append(
                    f"- {objective}: more rotation learned on {INVARIANT_WEIGHTS_DATA[more]} "
                    f"than on {INVARIANT_WEIGHTS_DATA[less]} digits: "
                    + judge(angles(more, objective), angles(less, objective), "degrees")
                )
        for dataset, own in OWN_FIXED_ANGLE.items():
            elbo = {
                fixed: [r["final_objective_per_example"] for r in runs]
                for (d, objective, fixed), runs in experiments.items()
                if d == dataset and objective == "elbo" and fixed is not None
            }
            for other in sorted(set(elbo) - {own}):
                lines.append(
                    f"- {INVARIANT_WEIGHTS_DATA[dataset]} digits: the ELBO at {_eta_label(own)} "
                    f"(the data's rotation) above the ELBO at {_eta_label(other)}: "
                    + judge(elbo.get(own, []), elbo[other], "per example", digits=3)
                )
        for dataset in ordered:
            data = INVARIANT_WEIGHTS_DATA[dataset]
            lines.append(
                f"- likelihood only: less rotation than the ELBO on {data} digits (the "
                "paper's Sec. 4.3): "
                + judge(angles(dataset, "elbo"), angles(dataset, "likelihood"), "degrees")
            )
        return lines


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
