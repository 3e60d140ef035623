"""docs/results*.md, speed.md and models.md are what ``benchmarks/results_tables.py`` (one
module of ``benchmarks/generated_docs`` each) makes of the committed results files (and the
models' parameter counts)."""

import dataclasses
import json

import pytest

from benchmarks import results_tables
from benchmarks.generated_docs import (
    claims,
    invariant_weights_section,
    measured_sections,
    models_md,
    results_md,
    results_sections,
    results_table1_md,
    speed_md,
)


@pytest.mark.parametrize("module", results_tables.DOCUMENTS, ids=lambda m: m.__name__)
def test_docs_tables_are_generated_from_the_committed_results(module):
    assert module.DOCUMENT.read_text() == module.render(), (
        f"{module.DOCUMENT} is stale: run python -m benchmarks.results_tables"
    )


def test_each_document_has_its_own_module():
    assert [m.DOCUMENT.name for m in (results_md, *results_md.PAGES, speed_md, models_md)] == [
        "results.md",
        "results-table1.md",
        "results-table2.md",
        "results-table3.md",
        "speed.md",
        "models.md",
    ]


def test_results_index_links_every_section_to_a_heading_of_its_page():
    index = results_md.render()
    for page in results_md.PAGES:
        text = page.DOCUMENT.read_text()
        headings = [
            line.removeprefix("## ") for line in text.splitlines() if line.startswith("## ")
        ]
        assert headings == [section.title for section in page.SECTIONS]
        anchors = [results_sections.anchor(heading) for heading in headings]
        assert len(set(anchors)) == len(anchors), f"{page.DOCUMENT.name}: two sections, one anchor"
        for heading, target in zip(headings, anchors, strict=True):
            assert f"- [{heading}]({page.DOCUMENT.name}#{target})" in index


def test_anchor_follows_the_heading_rule_of_github_and_mkdocs():
    assert results_sections.anchor("Table 1's (digit, quadrant) task: F-FC+CONV, 1,000 images") == (
        "table-1s-digit-quadrant-task-f-fcconv-1000-images"
    )


class Row:
    """What a claim reads of a summary row."""

    def __init__(
        self, model, method, accuracies, start="mixed", burnin=10, balanced=False, temperature=1
    ):
        self.settings = {"dataset": "d", "model": model, "method": method, "start": start}
        self.settings |= {"burnin": burnin, "balance_factors": balanced}
        self.temperature = temperature
        self._accuracies = accuracies

    def accuracy(self):
        return self._accuracies

    def variants(self):
        named = ["balanced"] if self.settings["balance_factors"] else []
        start = self.settings["start"]
        named += [f"{start} start"] if start != "mixed" else []
        return named + ([f"temperature {self.temperature:g}"] if self.temperature != 1 else [])


def test_claims_are_judged_by_the_seed_spread():
    claim = claims.Claim("conv above fc", "d", ("conv", "map"), ("fc", "map"))
    rows = [Row("conv", "map", [90.0, 91.0, 92.0]), Row("fc", "map", [80.0, 81.0, 82.0])]
    assert claim.verdict(rows).startswith("reproduced")
    rows = [Row("conv", "map", [80.0, 85.0, 90.0]), Row("fc", "map", [81.0, 86.0, 88.0])]
    assert claim.verdict(rows).startswith("not distinguishable")
    rows = [Row("conv", "map", [70.0, 71.0, 72.0]), Row("fc", "map", [80.0, 81.0, 82.0])]
    assert "reversed" in claim.verdict(rows)
    assert claim.verdict(rows[:1]) == "not run"
    assert claim.verdict([Row("conv", "map", [90.0]), rows[1]]) == "one seed: no verdict"


def test_invariant_weights_claims_compare_learned_angles_over_seeds():

    def learned(dataset, objective, degrees):
        return {
            (dataset, objective, None): [
                {"eta_degrees": d, "dataset": dataset, "objective": objective} for d in degrees
            ]
        }

    experiments = (
        learned("rotated-mnist", "elbo", [150.0, 160.0, -170.0])  # the sign of eta is free
        | learned("partially-rotated-mnist", "elbo", [60.0, 70.0, 80.0])
        | learned("mnist", "elbo", [60.0, 75.0, 90.0])
        | learned("mnist", "likelihood", [1.0, 2.0, 3.0])
        | learned("rotated-mnist", "laplace", [100.0])
        | learned("partially-rotated-mnist", "laplace", [50.0])
        | learned("mnist", "laplace", [5.0])
    )
    claims = invariant_weights_section.InvariantWeightsSection.claims(experiments)
    assert claims[0].endswith("reproduced (difference +90.0 degrees, standard error 8.2)")
    assert "not distinguishable" in claims[1]
    assert all(line.endswith("one seed: no verdict") for line in claims[2:4])
    assert claims[-3].endswith("not run")  # no likelihood-only run on rotated digits
    assert "reproduced" in claims[-1]


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


def test_claims_compare_rows_by_start_and_refuse_to_guess_between_burn_ins():
    claim = claims.Claim(
        "held above equivariant",
        "d",
        ("f-fc+conv", "marglik"),
        ("f-fc+conv", "marglik"),
        better_start="held",
        worse_start="equivariant",
    )
    held = Row("f-fc+conv", "marglik", [92.0, 93.0, 94.0], start="held")
    equivariant = Row("f-fc+conv", "marglik", [80.0, 81.0, 82.0], start="equivariant")
    balanced = Row("f-fc+conv", "marglik", [99.0, 99.5, 99.9], "equivariant", balanced=True)
    assert claim.verdict([held, equivariant, balanced]).startswith("reproduced")
    assert claim.verdict([held, balanced]) == "not run"  # a variant is not the plain start
    short = Row("f-fc+conv", "marglik", [95.0, 96.0, 97.0], start="equivariant", burnin=5)
    with pytest.raises(ValueError, match="give the claim a burnin"):
        claim.verdict([held, equivariant, short])
    on_ten = dataclasses.replace(claim, burnin=10)
    assert on_ten.verdict([held, equivariant, short]).startswith("reproduced")


def test_claims_of_a_variant_compare_its_rows_with_the_plain_rows_of_the_other_side():
    claim = claims.Claim(
        "warm learned not below MAP",
        "d",
        ("f-fc+conv", "marglik"),
        ("f-fc+conv", "map"),
        not_below=True,
        better_start="held",
        better_variants=("temperature 2",),
    )
    plain = Row("f-fc+conv", "marglik", [70.0, 71.0, 72.0], start="held")
    warm = Row("f-fc+conv", "marglik", [90.0, 91.0, 92.0], start="held", temperature=2)
    map_row = Row("f-fc+conv", "map", [85.0, 86.0, 87.0])
    warm_map = Row("f-fc+conv", "map", [10.0, 11.0, 12.0], temperature=2)
    assert claim.verdict([plain, warm, map_row, warm_map]).startswith("reproduced")
    assert claim.verdict([plain, map_row]) == "not run"
    unvaried = dataclasses.replace(claim, better_variants=())
    assert unvaried.verdict([plain, warm, map_row]).startswith("**not reproduced")


def test_learned_claims_started_equivariant_judge_the_equivariant_rows():
    started = claims.started_equivariant(results_table1_md.TABLE1_CLAIMS)
    assert [c.better_start for c in started] == ["equivariant", "equivariant"]
    assert all("(started equivariant)" in c.text for c in started)
    assert all(c.better[1] == "marglik" for c in started)  # the MAP-only claims are left out


def test_evidence_split_groups_runs_by_training_and_sums_each_paths_terms(tmp_path, monkeypatch):
    def run(model, start, seed, fc, conv):
        layers = {"layer1": {"conv": {"prior": conv, "occam": conv, "gamma": 1.0}}}
        if fc is not None:
            layers["layer1"]["fc"] = {"prior": fc, "occam": fc, "gamma": 2.0}
        settings = {"dataset": "d", "model": model, "epochs": 3, "seed": seed, "start": start}
        return {
            "settings": settings,
            "neg_log_marglik": 2 * conv + 2 * (fc or 0) + 10 + 4,
            "data": 10.0,
            "layers": layers,
            "outside": {"prior": 2.0, "occam": 2.0},
        }

    measured = {
        "device": "cpu",
        "threads": 1,
        "runs": [
            run("f-fc+conv", "equivariant", 0, 5.0, 100.0),
            run("conv", "mixed", 0, None, 70.0),
            run("f-fc+conv", "equivariant", 1, 7.0, 120.0),
            {**run("f-fc+conv", "equivariant", 0, 0.0, 90.0), "frozen_paths": ["fc"]},
        ],
    }
    (tmp_path / "split.json").write_text(json.dumps(measured))
    monkeypatch.setattr(measured_sections, "RESULTS", tmp_path)
    section = measured_sections.EvidenceSplitSection("t", "split.json", "cmd", "about", "end")
    text = section.render()
    assert (
        "| learned F-FC+CONV, started equivariant | 224 / 268 | 10 / 10 | 10 / 14 | 200 / 240 |"
        in text
    )
    assert "| learned CONV | 154 | 10 | 0 | 140 | 4 |" in text
    assert "| learned F-FC+CONV, started equivariant, FC frozen | 194 | 10 | 0 | 180 | 4 |" in text
    assert "| layer1 | 12 (2) | 220 (1) | 140 (1) |" in text  # means over the two seeds


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
