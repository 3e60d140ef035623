"""Sections rendered from the measurements on trained runs (``studies.measured_tables``)."""

import json

from studies import measured_tables, runs_table


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
    monkeypatch.setattr(runs_table, "RESULTS", tmp_path)
    runs_table.clear_caches()
    try:
        text = measured_tables.evidence_split_section("split.json")
    finally:
        runs_table.clear_caches()
    assert (
        "| learned F-FC+CONV, started equivariant | 224 / 268 | 10 / 10 | 10 / 14 | 200 / 240 |"
        in text
    )
    assert "| learned CONV | 154 | 10 | 0 | 140 | 4 |" in text
    assert "| learned F-FC+CONV, started equivariant, FC frozen | 194 | 10 | 0 | 180 | 4 |" in text
    assert "| layer1 | 12 (2) | 220 (1) | 140 (1) |" in text  # means over the two seeds


def test_overstated_counts_per_seed_the_tensors_whose_kfac_occam_term_is_above_the_exact(
    tmp_path, monkeypatch
):
    def block(kfac, exact):
        return {
            "tensor": "layer1.conv.weight",
            "kfac": {"log_det_term": kfac},
            "exact": {"log_det_term": exact},
        }

    runs = [{"blocks": [block(2.0, 1.0), block(1.0, 1.0), block(0.5, 1.0)]}]
    runs.append({"blocks": [block(3.0, 1.0), block(1.5, 1.0), block(0.5, 1.0)]})
    (tmp_path / "blocks.json").write_text(json.dumps({"runs": runs}))
    monkeypatch.setattr(runs_table, "RESULTS", tmp_path)
    runs_table.clear_caches()
    try:
        assert measured_tables.overstated("blocks.json") == ([1, 2], 3)  # equal is not above
    finally:
        runs_table.clear_caches()


def test_overstated_from_a_layer_on_counts_only_that_layer_and_deeper(tmp_path, monkeypatch):
    def block(layer, kfac):
        return {
            "tensor": f"layer{layer}.fc.weight",
            "kfac": {"log_det_term": kfac},
            "exact": {"log_det_term": 1.0},
        }

    runs = [{"blocks": [block(1, 2.0), block(2, 0.5), block(10, 2.0)]}]
    (tmp_path / "blocks.json").write_text(json.dumps({"runs": runs}))
    monkeypatch.setattr(runs_table, "RESULTS", tmp_path)
    runs_table.clear_caches()
    try:
        assert measured_tables.overstated("blocks.json", from_layer=2) == ([1], 2)
        assert measured_tables.overstated("blocks.json") == ([2], 3)
    finally:
        runs_table.clear_caches()


def test_conv_over_fc_divides_the_paths_gamma_overstatements_seed_by_seed(tmp_path, monkeypatch):
    def block(tensor, kfac, exact):
        return {"tensor": tensor, "kfac": {"gamma": kfac}, "exact": {"gamma": exact}}

    def run(conv_kfac):
        return {
            "blocks": [
                block("layer1.fc.input_map.weight", 3.0, 2.0),
                block("layer1.fc.output_map.weight", 1.0, 2.0),  # FC: 4 / 4 = 1
                block("layer1.conv.weight", conv_kfac, 2.0),
            ]
        }

    (tmp_path / "blocks.json").write_text(json.dumps({"runs": [run(1.0), run(4.0)]}))
    monkeypatch.setattr(runs_table, "RESULTS", tmp_path)
    runs_table.clear_caches()
    try:
        assert measured_tables.conv_over_fc("blocks.json") == {"layer1": [0.5, 2.0]}
    finally:
        runs_table.clear_caches()
