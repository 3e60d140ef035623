"""Eigenvalues of low-rank block-diagonal factors from the Gram matrices of their rows (float64).

Each case compares with ``torch.linalg.eigvalsh`` of the factor itself; eigenvalues that are
zero in exact arithmetic come out of the dense route as rounding noise of order
``1e-15 * max``, hence the absolute tolerance relative to the largest eigenvalue.
"""

from __future__ import annotations

import pytest
import torch
from laplace.utils.matrix import Kron
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from laplace_equivariance.curvature import kron as kron_module
from laplace_equivariance.curvature.eigen import symmetric_eigvalsh
from laplace_equivariance.curvature.factor_rows import FactorRows, is_pending, pending_factor
from laplace_equivariance.curvature.kron import BlockDiagonalKron
from laplace_equivariance.curvature.rules.factored import FactoredInputMapRule
from laplace_equivariance.layers import FactoredLinear2d
from tests.curvature.test_backend import kron_laplace
from tests.curvature.test_kron import spd


def rows_and_factor(n_blocks: int = 3, m: int = 5, b: int = 8):
    rows = torch.randn(n_blocks, m, b, dtype=torch.float64)
    return rows, rows.mT @ rows


def assert_spectrum(values: torch.Tensor, factor: torch.Tensor) -> None:
    """``values`` (flattened, block after block) equal ``factor``'s eigenvalues."""
    expected = torch.linalg.eigvalsh(factor).clamp(min=0).flatten()
    scale = expected.abs().max()
    torch.testing.assert_close(values, expected, rtol=0, atol=1e-12 * scale)


def low_rank_kron(m: int = 5) -> BlockDiagonalKron:
    """One group ``[B, A]`` with a block-diagonal ``A`` of rank ``m`` per 8x8 block."""
    rows, factor = rows_and_factor(m=m)
    return BlockDiagonalKron([[spd(2, 2), factor]], [[None, FactorRows.of(rows, factor)]])


def test_gram_eigenvalues_equal_the_factors_and_pad_with_zeros():
    rows, factor = rows_and_factor()
    kept = FactorRows.of(rows, factor)
    values = kept.padded(factor, symmetric_eigvalsh(kept.gram(factor)))
    assert values.shape == (3, 8)
    assert torch.all(values[:, :3] == 0)
    assert_spectrum(values.flatten(), factor)


def test_rows_as_many_as_the_block_size_are_not_kept():
    rows, factor = rows_and_factor(m=8)
    assert FactorRows.of(rows, factor) is None


def test_rows_of_another_shape_are_refused():
    rows, factor = rows_and_factor()
    with pytest.raises(ValueError, match=r"\(n_blocks, m, b\)"):
        FactorRows.of(rows[:2], factor)


def test_decompose_takes_low_rank_blocks_from_their_gram_matrices(monkeypatch):
    shapes, original = [], kron_module.symmetric_eigvalsh_all

    def recording(matrices, on_host=False):
        shapes.extend(tuple(matrix.shape) for matrix in matrices)
        return original(matrices, on_host=on_host)

    monkeypatch.setattr(kron_module, "symmetric_eigvalsh_all", recording)
    kron = low_rank_kron()
    decomposed = kron.decompose()
    assert (3, 8, 8) not in shapes, "the 8x8 blocks have rank 5: their 5x5 Gram matrices do"
    assert_spectrum(decomposed.eigenvalues[0][1], kron.kfacs[0][1])


def test_sums_keep_the_rows_of_both_while_fewer_than_the_block_size():
    first, second = low_rank_kron(m=3), low_rank_kron(m=4)
    total = first + second
    assert total.rows[0][1].count == 7
    assert_spectrum(total.decompose().eigenvalues[0][1], total.kfacs[0][1])
    assert (total + low_rank_kron(m=1)).rows[0][1] is None, "8 rows for blocks of 8"


def test_in_place_sum_onto_the_zero_initial_kron_keeps_the_rows():
    """``KronLaplace.fit``: ``H = Kron(zeros); H += batch`` batch after batch."""
    batch = low_rank_kron()
    H = Kron([[torch.zeros_like(f) for f in group] for group in batch.kfacs])
    H += batch
    H += low_rank_kron(m=2)
    assert isinstance(H, BlockDiagonalKron)
    assert H.rows[0][1].count == 7
    assert_spectrum(H.decompose().eigenvalues[0][1], H.kfacs[0][1])


def test_a_nonzero_stock_kron_contributes_unknown_rows():
    batch = low_rank_kron()
    other = Kron([[spd(2, 2), spd(3, 8, 8)]])
    total = other + batch
    assert total.rows[0][1] is None
    assert_spectrum(total.decompose().eigenvalues[0][1], total.kfacs[0][1])


@pytest.mark.parametrize("scalar", [0.25, torch.tensor(0.25, dtype=torch.float64)])
def test_scaling_scales_the_rows(scalar):
    scaled = low_rank_kron() * scalar
    assert scaled.rows[0][1] is not None
    assert_spectrum(scaled.decompose().eigenvalues[0][1], scaled.kfacs[0][1])


def test_a_factor_changed_in_place_is_decomposed_from_itself():
    """laplace-torch rescales ``A`` in place for ``fit(override=False)``; the rows then lie."""
    kron = low_rank_kron()
    kron.kfacs[0][1].mul_(3.0)
    assert kron._valid_rows()[0][1] is None
    assert_spectrum(kron.decompose().eigenvalues[0][1], kron.kfacs[0][1])


def pending_kron(m: int = 5) -> tuple[BlockDiagonalKron, torch.Tensor]:
    """:func:`low_rank_kron` with its ``A`` pending, and that ``A`` formed for reference."""
    rows, factor = rows_and_factor(m=m)
    pending = pending_factor(3, 8, rows)
    kron = BlockDiagonalKron([[spd(2, 2), pending]], [[None, FactorRows.of(rows, pending)]])
    return kron, factor


def test_a_pending_factor_holds_no_memory_and_refuses_writes():
    factor = pending_factor(3, 8, torch.ones(1, dtype=torch.float64))
    assert is_pending(factor) and factor.shape == (3, 8, 8) and factor.dtype == torch.float64
    assert factor.untyped_storage().nbytes() == 8
    with pytest.raises(RuntimeError):
        factor.mul_(2.0)


def test_a_pending_factor_is_formed_from_its_rows_when_read():
    kron, factor = pending_kron()
    assert_spectrum(kron.decompose().eigenvalues[0][1], factor)
    assert is_pending(BlockDiagonalKron.stored_factors(kron)[0][1]), "eigenvalues form nothing"
    torch.testing.assert_close(kron.kfacs[0][1], factor, rtol=1e-13, atol=0)
    assert not is_pending(BlockDiagonalKron.stored_factors(kron)[0][1])
    assert kron._valid_rows()[0][1].count == 5, "the rows still describe the formed factor"


def test_sums_and_scalings_of_pending_factors_stay_pending_below_the_block_size():
    (first, a), (second, b) = pending_kron(m=3), pending_kron(m=4)
    total = (first + second) * 0.5
    assert is_pending(BlockDiagonalKron.stored_factors(total)[0][1])
    assert_spectrum(total.decompose().eigenvalues[0][1], 0.5**0.5 * (a + b))
    first += second
    assert is_pending(BlockDiagonalKron.stored_factors(first)[0][1])
    torch.testing.assert_close(first.kfacs[0][1], a + b, rtol=1e-13, atol=0)


@pytest.mark.parametrize("in_place", [False, True])
def test_a_sum_that_reaches_the_block_size_is_formed(in_place):
    (first, a), (second, b) = pending_kron(m=5), pending_kron(m=3)
    total = first
    if in_place:
        total += second
    else:
        total = first + second
    assert not is_pending(BlockDiagonalKron.stored_factors(total)[0][1])
    assert total.rows[0][1] is None, "8 rows for blocks of 8"
    torch.testing.assert_close(total.kfacs[0][1], a + b, rtol=1e-13, atol=0)


def test_the_eigenvectors_of_a_pending_factor_are_those_of_its_formed_factor():
    kron, factor = pending_kron()
    decomposed = kron.decompose()
    vectors, values = decomposed.eigenvectors[0][1], decomposed.eigenvalues[0][1].view(3, 8)
    rebuilt = vectors @ torch.diag_embed(values) @ vectors.mT
    torch.testing.assert_close(rebuilt, factor, rtol=0, atol=1e-12 * factor.abs().max())


def count_formed(monkeypatch) -> list[int]:
    """Count the dense factors formed from rows (``FactorRows.dense`` calls)."""
    formed = [0]
    dense = FactorRows.dense

    def counted(self, factor):
        formed[0] += 1
        return dense(self, factor)

    monkeypatch.setattr(FactorRows, "dense", counted)
    return formed


def test_a_factor_formed_for_its_eigenvectors_is_kept_and_not_formed_again(monkeypatch):
    formed = count_formed(monkeypatch)
    kron, factor = pending_kron()
    kron.decompose().eigenvectors[0]
    assert formed[0] == 1
    assert not is_pending(BlockDiagonalKron.stored_factors(kron)[0][1]), "stored back"
    torch.testing.assert_close(kron.kfacs[0][1], factor, rtol=1e-13, atol=0)
    assert formed[0] == 1, "reading the factors formed it a second time"
    assert kron._valid_rows()[0][1].count == 5, "the rows still describe the stored factor"


def test_a_factor_formed_for_its_eigenvectors_is_kept_by_its_own_kron_only():
    (kron, a), (other, b) = pending_kron(m=3), pending_kron(m=4)
    decomposed = kron.decompose()
    total = kron + other
    decomposed.eigenvectors[0]
    assert not is_pending(BlockDiagonalKron.stored_factors(kron)[0][1])
    assert is_pending(BlockDiagonalKron.stored_factors(total)[0][1]), "the sum's own"
    torch.testing.assert_close(total.kfacs[0][1], a + b, rtol=1e-13, atol=0)
    torch.testing.assert_close(kron.kfacs[0][1], a, rtol=1e-13, atol=0)


def ffc_fit(n: int, **fit_kwargs):
    """An F-FC network on 1x8x8 maps: the input map's ``A`` has one 64x64 block."""
    torch.manual_seed(0)
    model = nn.Sequential(
        FactoredLinear2d(1, 2, (8, 8), (2, 2)), nn.ReLU(), nn.Flatten(), nn.Linear(8, 3)
    ).double()
    x = torch.randn(n, 1, 8, 8, dtype=torch.float64)
    y = torch.randint(0, 3, (n,))
    la = kron_laplace(model)
    la.fit(DataLoader(TensorDataset(x, y), batch_size=4), **fit_kwargs)
    return la


def test_a_fit_on_fewer_examples_than_positions_keeps_the_input_maps_rows():
    la = ffc_fit(10)
    factor = la.H_facs.kfacs[0][1]
    assert factor.shape == (1, 64, 64)
    assert la.H_facs._valid_rows()[0][1].count == 10
    assert_spectrum(la.H.eigenvalues[0][1], factor)


def test_the_marginal_likelihood_is_that_of_the_dense_eigenvalues():
    la = ffc_fit(10)
    gram = la.log_marginal_likelihood(torch.tensor(2.0, dtype=torch.float64))
    la.H = BlockDiagonalKron(la.H_facs.kfacs).decompose(damping=la.damping)
    dense = la.log_marginal_likelihood(torch.tensor(2.0, dtype=torch.float64))
    torch.testing.assert_close(gram, dense, rtol=1e-12, atol=1e-10)


def test_a_fit_on_as_many_examples_as_positions_keeps_no_rows():
    la = ffc_fit(64)
    assert la.H_facs._valid_rows()[0][1] is None


def test_an_accumulated_fit_is_decomposed_from_the_factors():
    la = ffc_fit(8)
    x = torch.randn(6, 1, 8, 8, dtype=torch.float64)
    la.fit(DataLoader(TensorDataset(x, torch.randint(0, 3, (6,))), batch_size=3), override=False)
    assert_spectrum(la.H.eigenvalues[0][1], la.H_facs.kfacs[0][1])


def test_a_fit_on_fewer_examples_than_positions_forms_no_input_map_factor(monkeypatch):
    """The marginal likelihood needs the eigenvalues only: ``cov_kron_A`` never runs."""
    calls = []
    original = FactoredInputMapRule.cov_kron_A

    def counted(module, in_data):
        calls.append(in_data.shape)
        return original(module, in_data)

    monkeypatch.setattr(FactoredInputMapRule, "cov_kron_A", staticmethod(counted))
    la = ffc_fit(10)
    la.log_marginal_likelihood(torch.tensor(2.0, dtype=torch.float64))
    assert calls == [] and is_pending(BlockDiagonalKron.stored_factors(la.H_facs)[0][1])


def test_a_pending_fit_equals_the_fit_that_forms_every_factor(monkeypatch):
    pending = ffc_fit(10)
    pending_mll = pending.log_marginal_likelihood(torch.tensor(2.0, dtype=torch.float64))
    monkeypatch.setattr(FactoredInputMapRule, "deferred_a_rows", lambda *args: None)
    formed = ffc_fit(10)
    assert not is_pending(BlockDiagonalKron.stored_factors(formed.H_facs)[0][1])
    for mine, theirs in zip(pending.H_facs.kfacs, formed.H_facs.kfacs, strict=True):
        for a, b in zip(mine, theirs, strict=True):
            torch.testing.assert_close(a, b, rtol=1e-12, atol=1e-14)
    formed_mll = formed.log_marginal_likelihood(torch.tensor(2.0, dtype=torch.float64))
    torch.testing.assert_close(pending_mll, formed_mll, rtol=1e-12, atol=1e-10)


def test_a_non_finite_row_of_a_pending_factor_is_caught(monkeypatch):
    """Only the rows say what a pending factor holds: the finiteness check reads them."""
    original = FactoredInputMapRule.a_rows

    def with_nan(in_data):
        rows = original(in_data).clone()
        rows[0, 0, 0] = float("nan")
        return rows

    monkeypatch.setattr(FactoredInputMapRule, "a_rows", staticmethod(with_nan))
    with pytest.raises(FloatingPointError, match="Non-finite"):
        ffc_fit(4)


def test_a_factor_extended_in_place_after_its_decomposition_is_not_overwritten():
    # one-factor groups: the in-place sum keeps the pending tensor and extends its rows, so
    # storing the decomposition's formed factor back would silently drop the added rows
    (rows, a), (more, b) = rows_and_factor(m=3), rows_and_factor(m=4)
    pending, added = pending_factor(3, 8, rows), pending_factor(3, 8, more)
    kron = BlockDiagonalKron([[pending]], [[FactorRows.of(rows, pending)]])
    other = BlockDiagonalKron([[added]], [[FactorRows.of(more, added)]])
    decomposed = kron.decompose()
    kron += other
    decomposed.eigenvectors[0]
    assert is_pending(BlockDiagonalKron.stored_factors(kron)[0][0])
    torch.testing.assert_close(kron.kfacs[0][0], a + b, rtol=1e-13, atol=0)


@pytest.mark.parametrize("in_place", [False, True])
def test_a_sum_whose_factors_all_stay_pending_adds_no_dense_factor(in_place):
    (rows, a), (more, b) = rows_and_factor(m=3), rows_and_factor(m=4)
    first, second = pending_factor(3, 8, rows), pending_factor(3, 8, more)
    kron = BlockDiagonalKron([[first]], [[FactorRows.of(rows, first)]])
    other = BlockDiagonalKron([[second]], [[FactorRows.of(more, second)]])
    if in_place:
        kron += other
        total = kron
    else:
        total = kron + other
    assert is_pending(BlockDiagonalKron.stored_factors(total)[0][0])
    torch.testing.assert_close(total.kfacs[0][0], a + b, rtol=1e-13, atol=0)


def test_a_factor_replaced_after_its_decomposition_is_not_overwritten():
    kron, _ = pending_kron()
    decomposed = kron.decompose()
    replacement = spd(3, 8, 8)
    kron.kfacs = [[kron.stored_factors(kron)[0][0], replacement]]
    decomposed.eigenvectors[0]
    assert kron.stored_factors(kron)[0][1] is replacement
