"""The GLM predictive in chunks of examples that fit EquivariantKFAC's memory limit."""

from __future__ import annotations

import pytest
import torch
from laplace import Laplace
from laplace.baselaplace import ParametricLaplace
from torch.utils.data import DataLoader, TensorDataset

from laplace_equivariance import EquivariantKFAC, models
from laplace_equivariance.curvature.kron import OuterProductJacobian


def _fitted(memory_limit: int | None, structure: str = "kron", channels: int = 1, alpha: int = 1):
    """A small F-FC+CONV (``channels`` input channels, width ``alpha``) fitted on 12 images."""
    torch.manual_seed(0)
    model = models.build(
        "f-fc+conv", (channels, 4, 4), 3, alpha=alpha, widths=(1, 2), subsampling=(1, 2)
    ).double()
    x = torch.randn(12, channels, 4, 4, dtype=torch.float64)
    y = torch.randint(0, 3, (12,))
    kwargs = {} if memory_limit is None else {"memory_limit": memory_limit}
    la = Laplace(
        model,
        "classification",
        subset_of_weights="all",
        hessian_structure=structure,
        backend=EquivariantKFAC,
        backend_kwargs=kwargs,
    )
    la.fit(DataLoader(TensorDataset(x, y), batch_size=6))
    la.prior_precision = 0.5
    return la, x


@pytest.mark.parametrize("structure", ["kron", "diag"])
@pytest.mark.parametrize("link_approx", ["probit", "bridge", "mc"])
def test_chunked_predictive_equals_the_whole_batchs(structure, link_approx):
    """A limit that fits two examples' Jacobians (twice over: the functional variance holds
    a second copy) splits 12 test images into 6 chunks; the result is the same to rounding."""
    whole, x = _fitted(None, structure)
    n_params = sum(p.numel() for p in whole.model.parameters())
    two_examples = 2 * 2 * 3 * n_params * 8
    chunked, _ = _fitted(two_examples, structure)
    assert chunked.backend.predictive_chunk_size(x) == 2
    torch.manual_seed(1)
    expected = whole(x, pred_type="glm", link_approx=link_approx)
    torch.manual_seed(1)
    calls = []
    # kron takes the Jacobians split by parameter tensor, diag laplace-torch's concatenation
    method = "parameter_jacobians" if structure == "kron" else "jacobians"
    backend_jacobians = getattr(chunked.backend, method)
    setattr(
        chunked.backend,
        method,
        lambda xs, **kw: calls.append(len(xs)) or backend_jacobians(xs, **kw),
    )
    got = chunked(x, pred_type="glm", link_approx=link_approx)
    assert calls == [2] * 6
    if link_approx == "mc":  # samples drawn chunk by chunk: the same distribution, other draws
        torch.testing.assert_close(got.sum(-1), torch.ones(12, dtype=torch.float64))
        assert (got - expected).abs().max() < 0.2
    else:
        torch.testing.assert_close(got, expected, rtol=0, atol=1e-12)


@pytest.mark.parametrize("diagonal_output", [False, True])
def test_variance_from_jacobians_per_parameter_tensor_equals_laplace_torchs(diagonal_output):
    """The Kron predictive's variance from per-tensor Jacobians (never concatenated) equals
    laplace-torch's functional_variance of the concatenated (N, K, P) Jacobians."""
    la, x = _fitted(None)
    Js, f_mu = la.backend.jacobians(x)
    expected = la.functional_variance(Js)
    if diagonal_output:
        expected = torch.diagonal(expected, dim1=-2, dim2=-1)
    mean, var = la._glm_predictive_distribution(x, diagonal_output=diagonal_output)
    torch.testing.assert_close(mean, f_mu, rtol=0, atol=1e-12)
    torch.testing.assert_close(var, expected, rtol=1e-12, atol=1e-14)


def test_f_fc_maps_as_outer_products_give_laplace_torchs_variance():
    """Several channels on both sides of every F-FC map: the variance from the maps' outer
    products (their Jacobians never formed) equals laplace-torch's from the formed Jacobians."""
    la, x = _fitted(None, channels=2, alpha=2)
    parts, _ = la.backend.parameter_jacobians(x, outer_products=True)
    outer = [p for p in parts if isinstance(p, OuterProductJacobian)]
    # every map but the last output map (one output position) has B, M > 1
    assert len(outer) == 4 and sum(min(p.left.shape[2:]) > 1 for p in outer) == 3
    formed, _ = la.backend.parameter_jacobians(x)
    for part, jacobian in zip(parts, formed, strict=True):
        reference = part.dense() if isinstance(part, OuterProductJacobian) else part
        torch.testing.assert_close(reference, jacobian, rtol=1e-12, atol=1e-14)
    _, var = la._glm_predictive_distribution(x)
    expected = la.functional_variance(la.backend.jacobians(x)[0])
    torch.testing.assert_close(var, expected, rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("link_approx", ["probit", "bridge", "mc"])
def test_predictive_equals_laplace_torchs_own(link_approx, monkeypatch):
    """la(x, pred_type="glm") with this package's predictive against laplace-torch's own
    (the unwrapped method: formed, concatenated Jacobians), same seed: equal to 1e-6."""
    la, x = _fitted(None, channels=2, alpha=2)
    torch.manual_seed(3)
    ours = la(x, pred_type="glm", link_approx=link_approx)
    original = ParametricLaplace._glm_predictive_distribution.__wrapped__
    monkeypatch.setattr(ParametricLaplace, "_glm_predictive_distribution", original)
    torch.manual_seed(3)
    theirs = la(x, pred_type="glm", link_approx=link_approx)
    torch.testing.assert_close(ours, theirs, rtol=0, atol=1e-6)


def test_one_example_beyond_the_limit_is_refused_with_what_to_do():
    la, x = _fitted(100)
    with pytest.raises(MemoryError, match="memory_limit=100.*raise the limit"):
        la(x, pred_type="glm", link_approx="probit")


def test_a_batch_of_the_wrong_shape_is_named_as_the_callers_batch():
    """The Jacobians run per example: the layer's check saw (1, 1, 5, 5), not the batch."""
    la, _ = _fitted(None)
    with pytest.raises(ValueError, match=r"got \(7, 1, 5, 5\)"):
        la(torch.randn(7, 1, 5, 5, dtype=torch.float64), pred_type="glm")
