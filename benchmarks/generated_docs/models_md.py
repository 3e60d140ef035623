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
BEYOND_THE_PAPER = (
    ("table3", "gconv"),
    ("table3", "gconv-full"),
    ("table3", "f-fc+conv+gconv-full"),
)
"""(table, model) counted at the table's setting though the paper prints no count for it."""
PATHS_COUNTED = ("f-fc+conv+gconv", "f-fc+conv+gconv-full")
"""Models whose filter weights per path are listed (how wide each GCONV is beside CONV)."""


FRAGMENT = ROOT / "benchmarks" / "generated_docs" / "fragments" / "models.md"


def render() -> str:
    """The whole of docs/models.md: our parameter counts beside the reference's and paper's."""
    rows = []
    empty = {"reference": None, "paper": "-"}
    listed = [*models.PAPER_PARAMETER_COUNTS.items(), *((k, empty) for k in BEYOND_THE_PAPER)]
    for (table, name), counts in listed:
        what = models.PAPER_INPUTS[table][3]
        n = models.count_parameters(_meta_model(table, name))
        reference = f"{counts['reference']:,}" if counts["reference"] else "-"
        rows.append([f"{table} ({what})", name, f"{n:,}", reference, counts["paper"]])
    table = markdown_table(["table", "model", "ours", "reference code", "paper"], rows)
    return figures.render_fragment(FRAGMENT, counts=table, path_weights=_path_weights())


def _meta_model(table: str, name: str) -> torch.nn.Module:
    """``name`` built at ``table``'s input, classes and alpha, on the meta device."""
    in_shape, n_classes, alpha, _ = models.PAPER_INPUTS[table]
    with torch.device("meta"):
        return models.build(name, in_shape, n_classes, alpha)


def _path_weights() -> str:
    """Filter weights of each path summed over the eight relaxed layers, Table 3's setting."""
    rows = []
    for name in PATHS_COUNTED:
        weights: dict[str, int] = {}
        for layer in _meta_model("table3", name).relaxed_layers:
            for path in layer.path_names:
                parameters = layer.path(path).named_parameters()
                count = sum(p.numel() for n, p in parameters if not n.endswith("bias"))
                weights[path] = weights.get(path, 0) + count
        rows.append([name, *(f"{weights[p]:,}" for p in ("fc", "conv", "gconv"))])
    return markdown_table(["model", "FC", "CONV", "GCONV"], rows)
