"""laplace-equivariance: learn layer-wise equivariance with Kronecker-factored Laplace.

Public API:

- :mod:`laplace_equivariance.layers`: the relaxed-equivariance layers (FC, CONV, F-FC, S-FC,
  S-CONV, GCONV, polyphase subsampling, relaxed layers as sums of paths).
- :func:`laplace_equivariance.models.build`: the paper's architecture for every layer type.
- :class:`EquivariantKFAC`: the laplace-torch curvature backend for these layers.
"""

from laplace_equivariance import curvature, layers, models
from laplace_equivariance.curvature import EquivariantKFAC, UnsupportedModuleError
from laplace_equivariance.models import RelaxedNet, build, count_parameters

__version__ = "0.1.0"

__all__ = [
    "EquivariantKFAC",
    "RelaxedNet",
    "UnsupportedModuleError",
    "__version__",
    "build",
    "count_parameters",
    "curvature",
    "layers",
    "models",
]
