"""``benchmarks/paper_tables.py``: the paper's tables as ``train`` runs."""

import json

import pytest

from benchmarks import paper_tables

# runs of a few optimiser steps: at chance by design, so their NotLearningWarning says nothing
pytestmark = pytest.mark.filterwarnings("ignore::laplace_equivariance.chance.NotLearningWarning")


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
    argv = ["paper_tables", "table1", "--models", "conv", "f-fc+conv", "--methods", "map"]
    argv += ["--dataset", "quadrant-mnist", "--alpha", "1", *tiny, "--start", "equivariant"]
    monkeypatch.setattr("sys.argv", [*argv, "--out", str(tmp_path)])
    paper_tables.main()
    folders = sorted(p.name for p in tmp_path.iterdir())
    assert folders == [
        "quadrant-mnist-conv-map-seed0",
        "quadrant-mnist-f-fc+conv-map-equivariant-start-seed0",
    ]
    started = json.loads((tmp_path / folders[1] / "results.json").read_text())
    assert started["settings"]["start"] == "equivariant"
    conv = json.loads((tmp_path / folders[0] / "results.json").read_text())
    assert conv["settings"]["start"] == "mixed"


def test_paper_tables_warms_only_the_learned_runs(tmp_path, monkeypatch):
    """``--temperature 2`` reaches the learned run (its own run folder), not the MAP run,
    which ``train`` would refuse with a temperature."""
    argv = ["paper_tables", "table1", "--models", "f-fc+conv", "--methods", "map", "marglik"]
    argv += ["--dataset", "quadrant-mnist", "--alpha", "1", "--subset", "64"]
    argv += ["--test-subset", "32", "--epochs", "5", "--burnin", "0", "--marglik-subset", "64"]
    monkeypatch.setattr("sys.argv", [*argv, "--temperature", "2", "--out", str(tmp_path)])
    paper_tables.main()
    folders = sorted(p.name for p in tmp_path.iterdir())
    assert folders == [
        "quadrant-mnist-f-fc+conv-map-seed0",
        "quadrant-mnist-f-fc+conv-marglik-temperature2-seed0",
    ]
    learned = json.loads((tmp_path / folders[1] / "results.json").read_text())
    assert learned["settings"]["temperature"] == 2.0
    map_run = json.loads((tmp_path / folders[0] / "results.json").read_text())
    assert map_run["settings"]["temperature"] == 1.0
