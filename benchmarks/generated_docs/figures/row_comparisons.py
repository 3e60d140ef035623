"""Figures that compare rows of runs (:data:`COMPARISONS`).

``{{acc_diff ROW vs ROW}}``, ``{{acc_span ROW ; ROW}}``, ``{{acc_seed_diff ROW vs ROW}}`` and
``{{marglik_seed_diff ROW vs ROW}}``, each ``ROW`` a ``FOLDER MODEL METHOD [filters]``.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable

from benchmarks.generated_docs.figures.common import signed, span
from benchmarks.generated_docs.figures.run_rows import named_row
from laplace_equivariance.app import summary


def _acc_diff(spec: str) -> str:
    """``ROW vs ROW``: the first row's mean test accuracy less the second's, in points, signed.

    Raises:
        ValueError: Unless the spec is two row specs joined by ``vs``.
    """
    specs = " ".join(spec.split()).split(" vs ")
    if len(specs) != 2:
        raise ValueError("name two rows: {{acc_diff FOLDER MODEL METHOD ... vs FOLDER ...}}.")
    first, second = (statistics.mean(named_row(s).accuracy()) for s in specs)
    return signed(first - second, 1)


def _seed_differences(field: Callable[[summary.Row], list[float]], digits: int):
    """A family ``ROW vs ROW``: per seed the first row's ``field`` less the second's, ``lo-hi``
    with signs (the rows' runs paired in seed order).

    Raises:
        ValueError: Unless the spec is two rows of the same seeds.
    """

    def render(spec: str) -> str:
        specs = " ".join(spec.split()).split(" vs ")
        if len(specs) != 2:
            raise ValueError("name two rows: {{... FOLDER MODEL METHOD ... vs FOLDER ...}}.")
        rows = [named_row(s) for s in specs]
        seeds = [[r["settings"]["seed"] for r in row.results] for row in rows]
        if seeds[0] != seeds[1]:
            raise ValueError(f"the rows' seeds differ: {seeds[0]} and {seeds[1]}.")
        differences = [a - b for a, b in zip(field(rows[0]), field(rows[1]), strict=True)]
        low, high = (signed(v, digits) for v in (min(differences), max(differences)))
        return low if low == high else f"{low} to {high}"

    return render


def _acc_span(spec: str) -> str:
    """``ROW ; ROW ; ...``: the lowest and highest of the rows' mean test accuracies, ``lo-hi``.

    Raises:
        ValueError: Unless the spec names at least two rows.
    """
    specs = " ".join(spec.split()).split(" ; ")
    if len(specs) < 2:
        raise ValueError("name two rows or more: {{acc_span FOLDER MODEL METHOD ... ; ...}}.")
    return span([statistics.mean(named_row(s).accuracy()) for s in specs], 1)


COMPARISONS: dict[str, Callable[[str], str]] = {
    "acc_diff": _acc_diff,
    "acc_span": _acc_span,
    "acc_seed_diff": _seed_differences(lambda row: row.accuracy(), 1),
    "marglik_seed_diff": _seed_differences(
        lambda row: [r["neg_log_marglik"][-1] for r in row.results], 0
    ),
}
"""The comparisons by kind, each given the placeholder's rows."""
