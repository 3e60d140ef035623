"""Batches as laplace-torch hands them to a curvature backend: a tensor, or a dict-like mapping.

laplace-torch's ``fit`` passes a batch that is a ``MutableMapping`` (a Hugging Face
``BatchEncoding``, a ``UserDict``, a plain ``dict``) to the model whole, as its input ``X``,
and reads the targets from ``batch[dict_key_y]``; every other batch is a pair ``(X, y)`` of
tensors. A backend that copies, slices or concatenates inputs (the exact GGN's batched class
passes, the output size read from one example, a fit's concatenated passes) does it here, for
both kinds, so that a mapping batch takes every path a tensor batch takes. A mapping's tensor
values are treated as batched along their first dimension; its other values are kept as they
are (and must agree between batches that are concatenated).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, MutableMapping, Sequence
from typing import Any, TypeVar

import torch

__all__ = ["concatenated", "first_example", "is_mapping", "moved", "on_gpu", "repeated"]

Batch = TypeVar("Batch", bound=torch.Tensor | MutableMapping)


def is_mapping(x: Any) -> bool:
    """Whether ``x`` is a batch laplace-torch treats as a dict (a ``MutableMapping``)."""
    return isinstance(x, MutableMapping)


def _tensors(x: Mapping) -> dict[Any, torch.Tensor]:
    return {key: value for key, value in x.items() if isinstance(value, torch.Tensor)}


def on_gpu(x: torch.Tensor | Mapping) -> bool:
    """Whether the batch (a tensor, or any tensor value of a mapping) lies on a CUDA device."""
    if isinstance(x, torch.Tensor):
        return x.is_cuda
    return any(value.is_cuda for value in _tensors(x).values())


def _mapped(x: Batch, function) -> Batch:
    """``function`` of a tensor, or a copy of a mapping with ``function`` of each tensor value."""
    if isinstance(x, torch.Tensor):
        return function(x)
    if not is_mapping(x):
        raise TypeError(
            f"A batch's input must be a tensor or a dict-like mapping, got {type(x).__name__}."
        )
    out = copy.copy(x)
    for key, value in _tensors(x).items():
        out[key] = function(value)
    return out


def first_example(x: Batch) -> Batch:
    """The batch's first example, kept batched: ``x[:1]``, or each tensor value's ``[:1]``."""
    return _mapped(x, lambda t: t[:1])


def moved(x: Batch, device: torch.device | str) -> Batch:
    """The batch (a tensor, or each tensor value of a mapping) on ``device``."""
    return _mapped(x, lambda t: t.to(device))


def repeated(x: Batch, copies: int) -> Batch:
    """``copies`` copies of the batch stacked along the first dimension (each tensor value's).

    Args:
        x: A tensor ``(n, ...)`` or a mapping whose tensor values are ``(n, ...)``.
        copies: How many copies, at least 1.

    Returns:
        ``(copies * n, ...)``: copy ``c`` of example ``i`` at row ``c * n + i``.
    """
    return _mapped(x, lambda t: t.repeat(copies, *[1] * (t.dim() - 1)))


def concatenated(batches: Sequence[Any]) -> Any:
    """Batches of a loader joined along the first dimension into one.

    Args:
        batches: Tuples or lists of tensors (``(X, y)``), or mappings of the same keys whose
            tensor values are concatenated and whose other values are equal.

    Returns:
        A tuple of tensors, or a copy of the first mapping with the joined values.

    Raises:
        TypeError: If the batches are neither all tuples/lists of tensors nor all mappings
            with the same keys and equal non-tensor values.
    """
    first = batches[0]
    if all(
        isinstance(b, (tuple, list)) and all(isinstance(t, torch.Tensor) for t in b)
        for b in batches
    ):
        return tuple(torch.cat(parts) for parts in zip(*batches, strict=True))
    if all(is_mapping(b) and b.keys() == first.keys() for b in batches):
        out = copy.copy(first)
        for key, value in first.items():
            if isinstance(value, torch.Tensor):
                out[key] = torch.cat([b[key] for b in batches])
            elif any(b[key] != value for b in batches):
                raise TypeError(
                    f"The batches' {key!r} values differ and are not tensors, so they cannot "
                    "be joined: pass fit_batch_size equal to the loader's batch size to fit "
                    "batch by batch."
                )
        return out
    raise TypeError(
        f"Only batches of tensors or dict-like batches of the same keys can be concatenated, "
        f"got {type(first).__name__}: pass fit_batch_size equal to the loader's batch size to "
        "fit batch by batch."
    )
