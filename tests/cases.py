"""Shared test cases: one per registered path kind and place, and the paper's relaxed layers.

As curvlinops' ``cases.py``: the rule, exactness and equivariance tests iterate these cases
instead of writing one test per layer, so a newly registered path kind is tested by all of
them at once.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from laplace_equivariance import models
from laplace_equivariance.layers import N_ROTATIONS, PATH_KINDS, PathGeometry, RelaxedLayer


@dataclass(frozen=True)
class PathCase:
    """A path kind built at one place of a network: first layer (lifting) or inside."""

    kind: str
    lifting: bool

    @property
    def id(self) -> str:
        return f"{self.kind}-{'first' if self.lifting else 'inner'}"

    def build(self, size: int = 8) -> nn.Module:
        kind = PATH_KINDS[self.kind]
        channels = 2 if self.lifting else 2 * N_ROTATIONS  # p4 maps: four rotations each
        return kind.build(PathGeometry(channels, 2 * N_ROTATIONS, size, size, self.lifting))

    def inputs(self, n: int = 3, size: int = 8) -> torch.Tensor:
        channels = 2 if self.lifting else 2 * N_ROTATIONS
        return torch.randn(n, channels, size, size, dtype=torch.float64)


def path_cases() -> list[PathCase]:
    """Every registered kind, as the first layer and as an inner one."""
    return [PathCase(kind, lifting) for kind in PATH_KINDS for lifting in (True, False)]


def relaxed_layer_inputs(name: str, n: int = 3) -> list[tuple[str, RelaxedLayer, torch.Tensor]]:
    """Each relaxed layer of the paper's model ``name`` (alpha 1, float64) with its inputs."""
    torch.manual_seed(0)
    model = models.build(name, (1, 32, 32), 3, alpha=1).double()
    captured: list[tuple[str, RelaxedLayer, torch.Tensor]] = []
    handles = [
        layer.register_forward_pre_hook(
            lambda module, args, name=layer_name: captured.append((name, module, args[0]))
        )
        for layer_name, layer in model.named_children()
        if isinstance(layer, RelaxedLayer)
    ]
    with torch.no_grad():
        model(torch.randn(n, 1, 32, 32, dtype=torch.float64))
    for handle in handles:
        handle.remove()
    return captured
