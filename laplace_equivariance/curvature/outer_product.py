"""Per-example Jacobians of a weight that are outer products, kept as their two factors.

:meth:`~laplace_equivariance.curvature.kron.BlockDiagonalKronDecomposed.inv_square_form`
takes them for F-FC's map weights
(:meth:`~laplace_equivariance.curvature.jacobians.ChunkedJacobians.parameter_jacobians` with
``outer_products=True``) without ever forming the Jacobians.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import torch

__all__ = ["OuterProductJacobian"]


class OuterProductJacobian(NamedTuple):
    r"""Per-example Jacobians of a weight ``(B, M, W)`` that are outer products, never formed.

    :math:`J_{nk}[b, m, w] = U_{nk}[b, m]\, V_n[m, w]`: F-FC's input map ``theta2 (C', C, XY)``
    has ``U`` the output gradient with respect to ``h (C', C)`` and ``V`` the input ``(C,
    XY)``; its output map ``theta1 (X'Y', C', C)`` has ``U`` the output gradient ``(X'Y',
    C')`` and ``V = h``. ``B`` is the leading dimension (the Kronecker factor ``B``), ``M``
    the blocks of the block-diagonal ``A`` and ``W`` their size.
    """

    left: torch.Tensor
    """``U``, ``(N, K, B, M)``."""
    right: torch.Tensor
    """``V``, ``(N, M, W)``."""

    @property
    def numel(self) -> int:
        """Parameters of the weight, ``B M W``."""
        return math.prod(self.left.shape[2:]) * self.right.shape[-1]

    def dense(self) -> torch.Tensor:
        """The Jacobians ``(N, K, B M W)`` (tests and unstructured factors)."""
        return (self.left[..., None] * self.right[:, None, None]).flatten(start_dim=2)
