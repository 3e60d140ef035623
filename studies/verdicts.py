r"""Verdicts on the paper's claims, judged by the seed spread: "A above B" (:func:`judge`,
:func:`claim`) and "A within a point of B" (:func:`within`, Table 2's claim).

A claim is reproduced where the mean difference over the seeds exceeds twice its standard
error (the standard error of a difference of two independent means,
:math:`\sqrt{s_x^2/n_x + s_y^2/n_y}`), not distinguishable within it, reversed below it. A line
names the seeds of either side whose training ended at chance, so that a verdict that rests on
a network that learned nothing says so. The generated pages write them (``claim`` and
``within`` in the templates), and so do the studies' own sections.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

import pandas as pd


def judge(
    better: Iterable[float],
    worse: Iterable[float],
    not_below: bool = False,
    digits: int = 1,
    unit: str = "points",
) -> str:
    """The verdict on "``better`` above ``worse``" (``not_below``: "not below it") by the seed
    spread: reproduced where the mean difference exceeds twice its standard error, not
    distinguishable (``not_below``: consistent) within it, reversed below it."""
    x, y = pd.Series(list(better), dtype=float), pd.Series(list(worse), dtype=float)
    if x.empty or y.empty:
        return "not run"
    if len(x) < 2 or len(y) < 2:
        return "one seed: no verdict"
    diff = x.mean() - y.mean()
    error = math.sqrt(x.var() / len(x) + y.var() / len(y))
    figures = f"difference {diff:+.{digits}f} {unit}, standard error {error:.{digits}f}"
    if diff > 2 * error:
        return f"reproduced ({figures})"
    if diff >= -2 * error:
        status = "consistent (within two standard errors)" if not_below else "not distinguishable"
        return f"{status} ({figures})"
    return f"**not reproduced: reversed** ({figures})"


def claim(
    text: str,
    better: pd.DataFrame,
    worse: pd.DataFrame,
    not_below: bool = False,
    column: str = "test_acc",
) -> str:
    """``- text: verdict`` on the test accuracies of two experiments' runs (:func:`judge`);
    ``column="test_nll"``: on their test NLLs, lower being better (the difference in nats by
    which ``better``'s is lower). Runs whose training accuracy ended at chance
    (``train_at_chance``: a network that never learned or that diverged) are named after the
    verdict, which then rests on a side that learned nothing."""
    if column == "test_nll":
        verdict = judge(-better[column], -worse[column], not_below, digits=3, unit="nats")
    else:
        verdict = judge(better[column], worse[column], not_below)
    return (
        f"- {text}: {verdict}" + _at_chance(better, "the first") + _at_chance(worse, "the second")
    )


def _at_chance(runs: pd.DataFrame, side: str) -> str:
    """``"; **the second side's seeds 0, 2 ended training at chance**"``, or nothing."""
    if "train_at_chance" not in runs or not runs["train_at_chance"].any():
        return ""
    seeds = list(runs.loc[runs["train_at_chance"].astype(bool), "seed"])
    named = f"seed{'s' if len(seeds) > 1 else ''} {', '.join(map(str, seeds))}"
    return f"; **{side} side's {named} ended training at chance**"


def within(text: str, learned: pd.DataFrame, best: pd.DataFrame, points: float = 1.0) -> str:
    """``- text: holds`` where ``learned``'s mean test accuracy is at most ``points`` below
    ``best``'s or above it (the paper's Table 2 claim, on means), ``fails`` otherwise; with the
    difference of the means and its standard error over the seeds."""
    x, y = learned["test_acc"], best["test_acc"]
    diff = x.mean() - y.mean()
    error = math.sqrt(x.var() / len(x) + y.var() / len(y))
    verdict = "holds" if diff >= -points else "fails"
    figures = f"(difference {diff:+.1f} points, standard error {error:.1f})"
    return (
        f"- {text}: {verdict} {figures}"
        + _at_chance(learned, "the first")
        + _at_chance(best, "the second")
    )
