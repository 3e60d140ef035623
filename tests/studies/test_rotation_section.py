"""Table 3's rotation section: GCONV's shares compared layer by layer, settledness from the fits."""

import copy
import json

import pytest

from studies import rotation_section, runs_table
from studies.rotation_section import (
    RotationSplitSection,
    fit_shares,
    last_fits_move,
)

TEMPLATE = runs_table.RESULTS / "table3-mnist-20ep" / "rotated-mnist-f-fc+conv+gconv-marglik-seed0"


def _run(dataset: str, seed: int, gconv: list[float], fc: float = 0.001) -> dict:
    """A learned Table 3 run whose layers give GCONV ``gconv[k]`` and FC ``fc``, CONV the rest."""
    result = json.loads((TEMPLATE / "results.json").read_text())
    result["settings"] |= {"dataset": dataset, "seed": seed}
    for row, share in zip(result["symmetry"]["layers"], gconv, strict=True):
        row["paths"]["gconv"]["relative"] = share
        row["paths"]["fc"]["relative"] = fc
        row["paths"]["conv"]["relative"] = 1 - share - fc
    return result


def _write(root, results: list[dict], folder_name: str = "t3") -> None:
    for result in results:
        s = result["settings"]
        folder = root / folder_name / f"{s['dataset']}-f-fc+conv+gconv-marglik-seed{s['seed']}"
        folder.mkdir(parents=True)
        (folder / "results.json").write_text(json.dumps(result))


@pytest.fixture
def section(tmp_path, monkeypatch):
    monkeypatch.setattr(runs_table, "RESULTS", tmp_path)
    return tmp_path, RotationSplitSection("t3")


UPRIGHT = [0.5] * 8
MOSTLY_ABOVE = [0.6] * 5 + [0.4] * 3


def test_rotation_target_holds_only_when_every_seed_has_most_layers_above(section):
    root, rotation = section
    _write(root, [_run("mnist", s, UPRIGHT) for s in (0, 1)])
    _write(root, [_run("rotated-mnist", 0, MOSTLY_ABOVE), _run("rotated-mnist", 1, MOSTLY_ABOVE)])
    text = rotation.render()
    effective = "GCONV's share of the relative effective parameters higher on rotated"
    assert f"seed 0: {effective} than on upright digits in 5 of 8" in text
    assert f"{effective} digits in most layers, in every seed (2 seeds): holds" in text

    # a seed with only 4 of 8 layers above (not most) breaks the target
    (root / "t3" / "rotated-mnist-f-fc+conv+gconv-marglik-seed1" / "results.json").write_text(
        json.dumps(_run("rotated-mnist", 1, [0.6] * 4 + [0.4] * 4))
    )
    text = rotation.render()
    assert f"seed 1: {effective} than on upright digits in 4 of 8" in text
    assert f"{effective} digits in most layers, in every seed (2 seeds): fails" in text


@pytest.mark.parametrize(
    ("dataset", "adjective"),
    [("quarter-turn-mnist", "quarter-turned"), ("partially-rotated-mnist", "partially rotated")],
)
def test_other_turned_digits_are_judged_against_the_upright_ones_apart(section, dataset, adjective):
    root, rotation = section
    _write(root, [_run("mnist", 0, UPRIGHT), _run(dataset, 0, MOSTLY_ABOVE)])
    text = rotation.render()
    turned = f"GCONV's share of the relative effective parameters higher on {adjective}"
    assert f"{turned} digits in most layers, in every seed (1 seeds): holds" in text
    assert "relative effective parameters on rotated against upright digits: no seed" in text
    assert f"on {adjective} digits over those on upright digits" in text


def test_translated_fc_is_judged_by_its_largest_layer(section):
    root, rotation = section
    _write(root, [_run("translated-mnist", 0, UPRIGHT, fc=0.002)])
    assert "on translated digits: holds" in rotation.render()
    _write(root, [_run("translated-mnist", 1, UPRIGHT, fc=0.03)])
    text = rotation.render()
    assert "on translated digits: fails" in text
    assert "seed 1: 3.00 %" in text
    assert "on rotated against upright digits: no seed has both runs" in text


def test_output_energy_is_judged_on_its_own_and_growth_is_per_path(section):
    root, rotation = section
    upright, rotated = _run("mnist", 0, UPRIGHT), _run("rotated-mnist", 0, UPRIGHT)
    for row in rotated["path_outputs"]:
        row["paths"]["gconv"] += 0.1  # every layer's GCONV output share higher when rotated
    for row in rotated["symmetry"]["layers"]:
        row["paths"]["conv"]["effective"] = 3 * row["paths"]["conv"]["effective"]
    _write(root, [upright, rotated])
    text = rotation.render()
    output = "GCONV's share of the output energy higher on rotated digits in most layers"
    assert f"{output}, in every seed (1 seeds): holds" in text
    growth = text.split("effective parameters grow more than the other paths':")[1]
    assert "| layer1 | 1.0 | 3.0 | 1.0 |" in growth


def test_an_empty_folder_renders_without_runs(section):
    assert "No learned run yet." in section[1].render()


def test_fit_shares_normalise_precision_times_squared_norm_per_parameter():
    result = json.loads((TEMPLATE / "results.json").read_text())
    fit = copy.deepcopy(result["fits"][-1])
    layer1 = {n: p for n, p in result["symmetry"]["layers"][0]["paths"].items()}
    for name in fit["prior_precision"]:
        fit["prior_precision"][name] = 1.0
        fit["squared_norm"][name] = 0.0
    # one effective parameter per parameter of GCONV, half of one per CONV parameter, no FC
    fit["squared_norm"]["layer1.gconv.weight"] = float(layer1["gconv"]["parameters"])
    fit["squared_norm"]["layer1.conv.weight"] = layer1["conv"]["parameters"] / 2
    assert fit_shares(result, fit, "gconv")[0] == pytest.approx(2 / 3)
    assert fit_shares(result, fit, "conv")[0] == pytest.approx(1 / 3)
    assert fit_shares(result, fit, "fc")[0] == 0.0


def test_last_fits_move_is_the_largest_change_of_any_layer():
    result = json.loads((TEMPLATE / "results.json").read_text())
    assert last_fits_move(result, "gconv") >= 0
    frozen = copy.deepcopy(result)
    frozen["fits"] = [copy.deepcopy(result["fits"][-1]) for _ in range(3)]
    assert last_fits_move(frozen, "gconv") == 0
    moved = copy.deepcopy(frozen)
    moved["fits"][-1]["prior_precision"]["layer3.gconv.weight"] *= 10
    assert last_fits_move(moved, "gconv") > rotation_section.SETTLED_POINTS


def test_second_half_move_reads_every_fit_from_half_the_epochs_on():
    result = json.loads((TEMPLATE / "results.json").read_text())
    last = result["fits"][-1]
    result["settings"]["epochs"] = 20
    early, late = copy.deepcopy(last), copy.deepcopy(last)
    early["epoch"], late["epoch"] = 5, 15
    early["prior_precision"]["layer3.gconv.weight"] *= 100  # before half the epochs: not read
    result["fits"] = [early, late, copy.deepcopy(last) | {"epoch": 20}]
    assert rotation_section.second_half_move(result, "gconv") == 0
    late["prior_precision"]["layer3.gconv.weight"] *= 10
    assert rotation_section.second_half_move(result, "gconv") > rotation_section.SETTLED_POINTS


def test_settledness_warns_when_the_schedule_ends_at_zero(section):
    root, rotation = section
    run = _run("mnist", 0, UPRIGHT)
    run["settings"]["lr_min"] = 0.0
    _write(root, [run])
    assert "flat last fits do not tell a settled structure" in rotation.render()
    run["settings"]["lr_min"] = 1e-4
    (root / "t3" / "mnist-f-fc+conv+gconv-marglik-seed0" / "results.json").write_text(
        json.dumps(run)
    )
    text = rotation.render()
    assert "second half, points" in text
    assert "flat last fits" not in text


def _started(run: dict, start: str, neg_log_marglik: float) -> dict:
    """``run`` from ``start``, its last fit's -log p(D) set to ``neg_log_marglik``."""
    run["settings"]["start"] = start
    run["neg_log_marglik"] = [*run["neg_log_marglik"][:-1], neg_log_marglik]
    return run


def test_rivals_keep_the_run_of_highest_evidence_per_data_set_and_seed(section):
    root, _ = section
    n = _run("mnist", 0, UPRIGHT)["n_train"]
    chosen = RotationSplitSection("t3", rivals=("t3b",))
    # upright: the held start has the higher evidence; rotated: the held-gconv start
    _write(root, [_started(_run("mnist", 0, UPRIGHT), "held", 1.0 * n)])
    _write(root, [_started(_run("mnist", 0, [0.9] * 8), "held-gconv", 1.2 * n)], "t3b")
    _write(root, [_started(_run("rotated-mnist", 0, [0.4] * 8), "held", 2.5 * n)])
    _write(root, [_started(_run("rotated-mnist", 0, MOSTLY_ABOVE), "held-gconv", 1.8 * n)], "t3b")
    _write(root, [_started(_run("translated-mnist", 0, UPRIGHT), "held", 1.5 * n)], "t3b")
    text = chosen.render()
    assert "| mnist | 0 | 1.000 | 1.200 | held |" in text
    assert "| rotated-mnist | 0 | 2.500 | 1.800 | held-gconv |" in text
    assert "| translated-mnist | 0 | 1.500 | - | held (no rival run) |" in text
    # the shares are the kept runs': 5 of 8 layers above the held start's upright 50 %
    assert "seed 0: GCONV's share of the relative effective parameters higher on rotated " in text
    assert "than on upright digits in 5 of 8 layers" in text
    # without rivals the folder's own runs are read, and no choice is listed
    alone = RotationSplitSection("t3").render()
    assert "The start each data set and seed keeps" not in alone
    assert "upright digits in 0 of 8 layers" in alone


def test_a_run_without_a_fit_cannot_be_ranked_by_evidence(section):
    root, _ = section
    run = _run("mnist", 0, UPRIGHT)
    run["neg_log_marglik"] = []
    _write(root, [run])
    _write(root, [_run("mnist", 0, UPRIGHT)], "t3b")
    with pytest.raises(ValueError, match="no marginal-likelihood fit"):
        RotationSplitSection("t3", rivals=("t3b",)).render()


@pytest.mark.parametrize(
    "accuracy, verdict",
    [
        # ten digits, 4,000 images: at chance up to 11.9 %; such a run's shares mean nothing
        (0.104, "fails"),
        # above that bound the run learned, though below the fixed 20 % once used
        (0.15, "holds"),
    ],
)
def test_a_seed_fails_the_target_where_its_run_is_at_chance(section, accuracy, verdict):
    """A seed whose run never learned must not count as holding; one above chance counts."""
    root, rotation = section
    weak = _run("rotated-mnist", 1, MOSTLY_ABOVE)
    weak["train"]["accuracy"] = accuracy
    _write(root, [_run("mnist", s, UPRIGHT) for s in (0, 1)])
    _write(root, [_run("rotated-mnist", 0, MOSTLY_ABOVE), weak])
    text = rotation.render()
    dead = "seed 1: the rotated-mnist run (10.4 %, chance up to 11.9 %) never learned"
    assert (dead in text) == (verdict == "fails")
    effective = "GCONV's share of the relative effective parameters higher on rotated"
    assert f"{effective} digits in most layers, in every seed (2 seeds): {verdict}" in text


def test_a_recorded_chance_verdict_is_read_not_recomputed(section):
    """Runs record ``train_at_chance`` with the labels they trained on: that verdict stands."""
    root, rotation = section
    recorded = _run("rotated-mnist", 0, MOSTLY_ABOVE)
    recorded["train_at_chance"] = True
    _write(root, [_run("mnist", 0, UPRIGHT), recorded])
    assert "seed 0: the rotated-mnist run (94.4 %" in rotation.render()
    assert not rotation_section.never_learned(
        _run("rotated-mnist", 0, MOSTLY_ABOVE)
        | {"train": {"accuracy": 0.05}, "train_at_chance": False}
    )
