"""``studies/evidence_selection.py``: per seed, the learned network of higher evidence."""

import json

import pytest

from benchmarks.markdown_table import table as markdown
from studies import data_size, evidence_selection


def write_run(folder, model, seed, neg_log_marglik, accuracy, n_train=500, method="marglik", **s):
    """A finished run's results.json with what the comparison reads."""
    settings = {"dataset": "quadrant-mnist-digit", "model": model, "method": method, "seed": seed}
    settings |= {"epochs": 400, "marglik_subset": 1000, "temperature": 1.0} | s
    folder.mkdir(parents=True)
    results = {
        "settings": settings,
        "n_train": n_train,
        "neg_log_marglik": [2 * neg_log_marglik, neg_log_marglik] if method == "marglik" else [],
        "test": {"accuracy": accuracy, "nll": 1 - accuracy},
        "optimiser_steps": 1600,
    }
    (folder / "results.json").write_text(json.dumps(results))
    return folder


def test_each_seed_chooses_the_run_of_lower_negative_log_evidence(tmp_path):
    """Seed 0: CONV's 1,500 nats against F-FC+CONV's 2,500 (per example 3.0 against 5.0);
    seed 1 the other way; a MAP run and a seed with one candidate are left out."""
    runs = [
        write_run(tmp_path / "c0", "conv", 0, 1500.0, 0.8),
        write_run(tmp_path / "f0", "f-fc+conv", 0, 2500.0, 0.7),
        write_run(tmp_path / "c1", "conv", 1, 2000.0, 0.6),
        write_run(tmp_path / "f1", "f-fc+conv", 1, 1000.0, 0.9),
        write_run(tmp_path / "f2", "f-fc+conv", 2, 1000.0, 0.9),
        write_run(tmp_path / "m0", "conv", 0, 0.0, 0.85, method="map"),
    ]
    paired = evidence_selection.pairs(runs)
    assert [(e["seed"], e["chosen"]) for e in paired] == [
        (0, "learned CONV"),
        (1, data_size.LEARNED),
    ]
    assert paired[0]["evidence"] == {"learned CONV": 3.0, data_size.LEARNED: 5.0}
    (row,) = evidence_selection.selected_rows(paired)
    assert row["network"] == evidence_selection.SELECTED and row["seeds"] == [0, 1]
    assert row["accuracy"] == pytest.approx([80.0, 90.0])
    assert row["chosen"] == ["learned CONV", data_size.LEARNED]
    table = markdown(evidence_selection.evidence_table(paired)).splitlines()
    assert table[2] == (
        "| quadrant-mnist-digit | 500 | 2 | 3.50 ± 0.71 | 3.50 ± 2.12 | "
        "learned CONV 1, learned F-FC+CONV 1 | 85.0 ± 7.1 |"
    )


def test_the_chosen_row_is_judged_as_the_learned_row_is(tmp_path):
    """The chosen runs (80 and 90 %) against a MAP row of 86 ± 1.4 %: within its spread."""
    paired = evidence_selection.pairs(
        [
            write_run(tmp_path / "c0", "conv", 0, 1500.0, 0.8),
            write_run(tmp_path / "f0", "f-fc+conv", 0, 2500.0, 0.7),
            write_run(tmp_path / "c1", "conv", 1, 2000.0, 0.6),
            write_run(tmp_path / "f1", "f-fc+conv", 1, 1000.0, 0.9),
        ]
    )
    fixed = {"task": "quadrant-mnist-digit", "n": 500, "network": "MAP CONV", "seeds": [0, 1]}
    fixed |= {"accuracy": [85.0, 87.0], "nll": [0.5, 0.5]}
    chosen = evidence_selection.selected_rows(paired)
    (verdict,) = data_size.verdicts([fixed, *chosen], evidence_selection.SELECTED)
    assert verdict["best_accuracy"] == "MAP CONV" and verdict["accuracy_holds"]
    assert not data_size.verdicts([fixed, *chosen])  # no learned row among these


def test_runs_whose_evidence_was_fitted_on_different_data_are_refused(tmp_path):
    runs = [
        write_run(tmp_path / "c0", "conv", 0, 1500.0, 0.8, marglik_subset=500),
        write_run(tmp_path / "f0", "f-fc+conv", 0, 2500.0, 0.7),
    ]
    with pytest.raises(ValueError, match="different data.*--marglik-subset"):
        evidence_selection.pairs(runs)


def test_a_learned_run_without_a_fit_is_refused(tmp_path):
    runs = [
        write_run(tmp_path / "c0", "conv", 0, 1500.0, 0.8),
        write_run(tmp_path / "f0", "f-fc+conv", 0, 2500.0, 0.7),
    ]
    results = json.loads((runs[0] / "results.json").read_text())
    results["neg_log_marglik"] = []
    (runs[0] / "results.json").write_text(json.dumps(results))
    with pytest.raises(ValueError, match="no marginal likelihood"):
        evidence_selection.pairs(runs)


def test_the_command_prints_the_table(tmp_path, capsys):
    write_run(tmp_path / "c0", "conv", 0, 1500.0, 0.8)
    write_run(tmp_path / "f0", "f-fc+conv", 0, 2500.0, 0.7)
    evidence_selection.main([str(tmp_path)])
    assert "| quadrant-mnist-digit | 500 | 1 | 3.00 ± - | 5.00 ± - | learned CONV 1 |" in (
        capsys.readouterr().out
    )
