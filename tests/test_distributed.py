"""A Laplace fit sharded over two gloo processes equals the single-process fit (float64).

Every Kronecker factor is a sum over examples, so summing the ranks' factors, projected
lengthscale statistics and losses must give the single-process fit up to the order of the
additions (float64: 1e-10 relative). The log marginal likelihood and its gradients in the
prior precisions (and, for lengthscale hyperparameters, the total derivative in omega) must
agree as well, on both ranks. Shards that count an example twice are refused on every rank.
A few epochs of ``marglik_training`` on two ranks (weights through DDP) equal one process
that sees the same global batches, to 1e-6.
"""

from __future__ import annotations

import datetime
import json
from pathlib import Path

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

from laplace_equivariance import marglik_training, models
from laplace_equivariance.curvature.lengthscales import (
    lengthscale_hyperparameters,
    log_marginal_likelihood,
)
from tests.curvature.reference import fit_kron

K = 3
HYPER = {"sparse_options": {"lengthscale_mode": "hyperparameter"}}
CASES = {
    "conv": ("conv", {}),
    "f-fc+conv": ("f-fc+conv", {}),
    "s-fc+s-conv-omega": ("s-fc+s-conv", HYPER),
    "gconv": ("gconv", {}),
}


def build(case: str) -> torch.nn.Module:
    name, options = CASES[case]
    torch.manual_seed(0)
    return models.build(name, (1, 32, 32), K, alpha=1, **options).double()


def dataset(n: int) -> TensorDataset:
    g = torch.Generator().manual_seed(1)
    x = torch.randn(n, 1, 32, 32, generator=g, dtype=torch.float64)
    return TensorDataset(x, torch.randint(0, K, (n,), generator=g))


def fit_and_measure(model: torch.nn.Module, loader: DataLoader) -> dict:
    """Factors, loss, log marginal likelihood and its gradients of one fit."""
    la = fit_kron(model, loader)
    n_tensors = len(la.H_facs.kfacs)
    prior = torch.linspace(0.5, 2.0, n_tensors, dtype=torch.float64, requires_grad=True)
    omegas = list(lengthscale_hyperparameters(model).values())
    value = log_marginal_likelihood(la, loader, prior, "total")
    value.backward()
    return {
        "factors": [f.detach().clone() for group in la.H_facs.kfacs for f in group],
        "loss": torch.as_tensor(la.loss).detach().clone(),
        "log_marglik": value.detach(),
        "prior_gradient": prior.grad.clone(),
        "omega_gradients": [omega.grad.clone() for omega in omegas],
    }


def sharded_fit(rank: int, world: int, init_file: str, case: str, n: int, out: str) -> None:
    """One rank: its shard of the data, the fit, the measurements saved to ``out``."""
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank, world_size=world)
    try:
        data = dataset(n)
        sampler = DistributedSampler(data, num_replicas=world, rank=rank, shuffle=False)
        loader = DataLoader(data, batch_size=3, sampler=sampler)
        torch.save(fit_and_measure(build(case), loader), f"{out}/rank{rank}.pt")
    finally:
        dist.destroy_process_group()


def assert_same(actual, expected, what: str) -> None:
    if isinstance(expected, list):
        assert len(actual) == len(expected), what
        for i, (a, b) in enumerate(zip(actual, expected, strict=True)):
            assert_same(a, b, f"{what}[{i}]")
        return
    scale = expected.abs().max().item() if expected.numel() else 1.0
    torch.testing.assert_close(actual, expected, rtol=1e-10, atol=1e-12 * scale, msg=what)


@pytest.mark.parametrize("case", list(CASES))
def test_two_ranks_equal_one_process(case, tmp_path):
    mp.spawn(sharded_fit, args=(2, str(tmp_path / "init"), case, 8, str(tmp_path)), nprocs=2)
    single = fit_and_measure(build(case), DataLoader(dataset(8), batch_size=4))
    if case.endswith("omega"):
        # layer 8's output map (on the 1x1 grid) has no lengthscale gradient; the 23 others do
        assert sum(bool(g.abs().sum() > 0) for g in single["omega_gradients"]) == 23
    for rank in range(2):
        sharded = torch.load(tmp_path / f"rank{rank}.pt", weights_only=False)
        for key, expected in single.items():
            assert_same(sharded[key], expected, f"rank {rank}: {key}")


def test_shards_that_repeat_an_example_are_refused_on_every_rank(tmp_path):
    """Seven examples on two ranks: DistributedSampler pads one rank with a repeat."""
    with pytest.raises(Exception, match="fitted 8 examples in all, but the data set has 7"):
        mp.spawn(sharded_fit, args=(2, str(tmp_path / "init"), "conv", 7, str(tmp_path)), nprocs=2)


SCHEDULE = dict(
    n_epochs=3, n_epochs_burnin=1, marglik_frequency=1, n_hypersteps=2, prior_structure="path"
)


def trained(model: torch.nn.Module, loader: DataLoader, checkpoint=None) -> dict:
    """A short marglik_training run and what it learned."""
    la, model, margliks, losses = marglik_training(
        model, loader, optimizer_kwargs={"lr": 1e-2}, checkpoint=checkpoint, **SCHEDULE
    )
    return {
        "margliks": torch.tensor(margliks),
        "losses": torch.tensor(losses),
        "prior_precision": la.prior_precision.detach().clone(),
        "weights": [p.detach().clone() for p in model.parameters()],
    }


def sharded_training(rank: int, world: int, init_file: str, out: str) -> None:
    """One rank of marglik_training: batches of 4 per rank, its shard, checkpoints."""
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank, world_size=world)
    try:
        data = dataset(16)
        sampler = DistributedSampler(data, num_replicas=world, rank=rank, shuffle=False)
        loader = DataLoader(data, batch_size=4, sampler=sampler)
        result = trained(build("f-fc+conv"), loader, checkpoint=f"{out}/run.pt")
        torch.save(result, f"{out}/trained{rank}.pt")
    finally:
        dist.destroy_process_group()


def test_marglik_training_on_two_ranks_equals_one_process_with_the_global_batches(tmp_path):
    """DDP averages the ranks' gradients of equal batches of 4: the steps of batches of 8."""
    mp.spawn(sharded_training, args=(2, str(tmp_path / "init"), str(tmp_path)), nprocs=2)
    single = trained(build("f-fc+conv"), DataLoader(dataset(16), batch_size=8))
    assert len(single["margliks"]) == 3 * 2
    for rank in range(2):
        sharded = torch.load(tmp_path / f"trained{rank}.pt", weights_only=False)
        for key, expected in single.items():
            expected = expected if isinstance(expected, list) else [expected]
            actual = sharded[key] if isinstance(sharded[key], list) else [sharded[key]]
            for a, b in zip(actual, expected, strict=True):
                torch.testing.assert_close(a, b, rtol=1e-6, atol=1e-9, msg=f"rank {rank}: {key}")
    saved = torch.load(tmp_path / "run.pt", weights_only=False)  # written by rank 0
    assert saved["state"]["epoch"] == 3


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def torchrun_rank(rank: int, world: int, port: int, args: list[str]) -> None:
    """What ``torchrun --nproc-per-node 2 laplace-equivariance ...`` gives each rank."""
    import os

    from laplace_equivariance.app import cli

    os.environ.update(
        RANK=str(rank),
        LOCAL_RANK=str(rank),
        WORLD_SIZE=str(world),
        MASTER_ADDR="127.0.0.1",
        MASTER_PORT=str(port),
    )
    torch.set_num_threads(1)
    try:
        cli.main(args)
    finally:
        if dist.is_initialized():
            dist.destroy_process_group()


TINY_RUN = ["--subset", "64", "--test-subset", "32", "--epochs", "2", "--alpha", "1"]
TINY_RUN += ["--burnin", "1", "--marglik-frequency", "1", "--hypersteps", "2"]
# the (digit) task's 10 classes: each exact-GGN fit loops over the classes (40 on quadrant-mnist)
TINY_RUN += ["--batch-size", "16", "--dataset", "quadrant-mnist-digit", "--model", "f-fc+conv"]


def test_command_line_under_torchrun_trains_one_model_and_rank_0_writes_it(tmp_path):
    out = tmp_path / "run"
    args = ["train", *TINY_RUN, "--out", str(out)]
    mp.spawn(torchrun_rank, args=(2, free_port(), args), nprocs=2)
    results = json.loads((out / "results.json").read_text())
    assert results["world_size"] == 2 and len(results["neg_log_marglik"]) == 2 * 2
    assert results["evaluated_epoch"] == 2 and (out / "model.pt").exists()


def test_command_line_under_torchrun_refuses_a_marglik_subset_that_does_not_split(tmp_path, capfd):
    args = ["train", *TINY_RUN, "--marglik-subset", "33", "--out", str(tmp_path / "run")]
    with pytest.raises(Exception, match="terminated with exit code 1"):
        mp.spawn(torchrun_rank, args=(2, free_port(), args), nprocs=2)
    assert "must be multiples of 2" in capfd.readouterr().err


def dying_rank(rank: int, world: int, init_file: str) -> None:
    """marglik_training on two ranks; rank 1 dies after its first epoch."""
    import os
    import time

    torch.set_num_threads(1)
    dist.init_process_group(
        "gloo",
        init_method=f"file://{init_file}",
        rank=rank,
        world_size=world,
        timeout=datetime.timedelta(seconds=30),
    )
    data = dataset(16)
    loader = DataLoader(
        data, batch_size=4, sampler=DistributedSampler(data, world, rank, shuffle=False)
    )

    def die(epoch, info):
        if rank == 1:
            time.sleep(1.0)  # rank 0 is waiting in the next epoch's first all-reduce
            Path(init_file + ".died").write_text(repr(time.time()))
            os._exit(3)

    marglik_training(build("conv"), loader, callback=die, **SCHEDULE)


def test_a_rank_that_dies_stops_the_run_with_its_rank_named(tmp_path):
    """Rank 0 waits in DDP's all-reduce; the run ends soon after the peer dies, and the
    launcher reports which rank died. Timed from the death, not from the start (starting
    two processes that import torch takes most of a minute on a loaded machine), and bounded
    below the process group's 30-second timeout: a run left waiting for it fails."""
    import time

    init_file = tmp_path / "init"
    with pytest.raises(mp.ProcessExitedException, match="process 1 terminated with exit code 3"):
        mp.spawn(dying_rank, args=(2, str(init_file)), nprocs=2)
    died = float(Path(str(init_file) + ".died").read_text())
    assert time.time() - died < 20
