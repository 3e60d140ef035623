"""Print KFAC's relative Frobenius error against the exact GGN, per block, in general cases.

The cases of ``tests/curvature/test_exactness.py`` (one layer, a ReLU and a linear head; 8
examples, 3 classes, seed 0, float64): each block's measured error beside the figure the
test pins (to +-0.005) and docs/curvature.md quotes, and the error with that block's ``B``
factor doubled, which the pinned check must reject.

Usage (from the repository root):
    python -m benchmarks.kfac_errors
"""

from __future__ import annotations

import torch

from benchmarks.markdown_table import rows_table
from tests.curvature.test_exactness import GENERAL_CASES, general_case_errors


def main() -> None:
    """Print the table: one row per (case, block)."""
    rows = []
    cpu = torch.device("cpu")
    for case, (_, _, pinned) in GENERAL_CASES.items():
        torch.manual_seed(0)
        errors = general_case_errors(case, cpu)
        for block, expected in pinned.items():
            torch.manual_seed(0)
            doubled = general_case_errors(case, cpu, doubled=block)[block]
            rows.append([case, block, *(f"{v:.4f}" for v in (errors[block], expected, doubled))])
    print(rows_table(["case", "block", "measured", "pinned", "with B doubled"], rows))


if __name__ == "__main__":
    main()
