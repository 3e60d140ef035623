r"""S-layer lengthscales as hyperparameters of the KFAC-Laplace marginal likelihood (Eq. 9).

A basis built with ``lengthscale_mode="hyperparameter"`` keeps its ``omega`` outside
``model.parameters()``; it is learned, like the prior precisions, by gradient ascent on

.. math::
    \mathcal{L}(\delta, \omega) = \frac1T \log p(\mathcal{D} \mid \theta_*, \omega)
    - \frac12\Big[\log\det\big(\tfrac1T H(\omega) + \mathrm{diag}(\delta)\big)
    - \log\det \mathrm{diag}(\delta) + \theta_*^\top \mathrm{diag}(\delta)\,\theta_*\Big]

(laplace-torch's ``log_marginal_likelihood`` for classification, ``T`` its temperature, ``H``
the KFAC GGN of :class:`~laplace_equivariance.EquivariantKFAC` at :math:`\theta_*`).
:func:`log_marginal_likelihood` gives its value and one of two gradients in :math:`\omega`
(docs/curvature.md, "Lengthscale hyperparameters"):

- ``derivative="total"`` (default): the derivative of :math:`\mathcal{L}` with the Laplace
  approximation refitted at every :math:`\omega` (weights :math:`\theta_*` fixed, as in
  every marginal-likelihood step). The data fit is differentiated through the forward pass;
  the log-determinant through every Kronecker factor, by the adjoint of the factors:
  :math:`\partial \log\det / \partial F_k` is computed once from the fitted factors (only
  their eigenvalues enter), then each batch's factors are recomputed under autograd
  (:func:`~laplace_equivariance.curvature.differentiable.batch_factors`: all layers' inputs,
  output gradients and the output Hessian depend on :math:`\omega`) and
  :math:`\sum_k \langle \partial \log\det / \partial F_k, \dot F_k \rangle` is
  back-propagated. Cost: one more forward pass and ``K`` backward passes with
  ``create_graph``, plus their backward, per batch. The Laplace approximation must be
  fitted at the current :math:`\omega` (exact GGN, not the Monte-Carlo Fisher).
- ``derivative="partial"``: a cheaper gradient that keeps the data fit and, in the
  curvature, only the factor each basis projects, :math:`F(\omega) = \Phi(\omega)^\top S\,
  \Phi(\omega)` (:mod:`laplace_equivariance.curvature.projection`), holding the statistic
  ``S``, the other factors and every other block at their values from ``la.fit`` (at
  :math:`\omega_0`). Its value at :math:`\omega \neq \omega_0` is that of this partially
  refitted approximation; it needs no refit between steps. On small models it is far from the
  total derivative, even in sign (``benchmarks/lengthscale_gradient.py``).

At the fitted :math:`\omega` both values equal ``la.log_marginal_likelihood``. With a loader
sharded over the ranks of a process group (:mod:`laplace_equivariance.distributed`), the data
fit and the lengthscale gradients are summed over the ranks.
"""

from __future__ import annotations

import functools
import operator
from collections.abc import Sequence

import torch
from laplace.baselaplace import BaseLaplace, KronLaplace
from torch import nn
from torch.func import functional_call
from torch.nn import functional as F
from torch.utils.data import DataLoader

from laplace_equivariance import distributed
from laplace_equivariance.curvature.backend import EquivariantKFAC
from laplace_equivariance.curvature.differentiable import batch_factors
from laplace_equivariance.curvature.fitted import (
    fitted_decomposition,
    fitted_factors,
    kron_factors,
)
from laplace_equivariance.curvature.kron import BlockDiagonalKron
from laplace_equivariance.curvature.projection import reproject
from laplace_equivariance.curvature.registry import likelihood_scale
from laplace_equivariance.layers.sparse import AnchorBasis, LengthscaleMode

__all__ = ["DERIVATIVES", "lengthscale_hyperparameters", "log_marginal_likelihood"]

DERIVATIVES = ("total", "partial")
"""The lengthscale gradients :func:`log_marginal_likelihood` offers."""


def _hyperparameter_bases(model: nn.Module) -> dict[str, AnchorBasis]:
    """Name -> anchor basis whose lengthscale is a hyperparameter, in module order."""
    return {
        name: module
        for name, module in model.named_modules()
        if isinstance(module, AnchorBasis)
        and module.lengthscale_mode is LengthscaleMode.HYPERPARAMETER
    }


def lengthscale_hyperparameters(model: nn.Module) -> dict[str, torch.Tensor]:
    """The model's lengthscale hyperparameters, as leaves that require grad.

    Call it after moving the model to its device and dtype.

    Args:
        model: A network with S-layers.

    Returns:
        Basis name (``"layer1.conv.basis"``) -> its ``omega`` of shape ``(1,)``, for every
        basis in ``"hyperparameter"`` mode (empty if there is none).
    """
    return {
        name: omega
        for name, basis in _hyperparameter_bases(model).items()
        for omega in basis.hyperparameters()
    }


def _log_likelihood(
    model: nn.Module,
    loader: DataLoader,
    lengthscales: Sequence[torch.Tensor],
    scale: torch.Tensor,
) -> torch.Tensor:
    r"""``scale * log p(D | theta*, omega)`` with its exact first derivative in ``lengthscales``.

    Batch by batch, the summed cross-entropy and its gradient with respect to the
    lengthscales that require grad are computed and the batch's graph is freed, so memory
    does not grow with the loader. The result is
    :math:`v + \sum_i g_i(\omega_i - \mathrm{sg}(\omega_i))` with value ``v`` and gradient
    ``g``: value and first derivative are exact, higher derivatives are not available.
    Parameters are detached: no gradient reaches the weights.
    """
    params = {n: p.detach() for n, p in model.named_parameters()}
    first = next(iter(params.values()))
    device = first.device
    tracked = [w for w in lengthscales if w.requires_grad] if torch.is_grad_enabled() else []
    total = torch.zeros((), device=device, dtype=first.dtype)
    grads = [torch.zeros_like(w) for w in tracked]
    for x, y in loader:
        x, y = x.to(device), y.to(device)
        nll = F.cross_entropy(functional_call(model, params, (x,)), y, reduction="sum")
        if tracked:
            batch_grads = torch.autograd.grad(nll, tracked, allow_unused=True)
            for total_grad, grad in zip(grads, batch_grads, strict=True):
                if grad is not None:
                    total_grad += grad
        total = total + nll.detach()
    distributed.all_reduce_sum([total, *grads])  # a sharded loader: sum over the ranks
    return -scale * (total + _linear(grads, tracked))


def _linear(grads: list[torch.Tensor], tracked: Sequence[torch.Tensor]) -> torch.Tensor | float:
    """``sum_i g_i (w_i - sg(w_i))``: value 0, gradient ``g`` (to add a known first derivative).

    The float 0.0 if nothing is tracked.
    """
    return sum(((g * (w - w.detach())).sum() for g, w in zip(grads, tracked, strict=True)), 0.0)


def _log_det_gradient(
    la: KronLaplace, loader: DataLoader, tracked: Sequence[torch.Tensor]
) -> list[torch.Tensor]:
    r"""Total derivative of ``-0.5 log det(posterior precision)`` in ``tracked``, by adjoints.

    :math:`G_k = \partial(-\frac12\log\det(\tfrac1T H + \delta))/\partial F_k` at the
    fitted factors, then :math:`\sum_{\text{batches}} \langle G_k, F_k^{\text{batch}}
    \rangle` back-propagated to ``tracked`` batch by batch (the fitted factors are sums of
    the batches' factors, ``A`` divided by ``N``), so memory does not grow with the loader.
    """
    leaves = [
        [f.detach().requires_grad_(True) for f in group]
        for group in kron_factors(fitted_factors(la))
    ]
    flat = [f for group in leaves for f in group]
    with torch.enable_grad():
        posterior = BlockDiagonalKron(leaves).decompose(damping=la.damping)
        posterior = posterior * likelihood_scale(la) + la.prior_precision.detach()
        adjoints = torch.autograd.grad(-0.5 * posterior.logdet(), flat)
    device = flat[0].device
    grads = [torch.zeros_like(w) for w in tracked]
    for x, _ in loader:
        factors = batch_factors(la.backend, x.to(device), la.n_data)
        batch = [f for group in factors for f in group]
        inner = functools.reduce(
            operator.add, ((g * f).sum() for g, f in zip(adjoints, batch, strict=True))
        )
        batch_grads = torch.autograd.grad(inner, tracked, allow_unused=True)
        for total, grad in zip(grads, batch_grads, strict=True):
            if grad is not None:
                total += grad
    distributed.all_reduce_sum(grads)  # a sharded loader: sum over the ranks
    return grads


def log_marginal_likelihood(
    la: BaseLaplace,
    loader: DataLoader,
    prior_precision: torch.Tensor | None = None,
    derivative: str = "total",
) -> torch.Tensor:
    r"""The Laplace log marginal likelihood, differentiable in the lengthscale hyperparameters.

    The function :math:`\mathcal{L}(\delta, \omega)` of the module docstring: ``backward()``
    gives its gradient with respect to ``prior_precision`` (as laplace-torch's) and to every
    ``omega`` in ``"hyperparameter"`` mode that requires grad, as ``derivative`` says. Without
    such bases the value is ``la.log_marginal_likelihood(prior_precision)``; with them the
    data fit costs one more forward and backward pass over ``loader``, and the total
    derivative the adjoint pass of the module docstring.

    Args:
        la: A ``KronLaplace`` fitted on ``loader`` with
            :class:`~laplace_equivariance.EquivariantKFAC` (classification).
        loader: The batches ``la`` was fitted on.
        prior_precision: As for ``la.log_marginal_likelihood``: replaces ``la``'s.
        derivative: ``"total"`` or ``"partial"`` (:data:`DERIVATIVES`).

    Returns:
        The scalar log marginal likelihood.

    Raises:
        ValueError: If ``la`` is not a fitted classification ``KronLaplace`` with
            ``EquivariantKFAC``, a hyperparameter basis has no projected factor (its module
            was not used in the forward pass, or ``la`` was fitted before the model had that
            basis), ``derivative`` is unknown, or, for ``"total"``, ``la`` uses the
            Monte-Carlo Fisher or was fitted at another ``omega`` than the current one.
    """
    if derivative not in DERIVATIVES:
        raise ValueError(f"derivative must be one of {DERIVATIVES}, got {derivative!r}.")
    if not isinstance(la, KronLaplace) or not isinstance(la.backend, EquivariantKFAC):
        raise ValueError(
            "Lengthscale hyperparameters need Laplace(..., hessian_structure='kron', "
            "backend=EquivariantKFAC)."
        )
    if la.likelihood != "classification":
        raise ValueError("Lengthscale hyperparameters are implemented for classification only.")
    if la.H_facs is None:
        raise ValueError("Fit the Laplace approximation before computing its marginal likelihood.")
    if prior_precision is not None:
        la.prior_precision = prior_precision
    projected = list(la.backend.projected_factors.values())
    covered = {id(record.basis) for record in projected}
    bases = _hyperparameter_bases(la.model)
    missing = [name for name, basis in bases.items() if id(basis) not in covered]
    if missing:
        raise ValueError(
            f"No curvature statistic for the lengthscale hyperparameters of {missing}: fit "
            "the Laplace approximation with EquivariantKFAC on a model that uses them."
        )
    if not bases:
        return la.log_marginal_likelihood()
    scale = likelihood_scale(la)
    lengthscales = [basis.lengthscale for basis in bases.values()]
    log_likelihood = _log_likelihood(la.model, loader, lengthscales, scale)
    if derivative == "partial":
        posterior = reproject(fitted_decomposition(la), projected) * scale + la.prior_precision
        return log_likelihood - 0.5 * (posterior.logdet() - la.log_det_prior_precision + la.scatter)
    if la.backend.stochastic:
        raise ValueError(
            "The total lengthscale derivative needs the exact GGN: fit without stochastic=True "
            "or use derivative='partial'."
        )
    stale = [
        r.basis for r in projected if not torch.equal(r.basis.lengthscale, r.fitted_lengthscale)
    ]
    if stale:
        raise ValueError(
            "The total lengthscale derivative needs the Laplace approximation fitted at the "
            "current lengthscales; call la.fit(loader) again after changing omega (or use "
            "derivative='partial')."
        )
    tracked = [w for w in lengthscales if w.requires_grad] if torch.is_grad_enabled() else []
    log_det = _linear(_log_det_gradient(la, loader, tracked), tracked) if tracked else 0.0
    posterior = fitted_decomposition(la) * scale + la.prior_precision
    fixed = posterior.logdet() - la.log_det_prior_precision + la.scatter
    return log_likelihood - 0.5 * fixed + log_det
