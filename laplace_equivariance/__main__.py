"""``python -m laplace_equivariance``: the command line."""

import sys

from laplace_equivariance.app.cli import main

sys.exit(main())
