"""Block-diagonal Kron classes agree with their dense equivalents (float64)."""

import pytest
import torch
from laplace.utils.matrix import Kron, KronDecomposed

from laplace_equivariance.curvature import kron as kron_module
from laplace_equivariance.curvature.kron import (
    BlockDiagonalKron,
    BlockDiagonalKronDecomposed,
    OuterProductJacobian,
    densify,
    is_zero_start,
    zero_factor,
)
from tests.host_reads import host_reads


def spd(*shape):
    m = torch.randn(*shape, dtype=torch.float64)
    return m @ m.transpose(-1, -2) + 0.1 * torch.eye(shape[-1], dtype=torch.float64)


@pytest.fixture
def pair():
    """The same matrix as block-diagonal Kron and as laplace-torch's dense Kron."""
    groups = [
        [spd(3, 3), spd(2, 4, 4)],  # B (3x3), A with 2 blocks of 4x4
        [spd(5, 5)],  # a full block
        [spd(2, 2), spd(3, 3)],  # an ordinary dense pair
    ]
    return BlockDiagonalKron(groups), Kron([[densify(f) for f in g] for g in groups])


def test_to_matrix_diag_and_logdet_equal_the_dense_kron(pair):
    blocks, dense = pair
    torch.testing.assert_close(blocks.to_matrix(), dense.to_matrix())
    torch.testing.assert_close(blocks.diag(), dense.diag())
    torch.testing.assert_close(blocks.logdet(), dense.logdet())


def test_add_and_multiply_keep_the_class_and_check_shapes(pair):
    """Addition is factor by factor (laplace-torch's convention for summing batches)."""
    blocks, dense = pair
    scaled = blocks * 2.0
    assert isinstance(scaled, BlockDiagonalKron)
    torch.testing.assert_close(scaled.to_matrix(), 2 * blocks.to_matrix())
    total = blocks + scaled
    assert isinstance(total, BlockDiagonalKron)
    torch.testing.assert_close(total.to_matrix(), (dense + dense * 2.0).to_matrix())
    with pytest.raises(ValueError, match="shapes differ"):
        blocks + BlockDiagonalKron([[spd(3, 3), spd(8, 8)], *blocks.kfacs[1:]])


@pytest.mark.parametrize("damping", [False, True])
def test_decomposed_products_logdet_and_diag_with_layerwise_prior(pair, damping):
    blocks, dense = pair
    deltas = torch.tensor([0.5, 1.5, 2.0], dtype=torch.float64)
    ours = blocks.decompose(damping=damping) * 0.7 + deltas
    scaled = dense.decompose(damping=damping) * 0.7
    # laplace-torch's KronDecomposed drops `damping` in `*` and `+`; ours keeps it
    reference = KronDecomposed(scaled.eigenvectors, scaled.eigenvalues, deltas, damping=damping)
    assert isinstance(ours, BlockDiagonalKronDecomposed)
    torch.testing.assert_close(ours.logdet(), reference.logdet())
    torch.testing.assert_close(ours.to_matrix(), reference.to_matrix())
    W = torch.randn(4, 2, ours.to_matrix().shape[0], dtype=torch.float64)
    for exponent in (-1, 1, 0.5):
        torch.testing.assert_close(ours.bmm(W, exponent), reference.bmm(W, exponent))
        torch.testing.assert_close(ours.diag(exponent), reference.diag(exponent))
    torch.testing.assert_close(ours.inv_square_form(W), reference.inv_square_form(W))
    joint = W.reshape(1, 8, -1)  # functional_covariance's shape: every output of the batch
    torch.testing.assert_close(ours.inv_square_form(joint), reference.inv_square_form(joint))
    with pytest.raises(ValueError, match="W has 34 parameters; the approximation has 35"):
        ours.inv_square_form(W[..., :-1])
    # split by group (the Jacobians per parameter tensor): the same, unconcatenated
    groups = list(W.split([24, 5, 6], dim=-1))
    torch.testing.assert_close(ours.inv_square_form(groups), reference.inv_square_form(W))
    with pytest.raises(ValueError, match=r"groups of \[24, 5\] parameters"):
        ours.inv_square_form(groups[:2])
    # the first group (B 3x3, A two blocks 4x4) as outer products U[b, m] V[m, w], never formed
    outer = OuterProductJacobian(
        torch.randn(4, 2, 3, 2, dtype=torch.float64), torch.randn(4, 2, 4, dtype=torch.float64)
    )
    formed = torch.cat([outer.dense(), *groups[1:]], dim=-1)
    torch.testing.assert_close(
        ours.inv_square_form([outer, *groups[1:]]), reference.inv_square_form(formed)
    )


def test_undecomposed_product_equals_the_dense_matrix(pair):
    blocks, _ = pair
    W = torch.randn(3, 2, blocks.to_matrix().shape[0], dtype=torch.float64)
    torch.testing.assert_close(blocks.bmm(W), W @ blocks.to_matrix().T)


def test_in_place_addition_accumulates_into_the_same_tensors(pair):
    blocks, dense = pair
    first = blocks.kfacs[0][1]
    expected = (blocks + blocks).to_matrix()
    blocks += BlockDiagonalKron([[f.clone() for f in g] for g in blocks.kfacs])
    assert blocks.kfacs[0][1] is first
    torch.testing.assert_close(blocks.to_matrix(), expected)


def zero_start(blocks: BlockDiagonalKron) -> Kron:
    """``init_kron``'s Kron for the structure of ``blocks``."""
    zero = torch.zeros((), dtype=blocks.kfacs[0][0].dtype)
    return Kron([[zero_factor(*f.shape, zero=zero) for f in g] for g in blocks.kfacs])


def test_zero_factors_hold_one_element_and_refuse_writes(pair):
    start = zero_start(pair[0])
    for factor in (f for g in start.kfacs for f in g):
        assert factor.untyped_storage().nbytes() == factor.element_size()
        assert not factor.any()
    with pytest.raises(RuntimeError):
        start.kfacs[0][1].add_(1.0)


def test_a_zero_factor_is_a_view_of_a_0_dim_zero():
    with pytest.raises(ValueError, match="0-dim"):
        zero_factor(3, 3, zero=torch.zeros(1))


def test_a_batch_added_to_the_zero_start_is_the_sum_itself(pair):
    """``KronLaplace.fit``'s first ``H += H_batch``: no copy, the same matrix and rows."""
    blocks, _ = pair
    total = zero_start(blocks)
    total += blocks
    assert type(total) is BlockDiagonalKron
    assert all(
        mine is theirs
        for g, h in zip(total.kfacs, blocks.kfacs, strict=True)
        for mine, theirs in zip(g, h, strict=True)
    )
    torch.testing.assert_close(total.to_matrix(), blocks.to_matrix())


@pytest.mark.parametrize(
    "factors",
    [
        [[torch.zeros(3, 3)]],  # dense zeros: a real tensor
        [[torch.ones(()).expand(3, 3)]],  # stride 0, but not zero
        [[torch.zeros(()).expand(3, 3)]],  # a stride-0 zero not made by zero_factor
        [[zero_factor(3, 3, zero=torch.zeros(())), torch.zeros(2, 2)]],
        [[zero_factor(3, 3, zero=torch.zeros(())) + 1]],
    ],
    ids=["dense-zeros", "stride-0-ones", "stride-0-zeros", "one-dense-factor", "derived"],
)
def test_only_zero_factors_are_a_zero_start(factors):
    assert not is_zero_start(Kron(factors))


def test_the_zero_start_is_recognised_without_a_host_read(pair):
    """On a GPU a host read waits for every queued kernel: the check reads the marks only."""
    start = zero_start(pair[0])
    assert host_reads(lambda: is_zero_start(start)) == 0
    assert is_zero_start(start)


def test_a_sum_with_other_zero_kron_is_a_new_tensor(pair):
    blocks, _ = pair
    total = Kron([[torch.zeros_like(f) for f in g] for g in blocks.kfacs]) + blocks
    assert total.kfacs[0][1] is not blocks.kfacs[0][1]
    torch.testing.assert_close(total.to_matrix(), blocks.to_matrix())


def test_decomposition_without_blocks_is_laplace_torchs_own_class():
    """Dense and diagonal factors only: the approximation is stock laplace-torch's."""
    groups = [[spd(3, 3), spd(4, 4)], [spd(5, 5)], [torch.rand(2, dtype=torch.float64) + 0.1]]
    ours = BlockDiagonalKron(groups).decompose()
    reference = Kron(groups).decompose()
    assert type(ours) is KronDecomposed
    torch.testing.assert_close(ours.to_matrix(), reference.to_matrix())
    torch.testing.assert_close(ours.logdet(), reference.logdet())


@pytest.mark.parametrize("host_eigenvalues", [True, False])
def test_the_host_eigenvalue_setting_is_kept_by_sums_scalings_and_decompose(
    monkeypatch, pair, host_eigenvalues
):
    ours, _ = pair
    ours = BlockDiagonalKron(ours.kfacs, host_eigenvalues=host_eigenvalues)
    zeros = Kron([[torch.zeros_like(f) for f in group] for group in ours.kfacs])
    derived = [ours + ours, zeros + ours, ours * 2.0, ours.without_rows()]
    accumulated = BlockDiagonalKron([[f.clone() for f in g] for g in ours.kfacs])
    accumulated.host_eigenvalues = host_eigenvalues
    accumulated += ours
    derived.append(accumulated)
    assert [k.host_eigenvalues for k in derived] == [host_eigenvalues] * len(derived)
    routes = []
    original = kron_module.symmetric_eigvalsh_all

    def recording(factors, on_host=False):
        routes.append(on_host)
        return original(factors, on_host=on_host)

    monkeypatch.setattr(kron_module, "symmetric_eigvalsh_all", recording)
    for k in derived:
        k.decompose()
    assert routes == [host_eigenvalues] * len(derived)
