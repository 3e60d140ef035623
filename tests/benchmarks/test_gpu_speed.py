"""``benchmarks/gpu_speed.py``: the stock CNN, the operator and host-read counts, one row."""

import argparse
import json

import torch

from benchmarks import gpu_speed, timing
from laplace_equivariance import models


def test_the_stock_cnn_has_the_conv_networks_shape_and_parameter_count():
    """Zero padding instead of circular changes no parameter: the counts are equal."""
    stock = gpu_speed.stock_cnn(3, 10, 2)
    conv = models.build("conv", (3, 32, 32), 10, alpha=2)
    assert stock(torch.randn(2, 3, 32, 32)).shape == (2, 10)
    assert sum(p.numel() for p in stock.parameters()) == models.count_parameters(conv)


def test_operators_counts_top_level_operators_and_host_reads():
    counts = gpu_speed.operators(lambda: (torch.ones(3) * 2).sum().item(), "cpu")
    assert counts["aten_top_level"] == 4 and counts["host_syncs"] == 1  # ones, mul, sum, item
    assert counts["wall_ms"] > 0
    names = [name for name, calls, ms in counts["top_host_ms"]]
    assert {"aten::ones", "aten::mul", "aten::sum"} <= set(names)
    assert all(ms >= 0 for _, _, ms in counts["top_host_ms"])
    assert "kernel_ms" not in counts  # device time only on CUDA


def test_a_row_has_every_figure_and_the_summary_its_ratios():
    args = argparse.Namespace(
        n=8,
        small_n=[4],
        batch=4,
        profile_batch=2,
        alpha=1,
        gconv_alpha=1,
        repeats=1,
        train_epochs=0,
        compile_mode=None,
    )
    rows = [gpu_speed.measure(name, args, "cpu") for name in ("stock-cnn", "conv")]
    for row in rows:
        assert row["epoch_s"] > 0 and row["exact"]["fit_s"] > 0 and row["mc"]["fit_s"] > 0
        assert row["small_n"][0]["n"] == 4
        assert set(row["operators"]) == {"training_step", "trainer_step", "exact_fit", "mc_fit"}
    summary = gpu_speed.summary(rows)
    assert summary["conv_operators_over_stock"] == (
        rows[1]["operators"]["training_step"]["aten_top_level"]
        / rows[0]["operators"]["training_step"]["aten_top_level"]
    )


def test_compiled_epochs_and_runs_are_timed_and_a_compiler_failure_is_recorded(
    monkeypatch, eager_compile
):
    args = argparse.Namespace(repeats=1, train_epochs=1, compile_mode="reduce-overhead")
    data = timing.loader(8, 4, "cpu")
    run = gpu_speed.compiled("conv", 1, data, args, "cpu")
    assert eager_compile == [{"mode": "reduce-overhead"}] * 3  # the epoch, MAP and MC training
    assert run["epoch_over_eager"] == run["epoch_s"] / run["eager_epoch_s"]
    assert run["compile_s"] > 0 and run["map_s"] > 0 and run["marglik_mc_s"] > 0

    def failing(model, **options):
        raise RuntimeError("no compiler")

    monkeypatch.setattr(torch, "compile", failing)
    assert gpu_speed.compiled("conv", 1, data, args, "cpu")["error"] == "RuntimeError: no compiler"


def test_the_speed_page_renders_compiled_runs_where_a_report_has_them(tmp_path, monkeypatch):
    from benchmarks import speed_tables

    monkeypatch.setattr(speed_tables, "RESULTS", tmp_path)
    (tmp_path / "gpu_speed").mkdir()
    assert speed_tables.compiled_section() == ""
    row = {"model": "conv", "compiled": {"mode": "reduce-overhead", "error": "RuntimeError: x"}}
    ok = {
        "model": "f-fc+conv",
        "training": {"map_s": 4.0, "marglik_mc_s": 6.0},
        "compiled": {
            "mode": "reduce-overhead",
            "eager_epoch_s": 0.5,
            "epoch_s": 0.25,
            "epoch_over_eager": 0.5,
            "compile_s": 30.0,
            "map_s": 3.0,
            "marglik_mc_s": 4.5,
        },
    }
    report = {"command": "python -m benchmarks.gpu_speed --device cuda", "package_commit": "abc"}
    report |= {"device": "GPU", "cpu_threads": 16, "torch": "2.11", "rows": [row, ok]}
    (tmp_path / "gpu_speed" / "cuda.json").write_text(json.dumps(report))
    section = speed_tables.compiled_section()
    assert "| abc | conv | reduce-overhead | RuntimeError: x |  |" in section
    assert "0.500 s -> 0.250 s, 0.50x (first epoch 30.0 s)" in section
    assert "MAP 4.0 s -> 3.0 s, MC 6.0 s -> 4.5 s (1.50x compiled MAP)" in section


def test_the_command_compiles_after_every_models_eager_figures(
    tmp_path, monkeypatch, eager_compile
):
    import sys

    out = tmp_path / "speed.json"
    argv = ["gpu_speed", "--n", "8", "--small-n", "4", "--batch", "4", "--alpha", "1"]
    argv += ["--repeats", "1", "--train-epochs", "0", "--profile-batch", "2"]
    argv += ["--models", "stock-cnn", "conv", "--compile-mode", "default", "--out", str(out)]
    monkeypatch.setattr(sys, "argv", argv)
    gpu_speed.main()
    rows = json.loads(out.read_text())["rows"]
    assert [row["model"] for row in rows] == ["stock-cnn", "conv"]
    assert all(
        row["compiled"]["mode"] == "default" and row["compiled"]["epoch_s"] > 0 for row in rows
    )
