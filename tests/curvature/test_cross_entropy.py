"""The cross-entropy's exact GGN in K - 1 backward passes: the factor and the fisher maker."""

from __future__ import annotations

import pytest
import torch
from torch import nn
from torch.nn import functional as F

from laplace_equivariance.curvature.cross_entropy import softmax_hessian_factor
from tests.curvature.reference import fit_kfac


@pytest.mark.parametrize(
    "logits",
    [
        torch.randn(5, 10, generator=torch.Generator().manual_seed(0), dtype=torch.float64),
        torch.tensor([[0.0, 0.0]], dtype=torch.float64),
        # probabilities that underflow to zero, and a last class that takes everything
        torch.tensor([[800.0, 0.0, -800.0], [0.0, 0.0, 900.0]], dtype=torch.float64),
    ],
    ids=["random-10-classes", "two-classes", "saturated"],
)
def test_factor_reproduces_the_softmax_hessian(logits):
    """L L^T = diag(p) - p p^T with K - 1 columns; entries are O(1), so a few float64 eps."""
    p = F.softmax(logits, dim=-1)
    factor = softmax_hessian_factor(p)
    assert factor.shape == (*p.shape, p.shape[1] - 1)
    expected = torch.diag_embed(p) - p[:, :, None] * p[:, None, :]
    torch.testing.assert_close(factor @ factor.mT, expected, rtol=0, atol=1e-15)


def test_factor_of_a_single_class_raises():
    with pytest.raises(ValueError, match="K >= 2"):
        softmax_hessian_factor(torch.ones(4, 1))


def count_backward_passes(model: nn.Module, n_classes: int) -> list[int]:
    """Fit EquivariantKFAC on one batch; count the backward passes through the logits."""
    passes = []

    def count(_module, _args, out):
        if out.requires_grad:  # not laplace-torch's own no-grad forward passes
            out.register_hook(lambda _grad: passes.append(1))

    model.register_forward_hook(count)
    x = torch.randn(4, 6, dtype=torch.float64)
    y = torch.randint(0, n_classes, (4,))
    la = fit_kfac(model, x, y, "classification")
    return passes, la


def test_exact_fit_runs_one_backward_pass_fewer_than_classes():
    passes, _ = count_backward_passes(nn.Sequential(nn.Linear(6, 5)).double(), 5)
    assert len(passes) == 4


def test_one_class_falls_back_to_asdl_and_gives_zero_curvature():
    passes, la = count_backward_passes(nn.Sequential(nn.Linear(6, 1)).double(), 1)
    assert len(passes) == 1
    assert all(torch.count_nonzero(f) == 0 for f in la.H_facs.kfacs[0][:1])
