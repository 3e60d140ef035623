"""docs/models.md's tables: every model's parameter count beside the reference code's and the
paper's, and the filter weights per path of the GCONV networks at Table 3's setting. The models
are built on the meta device (no memory, no data), so the counts are always the current code's.
"""

from __future__ import annotations

import pandas as pd
import torch

from laplace_equivariance import models

BEYOND_THE_PAPER = (
    ("table3", "gconv"),
    ("table3", "gconv-full"),
    ("table3", "f-fc+conv+gconv-full"),
)
"""(table, model) counted at the table's setting though the paper prints no count for it."""
PATHS_COUNTED = ("f-fc+conv+gconv", "f-fc+conv+gconv-full")
"""Models whose filter weights per path are listed (how wide each GCONV is beside CONV)."""


def _meta_model(table: str, name: str) -> torch.nn.Module:
    """``name`` built at ``table``'s input, classes and alpha, on the meta device."""
    in_shape, n_classes, alpha, _ = models.PAPER_INPUTS[table]
    with torch.device("meta"):
        return models.build(name, in_shape, n_classes, alpha)


def counts() -> pd.DataFrame:
    """Every model's parameter count beside the reference code's and the paper's, one row per
    (table, model) of :data:`~laplace_equivariance.models.PAPER_PARAMETER_COUNTS`, then those of
    :data:`BEYOND_THE_PAPER`."""
    empty = {"reference": None, "paper": "-"}
    listed = [*models.PAPER_PARAMETER_COUNTS.items(), *((k, empty) for k in BEYOND_THE_PAPER)]
    return pd.DataFrame(
        [
            {
                "table": f"{table} ({models.PAPER_INPUTS[table][3]})",
                "model": name,
                "ours": f"{models.count_parameters(_meta_model(table, name)):,}",
                "reference code": f"{c['reference']:,}" if c["reference"] else "-",
                "paper": c["paper"],
            }
            for (table, name), c in listed
        ]
    )


def weights() -> pd.DataFrame:
    """Per model of :data:`PATHS_COUNTED`, the filter weights (biases left out) of each path type
    summed over its relaxed layers, at Table 3's setting."""
    rows = []
    for name in PATHS_COUNTED:
        row = {"model": name}
        for layer in _meta_model("table3", name).relaxed_layers:
            for path in layer.path_names:
                parameters = layer.path(path).named_parameters()
                count = sum(p.numel() for n, p in parameters if not n.endswith("bias"))
                row[path.upper()] = row.get(path.upper(), 0) + count
        rows.append(row)
    frame = pd.DataFrame(rows)[["model", "FC", "CONV", "GCONV"]]
    return frame.map(lambda v: f"{v:,}" if isinstance(v, int) else v)


def rotated_copies(table: str = "table3", name: str = "f-fc+conv+gconv", copies: int = 4) -> dict:
    """What the reference code's ``copies`` rotated copies of the image (``copies`` times the
    input channels of the first relaxed layer's planar paths, FC and CONV) add to ``name``'s
    count at ``table``'s setting: ``weights``, those paths' filter weights in our model (biases
    left out; each is linear in the input channels), ``extra``, the weights the other copies
    add, and ``gap``, the reference code's count less ours."""
    model = _meta_model(table, name)
    first = model.relaxed_layers[0]
    weights = sum(
        p.numel()
        for path in ("fc", "conv")
        if path in first.path_names
        for n, p in first.path(path).named_parameters()
        if not n.endswith("bias")
    )
    reference = models.PAPER_PARAMETER_COUNTS[(table, name)]["reference"]
    return {
        "weights": weights,
        "extra": (copies - 1) * weights,
        "gap": reference - models.count_parameters(model),
    }
