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


def test_output_is_the_sum_of_the_paths_over_sqrt_k(device):
    layer = relaxed(False).to(device, torch.float64)
    x = torch.randn(3, 2, 8, 8, device=device, dtype=torch.float64)
    torch.testing.assert_close(layer(x), (layer.fc(x) + layer.conv(x)) / 2**0.5)


def test_two_paths_keep_the_second_moment_of_one_at_initialisation():
    """Independent He-initialised paths: the layer's output has one path's second moment
    (the mean of two would halve it: ratio 0.5)."""
    x = torch.randn(256, 4, 8, 8, dtype=torch.float64)
    ratios = []
    for seed in range(20):
        torch.manual_seed(seed)
        paths = {"fc": FactoredLinear2d(4, 8, 8), "conv": CircularConv2d(4, 8, 3, 8)}
        layer = RelaxedLayer(paths).double()
        one_path = (layer.fc(x).square().mean() + layer.conv(x).square().mean()) / 2
        ratios.append((layer(x).square().mean() / one_path).item())
    # 20 draws of the paths: the mean ratio is 1 up to their cross term's spread
    assert 0.85 < sum(ratios) / len(ratios) < 1.15


def test_paths_with_different_output_shapes_are_named():
    layer = RelaxedLayer({"a": CircularConv2d(1, 2, 3, 4), "b": CircularConv2d(1, 3, 3, 4)})
    with pytest.raises(ValueError, match=r"a: \(2, 2, 4, 4\), b: \(2, 3, 4, 4\)"):
        layer(torch.randn(2, 1, 4, 4))


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


@pytest.mark.parametrize("subsample", [False, True], ids=["same-grid", "subsampling"])
def test_path_outputs_add_up_to_the_layer_output(device, subsample):
    layer = relaxed(subsample).to(device, torch.float64)
    x = torch.randn(5, 2, 8, 8, device=device, dtype=torch.float64)
    terms = layer.path_outputs(x)
    assert list(terms) == ["fc", "conv"]
    torch.testing.assert_close(layer.combine(terms["fc"] + terms["conv"]), layer(x))


def test_grid_path_terms_use_the_component_that_their_sum_selects():
    """Two grid paths at a subsampling layer: each term is taken at the sum's polyphase
    component, not at its own (subsampling each path alone would not add up)."""
    torch.manual_seed(0)
    paths = {"a": CircularConv2d(2, 3, 3, 8), "b": CircularConv2d(2, 3, 3, 8)}
    layer = RelaxedLayer(paths, subsample=True).double()
    x = torch.randn(64, 2, 8, 8, dtype=torch.float64)
    terms = layer.path_outputs(x)
    torch.testing.assert_close(layer.combine(terms["a"] + terms["b"]), layer(x))
    alone = layer.pool(layer.a(x)) + layer.pool(layer.b(x))
    assert (layer.combine(alone) - layer(x)).abs().max() > 1e-3


@pytest.mark.parametrize("subsample", [False, True], ids=["same-grid", "subsampling"])
def test_silencing_fc_leaves_the_conv_path_alone_as_the_layer(device, subsample):
    """K = 2, J = 1: CONV scaled by sqrt(2), the sum divided by sqrt(2): the layer is exactly
    its CONV path as drawn, so it starts equivariant and with one path's second moment."""
    layer = relaxed(subsample).to(device, torch.float64)
    x = torch.randn(3, 2, 8, 8, device=device, dtype=torch.float64)
    conv_alone = layer.path("conv")(x)
    if subsample:
        conv_alone = layer.pool(conv_alone)
    layer.silence_(["fc"])
    assert layer.path_outputs(x)["fc"].abs().max() == 0
    torch.testing.assert_close(layer(x), conv_alone, rtol=1e-12, atol=1e-12)


def test_a_silenced_f_fc_path_can_be_switched_on_by_training():
    """Only the output map is zeroed: its gradient is linear in the random input map."""
    layer = relaxed(False).double()
    layer.silence_(["fc"])
    layer(torch.randn(5, 2, 8, 8, dtype=torch.float64)).square().sum().backward()
    fc = layer.path("fc")
    assert fc.output_map.weight.grad.abs().max() > 1e-6
    assert fc.input_map.weight.grad.abs().max() == 0  # its gradient is linear in theta1


def test_silencing_a_dense_fc_path_zeroes_its_weight_and_bias():
    paths = {"fc": FullyConnected2d(2, 3, 4, 4), "conv": CircularConv2d(2, 3, 3, 4)}
    layer = RelaxedLayer(paths)
    with torch.no_grad():
        layer.path("fc").bias.fill_(1.0)
    layer.silence_(["fc"])
    assert all(p.abs().max() == 0 for p in layer.path("fc").parameters())


def test_silencing_every_path_or_an_unknown_one_raises():
    with pytest.raises(ValueError, match="keep at least one path"):
        relaxed(False).silence_(["fc", "conv"])
    with pytest.raises(KeyError, match="No path 'gconv'"):
        relaxed(False).silence_(["gconv"])
