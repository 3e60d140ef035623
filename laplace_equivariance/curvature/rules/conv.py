r"""KFAC rule of CONV (paper Eq. 2): circular convolutions with a shared filter.

``A = (1/XY) sum_{n,p} a a^T`` over the circular patches ``a``, computed from the
channels' circular cross-correlations without unfolding
(:func:`circular_patch_covariance`), and ``B = sum_{n,k,p} g g^T`` (``C' x C'``);
KFAC-reduce: the mean patch and the position-summed gradient (docs/curvature.md).
"""

from __future__ import annotations

import functools

import torch
from torch.nn import functional as F

from laplace_equivariance.curvature.rules.base import (
    KroneckerRule,
    outer_sum,
    outer_sum_over_positions,
    reduces,
)
from laplace_equivariance.layers.conv import circular_pad


def circular_patches(x: torch.Tensor, kernel_size: int) -> torch.Tensor:
    """Patches of a circularly padded map, ``(N, C * S * S, X * Y)`` in ``(c, i, j)`` order."""
    return F.unfold(circular_pad(x, kernel_size), kernel_size)


@functools.lru_cache(maxsize=64)
def _tap_differences(
    kernel_size: int, h: int, w: int, device: torch.device
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(s' - s) mod X`` and ``(s' - s) mod Y`` for every pair of taps, each ``(S, S)``.

    Cached per filter size, grid and device (made outside inference mode), so that each
    batch of a fit runs no index arithmetic for them.
    """
    with torch.inference_mode(False):
        taps = torch.arange(kernel_size, device=device)
        offset = taps[None, :] - taps[:, None]  # (S, S): s' - s along one axis
        return offset % h, offset % w


def circular_patch_covariance(x: torch.Tensor, kernel_size: int) -> torch.Tensor:
    r"""``A`` of a circular convolution, :math:`\frac1{XY}\sum_{n,p} a_{np} a_{np}^\top`, by FFT.

    The patch :math:`a_{np}` of a circularly padded map has entries
    :math:`x_n(c, p + s - \lfloor S/2 \rfloor)` for taps ``s`` (indices modulo the grid), so
    summing over all positions ``p`` only the difference of two taps matters:

    .. math::
        A_{(c,s),(c',s')} = \frac1{XY} R_{cc'}(s' - s), \qquad
        R_{cc'}(d) = \sum_{n,p} x_n(c, p)\, x_n(c', p + d),

    the circular cross-correlation of the channels, computed for all offsets at once by
    FFT (:math:`\hat R_{cc'} = \sum_n \overline{\hat x_{nc}}\, \hat x_{nc'}`). Equal to the
    product of unfolded patches to a few float64 eps (tested), cheaper than it on every map
    of the network (``benchmarks/conv_a_factor.py``, docs/speed.md), and as accurate in
    float32.

    Args:
        x: The unpadded maps, ``(N, C, X, Y)``.
        kernel_size: Odd filter size ``S``.

    Returns:
        ``A`` of shape ``(C S^2, C S^2)``, rows and columns in ``(c, i, j)`` order (as
        :func:`circular_patches`).
    """
    n, c, h, w = x.shape
    spectra = torch.fft.rfft2(x)
    frequencies = spectra.shape[-1]
    # one contiguous (C, N) matrix per frequency: a batched product over the strided
    # spectra (einsum "nchw,ndhw->cdhw") runs a slow per-matrix loop
    per_frequency = spectra.permute(2, 3, 1, 0).reshape(h * frequencies, c, n).contiguous()
    cross = torch.bmm(per_frequency.conj(), per_frequency.transpose(1, 2))
    cross = cross.view(h, frequencies, c, c).permute(2, 3, 0, 1)
    correlation = torch.fft.irfft2(cross, s=(h, w))  # (C, C, X, Y): R_cc'(d) at d
    rows, columns = _tap_differences(kernel_size, h, w, x.device)
    # (C, C', i, j, i', j') = R_cc'(i' - i, j' - j)
    blocks = correlation[:, :, rows[:, None, :, None], columns[None, :, None, :]]
    size = c * kernel_size**2
    return blocks.permute(0, 2, 3, 1, 4, 5).reshape(size, size) / (h * w)


def circular_patch_mean_covariance(x: torch.Tensor, kernel_size: int) -> torch.Tensor:
    r"""KFAC-reduce's ``A`` of a circular convolution, :math:`\sum_n \bar a_n \bar a_n^\top`.

    Over all positions of a circularly padded map every tap sees every input position once,
    so the mean patch is :math:`\bar a_n(c, i, j) = \bar x_n(c)`, the channel's mean, for
    every tap: :math:`A = (\sum_n \bar x_n \bar x_n^\top) \otimes \mathbf{1}\mathbf{1}^\top`.

    Args:
        x: The unpadded maps, ``(N, C, X, Y)``.
        kernel_size: Filter size ``S``.

    Returns:
        ``A`` of shape ``(C S^2, C S^2)`` in ``(c, i, j)`` order.
    """
    means = outer_sum(x.mean(dim=(2, 3)))
    taps = kernel_size**2
    return torch.kron(means, x.new_ones(taps, taps))


class CircularConv2dRule(KroneckerRule):
    """CONV's ``weight (C', C, S, S)``: KFAC-expand (or -reduce) over the ``XY`` positions.

    Expand: ``A`` by :func:`circular_patch_covariance` from the unpadded input; ``B`` sums the
    output gradients' outer products over positions (ASDL's ``Conv2d`` rule on the padded
    map gives the same factors). Reduce: ``A`` by :func:`circular_patch_mean_covariance`,
    ``B`` from the output gradients summed over positions, which is also the bias's exact
    block.
    """

    @staticmethod
    def preprocess_in_data(module, in_data, out_data):
        """The unpadded input itself, ``(N, C, X, Y)``."""
        return in_data

    @staticmethod
    def preprocess_out_grads(module, out_grads):
        """``(N, C', X, Y) -> (N, C', positions)``."""
        return out_grads.flatten(start_dim=2)

    @staticmethod
    def cov_kron_A(module, in_data):
        r"""``A`` over the circular patches.

        Expand :math:`\frac1{XY}\sum_{n,p} a_{np} a_{np}^\top`, reduce
        :math:`\sum_n \bar a_n \bar a_n^\top`.
        """
        if reduces(module):
            return circular_patch_mean_covariance(in_data, module.kernel_size)
        return circular_patch_covariance(in_data, module.kernel_size)

    @staticmethod
    def cov_kron_B(module, out_grads):
        r"""``B``, also the bias's block.

        Expand :math:`\sum_{n,p} g_{np} g_{np}^\top`, reduce
        :math:`\sum_n (\sum_p g_{np}) (\sum_p g_{np})^\top`.
        """
        if reduces(module):
            return outer_sum(out_grads.sum(dim=2))
        return outer_sum_over_positions(out_grads)
