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
- Stock ``nn.Conv2d`` that ASDL's rule does not cover (grouped, dilated, not zero-padded,
  KFAC-reduce; a relaxed layer's CONV path): ``A`` over the patches of the padded input,
  unfolded with the dilation and stride and averaged over the channel groups (curvlinops'
  convention), ``B = sum_{n,k,p} g g^T`` (``C' x C'``); :mod:`.stock_conv`.
- P4 lifting, pointwise and full group convolutions: patches rotated back by each output
  rotation (full: their rotation channels also cycled back), ``A`` averaged over the
  ``4 XY`` uses of the filter, ``B`` summed (reduce: the mean patch and the summed gradient).

When a sparse module's lengthscale is a hyperparameter (``LengthscaleMode.HYPERPARAMETER``),
its rule also keeps the statistic ``S`` of the factor that the basis projects, before the
projection (``factor = phi^T S phi``; :attr:`KroneckerRule.projected_side`), so that the
factor can be re-projected with ``phi(omega)`` under autograd
(:mod:`laplace_equivariance.curvature.projection`, docs/curvature.md).

One module per family, mirroring :mod:`laplace_equivariance.layers`: :mod:`.base` (the rule
protocol, :class:`KroneckerRule`, and the outer sums), :mod:`.dense`, :mod:`.factored`,
:mod:`.sparse`, :mod:`.conv`, :mod:`.group`, :mod:`.stock_conv` (stock convolutions beyond
ASDL's rule) and :mod:`.normalization` (exact blocks of the normalisation layers' affine
parameters). This module holds :data:`RULES`, the table of which
rule runs on which module, and the two switches that act on every ruled module of a model.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from torch import nn

from laplace_equivariance.curvature.rules.base import (
    A_ROWS_ATTR,
    EXTRA_BLOCKS_ATTR,
    KFAC_APPROX_ATTR,
    KFAC_APPROXIMATIONS,
    OUTPUT_MAP_GRADIENT_ATTR,
    PAIRED_INPUT_MAP_ATTR,
    UNPROJECTED_ATTR,
    KroneckerRule,
    outer_sum,
)
from laplace_equivariance.curvature.rules.conv import CircularConv2dRule
from laplace_equivariance.curvature.rules.dense import FullyConnected2dRule
from laplace_equivariance.curvature.rules.factored import (
    FactoredInputMapRule,
    FactoredOutputMapRule,
)
from laplace_equivariance.curvature.rules.group import P4ConvRule, P4GroupConvRule
from laplace_equivariance.curvature.rules.sparse import (
    SparseCircularConv2dRule,
    SparseFactoredInputMapRule,
    SparseFactoredOutputMapRule,
)
from laplace_equivariance.layers import (
    CircularConv2d,
    FactoredInputMap,
    FactoredLinear2d,
    FactoredOutputMap,
    FullyConnected2d,
    P4GroupConv2d,
    P4LiftingConv2d,
    P4PointwiseConv2d,
    SparseCircularConv2d,
    SparseFactoredInputMap,
    SparseFactoredOutputMap,
)

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
    "outer_sum",
    "paired_factored_maps",
]

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
    P4GroupConv2d: P4GroupConvRule,
}
"""Custom module class -> its KFAC rule. Exact classes: a subclass needs its own entry."""


@contextmanager
def kfac_approximation(model: nn.Module, approximation: str) -> Iterator[None]:
    """Let the rules of ``model``'s modules use ``approximation`` inside the block.

    Stock ``nn.Conv2d`` modules are marked too: in KFAC-reduce their rule is
    :class:`~laplace_equivariance.curvature.rules.stock_conv.Conv2dRule`, not ASDL's.

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
    modules = [m for m in model.modules() if type(m) in RULES or type(m) is nn.Conv2d]
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
