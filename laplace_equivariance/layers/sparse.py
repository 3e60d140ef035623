r"""S-FC and S-CONV: weights interpolated from anchor points (paper Eqs. 6-7, App. C.2, F.4).

A spatial weight function is written in an RBF basis of ``M`` anchor points,

.. math::
    s^\omega(c', c, p) = \sum_{j=1}^{M} u(c', c, j)\, \phi_j(p), \qquad
    \phi_j(p) = \exp\left(-\omega^2 \lVert p - z_j \rVert^2\right),

with anchor values ``u`` (per channel pair), anchor positions ``z_j`` (shared over channels,
learnable) and one lengthscale ``omega`` per basis. Positions ``p`` are pixel coordinates
centred on the grid. By default ``M = ceil(P / 2)`` for a grid of ``P`` positions (App. F.4)
and the anchors start on the grid's checkerboard (the points with even ``i + j``).

Limits that the tests check: as ``omega -> inf`` the weight at an anchor equals that anchor's
value; at ``omega = 0`` every basis function is 1, the weight is the same at every position
(stationary), S-CONV's filter is constant and S-FC becomes a global sum: both equivariant.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from enum import Enum

import torch
from torch import nn

from laplace_equivariance.layers.conv import circular_conv2d
from laplace_equivariance.layers.factored import (
    FactoredInputMap,
    FactoredLinear2d,
    FactoredOutputMap,
)
from laplace_equivariance.layers.filter_layer import FilterLayer2d
from laplace_equivariance.layers.init import he_uniform_, unit_uniform_
from laplace_equivariance.layers.shapes import pair

__all__ = [
    "AnchorBasis",
    "LengthscaleMode",
    "SparseCircularConv2d",
    "SparseFactoredInputMap",
    "SparseFactoredLinear2d",
    "SparseFactoredOutputMap",
    "rbf_basis",
]


class LengthscaleMode(str, Enum):
    """How an anchor basis treats its lengthscale ``omega``."""

    LEARNED = "learned"
    """``omega`` is an ``nn.Parameter`` of the model: trained with the weights and, in a
    Laplace approximation, a weight with a prior of its own (Table 2's prior on omega)."""

    FIXED = "fixed"
    """``omega`` is a constant buffer."""

    HYPERPARAMETER = "hyperparameter"
    """``omega`` is a buffer outside ``model.parameters()``, returned by
    :meth:`AnchorBasis.hyperparameters` so that a marginal-likelihood optimiser can learn it
    (:func:`laplace_equivariance.marglik_training` does, with the gradient defined in
    :mod:`laplace_equivariance.curvature.lengthscales`)."""


def grid_coordinates(size: tuple[int, int]) -> torch.Tensor:
    """Pixel coordinates of a ``size[0] x size[1]`` grid, centred on its middle.

    Args:
        size: ``(X, Y)``.

    Returns:
        Tensor of shape ``(X * Y, 2)`` in row-major order of the grid.
    """
    xs = torch.arange(size[0], dtype=torch.get_default_dtype()) - (size[0] - 1) / 2
    ys = torch.arange(size[1], dtype=torch.get_default_dtype()) - (size[1] - 1) / 2
    return torch.cartesian_prod(xs, ys).reshape(-1, 2)


def rbf_basis(
    grid: torch.Tensor, positions: torch.Tensor, lengthscale: torch.Tensor
) -> torch.Tensor:
    r"""Evaluate :math:`\phi_j(p) = \exp(-\omega^2 \lVert p - z_j \rVert^2)` (Eqs. 6-7).

    Args:
        grid: Positions ``p``, shape ``(P, 2)``.
        positions: Anchor positions ``z``, shape ``(M, 2)``.
        lengthscale: ``omega``, shape ``(1,)``.

    Returns:
        ``phi`` of shape ``(P, M)``.
    """
    sq_dist = (grid[:, None, :] - positions[None, :, :]).pow(2).sum(-1)
    return torch.exp(-lengthscale.pow(2) * sq_dist)


def default_anchor_count(size: tuple[int, int]) -> int:
    """Half the grid's positions, rounded up (paper App. F.4).

    Args:
        size: ``(X, Y)``.

    Returns:
        ``ceil(X * Y / 2)``.
    """
    return math.ceil(size[0] * size[1] / 2)


class AnchorBasis(nn.Module):
    r"""RBF basis :math:`\phi_j(p) = \exp(-\omega^2 \lVert p - z_j\rVert^2)` on a grid.

    Args:
        size: The grid ``(X, Y)`` the basis is evaluated on.
        n_anchors: ``M``; defaults to ``ceil(X * Y / 2)`` (App. F.4).
        lengthscale: Initial ``omega`` (in inverse pixels), stored with shape ``(1,)``.
        lengthscale_mode: See :class:`LengthscaleMode`.
        learn_positions: Whether the anchor positions are learned. They are parameterised as
            offsets from their initial grid points, ``z = z_0 + position_offsets``, so that a
            zero-mean prior (as laplace-torch puts on every parameter) keeps anchors near
            their grid points instead of pulling them to the grid's centre.

    Shapes:
        - Output of :meth:`forward`: ``(X * Y, M)``.

    Raises:
        ValueError: If ``n_anchors`` is not in ``[1, X * Y]``, or ``lengthscale_mode`` is not
            one of :class:`LengthscaleMode`'s values (the message lists them).
    """

    # buffers and parameters, registered in __init__
    grid: torch.Tensor
    initial_positions: torch.Tensor
    position_offsets: nn.Parameter | None
    lengthscale: torch.Tensor

    def __init__(
        self,
        size: int | Sequence[int],
        n_anchors: int | None = None,
        lengthscale: float = 1.0,
        lengthscale_mode: LengthscaleMode | str = LengthscaleMode.LEARNED,
        learn_positions: bool = True,
    ) -> None:
        super().__init__()
        self.size = pair(size)
        if lengthscale_mode not in list(LengthscaleMode):
            raise ValueError(
                f"lengthscale_mode={lengthscale_mode!r} is not one of "
                f"{[mode.value for mode in LengthscaleMode]}."
            )
        self.lengthscale_mode = LengthscaleMode(lengthscale_mode)
        grid = grid_coordinates(self.size)
        n_positions = grid.shape[0]
        n_anchors = default_anchor_count(self.size) if n_anchors is None else n_anchors
        if not 1 <= n_anchors <= n_positions:
            raise ValueError(f"n_anchors must be in [1, {n_positions}], got {n_anchors}.")
        self.register_buffer("grid", grid)
        self.register_buffer("initial_positions", self._initial_positions(grid, n_anchors))
        if learn_positions:
            self.position_offsets = nn.Parameter(torch.zeros_like(self.initial_positions))
        else:
            self.register_parameter("position_offsets", None)
        omega = torch.tensor([float(lengthscale)])
        if self.lengthscale_mode is LengthscaleMode.LEARNED:
            self.lengthscale = nn.Parameter(omega)
        else:
            self.register_buffer("lengthscale", omega)

    def _initial_positions(self, grid: torch.Tensor, n_anchors: int) -> torch.Tensor:
        """Checkerboard points (even ``i + j``) for the default count, else evenly spaced ones."""
        rows, cols = self.size
        if n_anchors == default_anchor_count(self.size):
            index = [i * cols + j for i in range(rows) for j in range(cols) if (i + j) % 2 == 0]
        else:
            step = (rows * cols - 1) / max(n_anchors - 1, 1)
            index = [round(k * step) for k in range(n_anchors)]
        return grid[torch.tensor(index, device=grid.device)].clone()

    @property
    def n_anchors(self) -> int:
        """``M``, the number of anchor points."""
        return self.initial_positions.shape[0]

    @property
    def positions(self) -> torch.Tensor:
        """The anchor positions ``z = z_0 + offsets``, shape ``(M, 2)``."""
        if self.position_offsets is None:
            return self.initial_positions
        return self.initial_positions + self.position_offsets

    def hyperparameters(self) -> list[torch.Tensor]:
        """The lengthscale, made a leaf that requires grad, in HYPERPARAMETER mode.

        Call it after moving the model to its device and dtype, and give the result to the
        hyperparameter optimiser.

        Returns:
            ``[omega]`` in HYPERPARAMETER mode, else ``[]``.
        """
        if self.lengthscale_mode is not LengthscaleMode.HYPERPARAMETER:
            return []
        if not self.lengthscale.is_leaf:
            self.lengthscale.detach_()
        self.lengthscale.requires_grad_(True)
        return [self.lengthscale]

    def derivatives(self) -> tuple[torch.Tensor, torch.Tensor]:
        r"""Closed-form derivatives of ``phi`` with respect to ``omega`` and the positions.

        With :math:`d_{pj} = \lVert p - z_j \rVert^2`:
        :math:`\partial\phi_{pj}/\partial\omega = -2\omega\, d_{pj}\, \phi_{pj}` and
        :math:`\partial\phi_{pj}/\partial z_j = 2\omega^2 (p - z_j)\, \phi_{pj}`
        (:math:`\phi_{pj}` does not depend on :math:`z_k`, :math:`k \neq j`). The derivative
        with respect to ``position_offsets`` equals the one with respect to ``z``.

        Returns:
            ``(d phi / d omega, d phi / d z)`` of shapes ``(X * Y, M)`` and ``(X * Y, M, 2)``.
        """
        phi, omega = self(), self.lengthscale
        difference = self.grid[:, None, :] - self.positions[None, :, :]
        d_omega = -2 * omega * difference.pow(2).sum(-1) * phi
        d_positions = 2 * omega.pow(2) * difference * phi[..., None]
        return d_omega, d_positions

    def forward(self) -> torch.Tensor:
        """Evaluate every basis function at every grid position.

        Returns:
            ``phi`` of shape ``(X * Y, M)``.
        """
        return rbf_basis(self.grid, self.positions, self.lengthscale)

    def extra_repr(self) -> str:
        """Sizes shown in the module's repr."""
        return (
            f"grid={self.size[0]}x{self.size[1]}, anchors={self.n_anchors}, "
            f"lengthscale={self.lengthscale_mode.value}"
        )


class SparseFactoredInputMap(FactoredInputMap):
    r"""S-FC's input half: :class:`FactoredInputMap` with ``theta2 = u2 phi2^T`` (Eq. 7).

    :math:`\theta_2(c', c, p) = \sum_j u_2(c', c, j)\,\phi_j(p)` on the input grid.

    Args:
        in_channels: ``C``.
        out_channels: ``C'``.
        in_size: Input grid ``(X, Y)``.
        **basis_options: Passed to :class:`AnchorBasis`.

    Shapes:
        - ``weight`` (the anchor values ``u2``): ``(C', C, M2)``.
        - Input: ``(N, C, X, Y)``; output: ``(N, C', C)``.
    """

    def __init__(
        self, in_channels: int, out_channels: int, in_size: int | Sequence[int], **basis_options
    ) -> None:
        super().__init__(in_channels, out_channels, in_size)
        self.basis = AnchorBasis(self.in_size, **basis_options)
        self.weight = nn.Parameter(torch.empty(out_channels, in_channels, self.basis.n_anchors))
        unit_uniform_(self.weight, self.in_size[0] * self.in_size[1])

    def induced_weight(self, phi: torch.Tensor | None = None) -> torch.Tensor:
        """The induced ``theta2 = u phi^T`` of shape ``(C', C, X * Y)``, recomputed every call.

        Args:
            phi: The basis ``(X * Y, M2)``; defaults to ``self.basis()``.
        """
        phi = self.basis() if phi is None else phi
        return torch.einsum("ocj,pj->ocp", self.weight, phi)


class SparseFactoredOutputMap(FactoredOutputMap):
    r"""S-FC's output half: :class:`FactoredOutputMap` with ``theta1 = phi1 u1`` (Eq. 7).

    :math:`\theta_1(q, c', c) = \sum_j \phi_j(q)\, u_1(j, c', c)` on the output grid. Biases
    as in :class:`~laplace_equivariance.layers.FactoredOutputMap` (channel + position).

    Args:
        in_channels: ``C``.
        out_channels: ``C'``.
        out_size: Output grid ``(X', Y')``.
        bias: Whether to add channel and position biases.
        **basis_options: Passed to :class:`AnchorBasis`.

    Shapes:
        - ``weight`` (the anchor values ``u1``): ``(M1, C', C)`` (anchor first, like ``theta1``).
        - Input: ``(N, C', C)``; output: ``(N, C', X', Y')``.
    """

    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        out_size: int | Sequence[int],
        bias: bool = True,
        **basis_options,
    ) -> None:
        super().__init__(in_channels, out_channels, out_size, bias)
        self.basis = AnchorBasis(self.out_size, **basis_options)
        self.weight = nn.Parameter(torch.empty(self.basis.n_anchors, out_channels, in_channels))
        he_uniform_(self.weight, in_channels)

    def induced_weight(self, phi: torch.Tensor | None = None) -> torch.Tensor:
        """The induced ``theta1 = phi u`` of shape ``(X' * Y', C', C)``, recomputed every call.

        Args:
            phi: The basis ``(X' * Y', M1)``; defaults to ``self.basis()``.
        """
        phi = self.basis() if phi is None else phi
        return torch.einsum("qj,joc->qoc", phi, self.weight)


class SparseFactoredLinear2d(FactoredLinear2d):
    r"""Sparse factored fully connected layer (S-FC, paper Eq. 7).

    :class:`~laplace_equivariance.layers.FactoredLinear2d` with ``theta1`` and ``theta2``
    interpolated from ``M1 = ceil(X'Y'/2)`` and ``M2 = ceil(XY/2)`` anchors (App. F.4).

    Parameters: ``C'C(M1 + M2)`` anchor values, ``C' + X'Y'`` biases, and per basis ``2M``
    positions (if learned) and one ``omega`` (if LEARNED). The reference code counts only
    anchor values and ``C'`` biases (831,820 for the CIFAR-10 S-FC model); ours adds the
    position biases of F-FC and the learnable positions and lengthscales, which the paper
    describes as learnable (``C'CP + 2P``, Sec. 3.1).

    Args:
        in_channels: ``C``.
        out_channels: ``C'``.
        in_size: Input grid ``(X, Y)``.
        out_size: Output grid ``(X', Y')``; defaults to ``in_size``.
        bias: Whether to add biases.
        **basis_options: Passed to both :class:`AnchorBasis` (``lengthscale``,
            ``lengthscale_mode``, ``learn_positions``).

    Shapes:
        - Input: ``(N, C, X, Y)``.
        - Output: ``(N, C', X', Y')``.
    """

    input_map_type = SparseFactoredInputMap
    output_map_type = SparseFactoredOutputMap


class SparseCircularConv2d(FilterLayer2d):
    r"""Sparse circular convolution (S-CONV, paper Eq. 6).

    The ``S x S`` filter is :math:`\bar s(c', c, \bar p) = \sum_j u(c', c, j)\phi_j(\bar p)` with
    ``M = ceil(S^2 / 2)`` anchors over the filter's offsets, then applied as
    :class:`~laplace_equivariance.layers.CircularConv2d`. Exactly translation equivariant for
    every ``u``, ``z`` and ``omega``.

    Parameters: ``C'CM`` anchor values, ``C'`` biases, ``2M`` positions (if learned) and one
    ``omega`` (if LEARNED).

    Args:
        in_channels: ``C``.
        out_channels: ``C'``.
        kernel_size: Odd filter size ``S``.
        size: The grid ``(X, Y)`` the layer is applied to, for shape checks.
        bias: Whether to add a bias per output channel.
        **basis_options: Passed to :class:`AnchorBasis`.

    Shapes:
        - ``weight`` (the anchor values ``u``): ``(C', C, M)``.
        - Input: ``(N, C, X, Y)``; output: ``(N, C', X, Y)``.

    Raises:
        ValueError: If ``kernel_size`` is even.
    """

    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        kernel_size: int,
        size: int | Sequence[int],
        bias: bool = True,
        **basis_options,
    ) -> None:
        self.init_geometry(in_channels, out_channels, kernel_size, size)
        self.basis = AnchorBasis(kernel_size, **basis_options)
        self.weight = nn.Parameter(torch.empty(out_channels, in_channels, self.basis.n_anchors))
        he_uniform_(self.weight, in_channels * kernel_size**2)
        self.add_bias(bias)

    def induced_weight(self, phi: torch.Tensor | None = None) -> torch.Tensor:
        """The induced filter of shape ``(C', C, S, S)``, recomputed on every call.

        Args:
            phi: The basis ``(S * S, M)``; defaults to ``self.basis()``.
        """
        phi = self.basis() if phi is None else phi
        filters = torch.einsum("ocj,pj->ocp", self.weight, phi)
        return filters.view(self.out_channels, self.in_channels, self.kernel_size, -1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Pad circularly and convolve with the induced filter.

        Args:
            x: Input of shape ``(N, C, X, Y)``.

        Returns:
            Output of shape ``(N, C', X, Y)``.
        """
        self.check_input(x)
        return circular_conv2d(x, self.induced_weight(), self.bias)
