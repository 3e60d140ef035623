r"""KFAC rules of the sparsified layers (paper Sec. 4.2): S-FC's maps and S-CONV.

The factored and convolution rules with the basis ``phi`` applied: ``x_c`` replaced by
``phi^T x_c`` (input map), ``g(c', .)`` by ``phi^T g(c', .)`` (output map), patches
projected on the basis (S-CONV). The anchor positions and lengthscale get exact GGN
blocks from their per-example gradients in closed form (:func:`basis_gradients`). With
the lengthscale a hyperparameter the rules also keep the statistic the basis projects
(``factor = phi^T S phi``) for :mod:`laplace_equivariance.curvature.projection`.
"""

from __future__ import annotations

import torch

from laplace_equivariance.curvature.rules.base import (
    outer_sum,
    outer_sum_over_positions,
    reduces,
)
from laplace_equivariance.curvature.rules.conv import CircularConv2dRule, circular_patches
from laplace_equivariance.curvature.rules.factored import (
    FactoredInputMapRule,
    FactoredOutputMapRule,
)
from laplace_equivariance.layers.sparse import AnchorBasis


def on_basis(module, maps: torch.Tensor) -> torch.Tensor:
    r"""Maps ``(N, C, *grid)`` projected on ``module``'s basis: ``(N, C, M)``.

    :math:`\phi^\top m_c` for every example and channel, the basis taken as a constant.
    """
    with torch.no_grad():
        phi = module.basis()
    return torch.einsum("ncp,pj->ncj", maps.flatten(start_dim=2), phi)


def basis_gradients(
    module, position_rows: torch.Tensor, anchor_rows: torch.Tensor
) -> dict[str, torch.Tensor]:
    r"""Per-example gradients of the anchor positions and lengthscale, in closed form.

    Every rule's per-example gradient with respect to the basis is a sum of outer products,
    :math:`\partial \ell_n / \partial \phi = \sum_r a_{nr} b_{nr}^\top` (``a`` over the
    grid's ``P`` positions, ``b`` over the ``M`` anchors). Through
    :meth:`AnchorBasis.derivatives` (:math:`\dot\phi^{\omega}`, :math:`\dot\phi^{z_d}`):

    .. math::
        \frac{\partial \ell_n}{\partial \omega} = \sum_{r,j}
        (a_{nr}^\top \dot\phi^{\omega})_j\, b_{nrj}, \qquad
        \frac{\partial \ell_n}{\partial z_{jd}} = \sum_r
        (a_{nr}^\top \dot\phi^{z_d})_j\, b_{nrj},

    three matrix products, without forming the ``(N, P, M)`` gradient. Only ``z``/``omega``
    that are parameters (not buffers) are returned.

    Args:
        module: A sparse module with a ``basis`` (:class:`AnchorBasis`).
        position_rows: ``a``, shape ``(N, R, P)``.
        anchor_rows: ``b``, shape ``(N, R, M)``.

    Returns:
        ``{"basis.position_offsets": (N, 2M), "basis.lengthscale": (N, 1)}`` for those
        that are parameters.
    """
    basis: AnchorBasis = module.basis
    # Parameters, not buffers; ASDL switches requires_grad off during its backward passes.
    learned = {
        n for n in ("position_offsets", "lengthscale") if basis._parameters.get(n) is not None
    }
    if not learned:
        return {}
    # Under ASDL's hooks grad mode is off; under autograd (curvature/differentiable.py) the
    # position blocks keep their dependence on a hyperparameter omega.
    d_omega, d_positions = basis.derivatives()
    grads = {}
    if "position_offsets" in learned:
        n, r, _ = position_rows.shape
        projected = (position_rows @ d_positions.flatten(start_dim=1)).view(n, r, -1, 2)
        grads["basis.position_offsets"] = (projected * anchor_rows[..., None]).sum(1).flatten(1)
    if "lengthscale" in learned:
        projected = position_rows @ d_omega
        grads["basis.lengthscale"] = (projected * anchor_rows).sum((1, 2))[:, None]
    return grads


class SparseFactoredInputMapRule(FactoredInputMapRule):
    """S-FC's ``u2 (C', C, M2)``: F-FC's rule on inputs projected on the basis (App. C.2)."""

    projected_side = 1

    @staticmethod
    def unprojected_statistic(module, in_data: torch.Tensor) -> torch.Tensor:
        r"""F-FC's ``A`` of the raw input, ``S`` of shape ``(C, XY, XY)``.

        :math:`S_c = \frac1C \sum_n x_{nc} x_{nc}^\top`; the rule's ``A`` is
        :math:`\phi^\top S_c \phi` per block.
        """
        rows = FactoredInputMapRule.a_rows(in_data.flatten(start_dim=2))
        return rows.mT @ rows

    @staticmethod
    def preprocess_in_data(module, in_data, out_data):
        r""":math:`\tilde x_c = \phi^\top x_c`, ``(N, C, M2)``."""
        return on_basis(module, in_data)

    @staticmethod
    def extra_blocks(module, in_data, out_grads) -> dict:
        r"""Positions and lengthscale through ``theta2 = u phi^T``.

        :math:`\partial\ell_n/\partial\phi = \sum_c x_{nc} (\sum_{c'} g_{nc'c} u_{c'c})^\top`.
        """
        anchor_rows = torch.einsum("noc,ocj->ncj", out_grads, module.weight.detach())
        return basis_gradients(module, in_data.flatten(start_dim=2), anchor_rows)


class SparseFactoredOutputMapRule(FactoredOutputMapRule):
    """S-FC's ``u1 (M1, C', C)``: F-FC's rule with output gradients projected on the basis."""

    projected_side = 0

    @staticmethod
    def unprojected_statistic(module, out_grads: torch.Tensor) -> torch.Tensor:
        r"""F-FC's ``B`` of the raw output gradient, ``S`` of shape ``(X'Y', X'Y')``.

        :math:`S = \sum_{n,c'} g_{nc'} g_{nc'}^\top` (one backward pass); the rule's ``B`` is
        :math:`\phi^\top S \phi`.
        """
        return FactoredOutputMapRule.cov_kron_B(module, out_grads.flatten(start_dim=2))

    @staticmethod
    def preprocess_out_grads(module, out_grads):
        r""":math:`\tilde g_{c'} = \phi^\top g_{c'}`, ``(N, C', M1)``."""
        return on_basis(module, out_grads)

    @staticmethod
    def extra_blocks(module, in_data, out_grads) -> dict:
        r"""Biases as F-FC; positions and lengthscale through ``theta1 = phi u``.

        :math:`\partial\ell_n/\partial\phi = \sum_{c'} g_{nc'} (\sum_c h_{nc'c}
        u_{\cdot c'c})^\top`.
        """
        blocks = FactoredOutputMapRule.extra_blocks(module, in_data, out_grads)
        anchor_rows = torch.einsum("noc,joc->noj", in_data, module.weight.detach())
        blocks.update(basis_gradients(module, out_grads.flatten(start_dim=2), anchor_rows))
        return blocks


class SparseCircularConv2dRule(CircularConv2dRule):
    """S-CONV's ``u (C', C, M)``: the convolution rule with patches projected on the basis."""

    projected_side = 1

    @staticmethod
    def unprojected_statistic(module, in_data: torch.Tensor) -> torch.Tensor:
        r"""``A`` of the raw patches, ``S`` of shape ``(C S^2, C S^2)``.

        :math:`S = \frac1{XY}\sum_{n,p} a_{np} a_{np}^\top` (reduce: :math:`\sum_n \bar a_n
        \bar a_n^\top`); the rule's ``A`` is
        :math:`(I_C \otimes \phi)^\top S\, (I_C \otimes \phi)`.
        """
        return CircularConv2dRule.cov_kron_A(module, in_data)

    @staticmethod
    def preprocess_in_data(module, in_data, out_data):
        """Patches projected on the basis, ``(N, C * M, positions)``."""
        with torch.no_grad():
            phi = module.basis()
        patches = circular_patches(in_data, module.kernel_size)
        n, _, positions = patches.shape
        patches = patches.view(n, module.in_channels, -1, positions)
        return torch.einsum("ncsp,sj->ncjp", patches, phi).reshape(n, -1, positions)

    @staticmethod
    def cov_kron_A(module, in_data):
        r"""``A`` of the projected patches.

        Expand :math:`\frac1{XY}\sum_{n,p} \tilde a_{np} \tilde a_{np}^\top`, reduce the
        same of the mean projected patch.
        """
        if reduces(module):
            return outer_sum(in_data.mean(dim=2))
        return outer_sum_over_positions(in_data) / in_data.shape[2]

    @staticmethod
    def extra_blocks(module, in_data, out_grads) -> dict:
        r"""Positions and lengthscale through the filter ``u phi^T``.

        :math:`\partial\ell_n/\partial\phi = \sum_{c',c} w_{nc'c} u_{c'c}^\top`, ``w`` the
        per-example filter gradient over the ``S^2`` taps.
        """
        patches = circular_patches(in_data, module.kernel_size)
        filter_grads = torch.einsum("nop,nkp->nok", out_grads.flatten(start_dim=2), patches)
        n = filter_grads.shape[0]
        u = module.weight.detach().flatten(end_dim=1)
        taps = filter_grads.reshape(n, u.shape[0], -1)
        return basis_gradients(module, taps, u.expand(n, *u.shape))
