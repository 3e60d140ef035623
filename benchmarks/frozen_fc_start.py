"""Train a relaxed network from the equivariant start with its FC-type paths frozen off.

``laplace-equivariance train --start equivariant`` silences every FC-type path
(:meth:`~laplace_equivariance.models.RelaxedNet.start_equivariant_`) and lets training switch
it back on. This script runs the same ``train`` with those paths' parameters frozen
(``requires_grad=False``) as well, so they stay silent for the whole run and outside the
Laplace approximation: the network computes its CONV (or GCONV) paths only, inside relaxed
layers that still divide by ``sqrt(K)`` and scale the kept paths by ``sqrt(K / J)``. Beside
learned CONV (the same paths outside relaxed layers) and the usual equivariant start (FC
paths free), it separates what the FC paths' presence in training does from what the
relaxed layers' parametrisation does.

The run's folder is a normal ``train`` folder; its ``results.json`` has ``"frozen_paths":
["fc"]`` beside the settings, and its symmetry report lists the CONV paths only.

Usage (from the repository root):
    python -m benchmarks.frozen_fc_start --dataset quadrant-mnist-digit --model f-fc+conv \
        --method marglik --alpha 4 --epochs 60 --burnin 10 --marglik-subset 4000 --threads 1 \
        --seed 0 --out DIR
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from typing import Any

import torch

from laplace_equivariance import config, experiment, runs
from laplace_equivariance.layers import RelaxedLayer
from laplace_equivariance.models import EQUIVARIANT_PATHS

FROZEN = "fc"
MARKER = "frozen_paths.json"
"""Written before training: a folder holding a run without it was trained with free paths."""


def freeze_fc_paths(model: torch.nn.Module) -> int:
    """Freeze every relaxed layer's FC-type path; returns how many paths were frozen.

    Raises:
        ValueError: If no relaxed layer has both an FC-type and an equivariant path.
    """
    frozen = 0
    for module in model.modules():
        if isinstance(module, RelaxedLayer) and FROZEN in module.path_names:
            if not set(module.path_names) & set(EQUIVARIANT_PATHS):
                raise ValueError(
                    f"{FROZEN} is this layer's only kind of path: nothing would train."
                )
            module.path(FROZEN).requires_grad_(False)
            frozen += 1
    if not frozen:
        raise ValueError("The model has no FC-type path to freeze; use a relaxed model.")
    return frozen


def main(argv: Sequence[str] | None = None) -> int:
    """``train`` with the equivariant start and the FC-type paths frozen."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    config.add_train_arguments(parser)
    args = parser.parse_args(list(sys.argv[1:] if argv is None else argv))
    if args.start not in (None, "equivariant"):
        raise SystemExit("The FC paths are frozen silent: the start is equivariant.")
    args.start = "equivariant"
    settings = config.settings_from_arguments(args)
    out = args.out
    marker = out / MARKER
    if (out / runs.RUN_RECORD).exists() and not marker.exists() and not args.overwrite:
        raise SystemExit(
            f"--out {out} holds a run whose FC paths were not frozen (its settings are the "
            "same, so train would resume it); use another folder or --overwrite."
        )
    out.mkdir(parents=True, exist_ok=True)
    marker.write_text(json.dumps([FROZEN]))
    build = experiment.build_model  # train looks it up in experiment

    def build_frozen(settings: dict[str, Any], in_shape: Sequence[int], n_classes: int):
        model = build(dict(settings, start="equivariant"), in_shape, n_classes)
        freeze_fc_paths(model)
        return model

    experiment.build_model = build_frozen
    try:
        experiment.train(settings, out, overwrite=args.overwrite)
    finally:
        experiment.build_model = build
    results = json.loads((out / "results.json").read_text())
    results["frozen_paths"] = [FROZEN]
    (out / "results.json").write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
