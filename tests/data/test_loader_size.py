"""Examples a loader yields, and fits and marginal-likelihood training that use the count."""

import pytest
import torch
from laplace import Laplace
from laplace.curvature import AsdlGGN
from torch.utils.data import (
    BatchSampler,
    DataLoader,
    DistributedSampler,
    IterableDataset,
    Subset,
    SubsetRandomSampler,
    TensorDataset,
)

from laplace_equivariance import EquivariantKFAC, marglik_training, models
from laplace_equivariance.data.loader_size import counted, examples_in
from tests.curvature.reference import fit_kron

K = 3


def dataset(n: int = 128) -> TensorDataset:
    g = torch.Generator().manual_seed(1)
    return TensorDataset(
        torch.randn(n, 1, 32, 32, generator=g), torch.randint(0, K, (n,), generator=g)
    )


def test_examples_in_counts_what_the_loader_yields():
    data = dataset(10)
    assert examples_in(DataLoader(data, 4)) == 10
    assert examples_in(DataLoader(data, 4, drop_last=True)) == 8
    assert examples_in(DataLoader(data, 4, sampler=SubsetRandomSampler(range(6)))) == 6
    given = BatchSampler(SubsetRandomSampler(range(7)), 4, drop_last=True)
    assert examples_in(DataLoader(data, batch_sampler=given)) == 4
    sharded = DistributedSampler(data, num_replicas=2, rank=1, shuffle=False)
    assert examples_in(DataLoader(data, 4, sampler=sharded)) == 10  # the ranks together


def test_examples_in_refuses_what_it_cannot_count():
    data = dataset(10)
    with pytest.raises(TypeError, match="batch_sampler=list"):
        examples_in(DataLoader(data, batch_sampler=[[0, 1], [2, 3]]))

    class Stream(IterableDataset):
        def __iter__(self):
            return iter([(torch.zeros(1), 0)])

    with pytest.raises(TypeError, match="has no length"):
        examples_in(DataLoader(Stream(), 4))


def test_counted_is_the_loader_itself_when_it_yields_every_example():
    loader = DataLoader(dataset(10), 4)
    assert counted(loader) is loader
    view = counted(DataLoader(dataset(10), 4, sampler=SubsetRandomSampler(range(6))))
    assert len(view.dataset) == 6 and sum(len(y) for _, y in view) == 6


def _fit(loader: DataLoader) -> Laplace:
    torch.manual_seed(0)
    return fit_kron(models.build("f-fc+conv", (1, 32, 32), K, alpha=1), loader)


def test_a_fit_over_a_sampler_equals_the_fit_over_the_same_subset():
    """laplace-torch's N is len(loader.dataset): 128 for 32 sampled examples, so the A
    factors were divided by four times too many examples."""
    data = dataset()
    by_sampler = _fit(DataLoader(data, 8, sampler=SubsetRandomSampler(range(32))))
    by_subset = _fit(DataLoader(Subset(data, range(32)), 8))
    assert by_sampler.n_data == by_subset.n_data == 32
    torch.testing.assert_close(
        by_sampler.log_marginal_likelihood(), by_subset.log_marginal_likelihood(), rtol=1e-5, atol=0
    )


def test_a_marglik_loader_with_a_sampler_gets_the_subsets_temperature():
    data = dataset()
    train = DataLoader(data, 32)
    runs = []
    for marglik_loader in (
        DataLoader(data, 8, sampler=SubsetRandomSampler(range(32))),
        DataLoader(Subset(data, range(32)), 8),
    ):
        torch.manual_seed(0)
        model = models.build("f-fc+conv", (1, 32, 32), K, alpha=1)
        la, _, margliks, _ = marglik_training(
            model,
            train,
            n_epochs=1,
            n_hypersteps=3,
            marglik_loader=marglik_loader,
            optimizer_cls=torch.optim.SGD,
        )
        runs.append((la, margliks))
    (la_sampler, by_sampler), (la_subset, by_subset) = runs
    assert la_sampler.temperature == la_subset.temperature == 0.25
    assert la_sampler.n_data == la_subset.n_data == 32
    torch.testing.assert_close(by_sampler, by_subset, rtol=1e-5, atol=0)


def test_a_drop_last_fit_of_a_stock_network_counts_the_examples_yielded_unlike_laplace_torch():
    """docs/usage.md, "Where the results differ from laplace-torch's": 40 examples in batches
    of 16 with drop_last yield 32; EquivariantKFAC's fit counts 32, AsdlGGN's the data set's 40."""
    model = torch.nn.Sequential(torch.nn.Linear(4, 5), torch.nn.Tanh(), torch.nn.Linear(5, 3))
    data = TensorDataset(torch.randn(40, 4), torch.randint(0, 3, (40,)))
    counts = {}
    for backend in (EquivariantKFAC, AsdlGGN):
        la = Laplace(model, "classification", "all", hessian_structure="kron", backend=backend)
        la.fit(DataLoader(data, batch_size=16, drop_last=True))
        counts[backend.__name__] = la.n_data
    assert counts == {"EquivariantKFAC": 32, "AsdlGGN": 40}
