r"""Relaxed layers: the scaled sum of named paths, each with its own prior (paper Eq. 4, App. B).

.. math::
    y = \frac{1}{\sqrt{K}}\Big[\mathrm{APS}\Big(\sum_{k \in \text{grid paths}} f_k(x)\Big)
        + \sum_{k \in \text{direct paths}} f_k(x)\Big]

for ``K`` paths. Eq. 4 writes the sum and the reference code takes the mean (``1/K``); either
differs from this only by a constant factor on every path's weights, so the model class, the
priors' meaning (a path whose weights are zero contributes nothing) and the equivariant limit
of Eq. 8 are the same. ``1/sqrt(K)`` is the factor that keeps the signal's second moment at
initialisation: the ``K`` He-initialised paths are independent with zero mean, so their sum
has ``K`` times one path's second moment. The mean would divide it by ``K`` at every layer
(``2^-8`` after App. F.1's eight F-FC+CONV layers: logits 20-40 times smaller than MAP CONV's,
and on 1,000 digit-task images the unit prior then shrank one seed's weights to zero before
the likelihood's gradient could grow them, docs/learned_structure.md); the sum would multiply
it by ``K``.

Paths that keep the input grid (CONV, GCONV, and FC/F-FC at layers without subsampling) are
summed first; at a subsampling layer their sum goes through one
:class:`~laplace_equivariance.layers.PolyphaseSubsample2d` (one phase choice for the whole
sum keeps the sum equivariant), while FC-type paths map straight onto the subsampled grid
("direct" paths). The paths are registered as children under their own names, so every
parameter's name says its layer and path, e.g. ``layer3.fc.input_map.weight`` and
``layer3.conv.weight``; a prior per path attaches by that name.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping

import torch
from torch import nn

from laplace_equivariance.layers.equivariance import EquivarianceCheck
from laplace_equivariance.layers.factored import FactoredLinear2d
from laplace_equivariance.layers.pooling import PolyphaseSubsample2d

__all__ = ["RelaxedLayer"]


class RelaxedLayer(EquivarianceCheck, nn.Module):
    """A layer that is the sum of named paths over ``sqrt(K)``, optionally then subsampled.

    With a single path this is just that layer (the MAP baselines FC and CONV are
    one-path relaxed layers, so every model has the same naming).

    Args:
        paths: Path name -> module, in the order their parameters are registered. Every path
            maps the layer's input to outputs of one common shape.
        subsample: Whether this is a subsampling layer (polyphase subsampling by 2).
        direct: Names of paths that already map onto the subsampled grid (only with
            ``subsample=True``).
        normalise: Divide the sum by ``sqrt(K)`` (the paper's models). False keeps the plain
            sum, so that a path added at zero to a trained layer changes nothing
            (:func:`laplace_equivariance.relax`).

    Shapes:
        - Input: whatever the paths take, ``(N, C, X, Y)`` or ``(N, C, 4, X, Y)``.
        - Output: ``(N, C', X', Y')`` (or ``(N, C', 4, X', Y')``) with ``X' = X / 2`` at a
          subsampling layer.

    Raises:
        ValueError: If ``paths`` is empty, a path name is not a valid attribute name, or
            ``direct`` names unknown paths or is given without ``subsample``.
    """

    def __init__(
        self,
        paths: Mapping[str, nn.Module],
        subsample: bool = False,
        direct: Collection[str] = (),
        normalise: bool = True,
    ) -> None:
        super().__init__()
        if not paths:
            raise ValueError("A RelaxedLayer needs at least one path.")
        unknown = set(direct) - set(paths)
        if unknown:
            raise ValueError(
                f"direct names unknown paths {sorted(unknown)}; paths are {list(paths)}."
            )
        if direct and not subsample:
            raise ValueError("direct paths map onto a subsampled grid: set subsample=True.")
        for name, module in paths.items():
            if not name.isidentifier():
                raise ValueError(f"Path name {name!r} must be a valid Python identifier.")
            self.add_module(name, module)
        self.path_names: tuple[str, ...] = tuple(paths)
        self.direct: tuple[str, ...] = tuple(n for n in self.path_names if n in set(direct))
        self.pool = PolyphaseSubsample2d() if subsample else None
        self.normalise = normalise

    @property
    def p4_input(self) -> bool:  # type: ignore[override]
        """Whether the input is a p4 feature map (as some path takes it)."""
        return any(getattr(self.path(n), "p4_input", False) for n in self.path_names)

    @property
    def p4_output(self) -> bool:  # type: ignore[override]
        """Whether the output is a p4 feature map (as some path makes it)."""
        return any(getattr(self.path(n), "p4_output", False) for n in self.path_names)

    def path(self, name: str) -> nn.Module:
        """The path module called ``name``.

        Args:
            name: A path name, e.g. ``"fc"``.

        Returns:
            The module.

        Raises:
            KeyError: If there is no such path.
        """
        if name not in self.path_names:
            raise KeyError(f"No path {name!r}; this layer has {list(self.path_names)}.")
        return getattr(self, name)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Sum the paths over ``sqrt(K)``, subsampling the grid-preserving ones if due.

        Args:
            x: The layer input.

        Returns:
            The sum of the paths' outputs divided by ``sqrt(K)``.

        Raises:
            ValueError: If the paths' outputs differ in shape (naming each path's shape).
        """
        grid_names = [n for n in self.path_names if n not in self.direct]
        grid = [getattr(self, n)(x) for n in grid_names]
        direct = [getattr(self, n)(x) for n in self.direct]
        outputs = direct
        if grid:
            self._check_shapes(grid_names, grid, "")
            grid_sum = sum(grid[1:], grid[0])
            outputs = [self.pool(grid_sum) if self.pool is not None else grid_sum, *direct]
        self._check_shapes(
            [*(["+".join(grid_names) + " (subsampled)"] if grid else []), *self.direct],
            outputs,
            " after subsampling",
        )
        return self.combine(sum(outputs[1:], outputs[0]))

    def path_outputs(self, x: torch.Tensor) -> dict[str, torch.Tensor]:
        """Each path's term of the layer's sum.

        ``forward(x)`` is ``combine(sum(path_outputs(x).values()))``. A direct path's term is
        its output; at a subsampling layer a grid path's term is its output at the polyphase
        components that the sum of the grid paths selects (the selection is linear once
        chosen, so the terms add up to the subsampled sum).

        Args:
            x: The layer input.

        Returns:
            Path name -> its term, each of the layer's output shape (before ``1 / sqrt(K)``).
        """
        outputs = {name: getattr(self, name)(x) for name in self.path_names}
        grid_names = [n for n in self.path_names if n not in self.direct]
        if self.pool is not None and grid_names:
            choice = self.pool.choose(sum(outputs[n] for n in grid_names))
            for name in grid_names:
                outputs[name] = self.pool.take(outputs[name], choice)
        return outputs

    @torch.no_grad()
    def silence_(self, names: Collection[str], rescale: bool = True) -> None:
        r"""Zero the named paths' outputs, scaling the others to keep the layer's scale.

        A path's output is linear in its last map: an FC, CONV or GCONV path's own weight and
        bias, an F-FC or S-FC path's output map ``theta1`` and its biases (Eq. 5). Zeroing a
        silenced path's last map leaves the rest of it as drawn: F-FC's ``theta2`` stays
        random, so the gradient of ``theta1`` (a product's gradient in one factor is linear in
        the other) is not zero and training can switch the path on where the data need it;
        zeroing both factors would make zero a stationary point. The last maps of the other
        ``J`` of the ``K`` paths are multiplied by :math:`\sqrt{K / J}`, so that the sum over
        :math:`\sqrt{K}` of ``J`` independent He-initialised paths keeps one path's second
        moment (module docstring), as the ``K`` paths did; with ``rescale=False`` (a layer
        whose kept paths are trained, :func:`laplace_equivariance.relax`) they stay as they are.

        Args:
            names: Paths to silence; at least one path must remain.
            rescale: Scale the kept paths as above.

        Raises:
            KeyError: If a name is not a path of this layer.
            ValueError: If ``names`` covers every path.
        """
        for name in names:
            self.path(name)
        kept = [n for n in self.path_names if n not in set(names)]
        if not kept:
            raise ValueError(
                f"Silencing every path {list(self.path_names)} leaves a layer whose output is "
                "zero and stays zero; keep at least one path."
            )
        scale = math.sqrt(len(self.path_names) / len(kept)) if rescale else 1.0
        for name in self.path_names:
            for weight in _last_map(self.path(name)):
                weight.mul_(scale if name in kept else 0.0)

    def combine(self, total: torch.Tensor) -> torch.Tensor:
        """The paths' summed outputs over ``sqrt(K)`` (as they are: one path, no normalise).

        Args:
            total: The sum of the paths' outputs (the grid paths subsampled).

        Returns:
            The layer's output, same shape.
        """
        k = len(self.path_names)
        return total / math.sqrt(k) if k > 1 and self.normalise else total

    @staticmethod
    def _check_shapes(names: list[str], outputs: list[torch.Tensor], where: str) -> None:
        """Raise ValueError naming every path's output shape unless they all agree."""
        shapes = [tuple(o.shape) for o in outputs]
        if len(set(shapes)) > 1:
            listing = ", ".join(f"{n}: {s}" for n, s in zip(names, shapes, strict=True))
            raise ValueError(
                f"The paths of a RelaxedLayer must give outputs of one shape{where}; got "
                f"{listing}. Give every path the same output channels and grid (direct paths "
                "map onto the subsampled grid)."
            )

    def extra_repr(self) -> str:
        """Sizes shown in the module's repr."""
        direct = f", direct={list(self.direct)}" if self.direct else ""
        plain = "" if self.normalise else ", normalise=False"
        return f"paths={list(self.path_names)}, subsample={self.pool is not None}{direct}{plain}"


def _last_map(path: nn.Module) -> list[nn.Parameter]:
    """The parameters a path's output is linear in (its last map's weight and biases).

    Args:
        path: A path module: an F-FC or S-FC (the output map's weight and biases) or a
            single-map layer (its own weight and bias, not its anchor basis's lengthscale).

    Raises:
        TypeError: If the path has no parameters of its own.
    """
    last = path.output_map if isinstance(path, FactoredLinear2d) else path
    parameters = [p for _, p in last.named_parameters(recurse=False)]
    if not parameters:
        raise TypeError(
            f"{type(path).__name__} has no weight of its own to silence or scale; silence_ "
            "knows single-map paths and F-FC/S-FC."
        )
    return parameters
