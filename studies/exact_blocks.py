"""KFAC against the exact GGN, tensor by tensor, for a trained run at its learned precisions.

For each parameter tensor whose name matches ``--pattern`` (the CONV weights by default) and
that has at most ``--max-size`` numbers, the exact GGN block
``G = sum_n J_n^T (diag(p_n) - p_n p_n^T) J_n / T`` over the training images the run's own
evidence was fitted on (its ``--marglik-subset``, all without one) at the temperature of its
fits (its own times ``n / N``, so that ``G`` stands for all ``N`` images; ``J_n`` the logits'
Jacobian in that tensor, by ``torch.func``, accumulated in float64) beside EquivariantKFAC's
Kronecker block of the same tensor on the same images: their traces, MacKay's effective
parameters ``gamma = sum_k lambda_k / (lambda_k + delta)`` and the Occam term
``sum_k log(1 + lambda_k / delta)`` of Eq. 9 at the run's learned ``delta``. At MacKay's fixed
point ``delta = gamma / ||theta||^2``, so a tensor whose KFAC gamma is ``r`` times the exact
one gets a prior about ``r`` times as strong as the exact GGN would give it; a layer whose
CONV weights are overstated more than its FC tensors is tilted towards FC.

The exact terms need no eigenvalues: with ``L L^T = G + delta I`` (Cholesky),
``sum_k log(1 + lambda_k / delta) = 2 sum_i log L_ii - P log delta`` and
``gamma = P - delta tr((G + delta I)^-1)``. The tensors of one layer share one pass over the
data. A block of ``P`` numbers takes ``8 P^2`` bytes, twice that while it is factorised: on
the CPU keep ``--max-size`` at a few thousand; on a GPU with 80 GB, 32,768 (8.6 GB a block)
fits for three runs at once.

Usage (from the repository root):
    python -m studies.exact_blocks RUN --out studies/results/exact-blocks/NAME.json
    python -m studies.exact_blocks RUN --device cuda --max-size 32768 \
        --pattern '^layer[1-8]\\.(fc\\.(input|output)_map|conv)\\.weight$' --out FILE
"""

from __future__ import annotations

import argparse
import json
import math
import re
import time
from pathlib import Path
from typing import Any

import torch
from torch.func import functional_call, jacrev, vmap

from laplace_equivariance.app.experiment import device_name
from laplace_equivariance.app.runs import load_trained
from studies.measured_runs import evidence_data, fitted_laplace, learned_precisions


def exact_blocks(
    model: torch.nn.Module, names: list[str], x: torch.Tensor, chunk: int = 64
) -> dict[str, torch.Tensor]:
    """The exact GGN block of each parameter in ``names`` (cross-entropy), float64.

    Args:
        model: The network, in evaluation mode.
        names: Parameter names; their Jacobians come from one pass over ``x``.
        x: Inputs ``(N, C, H, W)`` on the model's device.
        chunk: Images per vectorised Jacobian.

    Returns:
        ``{name: (P, P)}`` on ``x``'s device, ``P`` the tensor's number of entries.
    """
    params = {n: p.detach() for n, p in model.named_parameters()}
    chosen = {n: params[n] for n in names}

    def logits(tensors: dict[str, torch.Tensor], xi: torch.Tensor) -> torch.Tensor:
        return functional_call(model, {**params, **tensors}, (xi[None],))[0]

    jacobian = vmap(jacrev(logits), in_dims=(None, 0))
    blocks = {
        n: torch.zeros(t.numel(), t.numel(), dtype=torch.float64, device=x.device)
        for n, t in chosen.items()
    }
    for batch in x.split(chunk):
        with torch.no_grad():
            p = torch.softmax(model(batch), -1).double()
        # diag(p) - p p^T = A^T A with A = diag(sqrt p) - sqrt(p) p^T (the p sum to one)
        root = p.sqrt()
        a = torch.diag_embed(root) - root[:, :, None] * p[:, None, :]
        jacobians = jacobian(chosen, batch)
        for n in names:
            j = jacobians[n].flatten(start_dim=2).double()  # (B, K, P)
            rows = torch.einsum("bkl,blp->bkp", a, j).flatten(end_dim=1)
            blocks[n].addmm_(rows.T, rows)
    return blocks


def occam(eigenvalues: torch.Tensor, delta: float) -> dict[str, float]:
    """Trace, gamma and the Occam term of one block's eigenvalues at precision ``delta``."""
    values = eigenvalues.clamp_min(0).double()
    return {
        "trace": values.sum().item(),
        "gamma": (values / (values + delta)).sum().item(),
        "log_det_term": torch.log1p(values / delta).sum().item(),
    }


def occam_of_block(block: torch.Tensor, delta: float, columns: int = 4096) -> dict[str, float]:
    """:func:`occam` of a positive semi-definite ``(P, P)`` block, by its Cholesky factor.

    ``tr((G + delta I)^-1) = ||L^-1||_F^2`` comes from triangular solves ``columns``
    identity columns at a time, so the memory beyond the block is one more ``(P, P)``.
    """
    size = block.shape[0]
    factor = block.clone()
    factor.diagonal().add_(delta)
    torch.linalg.cholesky(factor, out=factor)
    log_det_term = 2 * factor.diagonal().log().sum().item() - size * math.log(delta)
    inverse_trace = 0.0
    for start in range(0, size, columns):
        width = min(columns, size - start)
        unit = torch.zeros(size, width, dtype=block.dtype, device=block.device)
        unit[start : start + width].diagonal().fill_(1.0)
        solved = torch.linalg.solve_triangular(factor, unit, upper=False)
        inverse_trace += solved.square().sum().item()
    return {
        "trace": block.diagonal().sum().item(),
        "gamma": size - delta * inverse_trace,
        "log_det_term": log_det_term,
    }


def kfac_eigenvalues(la: Any, k: int) -> torch.Tensor:
    """The eigenvalues of EquivariantKFAC's block of the ``k``-th parameter tensor."""
    values = la.H.eigenvalues[k]
    return values[0] if len(values) == 1 else torch.outer(values[0], values[1]).flatten()


def measure(
    run: Path, max_size: int, pattern: str = r"conv\.weight$", device: str = "cpu"
) -> dict[str, Any]:
    """Each small-enough block of one run whose tensor name matches ``pattern``, KFAC beside
    exact, both on the examples and at the temperature of the run's own evidence
    (:func:`studies.measured_runs.evidence_data`)."""
    model, data = load_trained(run)
    model = model.double().to(device)
    results = json.loads((run / "results.json").read_text())
    loader, temperature = evidence_data(
        results, data.x_train.double().to(device), data.y_train.to(device)
    )
    x = loader.dataset.tensors[0]
    precisions = learned_precisions(model, results)
    parameters = dict(model.named_parameters())
    names = list(parameters)
    la = fitted_laplace(
        model, loader, torch.tensor(precisions, dtype=torch.float64, device=device), temperature
    )
    chosen = [n for n in names if re.search(pattern, n) and parameters[n].numel() <= max_size]
    layers: dict[str, list[str]] = {}
    for name in chosen:
        layers.setdefault(name.split(".")[0], []).append(name)
    blocks = []
    for group in layers.values():
        start = time.perf_counter()
        exact = exact_blocks(model, group, x)
        for name in group:
            k = names.index(name)
            blocks.append(
                {
                    "tensor": name,
                    "parameters": parameters[name].numel(),
                    "delta": precisions[k],
                    "kfac": occam(kfac_eigenvalues(la, k) / temperature, precisions[k]),
                    "exact": occam_of_block(exact.pop(name) / temperature, precisions[k]),
                    "seconds": (time.perf_counter() - start) / len(group),
                }
            )
            row = blocks[-1]
            print(
                f"{name}: gamma KFAC {row['kfac']['gamma']:.1f} exact "
                f"{row['exact']['gamma']:.1f}; log det term KFAC "
                f"{row['kfac']['log_det_term']:.1f} exact {row['exact']['log_det_term']:.1f}",
                flush=True,
            )
    return {
        "run": run.name,
        "settings": results["settings"],
        "examples": len(x),
        "temperature": temperature,
        "blocks": blocks,
    }


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
    parser.add_argument("--device", default="cpu", help="cpu or cuda")
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    measured = [measure(run, args.max_size, args.pattern, args.device) for run in args.runs]
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(
        json.dumps(
            {"device": device_name(args.device), "threads": args.threads, "runs": measured},
            indent=1,
        )
    )


if __name__ == "__main__":
    main()
