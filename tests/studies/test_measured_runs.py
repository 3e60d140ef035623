"""``studies/measured_runs.py``: the command line and JSON file of the scripts that measure
trained runs, and a run's precisions read back."""

import json
import sys
from pathlib import Path

import torch

from laplace_equivariance import models
from laplace_equivariance.marglik.priors import parameter_paths
from studies import measured_runs


def test_the_parser_takes_runs_out_and_threads(monkeypatch, tmp_path):
    parser = measured_runs.parser("measure")
    parser.add_argument("--images", type=int, default=3)
    argv = ["script", "a", "b", "--out", str(tmp_path / "m.json"), "--threads", "2"]
    monkeypatch.setattr(sys, "argv", argv)
    args = measured_runs.parse(parser)
    assert args.runs == [Path("a"), Path("b")] and args.threads == 2 and args.images == 3


def test_the_file_names_the_machine_and_threads_beside_the_runs(tmp_path):
    out = tmp_path / "deeper" / "m.json"
    measured_runs.write(out, 2, [{"run": "a"}])
    written = json.loads(out.read_text())
    assert written["threads"] == 2 and written["runs"] == [{"run": "a"}]
    assert isinstance(written["device"], str) and written["device"]


def _report(model: torch.nn.Module) -> dict:
    """A symmetry report's precisions: tensor k of the model gets precision k + 1."""
    layers: dict[str, dict] = {}
    outside = {}
    for k, (name, where) in enumerate(parameter_paths(model).items()):
        if where is None:
            outside[name] = {"prior_precision": k + 1.0}
            continue
        paths = layers.setdefault(where[0], {})
        paths.setdefault(where[1], {"prior_precision": []})["prior_precision"].append(k + 1.0)
    rows = [{"layer": layer, "paths": paths} for layer, paths in layers.items()]
    return {"symmetry": {"layers": rows, "outside": outside}}


def test_learned_precisions_come_back_in_parameter_order():
    model = models.build("f-fc+conv", (1, 32, 32), 3, alpha=1)
    precisions = measured_runs.learned_precisions(model, _report(model))
    assert precisions == [k + 1.0 for k in range(len(list(model.parameters())))]
