"""``studies/evidence_split.py``: a run's evidence split into the data term and each path's
prior and Occam terms."""

import json

import pytest
import torch
from torch.utils.data import DataLoader, TensorDataset

from laplace_equivariance import models
from laplace_equivariance.app.cli import main
from studies import evidence_split
from tests.studies.conftest import TINY


def test_terms_add_up_to_the_evidence_and_every_tensor_is_counted_once():
    torch.manual_seed(0)
    model = models.build("f-fc+conv", (1, 32, 32), 3, alpha=1).double()
    x = torch.randn(8, 1, 32, 32, dtype=torch.float64)
    y = torch.randint(0, 3, (8,))
    loader = DataLoader(TensorDataset(x, y), batch_size=4)
    sizes = [p.numel() for p in model.parameters()]
    precisions = torch.logspace(-1, 2, len(sizes), dtype=torch.float64)
    split = evidence_split.split(model, loader, precisions)
    paths = [terms for layer in split["layers"].values() for terms in layer.values()]
    assert [set(layer) for layer in split["layers"].values()] == [{"fc", "conv"}] * 8
    total = split["data"] + sum(t["prior"] + t["occam"] for t in [*paths, split["outside"]])
    assert total == pytest.approx(split["neg_log_marglik"], rel=1e-10)
    assert sum(t["parameters"] for t in [*paths, split["outside"]]) == sum(sizes)
    assert all(0 <= t["gamma"] <= t["parameters"] for t in paths)
    weights = [p.numel() for n, p in model.named_parameters() if n.endswith("weight")]
    assert sum(t["weight_parameters"] for t in [*paths, split["outside"]]) == sum(weights)
    fc = split["layers"]["layer1"]["fc"]  # its input and output maps, not its two biases
    assert fc["weight_parameters"] == model.layer1.fc.input_map.weight.numel() + (
        model.layer1.fc.output_map.weight.numel()
    )
    assert all(0 <= t["weight_gamma"] <= min(t["gamma"], t["weight_parameters"]) for t in paths)


def test_a_run_is_split_on_the_examples_its_evidence_was_fitted_on(tmp_path):
    """64 training images, the evidence fitted on the first 32 at temperature 32 / 64: the
    split's evidence is the run's last recorded one (50 hypersteps: the precisions settled), not
    that of the 32 images alone or of all 64."""
    out = tmp_path / "run"
    argv = ["train", "--dataset", "quadrant-mnist", "--model", "f-fc+conv", "--out", str(out)]
    assert main([*argv, *TINY, "--marglik-subset", "32", "--hypersteps", "50"]) == 0
    row = evidence_split.measure(out)
    results = json.loads((out / "results.json").read_text())
    assert row["examples"] == 32
    assert row["neg_log_marglik"] == pytest.approx(results["neg_log_marglik"][-1], rel=1e-3)
