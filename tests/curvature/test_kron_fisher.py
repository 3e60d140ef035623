"""The Kronecker-only fisher driver: ASDL's factors without ASDL's per-pass bookkeeping."""

from __future__ import annotations

import pytest
import torch
from asdl.fisher import FisherConfig, FisherExactMSE, FisherMaker
from asdl.grad_maker import LOSS_CROSS_ENTROPY, LOSS_MSE
from asdl.matrices import FISHER_EXACT, SHAPE_FULL, SHAPE_KRON
from torch import nn

from laplace_equivariance import models
from laplace_equivariance.curvature.cross_entropy import ReducedRankCrossEntropyGGN
from laplace_equivariance.curvature.kron_fisher import ExactGaussianGGN
from tests.curvature.reference import fit_kfac


class AsdlDrivenGGN(ReducedRankCrossEntropyGGN):
    """The same ``K - 1`` passes, driven by ASDL's own ``forward_and_backward``."""

    def forward_and_backward(self):
        return FisherMaker.forward_and_backward(self)


def kron_factors(
    maker_type: type, model: nn.Module, x: torch.Tensor, loss_type: str = LOSS_CROSS_ENTROPY
) -> dict[str, list]:
    """Run one maker on ``x``; every module's ``[A, B]`` by module name."""
    config = FisherConfig(
        fisher_type=FISHER_EXACT,
        loss_type=loss_type,
        fisher_shapes=[SHAPE_KRON],
        data_size=1,
    )
    maker = maker_type(model, config)
    maker.setup_model_call(model, x)
    maker.forward_and_backward()
    return {
        name: [module.fisher.kron.A, module.fisher.kron.B]
        for name, module in model.named_modules()
        if getattr(module, "fisher", None) is not None
    }


@pytest.fixture
def relaxed_model() -> nn.Module:
    return models.build("f-fc+conv", (1, 32, 32), 5, alpha=1).double()


def test_factors_equal_those_of_asdls_driver(relaxed_model):
    """Same forward pass, same backward passes, same accumulation order: equal bit for bit."""
    x = torch.randn(6, 1, 32, 32, dtype=torch.float64)
    ours = kron_factors(ReducedRankCrossEntropyGGN, relaxed_model, x)
    asdl = kron_factors(AsdlDrivenGGN, relaxed_model, x)
    assert ours.keys() == asdl.keys() and len(ours) > 10
    for name in ours:
        for mine, theirs in zip(ours[name], asdl[name], strict=True):
            assert torch.equal(mine, theirs), name


def test_exact_regression_factors_equal_those_of_asdls_own_maker(relaxed_model):
    """ASDL's exact MSE passes under this driver: its factors, to the last bit."""
    x = torch.randn(6, 1, 32, 32, dtype=torch.float64)
    ours = kron_factors(ExactGaussianGGN, relaxed_model, x, LOSS_MSE)
    asdl = kron_factors(FisherExactMSE, relaxed_model, x, LOSS_MSE)
    assert ours.keys() == asdl.keys() and len(ours) > 10
    for name in ours:
        for mine, theirs in zip(ours[name], asdl[name], strict=True):
            assert torch.equal(mine, theirs), name


class QuarterA(ReducedRankCrossEntropyGGN):
    a_scale = 0.25


def test_a_scale_scales_the_forward_statistics_only(relaxed_model):
    x = torch.randn(6, 1, 32, 32, dtype=torch.float64)
    plain = kron_factors(ReducedRankCrossEntropyGGN, relaxed_model, x)
    scaled = kron_factors(QuarterA, relaxed_model, x)
    for name, (a, b) in plain.items():
        torch.testing.assert_close(scaled[name][0], 0.25 * a, rtol=1e-14, atol=0)
        assert torch.equal(scaled[name][1], b), name


def test_fit_formats_no_module_repr(relaxed_model, monkeypatch):
    """ASDL's driver formats a module's repr for every lookup on a module without operation."""
    reprs = []
    monkeypatch.setattr(nn.Module, "__repr__", lambda module: reprs.append(module) or "module")
    x = torch.randn(4, 1, 32, 32, dtype=torch.float64)
    fit_kfac(relaxed_model, x, torch.randint(0, 5, (4,)), "classification")
    assert reprs == []


def test_fit_leaves_no_gradient_and_parameters_trainable(relaxed_model):
    x = torch.randn(4, 1, 32, 32, dtype=torch.float64)
    kron_factors(ReducedRankCrossEntropyGGN, relaxed_model, x)
    assert all(p.grad is None and p.requires_grad for p in relaxed_model.parameters())


@pytest.mark.parametrize("shapes", [[SHAPE_FULL], [SHAPE_KRON, SHAPE_FULL]])
def test_shapes_other_than_kron_raise(relaxed_model, shapes):
    config = FisherConfig(
        fisher_type=FISHER_EXACT, loss_type=LOSS_CROSS_ENTROPY, fisher_shapes=shapes, data_size=1
    )
    maker = ReducedRankCrossEntropyGGN(relaxed_model, config)
    maker.setup_model_call(relaxed_model, torch.randn(2, 1, 32, 32, dtype=torch.float64))
    with pytest.raises(ValueError, match="Kronecker factors only"):
        maker.forward_and_backward()
