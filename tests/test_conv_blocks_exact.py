"""``benchmarks/conv_blocks_exact.py``: its exact block against curvlinops' GGN, its Occam terms."""

import math

import torch

from laplace_equivariance import models
from tests.curvature.reference import exact_ggn_curvlinops
from tests.scripts import load_script


def _benchmark():
    return load_script("benchmarks", "conv_blocks_exact")


def test_exact_block_is_the_curvlinops_ggn_restricted_to_one_tensor():
    """The block of one CONV weight, chunked, equals curvlinops' GGN of that tensor
    (float64), to rounding."""
    torch.manual_seed(0)
    model = models.build("f-fc+conv", (1, 32, 32), 3, alpha=1).double().eval()
    x = torch.randn(6, 1, 32, 32, dtype=torch.float64)
    y = torch.randint(0, 3, (6,))
    name = "layer3.conv.weight"
    block = _benchmark().exact_block(model, name, x, chunk=4)
    for other, parameter in model.named_parameters():
        parameter.requires_grad_(other == name)  # curvlinops' GGN of this tensor alone
    reference = exact_ggn_curvlinops(model, x, y, "classification")
    torch.testing.assert_close(block, reference, rtol=1e-9, atol=1e-12)


def test_occam_terms_of_known_eigenvalues():
    values = torch.tensor([3.0, 1.0, 0.0, -1e-12])
    terms = _benchmark().occam(values, delta=1.0)
    assert terms["trace"] == 4.0
    assert math.isclose(terms["gamma"], 0.75 + 0.5)
    assert math.isclose(terms["log_det_term"], math.log(4.0) + math.log(2.0))
