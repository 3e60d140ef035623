"""Measured figures in the docs' prose, rendered from the committed runs.

A sentence names its figure by what it measures, not by its value::

    "at {{acc table1-digit-4000-150ep-held f-fc+conv marglik}} % test"

becomes ``"at 93.8 ± 1.0 % test"``, computed from the ``results.json`` of the runs under
``benchmarks/results/table1-digit-4000-150ep-held`` whose model and method are those named.
A placeholder is ``{{KIND FOLDER MODEL METHOD [key=value ...]}}``; the keys filter the row
further (``dataset``, ``start``, ``kfac_approx``, ``burnin``, and any other setting; ``frozen=``
for the paths ``benchmarks.frozen_paths`` froze, ``conv,fc`` or ``none``), and the row they
pick must be unique. Kinds:

- ``acc``: test accuracy in %, mean ± std over seeds; ``acc_seeds``: per seed, ``a / b / c``;
  ``acc_range``: lowest-highest over the seeds, whole percents; ``run_minutes``: a run's
  training time (``train_seconds``) in minutes, lowest-highest over the seeds;
- ``nll``: test NLL, mean ± std; ``train_acc``: training accuracy in %, mean ± std;
- ``marglik_seeds``: the last ``-log marglik`` per seed, whole numbers;
  ``marglik_per_example``: ``-log marglik / N``, mean ± std;
- per seed as ``a, b and c``: ``paths_off`` (paths under 1 % of their layer's relative
  effective parameters), ``fc_off_first_six`` (of layers 1-6, those whose FC path is under 1 %
  of them), ``fc_output_off`` (layers whose FC path carries under 1 % of the output);
- over every seed and the layers chosen, as ``lo-hi`` (one value once): ``share_range`` (a
  path's relative effective parameters, App. D) and ``output_range`` (its share of its
  layer's output energy, in %); ``share_max`` and ``output_max``, the largest of them.
  Options, not filters: ``path=`` (default ``fc``), ``layers=7`` or ``layers=1-6`` (numbered
  from 1 over the relaxed layers; default all), ``digits=`` (decimals; default 2 for
  shares, 1 for outputs) and ``percent=yes`` (shares in %); ``effective_range``, the path's
  number of effective parameters (digits default 0), and ``effective_means``, their mean over
  the seeds per layer chosen, ``a / b / c``;
- over the fits that ``train`` records (a run's ``fits``, one per marginal-likelihood fit):
  ``fit_output_range`` and ``fit_output_max``, a path's output share in % at the fit after
  epoch ``epoch=E``, or at every fit from ``from=E`` on, over seeds and ``layers=``;
  ``fit_output_seeds``, the largest per seed, ``a / b / c`` (``digits=``, default 0).
  ``fit_output_changes``, how many (layer, seed) pairs' output share went ``change=up``,
  ``down`` or stayed ``level`` (within ``level=`` points, default 5) from the first fit to
  the last. Every range family takes ``seed=N`` to render that seed's run alone;
- ``output_seeds``: per seed ``a / b / c``, a path's largest output share in % over the
  layers chosen (``pick=least``: the smallest; ``digits=``, default 1);
- ``precision_range`` and ``norm_range``: ``lo-hi`` of the prior precisions (the squared
  norms) at every seed's last fit (``epoch=E``: the fit after epoch E) of the tensors whose
  names end in ``tensor=`` (default ``fc.input_map.weight``) in the layers chosen, written
  ``1e2-4e4``.

Measurements of trained runs made afterwards (``benchmarks/shift_errors.py``) are named by
their file under benchmarks/results, ``{{KIND FILE [key=value ...]}}`` with ``FILE`` without
``.json``: ``shift_range`` and ``shift_max`` over every run and the layers chosen, of the
layer's distance from equivariance to the quadrant shifts, or with ``path=fc`` (or ``conv``)
that path's (``of=share``: the path's output share instead, a fraction); ``layers=`` and
``digits=`` (default 2) as above; ``unchanged_range``: the predictions unchanged by the
diagonal shift, in %, over the runs (``digits=``, default 0). ``run=N`` takes the N-th run
alone (runs in seed order), ``percent=yes`` gives shares in %.

The runs of ``benchmarks/known_truth.py`` (``benchmarks/results/known-truth/SETTING``, for
the rotation tasks ``known-truth-rotation/SETTING``) are named
``{{KIND SETTING TASK [layers=A-B] [digits=N]}}``: ``known_acc``, test accuracy in %,
``known_shift`` and ``known_turn``, the test predictions unchanged by circular shifts or by
quarter turns in %, mean ± std over the seeds (digits default 1); ``known_fc_max`` and
``known_conv_max``, the largest FC or CONV share (relative effective parameters) over the
seeds and the layers chosen (default all; digits default 3).

``benchmarks/evidence_split.py``'s files are named ``{{KIND FILE [filters] [options]}}``
(filters: settings such as ``model=``, ``start=``, ``lr=``, and ``frozen=fc`` or ``none``; one
run a seed must remain): ``split_seeds``, per seed ``a / b / c`` nats of ``part=`` ``fc`` or
``conv`` (a path type's prior and Occam terms over ``layers=``), ``data``, ``head`` or
``total`` (the default); ``split_gamma_range``, a ``path=``'s effective parameters over the
seeds and ``layers=``, ``lo-hi``.

Two rows compare as ``{{acc_diff ROW vs ROW}}`` (each ``FOLDER MODEL METHOD [filters]``): the
first's mean test accuracy less the second's, in points with its sign; ``{{acc_span ROW ;
ROW ; ...}}``, the lowest and highest of several rows' mean test accuracies;
``{{acc_seed_diff ROW vs ROW}}`` and ``{{marglik_seed_diff ROW vs ROW}}``, per seed the first
row's test accuracy (points) or last ``-log marglik`` (nats) less the second's, ``lo to hi``.

Any other committed JSON under benchmarks/results (timings, tables of benchmark scripts) is
read by ``{{value FILE KEY/KEY/... [digits=N] [percent=yes]}}``: the number at that path,
where a step is a key, a list index, or ``field=value`` (the one element of a list whose
``field`` is ``value``), e.g. ``{{value fit_over_epoch-cpu rows/model=f-fc+conv/exact/
fit_over_epoch digits=1}}`` (without the line break).

So a figure is stated where it is measured: when runs change, the rendered page changes with
them (and the staleness test fails until it is regenerated), and a figure whose runs are gone
cannot be rendered at all.
"""

from __future__ import annotations

import re
from pathlib import Path

from benchmarks.generated_docs.figures.benchmark_files import MEASURED, OTHER_FILES, measured_figure
from benchmarks.generated_docs.figures.row_comparisons import COMPARISONS
from benchmarks.generated_docs.figures.run_rows import (
    KINDS,
    RANGE_OPTIONS,
    RANGES,
    named_row,
    seed_row,
)

BY_SPEC = OTHER_FILES | COMPARISONS
"""Kinds rendered from their placeholder's words alone (files, or several rows)."""

PLACEHOLDER = re.compile(r"\{\{(\w+)\s+([^{}]+)\}\}")


TABLE_MARKER = re.compile(r"^<!-- table: (\w+) -->$", re.M)
"""A line of a fragment that the generator fills with a computed table or sentence."""


def render_fragment(path: Path, **tables: str) -> str:
    """A Markdown fragment, its ``<!-- table: KEY -->`` lines replaced by ``tables[KEY]`` and its
    figures rendered.

    Raises:
        ValueError: For a table marker that ``tables`` does not fill, or a figure that cannot
            be rendered.
    """
    text = path.read_text()
    missing = sorted(set(TABLE_MARKER.findall(text)) - set(tables))
    if missing:
        raise ValueError(f"{path.name}: no content for its table markers {missing}.")
    return render(TABLE_MARKER.sub(lambda m: tables[m.group(1)], text))


def render(text: str) -> str:
    """``text`` with every placeholder replaced by its figure.

    Raises:
        ValueError: For an unknown kind, or a placeholder that picks no row or several.
    """

    def figure(match: re.Match) -> str:
        kind, spec = match.group(1), match.group(2)
        if kind in MEASURED:
            try:
                return measured_figure(kind, spec)
            except ValueError as error:
                raise ValueError(f"{match.group(0)}: {error}") from error
        if kind in BY_SPEC:
            try:
                return BY_SPEC[kind](spec)
            except ValueError as error:
                raise ValueError(f"{match.group(0)}: {error}") from error
        if kind in RANGES:
            words = spec.split()
            options = dict(w.split("=", 1) for w in words if w.split("=")[0] in RANGE_OPTIONS)
            rest = " ".join(w for w in words if w.split("=")[0] not in RANGE_OPTIONS)
            try:
                return RANGES[kind](seed_row(named_row(rest), options.get("seed")), options)
            except ValueError as error:
                raise ValueError(f"{match.group(0)}: {error}") from error
        if kind not in KINDS:
            kinds = sorted([*KINDS, *RANGES, *MEASURED, *BY_SPEC])
            raise ValueError(f"{match.group(0)}: unknown kind {kind!r}; kinds: {kinds}.")
        return KINDS[kind](named_row(spec))

    return PLACEHOLDER.sub(figure, text)
