"""The marginal likelihood as a choice between two learned networks, seed by seed.

The relaxed network learns, layer by layer, how much of each path to keep; with every FC path
switched off it computes a CONV network, so at its best its evidence is at least learned CONV's.
Whether its training reaches that is measured by comparing the two runs' evidence: for each
(task, size, seed) with a learned CONV and a learned F-FC+CONV run of the data-size sweep
(``studies/data_size.py``, ``--networks learned learned-conv``), each run's last
``-log p(D) / N`` (the Laplace-KFAC estimate of its last fit, the same fit subset and priors'
structure for both) and the run with the higher evidence, the network the marginal likelihood
would choose if asked to pick between the two trained networks. On a task where the answer is
known (the digit wherever it sits: no position-specific computation needed; the digit and its
quadrant: impossible for a CONV network, whose circular convolutions and global pooling cannot
see the quadrant) the choice is checked against the truth.

Usage (from the repository root), after the sweep's runs:
    python -m studies.evidence_selection studies/results/data-size
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from benchmarks.markdown_table import table as markdown
from laplace_equivariance.app import summary
from studies import data_size

CANDIDATES = ("learned CONV", data_size.LEARNED)
"""The two networks compared, as :func:`studies.data_size.label` names them."""

SELECTED = "evidence-selected"
"""The network label of the chosen runs' entries."""


def _evidence(results: dict[str, Any]) -> float:
    """A learned run's last ``-log p(D) / N``.

    Raises:
        ValueError: If the run has no fit recorded.
    """
    if not results["neg_log_marglik"]:
        raise ValueError(
            f"The run of seed {results['settings']['seed']} recorded no marginal likelihood; "
            "only finished learned runs can be compared."
        )
    return results["neg_log_marglik"][-1] / results["n_train"]


def _fit_data(results: dict[str, Any]) -> tuple:
    """What the evidence was computed on: training size, fit subset and likelihood temperature."""
    s = results["settings"]
    return results["n_train"], s.get("marglik_subset"), s.get("temperature", 1.0)


def pairs(runs: Sequence[Path]) -> list[dict[str, Any]]:
    """One entry per (task, size, seed) with both :data:`CANDIDATES`, sorted.

    Returns:
        Entries ``{"task", "n", "seed", "evidence": {label: -log p(D)/N}, "chosen": label,
        "accuracy": {label: %}, "nll": {label: nll}, "steps", "epochs"}``.

    Raises:
        ValueError: If two runs of one pair fitted their evidence on different data (sizes,
            fit subsets or temperatures), so their evidence is not comparable.
    """
    found: dict[tuple, dict[str, dict]] = {}
    for run in runs:
        results = summary.load_run(run)
        network = data_size.label(results["settings"])
        if network not in CANDIDATES:
            continue
        key = (results["settings"]["dataset"], results["n_train"], results["settings"]["seed"])
        found.setdefault(key, {})[network] = results
    entries = []
    for (task, n, seed), both in found.items():
        if len(both) < len(CANDIDATES):
            continue
        if len({_fit_data(r) for r in both.values()}) > 1:
            raise ValueError(
                f"{task}, N = {n}, seed {seed}: the two runs fitted their evidence on different "
                f"data ({', '.join(f'{k}: {_fit_data(r)}' for k, r in both.items())}); rerun one "
                "with the other's --marglik-subset and --temperature."
            )
        evidence = {label: _evidence(r) for label, r in both.items()}
        entries.append(
            {
                "task": task,
                "n": n,
                "seed": seed,
                "evidence": evidence,
                "chosen": min(evidence, key=evidence.__getitem__),
                "accuracy": {k: 100 * r["test"]["accuracy"] for k, r in both.items()},
                "nll": {k: r["test"]["nll"] for k, r in both.items()},
                "steps": both[data_size.LEARNED].get("optimiser_steps"),
                "epochs": both[data_size.LEARNED]["settings"]["epochs"],
            }
        )
    return sorted(entries, key=lambda e: (data_size.ALL_TASKS.index(e["task"]), e["n"], e["seed"]))


def selected_rows(paired: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The chosen runs as rows of :func:`studies.data_size.sweep_rows`' form, one per
    (task, size), with network :data:`SELECTED`, and ``"chosen"``: the chosen labels by seed."""
    groups: dict[tuple[str, int], list[dict]] = {}
    for e in paired:
        groups.setdefault((e["task"], e["n"]), []).append(e)
    return [
        {
            "task": task,
            "n": n,
            "network": SELECTED,
            "seeds": [e["seed"] for e in group],
            "accuracy": [e["accuracy"][e["chosen"]] for e in group],
            "nll": [e["nll"][e["chosen"]] for e in group],
            "steps": group[0]["steps"],
            "epochs": group[0]["epochs"],
            "chosen": [e["chosen"] for e in group],
        }
        for (task, n), group in groups.items()
    ]


def evidence_table(paired: list[dict[str, Any]]) -> pd.DataFrame:
    """Per (task, size), each candidate's ``-log p(D) / N`` (mean ± std over the seeds), in how
    many seeds each was chosen, and the chosen runs' test accuracy."""
    rows = []
    for row in selected_rows(paired):
        group = [e for e in paired if (e["task"], e["n"]) == (row["task"], row["n"])]
        cells = {"task": row["task"], "N": f"{row['n']:,}", "seeds": str(len(group))}
        for label in CANDIDATES:
            evidence = [e["evidence"][label] for e in group]
            cells[f"-log p(D) / N, {label}"] = summary.mean_std(evidence, digits=2)
        cells["chosen (seeds)"] = ", ".join(
            f"{label} {row['chosen'].count(label)}"
            for label in CANDIDATES
            if label in row["chosen"]
        )
        cells["chosen runs' test acc %"] = summary.mean_std(row["accuracy"])
        rows.append(cells)
    columns = ["task", "N", "seeds", *(f"-log p(D) / N, {label}" for label in CANDIDATES)]
    return pd.DataFrame(rows, columns=[*columns, "chosen (seeds)", "chosen runs' test acc %"])


def main(argv: Sequence[str] | None = None) -> None:
    """Print the evidence table of a sweep's folder."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("folder", type=Path, help="the data-size sweep's --out folder")
    args = parser.parse_args(argv)
    runs = sorted(p.parent for p in args.folder.glob("*/results.json"))
    print(markdown(evidence_table(pairs(runs))))


if __name__ == "__main__":
    main()
