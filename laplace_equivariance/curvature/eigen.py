r"""Eigendecompositions of Kronecker factors: robust, and with eigenvectors only on demand.

A fitted Kron Laplace approximation is used in two ways. The marginal likelihood and its
gradients in the prior precisions (marglik training, :mod:`laplace_equivariance.diagnostics`)
need only the eigenvalues of every factor: for ``B (x) A`` with eigenvalues
:math:`\lambda^B_i, \lambda^A_j`, :math:`\log\det(B \otimes A + \delta I) = \sum_{ij}
\log(\lambda^B_i \lambda^A_j + \delta)`. The predictive, sampling and the diagonal also need
the eigenvectors. LAPACK computes eigenvalues alone in :math:`\tfrac43 d^3` flops (the
tridiagonal reduction); the eigenvectors add the divide-and-conquer vectors and the
back-transformation (their cost beside the eigenvalues': ``benchmarks/fit_over_epoch.py``). So a
decomposition computes eigenvalues at once and the eigenvectors of a factor the first time
something asks for them (:class:`LazyEigenvectors`), once for every object derived from it by
``*`` and ``+``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch

__all__ = ["LazyEigenvectors", "symmetric_eigh", "symmetric_eigvalsh"]


def _with_unit_jitter(decomposition: Callable, factor: torch.Tensor):
    """``decomposition(factor)``, or, if LAPACK does not converge, of ``factor + I``.

    Returns:
        ``(result, shift)``: the shift (0 or 1) to subtract from the eigenvalues.

    Raises:
        FloatingPointError: If it fails even with the jitter (e.g. NaN entries).
    """
    try:
        return decomposition(factor), 0.0
    except torch.linalg.LinAlgError:
        eye = torch.eye(factor.shape[-1], dtype=factor.dtype, device=factor.device)
        try:
            return decomposition(factor + eye), 1.0
        except torch.linalg.LinAlgError as error:
            raise FloatingPointError(
                f"Eigendecomposition of a Kronecker factor of shape {tuple(factor.shape)} failed "
                "even with unit jitter; check it for NaN or inf entries."
            ) from error


def symmetric_eigh(factor: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Eigendecompose a dense ``(d, d)`` or batched ``(n, b, b)`` PSD factor robustly.

    As laplace-torch's ``symeig``: if ``eigh`` does not converge, retry on ``factor + I`` and
    subtract 1; eigenvalues are clamped at 0.

    Args:
        factor: Symmetric positive semi-definite matrix or batch of matrices.

    Returns:
        ``(eigenvalues, eigenvectors)`` with the batch shape of ``factor``.

    Raises:
        FloatingPointError: If ``eigh`` fails even with the jitter (e.g. NaN entries).
    """
    (values, vectors), shift = _with_unit_jitter(torch.linalg.eigh, factor)
    return torch.nan_to_num((values - shift).clamp(min=0.0)), torch.nan_to_num(vectors)


def symmetric_eigvalsh(factor: torch.Tensor) -> torch.Tensor:
    """The eigenvalues of :func:`symmetric_eigh`, without computing eigenvectors.

    Differentiable as ``torch.linalg.eigvalsh`` (whose backward computes the eigenvectors).

    Args:
        factor: Symmetric positive semi-definite ``(d, d)`` or ``(n, b, b)``.

    Returns:
        Eigenvalues ``(d,)`` or ``(n, b)``, ascending, clamped at 0.

    Raises:
        FloatingPointError: If LAPACK fails even with unit jitter (e.g. NaN entries).
    """
    values, shift = _with_unit_jitter(torch.linalg.eigvalsh, factor)
    return torch.nan_to_num((values - shift).clamp(min=0.0))


class _FactorEigenvectors:
    """The eigenvectors of one factor (identity for a diagonal one), computed once on call.

    Raises, on call, if the factor was modified in place after the decomposition was made:
    the eigenvalues already handed out belong to the old factor.
    """

    def __init__(self, factor: torch.Tensor | None = None, vectors: torch.Tensor | None = None):
        self.factor = factor
        self.version = None if factor is None else factor._version
        self.vectors = vectors

    def __call__(self) -> torch.Tensor:
        if self.vectors is None:
            if self.factor._version != self.version:
                raise RuntimeError(
                    "A Kronecker factor was modified in place after it was decomposed; its "
                    "eigenvalues are stale. Decompose again (la.fit, or la.H_facs.decompose())."
                )
            if self.factor.ndim == 1:
                n = len(self.factor)
                self.vectors = torch.eye(n, dtype=self.factor.dtype, device=self.factor.device)
            else:
                self.vectors = symmetric_eigh(self.factor)[1]
            self.factor = None
        return self.vectors


class LazyEigenvectors(Sequence):
    """The eigenvector factors of a Kron decomposition, each computed on first access.

    Indexing by parameter group gives that group's list of eigenvector factors (``(d, d)``
    dense, ``(n, b, b)`` for a block-diagonal factor, the identity for a diagonal one), as
    laplace-torch's ``KronDecomposed.eigenvectors`` holds them. The first access to a group
    runs ``eigh`` on its factors; later accesses, from this object or any decomposition that
    shares it, reuse the result.

    Args:
        kfacs: The factors, one list per parameter group (``Kron.kfacs``).
    """

    def __init__(self, kfacs: Sequence[Sequence[torch.Tensor]]):
        self._entries = [[_FactorEigenvectors(factor) for factor in group] for group in kfacs]

    @classmethod
    def _of_entries(cls, entries: list[list[_FactorEigenvectors]]) -> LazyEigenvectors:
        """A sequence over given entries (shared with their other owners, not copied)."""
        lazy = cls.__new__(cls)
        lazy._entries = entries
        return lazy

    @classmethod
    def wrap(cls, eigenvectors: Sequence[Sequence[torch.Tensor]]) -> LazyEigenvectors:
        """``eigenvectors`` itself if lazy, else a lazy view of eigenvectors already computed.

        Args:
            eigenvectors: ``KronDecomposed.eigenvectors`` of any decomposition.

        Returns:
            A :class:`LazyEigenvectors` with the same groups.
        """
        if isinstance(eigenvectors, LazyEigenvectors):
            return eigenvectors
        return cls._of_entries(
            [[_FactorEigenvectors(vectors=v) for v in group] for group in eigenvectors]
        )

    def replaced(self, group: int, side: int, factor: torch.Tensor) -> LazyEigenvectors:
        """A copy in which the factor ``side`` of ``group`` is ``factor`` (decomposed lazily).

        Args:
            group: Parameter group index.
            side: Factor index within the group (0 for ``B``, 1 for ``A``).
            factor: The new factor.

        Returns:
            A new :class:`LazyEigenvectors` sharing every other entry with this one.
        """
        entries = [list(group_entries) for group_entries in self._entries]
        entries[group][side] = _FactorEigenvectors(factor)
        return self._of_entries(entries)

    def __getitem__(self, group: int) -> list[torch.Tensor]:
        return [entry() for entry in self._entries[group]]

    def __len__(self) -> int:
        return len(self._entries)

    def computed(self) -> bool:
        """Whether every factor's eigenvectors have been computed."""
        return all(entry.vectors is not None for group in self._entries for entry in group)
