"""Decompositions of block-diagonal Kronecker factors, as a laplace-torch ``KronDecomposed``.

:meth:`~laplace_equivariance.curvature.kron.BlockDiagonalKron.decompose` returns a
:class:`BlockDiagonalKronDecomposed`: per parameter group the eigenvalues of its factors (a
block-diagonal factor's flattened, ``(n * b,)``, which is the spectrum of the dense factor)
and its eigenvectors (``(n, b, b)`` for a block-diagonal factor), possibly computed lazily.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
from laplace.utils.matrix import KronDecomposed
from laplace.utils.utils import block_diag, kron

from laplace_equivariance.curvature.eigen import LazyEigenvectors
from laplace_equivariance.curvature.outer_product import OuterProductJacobian

__all__ = ["BlockDiagonalKronDecomposed", "densify"]


def densify(factor: torch.Tensor) -> torch.Tensor:
    """A factor as a dense matrix: block-diagonal ``(n, b, b)``, diagonal ``(P,)`` or dense.

    Args:
        factor: A Kronecker factor in any of the three storages.

    Returns:
        The dense square matrix (only for tests and small sizes).
    """
    if factor.ndim == 3:
        return torch.block_diag(*factor)
    if factor.ndim == 1:
        return torch.diag(factor)
    return factor


class BlockDiagonalKronDecomposed(KronDecomposed):
    """:class:`laplace.utils.matrix.KronDecomposed` with block-diagonal eigenvector factors.

    A block-diagonal factor's eigenvectors are stored as ``(n, b, b)`` and its eigenvalues
    flattened, ``(n * b,)``. Adding prior precisions (``deltas``), scaling, log-determinants,
    products with Jacobians (the GLM predictive) and diagonals work as in the parent.
    ``eigenvectors`` may be a :class:`~laplace_equivariance.curvature.eigen.LazyEigenvectors`
    (as :meth:`BlockDiagonalKron.decompose` makes it): ``*``, ``+`` and ``logdet`` then never
    compute them, and everything derived by ``*`` and ``+`` shares them.

    Args:
        eigenvectors: Per parameter group, the eigenvector factors (or a lazy sequence).
        eigenvalues: Per parameter group, the eigenvalues of each factor (flattened).
        deltas: Prior precision per group (or one); zeros if None.
        damping: Use laplace-torch's damped combination of prior and curvature.
    """

    # laplace-torch 0.3 types both as one-tuples (curvature.fitted.kron_eigenvalues)
    eigenvectors: list[list[torch.Tensor]] | LazyEigenvectors  # type: ignore[assignment]
    eigenvalues: list[list[torch.Tensor]]  # type: ignore[assignment]

    def __init__(
        self,
        eigenvectors: list[list[torch.Tensor]] | LazyEigenvectors,
        eigenvalues: list[list[torch.Tensor]],
        deltas: torch.Tensor | None = None,
        damping: bool = False,
    ) -> None:
        self.eigenvectors = eigenvectors
        self.eigenvalues = eigenvalues
        first = eigenvalues[0][0]  # not eigenvectors[0][0], which would compute them
        if deltas is None:
            deltas = torch.zeros(len(eigenvalues), device=first.device, dtype=first.dtype)
        self._check_deltas(deltas)
        self.deltas = deltas
        self.damping = damping

    def __add__(self, deltas: torch.Tensor) -> BlockDiagonalKronDecomposed:
        """Add a prior precision per group (or one for all).

        Args:
            deltas: Scalar, length 1, or one per group.

        Returns:
            The sum.
        """
        self._check_deltas(deltas)
        return BlockDiagonalKronDecomposed(
            self.eigenvectors, self.eigenvalues, self.deltas + deltas, self.damping
        )

    __radd__ = __add__

    def __mul__(self, scalar: torch.Tensor | float) -> BlockDiagonalKronDecomposed:
        """Scale the represented matrix (the eigenvalues).

        Args:
            scalar: A python or 0-d torch scalar.

        Returns:
            The scaled decomposition (the eigenvectors shared, not computed).

        Raises:
            ValueError: If ``scalar`` is not a real number or a one-element tensor.
        """
        if (
            isinstance(scalar, torch.Tensor)
            and scalar.numel() != 1
            or not isinstance(scalar, (int, float, torch.Tensor))
        ):
            raise ValueError("Invalid argument, can only multiply Kron with scalar.")
        eigenvalues = [
            [pow(scalar, 1 / len(values)) * v for v in values] for values in self.eigenvalues
        ]
        return BlockDiagonalKronDecomposed(
            self.eigenvectors, eigenvalues, self.deltas, self.damping
        )

    __rmul__ = __mul__

    def _spectrum(self, values: list[torch.Tensor], delta: torch.Tensor, exponent: float):
        """``(eigenvalues + delta) ** exponent`` of one group, as laplace-torch defines it."""
        if len(values) == 1:
            return torch.pow(values[0] + delta, exponent)
        l1, l2 = values
        if self.damping:
            return torch.pow(torch.outer(l1 + delta.sqrt(), l2 + delta.sqrt()), exponent)
        return torch.pow(torch.outer(l1, l2) + delta, exponent)

    @staticmethod
    def _apply(Q: torch.Tensor, W: torch.Tensor, transpose: bool) -> torch.Tensor:
        """``Q @ W`` (or ``Q.T @ W``) along W's last dimension; ``Q`` dense or ``(n, b, b)``."""
        if Q.ndim == 2:
            return W @ (Q if transpose else Q.T)
        n, b, _ = Q.shape
        blocks = W.reshape(*W.shape[:-1], n, b)
        equation = "...nb,nbc->...nc" if transpose else "...nc,nbc->...nb"
        return torch.einsum(equation, blocks, Q).reshape(W.shape)

    def _rotate(
        self, vectors: list[torch.Tensor], values: list[torch.Tensor], W: torch.Tensor, transpose
    ) -> torch.Tensor:
        """``Q^T w`` (``transpose``) or ``Q w`` for each row ``w`` of ``W`` ``(rows, p)``.

        ``Q = Q_0 kron Q_1`` (``Q_0`` on the weight's leading dimension), or the one factor.
        """
        if len(vectors) == 1:
            return self._apply(vectors[0], W, transpose)
        block = W.reshape(-1, len(values[0]), len(values[1]))
        block = self._apply(vectors[1], block, transpose)
        block = self._apply(vectors[0], block.transpose(1, 2), transpose)
        return block.transpose(1, 2).reshape(W.shape)

    def _groups(self):
        """Per parameter group: its eigenvectors, eigenvalues and prior precision."""
        return zip(self.eigenvectors, self.eigenvalues, self.deltas, strict=True)

    def _bmm(self, W: torch.Tensor, exponent: float = -1) -> torch.Tensor:
        """``(self ** exponent) @ W`` for ``W`` of shape ``(batch, classes, params)``."""
        batch, classes, n_params = W.shape
        W = W.reshape(batch * classes, n_params)
        out, start = [], 0
        for vectors, values, delta in self._groups():
            spectrum = self._spectrum(values, delta, exponent).flatten()
            p = len(spectrum)
            rotated = self._rotate(vectors, values, W[:, start : start + p], transpose=True)
            out.append(self._rotate(vectors, values, rotated * spectrum, transpose=False))
            start += p
        return torch.cat(out, dim=1).reshape(batch, classes, n_params)

    def inv_square_form(self, W: torch.Tensor | Sequence[torch.Tensor]) -> torch.Tensor:
        r"""``W Sigma W^T`` for each batch entry, ``Sigma = self ** -1``.

        The GLM's functional (co)variance, ``(batch, classes, params) -> (batch, classes,
        classes)``; ``W`` may also come split by parameter group, a sequence of ``(batch,
        classes, group size)`` tensors (the Jacobians per parameter tensor, never
        concatenated) or :class:`OuterProductJacobian` (:meth:`_outer_product_form`).

        laplace-torch's ``KronDecomposed`` computes ``Sigma W^T`` (four rotations of every
        row) and multiplies. With :math:`\Sigma = Q S^{-1} Q^\top` per group, here
        :math:`W \Sigma W^\top = \sum_g R_g R_g^\top` with :math:`R_g = W_g Q_g S_g^{-1/2}`:
        two rotations per row, no ``(batch, classes, params)`` result, one group at a time.
        """
        sizes = [math.prod(len(v) for v in values) for values in self.eigenvalues]
        if isinstance(W, torch.Tensor) and W.shape[-1] != sum(sizes):
            raise ValueError(f"W has {W.shape[-1]} parameters; the approximation has {sum(sizes)}.")
        parts = W.split(sizes, dim=-1) if isinstance(W, torch.Tensor) else list(W)
        given = [p.numel if isinstance(p, OuterProductJacobian) else p.shape[-1] for p in parts]
        if given != sizes:
            raise ValueError(
                f"W comes in groups of {given} parameters; the approximation's: {sizes}."
            )
        first = parts[0].left if isinstance(parts[0], OuterProductJacobian) else parts[0]
        batch, classes = first.shape[:2]
        out = first.new_zeros(batch, classes, classes)
        for part, (vectors, values, delta) in zip(parts, self._groups(), strict=True):
            if isinstance(part, OuterProductJacobian):
                if len(vectors) == 2 and vectors[0].ndim == 2 and vectors[1].ndim == 3:
                    out = out + self._outer_product_form(part, vectors, values, delta)
                    continue
                part = part.dense()
            root = self._spectrum(values, delta, -0.5).flatten()
            rows = part.reshape(batch * classes, len(root))
            rotated = self._rotate(vectors, values, rows, transpose=True) * root
            rotated = rotated.reshape(batch, classes, len(root))
            out = out.baddbmm(rotated, rotated.transpose(1, 2))
        return out

    def _outer_product_form(
        self,
        J: OuterProductJacobian,
        vectors: list[torch.Tensor],
        values: list[torch.Tensor],
        delta: torch.Tensor,
    ) -> torch.Tensor:
        r"""``J Sigma_g J^T`` of one group whose Jacobians are outer products, ``(N, K, K)``.

        With ``Q_B`` dense ``(B, B)``, ``Q_A`` block-diagonal ``(M, W, W)`` and the spectrum
        :math:`S[i, m, t]` of the group, the rotated Jacobian is
        :math:`(U^\top Q_B)[k, i, m]\,(V Q_A)[m, t]`, so

        .. math::

            (J \Sigma J^\top)_{kl} = \sum_{i, m} U'_{k i m} U'_{l i m}
            \sum_t \frac{V'^2_{m t}}{S_{i m t}},

        at ``N (K B^2 M + M W^2 + B M W + K^2 B M)`` multiply-adds instead of the
        ``N K B M W (B + W)`` of rotating the formed Jacobian.
        """
        q_b, q_a = vectors
        n_b, n_m, n_w = q_b.shape[0], q_a.shape[0], q_a.shape[1]
        left = torch.einsum("nkbm,bi->nkim", J.left, q_b)
        right = torch.einsum("nmw,mwt->nmt", J.right, q_a)
        inverse = self._spectrum(values, delta, -1).reshape(n_b, n_m, n_w)
        weights = torch.einsum("nmt,imt->nim", right.square(), inverse)
        return torch.einsum("nkim,nlim,nim->nkl", left, left, weights)

    def diag(self, exponent: float = 1) -> torch.Tensor:
        """Diagonal of ``self ** exponent``, computed block by block.

        Args:
            exponent: The power.

        Returns:
            The diagonal, one entry per parameter.
        """
        diags = []
        for vectors, values, delta in self._groups():
            spectrum = self._spectrum(values, delta, exponent)
            squares = [v.pow(2) for v in vectors]  # diag(Q L Q^T) = (Q * Q) @ L
            if len(values) == 1:
                diags.append(self._apply(squares[0], spectrum[None], transpose=False)[0])
            else:
                left = self._apply(squares[0], spectrum.T, transpose=False).T
                diags.append(self._apply(squares[1], left, transpose=False).flatten())
        return torch.cat(diags)

    def to_matrix(self, exponent: float = 1) -> torch.Tensor:
        """The dense matrix ``self ** exponent`` (tests only).

        Args:
            exponent: The power.

        Returns:
            A dense block-diagonal matrix.
        """
        blocks = []
        for vectors, values, delta in self._groups():
            spectrum = self._spectrum(values, delta, exponent).flatten()
            dense = [densify(v) for v in vectors]
            Q = dense[0] if len(dense) == 1 else kron(dense[0], dense[1])
            blocks.append(Q @ torch.diag(spectrum) @ Q.T)
        return block_diag(blocks)
