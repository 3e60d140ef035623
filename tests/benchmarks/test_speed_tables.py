"""``benchmarks/speed_tables.py``: the figures docs/speed.md's paragraphs cite."""

import json

import pytest

from benchmarks import speed_tables


def test_move_is_the_spread_in_percent_of_the_largest():
    assert speed_tables.move([0.8, 1.0]) == pytest.approx(20.0)
    assert speed_tables.move([2.0, 1.5, 1.0]) == pytest.approx(50.0)
    assert speed_tables.move([3.0]) == 0.0
    with pytest.raises(ValueError):
        speed_tables.move([])


def test_sides_says_where_the_values_lie_against_the_target():
    assert speed_tables.sides([1.17, 1.26], 1.2) == "on either side of the target"
    assert speed_tables.sides([1.1, 1.2], 1.2) == "both at or below the target"
    assert speed_tables.sides([1.3, 1.4, 1.5], 1.2) == "all above the target"


def _row(model, epoch, exact, mc, training=None, wall=None, kernels=None):
    row = {
        "model": model,
        "epoch_s": epoch,
        "exact": {"fit_s": exact, "fit_over_epoch": exact / epoch},
        "mc": {"fit_s": mc, "fit_over_epoch": mc / epoch},
    }
    if training:
        row["training"] = {"mc_over_map": training[0], "exact_over_map": training[1]}
    if wall:
        row["operators"] = {"training_step": {"wall_ms": wall} | kernels}
    return row


def _write(folder, name, commit, device, rows, command="python -m benchmarks.gpu_speed"):
    report = {"command": command, "package_commit": commit, "device": device, "rows": rows}
    (folder / f"{name}.json").write_text(json.dumps(report))


def test_run_moves_compares_the_runs_of_one_commit_and_machine(tmp_path, monkeypatch):
    monkeypatch.setattr(speed_tables, "RESULTS", tmp_path)
    folder = tmp_path / "speed"
    folder.mkdir()
    _write(
        folder,
        "a-1",
        "abc",
        "cpu",
        [_row("stock-cnn", 1.0, 4.0, 2.0), _row("conv", 1.0, 3.0, 1.0, (1.2, 2.0))],
    )
    _write(
        folder,
        "a-2",
        "abc",
        "cpu",
        [_row("stock-cnn", 0.8, 4.0, 2.0), _row("conv", 1.0, 3.0, 1.0, (1.5, 2.0))],
    )
    _write(folder, "b", "def", "cpu", [_row("stock-cnn", 9.0, 9.0, 9.0)])  # run once: left out
    _write(folder, "c", "abc", "gpu", [_row("stock-cnn", 9.0, 9.0, 9.0)])  # another machine
    moves = speed_tables.run_moves("speed")
    assert set(moves["commit"]) == {"abc"} and set(moves["runs"]) == {2}
    by = moves.set_index(["model", "measure", "kind"])["move"]
    assert by[("stock-cnn", "epoch", "seconds")] == pytest.approx(20.0)
    assert by[("stock-cnn", "exact fit", "seconds")] == pytest.approx(0.0)
    assert by[("stock-cnn", "exact fit", "ratio")] == pytest.approx(20.0)  # 4/1 against 4/0.8
    assert by[("conv", "epoch", "ratio")] == pytest.approx(20.0)  # against the stock CNN's epoch
    assert by[("conv", "mc training", "ratio")] == pytest.approx(20.0)
    assert by[("conv", "exact training", "ratio")] == pytest.approx(0.0)
    assert ("stock-cnn", "epoch", "ratio") not in by.index  # 1.0 against itself
    assert ("stock-cnn", "mc training", "ratio") not in by.index


def test_step_kernel_shares_read_the_cuda_reports_only(tmp_path, monkeypatch):
    monkeypatch.setattr(speed_tables, "RESULTS", tmp_path)
    folder = tmp_path / "gpu_speed"
    folder.mkdir()
    cuda = "python -m benchmarks.gpu_speed --device cuda"
    rows = [
        _row("stock-cnn", 1.0, 1.0, 1.0, wall=10.0, kernels={"kernel_ms": 1.0}),
        _row("conv", 1.0, 1.0, 1.0, wall=20.0, kernels={"device_ms_overcounted": 5.0}),
    ]
    _write(folder, "cuda", "abc", "gpu", rows, command=cuda)
    _write(folder, "cpu", "abc", "cpu", rows, command="python -m benchmarks.gpu_speed --device cpu")
    assert speed_tables.step_kernel_shares() == pytest.approx([0.1, 0.25])


def test_the_committed_reports_give_the_pages_figures():
    moves = speed_tables.run_moves("gpu_speed", "fit_over_epoch-before-after")
    assert not moves.empty and (moves["runs"] >= 2).all()
    assert ((moves["move"] >= 0) & (moves["move"] < 100)).all()
    shares = speed_tables.step_kernel_shares()
    assert shares and all(0 < s < 1 for s in shares)


def test_fit_parts_sum_the_floor_statistics_and_eigenvalues_against_the_target():
    def fit(total, floor, passes, statistics, eigenvalues):
        rest = total - passes - statistics - eigenvalues
        parts = {"passes": passes, "statistics": statistics, "eigenvalues": eigenvalues}
        return {
            "fit_over_epoch": total,
            "floor_over_epoch": floor,
            "in_fit_over_epoch": parts | {"rest": rest},
        }

    report = {
        "targets": {"exact": 5.0, "mc": 2.0},
        "rows": [
            {
                "model": "m",
                "n": 8,
                "exact": fit(6.0, 2.8, 3.0, 2.0, 0.5),
                "mc": fit(1.5, 0.5, 0.6, 0.4, 0.4),
            }
        ],
    }
    parts = speed_tables.fit_parts(report).set_index("curvature")
    assert parts.loc["exact", "without_rest"] == pytest.approx(2.8 + 2.0 + 0.5)
    assert parts.loc["exact", "rest"] == pytest.approx(0.5)
    assert parts.loc["exact", "passes"] == 3.0 and parts.loc["exact", "floor"] == 2.8
    assert parts.loc["exact", "target"] == 5.0 and parts.loc["mc", "target"] == 2.0
    assert parts.loc["mc", "without_rest"] == pytest.approx(1.3)
