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


@pytest.mark.parametrize("structure", ["diag", "full"])
def test_many_samples_reach_the_diagonal_and_full_ggn(structure):
    """diag and full (laplace-torch's Jacobian-based Fisher) draw n_mc_samples targets too:
    500 samples land within 15% of the exact GGN (one sample: far off)."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 6), nn.Tanh(), nn.Linear(6, K)).double()
    x, y = data(5, (4,), "classification")
    exact = getattr(EquivariantKFAC(model, "classification"), structure)(x, y)[1]
    for samples, bound in ((500, 0.15), (1, None)):
        backend = EquivariantKFAC(model, "classification", stochastic=True, n_mc_samples=samples)
        sampled = getattr(backend, structure)(x, y)[1]
        error = (torch.linalg.norm(sampled - exact) / torch.linalg.norm(exact)).item()
        if bound is not None:
            assert error < bound
        else:
            assert error > 0.2  # one draw is far off: the 500 above were all used


@pytest.fixture
def repeated_target(monkeypatch) -> None:
    """Every draw returns the same target: the most likely class, or the mean plus one."""
    monkeypatch.setattr(
        torch.distributions.Categorical, "sample", lambda self, *_: self.probs.argmax(-1)
    )
    monkeypatch.setattr(torch.distributions.Normal, "sample", lambda self, *_: self.loc + 1)


@pytest.mark.parametrize("likelihood", ["classification", "regression"])
def test_repeated_target_gives_the_one_sample_factors(likelihood, repeated_target):
    """With every sample the same target, S samples average to one: all blocks, F-FC+CONV.

    Covers the rules' exact blocks (factored biases) and every layer type of the relaxed
    network; equal up to float64 rounding of the 1 / sqrt(S) scale.
    """
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


def maker_factors(maker_type: type, model: nn.Module, x: torch.Tensor, n_mc_samples: int):
    """Run one cross-entropy Monte-Carlo maker on ``x``: every module's ``A`` and ``B``."""
    config = FisherConfig(
        fisher_type=FISHER_MC,
        loss_type=LOSS_CROSS_ENTROPY,
        fisher_shapes=[SHAPE_KRON],
        data_size=1,
        seed=3,
        n_mc_samples=n_mc_samples,
    )
    maker = maker_type(model, config)
    maker.setup_model_call(model, x)
    maker.forward_and_backward()
    return [
        (module.fisher.kron.A, module.fisher.kron.B)
        for module in model.modules()
        if getattr(module, "fisher", None) is not None
    ]


@pytest.fixture
def relaxed_model_and_input() -> tuple[nn.Module, torch.Tensor]:
    model = models.build("f-fc+conv", (1, 32, 32), K, alpha=1).double()
    return model, torch.randn(4, 1, 32, 32, dtype=torch.float64)


@pytest.mark.filterwarnings("ignore:Using a non-full backward hook")
def test_one_sample_equals_asdls_maker_bit_for_bit(relaxed_model_and_input):
    """Same seed, same draw, same pass: results of earlier versions stay reproducible."""
    ours = maker_factors(MonteCarloCrossEntropyFisher, *relaxed_model_and_input, 1)
    asdl = maker_factors(AsdlDrivenMonteCarlo, *relaxed_model_and_input, 1)
    assert len(ours) == len(asdl) > 10
    for (a_ours, b_ours), (a_asdl, b_asdl) in zip(ours, asdl, strict=True):
        assert torch.equal(a_ours, a_asdl) and torch.equal(b_ours, b_asdl)


@pytest.mark.filterwarnings("ignore:Using a non-full backward hook")
def test_asdls_own_maker_divides_the_average_by_the_samples_again(
    relaxed_model_and_input, repeated_target
):
    """Why monte_carlo.py exists: ASDL's ``B`` with S equal samples is its one-sample ``B`` / S."""
    one = maker_factors(AsdlDrivenMonteCarlo, *relaxed_model_and_input, 1)
    five = maker_factors(AsdlDrivenMonteCarlo, *relaxed_model_and_input, 5)
    for (a_one, b_one), (a_five, b_five) in zip(one, five, strict=True):
        torch.testing.assert_close(a_five, a_one, rtol=0, atol=0)
        torch.testing.assert_close(b_five, b_one / 5, rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("n_mc_samples", [0, -2, 1.5, True])
def test_invalid_sample_count_raises(n_mc_samples):
    with pytest.raises(ValueError, match="positive integer"):
        EquivariantKFAC(
            nn.Linear(2, K), "classification", stochastic=True, n_mc_samples=n_mc_samples
        )


def test_samples_without_stochastic_raise():
    with pytest.raises(ValueError, match="stochastic=True"):
        EquivariantKFAC(nn.Linear(2, K), "classification", n_mc_samples=4)


@pytest.mark.parametrize(
    ("stochastic", "n_mc_samples", "message"),
    [(False, 4, "stochastic=True"), (True, 0, "positive integer")],
    ids=["samples-for-the-exact-ggn", "no-samples"],
)
def test_sample_count_passed_to_kron_is_checked(stochastic, n_mc_samples, message):
    """The per-batch override is checked as the constructor's option is, not ignored."""
    backend = EquivariantKFAC(nn.Linear(2, K).double(), "classification", stochastic=stochastic)
    x, y = data(3, (2,), "classification")
    with pytest.raises(ValueError, match=message):
        backend.kron(x, y, N=3, n_mc_samples=n_mc_samples)
