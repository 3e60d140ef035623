"""Count the points where a computation reads a tensor's value on the host.

On a GPU each such read (``.item()``, ``float()``, ``bool()`` of a tensor, ``nonzero``, a
``repeat_interleave`` without ``output_size``) waits for every queued kernel. Counted with
``torch.profiler`` as the ``aten::_local_scalar_dense`` and ``aten::nonzero`` operators, which
the same code runs on every device, so CPU tests catch them. ``.tolist()`` of a CPU tensor
runs no operator and is not counted (on a GPU it is one copy to the host, one wait).
"""

from __future__ import annotations

from collections.abc import Callable

from torch.profiler import ProfilerActivity, profile

HOST_READS = ("aten::_local_scalar_dense", "aten::nonzero")


def host_reads(run: Callable[[], object]) -> int:
    """How many host reads ``run()`` makes."""
    with profile(activities=[ProfilerActivity.CPU]) as trace:
        run()
    return sum(event.name in HOST_READS for event in trace.events())
