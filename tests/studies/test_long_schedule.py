"""``studies/long_schedule.py``: per-layer traces of a fit-by-fit record, and App. D's targets."""

import json

import pytest

from studies import long_schedule


def record(seed: int, fc_precision: float, fc_norm: float, earlier: float = 10.0) -> dict:
    """A learned run of one relaxed layer (FC: 2 weight tensors, 100 parameters; CONV: 10) and a
    head, with two fits; the FC path's gamma per parameter is ``fc_precision * fc_norm / 100``
    at the second fit (``earlier`` times that at the first) against CONV's 1 * 5 / 10."""

    def fit(epoch, precision):
        return {
            "epoch": epoch,
            "prior_precision": {
                "layer1.fc.input_map.weight": precision,
                "layer1.fc.output_map.weight": 1.0,
                "layer1.conv.weight": 1.0,
                "layer2.weight": 3.0,
            },
            "squared_norm": {
                "layer1.fc.input_map.weight": fc_norm,
                "layer1.fc.output_map.weight": 0.0,
                "layer1.conv.weight": 5.0,
                "layer2.weight": 1.0,
            },
        }

    return {
        "settings": {"dataset": "quadrant-mnist-digit", "method": "marglik", "seed": seed},
        "symmetry": {
            "layers": [{"paths": {"fc": {"parameters": 100}, "conv": {"parameters": 10}}}]
        },
        "fits": [fit(10, earlier * fc_precision), fit(110, fc_precision)],
    }


@pytest.fixture
def results(tmp_path, monkeypatch):
    monkeypatch.setattr(long_schedule, "RESULTS", tmp_path)

    def write(*runs):
        for run in runs:
            folder = tmp_path / f"run-seed{run['settings']['seed']}"
            folder.mkdir()
            (folder / "results.json").write_text(json.dumps(run))

    return write


def test_the_trace_normalises_gamma_by_each_paths_parameters(results):
    results(record(0, fc_precision=2e6, fc_norm=1e-6))
    trace = long_schedule.trace("quadrant-mnist-digit")
    last = trace[trace["epoch"] == 110].iloc[0]
    assert last["layer"] == 1 and len(trace) == 2, "the head is not a relaxed layer"
    assert last["fc_precision"] == 2e6 and last["conv_precision"] == 1.0
    fc, conv = 2e6 * 1e-6 / 100, 5.0 / 10
    assert last["fc_relative"] == pytest.approx(fc / (fc + conv))


def test_the_targets_hold_where_the_fc_path_is_off_with_a_high_precision(results):
    results(record(0, 2e6, 1e-9), record(1, 3e6, 1e-9))
    lines = long_schedule.target_lines("quadrant-mnist-digit").splitlines()
    assert lines[0].endswith("holds (1 of 1)") and "(2 seeds)" in lines[0]
    assert lines[1].endswith("holds (1 of 1)")


def test_a_precision_below_1e6_fails_its_target(results):
    results(record(0, 2e5, 1e-8))
    lines = long_schedule.target_lines("quadrant-mnist-digit").splitlines()
    assert lines[0].endswith("fails (0 of 1)") and lines[1].endswith("holds (1 of 1)")


def test_no_layer_off_fails(results):
    results(record(0, 1.0, 1.0))
    assert long_schedule.target_lines("quadrant-mnist-digit").endswith("fails")


def test_the_last_fit_table_reports_the_change_over_the_last_epochs(results):
    results(record(0, 2e6, 1e-9))
    table = long_schedule.last_fit_table("quadrant-mnist-digit")
    assert list(table["layer"]) == [1]
    assert float(table["FC relative: last / 100 epochs earlier"].iloc[0]) < 1


def test_precisions_that_no_longer_move_are_told_from_moving_ones(results):
    results(record(0, 150.0, 1e-16, earlier=1.0), record(1, 2e5, 0.5, earlier=0.5))
    stall = long_schedule.precision_stall("quadrant-mnist-digit")
    assert stall["stalled"]["count"] == (1, 2) and stall["stalled"]["precision"] == (150.0, 150.0)
    assert stall["stalled"]["norm"] == (1e-16, 1e-16)
    assert stall["moving"]["change"] == (2.0, 2.0)


def test_collapsed_pairs_count_those_whose_share_is_under_the_target(results):
    results(record(0, 150.0, 1e-16), record(1, 1e9, 1e-7), record(2, 1.0, 1.0))
    assert long_schedule.collapsed_pairs("quadrant-mnist-digit") == (1, 2)


def split_run(seed: int, fc: tuple[float, float], conv: tuple[float, float]) -> dict:
    """An ``evidence_split`` run of one relaxed layer: FC 100 parameters (80 of them weights),
    CONV 10 (9 weights); ``fc`` and ``conv`` are (gamma of all tensors, gamma of the weights)."""

    def path(gammas, parameters, weights):
        return {
            "gamma": gammas[0],
            "parameters": parameters,
            "weight_gamma": gammas[1],
            "weight_parameters": weights,
        }

    return {
        "settings": {"dataset": "quadrant-mnist-digit", "seed": seed},
        "layers": {"layer1": {"fc": path(fc, 100, 80), "conv": path(conv, 10, 9)}},
    }


def test_the_fitted_shares_leave_the_biases_out_of_the_weights_alone(
    results, tmp_path, monkeypatch
):
    results(record(0, 2e6, 1e-9), record(1, 3e6, 1e-9))
    fitted = tmp_path / "split.json"
    fitted.write_text(
        json.dumps(
            {"runs": [split_run(0, (1.0, 1e-6), (5.0, 4.5)), split_run(1, (1.0, 0.0), (5.0, 4.5))]}
        )
    )
    monkeypatch.setattr(long_schedule, "FITTED", fitted)
    shares = long_schedule.fitted_relative("quadrant-mnist-digit")
    fc_all, conv_all = 1.0 / 100, 5.0 / 10
    assert shares.loc[(0, 1), "all"] == pytest.approx(fc_all / (fc_all + conv_all))
    fc_weights, conv_weights = 1e-6 / 80, 4.5 / 9
    assert shares.loc[(0, 1), "weights"] == pytest.approx(fc_weights / (fc_weights + conv_weights))
    lines = long_schedule.fitted_target_lines("quadrant-mnist-digit").splitlines()
    assert (
        "all tensors: fails (0 of 1; 0 of the 2 (seed, layer) pairs)" in lines[0]
    )  # 0.0196: the biases keep the FC path's gamma
    assert "weights alone: holds (1 of 1; 2 of the 2" in lines[1]
    assert long_schedule.collapsed_fitted("quadrant-mnist-digit") == {
        "all": 0,
        "weights": 2,
        "pairs": 2,
    }
    table = long_schedule.fitted_table("quadrant-mnist-digit")
    assert table.loc[0, "fitted: all tensors"] == "2.0e-02"
    assert long_schedule.bias_parameters("quadrant-mnist-digit", 1) == 20


def test_the_pairs_that_miss_the_target_fitted_are_named_with_their_trend(
    results, tmp_path, monkeypatch
):
    """Seed 1's FC weights keep a fitted share above 1e-4 (its estimate is below): layer 1
    misses the target fitted, not estimated; its relative share fell tenfold in 100 epochs."""
    results(record(0, 2e6, 1e-9), record(1, 3e6, 1e-9))
    fitted = tmp_path / "split.json"
    runs = [split_run(0, (1.0, 1e-6), (5.0, 4.5)), split_run(1, (1.0, 0.5), (5.0, 4.5))]
    fitted.write_text(json.dumps({"runs": runs}))
    monkeypatch.setattr(long_schedule, "FITTED", fitted)
    assert long_schedule.missing_layers("quadrant-mnist-digit", "estimated") == []
    assert long_schedule.missing_layers("quadrant-mnist-digit", "weights") == [1]
    missed = long_schedule.missing_pairs("quadrant-mnist-digit")
    assert missed["pairs"] == 1 and missed["norm"] == (1e-9, 1e-9)
    assert missed["change"][0] == pytest.approx(0.1, rel=1e-3) and missed["falling"] == 1
