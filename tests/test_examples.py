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


def test_relax_resnet_relaxes_trains_reports_and_folds(capsys, monkeypatch):
    """A torchvision ResNet-18 (CIFAR stem) relaxed, trained by marglik_training, reported and
    folded: the two relaxed layers' shares and priors, a fold that keeps the parameter count
    between the original's and the relaxed one's."""
    argv = ["--n-train", "32", "--n-test", "16", "--epochs", "2", "--threads", "2"]
    result = _example("relax_resnet", monkeypatch).main(argv)
    assert [row["layer"] for row in result["shares"]] == ["layer3.1.conv2", "layer4.1.conv2"]
    assert [row["layer"] for row in result["report"]["layers"]] == [
        "layer3.1.conv2",
        "layer4.1.conv2",
    ]
    counts = result["parameters"]
    assert counts["original"] <= counts["folded"] <= counts["relaxed"]
    assert counts["relaxed"] - counts["original"] > 10_000_000
    printed = capsys.readouterr().out
    assert "FC output share" in printed and "folded:" in printed
