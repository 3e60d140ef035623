"""``python -m laplace_equivariance``: the command line."""

import sys

from laplace_equivariance.cli import main

sys.exit(main())
