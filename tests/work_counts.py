"""Count the work a computation does, so that tests catch a change that multiplies it.

Timing is noisy on a shared two-core machine; counts are not. A change that decomposes every
factor at each predictive call, runs a class's backward pass twice or adds a host read per
step changes these counts exactly, whatever the machine's load:

* :class:`Decompositions`: the matrices given to ``torch.linalg.eigh`` (eigenvectors) and
  ``torch.linalg.eigvalsh`` (eigenvalues alone), each ``(n, b, b)`` batch counting ``n``.
  The module attributes are wrapped, so every caller that looks them up at call time is
  counted (this package's :mod:`~laplace_equivariance.curvature.eigen`, laplace-torch's
  ``symeig``), worker threads included.
* :class:`BackwardPasses`: calls of ``Tensor.backward`` (ASDL's fisher makers run one per
  class column or Monte-Carlo sample).
* :class:`ElementsWritten`: the elements of every tensor an ``aten::`` operator writes
  (outputs, in-place results), backward passes included: a change that adds a pass over a
  network's weights (a length-``P`` vector built per step) adds ``P`` to it.
* :func:`top_level_operators`: ``aten::`` operators not called from another ``aten::``
  operator, as ``benchmarks/gpu_speed.py`` counts them (on a GPU, each launches kernels).
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable

import torch
from torch.profiler import ProfilerActivity, profile
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves


class Decompositions:
    """A context that counts the matrices eigendecomposed inside it.

    Attributes:
        vectors: Matrices decomposed with eigenvectors (``eigh``).
        values: Matrices decomposed for eigenvalues alone (``eigvalsh``).
    """

    def __init__(self) -> None:
        self.vectors = 0
        self.values = 0
        self._lock = threading.Lock()
        self._originals: dict[str, Callable] = {}

    def _counting(self, name: str, field: str) -> Callable:
        original = self._originals[name]

        def counted(matrices: torch.Tensor, *args, **kwargs):
            with self._lock:
                setattr(self, field, getattr(self, field) + math.prod(matrices.shape[:-2]))
            return original(matrices, *args, **kwargs)

        return counted

    def __enter__(self) -> Decompositions:
        for name, field in (("eigh", "vectors"), ("eigvalsh", "values")):
            self._originals[name] = getattr(torch.linalg, name)
            setattr(torch.linalg, name, self._counting(name, field))
        return self

    def __exit__(self, *exc) -> None:
        for name, original in self._originals.items():
            setattr(torch.linalg, name, original)


class BackwardPasses:
    """A context that counts ``Tensor.backward`` calls inside it (attribute ``passes``)."""

    def __init__(self) -> None:
        self.passes = 0

    def __enter__(self) -> BackwardPasses:
        self._original = torch.Tensor.backward

        def counted(tensor, *args, **kwargs):
            self.passes += 1
            return self._original(tensor, *args, **kwargs)

        torch.Tensor.backward = counted
        return self

    def __exit__(self, *exc) -> None:
        torch.Tensor.backward = self._original


class ElementsWritten(TorchDispatchMode):
    """A context that counts the tensor elements written inside it (attribute ``elements``).

    Every ``aten::`` call's tensor results count with their ``numel()``; views count 0 (they
    write nothing).
    """

    def __init__(self) -> None:
        super().__init__()
        self.elements = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        if not func.is_view:
            for value in tree_leaves(out):
                if isinstance(value, torch.Tensor):
                    self.elements += value.numel()
        return out


def top_level_operators(run: Callable[[], object]) -> int:
    """``aten::`` operators that ``run()`` calls directly (not from inside another one)."""
    with profile(activities=[ProfilerActivity.CPU]) as trace:
        run()
    count = 0
    for event in trace.events():
        if not event.name.startswith("aten::"):
            continue
        parent = event.cpu_parent
        while parent is not None and not parent.name.startswith("aten::"):
            parent = parent.cpu_parent
        count += parent is None
    return count


def factor_matrices(kfacs) -> int:
    """Square matrices in Kronecker factors: 1 per dense factor, ``n`` per ``(n, b, b)``.

    Diagonal (1-D) factors need no decomposition and count 0.
    """
    return sum(
        math.prod(factor.shape[:-2]) for group in kfacs for factor in group if factor.ndim > 1
    )
