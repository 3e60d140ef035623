"""The section of the invariant-weights network's learned rotation and its claims."""

from __future__ import annotations

import json
from dataclasses import dataclass

from benchmarks.markdown_table import rows_table
from laplace_equivariance.app import summary
from studies import runs_table
from studies.verdicts import judge

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

    folder: str

    def experiments(self) -> dict[tuple[str, str, float | None], list[dict]]:
        """(data set, objective, fixed angle in degrees or None if learned) -> every seed's row."""
        found: dict[tuple[str, str, float | None], list[dict]] = {}
        for path in sorted((runs_table.RESULTS / self.folder).glob("rotation-seed*.json")):
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
        lines = [rows_table(header, table), "", "The paper's claims at this budget:", ""]
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
                    + judge(angles(more, objective), angles(less, objective), unit="degrees")
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
                    + judge(elbo.get(own, []), elbo[other], digits=3, unit="per example")
                )
        for dataset in ordered:
            data = INVARIANT_WEIGHTS_DATA[dataset]
            lines.append(
                f"- likelihood only: less rotation than the ELBO on {data} digits (the "
                "paper's Sec. 4.3): "
                + judge(angles(dataset, "elbo"), angles(dataset, "likelihood"), unit="degrees")
            )
        return lines


def invariant_weights(folder: str) -> str:
    """The invariant-weights network's learned rotation and the paper's claims on it
    (:class:`~studies.invariant_weights_section.InvariantWeightsSection`)."""
    return InvariantWeightsSection(folder).render()
