"""Time and peak memory of the GLM predictive on the README's model (F-FC+CONV, a = 10, 40 classes).

The Kron approximation is fitted on 64 random images (the curvature's values do not change the
predictive's cost), the factors' eigenvectors are computed once by a one-image call, then
``la(x, pred_type="glm", link_approx="probit")`` on ``--images`` random images is timed; the
peak resident memory of the process (``ru_maxrss``) covers the whole run::

    python -m benchmarks.predictive_memory --images 16 \
        --out benchmarks/results/predictive_memory-cpu.json
"""

from __future__ import annotations

import argparse
import json
import resource
import time
from pathlib import Path

import torch
from laplace import Laplace
from torch.utils.data import DataLoader, TensorDataset

from laplace_equivariance import EquivariantKFAC, __version__, models
from laplace_equivariance.app.experiment import device_name


def main() -> None:
    """Fit, time the predictive, write one JSON."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--images", type=int, default=16, help="test images (16)")
    parser.add_argument("--threads", type=int, default=1, help="(1)")
    parser.add_argument("--memory-limit", type=int, dest="memory_limit", help="bytes [2 GiB]")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    model = models.build("f-fc+conv", (1, 32, 32), 40, alpha=10)
    x, y = torch.randn(64, 1, 32, 32), torch.randint(0, 40, (64,))
    kwargs = {} if args.memory_limit is None else {"memory_limit": args.memory_limit}
    la = Laplace(
        model,
        "classification",
        subset_of_weights="all",
        hessian_structure="kron",
        backend=EquivariantKFAC,
        backend_kwargs=kwargs,
    )
    la.fit(DataLoader(TensorDataset(x, y), batch_size=32))
    la(x[:1], pred_type="glm", link_approx="probit")
    test = torch.randn(args.images, 1, 32, 32)
    start = time.perf_counter()
    la(test, pred_type="glm", link_approx="probit")
    seconds = time.perf_counter() - start
    result = {
        "command": "python -m benchmarks.predictive_memory "
        f"--images {args.images} --threads {args.threads}"
        + ("" if args.memory_limit is None else f" --memory-limit {args.memory_limit}"),
        "memory_limit": la.backend.memory_limit,
        "images": args.images,
        "seconds": seconds,
        "seconds_per_image": seconds / args.images,
        "peak_resident_gib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20,
        "examples_per_chunk": la.backend.predictive_chunk_size(test),
        "parameters": models.count_parameters(model),
        "device": device_name("cpu"),
        "threads": torch.get_num_threads(),
        "torch": torch.__version__,
        "package": __version__,
    }
    args.out.write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps(result))


if __name__ == "__main__":
    main()
