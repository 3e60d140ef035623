r"""Curvature passes of ``Laplace.fit`` over several of the loader's batches at once.

A Kron fit sums per-example statistics over the data set: laplace-torch's ``fit`` adds the
factors of every batch, and :meth:`EquivariantKFAC.kron` divides each batch's ``A`` factors
by the data set's ``N``, not by the batch's size. So the factors, the loss and the marginal
likelihood do not depend on how the examples are grouped into batches (up to float
rounding; ``tests/curvature/test_fit_passes.py``). Their time does: one curvature pass (a
forward pass, the exact GGN's ``K - 1`` backward passes or the Monte-Carlo Fisher's one, the
rules' factor products) launches the same kernels for 128 examples as for 1,024, and on a
GPU a pass at the batch sizes of training is bound by those launches, not by arithmetic
(``benchmarks/gpu_speed.py`` profiles it: a training step of 32 examples kept an H200's
kernels busy for at most a tenth of its wall-clock time). :class:`ConcatenatedBatches` lets
``Laplace.fit`` take its passes over consecutive batches of the loader concatenated, so a fit
launches a fraction of the kernels.

``EquivariantKFAC(fit_batch_size=...)`` sets how many examples a pass takes at most; by
default the loader's own batches on the CPU (where arithmetic dominates: on two cores one
pass over 512 examples of F-FC+CONV was no faster than four of 128, the exact GGN's 9 %
slower), and on a GPU as many whole batches as keep the pass's rows (examples times
the exact GGN's batched class copies, ``K - 1``) at most :data:`GPU_PASS_ROWS`.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any

from laplace_equivariance.curvature.batches import concatenated

__all__ = [
    "GPU_PASS_ROWS",
    "ConcatenatedBatches",
    "batches_per_pass",
    "check_fit_batch_size",
]

GPU_PASS_ROWS = 4096
"""Rows of one curvature pass on a GPU by default: examples times class copies.

With passes of this size the fits of CONV and F-FC+CONV at Table 1's widths peaked at 1.6 to
3.1 GB of GPU memory on an H200 (``benchmarks/results/gpu_speed/cuda.json``, ``peak_mib``);
``fit_batch_size`` lowers it."""


def check_fit_batch_size(fit_batch_size: int | None) -> None:
    """Raise unless ``fit_batch_size`` is None or a positive integer.

    Raises:
        ValueError: Naming the value and what to pass instead.
    """
    if fit_batch_size is None:
        return
    if (
        isinstance(fit_batch_size, bool)
        or not isinstance(fit_batch_size, int)
        or fit_batch_size < 1
    ):
        raise ValueError(
            f"fit_batch_size must be a positive number of examples or None (the loader's "
            f"batches on the CPU, about {GPU_PASS_ROWS:,} rows on a GPU), got {fit_batch_size!r}."
        )


def batches_per_pass(batch_examples: int, pass_examples: int) -> int:
    """Whole loader batches of ``batch_examples`` in a pass of at most ``pass_examples``.

    At least one: a batch larger than the pass is taken whole, never split.
    """
    return max(1, pass_examples // max(batch_examples, 1))


class ConcatenatedBatches:
    """A loader whose batches are ``k`` consecutive batches of another, concatenated.

    Iterating it iterates ``loader`` once; every ``k`` batches (the last group may hold fewer)
    become one, each tensor concatenated along its first dimension: ``(X, y)`` tuples or lists
    of tensors, or dict-like batches (laplace-torch's ``dict_key_x`` / ``dict_key_y``), whose
    tensor values are concatenated (:func:`~laplace_equivariance.curvature.batches.
    concatenated`). ``dataset`` is ``loader.dataset`` (laplace-torch reads its length as
    the fit's ``N``).

    Args:
        loader: A loader whose batches are tuples or lists of tensors, or mappings.
        k: Batches per concatenated batch, at least 1.

    Raises:
        ValueError: If ``k`` is below 1.
        TypeError: While iterating, for batches that cannot be joined (neither tensors nor
            mappings of the same keys): fit such loaders with ``fit_batch_size`` equal to
            their batch size.
    """

    def __init__(self, loader: Any, k: int) -> None:
        if k < 1:
            raise ValueError(f"k must be at least 1, got {k}.")
        self.loader = loader
        self.k = k
        self.dataset = loader.dataset

    def __len__(self) -> int:
        return math.ceil(len(self.loader) / self.k)

    def __iter__(self) -> Iterator[Any]:
        group: list = []
        for batch in self.loader:
            group.append(batch)
            if len(group) == self.k:
                yield concatenated(group)
                group = []
        if group:
            yield concatenated(group)
