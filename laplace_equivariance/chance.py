"""Whether a classifier learned anything: its accuracy against the best guess without inputs.

A network that ignores its input scores at most the share ``p`` of the most frequent class
in expectation (always answering that class). Its accuracy on ``n`` examples is then a
binomial proportion with standard deviation ``sqrt(p (1 - p) / n)``, so

    at chance  <=>  accuracy <= p + 3 sqrt(p (1 - p) / n)

lets such a network through with probability under about 0.2 % (the normal tail beyond three
standard deviations), while a network that learned anything scores well above it: on ten
balanced classes and 4,000 examples the bound is 11.4 %.
"""

from __future__ import annotations

import math

import torch


class NotLearningWarning(RuntimeWarning):
    """A training run whose accuracy on its own training data is at chance."""


MARGIN_STD = 3.0
"""How many binomial standard deviations above the majority share still count as chance."""


def majority_share(labels: torch.Tensor) -> float:
    """The share of the most frequent class: the accuracy of the best input-free guess.

    Args:
        labels: Class indices, shape ``(N,)``, integer dtype.

    Returns:
        ``max_c #{i: labels[i] = c} / N``.

    Raises:
        ValueError: For labels that are empty or not a 1-d integer tensor.
    """
    if labels.ndim != 1 or labels.numel() == 0 or labels.is_floating_point():
        raise ValueError(
            f"labels must be a non-empty 1-d tensor of class indices, got shape "
            f"{tuple(labels.shape)} and dtype {labels.dtype}; pass the training targets y."
        )
    return torch.bincount(labels.cpu()).max().item() / labels.numel()


def chance_bound(labels: torch.Tensor) -> float:
    """The highest accuracy on ``labels`` that still counts as chance (the module's formula).

    Args:
        labels: Class indices, shape ``(N,)``.

    Returns:
        ``p + MARGIN_STD * sqrt(p (1 - p) / N)`` with ``p`` the :func:`majority_share`.
    """
    p = majority_share(labels)
    return p + MARGIN_STD * math.sqrt(p * (1 - p) / labels.numel())


def at_chance(accuracy: float, labels: torch.Tensor) -> bool:
    """Whether ``accuracy`` on ``labels`` is no better than a guess without inputs.

    Args:
        accuracy: Fraction of ``labels`` predicted right, in ``[0, 1]``.
        labels: Class indices the accuracy was measured on, shape ``(N,)``.

    Returns:
        ``accuracy <= chance_bound(labels)``.
    """
    return accuracy <= chance_bound(labels)


def not_learning_message(accuracy: float, labels: torch.Tensor, when: str) -> str:
    """The warning for a run at chance: what was measured and what to try.

    Args:
        accuracy: The training accuracy measured ``when``.
        labels: The training targets, shape ``(N,)``.
        when: When it was measured, e.g. ``"after epoch 6 (the burn-in's end)"``.

    Returns:
        One paragraph naming the accuracy, the bound and the remedies.
    """
    return (
        f"training accuracy {100 * accuracy:.1f} % {when} is no better than always answering "
        f"the most frequent class ({100 * majority_share(labels):.1f} % of the "
        f"{labels.numel()} training examples; chance up to {100 * chance_bound(labels):.1f} %): "
        "this network is not learning. Try another --seed or --lr (for a relaxed model also "
        "another --start); results.json records it as train_at_chance."
    )
