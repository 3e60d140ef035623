"""The worked examples run end to end on a tiny budget."""

import importlib
from pathlib import Path
from types import ModuleType

import pytest

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def _example(name: str, monkeypatch) -> ModuleType:
    """``examples/name.py`` imported as ``python examples/name.py`` runs it: with its folder
    first on the import path (residual_network imports own_model from beside it), for this
    test only."""
    monkeypatch.syspath_prepend(str(EXAMPLES))
    return importlib.import_module(name)


def test_own_model_trains_fits_predicts_and_reports(tmp_path, capsys, monkeypatch):
    """A network written with the layers, not models.build: marglik_training, a fresh
    Laplace(..., backend=EquivariantKFAC) at the learned precisions, its predictive, and the
    symmetry report and plot of both relaxed layers."""
    out = tmp_path / "symmetry.png"
    argv = ["--epochs", "10", "--n-train", "200", "--out", str(out)]
    report = _example("own_model", monkeypatch).main(argv)
    assert [row["layer"] for row in report["layers"]] == ["layer1", "layer2"]
    assert all(set(row["paths"]) == {"fc", "conv"} for row in report["layers"])
    assert "head.weight" in report["outside"]
    assert out.stat().st_size > 0
    printed = capsys.readouterr().out
    assert "test accuracy" in printed and "layer2: learned" in printed


def test_residual_network_with_normalization_trains_fits_predicts_and_reports(
    tmp_path, capsys, monkeypatch
):
    """Residual blocks of relaxed layers with GroupNorm and BatchNorm: marglik_training
    (BatchNorm on batch statistics), a fresh Laplace fit in evaluation mode, its predictive,
    and the report: six relaxed layers, the normalisations' tensors under "outside"."""
    from laplace_equivariance.data.datasets import DEBIAN_FASHION_MNIST

    if not DEBIAN_FASHION_MNIST.exists():
        pytest.skip("apt-get install dataset-fashion-mnist to run this example")
    out = tmp_path / "symmetry.png"
    argv = ["--epochs", "10", "--n-train", "200", "--test-images", "100", "--out", str(out)]
    report = _example("residual_network", monkeypatch).main(argv)
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
