"""Fixtures shared by the tests of the scripts that measure trained runs."""

import pytest

from laplace_equivariance.app.cli import main

TINY = ["--subset", "64", "--test-subset", "16", "--epochs", "2", "--alpha", "1"]
TINY += ["--burnin", "1", "--marglik-frequency", "1", "--hypersteps", "1", "--device", "cpu"]
"""A learned run of seconds: 64 training images, two epochs, a fit after each."""


@pytest.fixture(scope="session")
def mixed_quadrant_run(tmp_path_factory):
    """A tiny learned F-FC+CONV run on quadrant MNIST, started mixed (its FC paths on)."""
    out = tmp_path_factory.mktemp("runs") / "learned"
    argv = ["train", "--dataset", "quadrant-mnist", "--model", "f-fc+conv", "--start", "mixed"]
    assert main([*argv, "--out", str(out), *TINY]) == 0
    return out
