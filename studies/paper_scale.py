"""Table 1's two tasks at the paper's data scale, in a fixed wall-clock budget on one GPU.

Table 1 trains on 60,000 quadrant-MNIST images; offline, Fashion-MNIST's 60,000 items give the
same tasks at the same scale (``quadrant-fashion-item``: the item's class, translation
invariant; ``quadrant-fashion``: class and quadrant, 40 classes). Every run of :data:`ROWS`
(three seeds each) goes through the command line (``laplace-equivariance train``), all at
once, one CPU thread each, sharing the device.

The epochs are not guessed: a probe first runs every row for four epochs (marginal-likelihood
fits ending the third and the fourth) side by side, as the real runs will, and reads each
epoch's time from ``results.json``'s ``epoch_seconds`` (the second epoch's for a training
epoch, the fourth's less that for a fit); then each task gets the most epochs
that fit the remaining budget for its slowest row (0.8 of it, for safety), with the
marginal-likelihood fit after every epoch from the second (``--burnin 2
--marglik-frequency 1``: the paper's 1,000 epochs take ~200 fits; a budget of tens of epochs
takes as many as it can). A run still going at the deadline is stopped and reported as such::

    python -m studies.paper_scale --seconds 480 --device cuda \\
        --data-dir .data/fashion-mnist --out runs/paper-scale

writes ``plan.json`` (the probe's times, the epochs chosen) and one ``--out`` folder per run;
``--pack FILE`` also packs every run's ``results.json`` and ``run.json`` into one tar file.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tarfile
import time
from pathlib import Path

from laplace_equivariance.marglik.training import marglik_step_epochs

ROWS: tuple[tuple[str, str, str, tuple[str, ...]], ...] = (
    ("quadrant-fashion-item", "f-fc+conv", "marglik", ()),
    ("quadrant-fashion-item", "f-fc+conv", "map", ()),
    ("quadrant-fashion-item", "conv", "map", ()),
    ("quadrant-fashion", "f-fc+conv", "marglik", ("--stochastic",)),
    ("quadrant-fashion", "fc", "map", ()),
    ("quadrant-fashion", "conv", "map", ()),
)
"""(data set, model, method, extra options): the learned network and the MAP baselines that
Table 1 sets it against (40 classes: the Monte-Carlo Fisher, one backward pass a batch)."""
BURNIN, FREQUENCY = 2, 1
PROBE_EPOCHS = 4
"""Epochs of a probe run (burn-in 3: fits end epochs 3 and 4)."""
SAFETY = 0.8


def run_name(dataset: str, model: str, method: str, seed: int) -> str:
    """The ``--out`` folder name of one run."""
    return f"{dataset}-{model}-{method}-seed{seed}"


def command(row, seed: int, epochs: int, burnin: int, out: Path, args) -> list[str]:
    """The ``train`` command of one run."""
    dataset, model, method, extra = row
    return [
        sys.executable, "-m", "laplace_equivariance", "train",
        "--dataset", dataset, "--model", model, "--method", method,
        "--alpha", str(args.alpha), "--epochs", str(epochs),
        "--burnin", str(burnin), "--marglik-frequency", str(FREQUENCY),
        "--seed", str(seed), "--threads", "1", "--device", args.device,
        "--out", str(out / run_name(dataset, model, method, seed)), "--overwrite",
        *(["--data-dir", args.data_dir] if args.data_dir else []),
        *extra, *args.train_options,
    ]  # fmt: skip


def launch(commands: dict[str, list[str]], deadline: float, log: Path) -> dict[str, dict]:
    """Run every command at once; stop those still going at ``deadline`` (``time.time()``)."""
    log.mkdir(parents=True, exist_ok=True)
    env = os.environ | {"OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1"}
    started = time.time()
    processes = {
        name: subprocess.Popen(
            cmd, stdout=(log / f"{name}.log").open("w"), stderr=subprocess.STDOUT, env=env
        )
        for name, cmd in commands.items()
    }
    outcome: dict[str, dict] = {}
    while len(outcome) < len(processes):
        for name, process in processes.items():
            if name in outcome:
                continue
            if process.poll() is not None:
                outcome[name] = {"returncode": process.returncode, "wall": time.time() - started}
            elif time.time() > deadline:
                process.kill()
                process.wait()
                outcome[name] = {"returncode": "stopped at the deadline"}
        time.sleep(1.0)
    return outcome


def probe_times(out: Path, outcome: dict[str, dict]) -> dict[str, dict[str, float]]:
    """Per row: a warm epoch's seconds, a fit's extra seconds, and what else a run takes."""
    times: dict[str, dict[str, float]] = {}
    for name, result in outcome.items():
        if result["returncode"] != 0:
            raise SystemExit(f"probe {name} failed ({result['returncode']}): see its log")
        seconds = json.loads((out / name / "results.json").read_text())["epoch_seconds"]
        epoch, fit_epoch = seconds[1], seconds[PROBE_EPOCHS - 1]
        row = name.rsplit("-seed", 1)[0]
        times.setdefault(row, {"epoch": [], "fit": [], "other": []})
        times[row]["epoch"].append(epoch)
        times[row]["fit"].append(max(fit_epoch - epoch, 0.0) if "marglik" in name else 0.0)
        times[row]["other"].append(result["wall"] - sum(seconds))
    return {row: {k: max(v) for k, v in t.items()} for row, t in times.items()}


def epochs_within(seconds: float, times: dict[str, float]) -> int:
    """The most epochs whose estimated time (epochs, fits, start and final fit) fits."""
    epochs = 0
    while True:
        fits = len(marglik_step_epochs(epochs + 1, BURNIN, FREQUENCY))
        # the final Laplace fit of a learned run costs about one more fit
        need = times["other"] + (epochs + 1) * times["epoch"] + (fits + 1) * times["fit"]
        if need > seconds:
            return epochs
        epochs += 1


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, required=True, help="wall budget, probe included")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--data-dir", dest="data_dir")
    parser.add_argument("--alpha", type=int, default=4, help="App. F.1's width multiplier [4]")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--pack", type=Path, help="tar file of every results.json and run.json")
    parser.add_argument(
        "train_options", nargs="*", help="more train options after --, e.g. -- --subset 500"
    )
    args = parser.parse_args(argv)
    start = time.time()
    args.out.mkdir(parents=True, exist_ok=True)
    probe_out = args.out / "probe"
    probes = {
        run_name(*row[:3], seed): command(row, seed, PROBE_EPOCHS, 3, probe_out, args)
        for row in ROWS
        for seed in args.seeds
    }
    times = probe_times(probe_out, launch(probes, start + args.seconds, probe_out / "logs"))
    left = args.seconds - (time.time() - start)
    plan: dict[str, int] = {}
    for dataset in dict.fromkeys(row[0] for row in ROWS):
        rows = [t for name, t in times.items() if name.startswith(f"{dataset}-")]
        plan[dataset] = min(epochs_within(SAFETY * left, t) for t in rows)
    record = {"seconds": args.seconds, "probe_seconds": time.time() - start, "times": times}
    record |= {"epochs": plan, "burnin": BURNIN, "marglik_frequency": FREQUENCY}
    (args.out / "plan.json").write_text(json.dumps(record, indent=1))
    print(json.dumps(record, indent=1), flush=True)
    runs = {
        run_name(*row[:3], seed): command(row, seed, plan[row[0]], BURNIN, args.out, args)
        for row in ROWS
        for seed in args.seeds
        if plan[row[0]] > BURNIN
    }
    outcome = launch(runs, start + args.seconds, args.out / "logs")
    record["outcome"] = outcome
    (args.out / "plan.json").write_text(json.dumps(record, indent=1))
    print(json.dumps(outcome, indent=1), flush=True)
    if args.pack:
        with tarfile.open(args.pack, "w:gz") as tar:
            tar.add(args.out / "plan.json", "plan.json")
            for name in runs:
                for file in ("results.json", "run.json", "symmetry.png"):
                    if (args.out / name / file).exists():
                        tar.add(args.out / name / file, f"{name}/{file}")
            for log in (args.out / "logs").glob("*.log"):
                tar.add(log, f"logs/{log.name}")
    finished = [name for name, o in outcome.items() if o["returncode"] == 0]
    print(f"{len(finished)} of {len(runs)} runs finished in {time.time() - start:.0f} s")
    if len(finished) < len(runs):
        raise SystemExit(1)


if __name__ == "__main__":
    main()
