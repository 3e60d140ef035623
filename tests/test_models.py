import copy

import pytest
import torch

from laplace_equivariance import models


def count(name: str, in_shape, n_classes: int, alpha: int, **kwargs) -> int:
    with torch.device("meta"):
        return models.count_parameters(models.build(name, in_shape, n_classes, alpha, **kwargs))


def rounded_millions(n: int) -> str:
    return f"{n / 1e6:.1f}M"


REFERENCE_EXACT = [
    (table, name, counts["reference"])
    for (table, name), counts in models.PAPER_PARAMETER_COUNTS.items()
    if counts["reference"] is not None and table != "table3" and not name.startswith("s-")
]
SHAPES = {
    "table1": ((1, 32, 32), 40, 10),
    "table2": ((3, 32, 32), 10, 10),
    "table3": ((1, 32, 32), 10, 2),
}


def test_conv_on_cifar10_has_exactly_338770_parameters():
    assert count("conv", (3, 32, 32), 10, 10) == 338_770


@pytest.mark.parametrize("table, name, expected", REFERENCE_EXACT, ids=lambda v: str(v))
def test_counts_equal_the_reference_code(table, name, expected):
    assert count(name, *SHAPES[table]) == expected


@pytest.mark.parametrize(
    "table, name", [k for k in models.PAPER_PARAMETER_COUNTS if k[0] != "table3"], ids=str
)
def test_counts_match_the_papers_rounding(table, name):
    paper = models.PAPER_PARAMETER_COUNTS[(table, name)]["paper"]
    assert rounded_millions(count(name, *SHAPES[table])) == paper


def test_sparse_counts_differ_from_the_reference_only_by_the_documented_extras():
    """Ours = reference + F-FC position biases + 2 coordinates and 1 lengthscale per basis."""
    n = count("s-fc", (3, 32, 32), 10, 10)
    grids = [(32, 32), (16, 16), (16, 16), (8, 8), (8, 8), (4, 4), (2, 2), (1, 1)]
    inputs = [(32, 32)] + grids[:-1]
    anchors = sum(
        -(-(a * b) // 2) + -(-(c * d) // 2) for (a, b), (c, d) in zip(grids, inputs, strict=True)
    )
    position_biases = sum(a * b for a, b in grids)
    assert n == 831_820 + position_biases + 2 * anchors + 2 * 8


def test_table3_model_differs_from_the_reference_by_its_first_layer():
    """The reference's planar paths in layer 1 read four rotated copies of the image
    (4x the input channels); ours read the image once. Everything else is equal."""
    n = count("f-fc+conv+gconv", (1, 32, 32), 10, 2)
    first_layer_extra = 3 * (8 * 1 * 1024 * 2 + 8 * 1 * 9)
    assert n + first_layer_extra == 1_105_843
    assert rounded_millions(n) == "1.1M"


@pytest.mark.parametrize("name", list(models.MODEL_NAMES))
def test_every_model_runs_and_names_parameters_by_layer_and_path(name):
    model = models.build(name, (1, 32, 32), 4, alpha=1)
    assert model(torch.randn(2, 1, 32, 32)).shape == (2, 4)
    for parameter_name, _ in model.named_parameters():
        layer, path = parameter_name.split(".")[:2]
        assert layer.startswith("layer")
        if layer not in ("layer9", "layer10"):
            assert path in ("fc", "conv", "gconv")


@pytest.mark.parametrize("name", ["conv", "s-conv"])
def test_convolutional_networks_are_invariant_to_circular_translation(name, device):
    model = models.build(name, (2, 32, 32), 5, alpha=2).to(device, torch.float64)
    x = torch.randn(6, 2, 32, 32, device=device, dtype=torch.float64)
    for shift in [(1, 0), (0, 5), (7, -3), (16, 16)]:
        assert model.translation_invariance_error(x, shift) < 1e-10


@pytest.mark.parametrize("name", ["gconv", "gconv-full"])
def test_gconv_network_is_invariant_to_quarter_turns(name, device):
    model = models.build(name, (1, 32, 32), 5, alpha=2).to(device, torch.float64)
    x = torch.randn(6, 1, 32, 32, device=device, dtype=torch.float64)
    for k in (1, 2, 3):
        assert model.rotation_invariance_error(x, k) < 1e-10
    assert model.translation_invariance_error(x, (3, 1)) < 1e-10


def test_relaxed_networks_are_not_invariant(device):
    model = models.build("f-fc+conv", (1, 32, 32), 5, alpha=2).to(device, torch.float64)
    x = torch.randn(6, 1, 32, 32, device=device, dtype=torch.float64)
    assert model.translation_invariance_error(x, (3, 1)) > 1e-4


@pytest.mark.parametrize("name", ["f-fc+conv+gconv", "f-fc+conv+gconv-full"])
def test_relaxed_network_with_zeroed_fc_paths_is_invariant(name, device):
    model = models.build(name, (1, 32, 32), 5, alpha=1).to(device, torch.float64)
    x = torch.randn(4, 1, 32, 32, device=device, dtype=torch.float64)
    with torch.no_grad():
        for layer in model.relaxed_layers:
            for p in layer.path("fc").parameters():
                p.zero_()
    assert model.translation_invariance_error(x, (5, 2)) < 1e-10
    assert model.rotation_invariance_error(x, 1) > 1e-6
    with torch.no_grad():
        for layer in model.relaxed_layers:
            for p in layer.path("conv").parameters():
                p.zero_()
    assert model.rotation_invariance_error(x, 1) < 1e-10


def test_full_gconv_paths_hold_a_quarter_of_the_conv_paths_filter_weights():
    """Layers 2-8: the pointwise GCONV path has a sixteenth of the CONV path's filter weights
    on the same maps, the full one a quarter; layer 1 lifts the same way in both."""
    pointwise = models.build("f-fc+conv+gconv", (1, 32, 32), 10, alpha=2)
    full = models.build("f-fc+conv+gconv-full", (1, 32, 32), 10, alpha=2)
    for index, (thin, wide) in enumerate(
        zip(pointwise.relaxed_layers, full.relaxed_layers, strict=True), start=1
    ):
        conv = wide.path("conv").weight.numel()
        assert conv == thin.path("conv").weight.numel()
        if index == 1:
            assert type(wide.path("gconv")) is type(thin.path("gconv"))
            continue
        assert thin.path("gconv").weight.numel() * 16 == conv
        assert wide.path("gconv").weight.numel() * 4 == conv


@pytest.mark.parametrize(
    "in_shape, bad",
    [((3, 32, 32), (2, 1, 32, 32)), ((3, 32, 32), (2, 3, 28, 28))],
    ids=["channels", "image-size"],
)
def test_wrong_input_names_the_expected_shape(in_shape, bad):
    model = models.build("conv", in_shape, 10, alpha=1)
    with pytest.raises(ValueError, match=r"expects input of shape \(N, 3, 32, 32\)"):
        model(torch.randn(*bad))


def test_unsupported_image_size_and_unknown_model_raise():
    with pytest.raises(ValueError, match="resize or pad"):
        models.build("conv", (1, 28, 28), 10)
    with pytest.raises(ValueError, match="Unknown model"):
        models.build("resnet", (1, 32, 32), 10)


def test_shallower_networks_check_their_input_side_and_layers():
    """widths/subsampling build an App. F.1-style network on 2 ** len(subsampling) pixels."""
    small = models.build(
        "f-fc+conv", (1, 16, 16), 4, alpha=2, widths=(1, 2, 2, 4), subsampling=(1, 2, 3, 4)
    )
    assert small(torch.randn(3, 1, 16, 16)).shape == (3, 4)
    assert len(small.relaxed_layers) == 4
    with pytest.raises(ValueError, match=r"\(C, 32, 32\)"):
        models.build("conv", (1, 16, 16), 10, alpha=2)
    with pytest.raises(ValueError, match="names layers outside 1..2"):
        models.build("conv", (1, 16, 16), 10, alpha=2, widths=(1, 2), subsampling=(1, 2, 3))


def test_deep_relaxed_network_keeps_its_signal_at_initialisation():
    """App. F.1's eight F-FC+CONV layers: the last relaxed layer's output keeps the first's
    scale (with the paths' mean instead of sum / sqrt(K) it fell by 2^-7.5/2, about 13x)."""
    x = torch.randn(64, 1, 32, 32)
    ratios = []
    for seed in range(3):
        torch.manual_seed(seed)
        model = models.build("f-fc+conv", (1, 32, 32), 10, alpha=1)
        scales, hidden = [], x
        with torch.no_grad():
            for layer in model.relaxed_layers:  # as RelaxedNet.features
                out = layer(hidden)
                scales.append(out.std().item())
                hidden = torch.relu(out)
        ratios.append(scales[-1] / scales[0])
    assert min(ratios) > 0.4, ratios


def test_a_dict_batch_is_named_with_what_to_do():
    model = models.build("f-fc+conv", (1, 4, 4), 3, alpha=1, widths=(1, 2), subsampling=(1, 2))
    with pytest.raises(TypeError, match=r"got a dict with keys \['input_ids', 'labels'\].*wrap"):
        model({"input_ids": torch.randn(2, 1, 4, 4), "labels": torch.zeros(2)})


@pytest.mark.parametrize(
    "name", ["f-fc+conv", "fc+conv", "s-fc+s-conv", "f-fc+conv+gconv", "f-fc+conv+gconv-full"]
)
def test_a_network_started_equivariant_is_invariant_and_keeps_its_signal(name, device):
    torch.manual_seed(0)
    model = models.build(name, (1, 32, 32), 5, alpha=2).to(device, torch.float64)
    x = torch.randn(16, 1, 32, 32, device=device, dtype=torch.float64)
    assert model.translation_invariance_error(x, (5, 2)) > 1e-6
    model.start_equivariant_()
    assert model.translation_invariance_error(x, (5, 2)) < 1e-10
    with torch.no_grad():
        first = model.relaxed_layers[0](x).std()
        last = model.features(x).std()
    # the CONV paths scaled by sqrt(K / J): without the scale the last layer's output would
    # shrink by (1/2)^(8/2) = 1/16 in standard deviation against the CONV network's
    assert last / first > 0.2


def test_starting_equivariant_needs_an_equivariant_path():
    with pytest.raises(ValueError, match="no equivariant path"):
        models.build("f-fc", (1, 32, 32), 5, alpha=1).start_equivariant_()
    with pytest.raises(ValueError, match=r"layer1, .* no equivariant path \(gconv\)"):
        models.build("f-fc+conv", (1, 32, 32), 5, alpha=1).start_equivariant_(keep=("gconv",))
    with pytest.raises(ValueError, match="'fc'.* not an equivariant path"):
        models.build("f-fc+conv", (1, 32, 32), 5, alpha=1).non_equivariant_parameters(keep=("fc",))


def test_a_group_network_can_start_at_its_gconv_network(device):
    """F-FC+CONV+GCONV started equivariant (the default ``keep``) is translation invariant and
    still tells quarter turns apart; with ``keep=("gconv",)`` it computes its GCONV network,
    invariant to both. The held parameters are those of the silenced paths."""
    torch.manual_seed(0)
    x = torch.randn(6, 1, 32, 32, device=device, dtype=torch.float64)
    translation = models.build("f-fc+conv+gconv", (1, 32, 32), 5, alpha=1)
    translation = translation.to(device, torch.float64)
    group = copy.deepcopy(translation)
    translation.start_equivariant_()
    assert translation.translation_invariance_error(x, (5, 2)) < 1e-10
    assert translation.rotation_invariance_error(x, 1) > 1e-6
    group.start_equivariant_(keep=("gconv",))
    assert group.rotation_invariance_error(x, 1) < 1e-10
    assert group.translation_invariance_error(x, (5, 2)) < 1e-10

    def paths(model, params):
        ids = {id(p) for p in params}
        return {n.split(".")[1] for n, p in model.named_parameters() if id(p) in ids}

    assert paths(group, group.non_equivariant_parameters()) == {"fc"}
    assert paths(group, group.non_equivariant_parameters(keep=("gconv",))) == {"fc", "conv"}
    plain = models.build("f-fc+conv", (1, 32, 32), 5, alpha=1)
    assert paths(plain, plain.non_equivariant_parameters()) == {"fc"}


@pytest.mark.parametrize("name", models.MODEL_NAMES)
def test_every_model_compiles_into_one_graph(name):
    """``torch.compile`` (``marglik_training(compile_kwargs=...)``) traces each model whole:
    no graph break, so a compiled step is one graph (and one CUDA graph on a GPU)."""
    if "gconv" in name:
        small = models.build(name, (1, 4, 4), 3, alpha=1, widths=(1, 1), subsampling=(1, 2))
    else:
        small = models.build(name, (1, 4, 4), 3, alpha=1, widths=(1, 2), subsampling=(1, 2))
    explained = torch._dynamo.explain(small)(torch.randn(2, 1, 4, 4))
    assert (explained.graph_count, explained.graph_break_count) == (1, 0), explained.break_reasons
