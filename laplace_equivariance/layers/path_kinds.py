"""Path kinds, registered once: what each layer type of a relaxed layer is and how it is built.

A relaxed layer (paper Eq. 4) sums paths of several kinds. Each kind is one
:class:`PathKind` record in :data:`PATH_KINDS`: its name in model names (``"f-fc"``), the
name of its path inside a relaxed layer (``"fc"``, so ``layer3.fc.input_map.weight``), the
symmetry it has by construction, whether it maps straight onto a subsampled grid, how it is
built, and the module classes it builds (every part of them with parameters needs a KFAC rule
in :mod:`laplace_equivariance.curvature.rules`, which ``tests/layers/test_path_kinds.py``
checks for every registered kind, as it checks each kind's symmetry).
:mod:`laplace_equivariance.models` reads the records; a new kind is one
:func:`register_path_kind` call with its module and its rule.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from torch import nn

from laplace_equivariance.layers.conv import CircularConv2d
from laplace_equivariance.layers.dense import FullyConnected2d
from laplace_equivariance.layers.equivariance import QuarterTurn, Shift, Transform
from laplace_equivariance.layers.factored import FactoredLinear2d
from laplace_equivariance.layers.group import (
    N_ROTATIONS,
    P4GroupConv2d,
    P4LiftingConv2d,
    P4PointwiseConv2d,
)
from laplace_equivariance.layers.sparse import SparseCircularConv2d, SparseFactoredLinear2d

__all__ = [
    "PATH_KINDS",
    "PathGeometry",
    "PathKind",
    "Symmetry",
    "equivariant_paths",
    "register_path_kind",
]


class Symmetry(Enum):
    """The transformations a path kind is equivariant to by construction.

    Each member is a description and the transformations that generate its group
    (:attr:`generators`): a path of the kind commutes with each of them exactly (up to
    rounding), which ``tests/layers/test_equivariance.py`` checks for every registered kind,
    probing it with the generators of every symmetry (any other must fail).
    """

    NONE = ("none", ())
    """No constraint: the FC-type paths (FC, F-FC, S-FC)."""
    TRANSLATIONS = ("translations", (Shift(1, 0), Shift(0, 1)))
    """Circular translations of the grid: CONV and S-CONV (Eq. 2)."""
    TRANSLATIONS_AND_QUARTER_TURNS = (
        "translations and quarter turns",
        (Shift(1, 0), Shift(0, 1), QuarterTurn(1)),
    )
    """The p4 group, translations and rotations by 90 degrees: GCONV (App. A)."""

    def __init__(self, description: str, generators: tuple[Transform, ...]) -> None:
        self.description = description
        self.generators = generators

    def includes(self, transform: type) -> bool:
        """Whether a generator of the group is a ``transform`` (a :class:`Shift`, ...)."""
        return any(isinstance(g, transform) for g in self.generators)


@dataclass(frozen=True)
class PathGeometry:
    """Where a path sits in the network: what :attr:`PathKind.build` needs to build it.

    Attributes:
        in_channels: Tensor channels of the layer's input (``4 * C`` for p4 feature maps).
        out_channels: Tensor channels of its output.
        size: Side of the input grid.
        out_size: Side of the path's output grid (the subsampled one for a direct path at a
            subsampling layer, else ``size``).
        lifting: Whether this is the network's first layer (a group convolution lifts).
        kernel_size: Filter side of the convolution paths.
        sparse_options: Options of the S-layers' anchor bases.
    """

    in_channels: int
    out_channels: int
    size: int
    out_size: int
    lifting: bool = False
    kernel_size: int = 3
    sparse_options: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class PathKind:
    """One kind of path of a relaxed layer.

    Attributes:
        name: The layer type as model names write it (``"f-fc"``).
        path: The path's name inside a relaxed layer (``"fc"``); kinds that share it are
            alternatives, never in one layer together.
        symmetry: What it is equivariant to by construction.
        direct: Whether it maps straight onto a subsampled grid (FC-type paths) rather than
            being subsampled with the other grid paths.
        build: ``geometry -> module``.
        modules: The module classes ``build`` makes (each must have a KFAC rule).
        description: One line for the docs.
    """

    name: str
    path: str
    symmetry: Symmetry
    direct: bool
    build: Callable[[PathGeometry], nn.Module]
    modules: tuple[type[nn.Module], ...]
    description: str


PATH_KINDS: dict[str, PathKind] = {}
"""Layer type -> its record, in registration order (the order of :data:`models.MODEL_NAMES`'s
paths)."""


def register_path_kind(kind: PathKind) -> PathKind:
    """Add ``kind`` to :data:`PATH_KINDS`.

    Args:
        kind: The record.

    Returns:
        ``kind``.

    Raises:
        ValueError: If a kind of that name exists, or its path name is not an identifier.
    """
    if kind.name in PATH_KINDS:
        raise ValueError(f"A path kind {kind.name!r} is registered already.")
    if not kind.path.isidentifier():
        raise ValueError(f"Path name {kind.path!r} must be a Python identifier.")
    PATH_KINDS[kind.name] = kind
    return kind


def equivariant_paths() -> tuple[str, ...]:
    """Path names of the kinds equivariant to translations (at least), in registration order."""
    return tuple(
        dict.fromkeys(k.path for k in PATH_KINDS.values() if k.symmetry is not Symmetry.NONE)
    )


def _group_convolution(full: bool) -> Callable[[PathGeometry], nn.Module]:
    """GCONV's builder: the lifting convolution in the first layer, else pointwise or full."""

    def build(g: PathGeometry) -> nn.Module:
        if g.lifting:
            return P4LiftingConv2d(
                g.in_channels, g.out_channels // N_ROTATIONS, g.kernel_size, g.size
            )
        layer = P4GroupConv2d if full else P4PointwiseConv2d
        return layer(
            g.in_channels // N_ROTATIONS, g.out_channels // N_ROTATIONS, g.kernel_size, g.size
        )

    return build


for _kind in (
    PathKind(
        "fc",
        "fc",
        Symmetry.NONE,
        True,
        lambda g: FullyConnected2d(g.in_channels, g.out_channels, g.size, g.out_size),
        (FullyConnected2d,),
        "fully connected (Eq. 1)",
    ),
    PathKind(
        "f-fc",
        "fc",
        Symmetry.NONE,
        True,
        lambda g: FactoredLinear2d(g.in_channels, g.out_channels, g.size, g.out_size),
        (FactoredLinear2d,),
        "factored fully connected (Eq. 5)",
    ),
    PathKind(
        "s-fc",
        "fc",
        Symmetry.NONE,
        True,
        lambda g: SparseFactoredLinear2d(
            g.in_channels, g.out_channels, g.size, g.out_size, **g.sparse_options
        ),
        (SparseFactoredLinear2d,),
        "sparsified factored fully connected (Eq. 7)",
    ),
    PathKind(
        "conv",
        "conv",
        Symmetry.TRANSLATIONS,
        False,
        lambda g: CircularConv2d(g.in_channels, g.out_channels, g.kernel_size, g.size),
        (CircularConv2d,),
        "circular convolution (Eq. 2)",
    ),
    PathKind(
        "s-conv",
        "conv",
        Symmetry.TRANSLATIONS,
        False,
        lambda g: SparseCircularConv2d(
            g.in_channels, g.out_channels, g.kernel_size, g.size, **g.sparse_options
        ),
        (SparseCircularConv2d,),
        "sparsified circular convolution (Eq. 6)",
    ),
    PathKind(
        "gconv",
        "gconv",
        Symmetry.TRANSLATIONS_AND_QUARTER_TURNS,
        False,
        _group_convolution(full=False),
        (P4LiftingConv2d, P4PointwiseConv2d),
        "pointwise p4 group convolution (App. F.3)",
    ),
    PathKind(
        "gconv-full",
        "gconv",
        Symmetry.TRANSLATIONS_AND_QUARTER_TURNS,
        False,
        _group_convolution(full=True),
        (P4LiftingConv2d, P4GroupConv2d),
        "full p4 group convolution (App. A)",
    ),
):
    register_path_kind(_kind)
