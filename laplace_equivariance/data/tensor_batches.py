"""Batches of in-memory tensors gathered in one index, not stacked example by example.

``DataLoader(TensorDataset(x, y), batch_size=b)`` fetches every example of a batch on its own
(``dataset[i]`` per index, a Python call and two tensor views each) and stacks them again
(``default_collate``): for 60,000 32x32 images a pass costs a few tenths of a second, on a
GPU 4-6 % of an F-FC+CONV epoch (``benchmarks/results/gpu_scale/``). A
:class:`BatchedTensorDataset` answers the whole batch's indices at once
(``Dataset.__getitems__``, which PyTorch's fetcher calls when a dataset has it) with one
``index_select`` per tensor; :func:`batch_loader` builds the ``DataLoader`` with the
collate function such batches need. The sampler, its random permutation and the generator
it draws from are ``DataLoader``'s own, so the batches and every later random number are
those of the per-example loader (tested).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch.utils.data import DataLoader, Sampler, TensorDataset

from laplace_equivariance.data.augment import flip_and_shift

__all__ = ["BatchedTensorDataset", "batch_loader"]


class BatchedTensorDataset(TensorDataset):
    """A :class:`~torch.utils.data.TensorDataset` that returns a batch for a list of indices.

    ``dataset[i]`` is one example, as for a ``TensorDataset``; ``dataset.__getitems__(indices)``
    is the batch ``[t[indices] for t in tensors]`` (what ``default_collate`` makes of the
    examples: a list of stacked tensors).

    Args:
        *tensors: Tensors with the same first dimension ``N`` (examples), on one device.
    """

    def __getitems__(self, indices: Sequence[int]) -> list[torch.Tensor]:
        """The examples at ``indices``, stacked: ``[t[indices] for t in tensors]``.

        Args:
            indices: Example indices, as the ``DataLoader``'s batch sampler yields them.

        Returns:
            One tensor per tensor of the data set, ``(len(indices), *t.shape[1:])``.
        """
        index = torch.as_tensor(indices, dtype=torch.long, device=self.tensors[0].device)
        return [tensor.index_select(0, index) for tensor in self.tensors]


def _whole_batch(batch: list[torch.Tensor]) -> list[torch.Tensor]:
    """The collate function of batches that :class:`BatchedTensorDataset` already stacked."""
    return batch


def _augmented_batch(batch: list[torch.Tensor]) -> list[torch.Tensor]:
    """:func:`~laplace_equivariance.data.augment.flip_and_shift` of a stacked batch of images."""
    images, labels = batch
    return [flip_and_shift(images), labels]


def batch_loader(
    dataset: BatchedTensorDataset,
    batch_size: int,
    shuffle: bool = False,
    sampler: Sampler | None = None,
    augment: bool = False,
) -> DataLoader:
    """``DataLoader(dataset, batch_size, shuffle, sampler)`` that fetches a batch at a time.

    Args:
        dataset: The tensors.
        batch_size: Examples per batch (the last one may be smaller).
        shuffle: Draw a random permutation every epoch, as ``DataLoader`` does.
        sampler: A sampler instead (e.g. a ``DistributedSampler``); not with ``shuffle``.
        augment: Flip and shift every batch of images
            (:func:`~laplace_equivariance.data.augment.flip_and_shift` of the batch: the random
            draws of a ``DataLoader`` whose collate function flips and shifts the stacked
            examples).

    Returns:
        The loader; its batches equal ``DataLoader``'s over a ``TensorDataset`` of the same
        tensors with the same random state.

    Raises:
        TypeError: If ``dataset`` is not a :class:`BatchedTensorDataset` (a stacked batch
            would be collated again as a list of examples).
    """
    if not isinstance(dataset, BatchedTensorDataset):
        raise TypeError(
            f"batch_loader needs a BatchedTensorDataset, got {type(dataset).__name__}: wrap the "
            "tensors as BatchedTensorDataset(*dataset.tensors)."
        )
    return DataLoader(
        dataset,
        batch_size=batch_size,
        shuffle=shuffle,
        sampler=sampler,
        collate_fn=_augmented_batch if augment else _whole_batch,
    )
