"""The fit's breakdown: the statistics' seconds are timed inside a fit, and only there."""

from __future__ import annotations

import torch
from asdl.operations.operation import OperationContext

from benchmarks import fit_over_epoch
from benchmarks.timing import loader
from laplace_equivariance import models


def test_statistics_are_timed_within_a_fit_and_the_hooks_restored():
    torch.manual_seed(0)
    model = models.build("f-fc+conv", (3, 32, 32), 10, 1)
    data = loader(8, 4, "cpu")
    originals = (
        OperationContext.call_operations_in_forward,
        OperationContext.call_operations_in_backward,
    )
    fit = fit_over_epoch.median_fit(model, data, "cpu", repeats=1)
    restored = (
        OperationContext.call_operations_in_forward,
        OperationContext.call_operations_in_backward,
    )
    assert restored == originals
    assert 0 < fit["statistics_s"] < fit["fit_s"]
    with fit_over_epoch.timed_statistics("cpu") as seconds:
        model(next(iter(data))[0])  # no fit: no ASDL operation runs
    assert seconds == [0.0]
