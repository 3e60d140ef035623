"""Speed benchmarks: timings and work counts of the package against stock baselines, each run
from the repository root as ``python -m benchmarks.NAME``; their reports are under
``benchmarks/results/``. The studies that reproduce the paper are in ``studies/``, the
renderer of the documentation's results pages in ``pages/``.

Scripts import laplace-torch themselves, and ASDL 0.1a4 (which it imports) compiles functions
with ``torch.jit.script`` at import, which torch deprecates with a FutureWarning that a user
cannot act on; the package silences it for its own import, and so do the scripts here (it was
the first line ``make demo`` printed).
"""

import warnings

warnings.filterwarnings(
    "ignore", message=r"`torch\.jit\.script` is deprecated", category=FutureWarning
)
