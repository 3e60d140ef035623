"""``studies/paper_tables.py``: the paper's tables as ``train`` runs."""

import json

import pytest

from studies import paper_tables

# runs of a few optimiser steps: at chance by design, so their NotLearningWarning says nothing
pytestmark = pytest.mark.filterwarnings(
    "ignore::laplace_equivariance.marglik.chance.NotLearningWarning"
)


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


COMMITTED = paper_tables.Path("studies/results/table1-20ep")


def test_the_demo_shows_the_left_out_fc_runs_from_the_committed_ones(tmp_path, monkeypatch, capsys):
    """``make demo``'s table trains CONV and F-FC+CONV only; MAP FC comes from the committed runs
    (--compare), and before training it says how long the committed runs took."""
    argv = ["paper_tables", "table1", "--models", "conv", "--alpha", "4", "--markdown"]
    monkeypatch.setattr("sys.argv", [*argv, "--out", str(tmp_path), "--compare", str(COMMITTED)])
    paper_tables.main()
    printed = capsys.readouterr().out
    shown = printed.split("Not trained here", 1)[1].splitlines()[2:]
    rows = [line.split() for line in shown if line.startswith("quadrant-mnist")]
    assert {row[1] for row in rows} == {"fc", "f-fc+conv"}
    assert {row[0] for row in rows} == {"quadrant-mnist", "quadrant-mnist-digit"}


def test_expected_time_sums_the_median_committed_time_of_each_planned_experiment():
    reference = sorted(p.parent for p in COMMITTED.rglob("results.json"))
    planned = [("quadrant-mnist", "conv", "map"), ("nowhere", "conv", "map")]
    runs = paper_tables.runs_of(planned[:1], reference)
    seconds = sorted(json.loads((r / "results.json").read_text())["train_seconds"] for r in runs)
    text = paper_tables.expected_time(planned, reference, n_seeds=2)
    assert f"Training 4 runs: their committed runs took about {2 * seconds[1] / 60:.0f} min" in text
    assert "No committed runs of nowhere-conv-map" in text


def test_the_scripts_import_without_torchs_jit_warning():
    """The first line ``make demo`` printed was torch's jit.script FutureWarning, raised by ASDL
    when a script imports laplace-torch before the package."""
    import subprocess
    import sys

    imported = subprocess.run(
        [sys.executable, "-W", "error::FutureWarning", "-c", "import studies.known_truth"],
        capture_output=True,
        text=True,
    )
    assert imported.returncode == 0, imported.stderr[-2000:]
