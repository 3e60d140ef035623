r"""S-layer lengthscales as hyperparameters of the KFAC-Laplace marginal likelihood (Eq. 9).

A basis built with ``lengthscale_mode="hyperparameter"`` keeps its ``omega`` outside
``model.parameters()``; it is learned, like the prior precisions, by gradient ascent on

.. math::
    \mathcal{L}(\delta, \omega) = \frac1T \log p(\mathcal{D} \mid \theta_*, \omega)
    - \frac12\Big[\log\det\big(\tfrac1T H(\omega) + \mathrm{diag}(\delta)\big)
    - \log\det \mathrm{diag}(\delta) + \theta_*^\top \mathrm{diag}(\delta)\,\theta_*\Big]

(laplace-torch's ``log_marginal_likelihood`` for classification, ``T`` its temperature),
where **exactly these dependencies on omega are kept** (docs/curvature.md, "Lengthscale
hyperparameters"):

- the data fit :math:`\log p(\mathcal{D} \mid \theta_*, \omega) = -\sum_n \mathrm{CE}(f(x_n;
  \theta_*, \omega), y_n)`, through the forward pass (the induced weights depend on omega);
- in the curvature, the Kronecker factor that each hyperparameter basis projects,
  :math:`F(\omega) = \Phi(\omega)^\top S\, \Phi(\omega)`
  (:mod:`laplace_equivariance.curvature.projection`), through its eigenvalues.

Held fixed at their values from ``la.fit`` (at :math:`\omega_0`): the statistics ``S`` (the
layer inputs and output gradients they are built from depend on omega through the network;
laplace-torch likewise holds the curvature fixed in :math:`\theta_*`), the other factor of the
same weight, every other parameter's block (including the exact blocks of the basis's own
anchor positions) and :math:`\theta_*`. At :math:`\omega = \omega_0` the value equals
``la.log_marginal_likelihood``.

This is not the total derivative of the marginal likelihood of a Laplace approximation
refitted at every omega: the held-fixed dependencies (other layers' activations, output
gradients and output Hessians in their factors) are measured to be as large as the kept
ones on small models (docs/curvature.md; ``benchmarks/lengthscale_gradient.py``).
"""

from __future__ import annotations

import torch
from laplace.baselaplace import KronLaplace
from torch import nn
from torch.func import functional_call
from torch.nn import functional as F
from torch.utils.data import DataLoader

from laplace_equivariance.curvature import EquivariantKFAC
from laplace_equivariance.curvature.projection import reproject
from laplace_equivariance.layers.sparse import AnchorBasis, LengthscaleMode

__all__ = ["lengthscale_hyperparameters", "log_marginal_likelihood"]


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
    model: nn.Module, loader: DataLoader, lengthscales: list[torch.Tensor], scale: torch.Tensor
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
    linear = sum(((g * (w - w.detach())).sum() for g, w in zip(grads, tracked, strict=True)), 0.0)
    return -scale * (total + linear)


def log_marginal_likelihood(
    la: KronLaplace, loader: DataLoader, prior_precision: torch.Tensor | None = None
) -> torch.Tensor:
    r"""The Laplace log marginal likelihood, differentiable in the lengthscale hyperparameters.

    The function :math:`\mathcal{L}(\delta, \omega)` of the module docstring: ``backward()``
    gives its gradient with respect to ``prior_precision`` (as laplace-torch's) and to every
    ``omega`` in ``"hyperparameter"`` mode that requires grad. Only the hyperparameter bases'
    projected factors are eigendecomposed again; the data fit is one more forward and
    backward pass over ``loader`` (only when the model has such bases; otherwise the value is
    ``la.log_marginal_likelihood(prior_precision)``).

    Args:
        la: A ``KronLaplace`` fitted on ``loader`` with
            :class:`~laplace_equivariance.EquivariantKFAC` (classification).
        loader: The batches ``la`` was fitted on.
        prior_precision: As for ``la.log_marginal_likelihood``: replaces ``la``'s.

    Returns:
        The scalar log marginal likelihood.

    Raises:
        ValueError: If ``la`` is not a fitted classification ``KronLaplace`` with
            ``EquivariantKFAC``, or a hyperparameter basis has no projected factor (its
            module was not used in the forward pass, or ``la`` was fitted before the model
            had that basis).
    """
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
    scale = 1 / la.sigma_noise.square() / la.temperature  # laplace-torch's Hessian factor
    if bases:
        lengthscales = [basis.lengthscale for basis in bases.values()]
        log_likelihood = _log_likelihood(la.model, loader, lengthscales, scale)
    else:
        log_likelihood = la.log_likelihood
    posterior = reproject(la.H, projected) * scale + la.prior_precision
    return log_likelihood - 0.5 * (posterior.logdet() - la.log_det_prior_precision + la.scatter)
