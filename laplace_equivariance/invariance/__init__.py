r"""Learned invariant weights: the method of "Learning Invariant Weights in Neural Networks".

A shallow network whose first-layer weights are averaged over affine transformations drawn
from a learned distribution :math:`T = \exp(\sum_i \epsilon_i \eta_i G_i)`
(:mod:`~laplace_equivariance.invariance.affine`, :mod:`~laplace_equivariance.invariance.network`),
learned with the paper's ELBO (:mod:`~laplace_equivariance.invariance.elbo`) or with this
package's Laplace marginal likelihood (:mod:`~laplace_equivariance.invariance.laplace`), see
:func:`~laplace_equivariance.invariance.training.train_invariant_weights`.
"""

from laplace_equivariance.invariance.affine import (
    GENERATOR_NAMES,
    INVARIANCES,
    affine_generators,
    affine_matrices,
    sample_noise,
    transform_images,
)
from laplace_equivariance.invariance.elbo import elbo
from laplace_equivariance.invariance.laplace import log_marginal_likelihood, output_jacobians
from laplace_equivariance.invariance.network import ACTIVATIONS, InvariantWeightsNet
from laplace_equivariance.invariance.training import (
    OBJECTIVES,
    InvarianceHistory,
    train_invariant_weights,
)
from laplace_equivariance.invariance.variational import VariationalLinear

__all__ = [
    "ACTIVATIONS",
    "GENERATOR_NAMES",
    "INVARIANCES",
    "OBJECTIVES",
    "InvarianceHistory",
    "InvariantWeightsNet",
    "VariationalLinear",
    "affine_generators",
    "affine_matrices",
    "elbo",
    "log_marginal_likelihood",
    "output_jacobians",
    "sample_noise",
    "train_invariant_weights",
    "transform_images",
]
