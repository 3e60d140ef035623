"""EquivariantKFAC against AsdlGGN, and block-diagonal against dense decompositions.

Two measurements, on random 3x32x32 inputs with 10 classes (speed does not depend on the
data), alpha=10 unless ``--alpha`` says otherwise:

1. CONV architecture with stock layers (zero-padded ``nn.Conv2d``, average pooling where the
   App. F.1 network subsamples, ``nn.Linear`` head; AsdlGGN refuses this package's
   ``CircularConv2d``): ``Laplace.fit`` with EquivariantKFAC over AsdlGGN, same run (target
   <= 1.1x).
2. F-FC+CONV: eigendecomposing all Kronecker factors (eigenvalues and every eigenvector),
   block by block (ours) against the same factors made dense (target >= 10x faster and
   >= 10x smaller).

The fit of the relaxed models as a ratio to a training epoch is
``benchmarks/fit_over_epoch.py``'s.

Usage (from the repository root):
    python -m benchmarks.kfac_speed [--device cpu|cuda] [--n 1024] [--batch 128]
        [--skip-dense] [--out benchmarks/results/kfac_speed-cpu.json]
"""

from __future__ import annotations

import json
import time

import torch
from laplace import Laplace
from laplace.curvature import AsdlGGN
from torch.utils.data import DataLoader

from benchmarks.report import benchmark_parser, environment, write
from benchmarks.timing import loader, synchronise
from laplace_equivariance import EquivariantKFAC, models
from laplace_equivariance.curvature.kron import densify
from laplace_equivariance.models import SUBSAMPLING_LAYERS, WIDTH_MULTIPLIERS


def stock_conv_network(in_channels: int, n_classes: int, alpha: int) -> torch.nn.Sequential:
    """The CONV architecture (App. F.1 widths and subsampling) built from stock layers only."""
    layers, c_in = [], in_channels
    for index, multiplier in enumerate(WIDTH_MULTIPLIERS, start=1):
        c_out = alpha * multiplier
        layers += [torch.nn.Conv2d(c_in, c_out, 3, padding=1)]
        layers += [torch.nn.AvgPool2d(2)] if index in SUBSAMPLING_LAYERS else []
        layers += [torch.nn.ReLU()]
        c_in = c_out
    return torch.nn.Sequential(
        *layers,
        torch.nn.Flatten(),
        torch.nn.Linear(c_in, 4 * c_in),
        torch.nn.ReLU(),
        torch.nn.Linear(4 * c_in, n_classes),
    )


def epoch_seconds(model, data: DataLoader, device: str) -> float:
    loss_fn = torch.nn.CrossEntropyLoss()
    model.train()
    for x, y in data:  # warm-up batch
        loss_fn(model(x), y).backward()
        break
    synchronise(device)
    start = time.perf_counter()
    for x, y in data:
        model.zero_grad(set_to_none=True)
        loss_fn(model(x), y).backward()
    synchronise(device)
    return time.perf_counter() - start


def fit_seconds(model, data: DataLoader, backend, device: str, **backend_kwargs):
    la = Laplace(
        model,
        "classification",
        subset_of_weights="all",
        hessian_structure="kron",
        backend=backend,
        backend_kwargs=backend_kwargs or None,
    )
    synchronise(device)
    start = time.perf_counter()
    la.fit(data)
    synchronise(device)
    return time.perf_counter() - start, la


def factor_bytes(factors) -> int:
    return sum(f.numel() * f.element_size() for group in factors for f in group)


def decomposition(la, device: str, dense: bool) -> dict:
    kron = la.H_facs
    synchronise(device)
    start = time.perf_counter()
    decomposed = kron.decompose()
    # every eigenvector, as the dense side computes them (fit itself leaves them for later)
    vectors = [decomposed.eigenvectors[group] for group in range(len(decomposed.eigenvectors))]
    synchronise(device)
    ours = {
        "seconds": time.perf_counter() - start,
        "factor_mib": factor_bytes(kron.kfacs) / 2**20,
        "eigenvector_mib": factor_bytes(vectors) / 2**20,
    }
    result = {"block_diagonal": ours}
    if dense:
        dense_factors = [[densify(f) for f in group] for group in kron.kfacs]
        synchronise(device)
        start = time.perf_counter()
        vectors = [
            [torch.linalg.eigh(f)[1] for f in group if f.ndim == 2] for group in dense_factors
        ]
        synchronise(device)
        result["dense"] = {
            "seconds": time.perf_counter() - start,
            "factor_mib": factor_bytes(dense_factors) / 2**20,
            "eigenvector_mib": factor_bytes(vectors) / 2**20,
        }
        result["speed_up"] = result["dense"]["seconds"] / ours["seconds"]
        result["memory_ratio"] = (
            result["dense"]["factor_mib"] + result["dense"]["eigenvector_mib"]
        ) / (ours["factor_mib"] + ours["eigenvector_mib"])
    largest = max(
        (f for group in kron.kfacs for f in group),
        key=lambda f: densify(f).shape[0] if f.ndim < 3 else f.shape[0] * f.shape[1],
    )
    result["largest_factor_storage"] = list(largest.shape)
    return result


def main() -> None:
    parser = benchmark_parser(__doc__)
    parser.add_argument("--n", type=int, default=1024)
    parser.add_argument("--batch", type=int, default=128)
    parser.add_argument("--alpha", type=int, default=10)
    parser.add_argument("--skip-dense", action="store_true")
    args = parser.parse_args()
    torch.manual_seed(0)
    data = loader(args.n, args.batch, args.device)
    report = {
        **environment("-m benchmarks.kfac_speed", args.device),
        "n": args.n,
        "batch": args.batch,
        "alpha": args.alpha,
    }

    conv = stock_conv_network(3, 10, args.alpha).to(args.device)
    conv_epoch = epoch_seconds(conv, data, args.device)
    stock, _ = fit_seconds(conv, data, AsdlGGN, args.device)
    ours, _ = fit_seconds(conv, data, EquivariantKFAC, args.device)
    report["conv"] = {
        "epoch_s": conv_epoch,
        "asdl_ggn_fit_s": stock,
        "equivariant_kfac_fit_s": ours,
        "ratio_to_asdl_ggn": ours / stock,
        "asdl_ggn_fit_over_epoch": stock / conv_epoch,
    }
    print(f"stock CONV: EquivariantKFAC {ours:.2f}s, AsdlGGN {stock:.2f}s ({ours / stock:.2f}x)")

    model = models.build("f-fc+conv", (3, 32, 32), 10, args.alpha).to(args.device)
    _, la = fit_seconds(model, data, EquivariantKFAC, args.device)
    report["f-fc+conv"] = {"decomposition": decomposition(la, args.device, not args.skip_dense)}
    print(json.dumps(report["f-fc+conv"]["decomposition"], indent=2))
    write(report, args.out)


if __name__ == "__main__":
    main()
