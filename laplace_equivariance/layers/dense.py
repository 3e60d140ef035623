"""FC: the fully connected layer over channels and positions (paper Eq. 1)."""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn
from torch.nn import functional as F

from laplace_equivariance.layers.equivariance import EquivarianceCheck
from laplace_equivariance.layers.init import he_uniform_
from laplace_equivariance.layers.shapes import check_input_shape, pair

__all__ = ["FullyConnected2d"]


class FullyConnected2d(EquivarianceCheck, nn.Module):
    r"""Fully connected map between feature maps (FC, paper Eq. 1).

    .. math::
        y(c', x', y') = \sum_c \sum_{x, y} x(c, x, y)\, w(c', c, x', y', x, y) + b(c', x', y')

    The output grid may be smaller than the input grid (a subsampling layer of the
    architecture maps straight onto the subsampled grid). There is no equivariance
    constraint; the weight is a dense ``C'X'Y' x CXY`` matrix, stored in the shape of
    :class:`torch.nn.Linear` (leading dimension = output), so Kronecker factors follow the
    usual ``[out, in]`` layout.

    Parameters: ``C'X'Y' * CXY`` weights and ``C'X'Y'`` biases (one per output unit, as in the
    reference code's FC count of 133,635,690 for the CIFAR-10 architecture).

    Args:
        in_channels: ``C``.
        out_channels: ``C'``.
        in_size: Input grid ``(X, Y)`` (or one int for a square grid).
        out_size: Output grid ``(X', Y')``; defaults to ``in_size``.
        bias: Whether to add a bias per output unit.

    Shapes:
        - Input: ``(N, C, X, Y)``.
        - Output: ``(N, C', X', Y')``.
    """

    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        in_size: int | Sequence[int],
        out_size: int | Sequence[int] | None = None,
        bias: bool = True,
    ) -> None:
        super().__init__()
        self.in_channels = in_channels
        self.out_channels = out_channels
        self.in_size = pair(in_size)
        self.out_size = pair(out_size if out_size is not None else in_size)
        in_features = in_channels * self.in_size[0] * self.in_size[1]
        out_features = out_channels * self.out_size[0] * self.out_size[1]
        self.weight = nn.Parameter(torch.empty(out_features, in_features))
        self.bias = nn.Parameter(torch.empty(out_features)) if bias else None
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """He-uniform weights (fan-in ``CXY``), zero biases."""
        he_uniform_(self.weight, self.weight.shape[1])
        if self.bias is not None:
            nn.init.zeros_(self.bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Apply the dense map.

        Args:
            x: Input of shape ``(N, C, X, Y)``.

        Returns:
            Output of shape ``(N, C', X', Y')``.
        """
        check_input_shape(x, (self.in_channels, *self.in_size), type(self).__name__)
        y = F.linear(x.flatten(start_dim=1), self.weight, self.bias)
        return y.view(x.shape[0], self.out_channels, *self.out_size)

    def extra_repr(self) -> str:
        """Sizes shown in the module's repr."""
        return (
            f"{self.in_channels}x{self.in_size[0]}x{self.in_size[1]} -> "
            f"{self.out_channels}x{self.out_size[0]}x{self.out_size[1]}, "
            f"bias={self.bias is not None}"
        )
