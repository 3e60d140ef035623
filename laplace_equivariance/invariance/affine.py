r"""Affine transformations sampled from a learnable distribution (invariant-weights Sec. 3.3).

A sample is :math:`T = \exp(\sum_i \epsilon_i \eta_i G_i)` with
:math:`\epsilon \sim U[-1, 1]^k` (invariant-weights Eq. 3): the reparameterisation trick on
the Lie algebra of the affine group, so ``T`` is differentiable in the invariance parameters
``eta``. The generators :math:`G_i` are 3x3 matrices in homogeneous coordinates, in the
order of :data:`GENERATOR_NAMES`; ``eta = 0`` is the identity (no invariance) and
``eta_rotation = pi`` spreads rotations over the whole circle (full invariance).

Coordinates are those of :func:`torch.nn.functional.affine_grid`: the image spans
``[-1, 1]`` along each axis, so a translation parameter of 1 shifts by half the image and
rotations turn about the centre.
"""

from __future__ import annotations

import math

import torch
from torch.nn import functional as F

__all__ = [
    "GENERATOR_NAMES",
    "INVARIANCES",
    "affine_generators",
    "affine_matrices",
    "gaussian_blur",
    "sample_noise",
    "transform_images",
]

GENERATOR_NAMES: tuple[str, ...] = (
    "translation_x",
    "translation_y",
    "rotation",
    "scale_x",
    "scale_y",
    "shear",
)
"""The six affine generators, in the order of the paper (Sec. 3.3)."""

INVARIANCES: dict[str, tuple[str, ...]] = {
    "rotation": ("rotation",),
    "translation": ("translation_x", "translation_y"),
    "scale": ("scale_x", "scale_y"),
    "affine": GENERATOR_NAMES,
}
"""The invariances of the paper's Tables 1-3 and the generators each one learns."""

_GENERATOR_ENTRIES: dict[str, tuple[tuple[int, int, float], ...]] = {
    "translation_x": ((0, 2, 1.0),),
    "translation_y": ((1, 2, 1.0),),
    "rotation": ((0, 1, -1.0), (1, 0, 1.0)),
    "scale_x": ((0, 0, 1.0),),
    "scale_y": ((1, 1, 1.0),),
    "shear": ((0, 1, 1.0), (1, 0, 1.0)),
}


def affine_generators(
    names: tuple[str, ...] = GENERATOR_NAMES,
    dtype: torch.dtype | None = None,
    device: torch.device | str | None = None,
) -> torch.Tensor:
    r"""The Lie-algebra generators :math:`G_i` of the named affine transformations.

    Args:
        names: Generators to return, from :data:`GENERATOR_NAMES`.
        dtype: Their dtype (default: torch's default).
        device: Their device.

    Returns:
        Tensor of shape ``(k, 3, 3)``, ``k = len(names)``.

    Raises:
        ValueError: For an unknown name.
    """
    unknown = [name for name in names if name not in _GENERATOR_ENTRIES]
    if unknown:
        raise ValueError(f"Unknown generators {unknown}; choose from {list(GENERATOR_NAMES)}.")
    generators = torch.zeros(len(names), 3, 3, dtype=dtype, device=device)
    for i, name in enumerate(names):
        for row, col, value in _GENERATOR_ENTRIES[name]:
            generators[i, row, col] = value
    return generators


def sample_noise(
    n_samples: int,
    n_generators: int,
    deterministic: bool = False,
    generator: torch.Generator | None = None,
    dtype: torch.dtype | None = None,
    device: torch.device | str | None = None,
) -> torch.Tensor:
    r"""The noise :math:`\epsilon \in [-1, 1]^k` of Eq. 3, random or on a grid (Sec. 3.4).

    Deterministic sampling places ``m`` midpoints :math:`(2j + 1) / m - 1` on each axis and
    takes their ``m^k`` combinations: for one generator the sampled transformations are evenly
    spaced, so with ``eta_rotation = pi`` and ``m`` divisible by 4 the set of sampled
    rotations is closed under quarter turns.

    Args:
        n_samples: ``S``; with ``deterministic``, it must be ``m ** n_generators``.
        n_generators: ``k``.
        deterministic: Grid instead of uniform noise.
        generator: Random generator of the uniform noise.
        dtype: The noise's dtype.
        device: The noise's device.

    Returns:
        Tensor of shape ``(S, k)``.

    Raises:
        ValueError: If a grid of ``n_samples`` points does not exist in ``k`` dimensions.
    """
    if not deterministic:
        uniform = torch.rand(n_samples, n_generators, generator=generator, dtype=dtype)
        return (2 * uniform - 1).to(device)
    per_axis = round(n_samples ** (1 / n_generators))
    if per_axis**n_generators != n_samples:
        raise ValueError(
            f"Deterministic sampling needs n_samples = m ** {n_generators} for an integer m; "
            f"got {n_samples}. Use {max(per_axis, 1) ** n_generators} samples, or stochastic "
            "sampling."
        )
    axis = (2 * torch.arange(per_axis, dtype=dtype, device=device) + 1) / per_axis - 1
    return torch.cartesian_prod(*[axis] * n_generators).reshape(n_samples, n_generators)


def affine_matrices(
    eta: torch.Tensor, noise: torch.Tensor, generators: torch.Tensor
) -> torch.Tensor:
    r"""Sampled transformations :math:`T_s = \exp(\sum_i \epsilon_{s,i} \eta_i G_i)` (Eq. 3).

    Args:
        eta: Invariance parameters, shape ``(k,)``.
        noise: :math:`\epsilon`, shape ``(S, k)``.
        generators: :math:`G`, shape ``(k, 3, 3)``.

    Returns:
        Tensor of shape ``(S, 3, 3)``, differentiable in ``eta``.
    """
    algebra = torch.einsum("sk,kij->sij", noise * eta, generators)
    return torch.linalg.matrix_exp(algebra)


def gaussian_blur(images: torch.Tensor, sigma: float) -> torch.Tensor:
    """Blur each channel with an isotropic Gaussian of ``sigma`` pixels, zero padding.

    The paper blurs before resampling to band-limit high frequencies (Sec. 4.1).

    Args:
        images: ``(B, C, H, W)``.
        sigma: Standard deviation in pixels; 0 returns ``images``.

    Returns:
        Blurred images, same shape.
    """
    if sigma == 0:
        return images
    radius = max(1, math.ceil(3 * sigma))
    offsets = torch.arange(-radius, radius + 1, dtype=images.dtype, device=images.device)
    kernel = torch.exp(-0.5 * (offsets / sigma) ** 2)
    kernel = kernel / kernel.sum()
    channels = images.shape[1]
    rows = kernel.view(1, 1, -1, 1).expand(channels, 1, -1, 1)
    cols = kernel.view(1, 1, 1, -1).expand(channels, 1, 1, -1)
    blurred = F.conv2d(images, rows, padding=(radius, 0), groups=channels)
    return F.conv2d(blurred, cols, padding=(0, radius), groups=channels)


def transform_images(images: torch.Tensor, matrices: torch.Tensor) -> torch.Tensor:
    r"""Resample every image under every transformation, bilinearly: :math:`(w \circ T)(p) = w(Tp)`.

    Args:
        images: ``(B, C, H, W)``, e.g. the rows of a first-layer weight seen as images.
        matrices: ``(S, 3, 3)`` affine transformations in :func:`affine_grid` coordinates.

    Returns:
        Tensor of shape ``(S, B, C, H, W)``; values from outside the image are zero.
    """
    n_samples = matrices.shape[0]
    batch, channels, height, width = images.shape
    grid = F.affine_grid(matrices[:, :2, :], [n_samples, 1, height, width], align_corners=False)
    stacked = images.reshape(1, batch * channels, height, width).expand(n_samples, -1, -1, -1)
    resampled = F.grid_sample(
        stacked, grid, mode="bilinear", padding_mode="zeros", align_corners=False
    )
    return resampled.view(n_samples, batch, channels, height, width)
