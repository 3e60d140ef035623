"""Which modules :class:`~laplace_equivariance.curvature.backend.EquivariantKFAC` covers.

Checked when the backend is built, before any curvature is computed: a module with
trainable parameters and no rule would otherwise be left out of the factors silently.
"""

from __future__ import annotations

from torch import nn

from laplace_equivariance.curvature.rules import KFAC_APPROXIMATIONS, RULES
from laplace_equivariance.curvature.rules.normalization import NORMALIZATION_RULES
from laplace_equivariance.layers import AnchorBasis

__all__ = ["UnsupportedModuleError", "check_kfac_approx", "check_supported"]


class UnsupportedModuleError(ValueError):
    """A module has trainable parameters that no KFAC rule covers."""


def check_supported(model: nn.Module) -> None:
    """Raise for any module whose own trainable parameters no rule covers.

    Raises:
        UnsupportedModuleError: Naming the module and what to replace it by.
    """
    for name, module in model.named_modules():
        own = [n for n, p in module.named_parameters(recurse=False) if p.requires_grad]
        if not own or type(module) in RULES or isinstance(module, AnchorBasis):
            continue
        if type(module) in NORMALIZATION_RULES:
            if getattr(module, "track_running_stats", True) is False:
                raise UnsupportedModuleError(
                    f"{type(module).__name__} {name!r} has no running statistics "
                    "(track_running_stats=False): it normalises every batch with the "
                    "batch's own, which couples the examples, so no per-example curvature "
                    "exists. Use GroupNorm or LayerNorm, or track running statistics."
                )
            continue
        if type(module) in (nn.Linear, nn.Conv2d):
            continue
        raise UnsupportedModuleError(
            f"EquivariantKFAC has no KFAC rule for module {name or '<root>'!r} "
            f"({type(module).__name__}) with trainable parameters {own}. Replace it by "
            "a supported layer (laplace_equivariance.layers, nn.Linear, nn.Conv2d, "
            "BatchNorm, GroupNorm, LayerNorm), or freeze its parameters with "
            "requires_grad_(False)."
        )


def check_kfac_approx(model: nn.Module, kfac_approx: str) -> None:
    """Raise if ``kfac_approx`` is unknown.

    Every ruled module, stock ``nn.Conv2d`` included
    (:class:`~laplace_equivariance.curvature.rules.stock_conv.Conv2dRule`), has both.

    Raises:
        ValueError: Naming the choices.
    """
    if kfac_approx not in KFAC_APPROXIMATIONS:
        raise ValueError(f"kfac_approx must be one of {KFAC_APPROXIMATIONS}, got {kfac_approx!r}.")
