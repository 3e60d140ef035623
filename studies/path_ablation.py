"""What trained runs' networks compute without one type of path: accuracy with it removed.

A path's share of its layer's output energy (:func:`~laplace_equivariance.path_output_shares`)
and its relative effective parameters (App. D) say how large a path is, not whether the
network's decisions need it: a small term added to a large one can still move an argmax. For
each run this measures the training and test accuracy of the trained network as it is, with
the ``--path`` term (FC by default) removed from one relaxed layer at a time, and removed from
every layer. A removed path's term is dropped from its layer's sum
(:meth:`~laplace_equivariance.layers.RelaxedLayer.path_outputs`; the others keep their
``1 / sqrt(K)``, so nothing else changes), which is what zeroing its last map computes. Beside
it, the path's output shares on the training and on the test images, and a control: the
accuracies with every term kept and Gaussian noise as large as the path's term added to the
same layers (at each output unit, the term's root mean square over the batch of images). If a
network lost as much to that noise as to the removal, the removal would measure how fragile the
network is to any change of that size; losing far more to the removal says its decisions use
what the path's term computes.

Usage (from the repository root; the runs need their ``model.pt``):
    python -m studies.path_ablation RUN [RUN ...] --out studies/results/path-ablation/N.json
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import Any

import torch
from torch import nn

from laplace_equivariance import path_output_shares
from laplace_equivariance.app.runs import load_trained
from laplace_equivariance.layers import RelaxedLayer
from studies import measured_runs

Replacement = Callable[[torch.Tensor], torch.Tensor]
"""What a path's term, shape ``(B, *out_shape)``, is replaced by in its layer's sum."""


@contextmanager
def _path_term_replaced(
    layers: list[RelaxedLayer], path: str, replace: Replacement
) -> Iterator[None]:
    """Within the block, ``layers`` sum ``replace(term)`` in place of ``path``'s term.

    Raises:
        KeyError: If a layer has no path of that name.
    """
    for layer in layers:
        layer.path(path)

    def hook(layer: nn.Module, inputs: tuple[torch.Tensor, ...], _: torch.Tensor) -> torch.Tensor:
        terms = layer.path_outputs(inputs[0])
        return layer.combine(sum(replace(t) if name == path else t for name, t in terms.items()))

    hooks = [layer.register_forward_hook(hook) for layer in layers]
    try:
        yield
    finally:
        for hook_handle in hooks:
            hook_handle.remove()


def without_path(layers: list[RelaxedLayer], path: str) -> AbstractContextManager[None]:
    """Within the block, ``layers`` compute their sums without ``path``'s term.

    Raises:
        KeyError: If a layer has no path of that name.
    """
    return _path_term_replaced(layers, path, torch.zeros_like)


def with_noise_of_path_size(
    layers: list[RelaxedLayer], path: str, generator: torch.Generator
) -> AbstractContextManager[None]:
    """Within the block, ``layers`` add Gaussian noise as large as ``path``'s term to their sums.

    Every term is kept; the noise at each output unit has the standard deviation of the term's
    root mean square over the batch there, ``sqrt(mean_b t[b, unit]^2)``, so where the term is
    large the noise is too. Drawn from ``generator`` on the CPU, so a measurement repeats.

    Raises:
        KeyError: If a layer has no path of that name.
    """

    def noised(term: torch.Tensor) -> torch.Tensor:
        z = torch.randn(term.shape, generator=generator, dtype=term.dtype).to(term.device)
        return term + z * term.square().mean(0, keepdim=True).sqrt()

    return _path_term_replaced(layers, path, noised)


NOISE_SEED = 0
"""Seed of the control's noise (:func:`with_noise_of_path_size`), one generator per run."""


def accuracy(model: nn.Module, x: torch.Tensor, y: torch.Tensor, batch: int = 500) -> float:
    """Share of ``x`` whose predicted class is ``y``."""
    with torch.no_grad():
        predicted = torch.cat([model(x[i : i + batch]).argmax(-1) for i in range(0, len(x), batch)])
    return (predicted == y).double().mean().item()


def measure(run: Path, path: str, test_images: int) -> dict[str, Any]:
    """One run's accuracies with ``path`` removed per layer and everywhere, and its shares."""
    model, data = load_trained(run)
    splits = {
        "train": (data.x_train, data.y_train),
        "test": (data.x_test[:test_images], data.y_test[:test_images]),
    }
    layers = model.relaxed_layers

    def accuracies() -> dict[str, float]:
        return {split: accuracy(model, x, y) for split, (x, y) in splits.items()}

    generator = torch.Generator().manual_seed(NOISE_SEED)

    def noised(chosen: list[RelaxedLayer]) -> dict[str, float]:
        with with_noise_of_path_size(chosen, path, generator):
            return accuracies()

    per_layer = []
    shares = {split: path_output_shares(model, x) for split, (x, _) in splits.items()}
    for k, layer in enumerate(layers):
        with without_path([layer], path):
            removed = accuracies()
        per_layer.append(
            {
                "layer": shares["train"][k]["layer"],
                "removed": removed,
                "noise_of_path_size": noised([layer]),
                "output_share": {s: shares[s][k]["paths"][path] for s in splits},
            }
        )
    with without_path(layers, path):
        everywhere = accuracies()
    results = json.loads((run / "results.json").read_text())
    return {
        "run": run.name,
        "settings": results["settings"],
        "path": path,
        "test_images": len(splits["test"][0]),
        "accuracy": accuracies(),
        "removed_everywhere": everywhere,
        "noise_of_path_size_everywhere": noised(layers),
        "layers": per_layer,
    }


def main() -> None:
    """Measure the runs and write one JSON file."""
    parser = measured_runs.parser(__doc__.split("\n\n")[0])
    parser.add_argument("--path", default="fc", help="the path type removed (fc, conv, ...)")
    parser.add_argument("--test-images", type=int, default=2000, dest="test_images")
    args = measured_runs.parse(parser)
    measured = [measure(run, args.path, args.test_images) for run in args.runs]
    measured_runs.write(args.out, args.threads, measured)


if __name__ == "__main__":
    main()
