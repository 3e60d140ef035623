"""Eigenvalues without eigenvectors, and eigenvectors only on demand (float64)."""

from __future__ import annotations

import threading

import pytest
import torch
from laplace.utils.matrix import Kron
from torch.utils.data import DataLoader, TensorDataset

from laplace_equivariance import models
from laplace_equivariance.curvature import eigen as eigen_module
from laplace_equivariance.curvature.eigen import (
    LazyEigenvectors,
    symmetric_eigh,
    symmetric_eigvalsh,
    symmetric_eigvalsh_all,
)
from laplace_equivariance.curvature.kron import (
    BlockDiagonalKron,
    BlockDiagonalKronDecomposed,
    densify,
)
from laplace_equivariance.curvature.projection import reproject
from tests.curvature.test_backend import kron_laplace
from tests.curvature.test_kron import spd


@pytest.fixture
def two_threads():
    """Two intra-op threads (CI has two cores), the caller's setting restored after."""
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    yield
    torch.set_num_threads(before)


def mixed_factors(device: torch.device | str = "cpu") -> list[torch.Tensor]:
    """Dense, block-diagonal (blocks not a multiple of the threads), one block, no rows."""
    return [
        spd(7, 7).to(device),
        spd(5, 6, 6).to(device),
        spd(1, 4, 4).to(device),
        torch.zeros(3, 0, 0, dtype=torch.float64, device=device),
        spd(9, 9).to(device),
    ]


def count_eigh_calls(monkeypatch) -> list[tuple]:
    """Record the shape of every ``torch.linalg.eigh`` input (eigenvector computations)."""
    calls, eigh = [], torch.linalg.eigh

    def counting(factor, *args, **kwargs):
        calls.append(tuple(factor.shape))
        return eigh(factor, *args, **kwargs)

    monkeypatch.setattr(torch.linalg, "eigh", counting)
    return calls


@pytest.mark.parametrize("shape", [(6, 6), (3, 5, 5)], ids=["dense", "blocks"])
def test_eigenvalues_alone_equal_those_of_the_full_decomposition(shape):
    factor = spd(*shape)
    values, _ = symmetric_eigh(factor)
    torch.testing.assert_close(symmetric_eigvalsh(factor), values, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("decomposition", [symmetric_eigh, symmetric_eigvalsh])
def test_a_lapack_failure_is_retried_on_the_jittered_factor_and_shifted_back(
    monkeypatch, decomposition
):
    """As laplace-torch's ``symeig``: eig(F + I) - 1 when LAPACK does not converge on F."""
    factor = spd(4, 4)
    expected = torch.linalg.eigvalsh(factor)
    name = "eigh" if decomposition is symmetric_eigh else "eigvalsh"
    original, calls = getattr(torch.linalg, name), []

    def fails_on_the_raw_factor(matrix):
        calls.append(matrix)
        if torch.equal(matrix, factor):
            raise torch.linalg.LinAlgError("did not converge")
        return original(matrix)

    monkeypatch.setattr(torch.linalg, name, fails_on_the_raw_factor)
    result = decomposition(factor)
    values = result[0] if decomposition is symmetric_eigh else result
    assert len(calls) == 2
    torch.testing.assert_close(values, expected, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("decomposition", [symmetric_eigh, symmetric_eigvalsh])
def test_a_factor_that_fails_even_with_jitter_raises_floating_point_error(
    monkeypatch, decomposition
):
    name = "eigh" if decomposition is symmetric_eigh else "eigvalsh"

    def never_converges(matrix):
        raise torch.linalg.LinAlgError("did not converge")

    monkeypatch.setattr(torch.linalg, name, never_converges)
    with pytest.raises(FloatingPointError, match="NaN or inf"):
        decomposition(spd(3, 3))


def test_decompose_scale_add_and_logdet_compute_no_eigenvectors(monkeypatch):
    """What marglik training calls: ``(H * s + delta).logdet()``."""
    diagonal = torch.rand(3, dtype=torch.float64) + 0.1
    groups = [[spd(3, 3), spd(2, 4, 4)], [spd(5, 5)], [spd(2, 2), diagonal]]
    calls = count_eigh_calls(monkeypatch)
    decomposed = BlockDiagonalKron(groups).decompose()
    posterior = decomposed * 0.7 + torch.tensor([0.5, 1.5, 2.0], dtype=torch.float64)
    log_det = posterior.logdet()
    assert calls == []
    assert not decomposed.eigenvectors.computed()
    reference = Kron([[densify(f) for f in g] for g in groups]).decompose() * 0.7
    reference = reference + torch.tensor([0.5, 1.5, 2.0], dtype=torch.float64)
    torch.testing.assert_close(log_det, reference.logdet(), rtol=1e-12, atol=1e-12)


def test_eigenvectors_are_computed_once_per_factor_and_shared_by_derived_objects(monkeypatch):
    groups = [[spd(3, 3), spd(2, 4, 4)], [spd(5, 5)]]
    calls = count_eigh_calls(monkeypatch)
    decomposed = BlockDiagonalKron(groups).decompose()
    posterior = decomposed * 2.0 + torch.tensor(1.0, dtype=torch.float64)
    W = torch.randn(2, 3, 3 * 8 + 5, dtype=torch.float64)
    first = posterior.bmm(W, exponent=-1)
    assert sorted(calls) == sorted([(3, 3), (2, 4, 4), (5, 5)])
    assert decomposed.eigenvectors.computed()
    second = (decomposed * 2.0 + torch.tensor(1.0, dtype=torch.float64)).bmm(W, exponent=-1)
    assert len(calls) == 3
    torch.testing.assert_close(first, second, rtol=0, atol=0)
    dense = BlockDiagonalKron(groups).to_matrix() * 2.0 + torch.eye(29, dtype=torch.float64)
    expected = torch.linalg.solve(dense, W.reshape(6, 29).T).T.reshape(W.shape)
    torch.testing.assert_close(first, expected, rtol=1e-10, atol=1e-12)


def test_a_factor_changed_in_place_after_decomposition_refuses_stale_eigenvectors():
    factors = BlockDiagonalKron([[spd(3, 3), spd(2, 4, 4)]])
    decomposed = factors.decompose()
    factors.kfacs[0][1].mul_(2.0)
    with pytest.raises(RuntimeError, match="modified in place"):
        decomposed.eigenvectors[0]


def test_lazy_eigenvectors_index_and_slice_by_group_computing_only_those_asked(monkeypatch):
    groups = [[spd(3, 3), spd(2, 4, 4)], [spd(5, 5)], [spd(6, 6)]]
    calls = count_eigh_calls(monkeypatch)
    lazy = LazyEigenvectors(groups)
    middle = lazy[1:]
    assert sorted(calls) == [(5, 5), (6, 6)]
    assert len(middle) == 2 and middle[0][0] is lazy[1][0] and middle[1][0] is lazy[-1][0]
    assert [[v.shape for v in group] for group in lazy] == [
        [(3, 3), (2, 4, 4)],
        [(5, 5)],
        [(6, 6)],
    ]
    assert len(calls) == 4


def test_reprojection_keeps_eager_eigenvectors_and_replaces_one_factor_lazily():
    """reproject on laplace-torch's own (eager) decomposition: a lazy view of its vectors."""
    b, a, c, new_a = spd(3, 3), spd(4, 4), spd(2, 2), spd(4, 4)
    eager = Kron([[b, a], [c]]).decompose()

    class Record:
        index, side = 0, 1

        @staticmethod
        def factor():
            return new_a

    rebuilt = reproject(eager, [Record()])
    assert isinstance(rebuilt.eigenvectors, LazyEigenvectors)
    assert rebuilt.eigenvectors[1][0] is eager.eigenvectors[1][0]
    expected = Kron([[b, new_a], [c]]).to_matrix()
    torch.testing.assert_close(rebuilt.to_matrix(), expected, rtol=1e-10, atol=1e-10)


def test_fitted_relaxed_model_gives_marginal_likelihood_without_eigenvectors(monkeypatch):
    """``Laplace.fit`` + ``log_marginal_likelihood`` on F-FC+CONV compute eigenvalues only;
    the GLM predictive's products then compute the eigenvectors and equal those of an
    eager decomposition of the same factors."""
    model = models.build("f-fc+conv", (1, 32, 32), 3, alpha=1).double()
    x = torch.randn(6, 1, 32, 32, dtype=torch.float64)
    y = torch.randint(0, 3, (6,))
    la = kron_laplace(model)
    calls = count_eigh_calls(monkeypatch)
    la.fit(DataLoader(TensorDataset(x, y), batch_size=3))
    la.log_marginal_likelihood(torch.tensor(2.0, dtype=torch.float64))
    assert calls == []
    J = torch.randn(2, 3, la.n_params, dtype=torch.float64)
    lazy = la.functional_variance(J)
    assert calls, "the GLM predictive needs the eigenvectors"
    vectors, values = [], []
    for group in la.H_facs.kfacs:
        pairs = [
            symmetric_eigh(f) if f.ndim > 1 else (f, torch.eye(len(f), dtype=f.dtype))
            for f in group
        ]
        values.append([v.flatten() for v, _ in pairs])
        vectors.append([q for _, q in pairs])
    la.H = BlockDiagonalKronDecomposed(vectors, values, damping=la.damping)
    torch.testing.assert_close(lazy, la.functional_variance(J), rtol=1e-8, atol=1e-10)


def test_all_eigenvalues_on_threads_equal_those_of_one_call_per_factor(two_threads, device):
    factors = mixed_factors(device)
    for values, factor in zip(symmetric_eigvalsh_all(factors), factors, strict=True):
        assert values.shape == factor.shape[:-1]
        torch.testing.assert_close(values, symmetric_eigvalsh(factor), rtol=1e-12, atol=1e-12)


def test_all_eigenvalues_run_in_pieces_on_one_thread_each_and_restore_the_threads(
    monkeypatch, two_threads
):
    """Batched factors are cut into runs of blocks, one per thread; LAPACK sees one thread."""
    seen, original = [], eigen_module._eigvalsh_on_one_thread

    def recording(matrices):
        values = original(matrices)
        seen.append((tuple(matrices.shape), torch.get_num_threads()))
        return values

    monkeypatch.setattr(eigen_module, "_eigvalsh_on_one_thread", recording)
    symmetric_eigvalsh_all(mixed_factors())
    assert sorted(shape for shape, _ in seen) == sorted(
        [(7, 7), (3, 6, 6), (2, 6, 6), (1, 4, 4), (9, 9)]
    )
    assert {threads for _, threads in seen} == {1}
    assert torch.get_num_threads() == 2
    # a thread started later takes PyTorch's process-wide setting, which the workers changed
    later = []
    thread = threading.Thread(target=lambda: later.append(torch.get_num_threads()))
    thread.start()
    thread.join()
    assert later == [2]


def test_all_eigenvalues_redo_a_factor_whose_piece_failed(monkeypatch, two_threads):
    """LAPACK fails on the pieces of the (5, 6, 6) factor: the whole factor is redone."""
    factors = mixed_factors()
    expected = [symmetric_eigvalsh(f) for f in factors]
    original = torch.linalg.eigvalsh

    def fails_on_pieces(matrix):
        if matrix.shape[-1] == 6 and len(matrix) < 5:
            raise torch.linalg.LinAlgError("did not converge")
        return original(matrix)

    monkeypatch.setattr(torch.linalg, "eigvalsh", fails_on_pieces)
    for values, reference in zip(symmetric_eigvalsh_all(factors), expected, strict=True):
        torch.testing.assert_close(values, reference, rtol=1e-10, atol=1e-10)


def test_all_eigenvalues_raise_for_a_nan_factor(two_threads):
    factors = mixed_factors()
    factors[1][2, 0, 0] = float("nan")
    with pytest.raises(FloatingPointError, match="NaN or inf"):
        symmetric_eigvalsh_all(factors)


def test_all_eigenvalues_under_autograd_stay_differentiable(two_threads):
    factor = spd(3, 4, 4).requires_grad_(True)
    (values,) = symmetric_eigvalsh_all([factor])
    (grad,) = torch.autograd.grad(values.sum(), factor)
    expected = torch.eye(4, dtype=torch.float64).expand(3, 4, 4)
    torch.testing.assert_close(grad, expected, rtol=1e-10, atol=1e-10)


def test_all_eigenvalues_are_sequential_without_openmp(monkeypatch, two_threads):
    """PyTorch's native thread pool cannot give each worker one thread: no workers then."""
    calls = []
    monkeypatch.setattr(torch.backends.openmp, "is_available", lambda: False)
    monkeypatch.setattr(eigen_module, "_eigvalsh_on_one_thread", calls.append)
    factors = mixed_factors()
    for values, factor in zip(symmetric_eigvalsh_all(factors), factors, strict=True):
        torch.testing.assert_close(values, symmetric_eigvalsh(factor), rtol=0, atol=0)
    assert calls == []


@pytest.mark.parametrize(
    "shapes", [[(7, 7), (5, 6, 6), (3, 0, 0), (), (4,)], [(2, 3)], []], ids=["mixed", "one", "none"]
)
def test_tensors_moved_together_equal_those_moved_one_by_one(shapes, device):
    tensors = [torch.randn(shape, dtype=torch.float64) for shape in shapes]
    moved = eigen_module.moved_together(tensors, device)
    assert len(moved) == len(tensors)
    for copy, tensor in zip(moved, tensors, strict=True):
        assert copy.device.type == device.type and copy.shape == tensor.shape
        torch.testing.assert_close(copy.cpu(), tensor, rtol=0, atol=0)


def test_tensors_of_several_dtypes_are_moved_one_by_one(monkeypatch):
    tensors = [torch.ones(2, dtype=torch.float64), torch.ones(3, dtype=torch.float32)]
    monkeypatch.setattr(torch, "cat", None)  # a concatenation would need one dtype
    moved = eigen_module.moved_together(tensors, "cpu")
    assert [t.dtype for t in moved] == [torch.float64, torch.float32]


def test_all_eigenvalues_on_the_host_equal_those_on_the_factors_device(two_threads, device):
    factors = mixed_factors(device)
    on_host = symmetric_eigvalsh_all(factors, on_host=True)
    for values, factor in zip(on_host, factors, strict=True):
        assert values.device == factor.device and values.shape == factor.shape[:-1]
        torch.testing.assert_close(values, symmetric_eigvalsh(factor), rtol=1e-10, atol=1e-10)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
@pytest.mark.parametrize("on_host", [True, False], ids=["host", "device"])
def test_cuda_factors_eigenvalues_are_computed_where_asked(monkeypatch, two_threads, on_host):
    """dev=cuda: with ``on_host`` LAPACK sees host copies only, without it the GPU factors."""
    seen, eigvalsh = [], torch.linalg.eigvalsh

    def recording(matrices):
        seen.append(matrices.device.type)
        return eigvalsh(matrices)

    monkeypatch.setattr(torch.linalg, "eigvalsh", recording)
    values = symmetric_eigvalsh_all(mixed_factors("cuda"), on_host=on_host)
    assert {v.device.type for v in values} == {"cuda"}
    assert set(seen) == ({"cpu"} if on_host else {"cuda"})


def test_under_autograd_the_host_route_is_not_taken(monkeypatch, two_threads):
    """The graph must stay on the factors' device: no copies when a factor requires grad."""
    monkeypatch.setattr(eigen_module, "moved_together", None)
    factor = spd(3, 4, 4).requires_grad_(True)
    (values,) = symmetric_eigvalsh_all([factor], on_host=True)
    assert values.requires_grad
