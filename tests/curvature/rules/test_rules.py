"""Each rule's factors equal a brute-force computation of its documented formula (float64).

Every path kind's rule cases (``tests/cases.py``: the kind's modules before a ReLU and a linear
head, and the formula of each parameter's factors) are fitted with KFAC-expand and -reduce.
The formulas take the module's input from a forward hook and, per example, the output-space
GGN ``J_n^T Lambda_n J_n`` with ``J_n = d f_n / d out_n`` from torch.func, and evaluate the
rules' formulas (``curvature/rules/``) literally; ASDL instead gets ``B`` from one backward
pass per class. laplace-torch divides ``A`` by the data set size ``N``. The other tests check
the helpers the rules share and F-FC's route through the output map.
"""

from __future__ import annotations

import pytest
import torch
from torch import nn

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
from laplace_equivariance.layers import FactoredLinear2d, SparseFactoredLinear2d
from tests.cases import (
    FACTORED_SHAPES,
    RULE_CLASSES,
    RULE_EXAMPLES,
    Brute,
    RuleCase,
    circular_patches,
    rule_cases,
)
from tests.curvature.reference import capture, fit_kfac

RTOL = 1e-8  # float64 sums of a few hundred products: rounding is ~1e-14
N, K = RULE_EXAMPLES, RULE_CLASSES
RULE_CASES = rule_cases()


def head(features: int) -> list[nn.Module]:
    return [nn.ReLU(), nn.Flatten(), nn.Linear(features, K)]


def groups_by_name(model: nn.Module, la) -> dict[str, list[torch.Tensor]]:
    names = [n for n, p in model.named_parameters() if p.requires_grad]
    return dict(zip(names, la.H_facs.kfacs, strict=True))


def fitted(model: nn.Module, in_shape, device, approximation: str = "expand"):
    model = model.to(device, torch.float64)
    x = torch.randn(N, *in_shape, dtype=torch.float64, device=device)
    y = torch.randint(0, K, (N,), device=device)
    la = fit_kfac(model, x, y, "classification", backend_kwargs={"kfac_approx": approximation})
    return model, x, la


def assert_close(actual, expected):
    """To ``RTOL``, with an absolute floor of ``1e-10`` of the largest entry."""
    atol = 1e-10 * expected.abs().max().item()
    torch.testing.assert_close(actual, expected, rtol=RTOL, atol=atol)


@pytest.mark.parametrize("approximation", ["expand", "reduce"])
@pytest.mark.parametrize("case", RULE_CASES.values(), ids=RULE_CASES)
def test_every_rule_fits_its_formula(case: RuleCase, approximation, device):
    """Every path kind's modules (tests/cases.py), KFAC-expand and -reduce: each parameter's
    fitted factors equal its formula evaluated literally, and every parameter has one."""
    model, x, la = fitted(case.model(), case.in_shape, device, approximation)
    groups = groups_by_name(model, la)
    expected = case.formula(Brute(model, x, approximation))
    head_names = {f"{len(model) - 1}.weight", f"{len(model) - 1}.bias"}
    assert set(expected) == set(groups) - head_names
    for name, factors in expected.items():
        assert len(groups[name]) == len(factors), name
        for actual, reference in zip(groups[name], factors, strict=True):
            assert_close(actual, reference)


@pytest.mark.parametrize("case", FACTORED_SHAPES)
def test_the_factored_cases_take_the_route_they_are_named_after(case):
    C, Cp, _, _, Q = FACTORED_SHAPES[case]
    assert output_map_route_is_cheaper(N, Cp, C, Q) == case.startswith("through")


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


def test_circular_patch_covariance_in_float32_is_as_accurate_as_unfolding():
    """FFT rounding is ~eps * log(XY) of the largest entry; the unfolded product's is similar.

    Measured on these maps: 1e-7 (FFT) against 4e-7 (unfolding) relative to the largest
    entry; the bound 1e-6 leaves room for other BLAS/FFT builds.
    """
    x = torch.randn(128, 4, 32, 32, dtype=torch.float64)
    patches = circular_patches(x, 3)
    rows = patches.transpose(1, 2).reshape(-1, patches.shape[1])
    exact = rows.T @ rows / 1024
    error = (circular_patch_covariance(x.float(), 3).double() - exact).abs().max()
    assert error / exact.abs().max() < 1e-6


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
