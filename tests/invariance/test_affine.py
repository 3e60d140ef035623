"""Sampled affine transformations are what their generators say (invariant-weights Eq. 3)."""

from __future__ import annotations

import math

import pytest
import torch

from laplace_equivariance.data.datasets import rotate
from laplace_equivariance.invariance.affine import (
    GENERATOR_NAMES,
    affine_generators,
    affine_matrices,
    gaussian_blur,
    sample_noise,
    transform_images,
)

F64 = torch.float64


def _single(name: str, amount: float) -> torch.Tensor:
    """``exp(amount * G_name)`` through :func:`affine_matrices` (``eta = amount``, eps = 1)."""
    generators = affine_generators((name,), dtype=F64)
    return affine_matrices(
        torch.tensor([amount], dtype=F64), torch.ones(1, 1, dtype=F64), generators
    )[0]


def test_eta_zero_is_the_identity_for_every_noise():
    generators = affine_generators(dtype=F64)
    noise = sample_noise(16, 6, dtype=F64)
    matrices = affine_matrices(torch.zeros(6, dtype=F64), noise, generators)
    torch.testing.assert_close(matrices, torch.eye(3, dtype=F64).expand(16, 3, 3))


def test_rotation_by_eta_times_eps_is_the_rotation_matrix_of_that_angle():
    angle = 0.7 * -0.4
    generators = affine_generators(("rotation",), dtype=F64)
    matrix = affine_matrices(
        torch.tensor([0.7], dtype=F64), torch.tensor([[-0.4]], dtype=F64), generators
    )[0]
    expected = torch.tensor(
        [
            [math.cos(angle), -math.sin(angle), 0.0],
            [math.sin(angle), math.cos(angle), 0.0],
            [0.0, 0.0, 1.0],
        ],
        dtype=F64,
    )
    torch.testing.assert_close(matrix, expected, rtol=0, atol=1e-14)


def test_translation_and_scale_generators_give_shifts_and_axis_scalings():
    shift = _single("translation_x", 0.3) @ _single("translation_y", -0.2)
    expected_shift = torch.tensor([[1.0, 0, 0.3], [0, 1.0, -0.2], [0, 0, 1.0]], dtype=F64)
    torch.testing.assert_close(shift, expected_shift, rtol=0, atol=1e-14)
    scale = _single("scale_x", 0.5) @ _single("scale_y", -0.1)
    expected_scale = torch.diag(torch.tensor([math.exp(0.5), math.exp(-0.1), 1.0], dtype=F64))
    torch.testing.assert_close(scale, expected_scale, rtol=0, atol=1e-14)


@pytest.mark.parametrize("name", GENERATOR_NAMES)
def test_each_generator_is_a_one_parameter_group_under_composition(name):
    torch.testing.assert_close(
        _single(name, 0.3) @ _single(name, 0.5), _single(name, 0.8), rtol=0, atol=1e-13
    )
    torch.testing.assert_close(
        _single(name, 0.3) @ _single(name, -0.3), torch.eye(3, dtype=F64), rtol=0, atol=1e-13
    )


def test_unknown_generator_names_raise():
    with pytest.raises(ValueError, match="Unknown generators"):
        affine_generators(("twist",))


def test_stochastic_noise_is_uniform_on_the_cube():
    noise = sample_noise(20000, 2, dtype=F64)
    assert noise.shape == (20000, 2)
    assert noise.min() >= -1 and noise.max() <= 1
    # mean 0 and variance 1/3; 5 standard errors: 5 * sqrt(1/3 / 20000) = 0.02
    torch.testing.assert_close(noise.mean(0), torch.zeros(2, dtype=F64), rtol=0, atol=0.02)
    torch.testing.assert_close(noise.var(0), torch.full((2,), 1 / 3, dtype=F64), rtol=0, atol=0.02)


def test_deterministic_noise_is_the_midpoint_grid():
    torch.testing.assert_close(
        sample_noise(4, 1, deterministic=True, dtype=F64)[:, 0],
        torch.tensor([-0.75, -0.25, 0.25, 0.75], dtype=F64),
    )
    grid = sample_noise(9, 2, deterministic=True, dtype=F64)
    assert grid.shape == (9, 2) and len(set(map(tuple, grid.tolist()))) == 9
    with pytest.raises(ValueError, match="m \\*\\* 2"):
        sample_noise(8, 2, deterministic=True)


def test_identity_resampling_returns_the_images():
    images = torch.randn(3, 2, 7, 7, dtype=F64)
    out = transform_images(images, torch.eye(3, dtype=F64)[None])
    torch.testing.assert_close(out[0], images, rtol=0, atol=1e-12)


def test_rotation_resampling_matches_the_data_rotation_and_quarter_turns():
    images = torch.randn(2, 1, 9, 9, dtype=F64)
    angle = 0.4
    out = transform_images(images, _single("rotation", angle)[None])[0]
    torch.testing.assert_close(out, rotate(images, torch.full((2,), angle, dtype=F64)))
    quarter = transform_images(images, _single("rotation", math.pi / 2)[None])[0]
    torch.testing.assert_close(quarter, torch.rot90(images, 1, dims=(2, 3)), rtol=0, atol=1e-12)


def test_blur_is_a_separable_normalised_gaussian():
    images = torch.zeros(1, 1, 9, 9, dtype=F64)
    images[0, 0, 4, 4] = 1.0
    blurred = gaussian_blur(images, 1.0)
    offsets = torch.arange(-3, 4, dtype=F64)
    kernel = torch.exp(-0.5 * offsets**2)
    expected = torch.outer(kernel, kernel) / kernel.sum() ** 2
    torch.testing.assert_close(blurred[0, 0, 1:8, 1:8], expected)
    assert gaussian_blur(images, 0.0) is images
