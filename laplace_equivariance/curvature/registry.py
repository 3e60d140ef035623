"""The one place where this package reaches into its dependencies' internals.

ASDL 0.1a4 has no registration API: which modules it supports is decided by the tuple
``asdl.core._supported_module_classes`` and the function ``asdl.core.get_op_class`` (both
looked up at call time). :func:`register_with_asdl` extends both, idempotently, so that
ASDL's own fisher makers (exact GGN, Monte-Carlo Fisher) run our KFAC rules on our modules;
:func:`exact_normalization_blocks` extends them for torch's normalisation modules while
:class:`~laplace_equivariance.EquivariantKFAC` computes its factors, and only then, as
:func:`own_convolution_rules` does for the stock convolutions ASDL's ``Conv2d`` rule does not
cover (grouped, dilated, not zero-padded, KFAC-reduce).

laplace-torch 0.3's ``KronLaplace._init_H`` pre-allocates dense factors of shape
``[shape[0]^2, prod(shape[1:])^2]`` for every parameter, which for F-FC's block-diagonal
factors is gigabytes. :func:`install_kron_initialiser` wraps it, once, so that a backend with
an ``init_kron`` method (:class:`~laplace_equivariance.EquivariantKFAC`) allocates its own
block-diagonal zeros; every other backend gets laplace-torch's behaviour unchanged.

``KronLaplace.load_state_dict`` rebuilds laplace-torch's own ``Kron`` and cannot decompose
block-diagonal factors; :func:`install_state_dict_hooks` wraps it and ``state_dict``, once,
so that a backend with ``init_kron`` saves the factors' rows too and reloads them as a
:class:`~laplace_equivariance.curvature.kron.BlockDiagonalKron`.

laplace-torch's GLM predictive builds the ``(n, K, P)`` Jacobians of a whole batch at once
(280 MB per example for Table 1's F-FC+CONV); :func:`install_predictive_chunking` wraps
``ParametricLaplace._glm_predictive_distribution``, once, so that a backend with
``predictive_chunk_size`` is called on chunks of examples that fit its memory limit.

``KronLaplace.fit`` knows neither the statistics of lengthscale hyperparameters nor process
groups; :func:`install_fit_hook` wraps it, once, so that a backend with ``after_fit``
finishes each fit: ``EquivariantKFAC`` combines accumulated fits' statistics
(``override=False``) as laplace-torch combines the factors, and sums a sharded fit over the
ranks (:mod:`laplace_equivariance.distributed`).

laplace-torch builds a Laplace approximation with any backend; on this package's layers only
:class:`~laplace_equivariance.EquivariantKFAC` knows the curvature (ASDL's stock operations,
BackPACK and curvlinops' KFAC do not know the layers; a stock backend would fail deep in a fit
or allocate factors of the wrong shape). :func:`install_construction_check` wraps
``ParametricLaplace.__init__``, once, so that such a mix fails at construction, before any
allocation, naming the module; a backend with a ``vet_laplace`` class method is asked to vet
the approximation instead (``EquivariantKFAC`` refuses a dense Hessian beyond its memory
limit there). Models without this package's layers are untouched.

The few private attributes of laplace-torch's approximations that this package reads are
read here too (:func:`likelihood_scale`, :func:`device_and_dtype`, :func:`require_fitted`),
and ASDL's operation lookup (:func:`operation_of`).

All check that the internals they extend exist and raise :class:`RuntimeError` naming the
version otherwise (tests/curvature/test_registry.py fails loudly when they change).
"""

from __future__ import annotations

import contextlib
import functools
import inspect
from collections.abc import Iterator
from typing import NoReturn

import asdl
import asdl.core
import torch
from asdl.operations import Operation
from laplace.baselaplace import KronLaplace, ParametricLaplace
from laplace.lllaplace import LLLaplace
from torch import nn

from laplace_equivariance.curvature.factor_rows import FactorRows
from laplace_equivariance.curvature.kron import BlockDiagonalKron, BlockDiagonalKronDecomposed
from laplace_equivariance.curvature.rules import RULES
from laplace_equivariance.curvature.rules.normalization import NORMALIZATION_RULES
from laplace_equivariance.curvature.rules.stock_conv import Conv2dRule, asdl_covers
from laplace_equivariance.data.loader_size import counted

__all__ = [
    "UnsupportedBackendError",
    "device_and_dtype",
    "likelihood_scale",
    "operation_of",
    "require_fitted",
    "install_fit_hook",
    "install_construction_check",
    "install_kron_initialiser",
    "install_predictive_chunking",
    "install_state_dict_hooks",
    "own_convolution_rules",
    "register_with_asdl",
]

_MARKER = "_laplace_equivariance_wrapper"


class UnsupportedBackendError(ValueError):
    """A Laplace approximation of this package's layers with a backend that lacks their rules."""


def _missing(what: str) -> NoReturn:
    raise RuntimeError(
        f"laplace-equivariance needs {what}, which this installation lacks "
        "(tested with asdfghjkl==0.1a4 and laplace-torch==0.3)."
    )


def _require(condition: bool, what: str) -> None:
    if not condition:
        _missing(what)


NORMALIZATION_ATTR = "_kfac_exact_normalization"
"""Attribute that marks a normalisation module for its exact-block rule while
:func:`exact_normalization_blocks` is active."""


@contextlib.contextmanager
def exact_normalization_blocks(model: nn.Module) -> Iterator[None]:
    """Let ASDL run this package's normalisation rules on ``model`` inside the block only.

    The rules: :data:`~laplace_equivariance.curvature.rules.normalization.NORMALIZATION_RULES`.

    ASDL has its own operations for BatchNorm and LayerNorm, which laplace-torch's stock
    backends use (``AsdlGGN``'s diagonal, for one); this package's rules must not replace
    them there. Inside the block the modules are marked for :func:`register_with_asdl`'s
    lookup, and ``GroupNorm``, which ASDL does not know, is among its supported classes.
    """
    marked = [m for m in model.modules() if type(m) in NORMALIZATION_RULES]
    supported = asdl.core._supported_module_classes
    missing = tuple(cls for cls in NORMALIZATION_RULES if cls not in supported)
    for module in marked:
        setattr(module, NORMALIZATION_ATTR, True)
    asdl.core._supported_module_classes = supported + missing
    try:
        yield
    finally:
        asdl.core._supported_module_classes = supported
        for module in marked:
            module.__dict__.pop(NORMALIZATION_ATTR, None)


OWN_CONV_ATTR = "_kfac_own_conv_rule"
"""Attribute that marks a stock ``nn.Conv2d`` for this package's rule, where ASDL's does not
cover it, while :func:`own_convolution_rules` is active."""


@contextlib.contextmanager
def own_convolution_rules(model: nn.Module) -> Iterator[None]:
    """Let ASDL run this package's rule on the stock convolutions its own does not cover.

    Inside the block :class:`~laplace_equivariance.curvature.rules.stock_conv.Conv2dRule`
    covers every stock ``nn.Conv2d`` of ``model`` that ASDL's ``Conv2d`` rule does not
    (:func:`~laplace_equivariance.curvature.rules.stock_conv.asdl_covers`: grouped, dilated,
    not zero-padded, or KFAC-reduce; decided at lookup, so enter it inside
    :func:`~laplace_equivariance.curvature.rules.kfac_approximation`).

    Only :class:`~laplace_equivariance.EquivariantKFAC` enters it: laplace-torch's stock
    backends keep ASDL's operations, as with :func:`exact_normalization_blocks`.
    """
    marked = [m for m in model.modules() if type(m) is nn.Conv2d]
    for module in marked:
        setattr(module, OWN_CONV_ATTR, True)
    try:
        yield
    finally:
        for module in marked:
            module.__dict__.pop(OWN_CONV_ATTR, None)


def register_with_asdl() -> None:
    """Make ASDL run :data:`~laplace_equivariance.curvature.rules.RULES` on our modules.

    Idempotent: calling it again changes nothing.

    Raises:
        RuntimeError: If ASDL's registry internals are not where version 0.1a4 has them.
    """
    supported = getattr(asdl.core, "_supported_module_classes", None)
    if not isinstance(supported, tuple):
        _missing("asdl.core._supported_module_classes (a tuple)")
    _require(callable(getattr(asdl.core, "get_op_class", None)), "asdl.core.get_op_class")
    missing = tuple(cls for cls in RULES if cls not in supported)
    asdl.core._supported_module_classes = supported + missing
    original = asdl.core.get_op_class
    if getattr(original, _MARKER, False):
        return

    @functools.wraps(original)
    def get_op_class(module):
        rule = RULES.get(type(module))
        if rule is None and module.__dict__.get(NORMALIZATION_ATTR, False):
            rule = NORMALIZATION_RULES[type(module)]
        if rule is None and module.__dict__.get(OWN_CONV_ATTR, False) and not asdl_covers(module):
            rule = Conv2dRule
        return rule if rule is not None else original(module)

    setattr(get_op_class, _MARKER, True)
    asdl.core.get_op_class = get_op_class


def likelihood_scale(la) -> torch.Tensor:
    """laplace-torch's factor on the curvature, ``1 / (sigma^2 T)`` (``la._H_factor``)."""
    return la._H_factor


def device_and_dtype(la) -> tuple[torch.device, torch.dtype]:
    """The device and dtype laplace-torch allocates the approximation with."""
    return la._device, la._dtype


def require_fitted(la) -> None:
    """Raise laplace-torch's ``AttributeError`` if ``la`` has not been fitted."""
    la._check_H_init()


def operation_of(module: nn.Module) -> type[Operation]:
    """The ASDL operation class (KFAC rule) that covers ``module`` in this package's fits."""
    if type(module) is nn.Conv2d and not asdl_covers(module):
        return Conv2dRule
    rule = NORMALIZATION_RULES.get(type(module))
    return rule if rule is not None else asdl.core.get_op_class(module)


def _wrap_once(owner: type, attribute: str, make_wrapper) -> None:
    """Replace ``owner.attribute`` by ``make_wrapper(original)``, unless already wrapped.

    Raises:
        RuntimeError: If ``owner`` has no callable ``attribute``.
    """
    original = getattr(owner, attribute, None)
    if not callable(original):
        _missing(f"{owner.__module__}.{owner.__qualname__}.{attribute}")
    if getattr(original, _MARKER, False):
        return
    wrapper = functools.wraps(original)(make_wrapper(original))
    setattr(wrapper, _MARKER, True)
    setattr(owner, attribute, wrapper)


def install_kron_initialiser() -> None:
    """Let a backend with ``init_kron`` allocate ``KronLaplace``'s factors. Idempotent.

    Raises:
        RuntimeError: If ``KronLaplace._init_H`` does not exist.
    """

    def make_wrapper(original):
        def _init_H(self) -> None:
            if hasattr(self._backend_cls, "init_kron"):
                self.H = self.backend.init_kron(self._device, self._dtype)
            else:
                original(self)

        return _init_H

    _wrap_once(KronLaplace, "_init_H", make_wrapper)


def install_state_dict_hooks() -> None:
    """Let ``KronLaplace`` with a backend that has ``init_kron`` save and reload its factors.

    ``state_dict()`` adds ``"H_rows"``: per group and factor, the row chunks of a
    block-diagonal factor fitted on fewer examples than its block size (else None), so the
    reloaded decomposition has the same eigenvalues (exact zeros included) and hence the
    same marginal likelihood. ``load_state_dict`` restores the factors as a
    :class:`~laplace_equivariance.curvature.kron.BlockDiagonalKron` and decomposes them;
    other backends get laplace-torch's behaviour unchanged. Idempotent.

    Raises:
        RuntimeError: If ``KronLaplace.state_dict`` or ``load_state_dict`` does not exist.
    """

    def make_saver(original):
        def state_dict(self) -> dict:
            state = original(self)
            if hasattr(self._backend_cls, "init_kron") and isinstance(
                self.H_facs, BlockDiagonalKron
            ):
                state["H_rows"] = [
                    [None if r is None else list(r.chunks) for r in group]
                    for group in self.H_facs._valid_rows()
                ]
            return state

        return state_dict

    def make_loader(original):
        def load_state_dict(self, state_dict: dict) -> None:
            if not hasattr(self._backend_cls, "init_kron"):
                return original(self, state_dict)
            ParametricLaplace.load_state_dict(self, state_dict)
            kfacs = state_dict["H"]
            saved_rows = state_dict.get("H_rows") or [[None] * len(g) for g in kfacs]
            rows = [
                [
                    None if chunks is None else FactorRows(tuple(chunks), factor._version)
                    for factor, chunks in zip(group, group_rows, strict=True)
                ]
                for group, group_rows in zip(kfacs, saved_rows, strict=True)
            ]
            self.H_facs = BlockDiagonalKron(kfacs, rows, self.backend.host_eigenvalues)
            self.H = self.H_facs.decompose(damping=self.damping)
            return None

        return load_state_dict

    _wrap_once(KronLaplace, "state_dict", make_saver)
    _wrap_once(KronLaplace, "load_state_dict", make_loader)


def _by_parameter_tensor(la) -> bool:
    """Whether ``la``'s GLM variance can come from Jacobians split by parameter tensor."""
    return (
        isinstance(la, KronLaplace)
        and not isinstance(la, LLLaplace)
        and hasattr(la.backend, "parameter_jacobians")
        and la.backend.subnetwork_indices is None
        and isinstance(la.H, BlockDiagonalKronDecomposed)
    )


@torch.enable_grad()
def _glm_by_parameter_tensor(la, X: torch.Tensor, diagonal_output: bool):
    """laplace-torch's GLM mean and variance, from Jacobians per parameter tensor.

    ``KronLaplace.functional_variance(Js)`` is ``posterior_precision.inv_square_form(Js)``;
    here the same form takes the Jacobians split by parameter tensor (one Kron group each),
    F-FC maps' weights as outer products, so neither the ``(N, K, P)`` concatenation nor
    those weights' Jacobians are ever built.
    """
    Js, f_mu = la.backend.parameter_jacobians(
        X, enable_backprop=la.enable_backprop, outer_products=True
    )
    f_var = la.posterior_precision.inv_square_form(Js)
    if diagonal_output:
        f_var = torch.diagonal(f_var, dim1=-2, dim2=-1)
    return (f_mu, f_var) if la.enable_backprop else (f_mu.detach(), f_var.detach())


def install_predictive_chunking() -> None:
    """Let a backend with ``predictive_chunk_size`` bound the GLM predictive's memory.

    The mean and (per example) covariance of the GLM predictive are computed example by
    example, so chunks of examples concatenate to the whole batch's result; the joint
    predictive (``joint=True``, covariances between examples) and dict inputs are left to
    laplace-torch. A fitted Kron approximation of all weights whose backend gives
    ``parameter_jacobians`` takes them split by parameter tensor
    (:func:`_glm_by_parameter_tensor`). Idempotent.

    Raises:
        RuntimeError: If ``ParametricLaplace._glm_predictive_distribution`` does not exist.
    """

    def make_wrapper(original):
        def _glm_predictive_distribution(self, X, joint=False, diagonal_output=False):
            chunk_size = getattr(self.backend, "predictive_chunk_size", None)
            if joint or chunk_size is None or not isinstance(X, torch.Tensor):
                return original(self, X, joint=joint, diagonal_output=diagonal_output)
            if _by_parameter_tensor(self):
                predict = functools.partial(_glm_by_parameter_tensor, self)
            else:
                predict = functools.partial(original, self)
            parts = [
                predict(chunk, diagonal_output=diagonal_output) for chunk in X.split(chunk_size(X))
            ]
            return torch.cat([mean for mean, _ in parts]), torch.cat([var for _, var in parts])

        return _glm_predictive_distribution

    _wrap_once(ParametricLaplace, "_glm_predictive_distribution", make_wrapper)


def install_fit_hook() -> None:
    """Let a backend with ``after_fit`` finish every ``KronLaplace.fit``. Idempotent.

    The backend's ``after_fit(la, previous, n_new)`` runs after laplace-torch's fit, with
    ``previous`` the backend's projected statistics and example count of the earlier fit(s)
    when the fit accumulates (``override=False``), else None. An empty loader is refused
    before laplace-torch's fit (which would raise a bare ``StopIteration``), and a loader
    that yields fewer examples than its data set holds (a sampler over some of them) is
    fitted with ``N`` its example count (:func:`~laplace_equivariance.data.loader_size.counted`),
    not ``len(loader.dataset)``. A backend with ``fit_loader(loader, device)`` chooses the
    batches of the curvature passes (``EquivariantKFAC``: several of the loader's at once
    on a GPU, :mod:`~laplace_equivariance.curvature.fit_passes`).

    Raises:
        RuntimeError: If ``KronLaplace.fit`` does not exist.
    """

    def make_wrapper(original):
        def fit(self, train_loader, override: bool = True, progress_bar: bool = False) -> None:
            if not hasattr(self._backend_cls, "after_fit"):
                return original(self, train_loader, override=override, progress_bar=progress_bar)
            if len(train_loader.dataset) == 0 or len(train_loader) == 0:
                raise ValueError(
                    f"Laplace.fit got an empty loader ({len(train_loader.dataset)} examples, "
                    f"{len(train_loader)} batches): give it the training data."
                )
            train_loader = counted(train_loader)  # N: the examples it yields (a sampler's)
            if hasattr(self.backend, "fit_loader"):
                train_loader = self.backend.fit_loader(train_loader, self._device)
            accumulates = not override and getattr(self, "H_facs", None) is not None
            previous = (self.backend.projected_factors, self.n_data) if accumulates else None
            original(self, train_loader, override=override, progress_bar=progress_bar)
            self.backend.after_fit(self, previous, len(train_loader.dataset))
            return None

        return fit

    _wrap_once(KronLaplace, "fit", make_wrapper)


def first_module_with_rule(model: nn.Module) -> tuple[str, nn.Module] | None:
    """The first module of ``model`` that has trainable parameters and a rule of this package.

    Args:
        model: Any network.

    Returns:
        ``(name, module)``, or None for a model of stock layers only.
    """
    for name, module in model.named_modules():
        if type(module) in RULES and any(p.requires_grad for p in module.parameters()):
            return name, module
    return None


def _refuse_stock_backend(model: nn.Module, backend: type | None) -> None:
    """Raise :class:`UnsupportedBackendError` if ``model`` has layers ``backend`` cannot do."""
    found = first_module_with_rule(model)
    if found is None:
        return
    name, module = found
    backend_name = "laplace-torch's default" if backend is None else backend.__name__
    raise UnsupportedBackendError(
        f"Module {name!r} ({type(module).__name__}) is a laplace-equivariance layer, whose "
        f"curvature the {backend_name} backend does not know: pass backend=EquivariantKFAC "
        "(from laplace_equivariance); it gives the 'kron', 'diag' and 'full' structures."
    )


def install_construction_check() -> None:
    """Make ``Laplace(...)`` on this package's layers refuse a backend without their rules.

    Idempotent. Last-layer approximations are left alone (their backend sees a stock head).

    Raises:
        RuntimeError: If ``ParametricLaplace.__init__`` does not exist.
    """

    def make_wrapper(original):
        signature = inspect.signature(original)

        def __init__(self, model, likelihood, *args, **kwargs) -> None:
            if not isinstance(self, LLLaplace):
                arguments = signature.bind(self, model, likelihood, *args, **kwargs).arguments
                backend = arguments.get("backend")
                vet = getattr(backend, "vet_laplace", None)
                if vet is None:
                    _refuse_stock_backend(model, backend)
                else:
                    vet(self, model, arguments.get("backend_kwargs") or {})
            original(self, model, likelihood, *args, **kwargs)

        return __init__

    _wrap_once(ParametricLaplace, "__init__", make_wrapper)
