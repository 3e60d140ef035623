"""``studies/frozen_paths.py``: the equivariant start with some paths frozen off."""

import json

import pytest
import torch

from laplace_equivariance import models
from studies import evidence_split, frozen_paths


def test_only_the_fc_paths_are_frozen_and_the_network_stays_its_conv_network():
    model = models.build("f-fc+conv", (1, 32, 32), 3, alpha=1)
    model.start_equivariant_()
    assert frozen_paths.freeze_paths(model) == 8
    frozen = {n for n, p in model.named_parameters() if not p.requires_grad}
    assert frozen and all(".fc." in n for n in frozen)
    assert all(p.requires_grad for n, p in model.named_parameters() if ".fc." not in n)


def test_models_without_an_fc_path_beside_an_equivariant_one_are_refused():
    with pytest.raises(ValueError, match="no fc path"):
        frozen_paths.freeze_paths(models.build("conv", (1, 32, 32), 3, alpha=1))
    with pytest.raises(ValueError, match="every path of relaxed layer 1"):
        frozen_paths.freeze_paths(models.build("f-fc", (1, 32, 32), 3, alpha=1))


@pytest.mark.parametrize(("frozen", "kept"), [(("fc", "conv"), "gconv"), (("fc", "gconv"), "conv")])
def test_two_frozen_paths_leave_the_third_as_the_network(frozen, kept):
    model = models.build("f-fc+conv+gconv", (1, 32, 32), 3, alpha=1)
    assert frozen_paths.kept_equivariant_paths(model, frozen) == (kept,)
    model.start_equivariant_((kept,))
    assert frozen_paths.freeze_paths(model, frozen) == 16
    trainable = {n.split(".")[1] for n, p in model.named_parameters() if p.requires_grad}
    assert trainable == {kept, "weight", "bias"}  # the kept path and the head's two layers
    x = torch.randn(2, 1, 32, 32)
    with torch.no_grad():
        for layer in model.relaxed_layers:
            outputs = {name: layer.path(name)(x) for name in layer.path_names}
            assert all(outputs[name].abs().max() == 0 for name in frozen)
            x = layer(x)


def test_freezing_every_equivariant_path_or_an_absent_one_is_refused():
    model = models.build("f-fc+conv", (1, 32, 32), 3, alpha=1)
    with pytest.raises(ValueError, match="every equivariant path"):
        frozen_paths.kept_equivariant_paths(model, ["conv"])
    with pytest.raises(ValueError, match=r"do not have.*\['conv', 'fc'\]"):
        frozen_paths.kept_equivariant_paths(model, ["gconv"])
    with pytest.raises(SystemExit, match="do not have"):
        frozen_paths.main(["--frozen", "gconv", "--model", "f-fc+conv", "--out", "unused"])
    with pytest.raises(SystemExit, match="invariant-weights has no equivariant path"):
        frozen_paths.main(["--model", "invariant-weights", "--out", "unused"])


def test_a_run_keeps_its_fc_paths_silent_and_says_they_were_frozen(tmp_path):
    out = tmp_path / "run"
    argv = ["--dataset", "quadrant-mnist-digit", "--model", "f-fc+conv", "--method", "marglik"]
    argv += ["--subset", "64", "--test-subset", "32", "--epochs", "2", "--alpha", "1"]
    argv += ["--burnin", "1", "--marglik-frequency", "1", "--hypersteps", "2", "--device", "cpu"]
    assert frozen_paths.main([*argv, "--out", str(out)]) == 0
    results = json.loads((out / "results.json").read_text())
    assert results["frozen_paths"] == ["fc"] and results["settings"]["start"] == "equivariant"
    assert all(row["paths"]["fc"] == 0.0 for row in results["path_outputs"])
    assert all(list(row["paths"]) == ["conv"] for row in results["symmetry"]["layers"])
    trained = torch.load(out / "model.pt", weights_only=True)
    assert all(trained[n].abs().sum() == 0 for n in trained if ".fc.output_map." in n)
    # studies/evidence_split.py fits it as it was fitted: without the frozen paths
    split = evidence_split.measure(out)
    assert split["frozen_paths"] == ["fc"]
    assert all(list(paths) == ["conv"] for paths in split["layers"].values())


def test_a_folder_holding_a_run_with_free_fc_paths_is_refused_not_relabelled(tmp_path):
    out = tmp_path / "run"
    out.mkdir()
    (out / "run.json").write_text("{}")  # a train run of the same settings, FC paths free
    with pytest.raises(SystemExit, match=r"frozen paths were not \['fc'\]"):
        frozen_paths.main(["--model", "f-fc+conv", "--method", "marglik", "--out", str(out)])
    assert not (out / "frozen_paths.json").exists()


def test_a_folder_holding_a_run_with_other_frozen_paths_is_refused(tmp_path):
    out = tmp_path / "run"
    out.mkdir()
    (out / "run.json").write_text("{}")
    (out / "frozen_paths.json").write_text('["fc"]')
    argv = ["--model", "f-fc+conv+gconv", "--method", "marglik", "--out", str(out)]
    with pytest.raises(SystemExit, match=r"were not \['conv', 'fc'\]"):
        frozen_paths.main(["--frozen", "conv", "fc", *argv])
    assert (out / "frozen_paths.json").read_text() == '["fc"]'
