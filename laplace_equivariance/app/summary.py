"""Tables of training runs, as mean ± standard deviation over seeds.

A run is the ``--out`` folder of ``laplace-equivariance train`` (its ``results.json``). Runs
that differ only in their seed form one row; every row says how many seeds it has, which
epoch was evaluated (the last, or the best marginal likelihood's), the budget, the device
and the thread count, so that no figure depends on an undisclosed choice. Standard
deviations are the sample standard deviation (``n - 1``) over seeds; a row of one seed shows
``± -``. ``laplace-equivariance report --markdown RUN ...`` prints such a table, and
``pages/results_tables.py`` writes ``docs/results.md`` and its pages from the committed runs.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from laplace_equivariance.app.config import (
    DEFAULTS,
    INVARIANT_WEIGHTS,
    MARGINAL_LIKELIHOOD_ONLY,
    SILENCED_STARTS,
    default_start,
)
from laplace_equivariance.app.runs import (
    NOT_RESULT_SETTINGS,
    config_of_record,
    load_run,
    migrated,
)

__all__ = [
    "Row",
    "compare",
    "experiment_key",
    "load_run",
    "markdown",
    "mean_std",
    "named_settings",
    "rows",
    "structure_markdown",
]

NOT_THE_EXPERIMENT = ("seed", "device", "data_dir", *NOT_RESULT_SETTINGS)
"""Settings that do not make runs different experiments: runs equal in every other setting
are seeds of one experiment (where they ran is shown per row, not grouped by)."""


def mean_std(values: list[float], scale: float = 1.0, digits: int = 1) -> str:
    """``"mean ± std"`` of ``values`` times ``scale`` (sample std; ``"± -"`` for one value)."""
    if not values:
        return "-"
    mean = statistics.fmean(values) * scale
    if len(values) < 2:
        return f"{mean:.{digits}f} ± -"
    return f"{mean:.{digits}f} ± {statistics.stdev(values) * scale:.{digits}f}"


def start_words(settings: dict[str, Any]) -> list[str]:
    """How a run's start is named in its row: ``["held start"]``, ``["mixed start"]`` or none.

    A silenced start (equivariant, held, held-gconv) is always named; the mixed start only where
    it is not :func:`~laplace_equivariance.app.config.default_start` (learned runs of relaxed
    models, whose default is the held start), so that a row started mixed is not read as one of
    the default.
    """
    config = config_of_record(settings)
    default = default_start(config)
    start = config.start or default  # None: train's default
    return [f"{start.value} start"] if start in SILENCED_STARTS or start != default else []


class Row:
    """The runs of one experiment (equal settings but the seed).

    Args:
        results: Their ``results.json`` contents.
    """

    def __init__(self, results: list[dict[str, Any]]) -> None:
        self.results = results
        self.settings = results[0]["settings"]
        self.named: list[str] = []
        """Settings that tell this row from another of the same label (:func:`named_settings`),
        which :meth:`method` names; set by the tables."""

    def _values(self, *path: str) -> list[float]:
        values = []
        for result in self.results:
            value: Any = result
            for key in path:
                value = value.get(key) if isinstance(value, dict) else None
            if value is not None:
                values.append(value)
        return values

    def accuracy(self, split: str = "test") -> list[float]:
        """Accuracies in percent, one per seed."""
        return [100 * a for a in self._values(split, "accuracy")]

    def nll(self, split: str = "test") -> list[float]:
        """Negative log-likelihoods per example, one per seed."""
        return self._values(split, "nll")

    def neg_log_marglik_per_example(self) -> list[float]:
        """The last marginal-likelihood step's ``-log p(D) / N``, one per learned seed.

        The invariant-weights network records its objective per example already (the negative
        ELBO, or output-layer log marginal likelihood, over ``N``): taken as recorded.
        """
        per_example = self.settings["model"] == INVARIANT_WEIGHTS
        return [
            r["neg_log_marglik"][-1] / (1 if per_example else r["n_train"])
            for r in self.results
            if r["neg_log_marglik"]
        ]

    def evidence_cell(self) -> str:
        """``-log p(D) / N`` as mean ± std; a tempered row's says so.

        At likelihood temperature ``T`` the fits maximise the evidence of the likelihood
        raised to ``1 / T``: its value is not comparable with an untempered row's, so the
        cell reads e.g. ``"1.21 ± 0.22 (at T = 2)"``. An invariant-weights run's ELBO is a
        bound on it (``"3.09 ± - (-ELBO / N)"``); its ``likelihood`` objective is no evidence
        (``"-"``).
        """
        if self.settings["model"] == INVARIANT_WEIGHTS:
            if self.settings["method"] == "likelihood":
                return "-"
            cell = mean_std(self.neg_log_marglik_per_example(), digits=2)
            return f"{cell} (-ELBO / N)" if self.settings["method"] == "elbo" else cell
        cell = mean_std(self.neg_log_marglik_per_example(), digits=2)
        temperature = migrated(self.settings)["temperature"]
        if temperature != 1.0 and self.settings["method"] == "marglik":
            return f"{cell} (at T = {temperature:g})"
        return cell

    def evaluated(self) -> str:
        """Which epoch the figures are of: ``"last (20)"`` or ``"best marglik (5, 10, 20)"``."""
        epochs = sorted({r.get("evaluated_epoch") for r in self.results}, key=str)
        if self.settings.get("restore_best"):
            return "best marglik (" + ", ".join(map(str, epochs)) + ")"
        if epochs == [None]:
            return "not recorded"
        return "last (" + ", ".join(map(str, epochs)) + ")"

    def budget(self) -> str:
        """Epochs, examples, width, the marginal likelihood's subset and first fit, another lr.

        The width is the relaxed networks' ``alpha``, the invariant-weights network's ``width``.
        """
        s = self.settings
        invariant = s["model"] == INVARIANT_WEIGHTS
        width = f"width {s['width']}" if invariant else f"alpha {s['alpha']}"
        parts = [f"{s['epochs']} ep", f"{self.results[0]['n_train']} ex", width]
        if s["method"] == "marglik":
            parts.append(f"marglik on {s.get('marglik_subset') or self.results[0]['n_train']}")
            parts.append(f"burn-in {s['burnin']} ep")
        if s.get("lr", DEFAULTS["lr"]) != DEFAULTS["lr"]:
            parts.append(f"lr {s['lr']:g}")
        return ", ".join(parts)

    def machine(self) -> str:
        """Device and threads, and the runs' speed where they recorded it.

        Every distinct device and thread count of the seeds (``"Xeon, 2 threads"``), then the
        median matrix-product speed of the runs that recorded one (``device_gflops``,
        :mod:`laplace_equivariance.app.device_speed`): ``"AMD EPYC, 1 thread, 31 GFLOP/s"``; when
        the fastest run's is over :data:`SAME_SPEED` times the slowest's, the range and "speeds
        differ": the runs had another machine, or the same one busy with other work, so their
        minutes do not compare.
        """
        machines = {f"{r['device']}, {_threads(r.get('threads', '?'))}" for r in self.results}
        text = "; ".join(sorted(machines))
        speeds = [r["device_gflops"] for r in self.results if "device_gflops" in r]
        if not speeds:
            return text
        slowest, fastest = min(speeds), max(speeds)
        if fastest <= SAME_SPEED * slowest:
            return f"{text}, {statistics.median(speeds):.0f} GFLOP/s"
        return f"{text}, {slowest:.0f}-{fastest:.0f} GFLOP/s: speeds differ"

    def path_shares(self, path: str = "fc") -> list[float]:
        """Per relaxed layer, ``path``'s relative effective parameters, mean over seeds.

        Returns:
            One value per layer (empty for runs without a symmetry report).
        """
        reports = [r["symmetry"]["layers"] for r in self.results if "symmetry" in r]
        if not reports:
            return []
        return [
            statistics.fmean(
                layers[i]["paths"].get(path, {}).get("relative", 0.0) for layers in reports
            )
            for i in range(len(reports[0]))
        ]

    def paths_off(self, threshold: float = 0.01) -> list[int]:
        """Per seed, how many paths of multi-path layers are switched off.

        A path is off when its relative effective parameters are under ``threshold``.
        """
        return [
            _count_off(
                [
                    {p: e["relative"] for p, e in row["paths"].items()}
                    for row in r["symmetry"]["layers"]
                ],
                threshold,
            )
            for r in self.results
            if "symmetry" in r
        ]

    def output_shares(self, path: str = "fc") -> list[float]:
        """Per relaxed layer, ``path``'s share of the layer's output energy, mean over seeds.

        The shares of :func:`~laplace_equivariance.path_output_shares`.

        Returns:
            One value per layer; empty unless every seed's run measured it.
        """
        measured = [r["path_outputs"] for r in self.results if "path_outputs" in r]
        if not measured or len(measured) < len(self.results):
            return []
        return [
            statistics.fmean(layers[i]["paths"].get(path, 0.0) for layers in measured)
            for i in range(len(measured[0]))
        ]

    def outputs_off(self, threshold: float = 0.01) -> list[int]:
        """Per seed, how many paths of multi-path layers carry under ``threshold`` of output.

        A path's share of its layer's output energy; empty unless every seed measured it.
        """
        measured = [r["path_outputs"] for r in self.results if "path_outputs" in r]
        if len(measured) < len(self.results):
            return []
        return [_count_off([row["paths"] for row in layers], threshold) for layers in measured]

    def variants(self) -> list[str]:
        """How the training differed from the defaults, in words.

        ``"balanced"`` (``balance_factors``, learned runs), the start (:func:`start_words`),
        ``"priors from 0.5"``
        (``prior_prec_init`` other than 1, learned runs), ``"temperature 2"`` (``temperature``
        other than 1, learned runs), ``"100 hyperparameter steps per fit"`` (``hypersteps``
        other than the default, learned runs) and ``"fc frozen"`` (paths kept silent by
        ``studies/frozen_paths.py``, recorded as ``frozen_paths``).
        """
        s = migrated(self.settings)
        named = ["balanced"] if s["balance_factors"] and s["method"] == "marglik" else []
        named += start_words(s)
        if s["method"] == "marglik" and s["prior_prec_init"] != 1.0:
            named.append(f"priors from {s['prior_prec_init']:g}")
        if s["method"] == "marglik" and s["temperature"] != 1.0:
            named.append(f"temperature {s['temperature']:g}")
        if s["method"] == "marglik" and s["hypersteps"] != DEFAULTS["hypersteps"]:
            steps = s["hypersteps"]
            named.append(f"{steps} hyperparameter step{'' if steps == 1 else 's'} per fit")
        return named + [f"{path} frozen" for path in self.results[0].get("frozen_paths", ())]

    def method(self) -> str:
        """``"MAP"`` or ``"learned"``, then the :meth:`variants` and :attr:`named` settings.

        E.g. ``"learned, balanced"``, ``"learned, batch size 64"``.
        """
        s = self.settings
        base = s["method"].upper() if s["method"] != "marglik" else "learned"
        return ", ".join([base, *self.variants(), *self.named])

    def cells(self) -> list[str]:
        """The markdown cells of this row."""
        s = self.settings
        seeds = sorted(r["settings"]["seed"] for r in self.results)
        minutes = [r["train_seconds"] / 60 for r in self.results]
        return [
            s["dataset"],
            s["model"],
            self.method(),
            ", ".join(map(str, seeds)),
            mean_std(self.accuracy("test")),
            mean_std(self.nll(), digits=2),
            mean_std(self.accuracy("train")),
            self.evidence_cell(),
            self.evaluated(),
            self.budget(),
            self.machine(),
            mean_std(minutes),
        ]


def _threads(count: Any) -> str:
    """``"1 thread"``, ``"2 threads"``."""
    return f"{count} thread{'' if count == 1 else 's'}"


def _setting_words(key: str, value: Any) -> str:
    """A setting as a row names it: ``"batch size 64"``, ``"stochastic on"``."""
    if isinstance(value, bool):
        shown = "on" if value else "off"
    elif isinstance(value, float):
        shown = f"{value:g}"
    else:
        shown = "default" if value is None else str(value)
    return f"{key.replace('_', ' ')} {shown}"


def named_settings(
    settings: Sequence[dict[str, Any]], labels: Sequence[Any], seed: bool = False
) -> list[list[str]]:
    """Per row, the settings that tell it from another row of the same label, in words.

    Rows are split by every setting of an experiment (:func:`experiment_key`), but a table's
    label shows only some (data, model, method, budget): two rows of one label would read as
    one experiment twice. Each row of a label that several rows share names every setting
    whose value differs between them (e.g. ``"prior structure path"``, ``"stochastic on"``).

    Args:
        settings: Each row's settings.
        labels: Each row's label as the table shows it (equal labels read alike).
        seed: Rows are runs, not experiments: their seed tells them apart too.

    Returns:
        The words for each row (empty where its label is its own).
    """
    keys = [
        dict(experiment_key(s)) | ({"seed": repr(s.get("seed"))} if seed else {}) for s in settings
    ]
    named: list[list[str]] = [[] for _ in settings]
    for label in set(labels):
        alike = [i for i, other in enumerate(labels) if other == label]
        differing = sorted(
            {k for i in alike for k in keys[i] if len({keys[j].get(k) for j in alike}) > 1}
        )
        for i in alike:
            full = migrated(settings[i])
            named[i] = [_setting_words(k, full.get(k)) for k in differing]
    return named


def check_named_once(runs: Sequence[Path]) -> None:
    """Refuse a run folder named twice (a table would show it twice, as two runs).

    Raises:
        ValueError: Naming the folder and its two names.
    """
    folders: dict[Path, Path] = {}
    for run in runs:
        folder = Path(run).resolve()
        if folder in folders:
            raise ValueError(
                f"{run} is named twice (also as {folders[folder]}): name each run once."
            )
        folders[folder] = Path(run)


SAME_SPEED = 1.5
"""Runs whose matrix-product speeds lie within this factor count as having run at one speed:
the timing of one idle machine moves by a few tens of percent from run to run."""


HEADER = (
    "| data | model | method | seeds | test acc % | test NLL | train acc % | -log marglik / N "
    "| evaluated epoch | budget | device | minutes |"
)


MARGLIK_ONLY = (*MARGINAL_LIKELIHOOD_ONLY, "burnin", "marglik_frequency", "hypersteps")
"""Settings that a MAP run (unit priors, no marginal-likelihood step) does not use: MAP runs
that differ only in these are seeds of one experiment (the fits' options, which the command
line refuses with ``--method map``, and the schedule's, which it accepts)."""


def experiment_key(settings: dict[str, Any]) -> tuple:
    """What makes runs one experiment: every setting but the NOT_THE_EXPERIMENT ones.

    MAP runs also ignore the settings in :data:`MARGLIK_ONLY`.

    Options missing from older runs count as the value they had (:func:`.runs.migrated`).
    """
    settings = migrated(settings)
    ignored = NOT_THE_EXPERIMENT + (MARGLIK_ONLY if settings.get("method") == "map" else ())
    return tuple(sorted((k, repr(v)) for k, v in settings.items() if k not in ignored))


def rows(runs: Sequence[Path]) -> list[Row]:
    """Group runs into experiments, in the order of their first run.

    Args:
        runs: ``--out`` folders of ``train`` runs.

    Returns:
        One :class:`Row` per distinct setting (all seeds of it).

    Raises:
        ValueError: If a folder is named twice, or two runs are one experiment with one seed
            (a mean and spread over copies of a run would claim seeds that did not run).
    """
    groups: dict[tuple, list[dict[str, Any]]] = {}
    seen: dict[tuple, Path] = {}
    check_named_once(runs)
    for run in runs:
        result = load_run(run)
        key = (*experiment_key(result["settings"]), *result.get("frozen_paths", ()))
        seed = (key, result["settings"].get("seed"))
        if seed in seen:
            raise ValueError(
                f"{run} and {seen[seed]} are the same experiment with the same seed "
                f"({seed[1]}): one of them is a copy or a rerun; report one of them."
            )
        seen[seed] = Path(run)
        groups.setdefault(key, []).append(result)
    return [Row(results) for results in groups.values()]


def markdown(runs: Sequence[Path]) -> str:
    """A markdown table of the runs, mean ± standard deviation over seeds.

    Args:
        runs: ``--out`` folders of ``train`` runs.

    Returns:
        The table, one row per experiment; rows of one label name the settings that split them
        (:func:`named_settings`).
    """
    experiments = rows(runs)
    labels = [
        (r.settings["dataset"], r.settings["model"], r.method(), r.budget()) for r in experiments
    ]
    named = named_settings([r.settings for r in experiments], labels)
    for row, words in zip(experiments, named, strict=True):
        row.named = words
    lines = [HEADER, "|" + "---|" * HEADER.count(" | ") + "---|"]
    lines += ["| " + " | ".join(row.cells()) + " |" for row in experiments]
    return "\n".join(lines)


def compare(runs: Sequence[Path], reference: Sequence[Path]) -> str:
    """Each run's test accuracy beside the reference runs' mean ± std of the same experiment.

    A run is "within the seed spread" when its accuracy lies within two standard deviations
    of the reference mean (about 95% of seeds, were they normal).

    Args:
        runs: ``--out`` folders of new runs (one seed each, say).
        reference: ``--out`` folders of committed runs (several seeds per experiment).

    Returns:
        A plain-text table, one line per run.
    """
    known = {experiment_key(row.settings): row for row in rows(reference)}
    lines = [f"{'run':44} {'acc %':>6}  {'committed mean ± std (seeds)':30} verdict"]
    for run in runs:
        result = load_run(run)
        accuracy = 100 * result["test"]["accuracy"]
        row = known.get(experiment_key(result["settings"]))
        if row is None or len(row.accuracy()) < 2:
            committed, verdict = "-", "no committed seeds to compare with"
        else:
            values = row.accuracy()
            mean, std = statistics.fmean(values), statistics.stdev(values)
            committed = f"{mean:.1f} ± {std:.1f} ({len(values)})"
            inside = abs(accuracy - mean) <= 2 * std
            verdict = "within the seed spread" if inside else "OUTSIDE the seed spread"
        lines.append(f"{Path(run).name:44} {accuracy:6.1f}  {committed:30} {verdict}")
    return "\n".join(lines)


def _count_off(layers: list[dict[str, float]], threshold: float) -> int:
    """How many paths of the multi-path layers have a share under ``threshold``."""
    return sum(share < threshold for paths in layers if len(paths) > 1 for share in paths.values())


STRUCTURE_HEADER = (
    "| data | model | KFAC | seeds | test acc % | test NLL | -log marglik / N "
    "| FC share per layer (mean over seeds) | paths off per seed "
    "| FC output share per layer (mean over seeds) | outputs off per seed |"
)


def structure_markdown(runs: Sequence[Path]) -> str:
    """The learned runs' accuracy beside the structure they learned, one row per experiment.

    The FC share of a layer is the FC path's relative effective number of parameters (App. D),
    averaged over seeds; a path is off when its share is under 1%. The FC output share is the
    FC path's share of the layer's output energy on training images
    (:func:`~laplace_equivariance.path_output_shares`; "-" where a seed did not measure it),
    and an output is off under 1% of its layer's.

    Args:
        runs: ``--out`` folders of learned (``marglik``) runs.

    Returns:
        The markdown table.
    """
    lines = [STRUCTURE_HEADER, "|" + "---|" * STRUCTURE_HEADER.count(" | ") + "---|"]
    experiments = rows(runs)
    labels = [
        (r.settings["dataset"], r.settings["model"], migrated(r.settings)["kfac_approx"])
        + tuple(r.variants())
        for r in experiments
    ]
    named = named_settings([r.settings for r in experiments], labels)
    for row, words in zip(experiments, named, strict=True):
        s = migrated(row.settings)
        seeds = sorted(r["settings"]["seed"] for r in row.results)
        shares = " ".join(f"{share:.2f}" for share in row.path_shares("fc")) or "-"
        cells = [
            s["dataset"],
            s["model"],
            ", ".join([s["kfac_approx"], *row.variants(), *words]),
            ", ".join(map(str, seeds)),
            mean_std(row.accuracy("test")),
            mean_std(row.nll(), digits=2),
            mean_std(row.neg_log_marglik_per_example(), digits=2),
            shares,
            ", ".join(map(str, row.paths_off())) or "-",
            " ".join(f"{share:.2f}" for share in row.output_shares("fc")) or "-",
            ", ".join(map(str, row.outputs_off())) or "-",
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)
