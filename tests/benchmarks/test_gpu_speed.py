"""``benchmarks/gpu_speed.py``: the stock CNN, the operator and host-read counts, one row."""

import argparse

import torch

from benchmarks import gpu_speed
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
