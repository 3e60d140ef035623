"""docs/speed.md's sections of training speed: ``benchmarks/gpu_speed.py``'s reports.

Against a stock CNN on the CPU and on GPUs, the compiled MAP steps, and the data scale.
"""

from __future__ import annotations

import json

from benchmarks.generated_docs.common import RESULTS, markdown_table
from benchmarks.generated_docs.speed_common import speed_section


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
    every = [json.loads(p.read_text()) for p in sorted((RESULTS / "gpu_speed").glob("*.json"))]
    reports = [r for r in every if not _on_gpu(r)]
    return speed_section(
        "stock-cnn",
        reports,
        markdown_table(
            [
                "code",
                "model",
                "epoch, x stock",
                "exact fit, x epoch",
                "MC fit, x epoch",
                "exact fit, class passes apart (GPU)",
                "MC training / MAP",
                "exact training / MAP",
                "operators per step (x stock)",
                "operators per fit, exact / MC",
                "host reads per fit, exact / MC",
            ],
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
    reports = [
        r
        for r in (json.loads(p.read_text()) for p in sorted((RESULTS / "gpu_speed").glob("*.json")))
        if _on_gpu(r)
    ]
    return speed_section(
        "gpu",
        reports,
        markdown_table(
            [
                "code",
                "model",
                "epoch, x stock",
                "exact fit, x epoch (batch by batch)",
                "MC fit, x epoch (batch by batch)",
                "small N: exact / MC fit, x epoch",
                "MC / exact training, x MAP",
                "fit peak memory, exact / MC",
                "kernel launches per step (x stock)",
                "step: wall / kernels",
            ],
            [row for report in reports for row in _gpu_rows(report)],
        ),
    )


def compiled_section() -> str:
    """Epochs and training runs under ``torch.compile`` (``gpu_speed --compile-mode``), or ""
    where no report has them."""
    reports = [
        r
        for r in (json.loads(p.read_text()) for p in sorted((RESULTS / "gpu_speed").glob("*.json")))
        if any("compiled" in row for row in r["rows"])
    ]
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
        "compiled",
        reports,
        markdown_table(
            ["code", "model", "mode", "epoch: eager -> compiled", "training: eager -> compiled"],
            rows,
        ),
    )


def scale_section() -> str:
    """Table 1's runs at 60,000 images (``benchmarks/results/gpu_scale/``)."""
    reports = [json.loads(p.read_text()) for p in sorted((RESULTS / "gpu_scale").glob("*.json"))]
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
    return speed_section(
        "scale",
        reports,
        loaders=_loaders(reports) + ".",
        table=markdown_table(
            [
                "code",
                "model",
                "MAP steps",
                "classes",
                "training",
                "epoch",
                "fit",
                "100 epochs",
                "1,000 epochs",
            ],
            rows,
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
