r"""The rows of a Kronecker factor of rank below its size, for its eigenvalues from a Gram matrix.

F-FC's and S-FC's ``A`` factors are sums of outer products of one row per example and block
(:math:`A_c = \sum_n r_{nc} r_{nc}^\top`, paper App. C.1). While a fit has seen fewer examples
``m`` than the block size ``b`` (Table 1's second layer: ``b = 32 \cdot 32 = 1024`` positions,
``m = 512`` examples), the block has rank at most ``m`` and its nonzero eigenvalues are those of
the ``m x m`` Gram matrix of the rows:

.. math::
    A_c = R_c^\top R_c,\quad R_c \in \mathbb R^{m \times b}: \qquad
    \operatorname{spec}(A_c) = \operatorname{spec}(R_c R_c^\top) \cup \{0\}^{b - m},

because :math:`R^\top R v = \lambda v,\ \lambda \neq 0 \Rightarrow R R^\top (R v) = \lambda
(R v)` with :math:`R v \neq 0` (and the reverse with :math:`R^\top`). LAPACK's eigenvalues
cost :math:`\tfrac43 m^3` instead of :math:`\tfrac43 b^3` flops, plus :math:`m^2 b` for the
Gram matrix: eight times less for ``m = b / 2``. The eigenvectors, which only the predictive
needs, still come from the factor itself (:mod:`laplace_equivariance.curvature.eigen`).

:class:`FactorRows` holds the rows of one factor together with the factor's version
(``Tensor._version``) when they were known to describe it: a factor modified in place by
anything else (laplace-torch's rescaling for ``fit(override=False)``) no longer matches its
rows, and its eigenvalues then come from the factor. ``torch.distributed`` collectives write
tensors without bumping their versions: after summing the factors over ranks the backend
drops the rows (:meth:`~laplace_equivariance.curvature.kron.BlockDiagonalKron.without_rows`).

While the rows are fewer than the block size, the factor itself need not exist: a fit's
marginal likelihood reads only its eigenvalues. A rule then leaves a :func:`pending_factor`
(no memory of its own, ``(n_blocks, b, b)`` in shape only) beside the rows, and the dense
factor is formed (:meth:`FactorRows.dense`) when something reads it: the eigenvectors for the
predictive, laplace-torch's code through ``Kron.kfacs``, a sum whose rows reach the block size.
For Table 1's second F-FC layer (ten ``1024 x 1024`` blocks, 128 rows a batch) that is
``2 C m b^2`` flops and ``4 C b^2`` bytes a batch that a fit no longer spends.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

__all__ = ["FactorRows", "is_pending", "pending_factor"]

PENDING_MARK = "_laplace_equivariance_pending_factor"
"""Attribute that :func:`pending_factor` sets on the tensors it makes (:func:`is_pending`)."""


def pending_factor(n_blocks: int, size: int, like: torch.Tensor) -> torch.Tensor:
    """A block-diagonal factor ``(n_blocks, size, size)`` that only its rows describe.

    A stride-0 view of one zero on ``like``'s device and dtype, marked with
    :data:`PENDING_MARK`: it holds no memory, and an in-place write to it raises (so its
    ``_version`` never changes and the rows kept beside it stay valid). Its entries are not the
    factor's; read the factor through :meth:`FactorRows.dense`.

    Args:
        n_blocks: Diagonal blocks.
        size: Each block's size ``b``.
        like: A tensor of the factor's device and dtype (its rows).
    """
    factor = like.new_zeros(()).expand(n_blocks, size, size)
    setattr(factor, PENDING_MARK, True)
    return factor


def is_pending(factor: torch.Tensor) -> bool:
    """Whether ``factor`` is a :func:`pending_factor` (read from its mark, not its entries)."""
    return getattr(factor, PENDING_MARK, False)


@dataclass(frozen=True)
class FactorRows:
    r"""Rows ``R`` with ``factor = R^T R`` (per block), valid while ``factor`` is unchanged.

    Args:
        chunks: Row blocks, each ``(n_blocks, m_i, b)`` for a block-diagonal factor
            ``(n_blocks, b, b)``; the factor is :math:`\sum_i R_i^\top R_i` per block. No
            chunks: the factor is zero.
        version: ``factor._version`` at which the rows describe it.
    """

    chunks: tuple[torch.Tensor, ...]
    version: int

    @classmethod
    def of(cls, rows: torch.Tensor, factor: torch.Tensor) -> FactorRows | None:
        """The rows of ``factor`` if they are fewer than its block size, else None.

        Args:
            rows: ``(n_blocks, m, b)`` with ``factor == rows.mT @ rows``.
            factor: The block-diagonal factor ``(n_blocks, b, b)`` they describe now.

        Raises:
            ValueError: If the shapes do not match.
        """
        if factor.ndim != 3 or rows.ndim != 3 or rows.shape[::2] != factor.shape[:2]:
            raise ValueError(
                f"Rows of shape {tuple(rows.shape)} do not describe a block-diagonal factor of "
                f"shape {tuple(factor.shape)}: expected (n_blocks, m, b) for (n_blocks, b, b)."
            )
        return cls((rows,), factor._version).within(factor)

    @property
    def count(self) -> int:
        """``m``, the rows per block."""
        return sum(chunk.shape[1] for chunk in self.chunks)

    def within(self, factor: torch.Tensor) -> FactorRows | None:
        """These rows, now describing ``factor``, if fewer than its block size; else None."""
        if self.count >= factor.shape[-1]:
            return None
        return FactorRows(self.chunks, factor._version)

    def describes(self, factor: torch.Tensor) -> bool:
        """Whether ``factor`` is unchanged since these rows were taken for it."""
        return factor._version == self.version

    def scaled(self, scale: float | torch.Tensor) -> FactorRows:
        """The rows of the factor times ``scale >= 0``: rows times ``sqrt(scale)``.

        The version is the old one: :meth:`within` sets that of the scaled factor.
        """
        return FactorRows(tuple(chunk * scale**0.5 for chunk in self.chunks), self.version)

    def __add__(self, other: FactorRows) -> FactorRows:
        """The rows of the sum of two factors: both sets (version to be set by :meth:`within`)."""
        return FactorRows(self.chunks + other.chunks, self.version)

    def gram(self, factor: torch.Tensor) -> torch.Tensor:
        r"""The Gram matrices :math:`R R^\top` of every block's rows, ``(n_blocks, m, m)``.

        Args:
            factor: The ``(n_blocks, b, b)`` factor these rows describe.
        """
        if not self.chunks:
            return factor.new_zeros(factor.shape[0], 0, 0)
        rows = torch.cat(self.chunks, dim=1)
        return rows @ rows.mT

    def dense(self, factor: torch.Tensor) -> torch.Tensor:
        r"""The factor these rows describe, :math:`\sum_i R_i^\top R_i` per block, ``(n, b, b)``.

        Args:
            factor: The factor (or :func:`pending_factor`) these rows describe, for its shape,
                device and dtype.
        """
        total = factor.new_zeros(factor.shape)
        for chunk in self.chunks:
            total.baddbmm_(chunk.mT, chunk)
        return total

    def diagonal(self, factor: torch.Tensor) -> torch.Tensor:
        """Every block's diagonal, ``(n_blocks, b)``: the rows' column sums of squares."""
        total = factor.new_zeros(factor.shape[:2])
        for chunk in self.chunks:
            total += chunk.square().sum(dim=1)
        return total

    def padded(self, factor: torch.Tensor, gram_eigenvalues: torch.Tensor) -> torch.Tensor:
        """Every block's eigenvalues from those of its Gram matrix: ``b - m`` zeros first.

        Args:
            factor: The ``(n_blocks, b, b)`` factor these rows describe.
            gram_eigenvalues: ``(n_blocks, m)``, ascending, of :meth:`gram`.

        Returns:
            ``(n_blocks, b)``, ascending.
        """
        zeros = factor.new_zeros(factor.shape[0], factor.shape[1] - self.count)
        return torch.cat([zeros, gram_eigenvalues], dim=1)
