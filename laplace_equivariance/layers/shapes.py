"""Input-shape checks shared by every layer: one clear ValueError naming the expected shape."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import torch

__all__ = ["check_input_shape", "check_odd_kernel", "pair"]


def pair(value: int | Sequence[int]) -> tuple[int, int]:
    """Return ``(value, value)`` for an int, or the two entries of a length-2 sequence.

    Args:
        value: An int or a sequence of two ints (a spatial size ``(H, W)``).

    Returns:
        A tuple of two ints.

    Raises:
        ValueError: If ``value`` is a sequence whose length is not two.
    """
    if isinstance(value, int):
        return (value, value)
    values = tuple(int(v) for v in value)
    if len(values) != 2:
        raise ValueError(f"Expected an int or a pair (H, W), got {value!r}.")
    return values


def check_input_shape(x: torch.Tensor, expected: Sequence[int], layer: str) -> None:
    """Raise if ``x`` is not a batch of tensors of shape ``expected``.

    Args:
        x: The input batch, shape ``(N, *expected)``.
        expected: The shape of one example, e.g. ``(C, H, W)``.
        layer: The layer's name for the error message.

    Raises:
        TypeError: If ``x`` is not a tensor (a dict batch given to a model that takes
            tensors).
        ValueError: If ``x.shape[1:]`` differs from ``expected``.
    """
    if not isinstance(x, torch.Tensor):
        keys = f" with keys {sorted(x)}" if isinstance(x, Mapping) else ""
        raise TypeError(
            f"{layer} takes a tensor of shape (N, {', '.join(map(str, expected))}), got a "
            f"{type(x).__name__}{keys}. With dict batches (laplace-torch's dict_key_x), wrap "
            "the network in a module whose forward takes the dict and passes the tensor on."
        )
    if tuple(x.shape[1:]) != tuple(expected):
        shape = ", ".join(str(s) for s in expected)
        raise ValueError(
            f"{layer} expects input of shape (N, {shape}), got {tuple(x.shape)}. "
            "Check the channel count and image size the layer was built for."
        )


def check_odd_kernel(kernel_size: int, layer: str) -> None:
    """Raise unless ``kernel_size`` is odd (a centred filter, as circular padding needs).

    Args:
        kernel_size: The filter size ``S``.
        layer: The layer's name for the error message.

    Raises:
        ValueError: If ``kernel_size`` is even.
    """
    if kernel_size % 2 == 0:
        raise ValueError(f"{layer} needs an odd kernel_size, got {kernel_size}.")
