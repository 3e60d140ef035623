r"""KFAC rule of GCONV (paper Sec. 4.3): P4 lifting and pointwise group convolutions.

Patches rotated back by each output rotation, ``A`` averaged over the ``4 XY`` uses of the
filter, ``B`` summed (KFAC-reduce: the mean patch and the summed gradient;
docs/curvature.md).
"""

from __future__ import annotations

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
    total = 0
    for s in range(N_ROTATIONS):
        taps = per_map[s % len(per_map)].view(channels, size, size, channels, size, size)
        rotated = torch.rot90(torch.rot90(taps, -s, dims=(1, 2)), -s, dims=(4, 5))
        total = total + rotated
    return total.reshape(channels * size**2, channels * size**2) / N_ROTATIONS


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
