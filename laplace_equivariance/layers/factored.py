r"""F-FC: the factored fully connected layer (paper Eq. 5, App. C.1).

.. math::
    y(c', x', y') = \sum_c \theta_1(c', c, x', y')
        \underbrace{\sum_{x, y} x(c, x, y)\, \theta_2(c', c, x, y)}_{h(c', c)}
        + b_\text{channel}(c') + b_\text{position}(x', y')

The layer is two linear maps applied in turn, each a module with one weight, so that each
gets a small Kronecker-factored curvature rule (App. C.1):

- :class:`FactoredInputMap` (``theta2``): ``x (N, C, X, Y) -> h (N, C', C)``. For a fixed input
  channel ``c`` it is a dense ``C' x XY`` matrix acting on ``x(c)``.
- :class:`FactoredOutputMap` (``theta1``): ``h (N, C', C) -> y (N, C', X', Y')``. For a fixed
  output channel ``c'`` it is a dense ``X'Y' x C`` matrix acting on ``h(c')``.

The ``C'CX'Y'XY`` weight of the equivalent FC layer is never built.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn

from laplace_equivariance.layers.equivariance import EquivarianceCheck
from laplace_equivariance.layers.init import he_uniform_, unit_uniform_
from laplace_equivariance.layers.shapes import check_input_shape, pair

__all__ = [
    "FactoredInputMap",
    "FactoredLinear2d",
    "FactoredOutputMap",
    "apply_input_map",
    "apply_output_map",
]


def apply_input_map(x: torch.Tensor, theta2: torch.Tensor) -> torch.Tensor:
    r"""Compute :math:`h(c', c) = \sum_{p} x(c, p)\, \theta_2(c', c, p)` (Eq. 5, inner sum).

    Args:
        x: Input of shape ``(N, C, X, Y)``.
        theta2: Weight of shape ``(C', C, X * Y)``.

    Returns:
        ``h`` of shape ``(N, C', C)``.
    """
    # one batched product per input channel, laid out (C, C', N): see apply_output_map
    h = torch.bmm(theta2.transpose(0, 1), x.flatten(start_dim=2).permute(1, 2, 0))
    return h.permute(2, 1, 0)


def apply_output_map(
    h: torch.Tensor,
    theta1: torch.Tensor,
    channel_bias: torch.Tensor | None,
    position_bias: torch.Tensor | None,
    out_size: tuple[int, int],
) -> torch.Tensor:
    r"""Compute :math:`y(c', q) = \sum_c \theta_1(q, c', c)\, h(c', c) + b(c') + b(q)` (Eq. 5).

    Args:
        h: Intermediate of shape ``(N, C', C)``.
        theta1: Weight of shape ``(X' * Y', C', C)`` (output position first).
        channel_bias: ``(C',)`` or None.
        position_bias: ``(X' * Y',)`` or None.
        out_size: ``(X', Y')``.

    Returns:
        ``y`` of shape ``(N, C', X', Y')``.
    """
    # The two maps are batched products over different channels (input map: over C, this
    # map: over C'), so the intermediate changes layout once per pass. With the examples as
    # the innermost dimension of both products (``h`` stored as (C, C', N), its gradient
    # computed as (C', C, N)), every operand and gradient of both products is a plain or
    # transposed matrix per batch entry; einsum's (N, C', C) layout made the backward products
    # copy every per-channel matrix on their own (3x the time of this version on CPU). The
    # contiguous result keeps later elementwise ops and convolutions on one memory layout.
    y = torch.bmm(theta1.permute(1, 0, 2), h.permute(1, 2, 0)).permute(2, 0, 1).contiguous()
    if channel_bias is not None:
        y = y + channel_bias[:, None]
    if position_bias is not None:
        y = y + position_bias
    return y.view(h.shape[0], h.shape[1], *out_size)


class FactoredInputMap(nn.Module):
    r"""The ``theta2`` half of F-FC: :math:`h(c', c) = \sum_{x,y} x(c, x, y)\theta_2(c', c, x, y)`.

    The weight is stored as ``(C', C, X * Y)``: the leading dimension is the output side of
    each per-channel matrix, the Kronecker factor ``B`` of its curvature (App. C.1).

    Args:
        in_channels: ``C``.
        out_channels: ``C'``.
        in_size: Input grid ``(X, Y)``.

    Shapes:
        - Input: ``(N, C, X, Y)``.
        - Output: ``(N, C', C)``.
    """

    def __init__(self, in_channels: int, out_channels: int, in_size: int | Sequence[int]) -> None:
        super().__init__()
        self.in_channels = in_channels
        self.out_channels = out_channels
        self.in_size = pair(in_size)
        n_positions = self.in_size[0] * self.in_size[1]
        self.weight = nn.Parameter(torch.empty(out_channels, in_channels, n_positions))
        unit_uniform_(self.weight, n_positions)

    def induced_weight(self) -> torch.Tensor:
        """``theta2`` itself, ``(C', C, X * Y)`` (the sparse map computes it from anchors)."""
        return self.weight

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Contract the input's positions, separately for every channel pair.

        Args:
            x: Input of shape ``(N, C, X, Y)``.

        Returns:
            ``h`` of shape ``(N, C', C)``.
        """
        check_input_shape(x, (self.in_channels, *self.in_size), type(self).__name__)
        return apply_input_map(x, self.induced_weight())

    def extra_repr(self) -> str:
        """Sizes shown in the module's repr."""
        grid = f"{self.in_size[0]}x{self.in_size[1]}"
        return f"{self.in_channels}x{grid} -> {self.out_channels}x{self.in_channels}"


class FactoredOutputMap(nn.Module):
    r"""The ``theta1`` half of F-FC: :math:`y(c', q) = \sum_c \theta_1(c', c, q)\, h(c', c)`.

    The weight is stored as ``(X' * Y', C', C)``: the leading dimension is the output side of
    each per-output-channel matrix, the Kronecker factor ``B`` of its curvature (App. C.1).
    Biases are factored like the weight: one per output channel plus one per output position
    (``C' + X'Y'`` numbers, as in the reference code).

    Args:
        in_channels: ``C`` of the F-FC layer.
        out_channels: ``C'``.
        out_size: Output grid ``(X', Y')``.
        bias: Whether to add the channel and position biases.

    Shapes:
        - Input: ``(N, C', C)``.
        - Output: ``(N, C', X', Y')``.
    """

    def __init__(
        self, in_channels: int, out_channels: int, out_size: int | Sequence[int], bias: bool = True
    ) -> None:
        super().__init__()
        self.in_channels = in_channels
        self.out_channels = out_channels
        self.out_size = pair(out_size)
        n_positions = self.out_size[0] * self.out_size[1]
        self.weight = nn.Parameter(torch.empty(n_positions, out_channels, in_channels))
        he_uniform_(self.weight, in_channels)
        if bias:
            self.channel_bias = nn.Parameter(torch.zeros(out_channels))
            self.position_bias = nn.Parameter(torch.zeros(n_positions))
        else:
            self.register_parameter("channel_bias", None)
            self.register_parameter("position_bias", None)

    def induced_weight(self) -> torch.Tensor:
        """``theta1`` itself, ``(X' * Y', C', C)`` (the sparse map computes it from anchors)."""
        return self.weight

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        """Spread every channel pair over the output positions and sum over input channels.

        Args:
            h: Intermediate of shape ``(N, C', C)``.

        Returns:
            Output of shape ``(N, C', X', Y')``.
        """
        check_input_shape(h, (self.out_channels, self.in_channels), type(self).__name__)
        return apply_output_map(
            h, self.induced_weight(), self.channel_bias, self.position_bias, self.out_size
        )

    def extra_repr(self) -> str:
        """Sizes shown in the module's repr."""
        return (
            f"{self.out_channels}x{self.in_channels} -> "
            f"{self.out_channels}x{self.out_size[0]}x{self.out_size[1]}, "
            f"bias={self.channel_bias is not None}"
        )


class FactoredLinear2d(EquivarianceCheck, nn.Module):
    r"""Factored fully connected layer (F-FC, paper Eq. 5).

    Equivalent to :class:`~laplace_equivariance.layers.FullyConnected2d` with weight
    :math:`w(c', c, x', y', x, y) = \theta_1(c', c, x', y')\,\theta_2(c', c, x, y)` and bias
    :math:`b(c') + b(x', y')`, computed as two batched contractions without ever forming
    ``w``. Time and memory are ``O(N C' C (XY + X'Y'))``.

    Parameters: ``C'C(XY + X'Y')`` weights (``theta2`` in ``input_map.weight``, ``theta1`` in
    ``output_map.weight``) and ``C' + X'Y'`` biases.

    Args:
        in_channels: ``C``.
        out_channels: ``C'``.
        in_size: Input grid ``(X, Y)``.
        out_size: Output grid ``(X', Y')``; defaults to ``in_size``.
        bias: Whether to add the channel and position biases.
        **map_options: Passed to both maps (used by the sparse subclass).

    Shapes:
        - Input: ``(N, C, X, Y)``.
        - Output: ``(N, C', X', Y')``.
    """

    input_map_type: type[FactoredInputMap] = FactoredInputMap
    output_map_type: type[FactoredOutputMap] = FactoredOutputMap

    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        in_size: int | Sequence[int],
        out_size: int | Sequence[int] | None = None,
        bias: bool = True,
        **map_options,
    ) -> None:
        super().__init__()
        out_size = out_size if out_size is not None else in_size
        self.input_map = self.input_map_type(in_channels, out_channels, in_size, **map_options)
        self.output_map = self.output_map_type(
            in_channels, out_channels, out_size, bias, **map_options
        )
        self.balance_()

    @torch.no_grad()
    def balance_(
        self,
        output_precision: torch.Tensor | float = 1.0,
        input_precision: torch.Tensor | float = 1.0,
    ) -> torch.Tensor:
        r"""Rescale the two factors of every channel pair to equal prior terms, in place.

        The layer's function depends on each channel pair's factors only through their
        product, so :math:`\theta_1(\cdot, c', c) \to s\,\theta_1(\cdot, c', c)`,
        :math:`\theta_2(c', c, \cdot) \to \theta_2(c', c, \cdot) / s` changes nothing but the
        prior term :math:`s^2 a + b / s^2` with :math:`a = \sum \delta_1 \theta_1(\cdot, c',
        c)^2`, :math:`b = \sum \delta_2 \theta_2(c', c, \cdot)^2` (``delta_1``, ``delta_2``
        the prior precisions of the two weights). Its minimum over :math:`s`, :math:`s^4 = b /
        a`, makes both terms :math:`\sqrt{ab}`: every MAP estimate of Eq. 9 is balanced this
        way, and a Laplace approximation (Eq. 9) taken where a pair is not is taken off the
        mode, where its curvature and so its Occam factor depend on how the product is split
        (docs/learned_structure.md, "Balanced factors at every fit").

        Called with unit precisions at construction, after the factors are drawn (variances
        ``2 / C`` and ``1 / XY``, so the equivalent FC weight has He variance ``2 / (C X
        Y)``): left unbalanced, ``theta1`` holds ``2 X'Y' / C`` times ``theta2``'s squared
        norm (2048 times in the App. F.1 network's first layer), the path's squared norm is
        about ``sqrt(2 X'Y' / C) / 2`` times the balanced one (22 times there), so its learned
        precision ``gamma / ||theta||^2`` starts that much weaker, and gradient descent
        conserves the imbalance (:math:`\langle\theta_1, \nabla_{\theta_1}\rangle =
        \langle\theta_2, \nabla_{\theta_2}\rangle` for a product).
        :func:`~laplace_equivariance.marglik_training` (``balance_factors=True``) calls it
        with the learned precisions before every Laplace fit. The S-FC subclass balances its
        anchor values, of which the induced factors are linear maps.

        Args:
            output_precision: ``delta_1``, a scalar or a tensor of ``output_map.weight``'s
                shape.
            input_precision: ``delta_2``, a scalar or a tensor of ``input_map.weight``'s
                shape.

        Returns:
            The scale ``s`` of every pair, shape ``(C', C)`` (one where a pair has a zero
            factor: such pairs are left as they are).
        """
        theta1 = self.output_map.weight  # (Q, C', C) or anchors (M1, C', C)
        theta2 = self.input_map.weight  # (C', C, P) or anchors (C', C, M2)
        a = (output_precision * theta1.square()).sum(dim=0)
        b = (input_precision * theta2.square()).sum(dim=-1)
        scale = torch.where((a > 0) & (b > 0), (b / a.clamp_min(1e-30)) ** 0.25, 1.0)
        theta1.mul_(scale)
        theta2.div_(scale[..., None])
        return scale

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Apply ``theta2`` then ``theta1``.

        Args:
            x: Input of shape ``(N, C, X, Y)``.

        Returns:
            Output of shape ``(N, C', X', Y')``.
        """
        return self.output_map(self.input_map(x))

    def dense_weight(self) -> torch.Tensor:
        r"""The equivalent FC weight :math:`\theta_1(c',c,x',y')\theta_2(c',c,x,y)` summed over c.

        Only for checks on small sizes: it has ``C'X'Y' x CXY`` entries.

        Returns:
            A matrix of shape ``(C' * X' * Y', C * X * Y)`` in the layout of
            :class:`~laplace_equivariance.layers.FullyConnected2d`'s weight.
        """
        theta1 = self.output_map.induced_weight()  # (Q, C', C)
        theta2 = self.input_map.induced_weight()  # (C', C, P)
        w = torch.einsum("qoc,ocp->oqcp", theta1, theta2)
        return w.reshape(theta2.shape[0] * theta1.shape[0], -1)
