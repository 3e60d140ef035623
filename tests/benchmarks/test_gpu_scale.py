"""``benchmarks/gpu_scale.py``: epochs timed one by one, the fit as an epoch's excess."""

import argparse

import pytest

from benchmarks import gpu_scale
from laplace_equivariance.marglik.schedule import marglik_step_epochs


@pytest.mark.parametrize("name", ["stock-cnn", "f-fc+conv-mc"])
def test_a_run_times_every_epoch_and_extrapolates_the_paper_schedule(name):
    args = argparse.Namespace(n=16, batch=8, alpha=1, epochs=2, compile_mode=None)
    row = gpu_scale.run(name, args, "cpu")
    assert len(row["epochs_s"]) == 2 and all(s > 0 for s in row["epochs_s"])
    if row["learned"]:
        assert row["epoch_s"] == row["epochs_s"][0]
        assert row["fit_s"] == pytest.approx(row["epochs_s"][1] - row["epochs_s"][0])
        fits = len(marglik_step_epochs(1000, 10, 5))
        assert fits == 199
        assert row["epochs_1000_min"] == pytest.approx(
            (1000 * row["epoch_s"] + fits * row["fit_s"]) / 60
        )
    else:
        assert row["epoch_s"] == row["epochs_s"][-1]
        assert row["epochs_100_min"] == pytest.approx(100 * row["epoch_s"] / 60)


def test_the_command_writes_its_report_with_both_loaders_timed(tmp_path, monkeypatch):
    import json
    import sys

    out = tmp_path / "scale.json"
    argv = ["gpu_scale", "--n", "16", "--batch", "8", "--alpha", "1", "--epochs", "2"]
    monkeypatch.setattr(sys, "argv", [*argv, "--runs", "stock-cnn", "--out", str(out)])
    gpu_scale.main()
    report = json.loads(out.read_text())
    assert report["loader_pass_s"] > 0 and report["per_example_loader_pass_s"] > 0
    assert report["compile_mode"] is None and [r["run"] for r in report["rows"]] == ["stock-cnn"]
