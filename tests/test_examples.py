"""The worked examples run end to end on a tiny budget."""

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
