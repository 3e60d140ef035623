"""Shared fixtures: devices (CPU always, CUDA when present), fixed seeds, the thread count."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import torch

DEVICES = [torch.device("cpu")] + ([torch.device("cuda")] if torch.cuda.is_available() else [])
DEVICE_IDS = [f"dev={d.type}" for d in DEVICES]


@pytest.fixture(params=DEVICES, ids=DEVICE_IDS)
def device(request) -> torch.device:
    """Every available device; CUDA cases simply do not exist on a machine without a GPU."""
    return request.param


@pytest.fixture(autouse=True)
def _seed() -> None:
    torch.manual_seed(0)


@pytest.fixture(autouse=True)
def _threads() -> Iterator[None]:
    """Each test leaves torch's intra-op thread count as it found it: ``train(threads=...)``,
    the examples and the studies set it for the whole process, and a test that did so ran every
    later test on its count."""
    threads = torch.get_num_threads()
    yield
    torch.set_num_threads(threads)


@pytest.fixture
def eager_compile(monkeypatch) -> list[dict]:
    """``torch.compile`` traced with the eager backend (inductor takes about 30 s a model on
    two cores); the options of every call, in order, for the test to check."""
    calls, original = [], torch.compile

    def compile_eagerly(model, **options):
        calls.append(options)
        return original(model, backend="eager")

    monkeypatch.setattr(torch, "compile", compile_eagerly)
    return calls
