import pytest
import torch
from torch.nn import functional as F

from laplace_equivariance.layers import CircularConv2d, FullyConnected2d, conv
from laplace_equivariance.layers.conv import circular_conv2d, circular_pad


def test_fully_connected_maps_onto_a_smaller_grid(device):
    layer = FullyConnected2d(3, 5, in_size=8, out_size=4).to(device)
    assert layer(torch.randn(2, 3, 8, 8, device=device)).shape == (2, 5, 4, 4)
    assert sum(p.numel() for p in layer.parameters()) == 5 * 16 * 3 * 64 + 5 * 16


def test_fully_connected_equals_its_matrix(device):
    layer = FullyConnected2d(2, 3, in_size=4, out_size=2).to(device, torch.float64)
    x = torch.randn(5, 2, 4, 4, device=device, dtype=torch.float64)
    expected = x.flatten(1) @ layer.weight.T + layer.bias
    torch.testing.assert_close(layer(x).flatten(1), expected, rtol=1e-12, atol=1e-12)


def test_circular_conv_is_translation_equivariant(device):
    layer = CircularConv2d(3, 4, 3, size=8).to(device, torch.float64)
    x = torch.randn(2, 3, 8, 8, device=device, dtype=torch.float64)
    shift = (3, -2)
    torch.testing.assert_close(
        layer(torch.roll(x, shift, dims=(-2, -1))),
        torch.roll(layer(x), shift, dims=(-2, -1)),
        rtol=0,
        atol=1e-12,
    )


def test_circular_conv_wraps_around(device):
    layer = CircularConv2d(1, 1, 3, size=4, bias=False).to(device, torch.float64)
    with torch.no_grad():
        layer.weight.zero_()
        layer.weight[0, 0, 1, 0] = 1.0  # y(i, j) = x(i, j - 1)
    x = torch.arange(16.0, device=device, dtype=torch.float64).view(1, 1, 4, 4)
    torch.testing.assert_close(layer(x), torch.roll(x, 1, dims=-1))


def test_even_kernel_raises():
    with pytest.raises(ValueError, match="odd kernel_size"):
        CircularConv2d(1, 1, 2, size=4)


@pytest.mark.parametrize(
    "layer, bad",
    [
        (lambda: FullyConnected2d(3, 4, 8), (2, 2, 8, 8)),
        (lambda: FullyConnected2d(3, 4, 8), (2, 3, 8, 6)),
        (lambda: CircularConv2d(3, 4, 3, 8), (2, 1, 8, 8)),
    ],
    ids=["fc-channels", "fc-size", "conv-channels"],
)
def test_wrong_input_shape_names_the_expected_shape(layer, bad):
    with pytest.raises(ValueError, match=r"expects input of shape \(N, 3, 8, 8\)"):
        layer()(torch.randn(*bad))


@pytest.mark.parametrize(
    "shape, kernel_size",
    [
        ((2, 3, 8, 8), 1),
        ((2, 3, 8, 8), 3),
        ((2, 3, 8, 8), 9),
        ((1, 2, 4, 6), 9),
        ((2, 1, 3, 5, 7), 5),
    ],
)
def test_circular_pad_equals_torch_circular_pad_with_its_gradient(shape, kernel_size):
    """Also with a pad as wide as the map and with two channel dimensions (p4 maps)."""
    p = kernel_size // 2
    x = torch.randn(*shape, dtype=torch.float64, requires_grad=True)
    ours = circular_pad(x, kernel_size)
    # F.pad pads the last two dimensions of 3D or 4D input only
    theirs = F.pad(x.flatten(end_dim=-3), (p, p, p, p), mode="circular").view(ours.shape)
    assert torch.equal(ours, theirs)
    v = torch.randn_like(ours)
    (ours_grad,) = torch.autograd.grad(ours, x, v)
    (theirs_grad,) = torch.autograd.grad(theirs, x, v)
    torch.testing.assert_close(ours_grad, theirs_grad, rtol=1e-14, atol=1e-14)


@pytest.mark.parametrize("shape", [(2, 3, 4, 5), (1, 2, 4, 3, 3)], ids=["4d", "p4-5d"])
def test_circular_pad_backward_is_differentiable(shape):
    """Its backward pass has first and second derivatives (the total lengthscale
    derivative differentiates through a backward pass)."""
    x = torch.randn(*shape, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda t: circular_pad(t, 3), (x,))
    assert torch.autograd.gradgradcheck(lambda t: circular_pad(t, 3), (x,))


def test_circular_pad_supports_torch_func_transforms():
    """vmap, forward mode (jvp), reverse mode (jacrev) and batched cotangents."""
    x = torch.randn(3, 2, 4, 5, dtype=torch.float64)
    v = torch.randn_like(x)
    pad = lambda t: circular_pad(t, 3)  # noqa: E731
    torch.testing.assert_close(torch.func.vmap(pad)(x), pad(x), rtol=0, atol=0)
    _, tangent = torch.func.jvp(pad, (x,), (v,))
    torch.testing.assert_close(tangent, pad(v), rtol=0, atol=0)
    jacobian = torch.func.jacrev(pad)(x[0])
    torch.testing.assert_close(torch.tensordot(jacobian, v[0], dims=3), pad(v[0]))
    leaf = x.clone().requires_grad_(True)
    cotangents = torch.randn(2, *pad(x).shape, dtype=torch.float64)
    (batched,) = torch.autograd.grad(pad(leaf), leaf, cotangents, is_grads_batched=True)
    for row, cotangent in zip(batched, cotangents, strict=True):
        torch.testing.assert_close(row, torch.autograd.grad(pad(leaf), leaf, cotangent)[0])


def test_circular_pad_first_called_in_inference_mode_still_trains():
    """The cached index of the wrapped positions is made outside inference mode, so that
    autograd can save it in a later pass with gradients."""
    conv._wrapped_positions.cache_clear()
    x = torch.randn(1, 1, 4, 4, dtype=torch.float64, requires_grad=True)
    with torch.inference_mode():
        circular_pad(x.detach(), 3)
    circular_pad(x, 3).sum().backward()
    # each corner is copied four times, each other edge position twice, the interior once
    copies = torch.tensor([[4, 2, 2, 4], [2, 1, 1, 2], [2, 1, 1, 2], [4, 2, 2, 4]])
    torch.testing.assert_close(x.grad[0, 0], copies.double(), rtol=0, atol=0)


def test_circular_pad_wider_than_the_map_raises():
    with pytest.raises(ValueError, match="at least 3x3"):
        circular_pad(torch.zeros(1, 1, 2, 8), 7)


def padded_conv2d(x, weight, bias=None):
    """The reference: autograd through ``F.pad(mode="circular")`` and ``F.conv2d``."""
    p = weight.shape[-1] // 2
    return F.conv2d(F.pad(x, (p, p, p, p), mode="circular"), weight, bias)


@pytest.mark.parametrize(
    "in_channels, out_channels, size, kernel_size",
    [(3, 4, (5, 6), 3), (1, 2, (4, 4), 1), (2, 3, (3, 5), 5), (2, 2, (4, 6), 9)],
    ids=["3x3", "1x1", "5x5-odd-grid", "pad-as-wide-as-the-map"],
)
def test_circular_conv2d_equals_autograd_through_the_padded_conv(
    device, in_channels, out_channels, size, kernel_size
):
    """Output and all three gradients (input by the flipped-filter convolution)."""
    x = torch.randn(2, in_channels, *size, device=device, dtype=torch.float64, requires_grad=True)
    weight = torch.randn(
        out_channels, in_channels, kernel_size, kernel_size, device=device, dtype=torch.float64
    ).requires_grad_(True)
    bias = torch.randn(out_channels, device=device, dtype=torch.float64, requires_grad=True)
    ours, theirs = circular_conv2d(x, weight, bias), padded_conv2d(x, weight, bias)
    torch.testing.assert_close(ours, theirs, rtol=0, atol=0)
    v = torch.randn_like(ours)
    for ours_grad, theirs_grad in zip(
        torch.autograd.grad(ours, (x, weight, bias), v),
        torch.autograd.grad(theirs, (x, weight, bias), v),
        strict=True,
    ):
        torch.testing.assert_close(ours_grad, theirs_grad, rtol=1e-13, atol=1e-13)


def test_circular_conv2d_backward_is_differentiable():
    """First and second derivatives in the input, filter and bias (the total lengthscale
    derivative differentiates through a backward pass)."""
    x = torch.randn(2, 3, 4, 5, dtype=torch.float64, requires_grad=True)
    weight = torch.randn(2, 3, 3, 3, dtype=torch.float64, requires_grad=True)
    bias = torch.randn(2, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(circular_conv2d, (x, weight, bias))
    assert torch.autograd.gradgradcheck(circular_conv2d, (x, weight, bias))


def test_circular_conv2d_supports_torch_func_transforms():
    """vmap, forward mode (jvp, some tangents absent), reverse mode (jacrev) and batched
    cotangents of the custom autograd function, against the padded-conv reference."""
    x = torch.randn(3, 2, 4, 5, dtype=torch.float64)
    weight = torch.randn(4, 2, 3, 3, dtype=torch.float64)
    bias = torch.randn(4, dtype=torch.float64)
    args = (x, weight, bias)
    torch.testing.assert_close(
        torch.func.vmap(circular_conv2d, in_dims=(0, None, None))(x[:, None], weight, bias),
        circular_conv2d(x, weight, bias)[:, None],
        rtol=0,
        atol=0,
    )
    tangents = tuple(torch.randn_like(a) for a in args)
    _, ours = torch.func.jvp(circular_conv2d, args, tangents)
    _, theirs = torch.func.jvp(padded_conv2d, args, tangents)
    torch.testing.assert_close(ours, theirs, rtol=1e-13, atol=1e-13)
    _, ours = torch.func.jvp(lambda t: circular_conv2d(t, weight), (x,), tangents[:1])
    torch.testing.assert_close(ours, padded_conv2d(tangents[0], weight), rtol=0, atol=0)
    for ours, theirs in zip(
        torch.func.jacrev(circular_conv2d, argnums=(0, 1, 2))(*args),
        torch.func.jacrev(padded_conv2d, argnums=(0, 1, 2))(*args),
        strict=True,
    ):
        torch.testing.assert_close(ours, theirs, rtol=1e-13, atol=1e-13)
    leaves = tuple(a.clone().requires_grad_(True) for a in args)
    cotangents = torch.randn(2, 3, 4, 4, 5, dtype=torch.float64)
    batched = torch.autograd.grad(
        circular_conv2d(*leaves), leaves, cotangents, is_grads_batched=True
    )
    for k, cotangent in enumerate(cotangents):
        for row, single in zip(
            batched, torch.autograd.grad(padded_conv2d(*leaves), leaves, cotangent), strict=True
        ):
            torch.testing.assert_close(row[k], single, rtol=1e-13, atol=1e-13)


def test_circular_conv2d_with_a_filter_wider_than_the_map_raises():
    with pytest.raises(ValueError, match="at least 3x3"):
        circular_conv2d(torch.zeros(1, 1, 2, 8), torch.zeros(1, 1, 7, 7))
