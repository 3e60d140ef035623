"""Marginal-likelihood training: the trainer, its options, schedule, checkpoints and priors.

``training`` (:func:`~laplace_equivariance.marglik_training`, laplace-torch's drop-in),
``trainer`` (one run's state and epochs), ``options`` (the checked settings), ``schedule``
(which epochs fit; the paper's schedule), ``checkpoint`` (save and resume), ``priors`` (prior
groups per tensor or path), ``factor_balance`` (F-FC factors at the mode of their scale
symmetry), ``chance`` (a classifier that is not learning).
"""
