"""The relaxed-equivariance layer library: one file per layer family (paper Sec. 3, App. F)."""

from laplace_equivariance.layers.conv import CircularConv2d
from laplace_equivariance.layers.dense import FullyConnected2d
from laplace_equivariance.layers.equivariance import (
    EquivarianceCheck,
    QuarterTurn,
    Shift,
    equivariance_error,
)
from laplace_equivariance.layers.factored import (
    FactoredInputMap,
    FactoredLinear2d,
    FactoredOutputMap,
)
from laplace_equivariance.layers.group import (
    N_ROTATIONS,
    P4GroupConv2d,
    P4LiftingConv2d,
    P4PointwiseConv2d,
    RotationMaxPool,
    rotate_p4,
)
from laplace_equivariance.layers.path_kinds import (
    PATH_KINDS,
    PathGeometry,
    PathKind,
    Symmetry,
    register_path_kind,
)
from laplace_equivariance.layers.paths import RelaxedLayer
from laplace_equivariance.layers.pooling import PolyphaseSubsample2d
from laplace_equivariance.layers.sparse import (
    AnchorBasis,
    LengthscaleMode,
    SparseCircularConv2d,
    SparseFactoredInputMap,
    SparseFactoredLinear2d,
    SparseFactoredOutputMap,
)

__all__ = [
    "N_ROTATIONS",
    "PATH_KINDS",
    "AnchorBasis",
    "CircularConv2d",
    "EquivarianceCheck",
    "FactoredInputMap",
    "FactoredLinear2d",
    "FactoredOutputMap",
    "FullyConnected2d",
    "LengthscaleMode",
    "P4GroupConv2d",
    "P4LiftingConv2d",
    "P4PointwiseConv2d",
    "PathGeometry",
    "PathKind",
    "PolyphaseSubsample2d",
    "QuarterTurn",
    "RelaxedLayer",
    "RotationMaxPool",
    "Shift",
    "SparseCircularConv2d",
    "SparseFactoredInputMap",
    "SparseFactoredLinear2d",
    "SparseFactoredOutputMap",
    "Symmetry",
    "equivariance_error",
    "register_path_kind",
    "rotate_p4",
]
