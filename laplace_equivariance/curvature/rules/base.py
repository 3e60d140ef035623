r"""The rule protocol: what every KFAC rule keeps, and the sums they share.

:class:`KroneckerRule` is an ASDL ``Operation`` for one custom module: its weight's
Kronecker factors ``[B, A]`` and the exact GGN blocks of its other parameters
(:attr:`KroneckerRule.extra_blocks`). The module attributes through which the backend
and the rules talk (``_kfac_*``), the KFAC-expand / KFAC-reduce switch
(:func:`kfac_approximation`) and the symmetric outer sums every rule uses
(:func:`outer_sum`, :func:`outer_sum_over_positions`) live here; the family rules are in
the sibling modules (docs/curvature.md).
"""

from __future__ import annotations

import math
from typing import ClassVar

import torch
from asdl.operations import OP_COV_KRON, Operation
from torch import nn

from laplace_equivariance.curvature.factor_rows import pending_factor
from laplace_equivariance.layers.sparse import LengthscaleMode

EXTRA_BLOCKS_ATTR = "_kfac_extra_blocks"
"""Module attribute where a rule accumulates the exact blocks of non-weight parameters
during one ``kron`` call; the backend pops it."""

A_ROWS_ATTR = "_kfac_a_rows"
"""Module attribute where a rule whose block-diagonal ``A`` is a sum of one outer product per
example and block leaves, at each forward pass of a ``kron`` call, the rows ``(n_blocks, N, b)``
of that pass's ``A`` (scaled as ``A``); the backend pops it
(:mod:`laplace_equivariance.curvature.factor_rows`)."""

UNPROJECTED_ATTR = "_kfac_unprojected"
"""Module attribute where a sparse rule accumulates, during one ``kron`` call, the statistic
``S`` of its projected factor before projection (only for a hyperparameter lengthscale);
the backend pops it."""


PAIRED_INPUT_MAP_ATTR = "_kfac_paired_input_map"
"""Attribute of an F-FC output map naming the input map that feeds it, while a backend
computes factors (:func:`paired_factored_maps`)."""

OUTPUT_MAP_GRADIENT_ATTR = "_kfac_output_map_gradient"
"""Attribute of an F-FC input map where, in each backward pass, the rule of its paired output
map leaves ``(theta1 (Q, C', C), output gradient (N, C', Q))``; the input map's ``B`` pops it
(:func:`outer_sum_through_output_map`)."""

KFAC_APPROX_ATTR = "_kfac_approx"
"""Module attribute that selects KFAC-expand or KFAC-reduce in the rules of weight-shared
layers while a backend computes factors (:func:`kfac_approximation`); absent: expand."""

KFAC_APPROXIMATIONS = ("expand", "reduce")
"""The approximations of a weight shared over several places."""


def reduces(module: nn.Module) -> bool:
    """Whether ``module``'s rule runs KFAC-reduce now."""
    return module.__dict__.get(KFAC_APPROX_ATTR) == "reduce"


SYMMETRIC_PRODUCT_SIZE = 512
"""From this ``d`` on, :func:`outer_sum` computes three of the four ``d/2`` blocks of
``R^T R`` and mirrors the fourth: a quarter fewer flops (BLAS has no symmetric product in
torch), 20-30% less time at ``d = 1024`` on CPU (the first F-FC output map's ``B``)."""


def outer_sum(rows: torch.Tensor) -> torch.Tensor:
    r""":math:`\sum_i r_i r_i^\top` for ``rows`` of shape ``(n, d)``; a fresh ``(d, d)`` tensor.

    Symmetric: for ``d >=`` :data:`SYMMETRIC_PRODUCT_SIZE` the lower off-diagonal block is the
    transpose of the upper one instead of a product of its own (written in place, so only
    where autograd does not record: under autograd, as for the lengthscale derivative of
    :mod:`~laplace_equivariance.curvature.differentiable`, the plain product).
    """
    d = rows.shape[1]
    if d < SYMMETRIC_PRODUCT_SIZE or (rows.requires_grad and torch.is_grad_enabled()):
        return rows.T @ rows
    h = d // 2
    top, bottom = rows[:, :h], rows[:, h:]
    product = rows.new_empty(d, d)
    torch.mm(top.T, top, out=product[:h, :h])
    torch.mm(top.T, bottom, out=product[:h, h:])
    product[h:, :h] = product[:h, h:].T
    torch.mm(bottom.T, bottom, out=product[h:, h:])
    return product


BATCHED_GRAM_MIN_POSITIONS = 64
"""From this many positions on (and no fewer positions than channels),
:func:`outer_sum_over_positions` sums per-map Gram matrices instead of multiplying the
transposed rows: 1.2-5x faster on CPU for ``(128, C, P)`` with ``P >= 64`` (no transposing
copy), up to 10x slower for ``P <= 16`` (many tiny products)."""


def outer_sum_over_positions(maps: torch.Tensor) -> torch.Tensor:
    r""":math:`\sum_{b,p} m_{bp} m_{bp}^\top` for ``maps`` of shape ``(B, C, P)``; ``(C, C)``.

    The vectors :math:`m_{bp} = m(b, :, p)` are strided in ``maps`` (channels before
    positions, as convolutions lay them out). With at least
    :data:`BATCHED_GRAM_MIN_POSITIONS` positions and no more channels than positions it is
    :math:`\sum_b M_b M_b^\top` (one batched product, ``(B, C, C)`` intermediate, no larger
    than ``maps``), else :func:`outer_sum` of the transposed rows ``(B P, C)`` (a copy).
    """
    channels, positions = maps.shape[1:]
    if positions >= max(BATCHED_GRAM_MIN_POSITIONS, channels):
        return torch.bmm(maps, maps.mT).sum(dim=0)
    return outer_sum(maps.transpose(1, 2).flatten(end_dim=1))


class KroneckerRule(Operation):
    """ASDL operation for one custom module: weight factors plus exact extra blocks.

    Subclasses implement ASDL's static hooks ``preprocess_in_data``,
    ``preprocess_out_grads``, ``cov_kron_A`` and ``cov_kron_B`` for the module's ``weight``,
    and optionally :meth:`extra_blocks` for its other parameters. Rules of modules with an
    anchor basis set :attr:`projected_side` and implement ``unprojected_statistic(module,
    raw)``, the projected factor's statistic from the raw input (``A``) or raw output
    gradient (``B``) of one pass.
    """

    projected_side: ClassVar[int | None] = None
    """Which factor of ``[B, A]`` is a projection ``phi^T S phi`` on ``module.basis`` (0 or
    1); None for modules without a basis."""

    @staticmethod
    def extra_blocks(module, in_data: torch.Tensor, out_grads: torch.Tensor) -> dict:
        """Per-example gradients of the module's non-weight parameters for one backward pass.

        Args:
            module: The module.
            in_data: Its input, as the forward hook saw it.
            out_grads: The gradient with respect to its output, shape of the output.

        Returns:
            Parameter name (as in ``module.named_parameters()``) -> ``(N, numel)`` gradients.
        """
        return {}

    def deferred_a_rows(
        self, module, in_data: torch.Tensor, out_data: torch.Tensor
    ) -> torch.Tensor | None:
        """Rows ``(n_blocks, m, b)`` of a block-diagonal ``A`` to keep instead of forming it.

        None (the default): ``A`` is formed by ``cov_kron_A``. A rule whose ``A`` is one outer
        product per example and block returns the pass's rows while they are fewer than the
        block size (``m < b``); the pass's ``A`` is then a
        :func:`~laplace_equivariance.curvature.factor_rows.pending_factor` and the backend
        forms it from the rows only when something reads it.

        Args:
            module: The module.
            in_data: Its input, as the forward hook saw it.
            out_data: Its output.
        """
        return None

    @staticmethod
    def a_blocks(module) -> int | None:
        """Number of equal diagonal blocks of ``A``, stored ``(n, b, b)``; None: ``A`` is dense."""
        return None

    @staticmethod
    def factored_weight(module) -> bool:
        """Whether the module's ``weight`` gets Kronecker factors ``[B, A]``.

        Otherwise it gets an exact block from :meth:`extra_blocks`.
        """
        return True

    @staticmethod
    def bias_names(module) -> tuple[str, ...]:
        """Names of biases whose block is the weight's ``B`` factor (KFAC-expand convention)."""
        return ("bias",) if getattr(module, "bias", None) is not None else ()

    def _keeps_statistic(self, side: int) -> bool:
        """Whether the factor ``side`` is projected on a basis with a hyperparameter omega."""
        return (
            self.projected_side == side
            and self._module.basis.lengthscale_mode is LengthscaleMode.HYPERPARAMETER
        )

    def forward_post_process(self, in_data: torch.Tensor, out_data: torch.Tensor) -> None:
        """Keep the raw input for :meth:`extra_blocks` and start new accumulations.

        For a hyperparameter lengthscale, also keep a projected ``A``'s statistic (or start
        accumulating a projected ``B``'s).
        """
        self._raw_in_data = in_data
        setattr(self._module, EXTRA_BLOCKS_ATTR, {})
        self._module.__dict__.pop(A_ROWS_ATTR, None)
        if self._keeps_statistic(1):
            statistic = self.unprojected_statistic(self._module, in_data) * self._cov_scale
            setattr(self._module, UNPROJECTED_ATTR, statistic)
        elif self._keeps_statistic(0):
            setattr(self._module, UNPROJECTED_ATTR, None)
        deferred = (
            self.deferred_a_rows(self._module, in_data, out_data)
            if OP_COV_KRON in self._op_names and self.projected_side != 1
            else None
        )
        if deferred is None:
            super().forward_post_process(in_data, out_data)
        else:
            self._defer_a(deferred, in_data, out_data)
        rows = self._module.__dict__.get(A_ROWS_ATTR)
        if rows is not None and self._cov_scale != 1:
            self._module.__dict__[A_ROWS_ATTR] = rows * math.sqrt(self._cov_scale)

    def _defer_a(self, rows: torch.Tensor, in_data: torch.Tensor, out_data: torch.Tensor) -> None:
        """ASDL's forward operations without ``cov_kron_A``; ``A`` left pending beside ``rows``.

        Raises:
            RuntimeError: If this call already holds an ``A`` (a second forward pass of the
                module within one ``kron`` call, whose rows would replace the first's).
        """
        if self.get_result(OP_COV_KRON, "A") is not None:
            raise RuntimeError(
                f"{type(self._module).__name__} ran twice in one curvature pass; its A factor's "
                "rows would be lost. Call each factored module once per forward pass."
            )
        self._op_names.discard(OP_COV_KRON)
        try:
            super().forward_post_process(in_data, out_data)
        finally:
            self._op_names.add(OP_COV_KRON)
        self._module.__dict__[A_ROWS_ATTR] = rows
        n_blocks, _, size = rows.shape
        self.accumulate_result(pending_factor(n_blocks, size, rows), OP_COV_KRON, "A")

    def accumulate_extra_blocks(self, out_grads: torch.Tensor) -> None:
        """Add one backward pass's outer products of :meth:`extra_blocks` to the module's."""
        blocks = getattr(self._module, EXTRA_BLOCKS_ATTR)
        grads = self.extra_blocks(self._module, self._raw_in_data, out_grads)
        for name, per_example in grads.items():
            if name in blocks:  # in place: these blocks can be large (1024 x 1024)
                blocks[name].addmm_(per_example.T, per_example, alpha=self._cov_scale)
            else:
                blocks[name] = outer_sum(per_example).mul_(self._cov_scale)

    def backward_pre_process(self, out_grads: torch.Tensor, vector=None) -> None:
        """Accumulate the extra parameters' exact blocks, then ASDL's ``B``.

        For a hyperparameter lengthscale and a projected ``B``, also accumulate ``B``'s
        statistic.
        """
        self.accumulate_extra_blocks(out_grads)
        if self._keeps_statistic(0):
            statistic = self.unprojected_statistic(self._module, out_grads) * self._cov_scale
            previous = self._module.__dict__.get(UNPROJECTED_ATTR)
            total = statistic if previous is None else previous + statistic
            setattr(self._module, UNPROJECTED_ATTR, total)
        super().backward_pre_process(out_grads, vector)
