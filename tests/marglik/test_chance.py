"""The chance bound: a classifier's accuracy against the best guess without its inputs."""

import math

import pytest
import torch

from laplace_equivariance.marglik.chance import (
    MARGIN_STD,
    at_chance,
    chance_bound,
    class_counts,
    majority_share,
    not_learning_message,
)


def test_majority_share_is_the_most_frequent_class_share():
    labels = torch.tensor([0, 1, 1, 2, 1, 0, 3, 1])
    assert majority_share(class_counts(labels)) == 4 / 8


def test_the_bound_on_ten_balanced_classes_is_three_binomial_deviations_above_a_tenth():
    counts = class_counts(torch.arange(10).repeat(400))  # 4,000 examples, 400 per class
    expected = 0.1 + MARGIN_STD * math.sqrt(0.1 * 0.9 / 4000)
    assert chance_bound(counts) == pytest.approx(expected, rel=1e-12)
    assert chance_bound(counts) == pytest.approx(0.1142, abs=1e-4)


def test_always_answering_the_majority_class_is_at_chance_and_a_learned_fit_is_not():
    torch.manual_seed(0)
    labels = torch.randint(0, 10, (2000,))
    always_majority = (labels == labels.bincount().argmax()).float().mean().item()
    random_guesses = (torch.randint(0, 10, (2000,)) == labels).float().mean().item()
    counts = class_counts(labels)
    assert at_chance(always_majority, counts)
    assert at_chance(random_guesses, counts)
    # a network right on one more example in five than the majority guess has learned
    assert not at_chance(always_majority + 0.2, counts)


def test_the_bound_tightens_with_more_examples():
    small, large = (
        class_counts(torch.arange(10).repeat(10)),
        class_counts(torch.arange(10).repeat(1000)),
    )
    assert chance_bound(small) > chance_bound(large) > majority_share(large)


@pytest.mark.parametrize(
    "labels",
    [torch.tensor([], dtype=torch.long), torch.zeros(3, 2, dtype=torch.long), torch.rand(5)],
)
def test_labels_that_are_not_class_indices_are_refused_naming_the_fix(labels):
    with pytest.raises(ValueError, match="pass the training targets y"):
        class_counts(labels)


def test_the_message_names_the_accuracy_the_bound_and_what_to_try():
    counts = class_counts(torch.arange(10).repeat(400))
    message = not_learning_message(0.1, counts, "in epoch 6")
    assert "10.0 % in epoch 6" in message
    assert "11.4 %" in message
    assert "learned nothing so far" in message and "another seed or learning rate" in message
