"""The worked examples run end to end on a tiny budget."""

import json

import pytest

from tests.scripts import load_script


def _example(name: str):
    return load_script("examples", name)


def test_own_model_trains_fits_predicts_and_reports(tmp_path, capsys):
    """A network written with the layers, not models.build: marglik_training, a fresh
    Laplace(..., backend=EquivariantKFAC) at the learned precisions, its predictive, and the
    symmetry report and plot of both relaxed layers."""
    out = tmp_path / "symmetry.png"
    report = _example("own_model").main(["--epochs", "10", "--n-train", "200", "--out", str(out)])
    assert [row["layer"] for row in report["layers"]] == ["layer1", "layer2"]
    assert all(set(row["paths"]) == {"fc", "conv"} for row in report["layers"])
    assert "head.weight" in report["outside"]
    assert out.stat().st_size > 0
    printed = capsys.readouterr().out
    assert "test accuracy" in printed and "layer2: learned" in printed


def test_residual_network_with_normalization_trains_fits_predicts_and_reports(tmp_path, capsys):
    """Residual blocks of relaxed layers with GroupNorm and BatchNorm: marglik_training
    (BatchNorm on batch statistics), a fresh Laplace fit in evaluation mode, its predictive,
    and the report: six relaxed layers, the normalisations' tensors under "outside"."""
    from laplace_equivariance.data import DEBIAN_FASHION_MNIST

    if not DEBIAN_FASHION_MNIST.exists():
        pytest.skip("apt-get install dataset-fashion-mnist to run this example")
    out = tmp_path / "symmetry.png"
    argv = ["--epochs", "10", "--n-train", "200", "--test-images", "100", "--out", str(out)]
    report = _example("residual_network").main(argv)
    layers = [row["layer"] for row in report["layers"]]
    assert layers == [
        "stem",
        "block1.layer1",
        "block1.layer2",
        "down",
        "block2.layer1",
        "block2.layer2",
    ]
    assert {"block1.norm1.weight", "down_norm.weight", "down_norm.bias"} <= set(report["outside"])
    assert out.stat().st_size > 0
    assert "(100 images)" in capsys.readouterr().out


def test_paper_tables_starts_only_the_relaxed_models_equivariant(tmp_path, monkeypatch):
    """``--start equivariant`` reaches F-FC+CONV (its own run folder) and not MAP CONV, whose
    model has no FC path to silence."""
    tiny = [
        "--subset",
        "64",
        "--test-subset",
        "32",
        "--epochs",
        "5",
        "--burnin",
        "5",
        "--marglik-subset",
        "64",
    ]
    argv = ["paper_tables.py", "table1", "--models", "conv", "f-fc+conv", "--methods", "map"]
    argv += ["--dataset", "quadrant-mnist", "--alpha", "1", *tiny, "--start", "equivariant"]
    monkeypatch.setattr("sys.argv", [*argv, "--out", str(tmp_path)])
    _example("paper_tables").main()
    folders = sorted(p.name for p in tmp_path.iterdir())
    assert folders == [
        "quadrant-mnist-conv-map-seed0",
        "quadrant-mnist-f-fc+conv-map-equivariant-start-seed0",
    ]
    started = json.loads((tmp_path / folders[1] / "results.json").read_text())
    assert started["settings"]["start"] == "equivariant"
    conv = json.loads((tmp_path / folders[0] / "results.json").read_text())
    assert conv["settings"]["start"] == "mixed"
