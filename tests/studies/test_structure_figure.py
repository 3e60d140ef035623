"""``studies/structure_figure.py``: which runs the figure draws."""

import json
import sys

import pytest

from studies import structure_figure


def _run(folder, name, start, fc_share, paths=("fc", "conv")):
    """A learned run's results.json with one layer whose FC path has ``fc_share``."""
    shares = {"fc": fc_share, "conv": 1 - fc_share}
    layer = {"layer": "layer1", "paths": {p: {"relative": shares[p]} for p in paths}}
    settings = {"dataset": "d", "seed": 0, "start": start}
    (folder / name).mkdir(parents=True)
    results = {"settings": settings, "symmetry": {"layers": [layer]}}
    (folder / name / "results.json").write_text(json.dumps(results))


def _draw(monkeypatch, folder, *options, more=()):
    drawn = []

    def mean_shares(runs):
        drawn.extend(runs)
        return ["layer1"], {"fc": [0.1], "conv": [0.9]}, [[0.0], [0.0]]

    monkeypatch.setattr(structure_figure, "mean_shares", mean_shares)
    folders = [str(f) for f in (folder, *more)]
    argv = ["structure_figure.py", *folders, "--out", str(folder / "f.png"), *options]
    monkeypatch.setattr(sys, "argv", argv)
    structure_figure.main()
    return [run["settings"]["start"] for run in drawn]


def test_the_figure_keeps_the_relaxed_runs_of_the_start_asked_for(tmp_path, monkeypatch):
    _run(tmp_path, "d-f-fc+conv-marglik-held-start-seed0", "held", 0.01)
    _run(tmp_path, "d-f-fc+conv-marglik-equivariant-start-seed0", "equivariant", 0.2)
    _run(tmp_path, "d-conv-marglik-seed0", "mixed", 0.0, paths=("conv",))
    assert _draw(monkeypatch, tmp_path, "--start", "held") == ["held"]
    assert sorted(_draw(monkeypatch, tmp_path)) == ["equivariant", "held"]  # no CONV run
    with pytest.raises(SystemExit, match="No learned runs"):
        _draw(monkeypatch, tmp_path, "--start", "mixed")


def test_the_figure_draws_the_runs_of_every_folder_given(tmp_path, monkeypatch):
    _run(tmp_path / "a", "d-f-fc+conv-marglik-held-start-seed0", "held", 0.01)
    _run(tmp_path / "b", "d-f-fc+conv-marglik-equivariant-start-seed0", "equivariant", 0.2)
    drawn = _draw(monkeypatch, tmp_path / "a", more=(tmp_path / "b",))
    assert sorted(drawn) == ["equivariant", "held"]
