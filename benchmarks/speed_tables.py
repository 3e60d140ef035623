"""The computed parts of docs/speed.md: each timing benchmark's JSON files as a table, below the
command and machine that made them; its template, ``pages/templates/speed.md``, calls them
(as ``speed.NAME``) after each section's paragraph.
"""

from __future__ import annotations

import json
import statistics
from types import SimpleNamespace

import pandas as pd

from benchmarks.markdown_table import rows_table
from benchmarks.report import RESULTS


def load_json(name: str) -> dict:
    """A timing report under benchmarks/results/."""
    return json.loads((RESULTS / name).read_text())


def reports_in(folder: str) -> list[dict]:
    """Every timing report under benchmarks/results/FOLDER/, in file-name order."""
    return [json.loads(p.read_text()) for p in sorted((RESULTS / folder).glob("*.json"))]


def formatted(records: list[dict], columns: dict[str, str]) -> str:
    """``records`` (a report's rows) as a table (``pandas.json_normalize``: a nested field's
    name joined by ``__``, a dot in a name read as ``_``): per column, its header and the format
    string filled from each row (``"{exact__fit_s:.2f} s"``)."""
    frame = pd.json_normalize(records, sep="__").rename(columns=lambda c: c.replace(".", "_"))
    rows = [[f.format_map(row) for f in columns.values()] for row in frame.to_dict("records")]
    return rows_table([h.strip() for h in columns], rows)


def machine(report: dict) -> str:
    """A timing report's device, threads and torch version."""
    environment = report.get("environment", report)
    threads = environment.get("cpu_threads", environment.get("threads"))
    return f"{environment['device']}, {threads} threads, torch {environment['torch']}"


def met(value: float, target: float) -> str:
    """``"yes"`` where ``value`` is at most ``target``, else a bold ``"no"``."""
    return "yes" if value <= target else "**no**"


def speed_section(reports: list[dict], table: str) -> str:
    """The reports' commands and machines, then ``table``."""
    runs = [
        f"`{report.get('environment', report)['command']}` ({machine(report)})"
        for report in reports
    ]
    return "\n".join(["; ".join(runs), "", table])


def _count(n: int, noun: str) -> str:
    """``n`` and ``noun``, plural unless one: ``"1 fit"``, ``"3 fits"``."""
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def before_after_section(name: str = "fit_over_epoch-before-after") -> SimpleNamespace:
    """The fits before and after a change, from alternating runs in one session (the
    ``before-*.json`` and ``after-*.json`` of ``benchmarks/results/NAME``): ``runs`` (the
    sentence the paragraph ends with) and ``text``."""
    folder = RESULTS / name
    runs = sorted(
        folder.glob("*.json"), key=lambda p: (p.stem.split("-")[1], not p.stem.startswith("before"))
    )
    reports = [(p.stem, json.loads(p.read_text())) for p in runs]
    before = next(r["package_commit"] for name, r in reports if name.startswith("before"))
    first = reports[0][1]
    models = " ".join(dict.fromkeys(row["model"] for _, r in reports for row in r["rows"]))

    def median(side: str, kind: str) -> str:
        """Each model's median ``kind`` fit over the reports of ``side`` (before or after)."""
        fits = {
            model: [
                row[kind]["fit_s"]
                for name, r in reports
                if name.startswith(side)
                for row in r["rows"]
                if row["model"] == model
            ]
            for model in models.split()
        }
        return " / ".join(f"{m} {statistics.median(v):.2f} s" for m, v in fits.items())

    sentence = (
        f"{len(reports)} runs with {_count(first['repeats'], 'fit')} after the warm-up, the "
        f"older package at commit {before}; medians over the runs, before and after: exact GGN "
        f"fit {median('before', 'exact')} and {median('after', 'exact')}; Monte-Carlo fit "
        f"{median('before', 'mc')} and {median('after', 'mc')}."
    )
    return SimpleNamespace(
        runs=sentence,
        text=speed_section(
            [first],
            table=rows_table(
                ["run", "code", "model", "epoch", "exact GGN fit", "MC Fisher fit", "eigenvalues"],
                [
                    [
                        name,
                        r["package_commit"],
                        row["model"],
                        f"{row['epoch_s']:.2f} s",
                        f"{row['exact']['fit_s']:.2f} s, {row['exact']['fit_over_epoch']:.1f}x",
                        f"{row['mc']['fit_s']:.2f} s, {row['mc']['fit_over_epoch']:.1f}x",
                        f"{row['exact']['eigenvalues_s']:.2f} s",
                    ]
                    for name, r in reports
                    for row in r["rows"]
                ],
            ),
        ),
    )


def predictive_section() -> str:
    """The GLM predictive's seconds and peak memory (``benchmarks.predictive_memory``)."""
    names = (
        "predictive_memory-cpu-128",
        "predictive_memory-cpu",
        "predictive_memory-cpu-limit-1GiB",
    )
    reports = [load_json(f"{name}.json") for name in names]
    for r in reports:
        r["memory_limit_gib"] = r["memory_limit"] / 2**30
    columns = {"images": "{images}", "memory_limit": "{memory_limit_gib:.0f} GiB"}
    columns |= {"examples a chunk": "{examples_per_chunk}", "call": "{seconds:.1f} s"}
    columns |= {
        "per image": "{seconds_per_image:.2f} s",
        "peak resident": "{peak_resident_gib:.1f} GiB",
    }
    return speed_section(reports, formatted(reports, columns))


def marglik_section() -> str:
    """The marginal-likelihood training against MAP, per fit batch size."""
    names = ("marglik_speed-cpu", "marglik_speed-cpu-marglik-batch-256")
    reports = [load_json(f"{name}.json") for name in names]
    for r in reports:
        r["exact_met"], r["mc_met"] = met(r["exact_over_map"], 2.2), met(r["mc_over_map"], 1.5)
    columns = {"fit batch": "{arguments__marglik_batch_size}", "MAP": "{map_s:.1f} s"}
    columns |= {"exact GGN": "{exact_ggn_s:.1f} s, {exact_over_map:.2f}x", "<= 2.2x": "{exact_met}"}
    columns |= {
        "Monte-Carlo Fisher": "{mc_fisher_s:.1f} s, {mc_over_map:.2f}x",
        "<= 1.5x": "{mc_met}",
    }
    return speed_section(reports, formatted(reports, columns))


def kfac_section() -> str:
    """EquivariantKFAC's fit against AsdlGGN's, and F-FC+CONV's block-diagonal decomposition."""
    r = load_json("kfac_speed-cpu.json")
    conv, decomposition = r["conv"], r["f-fc+conv"]["decomposition"]
    return speed_section(
        [r],
        rows_table(
            ["measurement", "value", "target", "met"],
            [
                [
                    "CONV: fit, EquivariantKFAC / AsdlGGN",
                    f"{conv['ratio_to_asdl_ggn']:.2f}x",
                    "<= 1.1x",
                    met(conv["ratio_to_asdl_ggn"], 1.1),
                ],
                [
                    "F-FC+CONV: eigenvalues and eigenvectors, dense / block-diagonal",
                    f"{decomposition['speed_up']:.0f}x faster "
                    f"({decomposition['dense']['seconds']:.1f} s / "
                    f"{decomposition['block_diagonal']['seconds']:.2f} s)",
                    ">= 10x",
                    met(10, decomposition["speed_up"]),
                ],
                [
                    "F-FC+CONV: factors and eigenvectors, dense / block-diagonal",
                    f"{decomposition['memory_ratio']:.0f}x smaller",
                    ">= 10x",
                    met(10, decomposition["memory_ratio"]),
                ],
            ],
        ),
    )


def fit_over_epoch_section() -> str:
    """Each fit against a MAP epoch, with its floor and its parts."""
    r = load_json("fit_over_epoch-cpu.json")
    for row in r["rows"]:
        for kind in ("exact", "mc"):
            row[kind]["met"] = met(row[kind]["fit_over_epoch"], r["targets"][kind])
    fit = "{%s__fit_s:.2f} s, {%s__fit_over_epoch:.1f}x"
    floor = "{%s__floor_s:.2f} s, {%s__floor_over_epoch:.1f}x"
    columns = {"model": "{model}", "N": "{n}", "epoch": "{epoch_s:.2f} s"}
    columns |= {"exact GGN fit": fit % ("exact", "exact"), "<= 5x": "{exact__met}"}
    columns |= {"its floor": floor % ("exact", "exact"), "MC Fisher fit": fit % ("mc", "mc")}
    columns |= {"<= 2x": "{mc__met}", "its floor ": floor % ("mc", "mc")}
    columns |= {"eigenvalues (in the fit)": "{exact__eigenvalues_s:.2f} s"}
    columns |= {"eigenvectors (later)": "{exact__eigenvectors_s:.2f} s"}
    return speed_section([r], formatted(r["rows"], columns))


def fit_parts(report: dict | None = None) -> pd.DataFrame:
    """Per model and curvature, where a fit's time goes, each part over an epoch.

    Columns: ``model``, ``n``, ``curvature`` (``exact``, ``mc``), ``fit``; ``passes``,
    ``statistics``, ``eigenvalues`` and ``rest``, measured within the fit; ``floor`` (its
    passes without the hooks, measured apart); ``without_rest`` (floor, statistics and
    eigenvalues: the fit with no other work) and ``target`` (the report's), from ``report``
    (by default ``fit_over_epoch-cpu.json``).
    """
    r = load_json("fit_over_epoch-cpu.json") if report is None else report
    rows = []
    for row in r["rows"]:
        for kind in ("exact", "mc"):
            fit, parts = row[kind], row[kind]["in_fit_over_epoch"]
            essential = fit["floor_over_epoch"] + parts["statistics"] + parts["eigenvalues"]
            rows.append(
                {"model": row["model"], "n": row["n"], "curvature": kind}
                | {"fit": fit["fit_over_epoch"], "floor": fit["floor_over_epoch"], **parts}
                | {"without_rest": essential, "target": r["targets"][kind]}
            )
    return pd.DataFrame(rows)


def fit_parts_section() -> str:
    """Each fit's passes, statistics, eigenvalues and rest, in epochs, beside its floor."""
    r = load_json("fit_over_epoch-cpu.json")
    columns = {
        "model": "{model}",
        "N": "{n}",
        "fit": "{curvature}",
        "timed fits (median)": "{fit:.2f}",
    }
    columns |= {"passes": "{passes:.2f}", "statistics": "{statistics:.2f}"}
    columns |= {"eigenvalues": "{eigenvalues:.2f}", "rest": "{rest:.2f}"}
    columns |= {"floor (passes, no hooks)": "{floor:.2f}"}
    columns |= {"floor + statistics + eigenvalues": "{without_rest:.2f}", "target": "{target:g}"}
    return speed_section([r], formatted(fit_parts(r).to_dict("records"), columns))


def layers_section() -> str:
    """Forward and backward time and memory of every layer type."""
    r = load_json("layer_speed-cpu.json")
    columns = {"model": "{model}", "parameters": "{parameters:,}", "fwd+bwd": "{median_s:.3f} s"}
    columns |= {"ratio to CONV": "{ratio_to_conv:.2f}", "peak RSS": "{peak_rss_mib:.0f} MiB"}
    return speed_section([r], formatted(r["rows"], columns))


def class_passes_section() -> str:
    """The per-class backward passes of the exact GGN's fit."""
    r = load_json("class_backward_passes-cpu.json")
    graphs = {"with the parameters' edges (ASDL)": "with_parameter_edges_s"}
    graphs |= {"activations only (EquivariantKFAC)": "activations_only_s"}
    graphs |= {"one pass batched over the classes": "batched_over_classes_s"}
    rows = [[graph, f"{r[key] * 1e3:.0f} ms"] for graph, key in graphs.items()]
    return speed_section([r], rows_table(["graph", "time"], rows))


def conv_a_factor_section() -> str:
    """CONV's input factor by unfolding against by FFT."""
    r = load_json("conv_a_factor-cpu.json")
    maps = [m | {"shape": "x".join(map(str, m["map"]))} for m in r["maps"]]
    columns = {"map": "{shape}", "unfold": "{unfold_ms:.2f} ms", "FFT": "{fft_ms:.2f} ms"}
    columns |= {"speed-up": "{speed_up:.1f}x", "relative difference": "{relative_difference:.1e}"}
    return speed_section([r], formatted(maps, columns))


def lengthscale_section() -> str:
    """The lengthscale gradient's accuracy and cost."""
    r = load_json("lengthscale_gradient-cpu.json")
    accuracy = {"case": "{case}", "refit central difference": "{refit central difference:.4f}"}
    accuracy |= {"total (autograd)": "{total (autograd):.4f}", "partial": "{partial:.2f}"}
    cost = {"model": "{model}", "alpha": "{alpha}", "examples": "{examples}"}
    cost |= {"la.fit": "{la_fit seconds:.2f} s"}
    cost |= {"total: value + gradient": "{total lml + gradient seconds:.2f} s"}
    cost |= {"partial": "{partial lml + gradient seconds:.2f} s"}
    tables = formatted(r["rows"], accuracy) + "\n\n" + formatted(r["cost"], cost)
    return speed_section([r], tables)


def distributed_section() -> str:
    """One process against two, where measured ("" otherwise)."""
    if not (RESULTS / "distributed_speed-cpu.json").exists():
        return ""
    r = load_json("distributed_speed-cpu.json")
    one, two = r["world_size_1"], r["world_size_2"]
    rows = [
        [label, f"{one[key]:.2f} s", f"{two[key]:.2f} s", f"{r[speed_up]:.2f}x"]
        for label, key, speed_up in (
            ("MAP epoch", "epoch_s", "epoch_speed_up"),
            ("marginal-likelihood step", "marglik_step_s", "marglik_step_speed_up"),
        )
    ]
    header = ["", "one process", "two processes", "speed-up"]
    return speed_section([r], rows_table(header, rows))


def _fit_cell(fit: dict | None) -> str:
    """A fit's seconds and epochs, or "-" where the report has no such fit."""
    return "-" if fit is None else f"{fit['fit_s']:.2f} s, {fit['fit_over_epoch']:.1f}x"


def _stock_cnn_rows(report: dict) -> list[list[str]]:
    """One row per model of a ``gpu_speed.py`` report: epoch, fits, runs and operators."""
    stock = next(row for row in report["rows"] if row["model"] == "stock-cnn")
    rows = []
    stock_step = stock["operators"]["training_step"]["aten_top_level"]
    for row in report["rows"]:
        operators = row["operators"]
        step = operators["training_step"]["aten_top_level"]
        exact, mc = operators["exact_fit"], operators["mc_fit"]
        training = row.get("training")
        rows.append(
            [
                f"{report['package_commit']} ({report['device']})",
                row["model"],
                f"{row['epoch_s']:.3f} s, {row['epoch_s'] / stock['epoch_s']:.2f}x",
                f"{row['exact']['fit_s']:.2f} s, {row['exact']['fit_over_epoch']:.1f}x",
                f"{row['mc']['fit_s']:.2f} s, {row['mc']['fit_over_epoch']:.1f}x",
                _fit_cell(row.get("exact_separate_classes")),
                "-" if training is None else f"{training['mc_over_map']:.2f}x",
                "-" if training is None else f"{training['exact_over_map']:.2f}x",
                f"{step} ({step / stock_step:.2f}x)",
                f"{exact['aten_top_level']} / {mc['aten_top_level']}",
                f"{exact['host_syncs']} / {mc['host_syncs']}",
            ]
        )
    return rows


def stock_cnn_section() -> str:
    """Every CPU ``gpu_speed`` report under benchmarks/results/gpu_speed/, in file-name order
    (``cpu-before.json`` and ``cpu.json`` on one machine, ``cpu-xeon-before.json`` and
    ``cpu-xeon.json`` on another)."""
    reports = [r for r in reports_in("gpu_speed") if not _on_gpu(r)]
    return speed_section(
        reports,
        rows_table(
            (
                "code | model | epoch, x stock | exact fit, x epoch | MC fit, x epoch | exact "
                "fit, class passes apart (GPU) | MC training / MAP | exact training / MAP | "
                "operators per step (x stock) | operators per fit, exact / MC | host reads per "
                "fit, exact / MC"
            ).split(" | "),
            [row for report in reports for row in _stock_cnn_rows(report)],
        ),
    )


def _on_gpu(report: dict) -> bool:
    return "--device cuda" in report["command"]


def _ratio(value: float, target: float) -> str:
    """``value`` as a ratio, marked where it misses its target."""
    return f"{value:.2f}x" if value <= target else f"**{value:.2f}x**"


def _gpu_rows(report: dict) -> list[list[str]]:
    """One row per model of a CUDA ``gpu_speed`` report, issue 41's GPU ratios marked."""
    targets = report["targets"]
    stock = next(row for row in report["rows"] if row["model"] == "stock-cnn")
    stock_launches = stock["operators"]["training_step"]["kernel_launches"]
    rows = []
    for row in report["rows"]:
        relaxed = row["model"] != "stock-cnn"
        scale = targets["small_n_factor"] if relaxed else 1e9
        step = row["operators"]["training_step"]
        fits = []
        for kind, target in (
            ("exact", targets["exact_fit_over_epoch"]),
            ("mc", targets["mc_fit_over_epoch"]),
        ):
            cell = f"{row[kind]['fit_s']:.2f} s, " + (
                _ratio(row[kind]["fit_over_epoch"], target)
                if relaxed
                else f"{row[kind]['fit_over_epoch']:.1f}x"
            )
            by_batch = row.get(f"{kind}_batch_by_batch")
            if by_batch:
                cell += f" ({by_batch['fit_over_epoch']:.1f}x)"
            cell += _device_eigenvalues(row, kind)
            fits.append(cell)
        small = row["small_n"][0]
        small_cells = [
            _ratio(small[kind]["fit_over_epoch"], scale * target) + _device_eigenvalues(small, kind)
            if relaxed
            else f"{small[kind]['fit_over_epoch']:.1f}x"
            for kind, target in (
                ("exact", targets["exact_fit_over_epoch"]),
                ("mc", targets["mc_fit_over_epoch"]),
            )
        ]
        training = row.get("training")
        epoch_ratio = row["epoch_s"] / stock["epoch_s"]
        rows.append(
            [
                report["package_commit"],
                row["model"],
                f"{row['epoch_s']:.3f} s, "
                + (
                    _ratio(epoch_ratio, targets["conv_epoch_over_stock"])
                    if row["model"] == "conv"
                    else f"{epoch_ratio:.2f}x"
                ),
                *fits,
                f"{small['n']}: " + " / ".join(small_cells),
                "-"
                if training is None
                else _ratio(training["mc_over_map"], targets["mc_training_over_map"])
                + f" / {training['exact_over_map']:.2f}x",
                f"{row['exact']['peak_mib']:,.0f} / {row['mc']['peak_mib']:,.0f} MiB",
                f"{step['kernel_launches']} ({step['kernel_launches'] / stock_launches:.2f}x)",
                f"{step['wall_ms']:.1f} / " + _kernel_time(step),
            ]
        )
    return rows


def _device_eigenvalues(row: dict, kind: str) -> str:
    """The fit with the GPU's eigensolver (``host_eigenvalues=False``), where measured."""
    on_device = row.get(f"{kind}_device_eigenvalues")
    return f" [GPU eigensolver {on_device['fit_over_epoch']:.1f}x]" if on_device else ""


def _kernel_time(profiled: dict) -> str:
    """The kernels' device time of a profiled call; "at most" where the report over-counted it
    (operators' device time summed with their kernels', before ``kernel_ms``)."""
    if "kernel_ms" in profiled:
        return f"{profiled['kernel_ms']:.1f} ms"
    return f"at most {profiled['device_ms_overcounted']:.1f} ms"


def gpu_section() -> str:
    """The CUDA ``gpu_speed`` reports under benchmarks/results/gpu_speed/."""
    reports = [r for r in reports_in("gpu_speed") if _on_gpu(r)]
    return speed_section(
        reports,
        rows_table(
            (
                "code | model | epoch, x stock | exact fit, x epoch (batch by batch) | MC fit, x "
                "epoch (batch by batch) | small N: exact / MC fit, x epoch | MC / exact training, "
                "x MAP | fit peak memory, exact / MC | kernel launches per step (x stock) | step: "
                "wall / kernels"
            ).split(" | "),
            [row for report in reports for row in _gpu_rows(report)],
        ),
    )


def compiled_section() -> str:
    """Epochs and training runs under ``torch.compile`` (``gpu_speed --compile-mode``), or ""
    where no report has them."""
    reports = [r for r in reports_in("gpu_speed") if any("compiled" in row for row in r["rows"])]
    if not reports:
        return ""
    rows = []
    for report in reports:
        for row in report["rows"]:
            run = row.get("compiled")
            if run is None:
                continue
            if "error" in run:
                rows.append([report["package_commit"], row["model"], run["mode"], run["error"]])
                continue
            training = row.get("training")
            cells = [
                f"{run['eager_epoch_s']:.3f} s -> {run['epoch_s']:.3f} s, "
                f"{run['epoch_over_eager']:.2f}x (first epoch {run['compile_s']:.1f} s)"
            ]
            if training and "map_s" in run:
                cells.append(
                    f"MAP {training['map_s']:.1f} s -> {run['map_s']:.1f} s, MC "
                    f"{training['marglik_mc_s']:.1f} s -> {run['marglik_mc_s']:.1f} s "
                    f"({run['marglik_mc_s'] / run['map_s']:.2f}x compiled MAP)"
                )
            else:
                cells.append("-")
            rows.append([report["package_commit"], row["model"], run["mode"], *cells])
    return speed_section(
        reports,
        rows_table(
            ["code", "model", "mode", "epoch: eager -> compiled", "training: eager -> compiled"],
            rows,
        ),
    )


def scale_section() -> SimpleNamespace:
    """Table 1's runs at 60,000 images (``benchmarks/results/gpu_scale/``): ``loaders`` (how
    each report's loader fetched its batches) and ``text``."""
    reports = reports_in("gpu_scale")
    rows = []
    for report in reports:
        for row in report["rows"]:
            learned = row["learned"]
            rows.append(
                [
                    report["package_commit"],
                    row["model"],
                    report.get("compile_mode") or "eager",
                    f"{row['classes']}",
                    ("learned, " + ("MC Fisher" if row["stochastic"] else "exact GGN"))
                    if learned
                    else "MAP",
                    f"{row['epoch_s']:.1f} s",
                    f"{row['fit_s']:.1f} s" if learned else "-",
                    f"{row['epochs_100_min']:.1f} min",
                    f"{row['epochs_1000_min'] / 60:.2f} h" if learned else "-",
                ]
            )
    return SimpleNamespace(
        loaders=_loaders(reports) + ".",
        text=speed_section(
            reports,
            table=rows_table(
                (
                    "code | model | MAP steps | classes | training | epoch | fit | 100 epochs | "
                    "1,000 epochs"
                ).split(" | "),
                rows,
            ),
        ),
    )


def _loaders(reports: list[dict]) -> str:
    """How each scale report's loader fetched its batches, and one pass's seconds."""
    parts = []
    for report in reports:
        if "per_example_loader_pass_s" in report:
            parts.append(
                f"{report['package_commit']}: a batch at a time, a pass "
                f"{report['loader_pass_s']:.2f} s against "
                f"{report['per_example_loader_pass_s']:.2f} s example by example"
            )
        else:
            parts.append(
                f"{report['package_commit']}: example by example, a pass "
                f"{report['loader_pass_s']:.2f} s"
            )
    return "; ".join(parts)


# --- the figures the paragraphs cite ---------------------------------------------------------


def move(values: list[float]) -> float:
    """How far ``values`` (one timing in several runs) spread, in percent of the largest:
    ``100 * (max - min) / max``.

    Raises:
        ValueError: For no value.
    """
    if not values:
        raise ValueError("the move of no value")
    return 100 * (max(values) - min(values)) / max(values)


def sides(values: list[float], target: float) -> str:
    """Where ``values`` lie against an upper ``target``: ``"on either side of the target"``,
    or both (all) ``"at or below the target"`` or ``"above the target"``."""
    below = [v <= target for v in values]
    if any(below) and not all(below):
        return "on either side of the target"
    every = "both" if len(values) == 2 else "all"
    return f"{every} {'at or below' if all(below) else 'above'} the target"


def _measures(row: dict, stock: dict | None) -> dict[tuple[str, str], float]:
    """A report row's timings as (measure, kind) -> value: the seconds of its epoch and fits,
    and its ratios (the fits to its epoch, its epoch to the stock CNN's, its training runs to
    MAP training), where the report has them."""
    found = {("epoch", "seconds"): row["epoch_s"]}
    for kind in ("exact", "mc"):
        found[(f"{kind} fit", "seconds")] = row[kind]["fit_s"]
        found[(f"{kind} fit", "ratio")] = row[kind]["fit_over_epoch"]
    if stock is not None and row["model"] != stock["model"]:
        found[("epoch", "ratio")] = row["epoch_s"] / stock["epoch_s"]
    for kind in ("mc", "exact"):
        if row.get("training"):
            found[(f"{kind} training", "ratio")] = row["training"][f"{kind}_over_map"]
    return found


def run_moves(*folders: str) -> pd.DataFrame:
    """How far the timings moved between runs of one code on one machine: the reports of each
    folder under benchmarks/results/ grouped by package commit and device (groups of two or
    more), one row per group, model and timing (``measure``: ``"epoch"``, ``"exact fit"``,
    ``"mc fit"``, ``"mc training"``, ``"exact training"``; ``kind``: ``"seconds"`` or
    ``"ratio"``) with the ``runs`` and the ``move`` (:func:`move`, in percent)."""
    rows = []
    for folder in folders:
        groups: dict[tuple[str, str], list[dict]] = {}
        for report in reports_in(folder):
            groups.setdefault((report["package_commit"], report["device"]), []).append(report)
        for (commit, device), reports in groups.items():
            if len(reports) < 2:
                continue
            measured = []
            for report in reports:
                stock = next((r for r in report["rows"] if r["model"] == "stock-cnn"), None)
                measured.append({row["model"]: _measures(row, stock) for row in report["rows"]})
            for model in measured[0]:
                for (measure, kind), _ in measured[0][model].items():
                    values = [m[model][(measure, kind)] for m in measured]
                    rows.append(
                        {
                            "folder": folder,
                            "commit": commit,
                            "device": device,
                            "runs": len(reports),
                            "model": model,
                            "measure": measure,
                            "kind": kind,
                            "move": move(values),
                        }
                    )
    columns = ["folder", "commit", "device", "runs", "model", "measure", "kind", "move"]
    return pd.DataFrame(rows, columns=columns)


def step_kernel_shares() -> list[float]:
    """Per model of every CUDA ``gpu_speed`` report, the kernels' device time of its profiled
    training step over the step's wall-clock (an upper bound where the report over-counted the
    kernels' time, :func:`_kernel_time`)."""
    shares = []
    for report in reports_in("gpu_speed"):
        if not _on_gpu(report):
            continue
        for row in report["rows"]:
            step = row["operators"]["training_step"]
            kernels = step.get("kernel_ms", step.get("device_ms_overcounted"))
            shares.append(kernels / step["wall_ms"])
    return shares
