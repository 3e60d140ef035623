"""The paper's Tables 1, 2 and 3 as ``laplace-equivariance train`` runs, at a chosen budget.

- ``table2``: every layer type of Table 2 (FC, CONV, FC+CONV, F-FC, F-FC+CONV, S-FC, S-CONV,
  S-FC+S-CONV), MAP and learned with the Laplace marginal likelihood, on Fashion-MNIST as a
  stand-in for CIFAR-10 (which cannot be fetched here; ``--dataset cifar10 --data-dir ...``
  runs the real one where the files exist).
- ``table3``: F-FC+CONV+GCONV at alpha=2 on MNIST, translated MNIST and rotated MNIST, MAP
  and learned.
- ``table1``: MAP FC, MAP CONV and learned F-FC+CONV on both quadrant-MNIST tasks (Sec.
  6.1): the digit task is translation invariant, the (digit, quadrant) task is not. MAP
  F-FC+CONV (unit priors, as the reference code's toy-problem scripts also run) separates
  what the learned priors do from what the relaxed architecture does at the budget. ``make
  demo`` runs it at alpha=4 without MAP FC (``--models conv f-fc+conv``), whose 20 epochs of
  over a hundred million weights would take most of its time; the committed FC runs are shown
  instead. With ``--compare``, it prints first how long the committed runs of the planned
  experiments took.

Every run writes its ``results.json`` and plots under ``--out/<data>-<model>-<method>-seed<k>``
and resumes from its checkpoint (delete the folder to start over); ``--seeds`` runs the table
once per seed, seed after seed. The script prints ``laplace-equivariance report`` for the
runs, ``--markdown`` their mean ± std over seeds, and ``--compare DIR`` each run beside the
committed runs of the same experiment under ``DIR`` (``make demo`` compares with
``studies/results/table1-20ep``). Budgets are options (``--alpha --epochs --subset
--test-subset --marglik-subset --burnin --lr``, ``--start`` for the relaxed models and
``--temperature`` for the learned ones;
defaults: the paper's alpha, 20 epochs, Adam at
lr 0.003 because the paper's 0.01 trains small budgets worse, marginal likelihood on 1,000
training examples every 5 epochs after 5 (the paper: after 10), 20 steps each);
``pages/results_tables.py`` tabulates the committed runs in docs/results.md and its pages.

Usage (from the repository root):
    python -m studies.paper_tables table1 --alpha 4 --seeds 0 1 2 --out runs/table1
    python -m studies.paper_tables table1 --alpha 4 --out runs/demo \
        --compare studies/results/table1-20ep
    python -m studies.paper_tables table3 --subset 4000 --out runs/table3
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

from laplace_equivariance.app import config, experiment, summary

TABLE2_MODELS = ("fc", "conv", "fc+conv", "f-fc", "f-fc+conv", "s-fc", "s-conv", "s-fc+s-conv")
PLANS: dict[str, list[tuple[str, str, str]]] = {
    "table1": [
        (dataset, model, method)
        for dataset in ("quadrant-mnist-digit", "quadrant-mnist")
        for model, method in (
            ("fc", "map"),
            ("conv", "map"),
            ("f-fc+conv", "map"),
            ("f-fc+conv", "marglik"),
        )
    ],
    "table2": [
        ("fashion-mnist", model, method) for model in TABLE2_MODELS for method in ("map", "marglik")
    ],
    "table3": [
        (dataset, "f-fc+conv+gconv", method)
        for dataset in ("mnist", "translated-mnist", "rotated-mnist")
        for method in ("map", "marglik")
    ],
}
ALPHA = {"table1": 10, "table2": 10, "table3": 2}
"""The paper's channel multipliers (App. F.1)."""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("table", choices=sorted(PLANS))
    parser.add_argument(
        "--dataset",
        help="replace the table's data sets (table2: cifar10; table1: one quadrant-MNIST task)",
    )
    parser.add_argument("--models", nargs="+", help="only these models")
    parser.add_argument("--methods", nargs="+", choices=("map", "marglik"), help="only these")
    parser.add_argument("--alpha", type=int)
    parser.add_argument("--epochs", type=int, default=20)
    parser.add_argument("--lr", type=float, default=0.003)
    parser.add_argument("--subset", type=int)
    parser.add_argument("--test-subset", type=int, dest="test_subset")
    parser.add_argument("--marglik-subset", type=int, default=1000, dest="marglik_subset")
    parser.add_argument(
        "--burnin", type=int, default=5, help="epochs before the first marginal-likelihood step"
    )
    parser.add_argument(
        "--seeds", type=int, nargs="+", default=[0], help="one run per seed (default: 0)"
    )
    parser.add_argument("--threads", type=int, help="CPU threads of every run")
    parser.add_argument(
        "--kfac-approx",
        choices=("expand", "reduce"),
        default="expand",
        dest="kfac_approx",
        help="KFAC of the weight-shared layers; 'reduce' adds '-kfac-reduce' to the run folders",
    )
    parser.add_argument(
        "--restore-best",
        action="store_true",
        dest="restore_best",
        help="evaluate the learned models' epoch with the best marginal likelihood, not the "
        "last one (the paper's code keeps the last)",
    )
    parser.add_argument(
        "--lengthscale-mode",
        default="learned",
        dest="lengthscale_mode",
        help="S-layer lengthscales (laplace-equivariance train --help); a mode other than "
        "'learned' adds '-lengthscale-<mode>' to the run folders",
    )
    parser.add_argument(
        "--start",
        choices=config.STARTS,
        help="where the relaxed models' training starts (train --start; its default when "
        "not given); given, it adds '-<start>-start' to their run folders",
    )
    parser.add_argument(
        "--temperature",
        type=float,
        default=1.0,
        help="the learned runs' likelihood temperature (train --temperature); other than 1 it "
        "adds '-temperature<T>' to their run folders (MAP runs keep 1)",
    )
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--data-dir", dest="data_dir")
    parser.add_argument("--out", type=Path, default=Path("runs/tables"))
    parser.add_argument(
        "--overwrite",
        action="store_true",
        help="start afresh in run folders that hold other runs (otherwise refused; a folder "
        "of the same run resumes)",
    )
    parser.add_argument(
        "--markdown",
        action="store_true",
        help="train nothing: print the markdown table (mean ± std over seeds) of the runs "
        "already under --out",
    )
    parser.add_argument(
        "--compare",
        type=Path,
        help="after training, print each run beside the mean ± std of the same experiment's "
        "runs under this folder (the committed seeds), and whether it is within their spread; "
        "the table's runs left out by --models or --methods are shown from this folder; "
        "before training, how long the committed runs of the planned ones took",
    )
    args = parser.parse_args()
    planned: list[tuple[str, str, str]] = []
    left_out: list[tuple[str, str, str]] = []
    for dataset, model, method in PLANS[args.table]:
        dataset = args.dataset or dataset
        chosen = not (args.models and model not in args.models) and not (
            args.methods and method not in args.methods
        )
        into = planned if chosen else left_out
        if (dataset, model, method) not in into:  # --dataset can make two runs one
            into.append((dataset, model, method))
    reference = (
        [] if args.compare is None else sorted(p.parent for p in args.compare.rglob("results.json"))
    )
    if reference and not args.markdown:
        print(expected_time(planned, reference, len(args.seeds)), flush=True)
    folders: list[Path] = []
    for seed in args.seeds:  # seed by seed, so that every finished seed is a whole table
        for dataset, model, method in planned:
            settings = dict(
                config.DEFAULTS,
                dataset=dataset,
                model=model,
                method=method,
                alpha=args.alpha or ALPHA[args.table],
                epochs=args.epochs,
                lr=args.lr,
                burnin=args.burnin,
                marglik_frequency=5,
                hypersteps=20,
                subset=args.subset,
                test_subset=args.test_subset,
                marglik_subset=args.marglik_subset,
                seed=seed,
                threads=args.threads,
                kfac_approx=args.kfac_approx,
                restore_best=args.restore_best,
                lengthscale_mode=args.lengthscale_mode,
                device=args.device,
                data_dir=args.data_dir,
            )
            chosen = args.start is not None and config.is_relaxed(model)
            if chosen:
                settings["start"] = args.start
            warmed = method == "marglik" and args.temperature != 1.0
            if warmed:
                settings["temperature"] = args.temperature
            name = f"{dataset}-{model}-{method}"
            if chosen:
                name += f"-{args.start}-start"
            if warmed:
                name += f"-temperature{args.temperature:g}"
            if args.lengthscale_mode != "learned":
                name += f"-lengthscale-{args.lengthscale_mode}"
            if args.kfac_approx != "expand":
                name += f"-kfac-{args.kfac_approx}"
            folder = args.out / f"{name}-seed{seed}"
            folders.append(folder)
            if args.markdown:
                continue
            start = time.perf_counter()
            experiment.train(settings, folder, overwrite=args.overwrite)
            print(f"{folder.name}: {time.perf_counter() - start:.0f} s", flush=True)
    done = [folder for folder in folders if (folder / "results.json").exists()]
    print(summary.markdown(done) if args.markdown else experiment.report(done))
    if args.compare is not None:
        print(summary.compare(done, reference))
        committed = runs_of(left_out, reference)
        if committed:
            print(
                f"\nNot trained here (--models / --methods), the committed runs under "
                f"{args.compare}:\n{experiment.report(committed)}"
            )


def runs_of(experiments: list[tuple[str, str, str]], folders: list[Path]) -> list[Path]:
    """The run folders (``<data>-<model>-<method>-seed<k>``) of the given experiments."""
    prefixes = tuple(f"{dataset}-{model}-{method}-seed" for dataset, model, method in experiments)
    return [
        folder
        for folder in folders
        if folder.name.startswith(prefixes) and folder.name.rsplit("seed", 1)[1].isdigit()
    ]


def expected_time(planned: list[tuple[str, str, str]], reference: list[Path], n_seeds: int) -> str:
    """How long the planned runs took when the committed ones were made, per seed.

    The median of each experiment's committed training times, summed over the planned
    experiments and multiplied by the seeds to run; an experiment without committed runs is
    named instead.
    """
    seconds, unknown, threads = 0.0, [], set()
    for experiment_ in planned:
        runs = runs_of([experiment_], reference)
        if not runs:
            unknown.append("-".join(experiment_))
            continue
        results = [json.loads((run / "results.json").read_text()) for run in runs]
        seconds += statistics.median(result["train_seconds"] for result in results)
        threads.update(result["threads"] for result in results if result.get("threads"))
    text = (
        f"Training {len(planned) * n_seeds} runs: their committed runs took about "
        f"{seconds * n_seeds / 60:.0f} minutes on {'/'.join(map(str, sorted(threads)))} "
        "thread(s) of the machine that made them."
    )
    if unknown:
        text += f" No committed runs of {', '.join(unknown)} to estimate from."
    return text


if __name__ == "__main__":
    main()
