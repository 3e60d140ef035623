"""The generated documentation pages: Jinja2 templates over pandas tables of the committed runs.

Each page in :data:`PAGES` is a template under ``pages/templates/``: plain Markdown whose
figures are ``{{ }}`` expressions over :func:`pages.runs_table.runs` (one row per
committed run) and the other committed JSON, and whose tables are pandas frames written by
``DataFrame.to_markdown`` (:func:`pages.page_values.table`). Measured figures are not
typed in a template: a figure names the runs it is computed from (``pick``), so when the runs
change the page changes with them, and a figure whose runs or value are gone stops the page
rendering (``pick`` and :func:`~pages.page_values.value` raise, and the environment's
``StrictUndefined`` raises on any name or column that is not there).

The pages are rendered ahead of time and committed as Markdown rather than built with the
manual: GitHub (where most readers meet them, and where a pull request's diff shows what new
runs changed) renders committed Markdown but runs no code, and the mkdocs build then needs
neither the runs nor pandas. ``python -m pages.results_tables --check`` (run by
``tests/pages/test_results_tables.py`` in ``make test``) renders every page again and
fails while a committed page differs, so a page cannot go stale silently.

The templates' helpers (``pick``, ``value``, ``experiments``, ``claim``, the filters ``pm``,
``span``, ``lead`` ...) are :mod:`pages.page_values`'s; the tables a page computes rather
than picks come from :mod:`pages.page_tables` (its ``FOR_TEMPLATES``),
:mod:`pages.data_size_page` (as ``size``) and :mod:`pages.speed_page` (as ``speed``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import jinja2

from laplace_equivariance.app import summary
from pages import data_size_page, page_tables, runs_table, speed_page
from pages.page_values import (
    DOCS,
    anchor,
    below,
    claim,
    counts,
    experiments,
    fit_changes,
    fits_of,
    headings,
    known,
    layer_means,
    layers,
    lead,
    minus,
    num,
    per_run,
    pick,
    pm,
    sci,
    seeds,
    select,
    span,
    split,
    table,
    tensors,
    value,
    within,
)
from studies import known_truth_tables, long_schedule, path_scale, relaxed_resnet_study

TEMPLATES = runs_table.ROOT / "pages" / "templates"
PAGES = (
    "data_size.md",
    "findings.md",
    "learned_structure.md",
    "models.md",
    "relaxed-resnet.md",
    "results-table1.md",
    "results-table2.md",
    "results-table3.md",
    "speed.md",
    "results.md",
)
"""The pages rendered from templates: ``docs/NAME`` from ``pages/templates/NAME``, in
the order they are written (the results index last: it lists the other pages' headings)."""


def environment() -> jinja2.Environment:
    """The templates' environment: missing names fail, blocks leave no blank lines."""
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(TEMPLATES),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
        autoescape=False,
    )
    env.filters |= {
        "pm": pm,
        "num": num,
        "span": span,
        "seeds": seeds,
        "counts": counts,
        "layers": layers,
        "per_run": per_run,
        "mean": lambda values: sum(values) / len(values),
        "anchor": anchor,
        "lead": lead,
        "below": below,
        "layer_means": layer_means,
        "sci": sci,
    }
    env.globals |= {name: getattr(page_tables, name) for name in page_tables.FOR_TEMPLATES}
    env.globals |= {"size": data_size_page, "speed": speed_page}
    env.globals |= {"known_truth_tables": known_truth_tables, "path_scale": path_scale}
    env.globals |= {"long_schedule": long_schedule, "resnet": relaxed_resnet_study}
    env.globals |= {"resnet_folder": runs_table.RESULTS / "relaxed-resnet"}
    env.globals |= {
        "pick": pick,
        "known": known,
        "value": value,
        "table": table,
        "minus": minus,
        "select": select,
        "runs": runs_table.runs,
        "experiments": experiments,
        "older_versions": page_tables.older_versions,
        "claim": claim,
        "within": within,
        "headings": headings,
        "same_speed": f"{summary.SAME_SPEED:g}",
        "split": split,
        "fits_of": fits_of,
        "fit_changes": fit_changes,
        "tensors": tensors,
        "shifts": runs_table.shift_errors,
    }
    return env


def render(name: str, **context: Any) -> str:
    """The page ``docs/NAME`` rendered from its template, with ``context`` (and the page's own
    tables, :data:`TABLES`)."""
    tables = page_tables.TABLES.get(name, lambda: {})()
    return environment().get_template(name).render(**tables, **context)


def documents() -> dict[Path, str]:
    """Every templated page's path and text."""
    return {DOCS / name: render(name) for name in PAGES}
