"""Forward passes that record only the activations' graph, for the factors' backward passes."""

from __future__ import annotations

import contextlib

import torch
from torch import nn

from laplace_equivariance.layers import AnchorBasis

__all__ = ["activation_graph_only"]


@contextlib.contextmanager
def activation_graph_only(model: nn.Module):
    """Record ``model``'s forward passes without the parameters' edges in the graph.

    The factors need only the gradients with respect to each module's output; ASDL's
    backward passes (one per class for the exact GGN) would otherwise also compute every
    weight gradient and throw it away, a large part of each backward pass. While ``model``
    runs, its parameters stop requiring grad (ASDL has already chosen the modules it hooks
    by then: it requires them to need grad). A module with trainable parameters whose
    output then needs no gradient (its input does not, as in the first layer) gets a zero
    leaf that requires grad added to its output: ASDL's backward hook on that module still
    fires, and the backward passes stop there instead of computing the gradient with
    respect to the model's input (for a one-channel convolution that was the most
    expensive step of the fit).
    """
    trainable = [p for p in model.parameters() if p.requires_grad]
    owners = [
        m
        for m in model.modules()
        if not isinstance(m, AnchorBasis)
        and any(p.requires_grad for p in m.parameters(recurse=False))
    ]

    def freeze_parameters(*_):
        for p in trainable:
            p.requires_grad_(False)

    def enable_parameters(*_):
        for p in trainable:
            p.requires_grad_(True)

    def attach_to_graph(_module, _args, output):
        if not isinstance(output, torch.Tensor) or output.requires_grad:
            return None
        return output + output.new_zeros(()).requires_grad_(True)

    handles = [
        model.register_forward_pre_hook(freeze_parameters),
        model.register_forward_hook(enable_parameters),
        *(m.register_forward_hook(attach_to_graph) for m in owners),
    ]
    try:
        yield
    finally:
        for handle in handles:
            handle.remove()
        enable_parameters()
