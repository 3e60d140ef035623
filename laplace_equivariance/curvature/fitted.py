"""laplace-torch's Kronecker objects typed as what they hold, and those of a fitted approximation.

laplace-torch 0.3 annotates ``Kron.kfacs`` as ``list[tuple[Tensor] | Tensor]`` and
``KronDecomposed.eigenvalues`` as ``list[tuple[Tensor]]`` (one-tuples), but builds and reads a
list of one or two tensors per parameter group; and a ``KronLaplace``'s ``H_facs`` and ``H``
are Optional until it is fitted. The functions here give them their true types, for the type
checker, without changing them.
"""

from __future__ import annotations

from typing import cast

import torch
from laplace.baselaplace import KronLaplace
from laplace.utils.matrix import Kron, KronDecomposed

__all__ = [
    "KronFactors",
    "fitted_decomposition",
    "fitted_factors",
    "kron_eigenvalues",
    "kron_factors",
]

KronFactors = list[list[torch.Tensor]]
"""Per parameter group, its one factor or its two ``[B, A]``: what ``Kron.kfacs`` holds."""


def kron_factors(kron: Kron) -> KronFactors:
    """``kron.kfacs``, typed as what it holds: per parameter group a list of one or two factors.

    laplace-torch 0.3 annotates ``Kron.kfacs`` as ``list[tuple[Tensor] | Tensor]`` (a
    one-tuple or a bare tensor per group), but its own ``init_from_model``, ``+`` and ``*``
    build, and all its methods read, a list of one or two factors per group.
    """
    return cast(KronFactors, kron.kfacs)


def kron_eigenvalues(decomposed: KronDecomposed) -> KronFactors:
    """``decomposed.eigenvalues``, typed as what it holds: per group one or two tensors.

    laplace-torch 0.3 annotates ``KronDecomposed.eigenvalues`` as ``list[tuple[Tensor]]``
    (one-tuples), but its ``Kron.decompose`` builds a list of one or two per group.
    """
    return cast(KronFactors, decomposed.eigenvalues)


def fitted_factors(la: KronLaplace) -> Kron:
    """``la.H_facs``, the fitted factors before decomposition.

    Raises:
        AttributeError: laplace-torch's, if ``la`` has not been fitted.
    """
    if la.H_facs is None:
        raise AttributeError("Laplace not fitted. Run fit() first.")
    return la.H_facs


def fitted_decomposition(la: KronLaplace) -> KronDecomposed:
    """``la.H``, the decomposition that ``la.fit`` leaves there.

    Raises:
        AttributeError: laplace-torch's, if ``la`` has not been fitted (its ``H`` is then
            None or the undecomposed ``Kron`` it starts a fit with).
    """
    if not isinstance(la.H, KronDecomposed):
        raise AttributeError("Laplace not fitted. Run fit() first.")
    return la.H
