r"""The Monte-Carlo Fisher with ``S`` sampled targets per example, scaled as an average.

The Monte-Carlo Fisher replaces the output Hessian :math:`\Lambda` of the GGN by outer
products of the loss gradient at targets drawn from the model's own predictive:

.. math::
    \hat F = \frac1S \sum_{s=1}^S J^\top \nabla_f \ell(f, \hat y_s)\,
    \nabla_f \ell(f, \hat y_s)^\top J, \qquad \hat y_s \sim p(y \mid f),

unbiased for the GGN because :math:`\mathbb E_{\hat y}[\nabla_f \ell\, \nabla_f \ell^\top]
= \Lambda` for the categorical likelihood (:math:`\Lambda = \mathrm{diag}(p) - p p^\top`,
:math:`\ell` the negative log-likelihood) and for the Gaussian one (:math:`\ell = \frac12
\|f - y\|^2`, :math:`\hat y \sim \mathcal N(f, \sigma^2 I)`, :math:`\Lambda = \sigma^2 I`,
ASDL's ``var``; laplace-torch's regression uses :math:`\sigma^2 = 1`). KFAC's ``B`` factor
(and every exact block a rule builds from output gradients) is a sum of outer products of
back-propagated gradients, so each of the ``S`` passes back-propagates
:math:`\ell / \sqrt S`. ASDL 0.1a4's makers back-propagate :math:`\ell / S`, which gives
:math:`\hat F / S`: with ``n_mc_samples=16`` their factors come out a sixteenth of the exact
GGN's (``tests/curvature/test_monte_carlo.py`` checks both scalings). With one sample both
are the same pass.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
from asdl.fisher import FisherMCCrossEntropy, FisherMCMSE
from torch.nn import functional as F

from laplace_equivariance.curvature.kron_fisher import KronFisherMaker

__all__ = ["MonteCarloCrossEntropyFisher", "MonteCarloGaussianFisher", "check_sample_count"]


def check_sample_count(n_mc_samples: int, stochastic: bool = True) -> None:
    """Raise unless ``n_mc_samples`` is a sample count that the curvature will use.

    Args:
        n_mc_samples: Targets sampled per example.
        stochastic: Whether the curvature is the Monte-Carlo Fisher (the exact GGN draws
            none, so only ``1`` goes with it).

    Raises:
        ValueError: If ``n_mc_samples`` is not a positive integer, or above one with
            ``stochastic=False``.
    """
    if isinstance(n_mc_samples, bool) or not isinstance(n_mc_samples, int) or n_mc_samples < 1:
        raise ValueError(f"n_mc_samples must be a positive integer, got {n_mc_samples!r}.")
    if n_mc_samples > 1 and not stochastic:
        raise ValueError(
            f"n_mc_samples={n_mc_samples} sets the samples of the Monte-Carlo Fisher: pass "
            "stochastic=True as well (the exact GGN draws no samples)."
        )


def sampled_passes(
    closure,
    n_samples: int,
    sample: Callable[[], torch.Tensor],
    loss: Callable[[torch.Tensor], torch.Tensor],
) -> None:
    """Back-propagate ``loss(targets) / sqrt(n_samples)`` for ``n_samples`` sampled targets.

    Args:
        closure: ASDL's ``closure(loss_expr, retain_graph)``, which runs one backward pass.
        n_samples: ``S >= 1``.
        sample: Draws one set of targets (called without grad).
        loss: The summed loss of the model's output at the given targets.

    Raises:
        ValueError: If ``n_samples`` is not a positive integer.
    """
    check_sample_count(n_samples)
    scale = 1 / math.sqrt(n_samples)
    for i in range(n_samples):
        with torch.no_grad():
            targets = sample()
        closure(lambda t=targets: loss(t) * scale, retain_graph=i < n_samples - 1)


class MonteCarloCrossEntropyFisher(KronFisherMaker, FisherMCCrossEntropy):
    """ASDL's Monte-Carlo Fisher of the cross-entropy, averaged over ``n_mc_samples`` targets.

    Targets are drawn as ASDL draws them (one categorical sample per example and pass), so
    that with one sample the factors equal ASDL's bit for bit.
    """

    def _fisher_loop(self, closure) -> None:
        logits = self._logits
        log_probs = F.log_softmax(logits, dim=-1).view(-1, logits.size(-1))
        # a softmax is a distribution by construction: validating it would read a flag on
        # the host, one GPU synchronisation per batch
        categorical = torch.distributions.Categorical(
            F.softmax(logits.detach(), dim=-1), validate_args=False
        )
        sampled_passes(
            closure,
            self.config.n_mc_samples,
            categorical.sample,
            lambda targets: F.nll_loss(
                log_probs,
                targets.view(-1),
                reduction="sum",
                ignore_index=self.config.ignore_index,
            ),
        )


class MonteCarloGaussianFisher(KronFisherMaker, FisherMCMSE):
    r"""ASDL's Monte-Carlo Fisher of ``0.5 * MSE``, averaged over ``n_mc_samples`` targets.

    Targets are drawn from :math:`\mathcal N(f, \mathrm{var})`, ``var`` from ASDL's config.
    """

    def _fisher_loop(self, closure) -> None:
        logits = self._logits
        normal = torch.distributions.Normal(
            logits.detach(), scale=math.sqrt(self.config.var), validate_args=False
        )
        sampled_passes(
            closure,
            self.config.n_mc_samples,
            normal.sample,
            lambda targets: 0.5 * F.mse_loss(logits, targets, reduction="sum"),
        )
