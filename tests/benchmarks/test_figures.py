"""Figures in the docs' prose are rendered from the committed runs, never typed."""

import json

import pytest

from benchmarks.generated_docs import figures
from benchmarks.generated_docs.common import RESULTS
from benchmarks.generated_docs.figures import common, run_rows
from laplace_equivariance.app import summary

HELD_150 = "table1-digit-4000-150ep-held f-fc+conv marglik"


def test_a_placeholder_renders_its_rows_mean_and_spread_per_seed_and_evidence():
    runs = sorted(
        p.parent for p in (RESULTS / "table1-digit-4000-150ep-held").rglob("results.json")
    )
    (row,) = summary.rows(runs)
    text = f"at {{{{acc {HELD_150}}}}} % ({{{{acc_seeds {HELD_150}}}}} %)"
    expected = " / ".join(f"{a:.1f}" for a in row.accuracy())
    assert figures.render(text) == f"at {summary.mean_std(row.accuracy())} % ({expected} %)"
    marglik = figures.render(f"{{{{marglik_seeds {HELD_150}}}}}").split(" / ")
    assert [float(m.replace(",", "")) for m in marglik] == pytest.approx(
        [r["neg_log_marglik"][-1] for r in row.results], abs=0.5
    )


def test_a_placeholder_that_picks_several_rows_none_or_no_folder_is_refused():
    with pytest.raises(ValueError, match="picks 2 rows.*key=value filters"):
        figures.render("{{acc table1-20ep f-fc+conv map}}")  # both tasks: name the dataset
    with pytest.raises(ValueError, match="picks 0 rows"):
        figures.render("{{acc table1-20ep f-fc+conv map dataset=mnist}}")
    with pytest.raises(ValueError, match="holds no run"):
        figures.render("{{acc no-such-folder conv map}}")
    with pytest.raises(ValueError, match="unknown kind 'accuracy'"):
        figures.render(f"{{{{accuracy {HELD_150}}}}}")


def test_per_seed_counts_read_as_prose_from_each_runs_layers():
    runs = sorted(
        p.parent for p in (RESULTS / "table1-digit-4000-150ep-held").rglob("results.json")
    )
    results = summary.rows(runs)[0].results
    off = [
        sum(row["paths"]["fc"]["relative"] < 0.01 for row in r["symmetry"]["layers"][:6])
        for r in results
    ]
    expected = f"{off[0]}, {off[1]} and {off[2]}"
    assert figures.render(f"{{{{fc_off_first_six {HELD_150}}}}}") == expected
    quiet = [sum(layer["paths"]["fc"] < 0.01 for layer in r["path_outputs"]) for r in results]
    assert (
        figures.render(f"{{{{fc_output_off {HELD_150}}}}}")
        == ", ".join(map(str, quiet[:-1])) + f" and {quiet[-1]}"
    )


QUADRANT_60 = "table1-quadrant-4000-60ep-held f-fc+conv marglik dataset=quadrant-mnist start=held"


def _quadrant_60_results() -> list[dict]:
    runs = sorted(
        p.parent for p in (RESULTS / "table1-quadrant-4000-60ep-held").rglob("results.json")
    )
    return summary.rows(runs)[0].results


def test_ranges_span_every_seed_and_the_chosen_layers_of_a_path():
    results = _quadrant_60_results()
    outputs = [100 * r["path_outputs"][6]["paths"]["fc"] for r in results]
    shares = [
        r["symmetry"]["layers"][i]["paths"]["conv"]["relative"] for r in results for i in range(6)
    ]
    assert figures.render(f"{{{{output_range {QUADRANT_60} layers=7}}}}") == (
        f"{min(outputs):.1f}-{max(outputs):.1f}"
    )
    assert figures.render(f"{{{{output_max {QUADRANT_60} layers=7 digits=2}}}}") == (
        f"{max(outputs):.2f}"
    )
    assert figures.render(f"{{{{share_range {QUADRANT_60} path=conv layers=1-6 digits=3}}}}") == (
        f"{min(shares):.3f}-{max(shares):.3f}"
    )
    assert figures.render(f"{{{{share_max {QUADRANT_60} path=conv layers=1-6}}}}") == (
        f"{max(shares):.2f}"
    )
    effective = [r["symmetry"]["layers"][7]["paths"]["fc"]["effective"] for r in results]
    assert figures.render(f"{{{{effective_range {QUADRANT_60} layers=8 digits=1}}}}") == (
        f"{min(effective):,.1f}-{max(effective):,.1f}"
    )


def test_a_range_whose_ends_round_alike_is_one_value():
    assert common.span([0.1234, 0.1236], 2) == "0.12"
    assert common.span([1234.0, 5678.0], 0) == "1,234-5,678"


def test_a_range_of_a_missing_path_or_no_layer_is_refused():
    with pytest.raises(ValueError, match="has no path 'gconv'"):
        figures.render(f"{{{{share_range {QUADRANT_60} path=gconv}}}}")
    with pytest.raises(ValueError, match="layers=9 chooses no layer"):
        figures.render(f"{{{{output_range {QUADRANT_60} layers=9}}}}")


SHIFTS = "shift-errors/table1-digit-4000-150ep"


def test_measurement_families_read_their_file_over_runs_and_layers():
    import json

    runs = json.loads((RESULTS / f"{SHIFTS}.json").read_text())["runs"]
    layer = [r["layers"][k]["shift_error"] for r in runs for k in (5, 6)]
    fc_share = [100 * r["layers"][3]["paths"]["fc"]["share"] for r in runs[:1]]
    unchanged = [100 * r["prediction_unchanged"] for r in runs]
    assert figures.render(f"{{{{shift_range {SHIFTS} layers=6-7}}}}") == (
        f"{min(layer):.2f}-{max(layer):.2f}"
    )
    assert figures.render(f"{{{{shift_max {SHIFTS} layers=6-7 digits=3}}}}") == f"{max(layer):.3f}"
    rendered = f"{{{{shift_range {SHIFTS} layers=4 path=fc of=share run=0 percent=yes digits=1}}}}"
    assert figures.render(rendered) == f"{fc_share[0]:.1f}"
    assert figures.render(f"{{{{unchanged_range {SHIFTS}}}}}") == (
        f"{min(unchanged):.0f}-{max(unchanged):.0f}"
    )


def test_a_measurement_with_an_unknown_key_or_file_is_refused():
    with pytest.raises(ValueError, match="unknown keys \\['seed'\\]"):
        figures.render(f"{{{{shift_range {SHIFTS} seed=0}}}}")
    with pytest.raises(ValueError, match="shift-errors/none.json does not exist"):
        figures.render("{{shift_max shift-errors/none}}")


HELD_QUADRANT = (
    "table1-quadrant-4000-100ep-mc-held f-fc+conv marglik dataset=quadrant-mnist start=held"
)


def test_fit_families_read_the_fits_each_run_recorded():
    runs = sorted(
        p.parent for p in (RESULTS / "table1-quadrant-4000-100ep-mc-held").rglob("results.json")
    )
    results = [
        r for row in summary.rows(runs) if row.settings["method"] == "marglik" for r in row.results
    ]

    def shares(result, keep, layers):
        return [
            100 * f["path_outputs"][k]["paths"]["fc"]
            for f in result["fits"]
            if keep(f["epoch"])
            for k in layers
        ]

    layer7 = [max(shares(r, lambda e: e == 100, [6])) for r in results]
    later = [v for r in results for v in shares(r, lambda e: e >= 15, range(6))]
    assert figures.render(f"{{{{fit_output_seeds {HELD_QUADRANT} epoch=100 layers=7}}}}") == (
        " / ".join(f"{v:.0f}" for v in layer7)
    )
    assert figures.render(
        f"{{{{fit_output_max {HELD_QUADRANT} from=15 layers=1-6 digits=2}}}}"
    ) == (f"{max(later):.2f}")
    with pytest.raises(ValueError, match="no fit at epoch=7"):
        figures.render(f"{{{{fit_output_max {HELD_QUADRANT} epoch=7}}}}")


def test_known_truth_families_read_every_seed_of_a_setting_and_task():
    folder = RESULTS / "known-truth" / "balanced-adam"
    runs = [json.loads(p.read_text()) for p in sorted(folder.glob("shifted-digits-seed*.json"))]
    assert len(runs) == 3
    largest = max(row["fc_relative"] for run in runs for row in run["layers"][:3])
    assert figures.render("{{known_fc_max balanced-adam shifted-digits layers=1-3}}") == (
        f"{largest:.3f}"
    )
    first = max(run["layers"][0]["fc_relative"] for run in runs)
    assert figures.render("{{known_fc_max balanced-adam shifted-digits layers=1 digits=2}}") == (
        f"{first:.2f}"
    )
    accuracy = [run["test_accuracy"] for run in runs]
    assert figures.render("{{known_acc balanced-adam shifted-digits}}") == summary.mean_std(
        accuracy, scale=100
    )
    shift = [run["shift_consistency"] for run in runs]
    assert figures.render("{{known_shift balanced-adam shifted-digits digits=2}}") == (
        summary.mean_std(shift, scale=100, digits=2)
    )
    with pytest.raises(ValueError, match="has no no-such-task run"):
        figures.render("{{known_acc balanced-adam no-such-task}}")
    with pytest.raises(ValueError, match="unknown keys"):
        figures.render("{{known_acc balanced-adam shifted-digits seed=0}}")


def test_a_value_placeholder_follows_keys_indices_and_field_selections():
    report = json.loads((RESULTS / "fit_over_epoch-cpu.json").read_text())
    (row,) = [r for r in report["rows"] if r["model"] == "f-fc+conv"]
    path = "rows/model=f-fc+conv/exact/fit_over_epoch"
    assert figures.render(f"{{{{value fit_over_epoch-cpu {path} digits=3}}}}") == (
        f"{row['exact']['fit_over_epoch']:.3f}"
    )
    assert figures.render("{{value fit_over_epoch-cpu rows/0/n digits=0}}") == (
        f"{report['rows'][0]['n']:,}"
    )
    assert figures.render("{{value fit_over_epoch-cpu targets/mc percent=yes digits=0}}") == (
        f"{100 * report['targets']['mc']:,.0f}"
    )
    for path, refused in (
        ("rows/model=no-such-model/epoch_s", "picks 0 elements"),
        ("rows/9/epoch_s", "no '9' there"),
        ("command", "not a number"),
    ):
        with pytest.raises(ValueError, match=refused):
            figures.render(f"{{{{value fit_over_epoch-cpu {path}}}}}")
    with pytest.raises(ValueError, match="does not exist"):
        figures.render("{{value no-such-file rows/0}}")


def test_evidence_split_families_sum_a_path_types_terms_seed_by_seed():
    name = "evidence-split/digit-4000-60ep-held"
    runs = json.loads((RESULTS / f"{name}.json").read_text())["runs"]
    held = sorted(
        (r for r in runs if r["settings"].get("start") == "held"),
        key=lambda r: r["settings"]["seed"],
    )
    assert len(held) == 3
    fc = [
        sum(
            r["layers"][f"layer{i}"]["fc"]["prior"] + r["layers"][f"layer{i}"]["fc"]["occam"]
            for i in range(1, 5)
        )
        for r in held
    ]
    assert figures.render(f"{{{{split_seeds {name} start=held part=fc layers=1-4}}}}") == (
        " / ".join(f"{v:,.0f}" for v in fc)
    )
    assert figures.render(f"{{{{split_seeds {name} start=held}}}}") == (
        " / ".join(f"{r['neg_log_marglik']:,.0f}" for r in held)
    )
    gamma = [r["layers"][f"layer{i}"]["conv"]["gamma"] for r in held for i in (2, 3, 4)]
    assert figures.render(f"{{{{split_gamma_range {name} start=held layers=2-4}}}}") == (
        f"{min(gamma):,.0f}-{max(gamma):,.0f}"
    )
    with pytest.raises(ValueError, match="not one a seed"):
        figures.render(f"{{{{split_seeds {name} model=f-fc+conv}}}}")  # held and equivariant
    with pytest.raises(ValueError, match="does not exist"):
        figures.render("{{split_seeds evidence-split/no-such-file}}")


DIGIT_150 = "table1-digit-4000-150ep f-fc+conv marglik dataset=quadrant-mnist-digit start=mixed"
CONV_150 = "table1-digit-4000-150ep conv map dataset=quadrant-mnist-digit start=mixed"


def _digit_150_results() -> list[dict]:
    return run_rows.named_row(DIGIT_150).results


def test_seed_option_renders_that_seeds_run_alone_and_refuses_a_missing_seed():
    results = _digit_150_results()
    seed1 = next(r for r in results if r["settings"]["seed"] == 1)
    share = seed1["symmetry"]["layers"][3]["paths"]["fc"]["relative"]
    assert figures.render(f"{{{{share_range {DIGIT_150} layers=4 seed=1}}}}") == f"{share:.2f}"
    with pytest.raises(ValueError, match="seed=7 is not among"):
        figures.render(f"{{{{share_range {DIGIT_150} seed=7}}}}")


def test_a_seeds_filter_keeps_those_seeds_runs_of_a_row_and_refuses_a_missing_one():
    results = {r["settings"]["seed"]: r for r in _digit_150_results()}
    kept = summary.Row([results[2], results[0]])
    assert figures.render(f"{{{{acc {DIGIT_150} seeds=2,0}}}}") == summary.mean_std(kept.accuracy())
    assert figures.render(f"{{{{acc_seeds {DIGIT_150} seeds=2,0}}}}") == " / ".join(
        f"{100 * r['test']['accuracy']:.1f}" for r in (results[2], results[0])
    )
    with pytest.raises(ValueError, match=r"no run of seed\(s\) \[7\]"):
        figures.render(f"{{{{acc {DIGIT_150} seeds=0,7}}}}")


def test_a_frozen_filter_tells_runs_of_the_same_settings_apart_by_their_frozen_paths(
    tmp_path, monkeypatch
):
    template = RESULTS / "table3-mnist-20ep" / "mnist-f-fc+conv+gconv-marglik-seed0"
    for name, frozen, accuracy in (("g", ["conv", "fc"], 0.9), ("c", ["fc", "gconv"], 0.8)):
        result = json.loads((template / "results.json").read_text())
        result["frozen_paths"], result["test"]["accuracy"] = frozen, accuracy
        (tmp_path / "t3" / name).mkdir(parents=True)
        (tmp_path / "t3" / name / "results.json").write_text(json.dumps(result))
    monkeypatch.setattr(run_rows, "RESULTS", tmp_path)
    row = "t3 f-fc+conv+gconv marglik"
    assert figures.render(f"{{{{acc_seeds {row} frozen=conv,fc}}}}") == "90.0"
    assert figures.render(f"{{{{acc_seeds {row} frozen=fc,gconv}}}}") == "80.0"
    with pytest.raises(ValueError, match="picks 2 rows"):
        figures.render(f"{{{{acc_seeds {row}}}}}")
    with pytest.raises(ValueError, match="picks 0 rows"):
        figures.render(f"{{{{acc_seeds {row} frozen=none}}}}")


def test_fit_output_changes_count_every_layer_and_seed_once():
    spec = f"{DIGIT_150} layers=4-7"
    counts = [
        int(figures.render(f"{{{{fit_output_changes {spec} change={c}}}}}"))
        for c in ("up", "level", "down")
    ]
    assert sum(counts) == 4 * len(_digit_150_results())
    first, last = (_digit_150_results()[0]["fits"][i]["path_outputs"][3] for i in (0, -1))
    grew = last["paths"]["fc"] - first["paths"]["fc"] >= 0.05
    seed0 = figures.render(f"{{{{fit_output_changes {DIGIT_150} layers=4 seed=0 change=up}}}}")
    assert seed0 == str(int(grew))
    with pytest.raises(ValueError, match="change=up, change=down or change=level"):
        figures.render(f"{{{{fit_output_changes {spec} change=sideways}}}}")


def test_output_seeds_take_the_largest_or_least_layer_of_each_seed():
    shares = [
        [100 * layer["paths"]["fc"] for layer in r["path_outputs"][5:7]]
        for r in _digit_150_results()
    ]
    largest = figures.render(f"{{{{output_seeds {DIGIT_150} layers=6-7}}}}")
    least = figures.render(f"{{{{output_seeds {DIGIT_150} layers=6-7 pick=least}}}}")
    assert largest == " / ".join(f"{max(s):.1f}" for s in shares)
    assert least == " / ".join(f"{min(s):.1f}" for s in shares)


def test_last_fit_ranges_read_a_tensors_precision_or_norm_at_a_fit():
    results = _digit_150_results()
    name = "layer4.conv.weight"
    values = [r["fits"][-1]["prior_precision"][name] for r in results]
    rendered = figures.render(f"{{{{precision_range {DIGIT_150} tensor=conv.weight layers=4}}}}")
    assert rendered == f"{common.scientific(min(values))}-{common.scientific(max(values))}"
    norm = results[0]["fits"][2]["squared_norm"][name]
    epoch = results[0]["fits"][2]["epoch"]
    spec = f"{DIGIT_150} tensor=conv.weight layers=4 seed=0 epoch={epoch}"
    assert figures.render(f"{{{{norm_range {spec}}}}}") == common.scientific(norm)
    with pytest.raises(ValueError, match="no fit at epoch=3"):
        figures.render(f"{{{{norm_range {DIGIT_150} epoch=3}}}}")
    with pytest.raises(ValueError, match="no prior precision of a tensor ending in 'gconv'"):
        figures.render(f"{{{{precision_range {DIGIT_150} tensor=gconv}}}}")


@pytest.mark.parametrize(
    ("value", "written"),
    [(2.8e5, "2.8e5"), (5.04e-5, "5e-5"), (164.1, "164"), (6.52, "6.5"), (0.183, "0.18")],
)
def test_scientific_figures_keep_two_significant_digits(value, written):
    assert common.scientific(value) == written


def test_effective_means_average_each_layer_over_the_seeds():
    results = _digit_150_results()
    means = [
        sum(r["symmetry"]["layers"][i]["paths"]["conv"]["effective"] for r in results)
        / len(results)
        for i in (1, 2)
    ]
    rendered = figures.render(f"{{{{effective_means {DIGIT_150} path=conv layers=2-3}}}}")
    assert rendered == " / ".join(f"{m:,.0f}" for m in means)


def test_accuracy_and_time_spans_over_seeds():
    results = _digit_150_results()
    accuracies = [100 * r["test"]["accuracy"] for r in results]
    minutes = [r["train_seconds"] / 60 for r in results]
    assert figures.render(f"{{{{acc_range {DIGIT_150}}}}}") == common.span(accuracies, 0)
    assert figures.render(f"{{{{run_minutes {DIGIT_150}}}}}") == common.span(minutes, 0)


def test_two_rows_compare_by_mean_span_and_seed_by_seed():
    mine, theirs = (run_rows.named_row(s) for s in (DIGIT_150, CONV_150))
    difference = sum(mine.accuracy()) / 3 - sum(theirs.accuracy()) / 3
    rendered = figures.render(f"{{{{acc_diff {DIGIT_150} vs {CONV_150}}}}}")
    assert rendered == f"{difference:+.1f}".replace("-", "\u2212")
    means = sorted(sum(r.accuracy()) / 3 for r in (mine, theirs))
    span = figures.render(f"{{{{acc_span {DIGIT_150} ; {CONV_150}}}}}")
    assert span == f"{means[0]:.1f}-{means[1]:.1f}"
    per_seed = [a - b for a, b in zip(mine.accuracy(), theirs.accuracy(), strict=True)]
    low, high = (f"{v:+.1f}".replace("-", "\u2212") for v in (min(per_seed), max(per_seed)))
    assert figures.render(f"{{{{acc_seed_diff {DIGIT_150} vs {CONV_150}}}}}") == f"{low} to {high}"


def test_row_comparisons_refuse_a_malformed_spec_or_different_seeds():
    with pytest.raises(ValueError, match="name two rows"):
        figures.render(f"{{{{acc_diff {DIGIT_150}}}}}")
    with pytest.raises(ValueError, match="name two rows or more"):
        figures.render(f"{{{{acc_span {DIGIT_150}}}}}")
    one_seed = "lr-0.01 conv map optimizer=sgd"  # a single run, seed 0
    with pytest.raises(ValueError, match="the rows' seeds differ"):
        figures.render(f"{{{{marglik_seed_diff {DIGIT_150} vs {one_seed}}}}}")


def test_a_fragment_gets_its_tables_at_their_markers_and_its_figures(tmp_path):
    fragment = tmp_path / "section.md"
    fragment.write_text(
        f"Learned at {{{{acc_range {DIGIT_150}}}}} %:\n<!-- table: runs -->\nafter it.\n"
    )
    rendered = figures.render_fragment(fragment, runs="| a |")
    accuracy = figures.render(f"{{{{acc_range {DIGIT_150}}}}}")
    assert rendered == f"Learned at {accuracy} %:\n| a |\nafter it.\n"
    with pytest.raises(
        ValueError, match=r"section.md: no content for its table markers \['runs'\]"
    ):
        figures.render_fragment(fragment)
