"""KFAC rules for the relaxed-equivariance layers and the laplace-torch backend (paper Sec. 5)."""

from laplace_equivariance.curvature.backend import EquivariantKFAC
from laplace_equivariance.curvature.kron import BlockDiagonalKron, BlockDiagonalKronDecomposed
from laplace_equivariance.curvature.registry import (
    UnsupportedBackendError,
    install_construction_check,
    install_fit_hook,
    install_kron_initialiser,
    install_predictive_chunking,
    install_state_dict_hooks,
    register_with_asdl,
)
from laplace_equivariance.curvature.rules import RULES, KroneckerRule
from laplace_equivariance.curvature.support import UnsupportedModuleError

__all__ = [
    "RULES",
    "BlockDiagonalKron",
    "BlockDiagonalKronDecomposed",
    "EquivariantKFAC",
    "KroneckerRule",
    "UnsupportedBackendError",
    "UnsupportedModuleError",
    "install_fit_hook",
    "install_construction_check",
    "install_kron_initialiser",
    "install_predictive_chunking",
    "install_state_dict_hooks",
    "register_with_asdl",
]
