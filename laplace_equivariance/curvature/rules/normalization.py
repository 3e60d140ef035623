r"""Exact GGN blocks for the affine parameters of normalisation layers (docs/curvature.md).

``nn.BatchNorm1d``, ``nn.BatchNorm2d``, ``nn.GroupNorm`` and ``nn.LayerNorm`` end with an
affine map :math:`y = \gamma \odot \hat x + \beta` of their normalised input :math:`\hat x`.
Their weight :math:`\gamma` and bias :math:`\beta` have one entry per channel (``C``; for
``LayerNorm`` one per entry of ``normalized_shape``), so each gets its exact GGN block, a full
``C x C`` matrix stored as laplace-torch's one-factor Kron block, instead of Kronecker factors:
with the output gradient :math:`g_{nk}` of backward pass :math:`k` (a class of the exact GGN, a
sampled target of the Monte-Carlo Fisher),

.. math::

    G_\gamma = \sum_{n,k} u_{nk} u_{nk}^\top,\quad u_{nk} = \sum_{s} g_{nk,s} \odot \hat x_{n,s},
    \qquad G_\beta = \sum_{n,k} v_{nk} v_{nk}^\top,\quad v_{nk} = \sum_{s} g_{nk,s},

summed over the positions :math:`s` that share a channel's :math:`\gamma` (the spatial
positions of BatchNorm and GroupNorm, the leading dimensions of LayerNorm). The blocks do not
depend on ``kfac_approx``: nothing is approximated. The cross block between :math:`\gamma`
and :math:`\beta` is left out, as between any two parameter tensors in laplace-torch's Kron.

:math:`\hat x` is per example for GroupNorm and LayerNorm. BatchNorm normalises with its
running statistics in evaluation mode (laplace-torch's ``fit`` calls ``model.eval()``); in
training mode, or without running statistics, it normalises with the batch's, which couples
the examples: the per-example GGN is then undefined and the rule raises.
"""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F

from laplace_equivariance.curvature.rules.base import EXTRA_BLOCKS_ATTR, KroneckerRule

__all__ = ["NORMALIZATION_RULES", "NormalizationRule", "check_normalization", "normalized_input"]


def check_normalization(name: str, module: nn.Module) -> None:
    """Raise if a BatchNorm ``module`` normalises with the batch's statistics.

    Args:
        name: The module's name in the model (for the message).
        module: A normalisation module.

    Raises:
        ValueError: For a BatchNorm in training mode or without running statistics.
    """
    if not isinstance(module, nn.modules.batchnorm._BatchNorm):
        return
    if module.running_mean is None:
        raise ValueError(
            f"{type(module).__name__} {name or '<root>'!r} has no running statistics "
            "(track_running_stats=False), so it normalises each batch with the batch's own: the "
            "examples are coupled and no per-example curvature exists. Use GroupNorm or "
            "LayerNorm, or track running statistics."
        )
    if module.training:
        raise ValueError(
            f"{type(module).__name__} {name or '<root>'!r} is in training mode: it normalises "
            "with the batch's statistics, which couples the examples. Call model.eval() before "
            "computing curvature (laplace-torch's fit does)."
        )


def normalized_input(module: nn.Module, x: torch.Tensor) -> torch.Tensor:
    r""":math:`\hat x`, the normalisation's output before its affine map, shape of ``x``."""
    if isinstance(module, nn.modules.batchnorm._BatchNorm):  # checked by check_normalization
        mean, variance = module.running_mean, module.running_var
        if mean is None or variance is None:
            raise ValueError(f"{type(module).__name__} has no running statistics.")
        shape = (1, -1) + (1,) * (x.ndim - 2)
        scale = torch.rsqrt(variance.view(shape) + module.eps)
        return (x - mean.view(shape)) * scale
    if isinstance(module, nn.GroupNorm):
        return F.group_norm(x, module.num_groups, eps=module.eps)
    if isinstance(module, nn.LayerNorm):
        return F.layer_norm(x, module.normalized_shape, eps=module.eps)
    raise TypeError(f"{type(module).__name__} is not a normalisation this rule covers.")


def _per_example_sum(module: nn.Module, t: torch.Tensor) -> torch.Tensor:
    """Sum ``t`` over every dimension but the batch and the affine parameters': ``(N, numel)``."""
    if isinstance(module, nn.LayerNorm):
        leading = tuple(range(1, t.ndim - len(module.normalized_shape)))
        return (t.sum(dim=leading) if leading else t).flatten(start_dim=1)
    return t.flatten(start_dim=2).sum(dim=2) if t.ndim > 2 else t


class NormalizationRule(KroneckerRule):
    """Exact blocks of a normalisation layer's weight and bias (no Kronecker factors)."""

    @staticmethod
    def factored_weight(module) -> bool:
        """The weight gets an exact block, like the bias."""
        return False

    @staticmethod
    def bias_names(module) -> tuple[str, ...]:
        """No bias shares a weight factor."""
        return ()

    @staticmethod
    def extra_blocks(module, in_data: torch.Tensor, out_grads: torch.Tensor) -> dict:
        """Per-example gradients ``(N, numel)`` of the weight and bias (frozen ones' unused)."""
        grads = {}
        if module.weight is not None:
            normalized = normalized_input(module, in_data)
            grads["weight"] = _per_example_sum(module, out_grads * normalized)
        if module.bias is not None:
            grads["bias"] = _per_example_sum(module, out_grads)
        return grads

    def forward_post_process(self, in_data: torch.Tensor, out_data: torch.Tensor) -> None:
        """Keep the input and start the blocks' accumulation (no ``A`` factor)."""
        self._raw_in_data = in_data
        setattr(self._module, EXTRA_BLOCKS_ATTR, {})

    def backward_pre_process(self, out_grads: torch.Tensor, vector=None) -> None:
        """Accumulate the blocks (no ``B`` factor)."""
        self.accumulate_extra_blocks(out_grads)


NORMALIZATION_RULES: dict[type, type[KroneckerRule]] = {
    nn.BatchNorm1d: NormalizationRule,
    nn.BatchNorm2d: NormalizationRule,
    nn.GroupNorm: NormalizationRule,
    nn.LayerNorm: NormalizationRule,
}
"""torch's normalisation classes -> their rule. ASDL's operations cover some of them for its
own matrices; these rules replace them only while
:class:`~laplace_equivariance.EquivariantKFAC` computes its factors
(:func:`~laplace_equivariance.curvature.registry.exact_normalization_blocks`)."""
