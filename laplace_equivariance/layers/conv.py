"""CONV: circularly padded convolution, exactly translation equivariant (paper Eq. 3)."""

from __future__ import annotations

import functools

import torch
from torch import Tensor
from torch.nn import functional as F

from laplace_equivariance.layers.filter_layer import FilterLayer2d

__all__ = ["CircularConv2d", "circular_conv2d", "circular_pad"]


@functools.lru_cache(maxsize=64)
def _wrapped_positions(h: int, w: int, p: int, device: torch.device) -> Tensor:
    """Flat input position of every position of the padded ``(h + 2p, w + 2p)`` grid.

    Cached per grid, pad and device: each layer's forward pass reuses its index, so the pad
    launches no index arithmetic of its own. Made outside inference mode, so that a first
    call under ``torch.inference_mode`` caches an index that autograd may save later.
    """
    with torch.inference_mode(False):
        rows = torch.arange(-p, h + p, device=device) % h
        columns = torch.arange(-p, w + p, device=device) % w
        return (rows[:, None] * w + columns).flatten()


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

    Equal to ``F.pad(x, (p, p, p, p), mode="circular")`` (which takes 3D and 4D inputs only),
    computed as one gather of the flattened maps at the wrapped positions
    (``index_select``), so that autograd's own rules apply: the backward pass is one
    ``index_add`` of the padded gradient onto the positions it copies (differentiable again,
    for double backward passes), and ``torch.func`` transforms need nothing of this package.
    ``F.pad``'s circular mode is several slice copies forward and backward (3-8x the time of
    one ``index_add`` backward on the CPU, and a kernel launch per copy on a GPU).
    """
    p = circular_pad_width(x, kernel_size)
    if p == 0:
        return x
    *lead, h, w = x.shape
    # torch.compile traces the positions into its graph (constants there), not the cache
    positions = (
        _wrapped_positions.__wrapped__ if torch.compiler.is_compiling() else _wrapped_positions
    )
    index = positions(h, w, p, x.device)
    # gathered as rows of a 2-D view: on the CPU ``index_select`` along the last dimension of
    # a 3-D or 4-D tensor runs several times slower than along dimension 1 of the same data
    # as 2-D, forward and backward
    padded = x.reshape(-1, h * w).index_select(1, index)
    return padded.view(*lead, h + 2 * p, w + 2 * p)


def circular_pad_width(x: Tensor, kernel_size: int) -> int:
    """The pad ``S // 2`` of a circular convolution with filter size ``S`` on ``x``'s maps.

    Raises:
        ValueError: If the pad is wider than the map ``(*B, X, Y)``.
    """
    p = kernel_size // 2
    if p > min(x.shape[-2:]):
        raise ValueError(
            f"A circular pad of {p} needs maps of at least {p}x{p}, got {tuple(x.shape)}: use "
            f"a kernel of at most {2 * min(x.shape[-2:]) + 1} for these maps."
        )
    return p


def circular_conv2d(x: Tensor, weight: Tensor, bias: Tensor | None = None) -> Tensor:
    """``F.conv2d(circular_pad(x, S), weight, bias)``: a circular convolution.

    Two native operators forward (the gather of :func:`circular_pad`, a padding-free
    convolution) and two backward (one ``convolution_backward`` for the input, weight and
    bias gradients, one ``index_add``), so a training step costs about what a zero-padded
    ``nn.Conv2d``'s does; every autograd feature (double backward, ``torch.func``'s
    ``vmap``, ``jvp``, ``jacrev``, ``is_grads_batched``) is PyTorch's own.

    Args:
        x: Input of shape ``(N, C, X, Y)``.
        weight: Filter of shape ``(C', C, S, S)``, ``S`` odd.
        bias: ``(C',)`` or None.

    Returns:
        Output of shape ``(N, C', X, Y)``.

    Raises:
        ValueError: If the pad ``S // 2`` is wider than the map.
    """
    return F.conv2d(circular_pad(x, weight.shape[-1]), weight, bias)


class CircularConv2d(FilterLayer2d):
    r"""Convolution with circular padding (CONV, paper Eq. 3).

    .. math::
        y(c', x', y') = \sum_c \sum_{\bar x, \bar y} x(c, x' + \bar x, y' + \bar y)\,
            \bar\theta(c', c, \bar x, \bar y) + b(c')

    with indices taken modulo the grid size, so a circular shift of the input shifts the
    output by the same amount (exact equivariance on the torus). Computed by
    :func:`circular_conv2d` (a padding-free ``F.conv2d`` of the circularly padded input);
    the KFAC rule
    (``laplace_equivariance.curvature.rules.CircularConv2dRule``) uses that the padded map
    is periodic to get ``A`` without unfolding patches (docs/curvature.md).

    Parameters: ``C' C S^2`` filter weights (``weight``, ``(C', C, S, S)`` as
    :class:`torch.nn.Conv2d`'s) and ``C'`` biases.

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

    def forward(self, x: Tensor) -> Tensor:
        """Pad circularly by ``S // 2`` and convolve.

        Args:
            x: Input of shape ``(N, C, X, Y)``.

        Returns:
            Output of shape ``(N, C', X, Y)``.
        """
        self.check_input(x)
        return circular_conv2d(x, self.weight, self.bias)

    def extra_repr(self) -> str:
        """Sizes shown in the module's repr."""
        return (
            f"{super().extra_repr()}, circular padding={self.kernel_size // 2}, "
            f"bias={self.bias is not None}"
        )
