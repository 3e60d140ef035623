"""Each layer's Jacobian-vector products agree with central finite differences (float64)."""

import pytest
import torch

from laplace_equivariance.layers import (
    CircularConv2d,
    FactoredLinear2d,
    FullyConnected2d,
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
