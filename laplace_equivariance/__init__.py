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
  :class:`NotLearningWarning`: a classifier whose training accuracy is at chance where its
  burn-in ends.
- :mod:`laplace_equivariance.invariance`: the older method we compare with, learned
  invariant weights (:class:`InvariantWeightsNet`, :func:`train_invariant_weights` with the
  ELBO or a Laplace marginal likelihood).
"""

import warnings

with warnings.catch_warnings():
    # ASDL 0.1a4 (its PSGD kernels) and linear_operator (laplace-torch imports it) compile
    # functions with torch.jit.script at import, which torch deprecates with a FutureWarning
    # that a user cannot act on
    warnings.filterwarnings("ignore", message=r"`torch\.jit\.script` is deprecated")
    import asdl  # noqa: F401
    import laplace  # noqa: F401

from laplace_equivariance import curvature, diagnostics, invariance, layers, models
from laplace_equivariance.chance import NotLearningWarning
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
from laplace_equivariance.marglik import (
    CheckpointError,
    marglik_step_epochs,
    marglik_training,
    paper_schedule,
)
from laplace_equivariance.models import RelaxedNet, build, count_parameters
from laplace_equivariance.priors import PriorGroups, PriorStructure

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
    "symmetry_report",
    "train_invariant_weights",
]
