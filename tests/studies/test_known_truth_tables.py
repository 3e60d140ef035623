"""The tables of docs/learned_structure.md, from the known-truth runs."""

import json

import pytest

from benchmarks.markdown_table import table
from pages import render_pages
from studies import known_truth_tables


def test_the_page_shows_the_tables_of_the_committed_runs():
    """docs/learned_structure.md renders the known-truth tables of the committed JSONs."""
    page = render_pages.render("learned_structure.md")
    tables = "\n\n".join(table(frame) for frame in known_truth_tables.tables())
    assert "| balanced-adam |" in tables and tables in page
    assert table(known_truth_tables.rotation_tables()) in page
    assert table(known_truth_tables.long_schedule_table()) in page


def _run(folder, model, seed, precisions, norms, relative):
    """One known-truth run of one layer under ``folder``."""
    layer = {
        "layer": "layer1",
        "fc_prior_precision": precisions,
        "fc_squared_norm": norms,
        "fc_relative": relative,
    }
    record = {"settings": {"model": model}, "test_accuracy": 0.9, "layers": [layer]}
    (folder / f"shifted-digits-seed{seed}.json").write_text(json.dumps(record))


def test_the_weight_precision_table_reads_only_the_weight_tensors(tmp_path):
    # a folder named as its model is labelled by the model alone
    factored, plain = tmp_path / "factored", tmp_path / "fc+conv"
    factored.mkdir(), plain.mkdir()
    # F-FC: two maps, then biases whose precisions must not count; FC: one weight, one bias
    _run(factored, "f-fc+conv", 0, [150.0, 48.0, 1e9, 1e9], [1e-16, 2e-16, 1.0, 1.0], 1e-7)
    _run(factored, "f-fc+conv", 1, [200.0, 60.0, 1e9, 1e9], [1e-16, 2e-16, 1.0, 1.0], 2e-7)
    _run(plain, "fc+conv", 0, [3e6, 1e9], [1e-8, 1.0], 1e-7)
    rows = known_truth_tables.weight_precision_table([factored, plain]).values.tolist()
    assert rows[0][0] == "factored (f-fc+conv)"
    assert rows[0][3:] == ["4.8e+01 - 2.0e+02", "3.0e-16", "1.0e-07 - 2.0e-07"]
    assert rows[1][3:5] == ["3.0e+06", "1.0e-08"]
    assert rows[1][0] == "fc+conv"


def test_the_weight_precision_table_refuses_a_model_it_cannot_read(tmp_path):
    _run(tmp_path, "conv", 0, [1.0], [1.0], 0.0)
    with pytest.raises(ValueError, match="no weight tensors known"):
        known_truth_tables.weight_precision_table([tmp_path])


def test_precisions_above_count_the_pairs_whose_weights_pass(tmp_path):
    _run(tmp_path, "f-fc+conv", 0, [2e6, 48.0, 1e9, 1e9], [1e-16, 2e-16, 1.0, 1.0], 1e-7)
    _run(tmp_path, "f-fc+conv", 1, [150.0, 48.0, 1e9, 1e9], [1e-16, 2e-16, 1.0, 1.0], 1e-7)
    assert known_truth_tables.precisions_above(tmp_path) == (1, 2)


def test_the_command_prints_every_table(capsys):
    from studies import known_truth

    known_truth.main(["--table"])
    printed = capsys.readouterr().out
    for frame in [*known_truth_tables.tables(), known_truth_tables.rotation_tables()]:
        assert frame.columns[-1] in printed  # each table's header
    assert "| balanced-adam " in printed and "| held-gconv " in printed
