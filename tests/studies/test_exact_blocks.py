"""``studies/exact_blocks.py``: its exact blocks against curvlinops' GGN, its Occam terms,
the examples and temperature of a run's own evidence."""

import math

import pytest
import torch

from laplace_equivariance import models
from laplace_equivariance.app.cli import main
from laplace_equivariance.app.runs import load_trained
from studies import exact_blocks
from tests.curvature.reference import exact_ggn_curvlinops
from tests.studies.conftest import TINY

LAYER_TWO = ["layer2.conv.weight", "layer2.fc.input_map.weight", "layer2.fc.output_map.weight"]


@pytest.mark.parametrize("name", LAYER_TWO)
def test_exact_blocks_are_the_curvlinops_ggn_restricted_to_each_tensor(name):
    """The blocks of a layer's three tensors from one chunked pass each equal curvlinops' GGN
    of that tensor alone (float64), to rounding."""
    torch.manual_seed(0)
    model = models.build(
        "f-fc+conv", (1, 16, 16), 3, alpha=1, widths=(1, 2, 2, 4), subsampling=(1, 2, 3, 4)
    )
    model = model.double().eval()
    x = torch.randn(6, 1, 16, 16, dtype=torch.float64)
    y = torch.randint(0, 3, (6,))
    blocks = exact_blocks.exact_blocks(model, LAYER_TWO, x, chunk=4)
    for other, parameter in model.named_parameters():
        parameter.requires_grad_(other == name)  # curvlinops' GGN of this tensor alone
    reference = exact_ggn_curvlinops(model, x, y, "classification")
    torch.testing.assert_close(blocks[name], reference, rtol=1e-9, atol=1e-12)


def test_occam_terms_of_known_eigenvalues():
    values = torch.tensor([3.0, 1.0, 0.0, -1e-12])
    terms = exact_blocks.occam(values, delta=1.0)
    assert terms["trace"] == 4.0
    assert math.isclose(terms["gamma"], 0.75 + 0.5)
    assert math.isclose(terms["log_det_term"], math.log(4.0) + math.log(2.0))


@pytest.mark.parametrize("delta", [1e-2, 1.0, 1e4])
def test_occam_of_a_block_by_cholesky_equals_its_eigenvalues(delta):
    """A rank-deficient block (rank 20 of 50, eigenvalues from 1e-6 to 1e6): the Cholesky
    route gives the eigenvalues' trace, gamma and Occam term. Each route's gamma carries an
    error of about P eps ||G|| / delta (5e-7 at delta 1e-2), hence the tolerance 2e-6."""
    torch.manual_seed(0)
    rows = torch.randn(20, 50, dtype=torch.float64) * torch.logspace(-3, 3, 20)[:, None]
    block = rows.T @ rows
    by_cholesky = exact_blocks.occam_of_block(block, delta, columns=16)  # 16, 16, 16, 2
    by_eigenvalues = exact_blocks.occam(torch.linalg.eigvalsh(block), delta)
    for key, value in by_eigenvalues.items():
        assert math.isclose(by_cholesky[key], value, rel_tol=2e-6, abs_tol=2e-6), key


def test_a_run_is_measured_on_the_examples_and_temperature_of_its_evidence(tmp_path):
    """64 training images, the evidence fitted on the first 32: both blocks are of those 32 at
    temperature 32 / 64 (the estimate for all 64), not of all 64 at temperature 1."""
    out = tmp_path / "run"
    argv = ["train", "--dataset", "quadrant-mnist", "--model", "f-fc+conv", "--out", str(out)]
    assert main([*argv, *TINY, "--marglik-subset", "32"]) == 0
    name = "layer8.conv.weight"
    row = exact_blocks.measure(out, max_size=10**6, pattern=f"^{name}$")
    assert (row["examples"], row["temperature"]) == (32, 0.5)
    model, data = load_trained(out)
    model = model.double().eval()
    block = exact_blocks.exact_blocks(model, [name], data.x_train[:32].double())[name]
    (measured,) = row["blocks"]
    assert measured["exact"]["trace"] == pytest.approx(block.trace().item() / 0.5, rel=1e-9)
    # KFAC approximates the block (its trace is 0.83 of the exact one here): within half of it,
    # where a temperature left out on either side would put them a factor of two apart
    assert measured["kfac"]["trace"] == pytest.approx(measured["exact"]["trace"], rel=0.5)
