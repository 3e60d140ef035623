r"""KFAC rule of FC (paper Eq. 1): a linear map of the flattened maps.

``A = sum_n x x^T`` over ``CXY`` and ``B = sum_{n,k} g g^T`` over ``C'X'Y'``: exact for
one example, since no weight is shared (docs/curvature.md).
"""

from __future__ import annotations

from laplace_equivariance.curvature.rules.base import KroneckerRule, outer_sum


class FullyConnected2dRule(KroneckerRule):
    """FC (Eq. 1): a linear map of the flattened maps; exact for one example."""

    @staticmethod
    def preprocess_in_data(module, in_data, out_data):
        """``(N, C, X, Y) -> (N, CXY)``."""
        return in_data.flatten(start_dim=1)

    @staticmethod
    def preprocess_out_grads(module, out_grads):
        """``(N, C', X', Y') -> (N, C'X'Y')``."""
        return out_grads.flatten(start_dim=1)

    @staticmethod
    def cov_kron_A(module, in_data):
        r""":math:`\sum_n x_n x_n^\top`."""
        return outer_sum(in_data)

    @staticmethod
    def cov_kron_B(module, out_grads):
        r""":math:`\sum_n g_n g_n^\top`; also the bias's exact block."""
        return outer_sum(out_grads)
