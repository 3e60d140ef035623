r"""KFAC rule of a stock ``nn.Conv2d`` that ASDL's own rule does not cover.

ASDL's ``Conv2d`` operation unfolds zero-padded, undilated inputs and assumes one group; a
relaxed layer's CONV path is any ``nn.Conv2d`` of the network it came from (strided,
dilated, grouped, zero-, circularly, reflection- or replication-padded). This rule covers
all of them, in KFAC-expand and KFAC-reduce, with the factors curvlinops'
``KFACLinearOperator`` defines (tested in float64).

**Patches.** ``nn.Conv2d`` pads its input ``x`` (``N, C, H, W``) by ``(l, r, t, b)``
(:func:`conv_padding`: the integer padding, or ``'same'``'s, whose total
:math:`d (k - 1)` per axis puts the odd extra entry on the right/bottom) in its
``padding_mode`` (zeros, circular, reflect, replicate), then correlates. With dilation
``(d_1, d_2)`` and stride ``(s_1, s_2)`` the patch that multiplies the filter at output
position :math:`p = (o_1, o_2)` has entries

.. math::
    a_{np}(c, i, j) = \tilde x_n(c,\; s_1 o_1 + d_1 i,\; s_2 o_2 + d_2 j),
    \qquad 0 \le i < k_1,\; 0 \le j < k_2,

:math:`\tilde x` the padded input: ``F.unfold(pad(x), kernel_size, dilation, stride)``,
``(N, C k_1 k_2, P)`` in the weight's ``(c, i, j)`` order. Dilation only spaces the taps;
the factors' shapes are those of the undilated convolution.

**Groups.** With ``G`` groups the weight ``W`` is ``(C', C/G, k_1, k_2)``: output channel
``c'`` of group :math:`\gamma(c') = \lfloor c' G / C' \rfloor` sees only the input channels
of its group, :math:`y_{np}(c') = W_{c'} \cdot a^{(\gamma(c'))}_{np}` with
:math:`a^{(\gamma)}_{np}` the patch of the ``C/G`` channels of group :math:`\gamma`. The
per-example gradient of row :math:`W_{c'}` is :math:`g_{np}(c')\, a^{(\gamma(c'))}_{np}`,
which is not a Kronecker product of a ``C'``-vector and a ``C/G k^2``-vector (its second
factor changes with the group), so no single pair ``B (x) A`` -- the one Kron group per
parameter tensor that laplace-torch's ``Kron`` stores and this package's prior groups
count -- holds it exactly. The rule takes curvlinops' (and SINGD's) convention: the patch
is averaged over the groups,

.. math::
    \bar a_{np} = \frac1G \sum_{\gamma} a^{(\gamma)}_{np}
    \quad (\text{unfold of } \tfrac1G \textstyle\sum_\gamma x^{(\gamma)},
    \text{ padding and unfolding being linear and the same for every channel}),

and ``A`` is built from :math:`\bar a` as for an ungrouped convolution, ``B`` from the output
gradients of all ``C'`` channels (``C' x C'``, cross-group terms kept). For ``G = 1`` this
is the exact patch, and KFAC is exact where it always is (one example, one output position,
one backward pass's outer products summed); for ``G > 1`` it is exact there too when every
group sees the same input, and otherwise an approximation even for one example. The
alternative, one pair ``B_gamma (x) A_gamma`` per group (einconv's grouped KFC), is exact on
the diagonal group blocks but needs ``G`` Kron pairs per parameter, which laplace-torch's
``Kron``, the decompositions and the per-tensor priors here do not hold.

**Factors** (``P`` output positions, ``a`` the group-averaged patch, ``g`` the output
gradient of backward pass ``k``): expand :math:`A = \frac1P \sum_{n,p} a_{np} a_{np}^\top`,
:math:`B = \sum_{n,k,p} g_{nkp} g_{nkp}^\top`; reduce
:math:`A = \sum_n \hat a_n \hat a_n^\top` with :math:`\hat a_n = \frac1P \sum_p a_{np}`,
:math:`B = \sum_{n,k} (\sum_p g_{nkp})(\sum_p g_{nkp})^\top`, which is also the bias's exact
block. For a zero-padded, undilated, ungrouped convolution in expand these are ASDL's
``Conv2d`` factors, which the backend keeps using there (:func:`asdl_covers`).
"""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F

from laplace_equivariance.curvature.rules.base import (
    KroneckerRule,
    outer_sum,
    outer_sum_over_positions,
    reduces,
)

__all__ = ["Conv2dRule", "asdl_covers", "conv_padding", "conv_patches"]


def conv_padding(module: nn.Conv2d) -> tuple[int, int, int, int]:
    """The padding ``(left, right, top, bottom)`` that ``module`` applies to its input.

    An integer padding ``(p_1, p_2)`` is ``(p_2, p_2, p_1, p_1)``; ``'valid'`` none;
    ``'same'`` a total of :math:`d (k - 1)` per axis, ``total // 2`` before and the rest
    after (as ``nn.Conv2d`` and ``F.conv2d`` pad).
    """
    if isinstance(module.padding, str):
        if module.padding == "valid":
            return (0, 0, 0, 0)
        per_axis = []
        for dilation, size in zip(module.dilation, module.kernel_size, strict=True):
            total = dilation * (size - 1)
            per_axis.append((total // 2, total - total // 2))
        (top, bottom), (left, right) = per_axis
        return (left, right, top, bottom)
    rows, columns = module.padding
    return (columns, columns, rows, rows)


def conv_patches(module: nn.Conv2d, x: torch.Tensor) -> torch.Tensor:
    r"""The patches of ``x`` that multiply ``module``'s filter, averaged over its groups.

    ``(N, C/G k_1 k_2, P)`` in the weight's ``(c, i, j)`` order: the input averaged over the
    ``G`` channel groups, padded as ``module`` pads (:func:`conv_padding`, its
    ``padding_mode``), unfolded with its dilation and stride (see the module). Differentiable
    in ``x`` (no ``.data``), so the lengthscale derivative
    (:mod:`~laplace_equivariance.curvature.differentiable`) uses it too.

    Args:
        module: The convolution.
        x: Its input, ``(N, C, H, W)``.
    """
    n, channels = x.shape[:2]
    if module.groups > 1:
        x = x.reshape(n, module.groups, channels // module.groups, *x.shape[2:]).mean(dim=1)
    padding = conv_padding(module)
    if any(padding):
        mode = "constant" if module.padding_mode == "zeros" else module.padding_mode
        x = F.pad(x, padding, mode=mode)
    return F.unfold(x, module.kernel_size, dilation=module.dilation, stride=module.stride)


def asdl_covers(module: nn.Conv2d) -> bool:
    """Whether ASDL's own ``Conv2d`` rule gives ``module``'s factors (else :class:`Conv2dRule`).

    A zero-padded (integer padding), undilated, ungrouped ``nn.Conv2d`` in KFAC-expand.
    """
    return (
        module.padding_mode == "zeros"
        and not isinstance(module.padding, str)
        and module.groups == 1
        and tuple(module.dilation) == (1, 1)
        and not reduces(module)
    )


class Conv2dRule(KroneckerRule):
    """A stock ``nn.Conv2d``'s ``weight (C', C/G, k_1, k_2)`` and ``bias``: see the module.

    Used by :class:`~laplace_equivariance.EquivariantKFAC` for the convolutions that
    :func:`asdl_covers` leaves out (grouped, dilated, not zero-padded, ``'same'``/``'valid'``
    padding, or any stock convolution in KFAC-reduce); the bias's block is ``B``.
    """

    @staticmethod
    def preprocess_in_data(module, in_data, out_data):
        """The group-averaged patches, ``(N, C/G k_1 k_2, P)`` (:func:`conv_patches`)."""
        return conv_patches(module, in_data)

    @staticmethod
    def preprocess_out_grads(module, out_grads):
        """``(N, C', X', Y') -> (N, C', P)``."""
        return out_grads.flatten(start_dim=2)

    @staticmethod
    def cov_kron_A(module, in_data):
        r"""``A`` over the (group-averaged) patches.

        Expand :math:`\frac1P\sum_{n,p} a_{np} a_{np}^\top`, reduce
        :math:`\sum_n \bar a_n \bar a_n^\top` (the mean patch over positions).
        """
        if reduces(module):
            return outer_sum(in_data.mean(dim=2))
        positions = in_data.shape[2]
        return outer_sum(in_data.transpose(1, 2).flatten(end_dim=1)) / positions

    @staticmethod
    def cov_kron_B(module, out_grads):
        r"""``B``, also the bias's block.

        Expand :math:`\sum_{n,p} g_{np} g_{np}^\top`, reduce
        :math:`\sum_n (\sum_p g_{np})(\sum_p g_{np})^\top` (the bias's exact block).
        """
        if reduces(module):
            return outer_sum(out_grads.sum(dim=2))
        return outer_sum_over_positions(out_grads)
