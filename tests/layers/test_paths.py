import pytest
import torch

from laplace_equivariance.layers import (
    CircularConv2d,
    FactoredLinear2d,
    FullyConnected2d,
    RelaxedLayer,
)


def relaxed(subsample: bool) -> RelaxedLayer:
    out = 4 if subsample else 8
    paths = {"fc": FactoredLinear2d(2, 3, 8, out), "conv": CircularConv2d(2, 3, 3, 8)}
    return RelaxedLayer(paths, subsample=subsample, direct=["fc"] if subsample else [])


def zero_path(layer: RelaxedLayer, name: str) -> None:
    with torch.no_grad():
        for p in layer.path(name).parameters():
            p.zero_()


@pytest.mark.parametrize("subsample", [False, True], ids=["same-grid", "subsampling"])
def test_zeroed_fc_path_makes_the_layer_exactly_equivariant(device, subsample):
    layer = relaxed(subsample).to(device, torch.float64)
    x = torch.randn(3, 2, 8, 8, device=device, dtype=torch.float64)
    shift = (2, 4)  # even, so a subsampling layer's output moves by exactly shift / 2
    out_shift = tuple(s // 2 for s in shift) if subsample else shift
    moved = layer(torch.roll(x, shift, dims=(-2, -1)))
    assert (moved - torch.roll(layer(x), out_shift, dims=(-2, -1))).abs().max() > 1e-3
    zero_path(layer, "fc")
    moved = layer(torch.roll(x, shift, dims=(-2, -1)))
    torch.testing.assert_close(
        moved, torch.roll(layer(x), out_shift, dims=(-2, -1)), rtol=0, atol=1e-12
    )


def test_output_is_the_mean_of_the_paths(device):
    layer = relaxed(False).to(device, torch.float64)
    x = torch.randn(3, 2, 8, 8, device=device, dtype=torch.float64)
    torch.testing.assert_close(layer(x), (layer.fc(x) + layer.conv(x)) / 2)


def test_parameters_are_named_by_layer_and_path():
    names = [n for n, _ in relaxed(True).named_parameters()]
    assert names[0].startswith("fc.") and any(n.startswith("conv.") for n in names)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"paths": {}}, "at least one path"),
        ({"paths": {"fc": FullyConnected2d(1, 1, 2, 1)}, "direct": ["fc"]}, "subsample=True"),
        ({"paths": {"fc": FullyConnected2d(1, 1, 2)}, "direct": ["conv"]}, "unknown paths"),
        ({"paths": {"f-fc": FullyConnected2d(1, 1, 2)}}, "identifier"),
    ],
    ids=["empty", "direct-without-subsample", "unknown-direct", "bad-name"],
)
def test_bad_configuration_raises(kwargs, message):
    with pytest.raises(ValueError, match=message):
        RelaxedLayer(**kwargs)


def test_unknown_path_lookup_raises():
    with pytest.raises(KeyError, match="has \\['fc', 'conv'\\]"):
        relaxed(False).path("gconv")
