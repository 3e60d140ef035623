"""The tables of the generated pages that are computed, not picked: one function per page,
returning the frames its template writes with ``table()`` (see :mod:`benchmarks.render_pages`).
"""

from __future__ import annotations

import pandas as pd
import torch

from benchmarks import runs_table
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


def models_page() -> dict[str, pd.DataFrame]:
    """docs/models.md: every model's parameter count beside the reference code's and the
    paper's (``counts``), and the filter weights per path at Table 3's setting (``weights``)."""
    empty = {"reference": None, "paper": "-"}
    listed = [*models.PAPER_PARAMETER_COUNTS.items(), *((k, empty) for k in BEYOND_THE_PAPER)]
    counts = pd.DataFrame(
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
    weights = []
    for name in PATHS_COUNTED:
        row = {"model": name}
        for layer in _meta_model("table3", name).relaxed_layers:
            for path in layer.path_names:
                parameters = layer.path(path).named_parameters()
                count = sum(p.numel() for n, p in parameters if not n.endswith("bias"))
                row[path.upper()] = row.get(path.upper(), 0) + count
        weights.append(row)
    weights = pd.DataFrame(weights)[["model", "FC", "CONV", "GCONV"]]
    return {
        "counts": counts,
        "weights": weights.map(lambda v: f"{v:,}" if isinstance(v, int) else v),
    }


def kept_by_evidence(folders: list[str], model: str) -> pd.DataFrame:
    """Of the learned ``model`` runs in ``folders`` (the same network from several starts), per
    data set and seed the run of the lowest last ``-log p(D)/N``: the start a user who tried
    them all would keep, no test image looked at."""
    runs = runs_table.runs()
    learned = runs[runs["folder"].isin(folders) & (runs["model"] == model)]
    learned = learned[learned["method"] == "marglik"]
    return learned.loc[learned.groupby(["dataset", "seed"])["marglik_per_example"].idxmin()]


CHANGES = (
    (
        "0.2.0",
        lambda model: "f-fc" in model or "s-fc" in model,
        "F-FC/S-FC factors were not balanced at initialisation and learned runs took one "
        "prior per path",
    ),
    (
        "0.3.0",
        lambda model: "+" in model,
        "relaxed layers averaged their paths (now: their sum over sqrt(K))",
    ),
)
"""Changes of behaviour that make older committed runs record another version's: the version,
which models it affects, what runs before it did (docs/learned_structure.md)."""


TABLES = {"models.md": models_page}
"""Each templated page's computed tables, by page name."""
