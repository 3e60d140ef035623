"""A trained run measured: its accuracy and NLL, and its paths' output shares.

Of the network's own softmax or of its Laplace (GLM) predictive: ``laplace-equivariance
evaluate``; the paths' shares of their layers' outputs: ``laplace-equivariance paths``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, cast

import torch
from laplace import Laplace
from torch.nn import functional as F
from torch.utils.data import DataLoader, TensorDataset

from laplace_equivariance import EquivariantKFAC
from laplace_equivariance.app.config import INVARIANT_WEIGHTS
from laplace_equivariance.app.run_config import Method
from laplace_equivariance.app.runs import config_of_record, load_run, load_trained
from laplace_equivariance.diagnostics import path_output_shares
from laplace_equivariance.invariance import InvariantWeightsNet

METRICS_SEED = 0
"""Seed of the transformations the invariant-weights network samples when it is evaluated."""


def _metrics(model: torch.nn.Module, x: torch.Tensor, y: torch.Tensor, device: str) -> dict:
    """Accuracy and NLL of the model's own softmax on ``(x, y)``, in batches of 512.

    The invariant-weights network averages its prediction over transformations it samples at
    every forward pass: its figures are one Monte-Carlo estimate (``--samples`` draws per
    batch), drawn from :data:`METRICS_SEED` without touching the global random state, so
    that ``evaluate`` gives what ``results.json`` records (on the same device) at every call.
    """
    model.eval()
    sampled = isinstance(model, InvariantWeightsNet)
    where = torch.device(device)
    on_cuda = (
        []
        if where.type != "cuda"
        else [torch.cuda.current_device() if where.index is None else where.index]
    )
    with torch.no_grad(), torch.random.fork_rng(devices=on_cuda, enabled=sampled):
        if sampled:
            torch.manual_seed(METRICS_SEED)
        logits = torch.cat([model(b.to(device)).cpu() for b in x.split(512)])
    return {
        "accuracy": (logits.argmax(-1) == y).float().mean().item(),
        "nll": F.cross_entropy(logits, y).item(),
    }


PREDICTIVES = ("map", "glm")
"""What ``evaluate`` measures: the trained network's own softmax (``map``, as ``results.json``
reports) or the GLM predictive of its Laplace approximation (``glm``, probit)."""


def evaluate(run: Path, split: str = "test", predictive: str = "map") -> dict[str, float]:
    """Rebuild a trained run's model and data and evaluate it on one of its data splits.

    Args:
        run: The ``--out`` folder of a ``train`` run.
        split: ``"test"`` or ``"train"`` (the run's training set, its ``--subset`` applied).
        predictive: ``"map"``: the network's own softmax (the MAP weights, as
            ``results.json`` reports them); ``"glm"``: the GLM predictive (probit) of the
            Kronecker-factored Laplace approximation refitted at the run's learned prior
            precisions and temperature on its marginal-likelihood examples (unit precisions
            for a MAP run), as training's last fit.

    Returns:
        Accuracy and NLL on that split.

    Raises:
        ValueError: If ``split`` or ``predictive`` is not one of its choices.
        SystemExit: For ``glm`` on an invariant-weights run, or on a learned run whose
            ``results.json`` predates the record of its approximation.
    """
    if split not in ("test", "train"):
        raise ValueError(f"split must be 'test' or 'train', not {split!r}")
    if predictive not in PREDICTIVES:
        raise ValueError(f"predictive must be one of {PREDICTIVES}, not {predictive!r}")
    model, data = load_trained(run)
    x, y = (data.x_train, data.y_train) if split == "train" else (data.x_test, data.y_test)
    if predictive == "map":
        return _metrics(model, x, y, "cpu")
    return _glm_metrics(load_run(run), model, data, x, y)


def _glm_metrics(stored: dict[str, Any], model: torch.nn.Module, data, x, y) -> dict[str, float]:
    """Accuracy and NLL of the GLM predictive of the run's refitted Laplace approximation."""
    config = config_of_record(stored["settings"])
    if config.invariant:
        raise SystemExit(
            f"--predictive glm takes the relaxed models' Laplace approximation; --model "
            f"{INVARIANT_WEIGHTS} has its own (the output layer's): use --predictive map."
        )
    if config.method is Method.MAP:
        prior_precision, temperature = torch.tensor(1.0), 1.0  # MAP training's unit prior
    elif "laplace" in stored:
        prior_precision = torch.tensor(stored["laplace"]["prior_precision"])
        temperature = stored["laplace"]["temperature"]
    else:
        raise SystemExit(
            "This run's results.json predates the record of its Laplace approximation's "
            "precisions: train it again (--overwrite) to evaluate --predictive glm."
        )
    n = config.marglik_subset or len(data.x_train)
    torch.manual_seed(config.seed)  # a Monte-Carlo Fisher draws targets
    la = Laplace(
        model,
        "classification",
        subset_of_weights="all",
        hessian_structure="kron",
        backend=EquivariantKFAC,
        prior_precision=prior_precision,
        temperature=temperature,
        backend_kwargs={
            "stochastic": config.stochastic,
            "n_mc_samples": config.mc_samples,
            "kfac_approx": config.kfac_approx.value,
        },
    )
    examples = TensorDataset(data.x_train[:n], data.y_train[:n])
    la.fit(DataLoader(examples, batch_size=config.batch_size))
    # a classification Laplace's predictive is one tensor (laplace-torch types it as a tensor or
    # a (mean, variance) pair, the pair for regression)
    probs = torch.cat(
        [cast(torch.Tensor, la(b, pred_type="glm", link_approx="probit")) for b in x.split(512)]
    )
    picked = probs[torch.arange(len(y)), y].clamp_min(torch.finfo(probs.dtype).tiny)
    return {
        "accuracy": (probs.argmax(-1) == y).float().mean().item(),
        "nll": -picked.log().mean().item(),
    }


PATH_OUTPUT_EXAMPLES = 1000
"""Training examples on which ``train`` and ``paths`` measure each path's output share."""


def path_outputs(run: Path, examples: int = PATH_OUTPUT_EXAMPLES) -> list[dict[str, Any]]:
    """Each path's share of its layer's output energy for a trained run.

    Measured on the first ``examples`` of the run's training images
    (:func:`~laplace_equivariance.path_output_shares`).

    Args:
        run: The ``--out`` folder of a ``train`` run.
        examples: How many training images to measure on.

    Returns:
        ``[{"layer", "paths": {path: share}}, ...]`` per relaxed layer.
    """
    model, data = load_trained(run)
    return path_output_shares(model, data.x_train[:examples])
