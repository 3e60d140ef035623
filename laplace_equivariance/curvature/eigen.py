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

import functools
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import overload

import torch

from laplace_equivariance.curvature.factor_rows import FactorRows, is_pending

__all__ = [
    "LazyEigenvectors",
    "moved_together",
    "symmetric_eigh",
    "symmetric_eigvalsh",
    "symmetric_eigvalsh_all",
]


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
    return _clamped(values - shift)


def _clamped(values: torch.Tensor) -> torch.Tensor:
    """Eigenvalues of a PSD factor as this module returns them: at least 0, NaN-free."""
    return torch.nan_to_num(values.clamp(min=0.0))


def _eigvalsh_on_one_thread(matrices: torch.Tensor) -> torch.Tensor | None:
    """``torch.linalg.eigvalsh`` on this thread alone; None if LAPACK does not converge.

    The caller redoes a factor whose piece failed with :func:`symmetric_eigvalsh`.
    """
    torch.set_num_threads(1)
    try:
        return torch.linalg.eigvalsh(matrices)
    except torch.linalg.LinAlgError:
        return None


def symmetric_eigvalsh_all(
    factors: Sequence[torch.Tensor], on_host: bool = False
) -> list[torch.Tensor]:
    r""":func:`symmetric_eigvalsh` of every factor; on CPU, on all intra-op threads at once.

    A batched ``eigvalsh`` decomposes its matrices one after another, each with all
    intra-op threads, and for the few-hundred-row blocks of Kronecker factors a second
    thread gains little (the tridiagonal reduction is memory-bound: 1.0-1.3x on 2 cores for
    80-640-row blocks). With ``T = torch.get_num_threads() > 1`` and every factor on CPU, the
    factors are cut into pieces (a block-diagonal ``(n, b, b)`` one into up to ``T`` runs of
    blocks) that ``T`` worker threads decompose, each with LAPACK on one thread, the largest
    pieces first. Each worker sets its own intra-op threads to one (otherwise each would start
    a team of ``T`` OpenMP threads: oversubscribed, and measured to slow the main thread's
    later LAPACK calls 5x); PyTorch's process-wide setting, which the workers change and
    threads started later take, is restored afterwards. Results equal
    :func:`symmetric_eigvalsh` of each factor up to float rounding (one thread's BLAS sums
    in another order); a piece on which LAPACK fails is redone by it, with its jitter.

    Sequential (one :func:`symmetric_eigvalsh` per factor) with one thread, on GPU, under
    autograd (a factor that requires grad while grad mode is on), and in a PyTorch built
    without OpenMP (its native thread pool cannot be set per thread).

    With ``on_host=True``, factors on an accelerator are copied to the host in one copy
    (:func:`moved_together`), decomposed there as above, and their eigenvalues copied back in
    one. A GPU's batched eigensolver iterates Jacobi sweeps over batches of small blocks, with
    many kernel launches and host synchronisations: an F-FC+CONV fit over one batch on an
    H200 launched 20,512 batched-Jacobi kernels (342 ms of kernel time) among 102,357
    launches and synchronised 5,202 times (``benchmarks/results/gpu_speed/cuda.json``,
    ``exact_fit``); the host's LAPACK needs two copies.
    Not under autograd (the graph stays on the device).

    Args:
        factors: Symmetric positive semi-definite ``(d, d)`` or ``(n, b, b)`` tensors.
        on_host: Decompose factors that are not on the CPU on the host's threads.

    Returns:
        Their eigenvalues, as :func:`symmetric_eigvalsh` returns them, in order, on the
        factors' device.

    Raises:
        FloatingPointError: If LAPACK fails on a factor even with unit jitter.
    """
    threads = torch.get_num_threads()
    records_graph = torch.is_grad_enabled() and any(f.requires_grad for f in factors)
    on_cpu = all(f.device.type == "cpu" for f in factors)
    if on_host and not on_cpu and not records_graph:
        device = factors[0].device
        return moved_together(symmetric_eigvalsh_all(moved_together(factors, "cpu")), device)
    if threads < 2 or records_graph or not on_cpu or not torch.backends.openmp.is_available():
        return [symmetric_eigvalsh(factor) for factor in factors]
    pieces = [
        (index, position, piece)
        for index, factor in enumerate(factors)
        for position, piece in enumerate(
            factor.tensor_split(threads) if factor.ndim == 3 else (factor,)
        )
        if piece.numel()
    ]
    pieces.sort(key=lambda item: -_flops(item[2]))
    try:
        with ThreadPoolExecutor(threads) as pool:
            futures = [
                (index, position, pool.submit(_eigvalsh_on_one_thread, piece))
                for index, position, piece in pieces
            ]
            parts: list[list[torch.Tensor | None]] = [[] for _ in factors]
            for index, _, future in sorted(futures, key=lambda item: item[:2]):
                parts[index].append(future.result())
    finally:
        torch.set_num_threads(threads)
    eigenvalues = []
    for factor, own in zip(factors, parts, strict=True):
        converged = [values for values in own if values is not None]
        if not own:
            eigenvalues.append(factor.new_zeros(factor.shape[:-1]))
        elif len(converged) < len(own):
            eigenvalues.append(symmetric_eigvalsh(factor))
        else:
            eigenvalues.append(_clamped(torch.cat(converged)))
    return eigenvalues


def moved_together(
    tensors: Sequence[torch.Tensor], device: torch.device | str
) -> list[torch.Tensor]:
    """``[t.to(device) for t in tensors]`` in one copy of their concatenation.

    One transfer (and on a GPU one synchronisation) instead of one per tensor. Tensors of
    several dtypes or devices are moved one by one.

    Args:
        tensors: Tensors of any shapes, one dtype, on one device.
        device: Where to move them.

    Returns:
        Copies on ``device`` (contiguous), in order, with the same shapes.
    """
    if not tensors:
        return []
    if len({(t.dtype, t.device) for t in tensors}) > 1:
        return [t.to(device) for t in tensors]
    flat = torch.cat([t.reshape(-1) for t in tensors]).to(device)
    pieces = flat.split([t.numel() for t in tensors])
    return [piece.view(t.shape) for piece, t in zip(pieces, tensors, strict=True)]


def _flops(matrices: torch.Tensor) -> int:
    """The tridiagonal reductions' cost of ``(d, d)`` or ``(n, b, b)``, up to a constant."""
    return matrices.shape[-1] ** 3 * (matrices.shape[0] if matrices.ndim == 3 else 1)


class _FactorEigenvectors:
    """The eigenvectors of one factor (identity for a diagonal one), computed once on call.

    Raises, on call, if the factor was modified in place after the decomposition was made:
    the eigenvalues already handed out belong to the old factor. A pending factor is formed
    from its rows and handed to ``keep`` (if given), so that its owner need not form it again.
    """

    def __init__(
        self,
        factor: torch.Tensor | None = None,
        vectors: torch.Tensor | None = None,
        rows: FactorRows | None = None,
        keep: Callable[[torch.Tensor, torch.Tensor], None] | None = None,
    ):
        self.factor = factor
        self.version = None if factor is None else factor._version
        self.vectors = vectors
        self.rows = rows if factor is not None and is_pending(factor) else None
        self.keep = keep

    def __call__(self) -> torch.Tensor:
        if self.vectors is None:
            factor = self.factor
            if factor is None:
                raise RuntimeError("An eigenvector entry was made with neither factor nor vectors.")
            if factor._version != self.version:
                raise RuntimeError(
                    "A Kronecker factor was modified in place after it was decomposed; its "
                    "eigenvalues are stale. Decompose again (la.fit, or la.H_facs.decompose())."
                )
            if factor.ndim == 1:
                n = len(factor)
                self.vectors = torch.eye(n, dtype=factor.dtype, device=factor.device)
            else:
                dense = factor if self.rows is None else self.rows.dense(factor)
                if self.rows is not None and self.keep is not None:
                    self.keep(factor, dense)
                self.vectors = symmetric_eigh(dense)[1]
            self.factor = self.rows = self.keep = None
        return self.vectors


class LazyEigenvectors(Sequence[list[torch.Tensor]]):
    """The eigenvector factors of a Kron decomposition, each computed on first access.

    Indexing by parameter group gives that group's list of eigenvector factors (``(d, d)``
    dense, ``(n, b, b)`` for a block-diagonal factor, the identity for a diagonal one), as
    laplace-torch's ``KronDecomposed.eigenvectors`` holds them. The first access to a group
    runs ``eigh`` on its factors; later accesses, from this object or any decomposition that
    shares it, reuse the result.

    Args:
        kfacs: The factors, one list per parameter group (``Kron.kfacs``).
        rows: Per group and factor, the rows that describe a
            :func:`~laplace_equivariance.curvature.factor_rows.pending_factor` (formed from
            them on first access), or None.
        keep: Called as ``keep(group, side, pending, dense)`` with each pending factor and
            its dense form once formed, so that the factors' owner can store it (a
            ``BlockDiagonalKron`` then forms it once, not again when its factors are read).
    """

    def __init__(
        self,
        kfacs: Sequence[Sequence[torch.Tensor]],
        rows: Sequence[Sequence[FactorRows | None]] | None = None,
        keep: Callable[[int, int, torch.Tensor, torch.Tensor], None] | None = None,
    ):
        rows = rows if rows is not None else [[None] * len(group) for group in kfacs]
        self._entries = [
            [
                _FactorEigenvectors(
                    factor, rows=r, keep=None if keep is None else functools.partial(keep, g, s)
                )
                for s, (factor, r) in enumerate(zip(group, rs, strict=True))
            ]
            for g, (group, rs) in enumerate(zip(kfacs, rows, strict=True))
        ]

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

    @overload
    def __getitem__(self, group: int) -> list[torch.Tensor]: ...

    @overload
    def __getitem__(self, group: slice) -> list[list[torch.Tensor]]: ...

    def __getitem__(self, group: int | slice) -> list[torch.Tensor] | list[list[torch.Tensor]]:
        if isinstance(group, slice):
            return [self[index] for index in range(len(self))[group]]
        return [entry() for entry in self._entries[group]]

    def __len__(self) -> int:
        return len(self._entries)

    def computed(self) -> bool:
        """Whether every factor's eigenvectors have been computed."""
        return all(entry.vectors is not None for group in self._entries for entry in group)
