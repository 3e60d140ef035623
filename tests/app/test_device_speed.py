"""The matrix-product speed each run records beside its minutes."""

import pytest
import torch

from laplace_equivariance.app import device_speed
from laplace_equivariance.app.device_speed import matmul_gflops


def test_the_speed_is_the_best_timing_of_the_products(monkeypatch):
    """Timings of 0.5 s, 0.25 s and 1 s for 2 products: the best, 0.25 s, gives the speed."""
    clock = iter([0.0, 0.5, 1.0, 1.25, 2.0, 3.0])
    monkeypatch.setattr(device_speed.time, "perf_counter", lambda: next(clock))
    flops = 2 * device_speed.SIZE**3 * 2
    assert matmul_gflops("cpu", repeats=3, products=2) == pytest.approx(flops / 0.25 / 1e9)


def test_the_speed_leaves_the_global_random_state_alone():
    """A run's seeded draws come after it: the timing must not move them."""
    torch.manual_seed(0)
    state = torch.get_rng_state()
    assert matmul_gflops("cpu", repeats=1, products=1) > 0
    assert torch.equal(torch.get_rng_state(), state)


@pytest.mark.parametrize(("repeats", "products"), [(0, 1), (1, 0)])
def test_no_timing_is_refused(repeats, products):
    with pytest.raises(ValueError, match="must be at least 1"):
        matmul_gflops("cpu", repeats=repeats, products=products)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_the_speed_on_a_gpu_waits_for_its_kernels():
    assert matmul_gflops("cuda", repeats=2, products=2) > matmul_gflops("cpu", repeats=2)
