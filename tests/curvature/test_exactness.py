"""KFAC against the exact GGN block, from torch.func and from curvlinops (float64).

Where KFAC is exact (one example; F-FC/S-FC with one input and one output channel; a
convolution on a 1x1 grid, which has a single output position), every parameter's Kron block
equals the exact GGN block to 1e-8 relative. Blocks of biases, anchor positions and
lengthscales are exact GGN blocks for any data. Elsewhere the relative Frobenius error is
measured and bounded; docs/curvature.md lists the figures. The cases are every path kind's
exact and general cases in ``tests/cases.py``.
"""

from __future__ import annotations

import re
from decimal import ROUND_HALF_UP, Decimal
from pathlib import Path

import pytest
import torch
from torch import nn

from laplace_equivariance.curvature.kron import densify
from laplace_equivariance.layers import FullyConnected2d
from tests.cases import EXACTNESS_CLASSES, exact_cases, general_cases
from tests.curvature.reference import (
    exact_ggn_curvlinops,
    exact_ggn_torch_func,
    fit_kfac,
    parameter_slices,
)

K = EXACTNESS_CLASSES


def kron_blocks(model, la) -> dict[str, torch.Tensor]:
    names = [n for n, p in model.named_parameters() if p.requires_grad]
    blocks = {}
    for name, factors in zip(names, la.H_facs.kfacs, strict=True):
        dense = [densify(f) for f in factors]
        blocks[name] = dense[0] if len(dense) == 1 else torch.kron(dense[0], dense[1])
    return blocks


def relative_error(a: torch.Tensor, b: torch.Tensor) -> float:
    return ((a - b).norm() / b.norm()).item()


EXACT_CASES = exact_cases()
"""Every path kind's cases where KFAC is exact (tests/cases.py)."""


@pytest.mark.parametrize("case", list(EXACT_CASES))
def test_kfac_equals_the_exact_ggn_where_it_is_exact(case, device):
    make, in_shape, n = EXACT_CASES[case]
    model = nn.Sequential(make(), nn.Flatten()).to(device, torch.float64)
    x = torch.randn(n, *in_shape, dtype=torch.float64, device=device)
    y = torch.randint(0, K, (n,), device=device)
    la = fit_kfac(model, x, y, "classification")
    by_func = exact_ggn_torch_func(model, x, "classification")
    by_curvlinops = exact_ggn_curvlinops(model, x, y, "classification")
    torch.testing.assert_close(by_func, by_curvlinops, rtol=1e-10, atol=1e-12)
    for name, block in kron_blocks(model, la).items():
        s = parameter_slices(model)[name]
        exact = by_func[s, s]
        # absolute floor relative to the whole GGN: a softmax-invariant direction (a bias
        # added to every logit) has an exact block of 0 and a KFAC block of rounding size
        floor = 1e-10 * by_func.abs().max().item()
        torch.testing.assert_close(block, exact, rtol=1e-8, atol=floor)


def test_regression_fc_block_is_exact_for_one_example():
    model = nn.Sequential(FullyConnected2d(2, 1, (2, 2), (1, K)), nn.Flatten()).double()
    x, y = torch.randn(1, 2, 2, 2, dtype=torch.float64), torch.randn(1, K, dtype=torch.float64)
    la = fit_kfac(model, x, y, "regression")
    exact = exact_ggn_curvlinops(model, x, y, "regression")
    s = parameter_slices(model)["0.weight"]
    torch.testing.assert_close(
        kron_blocks(model, la)["0.weight"], exact[s, s], rtol=1e-8, atol=1e-12
    )


GENERAL_CASES = general_cases()
"""Every path kind's general cases (tests/cases.py): name -> (module, input shape, the relative
Frobenius error of each inexact block). Seed 0, 8 examples drawn on the CPU, 3 classes;
docs/curvature.md lists the same figures. KFAC drops cross-example (and, for F-FC,
cross-channel) terms; with few examples and random weights the error is large. The errors are
pinned to +-0.005, so a change of a factor (a factor of 2 in A moves them by more than 0.1) or
of the approximation shows. The bias of a weight-shared layer is a sum over positions:
KFAC-expand's bias block is not its exact GGN block either."""


def general_case_errors(case: str, device, doubled: str | None = None) -> dict[str, float]:
    """Relative Frobenius error of every Kron block of ``case``; ``doubled``: that block's
    first factor times 2 (its Kronecker product doubles), to show the pinned check catches it."""
    make, in_shape, _ = GENERAL_CASES[case]
    layer = make()
    model = nn.Sequential(layer, nn.ReLU(), nn.Flatten()).to(device, torch.float64)
    with torch.no_grad():
        probe = torch.zeros(1, *in_shape, dtype=torch.float64, device=device)
        features = model(probe).shape[1]
    model.append(nn.Linear(features, K).to(device, torch.float64))
    x = torch.randn(8, *in_shape, dtype=torch.float64).to(device)
    y = torch.randint(0, K, (8,)).to(device)
    la = fit_kfac(model, x, y, "classification")
    names = [n for n, p in model.named_parameters() if p.requires_grad]
    if doubled is not None:
        la.H_facs.kfacs[names.index(doubled)][0].mul_(2)
    exact = exact_ggn_torch_func(model, x, "classification")
    slices = parameter_slices(model)
    return {
        name: relative_error(block, exact[slices[name], slices[name]])
        for name, block in kron_blocks(model, la).items()
    }


def assert_pinned_errors(case: str, errors: dict[str, float]) -> None:
    """Each inexact block's error is the documented one (+-0.005); the exact blocks exact."""
    for name, error in GENERAL_CASES[case][2].items():
        assert error == pytest.approx(errors[name], abs=0.005), (name, errors)
    exact_names = [n for n in errors if n.endswith(("_bias", "offsets", "lengthscale"))]
    assert all(errors[n] < 1e-8 for n in exact_names), errors


@pytest.mark.parametrize("case", list(GENERAL_CASES))
def test_kfac_error_in_general_cases_is_the_documented_one(case, device):
    assert_pinned_errors(case, general_case_errors(case, device))


@pytest.mark.parametrize(
    ("case", "block"), [(c, b) for c, (_, _, pinned) in GENERAL_CASES.items() for b in pinned]
)
def test_a_block_off_by_a_factor_of_two_fails_the_pinned_check(case, block):
    """The bound is tight enough to catch a wrong factor: ``B`` (or ``A``) times 2."""
    errors = general_case_errors(case, torch.device("cpu"), doubled=block)
    with pytest.raises(AssertionError):
        assert_pinned_errors(case, errors)


def test_the_docs_quote_every_pinned_error():
    """docs/curvature.md lists each general case's figures, rounded to three places."""
    text = (Path(__file__).parents[2] / "docs" / "curvature.md").read_text()
    for case, (_, _, pinned) in GENERAL_CASES.items():
        for block, error in pinned.items():
            quoted = Decimal(str(error)).quantize(Decimal("0.001"), ROUND_HALF_UP)
            assert re.search(rf"(?<![\d.]){quoted}(?!\d)", text), (case, block, str(quoted))
