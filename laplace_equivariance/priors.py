"""Prior precisions per layer and path (paper Sec. 3.2, Eq. 8).

A relaxed layer's paths each get their own Gaussian prior, so that the marginal likelihood can
switch a path off by driving its precision up. laplace-torch knows one precision per parameter
*tensor* (``prior_structure="layerwise"``); :class:`PriorGroups` maps hyperparameters to
tensors for three structures:

- ``"scalar"``: one precision for the whole network;
- ``"layerwise"``: one per parameter tensor (laplace-torch's meaning);
- ``"path"``: one per path of every layer, shared by the path's tensors (``layer3.fc``,
  ``layer3.conv``; a head layer is one group), the paper's "one prior per layer and path".
"""

from __future__ import annotations

from enum import Enum

import torch
from torch import nn

__all__ = ["PriorGroups", "PriorStructure", "layer_and_path"]


class PriorStructure(str, Enum):
    """How prior precisions are shared between parameter tensors."""

    SCALAR = "scalar"
    """One precision for all parameters."""

    LAYERWISE = "layerwise"
    """One precision per parameter tensor, as laplace-torch's ``"layerwise"``."""

    PATH = "path"
    """One precision per path of every layer (``layer3.fc``), shared by its tensors."""


def layer_and_path(name: str) -> tuple[str, str]:
    """The layer and path a parameter belongs to, from its name.

    Args:
        name: A parameter name such as ``"layer3.fc.input_map.weight"``.

    Returns:
        ``("layer3", "fc")``; parameters outside a relaxed layer's paths (the head,
        ``"layer9.weight"``) form one ``"fc"`` path of their layer.
    """
    parts = name.split(".")
    if len(parts) >= 3 and parts[1] in ("fc", "conv", "gconv"):
        return parts[0], parts[1]
    return parts[0], "fc"


class PriorGroups:
    """The map from hyperparameters (log prior precisions) to parameter tensors.

    Args:
        model: The network; its trainable parameters, in order, are what laplace-torch sees.
        structure: See :class:`PriorStructure`.

    Attributes:
        names: Group names (``"all"``, parameter names, or ``"layer3.fc"``), one per
            hyperparameter.
        index: For every trainable tensor, the index of its group.
    """

    def __init__(self, model: nn.Module, structure: PriorStructure | str) -> None:
        self.structure = PriorStructure(structure)
        tensors = [n for n, p in model.named_parameters() if p.requires_grad]
        if self.structure is PriorStructure.SCALAR:
            keys = ["all"] * len(tensors)
        elif self.structure is PriorStructure.LAYERWISE:
            keys = tensors
        else:
            keys = [".".join(layer_and_path(n)) for n in tensors]
        self.names: list[str] = list(dict.fromkeys(keys))
        position = {name: i for i, name in enumerate(self.names)}
        self.index = torch.tensor([position[k] for k in keys])

    def __len__(self) -> int:
        return len(self.names)

    def expand(self, group_values: torch.Tensor) -> torch.Tensor:
        """One value per parameter tensor from one value per group (differentiable).

        Args:
            group_values: Shape ``(len(self),)``.

        Returns:
            Shape ``(n_tensors,)``, laplace-torch's layerwise prior precision.
        """
        return group_values[self.index.to(group_values.device)]
