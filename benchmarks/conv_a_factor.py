"""CONV's Kronecker factor A: unfolded patches (ASDL's Conv2d rule) against the FFT identity.

On the maps of the F-FC+CONV benchmark model (batch 128, alpha 4: 1x32x32 ... 32x2x2, 3x3
filters), times ``A = (1/XY) sum_{n,p} a_np a_np^T`` two ways, each the median of
``--repeats`` after one warm-up: the product of the unfolded, circularly padded patches, and
:func:`laplace_equivariance.curvature.rules.conv.circular_patch_covariance` (docs/curvature.md).
Also reports their largest difference relative to the largest entry (float32).

Usage (from the repository root):
    python -m benchmarks.conv_a_factor [--repeats 20]
        [--out benchmarks/results/conv_a_factor-cpu.json]
"""

from __future__ import annotations

import statistics

import torch
from torch.nn import functional as F

from benchmarks.report import benchmark_parser, environment, timings, write
from laplace_equivariance.curvature.rules.conv import circular_patch_covariance

MAPS = [(1, 32), (4, 32), (8, 16), (16, 8), (32, 4), (32, 2)]
"""(channels, grid size) of the CONV inputs of the benchmark model, layers 1-8."""


def unfolded(x: torch.Tensor, kernel_size: int) -> torch.Tensor:
    """A from the unfolded patches of the circularly padded map."""
    p = kernel_size // 2
    patches = F.unfold(F.pad(x, (p, p, p, p), mode="circular"), kernel_size)
    rows = patches.transpose(1, 2).reshape(-1, patches.shape[1])
    return rows.T @ rows / patches.shape[-1]


def main() -> None:
    parser = benchmark_parser(__doc__)
    parser.add_argument("--batch", type=int, default=128)
    parser.add_argument("--repeats", type=int, default=20)
    args = parser.parse_args()
    torch.manual_seed(0)
    rows = []
    for channels, size in MAPS:
        x = torch.randn(args.batch, channels, size, size, device=args.device)
        reference = unfolded(x, 3)
        difference = (circular_patch_covariance(x, 3) - reference).abs().max()
        unfold_s = statistics.median(timings(lambda x=x: unfolded(x, 3), args.repeats, args.device))
        fft_s = statistics.median(
            timings(lambda x=x: circular_patch_covariance(x, 3), args.repeats, args.device)
        )
        rows.append(
            {
                "map": [args.batch, channels, size, size],
                "unfold_ms": 1e3 * unfold_s,
                "fft_ms": 1e3 * fft_s,
                "speed_up": unfold_s / fft_s,
                "relative_difference": (difference / reference.abs().max()).item(),
            }
        )
        print(
            f"{channels:3d} x {size:2d} x {size:2d}: unfold {1e3 * unfold_s:6.2f} ms, "
            f"FFT {1e3 * fft_s:6.2f} ms ({unfold_s / fft_s:4.1f}x)"
        )
    write(
        {
            **environment("-m benchmarks.conv_a_factor", args.device),
            "arguments": vars(args) | {"out": str(args.out)},
            "maps": rows,
        },
        args.out,
    )


if __name__ == "__main__":
    main()
