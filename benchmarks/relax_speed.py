"""A relaxed torchvision ResNet-18 against the original: MAP epoch and Kron fit, as ratios.

The network is ``resnet18`` with a CIFAR-style stem (3x3 first convolution, no max-pool), one
input channel and 10 classes, on 32x32 inputs; :func:`laplace_equivariance.relax` adds F-FC
paths (started at zero) to the convolutions of ``--relax`` (the last stage by default: F-FC on
every convolution would add 172 M parameters). Both networks are timed in one process on the
same random data: a MAP epoch and a ``Laplace(..., backend=EquivariantKFAC).fit`` (those of
:mod:`benchmarks.gpu_speed`), each the median of ``--repeats`` after a warm-up, interleaved::

    python -m benchmarks.relax_speed --device cpu --out benchmarks/results/relax_speed-cpu.json

``benchmarks/gpu_speed.sh`` runs it on a GPU (``--device cuda``).
"""

from __future__ import annotations

import json
import statistics

import torch
import torchvision
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from benchmarks import gpu_speed, timing
from benchmarks.report import benchmark_parser, environment
from laplace_equivariance import count_parameters, relax


def resnet18() -> nn.Module:
    """torchvision's ResNet-18 for 1x32x32 inputs and 10 classes, CIFAR-style stem."""
    torch.manual_seed(0)
    model = torchvision.models.resnet18(num_classes=10)
    model.conv1 = nn.Conv2d(1, 64, 3, padding=1, bias=False)
    model.maxpool = nn.Identity()
    return model


def medians(runs: dict, repeats: int, device: str) -> dict[str, float]:
    """Median seconds of each run (the GPU's queued work included), interleaved, after one
    warm-up round."""
    for run in runs.values():
        run()
    times: dict[str, list[float]] = {name: [] for name in runs}
    for _ in range(repeats):
        for name, run in runs.items():
            times[name].append(timing.seconds(run, device))
    return {name: statistics.median(values) for name, values in times.items()}


def main() -> None:
    parser = benchmark_parser(__doc__)
    parser.add_argument("--n", type=int, default=256, help="images (256)")
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--relax", default="layer4", help="prefix of the convolutions relaxed")
    args = parser.parse_args()
    g = torch.Generator().manual_seed(0)
    x, y = torch.randn(args.n, 1, 32, 32, generator=g), torch.randint(0, 10, (args.n,), generator=g)
    x, y = x.to(args.device), y.to(args.device)
    data = DataLoader(TensorDataset(x, y), batch_size=args.batch)
    original = resnet18().to(args.device)
    relaxed = relax(
        original,
        x[:1],
        layers=lambda name, conv: name.startswith(args.relax),
        max_added_parameters=10**9,
    )
    runs = {}
    for name, model in (("original", original), ("relaxed", relaxed)):
        runs[f"{name} epoch"] = gpu_speed.epoch(model, data)
        runs[f"{name} exact fit"] = gpu_speed.fit(model, data, stochastic=False)
        runs[f"{name} mc fit"] = gpu_speed.fit(model, data, stochastic=True)
    seconds = medians(runs, args.repeats, args.device)
    result = environment("-m benchmarks.relax_speed", args.device) | {
        "n": args.n,
        "batch": args.batch,
        "repeats": args.repeats,
        "relaxed": args.relax,
        "parameters": {
            "original": count_parameters(original),
            "relaxed": count_parameters(relaxed),
        },
        "seconds": seconds,
        "ratios": {
            what: seconds[f"relaxed {what}"] / seconds[f"original {what}"]
            for what in ("epoch", "exact fit", "mc fit")
        },
    }
    print(json.dumps(result, indent=1))
    if args.out:
        args.out.write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
