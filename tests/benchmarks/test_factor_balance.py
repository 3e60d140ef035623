"""``benchmarks/factor_balance.py``: precisions read back from a run, balancing under them."""

import torch

from benchmarks import factor_balance
from laplace_equivariance import models
from laplace_equivariance.layers import FactoredLinear2d
from laplace_equivariance.priors import parameter_paths


def _report(model: torch.nn.Module) -> dict:
    """A symmetry report's precisions: tensor k of the model gets precision k + 1."""
    layers: dict[str, dict] = {}
    outside = {}
    for k, (name, where) in enumerate(parameter_paths(model).items()):
        if where is None:
            outside[name] = {"prior_precision": k + 1.0}
            continue
        paths = layers.setdefault(where[0], {})
        paths.setdefault(where[1], {"prior_precision": []})["prior_precision"].append(k + 1.0)
    rows = [{"layer": layer, "paths": paths} for layer, paths in layers.items()]
    return {"symmetry": {"layers": rows, "outside": outside}}


def test_learned_precisions_come_back_in_parameter_order():
    model = models.build("f-fc+conv", (1, 32, 32), 3, alpha=1)
    precisions = factor_balance.learned_precisions(model, _report(model))
    assert precisions == [k + 1.0 for k in range(len(list(model.parameters())))]


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
