"""What the filter layers share: a centred ``S x S`` filter slid over an ``(X, Y)`` torus."""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor, nn

from laplace_equivariance.layers.equivariance import EquivarianceCheck
from laplace_equivariance.layers.init import he_uniform_
from laplace_equivariance.layers.shapes import check_input_shape, check_odd_kernel, pair

__all__ = ["FilterLayer2d"]


class FilterLayer2d(EquivarianceCheck, nn.Module):
    """Base of CONV, S-CONV and the p4 convolutions: their geometry, filter, bias and checks.

    Each of them correlates a ``C``-channel map on the ``(X, Y)`` grid with ``C'`` centred
    filters of odd size ``S``, circularly padded by ``S // 2`` so that the grid is a torus.
    By default the filter is a dense ``weight (C', C, S, S)``, He-uniform over its fan-in
    ``C S^2``; a layer whose filter is built otherwise (S-CONV's anchors) sets up with
    :meth:`init_geometry` and registers its own weight, then calls :meth:`add_bias`, so that
    ``model.parameters()`` lists the weight before the bias (laplace-torch's prior precisions
    and the Kron blocks follow that order).

    Args:
        in_channels: ``C``.
        out_channels: ``C'``.
        kernel_size: Odd filter size ``S``.
        size: The grid ``(X, Y)`` the layer is applied to, for shape checks.
        bias: Whether to add a bias per output channel.

    Raises:
        ValueError: If ``kernel_size`` is even.
    """

    filter_input_copies = 1
    """Copies of the ``C`` input channels the dense filter spans: ``weight (C', copies * C, S,
    S)``, He-uniform over ``copies * C S^2`` (4 for the full group convolution's relative
    rotations)."""

    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        kernel_size: int,
        size: int | Sequence[int],
        bias: bool = True,
    ) -> None:
        self.init_geometry(in_channels, out_channels, kernel_size, size)
        filter_in = self.filter_input_copies * in_channels
        self.weight = nn.Parameter(torch.empty(out_channels, filter_in, kernel_size, kernel_size))
        he_uniform_(self.weight, filter_in * kernel_size**2)
        self.add_bias(bias)

    def init_geometry(
        self, in_channels: int, out_channels: int, kernel_size: int, size: int | Sequence[int]
    ) -> None:
        """Initialise the module and store its sizes (no parameter yet).

        Raises:
            ValueError: If ``kernel_size`` is even.
        """
        nn.Module.__init__(self)
        check_odd_kernel(kernel_size, type(self).__name__)
        self.in_channels = in_channels
        self.out_channels = out_channels
        self.kernel_size = kernel_size
        self.size = pair(size)

    def add_bias(self, bias: bool) -> None:
        """Register ``bias``, ``C'`` zeros, or None (no bias) after the weight."""
        self.bias = nn.Parameter(torch.zeros(self.out_channels)) if bias else None

    @property
    def in_features_shape(self) -> tuple[int, int, int]:
        """The shape of one input example, ``(C, X, Y)``."""
        return (self.in_channels, *self.size)

    def check_input(self, x: Tensor) -> None:
        """Raise a ValueError naming :attr:`in_features_shape` if ``x`` is not a batch of it."""
        check_input_shape(x, self.in_features_shape, type(self).__name__)

    def extra_repr(self) -> str:
        """Sizes shown in the module's repr."""
        return (
            f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, "
            f"grid={self.size[0]}x{self.size[1]}"
        )
