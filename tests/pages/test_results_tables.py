"""The generated pages (docs/results*.md, findings.md, learned_structure.md, data_size.md,
speed.md, models.md, relaxed-resnet.md) are what ``python -m pages.results_tables`` makes of the
committed results files with the templates of ``pages.render_pages``."""

import json

import pandas as pd
import pytest

from pages import page_tables, page_values, render_pages, results_tables
from studies import runs_table


@pytest.mark.parametrize("path", list(results_tables.documents()), ids=lambda path: path.name)
def test_docs_tables_are_generated_from_the_committed_results(path):
    assert not results_tables.stale({path: results_tables.documents()[path]}), (
        f"{path} is stale: run python -m pages.results_tables"
    )


def test_every_generated_page_is_rendered_from_a_template():
    assert sorted(path.name for path in results_tables.documents()) == sorted(
        [
            "results.md",
            "results-table1.md",
            "results-table2.md",
            "results-table3.md",
            "findings.md",
            "learned_structure.md",
            "data_size.md",
            "speed.md",
            "models.md",
            "relaxed-resnet.md",
        ]
    )
    assert all((render_pages.TEMPLATES / name).exists() for name in render_pages.PAGES)


def test_results_index_links_every_section_to_a_heading_of_its_page():
    index = render_pages.render("results.md")
    for name in ("results-table1.md", "results-table2.md", "results-table3.md"):
        title, headings = page_values.headings(name)
        assert f"## [{title.removeprefix('Results, ')}]({name})" in index
        anchors = [page_values.anchor(heading) for heading in headings]
        assert len(set(anchors)) == len(anchors), f"{name}: two sections, one anchor"
        for heading, target in zip(headings, anchors, strict=True):
            assert f"- [{heading}]({name}#{target})" in index


def test_anchor_follows_the_heading_rule_of_github_and_mkdocs():
    assert page_values.anchor("Table 1's (digit, quadrant) task: F-FC+CONV, 1,000 images") == (
        "table-1s-digit-quadrant-task-f-fcconv-1000-images"
    )


def test_no_generated_page_holds_a_placeholder_or_a_jinja_tag():
    for path in results_tables.documents():
        text = path.read_text()
        assert "{{" not in text and "{%" not in text, path.name


def test_kfac_differences_need_two_seeds_of_each_mode():
    def runs(*modes_and_accuracies):
        rows = [
            {"dataset": "d", "kfac_approx": mode, "test_acc": a}
            | {"test_nll": a / 100, "marglik_per_example": a / 10}
            for mode, accuracies in modes_and_accuracies
            for a in accuracies
        ]
        return pd.DataFrame(rows)

    one_seed = page_tables.kfac_differences(runs(("expand", [80.0, 82.0]), ("reduce", [81.0])))
    assert one_seed == ["- d: one seed of a mode: no difference judged"]
    (line,) = page_tables.kfac_differences(runs(("expand", [80.0, 82.0]), ("reduce", [83.0, 85.0])))
    assert line.startswith("- d: test accuracy +3.0 (standard error 1.4)")
    assert page_tables.kfac_differences(runs(("expand", [80.0, 82.0]))) == []


def test_no_committed_result_records_an_absolute_path():
    """Records name runs and outputs relative to the repository (issue 42.8): an absolute
    path says where one machine kept a scratch copy, not where the figure comes from."""
    import re

    from studies.runs_table import RESULTS

    absolute = re.compile(r'"(/tmp|/work|/root|/home)/[^"]*"')
    found = [
        f"{path.relative_to(RESULTS)}: {match.group(0)}"
        for path in sorted(RESULTS.rglob("*.json"))
        for match in absolute.finditer(path.read_text())
    ]
    assert not found, found[:5]


def test_fit_trace_follows_the_named_path_in_the_runs_of_one_data_set(tmp_path, monkeypatch):
    def run(dataset: str, seed: int, gconv: list[float]) -> dict:
        """A learned Table 3 run whose layer1 GCONV output share is ``gconv[i]`` at fit i."""
        fits = []
        for i, share in enumerate(gconv):
            paths = {"fc": 0.01, "conv": 0.99 - share, "gconv": share}
            outputs = [{"layer": "layer1", "paths": paths}]
            fits.append(
                {"epoch": 10 + 5 * i, "neg_log_marglik": 100.0 - i, "path_outputs": outputs}
            )
        settings = {"dataset": dataset, "seed": seed, "model": "f-fc+conv+gconv-full"}
        return {
            "settings": settings | {"method": "marglik"},
            "versions": {"laplace_equivariance": "0.4.0"},
            "test": {"accuracy": 0.9, "nll": 0.3},
            "neg_log_marglik": [],
            "fits": fits,
        }

    for dataset, seed, gconv in (
        ("mnist", 0, [0.5, 0.25]),
        ("rotated-mnist", 0, [0.5, 0.75]),
        ("rotated-mnist", 1, [0.5, 0.5]),
    ):
        folder = tmp_path / "t3" / f"{dataset}-f-fc+conv+gconv-full-marglik-seed{seed}"
        folder.mkdir(parents=True)
        (folder / "results.json").write_text(json.dumps(run(dataset, seed, gconv)))
    monkeypatch.setattr(runs_table, "RESULTS", tmp_path)
    runs_table.clear_caches()
    try:
        text = page_tables.fit_trace("t3", epochs=(10, 15), path="gconv", dataset="rotated-mnist")
        assert "Per seed (0 / 1):" in text
        assert "| 15 | 0.75 / 0.50 | 99 / 99 |" in text
        upright = page_tables.fit_trace("t3", epochs=(10, 15), path="gconv", dataset="mnist")
        assert "| 15 | 0.25 | 99 |" in upright
        assert "| 15 | 0.01 | 99 |" in page_tables.fit_trace("t3", (10, 15), dataset="mnist")
        assert page_tables.fit_trace("t3", dataset="quarter-turn-mnist") == "No run yet."
        with pytest.raises(ValueError, match="several data sets: name one"):
            page_tables.fit_trace("t3")
    finally:
        runs_table.clear_caches()
