"""check_equivariance on every path kind and every relaxed layer of the paper's models.

A path or layer equivariant to a transformation by construction commutes with it to float64
rounding; one that is not is measured, and as drawn it is far from equivariant.
"""

from __future__ import annotations

import pytest
import torch

from laplace_equivariance import models
from laplace_equivariance.layers import (
    PATH_KINDS,
    QuarterTurn,
    Shift,
    Symmetry,
    equivariance_error,
)
from tests.cases import PathCase, path_cases, relaxed_layer_inputs

EXACT = 1e-11  # float64 rounding through a few layers' sums
FAR = 1e-3  # a randomly drawn FC path's error is order one

GENERATORS = tuple(dict.fromkeys(g for symmetry in Symmetry for g in symmetry.generators))
"""Every registered symmetry's generators: each path kind is probed with all of them."""


@pytest.mark.parametrize("case", path_cases(), ids=lambda case: case.id)
def test_every_path_kind_is_exactly_as_equivariant_as_its_symmetry_says(case: PathCase):
    """Exact for the generators of the kind's symmetry, far from it for every other one."""
    module = case.build().double()
    x = case.inputs()
    symmetry = PATH_KINDS[case.kind].symmetry
    for transform in GENERATORS:
        if isinstance(transform, QuarterTurn) and not (case.lifting or module.p4_input):
            continue  # a planar map on p4 channels has no rotation to test
        error = module.check_equivariance(x, transform)
        exact = transform in symmetry.generators
        assert (error < EXACT) if exact else (error > FAR), (transform, error)


@pytest.mark.parametrize(
    "name", ["conv", "fc+conv", "f-fc+conv", "s-conv", "gconv", "f-fc+conv+gconv-full"]
)
def test_relaxed_layers_are_equivariant_exactly_where_all_their_paths_are(name):
    """Shifts by even pixels (every subsampling layer halves the grid; the polyphase choice is
    then the same) and, for p4 layers, quarter turns."""
    kinds = [PATH_KINDS[kind] for kind in models.MODEL_NAMES[name]]
    translation = all(kind.symmetry.includes(Shift) for kind in kinds)
    rotation = all(kind.symmetry.includes(QuarterTurn) for kind in kinds)
    for layer_name, layer, x in relaxed_layer_inputs(name):
        side = x.shape[-1]
        if side >= 4:
            error = layer.check_equivariance(x, Shift(2, side // 2))
            assert (error < EXACT) if translation else (error > FAR), (layer_name, error)
        if layer.p4_output and side > 1:
            error = layer.check_equivariance(x, QuarterTurn(1))
            assert (error < EXACT) if rotation else (error > FAR), (layer_name, error)


def test_a_shift_without_a_counterpart_on_the_output_grid_is_refused():
    (_, layer, x), *_ = [c for c in relaxed_layer_inputs("conv") if c[0] == "layer2"]
    with pytest.raises(ValueError, match="multiples of 2"):
        layer.check_equivariance(x, Shift(1, 0))
    with pytest.raises(ValueError, match="does not divide"):
        equivariance_error(torch.nn.AdaptiveAvgPool2d(3), x, Shift(2, 2))
