"""``benchmarks/frozen_fc_start.py``: the equivariant start with the FC-type paths frozen off."""

import json

import pytest
import torch

from benchmarks import evidence_split, frozen_fc_start
from laplace_equivariance import models


def test_only_the_fc_paths_are_frozen_and_the_network_stays_its_conv_network():
    model = models.build("f-fc+conv", (1, 32, 32), 3, alpha=1)
    model.start_equivariant_()
    assert frozen_fc_start.freeze_fc_paths(model) == 8
    frozen = {n for n, p in model.named_parameters() if not p.requires_grad}
    assert frozen and all(".fc." in n for n in frozen)
    assert all(p.requires_grad for n, p in model.named_parameters() if ".fc." not in n)


def test_models_without_an_fc_path_beside_an_equivariant_one_are_refused():
    with pytest.raises(ValueError, match="no FC-type path"):
        frozen_fc_start.freeze_fc_paths(models.build("conv", (1, 32, 32), 3, alpha=1))
    with pytest.raises(ValueError, match="only kind of path"):
        frozen_fc_start.freeze_fc_paths(models.build("f-fc", (1, 32, 32), 3, alpha=1))


def test_a_run_keeps_its_fc_paths_silent_and_says_they_were_frozen(tmp_path):
    out = tmp_path / "run"
    argv = ["--dataset", "quadrant-mnist-digit", "--model", "f-fc+conv", "--method", "marglik"]
    argv += ["--subset", "64", "--test-subset", "32", "--epochs", "2", "--alpha", "1"]
    argv += ["--burnin", "1", "--marglik-frequency", "1", "--hypersteps", "2", "--device", "cpu"]
    assert frozen_fc_start.main([*argv, "--out", str(out)]) == 0
    results = json.loads((out / "results.json").read_text())
    assert results["frozen_paths"] == ["fc"] and results["settings"]["start"] == "equivariant"
    assert all(row["paths"]["fc"] == 0.0 for row in results["path_outputs"])
    assert all(list(row["paths"]) == ["conv"] for row in results["symmetry"]["layers"])
    trained = torch.load(out / "model.pt", weights_only=True)
    assert all(trained[n].abs().sum() == 0 for n in trained if ".fc.output_map." in n)
    # benchmarks/evidence_split.py fits it as it was fitted: without the frozen paths
    split = evidence_split.measure(out)
    assert split["frozen_paths"] == ["fc"]
    assert all(list(paths) == ["conv"] for paths in split["layers"].values())


def test_a_folder_holding_a_run_with_free_fc_paths_is_refused_not_relabelled(tmp_path):
    out = tmp_path / "run"
    out.mkdir()
    (out / "run.json").write_text("{}")  # a train run of the same settings, FC paths free
    with pytest.raises(SystemExit, match="not frozen"):
        frozen_fc_start.main(["--model", "f-fc+conv", "--method", "marglik", "--out", str(out)])
    assert not (out / "frozen_paths.json").exists()
