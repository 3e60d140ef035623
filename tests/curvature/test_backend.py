"""EquivariantKFAC as a laplace-torch backend: the API users write, errors and stock equality."""

from __future__ import annotations

import pytest
import torch
from laplace import Laplace
from laplace.curvature import AsdlGGN
from laplace.utils import expand_prior_precision
from laplace.utils.matrix import Kron, KronDecomposed
from torch import nn
from torch.nn.utils import parameters_to_vector
from torch.utils.data import DataLoader, TensorDataset

from laplace_equivariance import EquivariantKFAC, UnsupportedModuleError, models
from laplace_equivariance.curvature.kron import BlockDiagonalKron
from tests.curvature.reference import fit_kfac, fit_kron, parameter_jacobians
from tests.curvature.test_differentiable import every_rule
from tests.host_reads import host_reads

K = 3


def data(n: int, in_shape, likelihood="classification"):
    x = torch.randn(n, *in_shape, dtype=torch.float64)
    y = (
        torch.randint(0, K, (n,))
        if likelihood == "classification"
        else torch.randn(n, K, dtype=torch.float64)
    )
    return x, y


def stock_model() -> nn.Module:
    return nn.Sequential(
        nn.Conv2d(2, 3, 3, padding=1), nn.ReLU(), nn.Flatten(), nn.Linear(3 * 16, K)
    ).double()


def kron_laplace(
    model: nn.Module, likelihood="classification", backend=EquivariantKFAC, **kwargs
) -> Laplace:
    """An unfitted all-weights KFAC Laplace approximation, as users write it."""
    return Laplace(
        model,
        likelihood,
        subset_of_weights="all",
        hessian_structure="kron",
        backend=backend,
        **kwargs,
    )


def fit_stock_and_ours(model: nn.Module, likelihood: str, loader: DataLoader) -> list[Laplace]:
    """KFAC Laplace approximations fitted with AsdlGGN and with EquivariantKFAC."""
    fitted = []
    for backend in (AsdlGGN, EquivariantKFAC):
        la = kron_laplace(model, likelihood, backend)
        la.fit(loader)
        fitted.append(la)
    return fitted


def assert_same_factors(stock: Laplace, ours: Laplace) -> None:
    for stock_factors, our_factors in zip(stock.H_facs.kfacs, ours.H_facs.kfacs, strict=True):
        for a, b in zip(stock_factors, our_factors, strict=True):
            torch.testing.assert_close(b, a, rtol=1e-6, atol=1e-12)


@pytest.mark.parametrize("likelihood", ["classification", "regression"])
def test_stock_layers_give_asdl_ggn_factors_and_marginal_likelihood(likelihood):
    x, y = data(6, (2, 4, 4), likelihood)
    stock, ours = fit_stock_and_ours(
        stock_model(), likelihood, DataLoader(TensorDataset(x, y), batch_size=3)
    )
    assert_same_factors(stock, ours)
    our_lml = ours.log_marginal_likelihood().item()
    assert our_lml == pytest.approx(stock.log_marginal_likelihood().item(), rel=1e-6)


@pytest.mark.parametrize("name", ["f-fc+conv", "s-fc+s-conv", "f-fc+conv+gconv"])
def test_layerwise_precisions_optimise_the_marginal_likelihood(name):
    torch.manual_seed(0)
    model = models.build(name, (1, 32, 32), K, alpha=1).double()
    x, y = data(8, (1, 32, 32))
    n_tensors = len(list(model.parameters()))
    la = fit_kfac(
        model, x, y, "classification", prior_precision=torch.ones(n_tensors, dtype=torch.float64)
    )
    assert isinstance(la.H_facs, BlockDiagonalKron) and len(la.H_facs.kfacs) == n_tensors
    before = la.log_marginal_likelihood().item()
    la.optimize_prior_precision(method="marglik", prior_structure="layerwise", n_steps=20, lr=0.1)
    assert la.prior_precision.shape == (n_tensors,)
    assert la.log_marginal_likelihood().item() > before


def dense_posterior_covariance(la) -> torch.Tensor:
    """The inverse of the posterior precision built densely from the fitted factors."""
    prior = expand_prior_precision(la.prior_precision, la.model)
    precision = la.H_facs.to_matrix() * la._H_factor + torch.diag(prior)
    return torch.linalg.inv(precision)


@pytest.mark.parametrize("likelihood", ["classification", "regression"])
def test_glm_predictive_equals_the_dense_posterior(likelihood):
    """The GLM predictive through the block-diagonal decomposition (every rule, F-FC's
    block-diagonal factors included) equals ``J Sigma J^T`` with ``Sigma`` the inverse of the
    dense posterior precision (464 parameters, float64: inversion error ~1e-12)."""
    torch.manual_seed(0)
    model = every_rule().double()
    x, y = data(8, (2, 4, 4), likelihood)
    if likelihood == "regression":
        y = y[:, :K]
    n_tensors = len(list(model.parameters()))
    prior = torch.linspace(0.5, 2.0, n_tensors, dtype=torch.float64)
    la = fit_kfac(model, x, y, likelihood, prior_precision=prior)
    jacobians = parameter_jacobians(model, x[:3])
    variance = torch.einsum("nkp,pq,nlq->nkl", jacobians, dense_posterior_covariance(la), jacobians)
    with torch.no_grad():
        f = model(x[:3])
    if likelihood == "classification":
        kappa = 1 / torch.sqrt(1 + torch.pi / 8 * variance.diagonal(dim1=1, dim2=2))
        expected = torch.softmax(f * kappa, dim=-1)
        probs = la(x[:3], pred_type="glm", link_approx="probit")
        torch.testing.assert_close(probs, expected, rtol=1e-8, atol=1e-12)
    else:
        mean, covariance = la(x[:3], pred_type="glm")
        torch.testing.assert_close(mean, f, rtol=1e-10, atol=1e-12)
        torch.testing.assert_close(covariance, variance, rtol=1e-8, atol=1e-12)


def test_fit_does_not_depend_on_the_batch_size():
    """The factors are sums over the data set, so the batches of a fit change only its time
    and memory (docs of ``marglik_training``'s ``marglik_loader``): every factor and the log
    marginal likelihood agree to float64 rounding for batches of 2, 4 and 8 examples."""
    torch.manual_seed(0)
    model = models.build("f-fc+conv", (1, 32, 32), K, alpha=1).double()
    x, y = data(8, (1, 32, 32))
    fitted = []
    for batch_size in (2, 4, 8):
        la = kron_laplace(model)
        la.fit(DataLoader(TensorDataset(x, y), batch_size=batch_size))
        fitted.append(la)
    whole = fitted[-1]
    for la in fitted[:-1]:
        for factors, whole_factors in zip(la.H_facs.kfacs, whole.H_facs.kfacs, strict=True):
            for factor, whole_factor in zip(factors, whole_factors, strict=True):
                torch.testing.assert_close(factor, whole_factor, rtol=1e-12, atol=1e-14)
        torch.testing.assert_close(
            la.log_marginal_likelihood(), whole.log_marginal_likelihood(), rtol=1e-12, atol=0
        )


@pytest.mark.parametrize("likelihood", ["classification", "regression"])
def test_a_scalar_prior_equals_equal_layerwise_precisions(likelihood):
    """laplace-torch's scalar prior on the block-diagonal factors: the same marginal
    likelihood and gradient as one precision per tensor, all equal."""
    model = models.build("f-fc+conv", (1, 32, 32), K, alpha=1).double()
    x, y = data(6, (1, 32, 32), likelihood)
    la = fit_kfac(model, x, y, likelihood)
    scalar = torch.tensor([0.7], dtype=torch.float64, requires_grad=True)
    n_tensors = len(list(model.parameters()))
    layerwise = torch.full((n_tensors,), 0.7, dtype=torch.float64, requires_grad=True)
    by_scalar = la.log_marginal_likelihood(prior_precision=scalar)
    by_layer = la.log_marginal_likelihood(prior_precision=layerwise)
    torch.testing.assert_close(by_scalar, by_layer, rtol=1e-12, atol=0)
    by_scalar.backward()
    by_layer.backward()
    torch.testing.assert_close(scalar.grad, layerwise.grad.sum().reshape(1), rtol=1e-10, atol=0)


@pytest.mark.parametrize("stochastic", [False, True], ids=["exact-ggn", "mc-fisher"])
def test_fit_computes_no_weight_gradient_and_leaves_parameters_trainable(stochastic):
    model = models.build("f-fc+conv", (1, 32, 32), K, alpha=1).double()
    x, y = data(4, (1, 32, 32))
    computed = []
    for name, p in model.named_parameters():
        p.register_hook(lambda grad, name=name: computed.append(name))
    fit_kfac(model, x, y, "classification", backend_kwargs={"stochastic": stochastic})
    assert computed == []
    assert all(p.requires_grad and p.grad is None for p in model.parameters())
    model(x).sum().backward()
    assert len(computed) == len(list(model.parameters()))


def test_kron_that_fails_in_the_forward_pass_leaves_parameters_trainable():
    """``kron`` itself, not ``Laplace.fit``: fit's own first forward pass would raise first."""
    model = models.build("f-fc+conv", (1, 32, 32), K, alpha=1).double()
    x, y = data(4, (1, 16, 16))
    with pytest.raises(ValueError, match="32"):
        EquivariantKFAC(model, "classification").kron(x, y, N=4)
    assert all(p.requires_grad for p in model.parameters())


def test_backward_passes_stop_at_the_first_layer():
    """The first layer's input needs no gradient: its input gradient (for a one-channel
    convolution, the most expensive step of the fit) is never computed."""
    model = models.build("f-fc+conv", (1, 32, 32), K, alpha=1).double()
    x, y = data(4, (1, 32, 32))
    seen = []
    model.layer1.register_forward_pre_hook(lambda _m, args: seen.append(args[0].requires_grad))
    fit_kfac(model, x, y, "classification")
    assert seen and not any(seen)


def test_frozen_first_layer_leaves_the_later_factors_as_asdl_computes_them():
    """The graph starts at the first module with trainable parameters, wherever it is."""
    model = stock_model()
    model[0].requires_grad_(False)
    x, y = data(6, (2, 4, 4))
    stock, ours = fit_stock_and_ours(
        model, "classification", DataLoader(TensorDataset(x, y), batch_size=3)
    )
    assert len(ours.H_facs.kfacs) == 2  # the Linear layer's weight and bias only
    assert_same_factors(stock, ours)
    assert all(p.requires_grad for p in model[3].parameters())


def test_block_diagonal_factors_are_never_dense():
    model = models.build("f-fc+conv", (1, 32, 32), K, alpha=2).double()
    x, y = data(4, (1, 32, 32))
    la = fit_kfac(model, x, y, "classification")
    names = [n for n, _ in model.named_parameters()]
    factors = dict(zip(names, la.H_facs.kfacs, strict=True))
    assert factors["layer2.fc.input_map.weight"][1].shape == (2, 1024, 1024)  # C blocks of XY^2
    assert factors["layer8.fc.output_map.weight"][1].shape == (32, 16, 16)  # C' blocks of C^2


@pytest.mark.parametrize(
    "module, message",
    [
        (nn.ConvTranspose2d(2, 2, 3, padding=1), "ConvTranspose2d"),
        (nn.Conv3d(2, 2, 3, padding=1), "Conv3d"),
    ],
    ids=["transposed-conv", "conv3d"],
)
def test_modules_without_a_rule_raise_naming_the_module(module, message):
    model = nn.Sequential(module, nn.Flatten(), nn.Linear(2 * 16, K)).double()
    with pytest.raises(UnsupportedModuleError, match=rf"'0' \({message}\)"):
        kron_laplace(model)


def test_frozen_unsupported_module_is_accepted():
    transposed = nn.ConvTranspose2d(2, 2, 3, padding=1).requires_grad_(False)
    model = nn.Sequential(transposed, nn.Flatten(), nn.Linear(2 * 16, K)).double().eval()
    x, y = data(4, (2, 4, 4))
    assert torch.isfinite(fit_kfac(model, x, y, "classification").log_marginal_likelihood())


def test_last_layer_laplace_on_a_relaxed_model_warns():
    model = models.build("f-fc+conv", (1, 32, 32), K, alpha=1).double()
    with pytest.warns(UserWarning, match="subset_of_weights='all'"):
        la = Laplace(model, "classification", hessian_structure="kron", backend=EquivariantKFAC)
        la.fit(DataLoader(TensorDataset(*data(4, (1, 32, 32))), batch_size=4))


def test_stock_backends_keep_laplace_torch_initialisation():
    model = stock_model()
    la = Laplace(
        model, "classification", subset_of_weights="all", hessian_structure="kron", backend=AsdlGGN
    )
    assert type(la.H).__name__ == "Kron"


def unfitted_terms(la: Laplace, model: nn.Module) -> list[torch.Tensor]:
    """What laplace-torch evaluates before ``fit``: the prior alone, as a Gaussian at the mean."""
    la.mean = parameters_to_vector(model.parameters()).detach()  # fit() would set it
    theta = la.mean + 0.1
    return [la.log_det_posterior_precision, la.log_prob(theta), la.log_marginal_likelihood()]


def test_unfitted_approximation_is_the_prior_as_with_stock_backends():
    """Before ``fit``, laplace-torch falls back to the prior (``type(la.H) is Kron``)."""
    model = stock_model()
    stock, ours = (
        kron_laplace(model, backend=b, prior_precision=0.7) for b in (AsdlGGN, EquivariantKFAC)
    )
    for mine, theirs in zip(unfitted_terms(ours, model), unfitted_terms(stock, model), strict=True):
        torch.testing.assert_close(mine, theirs, rtol=1e-12, atol=0)
    relaxed = kron_laplace(models.build("f-fc+conv", (1, 32, 32), K, alpha=1).double())
    prior_log_det = relaxed.prior_precision_diag.log().sum()
    torch.testing.assert_close(relaxed.log_det_posterior_precision, prior_log_det)


def test_accumulated_fits_on_stock_layers_are_laplace_torch_objects_and_values():
    """``fit`` then ``fit(override=False)`` twice, as laplace-torch's online-fit test does."""
    x, y = data(6, (2, 4, 4), "regression")
    loader = DataLoader(TensorDataset(x, y), batch_size=3)
    model, fitted = stock_model(), []
    for backend in (AsdlGGN, EquivariantKFAC):
        la = kron_laplace(model, "regression", backend, sigma_noise=0.3, prior_precision=0.7)
        la.fit(loader)
        assert type(la.H) is KronDecomposed
        for _ in range(2):
            la.fit(loader, override=False)
        fitted.append(la)
    stock, ours = fitted
    assert type(ours.H) is KronDecomposed and ours.n_data == stock.n_data == 18
    torch.testing.assert_close(ours.H.to_matrix(), stock.H.to_matrix(), rtol=1e-10, atol=1e-12)
    torch.testing.assert_close(ours.loss, stock.loss, rtol=1e-12, atol=0)
    torch.testing.assert_close(
        ours.log_marginal_likelihood(), stock.log_marginal_likelihood(), rtol=1e-10, atol=0
    )


@pytest.mark.parametrize("name", ["f-fc+conv", "s-fc+s-conv"])
def test_marginal_likelihood_gradient_in_log_precisions_matches_finite_differences(name):
    torch.manual_seed(1)
    model = models.build(name, (1, 32, 32), K, alpha=1).double()
    x, y = data(6, (1, 32, 32))
    n_tensors = len(list(model.parameters()))
    la = fit_kfac(model, x, y, "classification")
    log_prec = torch.randn(n_tensors, dtype=torch.float64).mul(0.3).requires_grad_(True)
    la.log_marginal_likelihood(prior_precision=log_prec.exp()).backward()
    eps = 1e-5
    for i in range(0, n_tensors, max(1, n_tensors // 8)):
        step = torch.zeros(n_tensors, dtype=torch.float64)
        step[i] = eps
        with torch.no_grad():
            up = la.log_marginal_likelihood(prior_precision=(log_prec + step).exp())
            down = la.log_marginal_likelihood(prior_precision=(log_prec - step).exp())
        fd = ((up - down) / (2 * eps)).item()
        # central differences: truncation ~eps^2, cancellation ~ machine eps * |lml| / eps
        cancellation = 10 * torch.finfo(torch.float64).eps * abs(up.item()) / eps
        assert log_prec.grad[i].item() == pytest.approx(fd, rel=1e-6, abs=cancellation + 1e-9)


def test_factors_are_allocated_block_diagonal_from_construction_and_refits_work():
    model = models.build("f-fc+conv", (1, 32, 32), K, alpha=1).double()
    la = kron_laplace(model)
    names = [n for n, _ in model.named_parameters()]
    assert type(la.H) is Kron  # laplace-torch's mark of an unfitted approximation
    assert dict(zip(names, la.H.kfacs, strict=True))["layer1.fc.input_map.weight"][1].ndim == 3
    # allocated, not filled: every factor a view of one zero (the first batch's factors
    # replace them): one allocation and one fill for all
    factors = [f for g in la.H.kfacs for f in g]
    assert all(f.untyped_storage().nbytes() == f.element_size() for f in factors)
    assert len({f.untyped_storage().data_ptr() for f in factors}) == 1
    loader = DataLoader(TensorDataset(*data(4, (1, 32, 32))), batch_size=2)
    la.fit(loader)
    assert isinstance(la.H_facs, BlockDiagonalKron)
    first = la.log_marginal_likelihood().item()
    la.fit(loader)
    assert la.log_marginal_likelihood().item() == pytest.approx(first, rel=1e-10)


def test_the_finiteness_check_reads_the_factors_diagonals_alone(monkeypatch):
    """Factors are PSD, so a non-finite entry shows on the diagonal (Cauchy-Schwarz): the check
    reads ``n b`` entries of an ``(n, b, b)`` factor, not ``n b^2``."""
    model = models.build("f-fc+conv", (1, 32, 32), K, alpha=1).double()
    x, y = data(4, (1, 32, 32))
    read, norm = [], torch._foreach_norm

    def recording(tensors, *args, **kwargs):
        read.append(sum(t.numel() for t in tensors))
        return norm(tensors, *args, **kwargs)

    monkeypatch.setattr(torch, "_foreach_norm", recording)
    la = fit_kfac(model, x, y, "classification")
    diagonals = sum(
        f.shape[:-1].numel() if f.ndim > 1 else f.numel() for g in la.H_facs.kfacs for f in g
    )
    assert read == [diagonals]


def test_non_finite_curvature_raises():
    model = models.build("f-fc+conv", (1, 32, 32), K, alpha=1).double()
    with torch.no_grad():
        model.layer3.fc.input_map.weight[0, 0, 0] = float("nan")
    x, y = data(4, (1, 32, 32))
    with pytest.raises(
        FloatingPointError, match="Non-finite Kronecker factor for parameter 'layer"
    ):
        fit_kfac(model, x, y, "classification")


def test_a_fit_reads_the_host_once_per_batch():
    """The finiteness check of a batch's factors reads one flag for all of them (one read
    per factor made a GPU wait about 80 times per batch on F-FC+CONV)."""
    model = models.build("f-fc+conv", (1, 32, 32), K, alpha=1)
    x, y = data(6, (1, 32, 32))
    reads = []
    for batch in (6, 2):
        loader = DataLoader(TensorDataset(x.float(), y), batch_size=batch)
        la = kron_laplace(model)
        reads.append(host_reads(lambda la=la, loader=loader: la.fit(loader)))
    assert reads[1] - reads[0] <= 2


def test_stock_marglik_training_runs_with_layerwise_priors():
    """laplace-torch's own marglik_training, unchanged, learns one precision per tensor."""
    from laplace import marglik_training

    torch.manual_seed(0)
    model = models.build("f-fc+conv", (1, 32, 32), K, alpha=1)
    x = torch.randn(16, 1, 32, 32)
    y = torch.randint(0, K, (16,))
    la, trained, margliks, losses = marglik_training(
        model,
        DataLoader(TensorDataset(x, y), batch_size=8),
        likelihood="classification",
        hessian_structure="kron",
        backend=EquivariantKFAC,
        prior_structure="layerwise",
        n_epochs=2,
        n_hypersteps=2,
        marglik_frequency=1,
    )
    assert la.prior_precision.shape == (len(list(trained.parameters())),)
    # one negative log marginal likelihood per hyperparameter step: 2 epochs x 2 steps
    assert len(margliks) == 4 and all(torch.isfinite(torch.as_tensor(m)) for m in margliks)
    assert margliks[-1] < margliks[0]
    assert isinstance(la.H_facs, BlockDiagonalKron)


def test_fit_on_an_empty_loader_is_named():
    from torch.utils.data import DataLoader, TensorDataset

    from laplace_equivariance import models

    model = models.build("f-fc+conv", (1, 4, 4), 3, alpha=1, widths=(1, 2), subsampling=(1, 2))
    la = kron_laplace(model)
    empty = DataLoader(TensorDataset(torch.zeros(0, 1, 4, 4), torch.zeros(0).long()))
    with pytest.raises(ValueError, match="empty loader"):
        la.fit(empty)


@pytest.mark.parametrize("kfac_approx", ["expand", "reduce"])
def test_batched_class_passes_give_the_factors_of_separate_passes(kfac_approx):
    """One backward pass over K - 1 copies of the batch (the default on a GPU) against K - 1
    passes, float64, through every rule: weight and bias factors, extra blocks, the rows of
    block-diagonal A factors, the projected statistics of lengthscale hyperparameters, the
    loss and the marginal likelihood."""
    torch.manual_seed(0)
    model = every_rule().double().eval()  # reduce: the stock Conv2d by Conv2dRule
    x, y = torch.randn(6, 2, 4, 4, dtype=torch.float64), torch.randint(0, K, (6,))
    loader = DataLoader(TensorDataset(x, y), batch_size=3)
    separate, batched = (
        fit_kron(model, loader, backend_kwargs={"batched_classes": b, "kfac_approx": kfac_approx})
        for b in (False, True)
    )
    assert K > 2  # two or more passes to batch
    for mine, theirs in zip(batched.H_facs.kfacs, separate.H_facs.kfacs, strict=True):
        for a, b in zip(mine, theirs, strict=True):
            torch.testing.assert_close(a, b, rtol=1e-10, atol=1e-12)
    assert batched.backend.projected_factors.keys() == separate.backend.projected_factors.keys()
    torch.testing.assert_close(batched.loss, separate.loss, rtol=1e-12, atol=0)
    torch.testing.assert_close(
        batched.log_marginal_likelihood(), separate.log_marginal_likelihood(), rtol=1e-10, atol=0
    )
