r"""KFAC rules of GCONV (paper Sec. 4.3): P4 lifting, pointwise and full group convolutions.

Patches rotated back by each output rotation (and, for the full group convolution, their
rotation channels cycled back), ``A`` averaged over the ``4 XY`` uses of the filter, ``B``
summed (KFAC-reduce: the mean patch and the summed gradient; docs/curvature.md).
"""

from __future__ import annotations

import functools
import operator

import torch

from laplace_equivariance.curvature.rules.base import (
    KroneckerRule,
    outer_sum,
    outer_sum_over_positions,
    reduces,
)
from laplace_equivariance.curvature.rules.conv import (
    circular_patch_covariance,
    circular_patch_mean_covariance,
)
from laplace_equivariance.layers import N_ROTATIONS, P4PointwiseConv2d


def _taps_rotated_back(blocks: torch.Tensor, s: int, rows: tuple[int, int]) -> torch.Tensor:
    """``Pi_s A Pi_s^T`` of a covariance viewed with its taps as separate dims.

    ``rot90(., -s)`` on the row taps (dims ``rows``) and on the column taps (the last two dims).
    """
    return torch.rot90(torch.rot90(blocks, -s, dims=rows), -s, dims=(-2, -1))


def rotated_patch_covariance(maps: torch.Tensor, kernel_size: int) -> torch.Tensor:
    r"""GCONV's ``A``: the patch covariance of :func:`circular_patch_covariance`, rotated.

    The filter of output rotation ``s`` is :math:`\mathrm{rot}^s \psi`, so the patch that
    multiplies :math:`\psi` there is the patch of the map ``r`` it sees, rotated back:
    :math:`a_{nsp} = \Pi_s\, a^{(r)}_{np}`, with :math:`\Pi_s` the permutation of the
    ``S x S`` taps of every channel by ``rot90(., -s)``. Hence

    .. math::
        \frac1{4XY}\sum_{n,s,p} a_{nsp} a_{nsp}^\top
        = \frac14 \sum_{s=0}^{3} \Pi_s\, A^{(s \bmod R)}\, \Pi_s^\top, \qquad
        A^{(r)} = \frac1{XY}\sum_{n,p} a^{(r)}_{np} a^{(r)\top}_{np},

    each :math:`A^{(r)}` by FFT, and :math:`\Pi_s A \Pi_s^\top` is ``rot90`` of ``A`` on its
    row taps and on its column taps. Equal to the product of the unfolded, back-rotated
    patches (tested in float64), without unfolding ``4 S^2`` copies of every map.

    Args:
        maps: ``(N, R, C, X, Y)``: ``R = 4`` maps, the one rotation ``s`` sees at
            ``r = s`` (pointwise GCONV), or ``R = 1`` map that all rotations see (lifting).
        kernel_size: Odd filter size ``S``.

    Returns:
        ``A`` of shape ``(C S^2, C S^2)`` in ``(c, i, j)`` order.
    """
    channels, size = maps.shape[2], kernel_size
    per_map = [circular_patch_covariance(maps[:, r], size) for r in range(maps.shape[1])]
    terms = (
        _taps_rotated_back(
            per_map[s % len(per_map)].view(channels, size, size, channels, size, size),
            s,
            rows=(1, 2),
        )
        for s in range(N_ROTATIONS)
    )
    total = functools.reduce(operator.add, terms)
    return total.reshape(channels * size**2, channels * size**2) / N_ROTATIONS


def group_patch_covariance(maps: torch.Tensor, kernel_size: int) -> torch.Tensor:
    r"""The full group convolution's ``A``: every rotation's patch, cycled and rotated back.

    At output rotation ``s`` the filter entry :math:`\psi(c', c, q, t)` multiplies input
    rotation ``q + s`` at tap :math:`R_s t`, so the patch that multiplies :math:`\psi` is
    :math:`a_{nsp} = \Pi_s Z_s\, a_{np}`, with :math:`a_{np}` the patch of all ``4C``
    channels, :math:`Z_s` cycling its rotation axis back by ``s`` (``q <- q + s``) and
    :math:`\Pi_s` turning its taps back as in :func:`rotated_patch_covariance`. Hence

    .. math::
        \frac1{4XY}\sum_{n,s,p} a_{nsp} a_{nsp}^\top
        = \frac14 \sum_{s=0}^{3} \Pi_s Z_s\, A\, Z_s^\top \Pi_s^\top, \qquad
        A = \frac1{XY}\sum_{n,p} a_{np} a_{np}^\top,

    one :func:`circular_patch_covariance` of the ``4C``-channel map (the CONV path's ``A`` on
    the same input), permuted four times. Equal to the product of the back-rotated patches
    (tested in float64).

    Args:
        maps: ``(N, 4, C, X, Y)``, rotation-major.
        kernel_size: Odd filter size ``S``.

    Returns:
        ``A`` of shape ``(4 C S^2, 4 C S^2)`` in ``(q, c, i, j)`` order (the weight's).
    """
    channels, size = maps.shape[2], kernel_size
    whole = circular_patch_covariance(maps.flatten(1, 2), size)
    blocks = whole.view(N_ROTATIONS, channels, size, size, N_ROTATIONS, channels, size, size)
    terms = (
        _taps_rotated_back(blocks.roll((-s, -s), dims=(0, 4)), s, rows=(2, 3))
        for s in range(N_ROTATIONS)
    )
    total = functools.reduce(operator.add, terms)
    side = N_ROTATIONS * channels * size**2
    return total.reshape(side, side) / N_ROTATIONS


class P4ConvRule(KroneckerRule):
    """GCONV (lifting and pointwise): shared filter over rotations and positions.

    For output rotation ``s`` the filter is ``rot90(psi, s)``, so the patch that multiplies
    ``psi`` is the input patch rotated back, ``rot90(patch, -s)``; KFAC-expand sums over the
    ``4 x XY`` places the filter is used.
    """

    @staticmethod
    def preprocess_in_data(module, in_data, out_data):
        """The maps the filter's rotations see, ``(N, R, C, X, Y)``.

        ``R = 4`` rotation channels for the pointwise convolution (rotation-major input), one
        map that every rotation of the filter sees for the lifting convolution.
        """
        n = in_data.shape[0]
        if isinstance(module, P4PointwiseConv2d):
            return in_data.reshape(n, N_ROTATIONS, module.in_channels, *module.size)
        return in_data[:, None]

    @staticmethod
    def preprocess_out_grads(module, out_grads):
        """``(N, 4 C', X, Y) -> (N, 4, C', positions)``."""
        n = out_grads.shape[0]
        return out_grads.view(n, N_ROTATIONS, module.out_channels, -1)

    @staticmethod
    def cov_kron_A(module, in_data):
        r"""``A`` of the back-rotated patches, by :func:`rotated_patch_covariance`.

        Expand :math:`\frac1{4XY}\sum_{n,s,p} a_{nsp} a_{nsp}^\top`, reduce
        :math:`\sum_n \bar a_n \bar a_n^\top` of the mean patch, which is the mean of each
        channel over rotations and positions at every tap (circular padding; a rotation
        permutes a patch's taps).
        """
        if reduces(module):
            return circular_patch_mean_covariance(in_data.mean(dim=1), module.kernel_size)
        return rotated_patch_covariance(in_data, module.kernel_size)

    @staticmethod
    def cov_kron_B(module, out_grads):
        r"""``B``, also the bias's block.

        Expand :math:`\sum_{n,s,p} g_{nsp} g_{nsp}^\top`, reduce the same of the gradient
        summed over rotations and positions.
        """
        if reduces(module):
            return outer_sum(out_grads.sum(dim=(1, 3)))
        return outer_sum_over_positions(out_grads.flatten(end_dim=1))


class P4GroupConvRule(P4ConvRule):
    """The full group convolution: one filter over rotations, positions and relative rotations.

    ``B`` as :class:`P4ConvRule`'s; ``A`` from the patches of every rotation channel, cycled
    and turned back by each output rotation (:func:`group_patch_covariance`).
    """

    @staticmethod
    def preprocess_in_data(module, in_data, out_data):
        """``(N, 4 C, X, Y) -> (N, 4, C, X, Y)``."""
        return in_data.reshape(in_data.shape[0], N_ROTATIONS, module.in_channels, *module.size)

    @staticmethod
    def cov_kron_A(module, in_data):
        r"""``A`` of the cycled, back-rotated patches.

        Expand: :func:`group_patch_covariance`. Reduce: :math:`\sum_n \bar a_n \bar a_n^\top`
        of the mean patch, each channel's mean over rotations and positions at every tap and
        every relative rotation (cycling and turning permute a patch's entries).
        """
        if reduces(module):
            means = in_data.mean(dim=1).repeat(1, N_ROTATIONS, 1, 1)
            return circular_patch_mean_covariance(means, module.kernel_size)
        return group_patch_covariance(in_data, module.kernel_size)
