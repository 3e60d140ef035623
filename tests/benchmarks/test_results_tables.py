"""The generated pages (docs/results*.md, findings.md, learned_structure.md, data_size.md,
speed.md, models.md) are what ``python -m benchmarks.results_tables`` makes of the committed
results files: the pages of ``benchmarks.render_pages`` (templates) and of the modules of
``benchmarks/generated_docs`` not yet moved to it."""

import dataclasses
import json

import pytest

from benchmarks import render_pages, results_tables
from benchmarks.generated_docs import (
    claims,
    results_sections,
)


@pytest.mark.parametrize("path", list(results_tables.documents()), ids=lambda path: path.name)
def test_docs_tables_are_generated_from_the_committed_results(path):
    assert not results_tables.stale({path: results_tables.documents()[path]}), (
        f"{path} is stale: run python -m benchmarks.results_tables"
    )


def test_every_generated_page_has_one_renderer():
    old = [module.DOCUMENT.name for module in results_tables.DOCUMENTS]
    assert not set(old) & set(render_pages.PAGES)
    assert sorted(old + list(render_pages.PAGES)) == sorted(
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
        ]
    )


def test_results_index_links_every_section_to_a_heading_of_its_page():
    index = render_pages.render("results.md")
    for name in ("results-table1.md", "results-table2.md", "results-table3.md"):
        title, headings = render_pages.headings(name)
        assert f"## [{title.removeprefix('Results, ')}]({name})" in index
        anchors = [render_pages.anchor(heading) for heading in headings]
        assert len(set(anchors)) == len(anchors), f"{name}: two sections, one anchor"
        for heading, target in zip(headings, anchors, strict=True):
            assert f"- [{heading}]({name}#{target})" in index


def test_anchor_follows_the_heading_rule_of_github_and_mkdocs():
    assert render_pages.anchor("Table 1's (digit, quadrant) task: F-FC+CONV, 1,000 images") == (
        "table-1s-digit-quadrant-task-f-fcconv-1000-images"
    )


def test_no_generated_page_holds_a_placeholder_or_a_jinja_tag():
    for path in results_tables.documents():
        text = path.read_text()
        assert "{{" not in text and "{%" not in text, path.name


def test_kfac_differences_need_two_seeds_of_each_mode():

    class Row:
        def __init__(self, mode, accuracies):
            self.settings = {"dataset": "d", "kfac_approx": mode}
            self._accuracies = accuracies

        def accuracy(self):
            return self._accuracies

        def nll(self):
            return [a / 100 for a in self._accuracies]

        def neg_log_marglik_per_example(self):
            return [a / 10 for a in self._accuracies]

    one_seed = results_sections.kfac_differences(
        [Row("expand", [80.0, 82.0]), Row("reduce", [81.0])]
    )
    assert one_seed == ["- d: one seed of a mode: no difference judged"]
    (line,) = results_sections.kfac_differences(
        [Row("expand", [80.0, 82.0]), Row("reduce", [83.0, 85.0])]
    )
    assert line.startswith("- d: test accuracy +3.0 (standard error 1.4)")


def test_no_committed_result_records_an_absolute_path():
    """Records name runs and outputs relative to the repository (issue 42.8): an absolute
    path says where one machine kept a scratch copy, not where the figure comes from."""
    import re

    from benchmarks.generated_docs.common import RESULTS

    absolute = re.compile(r'"(/tmp|/work|/root|/home)/[^"]*"')
    found = [
        f"{path.relative_to(RESULTS)}: {match.group(0)}"
        for path in sorted(RESULTS.rglob("*.json"))
        for match in absolute.finditer(path.read_text())
    ]
    assert not found, found[:5]


def test_a_section_names_claims_that_are_not_the_papers_by_its_own_heading(tmp_path, monkeypatch):
    source = (
        results_sections.RESULTS
        / "table3-mnist-20ep"
        / "rotated-mnist-f-fc+conv+gconv-marglik-seed0"
    )
    run = tmp_path / "t" / "run"
    run.mkdir(parents=True)
    (run / "results.json").write_text((source / "results.json").read_text())
    monkeypatch.setattr(results_sections, "RESULTS", tmp_path)
    claim = claims.Claim("a above b", "rotated-mnist", ("a", "marglik"), ("b", "map"))
    section = results_sections.Section("T", "t", "cmd", "about", [claim])
    assert "The paper's claims at this budget:\n\n- a above b: not run" in section.render()
    own = dataclasses.replace(section, claims_heading="Ours, by test accuracy:")
    text = own.render()
    assert "Ours, by test accuracy:\n\n- a above b: not run" in text
    assert "paper's claims" not in text


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
        return {"settings": {"dataset": dataset, "seed": seed}, "fits": fits}

    for dataset, seed, gconv in (
        ("mnist", 0, [0.5, 0.25]),
        ("rotated-mnist", 0, [0.5, 0.75]),
        ("rotated-mnist", 1, [0.5, 0.5]),
    ):
        folder = tmp_path / "t3" / f"{dataset}-f-fc+conv+gconv-full-marglik-seed{seed}"
        folder.mkdir(parents=True)
        (folder / "results.json").write_text(json.dumps(run(dataset, seed, gconv)))
    monkeypatch.setattr(results_sections, "RESULTS", tmp_path)
    section = results_sections.FitTraceSection(
        "T", "t3", "cmd", "about", "end", epochs=(10, 15), path="gconv", dataset="rotated-mnist"
    )
    text = section.render()
    assert "Per seed (0 / 1):" in text
    assert "| 15 | 0.75 / 0.50 | 99 / 99 |" in text
    upright = dataclasses.replace(section, dataset="mnist").render()
    assert "| 15 | 0.25 | 99 |" in upright
    fc = dataclasses.replace(section, dataset="mnist", path="fc").render()
    assert "| 15 | 0.01 | 99 |" in fc
    assert "No run yet." in dataclasses.replace(section, dataset="quarter-turn-mnist").render()
    with pytest.raises(ValueError, match="name one with FitTraceSection"):
        dataclasses.replace(section, dataset=None).render()
