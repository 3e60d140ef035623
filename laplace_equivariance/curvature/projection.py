r"""Kronecker factors of the S-layers as functions of the lengthscale (docs/curvature.md).

For an S-layer the weight is induced from anchor values through the RBF basis
:math:`\Phi(\omega) \in \mathbb{R}^{P \times M}`, :math:`\Phi_{pj} = \exp(-\omega^2 d_{pj})`,
:math:`d_{pj} = \lVert p - z_j \rVert^2`, and one of the anchor values' Kronecker factors is
a projection of a statistic ``S`` over the ``P`` grid positions:

- S-FC input map, ``A`` (``(C, M, M)``): :math:`A_c = \Phi^\top S_c \Phi`,
  :math:`S_c = \frac1C \sum_n x_{nc} x_{nc}^\top`;
- S-FC output map, ``B`` (``(M, M)``): :math:`B = \Phi^\top S \Phi`,
  :math:`S = \sum_{n,k,c'} g_{nkc'} g_{nkc'}^\top`;
- S-CONV, ``A`` (``(CM, CM)``): :math:`A = (I_C \otimes \Phi)^\top S\, (I_C \otimes \Phi)`,
  :math:`S = \frac1{XY} \sum_{n,p} a_{np} a_{np}^\top` over raw patches.

The rules of :mod:`laplace_equivariance.curvature.rules` keep ``S`` for bases whose lengthscale
is a hyperparameter, and :class:`~laplace_equivariance.EquivariantKFAC` collects it as
:class:`ProjectedFactor` records. :func:`reproject` rebuilds the decomposed curvature with
these factors evaluated at the bases' current ``omega``, differentiably: with
:math:`\dot\Phi = \partial\Phi/\partial\omega = -2\omega\, D \circ \Phi`,
:math:`\dot F = \dot\Phi^\top S \Phi + \Phi^\top S \dot\Phi`, and autograd differentiates the
factor's ``eigvalsh``; only eigenvalues enter the log-determinant, whose derivative
:math:`\dot\lambda_k = v_k^\top \dot F v_k` is well defined also for repeated eigenvalues.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import torch
from laplace.utils.matrix import KronDecomposed
from torch import nn

from laplace_equivariance.curvature.eigen import LazyEigenvectors, symmetric_eigvalsh
from laplace_equivariance.curvature.kron import BlockDiagonalKronDecomposed
from laplace_equivariance.layers.sparse import AnchorBasis

__all__ = ["ProjectedFactor", "anchor_basis", "project_factor", "reproject"]


def anchor_basis(module: nn.Module) -> AnchorBasis:
    """``module.basis``, the anchor basis of a module whose rule projects a factor on it.

    Raises:
        TypeError: If ``module.basis`` is not an :class:`~laplace_equivariance.layers.sparse.
            AnchorBasis`.
    """
    basis = getattr(module, "basis", None)
    if not isinstance(basis, AnchorBasis):
        raise TypeError(
            f"{type(module).__name__}'s rule projects a factor on its basis, but its basis is "
            f"{type(basis).__name__}, not an AnchorBasis."
        )
    return basis


def project_factor(statistic: torch.Tensor, phi: torch.Tensor) -> torch.Tensor:
    r"""Project a statistic over grid positions on a basis: :math:`\Phi^\top S \Phi`.

    Args:
        statistic: ``S``, either block-diagonal ``(n, P, P)`` (projected block by block), or
            dense ``(G P, G P)`` over ``G`` groups of the ``P`` positions (``G = 1`` for a
            plain ``P x P`` statistic; ``G = C`` channels for S-CONV's patches), projected
            with :math:`I_G \otimes \Phi`.
        phi: The basis ``(P, M)``.

    Returns:
        ``(n, M, M)`` or ``(G M, G M)``.
    """
    if statistic.ndim == 3:
        return phi.T @ statistic @ phi
    n_positions, n_anchors = phi.shape
    groups = statistic.shape[0] // n_positions
    grouped = statistic.view(groups, n_positions, groups, n_positions)
    projected = torch.einsum("apbq,pj,qk->ajbk", grouped, phi, phi)
    return projected.reshape(groups * n_anchors, groups * n_anchors)


@dataclass
class ProjectedFactor:
    """One Kronecker factor that is a projection of a fixed statistic on an anchor basis.

    Attributes:
        index: The parameter group (position in ``model.parameters()``, trainable only).
        side: 0 for ``B``, 1 for ``A``.
        basis: The anchor basis whose ``omega`` is a hyperparameter.
        statistic: ``S``, in laplace-torch's scaling (``A`` statistics divided by ``N``).
        fitted_lengthscale: ``omega`` when the statistic was computed (a detached copy).
    """

    index: int
    side: int
    basis: AnchorBasis
    statistic: torch.Tensor
    fitted_lengthscale: torch.Tensor

    def factor(self) -> torch.Tensor:
        """The factor at the basis's current ``omega`` (differentiable in ``omega``).

        Returns:
            :func:`project_factor` of the statistic on ``basis()``.
        """
        return project_factor(self.statistic, self.basis())


def reproject(
    decomposed: KronDecomposed, projected: Iterable[ProjectedFactor]
) -> BlockDiagonalKronDecomposed:
    """The decomposed curvature with the projected factors at their bases' current ``omega``.

    Every other factor keeps its eigendecomposition from ``decomposed``; every projected
    factor is recomputed and its eigenvalues computed under autograd (its eigenvectors only
    if something asks for them).

    Args:
        decomposed: The curvature as ``KronLaplace.fit`` decomposed it (``la.H``).
        projected: The factors to recompute.

    Returns:
        A :class:`BlockDiagonalKronDecomposed` with ``decomposed``'s deltas and damping.
    """
    vectors = LazyEigenvectors.wrap(decomposed.eigenvectors)
    values = [list(group) for group in decomposed.eigenvalues]
    for record in projected:
        factor = record.factor()
        vectors = vectors.replaced(record.index, record.side, factor)
        values[record.index][record.side] = symmetric_eigvalsh(factor).flatten()
    return BlockDiagonalKronDecomposed(vectors, values, decomposed.deltas, decomposed.damping)
