"""Training-time augmentation of the paper's CIFAR-10 recipe: random flips and shifts.

App. F.6 trains CIFAR-10 with random horizontal flips and random shifts of up to 4 pixels
and estimates the marginal likelihood on the unaugmented images. :func:`flip_and_shift`
draws both per image from torch's global generator (so a seed, and a checkpoint's saved
generator state, repeat them); the command line's training loader applies it to every batch
(:func:`laplace_equivariance.data.tensor_batches.batch_loader` with ``augment=True``), the
marginal likelihood's loader never.
"""

from __future__ import annotations

import torch

from laplace_equivariance.data.datasets import shift_images

__all__ = ["MAX_SHIFT", "flip_and_shift"]

MAX_SHIFT = 4
"""Largest shift in pixels along each axis (App. F.6, as ``RandomCrop(32, padding=4)``)."""


def flip_and_shift(images: torch.Tensor, max_shift: int = MAX_SHIFT) -> torch.Tensor:
    """Flip every image left-right with probability 1/2, then shift it, zero fill.

    The images are standardised, so the fill is the data's mean (the reference code pads
    the raw pixels with black before standardising: a fill darker by ``mean / std``).

    Args:
        images: ``(N, C, H, W)``.
        max_shift: Largest shift along each axis; shifts are uniform integers in
            ``[-max_shift, max_shift]``.

    Returns:
        The augmented images, same shape; ``images`` is not modified.
    """
    flip = torch.rand(len(images), device=images.device) < 0.5
    flipped = torch.where(flip[:, None, None, None], images.flip(-1), images)
    shifts = torch.randint(-max_shift, max_shift + 1, (len(images), 2))
    return shift_images(flipped, shifts, max_shift)
