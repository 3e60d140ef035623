r"""The evidence lower bound of the invariant-weights network (invariant-weights Eqs. 9-10).

.. math::

    \log p(\mathcal D \mid \eta) \ge
    \mathbb E_{q(\theta)} \mathbb E_{T} \Big[\sum_n \log \hat f_{\theta}(x_n; \eta)_{y_n}\Big]
    - \mathrm{KL}(q(\theta) \,\|\, p(\theta))

estimated, as in the paper, with one weight sample (``L = 1``), ``S`` transformation
samples and a mini-batch of ``M`` of the ``N`` examples scaled by ``N / M`` (SGVB).
"""

from __future__ import annotations

import torch
from torch.nn import functional as F

from laplace_equivariance.invariance.network import InvariantWeightsNet
from laplace_equivariance.invariance.variational import VariationalLinear

__all__ = ["elbo"]


def elbo(model: InvariantWeightsNet, x: torch.Tensor, y: torch.Tensor, n_data: int) -> torch.Tensor:
    r"""A one-sample SGVB estimate of the ELBO on all ``n_data`` examples (Eq. 10).

    :math:`\frac{N}{M} \sum_{m=1}^M \log \hat f_\theta(x_m;\eta)_{y_m} - \mathrm{KL}(q\|p)`
    with :math:`\theta \sim q` drawn once (the model must be in training mode).

    Args:
        model: A network with a variational output layer.
        x: ``(M, C, H, W)`` mini-batch.
        y: ``(M,)`` labels.
        n_data: ``N``, the size of the training set.

    Returns:
        The estimate, a scalar (divide by ``N`` for the per-example value the paper reports).

    Raises:
        TypeError: If the model's output layer is not variational.
    """
    if not isinstance(model.output, VariationalLinear):
        raise TypeError("The ELBO needs InvariantWeightsNet(..., variational=True).")
    log_likelihood = -F.cross_entropy(model(x), y, reduction="sum") * (n_data / len(y))
    return log_likelihood - model.output.kl_divergence()
