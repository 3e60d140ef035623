"""``run_plots``: the PNG files a run writes, each figure closed once saved."""

import pytest
from matplotlib import pyplot as plt

from laplace_equivariance.app.run_config import RunConfig
from laplace_equivariance.app.run_plots import write_run_plots

SYMMETRY = {
    "layers": [
        {"layer": "layer1", "paths": {"fc": {"relative": 0.2}, "conv": {"relative": 0.8}}},
        {"layer": "layer2", "paths": {"fc": {"relative": 0.01}, "conv": {"relative": 0.99}}},
    ]
}
SETTINGS = RunConfig(model="f-fc+conv", dataset="quadrant-mnist", method="marglik")


@pytest.mark.parametrize(
    ("learned_structure", "written"),
    [(True, {"training.png", "symmetry.png"}), (False, {"training.png"})],
)
def test_a_relaxed_run_writes_its_plots_and_leaves_no_figure_open(
    tmp_path, learned_structure, written
):
    results = {"losses": [2.0, 1.5], "neg_log_marglik": [900.0, 850.0], "symmetry": SYMMETRY}
    before = set(plt.get_fignums())
    write_run_plots(results, SETTINGS, tmp_path, learned_structure)
    assert {p.name for p in tmp_path.iterdir()} == written
    assert set(plt.get_fignums()) == before


def test_an_invariant_weights_run_plots_its_transformation_magnitudes(tmp_path):
    results = {
        "losses": [2.0, 1.5],
        "neg_log_marglik": [1.9, 1.4],
        "invariance": {"eta": [[0.1], [0.3]]},
    }
    settings = RunConfig(model="invariant-weights", method="elbo", invariance="rotation")
    before = set(plt.get_fignums())
    write_run_plots(results, settings, tmp_path, learned_structure=False)
    assert {p.name for p in tmp_path.iterdir()} == {"training.png", "eta.png"}
    assert set(plt.get_fignums()) == before
