"""Balancing F-FC's two factors under their priors, with the optimiser's moments rescaled.

F-FC's weight is a product of two maps (paper Eq. 5); scaling a channel pair of one by ``s``
and the other by ``1/s`` leaves the function unchanged but not the prior term. Before each
Laplace fit, ``marglik_training(balance_factors=True)`` moves every pair to the scale that
minimises the prior term under the current precisions
(:meth:`~laplace_equivariance.layers.FactoredLinear2d.balance_`; docs/learned_structure.md).
"""

from __future__ import annotations

import torch
from torch import nn
from torch.optim import Optimizer

from laplace_equivariance.layers import FactoredLinear2d

__all__ = ["MOMENT_POWERS", "balance", "rescale_optimizer_state"]

MOMENT_POWERS = {"exp_avg": 1, "momentum_buffer": 1, "exp_avg_sq": 2, "max_exp_avg_sq": 2}
"""Optimiser state of a weight, and the power of the weight's scale that divides it when the
weight is rescaled (gradients scale inversely)."""


def balance(model: nn.Module, optimizer: Optimizer, delta: torch.Tensor) -> None:
    """Balance every factored layer's channel pairs under the prior precisions ``delta``.

    Rescales the optimiser's state with the weights: a weight multiplied by ``s`` has
    gradients divided by ``s``, so first moments (``exp_avg``, ``momentum_buffer``) are
    divided by ``s`` and second moments (``exp_avg_sq``, ``max_exp_avg_sq``) by ``s^2``.

    Args:
        model: The network; its F-FC layers (:class:`~laplace_equivariance.layers.FactoredLinear2d`)
            with both maps trainable are balanced in place (:meth:`FactoredLinear2d.balance_`).
        optimizer: The weights' optimiser, whose moments are rescaled.
        delta: The prior precision of every trainable parameter, flattened in
            ``model.parameters()`` order, ``(P,)``.

    Raises:
        ValueError: If the optimiser keeps a weight-shaped state it cannot rescale.
    """
    trainable = [p for p in model.parameters() if p.requires_grad]
    per_tensor = dict(
        zip(
            map(id, trainable),
            (
                d.view_as(p)
                for d, p in zip(delta.split([p.numel() for p in trainable]), trainable, strict=True)
            ),
            strict=True,
        )
    )
    for module in model.modules():
        if not isinstance(module, FactoredLinear2d):
            continue
        theta1, theta2 = module.output_map.weight, module.input_map.weight
        if not (theta1.requires_grad and theta2.requires_grad):
            continue
        scale = module.balance_(per_tensor[id(theta1)], per_tensor[id(theta2)])
        rescale_optimizer_state(optimizer, theta1, scale.expand_as(theta1))
        rescale_optimizer_state(optimizer, theta2, (1 / scale)[..., None].expand_as(theta2))


def rescale_optimizer_state(
    optimizer: Optimizer, weight: nn.Parameter, factor: torch.Tensor
) -> None:
    """Rescale ``weight``'s optimiser moments after ``weight`` was multiplied by ``factor``."""
    state = optimizer.state.get(weight, {})
    unknown = [
        key
        for key, value in state.items()
        if key not in MOMENT_POWERS and torch.is_tensor(value) and value.shape == weight.shape
    ]
    if unknown:
        raise ValueError(
            f"balance_factors rescales the moment estimates {sorted(MOMENT_POWERS)} of a "
            f"rescaled weight; {type(optimizer).__name__} also keeps {unknown}, which "
            "it cannot rescale: use Adam, AdamW or SGD, or balance_factors=False."
        )
    with torch.no_grad():
        for key, power in MOMENT_POWERS.items():
            if key in state and torch.is_tensor(state[key]) and state[key].shape == weight.shape:
                state[key].div_(factor**power)
