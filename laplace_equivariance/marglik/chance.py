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


def class_counts(labels: torch.Tensor) -> torch.Tensor:
    """How often each class occurs.

    Args:
        labels: Class indices, shape ``(N,)``, integer dtype.

    Returns:
        ``counts[c] = #{i: labels[i] = c}``, shape ``(max(labels) + 1,)``, on the CPU.

    Raises:
        ValueError: For labels that are empty or not a 1-d integer tensor.
    """
    if labels.ndim != 1 or labels.numel() == 0 or labels.is_floating_point():
        raise ValueError(
            f"labels must be a non-empty 1-d tensor of class indices, got shape "
            f"{tuple(labels.shape)} and dtype {labels.dtype}; pass the training targets y."
        )
    return torch.bincount(labels.cpu())


def majority_share(counts: torch.Tensor) -> float:
    """The share of the most frequent class: the accuracy of the best input-free guess.

    Args:
        counts: Examples per class, shape ``(C,)`` (:func:`class_counts`).

    Returns:
        ``max_c counts[c] / sum_c counts[c]``.
    """
    return counts.max().item() / counts.sum().item()


def chance_bound(counts: torch.Tensor) -> float:
    """The highest accuracy that still counts as chance (the module's formula).

    Args:
        counts: Examples per class of the labels the accuracy is measured on, shape ``(C,)``.

    Returns:
        ``p + MARGIN_STD * sqrt(p (1 - p) / N)`` with ``p`` the :func:`majority_share` and
        ``N = sum(counts)``.
    """
    p = majority_share(counts)
    return p + MARGIN_STD * math.sqrt(p * (1 - p) / counts.sum().item())


def at_chance(accuracy: float, counts: torch.Tensor) -> bool:
    """Whether ``accuracy`` is no better than a guess without inputs.

    Args:
        accuracy: Fraction of the examples predicted right, in ``[0, 1]``.
        counts: Examples per class of those examples, shape ``(C,)`` (:func:`class_counts`).

    Returns:
        ``accuracy <= chance_bound(counts)``.
    """
    return accuracy <= chance_bound(counts)


def not_learning_message(accuracy: float, counts: torch.Tensor, when: str) -> str:
    """The warning for a run at chance: what was measured and what to try.

    Args:
        accuracy: The training accuracy measured ``when``.
        counts: Training examples per class, shape ``(C,)`` (:func:`class_counts`).
        when: When it was measured, e.g. ``"in epoch 6"``.

    Returns:
        One paragraph naming the accuracy, the bound and the remedies.
    """
    return (
        f"training accuracy {100 * accuracy:.1f} % {when} is no better than always answering "
        f"the most frequent class ({100 * majority_share(counts):.1f} % of the "
        f"{counts.sum().item()} training examples; chance up to "
        f"{100 * chance_bound(counts):.1f} %): this network has learned nothing so far. If it "
        "stays so, try another seed or learning rate (for a relaxed model also another start)."
    )
