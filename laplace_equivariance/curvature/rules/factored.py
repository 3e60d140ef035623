r"""KFAC rules of F-FC's two maps (paper Eq. 5, App. C.1, Eqs. 37-38).

- input map ``theta2 (C', C, P)``: ``A = (1/C) blockdiag_c sum_n x_c x_c^T`` (``C`` blocks
  ``XY x XY``), ``B = sum_{n,k,c} g(., c) g(., c)^T`` (``C' x C'``), for few output
  positions from the output map's gradient (:func:`outer_sum_through_output_map`);
- output map ``theta1 (Q, C', C)``: ``A = (1/C') blockdiag_c' sum_n h_c' h_c'^T``
  (``C'`` blocks ``C x C``), ``B = sum_{n,k,c'} g(c', .) g(c', .)^T``
  (``X'Y' x X'Y'``), and the exact blocks of the channel and position biases.

Neither map shares a weight, so KFAC-expand and KFAC-reduce coincide (docs/curvature.md).
"""

from __future__ import annotations

import math

import torch

from laplace_equivariance.curvature.rules.base import (
    A_ROWS_ATTR,
    OUTPUT_MAP_GRADIENT_ATTR,
    PAIRED_INPUT_MAP_ATTR,
    KroneckerRule,
    outer_sum,
)

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

    def deferred_a_rows(self, module, in_data, out_data):
        """The rows of ``A`` (:meth:`a_rows`) while the pass has fewer examples than positions."""
        rows = self.a_rows(self.preprocess_in_data(module, in_data, out_data))
        return rows if rows.shape[1] < rows.shape[2] else None

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
