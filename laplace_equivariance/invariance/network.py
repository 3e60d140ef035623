r"""The shallow network with learned invariant weights (invariant-weights Sec. 3.1-3.4).

.. math::

    \hat f(x; \eta) = \frac1S \sum_{s=1}^S \operatorname{softmax}\big(
        W_2\, \phi((W_1 \circ T_s)\, x + b_1) + b_2\big),
    \qquad T_s \sim p_\eta(T)

(Eqs. 1, 2 and 7), where :math:`W_1 \circ T_s` resamples every row of the first-layer
weight, seen as an image, under the sampled affine map :math:`T_s` (Sec. 3.2): the
transformation acts on the weights, not on the input. Two flavours (Sec. 3.1):

- ``"rff"``: random Fourier features, :math:`W_1 \sim \mathcal{N}(0, \ell^{-2} I)` and
  :math:`b_1 \sim U[0, 2\pi]` fixed, :math:`\phi(a) = \sqrt{2/D} \cos(a)`, so that
  :math:`\phi(x)^\top \phi(x')` approximates an RBF kernel of lengthscale :math:`\ell`.
- ``"relu"``: :math:`W_1` learned (Xavier initialisation), :math:`\phi = \max(0, \cdot)`.

The module returns :math:`\log \hat f`, the log of the averaged class probabilities. They
are valid logits (their softmax is :math:`\hat f` itself), so ``nn.CrossEntropyLoss`` on
them is :math:`-\log \hat f_y`, the likelihood term of the paper's Eq. 9, and laplace-torch
treats them as a classifier's outputs.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
from torch import nn

from laplace_equivariance.invariance.affine import (
    INVARIANCES,
    affine_generators,
    affine_matrices,
    gaussian_blur,
    sample_noise,
    transform_images,
)
from laplace_equivariance.invariance.variational import VariationalLinear

__all__ = ["ACTIVATIONS", "InvariantWeightsNet"]

ACTIVATIONS: tuple[str, ...] = ("rff", "relu")


class InvariantWeightsNet(nn.Module):
    r"""Single-hidden-layer classifier averaged over sampled transformations of its weights.

    Args:
        in_shape: ``(C, H, W)`` of the images.
        n_classes: ``K``.
        width: ``D``, the number of hidden units (the paper uses 1024).
        activation: ``"rff"`` or ``"relu"`` (see the module docstring).
        invariance: Which generators ``eta`` spans: a key of
            :data:`~laplace_equivariance.invariance.affine.INVARIANCES`.
        eta_init: Initial value of every entry of ``eta``. Not 0: at ``eta = 0`` the
            expected gradient in ``eta`` vanishes by the symmetry of the noise.
        n_samples: ``S``, transformations per forward pass (the paper uses 32).
        deterministic: Sample ``epsilon`` on a grid instead of at random (Sec. 3.4).
        blur_sigma: Gaussian blur of the weights before resampling, in pixels (Sec. 4.1).
        rff_lengthscale: :math:`\ell` of the RFF flavour; default ``sqrt(C * H * W)``, which
            gives pre-activations of unit variance on standardised images.
        variational: Use a :class:`VariationalLinear` output layer (for the ELBO) instead of
            ``nn.Linear`` (for MAP and the Laplace marginal likelihood).
        prior_variance: :math:`\alpha` of the variational layer's prior.
        posterior_scale: The variational layer's initial :math:`L_c` is this times ``I``
            (the paper: 1).

    Attributes:
        eta: The invariance parameters, an ``nn.Parameter`` of shape ``(k,)``.
        output: The output layer: ``nn.Linear``, or :class:`VariationalLinear`.

    Shapes:
        - Input: ``(N, C, H, W)``.
        - Output: ``(N, K)``, log class probabilities.
    """

    # buffers; the first layer's are parameters unless activation="rff"
    generators: torch.Tensor
    first_weight: torch.Tensor
    first_bias: torch.Tensor

    def __init__(
        self,
        in_shape: Sequence[int],
        n_classes: int,
        width: int = 1024,
        activation: str = "rff",
        invariance: str = "rotation",
        eta_init: float = 0.1,
        n_samples: int = 32,
        deterministic: bool = False,
        blur_sigma: float = 0.1,
        rff_lengthscale: float | None = None,
        variational: bool = False,
        prior_variance: float = 1.0,
        posterior_scale: float = 1.0,
    ) -> None:
        super().__init__()
        if activation not in ACTIVATIONS:
            raise ValueError(f"activation must be one of {ACTIVATIONS}, got {activation!r}.")
        if invariance not in INVARIANCES:
            raise ValueError(f"invariance must be one of {list(INVARIANCES)}, got {invariance!r}.")
        if len(in_shape) != 3:
            raise ValueError(f"in_shape must be (C, H, W), got {tuple(in_shape)}.")
        self.in_shape = tuple(int(n) for n in in_shape)
        self.activation = activation
        self.invariance = invariance
        self.n_samples = n_samples
        self.deterministic = deterministic
        self.blur_sigma = blur_sigma
        n_inputs = math.prod(self.in_shape)
        generators = affine_generators(INVARIANCES[invariance])
        if deterministic:  # fail at construction if no grid of n_samples points exists
            sample_noise(n_samples, len(generators), deterministic=True)
        self.register_buffer("generators", generators)
        self.eta = nn.Parameter(torch.full((len(generators),), float(eta_init)))
        if activation == "rff":
            lengthscale = math.sqrt(n_inputs) if rff_lengthscale is None else rff_lengthscale
            self.register_buffer("first_weight", torch.randn(width, n_inputs) / lengthscale)
            self.register_buffer("first_bias", 2 * math.pi * torch.rand(width))
        else:
            self.first_weight = nn.Parameter(nn.init.xavier_uniform_(torch.empty(width, n_inputs)))
            self.first_bias = nn.Parameter(torch.zeros(width))
        self.output: VariationalLinear | nn.Linear
        if variational:
            self.output = VariationalLinear(width, n_classes, prior_variance, posterior_scale)
        else:
            self.output = nn.Linear(width, n_classes)
            nn.init.zeros_(self.output.weight)
            nn.init.zeros_(self.output.bias)

    @property
    def width(self) -> int:
        """``D``, the number of hidden units."""
        return self.first_weight.shape[0]

    def weight_parameters(self) -> list[nn.Parameter]:
        """Every trainable parameter except ``eta``."""
        return [p for name, p in self.named_parameters() if name != "eta"]

    def transformations(self, noise: torch.Tensor | None = None) -> torch.Tensor:
        r"""Sample :math:`T_s = \exp(\sum_i \epsilon_{s,i}\eta_i G_i)` (Eq. 3).

        Args:
            noise: :math:`\epsilon` of shape ``(S, k)``; drawn as configured if None.

        Returns:
            ``(S, 3, 3)``.
        """
        if noise is None:
            noise = sample_noise(
                self.n_samples,
                len(self.eta),
                self.deterministic,
                dtype=self.eta.dtype,
                device=self.eta.device,
            )
        return affine_matrices(self.eta, noise, self.generators.to(self.eta.dtype))

    def transformed_weights(self, matrices: torch.Tensor) -> torch.Tensor:
        r""":math:`W_1 \circ T_s` for every sampled ``T_s``, blurred first (Sec. 3.2, 4.1).

        Args:
            matrices: ``(S, 3, 3)``.

        Returns:
            ``(S, D, C * H * W)``.
        """
        images = gaussian_blur(self.first_weight.view(-1, *self.in_shape), self.blur_sigma)
        return transform_images(images, matrices).flatten(2)

    def features(self, x: torch.Tensor, matrices: torch.Tensor | None = None) -> torch.Tensor:
        r"""Hidden features :math:`\phi((W_1 \circ T_s) x + b_1)` for every ``s``.

        Args:
            x: ``(N, C, H, W)``.
            matrices: ``(S, 3, 3)``; sampled if None.

        Returns:
            ``(S, N, D)``.
        """
        if tuple(x.shape[1:]) != self.in_shape:
            raise ValueError(
                f"Expected inputs of shape (N, {self.in_shape}), got {tuple(x.shape)}."
            )
        matrices = self.transformations() if matrices is None else matrices
        weights = self.transformed_weights(matrices)
        pre = torch.einsum("sdi,ni->snd", weights, x.flatten(1)) + self.first_bias
        if self.activation == "rff":
            return math.sqrt(2 / self.width) * torch.cos(pre)
        return torch.relu(pre)

    def forward(self, x: torch.Tensor, matrices: torch.Tensor | None = None) -> torch.Tensor:
        r""":math:`\log \frac1S \sum_s \operatorname{softmax}(W_2 \phi_s + b_2)` (Eqs. 2, 7).

        Args:
            x: ``(N, C, H, W)``.
            matrices: ``(S, 3, 3)`` transformations; sampled if None.

        Returns:
            ``(N, K)`` log class probabilities.
        """
        logits = self.output(self.features(x, matrices))
        n_samples = logits.shape[0]
        return torch.logsumexp(logits.log_softmax(-1), dim=0) - math.log(n_samples)
