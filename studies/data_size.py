"""Table 1 against the training-set size: is the learned network as good as the best fixed one?

For each task, training-set size and seed, four ``laplace-equivariance train`` runs: learned
F-FC+CONV (the default held start) against MAP FC, MAP CONV and MAP F-FC+CONV (unit priors).
Every run gets the same budget in optimiser steps, not epochs, so that a small set is not
under-trained: ``epochs = ceil(steps / batches per epoch)``. The learned run's schedule is a
share of its epochs, so every size gets the same number of fits: the FC paths are held for the
first ``--held-share`` of the epochs (the burn-in), then the marginal likelihood is fitted
``--fits`` times, evenly spaced, on ``min(N, --marglik-subset)`` examples. Each run's
``results.json`` records its settings, ``optimiser_steps``, device and threads.
``--networks`` picks rows (``learned-conv``, CONV with priors learned the same way, is not a row
of the table: it separates the learned priors from the FC paths).

Runs are resumable (a finished run is skipped, an interrupted one resumes from its checkpoint),
in the order size, task, seed, network, so that the smallest sizes, where the learned network
fell behind, finish first. ``--table`` prints the table (mean ± std over seeds, and whether the
learned row is within the seed spread of the best MAP row) and ``--figure`` draws test
accuracy and NLL against the size; ``pages/results_tables.py`` renders
``docs/data_size.md`` from the committed runs (``python -m pages.results_tables``).

Usage (from the repository root):
    python -m studies.data_size --out runs/data-size --sizes 500 1000 2000 4000 \
        --seeds 0 1 2 --threads 1
    python -m studies.data_size --out runs/data-size --table --figure data_size.png
"""

from __future__ import annotations

import argparse
import math
import statistics
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from benchmarks.markdown_table import table as markdown
from laplace_equivariance.app import config, experiment, summary

TASKS = ("quadrant-mnist-digit", "quadrant-mnist")
"""Table 1's two tasks (Sec. 6.1): translation invariant, and not (the default ``--tasks``)."""

FASHION_TASKS = ("quadrant-fashion-item", "quadrant-fashion")
"""The same two tasks on Fashion-MNIST items (``--data-dir`` with its IDX files, or Debian's
``dataset-fashion-mnist``)."""

ALL_TASKS = TASKS + FASHION_TASKS

NETWORKS = {
    "learned": ("f-fc+conv", "marglik"),
    "map-conv": ("conv", "map"),
    "map-f-fc+conv": ("f-fc+conv", "map"),
    "map-fc": ("fc", "map"),
    "learned-conv": ("conv", "marglik"),
}
"""``--networks`` name -> (model, method), in training order: learned first (the row the
sweep is about), MAP FC last of the table's rows (on the CPU by far the slowest:
docs/data_size.md). ``learned-conv`` (CONV with priors learned the same way) is not a row of the
table; it separates what learning the priors does from what the FC paths do."""

TABLE = ("learned", "map-conv", "map-f-fc+conv", "map-fc")
"""The sweep's rows (the default ``--networks``)."""

LEARNED = "learned F-FC+CONV"
"""The row the verdict is about, as :func:`label` names it."""


LEARNED_OPTIONS = {
    "prior_prec_init": (
        {"type": float},
        "learned runs' initial prior precision (train's --prior-prec-init; MAP runs keep unit "
        "priors)",
    ),
    "temperature": (
        {"type": float},
        "learned runs' likelihood temperature (train's --temperature; MAP runs keep 1)",
    ),
    "prior_structure": (
        {"choices": ["layerwise", "path", "scalar"]},
        "learned runs' prior grouping (train's --prior-structure; MAP runs keep the default)",
    ),
    "hypersteps": (
        {"type": int},
        "learned runs' hyperparameter steps per fit (train's --hypersteps; MAP runs fit nothing)",
    ),
    "lr_hyp": (
        {"type": float},
        "learned runs' hyperparameter learning rate (train's --lr-hyp)",
    ),
}
"""``train`` options of the marginal-likelihood fits that the sweep passes on to its learned
runs alone (MAP runs keep :data:`laplace_equivariance.app.config.DEFAULTS`): each one's argparse
keywords and help. The flag is the name with dashes (``--prior-prec-init``)."""


def schedule(n_train: int, steps: int, batch_size: int, fits: int, held_share: float) -> dict:
    """Epochs, burn-in and fit frequency of a run of ``steps`` optimiser steps on ``n_train``.

    Args:
        n_train: Training examples.
        steps: The budget in optimiser steps (rounded up to whole epochs).
        batch_size: Examples per step.
        fits: Marginal-likelihood fits after the burn-in (at least 1).
        held_share: Share of the epochs before the first fit, in [0, 1).

    Returns:
        ``epochs``, ``burnin`` and ``marglik_frequency`` (in epochs, as ``train`` takes them).

    Raises:
        ValueError: If the budget leaves no epoch after the burn-in for a fit.
    """
    if not 0 <= held_share < 1 or fits < 1 or steps < 1:
        raise ValueError(
            f"held_share {held_share} must be in [0, 1), fits {fits} and steps {steps} at least 1."
        )
    epochs = math.ceil(steps / math.ceil(n_train / batch_size))
    burnin = round(held_share * epochs)
    frequency = max(1, (epochs - burnin) // fits)
    if burnin >= epochs:
        raise ValueError(
            f"{steps} steps are {epochs} epoch(s) on {n_train} examples: the burn-in of "
            f"{burnin} leaves no epoch to fit in; give more --steps or a smaller --held-share."
        )
    return {"epochs": epochs, "burnin": burnin, "marglik_frequency": frequency}


def plan(args: argparse.Namespace) -> Iterator[tuple[Path, dict[str, Any]]]:
    """Every run's folder and settings, in the order they train."""
    for n in args.sizes:
        for task in args.tasks:
            for seed in args.seeds:
                for model, method in (NETWORKS[name] for name in args.networks):
                    settings = dict(
                        config.DEFAULTS,
                        dataset=task,
                        model=model,
                        method=method,
                        alpha=args.alpha,
                        lr=args.lr,
                        subset=n,
                        marglik_subset=min(n, args.marglik_subset),
                        seed=seed,
                        threads=args.threads,
                        device=args.device,
                        data_dir=args.data_dir,
                        restore_best=args.restore_best and method == "marglik",
                        **{
                            name: getattr(args, name)
                            if method == "marglik"
                            else config.DEFAULTS[name]
                            for name in LEARNED_OPTIONS
                        },
                        **schedule(
                            n, args.steps, config.DEFAULTS["batch_size"], args.fits, args.held_share
                        ),
                    )
                    yield args.out / f"{task}-n{n}-{model}-{method}-seed{seed}", settings


def label(settings: dict[str, Any]) -> str:
    """A row's network as the table names it: ``"learned F-FC+CONV"``, ``"MAP CONV"``."""
    learned = settings["method"] == "marglik"
    return f"{'learned' if learned else 'MAP'} {settings['model'].upper()}"


def sweep_rows(runs: Sequence[Path]) -> list[dict[str, Any]]:
    """One entry per (task, size, network): the seeds' test accuracies (%) and NLLs, in the
    order of ``"seeds"`` (ascending).

    Raises:
        ValueError: As :func:`laplace_equivariance.app.summary.rows` (a seed counted twice).
    """
    entries = []
    for unordered in summary.rows(runs):
        row = summary.Row(sorted(unordered.results, key=lambda r: r["settings"]["seed"]))
        s = row.settings
        entries.append(
            {
                "task": s["dataset"],
                "n": row.results[0]["n_train"],
                "network": label(s),
                "seeds": [r["settings"]["seed"] for r in row.results],
                "accuracy": row.accuracy(),
                "nll": row.nll(),
                "steps": row.results[0].get("optimiser_steps"),
                "epochs": s["epochs"],
            }
        )
    return sorted(entries, key=lambda e: (ALL_TASKS.index(e["task"]), e["n"], e["network"]))


def prior_drift(result: dict[str, Any], moving: float = 0.05) -> dict[str, float]:
    """How far a learned run's prior precisions still moved at its last fit.

    For every precision ``delta_g`` (one per parameter group, ``results.json``'s ``fits``):
    ``|log(delta_g at the last fit / delta_g at the fit before)|``. Settled priors move by
    little at the last fit; priors that still climb by a few percent per fit have not
    caught up with the weights they regularise.

    Args:
        result: A learned run's ``results.json`` with at least two fits.
        moving: A precision counts as still moving above this change of its logarithm
            (0.05: about 5 % from one fit to the next).

    Returns:
        ``{"median": median change, "moving": share of the precisions moving more than
        ``moving``, "fits": number of fits}``.

    Raises:
        ValueError: For a run with fewer than two fits (a MAP run, or one stopped early).
    """
    fits = result.get("fits", [])
    if len(fits) < 2:
        raise ValueError(
            f"A run with {len(fits)} fit(s) has no last change of its priors; pass a learned "
            "run that fitted the marginal likelihood at least twice."
        )
    before, last = fits[-2]["prior_precision"], fits[-1]["prior_precision"]
    changes = [abs(math.log(last[name] / before[name])) for name in last]
    return {
        "median": statistics.median(changes),
        "moving": sum(change > moving for change in changes) / len(changes),
        "fits": len(fits),
    }


def paired_difference(a: dict[str, Any], b: dict[str, Any]) -> dict[str, float] | None:
    """Test accuracy of entry ``a`` minus entry ``b``, seed for seed, over their common seeds.

    A seed fixes a run's data (the training subset, the placements) and the draw of its
    weights, so a difference taken seed for seed leaves out the data's share of the spread.

    Returns:
        ``{"seeds": k, "mean": points, "se": standard error of the mean, "below": seeds where
        ``a`` is below ``b``}``, or None under two common seeds.
    """
    acc_a, acc_b = (dict(zip(e["seeds"], e["accuracy"], strict=True)) for e in (a, b))
    differences = [acc_a[seed] - acc_b[seed] for seed in sorted(acc_a.keys() & acc_b.keys())]
    if len(differences) < 2:
        return None
    return {
        "seeds": len(differences),
        "mean": statistics.fmean(differences),
        "se": statistics.stdev(differences) / math.sqrt(len(differences)),
        "below": sum(d < 0 for d in differences),
    }


def verdicts(entries: list[dict[str, Any]], candidate: str = LEARNED) -> list[dict[str, Any]]:
    """For each (task, size) with a ``candidate`` row and MAP rows of >= 2 seeds each: the
    issue's test.

    The candidate (the learned network by default) passes at a size if its mean test accuracy
    is at least the best MAP network's mean minus that network's standard deviation over seeds,
    and its mean NLL at most the best MAP network's (by NLL) mean plus its standard deviation.
    ``"paired"`` adds the candidate's difference from the best MAP network seed for seed
    (:func:`paired_difference`).
    """
    out = []
    for task in ALL_TASKS:
        for n in sorted({e["n"] for e in entries if e["task"] == task}):
            here = [e for e in entries if e["task"] == task and e["n"] == n]
            learned = [e for e in here if e["network"] == candidate]
            fixed = [e for e in here if e["network"].startswith("MAP") and len(e["seeds"]) > 1]
            if not learned or len(learned[0]["seeds"]) < 2 or not fixed:
                continue
            best_acc = max(fixed, key=lambda e: statistics.fmean(e["accuracy"]))
            best_nll = min(fixed, key=lambda e: statistics.fmean(e["nll"]))
            acc, nll = statistics.fmean(learned[0]["accuracy"]), statistics.fmean(learned[0]["nll"])
            acc_floor = statistics.fmean(best_acc["accuracy"]) - statistics.stdev(
                best_acc["accuracy"]
            )
            nll_ceiling = statistics.fmean(best_nll["nll"]) + statistics.stdev(best_nll["nll"])
            out.append(
                {
                    "task": task,
                    "n": n,
                    "best_accuracy": best_acc["network"],
                    "best_nll": best_nll["network"],
                    "accuracy_holds": acc >= acc_floor,
                    "nll_holds": nll <= nll_ceiling,
                    "paired": paired_difference(learned[0], best_acc),
                }
            )
    return out


def table(entries: list[dict[str, Any]]) -> pd.DataFrame:
    """One row per (task, size, network): its seeds, the mean ± std over them of the test
    accuracy and NLL, and the steps (epochs) it trained."""
    return pd.DataFrame(
        [
            {
                "task": e["task"],
                "N": f"{e['n']:,}",
                "network": e["network"],
                "seeds": str(len(e["seeds"])),
                "test acc %": summary.mean_std(e["accuracy"]),
                "test NLL": summary.mean_std(e["nll"], digits=2),
                "steps (epochs)": f"{e['steps'] or '-'} ({e['epochs']})",
            }
            for e in entries
        ],
        columns=["task", "N", "network", "seeds", "test acc %", "test NLL", "steps (epochs)"],
    )


def network_colours(entries: list[dict[str, Any]]) -> dict[str, str]:
    """One matplotlib colour (``"C0"``, ``"C1"``, ...) per network, the same in every panel.

    Networks are numbered in name order over all tasks, so a network that ran on one task
    only does not shift the others' colours.
    """
    return {network: f"C{k}" for k, network in enumerate(sorted({e["network"] for e in entries}))}


def figure(entries: list[dict[str, Any]], path: Path) -> None:
    """Test accuracy and NLL against the training-set size, one line per network and task.

    The shaded band is the mean ± one standard deviation over seeds; a network keeps its colour
    across the tasks (:func:`network_colours`).
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    tasks = [t for t in ALL_TASKS if any(e["task"] == t for e in entries)]
    colours = network_colours(entries)
    fig, axes = plt.subplots(2, len(tasks), figsize=(5 * len(tasks), 7), squeeze=False)
    for column, task in enumerate(tasks):
        for network in sorted({e["network"] for e in entries if e["task"] == task}):
            points = [e for e in entries if e["task"] == task and e["network"] == network]
            sizes = [e["n"] for e in points]
            for row, key in enumerate(("accuracy", "nll")):
                mean = np.array([np.mean(e[key]) for e in points])
                std = np.array([np.std(e[key], ddof=1) if len(e[key]) > 1 else 0 for e in points])
                ax = axes[row][column]
                colour = colours[network]
                ax.plot(sizes, mean, marker="o", label=network, color=colour)
                ax.fill_between(sizes, mean - std, mean + std, color=colour, alpha=0.2)
                ax.set_xscale("log")
                ax.set_xlabel("training examples")
                ax.set_ylabel("test accuracy %" if key == "accuracy" else "test NLL")
        axes[0][column].set_title(task)
        axes[0][column].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def arguments(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """The command line of :func:`main`, parsed (``argv`` None: ``sys.argv``)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True, help="folder of the run folders")
    parser.add_argument("--sizes", type=int, nargs="+", default=[500, 1000, 2000, 4000])
    parser.add_argument(
        "--tasks",
        nargs="+",
        choices=ALL_TASKS,
        default=list(TASKS),
        help=f"default: {' '.join(TASKS)}; the Fashion-MNIST ones need --data-dir (or Debian's "
        "dataset-fashion-mnist)",
    )
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument(
        "--networks",
        nargs="+",
        choices=NETWORKS,
        default=list(TABLE),
        help=f"default: {' '.join(TABLE)}",
    )
    parser.add_argument("--steps", type=int, default=1600, help="optimiser steps of every run")
    parser.add_argument("--fits", type=int, default=15, help="marginal-likelihood fits")
    parser.add_argument(
        "--held-share",
        type=float,
        default=0.1,
        dest="held_share",
        help="share of the epochs before the first fit (the FC paths held)",
    )
    parser.add_argument("--marglik-subset", type=int, default=1000, dest="marglik_subset")
    for name, (kind, text) in LEARNED_OPTIONS.items():
        parser.add_argument(
            "--" + name.replace("_", "-"),
            dest=name,
            default=config.DEFAULTS[name],
            help=text,
            **kind,
        )
    parser.add_argument(
        "--restore-best",
        action="store_true",
        dest="restore_best",
        help="evaluate learned runs at the fit with the best marginal likelihood (train's "
        "--restore-best), not at the last epoch",
    )
    parser.add_argument("--alpha", type=int, default=4, help="channel multiplier")
    parser.add_argument("--lr", type=float, default=config.DEFAULTS["lr"])
    parser.add_argument("--threads", type=int)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--data-dir", dest="data_dir")
    parser.add_argument("--table", action="store_true", help="train nothing: print the table")
    parser.add_argument("--figure", type=Path, help="train nothing: draw the figure here")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> None:
    args = arguments(argv)
    planned = list(plan(args))
    if not (args.table or args.figure):
        for folder, settings in planned:
            start = time.perf_counter()
            experiment.train(settings, folder)
            print(f"{folder.name}: {time.perf_counter() - start:.0f} s", flush=True)
    entries = sweep_rows([f for f, _ in planned if (f / "results.json").exists()])
    print(markdown(table(entries)))
    for v in verdicts(entries):
        print(
            f"{v['task']} N={v['n']}: accuracy {'holds' if v['accuracy_holds'] else 'FAILS'} "
            f"(best: {v['best_accuracy']}), NLL {'holds' if v['nll_holds'] else 'FAILS'} "
            f"(best: {v['best_nll']})"
        )
    if args.figure:
        if not entries:
            raise SystemExit(
                f"No finished run of the tasks {', '.join(args.tasks)} in {args.out}: nothing to "
                "draw; name the runs' tasks with --tasks."
            )
        figure(entries, args.figure)


if __name__ == "__main__":
    main()
