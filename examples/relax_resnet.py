"""Relax a torchvision ResNet-18, learn which convolutions stay equivariant, fold it back.

1. ``resnet18`` with a CIFAR-style stem (3x3 first convolution, no max-pool) for one input
   channel and the task's classes;
2. :func:`laplace_equivariance.relax` gives the last convolution of the last two stages an
   F-FC path that can see where things are (started at zero: the relaxed network computes what
   the original does);
3. :func:`laplace_equivariance.marglik_training` learns the weights and a prior precision per
   layer and path (``prior_structure="path"``), the FC paths held at zero until the first fit;
4. :func:`laplace_equivariance.symmetry_report` and
   :func:`laplace_equivariance.path_output_shares` say which layers kept their FC paths;
5. :func:`laplace_equivariance.fold` turns the others back into plain convolutions.

The data are the offline MNIST digits, each in a random quadrant of a 56x56 canvas resized to
32x32, labelled by (digit, quadrant): 40 classes, so the late layers may want to see where
the digit is (``--dataset quadrant-fashion`` after ``apt-get install dataset-fashion-mnist``
for the items). ``python examples/relax_resnet.py`` (128 images, 4 epochs, fits after epochs
2 and 4 and a final one) takes 2.5 minutes on one thread of a 2-core Xeon and reaches 6 % on
200 test images with seed 0 (40 classes: it shows the steps, not a trained network);
``studies/relaxed_resnet_study.py`` is the study.
"""

from __future__ import annotations

import argparse

import torch
import torchvision
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from laplace_equivariance import (
    count_parameters,
    fold,
    marglik_training,
    paper_schedule,
    path_output_shares,
    relax,
    symmetry_report,
)
from laplace_equivariance.data.datasets import load_dataset


def cifar_resnet18(in_channels: int, num_classes: int) -> nn.Module:
    """torchvision's ResNet-18 with a CIFAR-style stem: 3x3 first convolution, no max-pool."""
    model = torchvision.models.resnet18(num_classes=num_classes)
    model.conv1 = nn.Conv2d(in_channels, 64, 3, padding=1, bias=False)
    model.maxpool = nn.Identity()
    return model


def main(argv: list[str] | None = None) -> dict:
    """Relax, train, report, fold; returns the figures it prints."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", default="quadrant-mnist", help="(quadrant-mnist)")
    parser.add_argument("--n-train", type=int, default=128, dest="n_train", help="(128)")
    parser.add_argument("--n-test", type=int, default=200, dest="n_test", help="(200)")
    parser.add_argument("--epochs", type=int, default=4, help="(4: fits after epochs 2 and 4)")
    relaxed = ["layer3.1.conv2", "layer4.1.conv2"]
    parser.add_argument("--layers", nargs="+", default=relaxed, help=f"relaxed ({relaxed})")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    data = load_dataset(args.dataset, n_train=args.n_train, n_test=args.n_test, seed=args.seed)
    original = cifar_resnet18(data.x_train.shape[1], data.n_classes)

    # 1-2. relax two convolutions (relax(original, x, dry_run=True) prints every layer's cost:
    # F-FC on all twenty would add 172 M parameters)
    model = relax(original, data.x_train[:1], paths=("f-fc",), layers=args.layers)
    print(
        f"parameters: original {count_parameters(original):,}, relaxed {count_parameters(model):,}"
    )

    # 3. weights and a prior per layer and path; the FC paths wait for the first fit
    loader = DataLoader(TensorDataset(data.x_train, data.y_train), batch_size=64, shuffle=True)
    schedule = paper_schedule(args.epochs, len(loader), n_epochs_burnin=2, marglik_frequency=2)
    fc = [p for name, p in model.named_parameters() if ".fc." in name]
    la, model, _, _ = marglik_training(
        model,
        loader,
        prior_structure="path",
        stochastic=True,  # the Monte-Carlo Fisher: cheaper than the exact GGN's 40 classes
        held_until_fit=fc,
        progress_bar=True,
        **schedule,
    )

    # 4. which layers kept their FC paths
    model.eval()
    with torch.no_grad():
        logits = model(data.x_test)
    accuracy = (logits.argmax(-1) == data.y_test).float().mean().item()
    print(f"test accuracy {100 * accuracy:.1f} % ({len(data.x_test)} images)")
    report = symmetry_report(la)
    shares = path_output_shares(model, data.x_train)
    for row, measured in zip(report["layers"], shares, strict=True):
        fc_prior = row["paths"]["fc"]["prior_precision"]
        print(
            f"{row['layer']:22} FC output share {measured['paths']['fc']:.2e}, FC prior "
            f"precisions {', '.join(f'{p:.3g}' for p in fc_prior)}"
        )

    # 5. fold: layers whose FC paths carry under 0.1 % of their output become nn.Conv2d again
    folded = fold(model, data.x_train)
    with torch.no_grad():
        folded_accuracy = (folded(data.x_test).argmax(-1) == data.y_test).float().mean().item()
    relaxed_left = [row["layer"] for row in shares if row["paths"]["fc"] >= 1e-3]
    print(
        f"folded: {count_parameters(folded):,} parameters, test accuracy "
        f"{100 * folded_accuracy:.1f} %, layers still relaxed: {relaxed_left or 'none'}"
    )
    return {
        "accuracy": accuracy,
        "folded_accuracy": folded_accuracy,
        "shares": shares,
        "report": report,
        "parameters": {
            "original": count_parameters(original),
            "relaxed": count_parameters(model),
            "folded": count_parameters(folded),
        },
    }


if __name__ == "__main__":
    main()
