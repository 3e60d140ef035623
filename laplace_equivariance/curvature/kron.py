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
matrix of its rows (:mod:`laplace_equivariance.curvature.factor_rows`).
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence

import torch
from laplace.utils.matrix import Kron, KronDecomposed
from laplace.utils.utils import block_diag, kron

from laplace_equivariance.curvature.eigen import LazyEigenvectors, symmetric_eigvalsh_all
from laplace_equivariance.curvature.factor_rows import FactorRows
from laplace_equivariance.curvature.fitted import KronFactors, kron_factors
from laplace_equivariance.curvature.outer_product import OuterProductJacobian

__all__ = [
    "BlockDiagonalKron",
    "BlockDiagonalKronDecomposed",
    "OuterProductJacobian",
    "densify",
    "zero_factor",
]


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
    factors = _flat(kron_factors(kron))
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

    # laplace-torch 0.3 mistypes Kron.kfacs (curvature.fitted.kron_factors): the true type
    kfacs: KronFactors  # type: ignore[assignment]
    rows: list[list[FactorRows | None]]

    def __init__(
        self,
        kfacs: KronFactors,
        rows: list[list[FactorRows | None]] | None = None,
        host_eigenvalues: bool = False,
    ) -> None:
        super().__init__(kfacs)  # type: ignore[arg-type]  # laplace-torch 0.3 mistypes kfacs
        self.rows = rows if rows is not None else [[None] * len(group) for group in kfacs]
        self.host_eigenvalues = host_eigenvalues

    def _check_structure(self, other: Kron) -> None:
        """Raise unless ``other`` has the same groups and factor shapes."""
        if not isinstance(other, Kron) or len(other.kfacs) != len(self.kfacs):
            raise ValueError("Can only add a Kron with the same number of parameter groups.")
        for mine, theirs in zip(self.kfacs, other.kfacs, strict=True):
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
            for fs, rs in zip(self.kfacs, self.rows, strict=True)
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

    def __add__(self, other: Kron) -> BlockDiagonalKron:
        """Add factor by factor, checking that the structures agree.

        A sum with a Kron of :func:`zero_factor` s (``init_kron``'s, to which
        ``KronLaplace.fit`` adds its first batch) is this Kron's factors themselves, not a
        copy: in-place changes to the one are changes to the other.

        Args:
            other: A Kron with the same groups and factor shapes.

        Returns:
            The sum.

        Raises:
            ValueError: If ``other`` is not a Kron of the same structure.
        """
        self._check_structure(other)
        if is_zero_start(other):
            return BlockDiagonalKron(self.kfacs, self._valid_rows(), self.host_eigenvalues)
        flat = iter(torch._foreach_add(_flat(self.kfacs), _flat(kron_factors(other))))
        sums = [[next(flat) for _ in group] for group in self.kfacs]
        rows = self._summed_rows(self._valid_rows(), self._rows_of(other), sums)
        return BlockDiagonalKron(sums, rows, self.host_eigenvalues)

    __radd__ = __add__

    def __iadd__(self, other: Kron) -> BlockDiagonalKron:
        """Add ``other``'s factors into this Kron's own tensors (``KronLaplace.fit``'s ``+=``).

        Args:
            other: A Kron with the same groups and factor shapes.

        Returns:
            ``self``.

        Raises:
            ValueError: If ``other`` is not a Kron of the same structure.
        """
        self._check_structure(other)
        my_rows, their_rows = self._valid_rows(), self._rows_of(other)
        torch._foreach_add_(_flat(self.kfacs), _flat(kron_factors(other)))
        self.rows = self._summed_rows(my_rows, their_rows, self.kfacs)
        return self

    def __mul__(self, scalar: float | torch.Tensor) -> BlockDiagonalKron:
        """Multiply the represented matrix by a scalar (``scalar ** (1/len(F))`` per factor).

        Args:
            scalar: A python or 0-d torch scalar.

        Returns:
            The scaled Kron (``self`` itself for the python scalar 1).
        """
        if isinstance(scalar, (int, float)) and scalar == 1:
            return self
        scaled = kron_factors(super().__mul__(scalar))
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
        if not any(factor.ndim == 3 for factors in self.kfacs for factor in factors):
            return super().decompose(damping=damping)
        factors_and_rows = [
            list(zip(factors, rows, strict=True))
            for factors, rows in zip(self.kfacs, self._valid_rows(), strict=True)
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
        return BlockDiagonalKronDecomposed(
            LazyEigenvectors(self.kfacs), eigenvalues, damping=damping
        )

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
