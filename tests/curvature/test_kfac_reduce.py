"""KFAC-expand and KFAC-reduce for weights shared over positions (and rotations), float64.

Eschenhagen et al., "Kronecker-Factored Approximate Curvature for Modern Neural Network
Architectures" (NeurIPS 2023): for a weight used ``R`` times per example with inputs
``a_r`` and output gradients ``g_r``, expand takes ``A = (1/R) sum a_r a_r^T`` and
``B = sum g_r g_r^T``, reduce ``A = abar abar^T`` (``abar`` the mean input) and
``B = gbar gbar^T`` (``gbar`` the summed gradient). The cases:

- modules with a stock equivalent (``CircularConv2d`` = circular pad + ``nn.Conv2d``,
  ``FullyConnected2d`` = ``nn.Linear`` on the flattened map) give curvlinops'
  ``KFACLinearOperator`` blocks in both modes (float64 rounding: 1e-10);
- reduce is exact where it should be (one example whose ``R`` uses are identical; a deep
  linear network with one loss per example) and expand is ``R`` times too small on the former;
- every path kind's rule equals a brute-force evaluation of the reduce formula from hooked
  inputs and per-example output Jacobians (``tests/curvature/rules/test_rules.py``, over the
  cases of ``tests/cases.py``);
- with reduce, a shared bias's block (``gbar gbar^T``) is its exact GGN block.
"""

from __future__ import annotations

import pytest
import torch
from curvlinops import KFACLinearOperator
from torch import nn

from laplace_equivariance.curvature.differentiable import batch_factors
from laplace_equivariance.layers import (
    CircularConv2d,
    FullyConnected2d,
    SparseCircularConv2d,
)
from tests.curvature.reference import exact_ggn_torch_func, fit_kfac, parameter_slices
from tests.curvature.test_backend import kron_laplace
from tests.curvature.test_exactness import kron_blocks

N, K = 6, 3
APPROXIMATIONS = ["expand", "reduce"]


def fit(model, x, y, approximation, likelihood="classification"):
    return fit_kfac(model, x, y, likelihood, backend_kwargs={"kfac_approx": approximation})


def curvlinops_blocks(model, x, y, approximation) -> list[torch.Tensor]:
    """curvlinops' KFAC (exact GGN, type-2) materialised, one diagonal block per tensor."""
    params = [p for p in model.parameters() if p.requires_grad]
    operator = KFACLinearOperator(
        model,
        nn.CrossEntropyLoss(reduction="sum"),
        params,
        [(x, y)],
        fisher_type="type-2",
        kfac_approx=approximation,
        check_deterministic=False,
    )
    n = sum(p.numel() for p in params)
    dense = torch.as_tensor(operator @ torch.eye(n, dtype=x.dtype, device=x.device))
    blocks, start = [], 0
    for p in params:
        blocks.append(dense[start : start + p.numel(), start : start + p.numel()])
        start += p.numel()
    return blocks


def conv_and_stock_equivalent(device):
    ours = nn.Sequential(
        CircularConv2d(2, 3, 3, size=5), nn.Tanh(), nn.Flatten(), nn.Linear(75, K)
    ).to(device, torch.float64)
    conv = nn.Conv2d(2, 3, 3, padding=0).to(device, torch.float64)
    with torch.no_grad():
        conv.weight.copy_(ours[0].weight)
        conv.bias.copy_(ours[0].bias)
    stock = nn.Sequential(nn.CircularPad2d(1), conv, *ours[1:])
    return ours, stock, (2, 5, 5)


def fc_and_stock_equivalent(device):
    ours = nn.Sequential(
        FullyConnected2d(2, 2, (3, 3), (2, 2)), nn.Tanh(), nn.Flatten(), nn.Linear(8, K)
    ).to(device, torch.float64)
    linear = nn.Linear(18, 8).to(device, torch.float64)
    with torch.no_grad():
        linear.weight.copy_(ours[0].weight)
        linear.bias.copy_(ours[0].bias)
    stock = nn.Sequential(nn.Flatten(), linear, nn.Tanh(), ours[3])
    return ours, stock, (2, 3, 3)


STOCK_EQUIVALENTS = {"circular-conv": conv_and_stock_equivalent, "fc": fc_and_stock_equivalent}


@pytest.mark.parametrize("approximation", APPROXIMATIONS)
@pytest.mark.parametrize("case", list(STOCK_EQUIVALENTS))
def test_blocks_equal_curvlinops_on_the_stock_equivalent(case, approximation, device):
    ours, stock, in_shape = STOCK_EQUIVALENTS[case](device)
    x = torch.randn(N, *in_shape, dtype=torch.float64).to(device)
    y = torch.randint(0, K, (N,)).to(device)
    torch.testing.assert_close(ours(x), stock(x), rtol=1e-12, atol=1e-12)
    la = fit(ours, x, y, approximation)
    expected = curvlinops_blocks(stock, x, y, approximation)
    for (name, block), reference in zip(kron_blocks(ours, la).items(), expected, strict=True):
        torch.testing.assert_close(block, reference, rtol=1e-10, atol=1e-12, msg=name)


def test_reduce_and_expand_differ_on_convolutions():
    """The two modes are different approximations (issue 20 measured 5.2 relative)."""
    ours, _, in_shape = conv_and_stock_equivalent("cpu")
    x, y = torch.randn(N, *in_shape, dtype=torch.float64), torch.randint(0, K, (N,))
    expand, reduce = (kron_blocks(ours, fit(ours, x, y, a))["0.weight"] for a in APPROXIMATIONS)
    assert (expand - reduce).norm() > 0.5 * reduce.norm()


def pooled_conv(kernel_size=3, size=4):
    """Circular convolution, global average pooling, linear head: a translation-invariant net."""
    return nn.Sequential(
        CircularConv2d(2, 3, kernel_size, size=size),
        nn.AdaptiveAvgPool2d(1),
        nn.Flatten(),
        nn.Linear(3, K),
    ).double()


def test_reduce_is_exact_and_expand_r_times_too_small_for_identical_uses():
    """One example, constant over the grid: all ``R = 16`` uses of the filter see the same
    patch and the same output gradient, so the exact block is ``R^2 (g g^T (x) a a^T)``."""
    model = pooled_conv()
    x = torch.randn(1, 2, 1, 1, dtype=torch.float64).expand(1, 2, 4, 4).contiguous()
    y = torch.randint(0, K, (1,))
    exact = exact_ggn_torch_func(model, x, "classification")
    s = parameter_slices(model)["0.weight"]
    b = parameter_slices(model)["0.bias"]
    reduce = kron_blocks(model, fit(model, x, y, "reduce"))
    expand = kron_blocks(model, fit(model, x, y, "expand"))
    scale = exact[s, s].abs().max().item()
    torch.testing.assert_close(reduce["0.weight"], exact[s, s], rtol=1e-10, atol=1e-12 * scale)
    torch.testing.assert_close(expand["0.weight"] * 16, exact[s, s], rtol=1e-10, atol=1e-12 * scale)
    torch.testing.assert_close(reduce["0.bias"], exact[b, b], rtol=1e-10, atol=1e-12 * scale)


def test_reduce_is_exact_for_a_deep_linear_network_with_one_loss_per_example():
    """Two circular convolutions without activation, pooling, a linear head, MSE, one example
    (Eschenhagen et al., Sec. 3: reduce is exact for deep linear networks with weight sharing
    in the reduce setting); the inputs differ across positions."""
    model = nn.Sequential(
        CircularConv2d(2, 3, 3, size=4),
        CircularConv2d(3, 2, 3, size=4),
        nn.AdaptiveAvgPool2d(1),
        nn.Flatten(),
        nn.Linear(2, K),
    ).double()
    x = torch.randn(1, 2, 4, 4, dtype=torch.float64)
    y = torch.randn(1, K, dtype=torch.float64)
    la = fit(model, x, y, "reduce", likelihood="regression")
    exact = exact_ggn_torch_func(model, x, "regression")
    slices = parameter_slices(model)
    for name, block in kron_blocks(model, la).items():
        reference = exact[slices[name], slices[name]]
        atol = 1e-12 * exact.abs().max().item()
        torch.testing.assert_close(block, reference, rtol=1e-10, atol=atol, msg=name)


def test_total_lengthscale_derivative_factors_follow_the_approximation():
    """The differentiable recomputation (total lengthscale derivative) uses reduce too."""
    layer = SparseCircularConv2d(2, 3, 3, size=4, lengthscale_mode="hyperparameter")
    model = nn.Sequential(layer, nn.Tanh(), nn.Flatten(), nn.Linear(48, K)).double()
    x, y = torch.randn(N, 2, 4, 4, dtype=torch.float64), torch.randint(0, K, (N,))
    la = fit(model, x, y, "reduce")
    recomputed = batch_factors(la.backend, x, N)
    for fitted, again in zip(la.H_facs.kfacs, recomputed, strict=True):
        for a, b in zip(fitted, again, strict=True):
            torch.testing.assert_close(b.detach(), a, rtol=1e-10, atol=1e-14)


def test_an_unknown_approximation_is_refused():
    model = nn.Sequential(nn.Conv2d(1, 2, 3, padding=1), nn.Flatten(), nn.Linear(32, K))
    with pytest.raises(ValueError, match="one of"):
        kron_laplace(model, backend_kwargs={"kfac_approx": "reduced"})


@pytest.mark.parametrize("approximation", APPROXIMATIONS)
def test_a_stock_conv_gets_curvlinops_blocks_in_both_approximations(approximation):
    """A stock zero-padded ``nn.Conv2d`` (ASDL's rule in expand, this package's
    ``Conv2dRule`` in reduce, which ASDL lacks)."""
    model = nn.Sequential(
        nn.Conv2d(2, 3, 3, padding=1), nn.Tanh(), nn.Flatten(), nn.Linear(48, K)
    ).double()
    x, y = torch.randn(N, 2, 4, 4, dtype=torch.float64), torch.randint(0, K, (N,))
    la = fit(model, x, y, approximation)
    expected = curvlinops_blocks(model, x, y, approximation)
    for (name, block), reference in zip(kron_blocks(model, la).items(), expected, strict=True):
        torch.testing.assert_close(block, reference, rtol=1e-10, atol=1e-12, msg=name)
