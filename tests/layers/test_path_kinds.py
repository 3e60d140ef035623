"""Path kinds, registered once: every kind builds what it declares, covered by KFAC rules, and
a new kind reaches models and the curvature backend through one registration (each kind's
symmetry: tests/layers/test_equivariance.py, over tests/cases.py)."""

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
