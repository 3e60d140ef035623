"""The dependency internals we extend exist, and registration is idempotent.

If ASDL or laplace-torch move these, this file fails first and says what moved.
"""

import asdl.core
import laplace.curvature
import torch
from laplace.baselaplace import KronLaplace, ParametricLaplace

from laplace_equivariance.curvature import registry
from laplace_equivariance.curvature.rules import RULES
from laplace_equivariance.layers import FactoredInputMap


def test_asdl_internals_exist():
    assert isinstance(asdl.core._supported_module_classes, tuple)
    assert callable(asdl.core.get_op_class)
    assert torch.nn.Linear in asdl.core._supported_module_classes


def test_registration_is_idempotent_and_maps_our_modules_to_our_rules():
    registry.register_with_asdl()
    classes, function = asdl.core._supported_module_classes, asdl.core.get_op_class
    registry.register_with_asdl()
    assert asdl.core._supported_module_classes == classes
    assert asdl.core.get_op_class is function
    for cls in RULES:
        assert cls in classes
    assert asdl.core.get_op_class(FactoredInputMap(1, 1, 2)) is RULES[FactoredInputMap]
    assert asdl.core.get_op_class(torch.nn.Linear(1, 1)).__name__ == "Linear"


def test_kron_initialiser_is_installed_once():
    registry.install_kron_initialiser()
    wrapped = KronLaplace._init_H
    registry.install_kron_initialiser()
    assert KronLaplace._init_H is wrapped


def test_accumulating_fit_state_dict_and_construction_check_are_installed_once():
    for install, owner, attribute in [
        (registry.install_fit_hook, KronLaplace, "fit"),
        (registry.install_state_dict_hooks, KronLaplace, "state_dict"),
        (registry.install_state_dict_hooks, KronLaplace, "load_state_dict"),
        (registry.install_predictive_chunking, ParametricLaplace, "_glm_predictive_distribution"),
        (registry.install_construction_check, ParametricLaplace, "__init__"),
    ]:
        install()
        wrapped = getattr(owner, attribute)
        install()
        assert getattr(owner, attribute) is wrapped


STOCK_SCRIPT = """
import sys
import torch
from laplace import Laplace
from laplace.curvature import AsdlEF, AsdlGGN, CurvlinopsGGN
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

assert not any(name.startswith("laplace_equivariance") for name in sys.modules)
torch.manual_seed(0)
model = nn.Sequential(
    nn.Conv2d(1, 2, 3, padding=1), nn.Tanh(), nn.Flatten(), nn.Linear(2 * 4 * 4, 3)
).double()
x = torch.randn(12, 1, 4, 4, dtype=torch.float64)
y = torch.randint(0, 3, (12,))
results = {}
for backend in (AsdlGGN, AsdlEF, CurvlinopsGGN):
    for structure in ("kron", "diag", "full"):
        la = Laplace(model, "classification", subset_of_weights="all",
                     hessian_structure=structure, backend=backend)
        first, second = DataLoader(TensorDataset(x[:5], y[:5]), batch_size=5), DataLoader(
            TensorDataset(x[5:], y[5:]), batch_size=4)
        la.fit(first)
        la.fit(second, override=False)
        key = backend.__name__ + "-" + structure
        results[key] = [la.log_marginal_likelihood(torch.tensor(0.7, dtype=torch.float64)).detach()]
        if structure == "kron":
            results[key] += [f for group in la.H_facs.kfacs for f in group]
        else:
            results[key].append(la.H)
torch.save({"model": model.state_dict(), "results": results}, sys.argv[1])
"""


def test_stock_laplace_is_unchanged_by_this_package(tmp_path):
    """What this package patches (ASDL's registry, KronLaplace's initialiser and fit,
    ParametricLaplace's constructor) leaves stock models alone: the same fits, factors and
    marginal likelihoods, bit for bit, as in a process that never imports the package
    (accumulated fits included)."""
    import subprocess
    import sys

    from laplace import Laplace
    from torch.utils.data import DataLoader, TensorDataset

    import laplace_equivariance  # noqa: F401  (installs every patch)

    out = tmp_path / "stock.pt"
    subprocess.run([sys.executable, "-c", STOCK_SCRIPT, str(out)], check=True)
    saved = torch.load(out, weights_only=False)
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Conv2d(1, 2, 3, padding=1),
        torch.nn.Tanh(),
        torch.nn.Flatten(),
        torch.nn.Linear(2 * 4 * 4, 3),
    ).double()
    for name, value in model.state_dict().items():
        assert torch.equal(value, saved["model"][name])
    x = torch.randn(12, 1, 4, 4, dtype=torch.float64)
    y = torch.randint(0, 3, (12,))
    for key, expected in saved["results"].items():
        backend_name, structure = key.split("-")
        la = Laplace(
            model,
            "classification",
            subset_of_weights="all",
            hessian_structure=structure,
            backend=getattr(laplace.curvature, backend_name),
        )
        la.fit(DataLoader(TensorDataset(x[:5], y[:5]), batch_size=5))
        la.fit(DataLoader(TensorDataset(x[5:], y[5:]), batch_size=4), override=False)
        ours = [la.log_marginal_likelihood(torch.tensor(0.7, dtype=torch.float64)).detach()]
        if structure == "kron":
            ours += [f for group in la.H_facs.kfacs for f in group]
        else:
            ours.append(la.H)
        assert len(ours) == len(expected), key
        for a, b in zip(ours, expected, strict=True):
            assert torch.equal(a, b), key


def test_the_private_attributes_we_read_exist_on_a_stock_fit():
    """laplace-torch's ``_H_factor``, ``_device``, ``_dtype`` and ``_check_H_init``, read only
    through registry.py, on a fitted stock approximation."""
    from laplace import Laplace
    from torch.utils.data import DataLoader, TensorDataset

    from laplace_equivariance.curvature.registry import (
        device_and_dtype,
        likelihood_scale,
        require_fitted,
    )

    model = torch.nn.Sequential(torch.nn.Linear(3, 2)).double()
    la = Laplace(
        model, "regression", subset_of_weights="all", hessian_structure="kron", sigma_noise=2.0
    )
    try:
        require_fitted(la)
        raise AssertionError("an unfitted approximation passed require_fitted")
    except AttributeError:
        pass
    x = torch.randn(4, 3, dtype=torch.float64)
    la.fit(DataLoader(TensorDataset(x, torch.randn(4, 2, dtype=torch.float64)), batch_size=4))
    require_fitted(la)
    assert float(likelihood_scale(la)) == 1 / 4  # 1 / (sigma^2 T)
    assert device_and_dtype(la) == (torch.device("cpu"), torch.float64)
