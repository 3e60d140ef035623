"""The studies that reproduce the paper and test its claims: scripts run from the repository
root as ``python -m studies.NAME``, their run lists (``studies/runs/``) and their results
(``studies/results/``, one folder per study; each training run's ``results.json``).

ASDL 0.1a4's FutureWarning at import is silenced here as in :mod:`benchmarks` (the scripts
import laplace-torch themselves).
"""

import warnings

warnings.filterwarnings(
    "ignore", message=r"`torch\.jit\.script` is deprecated", category=FutureWarning
)
