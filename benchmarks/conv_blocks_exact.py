"""KFAC against the exact GGN for the CONV paths of a trained run, at its learned precisions.

For each relaxed layer's CONV weight (up to ``--max-size`` numbers; ``--pattern`` chooses
other tensors, such as the F-FC output maps), the exact GGN block
``sum_n J_n^T (diag(p_n) - p_n p_n^T) J_n`` over the run's training images (``J_n`` the
logits' Jacobian in that weight, by ``torch.func``, accumulated in float64) beside
EquivariantKFAC's Kronecker block of the same tensor: their traces, MacKay's effective
parameters ``gamma = sum_k lambda_k / (lambda_k + delta)`` and the Occam term ``sum_k
log(1 + lambda_k / delta)`` of Eq. 9 at the run's learned ``delta``. If KFAC overstated a CONV
block's curvature, the CONV path would pay too large an Occam factor and lose to FC.

Usage:
    python benchmarks/conv_blocks_exact.py RUN --out benchmarks/results/conv-blocks-exact/NAME.json
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from pathlib import Path
from typing import Any

import torch
from torch.func import functional_call, jacrev, vmap
from torch.utils.data import DataLoader, TensorDataset

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.factor_balance import fitted_laplace, learned_precisions  # noqa: E402
from laplace_equivariance.cli import device_name, load_trained  # noqa: E402


def exact_block(
    model: torch.nn.Module, name: str, x: torch.Tensor, chunk: int = 64
) -> torch.Tensor:
    """The exact GGN block of parameter ``name`` (cross-entropy), float64, ``(P, P)``."""
    params = {n: p.detach() for n, p in model.named_parameters()}
    weight = params[name]

    def logits(w: torch.Tensor, xi: torch.Tensor) -> torch.Tensor:
        return functional_call(model, {**params, name: w}, (xi[None],))[0]

    jacobian = vmap(jacrev(logits), in_dims=(None, 0))
    block = torch.zeros(weight.numel(), weight.numel(), dtype=torch.float64)
    for batch in x.split(chunk):
        with torch.no_grad():
            p = torch.softmax(model(batch), -1).double()
        j = jacobian(weight, batch).flatten(start_dim=2).double()  # (B, K, P)
        # diag(p) - p p^T = A^T A with A = diag(sqrt p) - sqrt(p) p^T (the p sum to one)
        root = p.sqrt()
        a = torch.diag_embed(root) - root[:, :, None] * p[:, None, :]
        rows = torch.einsum("bkl,blp->bkp", a, j).flatten(end_dim=1)
        block += rows.T @ rows
    return block


def occam(eigenvalues: torch.Tensor, delta: float) -> dict[str, float]:
    """Trace, gamma and the Occam term of one block's eigenvalues at precision ``delta``."""
    values = eigenvalues.clamp_min(0).double()
    return {
        "trace": values.sum().item(),
        "gamma": (values / (values + delta)).sum().item(),
        "log_det_term": torch.log1p(values / delta).sum().item(),
    }


def measure(run: Path, max_size: int, pattern: str = r"conv\.weight$") -> dict[str, Any]:
    """Each small-enough block of one run whose tensor name matches ``pattern``, KFAC beside
    exact."""
    model, data = load_trained(run)
    model = model.double()
    x = data.x_train.double()
    results = json.loads((run / "results.json").read_text())
    precisions = learned_precisions(model, results)
    names = [n for n, _ in model.named_parameters()]
    la = fitted_laplace(
        model,
        DataLoader(TensorDataset(x, data.y_train), batch_size=128),
        torch.tensor(precisions, dtype=torch.float64),
    )
    blocks = []
    for k, name in enumerate(names):
        size = dict(model.named_parameters())[name].numel()
        if not re.search(pattern, name) or size > max_size:
            continue
        start = time.perf_counter()
        kfac_values = la.H.eigenvalues[k]
        kfac = (
            kfac_values[0]
            if len(kfac_values) == 1
            else torch.outer(kfac_values[0], kfac_values[1]).flatten()
        )
        exact = torch.linalg.eigvalsh(exact_block(model, name, x))
        blocks.append(
            {
                "tensor": name,
                "parameters": size,
                "delta": precisions[k],
                "kfac": occam(kfac, precisions[k]),
                "exact": occam(exact, precisions[k]),
                "seconds": time.perf_counter() - start,
            }
        )
        row = blocks[-1]
        print(
            f"{name}: gamma KFAC {row['kfac']['gamma']:.1f} exact {row['exact']['gamma']:.1f}; "
            f"log det term KFAC {row['kfac']['log_det_term']:.1f} exact "
            f"{row['exact']['log_det_term']:.1f}",
            flush=True,
        )
    return {"run": run.name, "settings": results["settings"], "blocks": blocks}


def main() -> None:
    """Measure the runs and write one JSON file."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("runs", type=Path, nargs="+", help="--out folders of learned runs")
    parser.add_argument("--out", type=Path, required=True, help="JSON file to write")
    parser.add_argument("--max-size", type=int, default=4608, help="largest block measured")
    parser.add_argument(
        "--pattern",
        default=r"conv\.weight$",
        help="regular expression of the tensor names to measure [the CONV weights]",
    )
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    measured = [measure(run, args.max_size, args.pattern) for run in args.runs]
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(
        json.dumps(
            {"device": device_name("cpu"), "threads": args.threads, "runs": measured}, indent=1
        )
    )


if __name__ == "__main__":
    main()
