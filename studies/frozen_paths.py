"""Train a relaxed network with some of its paths silenced and frozen off for the whole run.

``laplace-equivariance train --start equivariant`` silences every FC-type path
(:meth:`~laplace_equivariance.models.RelaxedNet.start_equivariant_`) and lets training switch
it back on. This script runs the same ``train`` with the paths named by ``--frozen`` (FC by
default) silenced and their parameters frozen (``requires_grad=False``) as well, so they stay
silent for the whole run and outside the Laplace approximation: the network computes its
other paths only, inside relaxed layers that still divide by ``sqrt(K)`` and scale the kept
paths by ``sqrt(K / J)``.

- ``--frozen fc`` (the default): the network's CONV (or CONV+GCONV) network. Beside learned
  CONV (the same paths outside relaxed layers) and the usual equivariant start (FC paths
  free), it separates what the FC paths' presence in training does from what the relaxed
  layers' parametrisation does.
- ``--frozen fc conv`` and ``--frozen fc gconv`` on F-FC+CONV+GCONV: its GCONV network
  (equivariant to quarter turns, and with the rotation pooling at its end invariant to them)
  and its CONV network (translations only), each with the same channels, head and training as
  Table 3's network; their marginal likelihoods say which group the evidence prefers per data
  set when it has to take one for every layer.

The run's folder is a normal ``train`` folder; its ``results.json`` has ``"frozen_paths"`` (the
frozen path names) beside the settings, whose ``start`` is ``equivariant``, and its symmetry
report lists the free paths only.

Usage (from the repository root):
    python -m studies.frozen_paths --dataset quadrant-mnist-digit --model f-fc+conv \
        --method marglik --alpha 4 --epochs 60 --burnin 10 --marglik-subset 4000 --threads 1 \
        --seed 0 --out DIR
    python -m studies.frozen_paths --frozen fc conv --dataset rotated-mnist \
        --model f-fc+conv+gconv --method marglik --alpha 2 --epochs 60 --burnin 6 \
        --marglik-subset 1000 --threads 1 --seed 0 --out DIR
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from collections.abc import Collection, Sequence

import torch

from laplace_equivariance import models
from laplace_equivariance.app import cli, experiment, runs
from laplace_equivariance.app.run_config import RunConfig, Start
from laplace_equivariance.layers import RelaxedLayer
from laplace_equivariance.models import EQUIVARIANT_PATHS, PATH_NAME, RelaxedNet

DEFAULT_FROZEN = ("fc",)
MARKER = "frozen_paths.json"
"""Written before training: a folder holding a run without it was trained with free paths."""


def kept_equivariant_paths(model: RelaxedNet, frozen: Collection[str]) -> tuple[str, ...]:
    """The equivariant paths of ``model`` that ``frozen`` leaves free: where training starts.

    Raises:
        ValueError: If ``frozen`` names a path the model's layers do not have, or freezes
            every equivariant path (the start would compute zero).
    """
    names = {name for layer in model.relaxed_layers for name in layer.path_names}
    unknown = sorted(set(frozen) - names)
    if unknown:
        raise ValueError(
            f"--frozen names {unknown}, which this model's layers do not have; its paths: "
            f"{sorted(names)}."
        )
    kept = tuple(p for p in EQUIVARIANT_PATHS if p in names and p not in frozen)
    if not kept:
        raise ValueError(
            f"--frozen {' '.join(frozen)} freezes every equivariant path of this model, so "
            "nothing would train; keep a CONV or GCONV path free."
        )
    return kept


def freeze_paths(model: torch.nn.Module, frozen: Collection[str] = DEFAULT_FROZEN) -> int:
    """Freeze the paths named ``frozen`` in every relaxed layer; returns how many were frozen.

    Raises:
        ValueError: If a relaxed layer would keep no free path, or no path was frozen.
    """
    count = 0
    for index, module in enumerate(
        (m for m in model.modules() if isinstance(m, RelaxedLayer)), start=1
    ):
        names = [n for n in module.path_names if n in frozen]
        if names and len(names) == len(module.path_names):
            raise ValueError(
                f"{', '.join(names)} is every path of relaxed layer {index}: nothing would train."
            )
        for name in names:
            module.path(name).requires_grad_(False)
            count += 1
    if not count:
        raise ValueError(
            f"The model has no {' or '.join(frozen)} path to freeze; use a relaxed model."
        )
    return count


def main(argv: Sequence[str] | None = None) -> int:
    """``train`` from the equivariant start with the ``--frozen`` paths frozen off."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--frozen",
        nargs="+",
        choices=sorted(set(PATH_NAME.values())),
        default=list(DEFAULT_FROZEN),
        help="the paths silenced and frozen in every relaxed layer [fc]",
    )
    cli.add_train_arguments(parser)
    args = parser.parse_args(list(sys.argv[1:] if argv is None else argv))
    if args.start not in (None, "equivariant"):
        raise SystemExit("The frozen paths are silent from the start: the start is equivariant.")
    args.start = "equivariant"
    frozen = sorted(set(args.frozen))
    run = cli.config_from_arguments(args)
    out = args.out
    marker = out / MARKER
    if (out / runs.RUN_RECORD).exists() and not args.overwrite:
        if not marker.exists() or json.loads(marker.read_text()) != frozen:
            raise SystemExit(
                f"--out {out} holds a run whose frozen paths were not {frozen} (its settings "
                "may be the same, so train would resume it); use another folder or --overwrite."
            )
    build = experiment.build_model  # train looks it up in experiment

    def build_frozen(config: RunConfig, in_shape: Sequence[int], n_classes: int):
        model = build(dataclasses.replace(config, start=Start.MIXED), in_shape, n_classes)
        model.start_equivariant_(kept_equivariant_paths(model, frozen))
        freeze_paths(model, frozen)
        return model

    try:  # checked on a small copy of the model before anything is written
        probe = models.build(run.model, (1, 32, 32), 2, alpha=1)
        kept_equivariant_paths(probe, frozen)
        freeze_paths(probe, frozen)
    except ValueError as error:
        raise SystemExit(str(error)) from error
    out.mkdir(parents=True, exist_ok=True)
    marker.write_text(json.dumps(frozen))
    experiment.build_model = build_frozen
    try:
        experiment.train(run, out, overwrite=args.overwrite)
    finally:
        experiment.build_model = build
    results = json.loads((out / "results.json").read_text())
    results["frozen_paths"] = frozen
    (out / "results.json").write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
