"""Random flips and shifts of the training batches (App. F.6's CIFAR-10 recipe)."""

import torch

from laplace_equivariance.data.augment import MAX_SHIFT, flip_and_shift
from laplace_equivariance.data.datasets import shift_images


def test_every_image_is_a_shift_of_itself_or_of_its_mirror_image():
    images = torch.randn(64, 3, 8, 8)
    out = flip_and_shift(images)
    shifts = [(dx, dy) for dx in range(-4, 5) for dy in range(-4, 5)]
    flips = 0
    for image, augmented in zip(images, out, strict=True):
        candidates = {
            (mirrored, shift): shift_images(source[None], torch.tensor([shift]), MAX_SHIFT)[0]
            for mirrored, source in ((False, image), (True, image.flip(-1)))
            for shift in shifts
        }
        matches = [key for key, c in candidates.items() if torch.equal(c, augmented)]
        assert matches, "not a flip-and-shift of its input"
        flips += matches[0][0]
    assert 16 < flips < 48  # about half of 64 mirrored
    assert not torch.equal(out, images)
