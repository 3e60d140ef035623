"""Path kinds, registered once: every kind builds what it declares, covered by KFAC rules and by
shared test cases, and a new kind reaches models and the curvature backend through one
registration. The cases of tests/cases.py drive each kind's symmetry
(tests/layers/test_equivariance.py), its rules' factors (tests/curvature/rules/test_rules.py)
and its exactness against the GGN (tests/curvature/test_exactness.py)."""

from __future__ import annotations

import pytest
import torch
from laplace import Laplace
from torch.utils.data import DataLoader, TensorDataset

from laplace_equivariance import EquivariantKFAC, models
from laplace_equivariance.curvature.support import check_supported
from laplace_equivariance.layers import (
    PATH_KINDS,
    FullyConnected2d,
    PathGeometry,
    PathKind,
    Symmetry,
    register_path_kind,
)
from tests.cases import KIND_CASES, kinds_without_cases

KINDS = list(PATH_KINDS)


@pytest.mark.parametrize("name", KINDS)
def test_every_kind_builds_modules_it_declares_all_covered_by_kfac_rules(name):
    kind = PATH_KINDS[name]
    for lifting in (True, False):
        channels = 4 if lifting else 8  # p4 maps carry four rotations of each channel
        geometry = PathGeometry(channels, 8, 8, 4 if kind.direct else 8, lifting)
        module = kind.build(geometry)
        assert type(module) in kind.modules
        out = module(torch.randn(2, channels, 8, 8))
        assert out.shape == (2, 8, geometry.out_size, geometry.out_size)
        check_supported(module)  # every part with parameters has a KFAC rule


@pytest.mark.parametrize("name", KINDS)
def test_every_kind_has_cases_for_its_rules_and_its_exactness(name):
    """A rule case reaches every module class the kind builds; an exact or general case
    measures its KFAC against the exact GGN (an equivariance case every kind has by
    construction: tests/cases.py's ``path_cases``)."""
    assert name not in kinds_without_cases()
    reached = {type(m) for case in KIND_CASES[name].rules for m in case.layers()}
    assert set(PATH_KINDS[name].modules) <= reached


def test_cases_are_for_registered_kinds_only():
    assert set(KIND_CASES) <= set(PATH_KINDS)


@pytest.fixture
def toy_kind():
    """A registered kind of this test only: an FC path under another path name."""
    kind = register_path_kind(
        PathKind(
            "toy-fc",
            "toy",
            Symmetry.NONE,
            True,
            lambda g: FullyConnected2d(g.in_channels, g.out_channels, g.size, g.out_size),
            (FullyConnected2d,),
            "a test's FC path",
        )
    )
    yield kind
    del PATH_KINDS[kind.name]


def test_a_new_kind_is_one_registration_for_models_and_the_curvature_backend(toy_kind):
    model = models.RelaxedNet(
        ("toy-fc", "conv"), (1, 4, 4), 3, alpha=1, widths=(1, 2), subsampling=(1, 2)
    )
    assert model.layer1.path_names == ("toy", "conv") and model.layer1.direct == ("toy",)
    x, y = torch.randn(6, 1, 4, 4), torch.randint(0, 3, (6,))
    la = Laplace(model, "classification", "all", hessian_structure="kron", backend=EquivariantKFAC)
    la.fit(DataLoader(TensorDataset(x, y), batch_size=3))
    assert la.log_marginal_likelihood().isfinite()
    with pytest.raises(ValueError, match="registered already"):
        register_path_kind(toy_kind)


def test_a_kind_registered_without_cases_is_named(toy_kind):
    assert toy_kind.name in kinds_without_cases()
