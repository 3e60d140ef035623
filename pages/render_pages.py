"""The generated documentation pages: Jinja2 templates over pandas tables of the committed runs.

Each page in :data:`PAGES` is a template under ``pages/templates/``: plain Markdown whose
figures are ``{{ }}`` expressions over :func:`studies.runs_table.runs` (one row per
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

The templates' helpers (``pick``, ``value``, ``experiments``, the filters ``pm``, ``span``,
``lead`` ...) are :mod:`pages.page_values`' and :mod:`pages.page_tables`' (its
``FOR_TEMPLATES``); the verdicts (``claim``, ``within``) are :mod:`studies.verdicts`'. A study's
own tables and sections come from the study's side: :mod:`studies.data_size_tables` (as
``size``), :mod:`studies.measured_tables`, :mod:`studies.parameter_counts`, the Table 3 sections
(:mod:`studies.rotation_section`, :mod:`studies.group_evidence_section`,
:mod:`studies.invariant_weights_section`), and the speed benchmarks' tables,
:mod:`benchmarks.speed_tables` (as ``speed``). So the renderer knows how to write a page, and
each study how to read its results.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import jinja2

from benchmarks import speed_tables
from benchmarks.markdown_table import table
from laplace_equivariance.app import summary
from pages import page_tables
from pages.page_values import (
    DOCS,
    anchor,
    below,
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
    tensors,
    value,
)
from studies import (
    data_size_tables,
    known_truth,
    known_truth_tables,
    long_schedule,
    measured_tables,
    parameter_counts,
    path_scale,
    relaxed_resnet_study,
    runs_table,
)
from studies.group_evidence_section import group_evidence
from studies.invariant_weights_section import invariant_weights
from studies.rotation_section import rotation_split
from studies.verdicts import claim, within

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
    env.globals |= {
        "shift_errors_section": measured_tables.shift_errors_section,
        "factor_balance_section": measured_tables.factor_balance_section,
        "exact_blocks_section": measured_tables.exact_blocks_section,
        "overstated": measured_tables.overstated,
        "conv_over_fc": measured_tables.conv_over_fc,
        "evidence_split_section": measured_tables.evidence_split_section,
        "rotation_split": rotation_split,
        "group_evidence": group_evidence,
        "invariant_weights": invariant_weights,
    }
    env.globals |= {"size": data_size_tables, "speed": speed_tables}
    env.globals |= {"parameter_counts": parameter_counts}
    env.globals |= {"known_truth": known_truth, "known_truth_tables": known_truth_tables}
    env.globals |= {"path_scale": path_scale}
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
    """The page ``docs/NAME`` rendered from its template, with ``context``."""
    return environment().get_template(name).render(**context)


def documents() -> dict[Path, str]:
    """Every templated page's path and text."""
    return {DOCS / name: render(name) for name in PAGES}
