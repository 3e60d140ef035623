r"""Kronecker factors with block-diagonal second factors, as laplace-torch ``Kron`` classes.

laplace-torch's :class:`laplace.utils.matrix.Kron` holds, per parameter tensor, either one
dense ``P x P`` block or two factors ``[B, A]`` (each dense 2-D or diagonal 1-D) whose
Kronecker product ``B (x) A`` approximates the GGN block of the parameter flattened in
row-major order (``B`` on the leading dimension, ``A`` on the rest).

The factored layers' ``A`` factors are block-diagonal (paper App. C.1): for F-FC's ``theta2``
of shape ``(C', C, XY)``, ``A = blockdiag_c(A_c)`` with ``C`` blocks of ``XY x XY``. Here such a
factor is stored as a 3-D tensor ``(n_blocks, b, b)``, decomposed with batched calls (each a
run of its blocks), and applied block by block; the dense ``n_blocks * b`` square matrix is
never built (except by ``to_matrix``, which is for tests). The eigenvalues of a
block-diagonal factor are stored flattened, ``(n_blocks * b,)``, which is exactly the
spectrum of the dense factor, so laplace-torch's own ``logdet`` applies unchanged. While a
fit has seen fewer examples than a block's size, the block's eigenvalues come from the Gram
matrix of its rows (:mod:`laplace_equivariance.curvature.factor_rows`), and the factor itself
is formed only when something reads it (a pending factor: sums and scalings work on the rows).
"""

from __future__ import annotations

import functools
from collections.abc import Iterator

import torch
from laplace.utils.matrix import Kron, KronDecomposed
from laplace.utils.utils import block_diag, kron

from laplace_equivariance.curvature.eigen import LazyEigenvectors, symmetric_eigvalsh_all
from laplace_equivariance.curvature.factor_rows import FactorRows, is_pending
from laplace_equivariance.curvature.fitted import KronFactors, kron_factors
from laplace_equivariance.curvature.kron_decomposed import BlockDiagonalKronDecomposed, densify
from laplace_equivariance.curvature.outer_product import OuterProductJacobian

__all__ = [
    "BlockDiagonalKron",
    "BlockDiagonalKronDecomposed",
    "OuterProductJacobian",
    "densify",
    "zero_factor",
]


ZERO_FACTOR_MARK = "_laplace_equivariance_zero_factor"
"""Attribute that :func:`zero_factor` sets on the tensors it makes (:func:`is_zero_start`)."""


def zero_factor(*shape: int, zero: torch.Tensor) -> torch.Tensor:
    """A zero factor of ``shape`` that holds no memory of its own: a stride-0 view of ``zero``.

    Read-only in effect (an in-place write to it raises: its elements share one memory
    location); :meth:`BlockDiagonalKron.__add__` recognises a Kron of such factors
    (:func:`is_zero_start`) and adds nothing. The tensor carries :data:`ZERO_FACTOR_MARK`.

    Args:
        shape: The factor's shape.
        zero: A 0-dim zero of the factor's device and dtype, one for all factors of a Kron
            (one allocation and one fill, on a GPU one kernel, for all of them).
    """
    if zero.ndim:
        raise ValueError(f"zero must be a 0-dim tensor (torch.zeros(())), got shape {zero.shape}.")
    factor = zero.expand(shape)
    setattr(factor, ZERO_FACTOR_MARK, True)
    return factor


def is_zero_start(kron: Kron) -> bool:
    """Whether every factor of ``kron`` is a :func:`zero_factor`, read from their marks.

    A marked factor is still zero (it cannot be written in place, and an operation on it
    returns a new, unmarked tensor), so the check reads nothing from the device: no host read,
    no GPU synchronisation per fit. A zero tensor made otherwise (``torch.zeros``, a stride-0
    view of another zero) is not a zero start; the sum with it is computed.
    """
    factors = _flat(BlockDiagonalKron.stored_factors(kron))
    return bool(factors) and all(getattr(f, ZERO_FACTOR_MARK, False) for f in factors)


def _flat(kfacs: KronFactors) -> list[torch.Tensor]:
    """Every factor of every group, in order, for one multi-tensor operator over all of them.

    ``torch._foreach_add`` and its kin (the operators ``torch.optim`` steps with) run one
    dispatch for the whole list instead of one per factor: on a GPU a few fused kernel
    launches instead of about eighty per batch of a fit.
    """
    return [f for group in kfacs for f in group]


class BlockDiagonalKron(Kron):
    """:class:`laplace.utils.matrix.Kron` whose factors may be block-diagonal ``(n, b, b)``.

    Everything laplace-torch's ``KronLaplace`` does with the undecomposed factors (sum over
    batches, rescale, decompose) works as in the parent; results keep this class.

    A factor given as a :func:`~laplace_equivariance.curvature.factor_rows.pending_factor`
    with its rows is formed from them when :attr:`kfacs` is read (by laplace-torch's code, a
    state dict, the eigenvectors), not before: sums, scalings and :meth:`decompose`'s
    eigenvalues use the rows.

    Args:
        kfacs: Per parameter group, its one or two factors.
        rows: Per group and factor, the :class:`~laplace_equivariance.curvature.factor_rows.
            FactorRows` of a block-diagonal factor with fewer rows than its block size, or
            None; all None if not given. Sums and scalings carry them along while they stay
            fewer than the block size; :meth:`decompose` takes those factors' eigenvalues from
            their Gram matrices.
        host_eigenvalues: :meth:`decompose` computes the eigenvalues of factors that are on
            an accelerator on the host's threads (``symmetric_eigvalsh_all(on_host=True)``).
            Kept by sums and scalings.
    """

    rows: list[list[FactorRows | None]]

    def __init__(
        self,
        kfacs: KronFactors,
        rows: list[list[FactorRows | None]] | None = None,
        host_eigenvalues: bool = False,
    ) -> None:
        self.rows = rows if rows is not None else [[None] * len(group) for group in kfacs]
        super().__init__(kfacs)  # type: ignore[arg-type]  # laplace-torch 0.3 mistypes kfacs
        self.host_eigenvalues = host_eigenvalues

    # laplace-torch 0.3 mistypes Kron.kfacs (curvature.fitted.kron_factors): the true type
    @property  # type: ignore[override]
    def kfacs(self) -> KronFactors:
        """Per parameter group its factors, every pending one formed from its rows first."""
        for factors, rows in zip(self._kfacs, self.rows, strict=True):
            for side, factor in enumerate(factors):
                if is_pending(factor):
                    factors[side], rows[side] = _formed(factor, rows[side])
        return self._kfacs

    @kfacs.setter
    def kfacs(self, kfacs: KronFactors) -> None:
        self._kfacs = kfacs

    @staticmethod
    def stored_factors(kron: Kron) -> KronFactors:
        """``kron``'s factors as stored: pending ones (shape only) not formed."""
        if isinstance(kron, BlockDiagonalKron):
            return kron._kfacs
        return kron_factors(kron)

    def _check_structure(self, other: Kron) -> None:
        """Raise unless ``other`` has the same groups and factor shapes."""
        theirs_all = self.stored_factors(other) if isinstance(other, Kron) else None
        if theirs_all is None or len(theirs_all) != len(self._kfacs):
            raise ValueError("Can only add a Kron with the same number of parameter groups.")
        for mine, theirs in zip(self._kfacs, theirs_all, strict=True):
            if [f.shape for f in mine] != [f.shape for f in theirs]:
                raise ValueError(
                    f"Kronecker factor shapes differ: {[tuple(f.shape) for f in mine]} vs "
                    f"{[tuple(f.shape) for f in theirs]}."
                )

    def without_rows(self) -> BlockDiagonalKron:
        """The same factors (shared, not copied) with no rows.

        For changes to the factors that bypass ``Tensor._version``, such as
        ``torch.distributed`` collectives.
        """
        return BlockDiagonalKron(self.kfacs, host_eigenvalues=self.host_eigenvalues)

    def _valid_rows(self) -> list[list[FactorRows | None]]:
        """:attr:`rows`, None where a factor was modified in place since they were taken."""
        return [
            [r if r is not None and r.describes(f) else None for f, r in zip(fs, rs, strict=True)]
            for fs, rs in zip(self._kfacs, self.rows, strict=True)
        ]

    @staticmethod
    def _rows_of(other: Kron) -> list[list[FactorRows | None]]:
        """The rows of ``other``'s factors: its own if it has them; none for a zero factor."""
        if isinstance(other, BlockDiagonalKron):
            return other._valid_rows()
        blocks = [f for group in other.kfacs for f in group if f.ndim == 3]
        # one host read for every block-diagonal factor, not one per factor
        nonzero = iter(torch.stack([f.any() for f in blocks]).tolist() if blocks else [])
        return [
            [
                FactorRows((), f._version) if f.ndim == 3 and not next(nonzero) else None
                for f in group
            ]
            for group in other.kfacs
        ]

    @staticmethod
    def _summed_rows(
        first: list[list[FactorRows | None]],
        second: list[list[FactorRows | None]],
        sums: list[list[torch.Tensor]],
    ) -> list[list[FactorRows | None]]:
        """Rows of the summed factors ``sums``, where both addends had rows.

        ``first`` and ``second`` are the addends' rows, taken before the sum.
        """
        return [
            [
                (a + b).within(total) if a is not None and b is not None else None
                for a, b, total in zip(a_rows, b_rows, totals, strict=True)
            ]
            for a_rows, b_rows, totals in zip(first, second, sums, strict=True)
        ]

    def _addends(
        self,
        other: Kron,
        my_rows: list[list[FactorRows | None]],
        their_rows: list[list[FactorRows | None]],
    ) -> list[list[tuple[torch.Tensor, torch.Tensor] | tuple[torch.Tensor, FactorRows]]]:
        """Per factor, what its sum with ``other``'s needs: two dense addends, or pending rows.

        Where either addend is pending and both have rows (``my_rows``, ``their_rows``) that
        stay fewer than the block size together, ``(pending factor, summed rows)``: the sum
        stays pending. Otherwise the two addends as tensors, a pending one formed from its rows.
        """
        theirs = self.stored_factors(other)
        plan: list[list[tuple[torch.Tensor, torch.Tensor] | tuple[torch.Tensor, FactorRows]]] = []
        for group, (mine, mine_rows) in enumerate(zip(self._kfacs, my_rows, strict=True)):
            plan.append([])
            for side, (a, a_rows) in enumerate(zip(mine, mine_rows, strict=True)):
                b, b_rows = theirs[group][side], their_rows[group][side]
                if is_pending(a) or is_pending(b):
                    pending = a if is_pending(a) else b
                    summed = None if a_rows is None or b_rows is None else a_rows + b_rows
                    if summed is not None and summed.count < a.shape[-1]:
                        plan[-1].append((pending, summed))
                        continue
                    a = _formed(a, a_rows)[0] if is_pending(a) else a
                    b = _formed(b, b_rows)[0] if is_pending(b) else b
                plan[-1].append((a, b))
        return plan

    def _sum_rows(
        self,
        my_rows: list[list[FactorRows | None]],
        their_rows: list[list[FactorRows | None]],
        sums: KronFactors,
        plan: list[list[tuple]],
    ) -> list[list[FactorRows | None]]:
        """Rows of the summed factors ``sums``.

        The pending ones' from ``plan``, else where both addends had rows (``my_rows``,
        ``their_rows``, read before the sum).
        """
        dense_rows = self._summed_rows(my_rows, their_rows, sums)
        return [
            [
                FactorRows(step[1].chunks, total._version)
                if isinstance(step[1], FactorRows)
                else rows
                for step, total, rows in zip(steps, totals, group_rows, strict=True)
            ]
            for steps, totals, group_rows in zip(plan, sums, dense_rows, strict=True)
        ]

    def __add__(self, other: Kron) -> BlockDiagonalKron:
        """Add factor by factor, checking that the structures agree.

        A sum with a Kron of :func:`zero_factor` s (``init_kron``'s, to which
        ``KronLaplace.fit`` adds its first batch) is this Kron's factors themselves, not a
        copy: in-place changes to the one are changes to the other. A pending factor's sum
        stays pending while the rows of both addends stay fewer than its block size.

        Args:
            other: A Kron with the same groups and factor shapes.

        Returns:
            The sum.

        Raises:
            ValueError: If ``other`` is not a Kron of the same structure.
        """
        self._check_structure(other)
        if is_zero_start(other):
            return BlockDiagonalKron(self._kfacs, self._valid_rows(), self.host_eigenvalues)
        my_rows, their_rows = self._valid_rows(), self._rows_of(other)
        plan = self._addends(other, my_rows, their_rows)
        dense = [step for steps in plan for step in steps if not isinstance(step[1], FactorRows)]
        # torch._foreach_* refuse empty lists: every factor may have stayed pending
        added = iter(
            torch._foreach_add([a for a, _ in dense], [b for _, b in dense]) if dense else []
        )
        sums = [
            [step[0] if isinstance(step[1], FactorRows) else next(added) for step in steps]
            for steps in plan
        ]
        rows = self._sum_rows(my_rows, their_rows, sums, plan)
        return BlockDiagonalKron(sums, rows, self.host_eigenvalues)

    __radd__ = __add__

    def __iadd__(self, other: Kron) -> BlockDiagonalKron:
        """Add ``other``'s factors into this Kron's own tensors (``KronLaplace.fit``'s ``+=``).

        A pending factor stays pending (its rows extended) as in :meth:`__add__`; one formed
        for the sum is a new tensor.

        Args:
            other: A Kron with the same groups and factor shapes.

        Returns:
            ``self``.

        Raises:
            ValueError: If ``other`` is not a Kron of the same structure.
        """
        self._check_structure(other)
        my_rows, their_rows = self._valid_rows(), self._rows_of(other)
        plan = self._addends(other, my_rows, their_rows)
        sums = [[step[0] for step in steps] for steps in plan]
        dense = [step for steps in plan for step in steps if not isinstance(step[1], FactorRows)]
        if dense:  # torch._foreach_add_ refuses empty lists: every factor may stay pending
            torch._foreach_add_([a for a, _ in dense], [b for _, b in dense])
        self.rows = self._sum_rows(my_rows, their_rows, sums, plan)
        self._kfacs = sums
        return self

    def __mul__(self, scalar: float | torch.Tensor) -> BlockDiagonalKron:
        """Multiply the represented matrix by a scalar (``scalar ** (1/len(F))`` per factor).

        A pending factor stays pending, its rows scaled.

        Args:
            scalar: A python or 0-d torch scalar.

        Returns:
            The scaled Kron (``self`` itself for the python scalar 1).
        """
        if isinstance(scalar, (int, float)) and scalar == 1:
            return self
        scaled = [
            [f if is_pending(f) else pow(scalar, 1 / len(fs)) * f for f in fs] for fs in self._kfacs
        ]
        rows = [
            [
                None if r is None else r.scaled(pow(scalar, 1 / len(fs))).within(f)
                for r, f in zip(rs, fs, strict=True)
            ]
            for rs, fs in zip(self._valid_rows(), scaled, strict=True)
        ]
        return BlockDiagonalKron(scaled, rows, self.host_eigenvalues)

    __rmul__ = __mul__

    def decompose(self, damping: bool = False) -> KronDecomposed:
        """Eigendecompose every factor: eigenvalues now, eigenvectors on first use.

        Without any block-diagonal factor (a model of stock layers, or relaxed layers whose
        factors are all dense) this is laplace-torch's own ``Kron.decompose``, so that the
        approximation is stock laplace-torch's in type and behaviour (``type(la.H) is
        KronDecomposed``, eigenvectors computed at once, and its ``*`` and ``+``, which drop
        ``damping``). Otherwise the result is a :class:`BlockDiagonalKronDecomposed` whose
        eigenvalues come from ``eigvalsh`` of every factor (of the Gram matrices of its rows
        where :attr:`rows` has them), on all CPU threads at once
        (:func:`~laplace_equivariance.curvature.eigen.symmetric_eigvalsh_all`; on the host
        for factors on an accelerator if :attr:`host_eigenvalues`), and
        whose eigenvectors are a :class:`~laplace_equivariance.curvature.eigen.
        LazyEigenvectors`: the marginal likelihood needs only the eigenvalues, and ``eigh``
        with vectors costs more (:mod:`~laplace_equivariance.curvature.eigen`; measured in
        docs/speed.md).

        Args:
            damping: Use laplace-torch's damped combination of prior and curvature.

        Returns:
            The decomposition.
        """
        if not any(factor.ndim == 3 for factors in self._kfacs for factor in factors):
            return super().decompose(damping=damping)
        factors_and_rows = [
            list(zip(factors, rows, strict=True))
            for factors, rows in zip(self._kfacs, self._valid_rows(), strict=True)
        ]
        spectra = iter(
            symmetric_eigvalsh_all(
                [
                    f if r is None else r.gram(f)
                    for group in factors_and_rows
                    for f, r in group
                    if f.ndim > 1
                ],
                on_host=self.host_eigenvalues,
            )
        )
        eigenvalues = [
            [_flat_eigenvalues(f, r, spectra) for f, r in group] for group in factors_and_rows
        ]
        rows = self._valid_rows()
        return BlockDiagonalKronDecomposed(
            LazyEigenvectors(self._kfacs, rows, keep=functools.partial(self._keep_formed, rows)),
            eigenvalues,
            damping=damping,
        )

    def _keep_formed(
        self,
        rows: list[list[FactorRows | None]],
        group: int,
        side: int,
        pending: torch.Tensor,
        dense: torch.Tensor,
    ) -> None:
        """Store ``dense``, formed from ``pending`` for its eigenvectors, in its place.

        Only while this Kron still holds ``pending`` with the rows it was decomposed with (a
        later ``+=`` may have extended them): :attr:`kfacs` then reads the dense factor
        instead of forming it a second time.
        """
        described = rows[group][side]
        if (
            described is not None
            and self._kfacs[group][side] is pending
            and self.rows[group][side] is described
        ):
            self._kfacs[group][side] = dense
            self.rows[group][side] = FactorRows(described.chunks, dense._version)

    def _bmm(self, W: torch.Tensor) -> torch.Tensor:
        """``H @ W`` for ``W`` of shape ``(batch, classes, params)``, via the decomposition."""
        return self.decompose()._bmm(W, exponent=1)

    def logdet(self) -> torch.Tensor:
        """Log-determinant of the represented block-diagonal matrix."""
        return self.decompose().logdet()

    def diag(self) -> torch.Tensor:
        """Diagonal of the represented matrix, group after group."""
        diags = []
        for factors in self.kfacs:
            parts = [f.diagonal(dim1=-2, dim2=-1).flatten() if f.ndim > 1 else f for f in factors]
            diags.append(parts[0] if len(parts) == 1 else torch.outer(*parts).flatten())
        return torch.cat(diags)

    def to_matrix(self) -> torch.Tensor:
        """The dense block-diagonal matrix (tests only: it can be very large)."""
        blocks = []
        for factors in self.kfacs:
            dense = [densify(f) for f in factors]
            blocks.append(dense[0] if len(dense) == 1 else kron(dense[0], dense[1]))
        return block_diag(blocks)


def _formed(
    factor: torch.Tensor, rows: FactorRows | None
) -> tuple[torch.Tensor, FactorRows | None]:
    """A pending factor formed from its rows, and the rows now describing it.

    Raises:
        RuntimeError: If the factor is pending without rows (nothing describes it).
    """
    if rows is None:
        raise RuntimeError(
            "A pending Kronecker factor has no rows; this is a bug in laplace-equivariance."
        )
    dense = rows.dense(factor)
    return dense, FactorRows(rows.chunks, dense._version)


def _flat_eigenvalues(
    factor: torch.Tensor, rows: FactorRows | None, spectra: Iterator[torch.Tensor]
) -> torch.Tensor:
    """A factor's eigenvalues, flattened: a diagonal factor itself, else the next of ``spectra``.

    ``spectra`` yields the eigenvalues of the factor, or those of its rows' Gram matrix,
    which are padded with zeros.
    """
    if factor.ndim == 1:
        return factor
    values = next(spectra)
    return (values if rows is None else rows.padded(factor, values)).flatten()
