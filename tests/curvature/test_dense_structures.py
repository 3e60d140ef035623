"""``diag`` and ``full`` structures on relaxed models, and backends that cannot work on them.

EquivariantKFAC's diag and full GGNs are laplace-torch's Jacobian-based ones, computed on
chunks of examples whose Jacobians fit ``memory_limit``: they must equal the exact GGN from
``torch.func`` (float64, sums of a few hundred O(1) terms: 1e-10) whatever the chunking, and
a full Hessian beyond the limit is refused before laplace-torch allocates it. A stock backend
on this package's layers is refused at construction, naming the module.
"""

import pytest
import torch
from laplace import Laplace
from laplace.curvature import AsdlEF, AsdlGGN, CurvlinopsGGN
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from laplace_equivariance import EquivariantKFAC, UnsupportedBackendError, models
from tests.curvature.reference import exact_ggn_torch_func
from tests.curvature.test_differentiable import K, every_rule

N = 6


def problem(device):
    torch.manual_seed(0)
    model = every_rule().to(device, torch.float64)
    x = torch.randn(N, 2, 4, 4, dtype=torch.float64, device=device)
    y = torch.randint(0, K, (N,), device=device)
    return model, DataLoader(TensorDataset(x, y), batch_size=N)


def laplace_of_all_weights(model, structure, backend=EquivariantKFAC, **kwargs):
    return Laplace(
        model,
        "classification",
        subset_of_weights="all",
        hessian_structure=structure,
        backend=backend,
        **kwargs,
    )


def fitted(model, loader, structure, memory_limit=None):
    backend_kwargs = None if memory_limit is None else {"memory_limit": memory_limit}
    la = laplace_of_all_weights(model, structure, backend_kwargs=backend_kwargs)
    la.fit(loader)
    return la


def one_example_bytes(model) -> int:
    return K * sum(p.numel() for p in model.parameters()) * 8


@pytest.mark.parametrize("structure", ["full", "diag"])
def test_dense_structures_equal_the_exact_ggn(structure, device):
    model, loader = problem(device)
    la = fitted(model, loader, structure)
    x, _ = loader.dataset.tensors
    exact = exact_ggn_torch_func(model, x, "classification")
    expected = exact if structure == "full" else exact.diagonal()
    torch.testing.assert_close(la.H, expected, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("examples_per_chunk", [1, 4])
@pytest.mark.parametrize("structure", ["full", "diag"])
def test_chunked_jacobians_give_the_same_curvature(structure, examples_per_chunk, device):
    """``memory_limit`` set on the backend: chunks of 1 or 4 of the 6 examples (4 + 2)."""
    model, loader = problem(device)
    la = fitted(model, loader, structure)
    x, y = loader.dataset.tensors
    la.backend.memory_limit = examples_per_chunk * one_example_bytes(model)
    loss, hessian = getattr(la.backend, structure)(x, y)
    exact = exact_ggn_torch_func(model, x, "classification")
    expected = exact if structure == "full" else exact.diagonal()
    torch.testing.assert_close(hessian, expected, rtol=1e-10, atol=1e-12)
    torch.testing.assert_close(loss, la.loss, rtol=1e-12, atol=0)


def test_chunks_stay_within_the_memory_limit(monkeypatch):
    model, loader = problem("cpu")
    sizes = []
    original = EquivariantKFAC.jacobians

    def spy(self, x, enable_backprop=False):
        sizes.append(len(x))
        return original(self, x, enable_backprop)

    monkeypatch.setattr(EquivariantKFAC, "jacobians", spy)
    fitted(model, loader, "diag", memory_limit=int(2.5 * one_example_bytes(model)))
    assert sizes == [2, 2, 2]


def test_one_example_over_the_limit_is_refused_with_what_to_do():
    model, loader = problem("cpu")
    with pytest.raises(MemoryError, match="hessian_structure='kron'.*memory_limit"):
        fitted(model, loader, "diag", memory_limit=one_example_bytes(model) - 1)


def test_a_full_hessian_over_the_limit_is_refused_before_allocation():
    """Table 1's F-FC+CONV: 1.75M parameters, a 12 TB Hessian; refused at construction."""
    model = models.build("f-fc+conv", (1, 32, 32), 40, alpha=10)
    with pytest.raises(MemoryError, match=r"1,750,035 parameters takes .* GiB"):
        laplace_of_all_weights(model, "full")


STOCK_BACKENDS = [AsdlGGN, AsdlEF, CurvlinopsGGN, None]


@pytest.mark.parametrize("structure", ["kron", "diag", "full"])
@pytest.mark.parametrize(
    "backend", STOCK_BACKENDS, ids=["AsdlGGN", "AsdlEF", "Curvlinops", "default"]
)
def test_a_stock_backend_on_relaxed_layers_is_refused_at_construction(backend, structure):
    model = models.build("f-fc+conv", (1, 32, 32), 3, alpha=1)
    with pytest.raises(UnsupportedBackendError, match=r"'layer1.fc.input_map'.*EquivariantKFAC"):
        laplace_of_all_weights(model, structure, backend)


def test_last_layer_laplace_with_a_stock_backend_still_works():
    """The last-layer approximation sees only the stock head."""
    model = models.build("conv", (1, 32, 32), 3, alpha=1)
    x, y = torch.randn(4, 1, 32, 32), torch.randint(0, 3, (4,))
    la = Laplace(model, "classification", subset_of_weights="last_layer", backend=AsdlGGN)
    la.fit(DataLoader(TensorDataset(x, y), batch_size=4))
    assert la.H_facs.kfacs[0][0].shape == (3, 3)


def test_stock_models_keep_every_backend():
    model = nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 2))
    for backend in STOCK_BACKENDS:
        laplace_of_all_weights(model, "kron", backend)
