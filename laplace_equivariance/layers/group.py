r"""GCONV: p4 lifting, pointwise and full group convolutions over 90-degree rotations (App. A).

Feature maps on the group p4 (translations and rotations by multiples of 90 degrees) are
stored as ordinary 4-D tensors ``(N, 4 * C, X, Y)`` whose channel ``s * C + c`` holds channel
``c`` at rotation ``s`` (rotation-major), so that planar paths (CONV, F-FC) of a relaxed layer
read and write the same tensor as ordinary ``4C``-channel maps.

Rotating the input image by 90 degrees (``torch.rot90(x, 1, (-2, -1))``) acts on a p4 map by
rotating every channel spatially and cycling the rotation index, ``s -> s + 1``
(:func:`rotate_p4`). The group convolutions below commute with that action, and
:class:`RotationMaxPool` turns it into invariance.

"Pointwise" means the filter lives on the identity rotation only (App. F.3): the rotation
channels are not mixed, so a pointwise group convolution has the ``C'CS^2`` filter weights of
a planar convolution, a sixteenth of those of the CONV path on the same ``4C -> 4C'`` maps.
The full group convolution (:class:`P4GroupConv2d`, App. A) lets the filter see every
rotation, ``4C'CS^2`` weights: a quarter of the CONV path's, the most a 90-degree-rotation
equivariant map with ``S x S`` support can have.

This is the textbook p4 formulation (filters rotated per output rotation). The reference code
instead stacks four rotated copies of the input image and applies one unrotated filter per
copy; the two differ by a per-rotation change of frame, which matters only for how the
non-equivariant paths mix rotation channels.
"""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F

from laplace_equivariance.layers.conv import circular_pad
from laplace_equivariance.layers.equivariance import N_ROTATIONS, rotate_p4
from laplace_equivariance.layers.filter_layer import FilterLayer2d

__all__ = [
    "N_ROTATIONS",
    "P4GroupConv2d",
    "P4LiftingConv2d",
    "P4PointwiseConv2d",
    "RotationMaxPool",
    "rotate_p4",
    "rotated_filters",
]


def rotated_filters(weight: torch.Tensor) -> torch.Tensor:
    """Stack the filter rotated by 0, 90, 180 and 270 degrees along the output channels.

    Args:
        weight: Filters of shape ``(C', C, S, S)``.

    Returns:
        Filters of shape ``(4 * C', C, S, S)``, rotation-major.
    """
    return torch.cat([torch.rot90(weight, s, dims=(-2, -1)) for s in range(N_ROTATIONS)])


class P4LiftingConv2d(FilterLayer2d):
    r"""Lifting convolution from the plane to p4, circular padding (App. A, Eq. 22).

    .. math::
        y(c', s, p) = \sum_c \sum_{\bar p} x(c, p + \bar p)\,
            \psi(c', c, R_s^{-1} \bar p) + b(c')

    Parameters: ``C'CS^2`` filter weights and ``C'`` biases (shared over rotations).

    Args:
        in_channels: ``C``.
        out_channels: ``C'`` (per rotation).
        kernel_size: Odd filter size ``S``.
        size: The grid ``(X, Y)``, for shape checks.
        bias: Whether to add a bias per output channel.

    Shapes:
        - Input: ``(N, C, X, Y)`` (planar).
        - Output: ``(N, 4 * C', X, Y)`` (p4, rotation-major).

    Raises:
        ValueError: If ``kernel_size`` is even.
    """

    p4_output = True

    groups = 1

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Correlate with the four rotated filters.

        Args:
            x: Input of the shape given in the class docstring.

        Returns:
            p4 feature map of shape ``(N, 4 * C', X, Y)``.
        """
        self.check_input(x)
        bias = self.bias.repeat(N_ROTATIONS) if self.bias is not None else None
        return F.conv2d(
            circular_pad(x, self.kernel_size),
            rotated_filters(self.weight),
            bias,
            groups=self.groups,
        )

    def extra_repr(self) -> str:
        """Sizes shown in the module's repr."""
        return f"{super().extra_repr()}, rotations={N_ROTATIONS}"


class P4PointwiseConv2d(P4LiftingConv2d):
    r"""Group convolution on p4, pointwise in the rotations (App. F.3).

    .. math::
        y(c', s, p) = \sum_c \sum_{\bar p} x(c, s, p + \bar p)\,
            \psi(c', c, R_s^{-1} \bar p) + b(c')

    Each rotation channel ``s`` is convolved with the filter rotated by ``s``; rotations are
    not mixed (a grouped convolution with 4 groups). Equivariant to translations and
    90-degree rotations (:func:`rotate_p4`).

    Parameters: ``C'CS^2`` filter weights and ``C'`` biases, as a planar convolution.

    Shapes:
        - Input: ``(N, 4 * C, X, Y)`` (p4, rotation-major).
        - Output: ``(N, 4 * C', X, Y)``.
    """

    p4_input = True

    groups = N_ROTATIONS

    @property
    def in_features_shape(self) -> tuple[int, int, int]:
        """The shape of one input example, ``(4 * C, X, Y)``."""
        return (N_ROTATIONS * self.in_channels, *self.size)


def rotated_group_filters(weight: torch.Tensor) -> torch.Tensor:
    r"""The filters of a full p4 group convolution for every output rotation.

    For output rotation ``s`` the filter on input rotation ``r`` is
    :math:`\psi(c', c, r - s, R_s^{-1} \bar p)`: the relative-rotation axis cycled by ``s``
    and the taps turned by ``s``.

    Args:
        weight: Filters of shape ``(C', 4 * C, S, S)``, input channels ``q * C + c`` for the
            relative rotation ``q`` (rotation-major).

    Returns:
        Filters of shape ``(4 * C', 4 * C, S, S)`` (both sides rotation-major), for one
        planar convolution over the rotation-major input.
    """
    c_out, channels, *taps = weight.shape
    by_rotation = weight.view(c_out, N_ROTATIONS, channels // N_ROTATIONS, *taps)
    return torch.cat(
        [
            torch.rot90(by_rotation.roll(s, dims=1), s, dims=(-2, -1)).reshape(weight.shape)
            for s in range(N_ROTATIONS)
        ]
    )


class P4GroupConv2d(FilterLayer2d):
    r"""Full group convolution on p4: the filter sees every rotation (App. A, Eq. 22 on p4).

    .. math::
        y(c', s, p) = \sum_{c, r} \sum_{\bar p} x(c, r, p + \bar p)\,
            \psi(c', c, r - s, R_s^{-1} \bar p) + b(c')

    Rotations (indices modulo 4) are mixed through the relative rotation ``r - s``, so the
    layer is equivariant to translations and 90-degree rotations (:func:`rotate_p4`) like
    :class:`P4PointwiseConv2d`, which is the case ``psi(., ., q, .) = 0`` for ``q != 0``.

    Parameters: ``4C'CS^2`` filter weights (``weight`` of shape ``(C', 4C, S, S)``, He-uniform
    over the fan-in ``4CS^2``) and ``C'`` biases.

    Args:
        in_channels: ``C`` (per rotation).
        out_channels: ``C'`` (per rotation).
        kernel_size: Odd filter size ``S``.
        size: The grid ``(X, Y)``, for shape checks.
        bias: Whether to add a bias per output channel.

    Shapes:
        - Input: ``(N, 4 * C, X, Y)`` (p4, rotation-major).
        - Output: ``(N, 4 * C', X, Y)``.

    Raises:
        ValueError: If ``kernel_size`` is even.
    """

    p4_input = True
    p4_output = True

    filter_input_copies = N_ROTATIONS

    @property
    def in_features_shape(self) -> tuple[int, int, int]:
        """The shape of one input example, ``(4 * C, X, Y)``."""
        return (N_ROTATIONS * self.in_channels, *self.size)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Correlate with the filters of :func:`rotated_group_filters`.

        Args:
            x: p4 feature map of shape ``(N, 4 * C, X, Y)``.

        Returns:
            p4 feature map of shape ``(N, 4 * C', X, Y)``.
        """
        self.check_input(x)
        bias = self.bias.repeat(N_ROTATIONS) if self.bias is not None else None
        return F.conv2d(circular_pad(x, self.kernel_size), rotated_group_filters(self.weight), bias)

    def extra_repr(self) -> str:
        """Sizes shown in the module's repr."""
        return f"{super().extra_repr()}, rotations={N_ROTATIONS}, full"


class RotationMaxPool(nn.Module):
    """Maximum over the four rotation channels: p4 map to an invariant planar map.

    Shapes:
        - Input: ``(N, 4 * C, X, Y)`` (p4, rotation-major).
        - Output: ``(N, C, X, Y)``.
    """

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Take the maximum over rotations.

        Args:
            x: p4 feature map of shape ``(N, 4 * C, X, Y)``.

        Returns:
            Planar map of shape ``(N, C, X, Y)``.

        Raises:
            ValueError: If the channel count is not a multiple of 4.
        """
        if x.dim() != 4 or x.shape[1] % N_ROTATIONS:
            raise ValueError(f"RotationMaxPool expects (N, 4 * C, X, Y), got {tuple(x.shape)}.")
        n, channels, *size = x.shape
        return x.view(n, N_ROTATIONS, channels // N_ROTATIONS, *size).amax(dim=1)
