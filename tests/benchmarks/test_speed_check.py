"""The speed check's verdicts: a ratio moved only beyond twice its noise and the floor."""

from __future__ import annotations

import json

import pytest

from benchmarks import speed_check


@pytest.mark.parametrize(
    ("now", "noise", "verdict"),
    [
        (2.0, 0.01, "within noise"),  # unchanged
        (2.3, 0.01, "slower"),  # +15 % beyond the 10 % floor
        (2.3, 0.10, "within noise"),  # +15 % within twice a 10 % noise
        (1.6, 0.02, "faster"),
    ],
)
def test_a_ratio_moves_only_beyond_its_noise_and_the_floor(now, noise, verdict):
    (row,) = speed_check.verdicts({"r": 2.0}, {"r": (now, noise)}, floor=0.10)
    assert row["verdict"] == verdict
    assert row["change"] == pytest.approx(now / 2.0 - 1)


def test_noise_is_half_the_spread_of_the_ratios_between_rounds():
    ratio, noise = speed_check.ratio_with_noise([2.0, 2.2, 1.8], [1.0, 1.0, 1.0])
    assert (ratio, noise) == (pytest.approx(2.0), pytest.approx(0.1))


def test_the_committed_reference_has_every_headline_ratio():
    reference = json.loads(speed_check.REFERENCE.read_text())
    assert set(speed_check.committed(reference)) >= {
        "conv_epoch_over_stock",
        "conv_operators_over_stock",
        "exact_fit_over_epoch",
        "mc_fit_over_epoch",
    }
