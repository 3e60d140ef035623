"""How fast a run's device multiplies float32 matrices: the speed behind its minutes.

A CPU's model name does not tell machines apart: two virtual machines that both report
"AMD EPYC" trained Table 3's network four times apart in speed, so the minutes of runs from
the two cannot be compared by the name alone. Each run therefore records, beside its
``train_seconds``, the speed of a fixed float32 matrix product on its device at its thread
count (``results.json``'s ``device_gflops``), and the results tables show it per row
(:meth:`laplace_equivariance.app.summary.Row.machine`). The timing also sees whatever else the
machine runs: a busy machine reads slower, which is what its minutes do too.
"""

from __future__ import annotations

import time

import torch

SIZE = 512
"""Side of the square matrices multiplied: ``2 * SIZE**3`` floating-point operations each."""


def matmul_gflops(device: str | torch.device = "cpu", repeats: int = 5, products: int = 4) -> float:
    """The speed of float32 ``SIZE x SIZE`` matrix products on ``device``, in GFLOP/s.

    Timed at torch's current thread count, after one product to warm up, as the best of
    ``repeats`` timings of ``products`` products each: the best, since the others include
    whatever else the machine was doing. The matrices come from a generator of their own, so
    the global random state (and with it a run's seeded draws) is untouched. About 0.2 s on one
    thread of a 2-core CPU.

    Args:
        device: Where to multiply (``"cpu"``, ``"cuda"``, ``"cuda:1"``).
        repeats: Timings taken; the best is kept.
        products: Products per timing.

    Returns:
        Floating-point operations per second over ``1e9``.
    """
    if repeats < 1 or products < 1:
        raise ValueError(f"repeats and products must be at least 1, not {repeats} and {products}")
    generator = torch.Generator().manual_seed(0)
    a, b = (torch.randn(SIZE, SIZE, generator=generator).to(device) for _ in range(2))
    torch.mm(a, b)
    best = float("inf")
    for _ in range(repeats):
        _synchronise(a.device)
        start = time.perf_counter()
        for _ in range(products):
            torch.mm(a, b)
        _synchronise(a.device)
        best = min(best, time.perf_counter() - start)
    return 2 * SIZE**3 * products / best / 1e9


def _synchronise(device: torch.device) -> None:
    """Wait for ``device``'s queued work (a CUDA kernel returns before it has run)."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)
