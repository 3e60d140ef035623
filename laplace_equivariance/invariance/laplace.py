r"""Laplace marginal likelihood of the invariant-weights network, differentiable in ``eta``.

Beyond the invariant-weights paper, which bounds the marginal likelihood variationally, this
integrates out the same parameters (the output layer
:math:`\theta = (\operatorname{vec} W_2, b_2) \in \mathbb R^P`, ``P = K (D + 1)``) with a
Laplace approximation around the current weights, using the *full* GGN of this small layer:

.. math::

    \log p(\mathcal D \mid \eta, \delta) \approx
    \tau \sum_n \log \hat f(x_n)_{y_n} - \tfrac{\delta}{2} \lVert\theta\rVert^2
    - \tfrac12 \log\det(\tau H + \delta I) + \tfrac{P}{2} \log \delta,
    \qquad H = \sum_n J_n^\top \Lambda_n J_n,

the layer-wise paper's Eq. 9 with one scalar prior precision :math:`\delta`, where
:math:`J_n = \partial \log \hat f(x_n) / \partial \theta` (``K x P``),
:math:`\Lambda_n = \operatorname{diag}(\hat f_n) - \hat f_n \hat f_n^\top` and
:math:`\tau = N / n` rescales a subset of ``n`` of the ``N`` examples (laplace-torch's
``temperature = n / N``). It equals laplace-torch's ``FullLaplace.log_marginal_likelihood``
on the output layer and, unlike it, keeps the graph to ``eta``: the data fit and the GGN both
depend on ``eta`` through the resampled first-layer weights.

The Jacobian is analytic. With :math:`z_s = W_2 \tilde h_s` (:math:`\tilde h_s` the features
with a 1 appended for the bias), :math:`p_s = \operatorname{softmax}(z_s)` and
:math:`\hat f = \frac1S \sum_s p_s`,

.. math::

    \frac{\partial \log \hat f_k}{\partial (W_2)_{jd}}
    = \sum_s \frac{p_{s,k} (\delta_{kj} - p_{s,j})}{S \hat f_k} \tilde h_{s,d}.

The log-determinant is taken on the smaller side: in parameter space (``P x P``), or, when
``nK < P``, through :math:`\det(I_P + A^\top B) = \det(I_{nK} + B A^\top)` on the
``nK x nK`` matrix :math:`I + \frac{\tau}{\delta} \Lambda J J^\top` (both exact).
"""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F
from torch.utils.data import DataLoader

from laplace_equivariance.invariance.network import InvariantWeightsNet

__all__ = ["log_marginal_likelihood", "output_jacobians"]


def point_output(model: InvariantWeightsNet) -> nn.Linear:
    """The network's output layer, which the Laplace objective needs to be a point estimate.

    Raises:
        TypeError: If the output layer is not ``nn.Linear`` (a variational one).
    """
    if not isinstance(model.output, nn.Linear):
        raise TypeError(
            "The Laplace marginal likelihood needs InvariantWeightsNet(variational=False)."
        )
    return model.output


def output_jacobians(
    model: InvariantWeightsNet, x: torch.Tensor, matrices: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    r"""Outputs :math:`\log \hat f` and their Jacobians in the output layer's parameters.

    Args:
        model: A network with an ``nn.Linear`` output layer.
        x: ``(N, C, H, W)``.
        matrices: ``(S, 3, 3)`` transformations, shared by all examples.

    Returns:
        ``(log_probs, jacobians)`` of shapes ``(N, K)`` and ``(N, K, P)``; the parameter
        order is laplace-torch's: ``W_2`` row-major, then ``b_2``.

    Raises:
        TypeError: If the output layer is not ``nn.Linear``.
    """
    output = point_output(model)
    features = model.features(x, matrices)
    probs = output(features).softmax(-1)
    mean_probs = probs.mean(0)
    n_samples, n_classes = probs.shape[0], probs.shape[-1]
    eye = torch.eye(n_classes, dtype=probs.dtype, device=probs.device)
    sensitivity = probs[..., :, None] * (eye - probs[..., None, :])
    sensitivity = sensitivity / (n_samples * mean_probs[None, :, :, None])
    weight_part = torch.einsum("snkj,snd->nkjd", sensitivity, features).flatten(2)
    bias_part = sensitivity.sum(0)
    return mean_probs.log(), torch.cat([weight_part, bias_part], dim=-1)


def _log_det_ratio(
    jacobians: torch.Tensor, log_probs: torch.Tensor, scale: torch.Tensor
) -> torch.Tensor:
    r""":math:`\log\det(I + s\, J^\top \Lambda J)` on the smaller side, ``s = tau / delta``."""
    n_data, n_classes, n_params = jacobians.shape
    probs = log_probs.exp()
    hessians = torch.diag_embed(probs) - probs[:, :, None] * probs[:, None, :]
    if n_data * n_classes < n_params:
        flat = jacobians.reshape(n_data * n_classes, n_params)
        gram = (flat @ flat.T).view(n_data, n_classes, n_data, n_classes)
        product = torch.einsum("nkl,nlmj->nkmj", hessians, gram).reshape(flat.shape[0], -1)
        identity = torch.eye(flat.shape[0], dtype=flat.dtype, device=flat.device)
        return torch.linalg.slogdet(identity + scale * product).logabsdet
    ggn = torch.einsum("nkp,nkl,nlq->pq", jacobians, hessians, jacobians)
    identity = torch.eye(n_params, dtype=ggn.dtype, device=ggn.device)
    return 2 * torch.linalg.cholesky(identity + scale * ggn).diagonal().log().sum()


def log_marginal_likelihood(
    model: InvariantWeightsNet,
    loader: DataLoader,
    prior_precision: torch.Tensor,
    n_data: int | None = None,
    matrices: torch.Tensor | None = None,
) -> torch.Tensor:
    r"""Laplace log marginal likelihood over the output layer, full GGN (module docstring).

    Differentiable in ``model.eta`` (and the first-layer weights) and in
    ``prior_precision``; the output layer is the expansion point :math:`\theta_*`.

    Args:
        model: A network with an ``nn.Linear`` output layer.
        loader: The ``n`` examples the marginal likelihood is computed on.
        prior_precision: :math:`\delta`, a positive scalar tensor.
        n_data: ``N``, the size of the training set (default ``n``): the data fit and the
            GGN are scaled by ``N / n``.
        matrices: ``(S, 3, 3)`` transformations; one draw shared by every batch if None.

    Returns:
        A scalar tensor.

    Raises:
        FloatingPointError: If the result is not finite.
    """
    matrices = model.transformations() if matrices is None else matrices
    log_likelihood: torch.Tensor | float = 0.0
    all_log_probs, all_jacobians = [], []
    for x, y in loader:
        x, y = x.to(model.eta.device), y.to(model.eta.device)
        log_probs, jacobians = output_jacobians(model, x, matrices)
        log_likelihood = log_likelihood - F.nll_loss(log_probs, y, reduction="sum")
        all_log_probs.append(log_probs)
        all_jacobians.append(jacobians)
    log_probs, jacobians = torch.cat(all_log_probs), torch.cat(all_jacobians)
    n_subset = len(log_probs)
    scale = (n_data or n_subset) / n_subset
    output = point_output(model)
    theta = torch.cat([output.weight.flatten(), output.bias])
    log_det_ratio = _log_det_ratio(jacobians, log_probs, scale / prior_precision)
    value = scale * log_likelihood - 0.5 * (log_det_ratio + prior_precision * theta.pow(2).sum())
    if not torch.isfinite(value):
        raise FloatingPointError(
            f"Non-finite Laplace log marginal likelihood {value.item()} (eta = "
            f"{model.eta.tolist()}, prior precision {float(prior_precision)})."
        )
    return value
