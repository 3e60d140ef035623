"""Subnormal floats flushed to zero in a run's CPU arithmetic (x86's FTZ and DAZ modes).

A weight that its prior drives towards zero passes through the subnormal floats (below
``torch.finfo(torch.float32).tiny``, about 1.2e-38), and x86 CPUs compute with those about a
hundred times slower than with normal floats. A switched-off FC path, or a MAP FC network under
its prior at the paper's long schedule, fills with them, and its CPU epochs slow down several
times over (CHANGELOG). Flushing them to zero costs nothing and changes a result only below that
floor (GPUs compute with subnormals at full speed, so a CUDA run is unaffected).

The mode belongs to a CPU thread; threads that the calling thread starts afterwards inherit it
(POSIX), torch's intra-op threads started before do not.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import torch

__all__ = ["flush_subnormals", "flushing_subnormals"]

SUBNORMAL = 1e-39
"""A subnormal float32 (below ``torch.finfo(torch.float32).tiny``)."""


def flushing_subnormals() -> bool:
    """Whether this thread's CPU arithmetic flushes subnormal float32 values to zero now.

    torch has no getter for :func:`torch.set_flush_denormal`; a product of a subnormal is
    zero exactly when the mode is on.
    """
    return torch.tensor([SUBNORMAL], dtype=torch.float32).mul(1.0).item() == 0.0


@contextlib.contextmanager
def flush_subnormals() -> Iterator[bool]:
    """Flush subnormal floats to zero in this thread's CPU arithmetic, then restore the mode.

    Yields:
        Whether the CPU flushes them (False where it has no such mode; the run is then as
        without this context).
    """
    before = flushing_subnormals()
    supported = torch.set_flush_denormal(True)
    try:
        yield supported
    finally:
        torch.set_flush_denormal(before)
