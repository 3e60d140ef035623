"""Measure the speed benchmarks' headline ratios again and say which moved beyond the noise.

The committed CPU report of :mod:`benchmarks.gpu_speed` (``--reference``, by default
``benchmarks/results/gpu_speed/cpu.json``) holds the ratios the speed work is judged by:

* ``conv_epoch_over_stock``: a MAP epoch of the package's CONV network over that of a stock
  CNN of the same shape and parameter count;
* ``exact_fit_over_epoch`` and ``mc_fit_over_epoch`` of F-FC+CONV: a ``Laplace.fit`` with
  the exact GGN and with the Monte-Carlo Fisher over one MAP epoch on the same data;
* ``conv_operators_over_stock``: top-level operators of a CONV training step over the stock
  CNN's (a count: no noise).

This command measures them again with the reference's data size, batch and width (each
timing ``--repeats`` times after a warm-up, interleaved so that load drifts hit every
figure alike), and prints, per ratio, the committed value, the new one, and the noise: half
the spread of the ratio between repeats, relative to its median. A ratio *moved* when it
differs from the committed one by more than twice the noise and at least ``--floor``
(default 10 %). The exit status is 1 when a ratio moved up (slower) on the reference's
machine, so that the command can gate a change; 0 otherwise. Timings are only comparable on
the machine of the reference: on another one the command says so and exits 0. Run it on an
idle machine, never beside tests or training.

    python -m benchmarks.speed_check                 # make bench
    python -m benchmarks.speed_check --out figures.json
"""

from __future__ import annotations

import json
import statistics
import sys
from collections.abc import Callable
from pathlib import Path

import torch

from benchmarks import gpu_speed, timing
from benchmarks.report import benchmark_parser, environment

REFERENCE = Path("benchmarks/results/gpu_speed/cpu.json")
BLOCK_DIAGONAL = "f-fc+conv"


def interleaved_seconds(runs: dict[str, Callable[[], object]], repeats: int) -> dict:
    """Seconds of each run, ``repeats`` rounds of one call each after a warm-up round."""
    for run in runs.values():
        run()
    times: dict[str, list[float]] = {name: [] for name in runs}
    for _ in range(repeats):
        for name, run in runs.items():
            times[name].append(timing.seconds(run, "cpu"))
    return times


def ratio_with_noise(numerators: list[float], denominators: list[float]) -> tuple[float, float]:
    """Median of the per-round ratios and half their spread relative to it."""
    ratios = [a / b for a, b in zip(numerators, denominators, strict=True)]
    median = statistics.median(ratios)
    return median, (max(ratios) - min(ratios)) / (2 * median)


def measure(reference: dict, repeats: int) -> dict[str, tuple[float, float]]:
    """The headline ratios now, each with its noise, at the reference's settings."""
    rows = {row["model"]: row for row in reference["rows"]}
    n, batch = reference["n"], reference["batch"]
    data = timing.loader(n, batch, "cpu")
    models = {
        name: gpu_speed.build(name, rows[name]["alpha"])
        for name in (gpu_speed.STOCK, "conv", BLOCK_DIAGONAL)
    }
    runs = {f"{name} epoch": gpu_speed.epoch(model, data) for name, model in models.items()}
    runs["exact fit"] = gpu_speed.fit(models[BLOCK_DIAGONAL], data, stochastic=False)
    runs["mc fit"] = gpu_speed.fit(models[BLOCK_DIAGONAL], data, stochastic=True)
    times = interleaved_seconds(runs, repeats)
    ratios = {
        "conv_epoch_over_stock": ratio_with_noise(
            times["conv epoch"], times[f"{gpu_speed.STOCK} epoch"]
        ),
        "exact_fit_over_epoch": ratio_with_noise(
            times["exact fit"], times[f"{BLOCK_DIAGONAL} epoch"]
        ),
        "mc_fit_over_epoch": ratio_with_noise(times["mc fit"], times[f"{BLOCK_DIAGONAL} epoch"]),
    }
    profile_batch = timing.loader(32, 32, "cpu")
    x, y = next(iter(profile_batch))
    steps = {}
    for name in (gpu_speed.STOCK, "conv"):
        model = models[name]
        step = gpu_speed.training_step(model, torch.optim.SGD(model.parameters(), lr=1e-3))
        steps[name] = gpu_speed.operators(lambda step=step: step(x, y), "cpu")["aten_top_level"]
    ratios["conv_operators_over_stock"] = (steps["conv"] / steps[gpu_speed.STOCK], 0.0)
    return ratios


def committed(reference: dict) -> dict[str, float]:
    """The headline ratios of the reference report."""
    rows = {row["model"]: row for row in reference["rows"]}
    return {
        **reference["summary"],
        "exact_fit_over_epoch": rows[BLOCK_DIAGONAL]["exact"]["fit_over_epoch"],
        "mc_fit_over_epoch": rows[BLOCK_DIAGONAL]["mc"]["fit_over_epoch"],
    }


def verdicts(
    before: dict[str, float], now: dict[str, tuple[float, float]], floor: float
) -> list[dict]:
    """Per ratio: committed, now, relative change, noise and whether it moved (and how)."""
    rows = []
    for key, (value, noise) in now.items():
        change = value / before[key] - 1
        moved = abs(change) > max(2 * noise, floor)
        rows.append(
            {
                "ratio": key,
                "committed": before[key],
                "now": value,
                "change": change,
                "noise": noise,
                "verdict": ("slower" if change > 0 else "faster") if moved else "within noise",
            }
        )
    return rows


def main() -> int:
    parser = benchmark_parser(__doc__)
    parser.set_defaults(device="cpu")
    parser.add_argument("--reference", type=Path, default=REFERENCE)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--floor", type=float, default=0.10)
    args = parser.parse_args()
    if args.device != "cpu":
        parser.error("the committed reference is a CPU report: run with --device cpu")
    if not args.reference.is_file():
        parser.error(f"no reference report at {args.reference}: give one with --reference")
    reference = json.loads(args.reference.read_text())
    print(
        f"reference: {args.reference} ({reference['device']}, {reference['cpu_threads']} "
        f"threads, commit {reference['package_commit']}); now: "
        f"{torch.get_num_threads()} threads, {args.repeats} repeats",
        flush=True,
    )
    here = environment("-m benchmarks.speed_check", "cpu")["device"]
    same_machine = here == reference["device"]
    if not same_machine:
        print(
            f"this machine is a {here}, the reference's a {reference['device']}: the ratios "
            "are printed, but a change between machines is no verdict on the code"
        )
    rows = verdicts(committed(reference), measure(reference, args.repeats), args.floor)
    print(f"{'ratio':28} {'committed':>9} {'now':>7} {'change':>7} {'noise':>6}  verdict")
    for row in rows:
        print(
            f"{row['ratio']:28} {row['committed']:9.2f} {row['now']:7.2f} "
            f"{row['change']:+7.0%} {row['noise']:6.0%}  {row['verdict']}"
        )
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        report = environment("-m benchmarks.speed_check", "cpu") | {"ratios": rows}
        args.out.write_text(json.dumps(report, indent=1) + "\n")
    return int(same_machine and any(row["verdict"] == "slower" for row in rows))


if __name__ == "__main__":
    sys.exit(main())
