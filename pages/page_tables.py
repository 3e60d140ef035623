"""The templates' helpers over the table of runs that are more than a pick: the start the
evidence keeps (:func:`kept_by_evidence`, :func:`evidence_gap`), turned against upright runs
(:func:`higher_layers`), the learned structure and its fit-by-fit trace (:func:`structure`,
:func:`fit_trace`), the runs an older version made (:func:`older_versions`), and the evidence's
gradients in the log precisions (:func:`precision_gradients`).
"""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd

from benchmarks.markdown_table import table
from laplace_equivariance.app import summary
from pages import page_values
from studies import runs_table


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


def evidence_gap(folders: list[str], model: str, dataset: str, seed: int) -> float:
    """How far apart the learned ``model`` runs of ``folders`` (one per start) lie in their last
    ``-log p(D)/N`` on ``dataset`` and ``seed``: the margin of the start the evidence keeps.

    Raises:
        ValueError: Unless there are exactly two such runs.
    """
    runs = runs_table.runs()
    runs = runs[runs["folder"].isin(folders) & (runs["model"] == model)]
    runs = runs[(runs["method"] == "marglik") & (runs["dataset"] == dataset)]
    evidence = runs[runs["seed"] == seed]["marglik_per_example"]
    if len(evidence) != 2:
        raise ValueError(f"{len(evidence)} runs of {dataset} seed {seed}, not two")
    return abs(evidence.iloc[0] - evidence.iloc[1])


def evidence_picks(folder: str, task: str, sizes: list[int], network: str = "conv") -> str:
    """``"N of M"``: over the seeds of the sizes ``sizes`` of ``folder``'s sweep on ``task``, in
    how many the evidence (the lower last ``-log p(D)/N``) picks learned ``network`` (``"conv"``
    or ``"f-fc+conv"``) over the other of the two.

    Raises:
        ValueError: For another ``network``.
    """
    if network not in ("conv", "f-fc+conv"):
        raise ValueError(f"network={network!r}: conv or f-fc+conv")
    won = total = 0
    for n in sizes:
        conv, relaxed = (
            page_values.pick(folder, model, "marglik", dataset=task, subset=n)
            for model in ("conv", "f-fc+conv")
        )
        gaps = page_values.minus(conv, relaxed, "marglik_per_example")
        won += sum(gap < 0 if network == "conv" else gap > 0 for gap in gaps)
        total += len(gaps)
    return f"{won} of {total}"


def higher_layers(turned: pd.DataFrame, upright: pd.DataFrame, family: str) -> list[int]:
    """Per seed, in how many layers ``family`` (``"gconv.relative"``, ``"gconv.output"``) is
    higher in ``turned``'s run than in ``upright``'s (the runs of one seed paired).

    Raises:
        ValueError: If the two sets of runs are not of the same seeds.
    """
    if list(turned["seed"]) != list(upright["seed"]):
        raise ValueError(f"seeds differ: {list(turned['seed'])} and {list(upright['seed'])}")
    return [
        sum(
            t > u
            for t, u in zip(
                *(page_values.layers(runs.iloc[[i]], family) for runs in (turned, upright)),
                strict=True,
            )
        )
        for i in range(len(turned))
    ]


def higher_in_most(turned: pd.DataFrame, upright: pd.DataFrame, family: str) -> int:
    """In how many seeds :func:`higher_layers` finds ``family`` higher in most layers."""
    layers = len(page_values.layers(upright.iloc[[0]], family))
    return sum(n > layers / 2 for n in higher_layers(turned, upright, family))


def growth(
    turned: pd.DataFrame, upright: pd.DataFrame, path: str, which: str | None = None
) -> list[float]:
    """Per seed and layer (row by row, the layers ``which`` chooses), ``path``'s effective
    parameters (App. D) in ``turned``'s run over ``upright``'s (the runs of one seed paired)."""
    after = page_values.layers(turned, f"{path}.effective", which)
    before = page_values.layers(upright, f"{path}.effective", which)
    return [a / b for a, b in zip(after, before, strict=True)]


def grown(turned: pd.DataFrame, upright: pd.DataFrame) -> str:
    """``"N of the M"``: of every (path, seed, layer), how many have more effective parameters in
    ``turned``'s run than in ``upright``'s (:func:`growth` above 1)."""
    ratios = [r for path in ("fc", "conv", "gconv") for r in growth(turned, upright, path)]
    return f"{sum(r > 1 for r in ratios)} of the {len(ratios)}"


def conv_faster(turned: pd.DataFrame, upright: pd.DataFrame, which: str | None = None) -> list[int]:
    """Per seed, in how many of the layers ``which`` chooses CONV's :func:`growth` is above
    GCONV's: where turning the digits adds more to the CONV paths than to the GCONV paths."""
    conv, gconv = (growth(turned, upright, path, which) for path in ("conv", "gconv"))
    per_seed = len(conv) // len(turned)
    pairs = list(zip(conv, gconv, strict=True))
    return [
        sum(c > g for c, g in pairs[first : first + per_seed])
        for first in range(0, len(pairs), per_seed)
    ]


def precision_gradients(file: str, when: str, path: str = "fc") -> list[float]:
    """Over the seeds and layers of the :mod:`studies.factor_balance` measurement ``file``
    (``factor-balance/NAME``, no ``.json``), the evidence's gradients in the log precisions of
    ``path``'s tensors, ``when`` ``"before"`` (as trained) or ``"after"`` (factors balanced).

    Raises:
        ValueError: For another ``when``.
    """
    if when not in ("before", "after"):
        raise ValueError(f"when={when!r}: before or after")
    return [
        float(gradient)
        for run in runs_table.report(file)["runs"]
        for layer in run[when]["layers"].values()
        for gradient in layer[path]["log_precision_gradient"]
    ]


FOR_TEMPLATES = (
    "kept_by_evidence",
    "higher_layers",
    "higher_in_most",
    "evidence_picks",
    "growth",
    "grown",
    "conv_faster",
    "evidence_gap",
    "structure",
    "fit_trace",
    "older_versions",
    "precision_gradients",
)
"""The functions of this module that templates call."""


def _results(*folders: str) -> list[Path]:
    """The folders of the learned runs of relaxed models (those with a path choice to show)
    under ``folders``, in path order."""
    runs = runs_table.runs()
    runs = runs[runs["folder"].isin(folders)]
    runs = runs[runs["run"].map(learned_relaxed)]
    return [runs_table.RESULTS / run for run in runs["run"]]


def learned_relaxed(run: str) -> bool:
    """Whether the run folder's name is a learned run's of a relaxed model (a path choice)."""
    name = run.rsplit("/", 1)[-1]
    return "-marglik" in name and "+" in name


def structure(*folders: str) -> str:
    """The learned relaxed runs of ``folders`` beside the structure they learned (the
    application's structure table), and, where a data set has runs of both KFAC modes, reduce
    minus expand with the standard errors over the seeds."""
    runs = _results(*folders)
    text = summary.structure_markdown(runs)
    frame = runs_table.runs().set_index("run", drop=False)
    differences = kfac_differences(
        frame.loc[[str(r.relative_to(runs_table.RESULTS)) for r in runs]]
    )
    if differences:
        text += "\n\nReduce minus expand, per task:\n\n" + "\n".join(differences)
    return text


def kfac_differences(runs: pd.DataFrame) -> list[str]:
    """Per data set with runs of both KFAC modes, reduce's mean minus expand's in accuracy, NLL
    and evidence, with standard errors over the seeds."""
    lines = []
    for dataset, modes in runs.groupby("dataset", sort=False):
        if set(modes["kfac_approx"]) != {"expand", "reduce"}:
            continue
        expand, reduce = (modes[modes["kfac_approx"] == m] for m in ("expand", "reduce"))
        if min(len(expand), len(reduce)) < 2:
            lines.append(f"- {dataset}: one seed of a mode: no difference judged")
            continue
        terms = []
        for name, column, digits in (
            ("test accuracy", "test_acc", 1),
            ("test NLL", "test_nll", 3),
            ("-log marglik / N", "marglik_per_example", 2),
        ):
            x, y = reduce[column], expand[column]
            error = math.sqrt(x.var() / len(x) + y.var() / len(y))
            diff = x.mean() - y.mean()
            terms.append(f"{name} {diff:+.{digits}f} (standard error {error:.{digits}f})")
        lines.append(f"- {dataset}: " + "; ".join(terms))
    return lines


def fit_trace(
    folder: str,
    epochs: tuple[int, ...] = (10, 15, 20, 30, 40, 60, 80, 100, 125, 150),
    path: str = "fc",
    dataset: str | None = None,
) -> str:
    """Per layer, ``path``'s share of the output at each fit after ``epochs`` (where every
    learned relaxed run of ``folder`` has one), seed by seed, with ``-log marglik``.

    Raises:
        ValueError: If the folder's runs are of several data sets and ``dataset`` is None.
    """
    runs = runs_table.runs()
    runs = runs[(runs["folder"] == folder) & runs["run"].map(learned_relaxed)]
    if dataset is not None:
        runs = runs[runs["dataset"] == dataset]
    if runs["dataset"].nunique() > 1:
        raise ValueError(f"{folder} holds learned runs of several data sets: name one")
    if runs.empty:
        return "No run yet."
    fits = runs_table.fits()
    fits = fits[fits["run"].isin(runs["run"])]
    columns = sorted(
        (c for c in fits.columns if c.startswith(f"{path}.output.") and fits[c].notna().any()),
        key=lambda c: int(c.rsplit(".", 1)[1]),
    )
    rows = []
    for epoch in epochs:
        at = pd.concat(
            [fits[(fits["run"] == run) & (fits["epoch"] == epoch)] for run in runs["run"]]
        )
        if len(at) < len(runs):
            continue
        cells = {"after epoch": str(epoch)}
        cells |= {
            f"layer{c.rsplit('.', 1)[1]}": " / ".join(f"{v:.2f}" for v in at[c]) for c in columns
        }
        rows.append(cells | {"-log marglik": " / ".join(f"{v:.0f}" for v in at["neg_log_marglik"])})
    seeds = " / ".join(str(seed) for seed in runs["seed"])
    return f"Per seed ({seeds}):\n\n" + table(pd.DataFrame(rows))


def older_versions(*folders: str, learned_only: bool = False) -> str:
    """Paragraphs (each after a blank line) naming the runs of ``folders`` (``learned_only``: those
    of learned relaxed models only) made before a change of behaviour that affects them
    (:data:`CHANGES`), or ``""``."""
    frame = runs_table.runs()
    frame = frame[frame["folder"].isin(folders)]
    if learned_only:
        frame = frame[frame["run"].map(learned_relaxed)]
    release = frame["version"].map(lambda v: tuple(int(part) for part in v.split(".")))
    text = ""
    for since, affects, before in CHANGES:
        old = frame[frame["model"].map(affects) & (release < tuple(map(int, since.split("."))))]
        label = old["dataset"] + " " + old["model"] + " " + old["method"]
        named = sorted(set(label + " (" + old["version"] + ")"))
        if named:
            text += (
                f"\n\nMade before version {since}, when {before}: {', '.join(named)}. They "
                "record that version's behaviour, not the current code's."
            )
    return text
