"""relax and fold on a network of stock layers: a tiny residual network with batch norm."""

from __future__ import annotations

import pytest
import torch
from laplace import Laplace
from laplace.curvature import AsdlGGN
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from laplace_equivariance import (
    EquivariantKFAC,
    fold,
    marglik_training,
    path_output_shares,
    relax,
    symmetry_report,
)
from laplace_equivariance.layers import FactoredLinear2d, RelaxedLayer
from laplace_equivariance.relaxation import relaxation_plan

K = 3


class Block(nn.Module):
    """``relu(x + bn(conv2(relu(bn(conv1(x))))))``, or with a strided 1x1 shortcut."""

    def __init__(self, c_in: int, c_out: int, stride: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(c_in, c_out, 3, stride=stride, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(c_out)
        self.conv2 = nn.Conv2d(c_out, c_out, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(c_out)
        self.shortcut = nn.Identity() if stride == 1 else nn.Conv2d(c_in, c_out, 1, stride=stride)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = torch.relu(self.bn1(self.conv1(x)))
        return torch.relu(self.shortcut(x) + self.bn2(self.conv2(h)))


def tiny_resnet() -> nn.Module:
    """A stem, two residual blocks (the second strided, with a 1x1 shortcut) and a head."""
    return nn.Sequential(
        nn.Conv2d(1, 4, 3, padding=1),
        nn.ReLU(),
        Block(4, 4, 1),
        Block(4, 6, 2),
        nn.AdaptiveAvgPool2d(1),
        nn.Flatten(),
        nn.Linear(6, K),
    )


@pytest.fixture
def data() -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    return torch.randn(16, 1, 8, 8, generator=g), torch.randint(0, K, (16,), generator=g)


def trained_statistics(model: nn.Module, x: torch.Tensor) -> nn.Module:
    """Give the batch norms running statistics other than the defaults, then eval mode."""
    model.train()
    with torch.no_grad():
        model(x)
    return model.eval()


def test_the_relaxed_network_computes_what_the_original_did(data):
    x, _ = data
    original = trained_statistics(tiny_resnet(), x)
    relaxed = relax(original, x[:1]).eval()
    relaxed_layers = [m for m in relaxed.modules() if isinstance(m, RelaxedLayer)]
    assert len(relaxed_layers) == 6  # stem, 2 x (conv1, conv2), the strided shortcut
    torch.testing.assert_close(relaxed(x), original(x), rtol=1e-5, atol=1e-6)
    # the CONV path is the original convolution: its weights, stride, padding, dilation
    conv = relaxed[3].conv1.path("conv")
    assert conv.stride == (2, 2) and conv.padding == (1, 1)
    assert torch.equal(conv.weight, original[3].conv1.weight)
    assert isinstance(relaxed[3].conv1.path("fc"), FactoredLinear2d)
    assert not any(isinstance(m, RelaxedLayer) for m in original.modules())


def test_layers_select_by_name_or_predicate_and_refuse_what_is_not_a_convolution(data):
    x, _ = data
    model = tiny_resnet()
    by_name = relax(model, x[:1], layers=["2.conv1"])
    assert [n for n, m in by_name.named_modules() if isinstance(m, RelaxedLayer)] == ["2.conv1"]
    by_predicate = relax(model, x[:1], layers=lambda name, conv: conv.stride == (2, 2))
    relaxed = [n for n, m in by_predicate.named_modules() if isinstance(m, RelaxedLayer)]
    assert relaxed == ["3.conv1", "3.shortcut"]
    with pytest.raises(ValueError, match="not nn.Conv2d modules"):
        relax(model, x[:1], layers=["6"])
    # grouped, dilated and circularly padded convolutions are relaxed too (issue 68.2;
    # their curvature: tests/test_relaxed_resnet.py)
    for conv in (
        nn.Conv2d(4, 4, 3, padding=1, groups=2),
        nn.Conv2d(4, 4, 3, padding=2, dilation=2),
        nn.Conv2d(4, 4, 3, padding=1, padding_mode="circular"),
    ):
        assert isinstance(relax(nn.Sequential(conv), torch.randn(1, 4, 8, 8))[0], RelaxedLayer)
    with pytest.raises(ValueError, match="kinds"):
        relax(model, x[:1], paths=("gconv",))


def test_a_relaxation_above_the_limit_is_refused_before_allocating_naming_the_cheaper_path(
    data, capsys
):
    x, _ = data
    model = tiny_resnet()
    plan = relaxation_plan(model, x[:1])
    stem = plan[0]
    assert (stem.in_shape, stem.out_shape) == ((1, 8, 8), (4, 8, 8))
    # F-FC: C'C(XY + X'Y') weights, C' + X'Y' biases
    assert stem.added["f-fc"] == 4 * 1 * (64 + 64) + 4 + 64
    total = sum(site.added["f-fc"] for site in plan)
    with pytest.raises(ValueError, match=r"above max_added_parameters=100 .*paths=\('s-fc',\)"):
        relax(model, x[:1], max_added_parameters=100)
    assert relax(model, x[:1], max_added_parameters=total) is not model
    assert relax(model, x[:1], dry_run=True) is model
    table = capsys.readouterr().out
    assert "3.conv1" in table and f"{total:,}" in table


def test_the_conv_paths_factors_are_the_original_networks_and_every_diagnostic_runs(data):
    """At the start the new paths are zero, so each CONV path's Kron factors (zero-padded,
    strided, 1x1) equal those AsdlGGN computes for the original network, in float64 (the
    batch norms frozen: ASDL has no rule for them and would misalign its factors; this
    package's exact blocks for them are tested in tests/curvature/rules)."""
    x, y = data
    original = trained_statistics(tiny_resnet().double(), x.double())
    for module in original.modules():
        if isinstance(module, nn.BatchNorm2d):
            module.requires_grad_(False)
    relaxed = relax(original, x[:1].double())
    loader = DataLoader(TensorDataset(x.double(), y), batch_size=8)
    fitted = {}
    for name, model, backend in (("stock", original, AsdlGGN), ("ours", relaxed, EquivariantKFAC)):
        la = Laplace(model, "classification", "all", hessian_structure="kron", backend=backend)
        la.fit(loader)
        trainable = [n for n, p in model.named_parameters() if p.requires_grad]
        fitted[name] = dict(zip(trainable, la.H_facs.kfacs, strict=True))
    for name, factors in fitted["stock"].items():
        relaxed_name = name.replace("conv1.", "conv1.conv.").replace("conv2.", "conv2.conv.")
        relaxed_name = relaxed_name.replace("shortcut.", "shortcut.conv.")
        if name.startswith("0."):
            relaxed_name = name.replace("0.", "0.conv.", 1)
        for a, b in zip(factors, fitted["ours"][relaxed_name], strict=True):
            torch.testing.assert_close(b, a, rtol=1e-10, atol=1e-12)
    relaxed.requires_grad_(True)
    la = Laplace(
        relaxed, "classification", "all", hessian_structure="kron", backend=EquivariantKFAC
    )
    la.fit(loader)
    report = symmetry_report(la)
    assert {row["layer"] for row in report["layers"]} >= {"0", "3.conv1", "3.shortcut"}
    relaxed.eval()
    shares = path_output_shares(relaxed, x.double())
    assert all(row["paths"]["fc"] == 0.0 for row in shares)


def test_marglik_training_learns_on_the_relaxed_network_and_fold_keeps_its_predictions(data):
    x, y = data
    torch.manual_seed(0)
    relaxed = relax(tiny_resnet(), x[:1])
    _, trained, *_ = marglik_training(
        relaxed,
        DataLoader(TensorDataset(x, y), batch_size=8),
        n_epochs=2,
        n_epochs_burnin=1,
        n_hypersteps=2,
        optimizer_kwargs={"lr": 1e-2},
    )
    trained.eval()
    shares = {row["layer"]: row["paths"]["fc"] for row in path_output_shares(trained, x)}
    assert all(0 < share < 1 for share in shares.values())  # training moved every F-FC path
    threshold = sorted(shares.values())[2]  # folds the three layers of smallest share
    folded = fold(trained, x, threshold=threshold)
    plain = [n for n, m in folded.named_modules() if type(m) is nn.Conv2d and n in shares]
    assert sorted(plain) == sorted(n for n, s in shares.items() if s < threshold)
    # the folded layers' outputs lose at most sqrt(s) / (1 - sqrt(s)) of their norm each
    change = (folded(x) - trained(x)).norm() / trained(x).norm()
    assert change < 3 * threshold**0.5
    everything = fold(trained, x, threshold=0.999)
    assert not any(isinstance(m, RelaxedLayer) for m in everything.modules())
    assert sum(p.numel() for p in everything.parameters()) == sum(
        p.numel() for p in tiny_resnet().parameters()
    )
    with pytest.raises(ValueError, match=r"in \[0, 1\)"):
        fold(trained, x, threshold=1.5)
