"""Time per MAP epoch and per marginal-likelihood step, in one process and in two (gloo).

F-FC+CONV (alpha 4) on random 1x32x32 inputs, 10 classes: ``--n`` examples in global batches
of 128 (64 per rank with two processes), one thread per process. A marginal-likelihood step
is a Laplace fit over all the examples plus ``--hypersteps`` steps on the prior precisions.
Both set-ups run in this one invocation, one after the other, and the JSON records the device,
the thread count and the world sizes; the ratios are what to compare.

Usage (from the repository root):
    python -m benchmarks.distributed_speed --out benchmarks/results/distributed_speed-cpu.json
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from laplace import Laplace
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

from benchmarks.report import benchmark_parser, environment, write
from laplace_equivariance import EquivariantKFAC, marglik_training, models


def measure(args, world: int, rank: int) -> dict[str, float]:
    """Seconds per MAP epoch and per marginal-likelihood step on this rank."""
    torch.manual_seed(0)
    model = models.build("f-fc+conv", (1, 32, 32), 10, alpha=args.alpha)
    g = torch.Generator().manual_seed(0)
    data = TensorDataset(
        torch.randn(args.n, 1, 32, 32, generator=g), torch.randint(0, 10, (args.n,), generator=g)
    )
    sampler = DistributedSampler(data, world, rank, shuffle=False) if world > 1 else None
    loader = DataLoader(data, batch_size=128 // world, sampler=sampler)
    if world > 1:
        dist.barrier()
    start = time.perf_counter()
    marglik_training(
        model, loader, n_epochs=args.epochs, n_epochs_burnin=args.epochs + 1, final_laplace=False
    )
    epoch_s = (time.perf_counter() - start) / args.epochs
    steps = []
    for _ in range(args.repeats):
        if world > 1:
            dist.barrier()
        start = time.perf_counter()
        la = Laplace(
            model,
            "classification",
            subset_of_weights="all",
            hessian_structure="kron",
            backend=EquivariantKFAC,
        )
        la.fit(loader)
        log_precision = torch.zeros(len(la.H_facs.kfacs), requires_grad=True)
        optimizer = torch.optim.Adam([log_precision], lr=0.1)
        for _ in range(args.hypersteps):
            optimizer.zero_grad()
            (-la.log_marginal_likelihood(log_precision.exp())).backward()
            optimizer.step()
        steps.append(time.perf_counter() - start)
    return {"epoch_s": epoch_s, "marglik_step_s": min(steps)}


def rank_main(rank: int, world: int, init_file: str, args, out: str) -> None:
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank, world_size=world)
    try:
        result = measure(args, world, rank)
        if rank == 0:
            torch.save(result, out)
    finally:
        dist.destroy_process_group()


def main() -> None:
    parser = benchmark_parser(__doc__)
    parser.add_argument("--n", type=int, default=1024)
    parser.add_argument("--alpha", type=int, default=4)
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--hypersteps", type=int, default=10)
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args()
    torch.set_num_threads(1)
    one = measure(args, 1, 0)
    with tempfile.TemporaryDirectory() as folder:
        result = str(Path(folder) / "two.pt")
        mp.spawn(rank_main, args=(2, str(Path(folder) / "init"), args, result), nprocs=2)
        two = torch.load(result, weights_only=False)
    report = {
        **environment("-m benchmarks.distributed_speed", "cpu"),
        "cpu_threads_per_process": 1,
        "arguments": {k: v for k, v in vars(args).items() if k != "out"},
        "world_size_1": one,
        "world_size_2": two,
        "epoch_speed_up": one["epoch_s"] / two["epoch_s"],
        "marglik_step_speed_up": one["marglik_step_s"] / two["marglik_step_s"],
    }
    print(
        f"epoch {one['epoch_s']:.2f} s -> {two['epoch_s']:.2f} s "
        f"({report['epoch_speed_up']:.2f}x); marglik step {one['marglik_step_s']:.2f} s -> "
        f"{two['marglik_step_s']:.2f} s ({report['marglik_step_speed_up']:.2f}x)"
    )
    write(report, args.out)


if __name__ == "__main__":
    main()
