"""Table 3's groups by their evidence: the GCONV network against the CONV network per seed."""

import json

import pytest

from studies import runs_table
from studies.group_evidence_section import (
    GroupEvidenceSection,
    network,
    per_example_evidence,
)

TEMPLATE = runs_table.RESULTS / "table3-mnist-20ep" / "rotated-mnist-f-fc+conv+gconv-marglik-seed0"


def _run(dataset: str, seed: int, frozen: list[str] | None, neg_log_marglik: float) -> dict:
    """A learned Table 3 run of 4,000 digits whose last -log p(D) is ``neg_log_marglik``."""
    result = json.loads((TEMPLATE / "results.json").read_text())
    result["settings"] |= {"dataset": dataset, "seed": seed, "start": "equivariant"}
    result["n_train"] = 4000
    result["neg_log_marglik"] = [99999.0, neg_log_marglik]
    if frozen is not None:
        result["frozen_paths"] = frozen
    else:
        result["settings"]["start"] = "held"
    return result


def _write(root, folder: str, results: list[dict]) -> None:
    for result in results:
        s = result["settings"]
        name = "-".join(result.get("frozen_paths", [s["start"]]))
        run = root / folder / f"{s['dataset']}-{name}-seed{s['seed']}"
        run.mkdir(parents=True)
        (run / "results.json").write_text(json.dumps(result))


GCONV, CONV = ["conv", "fc"], ["fc", "gconv"]


@pytest.fixture
def section(tmp_path, monkeypatch):
    monkeypatch.setattr(runs_table, "RESULTS", tmp_path)
    return tmp_path, GroupEvidenceSection("t3", beside=("full",))


def test_networks_are_named_by_their_frozen_paths_and_evidence_is_per_example():
    assert network(_run("mnist", 0, GCONV, 4000.0)) == "GCONV network"
    assert network(_run("mnist", 0, ["gconv", "fc"], 4000.0)) == "CONV network"
    assert network(_run("mnist", 0, None, 4000.0)) == "relaxed, held start"
    assert per_example_evidence(_run("mnist", 0, GCONV, 6000.0)) == -1.5


def test_the_rotation_verdict_needs_a_larger_delta_on_rotated_digits_in_every_seed(section):
    root, groups = section
    # upright: GCONV worse by 0.25 nats/example; rotated: seed 0 better by 0.25, seed 1 worse by 0.5
    _write(root, "t3", [_run("mnist", s, GCONV, 5000.0) for s in (0, 1)])
    _write(root, "t3", [_run("mnist", s, CONV, 4000.0) for s in (0, 1)])
    _write(
        root,
        "t3",
        [_run("rotated-mnist", 0, GCONV, 8000.0), _run("rotated-mnist", 0, CONV, 9000.0)],
    )
    _write(
        root,
        "t3",
        [_run("rotated-mnist", 1, GCONV, 10000.0), _run("rotated-mnist", 1, CONV, 8000.0)],
    )
    _write(root, "full", [_run("mnist", 0, None, 3000.0)])
    text = groups.render()
    assert "| mnist | 0 | 1.250, " in text and "| 0.750, " in text and "| -0.250 |" in text
    assert "| rotated-mnist | 0 | 2.000, " in text and "| +0.250 |" in text
    assert "relaxed, held start: -log p(D)/N, test %" in text  # the relaxed network beside them
    assert (
        "- seed 0: Delta +0.250 on rotated digits against -0.250 on upright digits (larger)" in text
    )
    assert (
        "- seed 1: Delta -0.500 on rotated digits against -0.250 on upright digits (not larger)"
        in text
    )
    rotated = "- the evidence prefers the quarter turns more on rotated than on upright digits"
    assert (
        f"{rotated} in every seed (2 seeds; mean difference +0.125 nats per example): fails" in text
    )
    assert "quarter-turned" not in text  # no run of those digits
    assert "translated digits" not in text  # no control run

    # the control is set beside the upright digits without a verdict
    _write(root, "t3", [_run("translated-mnist", 0, GCONV, 6000.0)])
    _write(root, "t3", [_run("translated-mnist", 0, CONV, 5000.0)])
    control = "- translated digits (harder, not turned: a control): Delta -0.250 against"
    assert f"{control} -0.250 on upright digits (seed 0)" in groups.render()
    _write(root, "t3", [_run("translated-mnist", 1, GCONV, 6000.0)])  # its CONV run missing
    assert "Delta -0.250 / - against -0.250 / -0.250 on upright digits (seeds 0, 1)" in (
        groups.render()
    )

    # seed 1 made to prefer the turns more on rotated digits: the target holds
    (root / "t3" / "rotated-mnist-fc-gconv-seed1" / "results.json").write_text(
        json.dumps(_run("rotated-mnist", 1, CONV, 12000.0))
    )
    assert "every seed (2 seeds; mean difference +0.625 nats per example): holds" in groups.render()


def test_a_folder_without_runs_says_so(section):
    _, groups = section
    assert groups.render().endswith("No run yet.")


def test_a_wider_gconv_model_is_its_own_network_and_can_be_the_one_delta_uses(section):
    root, _ = section
    wide = _run("mnist", 0, None, 4400.0)
    wide["settings"] |= {"model": "gconv", "alpha": 8, "start": "mixed"}
    assert network(wide) == "GCONV network, alpha 8"
    full = _run("mnist", 0, GCONV, 4000.0)
    full["settings"]["model"] = "f-fc+conv+gconv-full"
    assert network(full) == "GCONV-full network"
    full["frozen_paths"] = CONV  # the same CONV network as F-FC+CONV+GCONV's
    assert network(full) == "CONV network"
    del full["frozen_paths"]
    assert network(full) == "GCONV-full relaxed, equivariant start"
    _write(root, "t3", [wide, _run("mnist", 0, CONV, 4000.0), _run("mnist", 0, GCONV, 8000.0)])
    groups = GroupEvidenceSection("t3", beside=("full",), gconv="GCONV network, alpha 8")
    _write(root, "full", [_run("rotated-mnist", 0, None, 3000.0)])  # a data set t3 lacks
    text = groups.render()
    assert "Delta is the GCONV network, alpha 8's log p(D)/N" in text
    assert "rotated-mnist" not in text  # only the data sets of the section's own runs
    assert "| CONV network: -log p(D)/N, test % | GCONV network, alpha 8: -log p(D)/N" in text
    row = next(line for line in text.splitlines() if line.startswith("| mnist | 0 |"))
    assert row.endswith("| -0.100 |")  # 1.100 against the CONV network's 1.000, not -1.000
