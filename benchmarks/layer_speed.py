"""Forward+backward time and peak memory of the Table 2 models (issue 3's speed target).

Every model is measured in a fresh subprocess so that peak memory belongs to that model alone:
on CPU the peak resident set size of the process (``ru_maxrss``, all of it, torch included)
and its increase over the process after building the model; on CUDA
``torch.cuda.max_memory_allocated``. Times are the median of ``--repeats`` forward+backward
passes after one warm-up pass.

Usage (from the repository root):
    python -m benchmarks.layer_speed [--device cpu|cuda] [--batch 128] [--repeats 5]
        [--models conv f-fc+conv ...] [--out benchmarks/results/layer_speed-cpu.json]
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys

import torch

from benchmarks.report import benchmark_parser, environment, timings, write
from laplace_equivariance import count_parameters, models


def measure(name: str, device: str, batch: int, repeats: int) -> dict:
    torch.manual_seed(0)
    model = models.build(name, (3, 32, 32), 10, alpha=10).to(device)
    x = torch.randn(batch, 3, 32, 32, device=device)
    y = torch.randint(0, 10, (batch,), device=device)
    loss_fn = torch.nn.CrossEntropyLoss()

    def step() -> None:
        model.zero_grad(set_to_none=True)
        loss_fn(model(x), y).backward()

    baseline_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    if device == "cuda":
        torch.cuda.reset_peak_memory_stats()
    times = timings(step, repeats, device)
    result = {
        "model": name,
        "parameters": count_parameters(model),
        "median_s": statistics.median(times),
        "times_s": times,
    }
    peak_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    result["peak_rss_mib"] = peak_rss / 1024
    result["rss_increase_mib"] = (peak_rss - baseline_rss) / 1024
    if device == "cuda":
        result["peak_cuda_allocated_mib"] = torch.cuda.max_memory_allocated() / 2**20
    return result


def main() -> None:
    parser = benchmark_parser(__doc__)
    parser.add_argument("--batch", type=int, default=128)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--models", nargs="+", default=["conv", "f-fc+conv", "s-fc+s-conv"])
    parser.add_argument("--single", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.single:
        print(json.dumps(measure(args.single, args.device, args.batch, args.repeats)))
        return
    rows = []
    for name in args.models:
        command = [sys.executable, "-m", "benchmarks.layer_speed", "--single", name]
        command += ["--device", args.device]
        command += ["--batch", str(args.batch), "--repeats", str(args.repeats)]
        output = subprocess.run(command, check=True, capture_output=True, text=True).stdout
        rows.append(json.loads(output.strip().splitlines()[-1]))
    conv = next((r for r in rows if r["model"] == "conv"), None)
    header = f"{'model':14} {'params':>11} {'fwd+bwd s':>10} {'x CONV':>7} {'peak RSS MiB':>13}"
    print(header + (" peak CUDA MiB" if args.device == "cuda" else ""))
    for row in rows:
        row["ratio_to_conv"] = row["median_s"] / conv["median_s"] if conv else None
        ratio = f"{row['ratio_to_conv']:.2f}" if conv else "-"
        line = f"{row['model']:14} {row['parameters']:>11,} {row['median_s']:>10.3f} {ratio:>7}"
        line += f" {row['peak_rss_mib']:>13.0f}"
        if args.device == "cuda":
            line += f" {row['peak_cuda_allocated_mib']:>13.0f}"
        print(line)
    report = {
        **environment("-m benchmarks.layer_speed", args.device),
        "batch": args.batch,
        "input": [3, 32, 32],
        "rows": rows,
    }
    write(report, args.out)


if __name__ == "__main__":
    main()
