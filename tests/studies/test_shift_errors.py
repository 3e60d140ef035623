"""``studies/shift_errors.py``: a trained run's per-layer errors are the mean over the three
quadrant shifts of ``path_shift_errors``, and the unchanged predictions are counted right."""

import statistics

import pytest
import torch

from laplace_equivariance import path_shift_errors
from laplace_equivariance.app.runs import load_trained
from studies import shift_errors


def test_each_error_is_the_mean_over_the_three_quadrant_shifts(mixed_quadrant_run):
    measured = shift_errors.measure(mixed_quadrant_run, images=8)
    model, data = load_trained(mixed_quadrant_run)
    x = data.x_test[:8]
    per_shift = [path_shift_errors(model.eval(), x, s) for s in ((16, 0), (0, 16), (16, 16))]
    assert measured["test_images"] == 8 and len(measured["layers"]) == 8
    for k, layer in enumerate(measured["layers"]):
        expected = statistics.fmean(errors[k]["total"] for errors in per_shift)
        assert layer["shift_error"] == pytest.approx(expected, rel=1e-12)
        for path in ("fc", "conv"):
            expected = statistics.fmean(errors[k]["paths"][path] for errors in per_shift)
            assert layer["paths"][path]["shift_error"] == pytest.approx(expected, rel=1e-12)
    # a mixed start's FC paths are far from equivariant: some layer's error is not zero
    assert max(layer["shift_error"] for layer in measured["layers"]) > 1e-3
    with torch.no_grad():
        same = model(x).argmax(-1) == model(torch.roll(x, (16, 16), dims=(-2, -1))).argmax(-1)
    assert measured["prediction_unchanged"] == same.double().mean().item()


def test_a_silent_path_has_no_error():
    mean_or_none = shift_errors.mean_or_none
    assert mean_or_none([0.5, None, 0.1]) is None
    assert mean_or_none([0.5, 0.1, 0.3]) == pytest.approx(0.3)
