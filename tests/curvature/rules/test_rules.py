"""Each rule's factors equal a brute-force computation of its documented formula (float64).

The brute force takes the module's input from a forward hook and, per example, the
output-space GGN ``J_n^T Lambda_n J_n`` with ``J_n = d f_n / d out_n`` from torch.func, then
evaluates the formula of the rules (``curvature/rules/``) literally; ASDL instead gets ``B``
from one backward pass per class. laplace-torch divides ``A`` by the data set size ``N``.
"""

from __future__ import annotations

import pytest
import torch
from torch import nn
from torch.nn import functional as F

from laplace_equivariance.curvature import rules
from laplace_equivariance.curvature.rules.base import (
    BATCHED_GRAM_MIN_POSITIONS,
    SYMMETRIC_PRODUCT_SIZE,
    outer_sum,
    outer_sum_over_positions,
)
from laplace_equivariance.curvature.rules.conv import circular_patch_covariance
from laplace_equivariance.curvature.rules.factored import (
    outer_sum_through_output_map,
    output_map_route_is_cheaper,
)
from laplace_equivariance.layers import (
    CircularConv2d,
    FactoredLinear2d,
    FullyConnected2d,
    P4GroupConv2d,
    P4LiftingConv2d,
    P4PointwiseConv2d,
    SparseCircularConv2d,
    SparseFactoredLinear2d,
)
from tests.curvature.reference import capture, exact_ggn_torch_func, fit_kfac, parameter_slices

RTOL = 1e-8  # float64 sums of a few hundred products: rounding is ~1e-14
N, K = 5, 4


def head(features: int) -> list[nn.Module]:
    return [nn.ReLU(), nn.Flatten(), nn.Linear(features, K)]


def groups_by_name(model: nn.Module, la) -> dict[str, list[torch.Tensor]]:
    names = [n for n, p in model.named_parameters() if p.requires_grad]
    return dict(zip(names, la.H_facs.kfacs, strict=True))


def fitted(model: nn.Module, in_shape, device):
    model = model.to(device, torch.float64)
    x = torch.randn(N, *in_shape, dtype=torch.float64, device=device)
    y = torch.randint(0, K, (N,), device=device)
    return model, x, fit_kfac(model, x, y, "classification")


def dense(factor: torch.Tensor) -> torch.Tensor:
    return torch.block_diag(*factor) if factor.ndim == 3 else factor


def assert_close(actual, expected):
    torch.testing.assert_close(actual, expected, rtol=RTOL, atol=RTOL * expected.abs().max().item())


def test_fully_connected(device):
    model, x, la = fitted(nn.Sequential(FullyConnected2d(2, 3, 4, 2), *head(12)), (2, 4, 4), device)
    inputs, G = capture(model[0], model, x)
    a = inputs.flatten(1)
    groups = groups_by_name(model, la)
    B, A = groups["0.weight"]
    assert_close(A, a.T @ a / N)
    assert_close(B, G.sum(0))
    assert_close(groups["0.bias"][0], G.sum(0))


FACTORED_SHAPES = {
    # (C, C', input grid, output grid, Q)
    "direct": (2, 3, 4, 2, 4),
    # few output positions, many input channels: the input map's B through the output map
    "through-output-map-1x1": (8, 3, 4, 1, 1),
    "through-output-map-1x2": (24, 3, 2, (1, 2), 2),
}


@pytest.mark.parametrize("case", FACTORED_SHAPES)
def test_factored_maps(device, case):
    C, Cp, grid, out_grid, Q = FACTORED_SHAPES[case]
    assert output_map_route_is_cheaper(N, Cp, C, Q) == case.startswith("through")
    layer = FactoredLinear2d(C, Cp, grid, out_grid)
    model, x, la = fitted(nn.Sequential(layer, *head(Cp * Q)), (C, grid, grid), device)
    groups = groups_by_name(model, la)
    x_in, G_h = capture(layer.input_map, model, x)  # G_h over h(c', c)
    x_in = x_in.flatten(2)
    G_h = G_h.view(N, Cp, C, Cp, C)
    B2, A2 = groups["0.input_map.weight"]
    assert A2.shape == (C, grid * grid, grid * grid)
    assert_close(A2, torch.einsum("ncp,ncq->cpq", x_in, x_in) / (C * N))
    assert_close(B2, torch.einsum("nocpc->op", G_h))

    h, G_y = capture(layer.output_map, model, x)  # G_y over y(c', q)
    G_y = G_y.view(N, Cp, Q, Cp, Q)
    B1, A1 = groups["0.output_map.weight"]
    assert A1.shape == (Cp, C, C)
    assert_close(A1, torch.einsum("noc,nod->ocd", h, h) / (Cp * N))
    assert_close(B1, torch.einsum("noqor->qr", G_y))
    assert_close(groups["0.output_map.channel_bias"][0], G_y.sum((0, 2, 4)))
    assert_close(groups["0.output_map.position_bias"][0], G_y.sum((0, 1, 3)))


@pytest.mark.parametrize("case", FACTORED_SHAPES)
def test_sparse_factored_maps_project_the_factored_factors(device, case):
    C, Cp, grid, out_grid, Q = FACTORED_SHAPES[case]
    layer = SparseFactoredLinear2d(C, Cp, grid, out_grid)
    model, x, la = fitted(nn.Sequential(layer, *head(Cp * Q)), (C, grid, grid), device)
    groups = groups_by_name(model, la)
    phi2, phi1 = layer.input_map.basis().detach(), layer.output_map.basis().detach()
    x_in, G_h = capture(layer.input_map, model, x)
    x_tilde = torch.einsum("ncp,pj->ncj", x_in.flatten(2), phi2)
    B2, A2 = groups["0.input_map.weight"]
    assert_close(A2, torch.einsum("ncj,nck->cjk", x_tilde, x_tilde) / (C * N))
    assert_close(B2, torch.einsum("nocpc->op", G_h.view(N, Cp, C, Cp, C)))
    _, G_y = capture(layer.output_map, model, x)
    G_y = G_y.view(N, Cp, Q, Cp, Q)
    B1, _ = groups["0.output_map.weight"]
    assert_close(B1, phi1.T @ torch.einsum("noqor->qr", G_y) @ phi1)


@pytest.mark.parametrize("layer_type", [FactoredLinear2d, SparseFactoredLinear2d])
def test_the_fit_takes_the_output_map_route_once_per_backward_pass(monkeypatch, layer_type):
    calls = []

    def counted(theta1, out_grads):
        calls.append(out_grads.shape)
        return outer_sum_through_output_map(theta1, out_grads)

    monkeypatch.setattr(rules.factored, "outer_sum_through_output_map", counted)
    layer = layer_type(8, 3, 4, 1)
    fitted(nn.Sequential(layer, *head(3)), (8, 4, 4), "cpu")
    assert calls == [(N, 3, 1)] * (K - 1)  # the exact GGN's K - 1 class passes
    assert rules.PAIRED_INPUT_MAP_ATTR not in layer.output_map.__dict__
    assert rules.OUTPUT_MAP_GRADIENT_ATTR not in layer.input_map.__dict__


class FactoredWithTanhBetweenTheMaps(FactoredLinear2d):
    """Not F-FC: the input map's output gradient is no longer theta1^T of the output map's."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.output_map(torch.tanh(self.input_map(x)))


def test_maps_with_anything_between_them_keep_the_direct_sum(device):
    layer = FactoredWithTanhBetweenTheMaps(8, 3, 4, 1)
    model, x, la = fitted(nn.Sequential(layer, *head(3)), (8, 4, 4), device)
    _, G_h = capture(layer.input_map, model, x)
    B2, _ = groups_by_name(model, la)["0.input_map.weight"]
    assert_close(B2, torch.einsum("nocpc->op", G_h.view(N, 3, 8, 3, 8)))


@pytest.mark.parametrize(
    "c_out, q", [(3, 1), (5, 4), (130, 4)], ids=["1x1", "2x2", "symmetric-blocks"]
)
def test_outer_sum_through_output_map_equals_the_input_maps_gradient_outer_sum(c_out, q):
    assert (130 * 4 >= SYMMETRIC_PRODUCT_SIZE) and (5 * 4 < SYMMETRIC_PRODUCT_SIZE)
    theta1 = torch.randn(q, c_out, 7, dtype=torch.float64)
    gamma = torch.randn(6, c_out, q, dtype=torch.float64)
    g = torch.einsum("qac,naq->nac", theta1, gamma)  # the input map's output gradient
    assert_close(outer_sum_through_output_map(theta1, gamma), torch.einsum("nac,nbc->ab", g, g))


def test_the_output_map_route_is_taken_where_it_costs_less():
    # the F-FC+CONV+GCONV network's F-FC layers in passes of 128 examples: layers 8 (Q = 1)
    # and 7 (Q = 4) pay, layer 6 (Q = 16, C = 160) does not; nor intermediates of
    # (C'Q)^2 > 4096^2
    assert output_map_route_is_cheaper(128, 640, 320, 1)
    assert output_map_route_is_cheaper(128, 320, 320, 4)
    assert not output_map_route_is_cheaper(128, 320, 160, 16)
    assert not output_map_route_is_cheaper(128, 5000, 320, 1)


def test_an_output_map_gradient_of_another_layer_raises():
    layer = FactoredLinear2d(8, 3, 4, 1).double()
    out_grads = torch.randn(N, 3, 8, dtype=torch.float64)
    other = (torch.randn(1, 3, 5, dtype=torch.float64), torch.randn(N, 3, 1, dtype=torch.float64))
    layer.input_map.__dict__[rules.OUTPUT_MAP_GRADIENT_ATTR] = other
    with pytest.raises(RuntimeError, match="not one F-FC layer's"):
        rules.FactoredInputMapRule.cov_kron_B(layer.input_map, out_grads)


def test_sparse_basis_parameters_get_their_exact_ggn_blocks(device):
    layer = SparseFactoredLinear2d(2, 3, 4, 2)
    model, x, la = fitted(nn.Sequential(layer, *head(12)), (2, 4, 4), device)
    ggn = exact_ggn_torch_func(model, x, "classification")
    groups, slices = groups_by_name(model, la), parameter_slices(model)
    for name in [
        "0.input_map.basis.position_offsets",
        "0.input_map.basis.lengthscale",
        "0.output_map.basis.position_offsets",
        "0.output_map.basis.lengthscale",
        "0.output_map.channel_bias",
        "0.output_map.position_bias",
    ]:
        s = slices[name]
        assert_close(groups[name][0], ggn[s, s])


def unfolded_circular_patches(x: torch.Tensor, kernel_size: int) -> torch.Tensor:
    """Patches of the circularly padded map by ``F.pad`` and ``F.unfold``, ``(N, C S^2, XY)``."""
    p = kernel_size // 2
    return F.unfold(F.pad(x, (p, p, p, p), mode="circular"), kernel_size)


@pytest.mark.parametrize(
    "size, kernel_size",
    [((4, 4), 3), ((2, 2), 3), ((3, 5), 5), ((4, 4), 1), ((8, 8), 3)],
    ids=["4x4-k3", "2x2-k3-pad-wraps-twice", "3x5-k5", "4x4-k1", "8x8-k3-B-by-batched-grams"],
)
def test_circular_conv(size, kernel_size, device):
    """A from the channels' circular cross-correlations equals unfolded patches' A."""
    layer = CircularConv2d(2, 3, kernel_size, size=size)
    positions = size[0] * size[1]
    model, x, la = fitted(nn.Sequential(layer, *head(3 * positions)), (2, *size), device)
    inputs, G = capture(layer, model, x)
    patches = unfolded_circular_patches(inputs, kernel_size)
    rows = patches.transpose(1, 2).reshape(-1, patches.shape[1])
    groups = groups_by_name(model, la)
    B, A = groups["0.weight"]
    assert_close(A, rows.T @ rows / (positions * N))
    assert_close(B, torch.einsum("nopqp->oq", G.view(N, 3, positions, 3, positions)))
    assert_close(groups["0.bias"][0], B)


def test_circular_patch_covariance_in_float32_is_as_accurate_as_unfolding():
    """FFT rounding is ~eps * log(XY) of the largest entry; the unfolded product's is similar.

    Measured on these maps: 1e-7 (FFT) against 4e-7 (unfolding) relative to the largest
    entry; the bound 1e-6 leaves room for other BLAS/FFT builds.
    """
    x = torch.randn(128, 4, 32, 32, dtype=torch.float64)
    patches = unfolded_circular_patches(x, 3)
    rows = patches.transpose(1, 2).reshape(-1, patches.shape[1])
    exact = rows.T @ rows / 1024
    error = (circular_patch_covariance(x.float(), 3).double() - exact).abs().max()
    assert error / exact.abs().max() < 1e-6


def test_sparse_conv(device):
    layer = SparseCircularConv2d(2, 3, 3, size=4)
    model, x, la = fitted(nn.Sequential(layer, *head(48)), (2, 4, 4), device)
    groups = groups_by_name(model, la)
    phi = layer.basis().detach()
    inputs, G = capture(layer, model, x)
    patches = F.unfold(F.pad(inputs, (1, 1, 1, 1), mode="circular"), 3).view(N, 2, 9, 16)
    projected = torch.einsum("ncsp,sj->ncjp", patches, phi).reshape(N, -1, 16)
    rows = projected.transpose(1, 2).reshape(-1, projected.shape[1])
    B, A = groups["0.weight"]
    assert_close(A, rows.T @ rows / (16 * N))
    assert_close(B, torch.einsum("nopqp->oq", G.view(N, 3, 16, 3, 16)))
    ggn = exact_ggn_torch_func(model, x, "classification")
    s = parameter_slices(model)["0.basis.position_offsets"]
    assert_close(groups["0.basis.position_offsets"][0], ggn[s, s])


@pytest.mark.parametrize("pointwise", [False, True], ids=["lifting", "pointwise"])
def test_p4_group_convolutions(pointwise, device):
    lifting = P4LiftingConv2d(2, 3, 3, size=4)
    layers = [lifting, nn.ReLU()]
    if pointwise:
        layers += [P4PointwiseConv2d(3, 2, 3, size=4)]
    model, x, la = fitted(
        nn.Sequential(*layers, *head(4 * (2 if pointwise else 3) * 16)), (2, 4, 4), device
    )
    module = layers[2] if pointwise else lifting
    inputs, G = capture(module, model, x)
    c_in, c_out = module.in_channels, module.out_channels
    per_rotation = (
        inputs.view(N, 4, c_in, 4, 4) if pointwise else inputs[:, None].expand(N, 4, c_in, 4, 4)
    )
    rows = []
    for s in range(4):
        # conv(x, rot^s psi) = rot^s conv(rot^-s x, psi): plain patches of the back-rotated map
        back = torch.rot90(per_rotation[:, s], -s, dims=(-2, -1))
        patches = F.unfold(F.pad(back, (1, 1, 1, 1), mode="circular"), 3)
        rows.append(patches.transpose(1, 2).reshape(-1, patches.shape[1]))
    rows = torch.cat(rows)
    groups = groups_by_name(model, la)
    prefix = "2" if pointwise else "0"
    B, A = groups[f"{prefix}.weight"]
    assert_close(A, rows.T @ rows / (4 * 16 * N))
    assert_close(B, torch.einsum("nsopstp->ot", G.view(N, 4, c_out, 16, 4, c_out, 16)))
    assert_close(groups[f"{prefix}.bias"][0], B)


def test_full_p4_group_convolution(device):
    """The patch that multiplies the filter at each output rotation and position is read off by
    autograd (``d y(c'=0, s, p) / d psi(0)``), independently of the rule's cycling and turning."""
    layer = P4GroupConv2d(3, 2, 3, size=4)
    model, x, la = fitted(
        nn.Sequential(P4LiftingConv2d(2, 3, 3, size=4), nn.ReLU(), layer, *head(4 * 2 * 16)),
        (2, 4, 4),
        device,
    )
    inputs, G = capture(layer, model, x)

    def first_output_channel(weight):
        out = torch.func.functional_call(layer, {"weight": weight, "bias": layer.bias}, inputs)
        return out.view(N, 4, 2, 16)[:, :, 0]

    jacobian = torch.func.jacrev(first_output_channel)(layer.weight.detach())
    rows = jacobian[..., 0, :, :, :].reshape(N * 4 * 16, 4 * 3 * 9)
    B, A = groups_by_name(model, la)["2.weight"]
    assert_close(A, rows.T @ rows / (4 * 16 * N))
    assert_close(B, torch.einsum("nsopstp->ot", G.view(N, 4, 2, 16, 4, 2, 16)))
    assert_close(groups_by_name(model, la)["2.bias"][0], B)


@pytest.mark.parametrize("d", [SYMMETRIC_PRODUCT_SIZE - 1, SYMMETRIC_PRODUCT_SIZE + 1])
def test_outer_sum_by_symmetric_blocks_equals_the_plain_product(d, device):
    """Below and above the size where three blocks replace the full product (odd split)."""
    rows = torch.randn(37, d, dtype=torch.float64, device=device)
    torch.testing.assert_close(outer_sum(rows), rows.T @ rows, rtol=1e-12, atol=1e-12)


def test_outer_sum_under_autograd_is_differentiable(device):
    rows = torch.randn(9, SYMMETRIC_PRODUCT_SIZE, dtype=torch.float64, device=device)
    rows.requires_grad_(True)
    weights = torch.randn(SYMMETRIC_PRODUCT_SIZE, SYMMETRIC_PRODUCT_SIZE, dtype=torch.float64)
    (grad,) = torch.autograd.grad((outer_sum(rows) * weights.to(device)).sum(), rows)
    expected = rows.detach() @ (weights + weights.T).to(device)
    torch.testing.assert_close(grad, expected, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize(
    "channels, positions",
    [
        (3, BATCHED_GRAM_MIN_POSITIONS),
        (5, BATCHED_GRAM_MIN_POSITIONS - 1),
        (BATCHED_GRAM_MIN_POSITIONS + 1, BATCHED_GRAM_MIN_POSITIONS),
    ],
    ids=["batched-grams", "too-few-positions", "more-channels-than-positions"],
)
def test_outer_sum_over_positions_equals_the_sum_over_every_vector(channels, positions, device):
    """Both ways (per-map Gram matrices, or transposed rows) give the literal double sum."""
    maps = torch.randn(6, channels, positions, dtype=torch.float64, device=device)
    expected = sum(torch.outer(m[:, p], m[:, p]) for m in maps for p in range(positions))
    torch.testing.assert_close(outer_sum_over_positions(maps), expected, rtol=1e-12, atol=1e-12)
