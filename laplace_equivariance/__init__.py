"""laplace-equivariance: learn layer-wise equivariance with Kronecker-factored Laplace.

Public API:

- :mod:`laplace_equivariance.layers`: the relaxed-equivariance layers (FC, CONV, F-FC, S-FC,
  S-CONV, GCONV, polyphase subsampling, relaxed layers as sums of paths).
- :func:`laplace_equivariance.models.build`: the paper's architecture for every layer type.
- :class:`EquivariantKFAC`: the laplace-torch curvature backend for these layers.
- :func:`symmetry_report`, :func:`plot_symmetry`: the learned symmetry per layer and path;
  :func:`path_output_shares`: how much of each layer's output each path carries on data;
  :func:`path_shift_errors`: how far each path is from equivariant to one circular shift.
- :func:`marglik_training`: laplace-torch's ``marglik_training`` (same parameters and
  results on stock models) with per-path priors, lengthscale hyperparameters, checkpoints
  (:class:`CheckpointError` for one that cannot be read or used);
  :func:`paper_schedule`: the paper's schedule as its keyword arguments;
  :func:`marglik_step_epochs`: which epochs of a schedule learn the priors;
  :class:`NotLearningWarning`: a classifier whose training accuracy is at chance in the
  epoch of its first fit.
- :func:`relax`: your own CNN's convolutions as relaxed layers (CONV path the original
  convolution, non-equivariant paths added at zero); :func:`fold`: back to plain
  convolutions where the data left them so.
- :mod:`laplace_equivariance.invariance`: the older method we compare with, learned
  invariant weights (:class:`InvariantWeightsNet`, :func:`train_invariant_weights` with the
  ELBO or a Laplace marginal likelihood).
"""

from __future__ import annotations

import importlib
import importlib.abc
import sys
import warnings
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # what a type checker sees; at run time __getattr__ imports them on first use
    from laplace_equivariance import curvature, diagnostics, invariance, layers, models
    from laplace_equivariance.curvature import (
        EquivariantKFAC,
        UnsupportedBackendError,
        UnsupportedModuleError,
    )
    from laplace_equivariance.diagnostics import (
        effective_parameters,
        occam_terms,
        path_output_shares,
        path_shift_errors,
        plot_symmetry,
        symmetry_report,
    )
    from laplace_equivariance.invariance import InvariantWeightsNet, train_invariant_weights
    from laplace_equivariance.marglik.chance import NotLearningWarning
    from laplace_equivariance.marglik.priors import PriorGroups, PriorStructure
    from laplace_equivariance.marglik.training import (
        CheckpointError,
        marglik_step_epochs,
        marglik_training,
        paper_schedule,
    )
    from laplace_equivariance.models import RelaxedNet, build, count_parameters
    from laplace_equivariance.relaxation import fold, relax

__version__ = "0.4.0"

__all__ = [
    "CheckpointError",
    "EquivariantKFAC",
    "InvariantWeightsNet",
    "NotLearningWarning",
    "PriorGroups",
    "PriorStructure",
    "RelaxedNet",
    "UnsupportedBackendError",
    "UnsupportedModuleError",
    "__version__",
    "build",
    "count_parameters",
    "curvature",
    "diagnostics",
    "effective_parameters",
    "fold",
    "invariance",
    "layers",
    "marglik_step_epochs",
    "marglik_training",
    "models",
    "occam_terms",
    "paper_schedule",
    "path_output_shares",
    "path_shift_errors",
    "plot_symmetry",
    "relax",
    "symmetry_report",
    "train_invariant_weights",
]


_HOMES = {
    "curvature": "curvature",
    "diagnostics": "diagnostics",
    "invariance": "invariance",
    "layers": "layers",
    "models": "models",
    "NotLearningWarning": "marglik.chance",
    "EquivariantKFAC": "curvature",
    "UnsupportedBackendError": "curvature",
    "UnsupportedModuleError": "curvature",
    "effective_parameters": "diagnostics",
    "occam_terms": "diagnostics",
    "path_output_shares": "diagnostics",
    "path_shift_errors": "diagnostics",
    "plot_symmetry": "diagnostics",
    "symmetry_report": "diagnostics",
    "InvariantWeightsNet": "invariance",
    "train_invariant_weights": "invariance",
    "CheckpointError": "marglik.training",
    "marglik_step_epochs": "marglik.training",
    "marglik_training": "marglik.training",
    "paper_schedule": "marglik.training",
    "RelaxedNet": "models",
    "build": "models",
    "count_parameters": "models",
    "PriorGroups": "marglik.priors",
    "PriorStructure": "marglik.priors",
    "relax": "relaxation",
    "fold": "relaxation",
}
"""The module of each public name (a submodule: itself), in the order the library imports them."""

LIGHT_MODULES = (f"{__name__}.app", f"{__name__}.app.cli", f"{__name__}.__main__")
"""Submodules that import without the library: the command line imports it when a command runs,
so that ``--help`` and ``--version`` answer at once (no torch)."""


def _load() -> None:
    """Import the library: ASDL and laplace-torch, then every module of a public name.

    Once, on the first use of a public name (:func:`__getattr__`) or the first import of a
    submodule other than :data:`LIGHT_MODULES` (:class:`_LibraryFirst`): what importing the
    package did before the command line needed a light one, in the same order, so the
    curvature backend has registered its layers with ASDL and laplace-torch before anything
    else of the package runs.
    """
    if _LIBRARY_FIRST not in sys.meta_path:  # loaded, or loading (a module imported below)
        return
    sys.meta_path.remove(_LIBRARY_FIRST)
    try:
        with warnings.catch_warnings():
            # ASDL 0.1a4 (its PSGD kernels) and linear_operator (laplace-torch imports it)
            # compile functions with torch.jit.script at import, which torch deprecates with a
            # FutureWarning that a user cannot act on
            warnings.filterwarnings("ignore", message=r"`torch\.jit\.script` is deprecated")
            import asdl  # noqa: F401
            import laplace  # noqa: F401
        for name, home in _HOMES.items():
            module = importlib.import_module(f"{__name__}.{home}")
            globals()[name] = module if name == home else getattr(module, name)
    except BaseException:
        sys.meta_path.insert(0, _LIBRARY_FIRST)  # the next use tries again and raises again
        raise


class _LibraryFirst(importlib.abc.MetaPathFinder):
    """Loads the library (:func:`_load`) before the first of its submodules is imported."""

    def find_spec(self, fullname: str, path: Any, target: Any = None) -> None:
        """Load the library for a submodule of it; find nothing (the usual finders do)."""
        if fullname.startswith(f"{__name__}.") and fullname not in LIGHT_MODULES:
            _load()


_LIBRARY_FIRST = _LibraryFirst()
sys.meta_path.insert(0, _LIBRARY_FIRST)


def __getattr__(name: str) -> Any:
    """A public name, the library imported on its first use (PEP 562).

    ``import laplace_equivariance`` imports no torch, so that the command line answers
    ``--help`` and ``--version`` at once.
    """
    if name in _HOMES:
        _load()
        if name in globals():
            return globals()[name]
        if name != _HOMES[name]:  # while loading: what its module defines by now
            return getattr(importlib.import_module(f"{__name__}.{_HOMES[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
