"""The tables of docs/learned_structure.md, from the known-truth runs."""

from pages import render_pages
from studies import known_truth_tables


def test_the_page_shows_the_tables_of_the_committed_runs():
    """docs/learned_structure.md renders the known-truth tables of the committed JSONs."""
    page = render_pages.render("learned_structure.md")
    tables = known_truth_tables.tables()
    assert "| balanced-adam |" in tables and tables in page
    rotation = known_truth_tables.rotation_tables()
    assert rotation.startswith("|") and rotation in page


def test_mean_std_pools_seeds_with_the_sample_std():
    """Three seeds: the mean and the sample (n - 1) standard deviation; one seed: std 0."""
    assert known_truth_tables.mean_std([0.5, 0.6, 0.7], scale=100) == "60.0 ± 10.0"
    assert known_truth_tables.mean_std([0.3]) == "0.3 ± 0.0"
