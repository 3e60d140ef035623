"""Weight initialisation shared by the layers: He (Kaiming) uniform for ReLU networks.

Every path is initialised so that, followed by a ReLU, it keeps the second moment of its
input (He et al. 2015): weights uniform in ``+-sqrt(6 / fan_in)``, biases zero (as the
reference code). F-FC's inner contraction ``theta2`` has no ReLU after it and uses
``+-sqrt(3 / fan_in)`` (variance ``1 / fan_in``).
"""

from __future__ import annotations

import math

import torch
from torch import nn

__all__ = ["he_uniform_", "unit_uniform_"]


def he_uniform_(weight: torch.Tensor, fan_in: int) -> torch.Tensor:
    """Fill ``weight`` uniformly in ``+-sqrt(6 / fan_in)`` (variance ``2 / fan_in``), in place.

    Args:
        weight: The tensor.
        fan_in: Number of inputs summed into one output.

    Returns:
        ``weight``.
    """
    return _uniform_(weight, 6.0 / fan_in)


def unit_uniform_(weight: torch.Tensor, fan_in: int) -> torch.Tensor:
    """Fill ``weight`` uniformly in ``+-sqrt(3 / fan_in)`` (variance ``1 / fan_in``), in place.

    Arguments and return value as :func:`he_uniform_`'s.
    """
    return _uniform_(weight, 3.0 / fan_in)


def _uniform_(weight: torch.Tensor, squared_bound: float) -> torch.Tensor:
    """Fill ``weight`` uniformly in ``+-sqrt(squared_bound)``, in place."""
    bound = math.sqrt(squared_bound)
    return nn.init.uniform_(weight, -bound, bound)
