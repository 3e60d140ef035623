"""``studies/factor_balance.py``: precisions read back from a run, balancing under them."""

import torch

from laplace_equivariance import models
from laplace_equivariance.layers import FactoredLinear2d
from studies import factor_balance


def test_balancing_under_precisions_equalises_each_pairs_prior_terms():
    torch.manual_seed(0)
    model = models.build("f-fc+conv", (1, 32, 32), 3, alpha=1).double()
    precisions = torch.rand(len(list(model.parameters())), dtype=torch.float64) * 100 + 0.1
    x = torch.randn(4, 1, 32, 32, dtype=torch.float64)
    before = model(x)
    factor_balance.balance(model, precisions)
    torch.testing.assert_close(model(x), before, rtol=1e-10, atol=1e-10)
    index = {id(p): k for k, p in enumerate(model.parameters())}
    for module in model.modules():
        if isinstance(module, FactoredLinear2d):
            theta1, theta2 = module.output_map.weight, module.input_map.weight
            a = precisions[index[id(theta1)]] * theta1.square().sum(0)
            b = precisions[index[id(theta2)]] * theta2.square().sum(-1)
            torch.testing.assert_close(a, b, rtol=1e-10, atol=0.0)
