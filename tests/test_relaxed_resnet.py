"""Every relaxed convolution works with EquivariantKFAC (issue 68.2), in float64.

A tiny ResNet (stem, two residual blocks with batch norm; a dilated, a strided and two
grouped convolutions, one of them depthwise, and a strided 1x1 shortcut) relaxed with F-FC
paths on 8x8 images:

- the Kron blocks ``B (x) A`` of every CONV path (weight and bias) equal curvlinops'
  ``KFACLinearOperator`` (exact GGN, KFAC-expand and -reduce), which defines grouped
  convolutions by the patch averaged over the groups as the rule does
  (:mod:`laplace_equivariance.curvature.rules.stock_conv`), to ``rtol=1e-10``: both sum the
  same outer products in float64 in different orders (measured: below 1e-14 relative);
- where KFAC is exact (one example, one output position: a relaxed convolution whose output
  grid is 1x1, followed by a linear head) the CONV path's blocks equal the exact GGN block
  (torch.func), for dilated, strided, ``'same'``-, circularly, reflection- and
  replication-padded and (for inputs equal in every group) grouped convolutions; for a grouped
  convolution whose groups see different inputs the group-averaged KFAC is not exact, and the
  test pins that it is not;
- ``Laplace(..., backend=EquivariantKFAC)``, ``marglik_training``, ``symmetry_report``,
  ``path_output_shares`` and ``plot_symmetry`` run on the relaxed network and give finite
  results.
"""

from __future__ import annotations

import math

import pytest
import torch
from curvlinops import KFACLinearOperator
from laplace import Laplace
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from laplace_equivariance import (
    EquivariantKFAC,
    marglik_training,
    path_output_shares,
    plot_symmetry,
    relax,
    symmetry_report,
)
from laplace_equivariance.curvature.differentiable import batch_factors
from laplace_equivariance.layers import RelaxedLayer
from tests.curvature.reference import exact_ggn_torch_func, fit_kfac, parameter_slices

K = 3
APPROXIMATIONS = ["expand", "reduce"]


class Block(nn.Module):
    """``relu(shortcut(x) + bn(conv2(relu(bn(conv1(x))))))``.

    ``conv1`` strided or dilated, ``conv2`` grouped; a strided 1x1 shortcut where the grid or
    the channels change.
    """

    def __init__(
        self, c_in: int, c_out: int, stride: int = 1, dilation: int = 1, groups: int = 1
    ) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(
            c_in, c_out, 3, stride=stride, padding=dilation, dilation=dilation, bias=False
        )
        self.bn1 = nn.BatchNorm2d(c_out)
        self.conv2 = nn.Conv2d(c_out, c_out, 3, padding=1, groups=groups, bias=False)
        self.bn2 = nn.BatchNorm2d(c_out)
        changes = stride != 1 or c_in != c_out
        self.shortcut = nn.Conv2d(c_in, c_out, 1, stride=stride) if changes else nn.Identity()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = torch.relu(self.bn1(self.conv1(x)))
        return torch.relu(self.shortcut(x) + self.bn2(self.conv2(h)))


def tiny_resnet() -> nn.Module:
    """Stem; a block with a dilated and a 2-group convolution; a strided block with a
    depthwise (6-group) convolution and a 1x1 shortcut; pooling and a linear head."""
    return nn.Sequential(
        nn.Conv2d(2, 4, 3, padding=1),
        nn.ReLU(),
        Block(4, 4, dilation=2, groups=2),
        Block(4, 6, stride=2, groups=6),
        nn.AdaptiveAvgPool2d(1),
        nn.Flatten(),
        nn.Linear(6, K),
    )


CONVS = ["0", "2.conv1", "2.conv2", "3.conv1", "3.conv2", "3.shortcut"]


@pytest.fixture
def data() -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    x = torch.randn(12, 2, 8, 8, generator=g, dtype=torch.float64)
    return x, torch.randint(0, K, (12,), generator=g)


def relaxed_resnet(x: torch.Tensor) -> nn.Module:
    """The relaxed network in float64, batch norms with running statistics, eval mode, its
    F-FC paths moved off zero (so that they change the CONV paths' output gradients)."""
    torch.manual_seed(0)
    model = tiny_resnet().double()
    model.train()
    with torch.no_grad():
        model(x)
    relaxed = relax(model.eval(), x[:1])
    with torch.no_grad():
        for name, p in relaxed.named_parameters():
            if ".fc." in name and p.ndim > 1:
                p.normal_(0, 0.3 / math.sqrt(p[0].numel()))
    return relaxed.eval()


def test_every_convolution_of_the_resnet_is_relaxed_and_computes_as_before(data):
    x, _ = data
    torch.manual_seed(0)
    original = tiny_resnet().double()
    original.train()
    with torch.no_grad():
        original(x)
    original.eval()
    relaxed = relax(original, x[:1]).eval()
    layers = [n for n, m in relaxed.named_modules() if isinstance(m, RelaxedLayer)]
    assert layers == CONVS
    torch.testing.assert_close(relaxed(x), original(x), rtol=1e-12, atol=1e-12)
    dilated, grouped = relaxed[2].conv1.path("conv"), relaxed[3].conv2.path("conv")
    assert dilated.dilation == (2, 2) and grouped.groups == 6


def conv_path_parameters(model: nn.Module) -> dict[str, nn.Parameter]:
    """Name -> parameter of every CONV path of the relaxed layers."""
    return {n: p for n, p in model.named_parameters() if ".conv." in n or n.startswith("0.conv.")}


def curvlinops_blocks(
    model: nn.Module, params: dict[str, nn.Parameter], x, y, approximation
) -> dict[str, torch.Tensor]:
    """curvlinops' KFAC (exact GGN, type-2) of ``params`` materialised, one block per tensor."""
    tensors = list(params.values())
    operator = KFACLinearOperator(
        model,
        nn.CrossEntropyLoss(reduction="sum"),
        tensors,
        [(x, y)],
        fisher_type="type-2",
        kfac_approx=approximation,
        check_deterministic=False,
    )
    n = sum(p.numel() for p in tensors)
    dense = torch.as_tensor(operator @ torch.eye(n, dtype=x.dtype))
    blocks, start = {}, 0
    for name, p in params.items():
        blocks[name] = dense[start : start + p.numel(), start : start + p.numel()]
        start += p.numel()
    return blocks


def kron_blocks(model: nn.Module, la) -> dict[str, torch.Tensor]:
    """Name -> the dense block ``B (x) A`` (or the one factor) of every trainable tensor."""
    names = [n for n, p in model.named_parameters() if p.requires_grad]
    blocks = {}
    for name, factors in zip(names, la.H_facs.kfacs, strict=True):
        dense = [f if f.ndim == 2 else torch.block_diag(*f) for f in factors]
        blocks[name] = dense[0] if len(dense) == 1 else torch.kron(dense[0], dense[1])
    return blocks


def max_differences(block: torch.Tensor, reference: torch.Tensor) -> tuple[float, float]:
    """Largest absolute difference, and it relative to the reference's largest entry."""
    difference = (block - reference).abs().max().item()
    return difference, difference / reference.abs().max().item()


@pytest.mark.parametrize("approximation", APPROXIMATIONS)
def test_conv_path_blocks_equal_curvlinops_kfac(data, approximation):
    x, y = data
    model = relaxed_resnet(x)
    la = fit_kfac(model, x, y, "classification", backend_kwargs={"kfac_approx": approximation})
    ours = kron_blocks(model, la)
    params = conv_path_parameters(model)
    assert sorted({n.rsplit(".conv.", 1)[0] for n in params}) == sorted(CONVS)
    assert len(params) == 8  # six weights, the stem's and the shortcut's biases
    expected = curvlinops_blocks(model, params, x, y, approximation)
    worst = 0.0
    for name, reference in expected.items():
        assert reference.abs().max() > 0, name
        torch.testing.assert_close(ours[name], reference, rtol=1e-10, atol=1e-14, msg=name)
        worst = max(worst, max_differences(ours[name], reference)[1])
    assert worst < 1e-12


@pytest.mark.parametrize("approximation", APPROXIMATIONS)
def test_the_differentiable_recomputation_gives_the_fitted_factors(data, approximation):
    """The lengthscale derivative's recomputation of one batch's factors
    (:func:`~laplace_equivariance.curvature.differentiable.batch_factors`) takes the grouped,
    dilated and strided convolutions' patches as their rule does."""
    x, y = data
    model = relaxed_resnet(x)
    la = fit_kfac(model, x, y, "classification", backend_kwargs={"kfac_approx": approximation})
    recomputed = batch_factors(la.backend, x, len(x))
    for fitted, again in zip(la.H_facs.kfacs, recomputed, strict=True):
        for a, b in zip(fitted, again, strict=True):
            torch.testing.assert_close(b.detach(), a, rtol=1e-10, atol=1e-14)


def test_a_monte_carlo_fit_has_the_exact_fits_structure(data):
    """The Monte-Carlo Fisher's passes run the same rules: same factor shapes, finite."""
    x, y = data
    model = relaxed_resnet(x)
    exact = fit_kfac(model, x, y, "classification")
    sampled = fit_kfac(
        model, x, y, "classification", backend_kwargs={"stochastic": True, "n_mc_samples": 2}
    )
    for ours, theirs in zip(sampled.H_facs.kfacs, exact.H_facs.kfacs, strict=True):
        assert [f.shape for f in ours] == [f.shape for f in theirs]
        assert all(torch.isfinite(f).all() for f in ours)
    assert math.isfinite(sampled.log_marginal_likelihood().item())


def relaxed_single_conv(conv: nn.Conv2d, in_shape: tuple[int, int, int]) -> nn.Module:
    """``conv`` relaxed with an F-FC path, then a linear head: one layer between data and
    head, so that its blocks are exact for one example with one output position."""
    x = torch.zeros(1, *in_shape, dtype=torch.float64)
    out = conv.double()(x)
    model = nn.Sequential(conv, nn.Flatten(), nn.Linear(out[0].numel(), K)).double()
    relaxed = relax(model, x)
    with torch.no_grad():
        for name, p in relaxed.named_parameters():
            if ".fc." in name and p.ndim > 1:
                p.normal_(0, 0.5)
    return relaxed


EXACT_CONVS = {
    "zero-padded": (lambda: nn.Conv2d(2, 3, 3, padding=1), (2, 1, 1)),
    "strided": (lambda: nn.Conv2d(2, 3, 3, stride=2), (2, 4, 4)),
    "dilated": (lambda: nn.Conv2d(2, 3, 3, dilation=2), (2, 5, 5)),
    "dilated-strided-rectangular": (
        lambda: nn.Conv2d(2, 3, (2, 3), stride=(3, 2), dilation=(3, 2), padding=(1, 0)),
        (2, 4, 5),
    ),
    "same-odd-dilation": (lambda: nn.Conv2d(2, 3, 3, padding="same", dilation=3), (2, 1, 1)),
    "same-even-kernel": (lambda: nn.Conv2d(2, 3, (2, 3), padding="same"), (2, 1, 1)),
    "circular": (lambda: nn.Conv2d(2, 3, 3, padding=1, padding_mode="circular"), (2, 1, 1)),
    "reflect": (lambda: nn.Conv2d(2, 3, 3, padding=1, padding_mode="reflect", stride=2), (2, 2, 2)),
    "replicate": (
        lambda: nn.Conv2d(2, 3, 3, padding=2, dilation=2, padding_mode="replicate"),
        (2, 1, 1),
    ),
    "grouped-equal-groups": (lambda: nn.Conv2d(4, 6, 3, groups=2), (4, 3, 3)),
    "depthwise-equal-groups": (lambda: nn.Conv2d(3, 6, 3, groups=3, dilation=2), (3, 5, 5)),
}


@pytest.mark.filterwarnings("ignore:Using padding='same' with even kernel lengths")
@pytest.mark.parametrize("approximation", APPROXIMATIONS)
@pytest.mark.parametrize("case", list(EXACT_CONVS))
def test_conv_path_blocks_are_the_exact_ggn_for_one_example_at_one_position(case, approximation):
    make, in_shape = EXACT_CONVS[case]
    torch.manual_seed(1)
    model = relaxed_single_conv(make(), in_shape)
    conv = model[0].path("conv")
    assert model[0](torch.zeros(1, *in_shape, dtype=torch.float64)).shape[-2:] == (1, 1)
    x = torch.randn(1, *in_shape, dtype=torch.float64)
    if conv.groups > 1:  # every group sees the same input: the averaged patch is each group's
        x = x[:, : in_shape[0] // conv.groups].repeat(1, conv.groups, 1, 1)
    y = torch.randint(0, K, (1,))
    la = fit_kfac(model, x, y, "classification", backend_kwargs={"kfac_approx": approximation})
    ours = kron_blocks(model, la)
    exact = exact_ggn_torch_func(model, x, "classification")
    slices = parameter_slices(model)
    for name in ("0.conv.weight", "0.conv.bias"):
        s = slices[name]
        reference = exact[s, s]
        assert reference.abs().max() > 1e-6, name
        torch.testing.assert_close(ours[name], reference, rtol=1e-10, atol=1e-13, msg=name)


def test_grouped_kfac_is_not_exact_when_the_groups_see_different_inputs():
    """The group-averaged patch is an approximation for groups with different inputs, even
    for one example at one position (the documented convention, as curvlinops')."""
    torch.manual_seed(1)
    model = relaxed_single_conv(nn.Conv2d(4, 6, 3, groups=2), (4, 3, 3))
    x, y = torch.randn(1, 4, 3, 3, dtype=torch.float64), torch.randint(0, K, (1,))
    block = kron_blocks(model, fit_kfac(model, x, y, "classification"))["0.conv.weight"]
    s = parameter_slices(model)["0.conv.weight"]
    exact = exact_ggn_torch_func(model, x, "classification")[s, s]
    assert (block - exact).norm() > 0.1 * exact.norm()


@pytest.mark.filterwarnings("ignore::laplace_equivariance.NotLearningWarning")
def test_laplace_marglik_and_the_diagnostics_run_on_the_relaxed_resnet(data):
    x, y = data
    x, y = x.float(), y
    torch.manual_seed(0)
    model = relax(tiny_resnet(), x[:1])
    loader = DataLoader(TensorDataset(x, y), batch_size=6)
    model.eval()
    la = Laplace(
        model,
        "classification",
        subset_of_weights="all",
        hessian_structure="kron",
        backend=EquivariantKFAC,
    )
    la.fit(loader)
    assert math.isfinite(la.log_marginal_likelihood().item())
    la, trained, margliks, _ = marglik_training(
        model,
        loader,
        n_epochs=2,
        n_epochs_burnin=1,
        n_hypersteps=2,
        optimizer_kwargs={"lr": 1e-2},
    )
    assert all(math.isfinite(m) for m in margliks)
    report = symmetry_report(la)
    assert [row["layer"] for row in report["layers"]] == CONVS
    for row in report["layers"]:
        for path in row["paths"].values():
            assert math.isfinite(path["relative"]) and 0 <= path["relative"] <= 1
    trained.eval()
    shares = path_output_shares(trained, x)
    assert [row["layer"] for row in shares] == CONVS
    assert all(0 < row["paths"]["fc"] < 1 for row in shares)  # training moved every F-FC path
    figure = plot_symmetry(report, title="relaxed tiny ResNet")
    assert len(figure.axes) == 1
