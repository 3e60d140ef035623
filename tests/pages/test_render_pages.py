"""The template renderer of the generated pages (``pages.render_pages``), its runs table
(``studies.runs_table``) and the staleness check of ``pages.results_tables``."""

import json

import jinja2
import pandas as pd
import pytest

from benchmarks.markdown_table import table
from pages import page_tables, page_values, render_pages, results_tables
from studies import runs_table


def _run(
    seed: int, accuracy: float, lr: float = 0.003, fc: float = 0.5, evidence: float = 200.0
) -> dict:
    """A results.json of a learned two-layer run."""
    layer = {"paths": {"fc": {"relative": fc, "effective": 10 * fc}, "conv": {"relative": 0.1}}}
    layer["paths"]["conv"]["effective"] = 1.0
    settings = {
        "dataset": "mnist",
        "model": "f-fc+conv",
        "method": "marglik",
        "lr": lr,
        "seed": seed,
    }
    settings |= {"epochs": 20, "alpha": 4, "burnin": 5, "marglik_subset": None, "hypersteps": 20}
    return {
        "settings": settings,
        "versions": {"laplace_equivariance": "0.4.0"},
        "device": "cpu",
        "threads": 1,
        "train_seconds": 60.0 * (seed + 1),
        "evaluated_epoch": 20,
        "n_train": 100,
        "test": {"accuracy": accuracy, "nll": 1 - accuracy},
        "train": {"accuracy": 1.0, "nll": 0.0},
        "neg_log_marglik": [300.0, evidence + seed],
        "symmetry": {"layers": [layer, layer]},
        "path_outputs": [{"paths": {"fc": fc / 2, "conv": 1 - fc / 2}}] * 2,
        "fits": [
            {
                "epoch": epoch,
                "neg_log_marglik": 300.0 - epoch,
                "prior_precision": {"layer1.fc.input_map.weight": epoch * 10.0 ** (seed + 1)},
                "squared_norm": {"layer1.fc.input_map.weight": 1.0},
                "path_outputs": [{"paths": {"fc": epoch / 100, "conv": 1 - epoch / 100}}],
            }
            for epoch in (5, 10)
        ],
    }


@pytest.fixture
def fixture_runs(tmp_path, monkeypatch):
    """Three seeds of one experiment and two of another (another lr) under ``t/``."""
    runs = [_run(0, 0.80, fc=0.1), _run(1, 0.82, fc=0.3), _run(2, 0.84, fc=0.2)]
    runs += [_run(0, 0.5, lr=0.01, evidence=150.0), _run(1, 0.6, lr=0.01, evidence=150.0)]
    for i, result in enumerate(runs):
        folder = tmp_path / "t" / f"run{i}"
        folder.mkdir(parents=True)
        (folder / "results.json").write_text(json.dumps(result))
    other = tmp_path / "t" / "study" / "results.json"  # another script's file: no run
    other.parent.mkdir()
    other.write_text(json.dumps({"task": "x", "settings": {"epochs": 1}}))
    monkeypatch.setattr(runs_table, "RESULTS", tmp_path)
    runs_table.clear_caches()
    yield runs_table.runs()
    runs_table.clear_caches()


def test_the_runs_table_has_a_row_per_run_with_settings_metrics_and_symmetry(fixture_runs):
    frame = fixture_runs
    assert len(frame) == 5
    assert list(frame["run"]) == [f"t/run{i}" for i in range(5)]
    assert set(frame["folder"]) == {"t"}
    assert frame["test_acc"].tolist() == pytest.approx([80, 82, 84, 50, 60])
    assert frame["marglik_per_example"].tolist() == pytest.approx([2.0, 2.01, 2.02, 1.5, 1.51])
    assert frame["fc.relative.2"].tolist() == pytest.approx([0.1, 0.3, 0.2, 0.5, 0.5])
    assert frame["fc.output.1"].tolist() == pytest.approx([0.05, 0.15, 0.1, 0.25, 0.25])
    assert frame["start"].tolist() == ["mixed"] * 5  # an option added later, as older runs had it
    assert frame["experiment"].nunique() == 2  # the seeds of each lr are one experiment


def test_pick_takes_one_experiments_seeds_and_the_filters_give_mean_and_std(fixture_runs):
    runs = page_values.pick("t", "f-fc+conv", "marglik", lr=0.003)
    assert runs["seed"].tolist() == [0, 1, 2]
    assert page_values.pm(runs["test_acc"]) == "82.0 ± 2.0"
    assert page_values.pm(runs["test_nll"], 2) == "0.18 ± 0.02"
    assert page_values.pm([5.0]) == "5.0 ± -"
    other = page_values.pick("t", "f-fc+conv", "marglik", lr=0.01)
    assert page_values.pm(other["test_acc"]) == "55.0 ± 7.1"
    first_two = page_values.pick("t", "f-fc+conv", "marglik", lr=0.003, seeds="0,1")
    assert page_values.span(page_values.minus(other, first_two), signed=True) == (
        "\u221230.0 to \u221222.0"
    )
    with pytest.raises(ValueError, match="seeds differ"):
        page_values.minus(other, runs)
    assert page_values.pick("t", "f-fc+conv", "marglik", lr=0.003, seeds="2,0")[
        "seed"
    ].tolist() == [
        2,
        0,
    ]
    with pytest.raises(ValueError, match="picks 2 experiments"):
        page_values.pick("t", "f-fc+conv", "marglik")
    with pytest.raises(ValueError, match="picks 0 experiments"):
        page_values.pick("t", "conv", "map")
    with pytest.raises(ValueError, match="no column"):
        page_values.pick("t", "f-fc+conv", "marglik", colour="red")


def test_layers_chooses_a_path_family_over_seeds_and_layers(fixture_runs):
    runs = page_values.pick("t", "f-fc+conv", "marglik", lr=0.003)
    assert page_values.layers(runs, "fc.relative") == pytest.approx([0.1, 0.1, 0.3, 0.3, 0.2, 0.2])
    assert page_values.span(page_values.layers(runs, "fc.relative", "2"), 2) == "0.10-0.30"
    with pytest.raises(ValueError, match="layers 3 not among"):
        page_values.layers(runs, "fc.relative", "3")
    with pytest.raises(ValueError, match="missing"):
        page_values.layers(runs, "gconv.relative")


def test_below_counts_the_paths_off_per_seed(fixture_runs):
    runs = page_values.pick("t", "f-fc+conv", "marglik", lr=0.003)
    assert page_values.below(runs, "fc.relative", under=0.15) == [2, 0, 0]
    assert page_values.below(runs, "fc.relative", "2", under=0.15) == [1, 0, 0]
    assert page_values.below(runs, "relative", under=0.15) == [4, 2, 2]  # conv's 0.1 too
    assert page_values.below(runs, "fc.output", under=0.1) == [2, 0, 0]


def test_kept_by_evidence_keeps_each_seeds_run_of_the_highest_evidence(fixture_runs):
    from pages import page_tables

    kept = page_tables.kept_by_evidence(["t"], "f-fc+conv")
    assert kept["seed"].tolist() == [0, 1, 2]
    assert kept["lr"].tolist() == [0.01, 0.01, 0.003]  # the seed with one run keeps it


def test_experiments_is_the_results_table_one_row_per_experiment(fixture_runs):
    frame = page_values.experiments("t")
    assert list(frame.columns[:5]) == ["data", "model", "method", "seeds", "test acc %"]
    assert frame["seeds"].tolist() == ["0, 1, 2", "0, 1"]
    assert frame["test acc %"].tolist() == ["82.0 ± 2.0", "55.0 ± 7.1"]
    assert frame["minutes"].tolist() == ["2.0 ± 1.0", "1.5 ± 0.7"]
    assert frame["method"].tolist() == ["learned, mixed start"] * 2  # the budget tells them
    assert frame["budget"].tolist()[1].endswith(", lr 0.01")
    assert table(frame).splitlines()[1] == "|---|" + "---|" * 11


def test_experiments_keeps_the_runs_its_filters_name(fixture_runs):
    assert page_values.experiments("t", lr=0.01)["seeds"].tolist() == ["0, 1"]
    assert len(page_values.experiments("t", lr=[0.01, 0.003])) == 2
    with pytest.raises(ValueError, match="no run"):
        page_values.experiments("t", lr=0.5)


def test_the_lead_counts_each_sections_verdicts_and_links_it():
    body = "\n".join(
        [
            "## S: one",
            "- a above b (the paper: within 1%): reproduced (difference +1.0 points, ...)",
            "- c: **not reproduced: reversed** (difference -3.0 points, ...)",
            "- seed 0: higher in 1 of 8 layers (3); mean over layers 92 % against 93 %",
            "- target in most layers, in every seed (3 seeds): fails",
            "- FC near zero on translated digits: holds (largest FC share seed 0: 0.5 %)",
            "## Nothing judged",
            "- a list item that is no verdict",
            "## T",
            "- e: one seed: no verdict",
        ]
    )
    assert page_values.lead(body) == (
        "- [S: one](#s-one): 1 reproduced, 1 holds, 1 **reversed**, 1 **fails**\n"
        "- [T](#t): 1 one seed"
    )


def test_older_versions_names_the_runs_made_before_a_change_that_affects_them(
    fixture_runs, tmp_path
):
    assert page_tables.older_versions("t") == ""
    result = json.loads((tmp_path / "t" / "run0" / "results.json").read_text())
    result["versions"]["laplace_equivariance"] = "0.2.5"
    (tmp_path / "t" / "run0" / "results.json").write_text(json.dumps(result))
    runs_table.clear_caches()
    text = page_tables.older_versions("t")
    assert text.startswith("\n\nMade before version 0.3.0, when relaxed layers averaged")
    assert text.endswith(
        ": mnist f-fc+conv marglik (0.2.5). They record that version's behaviour, not "
        "the current code's."
    )


def test_the_fits_of_runs_their_outputs_and_tensors(fixture_runs):
    runs = page_values.pick("t", "f-fc+conv", "marglik", lr=0.003)
    assert len(page_values.fits_of(runs)) == 6
    last = page_values.fits_of(runs, epoch=10)
    assert page_values.layers(last, "fc.output", scale=100) == [10.0] * 3
    assert (
        page_values.per_run(page_values.fits_of(runs, since=5), "fc.output", how="max") == [0.1] * 3
    )
    with pytest.raises(ValueError, match="no fit at epoch=7"):
        page_values.fits_of(runs, epoch=7)
    precisions = page_values.tensors(runs, "precision", "fc.input_map.weight")
    assert precisions == [100.0, 1000.0, 10000.0]  # each run's last fit
    assert page_values.sci(precisions) == "100-1e4"
    assert page_values.sci(page_values.tensors(runs, "precision", "weight", epoch=5)) == (
        "50-5,000"
    )
    with pytest.raises(ValueError, match="no precision"):
        page_values.tensors(runs, "precision", "conv.weight")


def test_layer_means_average_each_layer_over_the_seeds(fixture_runs):
    runs = page_values.pick("t", "f-fc+conv", "marglik", lr=0.003)
    assert page_values.layer_means(runs, "fc.effective") == pytest.approx([2.0, 2.0])
    assert page_values.seeds(page_values.layer_means(runs, "fc.relative", "2"), 2) == "0.20"


def test_higher_layers_pair_two_sets_of_runs_seed_by_seed(fixture_runs):
    from pages import page_tables

    turned = page_values.pick("t", "f-fc+conv", "marglik", lr=0.01)
    upright = page_values.pick("t", "f-fc+conv", "marglik", lr=0.003, seeds="0,1")
    assert page_tables.higher_layers(turned, upright, "fc.relative") == [2, 2]
    assert page_tables.higher_layers(upright, turned, "fc.relative") == [0, 0]
    assert page_tables.higher_in_most(turned, upright, "fc.relative") == 2
    everything = page_values.pick("t", "f-fc+conv", "marglik", lr=0.003)
    with pytest.raises(ValueError, match="seeds differ"):
        page_tables.higher_layers(turned, everything, "fc.relative")


def test_growth_pairs_each_paths_effective_parameters_seed_and_layer():
    def runs(fc, conv, gconv):
        """Two seeds of a two-layer run: each path's effective parameters per (seed, layer)."""
        frame = {}
        for name, values in (("fc", fc), ("conv", conv), ("gconv", gconv)):
            for layer in (1, 2):
                frame[f"{name}.effective.{layer}"] = [values[0][layer - 1], values[1][layer - 1]]
        return pd.DataFrame(frame | {"seed": [0, 1]})

    upright = runs([[1, 1], [1, 1]], [[1, 1], [1, 1]], [[1, 1], [1, 1]])
    turned = runs([[2, 0.5], [3, 1]], [[4, 2], [1, 3]], [[2, 3], [2, 2]])
    assert page_tables.growth(turned, upright, "fc") == [2, 0.5, 3, 1]
    assert page_tables.growth(turned, upright, "conv", "2") == [2, 3]
    assert page_tables.grown(turned, upright) == "9 of the 12"  # 0.5 and two 1s do not grow
    assert page_tables.conv_faster(turned, upright) == [1, 1]  # seed 0: layer 1, seed 1: layer 2
    assert page_tables.conv_faster(turned, upright, "1") == [1, 0]


def test_a_template_naming_a_missing_value_fails_loudly(fixture_runs):
    env = render_pages.environment()
    text = "{{ pick('t', 'f-fc+conv', 'marglik', lr=0.003).test_acc | pm }} %"
    assert env.from_string(text).render() == "82.0 ± 2.0 %"
    with pytest.raises(jinja2.UndefinedError):
        env.from_string("{{ accuracy }}").render()
    with pytest.raises(jinja2.UndefinedError):
        env.from_string(text.replace("test_acc", "test_accuracy")).render()
    with pytest.raises(ValueError, match="picks 0"):
        env.from_string(text.replace("'t'", "'gone'")).render()


def test_value_reads_a_number_of_a_committed_json(tmp_path, monkeypatch):
    (tmp_path / "r.json").write_text(json.dumps({"rows": [{"m": "a", "s": 1.5}, {"m": "b"}]}))
    monkeypatch.setattr(runs_table, "RESULTS", tmp_path)
    runs_table.clear_caches()
    try:
        assert page_values.value("r", "rows/m=a/s") == 1.5
        assert page_values.value("r", "rows/0/s") == 1.5
        with pytest.raises(ValueError, match="no 's' there"):
            page_values.value("r", "rows/m=b/s")
        with pytest.raises(FileNotFoundError):
            page_values.value("gone", "rows")
    finally:
        runs_table.clear_caches()


def test_precision_gradients_reads_a_factor_balance_measurement(tmp_path, monkeypatch):
    def layer(*fc: float) -> dict:
        return {"fc": {"log_precision_gradient": list(fc)}, "conv": {"log_precision_gradient": [9]}}

    run = {"before": {"layers": {"layer1": layer(0.5, -1.0)}}}
    run["after"] = {"layers": {"layer1": layer(40.0, -2.0), "layer2": layer(3.0, 1.0)}}
    (tmp_path / "fb.json").write_text(json.dumps({"runs": [run, run]}))
    monkeypatch.setattr(runs_table, "RESULTS", tmp_path)
    assert page_tables.precision_gradients("fb", "before") == [0.5, -1.0, 0.5, -1.0]
    assert max(page_tables.precision_gradients("fb", "after"), key=abs) == 40.0
    assert page_tables.precision_gradients("fb", "after", "conv") == [9.0] * 4
    with pytest.raises(ValueError, match="before or after"):
        page_tables.precision_gradients("fb", "during")


def test_a_stale_page_fails_the_check(tmp_path, monkeypatch):
    page = tmp_path / "page.md"
    page.write_text("old figures\n")
    pages = {page: lambda: "new figures\n"}
    assert results_tables.stale(pages) == [page]
    monkeypatch.setattr(results_tables, "documents", lambda: pages)
    assert results_tables.main(["--check"]) == 1
    assert page.read_text() == "old figures\n"
    assert results_tables.main([]) == 0
    assert page.read_text() == "new figures\n"
    assert results_tables.main(["--check"]) == 0
    assert results_tables.stale({tmp_path / "missing.md": lambda: ""}) == [tmp_path / "missing.md"]


def test_evidence_picks_counts_the_seeds_as_the_evidence_selection_study_does():
    from studies import evidence_selection

    folder = runs_table.RESULTS / "data-size"
    paired = evidence_selection.pairs(sorted(p.parent for p in folder.glob("*/results.json")))
    (row,) = [
        r
        for r in evidence_selection.selected_rows(paired)
        if (r["task"], r["n"]) == ("quadrant-mnist", 2000)
    ]
    conv = row["chosen"].count("learned CONV")
    picked = page_tables.evidence_picks("data-size", "quadrant-mnist", [2000])
    assert picked == f"{conv} of {len(row['chosen'])}"
    relaxed = page_tables.evidence_picks("data-size", "quadrant-mnist", [2000], "f-fc+conv")
    assert relaxed == f"{len(row['chosen']) - conv} of {len(row['chosen'])}"
    with pytest.raises(ValueError, match="conv or f-fc\\+conv"):
        page_tables.evidence_picks("data-size", "quadrant-mnist", [2000], "fc")
