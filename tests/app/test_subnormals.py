"""The CPU's flush-to-zero mode for subnormal floats: set for a run, restored after it."""

import pytest
import torch

from laplace_equivariance.app import experiment
from laplace_equivariance.app.subnormals import SUBNORMAL, flush_subnormals, flushing_subnormals
from tests.app.test_run_config import TINY_RUN

pytestmark = pytest.mark.skipif(
    not torch.set_flush_denormal(False), reason="this CPU has no flush-to-zero mode"
)


@pytest.fixture(params=[False, True], ids=["caller-off", "caller-on"])
def callers_mode(request):
    """The mode the caller had before; put back to off (torch's default) after the test."""
    torch.set_flush_denormal(request.param)
    yield request.param
    torch.set_flush_denormal(False)


def test_a_subnormal_survives_arithmetic_outside_and_is_zero_inside():
    x = torch.full((4,), SUBNORMAL, dtype=torch.float32)
    assert (x * 1.0).ne(0).all()
    with flush_subnormals() as flushed:
        assert flushed and (x * 1.0).eq(0).all()
    assert (x * 1.0).ne(0).all()


def test_the_callers_mode_is_restored_also_when_the_block_raises(callers_mode):
    with pytest.raises(RuntimeError), flush_subnormals():
        assert flushing_subnormals()
        raise RuntimeError("a failed run")
    assert flushing_subnormals() is callers_mode


def test_train_flushes_subnormals_during_the_run_records_it_and_restores_the_mode(
    tmp_path, monkeypatch
):
    seen = []
    original = experiment._train_in

    def spying(*args, **kwargs):
        seen.append(flushing_subnormals())
        return original(*args, **kwargs)

    monkeypatch.setattr(experiment, "_train_in", spying)
    results = experiment.train(TINY_RUN, tmp_path / "run")
    assert seen == [True]
    assert results["flush_subnormals"] is True
    assert not flushing_subnormals()
