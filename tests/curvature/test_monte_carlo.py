"""The Monte-Carlo Fisher with several samples: an average, as ASDL's with one sample."""

from __future__ import annotations

import pytest
import torch
from asdl.fisher import FisherConfig, FisherMaker, FisherMCCrossEntropy
from asdl.grad_maker import LOSS_CROSS_ENTROPY
from asdl.matrices import FISHER_MC, SHAPE_KRON
from torch import nn

from laplace_equivariance import EquivariantKFAC, models
from laplace_equivariance.curvature.monte_carlo import MonteCarloCrossEntropyFisher
from tests.curvature.reference import fit_kfac

K = 3


def data(n: int, in_shape, likelihood: str, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, *in_shape, dtype=torch.float64, generator=g)
    if likelihood == "classification":
        return x, torch.randint(0, K, (n,), generator=g)
    return x, torch.randn(n, K, dtype=torch.float64, generator=g)


def factors(la) -> list[torch.Tensor]:
    return [f for block in la.H_facs.kfacs for f in block]


@pytest.mark.parametrize("likelihood", ["classification", "regression"])
def test_many_samples_average_to_the_exact_ggn(likelihood):
    """4,000 samples of a small MLP's Fisher: every factor within 10% of the exact GGN's.

    The estimate is an average of 4,000 independent outer products, so its relative error is
    of order 4000 ** -0.5 = 1.6% (seeded: this draw gives at most 1.1%); averaging with the
    1 / S of ASDL's makers would leave it 4,000 times too small.
    """
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 6), nn.Tanh(), nn.Linear(6, K)).double()
    x, y = data(5, (4,), likelihood)
    exact = fit_kfac(model, x, y, likelihood)
    sampled = fit_kfac(
        model,
        x,
        y,
        likelihood,
        backend_kwargs={"stochastic": True, "n_mc_samples": 4000},
    )
    for mc, ggn in zip(factors(sampled), factors(exact), strict=True):
        error = torch.linalg.norm(mc - ggn) / torch.linalg.norm(ggn)
        assert error < 0.1


@pytest.mark.parametrize("likelihood", ["classification", "regression"])
def test_repeated_target_gives_the_one_sample_factors(likelihood, monkeypatch):
    """With every sample the same target, S samples average to one: all blocks, F-FC+CONV.

    Covers the rules' exact blocks (factored biases) and every layer type of the relaxed
    network; equal up to float64 rounding of the 1 / sqrt(S) scale.
    """
    monkeypatch.setattr(
        torch.distributions.Categorical, "sample", lambda self, *_: self.probs.argmax(-1)
    )
    monkeypatch.setattr(torch.distributions.Normal, "sample", lambda self, *_: self.loc + 1)
    torch.manual_seed(0)
    model = models.build("f-fc+conv", (1, 32, 32), K, alpha=1).double()
    x, y = data(4, (1, 32, 32), likelihood)

    def fit(n_samples: int):
        kwargs = {"stochastic": True, "n_mc_samples": n_samples}
        return fit_kfac(model, x, y, likelihood, backend_kwargs=kwargs)

    for repeated, single in zip(factors(fit(5)), factors(fit(1)), strict=True):
        torch.testing.assert_close(repeated, single, rtol=1e-12, atol=1e-14)


class AsdlDrivenMonteCarlo(FisherMCCrossEntropy):
    """ASDL's own one-sample Monte-Carlo Fisher and driver."""

    def forward_and_backward(self):
        return FisherMaker.forward_and_backward(self)


@pytest.mark.filterwarnings("ignore:Using a non-full backward hook")
def test_one_sample_equals_asdls_maker_bit_for_bit():
    """Same seed, same draw, same pass: results of earlier versions stay reproducible."""
    model = models.build("f-fc+conv", (1, 32, 32), K, alpha=1).double()
    x = torch.randn(4, 1, 32, 32, dtype=torch.float64)
    config = FisherConfig(
        fisher_type=FISHER_MC,
        loss_type=LOSS_CROSS_ENTROPY,
        fisher_shapes=[SHAPE_KRON],
        data_size=1,
        seed=3,
    )
    results = []
    for maker_type in (MonteCarloCrossEntropyFisher, AsdlDrivenMonteCarlo):
        maker = maker_type(model, config)
        maker.setup_model_call(model, x)
        maker.forward_and_backward()
        results.append(
            [
                factor
                for module in model.modules()
                if getattr(module, "fisher", None) is not None
                for factor in (module.fisher.kron.A, module.fisher.kron.B)
            ]
        )
    ours, asdl = results
    assert len(ours) == len(asdl) > 10
    assert all(torch.equal(a, b) for a, b in zip(ours, asdl, strict=True))


@pytest.mark.parametrize("n_mc_samples", [0, -2, 1.5, True])
def test_invalid_sample_count_raises(n_mc_samples):
    with pytest.raises(ValueError, match="positive integer"):
        EquivariantKFAC(
            nn.Linear(2, K), "classification", stochastic=True, n_mc_samples=n_mc_samples
        )


def test_samples_without_stochastic_raise():
    with pytest.raises(ValueError, match="stochastic=True"):
        EquivariantKFAC(nn.Linear(2, K), "classification", n_mc_samples=4)
