"""Curvature passes over concatenated batches: the same fit in fewer passes."""

from __future__ import annotations

import pytest
import torch
from torch.utils.data import DataLoader, TensorDataset

from laplace_equivariance import EquivariantKFAC, models
from laplace_equivariance.curvature.fit_passes import (
    GPU_PASS_ROWS,
    ConcatenatedBatches,
    batches_per_pass,
    check_fit_batch_size,
)
from tests.curvature.test_backend import kron_laplace

K = 3
LENGTHSCALE_HYPERPARAMETER = {"lengthscale_mode": "hyperparameter", "lengthscale": 0.8}


def loader(n: int, batch_size: int, dtype=torch.float64, device="cpu") -> DataLoader:
    x = torch.randn(n, 1, 32, 32, dtype=dtype, device=device)
    y = torch.randint(0, K, (n,), device=device)
    return DataLoader(TensorDataset(x, y), batch_size=batch_size)


@pytest.mark.parametrize(("k", "sizes"), [(2, [6, 4]), (3, [9, 1])])
def test_concatenated_batches_group_consecutive_batches(k, sizes):
    """Ten examples in batches of 3 (3, 3, 3, 1), two or three at a time: passes of 6 and 4,
    or 9 and the last 1, holding the examples in order, and the loader's data set
    (laplace-torch's N)."""
    x = torch.arange(10.0)[:, None]
    y = torch.arange(10)
    base = DataLoader(TensorDataset(x, y), batch_size=3)
    passes = ConcatenatedBatches(base, k)
    got = list(passes)
    assert len(passes) == len(got) == len(sizes)
    assert [len(b[0]) for b in got] == sizes
    torch.testing.assert_close(torch.cat([b[0] for b in got]), x)
    torch.testing.assert_close(torch.cat([b[1] for b in got]), y)
    assert passes.dataset is base.dataset


class DictBatches:
    """A loader of Hugging Face style dict batches."""

    batch_size = 2
    dataset = [{"input_ids": torch.zeros(3), "labels": torch.zeros(())}] * 2

    def __iter__(self):
        return iter([{"input_ids": torch.zeros(2, 3), "labels": torch.zeros(2)}])

    def __len__(self) -> int:
        return 1


def test_concatenated_batches_join_dict_batches_and_refuse_k_below_one():
    (joined,) = list(ConcatenatedBatches(DictBatches(), 2))
    assert joined["input_ids"].shape == (2, 3)
    with pytest.raises(TypeError, match="fit_batch_size"):
        list(ConcatenatedBatches(DataLoader(["a", "b"], batch_size=1), 2))
    with pytest.raises(ValueError, match="at least 1"):
        ConcatenatedBatches(DataLoader(TensorDataset(torch.zeros(2)), batch_size=1), 0)


def test_a_loader_of_dict_batches_is_concatenated_like_tensor_batches():
    model = models.build("conv", (1, 32, 32), K, alpha=1)
    backend = EquivariantKFAC(model, "classification", fit_batch_size=64)
    passes = backend.fit_loader(DictBatches(), torch.device("cpu"))
    assert isinstance(passes, ConcatenatedBatches) and passes.k == 32


@pytest.mark.parametrize(
    ("batch", "pass_examples", "k"), [(128, 455, 3), (128, 4096, 32), (128, 100, 1), (0, 5, 5)]
)
def test_batches_per_pass_takes_whole_batches(batch, pass_examples, k):
    assert batches_per_pass(batch, pass_examples) == k


@pytest.mark.parametrize("value", [0, -3, 2.5, True, "128"])
def test_a_fit_batch_size_that_is_no_positive_integer_is_refused(value):
    with pytest.raises(ValueError, match="fit_batch_size must be a positive number"):
        check_fit_batch_size(value)
    model = models.build("conv", (1, 32, 32), K, alpha=1)
    with pytest.raises(ValueError, match="fit_batch_size"):
        EquivariantKFAC(model, "classification", fit_batch_size=value)


def fitted(model, data: DataLoader, **backend_kwargs) -> tuple:
    """A fitted Kron Laplace approximation and the number of curvature passes it took."""
    la = kron_laplace(model, backend_kwargs=backend_kwargs or None)
    passes = []
    kron = la.backend.kron
    la.backend.kron = lambda x, y, N, **kw: passes.append(len(x)) or kron(x, y, N, **kw)
    la.fit(data)
    return la, passes


@pytest.mark.parametrize("stochastic", [False, True], ids=["exact-ggn", "mc-fisher"])
def test_a_fit_over_concatenated_batches_equals_the_fit_batch_by_batch(stochastic):
    """S-FC+S-CONV with learned lengthscales as hyperparameters (projected factors) on 20
    examples in batches of 4, fitted batch by batch and with fit_batch_size=12 (passes of 12
    and 8): the loss and the examples counted agree; for the exact GGN also every factor,
    the marginal likelihood and the projected statistics, to float64 rounding (the same sums
    in another order). The Monte-Carlo Fisher draws its targets per pass, so its factors
    differ by the draw (their expectation is tested in ``test_monte_carlo.py``)."""
    torch.manual_seed(0)
    model = models.build(
        "s-fc+s-conv", (1, 32, 32), K, alpha=1, sparse_options=LENGTHSCALE_HYPERPARAMETER
    ).double()
    data = loader(20, 4)
    fits = []
    for backend_kwargs in ({}, {"fit_batch_size": 12}):
        torch.manual_seed(1)
        fits.append(fitted(model, data, stochastic=stochastic, **backend_kwargs))
    (by_batch, passes_by_batch), (concatenated, passes_concatenated) = fits
    assert passes_by_batch == [4] * 5
    assert passes_concatenated == [12, 8]
    torch.testing.assert_close(concatenated.loss, by_batch.loss, rtol=1e-12, atol=0)
    assert concatenated.n_data == by_batch.n_data == 20
    assert concatenated.backend.examples_seen == by_batch.backend.examples_seen == 20
    if stochastic:
        return
    for group, group_by_batch in zip(concatenated.H_facs.kfacs, by_batch.H_facs.kfacs, strict=True):
        for factor, factor_by_batch in zip(group, group_by_batch, strict=True):
            torch.testing.assert_close(factor, factor_by_batch, rtol=1e-11, atol=1e-14)
    torch.testing.assert_close(
        concatenated.log_marginal_likelihood(),
        by_batch.log_marginal_likelihood(),
        rtol=1e-11,
        atol=0,
    )
    assert (
        concatenated.backend.projected_factors.keys() == by_batch.backend.projected_factors.keys()
    )
    assert by_batch.backend.projected_factors
    for index, projected in concatenated.backend.projected_factors.items():
        torch.testing.assert_close(
            projected.statistic,
            by_batch.backend.projected_factors[index].statistic,
            rtol=1e-11,
            atol=1e-14,
        )


def test_on_the_cpu_the_default_fits_batch_by_batch():
    model = models.build("conv", (1, 32, 32), K, alpha=1).double()
    data = loader(12, 4)
    backend = EquivariantKFAC(model, "classification")
    assert backend.fit_loader(data, torch.device("cpu")) is data
    assert fitted(model, data)[1] == [4, 4, 4]


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a GPU")
@pytest.mark.parametrize("stochastic", [False, True], ids=["exact-ggn", "mc-fisher"])
def test_on_cuda_the_default_concatenates_up_to_the_pass_rows(stochastic):
    """Exact GGN: K - 1 = 2 class copies per example, so passes of GPU_PASS_ROWS / 2
    examples; Monte-Carlo Fisher: one copy, GPU_PASS_ROWS examples."""
    model = models.build("conv", (1, 32, 32), K, alpha=1).cuda()
    data = loader(4096, 128, torch.float32, "cuda")
    backend = EquivariantKFAC(model, "classification", stochastic=stochastic)
    passes = backend.fit_loader(data, torch.device("cuda"))
    rows_per_example = 1 if stochastic else K - 1
    assert isinstance(passes, ConcatenatedBatches)
    assert passes.k == GPU_PASS_ROWS // rows_per_example // 128


def test_choosing_the_passes_draws_no_random_numbers():
    """The passes are chosen from the loader's batch size and one example of its data set,
    not by iterating it: a shuffled loader's extra pass would draw a permutation from the
    global generator and change every later draw of a training run. A fit over concatenated
    passes leaves the generator where the fit batch by batch leaves it."""
    model = models.build("conv", (1, 32, 32), K, alpha=1).double()
    x = torch.randn(12, 1, 32, 32, dtype=torch.float64)
    shuffled = DataLoader(TensorDataset(x, torch.randint(0, K, (12,))), batch_size=4, shuffle=True)
    states = []
    for backend_kwargs in ({}, {"fit_batch_size": 8}):
        torch.manual_seed(3)
        fitted(model, shuffled, **backend_kwargs)
        states.append(torch.get_rng_state())
    assert torch.equal(states[0], states[1])
