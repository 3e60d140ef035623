r"""Gaussian variational output layer of the invariant-weights network (invariant-weights Sec. 3.7).

Each class ``c`` has its own block :math:`\theta_c = (W_c, b_c) \in \mathbb{R}^{D+1}` with
:math:`q(\theta_c) = \mathcal{N}(\mu_c, L_c L_c^\top)` and prior
:math:`p(\theta_c) = \mathcal{N}(0, \alpha I)`. The paper initialises :math:`\mu_c = 0` and
:math:`L_c = I`.
"""

from __future__ import annotations

import math

import torch
from torch import nn

__all__ = ["VariationalLinear"]


class VariationalLinear(nn.Module):
    r"""A linear layer whose weights are drawn from a per-class Gaussian (one sample a call).

    In training mode every call draws one :math:`\theta = \mu + L \epsilon` (the
    reparameterisation trick, ``L = 1`` in the paper's Eq. 10) shared by the whole input; in
    eval mode it uses the mean :math:`\mu`.

    Args:
        in_features: ``D``.
        out_features: ``K``, the number of classes (one covariance block each).
        prior_variance: :math:`\alpha`.
        init_scale: The initial :math:`L_c = \text{init\_scale} \cdot I`.

    Shapes:
        - Input: ``(*, D)``.
        - Output: ``(*, K)``.
    """

    def __init__(
        self,
        in_features: int,
        out_features: int,
        prior_variance: float = 1.0,
        init_scale: float = 1.0,
    ) -> None:
        super().__init__()
        if prior_variance <= 0:
            raise ValueError(f"prior_variance must be positive, got {prior_variance}.")
        self.in_features = in_features
        self.out_features = out_features
        self.prior_variance = prior_variance
        self.mean = nn.Parameter(torch.zeros(out_features, in_features + 1))
        eye = torch.eye(in_features + 1).expand(out_features, -1, -1)
        self.scale_tril = nn.Parameter(init_scale * eye.clone())

    def cholesky(self) -> torch.Tensor:
        """The lower-triangular factors ``L``, shape ``(K, D + 1, D + 1)``."""
        return torch.tril(self.scale_tril)

    def sample(self, generator: torch.Generator | None = None) -> torch.Tensor:
        r"""Draw :math:`\theta = \mu + L \epsilon`, :math:`\epsilon \sim \mathcal{N}(0, I)`.

        Args:
            generator: Random generator of ``epsilon``, on the layer's device.

        Returns:
            Weights and biases as one tensor of shape ``(K, D + 1)``, bias last.
        """
        noise = torch.randn(
            self.mean.shape, generator=generator, dtype=self.mean.dtype, device=self.mean.device
        )
        return self.mean + torch.einsum("kij,kj->ki", self.cholesky(), noise)

    def kl_divergence(self) -> torch.Tensor:
        r""":math:`\mathrm{KL}(q \,\|\, p)` in closed form, summed over the ``K`` blocks.

        Per block of size ``P = D + 1``:
        :math:`\frac12 [\operatorname{tr}(LL^\top)/\alpha + \mu^\top\mu/\alpha - P
        + P \log\alpha - 2 \sum_i \log|L_{ii}|]`.

        Returns:
            A scalar.
        """
        tril = self.cholesky()
        size = self.in_features + 1
        trace = tril.pow(2).sum() / self.prior_variance
        mahalanobis = self.mean.pow(2).sum() / self.prior_variance
        log_det_q = 2 * tril.diagonal(dim1=-2, dim2=-1).abs().log().sum()
        log_det_p = self.out_features * size * math.log(self.prior_variance)
        return 0.5 * (trace + mahalanobis - self.out_features * size + log_det_p - log_det_q)

    def forward(self, features: torch.Tensor, weights: torch.Tensor | None = None) -> torch.Tensor:
        """Apply a sampled (training) or the mean (eval) weight, or the given ``weights``.

        Args:
            features: ``(*, D)``.
            weights: Optional ``(K, D + 1)`` weights to use instead.

        Returns:
            ``(*, K)``.
        """
        if weights is None:
            weights = self.sample() if self.training else self.mean
        return features @ weights[:, :-1].T + weights[:, -1]
