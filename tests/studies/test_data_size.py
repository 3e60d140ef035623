"""``studies/data_size.py``: the step budget's schedule, the verdict, a tiny sweep end to end."""

import argparse
import json
import math

import pytest

from laplace_equivariance.app import config
from studies import data_size, data_size_tables, runs_table
from studies.runs_table import RESULTS

# sweeps of a few optimiser steps: at chance by design, so their NotLearningWarning says nothing
pytestmark = pytest.mark.filterwarnings(
    "ignore::laplace_equivariance.marglik.chance.NotLearningWarning"
)


@pytest.mark.parametrize("n_train", [500, 1000, 2000, 4000])
def test_every_size_gets_the_budget_in_steps_and_the_same_number_of_fits(n_train):
    s = data_size.schedule(n_train, steps=1600, batch_size=128, fits=15, held_share=0.1)
    batches = math.ceil(n_train / 128)
    assert s["epochs"] * batches >= 1600 > (s["epochs"] - 1) * batches
    assert s["burnin"] == round(0.1 * s["epochs"])
    assert (s["epochs"] - s["burnin"]) // s["marglik_frequency"] == 15


def test_a_budget_with_no_epoch_after_the_burn_in_is_refused_with_the_fix():
    with pytest.raises(ValueError, match="give more --steps"):
        data_size.schedule(4000, steps=32, batch_size=128, fits=1, held_share=0.9)


def _entry(network, accuracy, nll):
    return {
        "task": "quadrant-mnist-digit",
        "n": 500,
        "network": network,
        "seeds": [0, 1, 2],
        "accuracy": accuracy,
        "nll": nll,
    }


def test_the_verdict_compares_with_the_best_map_network_and_its_spread():
    fixed = [
        _entry("MAP CONV", [90.0, 92.0, 94.0], [0.30, 0.32, 0.34]),
        _entry("MAP FC", [60.0, 61.0, 62.0], [1.2, 1.3, 1.4]),
    ]
    within = data_size.verdicts(
        [_entry("learned F-FC+CONV", [90.0, 91.0, 91.5], [0.3] * 3), *fixed]
    )
    assert within == [
        {
            "task": "quadrant-mnist-digit",
            "n": 500,
            "best_accuracy": "MAP CONV",
            "best_nll": "MAP CONV",
            "accuracy_holds": True,
            "nll_holds": True,
            "paired": {
                "seeds": 3,
                "mean": pytest.approx(-7 / 6),
                "se": pytest.approx(math.sqrt(19 / 12) / math.sqrt(3)),
                "below": 2,
            },
        }
    ]
    below = data_size.verdicts([_entry("learned F-FC+CONV", [88.0, 89.0, 89.5], [0.4] * 3), *fixed])
    assert not below[0]["accuracy_holds"] and not below[0]["nll_holds"]


def test_the_paired_difference_matches_seeds_and_needs_two_in_common():
    learned = _entry("learned F-FC+CONV", [80.0, 70.0, 90.0], [0.5] * 3) | {"seeds": [0, 1, 2]}
    fixed = _entry("MAP CONV", [85.0, 60.0, 75.0], [0.5] * 3) | {"seeds": [2, 0, 3]}
    # seed 0: 80 - 60, seed 2: 90 - 85; seeds 1 and 3 have no partner
    paired = data_size.paired_difference(learned, fixed)
    assert paired == {
        "seeds": 2,
        "mean": pytest.approx(12.5),
        "se": pytest.approx(7.5),
        "below": 0,
    }
    alone = _entry("MAP CONV", [85.0], [0.5]) | {"seeds": [0]}
    assert data_size.paired_difference(learned, alone) is None


def test_the_sweep_rows_list_accuracies_in_seed_order(tmp_path):
    for seed, accuracy in [(2, 0.9), (0, 0.7), (1, 0.8)]:
        run = tmp_path / f"quadrant-mnist-digit-n500-conv-map-seed{seed}"
        run.mkdir()
        settings = json.loads(
            (
                RESULTS / "data-size/quadrant-mnist-digit-n500-conv-map-seed0/results.json"
            ).read_text()
        )
        settings["settings"]["seed"] = seed
        settings["test"]["accuracy"] = accuracy
        (run / "results.json").write_text(json.dumps(settings))
    (entry,) = data_size.sweep_rows(sorted(tmp_path.iterdir(), reverse=True))
    assert entry["seeds"] == [0, 1, 2]
    assert entry["accuracy"] == pytest.approx([70.0, 80.0, 90.0])


def test_a_tiny_sweep_trains_every_network_and_tabulates_it(tmp_path, capsys):
    args = [
        "--out",
        str(tmp_path),
        "--sizes",
        "128",
        "--tasks",
        "quadrant-mnist-digit",
        "--seeds",
        "0",
        "1",
        "--steps",
        "2",
        "--fits",
        "1",
        "--held-share",
        "0.5",
        "--alpha",
        "1",
        "--threads",
        "1",
    ]
    data_size.main(args)
    printed = capsys.readouterr().out
    for network in ("learned F-FC+CONV", "MAP CONV", "MAP FC", "MAP F-FC+CONV"):
        assert f"| quadrant-mnist-digit | 128 | {network} | 2 |" in printed
    assert "quadrant-mnist-digit N=128: accuracy" in printed
    data_size.main([*args, "--figure", str(tmp_path / "sweep.png")])
    assert (tmp_path / "sweep.png").stat().st_size > 0
    learned = tmp_path / "quadrant-mnist-digit-n128-f-fc+conv-marglik-seed0" / "results.json"
    assert '"optimiser_steps": 2' in learned.read_text()


def test_the_ablation_table_states_each_runs_accuracies_without_the_fc_paths():
    table = data_size_tables.ablation().splitlines()
    files = [
        f
        for f in sorted((RESULTS / "path-ablation").glob("*.json"))
        if f.stem not in data_size_tables.ABLATION_OF_SWEEPS
    ]
    runs = [(f.stem, r) for f in files for r in json.loads(f.read_text())["runs"]]
    assert len(table) == 2 + len(runs) and len(runs) >= 6
    for line, (stem, run) in zip(table[2:], runs, strict=True):
        cells = [c.strip() for c in line.strip("|").split("|")]
        assert cells[0] == stem and cells[3] == str(run["settings"]["seed"])
        settings = run["settings"]
        assert cells[2] == (
            "MAP"
            if settings["method"] == "map"
            else f"learned, held {settings['burnin'] / settings['epochs']:.0%}"
        )
        everywhere = run["removed_everywhere"]
        assert cells[5] == f"{100 * everywhere['train']:.1f} / {100 * everywhere['test']:.1f}"
        control = run.get("noise_of_path_size_everywhere")
        assert cells[6] == (
            f"{100 * control['train']:.1f} / {100 * control['test']:.1f}" if control else "-"
        )
        worst = min(run["layers"], key=lambda layer: layer["removed"]["test"])
        assert cells[7].startswith(f"{worst['layer']}: ")


def test_a_sweeps_ablation_is_summarised_by_task_and_size(tmp_path, monkeypatch):
    """Two seeds of one size: means and sample stds of the test accuracies, and the layer
    whose FC term costs most on average (layer b: 0.2 and 0.0 points against a's 0.1 and
    0.05)."""

    def run(seed, test, removed, noised, per_layer):
        return {
            "settings": {"dataset": "quadrant-fashion-item", "subset": 500, "seed": seed},
            "accuracy": {"train": 1.0, "test": test},
            "removed_everywhere": {"train": 1.0, "test": removed},
            "noise_of_path_size_everywhere": {"train": 1.0, "test": noised},
            "layers": [
                {"layer": name, "removed": {"train": 1.0, "test": value}}
                for name, value in zip(("a", "b"), per_layer, strict=True)
            ],
        }

    runs = [run(0, 0.8, 0.5, 0.7, (0.7, 0.6)), run(1, 0.6, 0.3, 0.5, (0.55, 0.6))]
    (tmp_path / "path-ablation").mkdir()
    (tmp_path / "path-ablation" / "fashion-sweep.json").write_text(json.dumps({"runs": runs}))
    monkeypatch.setattr(runs_table, "RESULTS", tmp_path)
    table = data_size_tables.ablation_by_size("fashion-sweep").splitlines()
    assert len(table) == 3
    assert table[2] == (
        "| quadrant-fashion-item | 500 | 2 | 70.0 ± 14.1 | 40.0 ± 14.1 | 60.0 ± 14.1 | b: 10.0 |"
    )
    assert data_size_tables.ablation().count("\n") == 1  # the sweep's file is not run by run
    assert data_size_tables.ablation_by_size("missing") == ""


def test_the_ablation_runs_are_one_row_each_in_percent_with_nan_where_no_control():
    held10 = data_size_tables.ablation_runs("digit-n500-held10")
    run = json.loads((RESULTS / "path-ablation" / "digit-n500-held10.json").read_text())["runs"][0]
    first = held10.iloc[0]
    assert first["seed"] == run["settings"]["seed"] and first["subset"] == 500
    assert first["removed_train"] == pytest.approx(100 * run["removed_everywhere"]["train"])
    control = run["noise_of_path_size_everywhere"]["test"]
    assert first["control_test"] == pytest.approx(100 * control)
    held50 = data_size_tables.ablation_runs("digit-n500-held50")
    assert len(held50) == 3 and held50["control_train"].isna().all()


def test_the_conv_effective_parameters_average_each_networks_seeds():
    table = data_size_tables.conv_effective({"learned CONV": ("data-size", "conv")}).splitlines()
    runs = [
        json.loads(p.read_text())
        for p in sorted(
            (RESULTS / "data-size").glob("quadrant-mnist-digit-n500-conv-marglik-*/results.json")
        )
    ]
    first = sum(r["symmetry"]["layers"][0]["paths"]["conv"]["effective"] for r in runs) / len(runs)
    cells = [c.strip() for c in table[2].strip("|").split("|")]
    assert cells[:2] == ["learned CONV", str(len(runs))]
    assert cells[2].split()[0] == f"{first:.0f}"


def test_the_sweep_passes_its_fit_options_to_the_learned_runs_alone(tmp_path):
    args = argparse.Namespace(
        sizes=[128, 256],
        tasks=["quadrant-mnist-digit"],
        seeds=[0],
        networks=["learned", "map-conv"],
        alpha=1,
        lr=0.003,
        marglik_subset=1000,
        threads=1,
        device="cpu",
        data_dir=None,
        steps=4,
        fits=1,
        held_share=0.5,
        restore_best=True,
        prior_prec_init=0.5,
        temperature=2.0,
        prior_structure="path",
        hypersteps=100,
        lr_hyp=0.3,
        out=tmp_path,
    )
    planned = [(folder.name, settings) for folder, settings in data_size.plan(args)]
    for name, settings in planned:
        learned = "marglik" in name
        assert settings["restore_best"] is learned
        assert settings["prior_prec_init"] == (0.5 if learned else 1.0)
        assert settings["temperature"] == (2.0 if learned else 1.0)
        assert settings["prior_structure"] == ("path" if learned else "layerwise")
        assert settings["hypersteps"] == (100 if learned else 20)
        assert settings["lr_hyp"] == (0.3 if learned else 0.1)
    args.restore_best = False
    assert not any(settings["restore_best"] for _, settings in data_size.plan(args))


def test_the_command_line_hands_the_fit_options_to_the_learned_runs(tmp_path):
    args = data_size.arguments(
        [
            *("--out", str(tmp_path), "--sizes", "500", "--networks", "learned", "map-conv"),
            *("--hypersteps", "100", "--lr-hyp", "0.3", "--temperature", "2"),
            *("--prior-prec-init", "0.5", "--prior-structure", "path"),
        ]
    )
    for folder, settings in data_size.plan(args):
        learned = "marglik" in folder.name
        assert settings["hypersteps"] == (100 if learned else 20)
        assert settings["lr_hyp"] == (0.3 if learned else 0.1)
        assert settings["temperature"] == (2.0 if learned else 1.0)
        assert settings["prior_prec_init"] == (0.5 if learned else 1.0)
        assert settings["prior_structure"] == ("path" if learned else "layerwise")
    defaults = data_size.arguments(["--out", str(tmp_path)])
    assert {name: getattr(defaults, name) for name in data_size.LEARNED_OPTIONS} == {
        name: config.DEFAULTS[name] for name in data_size.LEARNED_OPTIONS
    }


def test_the_seed_by_seed_table_reads_each_networks_runs_in_seed_order():
    table = data_size_tables.seed_by_seed().splitlines()
    assert len(table) == 2 + len(data_size_tables.SEED_BY_SEED)
    folder, model, method = data_size_tables.SEED_BY_SEED["relaxed, FC paths frozen off"]
    runs = sorted(
        (json.loads(p.read_text()) for p in (RESULTS / folder).glob("*/results.json")),
        key=lambda r: r["settings"]["seed"],
    )
    assert all(r["frozen_paths"] == ["fc"] for r in runs) and len(runs) == 3
    (line,) = [row for row in table if row.startswith("| relaxed, FC paths frozen off |")]
    cells = [c.strip() for c in line.strip("|").split("|")][1:]
    assert cells[:3] == [
        f"{100 * r['test']['accuracy']:.1f} / {100 * r['train']['accuracy']:.1f}" for r in runs
    ]
    header = [c.strip() for c in table[0].strip("|").split("|")]
    assert len(cells) == len(header) - 1  # a column per seed: no row runs past the header
    assert set(cells[3:]) == {"-"} and header[-1] == f"seed {len(header) - 2}"


def test_the_fashion_tasks_are_judged_and_sorted_after_the_digit_tasks():
    fashion = [
        {**entry, "task": "quadrant-fashion"}
        for entry in (
            _entry("MAP CONV", [70.0, 72.0, 74.0], [0.9, 1.0, 1.1]),
            _entry("learned F-FC+CONV", [73.0, 74.0, 75.0], [0.8] * 3),
        )
    ]
    verdict = data_size.verdicts([*fashion, _entry("MAP CONV", [90.0, 92.0], [0.3, 0.3])])
    assert [(v["task"], v["accuracy_holds"], v["nll_holds"]) for v in verdict] == [
        ("quadrant-fashion", True, True)
    ]
    assert data_size.ALL_TASKS.index("quadrant-mnist") < data_size.ALL_TASKS.index(
        "quadrant-fashion-item"
    )


def _as_fashion_runs(folder, names):
    """Seeds 0 and 1 of the committed digit runs ``names`` relabelled as Fashion runs."""
    for name in names:
        for seed in (0, 1):
            source = RESULTS / "data-size" / f"quadrant-mnist-n500-{name}-seed{seed}"
            results = json.loads((source / "results.json").read_text())
            results["settings"]["dataset"] = "quadrant-fashion"
            run = folder / f"quadrant-fashion-n500-{name}-seed{seed}"
            run.mkdir()
            (run / "results.json").write_text(json.dumps(results))


def test_the_fashion_sweep_is_tabulated_from_its_own_folder(tmp_path, monkeypatch):
    """Two committed digit runs relabelled as Fashion runs: the page's table, verdicts, missing
    rows and structure read the Fashion folder alone; the evidence's choice appears with
    learned CONV runs beside the learned F-FC+CONV ones."""
    folder = tmp_path / "data-size-fashion"
    folder.mkdir()
    _as_fashion_runs(folder, ("f-fc+conv-marglik", "conv-map"))
    monkeypatch.setattr(runs_table, "RESULTS", tmp_path)
    name = "data-size-fashion"
    assert "| quadrant-fashion | 500 | learned F-FC+CONV | 2 |" in data_size_tables.table(name)
    assert "- quadrant-fashion, N = 500: learned" in data_size_tables.verdicts(name)
    missing = data_size_tables.missing(name, data_size.FASHION_TASKS)
    assert "- quadrant-fashion-item, N = 500: learned F-FC+CONV (0)" in missing
    assert data_size_tables.structure(name).count("| quadrant-fashion | 500 | 0 |") == 1
    assert data_size_tables.evidence(name).verdicts == "No size has two seeds of both yet."
    _as_fashion_runs(folder, ("conv-marglik",))
    chosen = data_size_tables.evidence(name)
    assert "| quadrant-fashion | 500 | 2 | " in chosen.table
    assert "- quadrant-fashion, N = 500: chosen" in chosen.verdicts


def test_the_evidence_splits_of_the_sweeps_runs_set_learned_conv_beside_the_relaxed_runs():
    """The committed splits at 500 images, each rendered as the page renders it."""
    from studies import measured_tables

    files = sorted((RESULTS / "evidence-split").glob("*-500.json"))
    assert len(files) >= 3
    for file in files:
        text = measured_tables.evidence_split_section(f"evidence-split/{file.name}")
        assert text.count("| learned CONV | ") == 1, file.name
        assert text.count("| learned F-FC+CONV, started held | ") == 1, file.name


def test_the_prior_drift_is_the_last_fits_change_of_each_precision():
    def fit(a, b, c):
        return {"prior_precision": {"x": a, "y": b, "z": c}}

    result = {"fits": [fit(1.0, 1.0, 1.0), fit(2.0, 1.0, 4.0), fit(2.0, 1.1, 2.0)]}
    drift = data_size.prior_drift(result)
    assert drift["median"] == pytest.approx(math.log(1.1))
    assert drift["moving"] == pytest.approx(2 / 3)
    assert drift["fits"] == 3
    assert data_size.prior_drift(result, moving=0.5)["moving"] == pytest.approx(1 / 3)
    with pytest.raises(ValueError, match="fitted the marginal likelihood at least twice"):
        data_size.prior_drift({"fits": [fit(1.0, 1.0, 1.0)]})


def test_a_figure_of_tasks_without_runs_names_the_tasks_option(tmp_path):
    with pytest.raises(
        SystemExit, match="No finished run of the tasks quadrant-mnist-digit.*--tasks"
    ):
        data_size.main(["--out", str(tmp_path), "--figure", str(tmp_path / "sweep.png")])
    assert not (tmp_path / "sweep.png").exists()


def test_a_network_keeps_its_colour_in_every_panel():
    """MAP FC ran on one task only: the networks after it in name order keep their colours."""
    entries = [
        {"task": task, "network": network}
        for task, networks in (
            ("quadrant-fashion-item", ("MAP CONV", "learned F-FC+CONV")),
            ("quadrant-fashion", ("MAP CONV", "MAP FC", "learned F-FC+CONV")),
        )
        for network in networks
    ]
    assert data_size.network_colours(entries) == {
        "MAP CONV": "C0",
        "MAP FC": "C1",
        "learned F-FC+CONV": "C2",
    }


def test_the_figure_draws_a_network_in_one_colour_in_every_panel(tmp_path, monkeypatch):
    """The drawn lines, read back from the figure: one colour per network over all panels."""
    import matplotlib.colors
    import matplotlib.pyplot as plt

    drawn = []
    monkeypatch.setattr(plt, "close", drawn.append)
    entries = [
        {"task": task, "network": network, "n": n, "accuracy": [0.5, 0.6], "nll": [1.0, 1.1]}
        for task, networks in (
            ("quadrant-fashion-item", ("MAP CONV", "learned F-FC+CONV")),
            ("quadrant-fashion", ("MAP CONV", "MAP FC", "learned F-FC+CONV")),
        )
        for network in networks
        for n in (500, 1000)
    ]
    data_size.figure(entries, tmp_path / "figure.png")
    colours = {}
    for ax in drawn[0].axes:
        for line in ax.get_lines():
            colours.setdefault(line.get_label(), set()).add(
                matplotlib.colors.to_hex(line.get_color())
            )
    assert set(colours) == {"MAP CONV", "MAP FC", "learned F-FC+CONV"}
    monkeypatch.undo()  # the real close, so the figure does not stay open in pyplot
    plt.close(drawn[0])
    assert all(len(c) == 1 for c in colours.values()), colours


def test_drift_changes_are_the_drift_tables_columns_of_the_chosen_rows():
    folder = "data-size-hypersteps100"
    rows = [
        [cell.strip() for cell in line.split("|")[1:-1]]
        for line in data_size_tables.drift(folder).splitlines()
        if line.startswith("| quadrant-mnist-digit | 500 | learned F-FC+CONV |")
    ]
    assert len(rows) == 10  # seeds 0-9 of the committed variant

    def changes(side, seeds=None):
        values = data_size_tables.drift_changes(folder, "learned F-FC+CONV", side, seeds=seeds)
        return [f"{value:.1f}" for value in values]

    assert changes("sweep") == [row[4] for row in rows]
    assert changes("variant") == [row[6] for row in rows]
    assert changes("variant", seeds=[1, 2]) == [row[6] for row in rows if row[3] in "12"]
    assert data_size_tables.drift_changes(folder, "learned CONV", "sweep", n=1000) == []
