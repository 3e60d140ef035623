"""The learned layer types as the paper's Fig. 3: relative effective parameters per layer.

One panel per data set: stacked bars of each path's relative effective parameters in every
relaxed layer, the mean over the seeds of the learned runs (``*-marglik-seed*`` folders of
``laplace-equivariance train``), with the seeds' range (minimum to maximum) as error bars on
the FC share::

    python -m studies.structure_figure studies/results/table1-60ep \
        --out docs/figures/table1-60ep-structure.png

``--start held`` keeps the runs of one start where a folder holds several; several folders
draw their runs together (the two tasks' held runs of the 60-epoch table, say).
"""

from __future__ import annotations

import argparse
import statistics
from pathlib import Path

from laplace_equivariance.app import config, summary
from laplace_equivariance.app.runs import migrated


def mean_shares(
    runs: list[dict],
) -> tuple[list[str], dict[str, list[float]], list[list[float]]]:
    """Layer names, each path's mean share per layer, and the FC share's range over seeds
    (below and above the mean, as matplotlib's ``yerr``)."""
    layers = [row["layer"] for row in runs[0]["symmetry"]["layers"]]
    found = {p for r in runs for row in r["symmetry"]["layers"] for p in row["paths"]}
    paths = sorted(found, key=lambda p: (p != "fc", p))  # FC at the bottom, its range on top
    means = {
        path: [
            statistics.fmean(
                r["symmetry"]["layers"][i]["paths"].get(path, {}).get("relative", 0.0) for r in runs
            )
            for i in range(len(layers))
        ]
        for path in paths
    }
    fc = [
        [r["symmetry"]["layers"][i]["paths"]["fc"]["relative"] for r in runs]
        for i in range(len(layers))
    ]
    spread = [
        [mean - min(v) for mean, v in zip(means["fc"], fc, strict=True)],
        [max(v) - mean for mean, v in zip(means["fc"], fc, strict=True)],
    ]
    return layers, means, spread


def main() -> None:
    """Draw the figure of the learned runs under the folders."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "folders", type=Path, nargs="+", help="folders of run folders (results.json each)"
    )
    parser.add_argument("--out", type=Path, required=True, help="PNG to write")
    parser.add_argument(
        "--start",
        choices=config.STARTS,
        help="only the runs trained from this start (train --start; all when not given)",
    )
    args = parser.parse_args()
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot as plt

    runs = [
        run
        for run in (
            summary.load_run(p.parent)
            for folder in args.folders
            for p in sorted(folder.rglob("results.json"))
            if "-marglik-" in p.parent.name
        )
        if all("fc" in row["paths"] for row in run["symmetry"]["layers"])  # relaxed models
        and args.start in (None, migrated(run["settings"])["start"])
    ]
    if not runs:
        names = ", ".join(str(f) for f in args.folders)
        raise SystemExit(f"No learned runs of relaxed models under {names}.")
    datasets = sorted({r["settings"]["dataset"] for r in runs})
    figure, axes = plt.subplots(1, len(datasets), figsize=(4.5 * len(datasets), 3.2), sharey=True)
    axes = [axes] if len(datasets) == 1 else list(axes)
    for axis, dataset in zip(axes, datasets, strict=True):
        chosen = [r for r in runs if r["settings"]["dataset"] == dataset]
        layers, means, spread = mean_shares(chosen)
        bottom = [0.0] * len(layers)
        for path, shares in means.items():
            error = spread if path == "fc" else None
            axis.bar(layers, shares, bottom=bottom, label=path.upper(), yerr=error, capsize=2)
            bottom = [b + s for b, s in zip(bottom, shares, strict=True)]
        seeds = ", ".join(str(r["settings"]["seed"]) for r in chosen)
        axis.set_title(f"{dataset} (seeds {seeds})", fontsize=9)
        axis.tick_params(axis="x", rotation=45)
        axis.set_ylim(0, 1)
    axes[0].set_ylabel("relative effective parameters\n(mean over seeds)")
    axes[-1].legend(loc="upper left", bbox_to_anchor=(1.0, 1.0))
    figure.tight_layout()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(args.out, dpi=120)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
