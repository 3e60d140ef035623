"""The dependency internals we extend exist, and registration is idempotent.

If ASDL or laplace-torch move these, this file fails first and says what moved.
"""

import asdl.core
import torch
from laplace.baselaplace import KronLaplace

from laplace_equivariance.curvature import RULES, install_kron_initialiser, register_with_asdl
from laplace_equivariance.layers import FactoredInputMap


def test_asdl_internals_exist():
    assert isinstance(asdl.core._supported_module_classes, tuple)
    assert callable(asdl.core.get_op_class)
    assert torch.nn.Linear in asdl.core._supported_module_classes


def test_registration_is_idempotent_and_maps_our_modules_to_our_rules():
    register_with_asdl()
    classes, function = asdl.core._supported_module_classes, asdl.core.get_op_class
    register_with_asdl()
    assert asdl.core._supported_module_classes == classes
    assert asdl.core.get_op_class is function
    for cls in RULES:
        assert cls in classes
    assert asdl.core.get_op_class(FactoredInputMap(1, 1, 2)) is RULES[FactoredInputMap]
    assert asdl.core.get_op_class(torch.nn.Linear(1, 1)).__name__ == "Linear"


def test_kron_initialiser_is_installed_once():
    install_kron_initialiser()
    wrapped = KronLaplace._init_H
    install_kron_initialiser()
    assert KronLaplace._init_H is wrapped
