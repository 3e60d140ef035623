"""The exact GGN's per-class backward passes, three ways (the design of EquivariantKFAC.kron).

The exact-GGN fit runs one backward pass per class from the logits to every layer's output.
This times, on one batch of the F-FC+CONV model, the K passes

1. through a graph that also holds the parameters, with ``backward()`` and the parameters'
   ``requires_grad`` switched off meanwhile, as ASDL's fisher maker does (the graph's
   parameter edges stay, so every weight gradient is still computed, then not accumulated),
2. the same through the graph ``EquivariantKFAC.kron`` records: activations only, starting at
   the first layer's output (no weight gradient, no gradient with respect to the data),
3. as one pass batched over the classes (``torch.autograd.grad(..., is_grads_batched=True)``,
   vmap over the output gradients) through that graph,

each the median of ``--repeats`` after one warm-up. All three give the same gradients with
respect to the first layer's output.

Usage (from the repository root):
    python -m benchmarks.class_backward_passes [--alpha 4] [--batch 128] [--classes 10]
        [--repeats 5] [--out benchmarks/results/class_backward_passes-cpu.json]
"""

from __future__ import annotations

import statistics

import torch

from benchmarks.report import benchmark_parser, environment, timings, write
from laplace_equivariance import models
from laplace_equivariance.curvature.activation_graph import activation_graph_only


def main() -> None:
    parser = benchmark_parser(__doc__)
    parser.add_argument("--alpha", type=int, default=4)
    parser.add_argument("--batch", type=int, default=128)
    parser.add_argument("--classes", type=int, default=10)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    torch.manual_seed(0)
    model = models.build("f-fc+conv", (1, 32, 32), args.classes, alpha=args.alpha)
    model = model.to(args.device)
    x = torch.randn(args.batch, 1, 32, 32, device=args.device)
    output_grads = torch.randn(args.classes, args.batch, args.classes, device=args.device)
    first_outputs = []
    model.layer1.register_forward_hook(lambda _m, _a, out: first_outputs.append(out))

    with_parameters = model(x)
    with activation_graph_only(model):
        activations_only = model(x)
    for h in first_outputs:
        h.retain_grad()
    h_with_parameters, h_activations_only = first_outputs

    def one_per_class(f, h):
        """As ASDL's fisher maker: ``backward()`` to every leaf, parameters switched off."""
        gradients = []
        model.requires_grad_(False)
        for k in range(args.classes):
            h.grad = None
            f.backward(output_grads[k], retain_graph=True)
            gradients.append(h.grad)
        model.requires_grad_(True)
        return gradients

    def batched():
        return torch.autograd.grad(
            activations_only,
            h_activations_only,
            output_grads,
            retain_graph=True,
            is_grads_batched=True,
        )[0]

    reference = torch.stack(one_per_class(with_parameters, h_with_parameters))
    ours = torch.stack(one_per_class(activations_only, h_activations_only))
    for gradients in (ours, batched()):
        torch.testing.assert_close(gradients, reference)
    runs = {
        "with_parameter_edges_s": lambda: one_per_class(with_parameters, h_with_parameters),
        "activations_only_s": lambda: one_per_class(activations_only, h_activations_only),
        "batched_over_classes_s": batched,
    }
    seconds = {
        name: statistics.median(timings(run, args.repeats, args.device))
        for name, run in runs.items()
    }
    report = {
        **environment("-m benchmarks.class_backward_passes", args.device),
        "arguments": vars(args) | {"out": str(args.out)},
        **seconds,
    }
    print(", ".join(f"{name} {value * 1e3:.0f} ms" for name, value in seconds.items()))
    write(report, args.out)


if __name__ == "__main__":
    main()
