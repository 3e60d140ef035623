"""How a relaxed layer combines its paths decides whether a deep network trains at all.

The App. F.1 F-FC+CONV network (eight relaxed layers of two paths, ``a = 4``) on 1,000 images
of the digit task (the command line's data, seed and initialisation), trained by MAP at unit
prior precision (the burn-in of every learned run) with the command line's schedule: Adam at
0.003, cosine-annealed over 200 epochs, batch 128, the first ``--epochs`` epochs. Two ways to
combine the ``K = 2`` paths:

- ``scaled-sum``: the package's, the paths' sum over ``sqrt(K)``; it keeps the second
  moment of the signal at initialisation;
- ``mean``: the reference code's (and this package's before version 0.3.0), which halves the
  second moment at every layer.

Per seed and combination the JSON holds, per relaxed layer, the output's standard deviation
at initialisation (on the first 256 training images) and, per epoch, the training loss (the
cross-entropy plus the prior term ``||theta||^2 / 2N``), the training accuracy and
``||theta||^2``. A network whose weights the prior shrinks to zero ends at loss ``log 10 =
2.30`` and chance accuracy::

    python -m studies.path_scale --seeds 0 1 2 --out studies/results/path-scale
    python -m studies.path_scale --table   # the table of docs/learned_structure.md
"""

from __future__ import annotations

import argparse
import json
import platform
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pandas as pd
import torch
from torch.utils.data import DataLoader, TensorDataset

from benchmarks.markdown_table import table as markdown
from laplace_equivariance import __version__, models
from laplace_equivariance.data.datasets import load_dataset
from laplace_equivariance.layers import RelaxedLayer
from laplace_equivariance.marglik.training import marglik_training, paper_schedule

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "studies" / "results" / "path-scale"
COMBINATIONS = ("scaled-sum", "mean")
SCHEDULE_EPOCHS = 200
"""The cosine schedule's length (the 200-epoch runs of docs/results-table1.md)."""


@contextmanager
def combined_by(combination: str) -> Iterator[None]:
    """Relaxed layers combine their paths as ``combination`` says inside the block.

    ``"mean"`` divides the paths' sum by ``K``, with the arithmetic of version 0.2.0's layers
    (so its runs repeat that version's digits).
    """
    original = RelaxedLayer.combine
    if combination == "mean":

        def combine(self: RelaxedLayer, total: torch.Tensor) -> torch.Tensor:
            k = len(self.path_names)
            return total / k if k > 1 else total

        RelaxedLayer.combine = combine
    try:
        yield
    finally:
        RelaxedLayer.combine = original


def layer_scales(model: models.RelaxedNet, x: torch.Tensor) -> list[float]:
    """Standard deviation of every relaxed layer's output (before its ReLU), as in forward."""
    scales, hidden = [], x
    with torch.no_grad():
        for layer in model.relaxed_layers:
            out = layer(hidden)
            scales.append(out.std().item())
            hidden = torch.relu(out)
    return scales


def run(seed: int, combination: str, epochs: int, n_train: int) -> dict[str, Any]:
    """One seed of one combination: initial scales and the first ``epochs`` epochs."""
    torch.manual_seed(seed)  # as the command line: seed, data, model, loader
    data = load_dataset("quadrant-mnist-digit", n_train=n_train, seed=seed)
    model = models.build("f-fc+conv", data.in_shape, data.n_classes, alpha=4)
    loader = DataLoader(TensorDataset(data.x_train, data.y_train), batch_size=128, shuffle=True)
    epochs_seen: list[dict[str, float]] = []

    def record(epoch: int, info: dict[str, Any]) -> None:
        squared = sum(p.detach().square().sum() for p in model.parameters()).item()
        epochs_seen.append(
            {"epoch": epoch, "loss": info["loss"], "accuracy": info["accuracy"], "norm2": squared}
        )

    with combined_by(combination):
        scales = layer_scales(model, data.x_train[:256])
        schedule = paper_schedule(SCHEDULE_EPOCHS, len(loader), lr=0.003, marglik=False)
        marglik_training(model, loader, **(schedule | {"n_epochs": epochs}), callback=record)
    return {
        "seed": seed,
        "combination": combination,
        "init_layer_std": scales,
        "epochs": epochs_seen,
        "n_train": n_train,
        "schedule_epochs": SCHEDULE_EPOCHS,
        "device": platform.processor() or platform.machine(),
        "threads": torch.get_num_threads(),
        "torch": torch.__version__,
        "package": __version__,
    }


def _per_seed(runs: list[dict[str, Any]], epoch_index: int, key: str, form: str) -> str:
    """One epoch's value of ``key`` for every run, ``" / "``-separated."""
    return " / ".join(format(r["epochs"][epoch_index][key], form) for r in runs)


def scale_ratios(folder: Path, combination: str) -> list[float]:
    """Per seed of ``combination``'s runs in ``folder``, the last relaxed layer's output std at
    initialisation over the first's."""
    runs = [json.loads(p.read_text()) for p in sorted(folder.glob(f"{combination}-seed*.json"))]
    return [r["init_layer_std"][-1] / r["init_layer_std"][0] for r in runs]


def table(folder: Path) -> pd.DataFrame:
    """One row per combination: seeds, the initial scale ratio, then per seed (0 / 1 / 2) the
    training accuracy at epoch 10 and at the last epoch, the loss and ``||theta||^2`` there."""
    rows = []
    for combination in COMBINATIONS:
        runs = [json.loads(p.read_text()) for p in sorted(folder.glob(f"{combination}-seed*.json"))]
        if not runs:
            continue
        ratios = torch.tensor(scale_ratios(folder, combination))
        spread = ratios.std().item() if len(runs) > 1 else 0.0
        rows.append(
            {
                "paths combined by": combination,
                "version": ", ".join(sorted({r["package"] for r in runs})),
                "seeds": str(len(runs)),
                "last / first relaxed layer's output std at initialisation": (
                    f"{ratios.mean().item():.3f} ± {spread:.3f}"
                ),
                "training accuracy at epoch 10, per seed": _per_seed(runs, 9, "accuracy", ".3f"),
                "at the last epoch": _per_seed(runs, -1, "accuracy", ".3f"),
                "last epoch": str(runs[0]["epochs"][-1]["epoch"]),
                "loss there": _per_seed(runs, -1, "loss", ".3f"),
                "squared norm of the weights there": _per_seed(runs, -1, "norm2", ".0f"),
            }
        )
    return pd.DataFrame(rows)


def main() -> None:
    """Run every (seed, combination) and write one JSON each, or write the docs' table."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--table", action="store_true", help="print the docs' table of --out's JSONs"
    )
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    parser.add_argument("--combinations", nargs="+", choices=COMBINATIONS, default=COMBINATIONS)
    parser.add_argument("--epochs", type=int, default=30, help="epochs trained (30)")
    parser.add_argument("--n-train", type=int, default=1000, dest="n_train", help="(1000)")
    parser.add_argument("--threads", type=int, default=1, help="(1)")
    parser.add_argument(
        "--out", type=Path, default=RESULTS, help=f"folder of the JSONs ({RESULTS})"
    )
    args = parser.parse_args()
    if args.table:
        print(markdown(table(args.out)))
        return
    torch.set_num_threads(args.threads)
    args.out.mkdir(parents=True, exist_ok=True)
    for seed in args.seeds:
        for combination in args.combinations:
            result = run(seed, combination, args.epochs, args.n_train)
            (args.out / f"{combination}-seed{seed}.json").write_text(json.dumps(result, indent=1))
            last = result["epochs"][-1]
            print(
                f"{combination} seed {seed}: last layer / first at init "
                f"{result['init_layer_std'][-1] / result['init_layer_std'][0]:.3f}, epoch "
                f"{last['epoch']} loss {last['loss']:.3f} accuracy {last['accuracy']:.3f}",
                flush=True,
            )


if __name__ == "__main__":
    main()
