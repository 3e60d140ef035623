"""docs/models.md: every model's parameter count beside the reference code's and the paper's.

The narrative is the fragment ``fragments/models.md``; the table is counted here.
"""

from __future__ import annotations

import torch

from benchmarks.generated_docs import figures
from benchmarks.generated_docs.common import (
    ROOT,
    markdown_table,
)
from laplace_equivariance import models

DOCUMENT = ROOT / "docs" / "models.md"


FRAGMENT = ROOT / "benchmarks" / "generated_docs" / "fragments" / "models.md"


def render() -> str:
    """The whole of docs/models.md: our parameter counts beside the reference's and paper's."""
    rows = []
    for (table, name), counts in models.PAPER_PARAMETER_COUNTS.items():
        in_shape, n_classes, alpha, what = models.PAPER_INPUTS[table]
        with torch.device("meta"):
            n = models.count_parameters(models.build(name, in_shape, n_classes, alpha))
        reference = f"{counts['reference']:,}" if counts["reference"] else "-"
        rows.append([f"{table} ({what})", name, f"{n:,}", reference, counts["paper"]])
    table = markdown_table(["table", "model", "ours", "reference code", "paper"], rows)
    return figures.render_fragment(FRAGMENT, counts=table)
