import pytest
import torch

from laplace_equivariance.layers import PolyphaseSubsample2d


def test_keeps_the_component_of_largest_norm_per_example(device):
    pool = PolyphaseSubsample2d()
    x = torch.zeros(2, 1, 4, 4, device=device)
    x[0, 0, 1::2, 0::2] = 5.0  # example 0: component (1, 0) is largest
    x[1, 0, 0::2, 1::2] = 3.0  # example 1: component (0, 1)
    y = pool(x)
    assert y.shape == (2, 1, 2, 2)
    assert torch.equal(y[0], x[0, :, 1::2, 0::2])
    assert torch.equal(y[1], x[1, :, 0::2, 1::2])


@pytest.mark.parametrize("shape", [(5, 3, 8, 6), (4, 2, 4, 8, 8)], ids=["planar", "p4"])
def test_equals_the_definition_by_strided_slices_with_its_gradient(shape):
    """Output and input gradient equal those of the four slices ``x[..., i::2, j::2]``."""
    x = torch.randn(*shape, dtype=torch.float64, requires_grad=True)
    components = [x[..., i::2, j::2] for i in (0, 1) for j in (0, 1)]
    norms = torch.stack([c.flatten(start_dim=1).norm(dim=1) for c in components], dim=1)
    expected = torch.stack([components[k][n] for n, k in enumerate(norms.argmax(dim=1).tolist())])
    assert len(set(norms.argmax(dim=1).tolist())) > 1  # the examples choose differently
    y = PolyphaseSubsample2d()(x)
    assert torch.equal(y, expected)
    v = torch.randn_like(y)
    (grad,) = torch.autograd.grad(y, x, v)
    (expected_grad,) = torch.autograd.grad(expected, x, v)
    assert torch.equal(grad, expected_grad)


def test_output_of_an_example_does_not_depend_on_the_rest_of_the_batch(device):
    pool = PolyphaseSubsample2d()
    x = torch.randn(6, 3, 8, 8, device=device, dtype=torch.float64)
    alone = torch.cat([pool(x[i : i + 1]) for i in range(6)])
    assert torch.equal(pool(x), alone)


def test_circular_shift_by_one_pixel_gives_a_shifted_subsampled_map(device):
    pool = PolyphaseSubsample2d()
    x = torch.randn(4, 2, 8, 8, device=device, dtype=torch.float64)
    y = pool(x)
    y_shifted = pool(torch.roll(x, shifts=(1, 0), dims=(-2, -1)))
    candidates = [torch.roll(y, shifts=(s, 0), dims=(-2, -1)) for s in (0, 1)]
    for n in range(4):
        assert any(torch.equal(y_shifted[n], c[n]) for c in candidates)


def test_odd_size_raises():
    with pytest.raises(ValueError, match="even H and W"):
        PolyphaseSubsample2d()(torch.randn(1, 1, 5, 4))


def test_torch_func_jacobians_and_forward_mode_equal_the_strided_slices():
    """``vmap`` of ``jacrev`` (the predictive's Jacobians) and ``jvp`` through the module
    equal the same transforms of the definition by slices."""
    pool = PolyphaseSubsample2d()
    x = torch.randn(4, 2, 4, 4, dtype=torch.float64)

    def by_slices(example):
        components = [example[..., i::2, j::2] for i in (0, 1) for j in (0, 1)]
        norms = torch.stack([c.square().sum() for c in components])
        return components[int(norms.argmax())]

    def per_example(example):
        return pool(example[None])[0]

    jacobians = torch.func.vmap(torch.func.jacrev(per_example))(x)
    expected = torch.stack([torch.autograd.functional.jacobian(by_slices, e) for e in x])
    assert torch.equal(jacobians, expected)
    tangent = torch.randn_like(x)
    _, forward = torch.func.jvp(pool, (x,), (tangent,))
    _, expected_forward = torch.func.jvp(
        lambda t: torch.stack([by_slices(e) for e in t]), (x,), (tangent,)
    )
    assert torch.equal(forward, expected_forward)
