"""Measured figures in the docs' prose, rendered from the committed runs.

A sentence names its figure by what it measures, not by its value::

    "at {{acc table1-digit-4000-150ep-held f-fc+conv marglik}} % test"

becomes ``"at 93.8 ± 1.0 % test"``, computed from the ``results.json`` of the runs under
``benchmarks/results/table1-digit-4000-150ep-held`` whose model and method are those named.
A placeholder is ``{{KIND FOLDER MODEL METHOD [key=value ...]}}``; the keys filter the row
further (``dataset``, ``start``, ``kfac_approx``, ``burnin``, and any other setting), and the
row they pick must be unique. Kinds:

- ``acc``: test accuracy in %, mean ± std over seeds; ``acc_seeds``: per seed, ``a / b / c``;
- ``nll``: test NLL, mean ± std; ``train_acc``: training accuracy in %, mean ± std;
- ``marglik_seeds``: the last ``-log marglik`` per seed, whole numbers;
  ``marglik_per_example``: ``-log marglik / N``, mean ± std;
- per seed as ``a, b and c``: ``paths_off`` (paths under 1 % of their layer's relative
  effective parameters), ``fc_off_first_six`` (of layers 1-6, those whose FC path is under 1 %
  of them), ``fc_output_off`` (layers whose FC path carries under 1 % of the output).

So a figure is stated where it is measured: when runs change, the rendered page changes with
them (and the staleness test fails until it is regenerated), and a figure whose runs are gone
cannot be rendered at all.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from benchmarks.generated_docs.common import RESULTS
from laplace_equivariance import summary

PLACEHOLDER = re.compile(r"\{\{(\w+)\s+([^{}]+)\}\}")


def _seeds(values: list[float], digits: int = 1) -> str:
    return " / ".join(f"{v:,.{digits}f}" for v in values)


def _counts(values: list[int]) -> str:
    """Per-seed counts as prose: ``"5, 6 and 6"``."""
    words = [str(v) for v in values]
    return ", ".join(words[:-1]) + " and " + words[-1] if len(words) > 1 else "".join(words)


def _fc_shares(result: dict, layers: slice = slice(None)) -> list[float]:
    """The FC path's relative effective parameters per relaxed layer (App. D)."""
    rows = result["symmetry"]["layers"][layers]
    return [row["paths"].get("fc", {}).get("relative", 0.0) for row in rows]


KINDS: dict[str, Callable[[summary.Row], str]] = {
    "acc": lambda row: summary.mean_std(row.accuracy()),
    "acc_seeds": lambda row: _seeds(row.accuracy()),
    "nll": lambda row: summary.mean_std(row.nll(), digits=2),
    "train_acc": lambda row: summary.mean_std(row.accuracy("train")),
    "marglik_seeds": lambda row: _seeds([r["neg_log_marglik"][-1] for r in row.results], 0),
    "marglik_per_example": lambda row: summary.mean_std(
        row.neg_log_marglik_per_example(), digits=2
    ),
    "paths_off": lambda row: _counts(row.paths_off()),
    "fc_off_first_six": lambda row: _counts(
        [sum(share < 0.01 for share in _fc_shares(r, slice(0, 6))) for r in row.results]
    ),
    "fc_output_off": lambda row: _counts(
        [sum(layer["paths"]["fc"] < 0.01 for layer in r["path_outputs"]) for r in row.results]
    ),
}
"""What each kind of placeholder renders from its row."""


def _row(spec: str) -> summary.Row:
    """The one row of runs a placeholder's ``FOLDER MODEL METHOD [key=value ...]`` names.

    Raises:
        ValueError: If the folder has no runs, or the spec picks no row or several.
    """
    folder, model, method, *filters = spec.split()
    runs = sorted(p.parent for p in (RESULTS / folder).rglob("results.json"))
    if not runs:
        raise ValueError(f"{{{{... {spec}}}}}: benchmarks/results/{folder} holds no run.")
    wanted = dict(f.split("=", 1) for f in filters) | {"model": model, "method": method}
    found = [
        row
        for row in summary.rows(runs)
        if all(str((summary.LATER_OPTIONS | row.settings).get(k)) == v for k, v in wanted.items())
    ]
    if len(found) != 1:
        raise ValueError(
            f"{{{{... {spec}}}}} picks {len(found)} rows of benchmarks/results/{folder}, not "
            "one: name the row with key=value filters (dataset=, start=, ...)."
        )
    return found[0]


def render(text: str) -> str:
    """``text`` with every placeholder replaced by its figure.

    Raises:
        ValueError: For an unknown kind, or a placeholder that picks no row or several.
    """

    def figure(match: re.Match) -> str:
        kind, spec = match.group(1), match.group(2)
        if kind not in KINDS:
            raise ValueError(f"{match.group(0)}: unknown kind {kind!r}; kinds: {sorted(KINDS)}.")
        return KINDS[kind](_row(spec))

    return PLACEHOLDER.sub(figure, text)
