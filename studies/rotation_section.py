"""Table 3's rotation test: GCONV's share on rotated against upright digits, layer by layer.

Issue 44's target for Table 3: learned F-FC+CONV+GCONV gives its GCONV paths a larger share of
the relative effective parameters (App. D) on rotated digits than on upright ones in most
layers, in every seed; and on translated digits the FC paths stay near zero. The section reads
the learned runs of one folder (``paper_tables table3`` writes them, one per data set and
seed), pairs the upright and the rotated run of each seed, and says where the target holds.

Whether the structure has settled is read from the runs' ``fits`` (one entry per
marginal-likelihood fit): at a fit the share of a path is estimated from its tensors' prior
precisions and squared norms, :math:`\\gamma_t \\approx \\delta_t \\|\\theta_t\\|^2` (MacKay's
fixed point, which the evidence's optimum satisfies; the final symmetry report uses the
curvature's eigenvalues instead), normalised by the path's parameter count and relative to
the layer's other paths as in App. D. A run has settled when no layer's GCONV share moved by
more than :data:`SETTLED_POINTS` over its last :data:`SETTLED_FITS` fits. Under a cosine
learning rate that ends at 0 the last fits are flat whether or not the structure has settled,
so the section also gives each run's largest move over its second half
(:func:`second_half_move`) and says so when the runs' schedule ends at 0.

Given ``rivals`` (folders of the same runs from other starts), the section compares, for each
data set and seed, the runs of every folder by their evidence and keeps the one with the
highest: the objective the method maximises picks the start, as it picks the priors, and no
test image is looked at (:func:`choose_by_evidence`).
"""

from __future__ import annotations

import functools
import json
import statistics
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from benchmarks.markdown_table import rows_table
from laplace_equivariance.app import summary
from laplace_equivariance.data.datasets import training_labels
from laplace_equivariance.marglik.chance import at_chance, chance_bound, class_counts
from studies import runs_table

UPRIGHT, TRANSLATED, ROTATED, PARTIAL, QUARTER = (
    "mnist",
    "translated-mnist",
    "rotated-mnist",
    "partially-rotated-mnist",
    "quarter-turn-mnist",
)
DATASETS = (UPRIGHT, TRANSLATED, PARTIAL, ROTATED, QUARTER)
"""Table 3's data sets in the order of the columns (least to most rotated), then the known
truth for GCONV: digits turned by multiples of 90 degrees, exactly the p4 layers' rotations."""

TURNED = {PARTIAL: "partially rotated", ROTATED: "rotated", QUARTER: "quarter-turned"}
"""The turned data sets compared with the upright digits: the target's two (by at most 90 and
by at most 180 degrees), then the known truth."""

SETTLED_FITS = 3
"""Fits over which a settled run's shares stay flat."""

SETTLED_POINTS = 5.0
"""Largest move (percentage points) of a layer's share over the last fits of a settled run."""


@functools.cache
def _training_counts(
    dataset: str, data_dir: str | None, n_train: int | None, seed: int
) -> torch.Tensor:
    """Examples per class of a run's training labels, shape ``(C,)`` (loaded once per setting)."""
    return class_counts(training_labels(dataset, data_dir, n_train, seed))


def training_counts(result: dict[str, Any]) -> torch.Tensor:
    """Examples per class of the labels ``result``'s run was trained on, shape ``(C,)``."""
    s = result["settings"]
    return _training_counts(s["dataset"], s.get("data_dir"), s.get("subset"), s["seed"])


def never_learned(result: dict[str, Any]) -> bool:
    """Whether a run's training accuracy is at chance (:mod:`laplace_equivariance.marglik.chance`).

    Such a run's shares are those of a network at the trivial minimum, and its seed cannot meet
    a target. Runs record the verdict as ``train_at_chance``; for a run written before they
    did, it is computed from the run's training labels, reloaded from its settings.
    """
    if "train_at_chance" in result:
        return bool(result["train_at_chance"])
    return at_chance(result["train"]["accuracy"], training_counts(result))


FC_NEAR_ZERO = 0.01
"""An FC share below this (1 %, the threshold at which docs call a path off) is near zero."""


def layer_shares(symmetry: dict[str, Any], path: str) -> list[float]:
    """``path``'s relative effective parameters per relaxed layer of one run (0 if absent)."""
    return [row["paths"].get(path, {}).get("relative", 0.0) for row in symmetry["layers"]]


def effective_shares(result: dict[str, Any], path: str) -> list[float]:
    """``path``'s share of each layer's relative effective parameters (App. D), one run."""
    return layer_shares(result["symmetry"], path)


def output_shares(result: dict[str, Any], path: str) -> list[float]:
    """``path``'s share of each layer's output energy on training images, one run."""
    return [row["paths"].get(path, 0.0) for row in result["path_outputs"]]


MEASURES = {
    "relative effective parameters": effective_shares,
    "output energy": output_shares,
}
"""The two ways a layer's share of a path is read from a run: the target's (App. D) first."""


def fit_shares(result: dict[str, Any], fit: dict[str, Any], path: str) -> list[float]:
    r"""``path``'s share per relaxed layer at one fit, from :math:`\delta_t \|\theta_t\|^2`.

    Args:
        result: A run's results.json (its ``symmetry`` gives the layers, paths and parameter
            counts).
        fit: One entry of its ``fits`` (``prior_precision`` and ``squared_norm`` per tensor).
        path: The path whose share is returned.
    """
    counts = {
        row["layer"]: {p: entry["parameters"] for p, entry in row["paths"].items()}
        for row in result["symmetry"]["layers"]
    }
    effective: dict[str, dict[str, float]] = {layer: {} for layer in counts}
    for tensor, precision in fit["prior_precision"].items():
        layer, tensor_path = tensor.split(".")[:2]
        if tensor_path in counts.get(layer, {}):
            gamma = precision * fit["squared_norm"][tensor]
            effective[layer][tensor_path] = effective[layer].get(tensor_path, 0.0) + gamma
    shares = []
    for layer, paths in counts.items():
        normalised = {p: effective[layer].get(p, 0.0) / paths[p] for p in paths}
        total = sum(normalised.values())
        shares.append(normalised.get(path, 0.0) / total if total > 0 else 0.0)
    return shares


def last_fits_move(result: dict[str, Any], path: str, fits: int = SETTLED_FITS) -> float:
    """Largest move of a layer's ``path`` share over the run's last ``fits`` fits, in points."""
    trace = [fit_shares(result, fit, path) for fit in result["fits"][-fits:]]
    return 100 * max(max(column) - min(column) for column in zip(*trace, strict=True))


def second_half_move(result: dict[str, Any], path: str) -> float:
    """Largest move of a layer's ``path`` share over the fits of the run's second half, in
    points (its fits at or after half the epochs)."""
    half = result["settings"]["epochs"] / 2
    trace = [fit_shares(result, fit, path) for fit in result["fits"] if fit["epoch"] >= half]
    return 100 * max(max(column) - min(column) for column in zip(*trace, strict=True))


def evidence_per_example(result: dict[str, Any]) -> float:
    """A run's last ``-log p(D)/N`` (the marginal likelihood of its last fit per training
    example); raises ``ValueError`` for a run without a fit, which no evidence can rank."""
    if not result["neg_log_marglik"]:
        raise ValueError(
            f"the {result['settings']['dataset']} run of seed {result['settings']['seed']} has "
            "no marginal-likelihood fit to rank it by: give it at least one fit (--epochs above "
            "--burnin) or leave its folder out of the section's rivals"
        )
    return result["neg_log_marglik"][-1] / result["n_train"]


def choose_by_evidence(folders: list[Path]) -> dict[tuple[str, int], list[Path]]:
    """The runs of ``folders`` per (data set, seed), the one of highest evidence first.

    Args:
        folders: ``--out`` folders of learned runs, several per data set and seed (one per
            start).

    Returns:
        For each (data set, seed), its runs sorted by their last ``-log p(D)/N``, lowest first.
    """
    grouped: dict[tuple[str, int], list[Path]] = {}
    for folder in folders:
        settings = json.loads((folder / "results.json").read_text())["settings"]
        grouped.setdefault((settings["dataset"], settings["seed"]), []).append(folder)
    return {
        key: sorted(
            runs,
            key=lambda f: evidence_per_example(json.loads((f / "results.json").read_text())),
        )
        for key, runs in grouped.items()
    }


@dataclass(frozen=True)
class RotationSplitSection:
    """The learned F-FC+CONV+GCONV runs of ``folder``: GCONV per layer on each data set."""

    folder: str
    model: str = "f-fc+conv+gconv"
    rivals: tuple[str, ...] = ()
    """Folders of the same runs from other starts; with any, each data set and seed keeps the
    run of highest evidence among :attr:`folder` and these."""

    def candidate_folders(self) -> list[Path]:
        """The learned runs of :attr:`model` in :attr:`folder` and :attr:`rivals`."""
        return [
            path.parent
            for folder in (self.folder, *self.rivals)
            for path in sorted((runs_table.RESULTS / folder).rglob("results.json"))
            if (settings := json.loads(path.read_text())["settings"])["method"] == "marglik"
            and settings["model"] == self.model
        ]

    def run_folders(self) -> list[Path]:
        """The runs the section reads: every candidate, or with :attr:`rivals` the one of
        highest evidence per data set and seed."""
        candidates = self.candidate_folders()
        if not self.rivals:
            return candidates
        return sorted(runs[0] for runs in choose_by_evidence(candidates).values())

    def render(self) -> str:
        folders = self.run_folders()
        runs: dict[str, dict[int, dict[str, Any]]] = {}
        for folder in folders:
            result = json.loads((folder / "results.json").read_text())
            runs.setdefault(result["settings"]["dataset"], {})[result["settings"]["seed"]] = result
        datasets = [d for d in DATASETS if d in runs]
        if not datasets:
            return "No learned run yet."
        lines = [summary.markdown(folders), ""]
        if self.rivals:
            lines += [*self._choice_table(), ""]
        for measure, read in MEASURES.items():
            lines += [*self._share_table(runs, datasets, measure, read), ""]
            for turned in TURNED:
                lines += self._rotation_verdicts(runs, turned, measure, read)
            lines.append("")
        lines += [*self._translation_verdict(runs), ""]
        for turned in TURNED:
            growth = self._growth(runs, turned)
            lines += [*growth, ""] if growth else []
        lines += self._settled(runs, datasets)
        return "\n".join(lines)

    def _choice_table(self) -> list[str]:
        """Per data set and seed, every start's last ``-log p(D)/N`` and the one kept."""
        choices = choose_by_evidence(self.candidate_folders())
        starts = sorted(
            {
                json.loads((f / "results.json").read_text())["settings"]["start"]
                for runs in choices.values()
                for f in runs
            }
        )
        rows = []
        for dataset in DATASETS:
            for (d, seed), ranked in sorted(choices.items()):
                if d != dataset:
                    continue
                results = [json.loads((f / "results.json").read_text()) for f in ranked]
                by_start = {r["settings"]["start"]: evidence_per_example(r) for r in results}
                cells = [f"{by_start[s]:.3f}" if s in by_start else "-" for s in starts]
                kept = results[0]["settings"]["start"]
                alone = " (no rival run)" if len(results) == 1 else ""
                rows.append([dataset, str(seed), *cells, f"{kept}{alone}"])
        header = ["data", "seed", *(f"{s} start: -log p(D)/N" for s in starts), "kept"]
        return [
            "The start each data set and seed keeps: the run of the lowest last -log p(D)/N "
            "(highest evidence) among the starts; the shares below are the kept runs':",
            "",
            rows_table(header, rows),
        ]

    @staticmethod
    def _share_table(runs, datasets: list[str], measure: str, read) -> list[str]:
        """Per layer, GCONV's share (%) by ``measure`` on each data set, seed after seed."""
        seeds = {d: sorted(runs[d]) for d in datasets}
        shares = {d: [read(runs[d][s], "gconv") for s in seeds[d]] for d in datasets}
        layers = [
            row["layer"] for row in next(iter(runs[datasets[0]].values()))["symmetry"]["layers"]
        ]
        header = ["layer", *(f"{d}, seeds {', '.join(map(str, seeds[d]))}" for d in datasets)]
        rows = []
        for k, layer in enumerate(layers):
            cells = [" / ".join(f"{100 * run[k]:.0f}" for run in shares[d]) for d in datasets]
            rows.append([layer, *cells])
        return [
            f"GCONV's share of each layer's {measure}, % (seed by seed):",
            "",
            rows_table(header, rows),
        ]

    @staticmethod
    def _rotation_verdicts(runs, turned: str, measure: str, read) -> list[str]:
        """Per seed, the layers where GCONV's share is higher on ``turned`` than upright digits."""
        adjective = TURNED[turned]
        paired = sorted(set(runs.get(UPRIGHT, {})) & set(runs.get(turned, {})))
        if not paired:
            return [
                f"- GCONV's {measure} on {adjective} against upright digits: no seed has both runs"
            ]
        lines, holds = [], []
        for seed in paired:
            dead = [
                f"the {d} run ({100 * runs[d][seed]['train']['accuracy']:.1f} %, chance up to "
                f"{100 * chance_bound(training_counts(runs[d][seed])):.1f} %)"
                for d in (UPRIGHT, turned)
                if never_learned(runs[d][seed])
            ]
            if dead:
                holds.append(False)
                lines.append(
                    f"- seed {seed}: {' and '.join(dead)} never learned (training accuracy at "
                    "chance): counted as failing"
                )
                continue
            upright = read(runs[UPRIGHT][seed], "gconv")
            rotated = read(runs[turned][seed], "gconv")
            above = [k + 1 for k, (u, r) in enumerate(zip(upright, rotated, strict=True)) if r > u]
            holds.append(len(above) > len(upright) / 2)
            lines.append(
                f"- seed {seed}: GCONV's share of the {measure} higher on {adjective} than on "
                f"upright digits in {len(above)} of {len(upright)} layers "
                f"({', '.join(map(str, above)) or 'none'}); mean over layers "
                f"{100 * statistics.fmean(rotated):.0f} % against "
                f"{100 * statistics.fmean(upright):.0f} %"
            )
        verdict = "holds" if all(holds) else "fails"
        lines.append(
            f"- GCONV's share of the {measure} higher on {adjective} digits in most layers, in "
            f"every seed ({len(paired)} seeds): {verdict}"
        )
        return lines

    @staticmethod
    def _translation_verdict(runs) -> list[str]:
        """Whether FC's relative effective parameters stay under 1 % on translated digits."""
        translated = runs.get(TRANSLATED, {})
        if not translated:
            return ["- FC on translated digits: no run yet"]
        largest = {s: max(effective_shares(r, "fc")) for s, r in sorted(translated.items())}
        near_zero = all(v < FC_NEAR_ZERO for v in largest.values())
        per_seed = ", ".join(f"seed {s}: {100 * v:.2f} %" for s, v in largest.items())
        return [
            f"- FC near zero (under {100 * FC_NEAR_ZERO:.0f} % of the relative effective "
            f"parameters in every layer) on translated digits: "
            f"{'holds' if near_zero else 'fails'} (largest FC share {per_seed})"
        ]

    @staticmethod
    def _growth(runs, turned: str) -> list[str]:
        """Per layer and path, effective parameters on ``turned`` over upright digits."""
        paired = sorted(set(runs.get(UPRIGHT, {})) & set(runs.get(turned, {})))
        if not paired:
            return []
        upright_layers = [runs[UPRIGHT][s]["symmetry"]["layers"] for s in paired]
        rotated_layers = [runs[turned][s]["symmetry"]["layers"] for s in paired]
        paths = list(upright_layers[0][0]["paths"])
        rows = []
        for k, row in enumerate(upright_layers[0]):
            cells = []
            for path in paths:
                ratios = [
                    r[k]["paths"][path]["effective"] / u[k]["paths"][path]["effective"]
                    for u, r in zip(upright_layers, rotated_layers, strict=True)
                ]
                cells.append(" / ".join(f"{ratio:.1f}" for ratio in ratios))
            rows.append([row["layer"], *cells])
        return [
            f"Each path's effective parameters on {TURNED[turned]} digits over those on upright "
            "digits, "
            f"seed by seed ({', '.join(map(str, paired))}): a path's share of the relative "
            "effective parameters rises only where its effective parameters grow more than the "
            "other paths':",
            "",
            rows_table(["layer", *paths], rows),
        ]

    @staticmethod
    def _settled(runs, datasets: list[str]) -> list[str]:
        """Per run, how far GCONV's share moved over the last fits and the second half."""
        rows = []
        for dataset in datasets:
            for seed, result in sorted(runs[dataset].items()):
                fits = result.get("fits", [])[-SETTLED_FITS:]
                if len(fits) < SETTLED_FITS:
                    rows.append([dataset, str(seed), f"{len(fits)} fits", "-", "-", "-"])
                    continue
                move = last_fits_move(result, "gconv")
                epochs = ", ".join(str(fit["epoch"]) for fit in fits)
                settled = "yes" if move <= SETTLED_POINTS else "no"
                half = f"{second_half_move(result, 'gconv'):.1f}"
                rows.append([dataset, str(seed), epochs, f"{move:.1f}", settled, half])
        header = ["data", "seed", "last fits (epochs)", "largest move, points", "settled"]
        header.append("second half, points")
        lines = [
            f"Settled? The largest move of a layer's GCONV share over each run's last "
            f"{SETTLED_FITS} fits, estimated from the fits' prior precisions and squared norms "
            f"(settled: at most {SETTLED_POINTS:.0f} points), and over all the fits of the "
            "run's second half:",
            "",
            rows_table(header, rows),
        ]
        annealed = [
            r["settings"].get("lr_min", 0.0) == 0.0 for d in datasets for r in runs[d].values()
        ]
        if annealed and all(annealed):
            lines += [
                "",
                "The weights' learning rate follows a cosine to 0 over each run (`lr_min` 0), so "
                "in the last fits the weights barely move and only the prior precisions can move "
                "the shares: flat last fits do not tell a settled structure from a stopped one. "
                "The second half's move, and a run twice as long, do.",
            ]
        return lines


def rotation_split(folder: str, model: str = "f-fc+conv+gconv", rivals: tuple = ()) -> str:
    """GCONV's share per layer on each data set and the rotation target's verdicts
    (:class:`~studies.rotation_section.RotationSplitSection`)."""
    return RotationSplitSection(folder, model, tuple(rivals)).render()
