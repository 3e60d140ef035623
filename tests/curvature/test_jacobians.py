"""Each layer's Jacobian-vector products agree with central finite differences (float64)."""

import pytest
import torch

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

LAYERS = {
    "fc": (lambda: FullyConnected2d(2, 3, 4, 2), (2, 4, 4)),
    "conv": (lambda: CircularConv2d(2, 3, 3, size=4), (2, 4, 4)),
    "f-fc": (lambda: FactoredLinear2d(2, 3, 4, 2), (2, 4, 4)),
    "s-fc": (lambda: SparseFactoredLinear2d(2, 3, 4, 2), (2, 4, 4)),
    "s-conv": (lambda: SparseCircularConv2d(2, 3, 3, size=4), (2, 4, 4)),
    "gconv-lifting": (lambda: P4LiftingConv2d(2, 3, 3, size=4), (2, 4, 4)),
    "gconv-pointwise": (lambda: P4PointwiseConv2d(2, 3, 3, size=4), (8, 4, 4)),
    "gconv-full": (lambda: P4GroupConv2d(2, 3, 3, size=4), (8, 4, 4)),
}


@pytest.mark.parametrize("name", list(LAYERS))
def test_jvp_matches_central_differences(name, device):
    make, in_shape = LAYERS[name]
    layer = make().to(device, torch.float64)
    x = torch.randn(3, *in_shape, device=device, dtype=torch.float64)
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
