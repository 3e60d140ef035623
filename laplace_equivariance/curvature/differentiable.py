r"""One batch's KFAC factors as differentiable functions of the lengthscale hyperparameters.

:class:`~laplace_equivariance.EquivariantKFAC` computes its factors inside ASDL's hooks,
where every tensor is detached. The total derivative of the marginal likelihood with respect
to an S-layer lengthscale :math:`\omega` (:mod:`laplace_equivariance.curvature.lengthscales`,
docs/curvature.md) needs them as functions of :math:`\omega`: every layer's input (through
the induced weights of the S-layers before it), every output gradient and the output Hessian
(through the whole network), and the projected factor :math:`\Phi(\omega)^\top S\Phi(\omega)`
of the S-layer itself. :func:`batch_factors` recomputes them under autograd with the same
rules (ASDL's static hooks, called directly):

- a forward pass recording each covering module's input and output;
- the exact GGN of the cross-entropy, :math:`\nabla^2_f \ell = \sum_k v_k v_k^\top` with
  :math:`v_k = \sqrt{p_k}\,(p - e_k)`, one vector-Jacobian product :math:`J^\top v_k` per
  class with ``create_graph=True`` (``v_k`` itself depends on :math:`\omega` through ``p``);
- each module's rule on these tensors (for ``nn.Conv2d``, patches by
  :func:`~laplace_equivariance.curvature.rules.stock_conv.conv_patches`, since ASDL's
  ``im2col_2d`` detaches padded inputs): ``A`` once per forward, ``B`` and the exact extra
  blocks summed over the classes, and for a hyperparameter basis its projected factor from
  the rule's unprojected statistic projected on ``basis()``.

The result equals the factors ``EquivariantKFAC.kron`` returns for the batch (tested in
float64), with the graph to :math:`\omega` kept. The Monte-Carlo Fisher has no such
derivative (its sampled labels do not depend differentiably on :math:`\omega`).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from asdl.operations import Operation
from torch import nn

from laplace_equivariance.curvature.projection import anchor_basis, project_factor
from laplace_equivariance.curvature.registry import operation_of
from laplace_equivariance.curvature.rules import KroneckerRule, kfac_approximation, outer_sum
from laplace_equivariance.curvature.rules.stock_conv import conv_patches
from laplace_equivariance.layers.sparse import LengthscaleMode

__all__ = ["batch_factors"]


def _projected_side(module: nn.Module, rule: type[Operation]) -> int | None:
    """The factor side a hyperparameter basis projects (0: B, 1: A), else None."""
    side = getattr(rule, "projected_side", None)
    if side is None or anchor_basis(module).lengthscale_mode is not LengthscaleMode.HYPERPARAMETER:
        return None
    return side


def _inputs(
    rule: type[Operation], module: nn.Module, in_data: torch.Tensor, out_data: torch.Tensor
):
    """The rule's preprocessed input, keeping its graph.

    ASDL's ``Conv2d`` rule builds patches with ``im2col_2d``, which detaches a padded input
    (``F.pad(x).data``); :func:`~laplace_equivariance.curvature.rules.stock_conv.conv_patches`
    gives the same ``(N, C kh kw, positions)`` patches differentiably, and those of grouped,
    dilated and otherwise padded convolutions as their rule takes them.
    """
    if type(module) is nn.Conv2d:
        return conv_patches(module, in_data)
    return rule.preprocess_in_data(module, in_data, out_data)


def _module_factors(
    module: nn.Module, in_data: torch.Tensor, out_data: torch.Tensor, grads: Sequence[torch.Tensor]
) -> tuple[torch.Tensor | None, torch.Tensor | None, dict[str, torch.Tensor]]:
    """``(B, A, extra blocks)`` of one module from its input and per-class output gradients.

    ``B`` and ``A`` are None where the weight has an exact block (a normalisation's).
    """
    rule = operation_of(module)
    extra: dict[str, torch.Tensor] = {}
    if issubclass(rule, KroneckerRule):
        for g in grads:
            for name, per_example in rule.extra_blocks(module, in_data, g).items():
                block = outer_sum(per_example)
                extra[name] = extra[name] + block if name in extra else block
        if not rule.factored_weight(module):
            return None, None, extra
    side = _projected_side(module, rule)
    if side == 1:
        a = project_factor(rule.unprojected_statistic(module, in_data), anchor_basis(module)())
    else:
        a = rule.cov_kron_A(module, _inputs(rule, module, in_data, out_data))
    if side == 0:
        statistic = sum(rule.unprojected_statistic(module, g) for g in grads)
        b = project_factor(statistic, anchor_basis(module)())
    else:
        b = sum(rule.cov_kron_B(module, rule.preprocess_out_grads(module, g)) for g in grads)
    return b, a, extra


def _factor(factor: torch.Tensor | None, name: str) -> torch.Tensor:
    """A Kronecker factor of parameter ``name``, which its module's rule computes."""
    if factor is None:
        raise RuntimeError(f"{name} has a Kronecker factor that its module's rule did not give.")
    return factor


@torch.enable_grad()
def batch_factors(backend, x: torch.Tensor, n_data: int) -> list[list[torch.Tensor]]:
    r"""The exact-GGN KFAC factors of one batch, differentiable in the lengthscales.

    Args:
        backend: The :class:`~laplace_equivariance.EquivariantKFAC` of the Laplace
            approximation (it knows which module's rule covers each parameter).
        x: The batch's inputs (on the model's device).
        n_data: ``N``, the data set size ``A`` is divided by (as laplace-torch does).

    Returns:
        One list per trainable parameter, in ``model.parameters()`` order, as
        ``EquivariantKFAC.kron``: ``[B, A / N]`` for a weight, ``[B]`` for a bias sharing
        it, ``[block]`` for other parameters. Tensors carry the graph to every
        lengthscale that requires grad.

    Raises:
        ValueError: If the model's output is not ``(batch, classes)`` logits.
    """
    groups = backend._parameter_groups()
    owners = list(dict.fromkeys(owner for _, _, owner in groups))
    records: dict[nn.Module, tuple[torch.Tensor, torch.Tensor]] = {}

    def record(module: nn.Module, inputs: tuple[torch.Tensor, ...], output: torch.Tensor) -> None:
        records[module] = (inputs[0], output)

    handles = [owner.register_forward_hook(record) for owner in owners]
    try:
        logits = backend._model(x)
    finally:
        for handle in handles:
            handle.remove()
    if logits.ndim != 2:
        raise ValueError(
            f"The total lengthscale derivative needs (batch, classes) logits, got shape "
            f"{tuple(logits.shape)}."
        )
    sqrt_probs = (0.5 * logits.log_softmax(-1)).exp()
    probs = sqrt_probs.square()
    outputs = [records[owner][1] for owner in owners]
    eye = torch.eye(logits.shape[1], dtype=logits.dtype, device=logits.device)
    per_class = [
        torch.autograd.grad(
            logits,
            outputs,
            grad_outputs=sqrt_probs[:, k, None] * (probs - eye[k]),
            create_graph=True,
        )
        for k in range(logits.shape[1])
    ]
    with kfac_approximation(backend._model, backend.kfac_approx):
        factors = {
            owner: _module_factors(owner, *records[owner], [grads[i] for grads in per_class])
            for i, owner in enumerate(owners)
        }
    kfacs: list[list[torch.Tensor]] = []
    for _, name, owner in groups:
        b, a, extra = factors[owner]
        if backend._factored_weight(name, owner):
            kfacs.append([_factor(b, name), _factor(a, name) / n_data])
        elif name in backend._bias_names(owner):
            kfacs.append([_factor(b, name)])
        else:
            kfacs.append([extra[name]])
    return kfacs
