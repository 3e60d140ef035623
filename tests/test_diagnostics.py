import json

import matplotlib
import pytest
import torch

from laplace_equivariance import models
from laplace_equivariance.diagnostics import (
    effective_parameters,
    occam_terms,
    path_output_shares,
    path_shift_errors,
    plot_symmetry,
    symmetry_report,
)
from laplace_equivariance.marglik.priors import parameter_paths
from tests.curvature.reference import fit_kfac

matplotlib.use("Agg")


@pytest.fixture
def fitted():
    torch.manual_seed(0)
    model = models.build("f-fc+conv", (1, 32, 32), 3, alpha=1).double()
    x = torch.randn(8, 1, 32, 32, dtype=torch.float64)
    y = torch.randint(0, 3, (8,))
    n_tensors = len(list(model.parameters()))
    return fit_kfac(
        model, x, y, "classification", prior_precision=torch.ones(n_tensors, dtype=torch.float64)
    )


def test_effective_parameters_follow_the_prior(fitted):
    sizes = [p.numel() for p in fitted.model.parameters()]
    gammas = effective_parameters(fitted)
    assert all(0 <= g <= n for g, n in zip(gammas, sizes, strict=True))
    fitted.prior_precision = 1e12
    assert max(effective_parameters(fitted)) < 1e-3  # the prior decides every direction
    fitted.prior_precision = 1e-10
    # gamma -> rank of the KFAC block, rank(B) rank(A) <= 8 examples x 2 logit directions;
    # the other eigenvalues sit at rounding level (~1e-16 of the largest, about 1e-15 here):
    # up to 1,024 of them add ~1e-5 each against a precision of 1e-10 (measured: 0.0015; at
    # 1e-12 they add 0.14, the rounding floor itself)
    assert all(g <= 16 + 1e-2 for g in effective_parameters(fitted)[:2])


def test_effective_parameters_equal_a_dense_computation(fitted):
    gammas = effective_parameters(fitted)
    dense = fitted.H_facs.to_matrix() * fitted._H_factor
    start = 0
    for size, gamma in list(
        zip([p.numel() for p in fitted.model.parameters()], gammas, strict=True)
    )[:6]:
        block = dense[start : start + size, start : start + size]
        eig = torch.linalg.eigvalsh(block).clamp(min=0)
        assert gamma == pytest.approx((eig / (eig + 1.0)).sum().item(), rel=1e-6, abs=1e-9)
        start += size


def test_occam_terms_equal_a_dense_computation(fitted):
    fitted.prior_precision = torch.linspace(0.5, 3.0, len(list(fitted.model.parameters())))
    occams = occam_terms(fitted)
    dense = fitted.H_facs.to_matrix() * fitted._H_factor
    start = 0
    for k, size in enumerate([p.numel() for p in fitted.model.parameters()][:6]):
        delta = fitted.prior_precision[k].item()
        block = dense[start : start + size, start : start + size]
        eig = torch.linalg.eigvalsh(block).clamp(min=0)
        assert occams[k] == pytest.approx(0.5 * torch.log1p(eig / delta).sum().item(), rel=1e-6)
        start += size


def test_occam_and_prior_terms_split_the_evidence(fitted):
    """-log p(D) = -log p(D | theta) + sum_t (delta_t ||theta_t||^2 / 2 + o_t), per tensor."""
    deltas = torch.logspace(-2, 3, len(list(fitted.model.parameters())), dtype=torch.float64)
    fitted.prior_precision = deltas
    weights = list(fitted.model.parameters())
    priors = [0.5 * d * p.detach().square().sum() for d, p in zip(deltas, weights, strict=True)]
    split = -fitted.log_likelihood + sum(priors) + sum(occam_terms(fitted))
    assert split.item() == pytest.approx(-fitted.log_marginal_likelihood().item(), rel=1e-10)


def test_report_is_json_and_relative_shares_sum_to_one(fitted):
    report = symmetry_report(fitted)
    json.dumps(report)
    layers = [row["layer"] for row in report["layers"]]
    assert layers == [f"layer{i}" for i in range(1, 9)]
    # the stock head lies outside every relaxed layer: one entry per tensor, no shares
    assert list(report["outside"]) == [
        "layer9.weight",
        "layer9.bias",
        "layer10.weight",
        "layer10.bias",
    ]
    assert report["outside"]["layer10.weight"]["parameters"] == fitted.model.layer10.weight.numel()
    for row in report["layers"][:8]:
        assert set(row["paths"]) == {"fc", "conv"}
        assert sum(p["relative"] for p in row["paths"].values()) == pytest.approx(1.0)
        assert row["learned"] in row["paths"]
    fc = report["layers"][0]["paths"]["fc"]
    assert fc["parameters"] == sum(
        p.numel() for n, p in fitted.model.named_parameters() if n.startswith("layer1.fc.")
    )


def test_switching_a_path_off_shows_in_the_report(fitted):
    names = [n for n, _ in fitted.model.named_parameters()]
    precision = torch.ones(len(names), dtype=torch.float64)
    for i, name in enumerate(names):
        if name.startswith("layer1.fc."):
            precision[i] = 1e10
    fitted.prior_precision = precision
    row = symmetry_report(fitted)["layers"][0]
    assert row["learned"] == "conv" and row["paths"]["fc"]["relative"] < 1e-6


def test_plot_has_one_bar_per_layer_and_path(fitted):
    figure = plot_symmetry(symmetry_report(fitted), title="test")
    axis = figure.axes[0]
    assert len(axis.patches) == 2 * 8  # fc and conv bars for the eight relaxed layers
    assert axis.get_title() == "test"


@pytest.mark.parametrize("diagnostic", [effective_parameters, occam_terms])
def test_needs_a_kron_laplace(diagnostic):
    with pytest.raises(TypeError, match="KronLaplace"):
        diagnostic(object())


def test_report_gives_each_tensors_squared_norm(fitted):
    report = symmetry_report(fitted)
    conv = report["layers"][1]["paths"]["conv"]
    weights = [p for n, p in fitted.model.named_parameters() if n.startswith("layer2.conv.")]
    assert conv["squared_norm"] == pytest.approx([w.square().sum().item() for w in weights])


def test_gamma_minus_delta_squared_norm_is_twice_the_marglik_gradient_in_log_delta():
    """d log p(D | delta) / d log delta_t = (gamma_t - delta_t ||theta_t||^2) / 2 per tensor.

    The report's effective parameters and squared norms against autograd through
    laplace-torch's own log marginal likelihood, at random precisions (one per tensor); where
    the gradient vanishes this is MacKay's fixed point delta ||theta||^2 = gamma. Biases are
    drawn away from their zero initialisation so that every term is exercised.
    """
    torch.manual_seed(0)
    model = models.build("f-fc+conv", (1, 32, 32), 3, alpha=1).double()
    with torch.no_grad():
        for name, parameter in model.named_parameters():
            if "bias" in name:
                parameter.normal_(0.0, 0.5)
    x = torch.randn(16, 1, 32, 32, dtype=torch.float64)
    y = torch.randint(0, 3, (16,))
    n_tensors = len(list(model.parameters()))
    la = fit_kfac(
        model, x, y, "classification", prior_precision=torch.ones(n_tensors, dtype=torch.float64)
    )
    log_precision = torch.empty(n_tensors, dtype=torch.float64).uniform_(-2.0, 2.0)
    log_precision.requires_grad_(True)
    la.log_marginal_likelihood(prior_precision=log_precision.exp()).backward()
    la.prior_precision = log_precision.detach().exp()
    names = [name for name, _ in model.named_parameters()]
    gradient = dict(zip(names, log_precision.grad.tolist(), strict=True))
    where = parameter_paths(model)
    report = symmetry_report(la)
    for name, entry in report["outside"].items():
        delta_norm = entry["prior_precision"] * entry["squared_norm"]
        assert entry["effective"] - delta_norm == pytest.approx(2 * gradient[name], abs=1e-9)
    for row in report["layers"]:
        for path, entry in row["paths"].items():
            weights = [name for name in names if where[name] == (row["layer"], path)]
            squared = sum(
                delta * norm
                for delta, norm in zip(entry["prior_precision"], entry["squared_norm"], strict=True)
            )
            twice_gradient = 2 * sum(gradient[name] for name in weights)
            # float64 sums of up to ~1e4 eigenvalue terms of size ~1: rounding ~1e-12
            assert entry["effective"] - squared == pytest.approx(twice_gradient, abs=1e-9)


def test_path_output_shares_sum_to_one_and_equal_a_direct_computation():
    torch.manual_seed(0)
    model = models.build("f-fc+conv", (1, 32, 32), 3, alpha=1).double().eval()
    x = torch.randn(10, 1, 32, 32, dtype=torch.float64)
    rows = path_output_shares(model, x, batch_size=4)
    assert [r["layer"] for r in rows] == [f"layer{i}" for i in range(1, 9)]
    inputs = {}
    hooks = [
        getattr(model, r["layer"]).register_forward_pre_hook(
            lambda m, a, name=r["layer"]: inputs.__setitem__(name, a[0])
        )
        for r in rows
    ]
    model(x)
    for h in hooks:
        h.remove()
    for row in rows:
        assert sum(row["paths"].values()) == pytest.approx(1, abs=1e-12)
        terms = getattr(model, row["layer"]).path_outputs(inputs[row["layer"]])
        energy = {p: t.square().sum().item() for p, t in terms.items()}
        expected = {p: e / sum(energy.values()) for p, e in energy.items()}
        assert row["paths"] == pytest.approx(expected, rel=1e-10)


def test_a_zeroed_path_has_no_output_share_while_its_effective_share_stays():
    """The case the output shares exist for: a path whose weights are zero carries nothing,
    yet its relative effective parameters (curvature against prior) need not vanish."""
    torch.manual_seed(0)
    model = models.build("f-fc+conv", (1, 32, 32), 3, alpha=1).double().eval()
    with torch.no_grad():
        for p in model.layer4.conv.parameters():
            p.zero_()
    x = torch.randn(8, 1, 32, 32, dtype=torch.float64)
    shares = {r["layer"]: r["paths"] for r in path_output_shares(model, x)}
    assert shares["layer4"]["conv"] == 0 and shares["layer4"]["fc"] == 1
    assert 0 < shares["layer5"]["conv"] < 1
    n_tensors = len(list(model.parameters()))
    la = fit_kfac(
        model,
        x,
        torch.randint(0, 3, (8,)),
        "classification",
        prior_precision=torch.ones(n_tensors, dtype=torch.float64),
    )
    report = {r["layer"]: r["paths"] for r in symmetry_report(la)["layers"]}
    assert report["layer4"]["conv"]["relative"] > 0.1


def test_path_output_shares_need_relaxed_layers_and_inputs():
    with pytest.raises(ValueError, match="no RelaxedLayer"):
        path_output_shares(torch.nn.Linear(2, 2), torch.zeros(1, 2))
    model = models.build("conv", (1, 32, 32), 3, alpha=1)
    with pytest.raises(ValueError, match="at least one input"):
        path_output_shares(model.eval(), torch.zeros(0, 1, 32, 32))


def test_path_output_shares_refuse_a_model_in_training_mode():
    """Measured in training mode, batch norm would move its running statistics: refused."""
    model = models.build("conv", (1, 32, 32), 3, alpha=1).train()
    with pytest.raises(ValueError, match=r"model\.eval\(\)"):
        path_output_shares(model, torch.zeros(2, 1, 32, 32))


def _quadrant_network() -> torch.nn.Module:
    """App. F.1's F-FC+CONV at alpha 1 (grids 32, 16, 16, 8, 8, 4, 4, 1), float64."""
    torch.manual_seed(0)
    return models.build("f-fc+conv", (1, 32, 32), 3, alpha=1).double().eval()


def test_conv_paths_and_an_f_fc_path_constant_over_positions_commute_with_a_quadrant_shift():
    """Circular CONV with per-example polyphase subsampling commutes with a shift that every
    grid divides (to rounding, float64); an F-FC path whose two maps are constant over
    positions is a global pooling and does too; a random F-FC path does not."""
    model = _quadrant_network()
    fc = model.layer4.fc
    with torch.no_grad():
        fc.input_map.weight.copy_(
            fc.input_map.weight.mean(-1, keepdim=True).expand_as(fc.input_map.weight)
        )
        fc.output_map.weight.copy_(
            fc.output_map.weight.mean(0, keepdim=True).expand_as(fc.output_map.weight)
        )
        fc.output_map.position_bias.fill_(0.3)
    x = torch.randn(6, 1, 32, 32, dtype=torch.float64)
    rows = {r["layer"]: r["paths"] for r in path_shift_errors(model, x, (16, 16), batch_size=4)}
    assert list(rows) == [f"layer{i}" for i in range(1, 9)]
    assert all(paths["conv"] < 1e-20 for paths in rows.values())
    assert rows["layer4"]["fc"] < 1e-20
    assert all(rows[f"layer{i}"]["fc"] > 0.1 for i in (1, 2, 3, 5, 6, 7))


def test_path_shift_error_is_the_direct_computation_and_none_for_a_silent_path():
    model = _quadrant_network()
    with torch.no_grad():
        model.layer3.conv.weight.zero_()
        model.layer3.conv.bias.zero_()
    x = torch.randn(5, 1, 32, 32, dtype=torch.float64)
    rows = {r["layer"]: r["paths"] for r in path_shift_errors(model, x, (0, 16), batch_size=2)}
    assert rows["layer3"]["conv"] is None
    inputs = {}
    hook = model.layer5.register_forward_pre_hook(lambda m, a: inputs.setdefault("h", a[0]))
    model(x)
    hook.remove()
    h = inputs["h"]  # 8x8: the shift is 4 there, on input and output alike
    plain = model.layer5.path_outputs(h)["fc"]
    moved = model.layer5.path_outputs(torch.roll(h, (0, 4), dims=(-2, -1)))["fc"]
    expected = (
        moved - torch.roll(plain, (0, 4), dims=(-2, -1))
    ).square().sum() / plain.square().sum()
    assert rows["layer5"]["fc"] == pytest.approx(expected.item(), rel=1e-10)
    total = path_shift_errors(model, x, (0, 16))[4]["total"]
    both = model.layer5.path_outputs(h)
    both_moved = model.layer5.path_outputs(torch.roll(h, (0, 4), dims=(-2, -1)))
    plain, moved = sum(both.values()), sum(both_moved.values())
    expected = (
        moved - torch.roll(plain, (0, 4), dims=(-2, -1))
    ).square().sum() / plain.square().sum()
    assert total == pytest.approx(expected.item(), rel=1e-10)


def test_path_shift_errors_refuse_what_they_cannot_measure():
    model = _quadrant_network()
    x = torch.zeros(2, 1, 32, 32, dtype=torch.float64)
    with pytest.raises(ValueError, match="choose a shift"):
        path_shift_errors(model, x, (1, 0))
    with pytest.raises(ValueError, match="no RelaxedLayer"):
        path_shift_errors(torch.nn.Conv2d(1, 1, 3), x, (16, 0))
    with pytest.raises(ValueError, match=r"\(N, C, H, W\)"):
        path_shift_errors(model, torch.zeros(2, 32, 32, dtype=torch.float64), (16, 0))
    with pytest.raises(ValueError, match=r"model\.eval\(\)"):
        path_shift_errors(model.train(), x, (16, 0))


@pytest.mark.parametrize("shift", [(32, 0), (0, -32), (64, 32)])
def test_path_shift_errors_refuse_a_shift_that_is_the_identity(shift):
    """A multiple of the image size moves nothing: every path, FC included, would read as
    exactly equivariant (issue 70.10; docs/usage.md's (16, 16) on a 16-pixel network)."""
    model = _quadrant_network()
    x = torch.randn(2, 1, 32, 32, dtype=torch.float64)
    with pytest.raises(ValueError, match="not a multiple of the grid size"):
        path_shift_errors(model, x, shift)
    assert path_shift_errors(model, x, (32, 16))[0]["paths"]["fc"] > 0.1  # one axis moves


def test_path_shift_errors_refuse_a_relaxed_layer_on_vectors():
    """Rolling the last two axes of (N, features) would mix the batch: refused, not measured."""
    from laplace_equivariance.layers import RelaxedLayer

    paths = {"a": torch.nn.Linear(4, 3), "b": torch.nn.Linear(4, 3)}
    model = torch.nn.Sequential(torch.nn.Flatten(), RelaxedLayer(paths)).eval()
    with pytest.raises(ValueError, match="not image grids"):
        path_shift_errors(model, torch.zeros(2, 1, 2, 2), (1, 1))


def test_symmetry_report_of_a_last_layer_laplace_says_it_needs_every_weight():
    """A last-layer Laplace covers the head alone: the report raised zip()'s "argument 2 is
    shorter" (issue 70.14); it says what it needs."""
    from laplace import Laplace
    from torch.utils.data import DataLoader, TensorDataset

    from laplace_equivariance import EquivariantKFAC

    torch.manual_seed(0)
    model = models.build("conv", (1, 32, 32), 3, alpha=1)
    x, y = torch.randn(4, 1, 32, 32), torch.randint(0, 3, (4,))
    la = Laplace(
        model,
        "classification",
        subset_of_weights="last_layer",
        hessian_structure="kron",
        backend=EquivariantKFAC,
    )
    la.fit(DataLoader(TensorDataset(x, y), batch_size=4))
    with pytest.raises(ValueError, match="subset_of_weights='all'.*covers 2 of the model's"):
        symmetry_report(la)
