"""The paper's architecture (App. F.1, Table 6) for every layer type, by name.

Eight relaxed layers of widths ``a, 2a, 2a, 4a, 4a, 8a, 8a, 16a`` (3x3 filters), with
polyphase subsampling after layers 2, 4, 6, 7 and 8 (32x32 -> 1x1) and a ReLU after every
layer, then a head ``16a -> 64a -> K`` (``layer9``, ``layer10``) on the 1x1 map. At a
subsampling layer, FC-type paths map straight onto the subsampled grid.

GCONV is App. F.3's pointwise group convolution (``gconv``: a sixteenth of the CONV path's
filter weights) or the full one (``gconv-full``, App. A: a quarter); in the first layer both
are the lifting convolution. Models with a GCONV path carry p4 feature maps of ``4 * width``
channels (rotation-major, see :mod:`laplace_equivariance.layers.group`); their planar paths
(CONV, F-FC) act on those ``4 * width`` channels, and a maximum over rotations precedes the
head.

Parameter counts (tested): ``conv`` on 3x32x32 with 10 classes and ``alpha=10`` has 338,770
parameters, as the paper's Table 7; FC, FC+CONV, F-FC, F-FC+CONV and the Table 1 models equal
the reference code's exact counts. S-layers carry learnable anchor positions, lengthscales
and (S-FC) position biases, which the reference code does not count (see
:class:`~laplace_equivariance.layers.SparseFactoredLinear2d`); they still round to the
paper's figures.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import Any

import torch
from torch import nn

from laplace_equivariance.layers import (
    N_ROTATIONS,
    RelaxedLayer,
    RotationMaxPool,
)
from laplace_equivariance.layers.init import he_uniform_
from laplace_equivariance.layers.path_kinds import (
    PATH_KINDS,
    PathGeometry,
    Symmetry,
    equivariant_paths,
)
from laplace_equivariance.layers.shapes import check_input_shape

__all__ = [
    "EQUIVARIANT_PATHS",
    "MODEL_NAMES",
    "PATH_NAME",
    "PAPER_INPUTS",
    "PAPER_PARAMETER_COUNTS",
    "RelaxedNet",
    "build",
    "count_parameters",
]

WIDTH_MULTIPLIERS = (1, 2, 2, 4, 4, 8, 8, 16)
SUBSAMPLING_LAYERS = (2, 4, 6, 7, 8)
KERNEL_SIZE = 3

MODEL_NAMES: dict[str, tuple[str, ...]] = {
    "fc": ("fc",),
    "conv": ("conv",),
    "gconv": ("gconv",),
    "gconv-full": ("gconv-full",),
    "fc+conv": ("fc", "conv"),
    "f-fc": ("f-fc",),
    "f-fc+conv": ("f-fc", "conv"),
    "s-fc": ("s-fc",),
    "s-conv": ("s-conv",),
    "s-fc+s-conv": ("s-fc", "s-conv"),
    "f-fc+conv+gconv": ("f-fc", "conv", "gconv"),
    "f-fc+conv+gconv-full": ("f-fc", "conv", "gconv-full"),
}
"""Model name -> the layer types summed in each of its eight layers."""

EQUIVARIANT_PATHS = equivariant_paths()
"""Names of the paths that are translation (and rotation) equivariant by construction
(from :data:`~laplace_equivariance.layers.path_kinds.PATH_KINDS`: ``("conv", "gconv")``)."""

PATH_NAME = {name: kind.path for name, kind in PATH_KINDS.items()}
"""Layer type -> the name of its path inside a relaxed layer (``layer3.fc``, ``layer3.conv``),
for the kinds registered with the package (:mod:`~laplace_equivariance.layers.path_kinds`)."""

PAPER_INPUTS: dict[str, tuple[tuple[int, int, int], int, int, str]] = {
    "table2": ((3, 32, 32), 10, 10, "CIFAR-10 shape, alpha=10"),
    "table1": ((1, 32, 32), 40, 10, "quadrant MNIST, 40 classes, alpha=10"),
    "table3": ((1, 32, 32), 10, 2, "MNIST, alpha=2"),
}
"""Table -> (input shape, classes, alpha, description) of the paper's parameter counts."""

PAPER_PARAMETER_COUNTS: dict[tuple[str, str], dict[str, Any]] = {
    ("table2", "fc"): {"paper": "133.6M", "reference": 133_635_690},
    ("table2", "conv"): {"paper": "0.3M", "reference": 338_770},
    ("table2", "fc+conv"): {"paper": "133.9M", "reference": 133_865_010},
    ("table2", "f-fc"): {"paper": "1.5M", "reference": 1_542_625},
    ("table2", "f-fc+conv"): {"paper": "1.8M", "reference": 1_771_945},
    ("table2", "s-fc"): {"paper": "0.8M", "reference": 831_820},
    ("table2", "s-conv"): {"paper": "0.2M", "reference": None},
    ("table2", "s-fc+s-conv"): {"paper": "1.0M", "reference": 933_990},
    ("table1", "fc"): {"paper": "112.7M", "reference": 112_683_400},
    ("table1", "conv"): {"paper": "0.4M", "reference": 357_820},
    ("table1", "f-fc+conv"): {"paper": "1.8M", "reference": 1_750_035},
    ("table3", "f-fc+conv+gconv"): {"paper": "1.2M", "reference": 1_105_843},
}
"""(table, model) -> the paper's rounded count and the reference code's exact count.

Table 2: 3x32x32, 10 classes, alpha=10. Table 1: 1x32x32, 40 classes, alpha=10. Table 3:
1x32x32 (MNIST), 10 classes, alpha=2; the paper prints 1.2M for every Table 3 row, the
reference code's MNIST model has 1,105,843 (its CIFAR-10 model 1,237,527).
"""


def _path(
    kind: str,
    c_in: int,
    c_out: int,
    size: int,
    out_size: int,
    lifting: bool,
    sparse_options: Mapping[str, Any],
) -> nn.Module:
    """One path of a relaxed layer, built by its registered kind (tensor channels)."""
    geometry = PathGeometry(c_in, c_out, size, out_size, lifting, KERNEL_SIZE, sparse_options)
    return PATH_KINDS[kind].build(geometry)


class RelaxedNet(nn.Module):
    """The App. F.1 network built from :class:`~laplace_equivariance.layers.RelaxedLayer`.

    Args:
        layer_types: The layer types summed in each relaxed layer, e.g. ``("f-fc", "conv")``.
        in_shape: ``(C, 32, 32)``.
        n_classes: ``K``.
        alpha: Width ``a`` of the first layer.
        sparse_options: Passed to the S-layers' anchor bases (``lengthscale``,
            ``lengthscale_mode``, ``learn_positions``).
        widths: Width of every relaxed layer in units of ``alpha`` (App. F.1's
            ``1, 2, 2, 4, 4, 8, 8, 16``); a shorter tuple builds a shallower network.
        subsampling: The (1-based) layers followed by polyphase subsampling; the input
            side must be ``2 ** len(subsampling)``, so that the last map is 1x1.

    Shapes:
        - Input: ``(N, C, S, S)`` with ``S = 2 ** len(subsampling)`` (32 by default).
        - Output: ``(N, K)`` logits.

    Raises:
        ValueError: If ``in_shape`` is not ``(C, S, S)``, a layer type is unknown or
            ``subsampling`` names a layer that does not exist.
    """

    def __init__(
        self,
        layer_types: Sequence[str],
        in_shape: Sequence[int],
        n_classes: int,
        alpha: int = 10,
        sparse_options: Mapping[str, Any] | None = None,
        *,
        widths: Sequence[int] = WIDTH_MULTIPLIERS,
        subsampling: Collection[int] = SUBSAMPLING_LAYERS,
    ) -> None:
        super().__init__()
        in_shape = tuple(int(s) for s in in_shape)
        if not set(subsampling) <= set(range(1, len(widths) + 1)):
            raise ValueError(
                f"subsampling={sorted(subsampling)} names layers outside 1..{len(widths)}."
            )
        side = 2 ** len(subsampling)
        if len(in_shape) != 3 or in_shape[1:] != (side, side):
            raise ValueError(
                f"This architecture takes inputs of shape (C, {side}, {side}) (subsampling "
                f"{len(subsampling)} times to 1x1), got in_shape={in_shape}; resize or pad the "
                "images first."
            )
        unknown = [t for t in layer_types if t not in PATH_KINDS]
        if unknown:
            raise ValueError(f"Unknown layer types {unknown}; known: {sorted(PATH_KINDS)}.")
        self.in_shape = in_shape
        self.layer_types = tuple(layer_types)
        self.group = any(
            PATH_KINDS[kind].symmetry is Symmetry.TRANSLATIONS_AND_QUARTER_TURNS
            for kind in self.layer_types
        )
        multiplicity = N_ROTATIONS if self.group else 1
        sparse_options = dict(sparse_options or {})
        self.n_layers = len(widths)
        c_in, size = in_shape[0], side
        for index, multiplier in enumerate(widths, start=1):
            c_out = multiplicity * alpha * multiplier
            subsample = index in subsampling
            out_size = size // 2 if subsample else size
            kinds = [PATH_KINDS[kind] for kind in self.layer_types]
            paths = {
                kind.path: _path(
                    kind.name,
                    c_in,
                    c_out,
                    size,
                    out_size if kind.direct else size,
                    lifting=index == 1,
                    sparse_options=sparse_options,
                )
                for kind in kinds
            }
            direct = [kind.path for kind in kinds if kind.direct and subsample]
            self.add_module(f"layer{index}", RelaxedLayer(paths, subsample, direct))
            c_in, size = c_out, out_size
        self.rotation_pool = RotationMaxPool() if self.group else None
        width = alpha * widths[-1]
        head = [nn.Linear(width, 4 * width), nn.Linear(4 * width, n_classes)]
        for index, linear in enumerate(head, start=self.n_layers + 1):
            self.add_module(f"layer{index}", linear)
        he_uniform_(head[0].weight, width)
        nn.init.zeros_(head[0].bias)
        nn.init.zeros_(head[1].bias)

    @property
    def relaxed_layers(self) -> list[RelaxedLayer]:
        """The relaxed layers (eight in App. F.1), in order."""
        return [getattr(self, f"layer{i}") for i in range(1, self.n_layers + 1)]

    def start_equivariant_(self, keep: Collection[str] = EQUIVARIANT_PATHS) -> None:
        """Start from an equivariant point of the model class: the other paths silenced.

        Each relaxed layer's paths outside ``keep`` get a zero output
        (:meth:`~laplace_equivariance.layers.RelaxedLayer.silence_`: its last map zeroed, an
        F-FC path's input map kept random so that training can switch the path on) and the
        kept paths are scaled so the layer keeps its second moment at initialisation. By
        default every FC-type path is silenced: the network computes what its CONV (or
        CONV+GCONV) network does, and a path whose precision the marginal likelihood learns
        starts where Eq. 8's equivariant limit puts it. ``keep=("gconv",)`` starts an
        F-FC+CONV+GCONV network as its GCONV network, equivariant to quarter turns too (its
        CONV paths, which relax the rotations, silenced as well; ``train --start
        held-gconv``). Which starting point training reaches the higher evidence from is
        measured in docs/learned_structure.md ("Where training starts"; for the GCONV start,
        "A known truth for rotations" and docs/results-table3.md's Table 3 at 60 epochs).

        Args:
            keep: Names of the equivariant paths left as drawn (default ``("conv",
                "gconv")``: those equivariant to translations).

        Raises:
            ValueError: If ``keep`` names a path that is not equivariant, or a relaxed layer
                has none of the kept paths (an FC or F-FC network would compute zero).
        """
        kept = self._kept_paths(keep)
        for layer in self.relaxed_layers:
            layer.silence_([n for n in layer.path_names if n not in kept])

    def non_equivariant_parameters(
        self, keep: Collection[str] = EQUIVARIANT_PATHS
    ) -> list[nn.Parameter]:
        """The parameters of every path :meth:`start_equivariant_` silences, in order.

        With the default ``keep``: the FC-type paths (FC, F-FC, S-FC); with ``("gconv",)`` the
        CONV paths too. Give them to
        :func:`~laplace_equivariance.marglik_training`'s ``held_until_fit`` to keep them
        silent until the first marginal-likelihood fit.

        Args:
            keep: As for :meth:`start_equivariant_` (the same value).

        Raises:
            ValueError: As :meth:`start_equivariant_`.
        """
        kept = self._kept_paths(keep)
        return [
            p
            for layer in self.relaxed_layers
            for name in layer.path_names
            if name not in kept
            for p in layer.path(name).parameters()
        ]

    def _kept_paths(self, keep: Collection[str]) -> tuple[str, ...]:
        """``keep`` checked against this model."""
        kept = tuple(keep)
        wrong = [n for n in kept if n not in EQUIVARIANT_PATHS]
        if wrong:
            raise ValueError(
                f"keep={list(kept)} names {wrong}, which is not an equivariant path; keep some "
                f"of {list(EQUIVARIANT_PATHS)}."
            )
        without = [
            f"layer{i}"
            for i, layer in enumerate(self.relaxed_layers, start=1)
            if not set(layer.path_names) & set(kept)
        ]
        if without:
            raise ValueError(
                f"{', '.join(without)} of this {'+'.join(self.layer_types)} network has no "
                f"equivariant path ({' or '.join(kept)}) to start from; start_equivariant_ "
                "needs a relaxed model such as f-fc+conv, and keep= paths the model has."
            )
        return kept

    def features(self, x: torch.Tensor) -> torch.Tensor:
        """The invariant features that enter the head.

        Args:
            x: Images of shape ``(N, C, 32, 32)``.

        Returns:
            Features of shape ``(N, 16a)``.
        """
        check_input_shape(x, self.in_shape, type(self).__name__)
        for layer in self.relaxed_layers:
            x = torch.relu(layer(x))
        if self.rotation_pool is not None:
            x = self.rotation_pool(x)
        return x.flatten(start_dim=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Compute logits.

        Args:
            x: Images of shape ``(N, C, 32, 32)``.

        Returns:
            Logits of shape ``(N, K)``.
        """
        hidden = getattr(self, f"layer{self.n_layers + 1}")
        output = getattr(self, f"layer{self.n_layers + 2}")
        return output(torch.relu(hidden(self.features(x))))

    def translation_invariance_error(self, x: torch.Tensor, shift: tuple[int, int]) -> float:
        """Largest change of the logits under a circular translation of the inputs.

        Zero (to rounding) for a network whose every path is a CONV/S-CONV/GCONV path.

        Args:
            x: Images of shape ``(N, C, 32, 32)``.
            shift: Pixels ``(dx, dy)`` to roll the images by.

        Returns:
            ``max |f(T x) - f(x)|``.
        """
        shifted = torch.roll(x, shifts=shift, dims=(-2, -1))
        return (self(shifted) - self(x)).abs().max().item()

    def rotation_invariance_error(self, x: torch.Tensor, k: int = 1) -> float:
        """Largest change of the logits under a rotation of the inputs by ``k * 90`` degrees.

        Zero (to rounding) for a network whose every path is a GCONV path.

        Args:
            x: Images of shape ``(N, C, 32, 32)``.
            k: Number of quarter turns.

        Returns:
            ``max |f(R x) - f(x)|``.
        """
        rotated = torch.rot90(x, k, dims=(-2, -1))
        return (self(rotated) - self(x)).abs().max().item()


def build(
    name: str,
    in_shape: Sequence[int],
    n_classes: int,
    alpha: int = 10,
    sparse_options: Mapping[str, Any] | None = None,
    *,
    widths: Sequence[int] = WIDTH_MULTIPLIERS,
    subsampling: Collection[int] = SUBSAMPLING_LAYERS,
) -> RelaxedNet:
    """Build the App. F.1 network with the layer types named by ``name``.

    Args:
        name: One of :data:`MODEL_NAMES` (``"fc"``, ``"conv"``, ``"fc+conv"``, ``"f-fc"``,
            ``"f-fc+conv"``, ``"s-fc"``, ``"s-conv"``, ``"s-fc+s-conv"``, ``"gconv"``,
            ``"gconv-full"``, ``"f-fc+conv+gconv"``, ``"f-fc+conv+gconv-full"``).
        in_shape: ``(C, 32, 32)``.
        n_classes: Number of classes ``K``.
        alpha: Width of the first layer (10 for Tables 1-2, 2 per path for Table 3).
        sparse_options: Options for the S-layers' anchor bases.
        widths: Layer widths in units of ``alpha`` (App. F.1's by default).
        subsampling: Layers followed by subsampling (App. F.1's by default); the input side
            is ``2 ** len(subsampling)``.

    Returns:
        The network. Build under ``torch.device("meta")`` to count parameters without
        allocating them.

    Raises:
        ValueError: If ``name`` is unknown or ``in_shape`` is not ``(C, 32, 32)``.
    """
    if name not in MODEL_NAMES:
        raise ValueError(f"Unknown model {name!r}; choose one of {list(MODEL_NAMES)}.")
    return RelaxedNet(
        MODEL_NAMES[name],
        in_shape,
        n_classes,
        alpha,
        sparse_options,
        widths=widths,
        subsampling=subsampling,
    )


def count_parameters(model: nn.Module) -> int:
    """Number of trainable parameters (those a Laplace approximation covers).

    Args:
        model: Any module.

    Returns:
        The sum of ``p.numel()`` over parameters with ``requires_grad``.
    """
    return sum(p.numel() for p in model.parameters() if p.requires_grad)
