"""Each layer's Jacobian-vector products agree with central finite differences (float64).

The layers are every path kind's, from the rule cases of ``tests/cases.py``.
"""

import pytest
import torch

from tests.cases import RuleCase, rule_cases

RULE_CASES = rule_cases()


@pytest.mark.parametrize("case", RULE_CASES.values(), ids=RULE_CASES)
def test_jvp_matches_central_differences(case: RuleCase, device):
    """Every path kind's modules, as its rule cases in tests/cases.py build them."""
    layer = torch.nn.Sequential(*case.layers()).to(device, torch.float64)
    x = torch.randn(3, *case.in_shape, device=device, dtype=torch.float64)
    params = {n: p.detach() for n, p in layer.named_parameters()}
    tangent = {n: torch.randn_like(p) for n, p in params.items()}

    def f(ps):
        return torch.func.functional_call(layer, ps, (x,))

    _, jvp = torch.func.jvp(f, (params,), (tangent,))
    eps = 1e-6
    up = f({n: p + eps * tangent[n] for n, p in params.items()})
    down = f({n: p - eps * tangent[n] for n, p in params.items()})
    # truncation error O(eps^2 f''') and rounding O(machine eps * |f| / eps) ~ 1e-10
    torch.testing.assert_close(jvp, (up - down) / (2 * eps), rtol=1e-6, atol=1e-8)


@pytest.mark.parametrize("name", ["f-fc+conv", "s-fc+s-conv", "f-fc+conv+gconv", "stock"])
def test_per_example_jacobians_equal_laplace_torchs_batch_jacobians(name, device):
    """EquivariantKFAC.jacobians (vmap over examples) against laplace-torch's stock
    CurvatureInterface.jacobians (the whole batch at once), float64, every model kind, with
    and without a subnetwork and the graph kept."""
    from laplace.curvature.curvature import CurvatureInterface

    from laplace_equivariance import EquivariantKFAC, models

    if name == "stock":
        model = torch.nn.Sequential(
            torch.nn.Conv2d(1, 2, 3, padding=1),
            torch.nn.ReLU(),
            torch.nn.Flatten(),
            torch.nn.Linear(32, 3),
        )
    else:
        widths = (1, 1) if "gconv" in name else (1, 2)
        model = models.build(name, (1, 4, 4), 3, alpha=1, widths=widths, subsampling=(1, 2))
    model = model.to(device, torch.float64)
    x = torch.randn(5, 1, 4, 4, device=device, dtype=torch.float64)
    n_params = sum(p.numel() for p in model.parameters())
    for indices in (None, torch.arange(0, n_params, 3, device=device)):
        backend = EquivariantKFAC(model, "classification", subnetwork_indices=indices)
        for backprop in (False, True):
            ours, f_ours = backend.jacobians(x, enable_backprop=backprop)
            stock, f_stock = CurvatureInterface.jacobians(backend, x, enable_backprop=backprop)
            assert ours.requires_grad == stock.requires_grad
            torch.testing.assert_close(ours, stock, rtol=1e-12, atol=1e-12)
            torch.testing.assert_close(f_ours, f_stock, rtol=1e-12, atol=1e-12)
