"""The one place where this package reaches into its dependencies' internals.

ASDL 0.1a4 has no registration API: which modules it supports is decided by the tuple
``asdl.core._supported_module_classes`` and the function ``asdl.core.get_op_class`` (both
looked up at call time). :func:`register_with_asdl` extends both, idempotently, so that
ASDL's own fisher makers (exact GGN, Monte-Carlo Fisher) run our KFAC rules on our modules.

laplace-torch 0.3's ``KronLaplace._init_H`` pre-allocates dense factors of shape
``[shape[0]^2, prod(shape[1:])^2]`` for every parameter, which for F-FC's block-diagonal
factors is gigabytes. :func:`install_kron_initialiser` wraps it, once, so that a backend with
an ``init_kron`` method (:class:`~laplace_equivariance.EquivariantKFAC`) allocates its own
block-diagonal zeros; every other backend gets laplace-torch's behaviour unchanged.

Both check that the internals they extend exist and raise :class:`RuntimeError` naming the
version otherwise (tests/curvature/test_registry.py fails loudly when they change).
"""

from __future__ import annotations

import functools

import asdl
import asdl.core
from laplace.baselaplace import KronLaplace

from laplace_equivariance.curvature.rules import RULES

__all__ = ["install_kron_initialiser", "register_with_asdl"]

_MARKER = "_laplace_equivariance_wrapper"


def _require(condition: bool, what: str) -> None:
    if not condition:
        raise RuntimeError(
            f"laplace-equivariance needs {what}, which this installation lacks "
            "(tested with asdfghjkl==0.1a4 and laplace-torch==0.3)."
        )


def register_with_asdl() -> None:
    """Make ASDL run :data:`~laplace_equivariance.curvature.rules.RULES` on our modules.

    Idempotent: calling it again changes nothing.

    Raises:
        RuntimeError: If ASDL's registry internals are not where version 0.1a4 has them.
    """
    supported = getattr(asdl.core, "_supported_module_classes", None)
    _require(isinstance(supported, tuple), "asdl.core._supported_module_classes (a tuple)")
    _require(callable(getattr(asdl.core, "get_op_class", None)), "asdl.core.get_op_class")
    missing = tuple(cls for cls in RULES if cls not in supported)
    asdl.core._supported_module_classes = supported + missing
    original = asdl.core.get_op_class
    if getattr(original, _MARKER, False):
        return

    @functools.wraps(original)
    def get_op_class(module):
        rule = RULES.get(type(module))
        return rule if rule is not None else original(module)

    setattr(get_op_class, _MARKER, True)
    asdl.core.get_op_class = get_op_class


def install_kron_initialiser() -> None:
    """Let a backend with ``init_kron`` allocate ``KronLaplace``'s factors. Idempotent.

    Raises:
        RuntimeError: If ``KronLaplace._init_H`` does not exist.
    """
    original = getattr(KronLaplace, "_init_H", None)
    _require(callable(original), "laplace.baselaplace.KronLaplace._init_H")
    if getattr(original, _MARKER, False):
        return

    @functools.wraps(original)
    def _init_H(self) -> None:
        if hasattr(self._backend_cls, "init_kron"):
            self.H = self.backend.init_kron(self._device, self._dtype)
        else:
            original(self)

    setattr(_init_H, _MARKER, True)
    KronLaplace._init_H = _init_H
