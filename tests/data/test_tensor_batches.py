"""Batches gathered in one index equal ``DataLoader``'s example-by-example batches."""

import pytest
import torch
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

from laplace_equivariance.data.augment import flip_and_shift
from laplace_equivariance.data.tensor_batches import BatchedTensorDataset, batch_loader


def tensors(device="cpu"):
    g = torch.Generator().manual_seed(3)
    x = torch.randn(23, 1, 6, 6, generator=g).to(device)
    return x, torch.randint(0, 5, (23,), generator=g).to(device)


def passes(loader, epochs=2) -> tuple[list, torch.Tensor]:
    """Every batch of ``epochs`` passes, and the next number of the global generator."""
    batches = [batch for _ in range(epochs) for batch in loader]
    return batches, torch.rand(3)


def assert_same(ours, theirs):
    (our_batches, our_next), (their_batches, their_next) = ours, theirs
    assert len(our_batches) == len(their_batches)
    for mine, stock in zip(our_batches, their_batches, strict=True):
        assert isinstance(mine, list) and len(mine) == 2
        for a, b in zip(mine, stock, strict=True):
            assert a.device == b.device
            torch.testing.assert_close(a, b, rtol=0, atol=0)
    torch.testing.assert_close(our_next, their_next, rtol=0, atol=0)


@pytest.mark.parametrize("shuffle", [True, False], ids=["shuffled", "in-order"])
def test_batches_and_later_random_numbers_are_the_per_example_loaders(shuffle, device):
    x, y = tensors(device)
    torch.manual_seed(0)
    ours = passes(batch_loader(BatchedTensorDataset(x, y), 5, shuffle=shuffle))
    torch.manual_seed(0)
    theirs = passes(DataLoader(TensorDataset(x, y), 5, shuffle=shuffle))
    assert_same(ours, theirs)


def test_augmented_batches_are_those_of_a_collate_that_flips_and_shifts():
    x, y = tensors()

    def stacked_then_augmented(examples):
        images, labels = torch.utils.data.default_collate(examples)
        return [flip_and_shift(images), labels]

    torch.manual_seed(0)
    ours = passes(batch_loader(BatchedTensorDataset(x, y), 8, shuffle=True, augment=True))
    torch.manual_seed(0)
    stock = DataLoader(TensorDataset(x, y), 8, shuffle=True, collate_fn=stacked_then_augmented)
    theirs = passes(stock)
    assert_same(ours, theirs)
    assert not torch.equal(ours[0][0][0], x[: len(ours[0][0][0])])


def test_a_sampler_shards_as_for_the_per_example_loader():
    x, y = tensors()
    sampler = DistributedSampler(TensorDataset(x, y), num_replicas=2, rank=1, seed=4)
    torch.manual_seed(0)
    ours = passes(batch_loader(BatchedTensorDataset(x, y), 4, sampler=sampler), epochs=1)
    torch.manual_seed(0)
    theirs = passes(DataLoader(TensorDataset(x, y), 4, sampler=sampler), epochs=1)
    assert_same(ours, theirs)


def test_one_example_is_a_tensor_datasets_and_a_batch_is_one_index_per_tensor(monkeypatch):
    x, y = tensors()
    dataset = BatchedTensorDataset(x, y)
    assert all(torch.equal(a, b) for a, b in zip(dataset[4], (x[4], y[4]), strict=True))
    calls = []
    monkeypatch.setattr(BatchedTensorDataset, "__getitem__", lambda self, i: calls.append(i))
    next(iter(batch_loader(dataset, 5)))
    assert calls == []  # never fetched example by example


def test_a_plain_tensor_dataset_is_refused_with_the_fix():
    with pytest.raises(TypeError, match=r"BatchedTensorDataset\(\*dataset.tensors\)"):
        batch_loader(TensorDataset(*tensors()), 5)
