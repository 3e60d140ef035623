"""Figures in the docs' prose are rendered from the committed runs, never typed."""

import pytest

from benchmarks.generated_docs import figures, results_md
from benchmarks.generated_docs.common import RESULTS
from laplace_equivariance import summary

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


def test_the_results_page_states_no_figure_it_cannot_render():
    """Every placeholder of results_md renders (none is left in the page)."""
    assert "{{" not in results_md.render()


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
