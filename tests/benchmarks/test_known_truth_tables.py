"""The tables of docs/learned_structure.md, from the known-truth runs."""

from benchmarks import known_truth_tables


def test_the_docs_tables_are_the_committed_results():
    """docs/learned_structure.md's tables are what the committed JSONs give."""
    folders = [known_truth_tables.RESULTS / name for name in known_truth_tables.TABLE_ORDER]
    known_truth_tables.write_table(
        [f for f in folders if f.is_dir()], known_truth_tables.DOCUMENT, check=True
    )


def test_mean_std_pools_seeds_with_the_sample_std():
    """Three seeds: the mean and the sample (n - 1) standard deviation; one seed: std 0."""
    assert known_truth_tables.mean_std([0.5, 0.6, 0.7], scale=100) == "60.0 ± 10.0"
    assert known_truth_tables.mean_std([0.3]) == "0.3 ± 0.0"
