"""CONV: circularly padded convolution, exactly translation equivariant (paper Eq. 3)."""

from __future__ import annotations

import torch
from torch import Tensor, nn

from laplace_equivariance.layers.init import he_uniform_
from laplace_equivariance.layers.shapes import check_input_shape, check_odd_kernel, pair

__all__ = ["CircularConv2d", "circular_pad"]


def circular_pad(x: Tensor, kernel_size: int) -> Tensor:
    """Pad the last two dimensions circularly by ``kernel_size // 2`` on every side.

    Args:
        x: Feature maps of shape ``(*B, X, Y)``: ``(N, C, X, Y)``, or ``(N, C, 4, X, Y)``
            for p4 maps.
        kernel_size: Odd filter size ``S``.

    Returns:
        Padded maps of shape ``(*B, X + S - 1, Y + S - 1)``.

    Raises:
        ValueError: If the pad is wider than the map.

    Equal to ``F.pad(x, (p, p, p, p), mode="circular")``, built as one ``index_select`` of
    the flattened grid with wrapped indices: its backward pass is one ``index_add``, about 4x
    cheaper than that of two concatenations and 9x cheaper than ``F.pad``'s slice-and-copy
    one (128 x 4 x 32 x 32 maps, CPU), which matters because the exact GGN runs one backward
    pass per class.
    """
    p = kernel_size // 2
    if p > min(x.shape[-2:]):
        raise ValueError(
            f"A circular pad of {p} needs maps of at least {p}x{p}, got {tuple(x.shape)}: use "
            f"a kernel of at most {2 * min(x.shape[-2:]) + 1} for these maps."
        )
    if p == 0:
        return x
    h, w = x.shape[-2:]
    rows = torch.arange(-p, h + p, device=x.device) % h
    columns = torch.arange(-p, w + p, device=x.device) % w
    index = (rows[:, None] * w + columns).flatten()
    padded = x.flatten(start_dim=-2).index_select(-1, index)
    return padded.unflatten(-1, (h + 2 * p, w + 2 * p))


class CircularConv2d(nn.Module):
    r"""Convolution with circular padding (CONV, paper Eq. 3).

    .. math::
        y(c', x', y') = \sum_c \sum_{\bar x, \bar y} x(c, x' + \bar x, y' + \bar y)\,
            \bar\theta(c', c, \bar x, \bar y) + b(c')

    with indices taken modulo the grid size, so a circular shift of the input shifts the
    output by the same amount (exact equivariance on the torus).

    The circular pad is an explicit step before a stock, padding-free
    :class:`torch.nn.Conv2d` held in ``self.conv2d``: curvature code that unfolds the
    convolution's input (ASDL's ``Conv2d`` rule, which assumes zero padding) then sees the
    padded map and is exact for the circular convolution.

    Parameters: ``C' C S^2`` filter weights and ``C'`` biases.

    Args:
        in_channels: ``C``.
        out_channels: ``C'``.
        kernel_size: Odd filter size ``S``.
        size: The grid ``(X, Y)`` the layer is applied to, for shape checks.
        bias: Whether to add a bias per output channel.

    Shapes:
        - Input: ``(N, C, X, Y)``.
        - Output: ``(N, C', X, Y)``.

    Raises:
        ValueError: If ``kernel_size`` is even.
    """

    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        kernel_size: int,
        size: int | tuple[int, int],
        bias: bool = True,
    ) -> None:
        super().__init__()
        check_odd_kernel(kernel_size, type(self).__name__)
        self.in_channels = in_channels
        self.size = pair(size)
        self.conv2d = nn.Conv2d(in_channels, out_channels, kernel_size, padding=0, bias=bias)
        he_uniform_(self.conv2d.weight, in_channels * kernel_size**2)
        if bias:
            nn.init.zeros_(self.conv2d.bias)

    def forward(self, x: Tensor) -> Tensor:
        """Pad circularly by ``S // 2`` and convolve.

        Args:
            x: Input of shape ``(N, C, X, Y)``.

        Returns:
            Output of shape ``(N, C', X, Y)``.
        """
        check_input_shape(x, (self.in_channels, *self.size), type(self).__name__)
        return self.conv2d(circular_pad(x, self.conv2d.kernel_size[0]))

    def extra_repr(self) -> str:
        """Sizes shown in the module's repr."""
        padding = self.conv2d.kernel_size[0] // 2
        return f"grid={self.size[0]}x{self.size[1]}, circular padding={padding}"
