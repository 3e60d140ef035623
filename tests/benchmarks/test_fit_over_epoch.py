"""The fit's breakdown: its parts are timed inside a fit, and only there."""

from __future__ import annotations

import pytest
import torch

from benchmarks import fit_over_epoch
from benchmarks.timing import loader
from laplace_equivariance import models


def _methods() -> list:
    return [getattr(o, n) for methods in fit_over_epoch.PARTS.values() for o, n in methods]


def test_the_parts_are_timed_within_a_fit_and_the_methods_restored():
    torch.manual_seed(0)
    model = models.build("f-fc+conv", (3, 32, 32), 10, 1)
    data = loader(8, 4, "cpu")
    originals = _methods()
    fit = fit_over_epoch.median_fit(model, data, "cpu", repeats=1)
    assert _methods() == originals
    parts = fit["in_fit_s"]
    assert all(parts[part] > 0 for part in ("passes", "statistics", "eigenvalues", "rest"))
    assert sum(parts.values()) == pytest.approx(fit["instrumented_fit_s"])
    with fit_over_epoch.timed_fit_parts("cpu") as seconds:
        model(next(iter(data))[0])  # no fit: none of the parts runs
    assert set(seconds.values()) == {0.0}
