"""How many examples one pass over a ``DataLoader`` yields, and a loader that says so.

laplace-torch takes the data set size of a fit, ``N``, as ``len(loader.dataset)``: it divides
the Kronecker factors' ``A`` by it, keeps it as ``la.n_data`` and, in marginal-likelihood
training, scales the prior term by it. A loader whose sampler picks some of the data set's
examples (``SubsetRandomSampler``, a ``WeightedRandomSampler`` with ``num_samples``) or whose
last partial batch is dropped yields fewer, so every one of those figures would be silently
off. :func:`examples_in` counts what the loader yields without drawing from its sampler (a
random sampler's draw would move the random state that training then uses), and
:func:`counted` hands laplace-torch a loader whose ``dataset`` has that length.
"""

from __future__ import annotations

from collections.abc import Iterator, Sized
from typing import Any

from torch.utils.data import BatchSampler, DataLoader, DistributedSampler

__all__ = ["counted", "dataset_length", "examples_in"]


def dataset_length(dataset: object) -> int:
    """``len(dataset)`` of a map-style data set (torch's ``Dataset`` type declares no length).

    Raises:
        TypeError: As ``len``, if ``dataset`` has no length (an ``IterableDataset``, say).
    """
    if not isinstance(dataset, Sized):
        raise TypeError(f"object of type {type(dataset).__name__!r} has no len()")
    return len(dataset)


def examples_in(loader: DataLoader) -> int:
    """The number of examples one pass over ``loader`` yields.

    ``len(loader.dataset)`` for a sharded loader (``DistributedSampler``: the ranks together
    cover the data set once, which the distributed fit checks), else the length of the
    loader's sampler, less the dropped last partial batch with ``drop_last=True``.

    Args:
        loader: A map-style ``DataLoader`` with automatic batching.

    Returns:
        The example count.

    Raises:
        TypeError: If the loader's example count cannot be known without iterating it: a
            custom ``batch_sampler``, no automatic batching, or a sampler without a length
            (an ``IterableDataset``).
    """
    batches = loader.batch_sampler
    if type(batches) is not BatchSampler:
        raise TypeError(
            f"Cannot count the examples of a DataLoader with batch_sampler="
            f"{type(batches).__name__}: pass a DataLoader with batch_size and a sampler "
            "(e.g. SubsetRandomSampler for some of the examples) or over a Subset of them."
        )
    sampler = batches.sampler  # the loader's own, or that of a BatchSampler given to it
    if isinstance(sampler, DistributedSampler):
        return dataset_length(loader.dataset)
    try:
        n = dataset_length(sampler)  # a sampler's length may itself raise TypeError
    except TypeError:
        raise TypeError(
            f"Cannot count the examples of a DataLoader whose sampler ({type(sampler).__name__}) "
            "has no length (an IterableDataset): pass a map-style data set, e.g. a "
            "TensorDataset or a Subset of the examples."
        ) from None
    return n - n % batches.batch_size if batches.drop_last else n


class _CountedDataset:
    """Stands for a loader's data set where only its length is read: the examples it yields."""

    def __init__(self, dataset: Any, n: int) -> None:
        self._dataset, self._n = dataset, n

    def __len__(self) -> int:
        return self._n

    def __getitem__(self, index: int) -> Any:
        return self._dataset[index]


class _CountedLoader:
    """Iterates a ``DataLoader`` whose ``dataset`` length is the examples it yields."""

    def __init__(self, loader: DataLoader, n: int) -> None:
        self._loader = loader
        self.dataset = _CountedDataset(loader.dataset, n)

    def __iter__(self) -> Iterator[Any]:
        return iter(self._loader)

    def __len__(self) -> int:
        return len(self._loader)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._loader, name)


def counted(loader: DataLoader) -> DataLoader | _CountedLoader:
    """``loader`` itself if it yields its whole data set, else a view of it that says how many.

    laplace-torch's ``fit`` reads ``len(loader.dataset)`` as the number of fitted examples;
    the view's ``dataset`` has the length :func:`examples_in` counts, and iterating it
    iterates ``loader``.

    Args:
        loader: A map-style ``DataLoader``.

    Returns:
        ``loader``, or the view.

    Raises:
        TypeError: As :func:`examples_in`.
    """
    n = examples_in(loader)
    return loader if n == dataset_length(loader.dataset) else _CountedLoader(loader, n)
