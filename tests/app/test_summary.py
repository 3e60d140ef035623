import json
import statistics

import pytest

from laplace_equivariance.app import cli, config, summary


def write_run(folder, seed, accuracy, method="marglik", epochs=20, threads=2, **settings):
    results = {
        "settings": dict(
            config.DEFAULTS,
            dataset="quadrant-mnist",
            model="f-fc+conv",
            method=method,
            alpha=4,
            epochs=epochs,
            seed=seed,
            threads=threads,
            **settings,
        ),
        "device": "Xeon",
        "threads": threads,
        "n_train": 100,
        "train_seconds": 60.0 * (seed + 1),
        "neg_log_marglik": [250.0, 100.0 + seed] if method == "marglik" else [],
        "test": {"accuracy": accuracy, "nll": 0.5},
        "train": {"accuracy": 0.9, "nll": 0.2},
        "evaluated_epoch": epochs,
    }
    folder.mkdir(parents=True)
    (folder / "results.json").write_text(json.dumps(results))
    return folder


def test_mean_std_is_the_mean_and_sample_std_and_marks_a_single_seed():
    """Three seeds: mean and sample (n - 1) std, scaled; one seed has no spread; none is "-"."""
    assert summary.mean_std([0.5, 0.6, 0.7], scale=100) == "60.0 ± 10.0"
    assert summary.mean_std([0.25, 0.5], digits=3) == "0.375 ± 0.177"
    assert summary.mean_std([0.3]) == "0.3 ± -"
    assert summary.mean_std([]) == "-"


def test_seeds_of_one_experiment_form_one_row_with_mean_and_sample_std(tmp_path):
    accuracies = [0.80, 0.84, 0.90]
    runs = [write_run(tmp_path / f"s{i}", i, a) for i, a in enumerate(accuracies)]
    runs.append(write_run(tmp_path / "map", 0, 0.7, method="map"))
    table = summary.markdown(runs).splitlines()
    assert len(table) == 2 + 2  # header, rule, learned (3 seeds), MAP (1 seed)
    cells = [c.strip() for c in table[2].strip("|").split("|")]
    mean = 100 * statistics.fmean(accuracies)
    std = 100 * statistics.stdev(accuracies)
    assert cells[2:5] == ["learned, held start", "0, 1, 2", f"{mean:.1f} ± {std:.1f}"]
    assert cells[7] == "1.01 ± 0.01"  # -log marglik / N of the last step: 100, 101, 102 / 100
    assert cells[8] == "last (20)"
    assert cells[10] == "Xeon, 2 threads"
    single = [c.strip() for c in table[3].strip("|").split("|")]
    assert single[4] == "70.0 ± -" and single[7] == "-"


def test_other_settings_make_other_rows_and_the_best_epoch_is_disclosed(tmp_path):
    runs = [
        write_run(tmp_path / "a", 0, 0.8),
        write_run(tmp_path / "b", 1, 0.8, epochs=60),
        write_run(tmp_path / "c", 2, 0.8, restore_best=True),
    ]
    table = summary.markdown(runs).splitlines()[2:]
    assert len(table) == 3
    assert "best marglik (20)" in table[2]


def test_budget_names_the_burn_in_of_learned_runs(tmp_path):
    runs = [write_run(tmp_path / "a", 0, 0.8, burnin=5), write_run(tmp_path / "b", 0, 0.8)]
    budgets = [row.budget() for row in summary.rows(runs)]
    assert budgets == [
        "20 ep, 100 ex, alpha 4, marglik on 100, burn-in 5 ep",
        f"20 ep, 100 ex, alpha 4, marglik on 100, burn-in {config.DEFAULTS['burnin']} ep",
    ]
    assert (
        "burn-in" not in summary.rows([write_run(tmp_path / "m", 0, 0.8, method="map")])[0].budget()
    )


def test_budget_names_a_learning_rate_other_than_the_default(tmp_path):
    runs = [write_run(tmp_path / "a", 0, 0.8, lr=0.0042426), write_run(tmp_path / "b", 0, 0.8)]
    budgets = [row.budget() for row in summary.rows(runs)]
    assert budgets[0].endswith(", lr 0.0042426") and "lr" not in budgets[1]


def test_hyperparameter_steps_other_than_the_default_name_a_learned_rows_variant(tmp_path):
    runs = [write_run(tmp_path / "a", 0, 0.8, hypersteps=100), write_run(tmp_path / "b", 0, 0.8)]
    rows = summary.rows(runs)
    assert len(rows) == 2
    named = [row.method() for row in rows if "hyperparameter" in row.method()]
    assert len(named) == 1 and named[0].endswith(", 100 hyperparameter steps per fit")
    mapped = write_run(tmp_path / "m", 0, 0.8, method="map", hypersteps=100)
    assert summary.rows([mapped])[0].method() == "MAP"
    single = write_run(tmp_path / "s", 0, 0.8, hypersteps=1)
    assert summary.rows([single])[0].method().endswith(", 1 hyperparameter step per fit")


def test_map_runs_differing_only_in_marglik_settings_are_one_experiment(tmp_path):
    """A MAP run takes no marginal-likelihood step: its prior structure (the command line's
    default changed from "path" to "layerwise") and hyperparameter settings do not matter,
    so committed MAP seeds still compare with new ones; learned runs stay apart."""
    maps = [
        write_run(tmp_path / "a", 0, 0.8, method="map", prior_structure="path", hypersteps=1),
        write_run(tmp_path / "b", 1, 0.8, method="map", prior_structure="layerwise"),
    ]
    assert len(summary.rows(maps)) == 1
    learned = [
        write_run(tmp_path / "c", 0, 0.8, prior_structure="path"),
        write_run(tmp_path / "d", 1, 0.8, prior_structure="layerwise"),
    ]
    assert len(summary.rows(learned)) == 2


def test_machines_of_the_seeds_are_all_named(tmp_path):
    runs = [write_run(tmp_path / "a", 0, 0.8), write_run(tmp_path / "b", 1, 0.8, threads=1)]
    (row,) = summary.rows(runs)
    assert row.machine() == "Xeon, 1 thread; Xeon, 2 threads"


@pytest.mark.parametrize(
    ("speeds", "shown"),
    [
        ((30.0, 40.0, None), "Xeon, 2 threads, 35 GFLOP/s"),  # the median of the runs with one
        ((20.0, 80.0, 30.0), "Xeon, 2 threads, 20-80 GFLOP/s: speeds differ"),
        ((None, None, None), "Xeon, 2 threads"),  # runs from before the speed was recorded
    ],
)
def test_the_machine_cell_gives_the_runs_speed_and_says_when_machines_differ(
    tmp_path, speeds, shown
):
    runs = [write_run(tmp_path / f"s{seed}", seed, 0.8) for seed in range(3)]
    for run, speed in zip(runs, speeds, strict=True):
        if speed is not None:
            results = json.loads((run / "results.json").read_text())
            (run / "results.json").write_text(json.dumps(results | {"device_gflops": speed}))
    (row,) = summary.rows(runs)
    assert row.machine() == shown


def test_a_folder_without_results_raises_saying_what_it_needs(tmp_path):
    with pytest.raises(FileNotFoundError, match="--out folder of a train run"):
        summary.markdown([tmp_path])


def test_report_markdown_from_the_command_line(tmp_path, capsys):
    run = write_run(tmp_path / "a", 0, 0.8)
    assert cli.main(["report", "--markdown", str(run)]) == 0
    assert capsys.readouterr().out.strip() == summary.markdown([run])


def test_compare_says_whether_a_run_is_within_the_committed_seed_spread(tmp_path):
    committed = [write_run(tmp_path / f"ref{i}", i, a) for i, a in enumerate([0.80, 0.82, 0.84])]
    near = write_run(tmp_path / "near", 7, 0.83, threads=1)  # another machine's thread count
    far = write_run(tmp_path / "far", 7, 0.95)
    other = write_run(tmp_path / "other", 7, 0.83, epochs=60)
    lines = summary.compare([near, far, other], committed).splitlines()[1:]
    assert "82.0 ± 2.0 (3)" in lines[0] and lines[0].endswith("within the seed spread")
    assert lines[1].endswith("OUTSIDE the seed spread")
    assert lines[2].endswith("no committed seeds to compare with")


def test_runs_from_before_an_option_existed_group_with_its_default(tmp_path):
    old = write_run(tmp_path / "old", 0, 0.8)
    settings_path = old / "results.json"
    results = json.loads(settings_path.read_text())
    del results["settings"]["kfac_approx"]
    settings_path.write_text(json.dumps(results))
    new = write_run(tmp_path / "new", 1, 0.8)
    reduced = write_run(tmp_path / "reduce", 2, 0.8, kfac_approx="reduce")
    assert [len(row.results) for row in summary.rows([old, new, reduced])] == [2, 1]


def test_structure_table_gives_mean_fc_share_per_layer_and_paths_off(tmp_path):
    runs = []
    for seed, share in enumerate([0.2, 0.004]):
        run = write_run(tmp_path / f"s{seed}", seed, 0.8)
        results = json.loads((run / "results.json").read_text())
        results["symmetry"] = {
            "layers": [
                {"paths": {"fc": {"relative": share}, "conv": {"relative": 1 - share}}},
                {"paths": {"fc": {"relative": 0.5}, "conv": {"relative": 0.5}}},
            ]
        }
        (run / "results.json").write_text(json.dumps(results))
        runs.append(run)
    row = summary.structure_markdown(runs).splitlines()[2]
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[2] == "expand, held start" and cells[7] == "0.10 0.50" and cells[8] == "0, 1"


def test_runs_started_equivariant_are_their_own_experiment_and_say_so(tmp_path):
    mixed = write_run(tmp_path / "mixed", 0, 0.8, start="mixed")  # as train records it
    older = write_run(tmp_path / "older", 1, 0.8)
    results = json.loads((older / "results.json").read_text())
    del results["settings"]["start"]  # runs from before the option started mixed
    (older / "results.json").write_text(json.dumps(results))
    started = write_run(tmp_path / "equivariant", 2, 0.8, start="equivariant")
    rows = summary.rows([mixed, older, started])
    assert [len(row.results) for row in rows] == [2, 1]
    # a relaxed model's learned run started mixed is named so: its default start is held
    assert [row.method() for row in rows] == ["learned, mixed start", "learned, equivariant start"]
    balanced = write_run(tmp_path / "both", 3, 0.8, start="equivariant", balance_factors=True)
    assert summary.rows([balanced])[0].method() == "learned, balanced, equivariant start"
    map_run = write_run(tmp_path / "map", 4, 0.8, method="map", start="equivariant")
    assert summary.rows([map_run])[0].method() == "MAP, equivariant start"
    group = write_run(tmp_path / "group", 5, 0.8, start="held-gconv")
    assert summary.rows([group])[0].method() == "learned, held-gconv start"


def test_runs_with_frozen_paths_are_their_own_experiment_and_say_so(tmp_path):
    free = write_run(tmp_path / "free", 0, 0.8, start="equivariant")
    frozen = write_run(tmp_path / "frozen", 1, 0.9, start="equivariant")
    results = json.loads((frozen / "results.json").read_text())
    results["frozen_paths"] = ["fc"]  # as studies/frozen_paths.py records it
    (frozen / "results.json").write_text(json.dumps(results))
    rows = summary.rows([free, frozen])
    assert [row.method() for row in rows] == [
        "learned, equivariant start",
        "learned, equivariant start, fc frozen",
    ]


def test_a_run_named_twice_or_copied_is_refused(tmp_path, capsys):
    """Two copies of one seed would show as two seeds with a spread of zero."""
    run = write_run(tmp_path / "a", 0, 0.8)
    with pytest.raises(ValueError, match="named twice"):
        summary.markdown([run, tmp_path / "." / "a"])
    copy = write_run(tmp_path / "copy", 0, 0.8, threads=1)
    with pytest.raises(ValueError, match="same experiment with the same seed \\(0\\)"):
        summary.markdown([run, copy])
    with pytest.raises(SystemExit, match="same seed"):
        cli.main(["report", "--markdown", str(run), str(copy)])


def test_a_tempered_rows_evidence_says_its_temperature(tmp_path):
    runs = [write_run(tmp_path / "t", 0, 0.8, temperature=2.0), write_run(tmp_path / "p", 0, 0.8)]
    lines = summary.markdown(runs).splitlines()[2:]
    rows = [[c.strip() for c in line.strip("|").split("|")] for line in lines]
    evidence = {row[2]: row[7] for row in rows}
    assert evidence["learned, held start, temperature 2"] == "1.00 ± - (at T = 2)"
    assert evidence["learned, held start"] == "1.00 ± -"


@pytest.mark.parametrize(
    ("model", "method", "start", "words"),
    [
        ("f-fc+conv", "marglik", "mixed", ["mixed start"]),  # the default is held
        ("f-fc+conv", "marglik", "held", ["held start"]),
        ("f-fc+conv", "map", "mixed", []),  # MAP's default
        ("conv", "marglik", "mixed", []),  # one kind of path: mixed is the only start
        ("f-fc+conv+gconv", "marglik", "held-gconv", ["held-gconv start"]),
        ("f-fc+conv", "marglik", None, ["held start"]),  # None: train's default
    ],
)
def test_a_start_is_named_unless_it_is_the_default_mixed_one(model, method, start, words):
    settings = dict(config.DEFAULTS, model=model, method=method, start=start)
    assert summary.start_words(settings) == words


@pytest.mark.parametrize(
    ("setting", "value", "words"),
    [
        ("prior_structure", "path", "prior structure path"),
        ("batch_size", 64, "batch size 64"),
        ("optimizer", "sgd", "optimizer sgd"),
        ("lr_hyp", 0.05, "lr hyp 0.05"),
        ("kfac_approx", "reduce", "kfac approx reduce"),
        ("stochastic", True, "stochastic on"),
        ("augment", True, "augment on"),
    ],
)
def test_rows_split_by_a_setting_their_label_does_not_show_name_it(
    tmp_path, capsys, setting, value, words
):
    """Two rows of one label would read as one experiment twice (issue 70.5): plain and markdown."""
    default = write_run(tmp_path / "default", 0, 0.8)
    other = write_run(tmp_path / "other", 0, 0.7, **{setting: value})
    lone = write_run(tmp_path / "lone", 0, 0.6, epochs=60)  # its budget tells it apart already
    lines = summary.markdown([default, other, lone]).splitlines()[2:]
    methods = [[c.strip() for c in line.strip("|").split("|")][2] for line in lines]
    default_words = words.split(" ")[0]
    assert methods[1] == f"learned, held start, {words}"
    assert methods[0].startswith("learned, held start, " + default_words)
    assert methods[2] == "learned, held start"
    structure = summary.structure_markdown([default, other]).splitlines()[2:]
    assert len({line.split("|")[3] for line in structure}) == 2
    assert cli.main(["report", str(default), str(other), str(lone)]) == 0
    report = capsys.readouterr().out.splitlines()[1:]
    # the plain report's label (data, model, method) shows neither setting: both are named
    assert words in report[1] and "epochs 20" in report[1]
    assert default_words in report[0] and "epochs 60" in report[2]


def test_the_plain_report_names_the_seed_of_runs_of_one_experiment(tmp_path, capsys):
    runs = [write_run(tmp_path / f"s{seed}", seed, 0.8) for seed in range(2)]
    assert cli.main(["report", *map(str, runs)]) == 0
    report = capsys.readouterr().out.splitlines()[1:]
    assert ["marglik (seed 0)" in report[0], "marglik (seed 1)" in report[1]] == [True, True]


def test_the_plain_report_refuses_a_run_named_twice_as_markdown_does(tmp_path, capsys):
    run = write_run(tmp_path / "a", 0, 0.8)
    for markdown in ([], ["--markdown"]):
        with pytest.raises(SystemExit, match="named twice"):
            cli.main(["report", *markdown, str(run), str(tmp_path / "." / "a")])
    assert capsys.readouterr().out == ""


def write_invariant_run(folder, method, objective):
    """An invariant-weights run as train records it: its objective per example already."""
    results = {
        "settings": dict(
            config.DEFAULTS,
            dataset="rotated-mnist",
            model="invariant-weights",
            method=method,
            width=64,
            epochs=20,
            seed=0,
        ),
        "device": "Xeon",
        "threads": 1,
        "n_train": 60,
        "train_seconds": 60.0,
        "losses": [1.0],
        "neg_log_marglik": [5.0, objective],
        "test": {"accuracy": 0.8, "nll": 0.5},
        "train": {"accuracy": 0.9, "nll": 0.2},
        "evaluated_epoch": 20,
    }
    folder.mkdir(parents=True)
    (folder / "results.json").write_text(json.dumps(results))
    return folder


@pytest.mark.parametrize(
    ("method", "evidence"),
    [("elbo", "3.09 ± - (-ELBO / N)"), ("laplace", "3.09 ± -"), ("likelihood", "-")],
)
def test_an_invariant_weights_rows_objective_is_per_example_once_and_its_width_named(
    tmp_path, method, evidence
):
    """Its objective is recorded per example (3.09 was shown as 3.09 / 60 = 0.05), and its
    width is --width: it has no alpha (issue 70.6)."""
    run = write_invariant_run(tmp_path / method, method, 3.09)
    cells = [c.strip() for c in summary.markdown([run]).splitlines()[2].strip("|").split("|")]
    assert cells[7] == evidence
    assert cells[9] == "20 ep, 60 ex, width 64"
