"""``studies/path_scale.py``: the two ways of combining paths, and its docs table."""

import torch

from laplace_equivariance.layers import CircularConv2d, RelaxedLayer
from studies import path_scale


def test_mean_is_the_reference_codes_combination_only_inside_the_block():
    layer = RelaxedLayer({"a": CircularConv2d(1, 2, 3, 4), "b": CircularConv2d(1, 2, 3, 4)})
    x = torch.randn(3, 1, 4, 4)
    with path_scale.combined_by("mean"):
        torch.testing.assert_close(layer(x), (layer.a(x) + layer.b(x)) / 2)
    torch.testing.assert_close(layer(x), (layer.a(x) + layer.b(x)) / 2**0.5)


def test_a_run_records_the_initial_scales_and_every_epoch():
    result = path_scale.run(seed=0, combination="mean", epochs=1, n_train=64)
    assert len(result["init_layer_std"]) == 8 and len(result["epochs"]) == 1
    assert result["init_layer_std"][-1] < 0.3 * result["init_layer_std"][0]
    assert {"loss", "accuracy", "norm2"} <= set(result["epochs"][0])


def test_the_page_shows_the_table_of_the_committed_runs():
    from benchmarks.markdown_table import table as markdown
    from pages import render_pages

    table = markdown(path_scale.table(path_scale.RESULTS))
    assert "| scaled-sum |" in table and "| mean |" in table
    assert table in render_pages.render("learned_structure.md")
