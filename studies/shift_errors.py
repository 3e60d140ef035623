"""How far each path of trained runs is from equivariant to the quadrant shifts of Table 1.

On quadrant MNIST a circular shift of the 32x32 input by 16 pixels (down, right, or both)
moves a digit into another quadrant. For each run this measures, on its first 1,000 test
images, :func:`~laplace_equivariance.path_shift_errors` for the three shifts (their mean per
path and per layer's sum of paths), each path's share of its layer's output
(:func:`~laplace_equivariance.path_output_shares`), and the share of test images whose
predicted class the diagonal shift leaves unchanged. A path with a small error treats the
quadrants alike whatever its type: an F-FC path can be a global pooling, which is invariant.

Usage (from the repository root):
    python -m studies.shift_errors RUN [RUN ...] --out studies/results/shift-errors/NAME.json
"""

from __future__ import annotations

import json
import statistics
from pathlib import Path
from typing import Any

import torch

from laplace_equivariance import path_output_shares, path_shift_errors
from laplace_equivariance.app.runs import load_trained
from studies import measured_runs

QUADRANT_SHIFTS = ((16, 0), (0, 16), (16, 16))
"""Down, right, and both: the three moves of a digit to another quadrant of a 32x32 canvas."""


def mean_or_none(values: list[float | None]) -> float | None:
    """The mean, or None where any value is None (a silent path)."""
    return None if any(v is None for v in values) else statistics.fmean(values)


def measure(run: Path, images: int) -> dict[str, Any]:
    """One run's per-layer shift errors, output shares and unchanged predictions."""
    model, data = load_trained(run)
    model.eval()
    x = data.x_test[:images]
    per_shift = [path_shift_errors(model, x, shift) for shift in QUADRANT_SHIFTS]
    shares = path_output_shares(model, x)
    layers = []
    for k, share in enumerate(shares):
        rows = [errors[k] for errors in per_shift]
        layers.append(
            {
                "layer": share["layer"],
                "paths": {
                    path: {
                        "share": value,
                        "shift_error": mean_or_none([r["paths"][path] for r in rows]),
                    }
                    for path, value in share["paths"].items()
                },
                "shift_error": mean_or_none([r["total"] for r in rows]),
            }
        )
    with torch.no_grad():
        before = model(x).argmax(-1)
        after = model(torch.roll(x, QUADRANT_SHIFTS[-1], dims=(-2, -1))).argmax(-1)
    results = json.loads((run / "results.json").read_text())
    return {
        "run": run.name,
        "settings": results["settings"],
        "test_images": len(x),
        "layers": layers,
        "prediction_unchanged": (before == after).double().mean().item(),
    }


def main() -> None:
    """Measure the runs and write one JSON file."""
    parser = measured_runs.parser(__doc__.split("\n\n")[0])
    parser.add_argument("--images", type=int, default=1000, help="test images measured")
    args = measured_runs.parse(parser)
    measured = [measure(run, args.images) for run in args.runs]
    measured_runs.write(args.out, args.threads, measured)


if __name__ == "__main__":
    main()
