"""Random data and device-synchronised wall-clock time, shared by the speed benchmarks."""

from __future__ import annotations

import time
from collections.abc import Callable

import torch
from torch.utils.data import DataLoader, TensorDataset

CLASSES = 10
"""Classes of the random labels (the paper's data sets have 10)."""


def loader(n: int, batch: int, device: str) -> DataLoader:
    """``n`` random ``3 x 32 x 32`` inputs and labels of :data:`CLASSES` classes, held on
    ``device``, in batches of ``batch`` (seeded: every call gives the same data)."""
    g = torch.Generator().manual_seed(0)
    x = torch.randn(n, 3, 32, 32, generator=g).to(device)
    y = torch.randint(0, CLASSES, (n,), generator=g).to(device)
    return DataLoader(TensorDataset(x, y), batch_size=batch)


def synchronise(device: str) -> None:
    """Wait for a GPU's queued work (``cuda`` or ``cuda:N``); nothing on the CPU."""
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def seconds(run: Callable[[], object], device: str) -> float:
    """Wall-clock seconds of ``run()``, the device's queued work included."""
    synchronise(device)
    start = time.perf_counter()
    run()
    synchronise(device)
    return time.perf_counter() - start
