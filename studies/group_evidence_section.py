"""Table 3's groups compared by their evidence: the GCONV network against the CONV network.

Issue 44's Table 3 target asks the learned F-FC+CONV+GCONV network to give its GCONV paths
(equivariant to quarter turns) a larger share on rotated than on upright digits. Where the
shares do not follow the data, this section asks the objective itself: the same network trained
as its GCONV network (FC and CONV paths frozen off, ``studies.frozen_paths --frozen fc
conv``; with the rotation pooling at its end invariant to quarter turns) and as its CONV network
(``--frozen fc gconv``), with the same channels, head, data and schedule, each with its priors
learned. Their log marginal likelihoods per training example,

.. math::

    \\Delta = \\frac{1}{N}\\left[\\log p(\\mathcal{D} \\mid \\text{GCONV})
        - \\log p(\\mathcal{D} \\mid \\text{CONV})\\right]

(the last fit's Laplace estimate, Eq. 9 with the KFAC of Sec. 5), say how strongly the evidence
prefers the group of quarter turns on each data set. If rotation equivariance is what rotated
digits call for and upright digits (with 6 and 9 told apart by their orientation) do not,
:math:`\\Delta` is larger on rotated than on upright digits in every seed. Beside them, the
relaxed network's evidence at its two starts (folders named by ``beside``), so that the relaxed
network can be set against the two single-group networks it contains.
"""

from __future__ import annotations

import json
import statistics
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks.markdown_table import rows_table
from laplace_equivariance.app import summary
from studies import runs_table
from studies.rotation_section import DATASETS, TURNED, UPRIGHT

NETWORKS = {("conv", "fc"): "GCONV network", ("fc", "gconv"): "CONV network"}
"""A run's frozen paths -> the single-group network it trained."""


GCONV_NETWORK, CONV_NETWORK = NETWORKS[("conv", "fc")], NETWORKS[("fc", "gconv")]
FULL_GCONV_NETWORK = "GCONV-full network"
"""The GCONV network of F-FC+CONV+GCONV-full (full group convolutions in layers 2-8)."""


def network(result: dict[str, Any]) -> str:
    """One run's network: ``"GCONV network"`` and ``"CONV network"`` (frozen F-FC+CONV+GCONV;
    ``"GCONV-full network"`` frozen from F-FC+CONV+GCONV-full), ``"GCONV network, alpha 8"``
    (a ``gconv`` model trained as itself), ``"relaxed, <start> start"`` (F-FC+CONV+GCONV) or
    ``"GCONV-full relaxed, <start> start"`` (F-FC+CONV+GCONV-full)."""
    frozen = tuple(sorted(result.get("frozen_paths", ())))
    settings = result["settings"]
    full_group = settings["model"].endswith("gconv-full")
    if frozen:
        name = NETWORKS.get(frozen, f"{', '.join(frozen)} frozen")
        return FULL_GCONV_NETWORK if full_group and name == GCONV_NETWORK else name
    if settings["model"] in ("gconv", "gconv-full"):
        return f"{FULL_GCONV_NETWORK if full_group else GCONV_NETWORK}, alpha {settings['alpha']}"
    return f"{'GCONV-full relaxed' if full_group else 'relaxed'}, {settings['start']} start"


def per_example_evidence(result: dict[str, Any]) -> float:
    """The run's last ``log p(D) / N`` (the negative of the tables' ``-log marglik / N``)."""
    return -result["neg_log_marglik"][-1] / result["n_train"]


CONTROL = {"translated-mnist": "translated digits (harder, not turned: a control)"}
"""Data sets whose Delta is set beside the upright digits' without a target."""


@dataclass(frozen=True)
class GroupEvidenceSection:
    """The single-group networks of ``folder`` against each other and the full network's runs
    of the ``beside`` folders: evidence and accuracy per data set and seed."""

    folder: str
    beside: tuple[str, ...] = ()
    gconv: str = GCONV_NETWORK
    """The GCONV network that Delta sets against the CONV network (:func:`network`'s name)."""

    def _runs(self, folders: tuple[str, ...]) -> list[Path]:
        return [
            path.parent
            for folder in folders
            for path in sorted((runs_table.RESULTS / folder).rglob("results.json"))
            if json.loads(path.read_text())["settings"]["method"] == "marglik"
        ]

    def render(self) -> str:
        own = self._runs((self.folder,))
        if not own:
            return "No run yet."
        runs: dict[str, dict[str, dict[int, dict[str, Any]]]] = {}
        results = {f: json.loads((f / "results.json").read_text()) for f in own}
        datasets = {result["settings"]["dataset"] for result in results.values()}
        for folder in [*own, *self._runs(self.beside)]:
            result = results.get(folder) or json.loads((folder / "results.json").read_text())
            dataset, seed = result["settings"]["dataset"], result["settings"]["seed"]
            if dataset in datasets:  # the beside folders' other data sets are not compared
                runs.setdefault(dataset, {}).setdefault(network(result), {})[seed] = result
        lines = [summary.markdown(own), ""]
        lines += [*self._evidence_table(runs), ""]
        for turned in (t for t in TURNED if t in runs):
            lines += self._verdicts(runs, turned)
        for dataset, words in CONTROL.items():
            lines += self._control(runs, dataset, words)
        return "\n".join(lines)

    def _evidence_table(self, runs) -> list[str]:
        """Per data set and seed: each network's evidence and test accuracy, and Delta."""
        names = sorted({name for by_network in runs.values() for name in by_network})
        names = [n for n in NETWORKS.values() if n in names] + [
            n for n in names if n not in NETWORKS.values()
        ]
        header = ["data", "seed", *(f"{n}: -log p(D)/N, test %" for n in names), "Delta"]
        rows = []
        for dataset in (d for d in DATASETS if d in runs):
            seeds = sorted({s for by_seed in runs[dataset].values() for s in by_seed})
            for seed in seeds:
                cells = []
                for name in names:
                    result = runs[dataset].get(name, {}).get(seed)
                    cells.append(
                        "-"
                        if result is None
                        else f"{-per_example_evidence(result):.3f}, "
                        f"{100 * result['test']['accuracy']:.1f}"
                    )
                delta = _delta(runs[dataset], seed, self.gconv)
                rows.append([dataset, str(seed), *cells, "-" if delta is None else f"{delta:+.3f}"])
        return [
            "Each network's last negative log marginal likelihood per training example and its "
            f"test accuracy, seed by seed; Delta is the {self.gconv}'s log p(D)/N less the CONV "
            "network's (positive: the evidence prefers the quarter turns):",
            "",
            rows_table(header, rows),
        ]

    def _verdicts(self, runs, turned: str) -> list[str]:
        """Per seed, whether Delta is larger on ``turned`` than on upright digits."""
        adjective = TURNED[turned]
        upright, rotated = runs.get(UPRIGHT, {}), runs.get(turned, {})
        pairs = [
            (seed, _delta(upright, seed, self.gconv), _delta(rotated, seed, self.gconv))
            for seed in sorted(set(upright.get(self.gconv, {})))
        ]
        pairs = [(s, u, r) for s, u, r in pairs if u is not None and r is not None]
        if not pairs:
            return [f"- Delta on {adjective} against upright digits: no seed has all four runs"]
        lines = [
            f"- seed {seed}: Delta {r:+.3f} on {adjective} digits against {u:+.3f} on upright "
            f"digits ({'larger' if r > u else 'not larger'})"
            for seed, u, r in pairs
        ]
        holds = all(r > u for _, u, r in pairs)
        mean = statistics.fmean(r - u for _, u, r in pairs)
        lines.append(
            f"- the evidence prefers the quarter turns more on {adjective} than on upright "
            f"digits in every seed ({len(pairs)} seeds; mean difference {mean:+.3f} nats per "
            f"example): {'holds' if holds else 'fails'}"
        )
        return lines

    def _control(self, runs, dataset: str, words: str) -> list[str]:
        """Delta on ``dataset`` beside the upright digits', seed by seed, without a verdict."""
        if dataset not in runs or UPRIGHT not in runs:
            return []
        seeds = sorted({s for by_seed in runs[dataset].values() for s in by_seed})
        return [
            f"- {words}: Delta {_deltas(runs[dataset], seeds, self.gconv)} against "
            f"{_deltas(runs[UPRIGHT], seeds, self.gconv)} on upright digits "
            f"(seed{'s' if len(seeds) > 1 else ''} {', '.join(map(str, seeds))})"
        ]


def _deltas(by_network: dict[str, dict[int, dict[str, Any]]], seeds: list[int], gconv: str) -> str:
    """``a / b / c``: Delta per seed (``-`` where a run is missing)."""
    values = [_delta(by_network, seed, gconv) for seed in seeds]
    return " / ".join("-" if v is None else f"{v:+.3f}" for v in values)


def _delta(by_network: dict[str, dict[int, dict[str, Any]]], seed: int, gconv: str) -> float | None:
    """The ``gconv`` network's log p(D)/N less the CONV network's for ``seed``, if both ran."""
    gconv_run = by_network.get(gconv, {}).get(seed)
    conv_run = by_network.get(CONV_NETWORK, {}).get(seed)
    if gconv_run is None or conv_run is None:
        return None
    return per_example_evidence(gconv_run) - per_example_evidence(conv_run)


def group_evidence(folder: str, beside: tuple = (), gconv: str | None = None) -> str:
    """The single-group networks' evidence against each other and the full network's
    (:class:`~studies.group_evidence_section.GroupEvidenceSection`)."""
    gconv = gconv or GCONV_NETWORK
    return GroupEvidenceSection(folder, tuple(beside), gconv).render()
