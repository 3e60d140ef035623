"""Small tasks whose right structure is known by construction (:data:`KNOWN_TRUTH_TASKS`).

Each puts an 8x8 image (scikit-learn's 1,797 digits, or Fashion-MNIST area-averaged to 8x8
for larger training sets) on a 16x16 canvas so that the label is invariant to a symmetry, or
is exactly what the symmetry moves: circular shifts (FC paths needed or not) and quarter turns
(CONV paths needed beside GCONV or not). ``studies/known_truth.py`` checks what the
marginal likelihood learns on them (docs/learned_structure.md, "Known-truth tasks" and "A
known truth for rotations").
"""

from __future__ import annotations

import torch
from torch.nn import functional as F

from laplace_equivariance.data.datasets import ImageData, fashion_pixels, turn_images

__all__ = [
    "KNOWN_TRUTH_FASHION_TEST",
    "KNOWN_TRUTH_ROTATION_TASKS",
    "KNOWN_TRUTH_SIDE",
    "KNOWN_TRUTH_TASKS",
    "known_truth_task",
]

_SHIFTED_TRUTH = (
    "the {item}, placed at a uniformly random circular shift: the label is invariant to "
    "every circular translation, so a network of CONV paths (circular convolutions and "
    "polyphase subsampling to 1x1, exactly translation invariant) can express the truth "
    "and FC paths are not needed"
)
_QUADRANT_TRUTH = (
    "the quadrant the {item} is in (the {item} varies): a circular shift by half the "
    "image moves it to another quadrant, so every translation-invariant network "
    "is at chance (25 %) and FC paths must stay on in some layer"
)

_TURNED_TRUTH = (
    "the digit (6 and 9 one class, since a half turn makes one the other), placed at a "
    "uniformly random circular shift and turned by a uniformly random multiple of 90 degrees: "
    "the label is invariant to circular shifts and quarter turns, so a network of GCONV paths "
    "(p4 group convolutions, max-pooled over the rotations before the head, exactly invariant "
    "to both) can express the truth and neither CONV nor FC paths are needed"
)
_TURN_TRUTH = (
    "how many quarter turns the digit (placed at a uniformly random circular shift) was "
    "turned by: every network invariant to quarter turns is at chance (25 %), so CONV (or FC) "
    "paths must stay on in some layer; the label is invariant to circular shifts, so FC paths "
    "are not needed"
)

KNOWN_TRUTH_TASKS: dict[str, tuple[int, str]] = {
    "shifted-digits": (10, _SHIFTED_TRUTH.format(item="digit")),
    "quadrant-of-digit": (4, _QUADRANT_TRUTH.format(item="digit")),
    "shifted-fashion": (10, _SHIFTED_TRUTH.format(item="Fashion-MNIST item")),
    "quadrant-of-fashion": (4, _QUADRANT_TRUTH.format(item="Fashion-MNIST item")),
    "turned-digits": (9, _TURNED_TRUTH),
    "turn-of-digit": (4, _TURN_TRUTH),
}
"""Known-truth task -> (classes, what the truth is)."""

KNOWN_TRUTH_ROTATION_TASKS = ("turned-digits", "turn-of-digit")
"""The known-truth tasks about quarter turns (for models with GCONV paths)."""

KNOWN_TRUTH_SIDE = 16
"""Side of the known-truth tasks' images: an 8x8 image on a 16x16 canvas."""

KNOWN_TRUTH_FASHION_TEST = 2000
"""Test images of the Fashion-MNIST known-truth tasks (the first of the t10k split)."""


def _small_digits(
    n_train: int, generator: torch.Generator
) -> tuple[torch.Tensor, torch.Tensor, str]:
    """scikit-learn's 1,797 8x8 digits in [0, 1], shuffled by ``generator``: ``(N, 1, 8, 8)``."""
    from sklearn.datasets import load_digits

    digits = load_digits()
    if not 1 <= n_train <= 1700:
        raise ValueError(f"n_train must be in [1, 1700] (1,797 digits in all), got {n_train}.")
    order = torch.randperm(len(digits.images), generator=generator)
    images = torch.as_tensor(digits.images, dtype=torch.float32)[order, None] / 16.0
    return images, torch.as_tensor(digits.target, dtype=torch.int64)[order], "scikit-learn digits"


def _small_fashion(
    n_train: int, generator: torch.Generator
) -> tuple[torch.Tensor, torch.Tensor, str]:
    """Fashion-MNIST at 8x8 in [0, 1]: ``(n_train + 2000, 1, 8, 8)``.

    ``n_train`` training images (shuffled by ``generator``), then the first
    :data:`KNOWN_TRUTH_FASHION_TEST` test images, area-averaged from 28x28.
    """
    if not 1 <= n_train <= 60000:
        raise ValueError(f"n_train must be in [1, 60000] (Fashion-MNIST), got {n_train}.")
    x_train, y_train, x_test, y_test, source = fashion_pixels(None, False)
    order = torch.randperm(len(x_train), generator=generator)
    keep = order[:n_train]
    n_test = KNOWN_TRUTH_FASHION_TEST
    images = torch.cat([x_train[keep], x_test[:n_test]])
    labels = torch.cat([y_train[keep], y_test[:n_test]])
    return F.adaptive_avg_pool2d(images, 8), labels, source


def known_truth_task(name: str, n_train: int = 1000, seed: int = 0) -> ImageData:
    """A small task whose right structure is known by construction (:data:`KNOWN_TRUTH_TASKS`).

    The ``*-digit(s)`` tasks use scikit-learn's 1,797 real 8x8 digits (installed with
    scikit-learn), shuffled with ``seed``: the first ``n_train`` make the training set, the
    rest the test set. The ``*-fashion`` tasks use Fashion-MNIST (the Debian package
    ``dataset-fashion-mnist``) area-averaged to 8x8: ``n_train`` of its 60,000 training
    images (shuffled with ``seed``) and the first 2,000 test images, for data-size studies.
    Each 8x8 image is put on a 16x16 zero canvas: for ``"shifted-*"`` at the upper left and
    then rolled circularly by a uniform ``(dx, dy)`` in ``[0, 16)^2`` (label: the class); for
    ``"quadrant-of-*"`` into a uniform quadrant (label: the quadrant, 0-3). The rotation
    tasks place the digit as ``"shifted-digits"`` does and then turn the canvas by a uniform
    multiple of 90 degrees (``torch.rot90``, exact): ``"turned-digits"`` is labelled by the
    digit, 6 and 9 one class (label 6), ``"turn-of-digit"`` by the number of quarter turns
    (0-3). The canvases are standardised with the training set's mean and standard deviation.

    Args:
        name: One of :data:`KNOWN_TRUTH_TASKS`.
        n_train: Training examples (at most 1,700 digits or 60,000 Fashion-MNIST images).
        seed: Seed of the split, the shifts, the quadrants and the turns.

    Returns:
        The data, images of shape ``(N, 1, 16, 16)``.

    Raises:
        ValueError: For an unknown task or an ``n_train`` out of range.
        FileNotFoundError: For a Fashion-MNIST task without the Debian package.
    """
    if name not in KNOWN_TRUTH_TASKS:
        raise ValueError(
            f"Unknown known-truth task {name!r}; choose one of {list(KNOWN_TRUTH_TASKS)}."
        )
    load = _small_fashion if name.endswith("fashion") else _small_digits
    generator = torch.Generator().manual_seed(seed)
    images, labels, source = load(n_train, generator)
    n, side = len(images), KNOWN_TRUTH_SIDE
    canvas = torch.zeros(n, 1, side, side)
    if name.startswith("quadrant"):
        quadrant = torch.randint(0, 4, (n,), generator=generator)
        for q in range(4):
            rows, cols = divmod(q, 2)
            chosen = quadrant == q
            canvas[chosen, :, 8 * rows : 8 * rows + 8, 8 * cols : 8 * cols + 8] = images[chosen]
        targets = quadrant
    else:
        canvas[:, :, :8, :8] = images
        shifts = torch.randint(0, side, (n, 2), generator=generator)
        canvas = torch.stack(
            [
                torch.roll(c, (int(dx), int(dy)), dims=(-2, -1))
                for c, (dx, dy) in zip(canvas, shifts, strict=True)
            ]
        )
        targets = labels
    if name in KNOWN_TRUTH_ROTATION_TASKS:
        turns = torch.randint(0, 4, (n,), generator=generator)
        canvas = turn_images(canvas, turns)
        targets = turns if name == "turn-of-digit" else torch.where(labels == 9, 6, labels)
    mean, std = canvas[:n_train].mean(), canvas[:n_train].std()
    canvas = (canvas - mean) / std
    return ImageData(
        canvas[:n_train],
        targets[:n_train],
        canvas[n_train:],
        targets[n_train:],
        KNOWN_TRUTH_TASKS[name][0],
        f"{source}, {name}",
    )
