"""The exact GGN's per-class backward passes, three ways (the design of EquivariantKFAC.kron).

The exact-GGN fit runs one backward pass per class from the logits to every layer's output.
This times, on one batch of the F-FC+CONV model, the K passes

1. through a graph that also holds the parameters, with ``backward()`` and the parameters'
   ``requires_grad`` switched off meanwhile, as ASDL's fisher maker does (the graph's
   parameter edges stay, so every weight gradient is still computed, then not accumulated),
2. the same through a graph of the activations only (what ``EquivariantKFAC.kron`` records),
3. as one pass batched over the classes (``torch.autograd.grad(..., is_grads_batched=True)``,
   vmap over the output gradients), also activations only,

each the median of ``--repeats`` after one warm-up. All three give the same input gradients.

Usage:
    python benchmarks/class_backward_passes.py [--alpha 4] [--batch 128] [--classes 10]
        [--repeats 5] [--out benchmarks/results/class_backward_passes-cpu.json]
"""

from __future__ import annotations

import argparse
import statistics
from pathlib import Path

import torch
from report import environment, timings, write

from laplace_equivariance import models


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--alpha", type=int, default=4)
    parser.add_argument("--batch", type=int, default=128)
    parser.add_argument("--classes", type=int, default=10)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    torch.manual_seed(0)
    model = models.build("f-fc+conv", (1, 32, 32), args.classes, alpha=args.alpha)
    model = model.to(args.device)
    x = torch.randn(args.batch, 1, 32, 32, device=args.device).requires_grad_(True)
    output_grads = torch.randn(args.classes, args.batch, args.classes, device=args.device)

    with_parameters = model(x)
    model.requires_grad_(False)
    activations_only = model(x)
    model.requires_grad_(True)

    def one_per_class(f):
        """As ASDL's fisher maker: ``backward()`` to every leaf, parameters switched off."""
        gradients = []
        model.requires_grad_(False)
        for k in range(args.classes):
            x.grad = None
            f.backward(output_grads[k], retain_graph=True)
            gradients.append(x.grad)
        model.requires_grad_(True)
        return gradients

    def batched():
        return torch.autograd.grad(
            activations_only, x, output_grads, retain_graph=True, is_grads_batched=True
        )[0]

    reference = torch.stack(one_per_class(with_parameters))
    for gradients in (torch.stack(one_per_class(activations_only)), batched()):
        torch.testing.assert_close(gradients, reference)
    runs = {
        "with_parameter_edges_s": lambda: one_per_class(with_parameters),
        "activations_only_s": lambda: one_per_class(activations_only),
        "batched_over_classes_s": batched,
    }
    seconds = {
        name: statistics.median(timings(run, args.repeats, args.device))
        for name, run in runs.items()
    }
    report = {
        **environment("benchmarks/class_backward_passes.py", args.device),
        "arguments": vars(args) | {"out": str(args.out)},
        **seconds,
    }
    print(", ".join(f"{name} {value * 1e3:.0f} ms" for name, value in seconds.items()))
    write(report, args.out)


if __name__ == "__main__":
    main()
