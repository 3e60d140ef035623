"""What the page templates compute their figures with: picks of runs, statistics, formats.

Runs: :func:`pick` the runs of one experiment (a frame of :func:`pages.runs_table.runs`),
:func:`fits_of` their fits, :func:`select`, :func:`known`, :func:`split`, :func:`value` (a
number in any committed JSON), :func:`tensors`, :func:`minus`, :func:`fit_changes`; results
pages: :func:`experiments` (the results table), :func:`judge`, :func:`claim`, :func:`lead` (the
verdicts that open a page), :func:`headings`; formats: :func:`pm` (mean ± std), :func:`span`,
:func:`num`, :func:`sci`, :func:`seeds`, :func:`counts`, :func:`layers`, :func:`per_run`,
:func:`layer_means`, :func:`below`, :func:`anchor`, and :func:`table` (a frame as Markdown).
:mod:`pages.render_pages` hands them to the templates; the modules that compute a page's
own tables use them too.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from typing import Any

import pandas as pd

from laplace_equivariance.app import summary
from studies import runs_table

DOCS = runs_table.ROOT / "docs"
"""Where the rendered pages are committed (:func:`headings` reads them)."""


def pm(values: Iterable[float], digits: int = 1, scale: float = 1.0) -> str:
    """``"mean ± std"`` over the seeds (sample std; ``"± -"`` for one value).

    Raises:
        ValueError: For no value at all (a figure of no run).
    """
    series = pd.Series(list(values), dtype=float).dropna() * scale
    if series.empty:
        raise ValueError("mean ± std of no value")
    if len(series) < 2:
        return f"{series.mean():.{digits}f} ± -"
    return f"{series.mean():.{digits}f} ± {series.std():.{digits}f}"


def num(value: float, digits: int = 1, signed: bool = False) -> str:
    """``value`` at ``digits`` decimals, thousands separated; ``signed``: ``+1.4`` or ``−1.4``."""
    if signed:
        return f"{value:+,.{digits}f}".replace("-", "\u2212")
    return f"{value:,.{digits}f}"


def span(values: Iterable[float], digits: int = 1, signed: bool = False) -> str:
    """``"lo-hi"`` (``signed``: ``"lo to hi"``), one value where both round alike."""
    values = list(values)
    if not values:
        raise ValueError("the span of no value")
    low, high = num(min(values), digits, signed), num(max(values), digits, signed)
    return low if low == high else f"{low}{' to ' if signed else '-'}{high}"


def seeds(values: Iterable[float], digits: int = 1, scale: float = 1.0) -> str:
    """Per seed, ``"a / b / c"`` (times ``scale``)."""
    return " / ".join(num(scale * v, digits) for v in values)


def counts(values: Iterable[Any]) -> str:
    """Per seed, ``"a, b and c"``."""
    words = [str(v) for v in values]
    return ", ".join(words[:-1]) + " and " + words[-1] if len(words) > 1 else "".join(words)


def layers(
    frame: pd.DataFrame,
    family: str,
    which: str | None = None,
    scale: float = 1.0,
    skip: bool = False,
) -> list[float]:
    """The values of ``family`` (``"fc.relative"``, ``"conv.output"``, ...) times ``scale``
    over every row of ``frame`` and the layers ``which`` chooses (``"7"``, ``"1-6"``; None:
    all), row by row; ``skip``: leave out missing values rather than fail.

    Raises:
        ValueError: If a chosen layer has no such column, or a row lacks its value.
    """
    numbers = sorted(
        int(c.rsplit(".", 1)[1]) for c in frame.columns if c.rsplit(".", 1)[0] == family
    )
    numbers = [n for n in numbers if frame[f"{family}.{n}"].notna().any()]
    if which is not None:
        first, _, last = which.partition("-")
        wanted = range(int(first), int(last or first) + 1)
        if not set(wanted) <= set(numbers):
            raise ValueError(f"{family}: layers {which} not among {numbers}")
        numbers = list(wanted)
    columns = [f"{family}.{n}" for n in numbers]
    values = frame[columns].to_numpy().ravel()
    if not columns or (pd.isna(values).any() and not skip) or pd.isna(values).all():
        raise ValueError(f"{family} of layers {which}: missing in some run")
    return [scale * float(v) for v in values if not pd.isna(v)]


def per_run(
    frame: pd.DataFrame, family: str, which: str | None = None, how: str = "sum"
) -> list[float]:
    """Per seed of ``frame`` (in its order), the ``how`` (``"sum"``, ``"max"``, ``"min"``) of
    ``family`` over its rows (a run, or a run's fits) and the layers ``which`` chooses; a layer
    without the column counts for none.

    Raises:
        ValueError: If no chosen layer has the column.
    """
    columns = [c for c in frame.columns if c.rsplit(".", 1)[0] == family]
    if which is not None:
        first, _, last = which.partition("-")
        wanted = range(int(first), int(last or first) + 1)
        columns = [c for c in columns if int(c.rsplit(".", 1)[1]) in wanted]
    if not columns:
        raise ValueError(f"{family} of layers {which}: no such column")
    per_seed = frame.groupby("seed", sort=False)[columns].agg(how)
    return [float(v) for v in getattr(per_seed, how)(axis=1)]


def below(
    frame: pd.DataFrame, family: str, which: str | None = None, under: float = 0.01
) -> list[int]:
    """Per row of ``frame``, how many values of ``family`` in the layers ``which`` chooses are
    under ``under`` (a path off); a family without a path (``"relative"``, ``"output"``) counts
    every path of the layers that have several.
    """
    numbers = sorted({int(c.rsplit(".", 1)[1]) for c in frame.columns if c.count(".") == 2})
    if which is not None:
        first, _, last = which.partition("-")
        numbers = [n for n in numbers if int(first) <= n <= int(last or first)]
    result = []
    for _, row in frame.iterrows():
        count = 0
        for n in numbers:
            if "." in family:
                values = [row.get(f"{family}.{n}")]
            else:
                values = [row[c] for c in frame.columns if c.endswith(f".{family}.{n}")]
                values = [v for v in values if pd.notna(v)]
                values = values if len(values) > 1 else []
            count += sum(bool(pd.notna(v) and v < under) for v in values)
        result.append(count)
    return result


def fits_of(runs: pd.DataFrame, epoch: int | None = None, since: int | None = None) -> pd.DataFrame:
    """The fits that ``runs`` recorded (:func:`pages.runs_table.fits`), run by run: the
    fit after epoch ``epoch``, or every fit from epoch ``since`` on.

    Raises:
        ValueError: If the runs recorded no such fit.
    """
    every = runs_table.fits()
    found = pd.concat([every[every["run"] == run] for run in runs["run"]])
    if epoch is not None:
        found = found[found["epoch"] == epoch]
    if since is not None:
        found = found[found["epoch"] >= since]
    if found.empty:
        raise ValueError(f"no fit at epoch={epoch} since={since}")
    return found


def fit_changes(
    runs: pd.DataFrame,
    change: str,
    family: str = "fc.output",
    which: str | None = None,
    level: float = 5.0,
) -> int:
    """How many (layer, seed) pairs' ``family`` (a share, in points) went ``change`` (``"up"``,
    ``"down"``, or stayed ``"level"`` within ``level`` points) from a run's first fit to its
    last.

    Raises:
        ValueError: For another ``change``.
    """
    if change not in ("up", "down", "level"):
        raise ValueError(f"change={change!r}: up, down or level")
    count = 0
    for run in runs["run"]:
        fits = fits_of(runs[runs["run"] == run])
        first, last = (layers(fits.iloc[[i]], family, which, 100) for i in (0, -1))
        for before, after in zip(first, last, strict=True):
            delta = after - before
            kind = "level" if abs(delta) < level else "up" if delta > 0 else "down"
            count += kind == change
    return count


def layer_means(frame: pd.DataFrame, family: str, which: str | None = None) -> list[float]:
    """Per layer that ``which`` chooses, the mean of ``family`` over the rows (the seeds)."""
    per_layer = pd.DataFrame([layers(frame[i : i + 1], family, which) for i in range(len(frame))])
    return list(per_layer.mean())


def tensors(
    runs: pd.DataFrame, kind: str, suffix: str, epoch: int | None = None, which: str = "1-99"
) -> list[float]:
    """The ``kind`` (``"precision"``, ``"norm"``) at each run's fit after epoch ``epoch`` (None:
    its last) of the tensors whose names end in ``suffix``, in the layers ``which`` chooses.

    Raises:
        ValueError: If no run recorded such a tensor at that fit.
    """
    first, _, last = which.partition("-")
    chosen = range(int(first), int(last or first) + 1)
    values = []
    for run in runs["run"]:
        fits = fits_of(runs[runs["run"] == run], epoch)
        fit = fits.iloc[-1]
        for column, value in fit.items():
            name = str(column).removeprefix(f"{kind}:")
            if name != column and name.endswith(suffix) and pd.notna(value):
                if int(name.split(".")[0].removeprefix("layer")) in chosen:
                    values.append(float(value))
    if not values:
        raise ValueError(f"no {kind} of a tensor ending in {suffix!r} at epoch {epoch}")
    return values


def sci(values: Iterable[float]) -> str:
    """``"lo-hi"`` written ``1e2-4e4``, ``164``, ``6.5`` (:func:`scientific`), one where equal."""
    values = list(values)
    low, high = scientific(min(values)), scientific(max(values))
    return low if low == high else f"{low}-{high}"


def scientific(value: float) -> str:
    """``2.8e5``, ``164``, ``6.5``, ``5e-5``: two significant digits below 100 (whole numbers
    from 100), with an exponent outside ``[0.01, 1e4)``."""
    if 100 <= value < 1e4:
        return f"{value:,.0f}"
    if 0.01 <= value < 100:
        return f"{value:.2g}"
    mantissa, exponent = f"{value:.1e}".split("e")
    return f"{mantissa.rstrip('0').rstrip('.')}e{int(exponent)}"


def split(name: str, **filters: Any) -> pd.DataFrame:
    """The runs of evidence split ``benchmarks/results/NAME.json`` that ``filters`` pick, one a
    seed, in seed order (:func:`pages.runs_table.evidence_split`).

    Raises:
        ValueError: Unless the filters leave exactly one run per seed.
    """
    found = select(runs_table.evidence_split(name), **filters).sort_values("seed")
    if found.empty or found["seed"].duplicated().any():
        raise ValueError(f"split({name!r}, {filters}): {len(found)} runs, not one a seed")
    return found


def select(frame: pd.DataFrame, **filters: Any) -> pd.DataFrame:
    """The rows of ``frame`` whose columns equal ``filters`` (compared as text)."""
    unknown = sorted(set(filters) - set(frame.columns))
    if unknown:
        raise ValueError(f"no column {unknown}")
    keep = pd.Series(True, index=frame.index)
    for key, wanted in filters.items():
        keep &= frame[key].map(str) == str(wanted)
    return frame[keep]


def pick(folder: str, model: str, method: str, seeds: str | None = None, **filters: Any):
    """The runs of the one experiment of ``benchmarks/results/FOLDER`` with this model, method
    and settings, in seed order (``seeds="0,1"`` keeps those seeds).

    Raises:
        ValueError: If the filters pick no experiment or several, or a seed is missing.
    """
    found = select(runs_table.runs(), folder=folder, model=model, method=method, **filters)
    if found["experiment"].nunique() != 1:
        raise ValueError(
            f"pick({folder!r}, {model!r}, {method!r}, {filters}) picks "
            f"{found['experiment'].nunique()} experiments, not one: add filters (dataset=, ...)"
        )
    found = found.sort_values("seed")
    if seeds is not None:
        kept = [int(s) for s in str(seeds).split(",")]
        if not set(kept) <= set(found["seed"]):
            raise ValueError(f"pick({folder!r}, ...): no run of seeds {kept}")
        found = found.set_index("seed", drop=False).loc[kept]
    return found


def minus(first: pd.DataFrame, second: pd.DataFrame, column: str = "test_acc") -> list[float]:
    """Per seed, ``first``'s ``column`` less ``second``'s.

    Raises:
        ValueError: If the two experiments' seeds differ.
    """
    if list(first["seed"]) != list(second["seed"]):
        raise ValueError(f"seeds differ: {list(first['seed'])} and {list(second['seed'])}")
    return list(first[column].to_numpy() - second[column].to_numpy())


def known(setting: str, task: str) -> pd.DataFrame:
    """The seeds of a known-truth run (``studies/results/known-truth*/SETTING/TASK-seed*``).

    Raises:
        ValueError: If there is none.
    """
    found = select(runs_table.known_truth(), setting=setting, task=task)
    if found.empty:
        raise ValueError(f"no known-truth run {setting}/{task}")
    return found


def value(name: str, path: str) -> float:
    """The number at ``path`` of ``benchmarks/results/NAME.json``: ``/``-separated steps, each a
    key, a list index, or ``field=value`` (the one element of a list whose ``field`` is that).

    Raises:
        ValueError: If a step names nothing (or several elements), or the value is no number.
    """
    node = runs_table.report(name)
    for step in path.split("/"):
        if isinstance(node, list) and "=" in step:
            field, wanted = step.split("=", 1)
            found = [item for item in node if str(item.get(field)) == wanted]
            if len(found) != 1:
                raise ValueError(f"{name} {path}: {step!r} picks {len(found)} elements")
            node = found[0]
        elif isinstance(node, list) and step.isdigit() and int(step) < len(node):
            node = node[int(step)]
        elif isinstance(node, dict) and step in node:
            node = node[step]
        else:
            raise ValueError(f"{name} {path}: no {step!r} there")
    if isinstance(node, bool) or not isinstance(node, (int, float)) or math.isnan(node):
        raise ValueError(f"{name} {path} is {node!r}, not a number")
    return node


EXPERIMENT_COLUMNS = (
    "data model method seeds|test acc %|test NLL|train acc %|-log marglik / N|evaluated epoch|"
    "budget|device|minutes"
)


def _cell(values: pd.Series, digits: int = 1) -> str:
    """:func:`pm` of a table cell: ``"-"`` where no run measured it."""
    return pm(values, digits) if values.notna().any() else "-"


def experiments(*folders: str, **filters: Any) -> pd.DataFrame:
    """The runs of ``folders`` as the results table: one row per experiment (in the order of
    its first run), the mean ± std over its seeds; the method, budget, device and evidence cells
    as the application's summary writes them (:class:`~laplace_equivariance.app.summary.Row`),
    rows of one label naming the settings that split them. ``filters`` keep the runs whose
    column equals the value, or one of the values of a list (compared as text).

    Raises:
        ValueError: If two runs are one experiment with one seed (a copy), or there is no run.
    """
    frame = runs_table.runs()
    frame = frame[frame["folder"].isin(folders)]  # in path order, as runs() reads them
    for key, wanted in filters.items():
        values = [str(v) for v in (wanted if isinstance(wanted, list) else [wanted])]
        frame = frame[frame[key].map(str).isin(values)]
    if frame.empty or frame.duplicated(["experiment", "seed"]).any():
        raise ValueError(f"{folders}: no run, or two runs of one experiment and seed")
    groups = [group for _, group in frame.groupby("experiment", sort=False)]
    rows = [
        summary.Row([summary.load_run(runs_table.RESULTS / r) for r in g["run"]]) for g in groups
    ]
    labels = [(r.settings["dataset"], r.settings["model"], r.method(), r.budget()) for r in rows]
    for row, words in zip(
        rows, summary.named_settings([r.settings for r in rows], labels), strict=True
    ):
        row.named = words
    cells = [
        [g["dataset"].iloc[0], g["model"].iloc[0], row.method()]
        + [", ".join(map(str, sorted(g["seed"]))), _cell(g["test_acc"]), _cell(g["test_nll"], 2)]
        + [_cell(g["train_acc"]), row.evidence_cell(), row.evaluated(), row.budget()]
        + [row.machine(), _cell(g["train_seconds"] / 60)]
        for g, row in zip(groups, rows, strict=True)
    ]
    columns = EXPERIMENT_COLUMNS.split("|")
    return pd.DataFrame(cells, columns=[*columns[0].split(), *columns[1:]])


def anchor(title: str) -> str:
    """The link anchor of a Markdown heading: lower case, punctuation dropped, spaces turned
    into hyphens (GitHub's rule, and MkDocs' for headings without runs of separators)."""
    return "".join(c for c in title.lower() if c.isalnum() or c in " -_").replace(" ", "-")


VERDICT = re.compile(
    r"^- .*?: (\*\*not reproduced: reversed\*\*|reproduced|consistent|not distinguishable|holds|"
    r"fails|one seed: no verdict)(?: \(|$)"
)
"""A verdict line of a results page: a claim judged by the seed spread, or a target's."""

LEAD = {
    "reproduced": "reproduced",
    "holds": "holds",
    "consistent": "consistent",
    "not distinguishable": "not distinguishable",
    "**not reproduced: reversed**": "**reversed**",
    "fails": "**fails**",
    "one seed: no verdict": "one seed",
}
"""Each verdict as the lead counts it, in the lead's order."""


def lead(body: str) -> str:
    """The list that leads a results page: per section of ``body`` with verdict lines, a line
    linking it and counting its verdicts by kind."""
    sections: dict[str, list[str]] = {}
    for line in body.splitlines():
        if line.startswith("## "):
            sections[line[3:]] = []
        elif sections and (match := VERDICT.match(line)):
            list(sections.values())[-1].append(match.group(1))
    lines = []
    for title, found in sections.items():
        said = [f"{found.count(kind)} {word}" for kind, word in LEAD.items() if kind in found]
        if said:
            lines.append(f"- [{title}](#{anchor(title)}): {', '.join(said)}")
    return "\n".join(lines)


def headings(name: str) -> tuple[str, list[str]]:
    """The title (``# ``) and section headings (``## ``) of the committed page ``docs/NAME``
    (rendered before the pages that link to them, :data:`PAGES`)."""
    lines = (DOCS / name).read_text().splitlines()
    return lines[0].removeprefix("# "), [h[3:] for h in lines if h.startswith("## ")]
