"""``laplace_equivariance.marglik_training`` is a drop-in for ``laplace.marglik_training``.

Both functions run side by side, from the same seed, on stock models in float64, and must
agree to 1e-6 (relative) in margliks, losses, prior precisions, observation noise and
weights: the same operations in the same order give equal results up to rounding, so the
tolerance only allows for reassociated sums. The cases cover laplace-torch 0.3's options:
AsdlGGN and AsdlEF, ``kron`` and ``diag``, every prior structure, both likelihoods, a
scheduler, a temperature, a fixed noise, ``enable_backprop`` and dict batches; then
EquivariantKFAC on the same stock model must reproduce the AsdlGGN run.
"""

import inspect
import itertools
import warnings

import laplace
import pytest
import torch
from laplace.curvature import AsdlEF, AsdlGGN
from torch import nn
from torch.utils.data import DataLoader, Dataset, TensorDataset

import laplace_equivariance
from laplace_equivariance import EquivariantKFAC

# runs on random labels: at chance by design, so their NotLearningWarning says nothing
pytestmark = pytest.mark.filterwarnings(
    "ignore::laplace_equivariance.marglik.chance.NotLearningWarning"
)

N, D, K = 24, 5, 3
RTOL = 1e-6
SHORT = {"n_epochs": 3, "n_hypersteps": 2, "marglik_frequency": 1, "n_epochs_burnin": 1}


class DictDataset(Dataset):
    """Examples as dicts, as Hugging Face loaders give them."""

    def __init__(self, x: torch.Tensor, y: torch.Tensor) -> None:
        self.x, self.y = x, y

    def __len__(self) -> int:
        return len(self.x)

    def __getitem__(self, i: int) -> dict[str, torch.Tensor]:
        return {"input_ids": self.x[i], "labels": self.y[i]}


class DictInput(nn.Module):
    """Reads the input from a dict batch."""

    def __init__(self, net: nn.Module) -> None:
        super().__init__()
        self.net = net

    def forward(self, batch):
        return self.net(batch["input_ids"] if isinstance(batch, dict) else batch)


def stock_problem(likelihood: str, dict_batches: bool = False):
    """A two-layer MLP and a shuffled loader of 24 examples, float64, seeded."""
    torch.manual_seed(0)
    outputs = K if likelihood == "classification" else 2
    model = nn.Sequential(nn.Linear(D, 6), nn.Tanh(), nn.Linear(6, outputs)).double()
    g = torch.Generator().manual_seed(1)
    x = torch.randn(N, D, generator=g, dtype=torch.float64)
    if likelihood == "classification":
        y = torch.randint(0, K, (N,), generator=g)
    else:
        y = torch.randn(N, outputs, generator=g, dtype=torch.float64)
    if dict_batches:
        return DictInput(model), DataLoader(DictDataset(x, y), batch_size=8, shuffle=True)
    return model, DataLoader(TensorDataset(x, y), batch_size=8, shuffle=True)


def train(function, likelihood: str, dict_batches: bool = False, **kwargs):
    """Run ``function`` from seed 0; everything the comparison needs."""
    model, loader = stock_problem(likelihood, dict_batches)
    torch.manual_seed(0)
    la, model, margliks, losses = function(model, loader, likelihood=likelihood, **kwargs)
    return {
        "margliks": torch.tensor(margliks),
        "losses": torch.tensor(losses),
        "prior_precision": la.prior_precision.detach(),
        "sigma_noise": torch.as_tensor(la.sigma_noise).detach(),
        "weights": torch.cat([p.detach().flatten() for p in model.parameters()]),
        "log_marglik": la.log_marginal_likelihood().detach(),
        "enable_backprop": torch.tensor(la.enable_backprop),
    }


def assert_same_run(ours: dict, stock: dict) -> None:
    for key, expected in stock.items():
        torch.testing.assert_close(ours[key], expected, rtol=RTOL, atol=1e-12, msg=key)


def side_by_side(likelihood: str, backend: type = AsdlGGN, dict_batches=False, **kwargs):
    ours = train(
        laplace_equivariance.marglik_training, likelihood, dict_batches, backend=backend, **kwargs
    )
    stock = train(laplace.marglik_training, likelihood, dict_batches, backend=AsdlGGN, **kwargs)
    return ours, stock


def test_signature_is_laplace_torchs_then_keyword_only_extras():
    stock = list(inspect.signature(laplace.marglik_training).parameters.values())
    ours = list(inspect.signature(laplace_equivariance.marglik_training).parameters.values())
    assert [(p.name, p.kind) for p in ours[: len(stock)]] == [(p.name, p.kind) for p in stock]
    for mine, theirs in zip(ours, stock, strict=False):
        if mine.name != "backend":  # ours defaults to EquivariantKFAC (= AsdlGGN on stock layers)
            assert mine.default == theirs.default, mine.name
    assert ours[2 + 2].default is EquivariantKFAC
    assert all(p.kind is inspect.Parameter.KEYWORD_ONLY for p in ours[len(stock) :])


GRID = list(
    itertools.product(
        ["classification", "regression"],
        [AsdlGGN, AsdlEF],
        ["kron", "diag"],
        ["scalar", "layerwise", "diag"],
    )
)


@pytest.mark.parametrize(
    "likelihood, backend, structure, prior",
    GRID,
    ids=[f"{lik}-{b.__name__}-{s}-prior={p}" for lik, b, s, p in GRID],
)
def test_reproduces_laplace_torch(likelihood, backend, structure, prior):
    """The stock run, step by step: same losses, margliks, precisions, noise and weights.

    laplace-torch has no per-parameter prior for Kron; both functions refuse it (ours before
    training, laplace-torch's at the first fit).
    """
    kwargs = dict(SHORT, hessian_structure=structure, prior_structure=prior)
    if (structure, prior) == ("kron", "diag"):
        with pytest.raises(ValueError, match="does not go with hessian_structure='kron'"):
            train(laplace_equivariance.marglik_training, likelihood, backend=backend, **kwargs)
        with pytest.raises(ValueError, match="Prior precision for Kron"):
            train(laplace.marglik_training, likelihood, backend=backend, **kwargs)
        return
    ours = train(laplace_equivariance.marglik_training, likelihood, backend=backend, **kwargs)
    stock = train(laplace.marglik_training, likelihood, backend=backend, **kwargs)
    assert_same_run(ours, stock)


OPTIONS = {
    "scheduler": dict(
        scheduler_cls=torch.optim.lr_scheduler.CosineAnnealingLR, scheduler_kwargs={"T_max": 9}
    ),
    "temperature": dict(temperature=0.5),
    "fix-sigma-noise": dict(fix_sigma_noise=True, sigma_noise_init=0.7),
    "enable-backprop": dict(enable_backprop=True),
    "optimizer-kwargs": dict(optimizer_cls=torch.optim.SGD, optimizer_kwargs={"lr": 0.05}),
    "defaults": {},
}


@pytest.mark.parametrize("likelihood", ["classification", "regression"])
@pytest.mark.parametrize("option", list(OPTIONS))
def test_reproduces_laplace_torch_with_its_options(option, likelihood):
    kwargs = dict(n_epochs=3) if option == "defaults" else dict(SHORT, **OPTIONS[option])
    assert_same_run(*side_by_side(likelihood, **kwargs))


@pytest.mark.parametrize("likelihood", ["classification", "regression"])
def test_reproduces_laplace_torch_on_dict_batches(likelihood):
    assert_same_run(*side_by_side(likelihood, dict_batches=True, **SHORT))


def test_weight_decay_is_set_to_zero_with_laplace_torchs_warning():
    kwargs = dict(SHORT, optimizer_kwargs={"lr": 1e-2, "weight_decay": 0.1})
    with pytest.warns(UserWarning, match="[Ww]eight decay"):
        ours = train(laplace_equivariance.marglik_training, "classification", **kwargs)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        stock = train(laplace.marglik_training, "classification", backend=AsdlGGN, **kwargs)
    assert_same_run(ours, stock)


def test_documented_call_runs_unchanged():
    """laplace-torch's documented call, with only the import changed (issue 18)."""
    model, loader = stock_problem("classification")
    la, model, margliks, losses = laplace_equivariance.marglik_training(
        model,
        loader,
        likelihood="classification",
        hessian_structure="kron",
        optimizer_kwargs={"lr": 1e-2},
        n_epochs=6,
        n_hypersteps=2,
        marglik_frequency=2,
        n_epochs_burnin=1,
        prior_structure="layerwise",
    )
    assert len(losses) == 6 and len(margliks) == 3 * 2 and margliks[-1] < margliks[0]


@pytest.mark.parametrize(
    "likelihood, structure",
    [("classification", "kron"), ("regression", "kron"), ("classification", "diag")],
)
def test_equivariant_kfac_on_a_stock_model_reproduces_asdl_ggn(likelihood, structure):
    kwargs = dict(SHORT, hessian_structure=structure, prior_structure="layerwise")
    assert_same_run(*side_by_side(likelihood, backend=EquivariantKFAC, **kwargs))
