"""Prior precisions per layer and path (paper Sec. 3.2, Eq. 8).

A relaxed layer's paths each get their own Gaussian prior, so that the marginal likelihood can
switch a path off by driving its precision up. laplace-torch knows three prior structures
(one precision for the network, one per parameter *tensor*, one per parameter);
:class:`PriorGroups` maps hyperparameters to parameters for those three and for the paper's
``"path"``:

- ``"scalar"``: one precision for the whole network, shape ``(1,)``;
- ``"layerwise"``: one per trainable parameter tensor, shape ``(H,)`` (laplace-torch's meaning);
- ``"diag"``: one per parameter, shape ``(P,)``;
- ``"path"``: one per path of every :class:`~laplace_equivariance.layers.RelaxedLayer`,
  shared by the path's tensors (``layer3.fc``, ``layer3.conv``), the paper's "one prior per
  layer and path". The layers declare their paths (``RelaxedLayer.path_names``); a trainable
  tensor outside every relaxed layer's paths (a stock ``nn.Linear`` head, say) gets a
  precision of its own, named by the tensor (:attr:`PriorGroups.outside` lists them).

For the first three, the hyperparameters are exactly laplace-torch's ``prior_precision``;
for ``"path"`` they are expanded to one value per tensor (:meth:`PriorGroups.to_laplace`).
"""

from __future__ import annotations

from collections.abc import Sequence
from enum import Enum

import torch
from torch import nn

from laplace_equivariance.layers.paths import RelaxedLayer

__all__ = ["PriorGroups", "PriorStructure", "parameter_paths"]


class PriorStructure(str, Enum):
    """How prior precisions are shared between parameters."""

    SCALAR = "scalar"
    """One precision for all parameters (laplace-torch's ``"scalar"``)."""

    LAYERWISE = "layerwise"
    """One precision per parameter tensor (laplace-torch's ``"layerwise"``)."""

    DIAG = "diag"
    """One precision per parameter (laplace-torch's ``"diag"``)."""

    PATH = "path"
    """One precision per path of every relaxed layer (``layer3.fc``), shared by its tensors."""


def parameter_paths(model: nn.Module) -> dict[str, tuple[str, str] | None]:
    """The relaxed layer and path of every trainable parameter tensor, as the layers declare.

    Args:
        model: Any network; its :class:`~laplace_equivariance.layers.RelaxedLayer` modules
            declare their paths by ``path_names``.

    Returns:
        Parameter name -> ``(layer, path)`` (``("layer3", "fc")`` for
        ``"layer3.fc.input_map.weight"``), or None for a tensor outside every relaxed
        layer's paths; in ``model.named_parameters()`` order, trainable tensors only.
    """
    owner: dict[int, tuple[str, str]] = {}
    for layer_name, module in model.named_modules():
        if isinstance(module, RelaxedLayer):
            for path in module.path_names:
                for p in module.path(path).parameters():
                    owner.setdefault(id(p), (layer_name, path))
    return {n: owner.get(id(p)) for n, p in model.named_parameters() if p.requires_grad}


class SquaredNorms(torch.autograd.Function):
    r"""The squared norms :math:`\lVert\theta_h\rVert^2` of tensors, shape ``(H,)``.

    Forward and backward are one ``torch._foreach_*`` operator each over all ``H`` tensors
    (autograd of a norm or a dot product per tensor adds about five operators per tensor at
    every MAP step); the gradient is :math:`2 g_h \theta_h`. The forward's norms are one fused
    kernel on a GPU too; the backward's product launches a kernel per tensor there (its factors
    are 0-dim tensors, which torch's fused route does not take; the cost is not yet measured on
    a GPU).
    """

    @staticmethod
    def forward(ctx, *tensors: torch.Tensor) -> torch.Tensor:
        ctx.save_for_backward(*tensors)
        return torch.stack(torch._foreach_norm(list(tensors))).square()

    @staticmethod
    def backward(ctx, grad: torch.Tensor) -> tuple[torch.Tensor, ...]:
        return tuple(torch._foreach_mul(list(ctx.saved_tensors), list((2 * grad).unbind())))


class PriorGroups:
    """The map from hyperparameters (prior precisions) to parameters.

    Args:
        model: The network; its trainable parameters, in order, are what laplace-torch sees.
        structure: See :class:`PriorStructure`.

    Attributes:
        structure: The :class:`PriorStructure`.
        names: Group names: ``"all"`` (scalar), parameter names (layerwise and diag,
            whose groups are the tensors' entries) or ``"layer3.fc"`` and, for tensors
            outside relaxed layers, the tensor's name (path).
        outside: Names of the trainable tensors outside every relaxed layer's paths (each is
            its own group under ``"path"``).
        index: For ``"path"``, the group of every trainable tensor, shape ``(H,)``.

    Raises:
        ValueError: For an unknown structure, or a model without trainable parameters.
    """

    def __init__(self, model: nn.Module, structure: PriorStructure | str) -> None:
        try:
            self.structure = PriorStructure(structure)
        except ValueError:
            choices = [s.value for s in PriorStructure]
            raise ValueError(
                f"prior_structure must be one of {choices}, got {structure!r}."
            ) from None
        paths = parameter_paths(model)
        if not paths:
            raise ValueError("The model has no trainable parameters to put a prior on.")
        self.outside: list[str] = [name for name, where in paths.items() if where is None]
        sizes = {n: p.numel() for n, p in model.named_parameters() if p.requires_grad}
        self._sizes = list(sizes.values())
        keys = [name if where is None else ".".join(where) for name, where in paths.items()]
        self.index = torch.tensor([0] * len(keys))
        if self.structure is PriorStructure.SCALAR:
            self.names: list[str] = ["all"]
        elif self.structure in (PriorStructure.LAYERWISE, PriorStructure.DIAG):
            self.names = list(paths)
        else:
            self.names = list(dict.fromkeys(keys))
            position = {name: i for i, name in enumerate(self.names)}
            self.index = torch.tensor([position[k] for k in keys])
        self._copies: dict[tuple[str, torch.device], torch.Tensor] = {}

    def _on(self, name: str, device: torch.device) -> torch.Tensor:
        """``index`` or the tensor sizes on ``device``, copied there once.

        A copy per training step from host memory would wait for the device's queued work.
        """
        key = (name, device)
        if key not in self._copies:
            values = self.index if name == "index" else torch.tensor(self._sizes)
            self._copies[key] = values.to(device)
        return self._copies[key]

    def __len__(self) -> int:
        """The number of hyperparameters."""
        if self.structure is PriorStructure.DIAG:
            return sum(self._sizes)
        return len(self.names)

    def describe(self, i: int) -> str:
        """The name of hyperparameter ``i``, for messages (``"layer1.weight[17]"`` for diag)."""
        if self.structure is not PriorStructure.DIAG:
            return self.names[i]
        for name, size in zip(self.names, self._sizes, strict=True):
            if i < size:
                return f"{name}[{i}]"
            i -= size
        raise IndexError(f"No hyperparameter {i}.")

    def to_laplace(self, values: torch.Tensor) -> torch.Tensor:
        """laplace-torch's ``prior_precision`` from one value per group (differentiable).

        Args:
            values: Shape ``(len(self),)``.

        Returns:
            ``values`` itself for ``"scalar"``, ``"layerwise"`` and ``"diag"``; for
            ``"path"`` one value per trainable tensor, shape ``(H,)`` (laplace-torch's
            layerwise precision).
        """
        if self.structure is not PriorStructure.PATH:
            return values
        return values[self._on("index", values.device)]

    def per_parameter(self, values: torch.Tensor) -> torch.Tensor:
        """One precision per parameter, shape ``(P,)``, in ``model.parameters()`` order.

        Args:
            values: Shape ``(len(self),)``.

        Returns:
            The diagonal of the prior precision matrix.
        """
        if self.structure is PriorStructure.DIAG:
            return values
        if self.structure is PriorStructure.SCALAR:
            return values.expand(sum(self._sizes))
        # output_size: the length is known here; without it the device would be asked for it
        return self.to_laplace(values).repeat_interleave(
            self._on("sizes", values.device), output_size=sum(self._sizes)
        )

    def penalty(self, values: torch.Tensor, parameters: Sequence[torch.Tensor]) -> torch.Tensor:
        r"""The prior's quadratic form :math:`\theta^\top \operatorname{diag}(\delta)\,\theta`.

        Equal, up to the order of the sums, to ``(delta * theta) @ theta`` with ``delta =
        self.per_parameter(values)`` and ``theta`` the parameters' concatenation (laplace-torch's
        MAP loss), but for every structure other than ``"diag"`` without building either
        length-``P`` vector: :math:`\sum_h \delta_h \lVert\theta_h\rVert^2` over the tensors
        (paper Sec. 3.2's Gaussian priors, one precision per group), so that a MAP step's prior
        term costs one pass over the weights.

        Args:
            values: Shape ``(len(self),)``.
            parameters: The trainable tensors, in ``model.parameters()`` order.

        Returns:
            A scalar, differentiable in ``parameters`` (and in ``values``).
        """
        if self.structure is PriorStructure.DIAG:
            theta = torch.cat([p.reshape(-1) for p in parameters])
            return (values * theta) @ theta
        squares = SquaredNorms.apply(*parameters)
        if self.structure is PriorStructure.SCALAR:
            return values[0] * squares.sum()
        return self.to_laplace(values) @ squares

    def summary(self, values: torch.Tensor) -> dict[str, float]:
        """Group name -> precision, for logs and callbacks (per tensor, mean, for ``"diag"``).

        Args:
            values: Shape ``(len(self),)``.

        Returns:
            A plain dict of floats.
        """
        values = values.detach()
        if self.structure is not PriorStructure.DIAG:
            return dict(zip(self.names, values.tolist(), strict=True))
        chunks = values.split(self._sizes)
        return {n: chunk.mean().item() for n, chunk in zip(self.names, chunks, strict=True)}
