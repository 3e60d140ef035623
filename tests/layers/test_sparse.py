import math

import pytest
import torch

from laplace_equivariance import models
from laplace_equivariance.layers import (
    AnchorBasis,
    LengthscaleMode,
    SparseCircularConv2d,
    SparseFactoredLinear2d,
)
from laplace_equivariance.layers.sparse import rbf_basis


def test_default_anchor_count_is_half_the_grid_rounded_up():
    assert AnchorBasis(3).n_anchors == 5
    assert AnchorBasis((1, 1)).n_anchors == 1
    assert AnchorBasis((32, 32)).n_anchors == 512
    assert AnchorBasis((2, 1)).n_anchors == 1


def test_basis_is_the_documented_rbf(device):
    basis = AnchorBasis(3, lengthscale=0.7).to(device, torch.float64)
    phi = basis()
    p, j = 4, 2
    distance2 = (basis.grid[p] - basis.positions[j]).pow(2).sum()
    torch.testing.assert_close(phi[p, j], torch.exp(-(0.7**2) * distance2))


def test_basis_derivatives_equal_the_autograd_jacobian(device):
    """Closed-form d phi / d omega and d phi / d z (used by the KFAC rules) equal autograd's."""
    basis = AnchorBasis((4, 3), lengthscale=0.6).to(device, torch.float64)
    with torch.no_grad():
        basis.position_offsets.normal_(0, 0.3)
    d_omega, d_positions = basis.derivatives()

    def phi_of(offsets: torch.Tensor, omega: torch.Tensor) -> torch.Tensor:
        return rbf_basis(basis.grid, basis.initial_positions + offsets, omega)

    jac_offsets, jac_omega = torch.func.jacrev(phi_of, argnums=(0, 1))(
        basis.position_offsets.detach(), basis.lengthscale.detach()
    )
    torch.testing.assert_close(d_omega, jac_omega[..., 0], rtol=1e-12, atol=1e-14)
    # phi_pj depends on z_j only: the Jacobian (P, M, M, 2) is zero off that diagonal.
    diagonal = torch.diagonal(jac_offsets, dim1=1, dim2=2).permute(0, 2, 1)
    torch.testing.assert_close(d_positions, diagonal, rtol=1e-12, atol=1e-14)
    torch.testing.assert_close(jac_offsets.abs().sum(), diagonal.abs().sum())


def test_large_lengthscale_gives_the_anchor_value_at_the_anchor(device):
    """omega -> inf: phi_j(z_i) -> delta_ij, so the weight at anchor j equals u_j."""
    layer = SparseCircularConv2d(2, 3, 3, size=4, lengthscale=30.0).to(device, torch.float64)
    filters = layer.induced_weight().flatten(2)  # (C', C, 9)
    anchors_on_grid = [0, 2, 4, 6, 8]  # checkerboard of the 3x3 offsets
    torch.testing.assert_close(filters[:, :, anchors_on_grid], layer.weight, rtol=1e-12, atol=1e-12)


def test_zero_lengthscale_makes_weights_stationary(device):
    """omega = 0: every basis function is 1 and the weight is the sum of anchor values."""
    layer = SparseFactoredLinear2d(2, 3, 4, 2, lengthscale=0.0).to(device, torch.float64)
    theta2 = layer.input_map.induced_weight()  # (C', C, P)
    theta1 = layer.output_map.induced_weight()  # (Q, C', C)
    torch.testing.assert_close(
        theta2, layer.input_map.weight.sum(-1, keepdim=True).expand_as(theta2)
    )
    torch.testing.assert_close(
        theta1, layer.output_map.weight.sum(0, keepdim=True).expand_as(theta1)
    )
    x = torch.randn(3, 2, 4, 4, device=device, dtype=torch.float64)
    shifted = torch.roll(x, (1, 3), dims=(-2, -1))
    torch.testing.assert_close(layer(shifted), layer(x), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("kind", ["s-fc", "s-conv"])
def test_gradients_reach_values_positions_and_lengthscale(kind, device):
    if kind == "s-fc":
        layer = SparseFactoredLinear2d(2, 3, 4, 2)
    else:
        layer = SparseCircularConv2d(2, 3, 3, size=4)
    layer = layer.to(device, torch.float64)
    x = torch.randn(5, 2, 4, 4, device=device, dtype=torch.float64)
    layer(x).pow(2).sum().backward()
    names = {
        n for n, p in layer.named_parameters() if p.grad is not None and p.grad.abs().sum() > 0
    }
    for suffix in ("weight", "basis.position_offsets", "basis.lengthscale"):
        assert any(n.endswith(suffix) for n in names), (suffix, names)


def test_hyperparameter_lengthscale_is_outside_the_parameters_and_gets_gradients(device):
    layer = SparseCircularConv2d(
        2, 3, 3, size=4, lengthscale_mode=LengthscaleMode.HYPERPARAMETER
    ).to(device, torch.float64)
    assert not any(n.endswith("lengthscale") for n, _ in layer.named_parameters())
    assert "basis.lengthscale" in layer.state_dict()
    (omega,) = layer.basis.hyperparameters()
    assert omega.is_leaf and omega.requires_grad and omega.dtype == torch.float64
    layer(torch.randn(2, 2, 4, 4, device=device, dtype=torch.float64)).sum().backward()
    assert omega.grad is not None and math.isfinite(omega.grad.item()) and omega.grad != 0


def test_fixed_lengthscale_and_positions_get_no_gradient():
    layer = SparseCircularConv2d(1, 1, 3, size=4, lengthscale_mode="fixed", learn_positions=False)
    assert [n for n, _ in layer.named_parameters()] == ["weight", "bias"]
    assert torch.equal(layer.basis.positions, layer.basis.initial_positions)
    assert layer.basis.hyperparameters() == []


def test_sparse_conv_is_translation_equivariant(device):
    layer = SparseCircularConv2d(2, 3, 3, size=8).to(device, torch.float64)
    x = torch.randn(2, 2, 8, 8, device=device, dtype=torch.float64)
    torch.testing.assert_close(
        layer(torch.roll(x, (2, 5), dims=(-2, -1))),
        torch.roll(layer(x), (2, 5), dims=(-2, -1)),
        rtol=0,
        atol=1e-12,
    )


def test_anchor_count_out_of_range_raises():
    with pytest.raises(ValueError, match="n_anchors"):
        AnchorBasis(3, n_anchors=10)


@pytest.mark.parametrize(
    "make",
    [
        lambda mode: AnchorBasis(3, lengthscale_mode=mode),
        lambda mode: SparseCircularConv2d(1, 1, 3, size=4, lengthscale_mode=mode),
        lambda mode: models.build("s-fc", (1, 32, 32), 2, 1, {"lengthscale_mode": mode}),
    ],
    ids=["basis", "s-conv", "build"],
)
def test_an_invalid_lengthscale_mode_lists_the_choices(make):
    """Issue 70: it said "'learnt' is not a valid LengthscaleMode", naming no choice."""
    with pytest.raises(ValueError) as error:
        make("learnt")
    assert str(error.value) == (
        "lengthscale_mode='learnt' is not one of ['learned', 'fixed', 'hyperparameter']."
    )
