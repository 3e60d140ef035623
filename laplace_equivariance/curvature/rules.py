r"""KFAC rules for the custom layers, as ASDL operations (paper Sec. 5, App. C; docs/curvature.md).

Every rule receives what ASDL's hooks save: the module's input ``in_data`` once per forward
pass and the gradient of the backward pass's scalar with respect to the module's output,
``out_grads``, once per backward pass (one per class for the exact GGN, one per sample for
the Monte-Carlo Fisher). Summing over examples ``n`` and backward passes ``k``:

- the weight's Kronecker factors ``[B, A]`` (``B`` on the weight's leading dimension, ``A`` on
  the rest, row-major), with ``A`` summed over the batch (laplace-torch divides it by the data
  set size ``N``). A weight shared over ``R`` places (CONV, S-CONV, GCONV) gets KFAC-expand by
  default, as ASDL's ``Conv2d`` rule: ``A = (1/R) sum_{n,r} a a^T``, ``B = sum_{n,k,r} g g^T``;
  or KFAC-reduce (Eschenhagen et al., NeurIPS 2023), ``A = sum_n abar abar^T`` with ``abar``
  the mean of the ``R`` inputs and ``B = sum_{n,k} gbar gbar^T`` with ``gbar`` the sum of the
  ``R`` output gradients, when the backend sets :data:`KFAC_APPROX_ATTR` to ``"reduce"``
  (:func:`kfac_approximation`). FC and the factored maps share no weight (every slice of
  their weights is used once per example), so the two coincide for them;
- for the module's other parameters (factored biases, anchor positions, lengthscales) the
  exact GGN block :math:`\sum_{n,k} g_{nk} g_{nk}^\top` of their per-example gradients.

Rules (``x`` input, ``h`` F-FC's intermediate, ``g`` output gradient; derivations in
docs/curvature.md):

- FullyConnected2d: ``A = sum_n x x^T`` over ``CXY``, ``B = sum g g^T`` over ``C'X'Y'``.
- FactoredInputMap (``theta2``): ``A = (1/C) blockdiag_c sum_n x_c x_c^T`` (``C`` blocks
  ``XY x XY``), ``B = sum_{n,k,c} g(., c) g(., c)^T`` (``C' x C'``), for few output
  positions from the output map's gradient (:func:`outer_sum_through_output_map`).
- FactoredOutputMap (``theta1``): ``A = (1/C') blockdiag_c' sum_n h_c' h_c'^T`` (``C'``
  blocks ``C x C``), ``B = sum_{n,k,c'} g(c', .) g(c', .)^T`` (``X'Y' x X'Y'``).
- Sparse maps: the same with ``x_c`` replaced by ``phi^T x_c`` (input map) or ``g(c', .)``
  by ``phi^T g(c', .)`` (output map).
- CircularConv2d: ``A = (1/XY) sum_{n,p} a a^T`` over circular patches, from the channels'
  circular cross-correlations (no unfolding), ``B = sum_{n,k,p} g g^T`` (``C' x C'``).
- SparseCircularConv2d: the convolution rule on patches projected on the basis.
- P4 lifting and pointwise convolutions: patches rotated back by each output rotation, ``A``
  averaged over the ``4 XY`` uses of the filter, ``B`` summed (reduce: the mean patch and
  the summed gradient).

When a sparse module's lengthscale is a hyperparameter (``LengthscaleMode.HYPERPARAMETER``),
its rule also keeps the statistic ``S`` of the factor that the basis projects, before the
projection (``factor = phi^T S phi``; :attr:`KroneckerRule.projected_side`), so that the
factor can be re-projected with ``phi(omega)`` under autograd
(:mod:`laplace_equivariance.curvature.projection`, docs/curvature.md).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Iterator
from contextlib import contextmanager
from typing import ClassVar

import torch
from asdl.operations import Operation
from torch import nn
from torch.nn import functional as F

from laplace_equivariance.layers import (
    N_ROTATIONS,
    CircularConv2d,
    FactoredInputMap,
    FactoredLinear2d,
    FactoredOutputMap,
    FullyConnected2d,
    P4LiftingConv2d,
    P4PointwiseConv2d,
    SparseCircularConv2d,
    SparseFactoredInputMap,
    SparseFactoredOutputMap,
)
from laplace_equivariance.layers.conv import circular_pad
from laplace_equivariance.layers.sparse import AnchorBasis, LengthscaleMode

__all__ = [
    "A_ROWS_ATTR",
    "EXTRA_BLOCKS_ATTR",
    "KFAC_APPROXIMATIONS",
    "KFAC_APPROX_ATTR",
    "OUTPUT_MAP_GRADIENT_ATTR",
    "PAIRED_INPUT_MAP_ATTR",
    "RULES",
    "UNPROJECTED_ATTR",
    "KroneckerRule",
    "kfac_approximation",
    "paired_factored_maps",
]

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


@contextmanager
def kfac_approximation(model: nn.Module, approximation: str) -> Iterator[None]:
    """Let the rules of ``model``'s modules use ``approximation`` inside the block.

    Args:
        model: The network.
        approximation: ``"expand"`` or ``"reduce"``.

    Raises:
        ValueError: For another approximation.
    """
    if approximation not in KFAC_APPROXIMATIONS:
        raise ValueError(
            f"kfac_approx must be one of {KFAC_APPROXIMATIONS}, got {approximation!r}."
        )
    modules = [m for m in model.modules() if type(m) in RULES]
    for module in modules:
        module.__dict__[KFAC_APPROX_ATTR] = approximation
    try:
        yield
    finally:
        for module in modules:
            module.__dict__.pop(KFAC_APPROX_ATTR, None)


@contextmanager
def paired_factored_maps(model: nn.Module) -> Iterator[None]:
    r"""Let every F-FC output map's rule hand its output gradient to its input map's rule.

    Only for :class:`~laplace_equivariance.layers.FactoredLinear2d` modules (and subclasses)
    that keep its ``forward``, ``output_map(input_map(x))``, so that the input map's output
    gradient is exactly :math:`\theta_1^\top` applied to the output map's.

    Args:
        model: The network.
    """
    pairs = [
        (module.input_map, module.output_map)
        for module in model.modules()
        if isinstance(module, FactoredLinear2d) and type(module).forward is FactoredLinear2d.forward
    ]
    for input_map, output_map in pairs:
        output_map.__dict__[PAIRED_INPUT_MAP_ATTR] = input_map
    try:
        yield
    finally:
        for input_map, output_map in pairs:
            output_map.__dict__.pop(PAIRED_INPUT_MAP_ATTR, None)
            input_map.__dict__.pop(OUTPUT_MAP_GRADIENT_ATTR, None)


def _reduces(module: nn.Module) -> bool:
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


OUTPUT_MAP_ROUTE_MAX_SIZE = 4096
"""Largest ``C' Q`` for which :func:`outer_sum_through_output_map` forms its two
``(C'Q, C'Q)`` intermediates (64 MiB each in float32)."""


def output_map_route_is_cheaper(n: int, c_out: int, c_in: int, q: int) -> bool:
    r"""Whether :func:`outer_sum_through_output_map` costs fewer operations than the direct sum.

    Direct: :math:`2 C'^2 N C`; through the output map: :math:`2 (C'Q)^2 (N + C)`, so the
    route pays where :math:`Q^2 (N + C) < N C` (few output positions, many input channels:
    the last F-FC layers), and only while ``C' Q <=`` :data:`OUTPUT_MAP_ROUTE_MAX_SIZE`.

    Args:
        n: Examples in the pass.
        c_out: ``C'``.
        c_in: ``C``.
        q: Output positions ``X'Y'``.
    """
    return q * q * (n + c_in) < n * c_in and c_out * q <= OUTPUT_MAP_ROUTE_MAX_SIZE


def outer_sum_through_output_map(theta1: torch.Tensor, out_grads: torch.Tensor) -> torch.Tensor:
    r"""F-FC input map's ``B`` of one pass from the output map's gradient, ``(C', C')``.

    The input map's output gradient is
    :math:`g_n(c', c) = \sum_q \theta_1(q, c', c)\, \gamma_n(c', q)`, with
    :math:`\gamma_n` the gradient with respect to the F-FC output, so its ``B``
    (docs/curvature.md, "F-FC") is

    .. math::
        B(a, b) = \sum_{n,c} g_n(a, c)\, g_n(b, c)
                = \sum_{q,r} T(aq, br)\, S(aq, br), \qquad
        T = \sum_c \theta_1(\cdot, \cdot, c)\, \theta_1(\cdot, \cdot, c)^\top, \quad
        S = \sum_n \gamma_n \gamma_n^\top

    over the ``C'Q`` pairs ``(c', q)``: :math:`2 (C'Q)^2 (N + C)` operations instead of
    :math:`2 C'^2 N C` (:func:`output_map_route_is_cheaper`).

    Args:
        theta1: The output map's (induced) weight, shape ``(Q, C', C)``.
        out_grads: :math:`\gamma`, shape ``(N, C', Q)``.

    Returns:
        :math:`\sum_{n,c} g_n(\cdot, c)\, g_n(\cdot, c)^\top`, shape ``(C', C')``.
    """
    q, c_out, c_in = theta1.shape
    weight_rows = theta1.permute(1, 0, 2).reshape(c_out * q, c_in)  # rows (c', q)
    products = outer_sum(weight_rows.T) * outer_sum(out_grads.reshape(-1, c_out * q))
    return products.view(c_out, q, c_out, q).sum(dim=(1, 3))


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
        super().forward_post_process(in_data, out_data)
        rows = self._module.__dict__.get(A_ROWS_ATTR)
        if rows is not None and self._cov_scale != 1:
            self._module.__dict__[A_ROWS_ATTR] = rows * math.sqrt(self._cov_scale)

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


class FactoredInputMapRule(KroneckerRule):
    """F-FC's ``theta2 (C', C, P)``: ``A`` has ``C`` blocks ``P x P`` (App. C.1, Eqs. 37-38)."""

    @staticmethod
    def a_blocks(module) -> int:
        """``C`` blocks, one per input channel."""
        return module.weight.shape[1]

    @staticmethod
    def preprocess_in_data(module, in_data, out_data):
        """``(N, C, X, Y) -> (N, C, P)``."""
        return in_data.flatten(start_dim=2)

    @staticmethod
    def a_rows(in_data: torch.Tensor) -> torch.Tensor:
        r"""Rows :math:`x_{nc} / \sqrt C` of ``A``'s blocks, ``(N, C, P) -> (C, N, P)``."""
        # 1/sqrt(C) on the (N, C, P) operand, not 1/C on the (C, P, P) result: P times less
        # memory traffic
        return in_data.transpose(0, 1) / math.sqrt(in_data.shape[1])

    @staticmethod
    def cov_kron_A(module, in_data):
        r""":math:`\frac1C\,\mathrm{blockdiag}_c \sum_n x_{nc} x_{nc}^\top`, ``(C, P, P)``.

        Leaves the rows in the module's :data:`A_ROWS_ATTR` for the backend.
        """
        rows = FactoredInputMapRule.a_rows(in_data)
        module.__dict__[A_ROWS_ATTR] = rows
        return rows.mT @ rows

    @staticmethod
    def cov_kron_B(module, out_grads):
        r""":math:`\sum_{n,c} g_{n\cdot c} g_{n\cdot c}^\top` over ``h(c', c)``, ``(C', C')``.

        From the paired output map's gradient (:func:`outer_sum_through_output_map`) when
        its rule left one in this pass and that costs less.

        Raises:
            RuntimeError: If the output map's gradient does not match ``out_grads``.
        """
        through = module.__dict__.pop(OUTPUT_MAP_GRADIENT_ATTR, None)
        n, c_out, c_in = out_grads.shape
        if through is not None:
            theta1, output_grads = through
            if theta1.shape[1:] != (c_out, c_in) or output_grads.shape[:2] != (n, c_out):
                raise RuntimeError(
                    f"The output map handed theta1 {tuple(theta1.shape)} and gradients "
                    f"{tuple(output_grads.shape)} to an input map whose output gradient is "
                    f"{tuple(out_grads.shape)}: the maps are not one F-FC layer's."
                )
            if output_map_route_is_cheaper(n, c_out, c_in, theta1.shape[0]):
                return outer_sum_through_output_map(theta1, output_grads)
        # the gradient of h comes back as (C', C, N) memory (apply_output_map), so the
        # (C', C N) matrix of its rows' columns is a view; outer_sum's symmetric blocks from
        # C' = 512 on
        columns = out_grads.permute(1, 2, 0).reshape(out_grads.shape[1], -1)
        return outer_sum(columns.T)


class FactoredOutputMapRule(KroneckerRule):
    """F-FC's ``theta1 (Q, C', C)``: ``A`` has ``C'`` blocks ``C x C``; biases exact."""

    @staticmethod
    def a_blocks(module) -> int:
        """``C'`` blocks, one per output channel."""
        return module.weight.shape[1]

    @staticmethod
    def preprocess_out_grads(module, out_grads):
        """``(N, C', X', Y') -> (N, C', Q)``."""
        return out_grads.flatten(start_dim=2)

    @staticmethod
    def cov_kron_A(module, in_data):
        r"""``(1/C') blockdiag_c' sum_n h_c' h_c'^T``, shape ``(C', C, C)``."""
        # (C', C, N): a strided view of the (C, C', N) memory that apply_input_map leaves,
        # so each block is one product of plain matrices (einsum copied them first)
        rows = in_data.permute(1, 2, 0)
        return torch.bmm(rows, rows.mT).div_(in_data.shape[1])

    @staticmethod
    def cov_kron_B(module, out_grads):
        r""":math:`\sum_{n,c'} g_{nc'} g_{nc'}^\top` over output positions, ``(Q, Q)``."""
        return outer_sum(out_grads.reshape(-1, out_grads.shape[-1]))

    def backward_pre_process(self, out_grads: torch.Tensor, vector=None) -> None:
        """Leave ``theta1`` and the output gradient to the paired input map, then as any rule.

        Only inside :func:`paired_factored_maps`; the input map's ``B`` may use them
        (:meth:`FactoredInputMapRule.cov_kron_B`).
        """
        input_map = self._module.__dict__.get(PAIRED_INPUT_MAP_ATTR)
        if input_map is not None:
            with torch.no_grad():
                theta1 = self._module.induced_weight()
            gradient = (theta1, out_grads.flatten(start_dim=2))
            input_map.__dict__[OUTPUT_MAP_GRADIENT_ATTR] = gradient
        super().backward_pre_process(out_grads, vector)

    @staticmethod
    def bias_names(module) -> tuple[str, ...]:
        """No bias shares ``B``: the factored biases get exact blocks."""
        return ()

    @staticmethod
    def extra_blocks(module, in_data, out_grads) -> dict:
        """Channel bias: ``sum_q g(c', q)``; position bias: ``sum_c' g(c', q)``."""
        if module.channel_bias is None:
            return {}
        grads = out_grads.flatten(start_dim=2)
        return {"channel_bias": grads.sum(2), "position_bias": grads.sum(1)}


def basis_gradients(
    module, position_rows: torch.Tensor, anchor_rows: torch.Tensor
) -> dict[str, torch.Tensor]:
    r"""Per-example gradients of the anchor positions and lengthscale, in closed form.

    Every rule's per-example gradient with respect to the basis is a sum of outer products,
    :math:`\partial \ell_n / \partial \phi = \sum_r a_{nr} b_{nr}^\top` (``a`` over the
    grid's ``P`` positions, ``b`` over the ``M`` anchors). Through
    :meth:`AnchorBasis.derivatives` (:math:`\dot\phi^{\omega}`, :math:`\dot\phi^{z_d}`):

    .. math::
        \frac{\partial \ell_n}{\partial \omega} = \sum_{r,j}
        (a_{nr}^\top \dot\phi^{\omega})_j\, b_{nrj}, \qquad
        \frac{\partial \ell_n}{\partial z_{jd}} = \sum_r
        (a_{nr}^\top \dot\phi^{z_d})_j\, b_{nrj},

    three matrix products, without forming the ``(N, P, M)`` gradient. Only ``z``/``omega``
    that are parameters (not buffers) are returned.

    Args:
        module: A sparse module with a ``basis`` (:class:`AnchorBasis`).
        position_rows: ``a``, shape ``(N, R, P)``.
        anchor_rows: ``b``, shape ``(N, R, M)``.

    Returns:
        ``{"basis.position_offsets": (N, 2M), "basis.lengthscale": (N, 1)}`` for those
        that are parameters.
    """
    basis: AnchorBasis = module.basis
    # Parameters, not buffers; ASDL switches requires_grad off during its backward passes.
    learned = {
        n for n in ("position_offsets", "lengthscale") if basis._parameters.get(n) is not None
    }
    if not learned:
        return {}
    # Under ASDL's hooks grad mode is off; under autograd (curvature/differentiable.py) the
    # position blocks keep their dependence on a hyperparameter omega.
    d_omega, d_positions = basis.derivatives()
    grads = {}
    if "position_offsets" in learned:
        n, r, _ = position_rows.shape
        projected = (position_rows @ d_positions.flatten(start_dim=1)).view(n, r, -1, 2)
        grads["basis.position_offsets"] = (projected * anchor_rows[..., None]).sum(1).flatten(1)
    if "lengthscale" in learned:
        projected = position_rows @ d_omega
        grads["basis.lengthscale"] = (projected * anchor_rows).sum((1, 2))[:, None]
    return grads


class SparseFactoredInputMapRule(FactoredInputMapRule):
    """S-FC's ``u2 (C', C, M2)``: F-FC's rule on inputs projected on the basis (App. C.2)."""

    projected_side = 1

    @staticmethod
    def unprojected_statistic(module, in_data: torch.Tensor) -> torch.Tensor:
        r"""F-FC's ``A`` of the raw input, ``S`` of shape ``(C, XY, XY)``.

        :math:`S_c = \frac1C \sum_n x_{nc} x_{nc}^\top`; the rule's ``A`` is
        :math:`\phi^\top S_c \phi` per block.
        """
        rows = FactoredInputMapRule.a_rows(in_data.flatten(start_dim=2))
        return rows.mT @ rows

    @staticmethod
    def preprocess_in_data(module, in_data, out_data):
        r""":math:`\tilde x_c = \phi^\top x_c`, ``(N, C, M2)``."""
        with torch.no_grad():
            phi = module.basis()
        return torch.einsum("ncp,pj->ncj", in_data.flatten(start_dim=2), phi)

    @staticmethod
    def extra_blocks(module, in_data, out_grads) -> dict:
        r"""Positions and lengthscale through ``theta2 = u phi^T``.

        :math:`\partial\ell_n/\partial\phi = \sum_c x_{nc} (\sum_{c'} g_{nc'c} u_{c'c})^\top`.
        """
        anchor_rows = torch.einsum("noc,ocj->ncj", out_grads, module.weight.detach())
        return basis_gradients(module, in_data.flatten(start_dim=2), anchor_rows)


class SparseFactoredOutputMapRule(FactoredOutputMapRule):
    """S-FC's ``u1 (M1, C', C)``: F-FC's rule with output gradients projected on the basis."""

    projected_side = 0

    @staticmethod
    def unprojected_statistic(module, out_grads: torch.Tensor) -> torch.Tensor:
        r"""F-FC's ``B`` of the raw output gradient, ``S`` of shape ``(X'Y', X'Y')``.

        :math:`S = \sum_{n,c'} g_{nc'} g_{nc'}^\top` (one backward pass); the rule's ``B`` is
        :math:`\phi^\top S \phi`.
        """
        return FactoredOutputMapRule.cov_kron_B(module, out_grads.flatten(start_dim=2))

    @staticmethod
    def preprocess_out_grads(module, out_grads):
        r""":math:`\tilde g_{c'} = \phi^\top g_{c'}`, ``(N, C', M1)``."""
        with torch.no_grad():
            phi = module.basis()
        return torch.einsum("noq,qj->noj", out_grads.flatten(start_dim=2), phi)

    @staticmethod
    def extra_blocks(module, in_data, out_grads) -> dict:
        r"""Biases as F-FC; positions and lengthscale through ``theta1 = phi u``.

        :math:`\partial\ell_n/\partial\phi = \sum_{c'} g_{nc'} (\sum_c h_{nc'c}
        u_{\cdot c'c})^\top`.
        """
        blocks = FactoredOutputMapRule.extra_blocks(module, in_data, out_grads)
        anchor_rows = torch.einsum("noc,joc->noj", in_data, module.weight.detach())
        blocks.update(basis_gradients(module, out_grads.flatten(start_dim=2), anchor_rows))
        return blocks


def circular_patches(x: torch.Tensor, kernel_size: int) -> torch.Tensor:
    """Patches of a circularly padded map, ``(N, C * S * S, X * Y)`` in ``(c, i, j)`` order."""
    return F.unfold(circular_pad(x, kernel_size), kernel_size)


@functools.lru_cache(maxsize=64)
def _tap_differences(
    kernel_size: int, h: int, w: int, device: torch.device
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(s' - s) mod X`` and ``(s' - s) mod Y`` for every pair of taps, each ``(S, S)``.

    Cached per filter size, grid and device (made outside inference mode), so that each
    batch of a fit runs no index arithmetic for them.
    """
    with torch.inference_mode(False):
        taps = torch.arange(kernel_size, device=device)
        offset = taps[None, :] - taps[:, None]  # (S, S): s' - s along one axis
        return offset % h, offset % w


def circular_patch_covariance(x: torch.Tensor, kernel_size: int) -> torch.Tensor:
    r"""``A`` of a circular convolution, :math:`\frac1{XY}\sum_{n,p} a_{np} a_{np}^\top`, by FFT.

    The patch :math:`a_{np}` of a circularly padded map has entries
    :math:`x_n(c, p + s - \lfloor S/2 \rfloor)` for taps ``s`` (indices modulo the grid), so
    summing over all positions ``p`` only the difference of two taps matters:

    .. math::
        A_{(c,s),(c',s')} = \frac1{XY} R_{cc'}(s' - s), \qquad
        R_{cc'}(d) = \sum_{n,p} x_n(c, p)\, x_n(c', p + d),

    the circular cross-correlation of the channels, computed for all offsets at once by
    FFT (:math:`\hat R_{cc'} = \sum_n \overline{\hat x_{nc}}\, \hat x_{nc'}`). Equal to the
    product of unfolded patches to a few float64 eps (tested), cheaper than it on every map
    of the network (``benchmarks/conv_a_factor.py``, docs/speed.md), and as accurate in
    float32.

    Args:
        x: The unpadded maps, ``(N, C, X, Y)``.
        kernel_size: Odd filter size ``S``.

    Returns:
        ``A`` of shape ``(C S^2, C S^2)``, rows and columns in ``(c, i, j)`` order (as
        :func:`circular_patches`).
    """
    n, c, h, w = x.shape
    spectra = torch.fft.rfft2(x)
    frequencies = spectra.shape[-1]
    # one contiguous (C, N) matrix per frequency: a batched product over the strided
    # spectra (einsum "nchw,ndhw->cdhw") runs a slow per-matrix loop
    per_frequency = spectra.permute(2, 3, 1, 0).reshape(h * frequencies, c, n).contiguous()
    cross = torch.bmm(per_frequency.conj(), per_frequency.transpose(1, 2))
    cross = cross.view(h, frequencies, c, c).permute(2, 3, 0, 1)
    correlation = torch.fft.irfft2(cross, s=(h, w))  # (C, C, X, Y): R_cc'(d) at d
    rows, columns = _tap_differences(kernel_size, h, w, x.device)
    # (C, C', i, j, i', j') = R_cc'(i' - i, j' - j)
    blocks = correlation[:, :, rows[:, None, :, None], columns[None, :, None, :]]
    size = c * kernel_size**2
    return blocks.permute(0, 2, 3, 1, 4, 5).reshape(size, size) / (h * w)


def circular_patch_mean_covariance(x: torch.Tensor, kernel_size: int) -> torch.Tensor:
    r"""KFAC-reduce's ``A`` of a circular convolution, :math:`\sum_n \bar a_n \bar a_n^\top`.

    Over all positions of a circularly padded map every tap sees every input position once,
    so the mean patch is :math:`\bar a_n(c, i, j) = \bar x_n(c)`, the channel's mean, for
    every tap: :math:`A = (\sum_n \bar x_n \bar x_n^\top) \otimes \mathbf{1}\mathbf{1}^\top`.

    Args:
        x: The unpadded maps, ``(N, C, X, Y)``.
        kernel_size: Filter size ``S``.

    Returns:
        ``A`` of shape ``(C S^2, C S^2)`` in ``(c, i, j)`` order.
    """
    means = outer_sum(x.mean(dim=(2, 3)))
    taps = kernel_size**2
    return torch.kron(means, x.new_ones(taps, taps))


class CircularConv2dRule(KroneckerRule):
    """CONV's ``weight (C', C, S, S)``: KFAC-expand (or -reduce) over the ``XY`` positions.

    Expand: ``A`` by :func:`circular_patch_covariance` from the unpadded input; ``B`` sums the
    output gradients' outer products over positions (ASDL's ``Conv2d`` rule on the padded
    map gives the same factors). Reduce: ``A`` by :func:`circular_patch_mean_covariance`,
    ``B`` from the output gradients summed over positions, which is also the bias's exact
    block.
    """

    @staticmethod
    def preprocess_in_data(module, in_data, out_data):
        """The unpadded input itself, ``(N, C, X, Y)``."""
        return in_data

    @staticmethod
    def preprocess_out_grads(module, out_grads):
        """``(N, C', X, Y) -> (N, C', positions)``."""
        return out_grads.flatten(start_dim=2)

    @staticmethod
    def cov_kron_A(module, in_data):
        r"""``A`` over the circular patches.

        Expand :math:`\frac1{XY}\sum_{n,p} a_{np} a_{np}^\top`, reduce
        :math:`\sum_n \bar a_n \bar a_n^\top`.
        """
        if _reduces(module):
            return circular_patch_mean_covariance(in_data, module.kernel_size)
        return circular_patch_covariance(in_data, module.kernel_size)

    @staticmethod
    def cov_kron_B(module, out_grads):
        r"""``B``, also the bias's block.

        Expand :math:`\sum_{n,p} g_{np} g_{np}^\top`, reduce
        :math:`\sum_n (\sum_p g_{np}) (\sum_p g_{np})^\top`.
        """
        if _reduces(module):
            return outer_sum(out_grads.sum(dim=2))
        return outer_sum_over_positions(out_grads)


class SparseCircularConv2dRule(CircularConv2dRule):
    """S-CONV's ``u (C', C, M)``: the convolution rule with patches projected on the basis."""

    projected_side = 1

    @staticmethod
    def unprojected_statistic(module, in_data: torch.Tensor) -> torch.Tensor:
        r"""``A`` of the raw patches, ``S`` of shape ``(C S^2, C S^2)``.

        :math:`S = \frac1{XY}\sum_{n,p} a_{np} a_{np}^\top` (reduce: :math:`\sum_n \bar a_n
        \bar a_n^\top`); the rule's ``A`` is
        :math:`(I_C \otimes \phi)^\top S\, (I_C \otimes \phi)`.
        """
        return CircularConv2dRule.cov_kron_A(module, in_data)

    @staticmethod
    def preprocess_in_data(module, in_data, out_data):
        """Patches projected on the basis, ``(N, C * M, positions)``."""
        with torch.no_grad():
            phi = module.basis()
        patches = circular_patches(in_data, module.kernel_size)
        n, _, positions = patches.shape
        patches = patches.view(n, module.in_channels, -1, positions)
        return torch.einsum("ncsp,sj->ncjp", patches, phi).reshape(n, -1, positions)

    @staticmethod
    def cov_kron_A(module, in_data):
        r"""``A`` of the projected patches.

        Expand :math:`\frac1{XY}\sum_{n,p} \tilde a_{np} \tilde a_{np}^\top`, reduce the
        same of the mean projected patch.
        """
        if _reduces(module):
            return outer_sum(in_data.mean(dim=2))
        return outer_sum_over_positions(in_data) / in_data.shape[2]

    @staticmethod
    def extra_blocks(module, in_data, out_grads) -> dict:
        r"""Positions and lengthscale through the filter ``u phi^T``.

        :math:`\partial\ell_n/\partial\phi = \sum_{c',c} w_{nc'c} u_{c'c}^\top`, ``w`` the
        per-example filter gradient over the ``S^2`` taps.
        """
        patches = circular_patches(in_data, module.kernel_size)
        filter_grads = torch.einsum("nop,nkp->nok", out_grads.flatten(start_dim=2), patches)
        n = filter_grads.shape[0]
        u = module.weight.detach().flatten(end_dim=1)
        taps = filter_grads.view(n, u.shape[0], -1)
        return basis_gradients(module, taps, u.expand(n, *u.shape))


def rotated_patch_covariance(maps: torch.Tensor, kernel_size: int) -> torch.Tensor:
    r"""GCONV's ``A``: the patch covariance of :func:`circular_patch_covariance`, rotated.

    The filter of output rotation ``s`` is :math:`\mathrm{rot}^s \psi`, so the patch that
    multiplies :math:`\psi` there is the patch of the map ``r`` it sees, rotated back:
    :math:`a_{nsp} = \Pi_s\, a^{(r)}_{np}`, with :math:`\Pi_s` the permutation of the
    ``S x S`` taps of every channel by ``rot90(., -s)``. Hence

    .. math::
        \frac1{4XY}\sum_{n,s,p} a_{nsp} a_{nsp}^\top
        = \frac14 \sum_{s=0}^{3} \Pi_s\, A^{(s \bmod R)}\, \Pi_s^\top, \qquad
        A^{(r)} = \frac1{XY}\sum_{n,p} a^{(r)}_{np} a^{(r)\top}_{np},

    each :math:`A^{(r)}` by FFT, and :math:`\Pi_s A \Pi_s^\top` is ``rot90`` of ``A`` on its
    row taps and on its column taps. Equal to the product of the unfolded, back-rotated
    patches (tested in float64), without unfolding ``4 S^2`` copies of every map.

    Args:
        maps: ``(N, R, C, X, Y)``: ``R = 4`` maps, the one rotation ``s`` sees at
            ``r = s`` (pointwise GCONV), or ``R = 1`` map that all rotations see (lifting).
        kernel_size: Odd filter size ``S``.

    Returns:
        ``A`` of shape ``(C S^2, C S^2)`` in ``(c, i, j)`` order.
    """
    channels, size = maps.shape[2], kernel_size
    per_map = [circular_patch_covariance(maps[:, r], size) for r in range(maps.shape[1])]
    total = 0
    for s in range(N_ROTATIONS):
        taps = per_map[s % len(per_map)].view(channels, size, size, channels, size, size)
        rotated = torch.rot90(torch.rot90(taps, -s, dims=(1, 2)), -s, dims=(4, 5))
        total = total + rotated
    return total.reshape(channels * size**2, channels * size**2) / N_ROTATIONS


class P4ConvRule(KroneckerRule):
    """GCONV (lifting and pointwise): shared filter over rotations and positions.

    For output rotation ``s`` the filter is ``rot90(psi, s)``, so the patch that multiplies
    ``psi`` is the input patch rotated back, ``rot90(patch, -s)``; KFAC-expand sums over the
    ``4 x XY`` places the filter is used.
    """

    @staticmethod
    def preprocess_in_data(module, in_data, out_data):
        """The maps the filter's rotations see, ``(N, R, C, X, Y)``.

        ``R = 4`` rotation channels for the pointwise convolution (rotation-major input), one
        map that every rotation of the filter sees for the lifting convolution.
        """
        n = in_data.shape[0]
        if isinstance(module, P4PointwiseConv2d):
            return in_data.reshape(n, N_ROTATIONS, module.in_channels, *module.size)
        return in_data[:, None]

    @staticmethod
    def preprocess_out_grads(module, out_grads):
        """``(N, 4 C', X, Y) -> (N, 4, C', positions)``."""
        n = out_grads.shape[0]
        return out_grads.view(n, N_ROTATIONS, module.out_channels, -1)

    @staticmethod
    def cov_kron_A(module, in_data):
        r"""``A`` of the back-rotated patches, by :func:`rotated_patch_covariance`.

        Expand :math:`\frac1{4XY}\sum_{n,s,p} a_{nsp} a_{nsp}^\top`, reduce
        :math:`\sum_n \bar a_n \bar a_n^\top` of the mean patch, which is the mean of each
        channel over rotations and positions at every tap (circular padding; a rotation
        permutes a patch's taps).
        """
        if _reduces(module):
            return circular_patch_mean_covariance(in_data.mean(dim=1), module.kernel_size)
        return rotated_patch_covariance(in_data, module.kernel_size)

    @staticmethod
    def cov_kron_B(module, out_grads):
        r"""``B``, also the bias's block.

        Expand :math:`\sum_{n,s,p} g_{nsp} g_{nsp}^\top`, reduce the same of the gradient
        summed over rotations and positions.
        """
        if _reduces(module):
            return outer_sum(out_grads.sum(dim=(1, 3)))
        return outer_sum_over_positions(out_grads.flatten(end_dim=1))


RULES: dict[type, type[KroneckerRule]] = {
    FullyConnected2d: FullyConnected2dRule,
    CircularConv2d: CircularConv2dRule,
    FactoredInputMap: FactoredInputMapRule,
    FactoredOutputMap: FactoredOutputMapRule,
    SparseFactoredInputMap: SparseFactoredInputMapRule,
    SparseFactoredOutputMap: SparseFactoredOutputMapRule,
    SparseCircularConv2d: SparseCircularConv2dRule,
    P4LiftingConv2d: P4ConvRule,
    P4PointwiseConv2d: P4ConvRule,
}
"""Custom module class -> its KFAC rule. Exact classes: a subclass needs its own entry."""
