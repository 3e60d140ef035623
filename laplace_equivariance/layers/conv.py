"""CONV: circularly padded convolution, exactly translation equivariant (paper Eq. 3)."""

from __future__ import annotations

import torch
from torch import Tensor, nn
from torch.nn import functional as F

from laplace_equivariance.layers.init import he_uniform_
from laplace_equivariance.layers.shapes import check_input_shape, check_odd_kernel, pair

__all__ = ["CircularConv2d", "circular_conv2d", "circular_pad"]


def _wrapped_positions(h: int, w: int, p: int, device: torch.device) -> Tensor:
    """Flat input position of every position of the padded ``(h + 2p, w + 2p)`` grid."""
    rows = torch.arange(-p, h + p, device=device) % h
    columns = torch.arange(-p, w + p, device=device) % w
    return (rows[:, None] * w + columns).flatten()


def _pad_forward(x: Tensor, p: int) -> Tensor:
    """``F.pad(..., mode="circular")`` on the last two dimensions of any ``(*B, X, Y)``."""
    *lead, h, w = x.shape
    padded = F.pad(x.reshape(-1, 1, h, w), (p, p, p, p), mode="circular")
    return padded.view(*lead, h + 2 * p, w + 2 * p)


class _CircularPad(torch.autograd.Function):
    """Circular padding: ``F.pad``'s forward pass, a single ``index_add`` as backward pass.

    The backward pass folds every padded position's gradient back onto the input position it
    copies, ``grad_x[i] = sum_{j: index[j] = i} grad_y[j]``, written with differentiable
    operations so that double backward passes (the total lengthscale derivative) work;
    ``torch.func`` transforms (the Jacobians of the GLM predictive) are supported through
    ``setup_context``, a generated vmap rule and the forward-mode rule ``jvp``.
    """

    generate_vmap_rule = True

    @staticmethod
    def forward(x: Tensor, p: int) -> Tensor:
        return _pad_forward(x, p)

    @staticmethod
    def setup_context(ctx, inputs: tuple[Tensor, int], output: Tensor) -> None:
        x, p = inputs
        ctx.p, ctx.shape = p, x.shape

    @staticmethod
    def backward(ctx, grad: Tensor) -> tuple[Tensor, None]:
        *lead, h, w = ctx.shape
        index = _wrapped_positions(h, w, ctx.p, grad.device)
        flat = grad.reshape(*lead, -1)  # reshape, not flatten: is_grads_batched needs it
        folded = grad.new_zeros(*lead, h * w).index_add(-1, index, flat)
        return folded.reshape(ctx.shape), None

    @staticmethod
    def jvp(ctx, x_tangent: Tensor, _p_tangent: None) -> Tensor:
        return _pad_forward(x_tangent, ctx.p)


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
    with a cheaper backward pass: one ``index_add`` of the padded gradient onto the wrapped
    positions. ``F.pad``'s own backward pass (slices and copies) is 3-8x, that of two
    concatenations 2-4x as slow (``(128, C, X, Y)`` maps, CPU); this matters because the
    exact GGN runs a backward pass per class.
    """
    p = circular_pad_width(x, kernel_size)
    if p == 0:
        return x
    return _CircularPad.apply(x, p)


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


class _CircularConvolution(torch.autograd.Function):
    r"""``F.conv2d`` of the circularly padded input, with the input gradient by a convolution.

    The input gradient of a circular convolution is itself a circular convolution, of the
    output gradient ``g`` with the flipped, transposed filter (indices modulo the grid,
    ``p = S // 2``):

    .. math::
        \frac{\partial \ell}{\partial x(c, u, v)}
        = \sum_{c', a, b} g(c', u - a + p, v - b + p)\, \theta(c', c, a, b)
        = \sum_{c', a, b} g(c', u + a - p, v + b - p)\, \theta(c', c, S{-}1{-}a, S{-}1{-}b),

    so ``grad_x = F.conv2d(pad(g), flip(theta).transpose(0, 1))``, with no fold of the padded
    gradient. The exact GGN runs one such pass per class with frozen weights (only the input
    gradient), which this makes cheaper than autograd's transposed convolution onto the padded
    map followed by the pad's backward pass. The weight gradient is
    ``torch.nn.grad.conv2d_weight`` of the padded input, the bias gradient the sum of ``g``
    over examples and positions. The backward pass is written with
    differentiable operations (double backward passes: the total lengthscale derivative);
    ``torch.func`` transforms work through ``setup_context``, a generated vmap rule and the
    forward-mode rule ``jvp``.
    """

    generate_vmap_rule = True

    @staticmethod
    def forward(x: Tensor, weight: Tensor, bias: Tensor | None, p: int) -> Tensor:
        return F.conv2d(_pad_forward(x, p), weight, bias)

    @staticmethod
    def setup_context(
        ctx, inputs: tuple[Tensor, Tensor, Tensor | None, int], output: Tensor
    ) -> None:
        x, weight, _bias, p = inputs
        ctx.p = p
        ctx.save_for_backward(x, weight)
        ctx.save_for_forward(x, weight)

    @staticmethod
    def backward(ctx, grad: Tensor) -> tuple[Tensor | None, Tensor | None, Tensor | None, None]:
        x, weight = ctx.saved_tensors
        needs_x, needs_weight, needs_bias, _ = ctx.needs_input_grad
        grad_x = grad_weight = grad_bias = None
        if needs_x:
            grad_x = F.conv2d(_pad_forward(grad, ctx.p), weight.flip(-1, -2).transpose(0, 1))
        if needs_weight:
            grad_weight = torch.nn.grad.conv2d_weight(_pad_forward(x, ctx.p), weight.shape, grad)
        if needs_bias:
            grad_bias = grad.sum(dim=(0, 2, 3))
        return grad_x, grad_weight, grad_bias, None

    @staticmethod
    def jvp(
        ctx, x_tangent: Tensor | None, weight_tangent: Tensor | None, bias_tangent, _p_tangent
    ) -> Tensor:
        x, weight = ctx.saved_tensors
        terms = []
        if x_tangent is not None:
            terms.append(F.conv2d(_pad_forward(x_tangent, ctx.p), weight))
        if weight_tangent is not None:
            terms.append(F.conv2d(_pad_forward(x, ctx.p), weight_tangent))
        if bias_tangent is not None:
            terms.append(bias_tangent[:, None, None])
        return sum(terms[1:], terms[0])


def circular_conv2d(x: Tensor, weight: Tensor, bias: Tensor | None = None) -> Tensor:
    """``F.conv2d(circular_pad(x, S), weight, bias)``, with a cheaper input gradient.

    Args:
        x: Input of shape ``(N, C, X, Y)``.
        weight: Filter of shape ``(C', C, S, S)``, ``S`` odd.
        bias: ``(C',)`` or None.

    Returns:
        Output of shape ``(N, C', X, Y)``.

    Raises:
        ValueError: If the pad ``S // 2`` is wider than the map.
    """
    p = circular_pad_width(x, weight.shape[-1])
    return _CircularConvolution.apply(x, weight, bias, p)


class CircularConv2d(nn.Module):
    r"""Convolution with circular padding (CONV, paper Eq. 3).

    .. math::
        y(c', x', y') = \sum_c \sum_{\bar x, \bar y} x(c, x' + \bar x, y' + \bar y)\,
            \bar\theta(c', c, \bar x, \bar y) + b(c')

    with indices taken modulo the grid size, so a circular shift of the input shifts the
    output by the same amount (exact equivariance on the torus). Computed by
    :func:`circular_conv2d` (a padding-free ``F.conv2d`` of the circularly padded input,
    whose input gradient is a convolution of the output gradient); the KFAC rule
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
        self.out_channels = out_channels
        self.kernel_size = kernel_size
        self.size = pair(size)
        self.weight = nn.Parameter(torch.empty(out_channels, in_channels, kernel_size, kernel_size))
        he_uniform_(self.weight, in_channels * kernel_size**2)
        if bias:
            self.bias = nn.Parameter(torch.zeros(out_channels))
        else:
            self.register_parameter("bias", None)

    def forward(self, x: Tensor) -> Tensor:
        """Pad circularly by ``S // 2`` and convolve.

        Args:
            x: Input of shape ``(N, C, X, Y)``.

        Returns:
            Output of shape ``(N, C', X, Y)``.
        """
        check_input_shape(x, (self.in_channels, *self.size), type(self).__name__)
        return circular_conv2d(x, self.weight, self.bias)

    def extra_repr(self) -> str:
        """Sizes shown in the module's repr."""
        return (
            f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, "
            f"grid={self.size[0]}x{self.size[1]}, circular padding={self.kernel_size // 2}, "
            f"bias={self.bias is not None}"
        )
