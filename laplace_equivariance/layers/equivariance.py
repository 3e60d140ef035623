r"""How far a layer is from equivariant: :math:`\max |f(T x) - T' f(x)|` for one transformation.

Two transformations of the layers' grids, each acting on planar maps ``(N, C, X, Y)`` and on
p4 feature maps ``(N, 4 C, X, Y)`` (rotation-major channels,
:mod:`laplace_equivariance.layers.group`):

- :class:`Shift`: a circular translation by ``(dx, dy)`` pixels (paper Eq. 2); on an output
  grid ``r`` times smaller it is the shift by ``(dx / r, dy / r)``, so the shift must be a
  multiple of ``r``;
- :class:`QuarterTurn`: a rotation by ``k * 90`` degrees, which on a p4 map also cycles the
  rotation channels (:func:`rotate_p4`).

Every layer of the package (and :class:`~laplace_equivariance.layers.RelaxedLayer`) has
:meth:`EquivarianceCheck.check_equivariance`; its attributes ``p4_input`` and ``p4_output``
say how a quarter turn acts on its input and output. A path kind's symmetry
(:class:`~laplace_equivariance.layers.path_kinds.Symmetry`) names the transformations that
generate its group, whose errors are zero up to rounding; the others measure how far a layer
is from equivariant.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, cast

import torch

__all__ = [
    "N_ROTATIONS",
    "EquivarianceCheck",
    "QuarterTurn",
    "Shift",
    "Transform",
    "equivariance_error",
    "rotate_p4",
]

N_ROTATIONS = 4
"""The rotations of p4: by 0, 90, 180 and 270 degrees."""


def rotate_p4(x: torch.Tensor, k: int = 1) -> torch.Tensor:
    """Act with a rotation by ``k * 90`` degrees on a p4 feature map.

    Args:
        x: p4 feature map of shape ``(N, 4 * C, X, Y)``, rotation-major channels.
        k: Number of quarter turns.

    Returns:
        The rotated map, same shape: spatial ``rot90`` by ``k`` and rotation index ``s -> s + k``.
    """
    n, channels, *size = x.shape
    grouped = x.view(n, N_ROTATIONS, channels // N_ROTATIONS, *size)
    rotated = torch.rot90(grouped, k, dims=(-2, -1)).roll(k, dims=1)
    return rotated.reshape(x.shape)


@dataclass(frozen=True)
class Shift:
    """A circular translation by ``(dx, dy)`` pixels of the input grid."""

    dx: int
    dy: int

    def __call__(self, x: torch.Tensor, p4: bool = False, ratio: int = 1) -> torch.Tensor:
        """The shift of ``x``, on a grid ``ratio`` times smaller than the input's.

        Raises:
            ValueError: If the shift is no multiple of ``ratio``.
        """
        if self.dx % ratio or self.dy % ratio:
            raise ValueError(
                f"A shift by ({self.dx}, {self.dy}) has no counterpart on a grid {ratio} times "
                f"smaller: shift by multiples of {ratio}."
            )
        return torch.roll(x, shifts=(self.dx // ratio, self.dy // ratio), dims=(-2, -1))


@dataclass(frozen=True)
class QuarterTurn:
    """A rotation by ``k * 90`` degrees (counter-clockwise, as ``torch.rot90``)."""

    k: int = 1

    def __call__(self, x: torch.Tensor, p4: bool = False, ratio: int = 1) -> torch.Tensor:
        """The rotation of ``x``: of its grid, and of its rotation channels if ``p4``."""
        return rotate_p4(x, self.k) if p4 else torch.rot90(x, self.k, dims=(-2, -1))


class Transform(Protocol):
    """A transformation of the layers' grids.

    :class:`Shift`, :class:`QuarterTurn`, or any callable of this signature: a path kind's
    own symmetry can bring its own.
    """

    def __call__(self, x: torch.Tensor, p4: bool = False, ratio: int = 1) -> torch.Tensor:
        """The transformed ``x``.

        Args:
            x: Maps ``(N, C, X, Y)``; p4 feature maps if ``p4``.
            p4: Whether ``x`` is a p4 feature map.
            ratio: How many times smaller ``x``'s grid is than the grid the transformation
                is defined on.
        """
        ...


@torch.no_grad()
def equivariance_error(
    module: torch.nn.Module,
    x: torch.Tensor,
    transform: Transform,
    p4_input: bool = False,
    p4_output: bool = False,
) -> float:
    r""":math:`\max |f(T x) - T' f(x)|` of ``module`` on inputs ``x``.

    Args:
        module: A layer mapping ``(N, C, X, Y)`` to ``(N, C', X', Y')`` with ``X = r X'``.
        x: Inputs.
        transform: A :class:`Shift`, :class:`QuarterTurn` or other :class:`Transform`.
        p4_input: Whether ``x`` is a p4 feature map.
        p4_output: Whether the output is.

    Returns:
        The largest absolute difference (zero for an exactly equivariant layer).

    Raises:
        ValueError: If the output grid does not divide the input grid, or a shift has no
            counterpart on the output grid.
    """
    out = module(x)
    ratio, rest = divmod(x.shape[-1], out.shape[-1])
    if rest or x.shape[-2] != ratio * out.shape[-2]:
        raise ValueError(
            f"An output grid {tuple(out.shape[-2:])} that does not divide the input grid "
            f"{tuple(x.shape[-2:])} has no transformation to compare with."
        )
    moved = module(transform(x, p4_input))
    return (moved - transform(out, p4_output, ratio)).abs().max().item()


class EquivarianceCheck:
    """A mixin for layers: :meth:`check_equivariance` with the layer's own p4 attributes."""

    p4_input: bool = False
    """Whether the layer's input is a p4 feature map (a quarter turn cycles its channels)."""
    p4_output: bool = False
    """Whether its output is."""

    def check_equivariance(self, x: torch.Tensor, transform: Transform) -> float:
        r""":math:`\max |f(T x) - T' f(x)|` on inputs ``x`` (:func:`equivariance_error`).

        Args:
            x: Inputs of the layer.
            transform: A :class:`Shift`, :class:`QuarterTurn` or other :class:`Transform` of
                the input grid.

        Returns:
            The largest absolute difference: zero up to rounding where the layer is
            equivariant to ``transform`` by construction.
        """
        # a mixin: self is always also the nn.Module layer it is a base of
        layer = cast(torch.nn.Module, self)
        return equivariance_error(layer, x, transform, self.p4_input, self.p4_output)
