"""Laplace fits over data sharded across the processes of a ``torch.distributed`` group.

With a process group initialised (``torch.distributed.init_process_group``, say under
``torchrun``) and a loader whose sampler gives every rank a disjoint shard
(``DistributedSampler`` with ``drop_last=False`` on a data set whose size the world size
divides, or any sampler that covers each example exactly once), ``Laplace(...,
backend=EquivariantKFAC).fit(loader)`` computes the Kronecker factors, the projected
statistics of lengthscale hyperparameters and the loss on each rank's shard and sums them
across the ranks once per fit: every factor is a sum over examples (``A`` is divided by the
full data set's size on every rank, since ``len(loader.dataset)`` is the whole set), so the
sum is the single-process fit and every rank ends with the same approximation.
:func:`.curvature.lengthscales.log_marginal_likelihood` sums its data-fit term and
its lengthscale gradients across the ranks too. Without a process group, or with one rank,
nothing changes.

:func:`laplace_equivariance.marglik_training` in a process group trains the weights with
``DistributedDataParallel`` (gradients averaged over the ranks' equal-sized batches, so a
step is that of the global batch), fits every Laplace approximation over the shards as
above, so that the marginal likelihood and the hyperparameter steps are the same on every
rank, sums the epoch's loss and accuracy over the ranks, writes checkpoints from rank 0 only
(every rank resumes from them) and shows the progress bar on rank 0.

What is refused, with a ``ValueError`` on every rank: shards that do not cover the data set
exactly once (a ``DistributedSampler`` pads an uneven data set with repeated examples, which
would count them twice), accumulating fits (``override=False``) across ranks, and
:func:`~laplace_equivariance.marglik_training` with a structure or backend whose fits are not
summed (anything but ``hessian_structure="kron"`` with ``EquivariantKFAC``), under which each
rank would learn hyperparameters of its own.
Stock backends (``AsdlGGN``) keep laplace-torch's per-process fits; on stock layers
``EquivariantKFAC`` gives the same factors and sums them.
"""

from __future__ import annotations

import torch
import torch.distributed as dist

__all__ = ["all_reduce_sum", "barrier", "check_shards", "rank", "world_size"]


def world_size() -> int:
    """The number of processes in the default group, 1 without one."""
    if dist.is_available() and dist.is_initialized():
        return dist.get_world_size()
    return 1


def rank() -> int:
    """This process's rank in the default group, 0 without one."""
    return dist.get_rank() if world_size() > 1 else 0


def barrier() -> None:
    """Wait for every rank (nothing to do on one rank)."""
    if world_size() > 1:
        dist.barrier()


def all_reduce_sum(tensors: list[torch.Tensor]) -> None:
    """Sum each tensor over the ranks, in place (nothing to do on one rank).

    Args:
        tensors: Tensors of the same shapes, in the same order, on every rank.
    """
    if world_size() == 1:
        return
    for tensor in tensors:
        dist.all_reduce(tensor, op=dist.ReduceOp.SUM)


def check_shards(examples_seen: int, n_data: int, device: torch.device) -> None:
    """Raise unless the ranks together saw every example exactly once.

    Args:
        examples_seen: Examples this rank's loader gave.
        n_data: ``len(loader.dataset)``, the same on every rank.
        device: Where the collective runs (CPU for gloo, the rank's GPU for NCCL).

    Raises:
        ValueError: On every rank, if the total is not ``n_data``.
    """
    total = torch.tensor([float(examples_seen)], device=device, dtype=torch.float64)
    all_reduce_sum([total])
    if int(total.item()) != n_data:
        raise ValueError(
            f"The {world_size()} ranks fitted {int(total.item())} examples in all, but the data "
            f"set has {n_data} (rank {dist.get_rank()} saw {examples_seen}): each example must "
            "be in exactly one rank's shard. A DistributedSampler pads a data set whose size "
            "the world size does not divide with repeated examples (and drop_last=True drops "
            "some): trim the data set to a multiple of the world size, or use a sampler that "
            "splits it without padding."
        )
